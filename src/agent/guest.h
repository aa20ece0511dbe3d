/* SPDX-License-Identifier: Apache-2.0 */
/* guest: the agent as init of a microvm guest (guestinit.c) and its serial transport. */
#ifndef ISOLA_AGENT_GUEST_H
#define ISOLA_AGENT_GUEST_H

#include <stddef.h>
#include <stdint.h>

/* Where the initramfs keeps the modules kernel.sh put there, and their load order. */
#define GUEST_MODULE_DIR   "/lib/isola/modules"
#define GUEST_MODULE_ORDER "/lib/isola/modules.order"
/* The virtio-serial port name isolad gives the agent channel (QEMU virtserialport name=). */
#define GUEST_PORT_NAME "org.isola.agent"
/* The port isolad asks the guest's counters on (docs/microvm.md "Guest limits"): a request
 * is GUEST_COUNTERS_ASK + 16 lowercase hex + "\n", the answer GUEST_COUNTERS_REPLY + the
 * same hex + " key=value..." + "\n". */
#define GUEST_COUNTERS_PORT  "org.isola.counters"
#define GUEST_COUNTERS_ASK   "\nISOLA-COUNTERS? "
#define GUEST_COUNTERS_REPLY "\nISOLA-COUNTERS "
#define GUEST_COUNTERS_HEX   16
/* The guest cgroup every sandbox process lives in (the agent included). */
#define GUEST_CG_ROOT  "/sys/fs/cgroup"
#define GUEST_CG       GUEST_CG_ROOT "/sandbox"
#define GUEST_PIDS_MAX 4194304u	    /* the kernel's PID_MAX_LIMIT: more is nonsense */
#define GUEST_DISK_MAX (1ull << 50) /* bytes; QEMU's qcow2 tops out far below */

/*
 * Runs as PID 1 of a microvm guest, from the initramfs: mounts /dev, /proc, /sys, loads the
 * modules in GUEST_MODULE_ORDER, mounts /dev/vda (ext4) read-write, grows it to the disk
 * size, moves into it (switch_root), mounts devpts, /dev/shm and /run, puts itself into the
 * guest cgroup with `isola.pids=` as pids.max, sets the hostname from `isola.hostname=` on
 * the kernel command line and brings lo up. Writes the path of the agent's virtio-serial
 * port into port and the counters port's into cport (len bytes each; "" when the VM has
 * none). Returns 0, or dies (the kernel then panics, and the host sees QEMU exit with the
 * reason on the console).
 */
int guest_init(char *port, char *cport, size_t len);

/* Serves the agent protocol on the virtio-serial port at path, and the counters on the port
 * at cpath (NULL: none). Never returns on success; -errno if the port cannot be opened or
 * the loop fails. */
int guest_serial_run(const char *path, const char *cpath);

/* ---- guestlimits.c ---- */

/* A kernel command line number (`isola.pids=`, `isola.disk=`): decimal digits only, at most
 * max; "" or NULL is 0 (no limit). 0 or -EINVAL. Pure. */
int guest_num_parse(const char *s, uint64_t max, uint64_t *out);

/* Mounts cgroup2 on GUEST_CG_ROOT, makes GUEST_CG with pids.max = pids (0: no limit) and
 * moves the calling process (the agent) into it. 0, or -errno with the failed step in why
 * (len bytes). */
int guest_cgroup_setup(uint32_t pids, char *why, size_t len);

/* The value of `key N` in /proc/vmstat-style text. 0, -ENOENT, -EINVAL or -ERANGE. Pure. */
int guest_vmstat_get(const char *text, const char *key, uint64_t *out);

/* Finds prefix + hexlen lowercase hex + "\n" in buf: returns the offset just past it and
 * copies the hex (NUL-terminated, hexlen + 1 bytes) to nonce, or -1. Pure. */
int guest_token_find(const char *buf, size_t len, const char *prefix, size_t hexlen, char *nonce);

/* Formats the counters answer for nonce into out (this guest's /proc/vmstat). Bytes
 * written, or -errno. */
int guest_counters_reply(const char *nonce, char *out, size_t len);

/* Finds "\nISOLA-SYNC <32 lowercase hex>\n" in buf: returns the offset just past it and
 * copies the hex to nonce, or -1. Pure (unit-tested). */
int guest_sync_find(const char *buf, size_t len, char nonce[33]);

#endif
