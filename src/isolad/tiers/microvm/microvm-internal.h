/* SPDX-License-Identifier: Apache-2.0 */
/* microvm-internal: what the microvm tier's files share (accelerator, QEMU argv, console, jail). */
#ifndef ISOLA_TIER_MICROVM_INTERNAL_H
#define ISOLA_TIER_MICROVM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../../common/err.h"
#include "../tier.h"

/* Paths inside QEMU's mount namespace (the jail; see jail.c). */
#define MVM_JAIL_KERNEL	   "/k/vmlinuz"
#define MVM_JAIL_INITRD	   "/k/initramfs.cpio"
#define MVM_JAIL_BASE	   "/t/rootfs.ext4"
#define MVM_JAIL_VM	   "/vm"      /* the sandbox's <dir>/vm, read-write */
#define MVM_JAIL_MEM	   "/mem/ram" /* guest RAM file on a tmpfs private to the jail */
#define MVM_PORT_NAME	   "org.isola.agent"
#define MVM_TB_MIB	   64u /* TCG translation cache, bounded (QEMU's default is 1 GiB) */
#define MVM_OVERHEAD_BYTES (256ull << 20) /* QEMU beyond guest RAM, for the cgroup limit */

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
};

#define MVM_TAP_FD 3 /* QEMU's -netdev tap,fd= (the jail opens it before dropping root) */

/*
 * Clones QEMU's PID 1 in new pid, mount, net, ipc and uts namespaces. The child blocks on
 * go_fd until the parent writes one byte (after putting it into the cgroup); EOF instead
 * (isolad died) makes it exit. Then it builds the jail root (tmpfs; /usr, the lib links,
 * ld.so.cache, a handful of /dev nodes, proc, the bound files), pivots into it, drops to
 * uid/gid with no groups, no capabilities and no_new_privs, and execs QEMU. Returns the
 * host pid and *pidfd (caller owns), or -errno.
 */
pid_t mvm_jail_spawn(const struct mvm_jail *j, int go_fd, int *pidfd);

#endif
