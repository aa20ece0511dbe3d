/* SPDX-License-Identifier: Apache-2.0 */
/* events: GET /v1/events — the caller's tenant's sandbox changes as server-sent events. */
#include "api-internal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../core/core.h"

#define EVENTS_TICK_MS	    100	  /* hang-up and shutdown checks while waiting */
#define EVENTS_KEEPALIVE_MS 15000 /* a comment line (and a rescan) when nothing happened */

/* List scans made by all event streams (isola_events_scans_total in /metrics). */
static atomic_uint_fast64_t scans;

uint64_t api_events_scans(void)
{
	return atomic_load(&scans);
}

/*
 * One subscriber. The stream waits on the core's change bus (core_changes_wait: one
 * notification per sandbox created, state transition, destroyed) and only then compares the
 * tenant's list with what it last sent, sending the differences: `created`, `changed` (any
 * field of the object), `destroyed`. With nothing happening it scans once per keep-alive
 * period, which also picks up fields that change without a notification (last_active).
 * Owned by the stream; used by its MHD thread only.
 */
struct events {
	struct api_server *srv; /* the server (borrowed) */
	char tenant[64];	/* whose sandboxes: the caller's tenant, fixed at the start */
	json_t *last; /* id -> sandbox object as last sent, owned; NULL before the snapshot */
	uint64_t last_out_ms; /* when bytes were last produced (keep-alive) */
	uint64_t seen;	      /* the change bus's sequence number ev->last reflects */
};

static void events_free(void *p)
{
	struct events *ev = p;

	json_decref(ev->last);
	free(ev);
}

/* The tenant's sandboxes as id -> object (new reference), or NULL when the list failed. */
static json_t *current(struct events *ev)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list = NULL, *byid, *s;
	size_t i;

	atomic_fetch_add(&scans, 1);
	if (core_sandbox_list_for(ev->srv->core, ev->tenant, NULL, &list, &err) < 0)
		return NULL;
	byid = json_object();
	json_array_foreach(list, i, s)
	{
		const char *id = json_string_value(json_object_get(s, "id"));

		if (byid && id)
			json_object_set(byid, id, s);
	}
	json_decref(list);
	return byid;
}

/* Emits one event of `type` carrying sandbox `s` (borrowed) or just its id. */
static int emit(struct api_stream *st, const char *type, const char *id, json_t *s)
{
	return api_stream_event(
		st, s ? json_pack("{s:s, s:s, s:O}", "type", type, "id", id, "sandbox", s)
		      : json_pack("{s:s, s:s}", "type", type, "id", id));
}

/* Sends the differences between ev->last and now; returns how many events, or -1. */
static int diff(struct api_stream *st, struct events *ev, json_t *now)
{
	const char *id;
	json_t *s, *old;
	int n = 0;

	json_object_foreach(now, id, s)
	{
		old = json_object_get(ev->last, id);
		if (!old || !json_equal(old, s)) {
			if (emit(st, old ? "changed" : "created", id, s) < 0)
				return -1;
			n++;
		}
	}
	json_object_foreach(ev->last, id, old)
	{
		if (!json_object_get(now, id)) {
			if (emit(st, "destroyed", id, NULL) < 0)
				return -1;
			n++;
		}
	}
	return n;
}

static int events_produce(struct api_stream *st, void *ud)
{
	struct events *ev = ud;
	json_t *now, *list, *s;
	const char *id;
	int n;

	if (!ev->last) {
		/* First: everything the tenant has, in one `snapshot` event. The sequence number
		 * is read before the list: a change in between is rescanned, never missed. */
		ev->seen = core_changes_seq(ev->srv->core);
		ev->last = current(ev);
		if (!ev->last)
			return api_stream_abort(st, "events", "internal",
						"listing sandboxes failed");
		list = json_array();
		json_object_foreach(ev->last, id, s) json_array_append(list, s);
		ev->last_out_ms = util_now_ms();
		return api_stream_event(st, json_pack("{s:s, s:o}", "type", "snapshot", "sandboxes",
						      list)) < 0
			       ? -1
			       : 0;
	}
	for (;;) {
		bool changed = false;

		while (!changed) {
			if (api_server_is_stopping(ev->srv))
				return 1;
			if (api_stream_peer_gone(st))
				return -1;
			changed = core_changes_wait(ev->srv->core, &ev->seen, EVENTS_TICK_MS) > 0;
			if (util_now_ms() - ev->last_out_ms >= EVENTS_KEEPALIVE_MS)
				break;
		}
		now = current(ev);
		if (!now)
			continue;
		n = diff(st, ev, now);
		json_decref(ev->last);
		ev->last = now;
		if (n < 0)
			return -1;
		if (n > 0) {
			ev->last_out_ms = util_now_ms();
			return 0;
		}
		if (util_now_ms() - ev->last_out_ms >= EVENTS_KEEPALIVE_MS) {
			ev->last_out_ms = util_now_ms();
			return api_stream_write(st, ": keepalive\n\n", 13) < 0 ? -1 : 0;
		}
	}
}

enum MHD_Result api_events(struct api_req *r)
{
	struct events *ev = calloc(1, sizeof(*ev));
	struct MHD_Response *resp;

	if (!ev)
		return MHD_NO;
	ev->srv = r->srv;
	snprintf(ev->tenant, sizeof(ev->tenant), "%s", api_tenant(r));
	resp = api_stream_response(r, API_FMT_SSE, MHD_SIZE_UNKNOWN, events_produce, ev,
				   events_free);
	if (!resp)
		return MHD_NO;
	return api_respond_response(r, 200, resp);
}
