/* SPDX-License-Identifier: Apache-2.0 */
/* disk: the writable layer on the host's disk: a nameless sparse ext4 image on a loop device, mounted detached. */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/util.h"

#define DISK_BLOCK	4096u /* ext4 block size, and the loop device's logical block size */
#define DISK_INODE	256u  /* ext4 inode size (mke2fs's default: ns timestamps, y2038) */
#define DISK_LOOP_TRIES 32    /* LOOP_CTL_GET_FREE races with other loop users */

extern char **environ;

uint64_t proc_disk_image_size(uint64_t disk, uint64_t inodes)
{
	/* ext4 reports its size without its own metadata (bsddf), so the image is the
	 * allowance plus what mke2fs takes from it: the inode tables, per 128 MiB block group
	 * a block and an inode bitmap, and the clusters ext4 holds back from writers for its
	 * own extent updates (2% of the blocks, at most 4096: ext4_calculate_resv_clusters).
	 * Measured from 1 MiB to 10000 MiB with 65536 inodes: the sandbox can store between
	 * disk - 0.5 MiB and disk + 0.15 MiB of files (docs/process-tier.md). */
	uint64_t groups = disk / (128ull << 20) + 1;
	uint64_t resv = disk / 50 < 4096ull * DISK_BLOCK ? disk / 50 : 4096ull * DISK_BLOCK;
	uint64_t sz = disk + inodes * DISK_INODE + groups * 2 * DISK_BLOCK + resv;

	return sz & ~(uint64_t)(DISK_BLOCK - 1);
}

/* The -N to give mke2fs for at most `inodes` inodes in an image of `size` bytes: mke2fs
 * rounds the inodes of each block group up to whole inode-table blocks, so an even share
 * rounded down to 16 (inodes per 4 KiB block) keeps the total at or under the limit. */
static uint64_t mkfs_inodes(uint64_t size, uint64_t inodes)
{
	uint64_t blocks = size / DISK_BLOCK, groups = (blocks + 32767) / 32768;
	uint64_t per = groups ? inodes / groups / 16 * 16 : inodes;

	return (per ? per : 16) * (groups ? groups : 1);
}

/*
 * Runs mke2fs on the image open at img (as /dev/fd/3 of the child: the image has no name).
 * No journal (the image dies with the sandbox and with the host: after a crash there is
 * nothing to replay), no reserved blocks (-m 0: the sandbox gets all of it), no resize
 * inode, inode tables left unzeroed (lazy_itable_init: the sparse file reads as zeros, and
 * the mount says noinit_itable so no kernel thread writes them later), no discard pass.
 */
static int run_mkfs(int img, uint64_t size, uint64_t inodes, uint32_t uid, uint32_t gid,
		    struct isola_err **err)
{
	char size_s[32], inodes_s[32], ext_s[96];
	char *argv[] = {"mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-N",
			inodes_s, "-O", "^has_journal,^resize_inode", "-E", ext_s, "/dev/fd/3",
			size_s, NULL};
	posix_spawn_file_actions_t fa;
	int st = 0, r;
	pid_t pid;

	snprintf(size_s, sizeof(size_s), "%lluk", (unsigned long long)(size >> 10));
	snprintf(inodes_s, sizeof(inodes_s), "%llu",
		 (unsigned long long)mkfs_inodes(size, inodes));
	snprintf(ext_s, sizeof(ext_s), "lazy_itable_init=1,nodiscard,root_owner=%u:%u", uid, gid);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, img, 3);
	r = posix_spawnp(&pid, "mke2fs", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return isola_err_sys(err, r, r == ENOENT ? "unavailable" : "internal",
				     "run mke2fs for the writable layer%s",
				     r == ENOENT ? " (install e2fsprogs)" : "");
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return isola_err_sys(err, errno, "internal", "wait for mke2fs");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return isola_err_set(err, EIO, "internal", "mke2fs of the writable layer failed (status %d)",
			     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/*
 * Binds img to a free loop device with LOOP_CONFIGURE (one ioctl: no window in which the
 * device is bound but not yet auto-clearing). LO_FLAGS_AUTOCLEAR detaches it when its last
 * opener goes (the mounted filesystem, or our fd if the mount never happens), and the
 * detached device drops the last reference to the nameless image. Direct I/O where the
 * backing filesystem allows it: the data is cached once (in the sandbox's own page cache),
 * not twice. Returns the loop fd (O_RDWR) and its number in *nr, or -errno.
 */
static int loop_attach(int img, const char *id, int *nr)
{
	cleanup_fd int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	struct loop_config cfg;
	char dev[32];

	if (ctl < 0)
		return -errno;
	for (int i = 0; i < DISK_LOOP_TRIES; i++) {
		cleanup_fd int lfd = -1;
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			return -errno;
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			if (errno == ENOENT || errno == ENXIO) /* removed meanwhile */
				continue;
			return -errno;
		}
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (uint32_t)img;
		cfg.block_size = DISK_BLOCK;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
		/* Shown by losetup: whose device this is. */
		snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name),
			 "isola:%s", id);
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
			if (errno == EBUSY)
				continue; /* taken between GET_FREE and here */
			if (errno != EINVAL)
				return -errno;
			/* A backing filesystem without O_DIRECT: buffered. */
			cfg.info.lo_flags &= ~(uint32_t)LO_FLAGS_DIRECT_IO;
			if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
				if (errno == EBUSY)
					continue;
				return -errno;
			}
		}
		*nr = n;
		return steal_fd(&lfd);
	}
	return -EBUSY;
}

/* Mounts the ext4 on /dev/loop<nr> detached: nosuid, nodev, and made by isolad (owned by
 * the host's user namespace), so the sandbox's root cannot remount or unmount it. */
static int mount_ext4(int nr)
{
	cleanup_fd int fs = -1;
	char dev[32];
	int fd;

	snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
	fs = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    /* The inode tables were never zeroed (lazy_itable_init): no kernel thread should
	     * write them now; the sparse image reads as zeros. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    /* Freed blocks are punched out of the image: the host's disk follows what the
	     * sandbox holds now, not the most it ever held. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "discard", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	fd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return fd < 0 ? -errno : fd;
}

/* A nameless image file in dir: O_TMPFILE, or (on a filesystem without it) a new name
 * unlinked at once. Nothing is left on disk by any crash after this returns. */
static int open_image(const char *dir, struct isola_err **err)
{
	char path[600];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd >= 0 ? fd : isola_err_sys(err, errno, "internal", "image in `%s`", dir);
	snprintf(path, sizeof(path), "%s/.disk.img", dir);
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", path);
	unlink(path);
	return fd;
}

int proc_disk_mount(const char *dir, const char *id, uint64_t disk, uint64_t inodes, uint32_t uid,
		    uint32_t gid, struct isola_err **err)
{
	cleanup_fd int img = -1;
	cleanup_fd int lfd = -1;
	uint64_t size;
	int nr = -1, fd;

	if (!inodes)
		inodes = PROC_DISK_DEFAULT_INODES;
	if (!disk)
		disk = PROC_DISK_DEFAULT_BYTES;
	size = proc_disk_image_size(disk, inodes);
	img = open_image(dir, err);
	if (img < 0)
		return img;
	/* Sparse: the host's disk is used as the sandbox writes, up to `size`. */
	if (ftruncate(img, (off_t)size) < 0)
		return isola_err_sys(err, errno, errno == EFBIG ? "invalid" : "internal",
				     "size the writable layer image in `%s` to %llu bytes", dir,
				     (unsigned long long)size);
	fd = run_mkfs(img, size, inodes, uid, gid, err);
	if (fd < 0)
		return fd;
	lfd = loop_attach(img, id, &nr);
	if (lfd < 0)
		return isola_err_sys(err, -lfd, -lfd == ENOENT ? "unavailable" : "internal",
				     "attach the writable layer image of `%s` to a loop device", id);
	fd = mount_ext4(nr);
	if (fd < 0)
		return isola_err_sys(err, -fd, "internal", "mount the writable layer of `%s` (loop%d)",
				     id, nr);
	/* No fsck ever runs on this image (it dies with the sandbox): the sandbox's layer
	 * root holds only what setup makes there (lower, upper, work, root). */
	if (unlinkat(fd, "lost+found", AT_REMOVEDIR) < 0 && errno != ENOENT) {
		int e = errno;

		close(fd);
		return isola_err_sys(err, e, "internal", "writable layer of `%s`: remove lost+found",
				     id);
	}
	/* lfd and img close here: the mount holds the device, the device the image. */
	return fd;
}
