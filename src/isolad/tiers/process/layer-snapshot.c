/* SPDX-License-Identifier: Apache-2.0 */
/* layer-snapshot: the writable layer as one pax archive (writer from a hostile upper dir, confined reader). */
#include "process-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../../common/extract.h"
#include "../../../common/util.h"

#define LAYER_IDS	65536u	   /* ids of one sandbox's user namespace */
#define LAYER_NOBODY	65534u	   /* what an id outside the range becomes */
#define LAYER_BUF	(1u << 20) /* file data read/write chunk */
#define LAYER_XATTR_MAX 65536u	   /* XATTR_SIZE_MAX: one value, and one name list */

static int zstd_level = 1; /* proc_layer_compress's level; 0 = a plain copy */

void proc_layer_set_compression(int level)
{
	zstd_level = level;
}

/* Error messages carry entry names, which are hostile (a sandbox's or an archive's): control
 * bytes become '?' so a name cannot forge a log line or a terminal sequence. */
static void err_printable(struct isola_err **err)
{
	if (!err || !*err || !(*err)->message)
		return;
	for (unsigned char *p = (unsigned char *)(*err)->message; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/*
 * Appends [path, a, b] to arr. Paths are bytes, not UTF-8 (a sandbox names files as it
 * likes): jansson's unchecked constructor keeps them as they are. 0 or -ENOMEM.
 */
static int push_path(json_t *arr, const char *path, json_int_t a, json_int_t b)
{
	json_t *item = json_array();

	if (!item)
		return -ENOMEM;
	/* json_array_append_new takes its value even when it fails. */
	if (json_array_append_new(item, json_string_nocheck(path)) < 0 ||
	    json_array_append_new(item, json_integer(a)) < 0 ||
	    json_array_append_new(item, json_integer(b)) < 0) {
		json_decref(item);
		return -ENOMEM;
	}
	return json_array_append_new(arr, item) < 0 ? -ENOMEM : 0;
}

/* A zeroed chunk fed to libarchive for holes; the pax writer skips hole bytes unread. */
static const char zeros[LAYER_BUF];

/* ---- writer ---- */

/*
 * Where libarchive's output goes: an fd written by us. A failed write is recorded here and
 * the bytes reported as written, so libarchive never enters its fatal state (in which
 * archive_write_free skips the close that frees its output buffer); callers check err after
 * every archive_write_*() call.
 */
struct sink {
	int fd;	 /* output (borrowed) */
	int err; /* first write failure (positive errno), 0 if none */
};

static la_ssize_t sink_write(struct archive *a, void *ud, const void *buf, size_t len)
{
	struct sink *k = ud;

	if (!k->err) {
		int r = util_write_all(k->fd, buf, len);

		if (r < 0)
			k->err = -r;
	}
	return (la_ssize_t)len;
}

/* A failed write: ENOSPC and EDQUOT are the store's disk (`no_space`), anything else internal. */
static int write_err(struct archive *a, const struct sink *k, const char *what, const char *path,
		     struct isola_err **err)
{
	int e = k->err ? k->err : archive_errno(a);

	if (e == ENOSPC || e == EDQUOT)
		return isola_err_set(err, ENOSPC, "no_space", "write `%s` (entry `%s`): %s", what,
				     path, strerror(e));
	return isola_err_set(
		err, e > 0 ? e : EIO, "internal", "write `%s` (entry `%s`): %s", what, path,
		k->err ? strerror(e)
		       : (archive_error_string(a) ? archive_error_string(a) : "error"));
}

struct lw {
	struct archive *a;	     /* the pax writer */
	struct archive_entry *e;     /* reused per entry */
	int root;		     /* the upper dir (borrowed) */
	uint32_t base;		     /* host uid/gid of in-sandbox id 0 */
	const char *what;	     /* archive name for errors */
	json_t *links;		     /* "<ino>" -> first path of a multiply linked file */
	char *buf;		     /* LAYER_BUF bytes */
	char *xbuf;		     /* LAYER_XATTR_MAX bytes */
	struct proc_layer_stats *st; /* totals (borrowed) */
	struct sink sink;	     /* the output fd */
	struct isola_err **err;	     /* where failures go */
};

static int lw_archive_err(struct lw *w, const char *path)
{
	return write_err(w->a, &w->sink, w->what, path, w->err);
}

/*
 * Host owner -> in-sandbox owner. An id outside [base, base + 65536) (none is expected: the
 * sandbox cannot create one) becomes nobody, and the permission bits that id had are reduced to
 * the "other" bits: whoever gets nobody after a restore may do no more than the sandbox could.
 */
static void shift_out(uint32_t base, const struct stat *st, la_int64_t *uid, la_int64_t *gid,
		      mode_t *perm)
{
	mode_t p = st->st_mode & 07777, other = p & 07;

	if (st->st_uid >= base && st->st_uid - base < LAYER_IDS) {
		*uid = st->st_uid - base;
	} else {
		*uid = LAYER_NOBODY;
		p = (p & ~(mode_t)(S_ISUID | 0700)) | (other << 6);
	}
	if (st->st_gid >= base && st->st_gid - base < LAYER_IDS) {
		*gid = st->st_gid - base;
	} else {
		*gid = LAYER_NOBODY;
		p = (p & ~(mode_t)(S_ISGID | 0070)) | (other << 3);
	}
	*perm = p;
}

/* Adds the fd's `user.` xattrs (overlay's user.overlay.* under userxattr, the sandbox's own). */
static int lw_xattrs(struct lw *w, int fd, const char *path)
{
	ssize_t n = flistxattr(fd, w->xbuf, LAYER_XATTR_MAX);
	cleanup_free char *names = NULL;

	if (n < 0 && (errno == ENOTSUP || errno == ENODATA))
		return 0;
	if (n < 0)
		return isola_err_sys(w->err, errno,
				     errno == E2BIG || errno == ERANGE ? "too_large" : "internal",
				     "snapshot entry `%s`: list xattrs", path);
	names = malloc((size_t)n + 1);
	if (!names)
		return isola_err_set(w->err, ENOMEM, "internal", "snapshot: out of memory");
	memcpy(names, w->xbuf, (size_t)n);
	names[n] = '\0';
	for (char *k = names; k < names + n; k += strlen(k) + 1) {
		ssize_t v;

		if (strncmp(k, "user.", 5))
			continue; /* trusted./security.: the sandbox cannot set them; not ours to copy */
		v = fgetxattr(fd, k, w->xbuf, LAYER_XATTR_MAX);
		if (v < 0 && errno == ENODATA)
			continue; /* removed meanwhile */
		if (v < 0)
			return isola_err_sys(w->err, errno,
					     errno == E2BIG || errno == ERANGE ? "too_large"
									       : "internal",
					     "snapshot entry `%s`: xattr `%s`", path, k);
		archive_entry_xattr_add_entry(w->e, k, w->xbuf, (size_t)v);
	}
	return 0;
}

/* Feeds len bytes of zeros (a hole or a file that shrank). */
static int lw_zeros(struct lw *w, uint64_t len, const char *path)
{
	while (len) {
		size_t n = len < LAYER_BUF ? (size_t)len : LAYER_BUF;

		if (archive_write_data(w->a, zeros, n) < 0 || w->sink.err)
			return lw_archive_err(w, path);
		len -= n;
	}
	return 0;
}

/* Feeds [off, end) of fd; a short read (the file shrank) is padded with zeros. */
static int lw_data(struct lw *w, int fd, uint64_t off, uint64_t end, const char *path)
{
	while (off < end) {
		size_t want = end - off < LAYER_BUF ? (size_t)(end - off) : LAYER_BUF;
		ssize_t n = pread(fd, w->buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return isola_err_sys(w->err, errno, "internal", "snapshot entry `%s`: read",
					     path);
		if (n == 0)
			return lw_zeros(w, end - off, path);
		if (archive_write_data(w->a, w->buf, (size_t)n) < 0 || w->sink.err)
			return lw_archive_err(w, path);
		off += (uint64_t)n;
	}
	return 0;
}

/*
 * Records the data regions of fd in the entry's sparse map (SEEK_DATA/SEEK_HOLE) and returns
 * their count, 0 for a file without holes. A file that is all hole gets one 1-byte region at
 * its end: an empty map would make the writer expect every byte.
 */
static int lw_sparse_map(struct lw *w, int fd, uint64_t size)
{
	off_t pos = 0;
	int n = 0;
	uint64_t data = 0;

	while ((uint64_t)pos < size) {
		off_t d = lseek(fd, pos, SEEK_DATA), h;

		if (d < 0 || (uint64_t)d >= size)
			break; /* ENXIO: only a hole is left */
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0 || (uint64_t)h > size)
			h = (off_t)size;
		archive_entry_sparse_add_entry(w->e, d, h - d);
		data += (uint64_t)(h - d);
		n++;
		pos = h;
	}
	if (n == 1 && data == size) {
		archive_entry_sparse_clear(w->e);
		return 0;
	}
	if (n == 0 && size > 0) {
		archive_entry_sparse_add_entry(w->e, (la_int64_t)size - 1, 1);
		n = 1;
	}
	return n;
}

/* Writes the body of a regular file, holes skipped (the writer only counts them). */
static int lw_file_body(struct lw *w, int fd, uint64_t size, const char *path)
{
	la_int64_t off, len;
	uint64_t pos = 0;
	int r;

	if (archive_entry_sparse_reset(w->e) == 0)
		return lw_data(w, fd, 0, size, path);
	while (archive_entry_sparse_next(w->e, &off, &len) == ARCHIVE_OK) {
		r = lw_zeros(w, (uint64_t)off - pos, path);
		if (r == 0)
			r = lw_data(w, fd, (uint64_t)off, (uint64_t)(off + len), path);
		if (r < 0)
			return r;
		pos = (uint64_t)(off + len);
	}
	return lw_zeros(w, size - pos, path);
}

static int lw_header(struct lw *w, const char *path)
{
	if (archive_write_header(w->a, w->e) < ARCHIVE_WARN || w->sink.err)
		return lw_archive_err(w, path);
	w->st->entries++;
	return 0;
}

/* Sets the entry's common fields from st (owner shifted). */
static void lw_fill(struct lw *w, const char *path, const struct stat *st)
{
	la_int64_t uid, gid;
	mode_t perm;

	archive_entry_clear(w->e);
	archive_entry_copy_pathname(w->e, path);
	archive_entry_set_filetype(w->e, st->st_mode & S_IFMT);
	shift_out(w->base, st, &uid, &gid, &perm);
	archive_entry_set_perm(w->e, perm);
	archive_entry_set_uid(w->e, uid);
	archive_entry_set_gid(w->e, gid);
	archive_entry_set_mtime(w->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

/* A regular file: opened without following, blocking or becoming a controlling tty, and
 * checked to be the inode that was listed. 1 = skipped (changed or vanished). */
static int lw_file(struct lw *w, int dfd, const char *name, const char *path,
		   const struct stat *listed)
{
	cleanup_fd int fd = -1;
	char key[32];
	json_t *first;
	struct stat st;
	int r;

	if (listed->st_nlink > 1) {
		snprintf(key, sizeof(key), "%llu", (unsigned long long)listed->st_ino);
		first = json_object_get(w->links, key);
		if (first) {
			lw_fill(w, path, listed);
			archive_entry_set_size(w->e, 0);
			archive_entry_copy_hardlink(w->e, json_string_value(first));
			return lw_header(w, path);
		}
	}
	fd = openat(dfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_NOATIME | O_CLOEXEC);
	if (fd < 0 && errno == EPERM) /* O_NOATIME needs ownership or CAP_FOWNER */
		fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && (errno == ENOENT || errno == ELOOP || errno == ENXIO))
		return 1; /* vanished or replaced by a symlink or a socket */
	if (fd < 0)
		return isola_err_sys(w->err, errno, "internal", "snapshot entry `%s`: open", path);
	if (fstat(fd, &st) < 0)
		return isola_err_sys(w->err, errno, "internal", "snapshot entry `%s`: stat", path);
	if (!S_ISREG(st.st_mode) || st.st_ino != listed->st_ino)
		return 1; /* replaced between the listing and the open */
	lw_fill(w, path, &st);
	archive_entry_set_size(w->e, st.st_size);
	r = lw_xattrs(w, fd, path);
	if (r < 0)
		return r;
	lw_sparse_map(w, fd, (uint64_t)st.st_size);
	r = lw_header(w, path);
	if (r < 0)
		return r;
	r = lw_file_body(w, fd, (uint64_t)st.st_size, path);
	if (r < 0)
		return r;
	w->st->bytes += (uint64_t)st.st_size;
	if (st.st_nlink > 1 && json_object_set_new(w->links, key, json_string_nocheck(path)) < 0)
		return isola_err_set(w->err, ENOMEM, "internal", "snapshot: out of memory");
	return 0;
}

/* One listed entry of directory dfd. Pushes directories onto todo (paths, heap). */
static int lw_entry(struct lw *w, int dfd, const char *name, const char *path, json_t *todo)
{
	struct stat st;
	ssize_t n;
	int r;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
				       : isola_err_sys(w->err, errno, "internal",
						       "snapshot entry `%s`: stat", path);
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		r = lw_file(w, dfd, name, path, &st);
		if (r == 1)
			w->st->skipped++;
		return r < 0 ? r : 0;
	case S_IFDIR: {
		cleanup_fd int fd =
			openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP))
			return 0;
		if (fd < 0)
			return isola_err_sys(w->err, errno, "internal", "snapshot entry `%s`: open",
					     path);
		lw_fill(w, path, &st);
		r = lw_xattrs(w, fd, path);
		if (r == 0)
			r = lw_header(w, path);
		if (r == 0 && push_path(todo, path, (json_int_t)st.st_ino, 0) < 0)
			r = isola_err_set(w->err, ENOMEM, "internal", "snapshot: out of memory");
		return r;
	}
	case S_IFLNK:
		/* UNTRUSTED: the target is stored verbatim and never followed. */
		n = readlinkat(dfd, name, w->buf, PATH_MAX);
		if (n < 0)
			return errno == ENOENT || errno == EINVAL
				       ? 0
				       : isola_err_sys(w->err, errno, "internal",
						       "snapshot entry `%s`: readlink", path);
		if (n >= PATH_MAX)
			return isola_err_set(w->err, ENAMETOOLONG, "too_large",
					     "snapshot entry `%s`: symlink target too long", path);
		w->buf[n] = '\0';
		lw_fill(w, path, &st);
		archive_entry_copy_symlink(w->e, w->buf);
		return lw_header(w, path);
	case S_IFIFO:
		/* Never opened: an open for reading would block on a writer-less FIFO. */
		lw_fill(w, path, &st);
		return lw_header(w, path);
	case S_IFCHR:
		if (st.st_rdev == makedev(0, 0)) {
			/* An overlay whiteout: recorded as itself, never opened. */
			lw_fill(w, path, &st);
			archive_entry_set_rdev(w->e, 0);
			return lw_header(w, path);
		}
		/* No other device can exist on a nodev tmpfs written from a userns. */
		__attribute__((fallthrough));
	default: /* sockets, devices: meaningless without their process, never opened */
		w->st->skipped++;
		return 0;
	}
}

/* Lists directory rel (already archived as inode ino; 0 = the root) and archives its
 * entries. */
static int lw_dir(struct lw *w, const char *rel, uint64_t ino, json_t *todo)
{
	char path[PATH_MAX];
	struct dirent *de;
	json_t *seen = NULL; /* names listed so far */
	struct stat st;
	DIR *d;
	int pfd, fd, r = 0;

	/* Resolved from the upper dir each time: fds held per directory, not per depth. */
	pfd = extract_open_dir(w->root, rel);
	if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
		return 0; /* vanished or replaced since it was listed */
	if (pfd < 0)
		return isola_err_sys(w->err, -pfd, "internal", "snapshot entry `%s`: open", rel);
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(pfd);
	if (fd < 0)
		return isola_err_sys(w->err, errno, "internal", "snapshot entry `%s`: open", rel);
	/* The lookup resolves symlinks inside the upper dir: a directory swapped for a link
	 * since it was listed would list another one (inside, but not this entry). */
	if (ino && (fstat(fd, &st) < 0 || st.st_ino != ino)) {
		close(fd);
		w->st->skipped++;
		return 0;
	}
	d = fdopendir(fd);
	seen = json_object();
	if (!d || !seen) {
		if (d)
			closedir(d);
		else
			close(fd);
		json_decref(seen);
		return isola_err_set(w->err, ENOMEM, "internal", "snapshot: out of memory");
	}
	while (r == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* A name deleted and made again while listing can come twice (only when the
		 * sandbox was not frozen): the reader would refuse the duplicate. */
		if (json_object_get(seen, de->d_name))
			continue;
		if (json_object_set_new_nocheck(seen, de->d_name, json_true()) < 0) {
			r = isola_err_set(w->err, ENOMEM, "internal", "snapshot: out of memory");
			break;
		}
		if (snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
		    (int)sizeof(path)) {
			r = isola_err_set(w->err, ENAMETOOLONG, "too_large",
					  "snapshot: a path under `%.200s` is longer than %d bytes",
					  rel, PATH_MAX - 1);
			break;
		}
		r = lw_entry(w, dirfd(d), de->d_name, path, todo);
	}
	if (r == 0 && errno)
		r = isola_err_sys(w->err, errno, "internal", "snapshot entry `%s`: readdir", rel);
	closedir(d);
	json_decref(seen);
	return r;
}

static int lw_open(struct lw *w, int out_fd)
{
	w->a = archive_write_new();
	w->e = archive_entry_new();
	w->links = json_object();
	w->buf = malloc(LAYER_BUF);
	w->xbuf = malloc(LAYER_XATTR_MAX);
	if (!w->a || !w->e || !w->links || !w->buf || !w->xbuf)
		return isola_err_set(w->err, ENOMEM, "internal", "snapshot: out of memory");
	/* pax: long names, ns mtimes, xattrs, sparse maps; BINARY: name bytes stored as they
	 * are (not every name a sandbox writes is UTF-8). */
	if (archive_write_set_format_pax(w->a) != ARCHIVE_OK ||
	    archive_write_set_format_option(w->a, "pax", "hdrcharset", "BINARY") < ARCHIVE_WARN)
		return isola_err_set(w->err, EINVAL, "internal", "snapshot: pax: %s",
				     archive_error_string(w->a));
	archive_write_set_bytes_in_last_block(w->a, 1);
	w->sink.fd = out_fd;
	if (archive_write_open2(w->a, &w->sink, NULL, sink_write, NULL, NULL) != ARCHIVE_OK ||
	    w->sink.err)
		return lw_archive_err(w, ".");
	return 0;
}

int proc_layer_write(int upper, uint32_t uid_base, int out_fd, const char *what,
		     struct proc_layer_stats *st, struct isola_err **err)
{
	struct proc_layer_stats dummy;
	struct lw w = {.root = upper, .base = uid_base, .what = what, .err = err};
	json_t *todo = json_array();
	struct stat rs;
	int r;

	w.st = st ? st : &dummy;
	memset(w.st, 0, sizeof(*w.st));
	r = lw_open(&w, out_fd);
	if (r < 0 || !todo) {
		r = r < 0 ? r : isola_err_set(err, ENOMEM, "internal", "snapshot: out of memory");
		goto out;
	}
	/* The root entry "." carries the upper dir's own owner, mode and xattrs. */
	if (fstat(upper, &rs) < 0) {
		r = isola_err_sys(err, errno, "internal", "snapshot: stat the upper dir");
		goto out;
	}
	lw_fill(&w, ".", &rs);
	r = lw_xattrs(&w, upper, ".");
	if (r == 0)
		r = lw_header(&w, ".");
	if (r == 0)
		r = lw_dir(&w, "", 0, todo);
	/* Depth-first from an explicit stack: a deep tree costs heap, not C stack or fds. */
	while (r == 0 && json_array_size(todo)) {
		size_t last = json_array_size(todo) - 1;
		json_t *top = json_array_get(todo, last);
		cleanup_free char *rel = strdup(json_string_value(json_array_get(top, 0)));
		uint64_t ino = (uint64_t)json_integer_value(json_array_get(top, 1));

		json_array_remove(todo, last);
		if (!rel) {
			r = isola_err_set(err, ENOMEM, "internal", "snapshot: out of memory");
			break;
		}
		r = lw_dir(&w, rel, ino, todo);
	}
	/* The root entry again marks the end: the reader refuses an archive without it, so
	 * a truncation at an entry boundary is caught even without compression. */
	if (r == 0) {
		lw_fill(&w, ".", &rs);
		r = lw_header(&w, ".");
	}
	if (r == 0 && (archive_write_close(w.a) != ARCHIVE_OK || w.sink.err))
		r = lw_archive_err(&w, "(end)");
out:
	if (w.a)
		archive_write_free(w.a);
	if (w.e)
		archive_entry_free(w.e);
	json_decref(w.links);
	json_decref(todo);
	free(w.buf);
	free(w.xbuf);
	if (r < 0)
		err_printable(err);
	return r;
}

int proc_layer_compress(int in_fd, int out_fd, const char *what, struct isola_err **err)
{
	struct archive *a = NULL;
	struct archive_entry *e = NULL;
	struct sink k = {.fd = out_fd};
	cleanup_free char *buf = malloc(LAYER_BUF);
	char opt[16];
	off_t off = 0;
	int r = 0;

	if (!buf)
		return isola_err_set(err, ENOMEM, "internal", "compress `%s`: out of memory", what);
	if (zstd_level <= 0 || archive_libzstd_version() == NULL) {
		/* No zstd in this libarchive: the plain archive, which the reader takes too. */
		for (;;) {
			ssize_t n = pread(in_fd, buf, LAYER_BUF, off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return isola_err_sys(err, errno, "internal", "copy to `%s`", what);
			if (n == 0)
				return 0;
			r = util_write_all(out_fd, buf, (size_t)n);
			if (r < 0)
				return isola_err_sys(err, -r,
						     r == -ENOSPC ? "no_space" : "internal",
						     "write `%s`", what);
			off += n;
		}
	}
	/* The raw format with a zstd filter: one zstd frame of the tar bytes, which the reader's
	 * zstd filter undoes in front of its tar reader. */
	a = archive_write_new();
	e = archive_entry_new();
	snprintf(opt, sizeof(opt), "%d", zstd_level);
	if (!a || !e || archive_write_set_format_raw(a) != ARCHIVE_OK ||
	    archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
	    archive_write_set_filter_option(a, "zstd", "compression-level", opt) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK) {
		r = isola_err_set(err, ENOTSUP, "internal", "compress `%s`: zstd: %s", what,
				  a && archive_error_string(a) ? archive_error_string(a)
							       : "unavailable");
		goto out;
	}
	if (archive_write_open2(a, &k, NULL, sink_write, NULL, NULL) != ARCHIVE_OK || k.err) {
		r = write_err(a, &k, what, "(start)", err);
		goto out;
	}
	archive_entry_set_pathname(e, "layer.tar");
	archive_entry_set_filetype(e, AE_IFREG);
	if (archive_write_header(a, e) != ARCHIVE_OK || k.err) {
		r = write_err(a, &k, what, "(start)", err);
		goto out;
	}
	for (;;) {
		ssize_t n = pread(in_fd, buf, LAYER_BUF, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = isola_err_sys(err, errno, "internal", "compress `%s`: read", what);
			goto out;
		}
		if (n == 0)
			break;
		if (archive_write_data(a, buf, (size_t)n) < 0 || k.err) {
			r = write_err(a, &k, what, "layer.tar", err);
			goto out;
		}
		off += n;
	}
	if (archive_write_close(a) != ARCHIVE_OK || k.err)
		r = write_err(a, &k, what, "(end)", err);
out:
	if (a)
		archive_write_free(a);
	if (e)
		archive_entry_free(e);
	return r;
}

/* ---- reader ---- */

struct lr {
	struct archive *a;	/* the reader */
	int root;		/* the new upper dir (borrowed) */
	uint32_t base;		/* host uid/gid of in-sandbox id 0 */
	const char *what;	/* archive name for errors */
	json_t *dirs;		/* [path, sec, nsec] of each directory, for the mtime pass */
	bool root_seen;		/* the first "." entry (the upper dir's metadata) was applied */
	bool end_seen;		/* the second "." entry (the writer's end marker) was read */
	char path[PATH_MAX];	/* current entry, normalised */
	struct isola_err **err; /* where failures go */
};

/* A failure creating entry l->path: ENOSPC/EDQUOT (tmpfs size, nr_inodes) or ENOMEM (the
 * memory cgroup the pages are charged to) means the snapshot does not fit. */
static int lr_sys(struct lr *l, int e, const char *what)
{
	if (e == ENOSPC || e == EDQUOT || e == ENOMEM)
		return isola_err_set(
			l->err, ENOSPC, "no_space",
			"restore `%s`: the snapshot does not fit the new sandbox's disk, "
			"inode or memory limit (at entry `%s`)",
			l->what, l->path);
	return isola_err_set(l->err, e, "internal", "restore `%s`: entry `%s`: %s: %s", l->what,
			     l->path, what, strerror(e));
}

static int lr_bad(struct lr *l, const char *why)
{
	return isola_err_set(l->err, EBADMSG, "invalid", "restore `%s`: entry `%s`: %s", l->what,
			     l->path, why);
}

/* In-sandbox id from the archive -> host id in the new range. */
static uint32_t shift_in(uint32_t base, la_int64_t id)
{
	/* UNTRUSTED: an id outside the namespace's 65536 would alias another range. */
	return base + (id < 0 || id >= (la_int64_t)LAYER_IDS ? LAYER_NOBODY : (uint32_t)id);
}

/* Sets the entry's `user.` xattrs on fd; anything else in the archive is refused. */
static int lr_xattrs(struct lr *l, int fd, struct archive_entry *e)
{
	const char *name;
	const void *val;
	size_t size;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK) {
		/* UNTRUSTED: names and values from the archive; the kernel caps both again. */
		if (strncmp(name, "user.", 5) || size > LAYER_XATTR_MAX)
			return lr_bad(l, "xattr outside the user. namespace or too large");
		if (fsetxattr(fd, name, val, size, 0) < 0)
			/* EINVAL, ERANGE, E2BIG: a name or value no kernel accepts ("user."
			 * alone, over 255 bytes): the archive's fault (fuzz_layer found it). */
			return errno == EINVAL || errno == ERANGE || errno == E2BIG
				       ? lr_bad(l, "xattr name or value the kernel refuses")
				       : lr_sys(l, errno, "set xattr");
	}
	return 0;
}

/* Owner, mode, xattrs on an open fd (chown first: it clears setuid/setgid). */
static int lr_meta(struct lr *l, int fd, struct archive_entry *e)
{
	if (fchown(fd, shift_in(l->base, archive_entry_uid(e)),
		   shift_in(l->base, archive_entry_gid(e))) < 0 ||
	    fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return lr_sys(l, errno, "set owner/mode");
	return lr_xattrs(l, fd, e);
}

/* Copies the entry's data blocks into fd, staying inside the declared size. */
static int lr_data(struct lr *l, int fd, int64_t size)
{
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(l->a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return isola_err_set(l->err, EBADMSG, "invalid",
					     "restore `%s`: truncated or corrupt at entry `%s`: %s",
					     l->what, l->path,
					     archive_error_string(l->a) ? archive_error_string(l->a)
									: "unexpected end");
		/* UNTRUSTED: off/len from the sparse map; kept inside the declared size. */
		if (off < 0 || (uint64_t)off > (uint64_t)size || len > (uint64_t)(size - off))
			return lr_bad(l, "data beyond the declared size");
		r = extract_pwrite_all(fd, buf, len, off);
		if (r < 0)
			return lr_sys(l, -r, "write");
	}
	if (ftruncate(fd, size) < 0)
		return lr_sys(l, errno, "truncate");
	return 0;
}

static int lr_hardlink(struct lr *l, int pfd, const char *leaf, const char *target)
{
	char tpath[PATH_MAX], tdir[PATH_MAX];
	cleanup_fd int tfd = -1;
	const char *tleaf;
	struct stat st;

	if (extract_norm_path(target, tpath, sizeof(tpath)) < 0)
		return lr_bad(l, "hard link target escapes the layer");
	tleaf = extract_split(tpath, tdir);
	tfd = extract_open_dir(l->root, tdir);
	if (tfd < 0 || fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lr_bad(l, "hard link target is not in the layer");
	if (!S_ISREG(st.st_mode))
		return lr_bad(l, "hard link target is not a regular file");
	/* No AT_SYMLINK_FOLLOW: the target itself is linked, never what it names. */
	if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
		return errno == EEXIST ? lr_bad(l, "duplicate entry") : lr_sys(l, errno, "link");
	return 0;
}

static int lr_entry(struct lr *l, struct archive_entry *e)
{
	/* UNTRUSTED: every field of e comes from the archive. The path is normalised (no
	 * absolute path, no ".."), the parent is resolved inside the new upper dir, and every
	 * entry is created there with *at() calls that neither replace nor follow. */
	const char *raw = archive_entry_pathname(e), *hl = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
	cleanup_fd int pfd = -1;
	cleanup_fd int fd = -1;
	char dir[PATH_MAX];
	const char *leaf;
	int r;

	snprintf(l->path, sizeof(l->path), "%s", raw ? raw : "?");
	if (!raw)
		return lr_bad(l, "entry without a name");
	r = extract_norm_path(raw, l->path, sizeof(l->path));
	if (r == -ENOENT) { /* ".": the upper dir itself */
		if (type != AE_IFDIR || hl)
			return lr_bad(l, "the root entry is not a directory");
		if (l->root_seen) {
			l->end_seen = true;
			return 0;
		}
		l->root_seen = true;
		fd = openat(l->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		snprintf(l->path, sizeof(l->path), ".");
		if (fd < 0)
			return lr_sys(l, errno, "open");
		r = lr_meta(l, fd, e);
		if (r == 0 && push_path(l->dirs, ".", (json_int_t)archive_entry_mtime(e),
					(json_int_t)archive_entry_mtime_nsec(e)) < 0)
			r = lr_sys(l, ENOMEM, "record");
		return r;
	}
	if (r < 0) {
		snprintf(l->path, sizeof(l->path), "%.1000s", raw);
		return lr_bad(l, "path escapes the layer (absolute, `..` or too long)");
	}
	leaf = extract_split(l->path, dir);
	pfd = extract_open_dir(l->root, dir);
	if (pfd < 0)
		return lr_bad(l, "parent directory is not in the layer");
	if (hl)
		return lr_hardlink(l, pfd, leaf, hl);
	if (archive_entry_mtime_is_set(e)) {
		ts[1].tv_sec = archive_entry_mtime(e);
		ts[1].tv_nsec = archive_entry_mtime_nsec(e);
		ts[0] = ts[1];
	}
	switch (type) {
	case AE_IFDIR:
		if (mkdirat(pfd, leaf, 0700) < 0)
			return errno == EEXIST ? lr_bad(l, "duplicate entry")
					       : lr_sys(l, errno, "mkdir");
		fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return lr_sys(l, errno, "open");
		if (push_path(l->dirs, l->path, (json_int_t)ts[1].tv_sec,
			      (json_int_t)ts[1].tv_nsec) < 0)
			return lr_sys(l, ENOMEM, "record");
		return lr_meta(l, fd, e);
	case AE_IFREG: {
		int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;

		if (size < 0)
			return lr_bad(l, "negative size");
		fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return errno == EEXIST ? lr_bad(l, "duplicate entry")
					       : lr_sys(l, errno, "create");
		r = lr_data(l, fd, size);
		if (r == 0)
			r = lr_meta(l, fd, e);
		if (r == 0 && futimens(fd, ts) < 0)
			r = lr_sys(l, errno, "set times");
		return r;
	}
	case AE_IFLNK: {
		/* UNTRUSTED: the target is stored verbatim and never followed by isolad. */
		const char *target = archive_entry_symlink(e);

		if (!target || !*target || strlen(target) >= PATH_MAX)
			return lr_bad(l, "bad symlink target");
		if (symlinkat(target, pfd, leaf) < 0)
			return errno == EEXIST ? lr_bad(l, "duplicate entry")
					       : lr_sys(l, errno, "symlink");
		if (fchownat(pfd, leaf, shift_in(l->base, archive_entry_uid(e)),
			     shift_in(l->base, archive_entry_gid(e)), AT_SYMLINK_NOFOLLOW) < 0 ||
		    utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return lr_sys(l, errno, "symlink owner/times");
		return 0;
	}
	case AE_IFIFO:
	case AE_IFCHR:
		/* Only FIFOs and overlay whiteouts (char 0:0): isolad is real root here and
		 * must never make a device a later mount could open. */
		if (type == AE_IFCHR && archive_entry_rdev(e) != 0)
			return lr_bad(l, "device node other than a whiteout");
		if (mknodat(pfd, leaf, (type == AE_IFIFO ? S_IFIFO : S_IFCHR) | 0600, 0) < 0)
			return errno == EEXIST ? lr_bad(l, "duplicate entry")
					       : lr_sys(l, errno, "mknod");
		/* Created just now on a tmpfs only isolad reaches: leaf is what mknodat made. */
		if (fchownat(pfd, leaf, shift_in(l->base, archive_entry_uid(e)),
			     shift_in(l->base, archive_entry_gid(e)), AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(pfd, leaf, archive_entry_perm(e) & 0777, 0) < 0 ||
		    utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return lr_sys(l, errno, "node owner/mode/times");
		return 0;
	default:
		return lr_bad(l, "entry type not allowed in a layer");
	}
}

/* Directory mtimes last (creating children changed them), deepest first. */
static int lr_dir_times(struct lr *l)
{
	for (size_t i = json_array_size(l->dirs); i-- > 0;) {
		json_t *d = json_array_get(l->dirs, i);
		const char *p = json_string_value(json_array_get(d, 0));
		struct timespec ts[2];
		cleanup_fd int pfd = -1;
		cleanup_fd int fd = -1;

		ts[1].tv_sec = (time_t)json_integer_value(json_array_get(d, 1));
		ts[1].tv_nsec = (long)json_integer_value(json_array_get(d, 2));
		ts[0] = ts[1];
		snprintf(l->path, sizeof(l->path), "%s", p);
		pfd = extract_open_dir(l->root, strcmp(p, ".") ? p : "");
		fd = pfd < 0 ? -1 : openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || futimens(fd, ts) < 0)
			return lr_sys(l, fd < 0 && pfd < 0 ? -pfd : errno, "set directory times");
	}
	return 0;
}

int proc_layer_read(int parent, const char *name, uint32_t uid_base, int in_fd, const char *what,
		    struct isola_err **err)
{
	struct lr l = {.base = uid_base, .what = what, .err = err, .root = -1};
	struct archive_entry *e;
	int r = 0;

	snprintf(l.path, sizeof(l.path), "%s", name);
	if (mkdirat(parent, name, 0700) < 0)
		return lr_sys(&l, errno, "mkdir");
	l.root = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (l.root < 0)
		return lr_sys(&l, errno, "open");
	/* The root entry sets the real owner; until then it is the new range's root. */
	if (fchown(l.root, uid_base, uid_base) < 0) {
		r = lr_sys(&l, errno, "chown");
		goto out;
	}
	l.dirs = json_array();
	l.a = archive_read_new();
	if (!l.dirs || !l.a) {
		r = lr_sys(&l, ENOMEM, "reader");
		goto out;
	}
	archive_read_support_filter_zstd(l.a);
	archive_read_support_filter_none(l.a);
	archive_read_support_format_tar(l.a);
	if (archive_read_open_fd(l.a, in_fd, 64 * 1024) != ARCHIVE_OK) {
		r = isola_err_set(err, EBADMSG, "invalid", "restore `%s`: not a layer archive: %s",
				  what, archive_error_string(l.a));
		goto out;
	}
	for (;;) {
		int h = archive_read_next_header(l.a, &e);

		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			r = isola_err_set(err, EBADMSG, "invalid",
					  "restore `%s`: truncated or corrupt after entry `%s`: %s",
					  what, l.path,
					  archive_error_string(l.a) ? archive_error_string(l.a)
								    : "unexpected end");
			goto out;
		}
		if (l.end_seen) {
			r = lr_bad(&l, "entries after the end marker");
			goto out;
		}
		r = lr_entry(&l, e);
		if (r < 0)
			goto out;
	}
	if (!l.end_seen) {
		r = isola_err_set(err, EBADMSG, "invalid",
				  "restore `%s`: truncated after entry `%s` (no end marker)", what,
				  l.path);
		goto out;
	}
	r = lr_dir_times(&l);
out:
	if (l.a)
		archive_read_free(l.a);
	json_decref(l.dirs);
	close(l.root);
	if (r < 0) {
		util_rm_rf_at(parent, name);
		err_printable(err);
	}
	return r;
}
