/* SPDX-License-Identifier: Apache-2.0 */
/* core: the sandbox manager — state machine, lifecycle, reconciliation. Knows no namespaces. */
#ifndef ISOLA_CORE_H
#define ISOLA_CORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../tiers/tier.h"

struct core;
struct sandbox;	   /* reference-counted; see sandbox_unref() */
struct agent_conn; /* core/agentconn.h */

/* Daemon-wide settings; defaults apply where a create request is silent. */
struct core_config {
	char state_dir[512];		/* /var/lib/isola */
	uint32_t default_cpu_millis;	/* 1000 = one CPU */
	uint64_t default_memory_bytes;	/* 256 MiB */
	uint64_t default_disk_bytes;	/* 1 GiB writable layer */
	uint64_t default_inodes;	/* writable-layer inodes */
	uint32_t default_pids;		/* process limit */
	uint32_t default_ttl_s;		/* 0 = no TTL */
	uint32_t max_ttl_s;		/* cap on requested TTL */
	double cpu_overcommit;		/* admission: sum of CPU limits <= online CPUs x this */
	double memory_overcommit;	/* admission: sum of memory limits <= usable RAM x this */
	uint32_t admission_wait_ms;	/* a create the host has no room for now waits this long
					 * for a destroy to make room (0: refused at once) */
	uint32_t audit_segment_records; /* audit: records per sealed segment (0 = 10000) */
	uint32_t audit_seal_interval_s; /* audit: seal at least this often (0 = 3600) */
	uint64_t audit_retention_s;	/* audit: drop sealed segments older (0 = keep) */
	char snapshot_dir[512];	  /* snapshots and hibernation images, "" = <state>/snapshots */
	uint32_t tombstone_ttl_s; /* keep records of ended sandboxes this long (0 = none) */
	uint32_t uid_base;	  /* first host uid of sandbox slot 0 (core_uid_base_valid) */
	bool microvm_prebuild;	  /* build the host template's microvm image at start */
};

void core_config_defaults(struct core_config *cfg);

/*
 * 1 if `base` can be a core_config.uid_base: a multiple of 65536, at least CORE_UID_BASE_MIN
 * (above the subordinate ranges /etc/subuid hands out) and low enough that every slot's
 * 65536 ids stay below (uid_t)-1. Several isolads on one host need disjoint ranges of
 * CORE_UID_SPAN ids each (docs/process-tier.md "Host uid ranges").
 */
#define CORE_UID_BASE_MIN 1048576u
#define CORE_UID_SPAN	  (4096ull * 65536ull) /* CORE_MAX_SANDBOXES slots of 65536 ids */
int core_uid_base_valid(uint64_t base);

/* A validated create request (the API fills it; borrowed for the call). */
struct sandbox_request {
	char template_name[64];	 /* "" = "host" */
	char tier[16];		 /* "" = "process" */
	uint32_t cpu_millis;	 /* 0 = default */
	uint64_t memory_bytes;	 /* 0 = default */
	uint64_t disk_bytes;	 /* 0 = default */
	uint32_t pids;		 /* 0 = default */
	uint32_t ttl_s;		 /* 0 = default */
	const json_t *env;	 /* {K:V} applied to every command, or NULL */
	const char *workdir;	 /* default cwd for commands, or NULL */
	const char *user;	 /* default user for commands, or NULL */
	const json_t *labels;	 /* {K:V} string labels, or NULL */
	const char *tenant;	 /* owning tenant, NULL = "default" */
	double *retry_after_s;	 /* out, may be NULL: set when refused as `rate_limited` */
	const char *snapshot;	 /* restore from this named snapshot of the tenant, or NULL */
	const char *on_timeout;	 /* kill|pause|hibernate on TTL expiry or idle, NULL = kill */
	uint32_t idle_timeout_s; /* idle this long -> on_timeout, 0 = never (lifecycle.h) */
	int auto_resume;	 /* 0 = resume what policy paused, 1 = always, -1 = never */
	bool build_step;    /* build-run.c: template_name is the build's hidden template (owned by
			  * no tenant, used by the building one's RUN sandboxes) */
	bool pooled;	    /* pool.c only: a warm-pool sandbox, no tenant until claimed */
	bool pool_headroom; /* pool.c only: pooled, and only with room left for one more */
	const char *name;   /* unique per tenant among live sandboxes, or NULL */
	bool caps_set;	    /* cap_add/cap_drop given: caps replaces the default set */
	uint64_t caps;	    /* root's capabilities when caps_set (common/caps.h mask) */
	const char *rootfs; /* operator only (api checks): host dir as the lower layer, or NULL */
	const struct tier_bind *binds;	 /* operator only (api checks): host files/dirs to bind
					* after the template's (docs/oci.md), borrowed */
	unsigned n_binds;		 /* entries of binds */
	const struct tier_mount *mounts; /* tmpfs, masked_paths, readonly_paths (any principal:
					  * they only narrow; docs/oci.md), borrowed */
	unsigned n_mounts;		 /* entries of mounts */
	bool readonly_root;		 /* root mount read-only (any principal: it only narrows) */
	const char *hostname;		 /* the sandbox's hostname (process tier), NULL = its id */
	const json_t *seccomp; /* the spec's seccomp profile (OCI `linux.seccomp`; any principal:
				* it only narrows; docs/oci.md), borrowed, or NULL */
	const char *netns;     /* operator only (api checks): network namespace file to join, or
			     * NULL for the sandbox's own (docs/oci.md) */
};

/* Opens the store, initialises templates, reconciles sandboxes left by an earlier isolad
 * (re-attach what runs, clean and mark `lost` what does not), starts the TTL reaper. */
int core_new(const struct core_config *cfg, struct core **out, struct isola_err **err);

/* Stops background work and releases handles; sandboxes keep running (re-attached at the
 * next start). */
void core_free(struct core *c);

/* Creates and starts a sandbox for req->tenant; *out holds a reference. Validation errors
 * are `invalid`, unknown template `not_found`; the tenant's creation rate `rate_limited`
 * (429, req->retry_after_s set), its quotas `quota_exceeded` (403), host capacity
 * `unavailable` (503). Nothing is left behind on failure. */
int core_sandbox_create(struct core *c, const struct sandbox_request *req, struct sandbox **out,
			struct isola_err **err);

/* Looks a sandbox up; *out holds a reference. -ENOENT `not_found` naming the id. */
int core_sandbox_get(struct core *c, const char *id, struct sandbox **out, struct isola_err **err);

/* JSON array of sandbox objects whose labels contain every pair of `filter` (may be NULL). */
int core_sandbox_list(struct core *c, const json_t *filter, json_t **out, struct isola_err **err);

/* Destroys a sandbox (any state); the id is gone afterwards. */
int core_sandbox_destroy(struct core *c, const char *id, struct isola_err **err);

/*
 * The change bus (changes.h): core_changes_seq() is the number of sandbox changes so far
 * (created, a state transition, destroyed); core_changes_wait() waits up to timeout_ms for it
 * to differ from *seen (1 and *seen updated, 0 on timeout). GET /v1/events rescans on it.
 */
uint64_t core_changes_seq(struct core *c);
int core_changes_wait(struct core *c, uint64_t *seen, unsigned timeout_ms);

/*
 * The same, seen by one tenant (NULL = every tenant, the operator's view): another
 * tenant's sandbox answers exactly like a missing id (`not_found`, same message), so its
 * existence is not revealed. The unscoped functions above are these with tenant NULL.
 */
int core_sandbox_get_for(struct core *c, const char *tenant, const char *id, struct sandbox **out,
			 struct isola_err **err);
int core_sandbox_list_for(struct core *c, const char *tenant, const json_t *filter, json_t **out,
			  struct isola_err **err);
int core_sandbox_destroy_for(struct core *c, const char *tenant, const char *id,
			     struct isola_err **err);
int core_sandbox_set_ttl_for(struct core *c, const char *tenant, const char *id, uint32_t ttl_s,
			     struct isola_err **err);

/*
 * Persistence (docs/persistence.md), tenant-scoped like the functions above. Each answers
 * `not_supported` naming the tier and the operation when the tier lacks it, and `conflict`
 * naming the state when the sandbox is in none the operation starts from.
 *
 * pause: running -> paused (idempotent). resume: paused -> running, or hibernated ->
 * running through a restore from its hibernation snapshot (admitted like a create; the
 * agent is reseeded before any other request). hibernate: running/paused -> hibernated
 * (snapshot into <snapshot dir>/hibernated/<id>, then the tier's resources are released;
 * the row and uid slot stay).
 */
int core_sandbox_pause_for(struct core *c, const char *tenant, const char *id,
			   struct isola_err **err);
int core_sandbox_resume_for(struct core *c, const char *tenant, const char *id,
			    struct isola_err **err);
int core_sandbox_hibernate_for(struct core *c, const char *tenant, const char *id,
			       struct isola_err **err);

/*
 * Forks a running or paused sandbox into `count` new ones (same tenant, limits, template,
 * labels; `forked_from` set) restored from one internal snapshot, each with a fresh
 * identity. *out: {source, paused_us, level, children: [sandbox...]} (new reference). All or
 * nothing: children made before a failure are destroyed.
 */
int core_sandbox_fork_for(struct core *c, const char *tenant, const char *id, unsigned count,
			  json_t **out, struct isola_err **err);

/*
 * Named snapshots of a tenant: immutable, independent of their source's life. create
 * snapshots sandbox `id` as `name` (`exists` if taken; `no_space` when the snapshot dir is
 * full, the sandbox keeps running). Another tenant's snapshot answers like a missing one.
 * delete refuses (`conflict`) while a live sandbox still maps it (tier declaration).
 */
int core_snapshot_create_for(struct core *c, const char *tenant, const char *id, const char *name,
			     json_t **out, struct isola_err **err);
int core_snapshot_list_for(struct core *c, const char *tenant, json_t **out,
			   struct isola_err **err);
int core_snapshot_get_for(struct core *c, const char *tenant, const char *name, json_t **out,
			  struct isola_err **err);
int core_snapshot_delete_for(struct core *c, const char *tenant, const char *name,
			     struct isola_err **err);

/* {stop, pause, hibernate, snapshot, fork} -> none|files|files+memory for a tier, from its
 * ops and declarations (new reference). */
json_t *core_persistence_json(const struct tier_ops *t);

/*
 * Names and tombstones (docs/tombstones.md). A name is [a-z0-9][a-z0-9_.-]{0,62},
 * unique per tenant among live sandboxes (create answers 409 `name_taken` naming the holder).
 * An ended sandbox (destroyed, expired, idle, failed) leaves a tombstone, a small record kept
 * core_config.tombstone_ttl_s (at most CORE_MAX_TOMBSTONES of them) in the store.
 */
static inline bool core_sandbox_name_valid(const char *name)
{
	size_t i = 0;

	/* [a-z0-9][a-z0-9_.-]{0,62}: usable in a URL path segment and a shell word as is. */
	for (; name && name[i]; i++) {
		char ch = name[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

		if (i >= 63 || (!alnum && (i == 0 || (ch != '_' && ch != '.' && ch != '-'))))
			return false;
	}
	return i > 0;
}

/*
 * Resolves `ref` (an id or a name) for tenant (NULL = any): 0 with the live sandbox's id in
 * id (size n); else -ENOENT, with *ended (new reference, may be NULL to not ask) the newest
 * tombstone of that id or name when there is one, NULL otherwise. No error is set.
 */
int core_sandbox_resolve_for(struct core *c, const char *tenant, const char *ref, char *id,
			     size_t n, json_t **ended);

/* The message an API answers for a tombstone ("sandbox `ab12` expired at 14:03:05 UTC (ttl
 * 3s) and was destroyed") into buf. */
void core_tombstone_message(const json_t *t, char *buf, size_t n);

/* Appends tenant's tombstones (NULL = all) whose labels contain filter to arr, newest first. */
int core_tombstone_list_for(struct core *c, const char *tenant, const json_t *filter, json_t *arr,
			    struct isola_err **err);

/*
 * Waits until the sandbox `ref` of tenant ends (gone, or in state error) or timeout_ms
 * passes: 0 with *out its tombstone (or, for an errored sandbox, its object with
 * state `error`); -ETIMEDOUT (no error set) when still running; -ENOENT `not_found` when
 * neither a live sandbox nor a tombstone has that id or name. Blocks on a condition
 * variable (no polling of state); any thread.
 */
int core_sandbox_wait_for(struct core *c, const char *tenant, const char *ref, int timeout_ms,
			  json_t **out, struct isola_err **err);

/*
 * Removes tenant's tombstones (states has "ended") and destroys its errored sandboxes (states
 * has "error") that ended / were created at least older_than_s ago. *out: array of the ids
 * removed (new reference). Stops at the first destroy that fails (its error).
 */
int core_prune_for(struct core *c, const char *tenant, bool ended, bool errored,
		   double older_than_s, json_t **out, struct isola_err **err);

/* Tenant that owns s (borrowed, lives as long as s). */
const char *sandbox_tenant(const struct sandbox *s);

/* {sandboxes, cpu, memory, disk} a tenant holds now (new reference). */
json_t *core_tenant_usage(struct core *c, const char *tenant);

/* Removes a tenant that owns no sandbox (`conflict` otherwise) and revokes its tokens. */
int core_tenant_remove(struct core *c, const char *name, struct isola_err **err);

/* Host capacity as admission sees it: {cpus, cpu_capacity, cpu_committed, memory_total,
 * memory_capacity, memory_committed, cpu_overcommit, memory_overcommit} (new reference). */
json_t *core_capacity(struct core *c);

/* The tenancy layer and the audit trail the core owns (borrowed for the core's life). */
struct tenancy *core_tenancy(struct core *c);
struct audit *core_audit(struct core *c);
const struct core_config *core_config(struct core *c);

/* Extends (or sets) a sandbox's TTL to ttl_s seconds from now. */
int core_sandbox_set_ttl(struct core *c, const char *id, uint32_t ttl_s, struct isola_err **err);

void sandbox_ref(struct sandbox *s);
void sandbox_unref(struct sandbox *s);

const char *sandbox_id(const struct sandbox *s);

/* The network namespace path the sandbox joined (`netns` at create), or NULL when it has a
 * network of its own. Fixed for the sandbox's life: no lock needed. */
const char *sandbox_joined_netns(const struct sandbox *s);

/* The sandbox as its API object (new reference): id, state, tier, template, limits,
 * labels, created_at, expires_at, persistence, error. */
json_t *sandbox_to_json(struct sandbox *s);

/* The host pid of the sandbox's init (the tier's saved `pid`), 0 when it has none (not
 * running, or a tier without one). Any thread (takes s->lock). */
long sandbox_host_pid(struct sandbox *s);

/*
 * The agent connection of a running sandbox, borrowed while the caller holds its
 * reference to s. -EBUSY `conflict` when the sandbox is not running (names the state),
 * reconnects transparently if the previous connection died.
 */
int sandbox_agent(struct sandbox *s, struct agent_conn **out, struct isola_err **err);

/*
 * Completes an agent exec request with the sandbox's defaults: env (template, then
 * sandbox, then the request's own), cwd and user when the request has none. `req` is
 * modified in place.
 */
void sandbox_apply_exec_defaults(struct sandbox *s, json_t *req);

/* Completes an agent file-op request (read, write, stat, list, tar_*) with the sandbox's
 * default user when the request names none: file ops run as the sandbox user. */
void sandbox_apply_file_defaults(struct sandbox *s, json_t *req);

/*
 * The last `max` bytes of the sandbox's serial console (heap, caller frees; *len set).
 * `not_supported` for tiers without a console (process), `conflict` once the tier's
 * resources are gone (an errored sandbox keeps its last console lines in its error).
 */
int sandbox_console(struct sandbox *s, size_t max, char **out, size_t *len, struct isola_err **err);

/* Resource counters from the tier. */
int sandbox_stats(struct sandbox *s, struct tier_stats *out, struct isola_err **err);

#define SANDBOX_HISTORY_PERIOD_S 5   /* one sample per running sandbox this often */
#define SANDBOX_HISTORY_LEN	 720 /* samples kept: an hour at the period above */

/* One sample of a sandbox's counters (32 bytes). */
struct sandbox_sample {
	double at;	       /* wall time it was taken */
	uint64_t cpu_usec;     /* CPU time consumed so far */
	uint64_t memory_bytes; /* memory in use */
	uint64_t disk_bytes;   /* writable-layer bytes used */
	uint64_t net_tx_bytes; /* bytes the sandbox sent on its veth so far (0: no network) */
	uint64_t net_rx_bytes; /* bytes it received so far */
};

/*
 * Copies s's kept samples taken in [start, end] into out (cap entries), oldest first.
 * When a sample older than `start` is kept, the newest such comes first and *with_prev is
 * set (the base for the first CPU percentage). Returns the entries written. Any thread.
 */
size_t sandbox_history(struct sandbox *s, double start, double end, struct sandbox_sample *out,
		       size_t cap, bool *with_prev);

/* Marks activity (API use) for idle tracking. */
void sandbox_touch(struct sandbox *s);

/* Templates (through images/, refusing to remove one in use). */
int core_template_list(struct core *c, json_t **out, struct isola_err **err);
int core_template_remove(struct core *c, const char *name, struct isola_err **err);
typedef void (*core_progress_fn)(void *ud, const char *phase, uint64_t done, uint64_t total);
int core_template_import(struct core *c, const char *name, const char *tar_path,
			 core_progress_fn cb, void *ud, json_t **out, struct isola_err **err);

/* The same, seen by one tenant (NULL = all): a tenant sees the built-in `host` template and
 * the templates it imported (templates from before tenancy belong to `default`); another
 * tenant's template is `not_found`. Import records the tenant as the owner. */
int core_template_list_for(struct core *c, const char *tenant, json_t **out,
			   struct isola_err **err);
int core_template_remove_for(struct core *c, const char *tenant, const char *name,
			     struct isola_err **err);
int core_template_import_for(struct core *c, const char *tenant, const char *name,
			     const char *tar_path, core_progress_fn cb, void *ud, json_t **out,
			     struct isola_err **err);
/* Pulls an image (images_pull) as template `name` owned by tenant; *out as import's. */
struct images_pull_opts;
int core_template_pull_for(struct core *c, const char *tenant, const char *name,
			   const struct images_pull_opts *o, core_progress_fn cb, void *ud,
			   json_t **out, struct isola_err **err);
/* One template's full view (images_info_json(full)); another tenant's is `not_found`. */
/* What `template build` is given (all borrowed). */
struct core_build_opts {
	const char *context;	  /* path of the context tar (the client's upload) */
	const char *dockerfile;	  /* the Dockerfile's path inside the context, NULL = Dockerfile */
	const json_t *build_args; /* {K:V} for ARG, or NULL */
	const json_t *allow;	  /* egress allow rules of RUN sandboxes, or NULL (deny all) */
	bool pull; /* FROM of an image reference that names no template pulls it (the operator) */
	const char *tier; /* tier RUN steps run in: NULL or "process", "microvm" */
	/* Recorded on the template as config.resources: the cpu and memory its sandboxes get
	 * when their create names none (0 = the daemon's default). */
	uint32_t cpu_millis;
	uint64_t memory_bytes;
};
/* The sandbox limits a create (or a template's config.resources) may ask for: memory 0 or
 * ≥ 16 MiB, cpu ≤ 1024 CPUs. 0 or -EINVAL with *err naming the limit. */
int core_resources_check(uint32_t cpu_millis, uint64_t memory_bytes, struct isola_err **err);
/* config.resources of a template: {cpu (CPUs), memory (bytes)}, the unset ones left out. */
json_t *core_resources_json(uint32_t cpu_millis, uint64_t memory_bytes);
/* A build's progress event (stolen): step, output, layer; see docs/templates.md "Build". */
typedef void (*core_build_event_fn)(void *ud, json_t *ev);
/* Builds template `name` from a Dockerfile (core/build.c) as tenant (its sandboxes run the RUN
 * steps; it owns the template). Blocks; run it on a worker thread. *out as import's. */
int core_template_build_for(struct core *c, const char *tenant, const char *name,
			    const struct core_build_opts *o, core_build_event_fn ev, void *ud,
			    json_t **out, struct isola_err **err);
/* The build cache's entries tenant may see (NULL: all, the operator's view) as a JSON array
 * of {key, kind, tenant, instruction, template, size_bytes, created_at, last_used_at}
 * (core/build-cache.c). Any thread. */
int core_build_cache_list_for(struct core *c, const char *tenant, json_t **out,
			      struct isola_err **err);
/* Removes tenant's (NULL: every) build cache entries, all of them or those last used more
 * than older_than_s ago; with NULL also what crashed builds left. *out {removed: [keys],
 * freed_bytes}. Templates never point into the cache: nothing built becomes unusable. */
int core_build_cache_prune_for(struct core *c, const char *tenant, bool all, double older_than_s,
			       json_t **out, struct isola_err **err);

int core_template_get_for(struct core *c, const char *tenant, const char *name, json_t **out,
			  struct isola_err **err);
/* True when tenant (NULL = anyone) may use template `name` (name or id). */
bool core_template_visible(struct core *c, const char *tenant, const char *name);

/* Host capability report (JSON, new reference). */
json_t *core_doctor(struct core *c);

/* The API bearer token for TCP listeners (generated at first start, stored 0600). */
const char *core_api_token(struct core *c);

#endif
