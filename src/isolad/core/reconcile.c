/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile: at startup, match the store's intent with what still runs — re-attach or clean. */
#include "core-internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../net/net.h"
#include "../snapshots/snapdir.h"

/* Builds a sandbox object from a stored row (state left for the caller to set). */
static struct sandbox *sandbox_from_row(struct core *c, const struct store_sandbox *row)
{
	struct sandbox *s = sandbox_alloc(c, row->id);
	cleanup_err struct isola_err *e = NULL;

	if (!s)
		return NULL;
	s->tier = core_tier_by_name(row->tier);
	if (!s->tier)
		s->tier = &tier_process_ops;
	if (sandbox_spec_load(s, row->spec, &e) < 0)
		log_warn("sandbox %s: %s", row->id, e->message);
	snprintf(s->template_id, sizeof(s->template_id), "%s", row->template);
	if (core_sandbox_dir(c, row->id, s->spec.dir, sizeof(s->spec.dir)) < 0)
		log_warn("sandbox %s: state dir path too long", row->id);
	s->uid_slot = row->uid_slot;
	s->spec.uid_base = c->uid_base + (uint32_t)row->uid_slot * 65536u;
	s->created_at = row->created_at;
	s->expires_at = row->expires_at;
	s->last_active = util_wall_time();
	if (row->tenant[0])
		snprintf(s->tenant, sizeof(s->tenant), "%s", row->tenant);
	return s;
}

/* Marks s lost: cleans what the tier left and records why. */
static void reconcile_lost(struct core *c, struct sandbox *s, const struct store_sandbox *row,
			   const char *why)
{
	char reason[512];

	snprintf(reason, sizeof(reason),
		 "lost while isolad was down: %s; its resources were cleaned up", why);
	s->tier->cleanup(&s->spec, row->tier_state, NULL);
	s->state = SANDBOX_ERROR;
	s->error = strdup(reason);
	store_sandbox_set_state(c->store, row->id, "error", reason, NULL);
	store_sandbox_set_tier_state(c->store, row->id, NULL, NULL);
	log_warn("sandbox %s: %s", row->id, reason);
}

/* True when a hibernation image is complete (manifest present and valid). */
static bool image_ok(const char *id, const char *path)
{
	cleanup_err struct isola_err *e = NULL;

	if (access(path, F_OK) != 0)
		return false;
	if (snapdir_verify(path, NULL, &e) == 0)
		return true;
	log_warn("sandbox %s: %s", id, e ? e->message : "hibernation image unusable");
	return false;
}

/*
 * A persistence operation was cut short by the crash (or the sandbox was paused): bring
 * it to a state the API can stand behind. Returns with s->state set.
 */
static void reconcile_persist(struct core *c, struct sandbox *s, const struct store_sandbox *row)
{
	cleanup_err struct isola_err *e = NULL;
	const char *st = row->state;
	char hib[PATH_MAX] = "", next[PATH_MAX + 8] = "";

	if (core_hibernation_dir(c, row->id, hib, sizeof(hib)) == 0)
		snprintf(next, sizeof(next), "%s" HIBERNATION_NEXT, hib);
	if (!strcmp(st, "hibernated") || !strcmp(st, "waking")) {
		/* A restore cut short left a half-built tier sandbox: remove it; the image is
		 * untouched until a restore completes. A `.new` image is never the current one
		 * here (it replaces the old one before the state turns hibernated). */
		if (!strcmp(st, "waking"))
			s->tier->cleanup(&s->spec, row->tier_state, NULL);
		if (next[0])
			util_rm_rf(next);
		if (hib[0] && image_ok(row->id, hib)) {
			s->state = SANDBOX_HIBERNATED;
			store_sandbox_set_state(c->store, row->id, "hibernated", NULL, NULL);
			store_sandbox_set_tier_state(c->store, row->id, NULL, NULL);
			log_info("sandbox %s: hibernated", row->id);
		} else {
			reconcile_lost(c, s, row, "its hibernation image is incomplete");
		}
		return;
	}
	if (s->tier->reattach(&s->spec, row->tier_state, &s->ts, &e) == 0) {
		if (!strcmp(st, "paused")) {
			s->state = SANDBOX_PAUSED;
			log_info("sandbox %s re-attached, paused", row->id);
			return;
		}
		/* running, or pausing/resuming/snapshotting/hibernating cut short: the operation
		 * did not complete, so the sandbox is running again (thawed if frozen). */
		if (strcmp(st, "running") != 0 && s->tier->resume)
			s->tier->resume(s->ts, NULL);
		/* A hibernation cut short: its new image goes; the current one may be in use. */
		if (!strcmp(st, "hibernating") && next[0])
			util_rm_rf(next);
		s->state = SANDBOX_RUNNING;
		store_sandbox_set_state(c->store, row->id, "running", NULL, NULL);
		log_info("sandbox %s re-attached%s%s", row->id,
			 strcmp(st, "running") ? " after " : "", strcmp(st, "running") ? st : "");
		return;
	}
	/* Hibernation got as far as a complete new image (the tier's resources went after it):
	 * it replaces the old one and the sandbox is hibernated. Without one, an image already
	 * swapped in is the fresh one (the crash came between the swap and the state). */
	if (!strcmp(st, "hibernating") && next[0] && image_ok(row->id, next)) {
		util_rm_rf(hib);
		if (rename(next, hib) < 0)
			log_warn("sandbox %s: rename `%s`: %s", row->id, next, strerror(errno));
	}
	if (!strcmp(st, "hibernating") && hib[0] && image_ok(row->id, hib)) {
		s->tier->cleanup(&s->spec, row->tier_state, NULL);
		s->state = SANDBOX_HIBERNATED;
		store_sandbox_set_state(c->store, row->id, "hibernated", NULL, NULL);
		store_sandbox_set_tier_state(c->store, row->id, NULL, NULL);
		log_info("sandbox %s: hibernation completed", row->id);
		return;
	}
	if (hib[0]) {
		util_rm_rf(hib);
		util_rm_rf(next);
	}
	reconcile_lost(c, s, row, e ? e->message : "gone");
}

/* Handles one stored sandbox; never fails the whole start for one bad row. */
static void reconcile_one(struct core *c, const struct store_sandbox *row)
{
	struct sandbox *s = sandbox_from_row(c, row);

	if (!s)
		return;
	if (row->uid_slot >= 0 && row->uid_slot < CORE_MAX_SANDBOXES)
		c->slots[row->uid_slot] = 1;

	if (!strcmp(row->state, "creating") || !strcmp(row->state, "destroying")) {
		/* An operation was cut short: roll it back completely. */
		s->tier->cleanup(&s->spec, row->tier_state, NULL);
		net_sandbox_detach(&s->spec);
		util_rm_rf(s->spec.dir);
		store_sandbox_delete(c->store, row->id, NULL);
		c->slots[row->uid_slot] = 0;
		log_info("sandbox %s: unfinished %s rolled back", row->id, row->state);
		sandbox_unref(s);
		return;
	}
	if (strcmp(row->state, "error") != 0) {
		reconcile_persist(c, s, row);
	} else {
		s->state = SANDBOX_ERROR;
		s->error = strdup(row->error ? row->error : "unknown error");
	}
	/* Names were unique when stored; should two rows still share one, the later keeps
	 * running unnamed rather than untracked. */
	pthread_mutex_lock(&c->lock);
	if (core_name_check_locked(c, s, NULL) < 0) {
		log_warn("sandbox %s: name `%s` is taken, the sandbox goes on without it", row->id,
			 s->name);
		s->name[0] = '\0';
	}
	pthread_mutex_unlock(&c->lock);
	if (core_list_add(c, s, NULL) < 0)
		log_error("sandbox %s: cannot track it (out of memory)", row->id);
	sandbox_unref(s);
}

/* Whether the core tracks a sandbox with this id (net_forget_unknown's question). */
static bool reconcile_is_known(void *ud, const char *id)
{
	return core_sandbox_listed(ud, id);
}

/* Removes <state>/sandboxes/<name> of every name no sandbox has. No tier resource can be
 * behind one: a create records its row before it makes anything. */
static void reconcile_orphan_dirs(struct core *c)
{
	char base[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(base, sizeof(base), "%s/sandboxes", c->cfg.state_dir);
	d = opendir(base);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || core_sandbox_listed(c, de->d_name))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", base, de->d_name) >= (int)sizeof(path))
			continue;
		log_info("sandbox %s: no such sandbox; its directory is removed", de->d_name);
		util_rm_rf(path);
	}
	closedir(d);
}

int core_reconcile(struct core *c, struct isola_err **err)
{
	struct store_sandbox *rows;
	size_t n;
	int r = store_sandbox_list(c->store, &rows, &n, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		reconcile_one(c, &rows[i]);
		store_sandbox_fini(&rows[i]);
	}
	free(rows);
	/* Networks of sandboxes no row names (a row removed by an earlier rollback whose
	 * network record survived it) go too, and so do their directories (an isolad before
	 * the row-first create made the directory first). */
	net_forget_unknown(reconcile_is_known, c);
	reconcile_orphan_dirs(c);
	return 0;
}
