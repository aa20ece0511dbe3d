/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxes: create, list, get, destroy and TTL of sandboxes (/v1/sandboxes). */
#include "api-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../../common/caps.h"
#include "../../common/util.h"
#include "../core/core.h"

static const char *const create_fields[] = {
	"template",	"tier",		  "cpu",      "memory",	       "disk",	  "pids",
	"env",		"workdir",	  "user",     "ttl",	       "labels",  "on_timeout",
	"idle_timeout", "auto_resume",	  "snapshot", "network",       "cap_add", "cap_drop",
	"name",		"rootfs",	  "netns",    "hostname",      "binds",	  "tmpfs",
	"masked_paths", "readonly_paths", "seccomp",  "readonly_root", NULL,
};

/* Applies one of cap_add/cap_drop to *mask. UNTRUSTED: the client's list, each entry a
 * capability name (caps_parse's forms) or, for cap_drop, ALL. */
static int apply_cap_list(const json_t *b, const char *field, bool add, uint64_t *mask,
			  struct isola_err **err)
{
	const json_t *list = json_object_get(b, field), *v;
	size_t i;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > 64)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` must be an array of at most 64 capability names",
				     field);
	json_array_foreach(list, i, v)
	{
		const char *name = json_string_value(v);
		int cap;

		if (!name || strlen(name) > 64)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `%s`: entry %zu is not a capability name",
					     field, i);
		if (!add && !strcasecmp(name, "ALL")) {
			*mask = 0;
			continue;
		}
		cap = caps_parse(name);
		if (cap < 0)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `%s`: unknown capability `%s`", field, name);
		if (add && caps_class_of(cap) == CAPS_NEVER)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `cap_add`: capability `%s` is never granted "
					     "in a sandbox (%s)",
					     caps_name(cap), caps_never_reason(cap));
		if (add)
			*mask |= 1ull << cap;
		else
			*mask &= ~(1ull << cap);
	}
	return 0;
}

/* The sandbox root's capabilities: the default set, less cap_drop (ALL = every one), plus
 * cap_add (as Docker: drops apply first). Neither field: req->caps_set stays false. */
static int parse_caps(const json_t *b, struct sandbox_request *req, struct isola_err **err)
{
	uint64_t mask = CAPS_DEFAULT_MASK;

	if (!json_object_get(b, "cap_add") && !json_object_get(b, "cap_drop"))
		return 0;
	if (apply_cap_list(b, "cap_drop", false, &mask, err) < 0 ||
	    apply_cap_list(b, "cap_add", true, &mask, err) < 0)
		return -EINVAL;
	req->caps_set = true;
	req->caps = mask;
	return 0;
}

/* `binds` (operator only, docs/oci.md): [{source, destination, readonly?, recursive?}] into
 * out (at most TIER_MAX_BINDS); core checks the paths. UNTRUSTED: the client's JSON. */
static int parse_binds(const json_t *b, struct tier_bind *out, unsigned *n, struct isola_err **err)
{
	static const char *const fields[] = {"source", "destination", "readonly", "recursive",
					     NULL};
	const json_t *list = json_object_get(b, "binds"), *v;
	size_t i;

	*n = 0;
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > TIER_MAX_BINDS)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `binds` must be an array of at most %d objects",
				     TIER_MAX_BINDS);
	json_array_foreach(list, i, v)
	{
		const char *src = NULL, *dst = NULL;
		bool ro = false, rec = true;

		if (!json_is_object(v) || !json_object_get(v, "source") ||
		    !json_object_get(v, "destination"))
			return isola_err_set(err, EINVAL, "invalid",
					     "field `binds`: entry %zu must be an object with "
					     "`source` and `destination`",
					     i);
		if (api_json_only(v, fields, err) < 0 ||
		    api_json_str(v, "source", 255, &src, err) < 0 ||
		    api_json_str(v, "destination", 255, &dst, err) < 0 ||
		    api_json_bool(v, "readonly", &ro, err) < 0 ||
		    api_json_bool(v, "recursive", &rec, err) < 0)
			return isola_err_wrap(err, "field `binds`: entry %zu", i);
		memset(&out[*n], 0, sizeof(out[*n]));
		snprintf(out[*n].src, sizeof(out[*n].src), "%s", src);
		snprintf(out[*n].dst, sizeof(out[*n].dst), "%s", dst);
		out[*n].writable = !ro;
		out[*n].single = !rec;
		(*n)++;
	}
	return 0;
}

/* `tmpfs` (docs/oci.md): [{destination, size?, mode?, noexec?, readonly?}] appended to out;
 * core checks the paths and the size against the sandbox's memory. UNTRUSTED: the client's
 * JSON. */
static int parse_tmpfs(const json_t *b, struct tier_mount *out, unsigned *n, struct isola_err **err)
{
	static const char *const fields[] = {"destination", "size",	"mode",
					     "noexec",	    "readonly", NULL};
	const json_t *list = json_object_get(b, "tmpfs"), *v;
	size_t i;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > TIER_MAX_MOUNTS - *n)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `tmpfs` must be an array of at most %u objects",
				     TIER_MAX_MOUNTS - *n);
	json_array_foreach(list, i, v)
	{
		struct tier_mount *m = &out[*n];
		const char *dst = NULL;
		uint64_t mode = 01777;

		memset(m, 0, sizeof(*m));
		if (!json_is_object(v) || !json_object_get(v, "destination"))
			return isola_err_set(err, EINVAL, "invalid",
					     "field `tmpfs`: entry %zu must be an object with a "
					     "`destination`",
					     i);
		if (api_json_only(v, fields, err) < 0 ||
		    api_json_str(v, "destination", 255, &dst, err) < 0 ||
		    api_json_size(v, "size", &m->size, err) < 0 ||
		    api_json_uint(v, "mode", 07777, &mode, err) < 0 ||
		    api_json_bool(v, "noexec", &m->noexec, err) < 0 ||
		    api_json_bool(v, "readonly", &m->readonly, err) < 0)
			return isola_err_wrap(err, "field `tmpfs`: entry %zu", i);
		snprintf(m->path, sizeof(m->path), "%s", dst);
		m->kind = TIER_MOUNT_TMPFS;
		m->mode = (uint32_t)mode;
		(*n)++;
	}
	return 0;
}

/* `masked_paths` / `readonly_paths` (docs/oci.md): arrays of paths appended to out as kind;
 * core checks them. UNTRUSTED: the client's JSON. */
static int parse_paths(const json_t *b, const char *field, enum tier_mount_kind kind,
		       struct tier_mount *out, unsigned *n, struct isola_err **err)
{
	const json_t *list = json_object_get(b, field), *v;
	size_t i;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > TIER_MAX_MOUNTS - *n)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` must be an array of at most %u paths (%d with "
				     "`tmpfs`, `masked_paths` and `readonly_paths` together)",
				     field, TIER_MAX_MOUNTS - *n, TIER_MAX_MOUNTS);
	json_array_foreach(list, i, v)
	{
		if (!json_is_string(v) || json_string_length(v) > 255)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `%s`: entry %zu must be a path of at most "
					     "255 bytes",
					     field, i);
		memset(&out[*n], 0, sizeof(out[*n]));
		snprintf(out[*n].path, sizeof(out[*n].path), "%s", json_string_value(v));
		out[*n].kind = kind;
		(*n)++;
	}
	return 0;
}

/* The create request's tmpfs mounts, masked and read-only paths, in that order. */
static int parse_mounts(const json_t *b, struct tier_mount *out, unsigned *n,
			struct isola_err **err)
{
	*n = 0;
	if (parse_tmpfs(b, out, n, err) < 0 ||
	    parse_paths(b, "masked_paths", TIER_MOUNT_MASKED, out, n, err) < 0 ||
	    parse_paths(b, "readonly_paths", TIER_MOUNT_READONLY, out, n, err) < 0)
		return -EINVAL;
	return 0;
}

/* `seccomp` (docs/oci.md): an OCI `linux.seccomp` object, borrowed from b; core checks and
 * compiles it (core/specseccomp.c). UNTRUSTED: the client's JSON. */
static int parse_seccomp(const json_t *b, struct sandbox_request *req, struct isola_err **err)
{
	const json_t *v = json_object_get(b, "seccomp");

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return isola_err_set(err, EINVAL, "invalid",
				     "field `seccomp` must be an object (the OCI runtime spec's "
				     "`linux.seccomp`)");
	req->seccomp = v;
	return 0;
}

/* Fills req from the body. UNTRUSTED: the client's JSON, validated field by field. */
static int parse_create(const json_t *b, struct sandbox_request *req, struct isola_err **err)
{
	const char *tmpl = NULL, *tier = NULL, *snap = NULL, *name = NULL;
	double cpu = 0;
	uint64_t pids = 0, ttl = 0;

	if (api_json_only(b, create_fields, err) < 0 ||
	    api_json_str(b, "template", sizeof(req->template_name) - 1, &tmpl, err) < 0 ||
	    api_json_str(b, "tier", sizeof(req->tier) - 1, &tier, err) < 0 ||
	    api_json_num(b, "cpu", 0.001, 1024, &cpu, err) < 0 ||
	    api_json_size(b, "memory", &req->memory_bytes, err) < 0 ||
	    api_json_size(b, "disk", &req->disk_bytes, err) < 0 ||
	    api_json_uint(b, "pids", INT32_MAX, &pids, err) < 0 ||
	    api_json_uint(b, "ttl", UINT32_MAX, &ttl, err) < 0 ||
	    api_json_str_map(b, "env", true, &req->env, err) < 0 ||
	    api_json_str_map(b, "labels", false, &req->labels, err) < 0 ||
	    api_json_str(b, "workdir", API_MAX_PATH, &req->workdir, err) < 0 ||
	    api_json_str(b, "user", 64, &req->user, err) < 0 ||
	    api_json_str(b, "snapshot", 63, &snap, err) < 0 ||
	    api_json_str(b, "name", 63, &name, err) < 0 ||
	    api_json_str(b, "rootfs", 500, &req->rootfs, err) < 0 ||
	    api_json_str(b, "netns", 255, &req->netns, err) < 0 ||
	    api_json_str(b, "hostname", 63, &req->hostname, err) < 0 ||
	    api_json_bool(b, "readonly_root", &req->readonly_root, err) < 0 ||
	    api_lifecycle_parse(b, req, err) < 0 || /* on_timeout, idle_timeout, auto_resume */
	    parse_caps(b, req, err) < 0 || parse_seccomp(b, req, err) < 0)
		return -EINVAL;
	if (name) {
		if (!core_sandbox_name_valid(name))
			return isola_err_set(err, EINVAL, "invalid",
					     "invalid sandbox name `%s`: expected 1-63 of "
					     "[a-z0-9_.-], starting with a letter or digit",
					     name);
		req->name = name;
	}
	if (snap) { /* restore from the tenant's named snapshot (core/snapshots.c) */
		if (!api_valid_template_name(snap))
			return isola_err_set(err, EINVAL, "invalid", "invalid snapshot name `%s`",
					     snap);
		req->snapshot = snap;
	}
	if (tmpl) {
		if (*tmpl && !api_valid_template_name(tmpl))
			return isola_err_set(err, EINVAL, "invalid", "invalid template name `%s`",
					     tmpl);
		snprintf(req->template_name, sizeof(req->template_name), "%s", tmpl);
	}
	if (tier && *tier) {
		if (strcmp(tier, "process") != 0 && strcmp(tier, "microvm") != 0)
			return isola_err_set(err, EINVAL, "invalid",
					     "unknown tier `%s`: expected process or microvm",
					     tier);
		snprintf(req->tier, sizeof(req->tier), "%s", tier);
	}
	if (cpu > 0)
		req->cpu_millis = (uint32_t)(cpu * 1000.0 + 0.5);
	req->pids = (uint32_t)pids;
	req->ttl_s = (uint32_t)ttl;
	if (req->workdir && req->workdir[0] != '/')
		return isola_err_set(err, EINVAL, "invalid", "field `workdir` must be absolute");
	return 0;
}

enum MHD_Result api_sandbox_create(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox_request req = {0};
	struct tier_bind binds[TIER_MAX_BINDS];
	struct tier_mount mounts[TIER_MAX_MOUNTS];
	struct sandbox *s = NULL;
	enum MHD_Result ret;

	uint64_t t0 = util_now_ns();

	if (!r->json)
		r->json = json_object();
	if (parse_create(r->json, &req, &err) < 0 || api_network_check(r->json, &err) < 0 ||
	    parse_binds(r->json, binds, &req.n_binds, &err) < 0 ||
	    parse_mounts(r->json, mounts, &req.n_mounts, &err) < 0)
		return api_respond_err(r, err);
	req.binds = binds;
	req.mounts = mounts;
	/* `rootfs` shows any host directory to the sandbox (isola-runc's bundle, docs/oci.md): a
	 * tenant could name /etc or another tenant's files, so only the operator may. */
	if (req.rootfs && (req.snapshot || req.template_name[0]))
		return api_respond_error(r, "invalid",
					 "field `rootfs` cannot be combined with `template` or "
					 "`snapshot`");
	if (req.rootfs && api_deny_unless_operator(r, &ret))
		return ret;
	/* `netns` joins any network namespace on the host, the host's own included (its
	 * interfaces, its loopback services), and `binds` shows (read-write: lets the sandbox
	 * change) any host file: host-level powers, the operator's only. */
	if ((req.netns || req.n_binds) && !api_is_operator(r))
		return api_respond_error(r, "forbidden",
					 "field `%s` names host paths: only an admin of the "
					 "`default` tenant (the operator) may set it",
					 req.netns ? "netns" : "binds");
	/* A restore is a clone of the snapshot's sandbox: its own id as hostname, its own
	 * network, the snapshot's mounts (core/snapshots.c). */
	if (req.snapshot && (req.netns || req.n_binds || req.hostname || req.n_mounts ||
			     req.seccomp || req.readonly_root))
		return api_respond_error(r, "invalid",
					 "field `%s` cannot be combined with `snapshot`",
					 req.netns	     ? "netns"
					 : req.n_binds	     ? "binds"
					 : req.hostname	     ? "hostname"
					 : req.seccomp	     ? "seccomp"
					 : req.readonly_root ? "readonly_root"
							     : "tmpfs/masked_paths/readonly_paths");
	if (req.netns && json_object_get(r->json, "network"))
		return api_respond_error(
			r, "invalid",
			"field `netns` cannot be combined with `network` (a joined "
			"network is the engine's: isola's egress policy does not "
			"apply)");
	req.tenant = api_tenant(r);
	req.retry_after_s = &r->retry_after_s;
	if (core_sandbox_create(r->srv->core, &req, &s, &err) < 0) {
		api_metrics_create(0, err ? err->code : "internal");
		return api_respond_err(r, err);
	}
	api_metrics_create((double)(util_now_ns() - t0) / 1e9, NULL);
	if (api_network_on_create(r, s, &err) < 0) {
		sandbox_unref(s);
		return api_respond_err(r, err);
	}
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", sandbox_id(s));
	api_req_keepalive(r);
	ret = api_respond_json(r, 201, sandbox_to_json(s));
	sandbox_unref(s);
	return ret;
}

/* Collects ?label=k=v pairs into a filter object. */
struct label_ctx {
	json_t *filter;	       /* {k: v} */
	struct isola_err *err; /* first problem, owned */
};

static enum MHD_Result label_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct label_ctx *lc = cls;
	const char *eq;
	char k[64];

	if (strcmp(key, "label") != 0 || lc->err)
		return MHD_YES;
	/* UNTRUSTED: a query value. */
	eq = value ? strchr(value, '=') : NULL;
	if (!eq || eq == value || (size_t)(eq - value) >= sizeof(k) || strlen(eq + 1) > 255) {
		isola_err_set(&lc->err, EINVAL, "invalid", "query `label` must be KEY=VALUE");
		return MHD_NO;
	}
	memcpy(k, value, (size_t)(eq - value));
	k[eq - value] = '\0';
	json_object_set_new(lc->filter, k, json_string(eq + 1));
	return MHD_YES;
}

enum MHD_Result api_sandbox_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct label_ctx lc = {.filter = json_object()};
	json_t *list = NULL;

	if (!lc.filter)
		return MHD_NO;
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, label_arg, &lc);
	if (lc.err) {
		enum MHD_Result ret = api_respond_err(r, lc.err);

		isola_err_free(lc.err);
		json_decref(lc.filter);
		return ret;
	}
	if (core_sandbox_list_for(r->srv->core, api_tenant(r),
				  json_object_size(lc.filter) ? lc.filter : NULL, &list,
				  &err) < 0) {
		json_decref(lc.filter);
		return api_respond_err(r, err);
	}
	/* ?all=true: the tombstones of ended sandboxes too, after the live ones. */
	if (api_query_true(r, "all") &&
	    core_tombstone_list_for(r->srv->core, api_tenant(r),
				    json_object_size(lc.filter) ? lc.filter : NULL, list,
				    &err) < 0) {
		json_decref(lc.filter);
		json_decref(list);
		return api_respond_err(r, err);
	}
	json_decref(lc.filter);
	return api_respond_json(r, 200, json_pack("{s:o}", "sandboxes", list));
}

enum MHD_Result api_sandbox_wait(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *tq = api_query(r, "timeout");
	const char *ref = api_match_get(&r->match, "id");
	uint64_t timeout_ms = UINT64_MAX, start = util_now_ms();
	json_t *out = NULL;
	int ret;

	if (tq && api_parse_seconds_ms(tq, 366ull * 86400 * 1000, &timeout_ms) < 0)
		return api_respond_error(r, "invalid", "query `timeout` must be seconds (>= 0)");
	/* Long poll: the core blocks on its end condition; the slices only let a hang-up or
	 * a stopping server end the wait. */
	for (;;) {
		ret = core_sandbox_wait_for(r->srv->core, api_tenant(r), ref, API_POLL_MS, &out,
					    &err);
		if (ret != -ETIMEDOUT)
			break;
		if (api_fd_peer_gone(api_req_fd(r)) || api_server_is_stopping(r->srv))
			return MHD_NO;
		if (util_now_ms() - start >= timeout_ms) {
			api_req_keepalive(r);
			return api_respond_error(
				r, "timeout", "sandbox `%s` still running after the timeout", ref);
		}
	}
	api_req_keepalive(r);
	if (ret < 0)
		return api_respond_err(r, err);
	if (!json_object_get(out, "message") &&
	    !strcmp(json_string_value(json_object_get(out, "state")) ?: "", "ended")) {
		char msg[512];

		core_tombstone_message(out, msg, sizeof(msg));
		json_object_set_new(out, "message", json_string(msg));
	}
	return api_respond_json(r, 200, out);
}

enum MHD_Result api_sandbox_prune(struct api_req *r)
{
	static const char *const fields[] = {"states", "older_than", NULL};
	cleanup_err struct isola_err *err = NULL;
	json_t *states = r->json ? json_object_get(r->json, "states") : NULL, *v, *out = NULL;
	bool ended = true, errored = true;
	double older = 0;
	size_t i;

	if (r->json && (api_json_only(r->json, fields, &err) < 0 ||
			api_json_num(r->json, "older_than", 0, 1e10, &older, &err) < 0))
		return api_respond_err(r, err);
	/* UNTRUSTED: states, each checked against the two known names. */
	if (states) {
		if (!json_is_array(states) || !json_array_size(states))
			return api_respond_error(r, "invalid",
						 "field `states` must be a non-empty array of "
						 "\"ended\" and \"error\"");
		ended = errored = false;
		json_array_foreach(states, i, v)
		{
			const char *st = json_string_value(v);

			if (st && !strcmp(st, "ended"))
				ended = true;
			else if (st && !strcmp(st, "error"))
				errored = true;
			else
				return api_respond_error(r, "invalid",
							 "field `states`: unknown state `%.32s`: "
							 "expected ended or error",
							 st ? st : "(not a string)");
		}
	}
	if (core_prune_for(r->srv->core, api_tenant(r), ended, errored, older, &out, &err) < 0)
		return api_respond_err(r, err);
	api_req_keepalive(r);
	return api_respond_json(r, 200, json_pack("{s:o}", "removed", out));
}

enum MHD_Result api_sandbox_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox *s = NULL;
	enum MHD_Result ret;
	json_t *body;

	if (core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), &s,
				 &err) < 0)
		return api_respond_err(r, err);
	body = sandbox_to_json(s);
	/* The host pid of the sandbox's init, for the operator only (isola-runc's --pid-file):
	 * a tenant never learns host pids. */
	if (body && api_is_operator(r))
		json_object_set_new(body, "host_pid", json_integer(sandbox_host_pid(s)));
	ret = api_respond_json(r, 200, body);
	sandbox_unref(s);
	return ret;
}

#define CONSOLE_MAX_BYTES (256u * 1024u)

enum MHD_Result api_sandbox_console(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct MHD_Response *resp;
	struct sandbox *s = NULL;
	char *text = NULL;
	size_t len = 0;
	int ret;

	if (core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), &s,
				 &err) < 0)
		return api_respond_err(r, err);
	ret = sandbox_console(s, CONSOLE_MAX_BYTES, &text, &len, &err);
	sandbox_unref(s);
	if (ret < 0)
		return api_respond_err(r, err);
	resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	return api_respond_response(r, 200, resp);
}

enum MHD_Result api_sandbox_delete(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;

	if (core_sandbox_destroy_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"),
				     &err) < 0)
		return api_respond_err(r, err);
	api_req_keepalive(r);
	return api_respond_empty(r, 204);
}

enum MHD_Result api_sandbox_timeout(struct api_req *r)
{
	static const char *const fields[] = {"ttl", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *id = api_match_get(&r->match, "id");
	struct sandbox *s = NULL;
	uint64_t ttl = UINT64_MAX;
	enum MHD_Result ret;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing field `ttl`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_uint(r->json, "ttl", UINT32_MAX, &ttl, &err) < 0)
		return api_respond_err(r, err);
	if (ttl == UINT64_MAX)
		return api_respond_error(r, "invalid", "missing field `ttl`");
	if (core_sandbox_set_ttl_for(r->srv->core, api_tenant(r), id, (uint32_t)ttl, &err) < 0 ||
	    core_sandbox_get_for(r->srv->core, api_tenant(r), id, &s, &err) < 0)
		return api_respond_err(r, err);
	ret = api_respond_json(r, 200, sandbox_to_json(s));
	sandbox_unref(s);
	return ret;
}
