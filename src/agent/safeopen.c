/* SPDX-License-Identifier: Apache-2.0 */
/* safeopen: resolve archive paths beneath a directory without ever leaving it. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
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

int safe_open_path(const char *path, int flags, mode_t mode)
{
	/* The agent is PID 1: /proc/self/... and /proc/1/... are its own fd table (isolad's
	 * connection, every process's pipes and PTY masters), memory and root, which no
	 * process in the sandbox may open (the agent is not dumpable). Through the files API
	 * the agent would open them as itself, for the client: refuse magic links. Ordinary
	 * symlinks are followed, inside the sandbox's root. */
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.mode = flags & O_CREAT ? mode : 0,
		.resolve = RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	struct statfs sf;

	if (fd < 0 && errno == ENOSYS) /* before 5.6; the process tier needs 5.12 anyway */
		fd = open(path, flags | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	/* Nor the agent's own /proc/<pid> files (oom_score_adj, comm, mem, environ...),
	 * reached however: by name, through /proc/self, or a symlink planted inside. */
	if (fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
		char link[64], got[128], own[32];
		ssize_t n;
		size_t ol;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ol = (size_t)snprintf(own, sizeof(own), "/proc/%d", (int)getpid());
		n = readlink(link, got, sizeof(got) - 1);
		if (n < 0 || ((size_t)n >= ol && !memcmp(got, own, ol) &&
			      (got[ol] == '/' || (size_t)n == ol))) {
			close(fd);
			return -EACCES;
		}
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
