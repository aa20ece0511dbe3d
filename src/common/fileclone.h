/* SPDX-License-Identifier: Apache-2.0 */
/* fileclone: a file's copy as a reflink (copy-on-write clone) where the filesystem can, else sparse. */
#ifndef ISOLA_COMMON_FILECLONE_H
#define ISOLA_COMMON_FILECLONE_H

#include <stdbool.h>

/* How fileclone_copy made the copy. */
enum fileclone_how {
	FILECLONE_COPY = 0, /* data copied (holes kept): costs the file's data in I/O and space */
	FILECLONE_REFLINK = 1, /* FICLONE: extents shared, later writes copy-on-write per block */
};

/*
 * Makes out (an empty or truncatable regular file open for writing) a copy of in (open for
 * reading), whole file. First ioctl(FICLONE): on XFS with reflink=1 or btrfs, with in and out
 * on the same filesystem, that shares in's extents in O(extents) and later writes to either
 * copy-on-write. When the filesystem refuses (EOPNOTSUPP, EXDEV: another filesystem, EINVAL,
 * ENOTTY, ENOSYS, EPERM, ETXTBSY) out is truncated to 0 and fileclone_copy_sparse copies
 * the data. System calls only, no allocation: safe in a clone3 child of a threaded process.
 * FILECLONE_REFLINK or FILECLONE_COPY, or -errno (-ENOSPC when out's filesystem is full).
 */
int fileclone_copy(int in, int out);

/*
 * Copies the data of in (from offset 0, skipping holes with SEEK_DATA/SEEK_HOLE) to out at the
 * same offsets and sizes out to in's size, so out is as sparse as in. 0 or -errno (-EIO when
 * in shrank while being copied).
 */
int fileclone_copy_sparse(int in, int out);

/*
 * Whether files in the directory dirfd can be reflinked to each other: clones one block
 * between two O_TMPFILE files there (nothing is left behind). false on any error.
 */
bool fileclone_dir_can_reflink(int dirfd);

/*
 * Asks the filesystem to copy-on-write fd's shared blocks one block at a time (XFS's
 * cowextsize hint through FS_IOC_FSSETXATTR; on a directory, files created in it inherit it).
 * XFS's default 128 KiB CoW unit costs 32x in space for scattered 4 KiB writes, which is how
 * a guest writes its RAM file. Best effort: 0, or -errno where the filesystem has no such
 * hint (btrfs, ext4, tmpfs) — nothing changes then.
 */
int fileclone_small_cow_unit(int fd);

/* "reflink" or "copy" (for logs and snapshot metadata). */
const char *fileclone_how_name(int how);

#endif
