/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup-shared: the process tier's cgroup backends (struct cgroup_ops), reused for QEMU. */
#ifndef ISOLA_TIER_MICROVM_CGROUP_SHARED_H
#define ISOLA_TIER_MICROVM_CGROUP_SHARED_H

/*
 * The cgroup code (detection, v1/v2 backends, isola/<id> directories, kill, remove) lives in
 * tiers/process/cgroup*.c and is declared in the "cgroups" section of process-internal.h.
 * The microvm tier uses exactly that API — proc_cgroup_detect(), struct cgroup_ops,
 * proc_cgroup_is_empty(), proc_cgroup_remove() — and nothing else from the process tier.
 * TODO(process tier owner): move that section into tiers/process/cgroup.h and include it
 * here instead, so this shim disappears.
 */
#include "../process/process-internal.h"

#endif
