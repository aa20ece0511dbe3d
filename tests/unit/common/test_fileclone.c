/* SPDX-License-Identifier: Apache-2.0 */
/* test_fileclone: reflink on a real XFS loop mount, the sparse-copy fallback on ext4/tmpfs and across filesystems. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../tap.h"
#include "common/fileclone.h"

#define MIB (1u << 20)

/* A 64 MiB sparse source: 8 MiB of data at 0, a hole, 4 MiB at 32 MiB, a hole to the end. */
static int make_source(const char *dir, char *path, size_t len)
{
	static char buf[MIB];
	int fd;

	snprintf(path, len, "%s/src", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 64 * MIB) < 0)
		return -1;
	for (unsigned i = 0; i < 12; i++) {
		off_t off = i < 8 ? (off_t)i * MIB : (off_t)(32 + i - 8) * MIB;

		memset(buf, 'a' + (int)i, sizeof(buf));
		if (pwrite(fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf))
			return -1;
	}
	return fsync(fd) < 0 ? -1 : fd;
}

static bool same_bytes(int a, int b)
{
	static char x[MIB], y[MIB];
	struct stat sa, sb;

	if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0 || sa.st_size != sb.st_size)
		return false;
	for (off_t off = 0; off < sa.st_size; off += MIB) {
		ssize_t n = pread(a, x, MIB, off), m = pread(b, y, MIB, off);

		if (n != m || n <= 0 || memcmp(x, y, (size_t)n))
			return false;
	}
	return true;
}

/* Allocated bytes of fd (holes cost nothing). */
static long long allocated(int fd)
{
	struct stat st;

	return fstat(fd, &st) < 0 ? -1 : (long long)st.st_blocks * 512;
}

/* Whether every data extent of fd is marked shared by FIEMAP (false when none is). */
static bool all_extents_shared(int fd)
{
	static char buf[sizeof(struct fiemap) + 64 * sizeof(struct fiemap_extent)];
	struct fiemap *fm = (struct fiemap *)buf;

	memset(buf, 0, sizeof(buf));
	fm->fm_length = ~0ull;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = 64;
	if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0 || fm->fm_mapped_extents == 0)
		return false;
	for (unsigned i = 0; i < fm->fm_mapped_extents; i++)
		if (!(fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_SHARED))
			return false;
	return true;
}

static unsigned long long used_bytes(const char *dir)
{
	struct statvfs v;

	return statvfs(dir, &v) < 0 ? 0 : (unsigned long long)(v.f_blocks - v.f_bfree) * v.f_frsize;
}

/* On a filesystem without reflinks: a sparse copy, even over a longer file out held. */
static void test_fallback(const char *dir, const char *what)
{
	char src[512], dst[512];
	int in = make_source(dir, src, sizeof(src)), out, r, dfd;

	snprintf(dst, sizeof(dst), "%s/dst", dir);
	out = open(dst, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ok(in >= 0 && out >= 0, "%s: source and target files", what);
	if (in < 0 || out < 0)
		return;
	ok(ftruncate(out, 100 * MIB) == 0 && pwrite(out, "junk", 4, 90 * MIB) == 4,
	   "%s: target holds older, longer content", what);
	r = fileclone_copy(in, out);
	ok(r == FILECLONE_COPY, "%s: fileclone_copy falls back to a copy (got %d)", what, r);
	ok(same_bytes(in, out), "%s: the copy has the source's bytes and size", what);
	ok(allocated(out) <= 13 * MIB, "%s: holes stay holes (%lld bytes allocated)", what,
	   allocated(out));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(dfd >= 0 && !fileclone_dir_can_reflink(dfd), "%s: the probe says no reflinks", what);
	if (dfd >= 0)
		close(dfd);
	close(in);
	close(out);
	unlink(src);
	unlink(dst);
}

static int run(const char *cmd)
{
	int r = system(cmd);

	return r == 0 ? 0 : -1;
}

/* The XFS part: a reflink, shared extents, no space used, copy-on-write on both sides. */
static void test_xfs(const char *mnt, const char *other_fs)
{
	char src[512], dst[512], x[4096], bind[512], path[700];
	unsigned long long before, after;
	int in = make_source(mnt, src, sizeof(src)), out, r, dfd, far;
	struct stat st;

	snprintf(dst, sizeof(dst), "%s/dst", mnt);
	out = open(dst, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ok(in >= 0 && out >= 0, "xfs: source and target files");
	if (in < 0 || out < 0)
		return;
	dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(dfd >= 0 && fileclone_dir_can_reflink(dfd), "xfs: the probe says reflinks work");
	if (dfd >= 0)
		close(dfd);
	sync();
	before = used_bytes(mnt);
	r = fileclone_copy(in, out);
	ok(r == FILECLONE_REFLINK, "xfs: fileclone_copy reflinks (got %d)", r);
	ok(!strcmp(fileclone_how_name(r), "reflink"), "xfs: named `reflink`");
	ok(same_bytes(in, out), "xfs: the clone has the source's bytes and size");
	ok(all_extents_shared(out) && all_extents_shared(in), "xfs: FIEMAP shows shared extents");
	sync();
	after = used_bytes(mnt);
	ok(after < before + 1 * MIB, "xfs: the 12 MiB clone used %lld bytes of the filesystem",
	   (long long)(after - before));
	/* Copy-on-write both ways: a write on one side is not seen on the other. */
	memset(x, 'Z', sizeof(x));
	ok(pwrite(out, x, sizeof(x), 0) == (ssize_t)sizeof(x) &&
		   pread(in, x, sizeof(x), 0) == (ssize_t)sizeof(x) && x[0] == 'a',
	   "xfs: a write to the clone leaves the source alone");
	memset(x, 'Y', sizeof(x));
	ok(pwrite(in, x, sizeof(x), 32 * MIB) == (ssize_t)sizeof(x) &&
		   pread(out, x, sizeof(x), 32 * MIB) == (ssize_t)sizeof(x) && x[0] == 'i',
	   "xfs: a write to the source leaves the clone alone");
	close(out);
	unlink(dst);

	/* Scattered 4 KiB writes into a clone (a guest writing its RAM): with the small CoW unit
	 * each costs a block, not XFS's default 128 KiB. */
	out = open(dst, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	r = out < 0 ? -errno : fileclone_small_cow_unit(out);
	ok(r == 0, "xfs: small copy-on-write unit set (%s)", strerror(r < 0 ? -r : 0));
	ok(out >= 0 && fileclone_copy(in, out) == FILECLONE_REFLINK, "xfs: second clone");
	sync();
	before = used_bytes(mnt);
	for (unsigned i = 0; i < 64 && out >= 0; i++)
		if (pwrite(out, x, 1, (off_t)(i % 8) * MIB + (off_t)(i / 8) * 128 * 1024) != 1)
			break;
	sync();
	after = used_bytes(mnt);
	ok(after < before + 1 * MIB, "xfs: 64 scattered page writes into the clone used %lld KiB",
	   (long long)(after - before) >> 10);
	if (out >= 0)
		close(out);
	unlink(dst);

	/* The same filesystem through another mount (the jail's bind of /mem): still a reflink. */
	snprintf(bind, sizeof(bind), "%s.bind", mnt);
	r = mkdir(bind, 0700) == 0 && mount(mnt, bind, NULL, MS_BIND, NULL) == 0 ? 0 : -errno;
	ok(r == 0, "xfs: bind mount of the XFS (%s)", strerror(-r));
	if (r == 0) {
		snprintf(path, sizeof(path), "%s/dst2", bind);
		out = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		r = out < 0 ? -errno : fileclone_copy(in, out);
		ok(r == FILECLONE_REFLINK,
		   "xfs: a reflink across two mounts of one filesystem (%d)", r);
		if (out >= 0)
			close(out);
		unlink(path);
		umount2(bind, MNT_DETACH);
	}
	rmdir(bind);

	/* To another filesystem (EXDEV): the copy. */
	snprintf(path, sizeof(path), "%s/isola-fileclone-far", other_fs);
	far = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	r = far < 0 ? -errno : fileclone_copy(in, far);
	ok(r == FILECLONE_COPY, "xfs -> %s: a copy across filesystems (got %d)", other_fs, r);
	ok(far >= 0 && fstat(far, &st) == 0 && st.st_size == 64 * MIB && same_bytes(in, far),
	   "xfs -> %s: same bytes", other_fs);
	if (far >= 0)
		close(far);
	unlink(path);
	close(in);
	unlink(src);
}

static bool have(const char *prog)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return run(cmd) == 0;
}

int main(void)
{
	char tmp[] = "/var/tmp/isola-fileclone-XXXXXX", shm[] = "/dev/shm/isola-fileclone-XXXXXX";
	char img[256], mnt[256], cmd[2048];
	const char *why = NULL;
	bool mounted = false;

	if (!mkdtemp(tmp) || !mkdtemp(shm)) {
		ok(0, "temporary directories: %s", strerror(errno));
		return tap_done();
	}
	test_fallback(tmp, "ext4 or whatever /var/tmp is");
	test_fallback(shm, "tmpfs");

	/* A real XFS with reflink=1 on a loop device: needs root and mkfs.xfs (xfsprogs, in
	 * scripts/deps.sh). Skipped only outside CI. */
	snprintf(img, sizeof(img), "%s/xfs.img", tmp);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	if (geteuid() != 0)
		why = "not root (loop mount)";
	else if (!have("mkfs.xfs"))
		why = "mkfs.xfs is missing (apt-get install xfsprogs)";
	if (!why) {
		snprintf(cmd, sizeof(cmd),
			 "truncate -s 512M %s && mkfs.xfs -q -m reflink=1 %s && mkdir %s && "
			 "mount -o loop %s %s",
			 img, img, mnt, img, mnt);
		mounted = run(cmd) == 0;
		ok(mounted, "xfs: loop mount of a fresh reflink=1 XFS");
	}
	if (mounted)
		test_xfs(mnt, shm);
	else if (why && getenv("CI"))
		ok(0, "xfs: cannot test reflinks in CI: %s", why);
	else if (why)
		printf("ok %d # SKIP xfs reflink tests: %s\n", ++tap_n, why);
	if (mounted) {
		snprintf(cmd, sizeof(cmd), "umount %s", mnt);
		ok(run(cmd) == 0, "xfs: unmounted");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", tmp, shm);
	run(cmd);
	return tap_done();
}
