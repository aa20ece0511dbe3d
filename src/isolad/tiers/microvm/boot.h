/* SPDX-License-Identifier: Apache-2.0 */
/* boot: guest kernel lookup, initramfs composition, helper commands and the agent sync. */
#ifndef ISOLA_TIER_MICROVM_BOOT_H
#define ISOLA_TIER_MICROVM_BOOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../../common/err.h"
#include "microvm.h"

/* Newest kernel dir (<root>/<version>/ with vmlinuz + modules.cpio) from $ISOLA_KERNEL_DIR,
 * <state>/kernels, /var/lib/isola/kernels. 0 or -ENOENT (unavailable). Any thread. */
int mvm_kernel_find(const char *state_dir, char *out, size_t len, struct isola_err **err);

/* <state>/microvm/initramfs-<version>.cpio = the kernel dir's modules.cpio + the agent as
 * /init + trailer; written once per isolad process (atomically). Any thread. */
int mvm_initramfs(const char *kernel_dir, const char *state_dir, char *out, size_t len,
		  struct isola_err **err);

/* Creates path (O_EXCL, 0600, owned by uid) as an empty qcow2 v3 image of virtual size
 * `size` (a multiple of 512, at most 4 TiB) over the raw image `backing`, which is named in
 * the header and not opened. 0, or -errno with *err (nothing left behind). Any thread. */
int mvm_qcow2_overlay(const char *path, const char *backing, uint64_t size, uid_t uid,
		      struct isola_err **err);

/* Runs argv (PATH lookup), stdout+stderr into errbuf (truncated). 0, -ENOENT if missing,
 * -EIO on failure status. */
int mvm_run(char *const argv[], char *errbuf, size_t errlen);

/*
 * Connects to the agent's QEMU socket and resynchronises the stream: sends a random sync
 * token, discards everything up to the agent's ACK with that token, and returns the
 * connected fd (caller owns) positioned at the agent's HELLO. Pokes QEMU through the QMP
 * socket while waiting (see boot.c). Fails fast if pidfd (may be -1) reports QEMU's exit.
 */
int mvm_agent_sync(const char *sock, const char *qmp, int pidfd, int timeout_ms,
		   struct isola_err **err);

#endif
