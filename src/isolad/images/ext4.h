/* SPDX-License-Identifier: Apache-2.0 */
/* ext4: the microvm tier's root disk — one ext4 image per template, built with mkfs.ext4 -d. */
#ifndef ISOLA_IMAGES_EXT4_H
#define ISOLA_IMAGES_EXT4_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../../common/err.h"
#include "../tiers/tier.h"

/*
 * Returns (in out, len bytes) the path of <template dir>/<images_ext4_file()> for the template whose
 * rootfs dir is `rootfs` (…/templates/<id>/rootfs), building it first if missing or older
 * than the template's manifest. The image holds the rootfs plus a copy of every bind (the
 * `host` template's /usr…: the guest kernel has no 9p, see docs/microvm.md), minus the
 * paths in IMAGES_EXT4_EXCLUDES and $ISOLA_MICROVM_EXCLUDE (colon-separated host paths).
 * Built in a private mount namespace (binds are bind-mounted over a staging dir, never
 * copied on the host), written to a temp name, fsynced and renamed: a crash leaves either
 * no image or a whole one. Files stay root-owned with their modes; the image is 0644.
 * Blocks for the build (seconds to a minute for a large /usr); concurrent callers for the
 * same template wait for one build. Any thread. 0 or -errno with *err.
 */
int images_ext4_get(const char *rootfs, const struct tier_bind *binds, unsigned n_binds, char *out,
		    size_t len, struct isola_err **err);

/*
 * Image mode for templates with host binds (the `host` template): "small" (default: /usr is
 * the Depends closure of a coding agent's Debian packages, vmroot.c) or "full" (all of the
 * host's /usr minus the excludes). -EINVAL for anything else. Call at startup.
 */
int images_ext4_set_mode(const char *mode);

/* The image's file name in its template dir: rootfs-small.ext4 for a template with binds in
 * small mode, else rootfs.ext4. */
const char *images_ext4_file(unsigned n_binds);

/*
 * The build of template dir `template_id` in progress or failed, as {state: building|failed,
 * step: starting|packages|staging|measuring|mkfs, done, total, elapsed_ms, error}, or NULL
 * (no build of it seen, or it is built). New reference. Any thread.
 */
json_t *images_ext4_progress_json(const char *template_id);

/*
 * Starts building the image of `rootfs` (with binds, copied) on a background thread, so the
 * first microvm create finds it built, or waits for this build (images_ext4_get serialises).
 * One at a time: -EBUSY while one runs; 0 or -errno from pthread_create.
 */
int images_ext4_prebuild(const char *rootfs, const struct tier_bind *binds, unsigned n_binds);

/* Cancels a background build (kills mkfs; the build fails and leaves no image) and joins it. */
void images_ext4_shutdown(void);

/* Size in bytes mkfs needs for `used` bytes of files and `inodes` entries (pure, tested). */
uint64_t images_ext4_size_for(uint64_t used, uint64_t inodes);

#endif
