/* SPDX-License-Identifier: Apache-2.0 */
/* bench: samples and the peers `isola bench` times beside isola (bench_peers.c). */
#ifndef ISOLA_CLI_BENCH_H
#define ISOLA_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>

struct bench_sample {
	double *ms;	    /* latencies of successful runs */
	size_t n;	    /* entries used */
	size_t fails;	    /* runs that failed */
	char *first_error;  /* message of the first failure, owned */
	double host_cpu_ms; /* the host's CPU time (all CPUs, every process and kernel thread)
			     * while the runs ran, ms; 0: not measured */
};

void sample_add(struct bench_sample *s, double ms);
/* Counts a failure; the first one's msg (NULL: "failed") is kept. */
void sample_fail(struct bench_sample *s, const char *msg);
void sample_fini(struct bench_sample *s);

/* The host's CPU time so far, every CPU and every process and kernel thread (the busy fields
 * of /proc/stat's first line), in ms; < 0 when it cannot be read. What a run cost the whole
 * machine is the difference around it, noise from anything else running included. */
double bench_host_cpu_ms(void);

/* How bench_settle judges the host quiet: less than BENCH_SETTLE_BUSY of all CPUs busy over
 * one step, waiting at most BENCH_SETTLE_MAX_MS. */
#define BENCH_SETTLE_STEP_MS 200
#define BENCH_SETTLE_MAX_MS  10000
#define BENCH_SETTLE_BUSY    0.15

/* Waits until the host is quiet (bench_host_cpu_ms moves little over a step) or the time is
 * up: what isolad does behind its answers (the pool's refills, network teardowns after a
 * burst) must not run beside the next runs timed, isola's or a peer's. Returns at once when
 * the host's CPU time cannot be read. */
void bench_settle(void);

/* Records on s the host CPU spent since t0 (a bench_host_cpu_ms() taken before its runs). */
void sample_host_cpu(struct bench_sample *s, double t0);

/* The median of v[0..n) (sorted in place; the mean of the middle two when n is even); 0 when
 * n is 0. */
double bench_median(double *v, size_t n);

/* The pid of the process at the other end of the unix socket at path (isolad: SO_PEERCRED),
 * or 0 when it cannot be reached (NULL path, no listener). */
long bench_daemon_pid(const char *socket_path);

/* The user + system CPU time pid has used so far (/proc/PID/stat), in seconds; < 0 when it
 * cannot be read. */
double bench_process_cpu_s(long pid);

/* Runs argv to completion with stdio on /dev/null; returns its latency in ms or -1. */
double run_peer(char *const argv[]);
bool have_program(const char *name);

/* n start-to-exit cycles of `bwrap --unshare-all ... /bin/true`. */
void bench_bwrap(int n, struct bench_sample *s);
/* The same cycle k times at once (k threads leave a barrier together): what a burst costs on
 * this machine with the least a sandbox can be, the floor for isola's burst ratio. */
void bench_bwrap_burst(int k, struct bench_sample *s);
/* n cycles of `runc run` of a bundle with the host's /usr running /bin/true. */
void bench_runc(int n, struct bench_sample *s);
/* n `runc exec CONTAINER echo isola` into one container started once (`runc run -d`),
 * which is killed and deleted afterwards. */
void bench_runc_exec(int n, struct bench_sample *s);

#endif
