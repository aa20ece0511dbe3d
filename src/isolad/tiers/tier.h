/* SPDX-License-Identifier: Apache-2.0 */
/* tier: the interface every isolation tier implements (process/, later microvm/). */
#ifndef ISOLA_TIER_H
#define ISOLA_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../common/err.h"

#define TIER_MAX_BINDS 32

/* A host directory shown inside the sandbox: a template's (read-only, at the same path) or an
 * operator's (`binds` at create: isola-runc's spec mounts, docs/oci.md; a file or a dir). */
struct tier_bind {
	char src[256]; /* absolute host path */
	char dst[256]; /* absolute path inside the sandbox */
	bool writable; /* read-write (operator binds only): never idmapped, so the sandbox writes
			* as its own host uids and cannot make host-root-owned files */
	bool single;   /* this mount only (OCI `bind`), not its submounts (`rbind`, default) */
};

#define TIER_MAX_MOUNTS 64 /* tmpfs mounts, masked and read-only paths together */

/* What a tier_mount does to its path (docs/oci.md, "tmpfs, masked and read-only paths"). */
enum tier_mount_kind {
	TIER_MOUNT_TMPFS = 1,	 /* a new tmpfs (nosuid, nodev) on the directory, made if missing */
	TIER_MOUNT_MASKED = 2,	 /* /dev/null over a file, an empty read-only tmpfs over a dir */
	TIER_MOUNT_READONLY = 3, /* a read-only bind of the path onto itself */
};

/* One of the create request's `tmpfs`, `masked_paths` or `readonly_paths` (any principal:
 * each only narrows what the sandbox sees). Applied by the process tier's setup. */
struct tier_mount {
	char path[256];		   /* absolute path inside the sandbox, no `.`/`..` */
	enum tier_mount_kind kind; /* what is done there */
	uint64_t size;		   /* tmpfs: its size in bytes (> 0) */
	uint32_t mode;		   /* tmpfs: its root's mode (<= 07777) */
	bool noexec;		   /* tmpfs: mounted noexec */
	bool readonly;		   /* tmpfs: mounted read-only */
};

/*
 * Everything a tier needs to build one sandbox. Filled by core; borrowed by the
 * tier for the duration of the call (copy what you keep).
 */
/* A network namespace made ahead for a sandbox to join (a network slot, docs/network.md). */
struct tier_netns {
	int netns_fd; /* the namespace */
	int sysfs_fd; /* a detached read-only sysfs mount of it, for the sandbox's /sys */
};

/* The spec's own seccomp program (docs/oci.md "The spec's seccomp profile"), compiled by core
 * from the stored profile for one create or restore. */
struct tier_seccomp {
	int fd;		/* sealed memfd of `struct sock_filter[]`, borrowed */
	uint32_t flags; /* SECCOMP_FILTER_FLAG_* bits to install it with */
};

struct sandbox_spec {
	char id[40];				/* sandbox id, [a-z0-9-], also the hostname */
	char dir[512];				/* per-sandbox state dir, created by core, 0700 */
	char rootfs[512];			/* template rootfs dir (lower layer), read-only */
	struct tier_bind binds[TIER_MAX_BINDS]; /* the template's binds, then the operator's */
	unsigned n_binds;			/* used entries of binds */
	struct tier_mount mounts[TIER_MAX_MOUNTS]; /* tmpfs, masked, read-only (create's) */
	unsigned n_mounts;			   /* used entries of mounts */
	bool readonly_root;    /* the root mount read-only to the sandbox's processes (create's
			     * readonly_root, process tier; its other mounts keep their own) */
	uint32_t uid_base;     /* first host uid/gid of this sandbox's 65536 range */
	uint32_t cpu_millis;   /* CPU quota in millicores, 0 = unlimited */
	uint64_t memory_bytes; /* memory limit, 0 = unlimited */
	uint64_t disk_bytes;   /* writable-layer size limit */
	uint64_t inodes;       /* writable-layer inode limit */
	uint32_t pids;	       /* max processes, 0 = unlimited */
	uint32_t nofile;       /* RLIMIT_NOFILE for sandbox processes */
	uint64_t caps;	       /* capabilities of the sandbox's root (common/caps.h mask) */
	/* During create and restore only (NULL otherwise): the namespace the sandbox's
	 * processes join instead of a new one of their own (tiers with netns_join). */
	const struct tier_netns *netns;
	/* During create and restore only (NULL otherwise, or when the sandbox has none): the
	 * filter every process started in the sandbox gets on top of isola's, right before its
	 * execve (process tier; the agent itself is not under it). */
	const struct tier_seccomp *seccomp;
	char hostname[64];    /* the sandbox's hostname (process tier), "" = its id */
	char netns_path[256]; /* join this network namespace instead of making one (operator
				* only, process tier; docs/oci.md), "" = the sandbox's own */
};

/* Resource counters of a running sandbox. */
struct tier_stats {
	uint64_t memory_bytes;	    /* current memory use */
	uint64_t memory_peak_bytes; /* high-water mark */
	uint64_t cpu_usec;	    /* CPU time consumed */
	uint32_t pids;		    /* live processes */
	uint64_t oom_kills;	    /* OOM kills since creation */
	uint64_t disk_bytes;	    /* writable-layer bytes used */
};

/* The hostname a sandbox of spec gets: its own (`hostname` at create) or its id. */
static inline const char *tier_hostname(const struct sandbox_spec *spec)
{
	return spec->hostname[0] ? spec->hostname : spec->id;
}

struct tier_sandbox; /* a tier's handle on one live sandbox */

/*
 * What survives an operation (docs/persistence.md). The API reports these names and never
 * claims more than the tier delivers.
 */
enum tier_persistence {
	TIER_PERSIST_NONE = 0,	 /* "none": nothing */
	TIER_PERSIST_FILES = 1,	 /* "files": the writable layer's files */
	TIER_PERSIST_MEMORY = 2, /* "files+memory": files, processes and their memory */
};

/*
 * A tier. All functions may be called from any isolad thread, but never twice
 * concurrently for the same sandbox (core serialises per sandbox).
 */
struct tier_ops {
	const char *name; /* "process", "microvm" */
	bool netns_join;  /* create and restore honour spec->netns (net slots) */

	/* Builds and starts the sandbox; on success the agent is running and listening.
	 * On failure nothing is left behind. */
	int (*create)(const struct sandbox_spec *spec, struct tier_sandbox **out,
		      struct isola_err **err);

	/* Returns a new stream fd connected to the agent (caller owns it). */
	int (*agent_connect)(struct tier_sandbox *s, struct isola_err **err);

	/* A heap JSON string with what reattach/cleanup need after an isolad restart
	 * (pids, start times, cgroup paths). Caller frees. */
	char *(*save)(struct tier_sandbox *s);

	/* Re-attaches to a sandbox created by an earlier isolad; -ESRCH when it is gone. */
	int (*reattach)(const struct sandbox_spec *spec, const char *saved,
			struct tier_sandbox **out, struct isola_err **err);

	/* An fd that polls readable once the sandbox's init has exited (borrowed). */
	int (*exit_fd)(struct tier_sandbox *s);

	/* Counters; fields the tier cannot measure are 0. */
	int (*stats)(struct tier_sandbox *s, struct tier_stats *out, struct isola_err **err);

	/* Kills every process and removes every resource (mounts, cgroups, files under
	 * spec->dir that the tier made), then frees s. Idempotent on a half-made sandbox. */
	int (*destroy)(struct tier_sandbox *s, struct isola_err **err);

	/* Optional (NULL: nothing to drop). Called by a destroy (never a hibernate) before
	 * destroy, once the store says `destroying`: the sandbox's files are thrown away, so
	 * what it wrote and its storage has not written yet may be dropped instead of written
	 * back by the teardown, where that pays. Processes still writing get EIO. */
	void (*discard)(struct tier_sandbox *s);

	/* Removes what a sandbox left when no handle could be had (lost after restart):
	 * given the spec and the saved state (may be NULL). */
	int (*cleanup)(const struct sandbox_spec *spec, const char *saved, struct isola_err **err);

	/* Frees the handle without touching the sandbox (isolad shutting down). */
	void (*release)(struct tier_sandbox *s);

	/* Optional (NULL: none). The last max bytes of the sandbox's console log as a heap
	 * string (caller frees; *len = bytes), or NULL. */
	char *(*console)(struct tier_sandbox *s, size_t max, size_t *len);

	/* Optional (NULL: none). Once exit_fd fired: why (e.g. "guest kernel panicked" with
	 * the last console lines). Borrowed, valid until destroy/release. */
	const char *(*last_error)(struct tier_sandbox *s);

	/* ---- persistence (docs/persistence.md); each optional, NULL = not supported ---- */

	/* Stops every process of the sandbox without losing anything (process tier: cgroup
	 * freezer v1/v2; microvm: vCPUs stopped). The agent is stopped too: core refuses or
	 * auto-resumes agent traffic while paused. Idempotent. */
	int (*pause)(struct tier_sandbox *s, struct isola_err **err);
	int (*resume)(struct tier_sandbox *s, struct isola_err **err);

	/*
	 * Writes the sandbox's state into `dir` (an empty directory core made, 0700 root) and
	 * sets *level to what it captured (process: FILES; microvm: MEMORY). Called on a
	 * running or paused sandbox; on return it is in the state it was in before (the tier
	 * may pause it briefly and reports how long in *paused_us, may be NULL). Every file the
	 * tier writes is fsynced before return; core writes the manifest (names, sizes,
	 * SHA-256) afterwards, so a tier never needs one. The files must stay valid after the
	 * source sandbox is destroyed. `ENOSPC` is reported as `no_space`, the sandbox keeps
	 * running. On failure `dir` may hold partial files; core removes it.
	 */
	int (*snapshot)(struct tier_sandbox *s, const char *dir, enum tier_persistence *level,
			uint64_t *paused_us, struct isola_err **err);

	/*
	 * Builds and starts a new sandbox from a directory `snapshot` wrote (same tier), like
	 * create otherwise: spec is the new sandbox's identity and limits (new id, dir,
	 * uid_base). The snapshot directory is read-only and shared: many restores may run
	 * from it at once and it outlives them (microvm maps its memory file copy-on-write).
	 * On success the agent is running; for MEMORY level, every process of the source is
	 * back as it was. On failure nothing is left behind.
	 */
	int (*restore)(const struct sandbox_spec *spec, const char *snapdir,
		       struct tier_sandbox **out, struct isola_err **err);

	/* ---- declarations (core reads them; zero is the conservative default) ---- */

	/* What `snapshot` captures, and so what hibernate, named snapshots and fork keep:
	 * TIER_PERSIST_FILES or TIER_PERSIST_MEMORY. 0 with a snapshot op: core reports FILES. */
	enum tier_persistence snapshot_level;

	/* True when a sandbox made by `restore` keeps using the snapshot directory for its
	 * whole life (microvm: memory file mapped MAP_PRIVATE, disk overlays on the snapshot's
	 * image). Core then refuses to delete that snapshot while such a sandbox lives. */
	bool restore_needs_snapshot;

	/* Optional (NULL: the sandbox gets no network device, so nothing gets out). A new fd
	 * (caller owns it) of the network namespace the sandbox's veth peer goes into
	 * (docs/network.md); -ESRCH once the sandbox is gone. */
	int (*netns_fd)(struct tier_sandbox *s, struct isola_err **err);
};

extern const struct tier_ops tier_process_ops;
extern const struct tier_ops tier_microvm_ops; /* microvm/ */

/* Host capability report for `isola doctor` (JSON object as a heap string). */
char *tier_process_doctor(void);

#endif
