/* SPDX-License-Identifier: Apache-2.0 */
/* extract: hostile archive member names resolved, written and removed inside a root directory fd. */
#include "extract.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Parents are resolved by the kernel relative to the root's fd (openat2 RESOLVE_IN_ROOT):
 * symlinks in an archive, absolute or relative, resolve as they would inside the root and can
 * never name a host path (CVE-2018-15664 class). Callers create entries with *at() calls
 * relative to the fd they get.
 */

static bool force_fallback; /* tests: pretend openat2 is missing */

void extract_test_force_fallback(bool on)
{
	force_fallback = on;
}

int extract_norm_path(const char *in, char *out, size_t outsz)
{
	size_t o = 0;
	const char *p = in;

	if (in[0] == '/')
		return -EPERM; /* absolute: an archive member never needs one */
	while (*p) {
		const char *s = p;
		size_t n;

		while (*p && *p != '/')
			p++;
		n = (size_t)(p - s);
		while (*p == '/')
			p++;
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return -EPERM; /* "..": traversal (CVE-2001-1267 class) */
		if (n > NAME_MAX || o + n + 2 > outsz)
			return -ENAMETOOLONG;
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	out[o] = '\0';
	return o ? 0 : -ENOENT;
}

const char *extract_split(const char *path, char *dir)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		dir[0] = '\0';
		return path;
	}
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return slash + 1;
}

static int walk_nofollow(int rootfd, const char *rel)
{
	char buf[PATH_MAX];
	int cur;
	char *save = NULL, *comp;

	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	cur = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		/* O_NOFOLLOW|O_DIRECTORY fails on a symlink: the fallback refuses symlinked parents. */
		int nfd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;

		close(cur);
		if (nfd < 0)
			return -e;
		cur = nfd;
	}
	return cur;
}

int extract_open_dir(int rootfd, const char *rel)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	long fd;

	if (!*rel)
		rel = ".";
	if (!force_fallback) {
		fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS)
			return -errno;
	}
	return walk_nofollow(rootfd, rel);
}

int extract_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}
