/* SPDX-License-Identifier: Apache-2.0 */
/* cgjoin: puts an engine-facing relay into its sandbox's cgroups (docs/oci.md, "Stats"). */
#ifndef ISOLA_RUNC_CGJOIN_H
#define ISOLA_RUNC_CGJOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../common/err.h"

/*
 * The mount point of the cgroup hierarchy that a /proc/PID/cgroup line's controllers field
 * names (`memory`, `cpu,cpuacct`, `name=systemd`; "" is the cgroup2 hierarchy), found in
 * mountinfo (the text of /proc/self/mountinfo): a `cgroup` mount whose super options hold
 * every one of the controllers (or a `cgroup2` mount for ""), mounted from the hierarchy's
 * root. Copied into out (n bytes). Returns 0, -ENOENT when no mount matches, -ENAMETOOLONG.
 * Pure: no I/O.
 */
int oci_cg_mount_of(const char *mountinfo, const char *ctrls, char *out, size_t n);

/*
 * True when path (a /proc/PID/cgroup path) is a cgroup of sandbox `sandbox`: its last
 * component is the sandbox's id (isolad names them `isola/<id>`), and it has no `.` or `..`
 * component. Pure.
 */
bool oci_cg_is_sandbox(const char *path, const char *sandbox);

/*
 * Moves pid into every cgroup of sandbox `sandbox` that host process init (the sandbox's
 * PID 1) is in: each line of /proc/INIT/cgroup whose path is the sandbox's
 * (oci_cg_is_sandbox), in every hierarchy (v1 controllers, cgroup2), through that
 * hierarchy's cgroup.procs. Lines that are not the sandbox's (isolad's own cgroup in the
 * hierarchies isola does not use) are left alone, so the move never takes pid anywhere but
 * into the sandbox's own cgroups. Returns how many cgroups pid joined (0: the sandbox has
 * none that init is in), or -errno with *err naming the file.
 */
int oci_cgroup_join(pid_t init, const char *sandbox, pid_t pid, struct isola_err **err);

#endif
