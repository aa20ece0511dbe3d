/* SPDX-License-Identifier: Apache-2.0 */
/* lifecycle: a sandbox's timeout policy, idle detection and auto-resume (docs/persistence.md). */
#ifndef ISOLA_LIFECYCLE_H
#define ISOLA_LIFECYCLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"

struct core;
struct sandbox;
struct sandbox_request;
struct tier_ops;

/* What the TTL's expiry and idle detection do to a sandbox. */
enum life_policy {
	LIFE_KILL = 0,	    /* destroy (the default, and the only choice before issue 5) */
	LIFE_PAUSE = 1,	    /* core_sandbox_pause_obj: processes frozen, memory kept */
	LIFE_HIBERNATE = 2, /* core_sandbox_hibernate_obj: state to disk, no tier resources */
};

/* auto_resume, as in struct sandbox_request: 0 = the default rule (resume what policy
 * paused, leave a user's pause alone), 1 = always, -1 = never. */
#define LIFE_RESUME_DEFAULT 0
#define LIFE_RESUME_ALWAYS  1
#define LIFE_RESUME_NEVER   (-1)

/*
 * A sandbox's lifecycle settings and idle bookkeeping, embedded in struct sandbox as `life`
 * and protected by the sandbox's lock — except `pooled`, which pool.c changes only while
 * holding both the core's lock and the sandbox's, so either lock suffices to read it, and
 * `taken`, under the core's lock.
 */
struct sandbox_life {
	enum life_policy on_timeout; /* what TTL expiry and idleness do */
	uint32_t ttl_s;		     /* the TTL asked for, restarted on resume (0 = none) */
	uint32_t idle_timeout_s;     /* idle this long -> on_timeout (0 = never) */
	int auto_resume;	     /* LIFE_RESUME_DEFAULT, _ALWAYS or _NEVER */
	bool by_policy;		     /* paused/hibernated by TTL or idle, not by a user */
	bool pooled;		     /* a warm-pool sandbox nobody claimed yet (pool.c) */
	bool claiming;		     /* a claim's admission: host capacity already held */
	bool headroom;		     /* an automatic pool's fill: admitted only with room
				      * left for one more sandbox of its size (pool.c) */
	bool taken;		     /* pooled and being claimed or destroyed (core's lock) */
	bool from_pool;		     /* it was claimed from a warm pool */
	bool idle;		     /* the last sample found it idle */
	double sampled_at;	     /* wall time of the last stats sample, 0 = none yet */
	uint64_t cpu_usec;	     /* CPU time at that sample */
	uint32_t base_pids;	     /* fewest processes seen: the agent's own (0 = unknown) */
	uint32_t resumes;	     /* automatic resumes so far */
};

/* "kill", "pause", "hibernate"; NULL for anything else. */
const char *life_policy_name(enum life_policy p);
/* Parses a policy name (NULL or "" = kill); -EINVAL `invalid` naming it. */
int life_policy_parse(const char *name, enum life_policy *out, struct isola_err **err);

/*
 * Refuses (`invalid`, naming tier and policy) a policy the tier cannot honour: pause needs
 * the tier's pause/resume, hibernate its snapshot/restore.
 */
int life_policy_check(const struct tier_ops *t, enum life_policy p, struct isola_err **err);

/*
 * Fills s->life from a create request (policy, idle timeout, auto-resume, pooled) after
 * checking the policy against s->tier. A pooled sandbox gets no TTL and no tenant. Called
 * by core_sandbox_create before the sandbox is shared.
 */
int lifecycle_init(struct core *c, struct sandbox *s, const struct sandbox_request *req,
		   struct isola_err **err);

/*
 * For a sandbox restored from a snapshot (its spec, lifecycle included, loaded from the
 * snapshot): a create request's policy replaces the source's (lifecycle_init); without a
 * request (fork children) the source's policy stays and only its per-sandbox state (paused
 * by policy, claimed from a pool, idle samples) is cleared.
 */
int lifecycle_restored(struct core *c, struct sandbox *s, const struct sandbox_request *req,
		       struct isola_err **err);

/* The settings as stored in the sandbox's spec JSON (`j` gets a "lifecycle" object), and
 * back; a missing or malformed object leaves the defaults. Lock held or s not shared. */
void lifecycle_dump(const struct sandbox *s, json_t *j);
void lifecycle_load(struct sandbox *s, const json_t *j);

/* Adds on_timeout, idle_timeout, auto_resume, last_active, idle_since, paused_by to the
 * sandbox's API object. Lock held. */
void lifecycle_to_json(const struct sandbox *s, json_t *j);

/*
 * Changes a sandbox's policy (tenant-scoped like core_sandbox_get_for). `patch` is the
 * validated JSON body {on_timeout?, idle_timeout?, auto_resume?}; returns the sandbox's
 * new API object in *out (new reference).
 */
int core_sandbox_set_lifecycle_for(struct core *c, const char *tenant, const char *id,
				   const json_t *patch, json_t **out, struct isola_err **err);

/*
 * The monitor thread's hooks. lifecycle_expire applies the policy to a sandbox whose TTL
 * passed; lifecycle_tick samples a running sandbox with an idle timeout at most once a
 * second and applies the policy once it has been idle long enough. Idle = no API use, CPU
 * below LIFE_IDLE_CPU_PERMILLE, no open agent channels (streams, calls), no processes
 * besides the agent's own.
 */
void lifecycle_expire(struct core *c, struct sandbox *s);
void lifecycle_tick(struct core *c, struct sandbox *s, double now);

/*
 * Auto-resume, called by sandbox_agent before it looks at the state: a paused or hibernated
 * sandbox whose rule allows it is resumed (auto_resume 1, or the default and paused by
 * policy). Returns 0 when nothing was to be done or the resume worked, else the resume's
 * error. Takes the sandbox's lock itself: call without it.
 */
int lifecycle_auto_resume(struct sandbox *s, struct isola_err **err);

#endif
