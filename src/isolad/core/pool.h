/* SPDX-License-Identifier: Apache-2.0 */
/* pool: warm pools — ready sandboxes per (template, tier) so a create becomes a claim. */
#ifndef ISOLA_POOL_H
#define ISOLA_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"

struct core;
struct sandbox;
struct sandbox_request;

#define POOL_MAX_POOLS 32  /* (template, tier) pairs */
#define POOL_MAX_SIZE  256 /* sandboxes one pool may hold */
/* isolad's automatic pool when neither --pool-auto nor the store says otherwise */
#define POOL_AUTO_DEFAULT_MAX 32

/*
 * Threading: one pool thread per core fills and trims the pools, one create or destroy at
 * a time, with exponential backoff (1 s .. 60 s) after a failed create. Pooled sandboxes
 * live in the core's list like any other (so they count against host capacity) but carry
 * life.pooled and no tenant: lookups, listings, metrics and tenant usage skip them until a
 * claim hands one to a tenant. The configured sizes are kept in the store (meta "pools"),
 * so after an isolad restart the re-attached pooled sandboxes are counted again, surplus or
 * lost ones destroyed and the rest refilled.
 */

/* Loads the stored sizes and starts the pool thread (core_new, after reconcile). */
int pool_start(struct core *c, struct isola_err **err);
/* Stops and joins the pool thread (core_free, first thing), then destroys the automatic
 * pool's idle sandboxes; a fixed pool's stay (re-attached at the next start). */
void pool_stop(struct core *c);

/*
 * Sets the size of the pool for (template, tier) — template "" means "host", tier ""
 * "process" — and stores it; 0 removes the pool (its sandboxes are destroyed in the
 * background). `not_found` for an unknown template, `invalid` for a bad tier or size.
 * Any thread.
 */
int core_pool_set(struct core *c, const char *template_name, const char *tier, uint32_t size,
		  struct isola_err **err);

/* The same from isolad's `--pool TEMPLATE:TIER:N` flag (`invalid` naming a malformed one). */
int core_pool_set_flag(struct core *c, const char *flag, struct isola_err **err);

/*
 * isolad's `--pool-auto MAX`: an automatic pool for the default template and tier
 * (host/process) whose target is the most creates seen in one second within the last
 * window (ISOLA_POOL_AUTO_WINDOW_S, default 300 s), capped at MAX, so it falls to 0 once no
 * create came for a window. Its fills wait only while a burst (two or more creates) is in
 * flight, take no host capacity a create of the same size would need (the last room stays
 * free) and its idle sandboxes are destroyed when a caller's create does not fit. MAX 0
 * removes it. Its target is also capped by a memory budget: its idle sandboxes (1 MiB
 * each, rounded up from what they measure) take at most 1/64 of the host's MemAvailable.
 * Stored like the sizes (meta "pools": {"host/process": {"auto_max": MAX}}; MAX 0 as
 * {"auto_max": 0}, so the default stays off); also PUT /v1/pools/host/process
 * {"auto_max": MAX}. `invalid` for MAX too large.
 */
int core_pool_auto(struct core *c, uint32_t max, struct isola_err **err);

/*
 * isolad's default at start when no --pool-auto is given: the automatic pool with cap max
 * (POOL_AUTO_DEFAULT_MAX), unless the store holds a setting for host/process (an automatic
 * pool, a fixed size, or one turned off with auto_max or size 0). Not stored: GET
 * /v1/pools shows it with "default": true, and a later isolad's default replaces it. 0 or
 * -errno (the host template unreadable) with *err set. isolad's main thread.
 */
int core_pool_auto_default(struct core *c, uint32_t max, struct isola_err **err);

/* Destroys one idle sandbox of an automatic pool so a caller's create fits (admission,
 * without the core's lock): 1 when it did, 0 when there was none. */
int pool_yield(struct core *c);

/* [{template, tier, size, ready, creating, claims, misses, failures, last_error, auto_max, target,
 * deferrals, capped, default, memory_cap (automatic only)}] (new reference). Any thread. */
json_t *core_pool_list(struct core *c);

/*
 * The claim, called by core_sandbox_create with the prepared, not yet admitted sandbox `s`
 * (template, limits, tenant, env, labels, workdir, user and life set). If a pool exists for
 * its template and tier and holds a ready sandbox with the same template id and limits,
 * admits the claim for s->tenant (rate and quota; the host capacity is already held), hands
 * that sandbox over with s's settings, a fresh identity and a new TTL, persists it and
 * returns 1 with *out referenced. 0: no claim (the caller creates cold; *missed set when a
 * pool for it had no ready sandbox and s has a fill's limits, so one could have served it).
 * -errno: refused (the tenant's rate or quota), *err set.
 */
int pool_claim(struct core *c, struct sandbox *s, const struct sandbox_request *req,
	       struct sandbox **out, bool *missed, struct isola_err **err);

/* Counts the miss of a create pool_claim reported as *missed, once that create is running,
 * and wakes the pool thread to refill (a claim counts itself). */
void pool_note_miss(struct core *c, const struct sandbox *s);

#endif
