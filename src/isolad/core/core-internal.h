/* SPDX-License-Identifier: Apache-2.0 */
/* core-internal: what the core's own files share (sandbox struct, manager struct). */
#ifndef ISOLA_CORE_INTERNAL_H
#define ISOLA_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "../store/store.h"
#include "changes.h"
#include "core.h"
#include "lifecycle.h"

#define CORE_MAX_SANDBOXES  4096  /* uid slots; also the hard cap on live sandboxes */
#define CORE_MAX_TOMBSTONES 10000 /* records of ended sandboxes kept (newest first) */

/*
 * Lifecycle states (docs/persistence.md). The -ING states after DESTROYING are transient:
 * one persistence operation is in flight and holds the sandbox; each is written to the
 * store before the tier acts, so reconcile after a kill -9 knows what was cut short.
 */
enum sandbox_state {
	SANDBOX_CREATING,
	SANDBOX_RUNNING,
	SANDBOX_ERROR,
	SANDBOX_DESTROYING,
	SANDBOX_PAUSED,	      /* every process stopped, memory kept (tier pause) */
	SANDBOX_HIBERNATED,   /* no tier resources; state in its hibernation snapshot */
	SANDBOX_PAUSING,      /* tier pause in flight */
	SANDBOX_RESUMING,     /* tier resume in flight */
	SANDBOX_SNAPSHOTTING, /* tier snapshot in flight (named snapshot or fork) */
	SANDBOX_HIBERNATING,  /* hibernation snapshot + tier destroy in flight */
	SANDBOX_WAKING,	      /* restore from the hibernation snapshot in flight */
};

struct sandbox {
	atomic_int refs;	       /* references; the core's list holds one */
	pthread_mutex_t lock;	       /* protects everything below */
	struct core *core;	       /* owner, borrowed */
	char id[40];		       /* public id */
	enum sandbox_state state;      /* lifecycle state */
	char *error;		       /* reason when state is ERROR, owned */
	const struct tier_ops *tier;   /* tier implementation */
	struct tier_sandbox *ts;       /* tier handle, NULL once destroyed or lost */
	struct agent_conn *conn;       /* current agent connection or NULL */
	struct agent_conn **old_conns; /* replaced connections, freed with the sandbox */
	size_t n_old_conns;	       /* entries of old_conns */
	struct sandbox_spec spec;      /* what the tier built */
	bool default_limits;	       /* spec's limits are a create's without any: a pool's
					* fill's, so a pool could have served it (pool.c) */
	int uid_slot;		       /* index of the host uid range */
	char template_id[65];	       /* template id */
	char template_name[64];	       /* template name as requested */
	json_t *env;		       /* merged template + request env {K:V}, owned */
	json_t *labels;		       /* {K:V}, owned */
	json_t *seccomp;	       /* spec's seccomp profile, owned, or NULL (specseccomp.h) */
	struct tier_seccomp sc_prog;   /* its program compiled at create for the first build,
					* owned (fd -1 once used or when none) */
	char workdir[256];	       /* default cwd for commands */
	char user[64];		       /* default user for commands */
	double created_at;	       /* unix time */
	double expires_at;	       /* unix time, 0 = never */
	double last_active;	       /* unix time of the last API use */
	char tenant[64];	       /* owning tenant; set before the list add, never changed */
	enum sandbox_state op_prev;    /* state to return to when a transient op ends */
	char origin[40];	       /* snapshot id it was restored from, "" = created */
	char origin_name[64];	       /* that snapshot's name ("" = internal or none) */
	char forked_from[40];	       /* source sandbox of a fork, "" = not a fork child */
	struct sandbox_life life;      /* timeout policy, idle state, pool flags (lifecycle.h) */
	struct sandbox_history *hist;  /* last hour of samples (history.c), owned, or NULL */
	double hist_last;	       /* wall time of the last sampling attempt */
	char name[64];		       /* unique per tenant among live sandboxes, "" = none */
	char end_reason[16]; /* expired|idle (set before a policy destroy), oom (set when init
				died of it: monitor.c), "" = destroyed or error */
	char end_detail[64]; /* e.g. "ttl 3s", with end_reason */
};

/* history.c: samples s's counters when one is due (monitor thread; takes s->lock). */
void history_tick(struct sandbox *s, double now);
/* Frees s's history (sandbox_unref). */
void history_free(struct sandbox *s);

/* Resources a create in flight was admitted for (core.c's admission). */
struct core_reservation {
	char tenant[64];	       /* who */
	uint64_t cpu_millis;	       /* CPU limit */
	uint64_t memory_bytes;	       /* memory limit */
	uint64_t disk_bytes;	       /* writable layer */
	bool pooled;		       /* a warm pool's fill, not a caller's create */
	struct core_reservation *next; /* list under core.lock */
};

struct core {
	struct core_config cfg;			 /* settings, copied */
	struct store *store;			 /* durable state */
	pthread_mutex_t lock;			 /* protects sandboxes, n_sandboxes, slots */
	struct sandbox **sandboxes;		 /* live sandboxes (one reference each) */
	size_t n_sandboxes;			 /* used entries */
	size_t cap_sandboxes;			 /* allocated entries */
	unsigned char slots[CORE_MAX_SANDBOXES]; /* 1 = uid slot in use */
	char token[65];				 /* API bearer token (hex) */
	pthread_t monitor;			 /* TTL and liveness thread */
	int monitor_running;			 /* 1 while the thread runs */
	int stop_fd;				 /* eventfd that stops the monitor */
	int lock_fd;	   /* flock on <state>/isolad.lock: one isolad per state dir */
	uint32_t uid_base; /* host uid of slot 0's id 0 (core_config.uid_base, checked) */
	struct core_reservation *pending; /* admitted creates not yet in the list (under lock) */
	struct tenancy *tenancy;	  /* tenants, tokens, rate buckets */
	struct audit *audit;		  /* the audit trail */
	uint32_t host_cpus;		  /* online CPUs at start */
	uint64_t host_memory;		  /* MemTotal at start */
	char snapshot_root[512];	  /* snapshots and hibernation images */
	pthread_mutex_t snap_lock;	  /* serialises snapshot row changes and ref checks */
	struct pool_set *pools;		  /* warm pools (pool.c), NULL when not running */
	pthread_mutex_t end_lock;	  /* with end_cond: waiters for a sandbox to end */
	pthread_cond_t end_cond;	  /* broadcast when a sandbox ends or fails */
	pthread_cond_t room_cond;	  /* with lock: broadcast when a sandbox or a reservation
					   * leaves, so admission waiters look again */
	uint64_t end_gen;		  /* bumped under end_lock at each broadcast */
	struct change_bus changes;	  /* one notify per sandbox change (core_changed) */
};

/* Tells the change bus a sandbox was created, changed state or went (any lock may be held). */
void core_changed(struct core *c);

/* Allocates a sandbox object (one reference) with state CREATING. */
struct sandbox *sandbox_alloc(struct core *c, const char *id);

/* Serialises the parts of a sandbox the store keeps in `spec` (heap string). */
char *sandbox_spec_dump(struct sandbox *s);

/* Restores those parts from a stored row; -EINVAL on a malformed row. */
int sandbox_spec_load(struct sandbox *s, const char *json, struct isola_err **err);

/* State names as the API shows them. */
const char *sandbox_state_name(enum sandbox_state st);

/* Registers / unregisters a sandbox in the core's list (takes / drops the list's ref). */
int core_list_add(struct core *c, struct sandbox *s, struct isola_err **err);
void core_list_remove(struct core *c, struct sandbox *s);
/* True when a sandbox in the core's list has this id. Any thread (takes the core's lock). */
bool core_sandbox_listed(struct core *c, const char *id);

/* Writes <state>/sandboxes/<id> into out; -ENAMETOOLONG if it does not fit. */
int core_sandbox_dir(const struct core *c, const char *id, char *out, size_t n);

/* Finds the tier named `name`, or NULL. */
const struct tier_ops *core_tier_by_name(const char *name);

/* Releases a sandbox's tier resources and marks it ERROR with reason (keeps the record). */
void core_sandbox_fail(struct core *c, struct sandbox *s, const char *reason);

/* Destroys a sandbox found in the list (any state). */
int core_sandbox_destroy_obj(struct core *c, struct sandbox *s, struct isola_err **err);
/* Callers' creates admitted and not yet in the list (warm-pool fills not counted): what
 * tells a burst (two or more) from a single stream (pool.c). Any thread, no lock held. */
uint32_t core_creates_in_flight(struct core *c);

/* Re-attaches or cleans up the sandboxes in the store (startup). */
int core_reconcile(struct core *c, struct isola_err **err);

/* Whether the sandbox holds tier resources (counts against host capacity). */
bool sandbox_holds_resources(const struct sandbox *s);

/* The directory snapshots live in (cfg.snapshot_dir or <state>/snapshots). */
const char *core_snapshot_root(const struct core *c);

/* --- persist.c: pause, resume, hibernate (callable from any thread, e.g. the monitor) --- */

int core_sandbox_pause_obj(struct core *c, struct sandbox *s, struct isola_err **err);
int core_sandbox_resume_obj(struct core *c, struct sandbox *s, struct isola_err **err);
int core_sandbox_hibernate_obj(struct core *c, struct sandbox *s, struct isola_err **err);

/* Suffix of a hibernation image being written (persist.c, reconcile.c). */
#define HIBERNATION_NEXT ".new"

/* <snapshot root>/hibernated/<id> into out; -ENAMETOOLONG if it does not fit. */
int core_hibernation_dir(const struct core *c, const char *id, char *out, size_t n);

/* `not_supported` naming the sandbox's tier and the operation. Returns -EOPNOTSUPP. */
int core_not_supported(const struct sandbox *s, const char *op, struct isola_err **err);

/* Sends the agent `identity` op (new hostname, machine id, RNG seed) to a sandbox made by
 * restore, before anything else reaches its agent: the caller holds it unreachable (not
 * yet listed, or `waking`). */
int core_sandbox_identity(struct sandbox *s, struct isola_err **err);

/* The tier builds s (create, or restore from snapdir) in a network slot when it joins one
 * (net.h), then s gets its network, with policy_from's policy for a fork. On failure s->ts is
 * NULL if the tier failed (nothing left), else set (the caller destroys it). *t_tier (if not
 * NULL) is when the tier finished. */
int core_tier_build(struct sandbox *s, const char *snapdir, const char *policy_from,
		    uint64_t *t_tier, struct isola_err **err);

/* Retires s->conn (streams keep it until their channels close). Lock held. */
void sandbox_retire_conn(struct sandbox *s);

/* Moves s into a transient state if it is in one of `allowed` (bit per state); on refusal
 * `conflict` naming the state and `op`. Records the transient state in the store first: when
 * that write fails (no_space, unavailable) nothing changes and the error is returned. */
int sandbox_op_begin(struct core *c, struct sandbox *s, unsigned allowed, enum sandbox_state to,
		     const char *op, struct isola_err **err);
/* Ends a transient state: sets `to` in memory and in the store; returns the store's error
 * (err may be NULL when the caller is already failing). */
int sandbox_op_end(struct core *c, struct sandbox *s, enum sandbox_state to,
		   struct isola_err **err);
#define SANDBOX_BIT(st) (1u << (st))

/* Writes the sandbox's whole row (state, spec, tier state) to the store. Lock held or
 * the sandbox not yet shared. */
int core_persist(struct core *c, struct sandbox *s, struct isola_err **err);

/*
 * Starts a prepared sandbox (spec limits, template, tenant, labels set; admitted): takes a
 * uid slot and its dir, records the intent, builds it through the tier — create, or
 * restore from `snapdir` (then the agent gets a fresh identity first) — and adds it to
 * the list RUNNING. ttl_s 0 = the default. Nothing is left behind on failure.
 */
int core_sandbox_start(struct core *c, struct sandbox *s, uint32_t ttl_s, const char *snapdir,
		       struct isola_err **err);

/* Admission of a new sandbox for s->tenant (core.c); release with core_release. */
int core_admit(struct core *c, struct sandbox *s, double *retry_after_s,
	       struct core_reservation **res, struct isola_err **err);
/* Admission of an existing hibernated sandbox waking up (no count, no rate). */
int core_admit_wake(struct core *c, struct sandbox *s, struct core_reservation **res,
		    struct isola_err **err);
void core_release(struct core *c, struct core_reservation *res);

/* Random 16-character id from [a-z0-9] into out (n >= 17). 0 or -errno. */
int core_new_id(char *out, size_t n);

/* --- snapshots.c --------------------------------------------------------------------- */

/* core_sandbox_create for a request naming a snapshot (validated by the caller). */
int core_sandbox_restore_named(struct core *c, const struct sandbox_request *req,
			       struct sandbox **out, struct isola_err **err);

/* Drops an internal (fork) snapshot once no live sandbox restored from it remains. */
void core_snapshot_release(struct core *c, const char *snap_id);
/* Startup: finishes or rolls back snapshot rows and removes temp and stray directories. */
void core_snapshot_reconcile(struct core *c);

/* --- tombstone.c ------------------------------------------------------------------------ */

/* Records s's end (destroy_obj calls it once the sandbox is gone, before it leaves the list,
 * then wakes the waiters): its tombstone in the store unless tombstones are off or s is a
 * warm-pool sandbox. prev is the state it ended from. Any thread, no lock held. */
void core_tombstone_record(struct core *c, struct sandbox *s, enum sandbox_state prev,
			   const char *prev_error);
/* Wakes core_sandbox_wait_for callers (a sandbox ended or failed). Any thread. */
void core_sandbox_end_notify(struct core *c);
/* Drops tombstones past the TTL and the cap (the monitor, now and then). */
void core_tombstone_trim(struct core *c);
/* 409 `name_taken` when a live sandbox of s's tenant other than s holds s->name. Lock:
 * c->lock held. */
int core_name_check_locked(struct core *c, const struct sandbox *s, struct isola_err **err);

/* The TTL and liveness thread. */
int core_monitor_start(struct core *c, struct isola_err **err);
void core_monitor_stop(struct core *c);

/* build.c: runs a build (the owner row is make_owned's, in templates.c). */
struct template_info;
int core_template_build(struct core *c, const char *tenant, const char *name,
			const struct core_build_opts *o, core_build_event_fn ev, void *ud,
			struct template_info *out, struct isola_err **err);

#endif
