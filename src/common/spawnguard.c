/* SPDX-License-Identifier: Apache-2.0 */
/* spawnguard: a cloned child of isolad neither holds isolad's fds nor outlives it before handover. */
#include "spawnguard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

static int record_path(const char *dir, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/" SPAWNGUARD_RECORD, dir);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int spawnguard_record_open(const char *dir)
{
	char path[PATH_MAX], body[32];
	cleanup_fd int fd = -1;
	int n, r;

	r = record_path(dir, path, sizeof(path));
	if (r < 0)
		return r;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = snprintf(body, sizeof(body), "%d\n", (int)getpid());
	r = util_write_all(fd, body, (size_t)n);
	if (r < 0)
		return r;
	return steal_fd(&fd);
}

void spawnguard_record_remove(const char *dir)
{
	char path[PATH_MAX];

	if (record_path(dir, path, sizeof(path)) == 0)
		unlink(path);
}

/* True when process pid holds an fd on the inode (dev, ino). */
static bool holds(pid_t pid, dev_t dev, ino_t ino)
{
	char path[64];
	struct dirent *de;
	bool found = false;
	DIR *d;
	int dfd;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return false;
	}
	while (!found && (de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		/* Follows the magic link to the open file itself, whatever its path now. */
		if (fstatat(dfd, de->d_name, &st, 0) == 0 && st.st_dev == dev && st.st_ino == ino)
			found = true;
	}
	closedir(d);
	return found;
}

int spawnguard_kill_orphans(const char *dir, int timeout_ms)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat rec;
	int killed = 0;
	DIR *d;

	if (record_path(dir, path, sizeof(path)) < 0 || lstat(path, &rec) < 0 ||
	    !S_ISREG(rec.st_mode))
		return 0;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		int pfd;

		if (*end || pid <= 1 || pid == (long)getpid() ||
		    !holds((pid_t)pid, rec.st_dev, rec.st_ino))
			continue;
		pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (pfd < 0)
			continue;
		/* Checked again through the pinned pid: the pid may have been recycled between
		 * the scan and pidfd_open, the pidfd cannot be. */
		if (holds((pid_t)pid, rec.st_dev, rec.st_ino) &&
		    syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
			struct pollfd p = {.fd = pfd, .events = POLLIN};

			killed++;
			while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
				;
		}
		close(pfd);
	}
	closedir(d);
	unlink(path);
	return killed;
}

int spawnguard_child_enter(const int *keep, unsigned n)
{
	int k[SPAWNGUARD_MAX_KEEP];
	unsigned m = 0;
	unsigned lo = 3;
	int null;

	if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return -1;
	if (n > SPAWNGUARD_MAX_KEEP) {
		errno = EINVAL;
		return -1;
	}
	/* Sorted copy of the fds to keep (insertion sort: no library call). */
	for (unsigned i = 0; i < n; i++) {
		int fd = keep[i];
		unsigned j = m;

		if (fd < 3)
			continue;
		while (j > 0 && k[j - 1] > fd) {
			k[j] = k[j - 1];
			j--;
		}
		k[j] = fd;
		m++;
	}
	/* Close the gaps between the kept fds, then everything above the last one. */
	for (unsigned i = 0; i < m; i++) {
		if ((unsigned)k[i] > lo && syscall(SYS_close_range, lo, (unsigned)k[i] - 1, 0) < 0)
			return -1;
		if ((unsigned)k[i] + 1 > lo)
			lo = (unsigned)k[i] + 1;
	}
	if (syscall(SYS_close_range, lo, ~0U, 0) < 0)
		return -1;
	/* isolad's stdio (its log file, a journal socket, a terminal) becomes /dev/null. */
	null = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return -1;
	for (int fd = 0; fd < 3; fd++)
		if (syscall(SYS_dup3, null, fd, 0) < 0)
			return -1;
	return syscall(SYS_close, null) < 0 ? -1 : 0;
}

void spawnguard_child_handover(void)
{
	syscall(SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0);
}
