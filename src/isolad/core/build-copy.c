/* SPDX-License-Identifier: Apache-2.0 */
/* build-copy: `template build`'s context (the client's tar) and its COPY/ADD layers. */
#include "build-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/util.h"

/* ---- reading the context ---- */

/* Opens the context tar for reading (plain; the CLI sends it uncompressed). */
struct archive *build_ctx_open(const char *path, struct isola_err **err)
{
	struct archive *a = archive_read_new();

	if (!a) {
		isola_err_set(err, ENOMEM, "internal", "out of memory");
		return NULL;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		isola_err_set(err, EINVAL, "invalid", "build context: %s", archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* Reads the Dockerfile (path inside the context) into *out (NUL-terminated). */
int build_read_dockerfile(const char *ctx, const char *name, char **out, size_t *len,
			  struct isola_err **err)
{
	struct archive *a = build_ctx_open(ctx, err);
	struct archive_entry *e;
	char want[PATH_MAX], got[PATH_MAX];
	int r = -ENOENT;

	if (!a)
		return -EINVAL;
	if (extract_norm_path(name, want, sizeof(want)) < 0) {
		archive_read_free(a);
		return isola_err_set(err, EINVAL, "invalid", "Dockerfile path `%.200s`", name);
	}
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);
		la_int64_t size = archive_entry_size(e);

		if (!p || extract_norm_path(p, got, sizeof(got)) < 0 || strcmp(got, want) ||
		    archive_entry_filetype(e) != AE_IFREG)
			continue;
		if (size < 0 || size > DF_MAX_BYTES) {
			r = isola_err_set(err, EFBIG, "too_large",
					  "Dockerfile: larger than %u bytes", DF_MAX_BYTES);
			break;
		}
		*out = malloc((size_t)size + 1);
		if (!*out) {
			r = isola_err_set(err, ENOMEM, "internal", "out of memory");
			break;
		}
		if (archive_read_data(a, *out, (size_t)size) != size) {
			free(*out);
			*out = NULL;
			r = isola_err_set(err, EINVAL, "invalid", "Dockerfile: truncated");
			break;
		}
		(*out)[size] = '\0';
		*len = (size_t)size;
		r = 0;
		break;
	}
	archive_read_free(a);
	if (r == -ENOENT)
		return isola_err_set(err, ENOENT, "invalid", "build context has no `%s`", want);
	return r;
}

/* ---- COPY / ADD: a layer made from the context ---- */

/* Where a context entry goes: NULL when it does not match src. */
static bool copy_target(const char *name, const char *src, bool dest_dir, const char *dest,
			bool *is_root, char *out, size_t n)
{
	char prefix[PATH_MAX];
	size_t len = strlen(name);

	if (!strcmp(src, ".")) {
		*is_root = false;
		return snprintf(out, n, "%s/%s", dest, name) < (int)n;
	}
	/* The shortest prefix of name (at a component boundary) that src matches. */
	for (size_t i = 1; i <= len; i++) {
		if (i < len && name[i] != '/')
			continue;
		if (i >= sizeof(prefix))
			return false;
		memcpy(prefix, name, i);
		prefix[i] = '\0';
		if (fnmatch(src, prefix, FNM_PATHNAME) == 0) {
			const char *rest = name + i + (i < len ? 1 : 0);
			const char *base = strrchr(prefix, '/') ? strrchr(prefix, '/') + 1 : prefix;

			*is_root = !*rest;
			if (*rest)
				return snprintf(out, n, "%s/%s", dest, rest) < (int)n;
			if (dest_dir)
				return snprintf(out, n, "%s/%s", dest, base) < (int)n;
			return snprintf(out, n, "%s", dest) < (int)n;
		}
	}
	return false;
}

/* Sizes and ids of a COPY --chown: numeric `uid[:gid]`, or root. */
static int parse_chown(const char *s, unsigned line, uid_t *uid, gid_t *gid, struct isola_err **err)
{
	char *end;
	unsigned long u, g;

	*uid = 0;
	*gid = 0;
	if (!s)
		return 0;
	if (!strcmp(s, "root") || !strcmp(s, "root:root"))
		return 0;
	u = strtoul(s, &end, 10);
	g = u;
	if (end != s && *end == ':')
		g = strtoul(end + 1, &end, 10);
	if (end == s || *end || u > 65535 || g > 65535)
		return isola_err_set(
			err, EINVAL, "invalid",
			"Dockerfile line %u: --chown=`%s`: use numeric uid[:gid] (0-65535)", line,
			s);
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

static void digest_entry(crypto_hash_sha256_state *h, struct archive_entry *e)
{
	char meta[128];
	const char *l = archive_entry_symlink(e);

	crypto_hash_sha256_update(h, (const unsigned char *)archive_entry_pathname(e),
				  strlen(archive_entry_pathname(e)) + 1);
	snprintf(meta, sizeof(meta), "%o %lld %lld %lld", (unsigned)archive_entry_mode(e),
		 (long long)archive_entry_uid(e), (long long)archive_entry_gid(e),
		 (long long)archive_entry_size(e));
	crypto_hash_sha256_update(h, (const unsigned char *)meta, strlen(meta) + 1);
	if (l)
		crypto_hash_sha256_update(h, (const unsigned char *)l, strlen(l) + 1);
}

/* Copies one entry's data from a to w, hashing it. */
static int copy_data(struct archive *a, struct archive *w, crypto_hash_sha256_state *h, char *buf)
{
	for (;;) {
		la_ssize_t n = archive_read_data(a, buf, 1 << 16);

		if (n == 0)
			return 0;
		if (n < 0 || archive_write_data(w, buf, (size_t)n) != n)
			return -EIO;
		crypto_hash_sha256_update(h, (const unsigned char *)buf, (size_t)n);
	}
}

/* Copies what is left of the spooled file fd to w, hashing it. */
static int copy_fd(int fd, struct archive *w, crypto_hash_sha256_state *h, char *buf)
{
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 16);

		if (n == 0)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || archive_write_data(w, buf, (size_t)n) != n)
			return -EIO;
		crypto_hash_sha256_update(h, (const unsigned char *)buf, (size_t)n);
	}
}

/* Writes entry e (its data next in a) to w as path, owned by uid:gid, and adds it to h.
 * Returns 0 or -EIO (w's or a's error string says why). */
static int put_entry(struct archive *a, struct archive_entry *e, struct archive *w,
		     const char *path, uid_t uid, gid_t gid, crypto_hash_sha256_state *h, char *buf)
{
	archive_entry_copy_pathname(e, path);
	archive_entry_set_uid(e, uid);
	archive_entry_set_gid(e, gid);
	archive_entry_set_uname(e, NULL);
	archive_entry_set_gname(e, NULL);
	digest_entry(h, e);
	if (archive_write_header(w, e) != ARCHIVE_OK)
		return -EIO;
	if (archive_entry_filetype(e) == AE_IFREG && copy_data(a, w, h, buf) < 0)
		return -EIO;
	return 0;
}

/* Writes the entries of archive a (positioned before its first header, which is hdr) below
 * dest in w, owned by uid:gid. Names with `..` or absolute ones, and hard links, are skipped;
 * symlinks are written as they are: the layer code applies them confined to the rootfs. */
static int add_entries(struct archive *a, struct archive_entry *e, struct archive *w,
		       const char *dest, uid_t uid, gid_t gid, crypto_hash_sha256_state *h,
		       char *buf)
{
	int q = ARCHIVE_OK;

	for (; q == ARCHIVE_OK || q == ARCHIVE_WARN; q = archive_read_next_header(a, &e)) {
		char t[PATH_MAX], norm[PATH_MAX];

		/* UNTRUSTED: the archive's names; normalised here, applied confined later. */
		if (!archive_entry_pathname(e) ||
		    extract_norm_path(archive_entry_pathname(e), norm, sizeof(norm)) < 0 ||
		    archive_entry_hardlink(e) ||
		    snprintf(t, sizeof(t), "%s/%s", dest, norm) >= (int)sizeof(t))
			continue;
		if (put_entry(a, e, w, t, uid, gid, h, buf) < 0)
			return -EIO;
	}
	return q == ARCHIVE_EOF ? 0 : -EINVAL;
}

/* ADD of a local file (entry e of the context, its data next in ctx): spooled to an unnamed
 * file in the cache dir, then, as Docker does, told apart by content: a tar, plain or
 * compressed (any filter libarchive reads: gzip, xz, bzip2, zstd, ...), has its entries
 * written below dest; anything else is written as is at target. -EINVAL: it began as an
 * archive but is damaged. */
static int add_local(struct build *bd, struct archive *ctx, struct archive_entry *e,
		     struct archive *w, const char *target, const char *dest, uid_t uid, gid_t gid,
		     crypto_hash_sha256_state *h, char *buf)
{
	struct archive *a = NULL;
	struct archive_entry *ae;
	int fd = open(bd->cache, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), r = 0, q;

	if (fd < 0)
		return -errno;
	for (;;) {
		la_ssize_t n = archive_read_data(ctx, buf, 1 << 16);

		if (n == 0)
			break;
		if (n < 0 || util_write_all(fd, buf, (size_t)n) < 0) {
			r = -EIO;
			goto out;
		}
	}
	a = archive_read_new();
	if (!a || lseek(fd, 0, SEEK_SET) < 0) {
		r = -ENOMEM;
		goto out;
	}
	/* The compressions Docker's ADD unpacks, each through its library (filter_all would also
	 * run external programs such as lrzip on hostile bytes). */
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	q = archive_read_open_fd(a, fd, 1 << 16);
	if (q == ARCHIVE_OK)
		q = archive_read_next_header(a, &ae);
	if (q == ARCHIVE_OK || q == ARCHIVE_WARN || q == ARCHIVE_EOF) {
		r = q == ARCHIVE_EOF ? 0 : add_entries(a, ae, w, dest, uid, gid, h, buf);
		goto out;
	}
	/* Not an archive (no tar inside whatever compression): the file itself. */
	if (lseek(fd, 0, SEEK_SET) < 0) {
		r = -errno;
		goto out;
	}
	archive_entry_copy_pathname(e, target);
	archive_entry_set_uid(e, uid);
	archive_entry_set_gid(e, gid);
	archive_entry_set_uname(e, NULL);
	archive_entry_set_gname(e, NULL);
	digest_entry(h, e);
	if (archive_write_header(w, e) != ARCHIVE_OK || copy_fd(fd, w, h, buf) < 0)
		r = -EIO;
out:
	if (a)
		archive_read_free(a);
	close(fd);
	return r;
}

/* Writes the layer of COPY/ADD step i to out_fd; h gets the digest of what it holds. */
static int copy_layer(struct build *bd, size_t i, int out_fd, unsigned char h[32],
		      struct isola_err **err)
{
	const struct df_step *s = &bd->df.steps[i];
	const char *workdir = json_string_value(json_object_get(bd->at[i], "workdir"));
	char **w = NULL, dest[PATH_MAX], *buf = malloc(1 << 16);
	struct archive *ctx = NULL, *wr = archive_write_new();
	struct archive_entry *e;
	crypto_hash_sha256_state hs;
	size_t n = 0, matched = 0;
	uid_t uid;
	gid_t gid;
	bool dest_dir;
	int r;

	crypto_hash_sha256_init(&hs);
	if (!buf || !wr) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	r = parse_chown(s->chown, s->line, &uid, &gid, err);
	if (r < 0)
		goto out;
	if (s->argv) {
		w = calloc(s->argc + 1, sizeof(char *));
		for (size_t k = 0; w && k < s->argc; k++)
			w[k] = strdup(s->argv[k]);
		n = s->argc;
	} else {
		r = dockerfile_words(bd->sub[i], bd->df.escape, &w, &n, err);
		if (r < 0)
			goto out;
	}
	if (!w || n < 2) {
		r = isola_err_set(err, EINVAL, "invalid",
				  "Dockerfile line %u: %s needs a source "
				  "and a destination",
				  s->line, dockerfile_op_name(s->op));
		goto out;
	}
	dest_dir = n > 2 || w[n - 1][strlen(w[n - 1]) - 1] == '/' || strpbrk(w[0], "*?[");
	/* dest: absolute, or relative to WORKDIR; stored without the leading '/'. */
	{
		char full[PATH_MAX];

		const char *f = full;

		snprintf(full, sizeof(full), "%s%s%s", w[n - 1][0] == '/' ? "" : workdir,
			 w[n - 1][0] == '/' ? "" : "/", w[n - 1]);
		while (*f == '/')
			f++;
		if (!*f || extract_norm_path(f, dest, sizeof(dest)) == -ENOENT)
			snprintf(dest, sizeof(dest), ".");
		else if (extract_norm_path(f, dest, sizeof(dest)) < 0) {
			r = isola_err_set(err, EINVAL, "invalid",
					  "Dockerfile line %u: bad "
					  "destination `%s`",
					  s->line, w[n - 1]);
			goto out;
		}
	}
	for (size_t k = 0; k + 1 < n; k++) {
		char norm[PATH_MAX];

		if (extract_norm_path(w[k], norm, sizeof(norm)) == -ENOENT)
			snprintf(norm, sizeof(norm), ".");
		else if (extract_norm_path(w[k], norm, sizeof(norm)) < 0) {
			r = isola_err_set(err, EINVAL, "invalid",
					  "Dockerfile line %u: source `%s` is outside the context",
					  s->line, w[k]);
			goto out;
		}
		free(w[k]);
		w[k] = strdup(norm);
	}
	archive_write_set_format_pax_restricted(wr);
	if (archive_write_open_fd(wr, out_fd) != ARCHIVE_OK) {
		r = isola_err_set(err, EIO, "internal", "layer: %s", archive_error_string(wr));
		goto out;
	}
	ctx = build_ctx_open(bd->o->context, err);
	if (!ctx) {
		r = -EINVAL;
		goto out;
	}
	while (r == 0 && archive_read_next_header(ctx, &e) == ARCHIVE_OK) {
		char name[PATH_MAX], t[PATH_MAX];
		bool is_root = false;
		size_t k;

		/* UNTRUSTED: the client's context; names normalised, hard links refused. */
		if (!archive_entry_pathname(e) ||
		    extract_norm_path(archive_entry_pathname(e), name, sizeof(name)) < 0 ||
		    !strcmp(name, ".isola-dockerfile"))
			continue;
		for (k = 0; k + 1 < n; k++)
			if (copy_target(name, w[k], dest_dir, dest, &is_root, t, sizeof(t)))
				break;
		if (k + 1 == n)
			continue;
		matched++;
		if (is_root && archive_entry_filetype(e) == AE_IFDIR)
			continue; /* a directory's contents are copied, not itself */
		if (archive_entry_hardlink(e)) {
			r = isola_err_set(err, EINVAL, "invalid",
					  "build context: `%s`: hard links are not supported",
					  name);
			break;
		}
		if (s->op == DF_ADD && is_root && archive_entry_filetype(e) == AE_IFREG) {
			int q = add_local(bd, ctx, e, wr, t, dest, uid, gid, &hs, buf);

			if (q < 0) {
				r = isola_err_set(err, -q, q == -EINVAL ? "invalid" : "internal",
						  "Dockerfile line %u: ADD `%s`: %s", s->line, name,
						  q == -EINVAL ? "a damaged archive"
							       : strerror(-q));
				break;
			}
			continue;
		}
		if (put_entry(ctx, e, wr, t, uid, gid, &hs, buf) < 0)
			r = isola_err_set(err, EIO, "internal", "layer `%s`: %s", t,
					  archive_error_string(wr));
	}
	if (r == 0 && !matched)
		r = isola_err_set(err, ENOENT, "invalid",
				  "Dockerfile line %u: %s: `%s` not found in the build context "
				  "(or excluded by .dockerignore)",
				  s->line, dockerfile_op_name(s->op), w[0]);
	if (r == 0 && archive_write_close(wr) != ARCHIVE_OK)
		r = isola_err_set(err, EIO, "internal", "layer: %s", archive_error_string(wr));
out:
	crypto_hash_sha256_final(&hs, h);
	if (ctx)
		archive_read_free(ctx);
	if (wr)
		archive_write_free(wr);
	dockerfile_words_free(w);
	free(buf);
	return r;
}

int build_step_copy(struct build *bd, size_t i, bool *cached, struct isola_err **err)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	unsigned char h[32];
	int fd, r;

	if (snprintf(tmp, sizeof(tmp), "%s/.tmp-XXXXXX", bd->cache) >= (int)sizeof(tmp))
		return isola_err_set(err, ENAMETOOLONG, "internal", "cache path too long");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", tmp);
	r = copy_layer(bd, i, fd, h, err);
	close(fd);
	if (r == 0) {
		build_key_chain(bd, dockerfile_op_name(bd->df.steps[i].op), bd->sub[i], h,
				sizeof(h));
		r = build_from_cache(bd, ".tar", false, path, sizeof(path), err);
		*cached = r == 1;
		if (r == 0) {
			bool stored;

			r = build_cache_store(bd, tmp, path, i, false, &stored, err);
			if (stored)
				tmp[0] = '\0'; /* it is the entry now */
		}
	}
	if (tmp[0])
		unlink(tmp);
	return r < 0 ? r : 0;
}
