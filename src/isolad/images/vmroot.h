/* SPDX-License-Identifier: Apache-2.0 */
/* vmroot: the microvm tier's small root, the host files of a coding agent's Debian packages. */
#ifndef ISOLA_IMAGES_VMROOT_H
#define ISOLA_IMAGES_VMROOT_H

#include <stdbool.h>
#include <stdint.h>

/* The packages the small image starts from (docs/microvm.md); their closure is what it holds. */
extern const char *const images_vmroot_packages[];

/* Progress of a staging: step name, items done and in all. Called on the staging thread. */
typedef void (*images_vmroot_progress_fn)(void *ud, const char *step, uint64_t done,
					  uint64_t total);

/*
 * Makes `stage` (a path that must not exist; its parent on the state dir's filesystem) hold
 * stage + P for every host path P under /usr that belongs to the Depends/Pre-Depends closure
 * of images_vmroot_packages, of $ISOLA_MICROVM_PACKAGES (more names, `:` or `,` separated)
 * and of Debian's Essential packages, read from /var/lib/dpkg (status and info/<pkg>.list;
 * /bin, /lib... of a merged-/usr host map to /usr/bin, /usr/lib...). Also every symlink in
 * /usr/bin and /usr/sbin (update-alternatives' links are in no package's list) and the
 * __pycache__ dirs of the directories kept. Paths skip(P) says yes to are left out, with
 * their subtree. Files are hard links where the filesystem allows (no data written; the stage
 * is removed after mkfs reads it), else copies; modes and owners are the host's. Reports
 * progress through cb (may be NULL). 0 or -errno (-ENOENT only when this host has no dpkg
 * status), and
 * `files` and `bytes` (may be NULL) count the regular files kept and their bytes.
 */
int images_vmroot_stage(const char *stage, bool (*skip)(const char *path),
			images_vmroot_progress_fn cb, void *ud, uint64_t *files, uint64_t *bytes);

#endif
