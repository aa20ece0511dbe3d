/* SPDX-License-Identifier: Apache-2.0 */
/* tools_sandbox: MCP tools on whole sandboxes — create, destroy, list, snapshot, fork, expose. */
#include "mcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../output.h"
#include "../parse.h"

#define SID_LEN 96 /* room for a sandbox id */

int mcp_tool_create(struct mcp_call *c, json_t *args, struct mcp_result *res,
		    struct isola_err **err)
{
	static const char *const str_keys[] = {"template", "workdir", "user", "tier", "snapshot"};
	json_t *body = json_object(), *sb = NULL, *map, *mem, *allow;
	long long ttl = -1, pids = -1;
	struct client *cl;
	const char *s;
	struct sbuf b = {0};
	int r = 0;

	if (!body)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < ARRAY_SIZE(str_keys) && r == 0; i++) {
		r = mcp_arg_str(args, str_keys[i], false, &s, err);
		if (r == 0 && s)
			json_object_set_new(body, str_keys[i], json_string(s));
	}
	if (r == 0 && json_is_number(json_object_get(args, "cpu")))
		json_object_set(body, "cpu", json_object_get(args, "cpu"));
	else if (r == 0 && json_object_get(args, "cpu"))
		r = isola_err_set(err, EINVAL, MCP_ERR_PARAMS, "argument `cpu` must be a number");
	mem = json_object_get(args, "memory");
	if (r == 0 && (json_is_integer(mem) || json_is_string(mem)))
		json_object_set(body, "memory", mem);
	else if (r == 0 && mem)
		r = isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				  "argument `memory` must be bytes or a size like \"512M\"");
	if (r == 0)
		r = mcp_arg_int(args, "ttl", 0, 4294967295LL, &ttl, err);
	if (r == 0)
		r = mcp_arg_int(args, "pids", 1, 2147483647LL, &pids, err);
	if (r == 0 && ttl >= 0)
		json_object_set_new(body, "ttl", json_integer(ttl));
	if (r == 0 && pids >= 0)
		json_object_set_new(body, "pids", json_integer(pids));
	if (r == 0 && (r = mcp_arg_map(args, "env", &map, err)) == 0 && map)
		json_object_set(body, "env", map);
	if (r == 0 && (r = mcp_arg_map(args, "labels", &map, err)) == 0 && map)
		json_object_set(body, "labels", map);
	/* Network allowlist: deny by default, these destinations allowed (the API checks them). */
	allow = json_object_get(args, "network_allow");
	if (r == 0 && allow && !json_is_null(allow)) {
		if (!json_is_array(allow))
			r = isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
					  "argument `network_allow` must be an array of strings");
		else
			json_object_set_new(
				body, "network",
				json_pack("{s:s, s:O}", "default", "deny", "allow", allow));
	}
	if (r == 0 && !(cl = mcp_client(c, err)))
		r = -EIO;
	if (r == 0)
		r = client_json(cl, "POST", "/v1/sandboxes", body, &sb, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b, "Created sandbox %s (template %s, tier %s).\n",
		  json_string_value(json_object_get(sb, "id")) ?: "?",
		  json_string_value(json_object_get(sb, "template")) ?: "?",
		  json_string_value(json_object_get(sb, "tier")) ?: "?");
	res->data = sb;
	return sb_finish(&b, res, err);
}

int mcp_tool_destroy(struct mcp_call *c, json_t *args, struct mcp_result *res,
		     struct isola_err **err)
{
	cleanup_free char *url = NULL;
	struct sbuf b = {0};
	const char *id;
	int r;

	if ((r = mcp_arg_str(args, "sandbox_id", true, &id, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s", id);
	if ((r = mcp_api(c, "DELETE", url, NULL, NULL, err)) < 0)
		return r;
	mcp_forget_default(c->s, id);
	sb_printf(&b, "Destroyed sandbox %s.", id);
	return sb_finish(&b, res, err);
}

int mcp_tool_list(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	struct sbuf path = {0}, b = {0};
	json_t *labels, *out = NULL, *sb, *v, *list;
	const char *k;
	struct client *cl;
	size_t i;
	int r;

	if ((r = mcp_arg_map(args, "labels", &labels, err)) < 0)
		return r;
	sb_printf(&path, "/v1/sandboxes");
	json_object_foreach(labels, k, v)
	{
		cleanup_free char *kv = NULL, *q = NULL;

		if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0 ||
		    !(q = cli_pathf("%s", kv))) {
			path.oom = true;
			break;
		}
		sb_printf(&path, "%clabel=%s", strchr(path.s, '?') ? '&' : '?', q);
	}
	if (path.oom) {
		free(path.s);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	cl = mcp_client(c, err);
	r = cl ? client_json(cl, "GET", path.s, NULL, &out, err) : -EIO;
	free(path.s);
	if (r < 0)
		return r;
	list = json_array();
	json_array_foreach(json_object_get(out, "sandboxes"), i, sb)
	{
		cleanup_free char *dump = json_object_size(json_object_get(sb, "labels"))
						  ? out_fmt_value(json_object_get(sb, "labels"))
						  : NULL;

		sb_printf(&b, "%s  %-9s %-8s %s%s%s\n",
			  json_string_value(json_object_get(sb, "id")) ?: "?",
			  json_string_value(json_object_get(sb, "state")) ?: "?",
			  json_string_value(json_object_get(sb, "tier")) ?: "?",
			  json_string_value(json_object_get(sb, "template")) ?: "?",
			  dump && *dump ? "  " : "", dump ?: "");
		json_array_append_new(
			list, json_pack("{s:s?, s:s?, s:s?, s:s?, s:O?}", "id",
					json_string_value(json_object_get(sb, "id")), "state",
					json_string_value(json_object_get(sb, "state")), "tier",
					json_string_value(json_object_get(sb, "tier")), "template",
					json_string_value(json_object_get(sb, "template")),
					"labels", json_object_get(sb, "labels")));
	}
	if (!json_array_size(json_object_get(out, "sandboxes")))
		sb_printf(&b, "(no sandboxes)\n");
	json_decref(out);
	res->data = json_pack("{s:o}", "sandboxes", list);
	return sb_finish(&b, res, err);
}

int mcp_tool_snapshot(struct mcp_call *c, json_t *args, struct mcp_result *res,
		      struct isola_err **err)
{
	const char *id, *name;
	json_t *body, *out = NULL;
	char sid[SID_LEN];
	struct sbuf b = {0};
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "name", true, &name, err)) < 0)
		return r;
	body = json_pack("{s:s, s:s}", "sandbox", id, "name", name);
	if (!body)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = mcp_api(c, "POST", "/v1/snapshots", body, &out, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b,
		  "Took snapshot `%s` of sandbox %s (%s, %lld bytes). Start new sandboxes from it "
		  "with sandbox_create {\"snapshot\": \"%s\"}; it survives the sandbox.\n",
		  name, id, json_string_value(json_object_get(out, "level")) ?: "?",
		  (long long)json_integer_value(json_object_get(out, "size")), name);
	json_decref(out);
	return sb_finish(&b, res, err);
}

int mcp_tool_fork(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	long long count = 1;
	json_t *body, *out = NULL, *kid, *ids;
	char sid[SID_LEN];
	struct sbuf b = {0};
	const char *id;
	size_t i;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_int(args, "count", 1, 16, &count, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/fork", id);
	if (!(body = json_pack("{s:I}", "count", (json_int_t)count)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = mcp_api(c, "POST", url, body, &out, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b, "Forked sandbox %s into %zu new sandboxes (%s; source paused %lld us):\n", id,
		  json_array_size(json_object_get(out, "children")),
		  json_string_value(json_object_get(out, "level")) ?: "?",
		  (long long)json_integer_value(json_object_get(out, "paused_us")));
	ids = json_array();
	json_array_foreach(json_object_get(out, "children"), i, kid)
	{
		const char *k = json_string_value(json_object_get(kid, "id")) ?: "?";

		sb_printf(&b, "%s\n", k);
		json_array_append_new(ids, json_string(k));
	}
	json_decref(out);
	res->data = json_pack("{s:o}", "children", ids);
	return sb_finish(&b, res, err);
}

int mcp_tool_expose(struct mcp_call *c, json_t *args, struct mcp_result *res,
		    struct isola_err **err)
{
	cleanup_free char *url = NULL;
	long long port = 0;
	bool pub = false;
	json_t *body, *out = NULL;
	char sid[SID_LEN];
	struct sbuf b = {0};
	const char *id, *u;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_int(args, "port", 1, 65535, &port, err)) < 0 ||
	    (r = mcp_arg_bool(args, "public", &pub, err)) < 0)
		return r;
	if (!port)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "missing required argument `port`");
	url = cli_pathf("/v1/sandboxes/%s/ports", id);
	if (!(body = json_pack("{s:I, s:b}", "port", (json_int_t)port, "public", pub)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = mcp_api(c, "POST", url, body, &out, err);
	json_decref(body);
	if (r < 0)
		return r;
	u = json_string_value(json_object_get(out, "url"));
	sb_printf(&b, "Port %lld of sandbox %s is at %s (also %s).%s%s\n", port, id, u ?: "?",
		  json_string_value(json_object_get(out, "path_url")) ?: "?",
		  json_object_get(out, "token") ? " Send the header X-Isola-Access-Token: " : "",
		  json_string_value(json_object_get(out, "token")) ?: "");
	res->data = json_pack("{s:I, s:s?, s:s?, s:b, s:s?}", "port", (json_int_t)port, "url", u,
			      "path_url", json_string_value(json_object_get(out, "path_url")),
			      "public", json_is_true(json_object_get(out, "public")), "token",
			      json_string_value(json_object_get(out, "token")));
	json_decref(out);
	return sb_finish(&b, res, err);
}
