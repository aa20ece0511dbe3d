/* SPDX-License-Identifier: Apache-2.0 */
/* ws: GET .../processes/{pid}/ws — WebSocket upgrade and PTY/stdin attach to a process. */
#include "api-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../common/ws.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define WS_MAX_MESSAGE	  (1u << 20) /* client message cap (stdin chunk or control JSON) */
#define WS_TICK_MS	  10	     /* each direction waits at most this long per turn */
#define WS_SEND_TIMEOUT_S 30	     /* a client that reads nothing for this long is dropped */

/* One attach session. Shared by the request (until MHD completes it) and the session
 * thread; the last reference frees it. */
struct ws_session {
	struct api_server *srv; /* the server (session thread registered as a worker) */
	struct sandbox *s;	/* reference */
	struct agent_chan *ch;	/* attach channel, owned; used by the session thread only */
	int refs;		/* atomic: request + session thread */
	int sock;		/* upgraded socket (owned by MHD, closed via urh) */
	struct MHD_UpgradeResponseHandle *urh; /* for MHD_upgrade_action(CLOSE) */
	char *extra;			       /* bytes MHD read past the request, owned */
	size_t extra_len;		       /* their length */
	struct ws_decoder dec;		       /* client frames */
	bool closing;			       /* we sent a CLOSE */
};

static void sess_unref(void *p)
{
	struct ws_session *ss = p;

	if (!ss || __atomic_sub_fetch(&ss->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	agent_chan_close(ss->ch);
	if (ss->s)
		sandbox_unref(ss->s);
	ws_decoder_fini(&ss->dec);
	free(ss->extra);
	free(ss);
}

static int ws_send(struct ws_session *ss, uint8_t opcode, const void *data, size_t len)
{
	uint8_t *frame;
	size_t flen, off = 0;
	int r = ws_frame_encode(opcode, NULL, data, len, &frame, &flen);

	if (r < 0)
		return r;
	while (off < flen) {
		ssize_t n = send(ss->sock, frame + off, flen - off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		off += (size_t)n;
	}
	free(frame);
	return r;
}

static int ws_send_json(struct ws_session *ss, json_t *j)
{
	char *s;
	int r;

	if (!j)
		return -ENOMEM;
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return -ENOMEM;
	r = ws_send(ss, WS_OP_TEXT, s, strlen(s));
	free(s);
	return r;
}

static void ws_close(struct ws_session *ss, uint16_t code)
{
	uint8_t p[2] = {(uint8_t)(code >> 8), (uint8_t)code};

	if (ss->closing)
		return;
	ss->closing = true;
	ws_send(ss, WS_OP_CLOSE, p, sizeof(p));
}

static int ws_error(struct ws_session *ss, const char *code, const char *msg)
{
	return ws_send_json(
		ss, json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "message", msg));
}

/* A text message from the client: a control command. UNTRUSTED: JSON from the client. */
static int ws_control(struct ws_session *ss, const uint8_t *data, size_t len)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *j = NULL, *ctl = NULL;
	const char *type;
	uint64_t cols = 0, rows = 0;
	int sig, r = 0;

	if (!api_json_depth_ok((const char *)data, len, 4) ||
	    !(j = json_loadb((const char *)data, len, 0, NULL)) || !json_is_object(j)) {
		json_decref(j);
		return ws_error(ss, "invalid", "text frames must be JSON control objects");
	}
	type = json_string_value(json_object_get(j, "type"));
	if (type && !strcmp(type, "resize")) {
		if (api_json_uint(j, "cols", 65535, &cols, &err) < 0 ||
		    api_json_uint(j, "rows", 65535, &rows, &err) < 0 || !cols || !rows)
			r = ws_error(ss, "invalid", "resize needs cols and rows (1-65535)");
		else
			ctl = json_pack("{s:{s:I, s:I}}", "resize", "cols", (json_int_t)cols,
					"rows", (json_int_t)rows);
	} else if (type && !strcmp(type, "signal")) {
		if (api_json_signal(j, "signal", &sig, &err) < 0)
			r = ws_error(ss, "invalid", err->message);
		else
			ctl = json_pack("{s:i}", "signal", sig);
	} else if (type && !strcmp(type, "close_stdin")) {
		ctl = json_pack("{s:b}", "close_stdin", 1);
	} else {
		r = ws_error(ss, "invalid", "unknown control type (resize, signal, close_stdin)");
	}
	json_decref(j);
	if (ctl) {
		isola_err_free(err);
		err = NULL;
		r = agent_chan_send_json(ss->ch, PROTO_CONTROL, ctl, &err);
		json_decref(ctl);
	}
	return r;
}

/* Feeds client bytes. Returns 1 when the session should end. */
static int ws_client_bytes(struct ws_session *ss, const uint8_t *buf, size_t len)
{
	cleanup_err struct isola_err *err = NULL;

	while (len > 0) {
		struct ws_message msg;
		size_t used = 0;
		int r = ws_decoder_feed(&ss->dec, buf, len, &used, &msg);

		if (r < 0) {
			ws_close(ss, ss->dec.close_code);
			return 1;
		}
		buf += used;
		len -= used;
		if (r == 0)
			break;
		switch (msg.opcode) {
		case WS_OP_BINARY:
			if (msg.len && agent_chan_send_data(ss->ch, msg.data, msg.len, &err) < 0) {
				ws_close(ss, WS_CLOSE_INTERNAL);
				return 1;
			}
			break;
		case WS_OP_TEXT:
			if (ws_control(ss, msg.data, msg.len) < 0) {
				ws_close(ss, WS_CLOSE_INTERNAL);
				return 1;
			}
			break;
		case WS_OP_PING:
			ws_send(ss, WS_OP_PONG, msg.data, msg.len);
			break;
		case WS_OP_CLOSE: {
			uint16_t code;
			const uint8_t *reason;
			size_t rlen;

			if (ws_parse_close(msg.data, msg.len, &code, &reason, &rlen) < 0)
				ws_close(ss, WS_CLOSE_PROTOCOL);
			else
				ws_close(ss, code == 1005 ? WS_CLOSE_NORMAL : code);
			return 1;
		}
		default: /* PONG */
			break;
		}
	}
	return 0;
}

/* One frame from the agent. Returns 1 when the session should end. */
static int ws_agent_msg(struct ws_session *ss, struct agent_msg *m)
{
	switch (m->type) {
	case PROTO_STDOUT:
	case PROTO_STDERR:
		return ws_send(ss, WS_OP_BINARY, m->data, m->len) < 0;
	case PROTO_DROPPED:
		return ws_send_json(ss, json_pack("{s:s, s:I}", "type", "dropped", "bytes",
						  json_integer_value(
							  json_object_get(m->json, "bytes")))) < 0;
	case PROTO_EXIT: {
		json_t *ex = api_exit_json(m->json, api_exit_oom(ss->s, m->json, -1));

		if (ex)
			json_object_set_new(ex, "type", json_string("exit"));
		ws_send_json(ss, ex);
		ws_close(ss, WS_CLOSE_NORMAL);
		return 1;
	}
	case PROTO_ERROR: {
		cleanup_err struct isola_err *e = NULL;

		agent_error_to_err(m->json, &e);
		ws_error(ss, e ? e->code : "internal",
			 e && e->message ? e->message : "agent error");
		ws_close(ss, WS_CLOSE_INTERNAL);
		return 1;
	}
	default:
		return 0;
	}
}

static void *ws_thread(void *p)
{
	struct ws_session *ss = p;
	struct api_server *srv = ss->srv;
	struct timeval tv = {.tv_sec = WS_SEND_TIMEOUT_S};
	uint8_t buf[16 * 1024];
	bool done = false;
	int fl;

	fl = fcntl(ss->sock, F_GETFL);
	if (fl >= 0)
		fcntl(ss->sock, F_SETFL, fl & ~O_NONBLOCK);
	setsockopt(ss->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (ss->extra_len)
		done = ws_client_bytes(ss, (const uint8_t *)ss->extra, ss->extra_len);
	while (!done) {
		cleanup_err struct isola_err *err = NULL;
		struct pollfd pfd = {.fd = ss->sock, .events = POLLIN};
		struct agent_msg m = {0};
		int r;

		if (api_server_is_stopping(srv)) {
			ws_close(ss, WS_CLOSE_GOING_AWAY);
			break;
		}
		r = poll(&pfd, 1, WS_TICK_MS);
		if (r > 0) {
			ssize_t n = recv(ss->sock, buf, sizeof(buf), 0);

			if (n <= 0)
				break;
			if (ws_client_bytes(ss, buf, (size_t)n))
				break;
		}
		/* Drain what the agent has, waiting at most one tick for the first frame. */
		for (int i = 0; i < 64 && !done; i++) {
			r = agent_chan_recv(ss->ch, &m, i ? 0 : WS_TICK_MS, &err);
			if (r == -ETIMEDOUT)
				break;
			if (r < 0) {
				ws_error(ss, "unavailable", "sandbox agent connection lost");
				ws_close(ss, WS_CLOSE_INTERNAL);
				done = true;
				break;
			}
			done = ws_agent_msg(ss, &m);
			agent_msg_fini(&m);
		}
		isola_err_free(err);
		err = NULL;
	}
	MHD_upgrade_action(ss->urh, MHD_UPGRADE_ACTION_CLOSE);
	sess_unref(ss);
	api_server_worker_leave(srv);
	return NULL;
}

static void ws_upgraded(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra_in,
			size_t extra_in_size, MHD_socket sock,
			struct MHD_UpgradeResponseHandle *urh)
{
	struct ws_session *ss = cls;
	pthread_t th;

	ss->sock = sock;
	ss->urh = urh;
	if (extra_in_size && (ss->extra = malloc(extra_in_size))) {
		memcpy(ss->extra, extra_in, extra_in_size);
		ss->extra_len = extra_in_size;
	}
	if (!api_server_worker_enter(ss->srv)) {
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	__atomic_add_fetch(&ss->refs, 1, __ATOMIC_ACQ_REL);
	if (pthread_create(&th, NULL, ws_thread, ss) != 0) {
		log_warn("api: cannot start a WebSocket session thread");
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		sess_unref(ss);
		api_server_worker_leave(ss->srv);
		return;
	}
	pthread_detach(th);
}

static bool header_has_token(const char *h, const char *token)
{
	size_t n = strlen(token);

	for (const char *p = h; p && *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!strncasecmp(p, token, n) && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return true;
		p = strchr(p, ',');
	}
	return false;
}

enum MHD_Result api_proc_ws(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *upgrade = api_header(r, MHD_HTTP_HEADER_UPGRADE);
	const char *connection = api_header(r, MHD_HTTP_HEADER_CONNECTION);
	const char *version = api_header(r, MHD_HTTP_HEADER_SEC_WEBSOCKET_VERSION);
	const char *key = api_header(r, MHD_HTTP_HEADER_SEC_WEBSOCKET_KEY);
	const char *protocols = api_header(r, MHD_HTTP_HEADER_SEC_WEBSOCKET_PROTOCOL);
	char accept[WS_ACCEPT_KEY_SIZE];
	struct MHD_Response *resp;
	struct agent_conn *conn;
	struct ws_session *ss;
	json_t *req;
	int pid = 0;

	/* UNTRUSTED: the handshake headers (RFC 6455 section 4.2.1). */
	if (!upgrade || !header_has_token(upgrade, "websocket") || !connection ||
	    !header_has_token(connection, "upgrade"))
		return api_respond_error(r, "invalid", "expected a WebSocket upgrade request");
	if (!version || strcmp(version, "13") != 0)
		return api_respond_error(r, "invalid", "Sec-WebSocket-Version must be 13");
	if (ws_accept_key(key, accept) < 0)
		return api_respond_error(r, "invalid", "malformed Sec-WebSocket-Key");
	api_parse_pid(api_match_get(&r->match, "pid"), &pid);
	ss = calloc(1, sizeof(*ss));
	if (!ss)
		return MHD_NO;
	ss->srv = r->srv;
	ss->refs = 1;
	ss->sock = -1;
	ws_decoder_init(&ss->dec, true, WS_MAX_MESSAGE);
	r->state = ss;
	r->state_free = sess_unref;
	if (api_sandbox_agent(r, &ss->s, &conn, &err) < 0)
		return api_respond_err(r, err);
	req = json_pack("{s:s, s:i, s:b}", "op", "attach", "pid", pid, "stdin", 1);
	if (!req || agent_chan_open(conn, req, &ss->ch, &err) < 0) {
		json_decref(req);
		return err ? api_respond_err(r, err) : MHD_NO;
	}
	json_decref(req);
	if (api_chan_expect_result(ss->ch, api_req_fd(r), 30000, NULL, &err) < 0)
		return api_respond_err(r, err);
	resp = MHD_create_response_for_upgrade(ws_upgraded, ss);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_SEC_WEBSOCKET_ACCEPT, accept);
	/* A client that offered subprotocols (the web console) needs one chosen back; never the
	 * token-carrying one (server.c). */
	if (protocols && header_has_token(protocols, API_WS_PROTOCOL))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_SEC_WEBSOCKET_PROTOCOL,
					API_WS_PROTOCOL);
	return api_respond_response(r, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
}
