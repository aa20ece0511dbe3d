/* SPDX-License-Identifier: Apache-2.0 */
/* envd: E2B routing table, per-request auth and state, Connect unary and streaming responses. */
#include "e2b-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "../core/agentconn.h"
#include "../core/core.h"

static int body_data(struct api_req *r, const char *buf, size_t len);

/* Each route names the least role that may call it (`R` read-only, `W` user): reads are
 * open to read-only tokens, anything that writes, executes, signals or changes the sandbox
 * needs `user`. The envd column of docs/e2b.md is this table. */
#define R TENANCY_READONLY
#define W TENANCY_USER
#define CTL(m, p, h, role)                                                                         \
	{                                                                                          \
		{m, p, API_BODY_NONE, h, NULL, NULL}, E2B_CONTROL, false, role                     \
	}
#define CTL_BODY(m, p, h, role)                                                                    \
	{                                                                                          \
		{m, p, API_BODY_STREAM, h, NULL, body_data}, E2B_CONTROL, true, role               \
	}
#define ENVD(m, p, h, role)                                                                        \
	{                                                                                          \
		{m, p, API_BODY_NONE, h, NULL, NULL}, E2B_ENVD, false, role                        \
	}
#define RPC(p, h, role)                                                                            \
	{                                                                                          \
		{"POST", p, API_BODY_STREAM, h, NULL, body_data}, E2B_ENVD, true, role             \
	}

#define CODE(m, p, h, role)                                                                        \
	{                                                                                          \
		{m, p, API_BODY_NONE, h, NULL, NULL}, E2B_CODE, false, role                        \
	}
#define CODE_BODY(m, p, h, role)                                                                   \
	{                                                                                          \
		{m, p, API_BODY_STREAM, h, NULL, body_data}, E2B_CODE, true, role                  \
	}

/* clang-format off */
static const struct e2b_route e2b_routes[] = {
	/* E2B-ROUTES-BEGIN (tests/integration/test_route_roles.py reads this table) */
	/* control plane (E2B's OpenAPI spec, the parts its SDKs call) */
	CTL_BODY("POST", "/sandboxes", e2b_ctl_create, W),
	CTL_BODY("POST", "/v2/sandboxes", e2b_ctl_create, W),
	CTL("GET", "/sandboxes", e2b_ctl_list_v1, R),
	CTL("GET", "/v2/sandboxes", e2b_ctl_list, R),
	CTL("GET", "/sandboxes/{id}", e2b_ctl_get, R),
	CTL("DELETE", "/sandboxes/{id}", e2b_ctl_kill, W),
	CTL_BODY("POST", "/sandboxes/{id}/timeout", e2b_ctl_timeout, W),
	CTL_BODY("POST", "/sandboxes/{id}/refreshes", e2b_ctl_refresh, W),
	CTL_BODY("POST", "/sandboxes/{id}/pause", e2b_ctl_pause, W),
	CTL_BODY("POST", "/sandboxes/{id}/resume", e2b_ctl_resume, W),
	CTL_BODY("POST", "/sandboxes/{id}/connect", e2b_ctl_connect, W),
	CTL_BODY("POST", "/v2/sandboxes/{id}/connect", e2b_ctl_connect, W),
	CTL("GET", "/sandboxes/{id}/metrics", e2b_ctl_metrics, R),
	CTL_BODY("PUT", "/sandboxes/{id}/network", e2b_ctl_network, W),
	CTL_BODY("POST", "/sandboxes/{id}/snapshots", e2b_ctl_snapshot, W),
	CTL_BODY("POST", "/sandboxes/{id}/fork", e2b_ctl_fork, W),
	CTL("GET", "/snapshots", e2b_ctl_snapshot_list, R),
	CTL("DELETE", "/templates/{id}", e2b_ctl_snapshot_delete, W),
	/* the template builder (template.c): requesting a build, asking for an upload URL and
	 * starting it write; its status and Template.exists read. The upload itself is
	 * authorised by its URL's one-build token (E2B_UPLOAD), not by a key. */
	CTL_BODY("POST", "/v3/templates", e2b_tpl_request, W),
	CTL("GET", "/templates/{tid}/files/{hash}", e2b_tpl_files, W),
	{{"PUT", "/templates/{tid}/files/{hash}", API_BODY_STREAM, e2b_tpl_upload_end,
	  e2b_tpl_upload_begin, e2b_tpl_upload_data}, E2B_UPLOAD, false, W},
	CTL_BODY("POST", "/v2/templates/{tid}/builds/{bid}", e2b_tpl_build, W),
	CTL("GET", "/templates/{tid}/builds/{bid}/status", e2b_tpl_status, R),
	CTL("GET", "/templates/aliases/{alias}", e2b_tpl_alias, R),
	/* envd: plain HTTP */
	ENVD("GET", "/health", e2b_health, R),
	ENVD("GET", "/files", e2b_files_get, R),
	{{"POST", "/files", API_BODY_STREAM, e2b_files_post_end, e2b_files_post_begin,
	  e2b_files_post_data}, E2B_ENVD, false, W},
	/* envd: Connect RPC, package process. Connect only streams a process's output (like
	 * the native GET .../output); everything else starts, feeds or signals one. */
	RPC("/process.Process/Start", e2b_proc_start, W),
	RPC("/process.Process/Connect", e2b_proc_connect, R),
	RPC("/process.Process/List", e2b_proc_list, R),
	RPC("/process.Process/SendInput", e2b_proc_send_input, W),
	RPC("/process.Process/CloseStdin", e2b_proc_close_stdin, W),
	RPC("/process.Process/SendSignal", e2b_proc_send_signal, W),
	RPC("/process.Process/Update", e2b_proc_update, W),
	RPC("/process.Process/StreamInput", e2b_rpc_unimplemented, W),
	/* envd: Connect RPC, package filesystem. WatchDir lives as long as its stream; a
	 * polled watcher is isolad state that outlives the request, so making and removing
	 * one needs `user` (reading the events of one does not). */
	RPC("/filesystem.Filesystem/Stat", e2b_fs_stat, R),
	RPC("/filesystem.Filesystem/MakeDir", e2b_fs_make_dir, W),
	RPC("/filesystem.Filesystem/Move", e2b_fs_move, W),
	RPC("/filesystem.Filesystem/ListDir", e2b_fs_list_dir, R),
	RPC("/filesystem.Filesystem/Remove", e2b_fs_remove, W),
	RPC("/filesystem.Filesystem/WatchDir", e2b_fs_watch_dir, R),
	RPC("/filesystem.Filesystem/CreateWatcher", e2b_fs_create_watcher, W),
	RPC("/filesystem.Filesystem/GetWatcherEvents", e2b_fs_get_watcher_events, R),
	RPC("/filesystem.Filesystem/RemoveWatcher", e2b_fs_remove_watcher, W),
	/* the code interpreter (@e2b/code-interpreter; only with E2b-Sandbox-Port: 49999):
	 * listing contexts reads, everything else runs code or changes a context */
	CODE("GET", "/health", e2b_code_health, R),
	CODE_BODY("POST", "/execute", e2b_code_execute, W),
	CODE("GET", "/contexts", e2b_code_contexts, R),
	CODE_BODY("POST", "/contexts", e2b_code_context_create, W),
	CODE("POST", "/contexts/{ctx}/restart", e2b_code_context_restart, W),
	CODE("DELETE", "/contexts/{ctx}", e2b_code_context_delete, W),
	/* E2B-ROUTES-END */
};
#undef R
#undef W
/* clang-format on */

static void e2b_req_free(void *p)
{
	struct e2b_req *er = p;

	if (!er)
		return;
	if (er->op_free)
		er->op_free(er->op);
	api_buf_fini(&er->body);
	free(er);
}

/* Buffers a JSON or envelope body; past E2B_MAX_BODY the rest is swallowed and the
 * handler answers resource_exhausted / 413. UNTRUSTED bytes, only counted and copied. */
static int body_data(struct api_req *r, const char *buf, size_t len)
{
	struct e2b_req *er = e2b_req_of(r);

	if (er->too_large || len > E2B_MAX_BODY - er->body.len) {
		er->too_large = true;
		return 0;
	}
	return api_buf_append(&er->body, buf, len);
}

static bool is_rpc(const struct e2b_route *rt)
{
	return rt->kind == E2B_ENVD && rt->buffered;
}

/* Envd-side auth failure in the shape the route's client expects. */
static enum MHD_Result envd_deny(struct api_req *r, const struct e2b_route *rt, unsigned status,
				 const char *code, const char *msg)
{
	if (is_rpc(rt))
		return api_respond_json(r, status, e2b_connect_error_json(code, msg));
	return api_respond_json(r, status,
				json_pack("{s:i, s:s}", "code", (int)status, "message", msg));
}

/* A refused envd request that has a body (an upload, an RPC) is answered once the body is in
 * and dropped: a client still sending a streamed upload then reads the answer (the SDK's
 * AuthenticationError) instead of a connection reset. */
static enum MHD_Result deny_end(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);

	return envd_deny(r, er->route, er->deny_status, er->deny_code, er->deny_msg);
}

static int deny_data(struct api_req *r, const char *buf, size_t len)
{
	return 0; /* UNTRUSTED bytes of a refused request: dropped unread */
}

static enum MHD_Result envd_refuse(struct api_req *r, unsigned status, const char *code,
				   const char *msg)
{
	struct e2b_req *er = e2b_req_of(r);

	if (er->route->api.body != API_BODY_STREAM)
		return envd_deny(r, er->route, status, code, msg);
	er->deny_status = status;
	er->deny_code = code;
	er->deny_msg = msg;
	er->deny_route = er->route->api; /* same method and pattern for the audit record */
	er->deny_route.handle = deny_end;
	er->deny_route.begin = NULL;
	er->deny_route.data = deny_data;
	r->route = &er->deny_route;
	return MHD_YES;
}

/* NULL when the path parameter `name` (n bytes) has the shape of its kind, else what it
 * names, for the 404. UNTRUSTED value. */
static const char *param_bad(const char *name, size_t n, const char *v)
{
	if (n == 3 && !strncmp(name, "tid", 3))
		return api_valid_template_name(v) ? NULL : "template";
	if (n == 5 && !strncmp(name, "alias", 5))
		return api_valid_template_name(v) ? NULL : "template";
	if (n == 3 && !strncmp(name, "bid", 3))
		return e2b_tpl_valid_build_id(v) ? NULL : "build";
	if (n == 4 && !strncmp(name, "hash", 4))
		return e2b_tpl_valid_hash(v) ? NULL : "files";
	return api_valid_sandbox_id(v) ? NULL : "sandbox";
}

/* A /files request authorised by its URL's `signature` instead of an X-Access-Token. */
static bool is_signed_url(struct api_req *r, const struct e2b_route *rt)
{
	return !strcmp(rt->api.pattern, "/files") && !api_header(r, "X-Access-Token") &&
	       api_query(r, "signature");
}

int e2b_request_begin(struct api_req *r, const char *url, const char *method, bool need_auth)
{
	const struct e2b_route *rt = NULL;
	struct api_match m;
	struct e2b_req *er;
	bool path_seen = false;
	/* The code interpreter SDK addresses port 49999 with the same headers as envd's 49983:
	 * its routes (and its /health) are chosen by the port, envd's by any other. */
	const char *port = api_header(r, "E2b-Sandbox-Port");
	bool code = port && !strcmp(port, E2B_CODE_PORT);

	for (size_t i = 0; i < ARRAY_SIZE(e2b_routes); i++) {
		struct api_match tmp;

		if ((e2b_routes[i].kind == E2B_CODE) != code)
			continue;
		if (!api_route_match(e2b_routes[i].api.pattern, url, &tmp))
			continue;
		path_seen = true;
		if (!strcmp(e2b_routes[i].api.method, method)) {
			rt = &e2b_routes[i];
			m = tmp;
			break;
		}
	}
	if (!path_seen)
		return E2B_NOT_MINE;
	if (!rt)
		return e2b_ctl_error(r, 405, "method %.16s not allowed on %.200s", method, url);
	er = calloc(1, sizeof(*er));
	if (!er)
		return MHD_NO;
	er->route = rt;
	er->need_auth = need_auth;
	r->state = er;
	r->state_free = e2b_req_free;
	r->match = m;
	/* The unix socket is the operator (admin of `default`, acting for the sandbox's tenant
	 * on envd); on TCP the control plane's X-API-KEY says who calls, and an envd caller acts
	 * as the issuer of its access token (e2b_envd_auth), on its own tenant's sandboxes only
	 * (e2b_envd_sandbox_get). "e2b:envd" is left only on records of refused calls. */
	snprintf(r->who.who, sizeof(r->who.who), "%s", need_auth ? "e2b:envd" : "e2b:unix");
	snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", TENANCY_DEFAULT);
	r->who.role = TENANCY_ADMIN;
	if (rt->kind == E2B_CONTROL || rt->kind == E2B_UPLOAD) {
		/* An id that cannot be one of ours names nothing: each parameter by its shape
		 * (a template name never becomes a path it does not pass). */
		for (unsigned i = 0; i < m.n; i++) {
			const char *v = m.values[i];
			const char *what = param_bad(m.names[i], m.name_lens[i], v);

			if (what)
				return e2b_ctl_error(r, 404, "%s `%.64s` not found", what, v);
		}
	}
	if (rt->kind == E2B_UPLOAD) {
		/* The token is checked by the route's begin (template.c), answered at its end. */
	} else if (rt->kind == E2B_CONTROL) {
		if (need_auth && !e2b_api_key_auth(r)) {
			snprintf(r->who.who, sizeof(r->who.who), "anonymous");
			return e2b_ctl_error(r, 401, "missing or wrong X-API-KEY");
		}
		if (r->who.role < rt->min_role)
			return e2b_ctl_error(r, 403, "a %s token may not %.16s %.200s",
					     tenancy_role_name(r->who.role), method, url);
	} else if (need_auth && is_signed_url(r, rt)) {
		/* A signed /files URL (downloadUrl/uploadUrl) carries no token and, with only
		 * E2B_SANDBOX_URL, no sandbox id: the signature says both (e2b_signed_auth). */
		int sr = e2b_signed_auth(r, strcmp(method, "GET") ? "write" : "read", er->sandbox,
					 sizeof(er->sandbox));

		if (sr == -EKEYEXPIRED)
			return envd_refuse(r, 401, "unauthenticated", "the signed URL has expired");
		if (sr < 0)
			return envd_refuse(r, 401, "unauthenticated",
					   "invalid signature: it does not sign this path, "
					   "operation and user for a live access token");
		snprintf(r->audit_target, sizeof(r->audit_target), "%s", er->sandbox);
		er->signed_url = true;
	} else {
		if (e2b_envd_sandbox(r, er->sandbox, sizeof(er->sandbox)) < 0)
			return envd_refuse(r, 400, "invalid_argument",
					   "missing or invalid E2b-Sandbox-Id header");
		/* Every envd record names the sandbox it acts on. */
		snprintf(r->audit_target, sizeof(r->audit_target), "%s", er->sandbox);
		/* The access token is checked before the sandbox is looked up: without it, a
		 * client learns nothing, not even whether the id exists. It makes the caller
		 * act as the token's issuer, who must still exist (not revoked). */
		if (need_auth && rt->kind == E2B_CODE && !api_header(r, "X-Access-Token")) {
			/* The SDK sends the access token on /execute only: its context calls
			 * rely on port 49999 being public, as E2B serves it. */
			if (e2b_code_public(r, er->sandbox) < 0)
				return envd_refuse(r, 401, "unauthenticated",
						   "missing X-Access-Token, and port 49999 of this "
						   "sandbox is not public");
		} else if (need_auth && e2b_envd_auth(r, er->sandbox) < 0) {
			return envd_refuse(r, 401, "unauthenticated",
					   "missing, wrong or revoked X-Access-Token");
		}
	}
	if (rt->kind == E2B_CODE && r->who.role < rt->min_role)
		return envd_refuse(r, 403, "permission_denied",
				   "a read-only access token may only read");
	if (rt->kind == E2B_ENVD) {
		if (r->who.role < rt->min_role)
			return envd_refuse(r, 403, "permission_denied",
					   "a read-only access token may only read");
		/* A signed URL's user is its signed `username` (files_query): an Authorization
		 * header must not change who it acts as. */
		if (!er->signed_url && e2b_basic_user(api_header(r, MHD_HTTP_HEADER_AUTHORIZATION),
						      er->user, sizeof(er->user)) < 0)
			return envd_refuse(r, 400, "invalid_argument",
					   "Authorization must be `Basic base64(user:)`");
		/* E2B's default user (the SDK names none since envd 0.4.0): `user`, which the
		 * agent creates in every sandbox whose template lacks it (agent/userseed.c). */
		if (!er->user[0])
			snprintf(er->user, sizeof(er->user), "%s", E2B_DEFAULT_USER);
	}
	r->route = &rt->api;
	if (rt->api.begin)
		rt->api.begin(r); /* failures are kept in the route's state, answered at the end */
	return MHD_YES;
}

/* --- unary ---------------------------------------------------------------------------- */

enum MHD_Result e2b_rpc_error(struct api_req *r, const char *code, const char *fmt, ...)
{
	char *msg = NULL;
	enum MHD_Result ret;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	ret = api_respond_json(r, e2b_connect_status(code), e2b_connect_error_json(code, msg));
	free(msg);
	return ret;
}

enum MHD_Result e2b_rpc_err(struct api_req *r, const struct isola_err *e)
{
	return e2b_rpc_error(r, e2b_connect_code(e ? e->code : "internal"), "%s",
			     e && e->message ? e->message : "error");
}

enum MHD_Result e2b_rpc_ok(struct api_req *r, json_t *body)
{
	return api_respond_json(r, 200, body);
}

enum MHD_Result e2b_rpc_unimplemented(struct api_req *r)
{
	return e2b_rpc_error(r, "unimplemented", "%s is not implemented by isola",
			     e2b_req_of(r)->route->api.pattern);
}

static bool content_type_is(struct api_req *r, const char *want)
{
	const char *ct = api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
	size_t n = strlen(want);

	return ct && !strncasecmp(ct, want, n) && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

int e2b_rpc_request(struct api_req *r, bool stream, json_t **msg)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;
	const uint8_t *p = (const uint8_t *)er->body.data;
	size_t n = er->body.len;
	const char *enc = api_header(r, "Connect-Content-Encoding");

	if (er->too_large) {
		e2b_rpc_error(r, "resource_exhausted", "request message is larger than %u bytes",
			      E2B_MAX_BODY);
		return -1;
	}
	if (stream) {
		if (!content_type_is(r, "application/connect+json")) {
			api_respond_json(
				r, 415,
				e2b_connect_error_json("unimplemented",
						       "isola's envd speaks the Connect "
						       "protocol with the JSON codec only"));
			return -1;
		}
		if ((enc && strcmp(enc, "identity") != 0) || e2b_envelope_parse(p, n, &p, &n) < 0) {
			e2b_rpc_error(r, "invalid_argument",
				      "request body must be one uncompressed Connect envelope");
			return -1;
		}
	} else {
		enc = api_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
		if (!content_type_is(r, "application/json")) {
			api_respond_json(
				r, 415,
				e2b_connect_error_json("unimplemented",
						       "isola's envd speaks the Connect "
						       "protocol with the JSON codec only"));
			return -1;
		}
		if (enc && strcmp(enc, "identity") != 0) {
			e2b_rpc_error(r, "unimplemented", "compressed requests are not supported");
			return -1;
		}
	}
	if (e2b_json_parse(p, n, msg, &err) < 0) {
		e2b_rpc_err(r, err);
		return -1;
	}
	return 0;
}

int e2b_envd_sandbox_get(struct api_req *r, struct sandbox **s)
{
	struct e2b_req *er = e2b_req_of(r);

	if (core_sandbox_get(r->srv->core, er->sandbox, s, NULL) < 0)
		return -ENOENT;
	/* On TCP the access token's issuer acts, and only for its own tenant's sandboxes (it
	 * got the token through its tenant's view; this holds if the sandbox changed hands).
	 * The unix socket is the operator, acting for the sandbox's tenant. */
	if (!er->need_auth) {
		snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", sandbox_tenant(*s));
	} else if (strcmp(r->who.tenant, sandbox_tenant(*s)) != 0) {
		sandbox_unref(*s);
		*s = NULL;
		return -ENOENT;
	}
	sandbox_touch(*s);
	return 0;
}

int e2b_rpc_sandbox(struct api_req *r, struct sandbox **s, struct agent_conn **conn)
{
	cleanup_err struct isola_err *err = NULL;

	/* E2B's edge answers 502 for a sandbox that is gone; its SDK turns that (Connect code
	 * unavailable) into "the sandbox was killed or timed out". */
	if (e2b_envd_sandbox_get(r, s) < 0) {
		api_respond_json(r, 502,
				 e2b_connect_error_json("unavailable",
							"sandbox not found: it was killed or its "
							"timeout expired"));
		return -1;
	}
	if (conn && sandbox_agent(*s, conn, &err) < 0) {
		sandbox_unref(*s);
		*s = NULL;
		api_respond_json(
			r, 502,
			e2b_connect_error_json("unavailable", err && err->message
								      ? err->message
								      : "sandbox is not running"));
		return -1;
	}
	return 0;
}

int e2b_agent_call(struct agent_conn *conn, const json_t *req, json_t **result,
		   struct isola_err **err)
{
	json_t *res = NULL;
	int r = agent_call(conn, req, E2B_CALL_MS, &res, err);

	if (result)
		*result = res;
	else
		json_decref(res);
	return r;
}

uint64_t e2b_keepalive_ms(struct api_req *r)
{
	const char *h = api_header(r, "Keepalive-Ping-Interval");
	uint64_t s = 0;

	/* UNTRUSTED: seconds; bounded so a client cannot ask for pings every 0 s. */
	if (!h || api_parse_u64(h, E2B_KEEPALIVE_MAX, &s) < 0 || s == 0)
		return 0;
	return s * 1000;
}

uint64_t e2b_timeout_ms(struct api_req *r)
{
	const char *h = api_header(r, "Connect-Timeout-Ms");
	uint64_t ms = 0;

	if (!h || api_parse_u64(h, (uint64_t)INT32_MAX, &ms) < 0)
		return 0;
	return ms;
}

/* --- server streaming ------------------------------------------------------------------ */

struct e2b_stream {
	struct api_server *srv;	   /* for the stopping flag */
	struct api_stream *st;	   /* the MHD-side stream, set while producing */
	e2b_next_fn next;	   /* producer */
	void *ud;		   /* producer state, owned */
	void (*free_ud)(void *ud); /* releases ud */
	uint64_t keepalive_ms;	   /* 0 = none */
	uint64_t last_sent;	   /* monotonic ms of the last message */
	json_t *keepalive;	   /* keepalive message, owned */
	json_t *end_error;	   /* error for the end-of-stream envelope, owned */
	int fd;			   /* client socket */
};

static void stream_free(void *p)
{
	struct e2b_stream *es = p;

	if (es->free_ud)
		es->free_ud(es->ud);
	json_decref(es->keepalive);
	json_decref(es->end_error);
	free(es);
}

static int stream_produce(struct api_stream *st, void *ud)
{
	struct e2b_stream *es = ud;
	struct api_buf b = {0};
	json_t *end;
	int r;

	es->st = st;
	r = es->next(es, es->ud);
	if (r <= 0)
		return r;
	/* The end-of-stream envelope is mandatory in the Connect protocol. */
	end = es->end_error ? json_pack("{s:O, s:{}}", "error", es->end_error, "metadata")
			    : json_object();
	r = end ? e2b_envelope_append(&b, E2B_FLAG_END, end) : -ENOMEM;
	json_decref(end);
	if (!r)
		r = api_stream_write(st, b.data, b.len);
	api_buf_fini(&b);
	return r < 0 ? -1 : 1;
}

enum MHD_Result e2b_stream_respond(struct api_req *r, const struct e2b_stream_cfg *cfg)
{
	struct e2b_stream *es = calloc(1, sizeof(*es));
	struct MHD_Response *resp;

	if (!es) {
		cfg->free_ud(cfg->ud);
		json_decref(cfg->keepalive);
		return MHD_NO;
	}
	es->srv = r->srv;
	es->next = cfg->next;
	es->ud = cfg->ud;
	es->free_ud = cfg->free_ud;
	es->keepalive_ms = cfg->keepalive_ms;
	es->keepalive = cfg->keepalive;
	es->last_sent = util_now_ms();
	es->fd = api_req_fd(r);
	resp = api_stream_response(r, API_FMT_RAW, MHD_SIZE_UNKNOWN, stream_produce, es,
				   stream_free);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/connect+json");
	return api_respond_response(r, 200, resp);
}

int e2b_stream_msg(struct e2b_stream *es, json_t *j)
{
	struct api_buf b = {0};
	int r;

	if (!j)
		return -ENOMEM;
	r = e2b_envelope_append(&b, 0, j);
	json_decref(j);
	if (!r)
		r = api_stream_write(es->st, b.data, b.len);
	api_buf_fini(&b);
	es->last_sent = util_now_ms();
	return r;
}

void e2b_stream_fail(struct e2b_stream *es, const char *code, const char *message)
{
	if (es->end_error)
		return;
	es->end_error = e2b_connect_error_json(code, message);
}

void e2b_stream_fail_err(struct e2b_stream *es, const struct isola_err *e)
{
	e2b_stream_fail(es, e2b_connect_code(e ? e->code : "internal"),
			e && e->message ? e->message : "error");
}

bool e2b_stream_idle(struct e2b_stream *es)
{
	if (api_fd_peer_gone(es->fd) || api_server_is_stopping(es->srv))
		return true;
	if (es->keepalive_ms && es->keepalive && util_now_ms() - es->last_sent >= es->keepalive_ms)
		e2b_stream_msg(es, json_incref(es->keepalive));
	return false;
}

int e2b_stream_fd(struct e2b_stream *es)
{
	return es->fd;
}
