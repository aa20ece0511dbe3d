/* SPDX-License-Identifier: Apache-2.0 */
/* agentconn: isolad's end of an agent stream — reader thread, per-channel queues, credit. */
#include "agentconn.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../proto/proto.h"

#define AGENT_SEND_TIMEOUT_S 30	  /* a frame write to the agent that makes no progress this long */
#define MAX_QUEUED_MSGS	     4096 /* non-credit frames queued per channel before we call it abuse */
/* Consumed bytes are granted back in one CREDIT once they reach this much (or the agent is
 * out of credit). Granting each frame's size back as it is consumed made the agent's credit
 * arrive in frame-sized crumbs that it spent at once: after a few thousand small tar entries
 * the window was cut into thousands of tiny frames (silly-window syndrome), a CREDIT write
 * per crumb. The agent always keeps at least PROTO_WINDOW - CREDIT_BATCH, more than any one
 * frame it must send whole (an ENTRY is at most PROTO_MAX_JSON), so holding back less than
 * this never stalls it. */
#define CREDIT_BATCH (PROTO_WINDOW / 4)

struct msg_node {
	struct msg_node *next; /* queue link */
	struct agent_msg m;    /* owned */
};

struct agent_chan {
	struct agent_conn *c;	      /* owning connection */
	struct agent_chan *next;      /* c->chans link (under c->lock) */
	uint32_t id;		      /* channel id */
	struct msg_node *head, *tail; /* received, not yet consumed */
	size_t nqueued;		      /* entries in the queue */
	size_t nctl;		      /* of which non-credit frames (bounded by MAX_QUEUED_MSGS) */
	uint64_t recv_credit;	      /* bytes the agent may still send us */
	uint64_t owed;		      /* bytes consumed and not yet granted back */
	uint64_t send_credit;	      /* bytes we may still send */
	bool ended;		      /* ERROR/EXIT/CLOSE received */
};

struct agent_conn {
	int fd;			  /* the stream, owned */
	pthread_t reader;	  /* demultiplexer */
	bool reader_started;	  /* reader must be joined */
	pthread_mutex_t lock;	  /* chans, queues, credit, alive */
	pthread_cond_t cond;	  /* broadcast on any queue/credit/liveness change */
	pthread_mutex_t wlock;	  /* serializes writes to fd */
	bool alive;		  /* false once the stream failed */
	json_t *hello;		  /* agent's HELLO, owned */
	uint32_t next_id;	  /* next channel id */
	struct agent_chan *chans; /* open channels */
	struct proto_decoder dec; /* inbound frames */
	uint8_t *pending;	  /* bytes read past HELLO during the handshake */
	size_t pending_len;	  /* their count */
};

void agent_msg_fini(struct agent_msg *m)
{
	if (!m)
		return;
	free(m->data);
	json_decref(m->json);
	memset(m, 0, sizeof(*m));
}

static void conn_kill_locked(struct agent_conn *c);

static int write_frame(struct agent_conn *c, uint32_t id, uint8_t type, const void *p, size_t len)
{
	struct proto_header h = {.len = (uint32_t)len, .channel = id, .type = type};
	uint8_t hdr[PROTO_HEADER_SIZE];
	int r;

	proto_header_encode(&h, hdr);
	pthread_mutex_lock(&c->wlock);
	r = util_write_all(c->fd, hdr, sizeof(hdr));
	if (!r && len)
		r = util_write_all(c->fd, p, len);
	pthread_mutex_unlock(&c->wlock);
	if (r < 0) {
		/* A frame cut short (an agent that stopped reading past AGENT_SEND_TIMEOUT_S, or a
		 * broken stream) leaves the stream unusable: end it, everyone waiting wakes up. */
		pthread_mutex_lock(&c->lock);
		conn_kill_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	return r;
}

static void conn_kill_locked(struct agent_conn *c)
{
	if (c->alive) {
		c->alive = false;
		shutdown(c->fd, SHUT_RDWR);
	}
	pthread_cond_broadcast(&c->cond);
}

static struct agent_chan *find_locked(struct agent_conn *c, uint32_t id)
{
	struct agent_chan *ch;

	for (ch = c->chans; ch; ch = ch->next)
		if (ch->id == id)
			return ch;
	return NULL;
}

/* Validates and queues one frame from the agent. -EPROTO kills the connection. */
static int dispatch(struct agent_conn *c, const struct proto_header *h, const uint8_t *p)
{
	struct agent_chan *ch;
	struct msg_node *n;
	json_t *j = NULL;
	int r = 0;

	/* UNTRUSTED: the agent may be compromised (microvm guest, or user code that took over
	 * PID 1). Types, credit and JSON are all checked before anything is queued. */
	switch (h->type) {
	case PROTO_RESULT:
	case PROTO_ERROR:
	case PROTO_STDOUT:
	case PROTO_STDERR:
	case PROTO_EOF:
	case PROTO_CREDIT:
	case PROTO_EXIT:
	case PROTO_CLOSE:
	case PROTO_ENTRY:
	case PROTO_DROPPED:
		break;
	default:
		return -EPROTO; /* HELLO again, or a type only isolad sends */
	}
	if (proto_type_is_json(h->type)) {
		j = json_loadb((const char *)p, h->len, JSON_REJECT_DUPLICATES, NULL);
		if (!j || !json_is_object(j)) {
			json_decref(j);
			return -EPROTO;
		}
	}
	pthread_mutex_lock(&c->lock);
	ch = find_locked(c, h->channel);
	if (!ch)
		goto out; /* a channel we already closed: drop */
	if (h->type == PROTO_CREDIT) {
		uint32_t g = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			     (uint32_t)p[3] << 24;

		if (ch->send_credit + g > (1ull << 30)) {
			r = -EPROTO;
			goto out;
		}
		ch->send_credit += g;
		pthread_cond_broadcast(&c->cond);
		goto out;
	}
	if (proto_type_uses_credit(h->type)) {
		if (h->len > ch->recv_credit) {
			r = -EPROTO; /* beyond the window we granted */
			goto out;
		}
		ch->recv_credit -= h->len;
	} else if (ch->nctl >= MAX_QUEUED_MSGS) {
		/* Only frames outside flow control count here: credit frames are bounded by the
		 * window (in bytes), and a slow consumer legitimately has thousands of small ones
		 * queued (tar entries) when the EOF arrives. */
		r = -EPROTO;
		goto out;
	} else {
		ch->nctl++;
	}
	n = calloc(1, sizeof(*n));
	if (!n || !(n->m.data = malloc(h->len + 1))) {
		free(n);
		r = -ENOMEM;
		goto out;
	}
	memcpy(n->m.data, p, h->len);
	n->m.data[h->len] = '\0';
	n->m.len = h->len;
	n->m.type = h->type;
	n->m.json = j;
	j = NULL;
	if (h->type == PROTO_ERROR || h->type == PROTO_EXIT || h->type == PROTO_CLOSE)
		ch->ended = true;
	if (ch->tail)
		ch->tail->next = n;
	else
		ch->head = n;
	ch->tail = n;
	ch->nqueued++;
	pthread_cond_broadcast(&c->cond);
out:
	pthread_mutex_unlock(&c->lock);
	json_decref(j);
	return r;
}

/* Feeds bytes to the decoder, dispatching whole frames. -EPROTO on violation. */
static int feed(struct agent_conn *c, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		struct proto_header h;
		const uint8_t *payload;
		size_t used;
		int r = proto_decoder_feed(&c->dec, buf, len, &used, &h, &payload);

		if (r < 0)
			return r;
		buf += used;
		len -= used;
		if (r == 0)
			break;
		r = dispatch(c, &h, payload);
		if (r < 0)
			return r;
	}
	return 0;
}

static void *reader_main(void *arg)
{
	struct agent_conn *c = arg;
	uint8_t *buf = malloc(64 * 1024);
	int r = buf ? 0 : -ENOMEM;

	util_thread_name("agent reader");
	if (!r && c->pending_len)
		r = feed(c, c->pending, c->pending_len);
	while (!r) {
		ssize_t n = read(c->fd, buf, 64 * 1024);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		r = feed(c, buf, (size_t)n);
	}
	free(buf);
	pthread_mutex_lock(&c->lock);
	conn_kill_locked(c);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Reads the agent's HELLO within timeout_ms; keeps any bytes past it for the reader. */
static int handshake(struct agent_conn *c, int timeout_ms, struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	uint8_t buf[4096];
	json_t *hello;
	int r;

	hello = json_pack("{s:i,s:s}", "version", PROTO_VERSION, "agent", "isolad");
	{
		char *s = hello ? json_dumps(hello, JSON_COMPACT) : NULL;

		json_decref(hello);
		if (!s)
			return isola_err_set(err, ENOMEM, "internal", "agent hello: out of memory");
		r = write_frame(c, 0, PROTO_HELLO, s, strlen(s));
		free(s);
		if (r < 0)
			return isola_err_sys(err, -r, "unavailable", "agent hello: send");
	}
	for (;;) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		uint64_t now = util_now_ms();
		struct proto_header h;
		const uint8_t *payload;
		size_t used;
		ssize_t n;

		if (now >= deadline)
			return isola_err_set(err, ETIMEDOUT, "unavailable",
					     "agent hello: timed out");
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		n = read(c->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return isola_err_set(err, ECONNRESET, "unavailable",
					     "agent hello: connection closed");
		r = proto_decoder_feed(&c->dec, buf, (size_t)n, &used, &h, &payload);
		if (r < 0 || (r == 1 && h.type != PROTO_HELLO))
			return isola_err_set(err, EPROTO, "unavailable", "agent hello: bad frame");
		if (r == 0)
			continue;
		/* UNTRUSTED: the agent's HELLO; we only require a version-1 object */
		c->hello = json_loadb((const char *)payload, h.len, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(c->hello) ||
		    json_integer_value(json_object_get(c->hello, "version")) != PROTO_VERSION)
			return isola_err_set(err, EPROTO, "unavailable",
					     "agent hello: unsupported version");
		if ((size_t)n > used) {
			c->pending = malloc((size_t)n - used);
			if (!c->pending)
				return isola_err_set(err, ENOMEM, "internal", "out of memory");
			memcpy(c->pending, buf + used, (size_t)n - used);
			c->pending_len = (size_t)n - used;
		}
		return 0;
	}
}

int agent_conn_new(int fd, int timeout_ms, struct agent_conn **out, struct isola_err **err)
{
	struct agent_conn *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;
	int r;

	if (!c) {
		close(fd);
		return isola_err_set(err, ENOMEM, "internal", "agent connection: out of memory");
	}
	c->fd = fd;
	/* The agent is untrusted (a microvm guest owns it): a write it never drains fails
	 * after this long instead of pinning an API thread. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){.tv_sec = AGENT_SEND_TIMEOUT_S},
		   sizeof(struct timeval));
	c->next_id = 1;
	c->alive = true;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->wlock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	r = proto_decoder_init(&c->dec);
	if (r < 0) {
		isola_err_set(err, ENOMEM, "internal", "agent connection: out of memory");
		goto fail;
	}
	r = handshake(c, timeout_ms, err);
	if (r < 0)
		goto fail;
	r = -pthread_create(&c->reader, NULL, reader_main, c);
	if (r < 0) {
		isola_err_sys(err, -r, "internal", "agent connection: reader thread");
		goto fail;
	}
	c->reader_started = true;
	*out = c;
	return 0;
fail:
	agent_conn_free(c);
	return r;
}

void agent_conn_free(struct agent_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	conn_kill_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (c->reader_started)
		pthread_join(c->reader, NULL);
	while (c->chans) { /* the contract says closed already; do not leak anyway */
		struct agent_chan *ch = c->chans;

		c->chans = ch->next;
		while (ch->head) {
			struct msg_node *n = ch->head;

			ch->head = n->next;
			agent_msg_fini(&n->m);
			free(n);
		}
		free(ch);
	}
	close(c->fd);
	proto_decoder_fini(&c->dec);
	json_decref(c->hello);
	free(c->pending);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->wlock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

bool agent_conn_is_alive(struct agent_conn *c)
{
	bool a;

	pthread_mutex_lock(&c->lock);
	a = c->alive;
	pthread_mutex_unlock(&c->lock);
	return a;
}

size_t agent_conn_channels(struct agent_conn *c)
{
	size_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (struct agent_chan *ch = c->chans; ch; ch = ch->next)
		n += !ch->ended;
	pthread_mutex_unlock(&c->lock);
	return n;
}

const json_t *agent_conn_hello(struct agent_conn *c)
{
	return c->hello;
}

bool agent_conn_has(struct agent_conn *c, const char *feature)
{
	/* UNTRUSTED: the agent's HELLO; a feature only saves isolad a call of its own. */
	const json_t *list = json_object_get(c->hello, "features");

	for (size_t i = 0; i < json_array_size(list); i++) {
		const json_t *v = json_array_get(list, i);

		if (json_is_string(v) && !strcmp(json_string_value(v), feature))
			return true;
	}
	return false;
}

int agent_chan_open(struct agent_conn *c, const json_t *req, struct agent_chan **out,
		    struct isola_err **err)
{
	struct agent_chan *ch;
	char *s;
	size_t len;
	int r;

	if (!json_is_string(json_object_get(req, "op")))
		return isola_err_set(err, EINVAL, "invalid", "agent request without `op`");
	s = json_dumps(req, JSON_COMPACT);
	if (!s)
		return isola_err_set(err, ENOMEM, "internal", "agent request: out of memory");
	len = strlen(s);
	if (len > PROTO_MAX_JSON) {
		free(s);
		return isola_err_set(err, E2BIG, "too_large", "agent request: %zu bytes", len);
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		free(s);
		return isola_err_set(err, ENOMEM, "internal", "agent request: out of memory");
	}
	ch->c = c;
	ch->recv_credit = PROTO_WINDOW;
	ch->send_credit = PROTO_WINDOW;
	pthread_mutex_lock(&c->lock);
	if (!c->alive) {
		pthread_mutex_unlock(&c->lock);
		free(s);
		free(ch);
		return isola_err_set(err, ECONNRESET, "unavailable", "agent connection is down");
	}
	ch->id = c->next_id++;
	if (c->next_id == 0)
		c->next_id = 1;
	ch->next = c->chans;
	c->chans = ch;
	pthread_mutex_unlock(&c->lock);
	r = write_frame(c, ch->id, PROTO_OPEN, s, len);
	free(s);
	if (r < 0) {
		agent_chan_close(ch);
		return isola_err_sys(err, -r, "unavailable", "agent request: send");
	}
	*out = ch;
	return 0;
}

int agent_chan_recv(struct agent_chan *ch, struct agent_msg *msg, int timeout_ms,
		    struct isola_err **err)
{
	struct agent_conn *c = ch->c;
	struct timespec ts;
	struct msg_node *n;
	size_t credit = 0;

	util_deadline_ts(CLOCK_MONOTONIC, timeout_ms >= 0 ? (uint64_t)timeout_ms : 0, &ts);
	pthread_mutex_lock(&c->lock);
	while (!ch->head) {
		int r;

		if (!c->alive) {
			pthread_mutex_unlock(&c->lock);
			return isola_err_set(err, ECONNRESET, "unavailable",
					     "agent connection lost");
		}
		if (timeout_ms < 0) {
			pthread_cond_wait(&c->cond, &c->lock);
			continue;
		}
		r = pthread_cond_timedwait(&c->cond, &c->lock, &ts);
		if (r == ETIMEDOUT && !ch->head) {
			pthread_mutex_unlock(&c->lock);
			return isola_err_set(err, ETIMEDOUT, "timeout", "agent: no reply in %d ms",
					     timeout_ms);
		}
	}
	n = ch->head;
	ch->head = n->next;
	if (!ch->head)
		ch->tail = NULL;
	ch->nqueued--;
	if (proto_type_uses_credit(n->m.type)) {
		ch->owed += n->m.len;
		/* Batched (see CREDIT_BATCH); also when the agent has nothing left to send with,
		 * which cannot happen while owed < CREDIT_BATCH but costs nothing to check. */
		if (ch->owed >= CREDIT_BATCH || ch->recv_credit == 0) {
			credit = (size_t)ch->owed;
			ch->recv_credit += ch->owed;
			ch->owed = 0;
		}
	} else {
		ch->nctl--;
	}
	pthread_mutex_unlock(&c->lock);
	*msg = n->m;
	free(n);
	if (credit && !ch->ended) {
		uint8_t b[4] = {credit & 0xff, (credit >> 8) & 0xff, (credit >> 16) & 0xff,
				(credit >> 24) & 0xff};

		write_frame(c, ch->id, PROTO_CREDIT, b, 4); /* failure shows up as a dead conn */
	}
	return 0;
}

int agent_chan_send_data(struct agent_chan *ch, const void *buf, size_t len, struct isola_err **err)
{
	struct agent_conn *c = ch->c;
	const uint8_t *p = buf;

	while (len > 0) {
		size_t n;
		int r;

		pthread_mutex_lock(&c->lock);
		while (c->alive && !ch->ended && ch->send_credit == 0)
			pthread_cond_wait(&c->cond, &c->lock);
		if (!c->alive) {
			pthread_mutex_unlock(&c->lock);
			return isola_err_set(err, ECONNRESET, "unavailable",
					     "agent connection lost");
		}
		if (ch->ended && ch->send_credit == 0) {
			/* The other end is gone (process exited, tunnel closed): no credit comes. */
			pthread_mutex_unlock(&c->lock);
			return isola_err_set(err, EPIPE, "conflict",
					     "agent channel ended before it took the input");
		}
		n = len;
		if (n > ch->send_credit)
			n = (size_t)ch->send_credit;
		if (n > PROTO_MAX_PAYLOAD)
			n = PROTO_MAX_PAYLOAD;
		ch->send_credit -= n;
		pthread_mutex_unlock(&c->lock);
		r = write_frame(c, ch->id, PROTO_STDIN, p, n);
		if (r < 0)
			return isola_err_sys(err, -r, "unavailable", "agent: send");
		p += n;
		len -= n;
	}
	return 0;
}

int agent_chan_send_json(struct agent_chan *ch, uint8_t type, const json_t *j,
			 struct isola_err **err)
{
	struct agent_conn *c = ch->c;
	char *s;
	size_t len;
	int r;

	if (type != PROTO_CONTROL && type != PROTO_ENTRY)
		return isola_err_set(err, EINVAL, "invalid", "agent: bad frame type %u", type);
	s = json_dumps(j, JSON_COMPACT);
	if (!s)
		return isola_err_set(err, ENOMEM, "internal", "agent: out of memory");
	len = strlen(s);
	if (len > PROTO_MAX_JSON) {
		free(s);
		return isola_err_set(err, E2BIG, "too_large", "agent frame: %zu bytes", len);
	}
	if (type == PROTO_ENTRY) { /* ENTRY headers count against credit */
		pthread_mutex_lock(&c->lock);
		while (c->alive && ch->send_credit < len)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->alive)
			ch->send_credit -= len;
		pthread_mutex_unlock(&c->lock);
	}
	r = write_frame(c, ch->id, type, s, len);
	free(s);
	if (r < 0)
		return isola_err_sys(err, -r, "unavailable", "agent: send");
	return 0;
}

int agent_chan_send_eof(struct agent_chan *ch, struct isola_err **err)
{
	int r = write_frame(ch->c, ch->id, PROTO_EOF, NULL, 0);

	if (r < 0)
		return isola_err_sys(err, -r, "unavailable", "agent: send");
	return 0;
}

void agent_chan_close(struct agent_chan *ch)
{
	struct agent_conn *c;
	struct agent_chan **pp;
	bool send_close;

	if (!ch)
		return;
	c = ch->c;
	pthread_mutex_lock(&c->lock);
	for (pp = &c->chans; *pp; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
	send_close = c->alive && !ch->ended;
	pthread_mutex_unlock(&c->lock);
	if (send_close)
		write_frame(c, ch->id, PROTO_CLOSE, NULL, 0);
	while (ch->head) {
		struct msg_node *n = ch->head;

		ch->head = n->next;
		agent_msg_fini(&n->m);
		free(n);
	}
	free(ch);
}

int agent_error_to_err(const json_t *j, struct isola_err **err)
{
	static const struct {
		const char *agent;
		const char *code;
		int errnum;
	} map[] = {
		{"not_found", "not_found", ENOENT}, {"exists", "conflict", EEXIST},
		{"not_dir", "invalid", ENOTDIR},    {"is_dir", "invalid", EISDIR},
		{"forbidden", "forbidden", EACCES}, {"invalid", "invalid", EINVAL},
		{"too_large", "too_large", EFBIG},  {"no_space", "no_space", ENOSPC},
		{"busy", "conflict", EBUSY},	    {"internal", "internal", EIO},
	};
	/* UNTRUSTED: an ERROR frame from the agent. Only known codes pass through; errno is
	 * range-checked; the message is length-capped when formatted. */
	const char *code = json_string_value(json_object_get(j, "code"));
	const char *msg = json_string_value(json_object_get(j, "message"));
	json_int_t e = json_integer_value(json_object_get(j, "errno"));
	size_t i;

	for (i = 0; code && i < ARRAY_SIZE(map); i++)
		if (!strcmp(code, map[i].agent))
			break;
	if (!code || i == ARRAY_SIZE(map))
		i = ARRAY_SIZE(map) - 1;
	if (e <= 0 || e > 4095)
		e = map[i].errnum;
	return isola_err_set(err, (int)e, map[i].code, "agent: %.512s", msg ? msg : "error");
}

int agent_call(struct agent_conn *c, const json_t *req, int timeout_ms, json_t **result,
	       struct isola_err **err)
{
	struct agent_chan *ch = NULL;
	struct agent_msg m = {0};
	uint64_t deadline = util_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	int r;

	r = agent_chan_open(c, req, &ch, err);
	if (r < 0)
		return r;
	for (;;) {
		int left = -1;

		if (timeout_ms >= 0) {
			uint64_t now = util_now_ms();

			left = now >= deadline ? 0 : (int)(deadline - now);
		}
		r = agent_chan_recv(ch, &m, left, err);
		if (r < 0)
			break;
		if (m.type == PROTO_RESULT) {
			*result = steal_ptr(&m.json);
			break;
		}
		if (m.type == PROTO_ERROR) {
			r = agent_error_to_err(m.json, err);
			break;
		}
		if (m.type == PROTO_EXIT || m.type == PROTO_CLOSE) {
			r = isola_err_set(err, EPROTO, "internal",
					  "agent: unexpected end of reply");
			break;
		}
		agent_msg_fini(&m); /* data before a RESULT is not expected here: skip */
	}
	agent_msg_fini(&m);
	agent_chan_close(ch);
	return r;
}

void agent_write_entry(struct agent_conn *c, const json_t *write_req, int timeout_ms,
		       json_t **result)
{
	json_t *user = json_object_get(write_req, "user"), *req, *entry = NULL;

	if (json_object_get(*result, "type"))
		return;
	req = json_pack("{s:s, s:O?}", "op", "stat", "path", json_object_get(write_req, "path"));
	if (req && user)
		json_object_set(req, "user", user);
	if (req && agent_call(c, req, timeout_ms, &entry, NULL) == 0) {
		json_decref(*result);
		*result = entry;
	}
	json_decref(req);
}
