/* SPDX-License-Identifier: Apache-2.0 */
/* fsdiff: a manifest of a filesystem tree and the OCI-layer view of what changed since. */
#ifndef ISOLA_AGENT_FSDIFF_H
#define ISOLA_AGENT_FSDIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define FSDIFF_MAX_ENTRIES (4u << 20)	/* entries a manifest may hold */
#define FSDIFF_MAX_BYTES   (256u << 20) /* memory a manifest may take (records and names) */
#define FSDIFF_MAX_DEPTH   128		/* directories deeper than this are not walked */
#define FSDIFF_MAX_NAME	   4096		/* longest relative name kept */

struct fsdiff;
struct fsdiff_walk;

/*
 * Walks the tree at root (never following symlinks, staying on root's st_dev: other mounts
 * are neither entered nor recorded) and records every entry's (type, ino, ctime, mtime, size,
 * mode, uid, gid) under its name relative to root. Unreadable directories are recorded but
 * not entered (the same in both walks). *out is owned by the caller (fsdiff_free). Returns
 * 0, -E2BIG past max_entries or max_bytes (pass 0 for the defaults above), or -errno.
 */
int fsdiff_mark(const char *root, uint64_t max_entries, uint64_t max_bytes, struct fsdiff **out);
/* Entries recorded. */
size_t fsdiff_count(const struct fsdiff *m);
void fsdiff_free(struct fsdiff *m);

/* One change, as an OCI layer member. */
struct fsdiff_item {
	const char *name; /* relative name, valid until the next call */
	struct stat st;	  /* its metadata (whiteouts: an empty regular file, mode 0) */
	int dfd;	  /* directory holding it, -1 for whiteouts (valid until the next call) */
	const char *base; /* its name in dfd */
	bool whiteout;	  /* `.wh.NAME` or `.wh..wh..opq` marker, no file behind it */
};

/*
 * Starts the second walk of m's root; m is borrowed and must outlive w. fsdiff_walk_next
 * yields, in this order: every entry that is new or differs from the manifest in any
 * recorded field (ctime included), each preceded by its not yet yielded parent directories;
 * `dir/.wh..wh..opq` right after a directory whose inode changed (its whole content follows);
 * then `dir/.wh.NAME` for each removed entry whose parent is still the same directory (only
 * the top of a removed subtree). Devices, fifos and sockets are never yielded (hard links
 * are yielded as separate files). Returns 1 with *it set, 0 at the end, or -errno.
 */
int fsdiff_walk_new(struct fsdiff *m, struct fsdiff_walk **out);
int fsdiff_walk_next(struct fsdiff_walk *w, struct fsdiff_item *it);
void fsdiff_walk_free(struct fsdiff_walk *w);

#endif
