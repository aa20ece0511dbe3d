/* SPDX-License-Identifier: Apache-2.0 */
/* admin: who am I, tokens, tenants, the audit trail and the compliance report; audit hooks. */
#include "api-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../core/core.h"
#include "../e2b/e2b.h"
#include "../net/net.h"
#include "../tenancy/tenancy.h"

/* --- audit hooks ----------------------------------------------------------------------- */

void api_audit(struct api_req *r, const char *action, const char *target, const char *outcome,
	       const json_t *detail)
{
	audit_append(core_audit(r->srv->core), r->who.who[0] ? r->who.who : "unresolved",
		     r->who.tenant[0] ? r->who.tenant : TENANCY_DEFAULT, action, target, outcome,
		     detail);
}

void api_audit_request(struct api_req *r)
{
	char action[200];
	const char *target = r->audit_target;
	const char *outcome;
	json_t *detail;

	/* The unauthenticated liveness probe is not an action on anything (and would let
	 * anyone on the network grow the trail); nor are the web console's public files. */
	if (!strcmp(r->path, "/v1/health") || api_console_path(r->path))
		return;
	snprintf(action, sizeof(action), "%s %s", r->method,
		 r->route ? r->route->pattern : r->path);
	if (!target[0]) {
		/* The object is the first path parameter ({id}, {name}, {tenant}, {token}). */
		target = r->match.n ? r->match.values[0] : "";
	}
	if (!r->status)
		outcome = "aborted";
	else if (r->status < 400)
		outcome = "ok";
	else if (r->status == 401 || r->status == 403)
		outcome = "denied";
	else
		outcome = "error";
	detail = json_pack("{s:i}", "status", (int)r->status);
	if (detail && r->err_code[0])
		json_object_set_new(detail, "code", json_string(r->err_code));
	api_audit(r, action, target, outcome, detail);
	json_decref(detail);
}

void api_audit_command(struct api_server *srv, const struct tenancy_principal *who,
		       const char *sandbox, const json_t *argv, const char *user, long pid,
		       const json_t *exit, uint64_t started_ms)
{
	/* argv, user, exit status and duration; never the command's output or environment. */
	json_t *d = json_pack("{s:O, s:s, s:I}", "argv", (json_t *)argv, "user", user ? user : "",
			      "pid", (json_int_t)pid);

	if (!d)
		return;
	if (exit) {
		json_object_set(d, "exit_code", json_object_get(exit, "exit_code"));
		json_object_set(d, "signal", json_object_get(exit, "signal"));
		json_object_set(d, "timed_out", json_object_get(exit, "timed_out"));
		json_object_set(d, "duration_ms", json_object_get(exit, "duration_ms"));
	} else {
		json_object_set_new(d, "duration_ms",
				    json_integer((json_int_t)(util_now_ms() - started_ms)));
	}
	audit_append(core_audit(srv->core), who->who, who->tenant, "command", sandbox,
		     exit ? "exited" : "end not seen", d);
	json_decref(d);
}

bool api_deny_unless_operator(struct api_req *r, enum MHD_Result *ret)
{
	if (r->who.role == TENANCY_ADMIN && !strcmp(r->who.tenant, TENANCY_DEFAULT))
		return false;
	*ret = api_respond_error(
		r, "forbidden", "only an admin of the `default` tenant (the operator) may do this");
	return true;
}

/* 403 unless the caller is an admin of some tenant. */
static bool deny_unless_admin(struct api_req *r, enum MHD_Result *ret)
{
	if (r->who.role == TENANCY_ADMIN)
		return false;
	*ret = api_respond_error(r, "forbidden", "this needs a token with the admin role");
	return true;
}

bool api_is_operator(const struct api_req *r)
{
	return r->who.role == TENANCY_ADMIN && !strcmp(r->who.tenant, TENANCY_DEFAULT);
}

enum MHD_Result api_whoami(struct api_req *r)
{
	return api_respond_json(r, 200,
				json_pack("{s:s, s:s, s:s}", "who", r->who.who, "tenant",
					  r->who.tenant, "role", tenancy_role_name(r->who.role)));
}

/* --- tokens ---------------------------------------------------------------------------- */

enum MHD_Result api_token_create(struct api_req *r)
{
	static const char *const fields[] = {"tenant", "role", "name", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *tenant = NULL, *role = NULL, *name = NULL;
	enum tenancy_role rl = TENANCY_USER;
	enum MHD_Result ret;
	json_t *out = NULL;

	if (deny_unless_admin(r, &ret))
		return ret;
	if (!r->json)
		r->json = json_object();
	/* UNTRUSTED: the client's JSON body. */
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_str(r->json, "tenant", 63, &tenant, &err) < 0 ||
	    api_json_str(r->json, "role", 15, &role, &err) < 0 ||
	    api_json_str(r->json, "name", 63, &name, &err) < 0)
		return api_respond_err(r, err);
	if (role && tenancy_role_parse(role, &rl) < 0)
		return api_respond_error(r, "invalid", "role `%s` is not admin, user or read-only",
					 role);
	if (!tenant)
		tenant = r->who.tenant;
	if (!api_is_operator(r) && strcmp(tenant, r->who.tenant) != 0)
		return api_respond_error(
			r, "forbidden", "a tenant admin may create tokens for its own tenant only");
	if (tenancy_token_create(core_tenancy(r->srv->core), tenant, rl, name, &out, &err) < 0)
		return api_respond_err(r, err);
	snprintf(r->audit_target, sizeof(r->audit_target), "%s",
		 json_string_value(json_object_get(out, "id")) ?: "");
	return api_respond_json(r, 201, out);
}

enum MHD_Result api_token_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *tenant = api_query(r, "tenant");
	enum MHD_Result ret;
	json_t *list = NULL;

	if (deny_unless_admin(r, &ret))
		return ret;
	if (!api_is_operator(r))
		tenant = r->who.tenant;
	if (tenancy_token_list(core_tenancy(r->srv->core), tenant, &list, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, json_pack("{s:o}", "tokens", list));
}

enum MHD_Result api_token_revoke(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *id = api_match_get(&r->match, "token");
	enum MHD_Result ret;

	if (deny_unless_admin(r, &ret))
		return ret;
	if (tenancy_token_revoke(core_tenancy(r->srv->core),
				 api_is_operator(r) ? NULL : r->who.tenant, id, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}

/* --- tenants --------------------------------------------------------------------------- */

/* Reads quota fields present in the body into q. UNTRUSTED: the client's JSON. */
static int parse_quota(const json_t *b, struct tenancy_quota *q, struct isola_err **err)
{
	uint64_t sb = q->max_sandboxes, burst = q->create_burst, mem = q->max_memory_bytes,
		 disk = q->max_disk_bytes;
	double cpu = q->max_cpu_millis / 1000.0, rate = q->create_rate;

	if (api_json_uint(b, "max_sandboxes", 1000000, &sb, err) < 0 ||
	    api_json_num(b, "max_cpu", 0, 1e6, &cpu, err) < 0 ||
	    (json_object_get(b, "max_memory") && api_json_size(b, "max_memory", &mem, err) < 0) ||
	    (json_object_get(b, "max_disk") && api_json_size(b, "max_disk", &disk, err) < 0) ||
	    api_json_num(b, "create_rate", 0, 1e6, &rate, err) < 0 ||
	    api_json_uint(b, "create_burst", 1000000, &burst, err) < 0)
		return -EINVAL;
	q->max_sandboxes = (uint32_t)sb;
	q->max_cpu_millis = (uint64_t)(cpu * 1000.0 + 0.5);
	q->max_memory_bytes = mem;
	q->max_disk_bytes = disk;
	q->create_rate = rate;
	q->create_burst = (uint32_t)burst;
	return 0;
}

static const char *const quota_fields[] = {
	"name",	    "max_sandboxes", "max_cpu",	     "max_memory",
	"max_disk", "create_rate",   "create_burst", NULL};

/* {name, quota, usage} of one tenant (new reference), or NULL when it does not exist. */
static json_t *tenant_object(struct api_req *r, const char *name, struct isola_err **err)
{
	struct tenancy_quota q;

	if (tenancy_tenant_get(core_tenancy(r->srv->core), name, &q, err) < 0)
		return NULL;
	return json_pack("{s:s, s:o, s:o}", "name", name, "quota", tenancy_quota_json(&q), "usage",
			 core_tenant_usage(r->srv->core, name));
}

enum MHD_Result api_tenant_create(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct tenancy_quota q = {0};
	const char *name = NULL;
	enum MHD_Result ret;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (!r->json)
		return api_respond_error(r, "invalid", "missing JSON body with `name`");
	if (api_json_only(r->json, quota_fields, &err) < 0 ||
	    api_json_str(r->json, "name", 63, &name, &err) < 0 ||
	    parse_quota(r->json, &q, &err) < 0)
		return api_respond_err(r, err);
	if (!name)
		return api_respond_error(r, "invalid", "missing field `name`");
	if (tenancy_tenant_create(core_tenancy(r->srv->core), name, &q, NULL, &err) < 0)
		return api_respond_err(r, err);
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", name);
	return api_respond_json(r, 201, tenant_object(r, name, &err));
}

enum MHD_Result api_tenant_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list = NULL, *t;
	enum MHD_Result ret;
	size_t i;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (tenancy_tenant_list(core_tenancy(r->srv->core), &list, &err) < 0)
		return api_respond_err(r, err);
	json_array_foreach(list, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));

		json_object_set_new(t, "usage", core_tenant_usage(r->srv->core, name ? name : ""));
	}
	return api_respond_json(r, 200, json_pack("{s:o}", "tenants", list));
}

enum MHD_Result api_tenant_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *name = api_match_get(&r->match, "tenant");
	json_t *t;

	/* A tenant sees itself; another tenant answers like a missing one. */
	if (!api_is_operator(r) && strcmp(name, r->who.tenant) != 0)
		return api_respond_error(r, "not_found", "tenant `%.64s` not found", name);
	t = tenant_object(r, name, &err);
	return t ? api_respond_json(r, 200, t) : api_respond_err(r, err);
}

enum MHD_Result api_tenant_update(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *name = api_match_get(&r->match, "tenant");
	struct tenancy_quota q;
	enum MHD_Result ret;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (!r->json)
		return api_respond_error(r, "invalid", "missing JSON body with quota fields");
	if (tenancy_tenant_get(core_tenancy(r->srv->core), name, &q, &err) < 0 ||
	    api_json_only(r->json, quota_fields + 1, &err) < 0 ||
	    parse_quota(r->json, &q, &err) < 0 ||
	    tenancy_tenant_set_quota(core_tenancy(r->srv->core), name, &q, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, tenant_object(r, name, &err));
}

enum MHD_Result api_tenant_delete(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (core_tenant_remove(r->srv->core, api_match_get(&r->match, "tenant"), &err) < 0)
		return api_respond_err(r, err);
	e2b_tenant_removed(r->srv, api_match_get(&r->match, "tenant"));
	return api_respond_empty(r, 204);
}

/* --- audit ----------------------------------------------------------------------------- */

enum MHD_Result api_audit_verify(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret;
	json_t *rep = NULL;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (audit_verify(core_audit(r->srv->core), &rep, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, rep);
}

/* "1700000000", "1700000000.5" or RFC 3339 UTC "2024-01-02T03:04:05[.123]Z". */
static int parse_since(const char *s, double *out)
{
	struct tm tm = {0};
	const char *end;
	char *e;

	if (!s || !*s)
		return -EINVAL;
	*out = strtod(s, &e);
	if (*e == '\0' && e != s && *out >= 0)
		return 0;
	/* UNTRUSTED: a query value. */
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return -EINVAL;
	*out = (double)timegm(&tm);
	if (*end == '.') {
		double frac = strtod(end, &e);

		*out += frac;
		end = e;
	}
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return -EINVAL;
	return 0;
}

static int export_produce(struct api_stream *st, void *ud)
{
	struct audit_cursor *c = ud;
	const char *line;

	for (int i = 0; i < 256; i++) {
		int r = audit_cursor_next(c, &line);

		if (r <= 0)
			return 1;
		if (api_stream_write(st, line, strlen(line)) < 0 ||
		    api_stream_write(st, "\n", 1) < 0)
			return -1;
	}
	return 0;
}

static void export_free(void *ud)
{
	audit_cursor_free(ud);
}

enum MHD_Result api_audit_export(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *sq = api_query(r, "since");
	struct audit_cursor *c = NULL;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	double since = 0;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (sq && parse_since(sq, &since) < 0)
		return api_respond_error(r, "invalid",
					 "query `since` must be unix seconds or RFC 3339 UTC "
					 "(2024-01-02T03:04:05Z)");
	if (audit_cursor_open(core_audit(r->srv->core), since, &c, &err) < 0)
		return api_respond_err(r, err);
	resp = api_stream_response(r, API_FMT_NDJSON, MHD_SIZE_UNKNOWN, export_produce, c,
				   export_free);
	return resp ? api_respond_response(r, 200, resp) : MHD_NO;
}

enum MHD_Result api_audit_seal(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (audit_seal(core_audit(r->srv->core), &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, audit_status(core_audit(r->srv->core)));
}

enum MHD_Result api_audit_prune(struct api_req *r)
{
	static const char *const fields[] = {"max_age", NULL};
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret;
	uint64_t max_age = 0;
	json_t *out = NULL;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (r->json && (api_json_only(r->json, fields, &err) < 0 ||
			api_json_uint(r->json, "max_age", UINT32_MAX * 100ull, &max_age, &err) < 0))
		return api_respond_err(r, err);
	if (!max_age && !core_config(r->srv->core)->audit_retention_s)
		return api_respond_error(r, "invalid",
					 "no retention is configured: give `max_age` (seconds)");
	if (audit_prune(core_audit(r->srv->core), max_age, &out, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, out);
}

/* --- compliance report ----------------------------------------------------------------- */

/* The egress posture as it is configured now (docs/network.md). */
static json_t *compliance_egress(void)
{
	struct net *n = net_current();

	if (!n)
		return json_pack("{s:s, s:s}", "default", "deny", "detail",
				 "networking is off (--no-network): sandboxes have only a loopback "
				 "interface and no egress path at all");
	return json_pack(
		"{s:s, s:s}", "default", net_config(n)->default_allow ? "allow" : "deny", "detail",
		"each sandbox has its own network namespace whose only reachable host services are "
		"isola's DNS resolver and egress proxy; the proxy and resolver apply the sandbox's "
		"policy (CIDR, domain, port) and always deny metadata, private and host addresses, "
		"judged on the resolved address; no forwarding or NAT");
}

enum MHD_Result api_compliance(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const struct core_config *cfg = core_config(r->srv->core);
	struct audit *a = core_audit(r->srv->core);
	json_t *rep, *verify = NULL, *tokens = NULL, *tenants = NULL, *audit, *data;
	char path[700];
	enum MHD_Result ret;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (audit_verify(a, &verify, &err) < 0 ||
	    tenancy_token_list(core_tenancy(r->srv->core), NULL, &tokens, &err) < 0 ||
	    tenancy_tenant_list(core_tenancy(r->srv->core), &tenants, &err) < 0) {
		json_decref(verify);
		json_decref(tokens);
		return api_respond_err(r, err);
	}
	audit = audit_status(a);
	json_object_set_new(audit, "chain_ok",
			    json_boolean(json_is_true(json_object_get(verify, "ok"))));
	json_object_set(audit, "verify", verify);
	json_object_set_new(audit, "sealing",
			    json_string("HMAC-SHA-512/256 (libsodium crypto_auth) over each closed "
					"segment; records chained with BLAKE2b-256"));
	data = json_object();
	json_object_set_new(data, "state_dir", json_string(cfg->state_dir));
	snprintf(path, sizeof(path), "%s/isola.db", cfg->state_dir);
	json_object_set_new(data, "database", json_string(path));
	snprintf(path, sizeof(path), "%s/sandboxes", cfg->state_dir);
	json_object_set_new(data, "sandboxes", json_string(path));
	snprintf(path, sizeof(path), "%s/templates", cfg->state_dir);
	json_object_set_new(data, "templates", json_string(path));
	json_object_set_new(data, "audit",
			    json_string(json_string_value(json_object_get(audit, "dir"))));
	json_object_set_new(data, "audit_key",
			    json_string(json_string_value(json_object_get(audit, "key_file"))));
	snprintf(path, sizeof(path), "%s/api.token", cfg->state_dir);
	json_object_set_new(data, "api_token", json_string(path));
	snprintf(path, sizeof(path), "%s/keys", cfg->state_dir);
	json_object_set_new(data, "keystore", json_string(path));
	json_object_set_new(data, "control_socket", json_string(r->srv->socket_path));
	snprintf(path, sizeof(path), "%s", cfg->snapshot_dir);
	if (!path[0])
		snprintf(path, sizeof(path), "%s/snapshots", cfg->state_dir);
	json_object_set_new(data, "snapshots", json_string(path));
	snprintf(path, sizeof(path), "%s/network", cfg->state_dir);
	json_object_set_new(data, "network_policies", json_string(path));
	rep = json_pack(
		"{s:f, s:s, s:{s:s, s:[s,s], s:f, s:I, s:I, s:I, s:I, s:I}, s:o, "
		"s:{s:s, s:s, s:s, s:s}, s:s, s:o, s:{s:I, s:I, s:I, s:s}, s:o, s:o, s:o, s:o}",
		"generated_at", util_wall_time(), "version", API_VERSION, "tiers", "default",
		"process", "available", "process", "microvm", "default_cpu",
		cfg->default_cpu_millis / 1000.0, "default_memory",
		(json_int_t)cfg->default_memory_bytes, "default_disk",
		(json_int_t)cfg->default_disk_bytes, "default_pids", (json_int_t)cfg->default_pids,
		"default_ttl_s", (json_int_t)cfg->default_ttl_s, "max_ttl_s",
		(json_int_t)cfg->max_ttl_s, "egress", compliance_egress(), "encryption_at_rest",
		"snapshots",
		"not encrypted: snapshot and hibernation images are files under the snapshot "
		"directory (0700, root), each checked against its SHA-256 manifest on load",
		"keystore",
		"per-object keys with libsodium secretstream (XChaCha20-Poly1305) and "
		"crypto-shredding exist as a module, but nothing uses them yet",
		"database", "not encrypted: protected by file permissions (state dir 0700)",
		"sandbox_files",
		"process tier: writable layers are size-limited tmpfs in RAM, gone when the "
		"sandbox "
		"is destroyed unless snapshotted or hibernated; microvm: a qcow2 overlay in the "
		"sandbox's directory",
		"outbound_connections",
		"isolad opens no outbound connection of its own (no phone-home, no updates). Its "
		"egress proxy and DNS resolver connect only on a sandbox's behalf, to destinations "
		"that sandbox's policy allows (every decision logged), and to the configured DNS "
		"upstream for names a policy allows",
		"audit", audit, "retention", "audit_max_age_s", (json_int_t)cfg->audit_retention_s,
		"sandbox_default_ttl_s", (json_int_t)cfg->default_ttl_s, "sandbox_max_ttl_s",
		(json_int_t)cfg->max_ttl_s, "snapshots",
		"kept until deleted (named) or until the sandbox is destroyed (hibernation "
		"images); "
		"fork snapshots until their last child is gone",
		"admission", core_capacity(r->srv->core), "tenants", tenants, "tokens", tokens,
		"data_locations", data);
	json_decref(verify);
	if (!rep)
		return api_respond_error(r, "internal", "out of memory building the report");
	return api_respond_json(r, 200, rep);
}
