/* SPDX-License-Identifier: Apache-2.0 */
/* listener: the exposure listener — request heads, access tokens, byte relay through the agent. */
#include "expose-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../codeint/codeint.h"
#include "../core/core.h"

/*
 * Threads: one accept thread; per client connection one thread that reads and checks the
 * request head, opens the agent tunnel and then relays sandbox -> client; once tunnelled, a
 * second thread relays client -> sandbox. That direction is read as HTTP/1.1 request framing
 * (xhttp_stream): EVERY request head on a keep-alive connection is parsed, must name the
 * connection's sandbox and port and carry its token, and is rewritten (prefix and token
 * removed); bodies (Content-Length, chunked) stream through untouched, unbuffered. A request
 * that does not pass ends the connection without reaching the sandbox. An Upgrade is
 * honoured only as a connection's first request (browsers open a fresh connection for every
 * WebSocket); its bytes become opaque both ways only once the server inside answered 101
 * (the first bytes of the response, the only ones parsed): a server that declines the
 * upgrade and keeps the connection gets no further client byte, since the relay would not
 * know where its next request begins — the connection ends instead.
 *
 * The listener never reaches the sandbox over a network: the agent inside connects to the
 * port on the sandbox's own loopback (src/agent/tunnel.c), so a sandbox with no network at
 * all is exposable and the exposure adds no route into it.
 */

#define RELAY_CHUNK  (64u * 1024u)
#define SEND_TIMEOUT 60 /* s: a client that stops reading for this long is dropped */
#define THREAD_STACK (256u * 1024u)
#define STOP_WAIT_MS 10000

struct expose *expose_active;

const char *expose_listen_addr(void)
{
	return expose_active ? expose_active->addr : NULL;
}

static const char *reason(unsigned status)
{
	switch (status) {
	case 302:
		return "Found";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 404:
		return "Not Found";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 424:
		return "Failed Dependency";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	default:
		return "Error";
	}
}

/* The HTTP status of a code interpreter start failure. */
static unsigned start_status(const struct isola_err *e)
{
	if (!strcmp(e->code, "failed_dependency"))
		return 424;
	if (!strcmp(e->code, "not_supported"))
		return 501;
	if (!strcmp(e->code, "conflict"))
		return 409;
	return 503;
}

/* Writes a complete response ({code, message} JSON, as the API's errors) and nothing else;
 * the connection closes after it. extra: more header lines ("...\r\n") or NULL. */
static void respond(int fd, unsigned status, const char *code, const char *extra, const char *fmt,
		    ...) __attribute__((format(printf, 5, 6)));
static void respond(int fd, unsigned status, const char *code, const char *extra, const char *fmt,
		    ...)
{
	char msg[512], head[1024 + 512];
	json_t *j;
	char *body;
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j = json_pack("{s:s,s:s}", "code", code, "message", msg);
	body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
		     status, reason(status), body ? strlen(body) : 0, extra ? extra : "");
	if (n > 0 && (size_t)n < sizeof(head) && util_write_all(fd, head, (size_t)n) == 0 && body)
		util_write_all(fd, body, strlen(body));
	free(body);
}

/* Reads until a whole request head is in buf (cap bytes). Returns the bytes read (*h
 * filled) or responds and returns -1. Slow clients get the head deadline in total. */
static long read_head(struct xconn *xc, char *buf, size_t cap, struct xhttp_head *h)
{
	uint64_t deadline = util_now_ms() + xc->x->head_timeout_ms;
	size_t len = 0;

	for (;;) {
		struct pollfd pfd = {.fd = xc->fd, .events = POLLIN};
		uint64_t now = util_now_ms();
		ssize_t n;
		int r;

		if (now >= deadline) {
			respond(xc->fd, 408, "timeout", NULL, "request head not received in %u ms",
				xc->x->head_timeout_ms);
			return -1;
		}
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		n = read(xc->fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		len += (size_t)n;
		/* UNTRUSTED: the client's bytes; the parser bounds head size and header count */
		r = xhttp_parse(buf, len, h);
		if (r == 1)
			return (long)len;
		if (r == -EMSGSIZE || (r == 0 && len == cap)) {
			respond(xc->fd, 431, "too_large", NULL,
				"request head larger than %u bytes or %u header lines",
				XHTTP_MAX_HEAD, XHTTP_MAX_HEADERS);
			return -1;
		}
		if (r < 0) {
			respond(xc->fd, 400, "invalid", NULL, "malformed request head");
			return -1;
		}
	}
}

/* Constant-time check of the offered token against the sandbox's. */
static bool token_ok(const char *buf, const struct xhttp_route *rt,
		     const char want[EXPOSE_TOKEN_LEN + 1])
{
	if (rt->from == XHTTP_TOK_NONE || rt->token.len != EXPOSE_TOKEN_LEN)
		return false;
	return sodium_memcmp(buf + rt->token.off, want, EXPOSE_TOKEN_LEN) == 0;
}

/* A ?isola_token= login from a browser: set a cookie scoped to this host (and, in the path
 * form, this sandbox's prefix) and send it back to the same URL without the token. */
static void login_redirect(struct xconn *xc, const char *buf, const struct xhttp_head *h,
			   const struct xhttp_route *rt, const char *token)
{
	char loc[XHTTP_MAX_HEAD], extra[XHTTP_MAX_HEAD + 512], scope[96];
	long n = xhttp_target_without_token(buf, h, loc, sizeof(loc) - 1);

	if (n < 0) {
		respond(xc->fd, 400, "invalid", NULL, "target too long");
		return;
	}
	loc[n] = '\0';
	if (rt->by_host)
		snprintf(scope, sizeof(scope), "/");
	else
		snprintf(scope, sizeof(scope), "/_isola/%s/%d/", rt->id, rt->port);
	snprintf(extra, sizeof(extra),
		 "Location: %s\r\nSet-Cookie: %s=%s; Path=%s; HttpOnly; SameSite=Lax\r\n", loc,
		 XHTTP_TOKEN_NAME, token, scope);
	respond(xc->fd, 302, "redirect", extra, "signed in; continue at %s", loc);
}

enum upgrade { UPGRADE_NONE, UPGRADE_PENDING, UPGRADE_ACCEPTED, UPGRADE_DECLINED };

#define STATUS_101_LEN 12 /* "HTTP/1.1 101" */

struct relay {
	struct xconn *xc;	     /* connection */
	struct agent_chan *ch;	     /* tunnel channel */
	struct xhttp_stream *strm;   /* request framing of the client's bytes */
	char *head2;		     /* rewritten head (2 * XHTTP_MAX_HEAD bytes) */
	pthread_mutex_t lock;	     /* protects upgrade, status, nstatus */
	pthread_cond_t cond;	     /* upgrade left UPGRADE_PENDING */
	enum upgrade upgrade;	     /* the first request asked for an Upgrade: the verdict */
	char status[STATUS_101_LEN]; /* the response's first bytes while pending */
	size_t nstatus;
	bool early; /* feeding the bytes read with the first head */
};

/* Records the verdict on a pending Upgrade and wakes the upload thread. */
static void upgrade_verdict(struct relay *rl, enum upgrade v)
{
	pthread_mutex_lock(&rl->lock);
	if (rl->upgrade == UPGRADE_PENDING) {
		rl->upgrade = v;
		pthread_cond_broadcast(&rl->cond);
	}
	pthread_mutex_unlock(&rl->lock);
}

/* Sandbox -> client bytes while an Upgrade is pending: its verdict from the status line. */
static void upgrade_watch(struct relay *rl, const char *p, size_t n)
{
	size_t take;
	bool ok;

	pthread_mutex_lock(&rl->lock);
	if (rl->upgrade != UPGRADE_PENDING) {
		pthread_mutex_unlock(&rl->lock);
		return;
	}
	take = n < STATUS_101_LEN - rl->nstatus ? n : STATUS_101_LEN - rl->nstatus;
	memcpy(rl->status + rl->nstatus, p, take);
	rl->nstatus += take;
	pthread_mutex_unlock(&rl->lock);
	if (rl->nstatus < STATUS_101_LEN)
		return;
	/* UNTRUSTED: the server's status line; only "101" opens the opaque relay */
	ok = (memcmp(rl->status, "HTTP/1.1 101", STATUS_101_LEN) == 0 ||
	      memcmp(rl->status, "HTTP/1.0 101", STATUS_101_LEN) == 0);
	upgrade_verdict(rl, ok ? UPGRADE_ACCEPTED : UPGRADE_DECLINED);
}

/* 0 once the pending Upgrade was accepted; -EPERM when declined or the connection ends. */
static int upgrade_wait(struct relay *rl)
{
	int r;

	pthread_mutex_lock(&rl->lock);
	while (rl->upgrade == UPGRADE_PENDING && !rl->early && !atomic_load(&rl->xc->done)) {
		struct timespec ts;

		util_deadline_ts(CLOCK_REALTIME, 100, &ts);
		pthread_cond_timedwait(&rl->cond, &rl->lock, &ts);
	}
	r = rl->upgrade == UPGRADE_ACCEPTED ? 0 : -EPERM;
	pthread_mutex_unlock(&rl->lock);
	if (r < 0)
		log_debug(
			"exposure: sandbox `%s` port %d: client bytes after an Upgrade the server "
			"did not accept (or before its answer); connection closed",
			rl->xc->id, rl->xc->port);
	return r;
}

/*
 * A later request head on the connection (xhttp_stream's head callback): it must name the
 * connection's sandbox and port and carry that exposure's token now (public: none); it is
 * then rewritten exactly as the first. Otherwise nothing of it is forwarded and the
 * connection ends (-EPERM): a pooled connection cannot carry one sandbox's request (or
 * token) into another.
 */
static int relay_head(void *ctx, const char *buf, const struct xhttp_head *h)
{
	struct relay *rl = ctx;
	struct xconn *xc = rl->xc;
	char token[EXPOSE_TOKEN_LEN + 1] = "";
	struct xhttp_route rt;
	bool is_public = false, ok;
	long n;

	ok = !xhttp_head_has(buf, h, "Upgrade") && /* only as the first request (see top) */
	     xhttp_route(buf, h, xc->x->domain, &rt) == 0 && strcmp(rt.id, xc->id) == 0 &&
	     rt.port == xc->port &&
	     expose_registry_lookup(xc->x, rt.id, rt.port, &is_public, token) == 0 &&
	     (is_public || token_ok(buf, &rt, token));
	sodium_memzero(token, sizeof(token));
	if (!ok) {
		log_debug("exposure: sandbox `%s` port %d: a later request on the connection "
			  "names another target or lacks the token; connection closed",
			  xc->id, xc->port);
		return -EPERM;
	}
	n = xhttp_rewrite(buf, h, &rt, rl->head2, 2 * XHTTP_MAX_HEAD);
	if (n < 0 || agent_chan_send_data(rl->ch, rl->head2, (size_t)n, NULL) < 0)
		return -EIO;
	__atomic_fetch_add(&xc->st->bytes_in, (uint64_t)n, __ATOMIC_RELAXED);
	return 0;
}

/* Body (or raw, after an Upgrade) bytes: forwarded untouched, never buffered. */
static int relay_body(void *ctx, const char *p, size_t n)
{
	struct relay *rl = ctx;

	if (rl->upgrade != UPGRADE_NONE && upgrade_wait(rl) < 0)
		return -EPERM;
	if (atomic_load(&rl->xc->done) || agent_chan_send_data(rl->ch, p, n, NULL) < 0)
		return -EIO;
	__atomic_fetch_add(&rl->xc->st->bytes_in, (uint64_t)n, __ATOMIC_RELAXED);
	return 0;
}

static const struct xhttp_stream_ops relay_ops = {.head = relay_head, .body = relay_body};

/* Client -> sandbox: reads the client socket, frames it (xhttp_stream) and sends STDIN;
 * EOF at its end, or as soon as the client sends something that may not pass (a later
 * request for another target, without its token, malformed or smuggling-prone framing):
 * the server inside answers what it already got, then the connection closes. */
static void *upload_main(void *arg)
{
	struct relay *rl = arg;
	struct xconn *xc = rl->xc;
	uint8_t *buf = malloc(RELAY_CHUNK);

	while (buf && !atomic_load(&xc->done) && !atomic_load(&xc->cut)) {
		ssize_t n = read(xc->fd, buf, RELAY_CHUNK);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!atomic_load(&xc->done))
				agent_chan_send_eof(rl->ch, NULL);
			break;
		}
		/* UNTRUSTED: the client's bytes; every head is parsed, routed and checked */
		r = xhttp_stream_feed(rl->strm, (const char *)buf, (size_t)n, &relay_ops, rl);
		if (r < 0) {
			if (r != -EPERM)
				log_debug("exposure: sandbox `%s` port %d: request framing: %s; "
					  "connection closed",
					  xc->id, xc->port, strerror(-r));
			if (!atomic_load(&xc->done))
				agent_chan_send_eof(rl->ch, NULL);
			shutdown(xc->fd, SHUT_RD);
			break;
		}
	}
	free(buf);
	return NULL;
}

/* Sandbox -> client until the tunnel ends. Returns when the agent's final frame arrived or
 * the agent connection died. (An open tunnel is an open agent channel, which idle detection
 * already counts as activity: a quiet WebSocket does not let the sandbox be paused.) */
static void download(struct xconn *xc, struct agent_chan *ch, struct relay *rl)
{
	bool close_sent = false, client_ok = true;

	for (;;) {
		cleanup_err struct isola_err *err = NULL;
		struct agent_msg m = {0};
		int r = agent_chan_recv(ch, &m, EXPOSE_POLL_MS, &err);

		if (r == -ETIMEDOUT || (r == 0 && m.type == PROTO_STDOUT && !client_ok)) {
			agent_msg_fini(&m);
			if (!close_sent && (!client_ok || atomic_load(&xc->cut))) {
				json_t *c = json_pack("{s:b}", "close", 1);

				agent_chan_send_json(ch, PROTO_CONTROL, c, NULL);
				json_decref(c);
				close_sent = true;
			}
			continue;
		}
		if (r < 0)
			break;
		switch (m.type) {
		case PROTO_STDOUT:
			if (rl)
				upgrade_watch(rl, (const char *)m.data, m.len);
			if (util_write_all(xc->fd, m.data, m.len) < 0)
				client_ok = false; /* close at the next turn; keep draining */
			else
				__atomic_fetch_add(&xc->st->bytes_out, (uint64_t)m.len,
						   __ATOMIC_RELAXED);
			break;
		case PROTO_EOF:
			shutdown(xc->fd,
				 SHUT_WR); /* the server finished: so does the client's read */
			break;
		case PROTO_RESULT:
		case PROTO_ERROR:
		case PROTO_EXIT:
		case PROTO_CLOSE:
			agent_msg_fini(&m);
			goto out;
		default:
			break;
		}
		agent_msg_fini(&m);
	}
out:
	if (rl)
		upgrade_verdict(rl, UPGRADE_DECLINED); /* the tunnel ended before a 101 */
}

/* Opens the tunnel: 0, or responds (409/502/503) and returns -1. */
static int open_tunnel(struct xconn *xc, struct sandbox *s, struct agent_chan **out)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn = NULL;
	struct agent_msg m = {0};
	bool started = false;
	json_t *req;
	int r;

again:
	if (sandbox_agent(s, &conn, &err) < 0) {
		/* not running (a paused or hibernated sandbox, or errored): the state is named */
		respond(xc->fd, 409, "conflict", NULL, "%s", err ? err->message : "not running");
		return -1;
	}
	req = json_pack("{s:s,s:i}", "op", "tunnel", "port", xc->port);
	r = req ? agent_chan_open(conn, req, out, &err) : -ENOMEM;
	json_decref(req);
	if (r < 0) {
		respond(xc->fd, 503, "unavailable", NULL, "sandbox `%s`: agent: %s", xc->id,
			err ? err->message : "out of memory");
		return -1;
	}
	r = agent_chan_recv(*out, &m, EXPOSE_OPEN_MS, &err);
	if (r == 0 && m.type == PROTO_RESULT) {
		agent_msg_fini(&m);
		return 0;
	}
	if (r == 0 && m.type == PROTO_ERROR) {
		/* UNTRUSTED: the agent's error; only its errno is used, the message is ours */
		json_int_t e = json_integer_value(json_object_get(m.json, "errno"));

		if (e == ECONNREFUSED && xc->port == CODEINT_PORT && !started) {
			/* The code interpreter's port: start the service on demand, then once
			 * more (E2B's SDK reaches it at 49999-<id>.<domain>). */
			agent_msg_fini(&m);
			agent_chan_close(*out);
			*out = NULL;
			if (codeint_ensure(s, &err) < 0) {
				respond(xc->fd, start_status(err), err->code, NULL, "%s",
					err->message);
				return -1;
			}
			started = true;
			goto again;
		}
		if (e == ECONNREFUSED)
			respond(xc->fd, 502, "bad_gateway", NULL,
				"nothing listens on port %d in sandbox `%s`", xc->port, xc->id);
		else
			respond(xc->fd, 502, "bad_gateway", NULL,
				"port %d in sandbox `%s` is unreachable: %s", xc->port, xc->id,
				e > 0 && e < 4096 ? strerror((int)e) : "error");
	} else {
		respond(xc->fd, 502, "bad_gateway", NULL,
			"port %d in sandbox `%s`: no answer from the agent", xc->port, xc->id);
	}
	agent_msg_fini(&m);
	agent_chan_close(*out);
	*out = NULL;
	return -1;
}

/* Counts the connection against the sandbox's limit. false (after responding) when full. */
static bool admit(struct xconn *xc)
{
	struct expose *x = xc->x;
	struct xstat *st;
	bool ok = false;

	pthread_mutex_lock(&x->lock);
	st = expose_stat_get_locked(x, xc->id, xc->port);
	if (st && expose_active_locked(x, xc->id) >= x->max_conns) {
		st->refused++;
	} else if (st) {
		st->active++;
		st->total++;
		xc->st = st;
		ok = true;
	}
	pthread_mutex_unlock(&x->lock);
	if (!ok)
		respond(xc->fd, 503, "unavailable", "Retry-After: 1\r\n",
			"sandbox `%s` has %u tunnelled connections open, its limit", xc->id,
			x->max_conns);
	return ok;
}

/* Everything after the head: route, authorize, tunnel, relay. */
static void serve(struct xconn *xc, char *buf, size_t len, const struct xhttp_head *h)
{
	struct expose *x = xc->x;
	char token[EXPOSE_TOKEN_LEN + 1] = "", *head2 = NULL;
	struct xhttp_stream *strm = NULL;
	struct xhttp_route rt;
	struct sandbox *s = NULL;
	struct agent_chan *ch = NULL;
	cleanup_err struct isola_err *err = NULL;
	bool is_public = false, relay_ready = false;
	struct relay rl;
	pthread_t up;
	long n;
	int r;

	r = xhttp_route(buf, h, x->domain, &rt);
	if (r == -EBADMSG) {
		respond(xc->fd, 400, "invalid", NULL,
			"ambiguous or hostile request (duplicate Host, missing Host, or `..` in "
			"the path)");
		return;
	}
	/* unknown sandbox, port not exposed, another tenant's: one answer */
	if (r < 0 || expose_registry_lookup(x, rt.id, rt.port, &is_public, token) < 0 ||
	    core_sandbox_get(x->core, rt.id, &s, &err) < 0) {
		respond(xc->fd, 404, "not_found", NULL, "no exposed port here");
		goto out;
	}
	if (!is_public && !token_ok(buf, &rt, token)) {
		respond(xc->fd, 401, "unauthorized", NULL,
			"access token required: send the X-Isola-Access-Token header or "
			"?isola_token=");
		goto out;
	}
	strm = malloc(sizeof(*strm));
	if (!strm || xhttp_stream_start(strm, buf, h) < 0) {
		respond(xc->fd, 400, "invalid", NULL,
			"request framing refused (Transfer-Encoding other than chunked, both "
			"Content-Length and Transfer-Encoding, or a bad Content-Length)");
		goto out;
	}
	if (!is_public && rt.from == XHTTP_TOK_QUERY &&
	    (xhttp_span_eq(buf, h->method, "GET") || xhttp_span_eq(buf, h->method, "HEAD"))) {
		login_redirect(xc, buf, h, &rt, token);
		goto out;
	}
	pthread_mutex_lock(&x->lock);
	snprintf(xc->id, sizeof(xc->id), "%s", rt.id);
	xc->port = rt.port;
	pthread_mutex_unlock(&x->lock);
	if (!admit(xc))
		goto out;
	sandbox_touch(s);
	if (open_tunnel(xc, s, &ch) < 0)
		goto out;
	head2 = malloc(2 * XHTTP_MAX_HEAD);
	n = head2 ? xhttp_rewrite(buf, h, &rt, head2, 2 * XHTTP_MAX_HEAD) : -ENOMEM;
	rl = (struct relay){.xc = xc,
			    .ch = ch,
			    .strm = strm,
			    .head2 = head2,
			    .early = true,
			    .upgrade =
				    strm->body.st == XHTTP_B_RAW ? UPGRADE_PENDING : UPGRADE_NONE};
	pthread_mutex_init(&rl.lock, NULL);
	pthread_cond_init(&rl.cond, NULL);
	relay_ready = true;
	if (n < 0 || agent_chan_send_data(ch, head2, (size_t)n, NULL) < 0) {
		json_t *c = json_pack("{s:b}", "close", 1);

		agent_chan_send_json(ch, PROTO_CONTROL, c, NULL);
		json_decref(c);
		goto out;
	}
	__atomic_fetch_add(&xc->st->bytes_in, (uint64_t)n, __ATOMIC_RELAXED);
	/* the bytes read past the first head (its body, pipelined requests) are framed too;
	 * when they may not pass, the server answers what it got and the connection ends
	 * (bytes sent after an Upgrade before its answer never pass: rl.early) */
	if (xhttp_stream_feed(strm, buf + h->head_len, len - h->head_len, &relay_ops, &rl) < 0) {
		agent_chan_send_eof(ch, NULL);
		shutdown(xc->fd, SHUT_RD);
		download(xc, ch, &rl);
		goto out;
	}
	rl.early = false;
	if (pthread_create(&up, NULL, upload_main, &rl) != 0) {
		json_t *c = json_pack("{s:b}", "close", 1);

		agent_chan_send_json(ch, PROTO_CONTROL, c, NULL);
		json_decref(c);
		goto out;
	}
	download(xc, ch, &rl);
	atomic_store(&xc->done, true);
	shutdown(xc->fd, SHUT_RDWR); /* wakes the upload thread's read */
	pthread_join(up, NULL);
out:
	if (relay_ready) {
		pthread_mutex_destroy(&rl.lock);
		pthread_cond_destroy(&rl.cond);
	}
	free(head2);
	free(strm);
	sodium_memzero(token, sizeof(token));
	agent_chan_close(ch);
	if (xc->st) {
		pthread_mutex_lock(&x->lock);
		xc->st->active--;
		pthread_mutex_unlock(&x->lock);
	}
	sandbox_unref(s);
}

void *expose_conn_main(void *arg)
{
	struct xconn *xc = arg, **pp;
	struct expose *x = xc->x;
	struct timeval tv = {.tv_sec = SEND_TIMEOUT};
	struct xhttp_head *h = malloc(sizeof(*h));
	char *buf = malloc(XHTTP_MAX_HEAD + 1);
	long len;

	setsockopt(xc->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (h && buf) {
		len = read_head(xc, buf, XHTTP_MAX_HEAD, h);
		if (len > 0)
			serve(xc, buf, (size_t)len, h);
	}
	free(buf);
	free(h);
	pthread_mutex_lock(&x->lock);
	for (pp = &x->conns; *pp; pp = &(*pp)->next)
		if (*pp == xc) {
			*pp = xc->next;
			break;
		}
	close(xc->fd);
	x->nconns--;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	free(xc);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct expose *x = arg;
	pthread_attr_t attr;

	util_thread_name("expose accept");
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	for (;;) {
		struct pollfd pfd[2] = {{.fd = x->lfd, .events = POLLIN},
					{.fd = x->stop_pipe[0], .events = POLLIN}};
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		char pname[NI_MAXHOST];
		struct xconn *xc;
		pthread_t t;
		int fd;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		fd = accept4(x->lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (getnameinfo((struct sockaddr *)&peer, pl, pname, sizeof(pname), NULL, 0,
				NI_NUMERICHOST) != 0)
			snprintf(pname, sizeof(pname), "?");
		/* tests/security judge "nothing from a sandbox arrived" on this line */
		log_debug("exposure: connection from %s", pname);
		pthread_mutex_lock(&x->lock);
		if (x->stopping || x->nconns >= EXPOSE_MAX_TOTAL) {
			pthread_mutex_unlock(&x->lock);
			respond(fd, 503, "unavailable", "Retry-After: 1\r\n",
				"too many connections to the exposure listener");
			close(fd);
			continue;
		}
		xc = calloc(1, sizeof(*xc));
		if (!xc) {
			pthread_mutex_unlock(&x->lock);
			close(fd);
			continue;
		}
		xc->x = x;
		xc->fd = fd;
		xc->next = x->conns;
		x->conns = xc;
		x->nconns++;
		pthread_mutex_unlock(&x->lock);
		if (pthread_create(&t, &attr, expose_conn_main, xc) != 0) {
			/* undo: the thread never ran */
			struct xconn **pp;

			pthread_mutex_lock(&x->lock);
			for (pp = &x->conns; *pp; pp = &(*pp)->next)
				if (*pp == xc) {
					*pp = xc->next;
					break;
				}
			x->nconns--;
			pthread_mutex_unlock(&x->lock);
			close(fd);
			free(xc);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

/* Splits "HOST:PORT" / "[V6]:PORT" and binds a listening socket. */
static int listen_on(struct expose *x, const char *addr, struct isola_err **err)
{
	char host[48];
	const char *colon = strrchr(addr, ':'), *hs = addr;
	size_t hl;
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, one = 1, r;

	if (!colon || colon == addr || !colon[1])
		return isola_err_set(err, EINVAL, "invalid",
				     "--expose-listen `%s`: expected HOST:PORT", addr);
	hl = (size_t)(colon - addr);
	if (addr[0] == '[' && colon[-1] == ']') {
		hs = addr + 1;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return isola_err_set(err, EINVAL, "invalid", "--expose-listen `%s`: host too long",
				     addr);
	memcpy(host, hs, hl);
	host[hl] = '\0';
	r = getaddrinfo(host, colon + 1, &hints, &ai);
	if (r != 0)
		return isola_err_set(err, EINVAL, "invalid", "--expose-listen `%s`: %s", addr,
				     gai_strerror(r));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		r = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return isola_err_sys(err, r, "unavailable", "exposure listener on `%s`", addr);
	}
	freeaddrinfo(ai);
	x->lfd = fd;
	x->lport = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						  : ((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		snprintf(x->host, sizeof(x->host), "[%s]", host);
	else
		snprintf(x->host, sizeof(x->host), "%s", host);
	snprintf(x->addr, sizeof(x->addr), "%s:%d", x->host, x->lport);
	return 0;
}

int expose_bind(const struct expose_config *cfg, struct expose **out, struct isola_err **err)
{
	struct expose *x;
	const char *domain = cfg->domain ? cfg->domain : EXPOSE_DEFAULT_DOMAIN;
	int r;

	*out = NULL;
	if (!cfg->listen_addr)
		return 0;
	if (!*domain || strlen(domain) >= 100 || domain[0] == '.' || strchr(domain, ':') ||
	    strchr(domain, '/'))
		return isola_err_set(err, EINVAL, "invalid", "--expose-domain `%s` is not a domain",
				     domain);
	if (expose_active)
		return isola_err_set(err, EBUSY, "conflict", "an exposure listener already runs");
	x = calloc(1, sizeof(*x));
	if (!x)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	x->lfd = x->stop_pipe[0] = x->stop_pipe[1] = -1;
	snprintf(x->domain, sizeof(x->domain), "%s", domain);
	for (char *p = x->domain; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p + 32);
	x->max_conns = cfg->max_conns ? cfg->max_conns : EXPOSE_DEFAULT_MAX_CONNS;
	x->head_timeout_ms = cfg->head_timeout_ms ? cfg->head_timeout_ms : 10000;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	r = listen_on(x, cfg->listen_addr, err);
	if (r < 0)
		goto fail;
	if (pipe2(x->stop_pipe, O_CLOEXEC) < 0) {
		r = isola_err_sys(err, errno, NULL, "exposure listener: pipe");
		goto fail;
	}
	*out = x;
	return 0;
fail:
	expose_stop(x);
	return r;
}

int expose_start(struct core *core, struct expose *x, struct isola_err **err)
{
	int r;

	if (!x)
		return 0;
	x->core = core;
	r = -pthread_create(&x->acceptor, NULL, accept_main, x);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "exposure listener: thread");
		return r;
	}
	x->acceptor_started = true;
	expose_active = x;
	log_info("exposure listener on %s, domain %s, %u connections per sandbox", x->addr,
		 x->domain, x->max_conns);
	return 0;
}

void expose_stop(struct expose *x)
{
	uint64_t deadline;
	bool drained = true;

	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	x->stopping = true;
	pthread_mutex_unlock(&x->lock);
	if (x->acceptor_started) {
		if (write(x->stop_pipe[1], "x", 1) < 0)
			log_warn("exposure listener: wake accept thread: %s", strerror(errno));
		pthread_join(x->acceptor, NULL);
	}
	expose_cut(x, NULL, 0);
	deadline = util_now_ms() + STOP_WAIT_MS;
	pthread_mutex_lock(&x->lock);
	while (x->nconns > 0) {
		struct timespec ts;

		if (util_now_ms() >= deadline) {
			drained = false;
			break;
		}
		util_deadline_ts(CLOCK_REALTIME, 100, &ts);
		pthread_cond_timedwait(&x->cond, &x->lock, &ts);
	}
	pthread_mutex_unlock(&x->lock);
	if (expose_active == x)
		expose_active = NULL;
	if (x->lfd >= 0)
		close(x->lfd);
	if (!drained) {
		/* an agent that never ends its tunnel holds a thread: leave x to it */
		log_warn("exposure listener: %u connections did not end; leaving them", x->nconns);
		return;
	}
	for (int i = 0; i < 2; i++)
		if (x->stop_pipe[i] >= 0)
			close(x->stop_pipe[i]);
	while (x->stats) {
		struct xstat *st = x->stats;

		x->stats = st->next;
		free(st);
	}
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x);
}
