/* SPDX-License-Identifier: Apache-2.0 */
/* tombstone: names of sandboxes, records of ended ones, waiting for an end, and prune. */
#include "core-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/log.h"
#include "../../common/util.h"

int core_name_check_locked(struct core *c, const struct sandbox *s, struct isola_err **err)
{
	if (!s->name[0])
		return 0;
	for (size_t i = 0; i < c->n_sandboxes; i++) {
		const struct sandbox *o = c->sandboxes[i];

		/* A name that is another live sandbox's id would shadow it: refused too. */
		if (o == s || o->life.pooled || strcmp(o->tenant, s->tenant) != 0)
			continue;
		if (!strcmp(o->name, s->name) || !strcmp(o->id, s->name))
			return isola_err_set(err, EEXIST, "name_taken",
					     "name `%s` is taken by sandbox `%s`", s->name, o->id);
	}
	return 0;
}

/* True while a tombstone ended at `ended_at` is within the TTL (the monitor trims the rest
 * once a minute; until then they are not shown). */
static bool tomb_current(const struct core *c, double ended_at)
{
	return c->cfg.tombstone_ttl_s && util_wall_time() - ended_at <= c->cfg.tombstone_ttl_s;
}

int core_sandbox_resolve_for(struct core *c, const char *tenant, const char *ref, char *id,
			     size_t n, json_t **ended)
{
	struct store_tombstone t = {0};
	bool found = false;

	if (ended)
		*ended = NULL;
	pthread_mutex_lock(&c->lock);
	/* An id wins over a name (a name never equals a live id: core_name_check_locked). */
	for (int pass = 0; pass < 2 && !found; pass++) {
		for (size_t i = 0; i < c->n_sandboxes; i++) {
			const struct sandbox *s = c->sandboxes[i];

			if (s->life.pooled || (tenant && strcmp(s->tenant, tenant) != 0))
				continue;
			if (strcmp(pass == 0 ? s->id : s->name, ref) != 0)
				continue;
			snprintf(id, n, "%s", s->id);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (found)
		return 0;
	if (ended && c->cfg.tombstone_ttl_s &&
	    store_tombstone_find(c->store, tenant, ref, &t, NULL) == 0) {
		if (tomb_current(c, t.ended_at))
			*ended = json_loads(t.body ? t.body : "", 0, NULL);
		store_tombstone_fini(&t);
	}
	return -ENOENT;
}

void core_tombstone_message(const json_t *t, char *buf, size_t n)
{
	const char *id = json_string_value(json_object_get(t, "id"));
	const char *name = json_string_value(json_object_get(t, "name"));
	const char *reason = json_string_value(json_object_get(t, "end_reason"));
	const char *detail = json_string_value(json_object_get(t, "detail"));
	time_t when = (time_t)json_number_value(json_object_get(t, "ended_at"));
	char who[128], at[32];
	struct tm tm;

	if (name && *name)
		snprintf(who, sizeof(who), "sandbox `%s` (%s)", name, id ? id : "?");
	else
		snprintf(who, sizeof(who), "sandbox `%s`", id ? id : "?");
	gmtime_r(&when, &tm);
	strftime(at, sizeof(at), "%Y-%m-%d %H:%M:%S UTC", &tm);
	reason = reason ? reason : "destroyed";
	if (!strcmp(reason, "expired") || !strcmp(reason, "idle"))
		snprintf(buf, n, "%s %s at %s (%s) and was destroyed", who,
			 strcmp(reason, "idle") ? "expired" : "was idle", at, detail ? detail : "");
	else if (!strcmp(reason, "error") || !strcmp(reason, "oom"))
		snprintf(buf, n, "%s failed (%.200s) and was removed at %s", who,
			 detail ? detail : "error", at);
	else
		snprintf(buf, n, "%s was destroyed at %s", who, at);
}

void core_sandbox_end_notify(struct core *c)
{
	pthread_mutex_lock(&c->end_lock);
	c->end_gen++;
	pthread_cond_broadcast(&c->end_cond);
	pthread_mutex_unlock(&c->end_lock);
}

void core_tombstone_record(struct core *c, struct sandbox *s, enum sandbox_state prev,
			   const char *prev_error)
{
	cleanup_err struct isola_err *e = NULL;
	struct store_tombstone t = {0};
	const char *reason = "destroyed", *detail = NULL;
	json_t *j;

	if (!c->cfg.tombstone_ttl_s || s->life.pooled)
		return;
	if (s->end_reason[0] && prev == SANDBOX_ERROR) { /* oom: the error says what killed it */
		reason = s->end_reason;
		detail = prev_error;
	} else if (s->end_reason[0]) {
		reason = s->end_reason;
		detail = s->end_detail;
	} else if (prev == SANDBOX_ERROR) {
		reason = "error";
		detail = prev_error;
	}
	t.ended_at = util_wall_time();
	pthread_mutex_lock(&s->lock);
	j = json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s, s:f, s:f}", "id", s->id, "name",
		      s->name, "labels", s->labels, "template", s->template_name, "tier",
		      s->tier ? s->tier->name : "process", "tenant", s->tenant, "state", "ended",
		      "end_reason", reason, "created_at", s->created_at, "ended_at", t.ended_at);
	pthread_mutex_unlock(&s->lock);
	if (!j)
		return;
	json_object_set_new(j, "detail", detail && *detail ? json_string(detail) : json_null());
	snprintf(t.id, sizeof(t.id), "%s", s->id);
	snprintf(t.tenant, sizeof(t.tenant), "%s", s->tenant);
	snprintf(t.name, sizeof(t.name), "%s", s->name);
	t.body = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	/* A record that cannot be written costs only the explanation, never the destroy. */
	if (!t.body || store_tombstone_put(c->store, &t, &e) < 0)
		log_warn("sandbox %s: tombstone not kept: %s", s->id,
			 e ? e->message : "out of memory");
	free(t.body);
}

void core_tombstone_trim(struct core *c)
{
	cleanup_err struct isola_err *e = NULL;
	double before =
		c->cfg.tombstone_ttl_s ? util_wall_time() - c->cfg.tombstone_ttl_s : INFINITY;
	int r = store_tombstone_trim(c->store, before, CORE_MAX_TOMBSTONES, &e);

	if (r < 0)
		log_warn("tombstones: trim failed: %s", e ? e->message : "?");
}

/* True when pairs of filter (may be NULL) are all in labels. */
static bool tomb_labels_match(const json_t *labels, const json_t *filter)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)filter, k, v)
	{
		if (!json_equal(json_object_get(labels, k), v))
			return false;
	}
	return true;
}

int core_tombstone_list_for(struct core *c, const char *tenant, const json_t *filter, json_t *arr,
			    struct isola_err **err)
{
	struct store_tombstone *rows = NULL;
	size_t n = 0;
	int r;

	if (!c->cfg.tombstone_ttl_s)
		return 0;
	r = store_tombstone_list(c->store, tenant, &rows, &n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		json_t *j = tomb_current(c, rows[i].ended_at)
				    ? json_loads(rows[i].body ? rows[i].body : "", 0, NULL)
				    : NULL;

		if (j && tomb_labels_match(json_object_get(j, "labels"), filter))
			json_array_append(arr, j);
		json_decref(j);
		store_tombstone_fini(&rows[i]);
	}
	free(rows);
	return 0;
}

/* The errored sandbox `id`'s object (state error), or NULL while it is not errored. */
static json_t *errored_json(struct core *c, const char *tenant, const char *id)
{
	struct sandbox *s = NULL;
	json_t *j = NULL;
	bool errored;

	if (core_sandbox_get_for(c, tenant, id, &s, NULL) < 0)
		return NULL;
	pthread_mutex_lock(&s->lock);
	errored = s->state == SANDBOX_ERROR;
	pthread_mutex_unlock(&s->lock);
	if (errored) {
		j = sandbox_to_json(s);
		json_object_set_new(j, "end_reason",
				    json_string(s->end_reason[0] ? s->end_reason : "error"));
		json_object_set_new(j, "detail", json_incref(json_object_get(j, "error")));
	}
	sandbox_unref(s);
	return j;
}

int core_sandbox_wait_for(struct core *c, const char *tenant, const char *ref, int timeout_ms,
			  json_t **out, struct isola_err **err)
{
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	char id[40];

	if (core_sandbox_resolve_for(c, tenant, ref, id, sizeof(id), out) < 0) {
		if (*out)
			return 0;
		return isola_err_set(err, ENOENT, "not_found", "sandbox `%.64s` not found", ref);
	}
	for (;;) {
		struct timespec ts;
		uint64_t gen, now;
		json_t *t = NULL;
		char again[40];

		pthread_mutex_lock(&c->end_lock);
		gen = c->end_gen;
		pthread_mutex_unlock(&c->end_lock);
		/* Checked after reading gen: an end between the check and the wait bumps it. */
		*out = errored_json(c, tenant, id);
		if (*out)
			return 0;
		if (core_sandbox_resolve_for(c, tenant, id, again, sizeof(again), &t) < 0) {
			if (!t) /* ended, but no record (tombstones off): a bare answer */
				t = json_pack("{s:s, s:s, s:s}", "id", id, "state", "ended",
					      "end_reason", "destroyed");
			*out = t;
			return 0;
		}
		now = util_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		clock_gettime(CLOCK_REALTIME, &ts);
		{
			uint64_t left = deadline - now,
				 ns = (uint64_t)ts.tv_nsec + left % 1000000000ull;

			ts.tv_sec += (time_t)(left / 1000000000ull + ns / 1000000000ull);
			ts.tv_nsec = (long)(ns % 1000000000ull);
		}
		pthread_mutex_lock(&c->end_lock);
		while (c->end_gen == gen &&
		       pthread_cond_timedwait(&c->end_cond, &c->end_lock, &ts) == 0)
			;
		pthread_mutex_unlock(&c->end_lock);
	}
}

int core_prune_for(struct core *c, const char *tenant, bool ended, bool errored,
		   double older_than_s, json_t **out, struct isola_err **err)
{
	double cutoff = util_wall_time() - older_than_s;
	json_t *removed = json_array();
	int r = 0;

	if (!removed)
		return isola_err_set(err, ENOMEM, NULL, "prune: out of memory");
	if (ended && c->cfg.tombstone_ttl_s) {
		struct store_tombstone *rows = NULL;
		size_t n = 0;

		r = store_tombstone_list(c->store, tenant, &rows, &n, err);
		for (size_t i = 0; r == 0 && i < n; i++) {
			if (rows[i].ended_at > cutoff)
				continue;
			r = store_tombstone_delete(c->store, rows[i].id, err);
			if (r == 0)
				json_array_append_new(removed, json_string(rows[i].id));
		}
		for (size_t i = 0; i < n; i++)
			store_tombstone_fini(&rows[i]);
		free(rows);
	}
	if (r == 0 && errored) {
		json_t *list = NULL, *s;
		size_t i;

		r = core_sandbox_list_for(c, tenant, NULL, &list, err);
		json_array_foreach(list, i, s)
		{
			const char *id = json_string_value(json_object_get(s, "id"));

			if (r < 0 ||
			    strcmp(json_string_value(json_object_get(s, "state")), "error") ||
			    json_number_value(json_object_get(s, "created_at")) > cutoff)
				continue;
			r = core_sandbox_destroy_for(c, tenant, id, err);
			if (r == 0) {
				/* Its tombstone is not kept: prune removes, it does not archive. */
				store_tombstone_delete(c->store, id, NULL);
				json_array_append_new(removed, json_string(id));
			}
		}
		json_decref(list);
	}
	if (r < 0) {
		json_decref(removed);
		return r;
	}
	*out = removed;
	return 0;
}
