/* SPDX-License-Identifier: Apache-2.0 */
/* ext4: the microvm tier's root disk — one ext4 image per template, built with mkfs.ext4 -d. */
#ifndef ISOLA_IMAGES_EXT4_H
#define ISOLA_IMAGES_EXT4_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../tiers/tier.h"

/*
 * Returns (in out, len bytes) the path of <template dir>/rootfs.ext4 for the template whose
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

/* Size in bytes mkfs needs for `used` bytes of files and `inodes` entries (pure, tested). */
uint64_t images_ext4_size_for(uint64_t used, uint64_t inodes);

#endif
