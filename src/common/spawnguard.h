/* SPDX-License-Identifier: Apache-2.0 */
/* spawnguard: a cloned child of isolad neither holds isolad's fds nor outlives it before handover. */
#ifndef ISOLA_SPAWNGUARD_H
#define ISOLA_SPAWNGUARD_H

#include <stdbool.h>

/*
 * isolad clones a sandbox's PID 1 (process tier) and QEMU's jail (microvm) from whichever
 * thread serves the request. Between clone() and the moment the child is "handed over" (it is
 * in the sandbox's cgroups, where a restart's kill-by-cgroup reaches it) three rules hold:
 *
 *  1. The child's first act is spawnguard_child_enter(): it closes every fd >= 3 except the
 *     few it was given (isolad's state-dir lock, API sockets, store, other sandboxes' setup
 *     sockets never cross), points 0-2 at /dev/null, and asks for SIGKILL when its parent
 *     thread dies.
 *  2. The child then blocks reading a go byte from a socket or pipe whose other end only
 *     isolad holds: once rule 1 ran, isolad's death is EOF there, so the child exits even
 *     when isolad died before the prctl (the classic PDEATHSIG race; getppid() cannot be
 *     checked: PID 1 of a new pid namespace sees 0).
 *  3. Before the clone isolad creates a record file in the sandbox's dir
 *     (spawnguard_record_open) whose fd the child keeps until handover. A restart calls
 *     spawnguard_kill_orphans(), which kills every process still holding that very inode:
 *     the child carries the record from its first instant, so no window exists in which an
 *     orphan is outside both the record and the sandbox's cgroup.
 *
 * At handover the child calls spawnguard_child_handover() (PDEATHSIG off: the creating thread
 * is an API connection thread and exits when the connection ends) and closes the record.
 */

#define SPAWNGUARD_RECORD   "spawning" /* file name in the sandbox's dir */
#define SPAWNGUARD_MAX_KEEP 8	       /* fds spawnguard_child_enter can keep */

/* Creates (or truncates) <dir>/spawning, writes isolad's pid into it (for people reading
 * it) and returns an O_CLOEXEC fd on it to hand to the child, or -errno. Any thread. */
int spawnguard_record_open(const char *dir);

/* Removes <dir>/spawning once the child is handed over or gone. Idempotent, no errors. */
void spawnguard_record_remove(const char *dir);

/*
 * Startup (reconcile): kills, with SIGKILL through a pidfd, every process other than the
 * caller that holds an fd on <dir>/spawning (compared by st_dev/st_ino, re-checked after
 * pidfd_open so a recycled pid is never signalled), waits up to timeout_ms for each to
 * exit, then removes the record. Returns how many were killed, 0 without a record, or
 * -errno when /proc cannot be read.
 */
int spawnguard_kill_orphans(const char *dir, int timeout_ms);

/*
 * In the child, first thing after clone()/fork() of the multithreaded isolad: sets
 * PR_SET_PDEATHSIG to SIGKILL, closes every fd >= 3 that is not in keep[0..n) (negative
 * entries and entries below 3 are ignored; n <= SPAWNGUARD_MAX_KEEP) and points fds 0-2 at
 * /dev/null (isolad's stdio is its log, a journal socket or a terminal). Raw system calls
 * only: async-signal-safe. 0 or -1 (errno set); the caller then _exit()s.
 */
int spawnguard_child_enter(const int *keep, unsigned n);

/* In the child at handover: PDEATHSIG off. Async-signal-safe. */
void spawnguard_child_handover(void);

#endif
