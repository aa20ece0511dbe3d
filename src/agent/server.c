/* SPDX-License-Identifier: Apache-2.0 */
/* server: the agent's event loop, its one connection, the channel table and flow control. */
#include "agent-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/proto.h"

#define READ_CHUNK (64u * 1024u)
#define MAX_CREDIT (1ull << 30) /* more outstanding credit than this is a protocol violation */

/* The one connection to isolad. A new accept() replaces it. */
struct conn {
	struct watch w;		  /* the stream socket */
	struct proto_decoder dec; /* inbound frames */
	bool hello;		  /* isolad's HELLO received */
	uint8_t *out;		  /* outbound bytes, owned */
	size_t out_head;	  /* first unsent byte */
	size_t out_len;		  /* end of queued bytes */
	size_t out_cap;		  /* allocation */
	bool dead;		  /* drop at the end of this loop iteration */
};

static int epfd = -1;
static struct conn *cur;    /* current connection or NULL */
static struct chan *live;   /* channels of cur */
static struct chan *dead;   /* ended channels, freed at the end of the iteration */
static size_t nlive;	    /* entries in live */
static uint64_t start_ms;   /* for uptime */
static bool was_congested;  /* a producer found the outbound queue full */
static int pending_fd = -1; /* accepted connection waiting to replace cur */
static const struct server_transport *transport; /* serial mode hooks, or NULL */

static void conn_drop(struct conn *c);

void watch_init(struct watch *w, int fd, void (*cb)(struct watch *, uint32_t))
{
	w->fd = fd;
	w->events = 0;
	w->cb = cb;
}

/* Watches taken out of epoll so far; the event loop compares it around each callback. */
static unsigned watch_removals;

void watch_set(struct watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	int op;

	if (w->fd < 0 || events == w->events)
		return;
	if (events == 0) {
		op = EPOLL_CTL_DEL;
		watch_removals++;
	} else
		op = w->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(epfd, op, w->fd, &ev) < 0 && op != EPOLL_CTL_DEL) {
		fprintf(stderr, "isola-agent: epoll_ctl fd %d: %s\n", w->fd, strerror(errno));
		abort();
	}
	w->events = events;
}

uint64_t agent_uptime_ms(void)
{
	return util_now_ms() - start_ms;
}

/* ---- outbound queue ---- */

static size_t out_pending(void)
{
	return cur ? cur->out_len - cur->out_head : 0;
}

static int out_reserve(struct conn *c, size_t n)
{
	if (c->out_head > 0 && c->out_len + n > c->out_cap) {
		memmove(c->out, c->out + c->out_head, c->out_len - c->out_head);
		c->out_len -= c->out_head;
		c->out_head = 0;
	}
	if (c->out_len + n > c->out_cap) {
		size_t ncap = c->out_cap ? c->out_cap : 64 * 1024;
		uint8_t *p;

		while (ncap < c->out_len + n)
			ncap *= 2;
		p = realloc(c->out, ncap);
		if (!p)
			return -ENOMEM;
		c->out = p;
		c->out_cap = ncap;
	}
	return 0;
}

static int send_frame(uint32_t id, uint8_t type, const void *payload, size_t len)
{
	struct proto_header h = {.len = (uint32_t)len, .channel = id, .type = type};

	if (!cur || cur->dead)
		return -EPIPE;
	if (out_reserve(cur, PROTO_HEADER_SIZE + len) < 0) {
		cur->dead = true; /* cannot keep the stream consistent: start over */
		return -ENOMEM;
	}
	proto_header_encode(&h, cur->out + cur->out_len);
	if (len)
		memcpy(cur->out + cur->out_len + PROTO_HEADER_SIZE, payload, len);
	cur->out_len += PROTO_HEADER_SIZE + len;
	return 0;
}

static void out_flush(struct conn *c)
{
	while (c->out_head < c->out_len) {
		/* write(), not send(): the stream may be a virtio-serial port (guest mode). The fd
		 * is non-blocking and SIGPIPE is ignored. */
		ssize_t n = write(c->w.fd, c->out + c->out_head, c->out_len - c->out_head);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			c->dead = true;
			return;
		}
		c->out_head += (size_t)n;
	}
	if (c->out_head == c->out_len) {
		c->out_head = c->out_len = 0;
		if (c->out_cap > 1024 * 1024) { /* give back what a burst took */
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
	}
}

/* ---- channels ---- */

static void list_del(struct chan **head, struct chan *ch)
{
	if (ch->prev)
		ch->prev->next = ch->next;
	else
		*head = ch->next;
	if (ch->next)
		ch->next->prev = ch->prev;
	ch->next = ch->prev = NULL;
}

static void list_add(struct chan **head, struct chan *ch)
{
	ch->prev = NULL;
	ch->next = *head;
	if (*head)
		(*head)->prev = ch;
	*head = ch;
}

struct chan *chan_find(uint32_t id)
{
	struct chan *ch;

	for (ch = live; ch; ch = ch->next)
		if (ch->id == id)
			return ch;
	return NULL;
}

void chan_foreach(void (*fn)(struct chan *ch, void *arg), void *arg)
{
	struct chan *ch, *next;

	for (ch = live; ch; ch = next) {
		next = ch->next;
		fn(ch, arg);
		/* fn may end ch (moved to dead) but never another channel */
	}
}

size_t chan_room(struct chan *ch)
{
	uint64_t n = ch->out_credit;

	if (ch->ended || !cur || cur->dead)
		return 0;
	if (out_pending() >= AGENT_OUT_HIGH) {
		was_congested = true; /* re-pumped once the queue drains */
		return 0;
	}
	return n > PROTO_MAX_PAYLOAD ? PROTO_MAX_PAYLOAD : (size_t)n;
}

int chan_send_json(struct chan *ch, uint8_t type, json_t *j)
{
	char *s;
	size_t len;
	int r;

	if (!j)
		return -ENOMEM;
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return -ENOMEM;
	len = strlen(s);
	if (len > PROTO_MAX_JSON) {
		free(s);
		s = NULL;
		/* our own bug, but the stream must stay valid */
		j = json_pack("{s:s,s:i,s:s}", "code", "too_large", "errno", EMSGSIZE, "message",
			      "reply too large");
		return chan_send_json(ch, PROTO_ERROR, j);
	}
	r = send_frame(ch->id, type, s, len);
	free(s);
	return r;
}

void chan_send_data(struct chan *ch, uint8_t type, const void *buf, size_t len)
{
	if (len > ch->out_credit)
		abort(); /* caller bug: would break flow control */
	ch->out_credit -= len;
	send_frame(ch->id, type, buf, len);
}

void chan_grant(struct chan *ch, size_t n)
{
	uint8_t b[4] = {n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, (n >> 24) & 0xff};

	if (ch->ended || n == 0)
		return;
	ch->in_credit += n;
	send_frame(ch->id, PROTO_CREDIT, b, 4);
}

static void chan_end(struct chan *ch)
{
	if (ch->ended)
		return;
	ch->ended = true;
	if (ch->ops->release)
		ch->ops->release(ch);
	proc_detach_chan(ch);
	list_del(&live, ch);
	nlive--;
	list_add(&dead, ch);
}

void chan_finish(struct chan *ch, uint8_t type, json_t *j)
{
	if (ch->ended) {
		json_decref(j);
		return;
	}
	if (type == PROTO_EOF || type == PROTO_CLOSE)
		send_frame(ch->id, type, NULL, 0);
	else if (type)
		chan_send_json(ch, type, j);
	else
		json_decref(j);
	chan_end(ch);
}

void chan_fail(struct chan *ch, int errnum, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (errnum <= 0)
		errnum = EIO;
	chan_finish(ch, PROTO_ERROR,
		    json_pack("{s:s,s:i,s:s}", "code", agent_errno_code(errnum), "errno", errnum,
			      "message", msg));
}

static void free_dead(void)
{
	while (dead) {
		struct chan *ch = dead;

		list_del(&dead, ch);
		free(ch);
	}
}

/* ---- requests ---- */

static const struct {
	const char *name;
	op_open_fn fn;
} op_table[] = {
	{"exec", op_exec},	 {"attach", op_attach},
	{"wait", op_wait},	 {"ps", op_ps},
	{"signal", op_signal},	 {"stdin", op_stdin},
	{"resize", op_resize},	 {"read", op_read},
	{"write", op_write},	 {"stat", op_stat},
	{"list", op_list},	 {"mkdir", op_mkdir},
	{"rename", op_rename},	 {"remove", op_remove},
	{"tar_get", op_tar_get}, {"tar_put", op_tar_put},
	{"info", NULL},		 {"watch", op_watch},
	{"tunnel", op_tunnel},	 {"identity", op_identity},
	{"fs_mark", op_fs_mark}, {"fs_diff", op_fs_diff},
};

static const struct chan_ops noop_ops = {0};

static int op_info(struct chan *ch, json_t *req)
{
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	chan_finish(ch, PROTO_RESULT,
		    json_pack("{s:s,s:I,s:I,s:s}", "hostname", host, "uptime_ms",
			      (json_int_t)agent_uptime_ms(), "processes", (json_int_t)proc_count(),
			      "version", AGENT_VERSION));
	return 0;
}

/* Parses a JSON payload; NULL means a protocol violation. */
static json_t *parse_json(const uint8_t *p, size_t len)
{
	json_error_t jerr;
	json_t *j;

	/* UNTRUSTED: payload bytes from the peer. jansson rejects invalid UTF-8 and, without
	 * JSON_ALLOW_NUL, any \u0000 in strings; we require an object at the top. */
	j = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, &jerr);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

static int handle_open(uint32_t id, const uint8_t *p, size_t len)
{
	json_t *req = parse_json(p, len), *op;
	struct chan *ch;
	op_open_fn fn = NULL;
	const char *name;
	size_t i;
	int r;

	if (!req)
		return -EPROTO;
	if (chan_find(id)) {
		json_decref(req);
		return -EPROTO; /* channel ids are not reused while open */
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		json_decref(req);
		return -ENOMEM;
	}
	ch->id = id;
	ch->ops = &noop_ops;
	ch->out_credit = PROTO_WINDOW;
	ch->in_credit = PROTO_WINDOW;
	list_add(&live, ch);
	nlive++;
	op = json_object_get(req, "op");
	name = json_string_value(op);
	if (nlive > AGENT_MAX_CHANNELS) {
		chan_fail(ch, EBUSY, "too many open channels");
		json_decref(req);
		return 0;
	}
	for (i = 0; name && i < ARRAY_SIZE(op_table); i++)
		if (!strcmp(op_table[i].name, name))
			break;
	if (!name || i == ARRAY_SIZE(op_table)) {
		chan_fail(ch, EINVAL, "unknown op");
		json_decref(req);
		return 0;
	}
	fn = op_table[i].fn ? op_table[i].fn : op_info;
	r = fn(ch, req);
	json_decref(req);
	return r;
}

static int handle_frame(const struct proto_header *h, const uint8_t *p)
{
	struct chan *ch;
	json_t *j;
	uint32_t n;
	int r = 0;

	if (!cur->hello) {
		int ver;

		if (h->type != PROTO_HELLO)
			return -EPROTO;
		j = parse_json(p, h->len);
		if (!j)
			return -EPROTO;
		ver = (int)json_integer_value(json_object_get(j, "version"));
		json_decref(j);
		if (ver != PROTO_VERSION)
			return -EPROTO;
		cur->hello = true;
		return 0;
	}
	if (h->type == PROTO_OPEN)
		return handle_open(h->channel, p, h->len);
	switch (h->type) {
	case PROTO_STDIN:
	case PROTO_EOF:
	case PROTO_CREDIT:
	case PROTO_CONTROL:
	case PROTO_CLOSE:
	case PROTO_ENTRY:
		break;
	default:
		return -EPROTO; /* HELLO twice, or a type only the agent sends */
	}
	ch = chan_find(h->channel);
	if (!ch)
		return 0; /* raced with the channel's end: ignore */
	if (proto_type_uses_credit(h->type)) {
		/* UNTRUSTED: len checked against the credit we granted. */
		if (h->len > ch->in_credit)
			return -EPROTO;
		ch->in_credit -= h->len;
	}
	switch (h->type) {
	case PROTO_STDIN:
		if (!ch->ops->data)
			return -EPROTO;
		return ch->ops->data(ch, p, h->len);
	case PROTO_EOF:
		if (ch->ops->eof)
			r = ch->ops->eof(ch);
		return r;
	case PROTO_CREDIT:
		n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		    (uint32_t)p[3] << 24;
		if (ch->out_credit + n > MAX_CREDIT)
			return -EPROTO;
		ch->out_credit += n;
		if (ch->ops->pump)
			ch->ops->pump(ch);
		return 0;
	case PROTO_CLOSE:
		chan_end(ch);
		return 0;
	case PROTO_CONTROL:
	case PROTO_ENTRY:
		j = parse_json(p, h->len);
		if (!j)
			return -EPROTO;
		if (h->type == PROTO_CONTROL)
			r = ch->ops->control ? ch->ops->control(ch, j) : 0;
		else
			r = ch->ops->entry ? ch->ops->entry(ch, j) : -EPROTO;
		json_decref(j);
		if (h->type == PROTO_ENTRY && r == 0 && !ch->ended)
			chan_grant(ch, h->len); /* the header itself is consumed */
		return r;
	}
	return 0;
}

static void conn_cb(struct watch *w, uint32_t events)
{
	struct conn *c = (struct conn *)w;
	uint8_t buf[READ_CHUNK];
	ssize_t n;

	if (events & EPOLLOUT)
		out_flush(c);
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || c->dead)
		return;
	n = read(w->fd, buf, sizeof(buf)); /* non-blocking socket or serial port */
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		c->dead = true;
		return;
	}
	for (size_t off = 0; off < (size_t)n && !c->dead;) {
		struct proto_header h;
		const uint8_t *payload;
		size_t used;
		int r = proto_decoder_feed(&c->dec, buf + off, (size_t)n - off, &used, &h,
					   &payload);

		off += used;
		if (r < 0 || (r == 1 && handle_frame(&h, payload) < 0)) {
			fprintf(stderr, "isola-agent: protocol violation, dropping connection\n");
			c->dead = true;
		}
		if (r == 0)
			break;
	}
}

static void conn_drop(struct conn *c)
{
	while (live)
		chan_end(live);
	free_dead();
	watch_set(&c->w, 0);
	close(c->w.fd);
	proto_decoder_fini(&c->dec);
	free(c->out);
	free(c);
	if (cur == c)
		cur = NULL;
	if (transport && transport->dropped)
		transport->dropped();
}

void server_set_transport(const struct server_transport *t)
{
	transport = t;
}

void server_install_conn(int fd)
{
	if (pending_fd >= 0)
		close(pending_fd);
	pending_fd = fd;
}

/* Takes over a freshly accepted stream. Only called between loop iterations, so no
 * epoll event still points at the connection it replaces. */
static void conn_install(int fd)
{
	struct conn *c;

	if (cur)
		conn_drop(cur); /* isolad reconnected: the old stream is gone */
	c = calloc(1, sizeof(*c));
	if (!c || proto_decoder_init(&c->dec) < 0) {
		free(c);
		close(fd);
		return;
	}
	watch_init(&c->w, fd, conn_cb);
	cur = c;
	was_congested = false;
	chan_send_json(&(struct chan){.id = 0}, PROTO_HELLO,
		       json_pack("{s:i,s:s,s:[s]}", "version", PROTO_VERSION, "agent",
				 AGENT_VERSION, "features", PROTO_FEATURE_WRITE_PARENTS));
}

static void accept_cb(struct watch *w, uint32_t events)
{
	int fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (pending_fd >= 0)
		close(pending_fd);
	pending_fd = fd;
}

/* ---- signals ---- */

struct sigwatch {
	struct watch w;
	bool standalone;
};

static void signal_cb(struct watch *w, uint32_t events)
{
	struct sigwatch *sw = (struct sigwatch *)w;
	struct signalfd_siginfo si;

	while (read(w->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (sw->standalone && (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)) {
			proc_kill_all();
			exit(0);
		}
	}
	proc_reap();
}

static void pump_one(struct chan *ch, void *arg)
{
	if (ch->ops->pump)
		ch->ops->pump(ch);
}

int server_run(int listen_fd, bool standalone)
{
	struct watch lw;
	struct sigwatch sw = {.standalone = standalone};
	sigset_t set;
	int sfd;

	start_ms = util_now_ms();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	if (standalone) {
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
	}
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return -errno;
	watch_init(&sw.w, sfd, signal_cb);
	watch_set(&sw.w, EPOLLIN);
	watch_init(&lw, listen_fd, accept_cb);
	if (listen_fd >= 0) {
		util_set_nonblock(listen_fd, true);
		util_set_cloexec(listen_fd, true);
		watch_set(&lw, EPOLLIN);
	}
	if (transport && transport->start && transport->start() < 0)
		return -EIO;
	for (;;) {
		struct epoll_event ev[32];
		int i, n, timeout = proc_tick();

		n = epoll_wait(epfd, ev, ARRAY_SIZE(ev), timeout);
		if (n < 0 && errno != EINTR)
			return -errno;
		for (i = 0; i < n; i++) {
			struct watch *w = ev[i].data.ptr;
			unsigned removals = watch_removals;

			w->cb(w, ev[i].events);
			/* A callback that took a watch out of epoll may have freed it (a channel
			 * closed, a watcher released), and a later event of this batch may still
			 * name it. Every watch is level-triggered: the rest come back next turn. */
			if (watch_removals != removals)
				break;
		}
		if (pending_fd >= 0) {
			conn_install(pending_fd);
			pending_fd = -1;
		}
		if (cur && !cur->dead) {
			out_flush(cur);
			/* queue drained below the mark: let blocked producers continue */
			if (was_congested && out_pending() < AGENT_OUT_HIGH / 2) {
				was_congested = false;
				chan_foreach(pump_one, NULL);
				out_flush(cur);
			}
		}
		if (cur && cur->dead) {
			conn_drop(cur);
		} else if (cur) {
			uint32_t want = EPOLLIN;

			if (out_pending())
				want |= EPOLLOUT;
			if (out_pending() >= AGENT_OUT_MAX)
				want &= ~(uint32_t)
						EPOLLIN; /* isolad is not reading: stop taking requests */
			watch_set(&cur->w, want);
		}
		free_dead();
	}
}
