/* SPDX-License-Identifier: Apache-2.0 */
/* microvm-internal: what the microvm tier's files share (accelerator, QEMU argv, console, jail). */
#ifndef ISOLA_TIER_MICROVM_INTERNAL_H
#define ISOLA_TIER_MICROVM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "../../../common/err.h"
#include "../tier.h"
#include "cgroup-shared.h"

/* Paths inside QEMU's mount namespace (the jail; see jail.c). */
#define MVM_JAIL_KERNEL	   "/k/vmlinuz"
#define MVM_JAIL_INITRD	   "/k/initramfs.cpio"
#define MVM_JAIL_BASE	   "/t/rootfs.ext4"
#define MVM_JAIL_VM	   "/vm"      /* the sandbox's <dir>/vm, read-write */
#define MVM_JAIL_MEM	   "/mem/ram" /* guest RAM file on a tmpfs private to the jail */
#define MVM_PORT_NAME	   "org.isola.agent"
#define MVM_COUNTERS_PORT  "org.isola.counters" /* guest counters (counters.c) */
#define MVM_TB_MIB	   64u /* TCG translation cache, bounded (QEMU's default is 1 GiB) */
#define MVM_OVERHEAD_BYTES (256ull << 20) /* QEMU beyond guest RAM, for the cgroup limit */

/* One live VM. Owned by core; one thread at a time (core serialises). microvm.c builds and
 * tears it down; snapshot.c pauses, snapshots and restores it. */
struct tier_sandbox {
	char id[40];		      /* sandbox id */
	char dir[512];		      /* <state>/sandboxes/<id> */
	char vmdir[600];	      /* <dir>/vm: QEMU's files, owned by its uid */
	char agent_sock[700];	      /* <vmdir>/agent.sock */
	char qmp_sock[700];	      /* <vmdir>/qmp.sock */
	pid_t pid;		      /* QEMU (PID 1 of its namespace), 0 if none */
	int pidfd;		      /* pidfd of pid, -1 if none */
	bool child;		      /* pid is our child (created here, not re-attached) */
	uint64_t start_time;	      /* /proc/<pid>/stat field 22 */
	const struct cgroup_ops *cgo; /* cgroup backend */
	struct proc_cgroup cg;	      /* isola/<id> dirs (cg.n == 0: none) */
	struct mvm_console *con;      /* console reader, or NULL */
	int first_fd;		      /* synced agent stream from create, for the first connect */
	char accel[8];		      /* "kvm" | "tcg" */
	unsigned vcpus;		      /* guest vCPUs */
	uint64_t memory_mib;	      /* guest RAM */
	char *error;		      /* last_error() text, owned */
	int cnt_fd;		      /* connection to the counters port, -1 if none */
	bool cnt_slow;		      /* the last counters request went unanswered */
	uint64_t guest_oom;	      /* highest guest oom_kill count seen */
};

/* What a restore starts from (snapshot.c fills it, microvm.c launches with it). */
struct mvm_restore_src {
	const char *disk; /* host path of the snapshot's qcow2 (copied as the new overlay) */
	int ram_fd;	  /* the snapshot's RAM file, read-only (copied into the jail's /mem) */
	int state_fd;	  /* the snapshot's device-state stream, read-only */
};

/*
 * Builds and starts a VM for spec (microvm.c): from scratch (from == NULL: a fresh qcow2
 * overlay, the kernel boots) or from a snapshot (QEMU waits for the incoming device state,
 * mvm_snap_incoming loads it and resumes). On success the agent answered. On failure
 * nothing is left behind. Any thread.
 */
int mvm_launch(const struct sandbox_spec *spec, const struct mvm_restore_src *from,
	       struct tier_sandbox **out, struct isola_err **err);

/* vCPUs and guest RAM (MiB) a spec asks for (the same rule for create and restore). */
void mvm_spec_shape(const struct sandbox_spec *spec, unsigned *vcpus, uint64_t *memory_mib);

/* ---- persistence (snapshot.c) ---- */

#define MVM_SNAP_STATE	   "state"	/* device state: QEMU migration stream, RAM excluded */
#define MVM_SNAP_RAM	   "mem.ram"	/* guest RAM, sparse, exactly memory_mib MiB */
#define MVM_SNAP_DISK	   "disk.qcow2" /* the root disk's qcow2 overlay (backing: the template) */
#define MVM_SNAP_META	   "vm.json"	/* shape: version, vcpus, memory_mib, accel */
#define MVM_SNAP_STATE_MAX (64u << 20)	/* a device-state stream is ~100 KiB; cap what we load */

/* In a launch from a snapshot, once QEMU runs: feeds state_fd to QEMU (migrate-incoming with
 * x-ignore-shared) and resumes the guest. -errno with *err naming the snapshot. */
int mvm_snap_incoming(struct tier_sandbox *s, int state_fd, struct isola_err **err);

/*
 * An agent connection that survives a stale guest side: after a restore (the agent still
 * holds the connection of the snapshot's moment) or a resume of a VM that was paused when
 * isolad lost its connection, the first sync token may land in that old stream (the agent
 * drops it as a protocol violation). Each retry is a fresh connect, which the agent sees as
 * a host reconnect and answers with a resync. Returns the synced fd (caller owns) or -errno.
 */
int mvm_snap_agent_sync(struct tier_sandbox *s, int timeout_ms, struct isola_err **err);

int mvm_pause(struct tier_sandbox *s, struct isola_err **err);
int mvm_resume(struct tier_sandbox *s, struct isola_err **err);
int mvm_snapshot(struct tier_sandbox *s, const char *dir, enum tier_persistence *level,
		 uint64_t *paused_us, struct isola_err **err);
int mvm_restore(const struct sandbox_spec *spec, const char *snapdir, struct tier_sandbox **out,
		struct isola_err **err);

/* ---- guest counters (counters.c; the guest side is src/agent/guestserial.c) ---- */

#define MVM_COUNTERS_SOCK	"counters.sock"	     /* in vmdir: QEMU's chardev for the port */
#define MVM_COUNTERS_ASK	"\nISOLA-COUNTERS? " /* + nonce + "\n" */
#define MVM_COUNTERS_REPLY	"\nISOLA-COUNTERS "  /* + nonce + " key=value..." + "\n" */
#define MVM_COUNTERS_HEX	16		     /* nonce: lowercase hex digits */
#define MVM_COUNTERS_TIMEOUT_MS 1000		     /* answer wait while the guest answers */
#define MVM_COUNTERS_SLOW_MS	250		     /* ... after it did not */

/* What the guest kernel counts that QEMU's host cgroup cannot see. */
struct mvm_guest_counters {
	uint64_t oom_kill; /* the guest's OOM kills since boot (/proc/vmstat oom_kill) */
};

/*
 * Finds the guest's answer for nonce in buf (len bytes, not NUL-terminated): returns the
 * offset just past it with *out filled, 0 when no complete answer for nonce is there yet,
 * -EPROTO when that answer is malformed (a key that is not [a-z_]{1,32}, a value that is not
 * decimal or overflows, a line over 256 bytes, no oom_kill). Unknown keys are skipped. Pure
 * (unit-tested, fuzz/fuzz_counters.c).
 */
int mvm_counters_parse(const char *buf, size_t len, const char *nonce,
		       struct mvm_guest_counters *out);

/*
 * Asks the guest for its counters over <vmdir>/counters.sock (connecting when needed) and
 * waits for the answer with a fresh nonce: MVM_COUNTERS_TIMEOUT_MS, or MVM_COUNTERS_SLOW_MS
 * after an unanswered request (a paused or silent guest). 0 and *out, or -errno (the
 * connection is then closed and made again next time). Same thread rules as the tier's
 * stats op.
 */
int mvm_counters_query(struct tier_sandbox *s, struct mvm_guest_counters *out);

/* Closes the counters connection (idempotent). */
void mvm_counters_fini(struct tier_sandbox *s);

/* ---- QMP client (qmp.c) ---- */

#define MVM_QMP_LINE_MAX (1u << 20) /* longest reply line accepted */

struct mvm_qmp;

/*
 * Connects to QEMU's QMP socket at path (retrying while it does not exist yet, up to
 * timeout_ms), reads the greeting and negotiates capabilities. QEMU serves one QMP client at
 * a time: close the session before anything else (boot.c's agent sync pokes QMP). 0 and *out
 * (caller closes), or -errno with *err.
 */
int mvm_qmp_open(const char *path, int timeout_ms, struct mvm_qmp **out, struct isola_err **err);

/* The same over an already connected stream fd (owned by the session, even on failure). */
int mvm_qmp_open_fd(int fd, int timeout_ms, struct mvm_qmp **out, struct isola_err **err);

/*
 * Runs one command: args (borrowed, may be NULL) as "arguments"; fd >= 0 rides along as
 * SCM_RIGHTS (for `getfd`; the caller keeps its own copy). Events and stale replies are
 * skipped. 0 and *ret (the "return" value, caller decrefs; ret may be NULL), or -errno:
 * -EIO for a QMP error reply (its class and description in *err), -ETIMEDOUT, -EPIPE.
 */
int mvm_qmp_exec(struct mvm_qmp *q, const char *cmd, json_t *args, int fd, json_t **ret,
		 struct isola_err **err);

/* Closes the session (NULL is fine). */
void mvm_qmp_close(struct mvm_qmp *q);

/* ---- accelerator (accel.c) ---- */

struct mvm_accel {
	char name[8];	  /* "kvm" or "tcg" */
	char reason[256]; /* why, for doctor and logs */
};

/*
 * Decides between KVM and TCG from what the host shows. Pure (unit-tested): cpuinfo is
 * /proc/cpuinfo, modules is /proc/modules (or names of /sys/module entries, one a line),
 * kvm_dev says whether /dev/kvm opens read-write. KVM only when the CPU flags show vmx or
 * svm, kvm_intel or kvm_amd is loaded, and no PVM module (kvm_pvm: nested paravirtual KVM,
 * under which a stock guest hangs) is; `override` ("kvm"/"tcg", or NULL/"") wins.
 */
void mvm_accel_decide(const char *cpuinfo, const char *modules, bool kvm_dev, const char *override,
		      struct mvm_accel *out);

/* This host's answer (reads /proc and /dev/kvm; $ISOLA_MICROVM_ACCEL overrides). */
void mvm_accel_host(struct mvm_accel *out);

/* ---- QEMU command line (argv.c) ---- */

/* What one VM gets. Strings are borrowed. */
struct mvm_vm_config {
	const char *qemu;     /* QEMU binary (absolute, inside the jail = host /usr) */
	const char *id;	      /* sandbox id: hostname and QEMU -name */
	const char *accel;    /* "kvm" | "tcg" */
	unsigned vcpus;	      /* 1..64 */
	uint64_t memory_mib;  /* guest RAM */
	unsigned tsc_khz;     /* TCG: tsc_early_khz for the guest (0 = let it calibrate) */
	const char *net_addr; /* guest eth0 address (isola.net=) on tap0, NULL = no NIC */
	uint32_t pids;	      /* the guest cgroup's pids.max (isola.pids=), 0 = none */
	uint64_t disk_bytes;  /* what the guest grows its root to have free (isola.disk=) */
	uint64_t caps;	      /* the guest root's capabilities (isola.caps=, hex mask) */
	bool incoming;	      /* restore: wait for the device state (-incoming defer) */
};

#define MVM_ARGV_MAX 80

/*
 * Fills argv (MVM_ARGV_MAX entries, NULL-terminated) for QEMU's microvm machine with the
 * jail's paths; strings are formatted into buf (len bytes). Pure (unit-tested).
 * 0, -EINVAL for a bad config, -ENOSPC when buf or argv is too small.
 */
int mvm_build_argv(const struct mvm_vm_config *c, char **argv, char *buf, size_t len);

/* ---- console ring (console.c) ---- */

/* A byte ring keeping the last cap bytes written. Pure (unit-tested). */
struct mvm_ring {
	char *buf;	/* cap bytes, owned */
	size_t cap;	/* capacity */
	size_t head;	/* next write position */
	size_t len;	/* valid bytes (<= cap) */
	uint64_t total; /* bytes ever pushed (len < total: older bytes were dropped) */
};

int mvm_ring_init(struct mvm_ring *r, size_t cap);
void mvm_ring_fini(struct mvm_ring *r);
void mvm_ring_push(struct mvm_ring *r, const void *p, size_t n);
/* Copies the last min(max, len) bytes in order into a new heap string (NUL-terminated),
 * starting at a line boundary when one is in the copied range. *n = bytes. */
char *mvm_ring_tail(const struct mvm_ring *r, size_t max, size_t *n);

/* The console reader of one VM: a thread draining QEMU's serial socket into a ring and
 * a log file rotated at MVM_CONSOLE_FILE_CAP (console.log + console.log.1: bounded). */
#define MVM_CONSOLE_RING     (64u << 10)
#define MVM_CONSOLE_FILE_CAP (128u << 10)
struct mvm_console;

/* Starts reading from the unix socket at sock (connecting as it appears); logs to
 * dir/console.log. NULL on failure. */
struct mvm_console *mvm_console_start(const char *sock, const char *dir);
/* Waits up to ms for the reader to reach EOF (QEMU gone), for a complete last_error. */
void mvm_console_drain(struct mvm_console *c, int ms);
/* The last max bytes seen (heap; caller frees), or NULL. Any thread. */
char *mvm_console_tail(struct mvm_console *c, size_t max, size_t *n);
/* Stops and frees the reader (files stay). */
void mvm_console_stop(struct mvm_console *c);
/*
 * Completes a boot failure's message so that it always says why: "<message>; QEMU <exit
 * reason>; QEMU stderr (last lines): ...; console (last lines): ..." with at most `lines`
 * lines of each (joined by " | ", control bytes replaced), "(nothing)" when one is empty.
 * exit_reason may be NULL or "". Does nothing without *err. Any thread.
 */
void mvm_boot_failure_explain(struct isola_err **err, const char *exit_reason,
			      const char *qemu_stderr, const char *console, unsigned lines);
/* The last max bytes of dir/console.log.1 + console.log (heap), for when no reader runs. */
char *mvm_console_tail_files(const char *dir, size_t max, size_t *n);

/* ---- jail (jail.c) ---- */

/* Host paths bound into QEMU's mount namespace, and who QEMU runs as. */
struct mvm_jail {
	const char *root;   /* empty dir the jail's tmpfs root is mounted on (<dir>/jail) */
	const char *vmdir;  /* <dir>/vm, bound read-write at MVM_JAIL_VM */
	const char *kernel; /* host vmlinuz */
	const char *initrd; /* host initramfs.cpio */
	const char *base;   /* host template rootfs.ext4, bound read-only */
	bool kvm;	    /* bind /dev/kvm */
	uint32_t uid;	    /* host uid and gid QEMU runs as */
	uint64_t mem_bytes; /* size of the /mem tmpfs */
	char *const *argv;  /* QEMU command line */
	int log_fd;	    /* QEMU's stdout/stderr */
	bool tap;	    /* attach to tap0 of QEMU's namespace, passed as MVM_TAP_FD */
	int ram_fd;	    /* restore: RAM image cloned/copied to /mem/ram before exec, or -1 */
	int record_fd;	    /* spawnguard record, held until go_fd says go (spawnguard.h) */
};

#define MVM_TAP_FD 3 /* QEMU's -netdev tap,fd= (the jail opens it before dropping root) */

/*
 * Clones QEMU's PID 1 in new pid, mount, net, ipc and uts namespaces. The child's first act
 * closes every fd but go_fd, log_fd, ram_fd, record_fd and its /dev/null and asks for
 * SIGKILL on its parent thread's death (src/common/spawnguard.h); it blocks on go_fd until
 * the parent writes one byte (after putting it into the cgroup); EOF instead (isolad died)
 * makes it exit. Then PDEATHSIG is off and the record closed (handed over). Then it builds the jail root (tmpfs; /usr, the lib links,
 * ld.so.cache, a handful of /dev nodes, proc, the bound files), pivots into it, drops to
 * uid/gid with no groups, no capabilities and no_new_privs, and execs QEMU. Returns the
 * host pid and *pidfd (caller owns), or -errno.
 */
pid_t mvm_jail_spawn(const struct mvm_jail *j, int go_fd, int *pidfd);

/*
 * A restore's copy of a snapshot file (the disk overlay): fileclone_copy (a reflink where the
 * filesystem can, else a sparse copy), logged with which it was. Not for the jail child (it
 * logs). FILECLONE_REFLINK or FILECLONE_COPY, or -errno (-ENOSPC when out's filesystem is
 * full). The name predates the reflink; mvm_clone_or_copy would say it better.
 */
int mvm_copy_sparse(int in, int out);

#endif
