/* SPDX-License-Identifier: Apache-2.0 */
/* layer: applies one hostile image layer onto a rootfs, resolving every path inside the root. */
#include "images-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/util.h"

/*
 * Why not archive_write_disk(): it resolves paths from the process cwd (a chdir is
 * process-wide in a threaded daemon) and checks symlinks by lstat-walking strings. Instead every
 * entry is created with *at() calls relative to a parent directory fd that was resolved with
 * openat2(RESOLVE_IN_ROOT) — symlinks in the layer, absolute or relative, resolve as they would
 * inside the sandbox and can never name a host path (CVE-2018-15664 class). The same guarantees
 * as ARCHIVE_EXTRACT_SECURE_NODOTDOT|SECURE_SYMLINKS|SECURE_NOABSOLUTEPATHS, enforced by the
 * kernel rather than by string checks.
 */

/* Opens directory rel inside the root, creating missing components as root:root 0755 (tar
 * streams often omit parent entries). */
static int ensure_dir(int rootfd, const char *rel)
{
	char buf[PATH_MAX];
	int cur, fd;

	fd = extract_open_dir(rootfd, rel);
	if (fd != -ENOENT)
		return fd;
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	cur = extract_open_dir(rootfd, "");
	if (cur < 0)
		return cur;
	for (char *comp = buf, *end;; comp = end + 1) {
		int nfd;

		end = strchr(comp, '/');
		if (end)
			*end = '\0';
		nfd = extract_open_dir(rootfd, buf);
		if (nfd == -ENOENT) {
			/* A dangling symlink here makes mkdirat fail with EEXIST: refused. */
			if (mkdirat(cur, comp, 0755) < 0 || fchmodat(cur, comp, 0755, 0) < 0) {
				nfd = -errno;
			} else {
				nfd = openat(cur, comp,
					     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (nfd < 0)
					nfd = -errno;
			}
		}
		close(cur);
		if (nfd < 0)
			return nfd;
		cur = nfd;
		if (!end)
			return cur;
		*end = '/';
	}
}

struct layer {
	int rootfd;		 /* the rootfs (borrowed) */
	const char *what;	 /* layer name for errors */
	struct images_budget *b; /* limits and totals (borrowed) */
	json_t *seen;		 /* paths this layer created: opaque dirs keep them */
	struct archive *a;	 /* the layer reader */
	char path[PATH_MAX];	 /* current entry, normalised */
	struct isola_err **err;	 /* where failures go */
	bool upper;		 /* overlay upper dir archive: char 0:0 whiteouts, opaque xattr */
};

/* An overlay upper dir's opaque directory: user.overlay.opaque = "y" (userxattr mounts). */
static bool upper_opaque(struct archive_entry *e)
{
	const char *name;
	const void *val;
	size_t size;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK)
		if (!strcmp(name, "user.overlay.opaque") && size == 1 && *(const char *)val == 'y')
			return true;
	return false;
}

static int lerr(struct layer *l, int r, const char *msg, const char *detail)
{
	return isola_err_set(l->err, r < 0 ? -r : r, r == -EFBIG ? "too_large" : "invalid",
			     "layer %s: entry `%s`: %s%s%s", l->what, l->path, msg,
			     detail ? ": " : "", detail ? detail : "");
}

/* Removes from dir (an fd, path prefix) everything this layer did not create: an opaque
 * directory hides all lower-layer content below it. */
static int opaque_clean(struct layer *l, int dfd, const char *prefix)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while (r == 0 && (de = readdir(d))) {
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) >=
		    (int)sizeof(sub)) {
			r = -ENAMETOOLONG;
			break;
		}
		if (!json_object_get(l->seen, sub)) {
			r = util_rm_rf_at(dirfd(d), de->d_name);
		} else if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			   S_ISDIR(st.st_mode)) {
			cleanup_fd int cfd = openat(dirfd(d), de->d_name,
						    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			r = cfd < 0 ? -errno : opaque_clean(l, cfd, sub);
		}
	}
	closedir(d);
	return r;
}

static int whiteout(struct layer *l, const char *dir, const char *leaf)
{
	cleanup_fd int pfd = -1;
	int r;

	if (!strcmp(leaf, ".wh..wh..opq")) {
		pfd = ensure_dir(l->rootfd, dir);
		if (pfd < 0)
			return lerr(l, pfd, "opaque directory", strerror(-pfd));
		if (*dir)
			json_object_set_new(l->seen, dir, json_true());
		r = opaque_clean(l, pfd, dir);
		return r < 0 ? lerr(l, r, "opaque directory", strerror(-r)) : 0;
	}
	if (!strncmp(leaf, ".wh..wh.", 8))
		return 0; /* other AUFS metadata (.wh..wh.plnk): meaningless here */
	leaf += 4;
	if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, ".."))
		return lerr(l, -EBADMSG, "malformed whiteout", NULL);
	/* The parent resolves inside the root, so a whiteout under a symlink to a host path
	 * deletes at most a path inside the rootfs (or nothing). */
	pfd = extract_open_dir(l->rootfd, dir);
	if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
		return 0; /* nothing below to hide */
	if (pfd < 0)
		return lerr(l, pfd, "whiteout", strerror(-pfd));
	r = util_rm_rf_at(pfd, leaf);
	return r < 0 ? lerr(l, r, "whiteout", strerror(-r)) : 0;
}

/* Copies the entry's data into fd; the declared size was charged to the budget already. */
static int copy_data(struct layer *l, int fd, int64_t size)
{
	int64_t end = 0;

	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(l->a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return lerr(l, -EBADMSG, "read", archive_error_string(l->a));
		/* UNTRUSTED: off/len come from the archive (sparse maps); keep them in the
		 * declared size so the budget check above holds. */
		if (off < 0 || (uint64_t)off + len > (uint64_t)size)
			return lerr(l, -EBADMSG, "data beyond the declared size", NULL);
		r = extract_pwrite_all(fd, buf, len, off);
		if (r < 0)
			return lerr(l, r, "write", strerror(-r));
		if (off + (int64_t)len > end)
			end = off + (int64_t)len;
	}
	if (end < size && ftruncate(fd, size) < 0)
		return lerr(l, -errno, "truncate", strerror(errno));
	return 0;
}

static int hardlink(struct layer *l, int pfd, const char *leaf, const char *target)
{
	char tpath[PATH_MAX], tdir[PATH_MAX];
	cleanup_fd int tfd = -1;
	const char *tleaf;
	struct stat st;
	int r;

	r = extract_norm_path(target, tpath, sizeof(tpath));
	if (r < 0)
		return lerr(l, r == -ENOENT ? -EBADMSG : r, "hard link target escapes the rootfs",
			    target);
	tleaf = extract_split(tpath, tdir);
	tfd = extract_open_dir(l->rootfd, tdir);
	if (tfd < 0 || fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lerr(l, -EBADMSG, "hard link target not in the rootfs", target);
	if (S_ISDIR(st.st_mode))
		return lerr(l, -EBADMSG, "hard link target is a directory", target);
	if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
		return lerr(l, -errno, "link", strerror(errno));
	return 0;
}

/* Ids outside the 65536 a sandbox's user namespace maps would alias another sandbox's host
 * range when the tier shifts ownership: they become nobody. */
static uid_t clamp_id(la_int64_t id)
{
	return id < 0 || id > 65535 ? 65534 : (uid_t)id;
}

static int apply_entry(struct layer *l, struct archive_entry *e)
{
	/* UNTRUSTED: pathname, link targets, type, mode, ids, size all come from the layer; the
	 * path is normalised below and every name is used only relative to an in-root fd. */
	const char *raw = archive_entry_pathname(e);
	const char *hl = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	mode_t mode = archive_entry_perm(e) & 07777; /* setuid kept: see docs/templates.md */
	uid_t uid = clamp_id(archive_entry_uid(e));
	gid_t gid = clamp_id(archive_entry_gid(e));
	struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
	cleanup_fd int pfd = -1;
	cleanup_fd int fd = -1;
	char dir[PATH_MAX], tgt[PATH_MAX];
	const char *leaf;
	struct stat st;
	bool exists;
	int r;

	if (!raw) {
		snprintf(l->path, sizeof(l->path), "?");
		return lerr(l, -EBADMSG, "entry without a name", NULL);
	}
	snprintf(l->path, sizeof(l->path), "%s", raw);
	r = extract_norm_path(raw, l->path, sizeof(l->path));
	if (r == -ENOENT)
		return 0; /* "./": the root itself keeps its mode */
	if (r < 0) {
		snprintf(l->path, sizeof(l->path), "%s", raw);
		return lerr(l, r, "path escapes the rootfs", NULL);
	}
	if (++l->b->entries > l->b->max_entries)
		return lerr(l, -EFBIG, "too many entries in the image", NULL);
	leaf = extract_split(l->path, dir);
	if (!strncmp(leaf, ".wh.", 4))
		return whiteout(l, dir, leaf);
	if (l->upper && type == AE_IFCHR && archive_entry_rdev(e) == 0) {
		char wh[NAME_MAX + 8];

		snprintf(wh, sizeof(wh), ".wh.%s", leaf);
		return whiteout(l, dir, wh);
	}
	if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO) {
		/* Device nodes would be a door to host devices if a tier ever failed to mount
		 * nodev; no template needs one (the tier provides /dev). */
		l->b->skipped++;
		return 0;
	}
	if (type == AE_IFREG && !hl) {
		int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;

		if (size < 0 || (uint64_t)size > l->b->max_bytes - l->b->bytes)
			return lerr(l, -EFBIG, "image exceeds the unpacked size cap", NULL);
		l->b->bytes += (uint64_t)size;
	}
	if (hl && extract_norm_path(hl, tgt, sizeof(tgt)) == 0 && !strcmp(tgt, l->path))
		return 0; /* a link to itself: removing it first would lose the file */
	pfd = ensure_dir(l->rootfd, dir);
	if (pfd < 0)
		return lerr(l, pfd, "parent directory", strerror(-pfd));
	json_object_set_new(l->seen, l->path, json_true());
	exists = fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && !(S_ISDIR(st.st_mode) && type == AE_IFDIR && !hl)) {
		r = util_rm_rf_at(pfd, leaf); /* a later layer replaces what lies below */
		if (r < 0)
			return lerr(l, r, "replace", strerror(-r));
		exists = false;
	}
	if (hl)
		return hardlink(l, pfd, leaf, hl);
	if (archive_entry_mtime_is_set(e)) {
		ts[1].tv_sec = archive_entry_mtime(e);
		ts[1].tv_nsec = archive_entry_mtime_nsec(e);
		ts[0] = ts[1];
	}
	switch (type) {
	case AE_IFDIR:
		if (!exists && mkdirat(pfd, leaf, 0700) < 0)
			return lerr(l, -errno, "mkdir", strerror(errno));
		fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		break;
	case AE_IFREG:
		fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			r = copy_data(l, fd, archive_entry_size(e));
			if (r < 0)
				return r;
		}
		break;
	case AE_IFLNK: {
		/* UNTRUSTED: the target is stored verbatim and never followed by isolad. */
		const char *target = archive_entry_symlink(e);

		if (!target || !*target || strlen(target) >= PATH_MAX)
			return lerr(l, -EBADMSG, "bad symlink target", NULL);
		if (symlinkat(target, pfd, leaf) < 0 ||
		    fchownat(pfd, leaf, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
		    utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return lerr(l, -errno, "symlink", strerror(errno));
		return 0;
	}
	case AE_IFIFO:
		if (mknodat(pfd, leaf, S_IFIFO | 0600, 0) < 0)
			return lerr(l, -errno, "mkfifo", strerror(errno));
		fd = openat(pfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0 ||
				fchmodat(pfd, leaf, mode, 0) < 0))
			return lerr(l, -errno, "fifo", strerror(errno));
		return fd < 0 ? lerr(l, -errno, "fifo", strerror(errno)) : 0;
	}
	if (fd < 0)
		return lerr(l, -errno, "create", strerror(errno));
	/* chown first: it clears setuid/setgid, which fchmod then sets as the image asks. */
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
		return lerr(l, -errno, "set owner/mode", strerror(errno));
	if (type == AE_IFREG && futimens(fd, ts) < 0)
		return lerr(l, -errno, "set times", strerror(errno));
	if (l->upper && type == AE_IFDIR && upper_opaque(e)) {
		r = opaque_clean(l, fd, l->path);
		if (r < 0)
			return lerr(l, r, "opaque directory", strerror(-r));
	}
	return 0;
}

static int apply(int rootfd, int blob_fd, uint64_t blob_size, const char *what, bool upper,
		 const char *phase, struct images_budget *b, images_progress_fn cb, void *ud,
		 struct isola_err **err)
{
	struct layer l = {.rootfd = rootfd, .what = what, .b = b, .err = err, .upper = upper};
	struct archive_entry *e;
	uint64_t last = 0;
	int r = 0;

	l.seen = json_object();
	l.a = archive_read_new();
	if (!l.seen || !l.a) {
		r = isola_err_set(err, ENOMEM, "internal", "layer %s: out of memory", what);
		goto out;
	}
	archive_read_support_filter_all(l.a);
	archive_read_support_format_tar(l.a);
	if (archive_read_open_fd(l.a, blob_fd, 64 * 1024) != ARCHIVE_OK) {
		r = isola_err_set(err, EBADMSG, "invalid", "layer %s: %s", what,
				  archive_error_string(l.a));
		goto out;
	}
	if (cb)
		cb(ud, phase, 0, blob_size);
	for (;;) {
		int h = archive_read_next_header(l.a, &e);

		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			r = isola_err_set(err, EBADMSG, "invalid", "layer %s: %s", what,
					  archive_error_string(l.a));
			goto out;
		}
		r = apply_entry(&l, e);
		if (r < 0)
			goto out;
		if (cb) {
			uint64_t done = (uint64_t)archive_filter_bytes(l.a, -1);

			if (done - last >= (4u << 20)) {
				cb(ud, phase, done, blob_size);
				last = done;
			}
		}
	}
	if (cb)
		cb(ud, phase, blob_size, blob_size);
out:
	if (l.a)
		archive_read_free(l.a);
	json_decref(l.seen);
	return r;
}

int images_layer_apply(int rootfd, int blob_fd, uint64_t blob_size, const char *what,
		       const char *phase, struct images_budget *b, images_progress_fn cb, void *ud,
		       struct isola_err **err)
{
	return apply(rootfd, blob_fd, blob_size, what, false, phase, b, cb, ud, err);
}

int images_layer_apply_upper(int rootfd, int blob_fd, const char *what, struct images_budget *b,
			     struct isola_err **err)
{
	return apply(rootfd, blob_fd, 0, what, true, "layer", b, NULL, NULL, err);
}
