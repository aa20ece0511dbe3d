/* SPDX-License-Identifier: Apache-2.0 */
/* extract: what an extractor of hostile archives needs to stay inside the root it writes to. */
#ifndef ISOLA_COMMON_EXTRACT_H
#define ISOLA_COMMON_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Normalises a member name from an archive into out: strips "./" and "/" repeats and "."
 * components. Refuses absolute paths and ".." components (-EPERM) and overlong ones
 * (-ENAMETOOLONG: a component over NAME_MAX, or the result over outsz); -ENOENT when nothing
 * is left (the archive's root entry). Any thread.
 */
int extract_norm_path(const char *in, char *out, size_t outsz);

/*
 * Splits a normalised path into its parent, copied to dir ("" for a top-level name), and its
 * last component, returned as a pointer into path. dir must hold strlen(path) + 1 bytes.
 */
const char *extract_split(const char *path, char *dir);

/*
 * Opens directory rel (normalised, "" for the root) inside rootfd as an O_PATH fd without ever
 * leaving the root: openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) where
 * the kernel has it, else an O_NOFOLLOW walk that refuses symlinked components (-ELOOP or
 * -ENOTDIR). Returns the fd (the caller closes it) or -errno. Any thread.
 */
int extract_open_dir(int rootfd, const char *rel);

/* Tests: extract_open_dir behaves as if openat2 were missing (the fallback walk). */
void extract_test_force_fallback(bool on);

/* Writes all len bytes of buf at offset off of fd (retrying EINTR and short writes). 0 or
 * -errno. */
int extract_pwrite_all(int fd, const void *buf, size_t len, off_t off);

#endif
