/* SPDX-License-Identifier: Apache-2.0 */
/* podns: a pod's namespace paths that name a container isola-runc runs, mapped (docs/oci.md). */
#ifndef ISOLA_RUNC_PODNS_H
#define ISOLA_RUNC_PODNS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "../common/err.h"
#include "config.h"

/*
 * Kubernetes' CRI (containerd's WithPodNamespaces) gives every app container of a pod the
 * `network`, `ipc` and `uts` namespaces of `/proc/<sandbox task pid>/ns/...`, and `pid` too
 * for shareProcessNamespace; Docker's `--network/--ipc/--pid container:X` name X's pid the
 * same way. That pid is the engine's pid of a container: ours is its relay, a host process
 * on the host's ipc and uts namespaces. podns_resolve maps a path that names the relay of a
 * container under root (its state records the relay's pid and start time, so a reused pid
 * matches nothing):
 *   - network: the referenced container's network namespace path (the pod's CNI one) when it
 *     joined one, else the path as given (isolad opens and checks it);
 *   - ipc, uts: the container gets its own (a narrowing: the containers of a pod share no
 *     SysV IPC or POSIX message queues), with the referenced container's hostname unless the
 *     spec names one;
 *   - pid: refused, naming it (isola gives each container its own pid namespace).
 * A path that names no container of ours keeps the rules of config.c: a network one is
 * joined if isolad finds it a network namespace that is not the host's, others refused.
 * m comes from oci_config_map (m->create's `netns`, m->ns_paths); the mapping is applied to
 * m->create. Returns 0 or -errno with *err naming the field, the path and the reason.
 */
int podns_resolve(const char *root, struct oci_mapped *m, struct isola_err **err);

/* Records in st (a container's state.json object) what a later container of its pod takes:
 * its `netns` and `hostname` from create (the request sent to isolad). */
void podns_record(json_t *st, const json_t *create);

/* Records relay (the pid --pid-file gets) and its start time in st. Returns 0 or -errno (the
 * relay is gone). */
int podns_record_relay(json_t *st, pid_t relay);

/* True while the relay recorded in st (podns_record_relay) runs: that process (its start
 * time), not yet exited (a zombie has). */
bool podns_relay_running(const json_t *st);

/* True when path is `/proc/PID/ns/NAME` (PID decimal, 1 to 2^22); *pid and *name (a pointer
 * into path) get them. Pure. */
bool podns_proc_path(const char *path, long *pid, const char **name);

/* The start time (clock ticks since boot, field 22) from the text of /proc/PID/stat, or -1
 * when malformed. Pure. */
long long podns_stat_starttime(const char *text);

#endif
