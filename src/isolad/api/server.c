/* SPDX-License-Identifier: Apache-2.0 */
/* server: libmicrohttpd daemons (unix socket + optional TCP), auth, routing table, body limits. */
#include "api.h"
#include "api-internal.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../core/core.h"
#include "../e2b/e2b.h"
#include "mcphttp.h"

/*
 * The routing table: every route of the native API, one per line, between the ROUTES-BEGIN
 * and ROUTES-END markers. tests/unit/api/test_spec.c parses these lines and checks them
 * against docs/openapi.yaml both ways, so keep one ROUTE(...) per line, method and pattern
 * as string literals.
 */
#define ROUTE(m, p, h)                                                                             \
	{                                                                                          \
		m, p, API_BODY_NONE, h, NULL, NULL                                                 \
	}
#define ROUTE_JSON(m, p, h)                                                                        \
	{                                                                                          \
		m, p, API_BODY_JSON, h, NULL, NULL                                                 \
	}
#define ROUTE_STREAM(m, p, b, d, h)                                                                \
	{                                                                                          \
		m, p, API_BODY_STREAM, h, b, d                                                     \
	}

/* clang-format off */
static const struct api_route api_routes[] = {
	/* ROUTES-BEGIN */
	ROUTE("GET", "/v1/health", api_health),
	ROUTE("GET", "/v1/doctor", api_doctor),
	ROUTE_JSON("POST", "/v1/sandboxes", api_sandbox_create),
	ROUTE("GET", "/v1/sandboxes", api_sandbox_list),
	ROUTE_JSON("POST", "/v1/sandboxes/prune", api_sandbox_prune),
	ROUTE("GET", "/v1/sandboxes/{id}", api_sandbox_get),
	ROUTE("DELETE", "/v1/sandboxes/{id}", api_sandbox_delete),
	ROUTE("GET", "/v1/sandboxes/{id}/console", api_sandbox_console),
	ROUTE("GET", "/v1/sandboxes/{id}/wait", api_sandbox_wait),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/timeout", api_sandbox_timeout),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/exec", api_exec),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/processes", api_proc_start),
	ROUTE("GET", "/v1/sandboxes/{id}/processes", api_proc_list),
	ROUTE("GET", "/v1/sandboxes/{id}/processes/{pid}", api_proc_get),
	ROUTE("GET", "/v1/sandboxes/{id}/processes/{pid}/output", api_proc_output),
	ROUTE_STREAM("POST", "/v1/sandboxes/{id}/processes/{pid}/stdin", api_proc_stdin_begin, api_proc_stdin_data, api_proc_stdin_end),
	ROUTE("POST", "/v1/sandboxes/{id}/processes/{pid}/close-stdin", api_proc_close_stdin),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/processes/{pid}/signal", api_proc_signal),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/processes/{pid}/resize", api_proc_resize),
	ROUTE("POST", "/v1/sandboxes/{id}/processes/{pid}/wait", api_proc_wait),
	ROUTE("GET", "/v1/sandboxes/{id}/processes/{pid}/ws", api_proc_ws),
	ROUTE("GET", "/v1/sandboxes/{id}/files", api_file_get),
	ROUTE_STREAM("PUT", "/v1/sandboxes/{id}/files", api_file_put_begin, api_file_put_data, api_file_put_end),
	ROUTE("GET", "/v1/sandboxes/{id}/fs/list", api_fs_list),
	ROUTE("GET", "/v1/sandboxes/{id}/fs/stat", api_fs_stat),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/fs/mkdir", api_fs_mkdir),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/fs/rename", api_fs_rename),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/fs/remove", api_fs_remove),
	ROUTE("GET", "/v1/sandboxes/{id}/archive", api_archive_get),
	ROUTE_STREAM("PUT", "/v1/sandboxes/{id}/archive", api_archive_put_begin, api_archive_put_data, api_archive_put_end),
	ROUTE("GET", "/v1/templates", api_template_list),
	ROUTE_STREAM("POST", "/v1/templates", api_template_import_begin, api_template_import_data, api_template_import_end),
	ROUTE_JSON("POST", "/v1/templates/pull", api_template_pull),
	ROUTE_STREAM("POST", "/v1/templates/build", api_template_build_begin, api_template_import_data, api_template_import_end),
	ROUTE("GET", "/v1/templates/build/cache", api_template_cache_list),
	ROUTE_JSON("POST", "/v1/templates/build/cache/prune", api_template_cache_prune),
	ROUTE("GET", "/v1/templates/{name}", api_template_get),
	ROUTE("DELETE", "/v1/templates/{name}", api_template_delete),
	ROUTE("GET", "/v1/sandboxes/{id}/stats", api_sandbox_stats),
	ROUTE("GET", "/v1/sandboxes/{id}/metrics", api_sandbox_metrics),
	ROUTE("GET", "/metrics", api_metrics),
	ROUTE("GET", "/v1/whoami", api_whoami),
	ROUTE("GET", "/v1/events", api_events),
	ROUTE_JSON("POST", "/v1/tokens", api_token_create),
	ROUTE("GET", "/v1/tokens", api_token_list),
	ROUTE("DELETE", "/v1/tokens/{token}", api_token_revoke),
	ROUTE_JSON("POST", "/v1/tenants", api_tenant_create),
	ROUTE("GET", "/v1/tenants", api_tenant_list),
	ROUTE("GET", "/v1/tenants/{tenant}", api_tenant_get),
	ROUTE_JSON("PUT", "/v1/tenants/{tenant}", api_tenant_update),
	ROUTE("DELETE", "/v1/tenants/{tenant}", api_tenant_delete),
	ROUTE("GET", "/v1/audit/verify", api_audit_verify),
	ROUTE("GET", "/v1/audit/export", api_audit_export),
	ROUTE("POST", "/v1/audit/seal", api_audit_seal),
	ROUTE_JSON("POST", "/v1/audit/prune", api_audit_prune),
	ROUTE("GET", "/v1/compliance", api_compliance),
	ROUTE_JSON("PUT", "/v1/sandboxes/{id}/lifecycle", api_sandbox_lifecycle),
	ROUTE("GET", "/v1/pools", api_pool_list),
	ROUTE_JSON("PUT", "/v1/pools/{template}/{tier}", api_pool_set),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/code/execute", api_code_execute),
	ROUTE("GET", "/v1/sandboxes/{id}/code/contexts", api_code_contexts_list),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/code/contexts", api_code_context_create),
	ROUTE("POST", "/v1/sandboxes/{id}/code/contexts/{ctx}/restart", api_code_context_restart),
	ROUTE("DELETE", "/v1/sandboxes/{id}/code/contexts/{ctx}", api_code_context_delete),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/ports", api_ports_add),
	ROUTE("GET", "/v1/sandboxes/{id}/ports", api_ports_list),
	ROUTE("DELETE", "/v1/sandboxes/{id}/ports/{port}", api_ports_remove),
	ROUTE("GET", "/v1/sandboxes/{id}/network", api_network_get),
	ROUTE_JSON("PUT", "/v1/sandboxes/{id}/network", api_network_put),
	ROUTE("POST", "/v1/sandboxes/{id}/pause", api_sandbox_pause),
	ROUTE("POST", "/v1/sandboxes/{id}/resume", api_sandbox_resume),
	ROUTE("POST", "/v1/sandboxes/{id}/hibernate", api_sandbox_hibernate),
	ROUTE_JSON("POST", "/v1/sandboxes/{id}/fork", api_sandbox_fork),
	ROUTE_JSON("POST", "/v1/snapshots", api_snapshot_create),
	ROUTE("GET", "/v1/snapshots", api_snapshot_list),
	ROUTE("GET", "/v1/snapshots/{name}", api_snapshot_get),
	ROUTE("DELETE", "/v1/snapshots/{name}", api_snapshot_delete),
	ROUTE_STREAM("POST", "/mcp", api_mcp_post_begin, api_mcp_post_data, api_mcp_post),
	ROUTE("DELETE", "/mcp", api_mcp_delete),
	/* ROUTES-END */
};
/* clang-format on */

const char *api_query(struct api_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

bool api_query_true(struct api_req *r, const char *key)
{
	const char *v = api_query(r, key);

	return v && (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"));
}

const char *api_header(struct api_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

void api_req_keepalive(struct api_req *r)
{
	/* Setting 0 then a value restarts MHD's idle timer (microhttpd.h). */
	MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned)API_IDLE_TIMEOUT_S);
}

int api_req_fail(struct api_req *r, struct isola_err *e)
{
	int ret = e ? -e->errnum : -EIO;

	if (r->fail)
		isola_err_free(e);
	else
		r->fail = e;
	return ret;
}

int api_sandbox_agent(struct api_req *r, struct sandbox **s, struct agent_conn **conn,
		      struct isola_err **err)
{
	struct sandbox *sb = NULL;
	int ret;

	ret = core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), &sb,
				   err);
	if (ret < 0)
		return ret;
	sandbox_touch(sb);
	if (conn) {
		ret = sandbox_agent(sb, conn, err);
		if (ret < 0) {
			sandbox_unref(sb);
			return ret;
		}
	}
	*s = sb;
	return 0;
}

bool api_server_worker_enter(struct api_server *srv)
{
	bool ok;

	pthread_mutex_lock(&srv->lock);
	ok = !srv->stopping;
	if (ok)
		srv->workers++;
	pthread_mutex_unlock(&srv->lock);
	return ok;
}

void api_server_worker_leave(struct api_server *srv)
{
	pthread_mutex_lock(&srv->lock);
	srv->workers--;
	pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
}

bool api_server_is_stopping(struct api_server *srv)
{
	bool r;

	pthread_mutex_lock(&srv->lock);
	r = srv->stopping;
	pthread_mutex_unlock(&srv->lock);
	return r;
}

/* Compares without an early exit, so timing says nothing about the token. */
static bool token_equal(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	unsigned char diff = alen != blen;

	for (size_t i = 0; i < blen; i++)
		diff |= (unsigned char)(b[i] ^ (i < alen ? a[i] : 0));
	return diff == 0;
}

/* The unix socket's caller: the built-in admin of `default` (the socket is 0600, so only
 * root or isolad's uid get here — or 0660 with --socket-group, and then that group's members,
 * whom the operator chose to trust alike); the peer uid goes into the audit trail. */
static void unix_principal(struct api_req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cred = {.uid = (uid_t)-1};
	socklen_t len = sizeof(cred);

	if (ci)
		getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
	snprintf(r->who.who, sizeof(r->who.who), "unix:uid=%d", (int)cred.uid);
	snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", TENANCY_DEFAULT);
	r->who.role = TENANCY_ADMIN;
}

/* The token of a browser's WebSocket (route.c, api_ws_protocol_token): only for the attach
 * route, and only when there is no Authorization header (authorized()). */
static const char *ws_protocol_token(struct api_req *r, const char *url, size_t *len)
{
	struct api_match m;

	if (!api_route_match("/v1/sandboxes/{id}/processes/{pid}/ws", url, &m))
		return NULL;
	return api_ws_protocol_token(api_header(r, MHD_HTTP_HEADER_SEC_WEBSOCKET_PROTOCOL), len);
}

/* Resolves the bearer token to r->who: the legacy api.token is the admin of `default`,
 * anything else must be a live tenant token. */
static bool authorized(struct api_req *r, const char *url)
{
	const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *tok = core_api_token(r->srv->core);
	const char *bearer = NULL;
	size_t blen = 0;

	/* UNTRUSTED: the client's Authorization header. */
	snprintf(r->who.who, sizeof(r->who.who), "anonymous");
	if (h && strncmp(h, "Bearer ", 7) == 0) {
		bearer = h + 7;
		blen = strlen(bearer);
	} else if (!h) {
		bearer = ws_protocol_token(r, url, &blen);
	}
	if (!bearer)
		return false;
	if (tok && *tok && token_equal(bearer, blen, tok)) {
		snprintf(r->who.who, sizeof(r->who.who), "api.token");
		snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", TENANCY_DEFAULT);
		r->who.role = TENANCY_ADMIN;
		return true;
	}
	return tenancy_authenticate(core_tenancy(r->srv->core), bearer, blen, &r->who) == 0;
}

/* Finds the route for method+url: 0 found, -ENOENT no path, -EPERM path but not method. */
static int route_find(const char *method, const char *url, const struct api_route **out,
		      struct api_match *m, char *allow, size_t allow_len)
{
	bool path_seen = false;

	allow[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(api_routes); i++) {
		struct api_match tmp;

		if (!api_route_match(api_routes[i].pattern, url, &tmp))
			continue;
		if (!strcmp(api_routes[i].method, method)) {
			*m = tmp;
			*out = &api_routes[i];
			return 0;
		}
		path_seen = true;
		if (strlen(allow) + strlen(api_routes[i].method) + 3 < allow_len) {
			if (allow[0])
				strcat(allow, ", ");
			strcat(allow, api_routes[i].method);
		}
	}
	return path_seen ? -EPERM : -ENOENT;
}

static uint64_t content_length(struct api_req *r, bool *known)
{
	const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t v = 0;

	*known = cl && api_parse_u64(cl, UINT64_MAX, &v) == 0;
	return v;
}

/* True for a Transfer-Encoding value that is exactly one `chunked` coding (any case,
 * optional whitespace around it, no parameters): the only one isola accepts. */
static bool te_is_chunked(const char *v)
{
	size_t n;

	if (!v)
		return false;
	v += strspn(v, " \t");
	n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	return n == 7 && !strncasecmp(v, "chunked", 7);
}

/* Counts the headers that frame the body. */
struct framing {
	unsigned n_cl;	/* Content-Length headers */
	bool cl_differ; /* two of them disagree */
	const char *cl; /* the first one's value */
	unsigned n_te;	/* Transfer-Encoding headers */
	bool te_other;	/* one of them is not exactly `chunked` */
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	struct framing *f = cls;

	/* UNTRUSTED: header names and values from the client; only compared. */
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		if (f->n_cl++ && strcmp(f->cl, value ? value : ""))
			f->cl_differ = true;
		if (f->n_cl == 1)
			f->cl = value ? value : "";
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->n_te++;
		if (!te_is_chunked(value))
			f->te_other = true;
	}
	return MHD_YES;
}

/*
 * A body whose length two headers state differently (two Content-Lengths that disagree,
 * or Content-Length with Transfer-Encoding) is refused before anything else: each reader
 * of such a request may see a different body, the root of request smuggling (RFC 9112
 * 6.3). libmicrohttpd would take the first header and go on.
 */
static bool framing_is_ambiguous(struct api_req *r)
{
	struct framing f = {0};

	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, framing_header, &f);
	return f.cl_differ || (f.n_cl && f.n_te);
}

/*
 * RFC 9112 6.1: a server that gets a transfer coding it does not understand answers 501 or
 * 400, and chunked must be the final coding. libmicrohttpd looks at the first
 * Transfer-Encoding header only and treats anything but `chunked` there as no coding, so
 * `chunked` + `identity`, or `gzip, chunked`, would be read differently by a proxy in front
 * of isolad than by isolad (request smuggling). isolad decodes no coding but chunked: one
 * Transfer-Encoding header whose value is exactly `chunked`, or none.
 */
static bool transfer_encoding_is_refused(struct api_req *r, unsigned *n)
{
	struct framing f = {0};

	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, framing_header, &f);
	*n = f.n_te;
	return f.n_te > 1 || f.te_other;
}

/*
 * {id} of a sandbox route names a sandbox by id or by name: a live one's name becomes its id
 * here, once, for every handler; an ended one (a tombstone) answers 410 `sandbox_ended` with
 * why and when (the wait route answers the tombstone itself). Anything else goes on to the
 * handler, which answers 404 as before.
 */
static bool resolve_sandbox(struct api_req *r, unsigned i, enum MHD_Result *ret)
{
	char id[40];
	char msg[512];
	json_t *ended = NULL, *body;

	if (core_sandbox_resolve_for(r->srv->core, api_tenant(r), r->match.values[i], id,
				     sizeof(id), &ended) == 0) {
		snprintf(r->match.values[i], sizeof(r->match.values[i]), "%s", id);
		return false;
	}
	if (!ended || r->route->handle == api_sandbox_wait) {
		json_decref(ended);
		return false;
	}
	core_tombstone_message(ended, msg, sizeof(msg));
	body = api_error_json("sandbox_ended", msg);
	json_object_set(body, "end_reason", json_object_get(ended, "end_reason"));
	json_object_set(body, "ended_at", json_object_get(ended, "ended_at"));
	json_object_set(body, "detail", json_object_get(ended, "detail"));
	json_object_set(body, "id", json_object_get(ended, "id"));
	json_decref(ended);
	snprintf(r->err_code, sizeof(r->err_code), "sandbox_ended");
	*ret = api_respond_json(r, 410, body);
	return true;
}

/* First call for a request: authenticate, route, check declared sizes, begin a stream. */
static enum MHD_Result request_begin(struct api_listener *lst, struct api_req *r, const char *url,
				     const char *method)
{
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret410;
	char allow[64];
	bool known;
	uint64_t cl;
	unsigned n_te;
	int ret;

	if (framing_is_ambiguous(r))
		return api_respond_error(r, "invalid",
					 "conflicting Content-Length / Transfer-Encoding headers");
	if (transfer_encoding_is_refused(r, &n_te))
		return api_respond_error(
			r, "invalid",
			"Transfer-Encoding: %s; only one header with the single coding `chunked` "
			"is accepted (RFC 9112 6.1)",
			n_te > 1 ? "more than one header" : "a coding other than `chunked`");
	if (!lst->need_auth)
		unix_principal(r);
	/* The web console's static files: public, before any auth (console.c). */
	if (api_console_path(url))
		return api_console_serve(r, url, method);
	/* The E2B-compatible API (src/isolad/e2b) owns every path outside /v1/ that it knows,
	 * with its own auth (X-API-KEY, X-Access-Token) and error shapes. */
	if (strncmp(url, "/v1/", 4) != 0) {
		ret = e2b_request_begin(r, url, method, lst->need_auth);
		if (ret != E2B_NOT_MINE)
			return (enum MHD_Result)ret;
	}
	if (lst->need_auth && !(strcmp(method, "GET") == 0 && strcmp(url, "/v1/health") == 0) &&
	    !authorized(r, url)) {
		struct MHD_Response *resp = api_json_response(
			api_error_json("unauthorized", "missing or wrong bearer token"));

		if (!resp)
			return MHD_NO;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"isola\"");
		snprintf(r->err_code, sizeof(r->err_code), "unauthorized");
		return api_respond_response(r, 401, resp);
	}
	ret = route_find(method, url, &r->route, &r->match, allow, sizeof(allow));
	if (ret == -ENOENT)
		return api_respond_error(r, "not_found", "no route for %.200s", url);
	if (ret == -EPERM) {
		struct MHD_Response *resp = api_json_response(
			api_error_json("method_not_allowed", "method not allowed"));

		if (!resp)
			return MHD_NO;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
		snprintf(r->err_code, sizeof(r->err_code), "method_not_allowed");
		return api_respond_response(r, 405, resp);
	}
	/* Roles: read-only tokens may only read; a WebSocket attach writes stdin. /mcp is a
	 * client of this API with the caller's token: its tools meet the role there. */
	if (r->who.role == TENANCY_READONLY && r->route->handle != api_mcp_post &&
	    r->route->handle != api_mcp_delete &&
	    (strcmp(method, "GET") != 0 || r->route->handle == api_proc_ws))
		return api_respond_error(r, "forbidden", "a read-only token may only read (GET)");
	for (unsigned i = 0; i < r->match.n; i++) {
		char name[16];
		size_t nl = r->match.name_lens[i] < sizeof(name) - 1 ? r->match.name_lens[i]
								     : sizeof(name) - 1;

		memcpy(name, r->match.names[i], nl);
		name[nl] = '\0';
		if (api_param_check(name, r->match.values[i], &err) < 0)
			return api_respond_err(r, err);
		if (!strcmp(name, "id") && resolve_sandbox(r, i, &ret410))
			return ret410;
	}
	cl = content_length(r, &known);
	if (r->route->body == API_BODY_JSON && known && cl > API_MAX_JSON_BODY)
		return api_respond_error(r, "too_large", "JSON body is larger than %u bytes",
					 API_MAX_JSON_BODY);
	if (r->route->body == API_BODY_STREAM && known && cl > r->srv->max_upload)
		return api_respond_error(r, "too_large", "upload is larger than the %llu-byte cap",
					 (unsigned long long)r->srv->max_upload);
	if (r->route->body == API_BODY_STREAM && r->route->begin && r->route->begin(r) < 0)
		return api_respond_err(r, r->fail);
	return MHD_YES;
}

/* A body chunk. UNTRUSTED: bytes from the client, sizes checked against the caps here. */
static enum MHD_Result request_data(struct api_req *r, const char *data, size_t size)
{
	if (r->responded || r->fail) {
		/* Failed already: swallow the rest (MHD can only respond once the body is in),
		 * but not forever. */
		r->discarded += size;
		return r->discarded > API_DISCARD_LIMIT ? MHD_NO : MHD_YES;
	}
	switch (r->route->body) {
	case API_BODY_NONE:
		r->discarded += size;
		return r->discarded > API_DISCARD_LIMIT ? MHD_NO : MHD_YES;
	case API_BODY_JSON: {
		char *nb;

		if (size > API_MAX_JSON_BODY - r->body_len) {
			isola_err_set(&r->fail, E2BIG, "too_large",
				      "JSON body is larger than %u bytes", API_MAX_JSON_BODY);
			return MHD_YES;
		}
		nb = realloc(r->body, r->body_len + size + 1);
		if (!nb)
			return MHD_NO;
		r->body = nb;
		memcpy(r->body + r->body_len, data, size);
		r->body_len += size;
		return MHD_YES;
	}
	case API_BODY_STREAM:
		if (size > r->srv->max_upload - r->uploaded) {
			isola_err_set(&r->fail, EFBIG, "too_large",
				      "upload is larger than the %llu-byte cap",
				      (unsigned long long)r->srv->max_upload);
			return MHD_YES;
		}
		r->uploaded += size;
		r->route->data(r, data, size);
		api_req_keepalive(r);
		return MHD_YES;
	}
	return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct api_listener *lst = cls;
	struct api_req *r = *req_cls;
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->srv = lst->srv;
		r->conn = conn;
		snprintf(r->method, sizeof(r->method), "%s", method);
		snprintf(r->path, sizeof(r->path), "%s", url);
		*req_cls = r;
		return request_begin(lst, r, url, method);
	}
	if (*upload_data_size) {
		ret = request_data(r, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return ret;
	}
	if (r->responded)
		return MHD_YES;
	if (r->fail)
		return api_respond_err(r, r->fail);
	if (r->route->body == API_BODY_JSON && r->body_len) {
		if (api_json_parse_body(r->body, r->body_len, &r->json, &err) < 0)
			return api_respond_err(r, err);
	}
	ret = r->route->handle(r);
	if (ret == MHD_YES && !r->responded)
		return api_respond_error(r, "internal", "handler queued no response");
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api_req *r = *req_cls;

	if (!r)
		return;
	api_audit_request(r);
	api_metrics_request(r);
	if (r->state_free)
		r->state_free(r->state);
	isola_err_free(r->fail);
	json_decref(r->json);
	free(r->body);
	free(r);
	*req_cls = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_warn("http: %s", buf);
}

/* Lets group `gid` through the socket's directory: when isolad owns it and it is not
 * world-writable (never /tmp), its group becomes gid with g+x. */
static int socket_dir_share(const char *dir, gid_t gid, struct isola_err **err)
{
	struct stat st;

	if (stat(dir, &st) < 0)
		return isola_err_sys(err, errno, NULL, "stat `%s`", dir);
	if (st.st_uid != geteuid() || (st.st_mode & S_IWOTH))
		return 0;
	if ((st.st_gid != gid && chown(dir, (uid_t)-1, gid) < 0) ||
	    chmod(dir, (st.st_mode & 07777) | S_IXGRP) < 0)
		return isola_err_sys(err, errno, NULL, "give group %u access to `%s`",
				     (unsigned)gid, dir);
	return 0;
}

static int unix_listen(const char *path, long gid, struct isola_err **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	cleanup_fd int fd = -1;
	char dir[sizeof(sa.sun_path)];
	struct stat st;
	char *slash;
	int r;

	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return isola_err_set(err, ENAMETOOLONG, "invalid",
				     "unix socket path `%s`: empty or too long", path ? path : "");
	strcpy(sa.sun_path, path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		/* The directory is the socket's first gate: 0700 when we create it. */
		r = util_mkdir_p(dir, 0700);
		if (r < 0)
			return isola_err_sys(err, -r, NULL, "create directory `%s`", dir);
		if (gid >= 0 && socket_dir_share(dir, (gid_t)gid, err) < 0)
			return -EPERM;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return isola_err_sys(err, errno, NULL, "socket for `%s`", path);
	if (lstat(path, &st) == 0) {
		cleanup_fd int probe = -1;

		if (!S_ISSOCK(st.st_mode))
			return isola_err_set(err, EEXIST, "conflict",
					     "`%s` exists and is not a socket", path);
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return isola_err_set(err, EADDRINUSE, "conflict",
					     "`%s` is in use by another isolad", path);
		if (unlink(path) < 0 && errno != ENOENT)
			return isola_err_sys(err, errno, NULL, "remove stale socket `%s`", path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return isola_err_sys(err, errno, NULL, "bind `%s`", path);
	/* 0600 (or 0660 to the socket group) before listen: the mode is the unix socket's only
	 * authentication; a member of that group is the operator, as root is. */
	if ((gid >= 0 && chown(path, (uid_t)-1, (gid_t)gid) < 0) ||
	    chmod(path, gid >= 0 ? 0660 : 0600) < 0) {
		r = errno;
		unlink(path);
		return isola_err_sys(err, r, NULL, "chmod `%s`", path);
	}
	if (listen(fd, API_LISTEN_BACKLOG) < 0) {
		r = errno;
		unlink(path);
		return isola_err_sys(err, r, NULL, "listen on `%s`", path);
	}
	return steal_fd(&fd);
}

static int tcp_listen(const char *addr, struct isola_err **err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	cleanup_fd int fd = -1;
	char host[64];
	const char *colon, *h = host;
	int one = 1, r;

	colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= sizeof(host) || !colon[1])
		return isola_err_set(err, EINVAL, "invalid",
				     "listen address `%s`: expected HOST:PORT", addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		host[strlen(host) - 1] = '\0';
		h = host + 1;
	}
	r = getaddrinfo(h, colon + 1, &hints, &ai);
	if (r != 0)
		return isola_err_set(err, EINVAL, "invalid", "listen address `%s`: %s", addr,
				     gai_strerror(r));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = errno;
		freeaddrinfo(ai);
		return isola_err_sys(err, r, NULL, "socket for `%s`", addr);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* The backlog absorbs a burst of connects while the accept thread starts one thread per
	 * connection: with 128, a burst of 200 creates overflowed it, the kernel dropped the
	 * handshake's last ACK and the request data behind it, and the client's retransmission
	 * backoff left one request unanswered for two minutes (test_quota's burst, 1 run in 15). */
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, API_LISTEN_BACKLOG) < 0) {
		r = errno;
		freeaddrinfo(ai);
		return isola_err_sys(err, r, NULL, "listen on `%s`", addr);
	}
	freeaddrinfo(ai);
	return steal_fd(&fd);
}

/*
 * How many connections one listener takes: all the process's fds but API_FD_RESERVE (the
 * store, logs, sandboxes' pidfds and agent sockets), never fewer than 64. The limit is the
 * file limit (raised to the hard one at start), not FD_SETSIZE.
 */
static unsigned connection_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 1024;
	if (rl.rlim_cur > (rlim_t)UINT_MAX)
		rl.rlim_cur = UINT_MAX;
	if (rl.rlim_cur < API_FD_RESERVE + 64)
		return 64;
	return (unsigned)rl.rlim_cur - API_FD_RESERVE;
}

/*
 * A stalled client (headers or body never finished, lying Content-Length) holds one
 * thread until it has been silent for idle_timeout_s; other connections are served by
 * their own threads meanwhile (tests/security/test_api_limits.py).
 *
 * Thread per connection stays (handlers block: long streams, WebSocket upgrades, creates
 * that wait for a sandbox), and MHD_USE_POLL makes the listening thread and every
 * connection's thread wait with poll(): without it libmicrohttpd 0.9.75 uses select() and
 * closes every connection whose fd is >= FD_SETSIZE ("socket descriptor (1036) is not less
 * than FD_SETSIZE"), which past ~330 live sandboxes was most of them
 * (tests/integration/test_api_fds.py). MHD_USE_EPOLL cannot be combined with thread per
 * connection.
 */
static struct MHD_Daemon *daemon_start(int fd, struct api_listener *lst)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
			 MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG | MHD_USE_ITC;

	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, lst, MHD_OPTION_EXTERNAL_LOGGER,
				on_log, NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_MAX_HEADER_BYTES,
				MHD_OPTION_CONNECTION_TIMEOUT, lst->srv->idle_timeout_s,
				MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
}

/*
 * Binding comes before everything else isolad starts: the resolver and the proxy take
 * kernel-picked ports, and one of them once took the API's configured TCP port in the
 * moment between a restart's stop and its bind ("listen on `127.0.0.1:P`: Address already
 * in use", CI's test_restart_reattaches). Binding first also refuses a second isolad on the
 * same socket before it touches the network.
 */
int api_server_bind(const struct api_config *cfg, struct api_server **out, struct isola_err **err)
{
	struct api_server *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	s->ufd = s->tfd = -1;
	s->max_upload = cfg->max_upload_bytes ? cfg->max_upload_bytes : (1ull << 30);
	s->idle_timeout_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : API_IDLE_TIMEOUT_S;
	s->console = !cfg->console_off;
	snprintf(s->spool_dir, sizeof(s->spool_dir), "%s",
		 cfg->spool_dir ? cfg->spool_dir : "/var/lib/isola/tmp");
	if (cfg->listen_addr && *cfg->listen_addr)
		snprintf(s->listen_addr, sizeof(s->listen_addr), "%s", cfg->listen_addr);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->ufd = unix_listen(cfg->socket_path, cfg->socket_gid, err);
	if (s->ufd < 0) {
		r = s->ufd;
		goto err_free;
	}
	snprintf(s->socket_path, sizeof(s->socket_path), "%s", cfg->socket_path);
	if (s->listen_addr[0]) {
		s->tfd = tcp_listen(s->listen_addr, err);
		if (s->tfd < 0) {
			r = s->tfd;
			close(s->ufd);
			unlink(s->socket_path);
			goto err_free;
		}
	}
	*out = s;
	return 0;

err_free:
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return r;
}

/* Frees a server api_server_bind() made that never started serving. */
static void unbound(struct api_server *s)
{
	if (s->tfd >= 0)
		close(s->tfd);
	if (s->ufd >= 0)
		close(s->ufd);
	unlink(s->socket_path);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int api_server_start(struct core *c, struct api_server *s, struct isola_err **err)
{
	s->core = c;
	s->unix_l = (struct api_listener){.srv = s, .need_auth = false};
	s->tcp_l = (struct api_listener){.srv = s, .need_auth = true};
	s->unix_d = daemon_start(s->ufd, &s->unix_l);
	if (!s->unix_d) {
		isola_err_set(err, EIO, "internal", "start HTTP daemon on `%s`", s->socket_path);
		unbound(s);
		return -EIO;
	}
	s->ufd = -1; /* the daemon's now; quiescing hands it back at stop */
	if (s->tfd >= 0) {
		s->tcp_d = daemon_start(s->tfd, &s->tcp_l);
		if (!s->tcp_d) {
			isola_err_set(err, EIO, "internal", "start HTTP daemon on `%s`",
				      s->listen_addr);
			MHD_stop_daemon(s->unix_d);
			unbound(s);
			return -EIO;
		}
		s->tfd = -1;
	}
	s->serving = true;
	mcp_http_start(s);
	log_info("api: listening on %s%s%s", s->socket_path, s->tcp_d ? " and " : "",
		 s->tcp_d ? s->listen_addr : "");
	return 0;
}

void api_server_stop(struct api_server *s)
{
	MHD_socket ul, tl = MHD_INVALID_SOCKET;

	if (!s)
		return;
	if (!s->serving) {
		unbound(s);
		return;
	}
	mcp_http_stop(); /* its calls are killed through the API, still serving */
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	/* Quiescing hands the listening sockets back to us: no new connections. */
	if (s->tcp_d)
		tl = MHD_quiesce_daemon(s->tcp_d);
	ul = MHD_quiesce_daemon(s->unix_d);
	/* WebSocket sessions and imports notice `stopping` within API_POLL_MS. */
	pthread_mutex_lock(&s->lock);
	while (s->workers)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	if (s->tcp_d)
		MHD_stop_daemon(s->tcp_d);
	MHD_stop_daemon(s->unix_d);
	if (tl != MHD_INVALID_SOCKET)
		close(tl);
	if (ul != MHD_INVALID_SOCKET)
		close(ul);
	unlink(s->socket_path);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
