/* SPDX-License-Identifier: Apache-2.0 */
/* snapshot: E2B's snapshots (create, list, delete) and fork, mapped onto core/snapshots.c. */
#include "e2b-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../core/core.h"

/*
 * E2B's snapshot is a template made from a sandbox: `Sandbox.createSnapshot(id, {name})`
 * answers {snapshotID, names}, `Sandbox.create(snapshotID)` starts a sandbox from it and
 * `Sandbox.deleteSnapshot(snapshotID)` is DELETE /templates/{snapshotID}. isola's named
 * snapshots of a tenant are exactly that (immutable, outliving their source), so the
 * snapshotID is the isola snapshot's name: `isola snapshot ls` and /v1/snapshots show it.
 * A fork is core's fork: one internal snapshot, `count` children restored from it.
 */

#define SNAP_LIST_MAX	 100 /* page size cap of GET /snapshots */
#define FORK_DEFAULT_TTL 15  /* s: E2B's SandboxForkRequest.timeout default */
#define FORK_MAX_COUNT	 16  /* children per E2B fork call (core caps it too) */

/* E2B's SnapshotInfo of an isola snapshot object (new reference). */
static json_t *snap_info(const json_t *snap)
{
	const char *name = json_string_value(json_object_get(snap, "name"));

	return json_pack("{s:s, s:[s]}", "snapshotID", name ? name : "", "names", name ? name : "");
}

enum MHD_Result e2b_ctl_snapshot(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *id = api_match_get(&r->match, "id"), *name = NULL;
	char gen[64];
	json_t *b = NULL, *out = NULL, *d;
	enum MHD_Result ret;

	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	/* UNTRUSTED: the client's body; the name becomes a snapshot name (a host directory
	 * name is never made from it: core keys snapshots by its own ids). */
	if (e2b_jstr(b, "name", NULL, 63, &name, &err) < 0) {
		ret = e2b_ctl_error(r, 400, "%s", err->message);
		goto out;
	}
	if (name && !api_valid_template_name(name)) {
		ret = e2b_ctl_error(r, 400,
				    "invalid snapshot name `%.64s`: 1-63 characters, no `/`, not "
				    "starting with `.` or `-`",
				    name);
		goto out;
	}
	if (!name) {
		unsigned char rnd[4];

		if (util_random(rnd, sizeof(rnd)) < 0) {
			ret = e2b_ctl_error(r, 500, "no randomness for a snapshot name");
			goto out;
		}
		snprintf(gen, sizeof(gen), "snapshot-%.40s-%02x%02x%02x%02x", id, rnd[0], rnd[1],
			 rnd[2], rnd[3]);
		name = gen;
	}
	if (core_snapshot_create_for(r->srv->core, api_tenant(r), id, name, &out, &err) < 0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	d = json_pack("{s:s, s:O}", "snapshot", name, "id", json_object_get(out, "id"));
	api_audit(r, "sandbox.snapshot", id, "ok", d);
	json_decref(d);
	api_req_keepalive(r);
	ret = api_respond_json(r, 201, snap_info(out));
out:
	json_decref(out);
	json_decref(b);
	return ret;
}

/* Newest first, then by name: the order pages are cut in. */
static int snap_cmp(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	double tx = json_number_value(json_object_get(x, "created_at"));
	double ty = json_number_value(json_object_get(y, "created_at"));

	if (tx != ty)
		return tx > ty ? -1 : 1;
	return strcmp(json_string_value(json_object_get(x, "name")),
		      json_string_value(json_object_get(y, "name")));
}

enum MHD_Result e2b_ctl_snapshot_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *sq = api_query(r, "sandboxID"), *nq = api_query(r, "name");
	const char *lq = api_query(r, "limit"), *tq = api_query(r, "nextToken");
	uint64_t limit = SNAP_LIST_MAX, skip = 0;
	json_t *list = NULL, *out = NULL, *e, **v = NULL;
	enum MHD_Result ret;
	size_t i, n = 0, k;
	char next[24] = "";

	/* nextToken is the count of items already returned (opaque to the SDK). */
	if ((lq && (api_parse_u64(lq, SNAP_LIST_MAX, &limit) < 0 || limit == 0)) ||
	    (tq && *tq && api_parse_u64(tq, UINT32_MAX, &skip) < 0))
		return e2b_ctl_error(
			r, 400, "query `%s` is invalid",
			lq && (api_parse_u64(lq, SNAP_LIST_MAX, &limit) < 0 || limit == 0)
				? "limit"
				: "nextToken");
	if (core_snapshot_list_for(r->srv->core, api_tenant(r), &list, &err) < 0)
		return e2b_ctl_err(r, err);
	v = calloc(json_array_size(list) + 1, sizeof(*v));
	out = json_array();
	if (!v || !out) {
		ret = MHD_NO;
		goto out;
	}
	json_array_foreach(list, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *src = json_string_value(json_object_get(e, "source"));

		if (!name || !*name || (sq && (!src || strcmp(sq, src))) ||
		    (nq && strcmp(nq, name)))
			continue;
		v[n++] = e;
	}
	qsort(v, n, sizeof(*v), snap_cmp);
	for (k = skip; k < n && k - skip < limit; k++)
		json_array_append_new(out, snap_info(v[k]));
	if (k < n)
		snprintf(next, sizeof(next), "%zu", k);
	ret = e2b_ctl_page(r, out, next);
out:
	free(v);
	json_decref(out);
	json_decref(list);
	return ret;
}

enum MHD_Result e2b_ctl_snapshot_delete(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *name = api_match_get(&r->match, "id");

	/* Only snapshots: isola's templates are managed with `isola template` (docs/e2b.md). */
	if (!api_valid_template_name(name) || !e2b_is_snapshot(r, name))
		return e2b_ctl_error(r, 404, "snapshot `%.64s` not found", name);
	if (core_snapshot_delete_for(r->srv->core, api_tenant(r), name, &err) < 0)
		return e2b_ctl_err(r, err);
	api_audit(r, "snapshot.delete", name, "ok", NULL);
	return api_respond_empty(r, 204);
}

enum MHD_Result e2b_ctl_fork(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *id = api_match_get(&r->match, "id");
	uint64_t count = 1, timeout = FORK_DEFAULT_TTL;
	json_t *b = NULL, *out = NULL, *res = NULL, *kid, *ids, *d;
	enum MHD_Result ret;
	size_t i;

	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	if (e2b_juint(b, "count", NULL, FORK_MAX_COUNT, &count, &err) < 0 ||
	    e2b_juint(b, "timeout", NULL, UINT32_MAX, &timeout, &err) < 0) {
		ret = e2b_ctl_error(r, 400, "%s", err->message);
		goto out;
	}
	if (count == 0 || timeout == 0) {
		ret = e2b_ctl_error(r, 400, "`%s` must be at least 1", count ? "timeout" : "count");
		goto out;
	}
	/* A killed (or another tenant's) sandbox is `not_found`: 404, the SDK's
	 * SandboxNotFoundError. All or nothing in core, so every entry is a sandbox. */
	if (core_sandbox_fork_for(r->srv->core, api_tenant(r), id, (unsigned)count, &out, &err) <
	    0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	res = json_array();
	ids = json_array();
	json_array_foreach(json_object_get(out, "children"), i, kid)
	{
		const char *kid_id = json_string_value(json_object_get(kid, "id"));
		cleanup_err struct isola_err *e2 = NULL;
		struct sandbox *ks = NULL;
		json_t *entry;

		json_array_append(ids, json_object_get(kid, "id"));
		/* Each fork lives `timeout` seconds; its ports are public like any E2B sandbox's. */
		if (core_sandbox_set_ttl_for(r->srv->core, api_tenant(r), kid_id, (uint32_t)timeout,
					     &e2) < 0 ||
		    core_sandbox_get_for(r->srv->core, api_tenant(r), kid_id, &ks, &e2) < 0) {
			entry = json_pack("{s:{s:i, s:s}}", "error", "code",
					  (int)api_status_for_code(e2 ? e2->code : "internal"),
					  "message", e2 && e2->message ? e2->message : "error");
		} else {
			e2b_ctl_expose_all(ks);
			entry = json_pack("{s:o}", "sandbox", e2b_sandbox_obj(r, kid, false));
		}
		sandbox_unref(ks);
		json_array_append_new(res, entry);
	}
	d = json_pack("{s:o, s:O*}", "children", ids, "paused_us",
		      json_object_get(out, "paused_us"));
	api_audit(r, "sandbox.fork", id, "ok", d);
	json_decref(d);
	api_req_keepalive(r);
	ret = api_respond_json(r, 201, res);
out:
	json_decref(out);
	json_decref(b);
	return ret;
}
