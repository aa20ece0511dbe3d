/* SPDX-License-Identifier: Apache-2.0 */
/* cpextract: `isola cp` downloads — a hostile tar extracted into a fresh temporary directory, moved into place only once complete. */
#include "cpextract.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/extract.h"
#include "../common/util.h"
#include "parse.h"

/*
 * The archive comes from isolad, which relays a sandbox; a hostile or impersonated daemon can
 * send anything. What defends against what:
 *  - Everything is written below a directory this extraction created (mkdtemp, 0700) beside
 *    the destination: no entry can reach a file that existed before, so a hard link entry
 *    (`out/x` -> `victim.txt`, with data) or a symlink followed by a file through it can only
 *    touch what the archive itself made (CVE-2018-15664 / docker-cp class).
 *  - Names are normalised (extract_norm_path: no absolute names, no "..") and every parent is
 *    resolved inside the temporary root by the kernel (openat2 RESOLVE_IN_ROOT, or an
 *    O_NOFOLLOW walk), every leaf created with O_EXCL|O_NOFOLLOW.
 *  - Hard links are made only to regular files already extracted (never to a symlink, whose
 *    target a later write would follow) and their data, if any, is never written.
 *  - Devices, FIFOs and sockets are skipped; setuid/setgid/sticky bits and owners are dropped.
 *  - The result is renamed into place only after the archive and the HTTP transfer both
 *    ended cleanly (cptar_commit); a broken stream leaves nothing but the removed temp dir.
 */

#define TMP_PREFIX ".isola-cp-"
#define MAX_DEPTH  512 /* directory nesting cptar_commit merges through */

struct dir_fixup {
	char *rel;   /* path under the root (heap) */
	mode_t mode; /* the archive's mode, applied at the end */
};

struct cptar_out {
	int pfd;			  /* directory that gets the result (owned) */
	char final[NAME_MAX + 1];	  /* name of the result in pfd; "" until the top entry */
	char tmp[sizeof(TMP_PREFIX) + 6]; /* temporary directory's name in pfd */
	int rootfd;			  /* the temporary directory (O_PATH, owned) */
	bool into_dir;			  /* the result is named after the archive's top entry */
	bool committed;			  /* the result has been moved into place */
	char top[NAME_MAX + 1];		  /* the archive's top entry ("" before the first) */
	char dst[PATH_MAX];		  /* destination as the user wrote it, for messages */
	struct dir_fixup *dirs;		  /* directories whose mode lacks u+rwx */
	size_t ndirs, capdirs;		  /* entries used / allocated */
	unsigned skipped;		  /* special files not extracted */
};

int cptar_out_new(const char *dst, bool into_dir, struct cptar_out **out, struct isola_err **err)
{
	char dir[PATH_MAX], name[NAME_MAX + 1], tmpl[PATH_MAX];
	struct cptar_out *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	x->pfd = x->rootfd = -1;
	x->into_dir = into_dir;
	snprintf(x->dst, sizeof(x->dst), "%s", dst);
	if (into_dir) {
		snprintf(dir, sizeof(dir), "%s", dst);
	} else if (cli_path_split(dst, dir, sizeof(dir), name, sizeof(name)) < 0 || !*name ||
		   !strcmp(name, ".") || !strcmp(name, "..")) {
		r = isola_err_set(err, EINVAL, "invalid", "`%s`: bad destination", dst);
		goto fail;
	} else {
		snprintf(x->final, sizeof(x->final), "%s", name);
	}
	/* The temporary directory sits beside the result: same filesystem, so the final
	 * rename is atomic, and a crash leaves a visibly temporary name, never DST. */
	if (snprintf(tmpl, sizeof(tmpl), "%s/" TMP_PREFIX "XXXXXX", dir) >= (int)sizeof(tmpl)) {
		r = isola_err_set(err, ENAMETOOLONG, "invalid", "`%s`: path too long", dst);
		goto fail;
	}
	if (!mkdtemp(tmpl)) {
		r = isola_err_sys(err, errno, NULL, "create a temporary directory in `%s`", dir);
		goto fail;
	}
	snprintf(x->tmp, sizeof(x->tmp), "%s", strrchr(tmpl, '/') + 1);
	x->pfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	x->rootfd = x->pfd < 0
			    ? -1
			    : openat(x->pfd, x->tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (x->rootfd < 0) {
		r = isola_err_sys(err, errno, NULL, "open `%s`", tmpl);
		rmdir(tmpl);
		goto fail;
	}
	*out = x;
	return 0;
fail:
	cptar_out_free(x);
	return r;
}

void cptar_out_free(struct cptar_out *x)
{
	if (!x)
		return;
	if (x->pfd >= 0 && x->tmp[0])
		util_rm_rf_at(x->pfd, x->tmp);
	if (x->rootfd >= 0)
		close(x->rootfd);
	if (x->pfd >= 0)
		close(x->pfd);
	for (size_t i = 0; i < x->ndirs; i++)
		free(x->dirs[i].rel);
	free(x->dirs);
	free(x);
}

/* Opens directory rel inside the root, creating missing components 0755 (archives may omit
 * parent entries). Returns an O_PATH fd or -errno. */
static int ensure_dir(int rootfd, const char *rel)
{
	char buf[PATH_MAX];
	int fd = extract_open_dir(rootfd, rel);

	if (fd != -ENOENT)
		return fd;
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *end = buf;; end++) {
		char save;

		end += strcspn(end, "/");
		save = *end;
		*end = '\0';
		fd = extract_open_dir(rootfd, buf);
		if (fd == -ENOENT) {
			char dir[PATH_MAX];
			const char *leaf = extract_split(buf, dir);
			int pfd = extract_open_dir(rootfd, dir);

			if (pfd < 0)
				return pfd;
			fd = mkdirat(pfd, leaf, 0755) < 0 ? -errno : extract_open_dir(rootfd, buf);
			close(pfd);
		}
		if (fd < 0 || !save)
			return fd;
		close(fd);
		*end = save;
	}
}

static int fail(struct isola_err **err, const char *name, int r, const char *what)
{
	return isola_err_set(err, -r, r == -EPERM ? "forbidden" : NULL, "archive entry `%s`: %s",
			     name, what);
}

/* Copies the entry's data into fd, never past its declared size. */
static int copy_data(struct archive *a, int fd, int64_t size, const char *name,
		     struct isola_err **err)
{
	int64_t end = 0;

	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return isola_err_set(err, EPROTO, "internal",
					     "archive ended inside `%s`: %s", name,
					     archive_error_string(a));
		/* UNTRUSTED: off/len from the archive (sparse maps). */
		if (off < 0 || (uint64_t)off + len > (uint64_t)size)
			return fail(err, name, -EPROTO, "data beyond the declared size");
		r = extract_pwrite_all(fd, buf, len, off);
		if (r < 0)
			return isola_err_sys(err, -r, NULL, "write `%s`", name);
		if (off + (int64_t)len > end)
			end = off + (int64_t)len;
	}
	if (end < size && ftruncate(fd, size) < 0)
		return isola_err_sys(err, errno, NULL, "write `%s`", name);
	return 0;
}

static int hardlink(struct cptar_out *x, int pfd, const char *leaf, const char *target,
		    const char *name, struct isola_err **err)
{
	char tpath[PATH_MAX], tdir[PATH_MAX];
	cleanup_fd int tfd = -1;
	const char *tleaf;
	struct stat st;

	/* UNTRUSTED: the link target. Only a regular file this extraction already wrote. */
	if (extract_norm_path(target, tpath, sizeof(tpath)) < 0)
		return fail(err, name, -EPERM, "hard link target is absolute or has `..`");
	tleaf = extract_split(tpath, tdir);
	tfd = extract_open_dir(x->rootfd, tdir);
	if (tfd < 0 || fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return fail(err, name, -EPERM,
			    "hard link target is not a file extracted before it");
	if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
		return isola_err_sys(err, errno, NULL, "link `%s`", name);
	return 0;
}

static int remember_dir(struct cptar_out *x, const char *rel, mode_t mode)
{
	if (x->ndirs == x->capdirs) {
		size_t cap = x->capdirs ? x->capdirs * 2 : 16;
		struct dir_fixup *d = realloc(x->dirs, cap * sizeof(*d));

		if (!d)
			return -ENOMEM;
		x->dirs = d;
		x->capdirs = cap;
	}
	x->dirs[x->ndirs].rel = strdup(rel);
	if (!x->dirs[x->ndirs].rel)
		return -ENOMEM;
	x->dirs[x->ndirs++].mode = mode;
	return 0;
}

/* Checks the entry's top component: one top entry per archive, named like a file. */
static int check_top(struct cptar_out *x, const char *rel, const char *name, struct isola_err **err)
{
	size_t n = strcspn(rel, "/");

	if (!x->top[0]) {
		memcpy(x->top, rel, n); /* n <= NAME_MAX: extract_norm_path checked */
		x->top[n] = '\0';
		if (x->into_dir)
			snprintf(x->final, sizeof(x->final), "%s", x->top);
		return 0;
	}
	if (strlen(x->top) != n || strncmp(x->top, rel, n))
		return fail(err, name, -EPERM, "not under the archive's top entry");
	return 0;
}

static int extract_entry(struct cptar_out *x, struct archive *a, struct archive_entry *e,
			 struct isola_err **err)
{
	/* UNTRUSTED: every field of the entry. */
	const char *name = archive_entry_pathname(e), *hl = archive_entry_hardlink(e), *leaf;
	mode_t type = archive_entry_filetype(e), mode = archive_entry_perm(e) & 0777;
	struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
	char rel[PATH_MAX], dir[PATH_MAX];
	cleanup_fd int pfd = -1;
	cleanup_fd int fd = -1;
	struct stat st;
	int r;

	if (!name)
		return isola_err_set(err, EPROTO, "internal", "archive entry without a name");
	r = extract_norm_path(name, rel, sizeof(rel));
	if (r == -ENOENT)
		return fail(err, name, -EPERM, "names the destination's parent");
	if (r < 0)
		return fail(err, name, r,
			    r == -EPERM ? "absolute name or `..`: it would land outside the "
					  "destination"
					: "name too long");
	if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
		fprintf(stderr, "isola: skipping `%s`: not a file, directory or link\n", name);
		x->skipped++;
		return 0;
	}
	r = check_top(x, rel, name, err);
	if (r < 0)
		return r;
	leaf = extract_split(rel, dir);
	pfd = ensure_dir(x->rootfd, dir);
	if (pfd < 0)
		return fail(err, name, pfd, "its parent is not a directory of this archive");
	/* A second entry of the same name replaces the first (both are this archive's). */
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !(S_ISDIR(st.st_mode) && type == AE_IFDIR && !hl)) {
		if (hl && extract_norm_path(hl, dir, sizeof(dir)) == 0 && !strcmp(dir, rel))
			return 0; /* a link to itself */
		r = util_rm_rf_at(pfd, leaf);
		if (r < 0)
			return isola_err_sys(err, -r, NULL, "replace `%s`", name);
	}
	if (hl)
		return hardlink(x, pfd, leaf, hl, name, err);
	if (archive_entry_mtime_is_set(e)) {
		ts[1].tv_sec = archive_entry_mtime(e);
		ts[0] = ts[1];
	}
	switch (type) {
	case AE_IFDIR:
		if (mkdirat(pfd, leaf, 0700) < 0 && errno != EEXIST)
			return isola_err_sys(err, errno, NULL, "mkdir `%s`", name);
		fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return isola_err_sys(err, errno, NULL, "open `%s`", name);
		/* Later entries go inside: the owner keeps rwx until the end. */
		if (fchmod(fd, mode | 0700) < 0)
			return isola_err_sys(err, errno, NULL, "chmod `%s`", name);
		if ((mode & 0700) != 0700 && remember_dir(x, rel, mode) < 0)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
		return 0;
	case AE_IFREG: {
		int64_t size = archive_entry_size(e);

		if (size < 0)
			return fail(err, name, -EPROTO, "negative size");
		fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return isola_err_sys(err, errno, NULL, "create `%s`", name);
		r = copy_data(a, fd, size, name, err);
		if (r < 0)
			return r;
		if (fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
			return isola_err_sys(err, errno, NULL, "set mode/time of `%s`", name);
		return 0;
	}
	default: { /* AE_IFLNK: stored as it is, never followed by this extraction */
		const char *target = archive_entry_symlink(e);

		if (!target || !*target)
			return fail(err, name, -EPROTO, "symlink without a target");
		if (symlinkat(target, pfd, leaf) < 0)
			return isola_err_sys(err, errno, NULL, "symlink `%s`", name);
		utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	}
}

int cptar_extract(struct cptar_out *x, int fd, struct isola_err **err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int r = 0;

	if (!a)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		r = isola_err_set(err, EPROTO, "internal", "read archive: %s",
				  archive_error_string(a));
		goto out;
	}
	for (;;) {
		int q = archive_read_next_header(a, &e);

		if (q == ARCHIVE_EOF)
			break;
		if (q < ARCHIVE_WARN) {
			r = isola_err_set(err, EPROTO, "internal", "read archive: %s",
					  archive_error_string(a));
			goto out;
		}
		r = extract_entry(x, a, e, err);
		if (r < 0)
			goto out;
	}
	if (!x->top[0])
		r = isola_err_set(err, EPROTO, "internal", "the archive has no entries");
out:
	archive_read_free(a);
	return r;
}

/* Moves every entry of directory sfd into directory dfd (a merge: what exists is replaced
 * entry by entry, directories are merged). Nothing is followed: a symlink in the way is
 * replaced, not written through. */
static int merge(int sfd, int dfd, const char *where, int depth, struct isola_err **err)
{
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0, dup_fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (depth > MAX_DEPTH)
		return isola_err_set(err, ELOOP, NULL, "`%s`: nested too deep", where);
	d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return isola_err_sys(err, errno, NULL, "read the temporary directory");
	}
	/* Names first: the directory changes while entries move out of it. */
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **p = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*p));

			if (!p) {
				r = isola_err_set(err, ENOMEM, NULL, "out of memory");
				goto out;
			}
			names = p;
		}
		if (!(names[n] = strdup(de->d_name))) {
			r = isola_err_set(err, ENOMEM, NULL, "out of memory");
			goto out;
		}
		n++;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		struct stat ss, ds;
		int s2, d2;

		if (fstatat(sfd, names[i], &ss, AT_SYMLINK_NOFOLLOW) < 0) {
			r = isola_err_sys(err, errno, NULL, "`%s/%s`", where, names[i]);
			break;
		}
		if (fstatat(dfd, names[i], &ds, AT_SYMLINK_NOFOLLOW) < 0) {
			if (renameat(sfd, names[i], dfd, names[i]) < 0)
				r = isola_err_sys(err, errno, NULL, "move into `%s/%s`", where,
						  names[i]);
			continue;
		}
		if (S_ISDIR(ss.st_mode) && S_ISDIR(ds.st_mode)) {
			char sub[PATH_MAX];

			s2 = openat(sfd, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			d2 = openat(dfd, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			snprintf(sub, sizeof(sub), "%s/%s", where, names[i]);
			if (s2 < 0 || d2 < 0)
				r = isola_err_sys(err, errno, NULL, "open `%s`", sub);
			else
				r = merge(s2, d2, sub, depth + 1, err);
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
			continue;
		}
		if (S_ISDIR(ds.st_mode)) {
			r = isola_err_set(err, EISDIR, "invalid",
					  "cannot replace directory `%s/%s` with a file", where,
					  names[i]);
			continue;
		}
		/* A file, symlink or other non-directory in the way: replaced (rename never
		 * writes through it). A directory taking its place needs it gone first. */
		if (S_ISDIR(ss.st_mode) && unlinkat(dfd, names[i], 0) < 0) {
			r = isola_err_sys(err, errno, NULL, "replace `%s/%s`", where, names[i]);
			continue;
		}
		if (renameat(sfd, names[i], dfd, names[i]) < 0)
			r = isola_err_sys(err, errno, NULL, "move into `%s/%s`", where, names[i]);
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

/* Applies the modes of directories that lacked u+rwx, deepest first, below the result. */
static void fix_dir_modes(struct cptar_out *x)
{
	cleanup_fd int res =
		openat(x->pfd, x->final, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	for (size_t i = x->ndirs; res >= 0 && i-- > 0;) {
		const char *rel = x->dirs[i].rel + strlen(x->top);
		char dir[PATH_MAX];
		const char *leaf;
		int pfd, fd;

		while (*rel == '/')
			rel++;
		if (!*rel) {
			fd = openat(x->pfd, x->final,
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		} else {
			leaf = extract_split(rel, dir);
			pfd = extract_open_dir(res, dir);
			fd = pfd < 0 ? -1
				     : openat(pfd, leaf,
					      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (pfd >= 0)
				close(pfd);
		}
		if (fd >= 0) {
			fchmod(fd, x->dirs[i].mode);
			close(fd);
		}
	}
}

int cptar_commit(struct cptar_out *x, struct isola_err **err)
{
	struct stat ss, ds;
	int r;

	if (!x->top[0] || fstatat(x->rootfd, x->top, &ss, AT_SYMLINK_NOFOLLOW) < 0)
		return isola_err_set(err, EPROTO, "internal", "the archive has no entries");
	if (renameat2(x->rootfd, x->top, x->pfd, x->final, RENAME_NOREPLACE) == 0)
		goto done;
	if (errno != EEXIST || fstatat(x->pfd, x->final, &ds, AT_SYMLINK_NOFOLLOW) < 0)
		return isola_err_sys(err, errno, NULL, "move into `%s`", x->dst);
	if (S_ISDIR(ss.st_mode) && S_ISDIR(ds.st_mode)) {
		cleanup_fd int s =
			openat(x->rootfd, x->top, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		cleanup_fd int d =
			openat(x->pfd, x->final, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (s < 0 || d < 0)
			return isola_err_sys(err, errno, NULL, "open `%s`", x->dst);
		r = merge(s, d, x->final, 0, err);
		if (r < 0)
			return r;
	} else if (S_ISDIR(ss.st_mode) || S_ISDIR(ds.st_mode)) {
		return isola_err_set(err, S_ISDIR(ds.st_mode) ? EISDIR : ENOTDIR, "invalid",
				     "cannot replace `%s/%s` (%s) with a %s", x->dst,
				     x->into_dir ? x->final : "",
				     S_ISDIR(ds.st_mode) ? "a directory" : "not a directory",
				     S_ISDIR(ss.st_mode) ? "directory" : "file");
	} else if (renameat(x->rootfd, x->top, x->pfd, x->final) < 0) {
		return isola_err_sys(err, errno, NULL, "move into `%s`", x->dst);
	}
done:
	x->committed = true;
	fix_dir_modes(x);
	return 0;
}

unsigned cptar_out_skipped(const struct cptar_out *x)
{
	return x->skipped;
}
