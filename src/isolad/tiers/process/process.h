/* SPDX-License-Identifier: Apache-2.0 */
/* process: process-tier knobs isolad sets at startup (the tier itself is tier_process_ops). */
#ifndef ISOLA_TIER_PROCESS_H
#define ISOLA_TIER_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "../../../common/err.h"

/*
 * Sets the host path of the static isola-agent binary the tier copies into a sealed
 * memfd (once per isolad process, on first create) and executes as each sandbox's
 * PID 1. Without a call, the tier uses $ISOLA_AGENT. `path` is copied. Call before
 * the first create; later calls are ignored once the memfd exists. Any thread.
 */
void tier_process_set_agent_path(const char *path);

/* isolad's argv[0] when it runs again to fill a restored sandbox's writable layer
 * (restore.c); main() hands such a process to tier_process_restore_main. */
#define PROC_RESTORE_ARGV0 "isolad-restore-layer"
int tier_process_restore_main(int argc, char **argv);

/*
 * Test hook: when true, the setup stage resolves paths inside the template root
 * with its O_NOFOLLOW component walk instead of openat2(RESOLVE_IN_ROOT), so tests
 * reach the fallback on kernels that have openat2. $ISOLA_TEST_NO_OPENAT2=1 does the same.
 */
void tier_process_set_force_no_openat2(bool on);

/*
 * Whether a sandbox may join the host's own network namespace (the one of PID 1 or of isolad
 * itself) through sandbox_spec.netns_path: off unless isolad runs with --allow-host-netns
 * (Docker's `--network host`, docs/oci.md). Call before serving requests.
 */
void tier_process_set_allow_host_netns(bool on);

/*
 * Writable layers made ahead (isolad --layer-slots, docs/process-tier.md): a filler thread
 * keeps n layers of the default size and inodes ready (images nameless in
 * <state_dir>/layers), which a create of that size takes instead of making one (the rest make
 * theirs on the spot, as does every create when none is ready). n == 0: none. Main thread,
 * before serving requests; stop after the last create.
 */
int tier_process_layer_slots_start(const char *state_dir, unsigned n, struct isola_err **err);
void tier_process_layer_slots_stop(void);
/* Layers ready now; default-size layers taken from the pool and made on the spot since
 * start (/metrics). Any thread. */
unsigned tier_process_layer_slots_ready(void);
void tier_process_layer_slots_counts(uint64_t *taken, uint64_t *made_inline);
/* Destroyed writable layers since start: shut down before the unmount (at least 8 MiB
 * written and not yet on the image: dropped) or unmounted as they were (kept) (/metrics).
 * Any thread. */
void tier_process_layer_release_counts(uint64_t *dropped, uint64_t *kept);

#define TIER_PROCESS_LAYER_SLOTS_MAX 64 /* --layer-slots' bound */

#endif
