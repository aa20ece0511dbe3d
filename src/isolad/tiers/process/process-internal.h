/* SPDX-License-Identifier: Apache-2.0 */
/* process-internal: what the process tier's files share (cgroup ops, seccomp, mounts, spawn). */
#ifndef ISOLA_TIER_PROCESS_INTERNAL_H
#define ISOLA_TIER_PROCESS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../../common/err.h"
#include "../tier.h"

#define PROC_CG_MAX_PATHS 8 /* v1: memory, pids, cpu, cpuacct, freezer (+ spare) */

/* ---- cgroups (cgroup.c, cgroup-v1.c, cgroup-v2.c) ---- */

/* The cgroup directories of one sandbox: one per v1 hierarchy, or one on v2. */
struct proc_cgroup {
	int version;			   /* 1 or 2; 0 = none made */
	unsigned n;			   /* used entries of path */
	char path[PROC_CG_MAX_PATHS][512]; /* absolute cgroupfs dirs, e.g. .../memory/isola/<id> */
	char ctrl[PROC_CG_MAX_PATHS][16];  /* controller of each path ("memory", "unified") */
};

/* Resource limits a cgroup backend applies (taken from the spec). */
struct proc_cg_limits {
	uint64_t memory_bytes; /* 0 = unlimited */
	uint32_t pids;	       /* 0 = unlimited */
	uint32_t cpu_millis;   /* 0 = unlimited */
};

/*
 * One cgroup version. Functions return 0 or -errno and set *err naming the file.
 * Called from any thread; per-sandbox calls are serialised by core.
 */
struct cgroup_ops {
	int version;	  /* 1 or 2 */
	const char *name; /* "v1", "v2" */
	/* Makes isola/<id> in every used hierarchy and applies limits; on failure removes what it made. */
	int (*create)(const char *id, const struct proc_cg_limits *lim, struct proc_cgroup *cg,
		      struct isola_err **err);
	/* Moves pid into every directory of cg. */
	int (*attach)(const struct proc_cgroup *cg, pid_t pid, struct isola_err **err);
	/* Reads counters into out (memory, peak, cpu, pids, oom_kills). */
	int (*stats)(const struct proc_cgroup *cg, struct tier_stats *out, struct isola_err **err);
	/* Kills every process in cg (v2 cgroup.kill, v1 freeze + SIGKILL each + thaw). */
	int (*kill_all)(const struct proc_cgroup *cg);
	/* Freezes (on) or thaws every process in cg and waits up to timeout_ms until the kernel
	 * reports the new state (v1 freezer.state FROZEN/THAWED, v2 cgroup.events `frozen`).
	 * Idempotent. -ENOTSUP without a freezer; -ETIMEDOUT when the group does not freeze
	 * in time (a task in uninterruptible sleep): the group is thawed again. */
	int (*freeze)(const struct proc_cgroup *cg, bool on, int timeout_ms,
		      struct isola_err **err);
	/* True if cg is frozen or asked to freeze (v1 freezer.state not THAWED, v2
	 * cgroup.freeze 1): how reattach learns that the sandbox was paused. */
	bool (*is_frozen)(const struct proc_cgroup *cg);
	/* Fills cg with the paths create() would use for id, without touching anything. */
	int (*paths)(const char *id, struct proc_cgroup *cg);
	/* Controllers this host gives us, as a heap JSON array string for doctor. */
	char *(*describe)(void);
};

/* Where this host mounts its cgroup hierarchies (parsed once from /proc/self/mountinfo). */
enum proc_cg_ctrl {
	PROC_CG_MEMORY,
	PROC_CG_PIDS,
	PROC_CG_CPU,
	PROC_CG_CPUACCT,
	PROC_CG_FREEZER,
	PROC_CG_NCTRL
};
struct proc_cg_host {
	char v2[256];		     /* cgroup2 mount point, "" if none */
	char v1[PROC_CG_NCTRL][256]; /* v1 mount point per controller, "" if absent */
};
extern const char *const proc_cg_ctrl_names[PROC_CG_NCTRL];

/* Parses a mountinfo body into h. 0 or -errno. Pure (unit-tested). */
int proc_cg_parse_mountinfo(const char *body, struct proc_cg_host *h);
/* This host's layout (parsed once). Never NULL; fields empty when unknown. */
const struct proc_cg_host *proc_cg_host(void);
/* Parent directory name under each hierarchy root ("isola"). */
#define PROC_CG_PARENT "isola"

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

/* Returns the backend for this host (detected once: v2 if the unified hierarchy
 * carries the memory and pids controllers, else v1), or NULL with *err. Any thread. */
const struct cgroup_ops *proc_cgroup_detect(struct isola_err **err);

/* True if every directory of cg has no process left. */
bool proc_cgroup_is_empty(const struct proc_cgroup *cg);

/* Waits (up to timeout_ms) until cg is empty, then removes its directories (leaf
 * first). Missing directories are fine. 0, -EBUSY on timeout, or -errno. */
int proc_cgroup_remove(const struct proc_cgroup *cg, int timeout_ms, struct isola_err **err);

/* Pure formatting helpers, unit-tested. */
/* "<mnt>/isola/<id>". 0 or -ENAMETOOLONG. */
int proc_cg_format_path(char *buf, size_t len, const char *mnt, const char *id);
/* v2 cpu.max: "max 100000" or "<quota> 100000"; quota = millis * 100 (period 100ms). */
void proc_cg_format_cpu_max(char *buf, size_t len, uint32_t cpu_millis);
/* v1 cpu.cfs_quota_us value: "-1" or millis * 100. */
void proc_cg_format_cfs_quota(char *buf, size_t len, uint32_t cpu_millis);
/* Limit value: "max" (v2) / "-1" (v1) for 0, else the decimal number. */
void proc_cg_format_limit(char *buf, size_t len, uint64_t v, int version);
/* Finds `key <u64>` in a flat-keyed file body (memory.events, memory.oom_control,
 * cpu.stat). 0 and *out, or -ENOENT. */
int proc_cg_parse_keyed(const char *body, const char *key, uint64_t *out);

/* Milliseconds on CLOCK_MONOTONIC (freeze deadlines). */
int64_t proc_cg_now_ms(void);

/* Writes s to dir/file (no O_CREAT). 0 or -errno. */
int proc_cg_write(const char *dir, const char *file, const char *s);
/* Reads dir/file as a u64 ("max" -> UINT64_MAX). 0 or -errno. */
int proc_cg_read_u64(const char *dir, const char *file, uint64_t *out);

/* ---- seccomp (seccomp.c, seccomp-policy.c) ---- */

enum proc_sc_action {
	PROC_SC_ALLOW,	/* unconditionally allowed */
	PROC_SC_EPERM,	/* explicitly refused with EPERM (documentation + tests) */
	PROC_SC_ENOSYS, /* refused with ENOSYS so libc falls back (clone3) */
};

/* One row of the policy table: a syscall, what happens, and who needs it. */
struct proc_sc_rule {
	const char *name; /* syscall name as libseccomp knows it */
	int nr; /* x86_64 number, used when libseccomp is older than the syscall; -1 = none */
	enum proc_sc_action action;
};

extern const struct proc_sc_rule proc_sc_rules[];
extern const size_t proc_sc_n_rules;

/*
 * Compiles the policy (the table plus the argument-filtered rules in
 * seccomp-policy.c) to a classic BPF program in a sealed memfd. Returns the fd
 * (caller owns) or -errno with *err. Any thread.
 */
int proc_seccomp_compile_memfd(struct isola_err **err);

/* Adds the argument-filtered rules (clone, socket, ioctl, personality) to ctx. */
int proc_seccomp_add_arg_rules(void *ctx);

/* ---- mounts (mounts.c) ---- */

enum proc_idmap_mode {
	PROC_IDMAP_NONE = 0, /* plain read-only lower layers: template files show as nobody */
	PROC_IDMAP_ON = 1,   /* idmapped lower layers: template root shows as sandbox root */
};

/*
 * Clones the tree at host path `src` (a directory or a file; with its submounts when
 * `recursive`), nosuid, nodev, read-only when `readonly` and, if userns_fd >= 0, idmapped
 * through that user namespace. Returns the detached mount fd (caller owns) or -errno;
 * *idmapped tells whether the idmap took. On idmap failure it falls back to a plain clone.
 */
int proc_mount_clone(const char *src, int userns_fd, bool readonly, bool recursive, bool *idmapped);

/* Makes a detached tmpfs (size, nr_inodes, root dir owned by uid/gid). Returns the
 * mount fd or -errno. */
int proc_mount_tmpfs(uint64_t size, uint64_t inodes, uint32_t uid, uint32_t gid);

/* ---- the writable layer's disk (disk.c) ---- */

#define PROC_DISK_DEFAULT_BYTES	 (1ull << 30) /* when the spec says 0 */
#define PROC_DISK_DEFAULT_INODES 65536	      /* when the spec says 0 */

/* Bytes of the ext4 image for a `disk`-byte allowance with `inodes` inodes: the allowance
 * plus ext4's own metadata, so the sandbox can store `disk` bytes of files. Pure. */
uint64_t proc_disk_image_size(uint64_t disk, uint64_t inodes);

/*
 * Makes the sandbox's writable layer on the host's disk: a nameless (O_TMPFILE) sparse
 * image in dir, formatted ext4 (at most `inodes` inodes, no journal, no reserved blocks) by
 * mke2fs or from the formatted image kept in memory for the same size and inodes, root dir
 * chowned to uid/gid, bound to a loop device with LOOP_CONFIGURE and
 * LO_FLAGS_AUTOCLEAR, mounted detached with fsopen/fsmount (nosuid, nodev). Returns the
 * mount fd (caller owns): the filesystem, the loop device and the image's blocks go away
 * with the last reference to that mount, so nothing outlives the sandbox, a failed create
 * or a crash of isolad. `id` names the loop device (losetup shows `isola:<id>`). A layer of
 * the default size and inodes is taken from those made ahead when one is ready
 * (tier_process_layer_slots_start; only its root is chowned then). -errno with *err:
 * `unavailable` when the host has no loop devices or no mke2fs. Any thread.
 */
int proc_disk_mount(const char *dir, const char *id, uint64_t disk, uint64_t inodes, uint32_t uid,
		    uint32_t gid, struct isola_err **err);

/* Destroy only: when the layer holds at least DISK_DISCARD_MIN (8 MiB) written and not yet
 * on its image (or that is unknown), shuts its ext4 down (EXT4_IOC_SHUTDOWN, no log flush)
 * through root_fd, a descriptor of its root (O_PATH will do), so the unmount that follows
 * writes none of it back: the image is thrown away anyway. Below that the unmount writes
 * the little there is, cheaper than the shutdown's console line. Processes still writing
 * get EIO. No-op on a tmpfs layer or a bad fd. */
void proc_disk_discard(int root_fd);

/* Destroy only: gives up root_fd, the last reference to a sandbox's layer (whose processes
 * are all gone), or the sandbox's mount namespace (given first, as the layer is its
 * overlay's upper). Its close is the unmounts and the loop device's release, the slowest
 * part of a destroy: done by one background thread, in the order given, after the caller
 * returns (inline when the thread cannot start). Nothing is lost to a crash or an exit in
 * between: the kernel closes the fd, and the mounts and the image (already unlinked) go
 * with it. Any thread. */
void proc_disk_release(int root_fd);

/* For doctor: can this host put writable layers on disk (loop devices, ext4, mke2fs)? Fills
 * why (a sentence) either way. Any thread. */
bool proc_disk_available(char *why, size_t len);

/* Probe for doctor: is an idmapped clone of `/` through a fresh userns possible? */
bool proc_mount_idmap_probe(void);

/* ---- the writable layer as an archive (layer-snapshot.c) ---- */

#define PROC_LAYER_ARCHIVE "layer.tar.zst" /* the one file a process-tier snapshot holds */
#define PROC_LAYER_UPPER   "upper"	   /* overlay upper dir on the tmpfs (setup's name) */
/* The agent keeps an O_PATH fd of the tmpfs root here (AGENT_UPPER_FD, src/agent/setup.h);
 * isolad takes it back with pidfd_getfd() after a restart. */
#define PROC_AGENT_UPPER_FD 3

/* What proc_layer_write archived. */
struct proc_layer_stats {
	uint64_t entries; /* entries written (the root and the end marker included) */
	uint64_t bytes;	  /* file bytes (apparent sizes, holes included) */
	uint64_t skipped; /* sockets, devices, files that changed type or vanished */
};

/*
 * Writes the tree under `upper` (a directory fd on a sandbox's overlay upper dir; its content
 * is hostile) to out_fd as a plain pax archive, owners shifted from
 * [uid_base, uid_base + 65536) to [0, 65536). Never follows a symlink or opens anything but
 * regular files and directories. `what` names the archive in errors. Does not fsync. 0 or
 * -errno with *err: `no_space` when out_fd's filesystem is full, `too_large` for a path over
 * PATH_MAX. st may be NULL. Any thread; upper should be frozen.
 */
int proc_layer_write(int upper, uint32_t uid_base, int out_fd, const char *what,
		     struct proc_layer_stats *st, struct isola_err **err);

/*
 * Extracts an archive proc_layer_write made (read from in_fd; hostile) into a new directory
 * `name` under `parent`, owners shifted into [uid_base, uid_base + 65536). Every entry lands
 * inside that directory. 0, or -errno with *err (`invalid` naming `what` and the entry for a
 * corrupt, truncated or refused archive, `no_space` when it does not fit) and the new
 * directory removed again.
 */
int proc_layer_read(int parent, const char *name, uint32_t uid_base, int in_fd, const char *what,
		    struct isola_err **err);

/*
 * Fills the new writable layer `tmpfs` from the archive layer_fd (named name) with
 * proc_layer_read, in isolad run again as PROC_RESTORE_ARGV0 (restore.c) after it joined the
 * sandbox's cgroups cg. 0, or -errno with *err: the reader's own error, or `no_space` when
 * the sandbox's memory limit killed it.
 */
int proc_restore_layer(const struct cgroup_ops *cgo, const struct proc_cgroup *cg, int tmpfs,
		       int layer_fd, uint32_t uid_base, const char *name, struct isola_err **err);

/* Compresses in_fd (read from offset 0: the plain archive) into out_fd as one zstd frame
 * that proc_layer_read reads like the plain archive. Done after the sandbox is thawed, so
 * compression never lengthens the pause. 0, or -errno with *err (`no_space` on ENOSPC). */
int proc_layer_compress(int in_fd, int out_fd, const char *what, struct isola_err **err);

/* zstd level for proc_layer_compress: 1 by default, 0 = a plain copy (tests, measurements). */
void proc_layer_set_compression(int level);

/* ---- spawn (spawn.c) ---- */

/* Returns a dup of the sealed agent memfd (made once), or -errno with *err. */
int proc_agent_memfd(struct isola_err **err);

/* Returns a dup of the cached sealed seccomp BPF memfd, or -errno with *err. */
int proc_seccomp_memfd(struct isola_err **err);

/*
 * Clones the sandbox's PID 1 in new user, pid, mount, net, ipc and uts
 * namespaces; with netns_fd >= 0 (a network slot, or a namespace from proc_open_join_netns)
 * it joins that network namespace instead of making one: the calling thread enters it for
 * the clone and returns to its own right after (a thread that cannot return aborts isolad
 * rather than serve requests from a foreign network). The child's first act closes every fd
 * but setup_fd, agent_fd, devnull_fd and
 * record_fd (the spawnguard record, src/common/spawnguard.h) and asks for SIGKILL on its
 * parent thread's death; it then waits for 'm' on setup_fd (EOF: isolad died, it exits), is
 * handed over (PDEATHSIG off, record closed), moves setup_fd to fd 3, points 0-2 at
 * /dev/null, closes everything else and executes the agent memfd as `isola-agent --setup`.
 * Returns the host pid and sets *pidfd (caller owns), or -errno.
 *
 * The child shares isolad's memory until its exec (no copy of the page tables) on a stack
 * of its own, *stack (NULL in the sanitized build, which copies the memory as fork does):
 * the caller frees it with proc_spawn_stack_free once the child has executed the agent
 * (setup answered) or is known dead, and never before.
 */
pid_t proc_spawn(int setup_fd, int agent_fd, int devnull_fd, int record_fd, int netns_fd,
		 int *pidfd, void **stack);
void proc_spawn_stack_free(void **stack);

/* Writes "0 <base> 65536" to /proc/<pid>/{uid,gid}_map. 0 or -errno. */
int proc_write_idmaps(pid_t pid, uint32_t base);

/* Field 22 (starttime) of /proc/<pid>/stat. 0 or -errno. */
int proc_read_start_time(pid_t pid, uint64_t *out);

/* A pidfd for the process pid that started at start_time (field 22) and has not exited, or
 * -ESRCH: how a restarted isolad finds a sandbox's PID 1 or QEMU again. Caller closes it. */
int proc_pidfd_verified(pid_t pid, uint64_t start_time);

/* SIGKILLs the process behind *pidfd, waits up to timeout_ms for it to exit and reaps it
 * if it is our child (after a reattach it is not: ECHILD, someone else reaps). Closes
 * *pidfd and sets it to -1; nothing happens when it is already -1. True when it is known
 * to have exited (or there was none), false when it outlived the timeout. */
bool proc_pidfd_kill(int *pidfd, int timeout_ms);

/* Opens pid's namespace `name` ("user", "mnt", "net": /proc/<pid>/ns/<name>) through the
 * pidfd ioctl req (PIDFD_GET_*_NAMESPACE), else /proc and a liveness check of the pidfd
 * after the open, so a recycled pid never hands over another process's. fd, or -ESRCH (no
 * such process any more), or -errno. */
int proc_open_ns(pid_t pid, int pidfd, const char *name, unsigned long req);

/* proc_open_ns(pid, pidfd, "user", PIDFD_GET_USER_NAMESPACE). */
int proc_open_userns(pid_t pid, int pidfd);

/* Opens the sandbox's network namespace (net.c; PIDFD_GET_NET_NAMESPACE, else /proc +
 * liveness check) for the tier's netns_fd op. */
int proc_open_netns(pid_t pid, int pidfd, struct isola_err **err);

/*
 * Opens the network namespace file at `path` (an operator's, e.g. /var/run/netns/X or
 * /proc/PID/ns/net) for a sandbox to join. Never opens anything but an nsfs file (checked on
 * an O_PATH descriptor first, so no device or fifo is opened) and checks its type with
 * NS_GET_NSTYPE on the opened fd, never by name. Returns the fd (caller owns) or -errno with
 * *err naming the path: `invalid` when it is missing or not a network namespace,
 * `forbidden` when it is the host's own and tier_process_set_allow_host_netns() is off.
 */
int proc_open_join_netns(const char *path, struct isola_err **err);

#endif
