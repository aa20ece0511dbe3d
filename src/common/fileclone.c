/* SPDX-License-Identifier: Apache-2.0 */
/* fileclone: a file's copy as a reflink (copy-on-write clone) where the filesystem can, else sparse. */
#include "fileclone.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

/* FICLONE's answers that mean "this filesystem (pair) cannot", not "this copy failed". */
static bool clone_refused(int e)
{
	return e == EOPNOTSUPP || e == EXDEV || e == EINVAL || e == ENOTTY || e == ENOSYS ||
	       e == EPERM || e == ETXTBSY;
}

int fileclone_copy(int in, int out)
{
	if (ioctl(out, FICLONE, in) == 0)
		return FILECLONE_REFLINK;
	if (!clone_refused(errno))
		return -errno;
	/* Nothing was shared; start the copy from an empty file whatever out held. */
	if (ftruncate(out, 0) < 0)
		return -errno;
	return fileclone_copy_sparse(in, out);
}

int fileclone_copy_sparse(int in, int out)
{
	off_t size = lseek(in, 0, SEEK_END), off = 0, end;

	if (size < 0 || ftruncate(out, size) < 0)
		return -errno;
	while (off < size) {
		off = lseek(in, off, SEEK_DATA);
		if (off < 0)
			return errno == ENXIO ? 0 : -errno; /* ENXIO: only a hole is left */
		end = lseek(in, off, SEEK_HOLE);
		if (end < 0)
			return -errno;
		if (lseek(out, off, SEEK_SET) < 0)
			return -errno;
		while (off < end) {
			ssize_t n = sendfile(out, in, &off, (size_t)(end - off));

			if (n < 0 && errno != EINTR)
				return -errno;
			if (n == 0)
				return -EIO; /* in shrank under us */
		}
	}
	return 0;
}

bool fileclone_dir_can_reflink(int dirfd)
{
	char block[4096];
	int a = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), b = -1;
	bool yes = false;

	memset(block, 0x5a, sizeof(block));
	if (a >= 0 && write(a, block, sizeof(block)) == (ssize_t)sizeof(block))
		b = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (b >= 0)
		yes = ioctl(b, FICLONE, a) == 0;
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return yes;
}

int fileclone_small_cow_unit(int fd)
{
	struct fsxattr fa;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
		return -errno;
	fa.fsx_xflags |= FS_XFLAG_COWEXTSIZE;
	fa.fsx_cowextsize = 4096; /* one block; XFS rounds to its block size and checks it */
	return ioctl(fd, FS_IOC_FSSETXATTR, &fa) < 0 ? -errno : 0;
}

const char *fileclone_how_name(int how)
{
	return how == FILECLONE_REFLINK ? "reflink" : "copy";
}
