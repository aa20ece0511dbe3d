/* SPDX-License-Identifier: Apache-2.0 */
/* mcphttp: MCP's Streamable HTTP transport at /mcp — sessions, SSE answers, auth binding, limits. */
#include "api-internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <sodium.h>

#include "../../cli/mcp/mcp.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "mcphttp.h"

/*
 * docs/mcp.md "Streamable HTTP". The MCP logic is src/cli/mcp's core, the same code as `isola
 * mcp`; this file is only a transport. Each session's tools reach isolad's own API over
 * loopback with the caller's bearer token (or over the unix socket for a session made
 * there), so tenancy, quotas, read-only roles and audit apply exactly as for any client.
 *
 * A POST's requests are registered in a `struct stream` before they are handed to the core;
 * the core's send op routes every answer (by id) and progress notification (by token) to
 * the stream that waits for it. When every answer came inline (initialize, ping,
 * tools/list) the POST answers application/json; otherwise it answers text/event-stream
 * and the stream ends once each of its requests is answered or cancelled.
 */

#define MCPH_HEADER_SESSION "Mcp-Session-Id"
#define MCPH_HEADER_VERSION "MCP-Protocol-Version"

struct sess;

/* One POST's answer stream. Lives in its session's list (under sess->qlock) until freed. */
struct stream {
	struct sess *hs;     /* the session (a reference) */
	json_t *pending;     /* ids of requests not answered yet (array) */
	json_t *tokens;	     /* progress tokens of those requests (array) */
	json_t *queue;	     /* messages to send (array) */
	char *buf;	     /* SSE bytes being sent */
	size_t len, off;     /* bytes in buf, bytes sent */
	bool batch;	     /* the POST was a batch (a JSON answer is an array) */
	struct stream *next; /* sess->streams */
};

struct sess {
	struct mcp_session core;  /* first: the core's session (ops get &core) */
	char id[65];		  /* Mcp-Session-Id: 256 random bits, hex */
	char *token;		  /* the bearer token that made it (NULL: unix socket) */
	char who[48];		  /* its principal (for the per-token cap and logs) */
	struct client_conf conf;  /* how the tools reach the API: as the caller */
	pthread_mutex_t dispatch; /* one mcp_handle() at a time */
	bool closing;		  /* being ended: no more mcp_handle() (dispatch) */
	pthread_mutex_t qlock;	  /* streams and what they hold */
	pthread_cond_t qcond;	  /* signalled when a stream got something */
	struct stream *streams;	  /* open answer streams (qlock) */
	bool ended;		  /* DELETEd or expired (qlock) */
	time_t last_used;	  /* CLOCK_MONOTONIC seconds of the last request (mh.lock) */
	unsigned refs;		  /* the table + requests and streams using it (mh.lock) */
	struct sess *next;	  /* mh.list */
};

/* Every session of the daemon. */
static struct {
	pthread_mutex_t lock; /* guards the list, refs, last_used */
	struct sess *list;
	unsigned n;
	pthread_t ticker; /* progress ticks and idle expiry */
	bool ticker_on;
	atomic_bool stopping; /* read by answer streams without the lock */
	time_t idle_s;	      /* MCPH_IDLE_S, or ISOLA_TEST_MCP_IDLE_S (tests) */
	char url[160];	      /* http://loopback:port of the TCP listener, "" without one */
	char socket[108];
} mh = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static time_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static bool id_in(json_t *arr, const json_t *id, bool remove)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) if (json_equal(v, (json_t *)id))
	{
		if (remove)
			json_array_remove(arr, i);
		return true;
	}
	return false;
}

/* --- the core's transport ops (called under core.lock) -------------------------------- */

static int op_send(struct mcp_session *s, json_t *msg, const char *str, size_t len)
{
	struct sess *hs = (struct sess *)s;
	json_t *id = json_object_get(msg, "id");
	json_t *tok = json_object_get(json_object_get(msg, "params"), "progressToken");
	bool answer = id && !json_object_get(msg, "method");

	(void)str;
	(void)len;
	pthread_mutex_lock(&hs->qlock);
	for (struct stream *st = hs->streams; st; st = st->next) {
		if (answer ? id_in(st->pending, id, true) : tok && id_in(st->tokens, tok, false)) {
			json_array_append(st->queue, msg);
			break;
		}
	}
	/* Anything else (an answer whose stream went away, a notification of no request) is
	 * dropped: this server offers no GET stream. */
	pthread_cond_broadcast(&hs->qcond);
	pthread_mutex_unlock(&hs->qlock);
	return 0;
}

static void op_dropped(struct mcp_session *s, const json_t *id)
{
	struct sess *hs = (struct sess *)s;

	pthread_mutex_lock(&hs->qlock);
	for (struct stream *st = hs->streams; st; st = st->next)
		if (id_in(st->pending, id, true))
			break;
	pthread_cond_broadcast(&hs->qcond);
	pthread_mutex_unlock(&hs->qlock);
}

static void op_log(struct mcp_session *s, const char *line)
{
	log_warn("mcp: session %.8s: %s", ((struct sess *)s)->id, line);
}

static const struct mcp_transport_ops http_ops = {
	.send = op_send, .dropped = op_dropped, .log = op_log};

/* --- sessions ------------------------------------------------------------------------ */

static void sess_put(struct sess *hs)
{
	bool last;

	pthread_mutex_lock(&mh.lock);
	last = --hs->refs == 0;
	pthread_mutex_unlock(&mh.lock);
	if (!last)
		return;
	mcp_session_fini(&hs->core);
	pthread_mutex_destroy(&hs->dispatch);
	pthread_mutex_destroy(&hs->qlock);
	pthread_cond_destroy(&hs->qcond);
	if (hs->token)
		sodium_memzero(hs->token, strlen(hs->token));
	free(hs->token);
	free(hs);
}

/* Compares without an early exit. */
static bool token_same(const char *a, const char *b)
{
	size_t al = a ? strlen(a) : 0, bl = b ? strlen(b) : 0;

	if (!a || !b)
		return !a && !b;
	return al == bl && sodium_memcmp(a, b, al) == 0;
}

/* The caller's bearer token (NULL over the unix socket). */
static const char *caller_token(struct api_req *r, bool tcp)
{
	const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);

	if (!tcp || !h || strncmp(h, "Bearer ", 7) != 0)
		return NULL;
	return h + 7;
}

static bool via_tcp(struct api_req *r)
{
	/* The unix socket's principal is "unix:uid=N" (server.c unix_principal()). */
	return strncmp(r->who.who, "unix:", 5) != 0;
}

/* Finds the request's session by its Mcp-Session-Id, bound to the caller's token: a
 * reference, or NULL (unknown, expired, or another token's: all look the same). */
static struct sess *sess_find(struct api_req *r, const char *sid)
{
	const char *tok = caller_token(r, via_tcp(r));
	struct sess *hs;

	pthread_mutex_lock(&mh.lock);
	for (hs = mh.list; hs; hs = hs->next)
		if (!strcmp(hs->id, sid) && token_same(hs->token, tok))
			break;
	if (hs) {
		hs->refs++;
		hs->last_used = mono_now();
	}
	pthread_mutex_unlock(&mh.lock);
	return hs;
}

static void curl_init(void)
{
	struct client *c = NULL;
	struct client_conf conf = {.socket = "/"};

	/* client_new() initialises libcurl once, which is not thread-safe. */
	if (client_new(&conf, &c, NULL) == 0)
		client_free(c);
}

/* Makes a session for the caller; a reference, or NULL with *err (too_many / internal). */
static struct sess *sess_new(struct api_req *r, struct isola_err **err)
{
	unsigned char raw[32];
	struct sess *hs;
	unsigned mine = 0;
	bool tcp = via_tcp(r);

	pthread_once(&curl_once, curl_init);
	pthread_mutex_lock(&mh.lock);
	for (hs = mh.list; hs; hs = hs->next)
		if (!strcmp(hs->who, r->who.who))
			mine++;
	if (mine >= MCPH_MAX_PER_TOKEN || mh.n >= MCPH_MAX_SESSIONS || (tcp && !mh.url[0])) {
		pthread_mutex_unlock(&mh.lock);
		if (tcp && !mh.url[0])
			isola_err_set(err, EIO, "internal", "no TCP listener to reach the API");
		else
			isola_err_set(err, EAGAIN, "too_many",
				      "%u MCP sessions are open (at most %u per token, %u in all): "
				      "end one with DELETE /mcp or let it expire",
				      mine >= MCPH_MAX_PER_TOKEN ? mine : mh.n, MCPH_MAX_PER_TOKEN,
				      MCPH_MAX_SESSIONS);
		return NULL;
	}
	mh.n++; /* reserved; given back below on failure */
	pthread_mutex_unlock(&mh.lock);
	hs = calloc(1, sizeof(*hs));
	if (hs && tcp && !(hs->token = strdup(caller_token(r, true) ?: "")))
		goto fail;
	if (!hs)
		goto fail;
	randombytes_buf(raw, sizeof(raw));
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hs->id + 2 * i, 3, "%02x", raw[i]);
	snprintf(hs->who, sizeof(hs->who), "%s", r->who.who);
	if (tcp) {
		hs->conf.url = mh.url;
		hs->conf.token = hs->token;
	} else {
		hs->conf.socket = mh.socket;
	}
	pthread_mutex_init(&hs->dispatch, NULL);
	pthread_mutex_init(&hs->qlock, NULL);
	pthread_cond_init(&hs->qcond, NULL);
	if (mcp_session_init(&hs->core, &http_ops, &hs->conf, err) < 0) {
		pthread_mutex_destroy(&hs->dispatch);
		pthread_mutex_destroy(&hs->qlock);
		pthread_cond_destroy(&hs->qcond);
		goto fail;
	}
	hs->refs = 2; /* the table and the caller */
	pthread_mutex_lock(&mh.lock);
	hs->last_used = mono_now();
	hs->next = mh.list;
	mh.list = hs;
	pthread_mutex_unlock(&mh.lock);
	log_info("mcp: session %.8s opened by %s", hs->id, hs->who);
	return hs;

fail:
	if (hs)
		free(hs->token);
	free(hs);
	pthread_mutex_lock(&mh.lock);
	mh.n--;
	pthread_mutex_unlock(&mh.lock);
	if (err && !*err)
		isola_err_set(err, ENOMEM, "internal", "out of memory");
	return NULL;
}

/* Takes hs out of the table (false when it was out already). */
static bool sess_unlist(struct sess *hs)
{
	bool found = false;

	pthread_mutex_lock(&mh.lock);
	for (struct sess **pp = &mh.list; *pp; pp = &(*pp)->next)
		if (*pp == hs) {
			*pp = hs->next;
			mh.n--;
			found = true;
			break;
		}
	pthread_mutex_unlock(&mh.lock);
	return found;
}

/* Ends an unlisted session: cancels its calls, destroys its default sandbox, ends its
 * streams, drops the table's reference. */
static void sess_end(struct sess *hs, const char *why)
{
	static volatile sig_atomic_t now = 1;

	pthread_mutex_lock(&hs->dispatch);
	hs->closing = true;
	mcp_session_end(&hs->core, &now);
	pthread_mutex_unlock(&hs->dispatch);
	pthread_mutex_lock(&hs->qlock);
	hs->ended = true;
	pthread_cond_broadcast(&hs->qcond);
	pthread_mutex_unlock(&hs->qlock);
	log_info("mcp: session %.8s of %s ended (%s)", hs->id, hs->who, why);
	sess_put(hs);
}

/* Once a second: progress for the calls that asked for it; sessions idle for
 * MCPH_IDLE_S (no request, no call running, no stream open) expire. */
static void *ticker(void *arg)
{
	(void)arg;
	util_thread_name("mcp sessions");
	for (;;) {
		struct sess *expired = NULL, *hs, *next;
		struct sess *live[MCPH_MAX_SESSIONS];
		size_t n = 0;
		time_t now = mono_now();

		sleep(1);
		pthread_mutex_lock(&mh.lock);
		if (atomic_load(&mh.stopping)) {
			pthread_mutex_unlock(&mh.lock);
			return NULL;
		}
		for (struct sess **pp = &mh.list; *pp;) {
			hs = *pp;
			pthread_mutex_lock(&hs->core.lock);
			bool idle = hs->core.ncalls == 0 && hs->refs == 1 &&
				    now - hs->last_used >= mh.idle_s;
			pthread_mutex_unlock(&hs->core.lock);
			if (idle) {
				*pp = hs->next;
				mh.n--;
				hs->next = expired;
				expired = hs;
				continue;
			}
			if (n < MCPH_MAX_SESSIONS) {
				hs->refs++;
				live[n++] = hs;
			}
			pp = &hs->next;
		}
		pthread_mutex_unlock(&mh.lock);
		for (size_t i = 0; i < n; i++) {
			mcp_progress_tick(&live[i]->core);
			sess_put(live[i]);
		}
		for (hs = expired; hs; hs = next) {
			next = hs->next;
			sess_end(hs, "idle");
		}
	}
}

void mcp_http_start(struct api_server *srv)
{
	const char *la = srv->listen_addr, *colon = strrchr(la, ':');
	char host[128];

	pthread_mutex_lock(&mh.lock);
	snprintf(mh.socket, sizeof(mh.socket), "%s", srv->socket_path);
	mh.url[0] = '\0';
	if (la[0] && colon && (size_t)(colon - la) < sizeof(host)) {
		memcpy(host, la, (size_t)(colon - la));
		host[colon - la] = '\0';
		/* A wildcard listener is reached on loopback. */
		if (!strcmp(host, "0.0.0.0") || !host[0])
			snprintf(host, sizeof(host), "127.0.0.1");
		else if (!strcmp(host, "[::]"))
			snprintf(host, sizeof(host), "[::1]");
		snprintf(mh.url, sizeof(mh.url), "http://%s:%s", host, colon + 1);
	}
	atomic_store(&mh.stopping, false);
	mh.idle_s = MCPH_IDLE_S;
	if (getenv("ISOLA_TEST_MCP_IDLE_S") && atoi(getenv("ISOLA_TEST_MCP_IDLE_S")) > 0)
		mh.idle_s = atoi(getenv("ISOLA_TEST_MCP_IDLE_S"));
	if (!mh.ticker_on && pthread_create(&mh.ticker, NULL, ticker, NULL) == 0)
		mh.ticker_on = true;
	pthread_mutex_unlock(&mh.lock);
}

void mcp_http_stop(void)
{
	struct sess *list, *next;

	pthread_mutex_lock(&mh.lock);
	atomic_store(&mh.stopping, true);
	list = mh.list;
	mh.list = NULL;
	mh.n = 0;
	pthread_mutex_unlock(&mh.lock);
	if (mh.ticker_on)
		pthread_join(mh.ticker, NULL);
	mh.ticker_on = false;
	/* The API still serves (stop quiesces it after this), so the calls can be killed; the
	 * default sandboxes are left to their owners (isolad restarts keep sandboxes). */
	for (struct sess *hs = list; hs; hs = next) {
		next = hs->next;
		hs->core.keep = true;
		sess_end(hs, "isolad stopping");
	}
}

/* --- HTTP ---------------------------------------------------------------------------- */

/* A JSON-RPC error as the whole HTTP answer (the SDK shows the body). */
static enum MHD_Result respond_rpc_error(struct api_req *r, unsigned status, const char *code,
					 int rpc, const char *msg)
{
	snprintf(r->err_code, sizeof(r->err_code), "%s", code);
	return api_respond_json(r, status,
				json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
					  "error", "code", rpc, "message", msg));
}

/* Origin (DNS rebinding) and MCP-Protocol-Version checks common to every method. */
static bool refused_early(struct api_req *r, enum MHD_Result *ret)
{
	const char *v = api_header(r, MCPH_HEADER_VERSION);

	if (!api_origin_ok(api_header(r, "Origin"), api_header(r, MHD_HTTP_HEADER_HOST))) {
		*ret = respond_rpc_error(r, 403, "forbidden", -32000,
					 "Origin is not this listener's own (DNS rebinding "
					 "protection); MCP clients outside a browser send none");
		return true;
	}
	if (v && !mcp_version_known(v)) {
		char msg[160];

		snprintf(msg, sizeof(msg), "unsupported %s `%.40s`", MCPH_HEADER_VERSION, v);
		*ret = respond_rpc_error(r, 400, "invalid", -32000, msg);
		return true;
	}
	return false;
}

struct post_state {
	char *body;
	size_t len;
	bool too_big;
};

static void post_state_free(void *p)
{
	struct post_state *ps = p;

	if (ps)
		free(ps->body);
	free(ps);
}

int api_mcp_post_begin(struct api_req *r)
{
	const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct post_state *ps;
	uint64_t v;

	if (cl && api_parse_u64(cl, UINT64_MAX, &v) == 0 && v > MCPH_MAX_BODY)
		return isola_err_set(&r->fail, E2BIG, "too_large",
				     "MCP message is larger than %u bytes", MCPH_MAX_BODY);
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return isola_err_set(&r->fail, ENOMEM, "internal", "out of memory");
	r->state = ps;
	r->state_free = post_state_free;
	return 0;
}

int api_mcp_post_data(struct api_req *r, const char *buf, size_t len)
{
	struct post_state *ps = r->state;
	char *nb;

	/* UNTRUSTED: body bytes, capped at MCPH_MAX_BODY. */
	if (ps->too_big || len > MCPH_MAX_BODY - ps->len) {
		ps->too_big = true;
		return 0;
	}
	nb = realloc(ps->body, ps->len + len + 1);
	if (!nb)
		return isola_err_set(&r->fail, ENOMEM, "internal", "out of memory");
	ps->body = nb;
	memcpy(ps->body + ps->len, buf, len);
	ps->len += len;
	return 0;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	struct sess *hs = st->hs;

	pthread_mutex_lock(&hs->qlock);
	for (struct stream **pp = &hs->streams; *pp; pp = &(*pp)->next)
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	pthread_mutex_unlock(&hs->qlock);
	json_decref(st->pending);
	json_decref(st->tokens);
	json_decref(st->queue);
	free(st->buf);
	free(st);
	sess_put(hs);
}

/* SSE: each message is one `event: message` whose data is one line of compact JSON. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *st = cls;
	struct sess *hs = st->hs;
	size_t n;

	(void)pos;
	pthread_mutex_lock(&hs->qlock);
	while (st->off == st->len) {
		json_t *m = json_array_get(st->queue, 0);
		char *s;

		free(st->buf);
		st->buf = NULL;
		st->len = st->off = 0;
		if (m) {
			s = json_dumps(m, JSON_COMPACT);
			json_array_remove(st->queue, 0);
			if (s && asprintf(&st->buf, "event: message\ndata: %s\n\n", s) >= 0)
				st->len = strlen(st->buf);
			else
				st->buf = NULL;
			free(s);
			continue;
		}
		if (json_array_size(st->pending) == 0 || hs->ended || atomic_load(&mh.stopping)) {
			pthread_mutex_unlock(&hs->qlock);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += MCPH_KEEPALIVE_S;
		if (pthread_cond_timedwait(&hs->qcond, &hs->qlock, &until) == ETIMEDOUT &&
		    json_array_size(st->queue) == 0) {
			/* A comment keeps proxies and the connection timeout from closing a
			 * stream whose command runs long without output. */
			st->buf = strdup(": keepalive\n\n");
			st->len = st->buf ? strlen(st->buf) : 0;
		}
	}
	n = st->len - st->off < max ? st->len - st->off : max;
	memcpy(out, st->buf + st->off, n);
	st->off += n;
	pthread_mutex_unlock(&hs->qlock);
	return (ssize_t)n;
}

/* Collects the requests' ids and progress tokens of one message into st. */
static void note_request(struct stream *st, json_t *m)
{
	json_t *id = json_object_get(m, "id"), *params = json_object_get(m, "params");
	json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");

	if (!json_is_object(m) || !json_is_string(json_object_get(m, "method")) ||
	    !(json_is_string(id) || json_is_integer(id)))
		return;
	json_array_append(st->pending, id);
	if (tok && (json_is_string(tok) || json_is_integer(tok)))
		json_array_append(st->tokens, tok);
}

static bool is_initialize(json_t *m)
{
	return json_is_object(m) &&
	       !strcmp(json_string_value(json_object_get(m, "method")) ?: "", "initialize");
}

enum MHD_Result api_mcp_post(struct api_req *r)
{
	struct post_state *ps = r->state;
	struct sess *hs = NULL;
	struct stream *st = NULL;
	cleanup_err struct isola_err *err = NULL;
	const char *sid = api_header(r, MCPH_HEADER_SESSION);
	json_error_t jerr;
	json_t *body, *msgs;
	bool init = false, created = false;
	enum MHD_Result ret;
	size_t i;
	json_t *m;

	if (refused_early(r, &ret))
		return ret;
	if (!ps || ps->too_big) {
		char msg[96];

		snprintf(msg, sizeof(msg), "MCP message is larger than %u bytes", MCPH_MAX_BODY);
		return respond_rpc_error(r, 413, "too_large", RPC_INVALID_REQUEST, msg);
	}
	/* UNTRUSTED: the client's JSON-RPC message or batch. */
	body = ps->len ? json_loadb(ps->body, ps->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!body) {
		char msg[256];

		snprintf(msg, sizeof(msg), "parse error: %s", ps->len ? jerr.text : "empty body");
		return respond_rpc_error(r, 400, "invalid", RPC_PARSE_ERROR, msg);
	}
	msgs = json_is_array(body) ? json_incref(body) : json_pack("[O]", body);
	if (!msgs || json_array_size(msgs) == 0 || json_array_size(msgs) > MCPH_MAX_BATCH) {
		json_decref(msgs);
		json_decref(body);
		return respond_rpc_error(r, 400, "invalid", RPC_INVALID_REQUEST,
					 "expected a JSON-RPC message or a batch of 1 to 64");
	}
	json_array_foreach(msgs, i, m) init |= is_initialize(m);
	if (init && (json_array_size(msgs) != 1 || sid)) {
		ret = respond_rpc_error(r, 400, "invalid", RPC_INVALID_REQUEST,
					sid ? "initialize on an existing session: start a new one "
					      "without Mcp-Session-Id"
					    : "initialize must be alone in its POST");
		goto out;
	}
	if (init) {
		hs = sess_new(r, &err);
		if (!hs) {
			ret = respond_rpc_error(r, !strcmp(err->code, "too_many") ? 429 : 500,
						err->code, RPC_INTERNAL, err->message);
			goto out;
		}
		created = true;
	} else if (!sid) {
		ret = respond_rpc_error(r, 400, "invalid", -32000,
					"missing Mcp-Session-Id header: initialize first");
		goto out;
	} else if (!(hs = sess_find(r, sid))) {
		ret = respond_rpc_error(r, 404, "not_found", -32001,
					"unknown or expired MCP session: initialize a new one");
		goto out;
	}
	st = calloc(1, sizeof(*st));
	if (!st || !(st->pending = json_array()) || !(st->tokens = json_array()) ||
	    !(st->queue = json_array())) {
		ret = respond_rpc_error(r, 500, "internal", RPC_INTERNAL, "out of memory");
		goto out;
	}
	st->hs = hs;
	st->batch = json_is_array(body);
	json_array_foreach(msgs, i, m) note_request(st, m);
	pthread_mutex_lock(&hs->qlock);
	st->next = hs->streams;
	hs->streams = st;
	pthread_mutex_unlock(&hs->qlock);

	pthread_mutex_lock(&hs->dispatch);
	if (hs->closing) {
		/* DELETEd or expired while this POST waited: a call started now would make a
		 * default sandbox nobody destroys. */
		pthread_mutex_unlock(&hs->dispatch);
		ret = respond_rpc_error(r, 404, "not_found", -32001,
					"unknown or expired MCP session: initialize a new one");
		goto out;
	}
	/* A member that is no object gets no answer: it has no id to answer to. */
	json_array_foreach(msgs, i, m) if (json_is_object(m)) mcp_handle(&hs->core, m);
	pthread_mutex_unlock(&hs->dispatch);

	pthread_mutex_lock(&hs->qlock);
	if (json_array_size(st->pending) == 0) {
		/* Everything answered inline (or notifications only: 202, no body). */
		json_t *q = json_incref(st->queue);
		struct MHD_Response *resp;

		pthread_mutex_unlock(&hs->qlock);
		if (json_array_size(q) == 0) {
			json_decref(q);
			/* An initialize sent as a notification opened nothing the client knows. */
			if (created && sess_unlist(hs))
				sess_end(hs, "initialize without an id");
			resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
			ret = api_respond_response(r, 202, resp);
			goto out;
		}
		resp = api_json_response(st->batch ? q : json_incref(json_array_get(q, 0)));
		if (!st->batch)
			json_decref(q);
		if (resp && created)
			MHD_add_response_header(resp, MCPH_HEADER_SESSION, hs->id);
		ret = api_respond_response(r, 200, resp);
		goto out;
	}
	pthread_mutex_unlock(&hs->qlock);
	{
		struct MHD_Response *resp = MHD_create_response_from_callback(
			MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);

		if (!resp) {
			ret = MHD_NO;
			goto out;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		st = NULL; /* the response's now, with its session reference */
		hs = NULL;
		ret = api_respond_response(r, 200, resp);
	}

out:
	if (st) {
		st->hs = hs;
		stream_free(st); /* drops hs's reference */
		hs = NULL;
	}
	if (hs)
		sess_put(hs);
	json_decref(msgs);
	json_decref(body);
	return ret;
}

enum MHD_Result api_mcp_delete(struct api_req *r)
{
	const char *sid = api_header(r, MCPH_HEADER_SESSION);
	enum MHD_Result ret;
	struct sess *hs;

	if (refused_early(r, &ret))
		return ret;
	if (!sid)
		return respond_rpc_error(r, 400, "invalid", -32000,
					 "missing Mcp-Session-Id header");
	hs = sess_find(r, sid);
	if (!hs)
		return respond_rpc_error(r, 404, "not_found", -32001,
					 "unknown or expired MCP session");
	if (sess_unlist(hs))
		sess_end(hs, "DELETE");
	sess_put(hs);
	return api_respond_empty(r, 204);
}
