/* SPDX-License-Identifier: Apache-2.0 */
/* util: fd and buffer helpers shared by isolad, the agent, the CLI and tests. */
#ifndef ISOLA_UTIL_H
#define ISOLA_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Closes *fd if >= 0 and sets it to -1. For __attribute__((cleanup)). */
static inline void util_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}
#define cleanup_fd __attribute__((cleanup(util_closep)))

static inline void util_freep(void *p)
{
	free(*(void **)p);
}
#define cleanup_free __attribute__((cleanup(util_freep)))

/* Hands ownership of an fd to the caller: returns *fd and sets it to -1. */
static inline int steal_fd(int *fd)
{
	int r = *fd;

	*fd = -1;
	return r;
}

/* Hands ownership of a pointer to the caller. */
#define steal_ptr(pp)                                                                              \
	({                                                                                         \
		__typeof__(*(pp)) _p = *(pp);                                                      \
		*(pp) = NULL;                                                                      \
		_p;                                                                                \
	})

/* Writes all of buf, retrying on EINTR and short writes. 0 or -errno. */
int util_write_all(int fd, const void *buf, size_t len);

/* Reads exactly len bytes. 0, -errno, or -EPIPE on early EOF. */
int util_read_exact(int fd, void *buf, size_t len);

/* Reads a whole small file (at most max bytes) into a NUL-terminated heap buffer.
 * Returns 0 and sets *out (caller frees) and *len, or -errno (-EFBIG past max). */
int util_read_file(const char *path, size_t max, char **out, size_t *len);

/* The number after key on the first line of a "key value" file that starts with key
 * (/proc/meminfo's "MemAvailable:", smaps_rollup's "Pss:", memory.stat's "file_dirty "; ""
 * reads the first line), or -1 when the file or the key is missing. Any thread. */
long long util_file_key(const char *path, const char *key);

/* Writes a file atomically: temp name in the same dir, fsync, rename, fsync dir. */
int util_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode);

/* The same without the fsyncs: atomic for every process (and across a crash of this one),
 * not durable across a crash of the host. For what a host crash takes away anyway. */
int util_write_file_replace(const char *path, const void *buf, size_t len, mode_t mode);

/* fsyncs path and its directory (what util_write_file_replace did not). 0 or -errno. */
int util_fsync_path(const char *path);

/* mkdir -p with the given mode for created components. 0 or -errno. */
int util_mkdir_p(const char *path, mode_t mode);

/* rm -rf that never crosses a mount point and never follows symlinks. 0 or -errno. */
int util_rm_rf(const char *path);

/* Removes name (a file or a tree) relative to dfd without following symlinks or leaving dfd's
 * filesystem (a directory on another one: -EXDEV, left in place). A missing name is 0.
 * Otherwise 0 or the first -errno; removal goes on past failures. */
int util_rm_rf_at(int dfd, const char *name);

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t util_now_ns(void);

/* *ts = now on clock `clk` + ms: the absolute deadline pthread_cond_timedwait takes (a
 * condition variable waits on CLOCK_REALTIME unless its attributes chose another clock). */
void util_deadline_ts(clockid_t clk, uint64_t ms, struct timespec *ts);
uint64_t util_now_ms(void);
/* Wall clock, seconds since the epoch, with fractional part. */
double util_wall_time(void);

/* Names the calling thread (its first 15 bytes: the kernel's limit), as `ps -L`, `top -H`,
 * perf and gdb show it. A thread is otherwise named after its creator, so isolad's
 * background work looked like the HTTP connection that started it. */
void util_thread_name(const char *name);

/* True for a hostname isola sets in a sandbox: 1-63 of [A-Za-z0-9.-] starting with a letter
 * or digit (a sandbox id, or an OCI spec's `hostname`, e.g. a Kubernetes pod's name). */
bool util_hostname_valid(const char *h);

/* Fills buf with n random bytes from getrandom(). 0 or -errno. */
int util_random(void *buf, size_t n);

/* Parses a duration "90", "90s", "15m", "24h", "7d" into seconds (at most max). 0 or
 * -EINVAL (not a duration) / -ERANGE (past max). */
int util_parse_duration(const char *s, uint64_t max, uint64_t *out);

/* Parses "512M", "2G", "1024", "64k" into bytes. 0 or -EINVAL/-ERANGE. */
int util_parse_size(const char *s, uint64_t *out);

/* The value of one hex digit (either case), or -1 when c is not one. */
int util_hexval(char c);

/* Formats bytes the way util_parse_size reads them: 512M, 1.5G, 1.0T, 100K, 12B. Returns buf. */
const char *util_fmt_size(uint64_t bytes, char *buf, size_t len);

/* Makes fd close-on-exec / non-blocking. 0 or -errno. */
int util_set_cloexec(int fd, bool on);
int util_set_nonblock(int fd, bool on);

/* Connects a new close-on-exec stream socket (plus `sock_flags`, e.g. SOCK_NONBLOCK) to the unix
 * socket at `path`. The fd, or -ENAMETOOLONG for a path longer than sun_path, or -errno. */
int util_unix_connect(const char *path, int sock_flags);

#endif
