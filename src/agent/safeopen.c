/* SPDX-License-Identifier: Apache-2.0 */
/* safeopen: resolve archive paths beneath a directory without ever leaving it. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

bool safeopen_force_fallback;

/*
 * Defends against the docker-cp family of escapes (CVE-2018-15664, CVE-2019-14271):
 * an archive, or a racing process inside the sandbox, plants a symlink in a parent
 * directory so a later entry lands outside the destination. We never follow a symlink
 * in any component, and `..` never gets that far.
 */

int safe_rel_name(const char *name, char out[AGENT_MAX_PATH + 1])
{
	const char *p = name;
	size_t o = 0;

	/* UNTRUSTED: archive member names come from the tar stream the client uploaded */
	if (!name || strlen(name) > AGENT_MAX_PATH || name[0] == '/')
		return -EINVAL;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	out[o] = '\0';
	return 0;
}

static int walk(int root_fd, const char *rel, bool create)
{
	char buf[AGENT_MAX_PATH + 1], *p, *save = NULL;
	int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0)
		return -errno;
	strcpy(buf, rel);
	for (p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		struct stat st;
		int nfd;

		if (!strcmp(p, "..")) {
			close(fd);
			return -EINVAL;
		}
		if (fstatat(fd, p, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT || !create ||
			    (mkdirat(fd, p, 0755) < 0 && errno != EEXIST)) {
				int e = errno;

				close(fd);
				return -e;
			}
		} else if (S_ISLNK(st.st_mode)) {
			close(fd);
			return -ELOOP;
		}
		/* O_NOFOLLOW again: the component may have been swapped since fstatat */
		nfd = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (nfd < 0)
			return errno == ENOTDIR ? -ELOOP : -errno;
		fd = nfd;
	}
	return fd;
}

int safe_open_dir(int root_fd, const char *rel, bool create)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
	};
	char norm[AGENT_MAX_PATH + 1];
	int fd;

	if (safe_rel_name(rel, norm) < 0)
		return -EINVAL;
	if (!norm[0]) {
		fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : fd;
	}
	if (!safeopen_force_fallback) {
		fd = (int)syscall(SYS_openat2, root_fd, norm, &how, sizeof(how));
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS && !(errno == ENOENT && create))
			return -errno;
		/* missing components to create: the walk does it, with the same rules */
	}
	return walk(root_fd, norm, create);
}
