/* SPDX-License-Identifier: Apache-2.0 */
/* setup: the agent's first stage in the process tier — builds the sandbox it will be PID 1 of. */
#ifndef ISOLA_AGENT_SETUP_H
#define ISOLA_AGENT_SETUP_H

#include <stdint.h>

/*
 * Runs in the freshly cloned child (new user, pid, mount, net, ipc, uts and cgroup
 * namespaces), as PID 1, right after isolad exec'd the agent with `--setup`.
 * Reads the plan isolad sends on setup_fd (JSON plus SCM_RIGHTS fds), waits for
 * the uid/gid maps, mounts the root (template + writable layer), /proc, /dev, /sys,
 * pivots into it, sets the hostname, drops privileges to the set the agent keeps
 * (CAP_SETUID, CAP_SETGID, CAP_SETPCAP, CAP_KILL, CAP_CHOWN, CAP_DAC_OVERRIDE,
 * CAP_FOWNER) plus the sandbox root's set, which the plan's "caps" names (absent: *root_caps
 * as passed in) and which is stored in *root_caps for spawn.c — all only inside the
 * sandbox's user namespace; sets no_new_privs,
 * makes itself non-dumpable and installs the seccomp filter received in the plan.
 * Reports "ok" (or the failure, then exits) on setup_fd and closes it.
 *
 * Returns the listening socket fd the agent must serve. On failure it reports
 * the reason to isolad and exits (die() is allowed here: short-lived stage).
 */
int agent_setup_run(int setup_fd, uint64_t *root_caps);

/*
 * After agent_setup_run returns, this fd holds an O_PATH, close-on-exec fd of the root of
 * the sandbox's writable tmpfs (lower/, upper/, work/, root/) for the agent's lifetime.
 * isolad takes it back with pidfd_getfd() after a restart (PROC_AGENT_UPPER_FD in
 * src/isolad/tiers/process/process-internal.h names the same number). setup_fd must be
 * this number: setup reuses it once the setup socket is closed.
 */
#define AGENT_UPPER_FD 3

#endif
