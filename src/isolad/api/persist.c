/* SPDX-License-Identifier: Apache-2.0 */
/* persist: pause, resume, hibernate, fork and named snapshots (/v1/sandboxes/{id}/..., /v1/snapshots). */
#include "api-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../common/util.h"
#include "../core/core.h"

typedef int (*persist_fn)(struct core *c, const char *tenant, const char *id,
			  struct isola_err **err);

/* Runs a state change on {id} and answers with the sandbox as it is afterwards. */
static enum MHD_Result persist_state_change(struct api_req *r, persist_fn fn)
{
	cleanup_err struct isola_err *err = NULL;
	const char *id = api_match_get(&r->match, "id");
	struct sandbox *s = NULL;
	enum MHD_Result ret;

	if (fn(r->srv->core, api_tenant(r), id, &err) < 0 ||
	    core_sandbox_get_for(r->srv->core, api_tenant(r), id, &s, &err) < 0)
		return api_respond_err(r, err);
	api_req_keepalive(r);
	ret = api_respond_json(r, 200, sandbox_to_json(s));
	sandbox_unref(s);
	return ret;
}

enum MHD_Result api_sandbox_pause(struct api_req *r)
{
	return persist_state_change(r, core_sandbox_pause_for);
}

enum MHD_Result api_sandbox_resume(struct api_req *r)
{
	return persist_state_change(r, core_sandbox_resume_for);
}

enum MHD_Result api_sandbox_hibernate(struct api_req *r)
{
	enum MHD_Result ret = persist_state_change(r, core_sandbox_hibernate_for);

	if (r->status == 200) {
		/* The audit names the image the sandbox now lives in (docs/persistence.md). */
		const char *id = api_match_get(&r->match, "id");
		char image[64];
		json_t *d;

		snprintf(image, sizeof(image), "hibernated/%.40s", id);
		d = json_pack("{s:s}", "snapshot", image);
		api_audit(r, "sandbox.hibernate", id, "ok", d);
		json_decref(d);
	}
	return ret;
}

enum MHD_Result api_sandbox_fork(struct api_req *r)
{
	static const char *const fields[] = {"count", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *id = api_match_get(&r->match, "id");
	uint64_t count = 1;
	json_t *out = NULL, *kids, *ids, *k, *d;
	size_t i;

	/* UNTRUSTED: the client's JSON; count bounded here and again in core. */
	if (r->json && (api_json_only(r->json, fields, &err) < 0 ||
			api_json_uint(r->json, "count", 1024, &count, &err) < 0))
		return api_respond_err(r, err);
	if (core_sandbox_fork_for(r->srv->core, api_tenant(r), id, (unsigned)count, &out, &err) < 0)
		return api_respond_err(r, err);
	kids = json_object_get(out, "children");
	ids = json_array();
	json_array_foreach(kids, i, k) json_array_append(ids, json_object_get(k, "id"));
	d = json_pack("{s:O, s:o, s:O}", "snapshot", json_object_get(out, "snapshot"), "children",
		      ids, "paused_us", json_object_get(out, "paused_us"));
	api_audit(r, "sandbox.fork", id, "ok", d);
	json_decref(d);
	api_req_keepalive(r);
	return api_respond_json(r, 201, out);
}

enum MHD_Result api_snapshot_create(struct api_req *r)
{
	static const char *const fields[] = {"sandbox", "name", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *id = NULL, *name = NULL;
	json_t *out = NULL, *d;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing fields `sandbox` and `name`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_str(r->json, "sandbox", 39, &id, &err) < 0 ||
	    api_json_str(r->json, "name", 63, &name, &err) < 0)
		return api_respond_err(r, err);
	if (!id || !name)
		return api_respond_error(r, "invalid", "missing field `%s`",
					 id ? "name" : "sandbox");
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", id);
	if (core_snapshot_create_for(r->srv->core, api_tenant(r), id, name, &out, &err) < 0)
		return api_respond_err(r, err);
	d = json_pack("{s:s, s:O}", "snapshot", name, "id", json_object_get(out, "id"));
	api_audit(r, "sandbox.snapshot", id, "ok", d);
	json_decref(d);
	api_req_keepalive(r);
	return api_respond_json(r, 201, out);
}

enum MHD_Result api_snapshot_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list = NULL;

	if (core_snapshot_list_for(r->srv->core, api_tenant(r), &list, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, json_pack("{s:o}", "snapshots", list));
}

enum MHD_Result api_snapshot_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *out = NULL;

	if (core_snapshot_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "name"),
				  &out, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, out);
}

enum MHD_Result api_snapshot_delete(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;

	if (core_snapshot_delete_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "name"),
				     &err) < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}
