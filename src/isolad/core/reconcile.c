/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile: at startup, match the store's intent with what still runs — re-attach or clean. */
#include "core-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"

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
	s->spec.uid_base = CORE_UID_BASE + (uint32_t)row->uid_slot * 65536u;
	s->created_at = row->created_at;
	s->expires_at = row->expires_at;
	s->last_active = util_wall_time();
	if (row->tenant[0])
		snprintf(s->tenant, sizeof(s->tenant), "%s", row->tenant);
	return s;
}

/* Handles one stored sandbox; never fails the whole start for one bad row. */
static void reconcile_one(struct core *c, const struct store_sandbox *row)
{
	cleanup_err struct isola_err *e = NULL;
	struct sandbox *s = sandbox_from_row(c, row);
	int r;

	if (!s)
		return;
	if (row->uid_slot >= 0 && row->uid_slot < CORE_MAX_SANDBOXES)
		c->slots[row->uid_slot] = 1;

	if (!strcmp(row->state, "creating") || !strcmp(row->state, "destroying")) {
		/* An operation was cut short: roll it back completely. */
		s->tier->cleanup(&s->spec, row->tier_state, NULL);
		util_rm_rf(s->spec.dir);
		store_sandbox_delete(c->store, row->id, NULL);
		c->slots[row->uid_slot] = 0;
		log_info("sandbox %s: unfinished %s rolled back", row->id, row->state);
		sandbox_unref(s);
		return;
	}
	if (!strcmp(row->state, "running")) {
		r = s->tier->reattach(&s->spec, row->tier_state, &s->ts, &e);
		if (r == 0) {
			s->state = SANDBOX_RUNNING;
			log_info("sandbox %s re-attached", row->id);
		} else {
			char reason[512];

			snprintf(reason, sizeof(reason),
				 "lost while isolad was down: %s; its resources were cleaned up",
				 e ? e->message : "gone");
			s->tier->cleanup(&s->spec, row->tier_state, NULL);
			s->state = SANDBOX_ERROR;
			s->error = strdup(reason);
			store_sandbox_set_state(c->store, row->id, "error", reason, NULL);
			store_sandbox_set_tier_state(c->store, row->id, NULL, NULL);
			log_warn("sandbox %s: %s", row->id, reason);
		}
	} else {
		s->state = SANDBOX_ERROR;
		s->error = strdup(row->error ? row->error : "unknown error");
	}
	if (core_list_add(c, s, NULL) < 0)
		log_error("sandbox %s: cannot track it (out of memory)", row->id);
	sandbox_unref(s);
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
	return 0;
}
