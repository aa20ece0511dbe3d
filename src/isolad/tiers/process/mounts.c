/* SPDX-License-Identifier: Apache-2.0 */
/* mounts: detached mount trees isolad makes for a sandbox (idmapped lower layers, tmpfs upper). */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/spawnguard.h"
#include "../../../common/util.h"

int proc_mount_clone(const char *src, int userns_fd, bool readonly, bool recursive, bool *idmapped)
{
	struct mount_attr attr = {
		.attr_set =
			(readonly ? MOUNT_ATTR_RDONLY : 0) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	};
	unsigned tree = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
	unsigned set = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
	cleanup_fd int fd = -1;

	*idmapped = false;
	/* A private copy of the host tree, detached: nothing appears in isolad's mount
	 * namespace, and the sandbox cannot affect the original. */
	fd = open_tree(AT_FDCWD, src, tree);
	if (fd < 0)
		return -errno;
	if (userns_fd >= 0) {
		struct mount_attr ia = attr;

		/* Template files owned by host uid 0 appear owned by the sandbox's root
		 * (host uid_base) without chowning the template. */
		ia.attr_set |= MOUNT_ATTR_IDMAP;
		ia.userns_fd = (uint64_t)userns_fd;
		if (mount_setattr(fd, "", set, &ia, sizeof(ia)) == 0) {
			*idmapped = true;
			return steal_fd(&fd);
		}
		/* The idmap failed (filesystem without FS_ALLOW_IDMAP, old kernel): start
		 * over from a fresh clone, since a partial setattr is not undoable. */
		close(fd);
		fd = open_tree(AT_FDCWD, src, tree);
		if (fd < 0)
			return -errno;
	}
	if (mount_setattr(fd, "", set, &attr, sizeof(attr)) < 0)
		return -errno;
	return steal_fd(&fd);
}

int proc_mount_tmpfs(uint64_t size, uint64_t inodes, uint32_t uid, uint32_t gid)
{
	cleanup_fd int fs = -1;
	char v[32];
	int fd;

	/* Made by isolad (owned by the host user namespace), so the sandbox's root
	 * cannot remount it to lift size= or nr_inodes=. */
	fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)size);
	if (size && fsconfig(fs, FSCONFIG_SET_STRING, "size", v, 0) < 0)
		return -errno;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)inodes);
	if (inodes && fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", v, 0) < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0)
		return -errno;
	snprintf(v, sizeof(v), "%u", uid);
	if (fsconfig(fs, FSCONFIG_SET_STRING, "uid", v, 0) < 0)
		return -errno;
	snprintf(v, sizeof(v), "%u", gid);
	if (fsconfig(fs, FSCONFIG_SET_STRING, "gid", v, 0) < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	fd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return fd < 0 ? -errno : fd;
}

bool proc_mount_idmap_probe(void)
{
	int sp[2], ufd = -1, mfd;
	bool ok = false, idm = false;
	char c = 0, path[64];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return false;
	/* A throwaway child in a fresh user namespace whose ns fd we borrow. vfork-free
	 * fork: the child only blocks on read, async-signal-safe. */
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		/* Only sp[1]: with our copy of sp[0] closed, isolad's death is EOF here. */
		ssize_t n = spawnguard_child_enter(&sp[1], 1) < 0 ? -1 : read(sp[1], &c, 1);

		_exit(n == 1 ? 0 : 1);
	}
	if (pid < 0)
		goto out;
	if (proc_write_idmaps(pid, 100000) < 0)
		goto out_kill;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	ufd = open(path, O_RDONLY | O_CLOEXEC);
	if (ufd < 0)
		goto out_kill;
	/* Only the root filesystem, not its submounts (proc, sysfs and cgroup cannot be
	 * idmapped, which would fail a recursive probe on every host). */
	mfd = open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (mfd >= 0) {
		struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY,
				       .userns_fd = (uint64_t)ufd};

		idm = mount_setattr(mfd, "", AT_EMPTY_PATH, &a, sizeof(a)) == 0;
		close(mfd);
	}
	ok = idm;
	close(ufd);
out_kill:
	if (write(sp[0], "x", 1) < 0)
		kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
out:
	close(sp[0]);
	close(sp[1]);
	return ok;
}
