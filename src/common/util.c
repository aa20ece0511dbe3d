/* SPDX-License-Identifier: Apache-2.0 */
/* util: fd and buffer helpers shared by isolad, the agent, the CLI and tests. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

int util_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int util_read_exact(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int util_read_file(const char *path, size_t max, char **out, size_t *len)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = max < 4096 ? max : 4096, used = 0;
	char *buf;

	if (fd < 0)
		return -errno;
	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (used == cap) {
			char *nb;

			if (cap >= max) {
				/* Full: one more byte (into the spare slot) means too big. */
				n = read(fd, buf + used, 1);
				if (n != 0) {
					free(buf);
					return n < 0 ? -errno : -EFBIG;
				}
				break;
			}
			cap = cap * 2 > max ? max : cap * 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + used, cap - used);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	*out = buf;
	if (len)
		*len = used;
	return 0;
}

static int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode,
			     bool durable)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	cleanup_fd int fd = -1;
	cleanup_fd int dfd = -1;
	char *slash;
	int r;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	r = util_write_all(fd, buf, len);
	if (r == 0 && durable && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	dfd = durable ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (dfd >= 0)
		fsync(dfd);
	return 0;
}

long long util_file_key(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	size_t klen = strlen(key);
	long long v = -1;
	char line[256];

	if (!f)
		return -1;
	while (v < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen))
			v = strtoll(line + klen, NULL, 10);
	fclose(f);
	return v;
}

int util_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	return write_file_atomic(path, buf, len, mode, true);
}

int util_write_file_replace(const char *path, const void *buf, size_t len, mode_t mode)
{
	return write_file_atomic(path, buf, len, mode, false);
}

int util_fsync_path(const char *path)
{
	char dir[PATH_MAX];
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	cleanup_fd int dfd = -1;
	char *slash;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		return -errno;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	dfd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	return fsync(dfd) < 0 ? -errno : 0;
}

int util_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return n ? -ENAMETOOLONG : -EINVAL;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int rm_rf_at(int dfd, const char *name, dev_t dev)
{
	struct stat st;
	int fd, r = 0;
	DIR *d;
	struct dirent *de;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (st.st_dev != dev)
		return -EXDEV; /* a mount point: never descend into another filesystem */
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		int q;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		q = rm_rf_at(dirfd(d), de->d_name, dev);
		if (q < 0 && r == 0)
			r = q;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int util_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	return rm_rf_at(AT_FDCWD, path, st.st_dev);
}

int util_rm_rf_at(int dfd, const char *name)
{
	struct stat st;

	if (fstatat(dfd, "", &st, AT_EMPTY_PATH) < 0)
		return -errno;
	return rm_rf_at(dfd, name, st.st_dev);
}

uint64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void util_deadline_ts(clockid_t clk, uint64_t ms, struct timespec *ts)
{
	clock_gettime(clk, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

uint64_t util_now_ms(void)
{
	return util_now_ns() / 1000000ull;
}

void util_thread_name(const char *name)
{
	char n[16];

	snprintf(n, sizeof(n), "%s", name);
	pthread_setname_np(pthread_self(), n);
}

double util_wall_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool util_hostname_valid(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	if (n == 0 || n > 63 || h[0] == '-' || h[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		      (h[i] >= '0' && h[i] <= '9') || h[i] == '-' || h[i] == '.'))
			return false;
	return true;
}

int util_random(void *buf, size_t n)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int util_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

const char *util_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTP";
	double v = (double)bytes;
	int u = -1;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
	else if (v >= 100 || (v == (double)(uint64_t)v && u < 3))
		snprintf(buf, len, "%.0f%c", v, units[u]);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
	return buf;
}

int util_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	case 't':
	case 'T':
		mul = 1ull << 40;
		end++;
		break;
	default:
		return -EINVAL;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

int util_set_cloexec(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -errno;
	fl = on ? fl | FD_CLOEXEC : fl & ~FD_CLOEXEC;
	return fcntl(fd, F_SETFD, fl) < 0 ? -errno : 0;
}

int util_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

int util_unix_connect(const char *path, int sock_flags)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | sock_flags, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int util_parse_duration(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	const char *p = s;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case '\0':
	case 's':
		break;
	case 'm':
		mult = 60;
		break;
	case 'h':
		mult = 3600;
		break;
	case 'd':
		mult = 86400;
		break;
	default:
		return -EINVAL;
	}
	if (*p && p[1])
		return -EINVAL;
	if (v > max / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}
