/* SPDX-License-Identifier: Apache-2.0 */
/* snapshots: named and fork snapshots — take, list, delete, restore from, fork, reconcile. */
#include "core-internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../snapshots/snapdir.h"
#include "../tenancy/tenancy.h"

#define FORK_MAX_CHILDREN 64

static const char *level_name(int level)
{
	return level == TIER_PERSIST_MEMORY  ? "files+memory"
	       : level == TIER_PERSIST_FILES ? "files"
					     : "none";
}

static int snap_path(const struct core *c, const char *id, char *out, size_t n)
{
	int len = snprintf(out, n, "%s/%s", c->snapshot_root, id);

	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* Rows of the store; *rows heap (free with rows_free). */
static int rows_load(struct core *c, struct store_snapshot **rows, size_t *n,
		     struct isola_err **err)
{
	return store_snapshot_list(c->store, rows, n, err);
}

static void rows_free(struct store_snapshot *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		store_snapshot_fini(&rows[i]);
	free(rows);
}

/* The named, ready snapshot `name` of tenant (NULL = any) in rows, or NULL. */
static struct store_snapshot *rows_find_named(struct store_snapshot *rows, size_t n,
					      const char *tenant, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].kind, "named") && !strcmp(rows[i].name, name) &&
		    (!tenant || !strcmp(rows[i].tenant, tenant)))
			return &rows[i];
	return NULL;
}

/* Same answer for a missing snapshot and another tenant's: nothing is revealed. */
static int snap_not_found(const char *name, struct isola_err **err)
{
	return isola_err_set(err, ENOENT, "not_found", "snapshot `%.64s` not found", name);
}

/* The API object of a snapshot row. */
static json_t *snap_json(const struct store_snapshot *r, const struct store_snapshot *rows,
			 size_t n)
{
	json_t *spec = json_loads(r->spec ? r->spec : "{}", 0, NULL), *j;
	const char *tname = json_string_value(json_object_get(spec, "template_name"));
	const char *parent = NULL;

	for (size_t i = 0; r->parent[0] && i < n; i++)
		if (!strcmp(rows[i].id, r->parent))
			parent = rows[i].name[0] ? rows[i].name : rows[i].id;
	j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:f}", "name", r->name, "id",
		      r->id, "tenant", r->tenant, "state", r->state, "tier", r->tier, "template",
		      tname ? tname : "", "source", r->source, "level", level_name(r->level),
		      "size", (json_int_t)r->size, "created_at", r->created_at);
	if (j)
		json_object_set_new(j, "parent", parent ? json_string(parent) : json_null());
	json_decref(spec);
	return j;
}

/* True when a live sandbox restored from snap_id still uses its directory. */
static bool snap_in_use(struct core *c, const char *snap_id, const char *tier)
{
	const struct tier_ops *t = core_tier_by_name(tier);
	bool used = false;

	if (!t || !t->restore_needs_snapshot)
		return false;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes && !used; i++)
		used = !strcmp(c->sandboxes[i]->origin, snap_id);
	pthread_mutex_unlock(&c->lock);
	return used;
}

/* Removes a snapshot's directory and row (state `deleting` first, for reconcile). */
static void snap_remove(struct core *c, const char *id)
{
	char path[PATH_MAX];

	store_snapshot_set_state(c->store, id, "deleting", NULL);
	if (snap_path(c, id, path, sizeof(path)) == 0)
		util_rm_rf(path);
	store_snapshot_delete(c->store, id, NULL);
}

/*
 * Snapshots s into a new row of `kind` ("named" with name, or "internal"): the row is
 * recorded `creating` first, the tier writes into a temp dir, snapdir seals it under the
 * row's id, then the row turns `ready`. *row is filled (caller finis). Nothing is left on
 * failure and s returns to the state it was in.
 */
static int snap_take(struct core *c, struct sandbox *s, const char *kind, const char *name,
		     struct store_snapshot *row, uint64_t *paused_us, struct isola_err **err)
{
	enum tier_persistence level = TIER_PERSIST_NONE;
	char tmp[PATH_MAX] = "", final[PATH_MAX];
	uint64_t size = 0;
	json_t *meta;
	int r;

	memset(row, 0, sizeof(*row));
	if (!s->tier->snapshot || !s->tier->restore)
		return core_not_supported(s, strcmp(kind, "named") ? "fork" : "snapshot", err);
	r = core_new_id(row->id, sizeof(row->id));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "generate snapshot id");
	if (snap_path(c, row->id, final, sizeof(final)) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "snapshot path too long");
	snprintf(row->name, sizeof(row->name), "%s", name ? name : "");
	snprintf(row->tenant, sizeof(row->tenant), "%s", s->tenant);
	snprintf(row->kind, sizeof(row->kind), "%s", kind);
	snprintf(row->state, sizeof(row->state), "creating");
	snprintf(row->tier, sizeof(row->tier), "%s", s->tier->name);
	pthread_mutex_lock(&s->lock);
	snprintf(row->template, sizeof(row->template), "%s", s->template_id);
	snprintf(row->source, sizeof(row->source), "%s", s->id);
	snprintf(row->parent, sizeof(row->parent), "%s", s->origin);
	row->spec = sandbox_spec_dump(s);
	pthread_mutex_unlock(&s->lock);
	row->created_at = util_wall_time();
	if (!row->spec)
		return isola_err_set(err, ENOMEM, NULL, "snapshot: out of memory");
	r = sandbox_op_begin(c, s, SANDBOX_BIT(SANDBOX_RUNNING) | SANDBOX_BIT(SANDBOX_PAUSED),
			     SANDBOX_SNAPSHOTTING, strcmp(kind, "named") ? "fork" : "snapshot",
			     err);
	if (r < 0)
		goto fail_row_mem;
	/* Intent first: reconcile removes a `creating` row and its directory. */
	r = store_snapshot_add(c->store, row, err);
	if (r < 0)
		goto fail_state;
	r = snapdir_tmp_new(c->snapshot_root, row->id, tmp, sizeof(tmp), err);
	if (r < 0)
		goto fail_row;
	r = s->tier->snapshot(s->ts, tmp, &level, paused_us, err);
	if (r < 0)
		goto fail_row;
	if (level != TIER_PERSIST_FILES && level != TIER_PERSIST_MEMORY)
		level = TIER_PERSIST_FILES;
	meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "id", row->id, "name", row->name,
			 "tenant", row->tenant, "kind", kind, "tier", row->tier, "source",
			 row->source, "level", (int)level);
	r = snapdir_commit(tmp, final, meta, &size, err);
	json_decref(meta);
	if (r < 0)
		goto fail_row;
	r = store_snapshot_set_ready(c->store, row->id, size, (int)level, err);
	if (r < 0)
		goto fail_row;
	row->level = (int)level;
	row->size = size;
	snprintf(row->state, sizeof(row->state), "ready");
	sandbox_op_end(c, s, s->op_prev, NULL);
	log_info("sandbox %s: snapshot %s%s%s (%s, %llu bytes)", s->id, row->id,
		 row->name[0] ? " " : "", row->name, level_name(row->level),
		 (unsigned long long)size);
	return 0;

fail_row:
	if (tmp[0])
		util_rm_rf(tmp);
	util_rm_rf(final);
	store_snapshot_delete(c->store, row->id, NULL);
fail_state:
	sandbox_op_end(c, s, s->op_prev, NULL);
fail_row_mem:
	store_snapshot_fini(row);
	return r;
}

/* Snapshot names: the template-name alphabet (a directory-safe 1-63 chars). */
static bool name_is_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

int core_snapshot_create_for(struct core *c, const char *tenant, const char *id, const char *name,
			     json_t **out, struct isola_err **err)
{
	struct store_snapshot row;
	struct sandbox *s;
	int r;

	if (!name_is_valid(name))
		return isola_err_set(err, EINVAL, "invalid",
				     "invalid snapshot name `%.64s`: expected 1-63 of "
				     "[A-Za-z0-9._-], not starting with `.` or `-`",
				     name);
	r = core_sandbox_get_for(c, tenant, id, &s, err);
	if (r < 0)
		return r;
	r = snap_take(c, s, "named", name, &row, NULL, err);
	sandbox_unref(s);
	if (r < 0)
		return isola_err_wrap(err, "snapshot sandbox `%s` as `%s`", id, name);
	{
		struct store_snapshot *rows = NULL;
		size_t n = 0;

		/* The parent's name comes from the other rows. */
		if (rows_load(c, &rows, &n, NULL) < 0)
			n = 0;
		*out = snap_json(&row, rows, n);
		rows_free(rows, n);
	}
	store_snapshot_fini(&row);
	return 0;
}

int core_snapshot_list_for(struct core *c, const char *tenant, json_t **out, struct isola_err **err)
{
	struct store_snapshot *rows;
	json_t *arr = json_array();
	size_t n;
	int r = rows_load(c, &rows, &n, err);

	if (r < 0) {
		json_decref(arr);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].kind, "named") && (!tenant || !strcmp(rows[i].tenant, tenant)))
			json_array_append_new(arr, snap_json(&rows[i], rows, n));
	rows_free(rows, n);
	*out = arr;
	return 0;
}

int core_snapshot_get_for(struct core *c, const char *tenant, const char *name, json_t **out,
			  struct isola_err **err)
{
	struct store_snapshot *rows, *r;
	size_t n;
	int ret = rows_load(c, &rows, &n, err);

	if (ret < 0)
		return ret;
	r = rows_find_named(rows, n, tenant, name);
	if (r)
		*out = snap_json(r, rows, n);
	else
		ret = snap_not_found(name, err);
	rows_free(rows, n);
	return ret;
}

int core_snapshot_delete_for(struct core *c, const char *tenant, const char *name,
			     struct isola_err **err)
{
	struct store_snapshot *rows, *r;
	size_t n;
	int ret;

	pthread_mutex_lock(&c->snap_lock);
	ret = rows_load(c, &rows, &n, err);
	if (ret < 0)
		goto out;
	r = rows_find_named(rows, n, tenant, name);
	if (!r)
		ret = snap_not_found(name, err);
	else if (strcmp(r->state, "ready") != 0)
		ret = isola_err_set(err, EBUSY, "conflict", "snapshot `%s` is %s", name, r->state);
	else if (snap_in_use(c, r->id, r->tier))
		ret = isola_err_set(err, EBUSY, "conflict",
				    "snapshot `%s` is still used by sandboxes restored from it "
				    "(the %s tier maps its files): destroy them first",
				    name, r->tier);
	else
		snap_remove(c, r->id);
	if (ret == 0)
		log_info("snapshot %s (%s) deleted", name, r->id);
	rows_free(rows, n);
out:
	pthread_mutex_unlock(&c->snap_lock);
	return ret;
}

void core_snapshot_release(struct core *c, const char *snap_id)
{
	struct store_snapshot *rows;
	size_t n;

	pthread_mutex_lock(&c->snap_lock);
	if (rows_load(c, &rows, &n, NULL) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(rows[i].id, snap_id) != 0 || strcmp(rows[i].kind, "internal"))
				continue;
			if (!snap_in_use(c, rows[i].id, rows[i].tier)) {
				snap_remove(c, rows[i].id);
				log_info("fork snapshot %s released", rows[i].id);
			}
		}
		rows_free(rows, n);
	}
	pthread_mutex_unlock(&c->snap_lock);
}

/*
 * Builds and starts one sandbox from snapshot row `row` (directory verified or just
 * written): its spec from the snapshot, then the request's overrides (req may be NULL),
 * admitted like a create for `tenant`.
 */
static int restore_one(struct core *c, const struct store_snapshot *row, const char *tenant,
		       const struct sandbox_request *req, const char *forked_from,
		       struct sandbox **out, struct isola_err **err)
{
	struct core_reservation *res = NULL;
	char id[40], dir[PATH_MAX];
	struct sandbox *s;
	int r;

	if (snap_path(c, row->id, dir, sizeof(dir)) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "snapshot path too long");
	r = core_new_id(id, sizeof(id));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "generate sandbox id");
	s = sandbox_alloc(c, id);
	if (!s)
		return isola_err_set(err, ENOMEM, NULL, "restore: out of memory");
	s->tier = core_tier_by_name(row->tier);
	snprintf(s->tenant, sizeof(s->tenant), "%s", tenant);
	r = s->tier ? sandbox_spec_load(s, row->spec, err)
		    : isola_err_set(err, EINVAL, "invalid", "snapshot `%s`: unknown tier `%s`",
				    row->name[0] ? row->name : row->id, row->tier);
	if (r < 0)
		goto out;
	/* A clone is a new sandbox: its own hostname (its id, DESIGN.md's fresh identity) and
	 * its own network. A joined namespace was the operator's choice for the original, and
	 * a fork or restore (which a non-operator of the tenant may ask for) must not carry
	 * it along. */
	s->spec.hostname[0] = '\0';
	s->spec.netns_path[0] = '\0';
	if (!s->tier->restore) {
		r = core_not_supported(s, "restore", err);
		goto out;
	}
	snprintf(s->template_id, sizeof(s->template_id), "%s", row->template);
	snprintf(s->origin, sizeof(s->origin), "%s", row->id);
	snprintf(s->origin_name, sizeof(s->origin_name), "%s", row->name);
	snprintf(s->forked_from, sizeof(s->forked_from), "%s", forked_from ? forked_from : "");
	if (req) {
		if (req->cpu_millis)
			s->spec.cpu_millis = req->cpu_millis;
		if (req->memory_bytes)
			s->spec.memory_bytes = req->memory_bytes;
		if (req->disk_bytes)
			s->spec.disk_bytes = req->disk_bytes;
		if (req->pids)
			s->spec.pids = req->pids;
		if (req->env)
			json_object_update(s->env, (json_t *)req->env);
		if (req->labels)
			json_object_update(s->labels, (json_t *)req->labels);
		if (req->name) /* unique: core_list_add refuses a taken one */
			snprintf(s->name, sizeof(s->name), "%s", req->name);
		if (req->workdir)
			snprintf(s->workdir, sizeof(s->workdir), "%s", req->workdir);
		if (req->user)
			snprintf(s->user, sizeof(s->user), "%s", req->user);
		if (req->caps_set)
			s->spec.caps = req->caps;
	}
	r = lifecycle_restored(c, s, req, err); /* the request's policy, or the source's */
	if (r < 0)
		goto out;
	r = core_admit(c, s, req ? req->retry_after_s : NULL, &res, err);
	if (r < 0)
		goto out;
	r = core_sandbox_start(c, s, req ? req->ttl_s : 0, dir, err);
	core_release(c, res);
out:
	if (r < 0) {
		sandbox_unref(s);
		return r;
	}
	*out = s;
	return 0;
}

int core_sandbox_restore_named(struct core *c, const struct sandbox_request *req,
			       struct sandbox **out, struct isola_err **err)
{
	const char *tenant = req->tenant ? req->tenant : TENANCY_DEFAULT;
	struct store_snapshot *rows, *row;
	char dir[PATH_MAX];
	size_t n;
	int r = rows_load(c, &rows, &n, err);

	if (r < 0)
		return r;
	row = rows_find_named(rows, n, tenant, req->snapshot);
	if (!row || strcmp(row->state, "ready") != 0) {
		r = snap_not_found(req->snapshot, err);
		goto out;
	}
	if (req->tier[0] && strcmp(req->tier, row->tier) != 0) {
		r = isola_err_set(err, EINVAL, "invalid", "snapshot `%s` is of the %s tier, not %s",
				  row->name, row->tier, req->tier);
		goto out;
	}
	if (req->template_name[0]) {
		r = isola_err_set(err, EINVAL, "invalid",
				  "a sandbox from snapshot `%s` has the snapshot's template: "
				  "omit `template`",
				  row->name);
		goto out;
	}
	/* Integrity before anything is built: a damaged snapshot creates nothing. */
	r = snap_path(c, row->id, dir, sizeof(dir));
	if (r == 0)
		r = snapdir_verify(dir, NULL, err);
	if (r == 0)
		r = restore_one(c, row, tenant, req, NULL, out, err);
out:
	rows_free(rows, n);
	if (r < 0)
		return isola_err_wrap(err, "create sandbox from snapshot `%.64s`", req->snapshot);
	return 0;
}

int core_sandbox_fork_for(struct core *c, const char *tenant, const char *id, unsigned count,
			  json_t **out, struct isola_err **err)
{
	struct sandbox *src, *kids[FORK_MAX_CHILDREN] = {0};
	struct store_snapshot row;
	uint64_t paused_us = 0;
	json_t *children;
	unsigned made = 0;
	int r;

	if (count < 1 || count > FORK_MAX_CHILDREN)
		return isola_err_set(err, EINVAL, "invalid", "fork: count must be 1-%d",
				     FORK_MAX_CHILDREN);
	r = core_sandbox_get_for(c, tenant, id, &src, err);
	if (r < 0)
		return r;
	r = snap_take(c, src, "internal", NULL, &row, &paused_us, err);
	if (r < 0)
		goto out_src;
	for (made = 0; made < count; made++) {
		r = restore_one(c, &row, src->tenant, NULL, src->id, &kids[made], err);
		if (r < 0)
			break;
		/* The children keep the source's labels but not its TTL (a fresh default). */
	}
	if (r < 0) {
		for (unsigned i = 0; i < made; i++) {
			core_sandbox_destroy_obj(c, kids[i], NULL);
			sandbox_unref(kids[i]);
		}
		made = 0;
	}
	/* The internal snapshot lives only as long as a child maps it (tier declaration). */
	core_snapshot_release(c, row.id);
	if (r < 0)
		goto out_row;
	children = json_array();
	for (unsigned i = 0; i < made; i++) {
		json_array_append_new(children, sandbox_to_json(kids[i]));
		sandbox_unref(kids[i]);
	}
	*out = json_pack("{s:s, s:I, s:s, s:s, s:o}", "source", src->id, "paused_us",
			 (json_int_t)paused_us, "level", level_name(row.level), "snapshot", row.id,
			 "children", children);
	log_info("sandbox %s forked into %u (source paused %llu us)", src->id, count,
		 (unsigned long long)paused_us);
out_row:
	store_snapshot_fini(&row);
out_src:
	sandbox_unref(src);
	if (r < 0)
		return isola_err_wrap(err, "fork sandbox `%s`", id);
	return 0;
}

/* Names core gives snapshot and sandbox directories: 16 of [a-z0-9] (core_new_id). */
static bool looks_like_id(const char *s)
{
	size_t n = strlen(s);

	if (n != 16)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* Removes directories under dir that no row (or sandbox, for hibernation) claims. Only names
 * core itself makes are candidates: an operator's --snapshot-dir may hold other things
 * (lost+found on a dedicated filesystem). */
static void remove_strays(struct core *c, const char *dir, const struct store_snapshot *rows,
			  size_t n, bool hibernation)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		bool known = false;

		char id[40];

		/* A hibernation image being written is <id>.new. */
		snprintf(id, sizeof(id), "%.39s", de->d_name);
		if (hibernation && strlen(id) == 16 + strlen(HIBERNATION_NEXT) &&
		    !strcmp(id + 16, HIBERNATION_NEXT))
			id[16] = '\0';
		if (!looks_like_id(id))
			continue;
		if (hibernation) {
			known = core_sandbox_listed(c, id);
		} else {
			for (size_t i = 0; i < n && !known; i++)
				known = !strcmp(rows[i].id, de->d_name);
		}
		if (known ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		log_info("snapshots: removing leftover `%s`", path);
		util_rm_rf(path);
	}
	closedir(d);
}

void core_snapshot_reconcile(struct core *c)
{
	struct store_snapshot *rows;
	char hib[PATH_MAX];
	size_t n;
	int k;

	k = snapdir_clean_tmp(c->snapshot_root);
	if (k > 0)
		log_info("snapshots: removed %d unfinished temp dir(s)", k);
	snprintf(hib, sizeof(hib), "%s/hibernated", c->snapshot_root);
	snapdir_clean_tmp(hib);
	if (rows_load(c, &rows, &n, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		/* A snapshot cut short (or a delete cut short) goes away entirely; a fork's
		 * snapshot goes once no child needs it. */
		if (strcmp(rows[i].state, "ready") != 0 ||
		    (!strcmp(rows[i].kind, "internal") &&
		     !snap_in_use(c, rows[i].id, rows[i].tier))) {
			log_info("snapshots: removing %s snapshot %s", rows[i].state, rows[i].id);
			snap_remove(c, rows[i].id);
			rows[i].id[0] = '\0';
		}
	}
	remove_strays(c, c->snapshot_root, rows, n, false);
	remove_strays(c, hib, rows, n, true);
	rows_free(rows, n);
}
