/* SPDX-License-Identifier: Apache-2.0 */
/* import: turns an OCI layout (tarball or directory), a docker-archive or a rootfs tarball into a
 * template, verifying digests. */
#include "images.h"
#include "images-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <dirent.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/util.h"

/* One file of the outer tarball, copied to blobs/<index> under a name we chose. */
struct blob {
	char *name;    /* normalised path inside the tarball (heap) */
	char *link;    /* normalised target when the entry is a link, else NULL (heap) */
	uint64_t size; /* bytes */
	char sha[65];  /* sha256 of the bytes, hex */
};

struct import {
	const char *name;	 /* template name (borrowed) */
	char tmp[448];		 /* templates/.tmp-XXXXXX */
	int blobsfd;		 /* tmp/blobs */
	int rootfd;		 /* tmp/rootfs */
	struct blob *v;		 /* outer entries */
	size_t n, cap;		 /* used/allocated entries of v */
	struct images_budget b;	 /* caps and totals */
	images_progress_fn cb;	 /* progress (may be NULL) */
	void *ud;		 /* cb's argument */
	struct template_info *t; /* the template being built */
	char digest[72];	 /* manifest (OCI) or config digest (docker), for the id */
	struct isola_err **err;	 /* where failures go */
};

static void progress(struct import *im, const char *phase, uint64_t done, uint64_t total)
{
	if (im->cb)
		im->cb(im->ud, phase, done, total);
}

/* Joins a link target to the directory of the link and resolves "..", staying inside the
 * tarball's root. 0 or -EPERM/-ENAMETOOLONG. */
static int join_norm(const char *entry, const char *target, char *out, size_t outsz)
{
	char buf[PATH_MAX * 2];
	size_t o = 0;
	const char *slash = strrchr(entry, '/');
	char *save = NULL;

	if (target[0] == '/')
		snprintf(buf, sizeof(buf), "%s", target);
	else
		snprintf(buf, sizeof(buf), "%.*s/%s", slash ? (int)(slash - entry) : 0, entry,
			 target);
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		size_t n = strlen(c);

		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			if (o == 0)
				return -EPERM;
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		if (o + n + 2 > outsz)
			return -ENAMETOOLONG;
		if (o)
			out[o++] = '/';
		memcpy(out + o, c, n);
		o += n;
	}
	out[o] = '\0';
	return o ? 0 : -EPERM;
}

static int add_blob(struct import *im, const char *name, const char *link)
{
	struct blob *b;

	if (im->n >= IMAGES_MAX_OUTER)
		return isola_err_set(im->err, EFBIG, "too_large", "tarball has too many entries");
	if (im->n == im->cap) {
		size_t ncap = im->cap ? im->cap * 2 : 32;
		struct blob *nv = realloc(im->v, ncap * sizeof(*nv));

		if (!nv)
			return isola_err_set(im->err, ENOMEM, "internal", "out of memory");
		im->v = nv;
		im->cap = ncap;
	}
	b = &im->v[im->n];
	memset(b, 0, sizeof(*b));
	b->name = strdup(name);
	b->link = link ? strdup(link) : NULL;
	if (!b->name || (link && !b->link)) {
		free(b->name);
		free(b->link);
		return isola_err_set(im->err, ENOMEM, "internal", "out of memory");
	}
	im->n++;
	return 0;
}

/* Copies the current entry's data to blobs/<index>, hashing it. */
static int save_data(struct import *im, struct archive *a, struct blob *b, int64_t size)
{
	struct sha256_ctx h;
	char file[32];
	cleanup_fd int fd = -1;

	snprintf(file, sizeof(file), "%zu", im->n - 1);
	fd = openat(im->blobsfd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return isola_err_sys(im->err, errno, NULL, "create blob file");
	sha256_init(&h);
	for (;;) {
		char buf[64 * 1024];
		la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
		int r;

		if (n == 0)
			break;
		if (n < 0)
			return isola_err_set(im->err, EBADMSG, "invalid", "tarball entry `%s`: %s",
					     b->name, archive_error_string(a));
		if (b->size + (uint64_t)n > (uint64_t)size)
			return isola_err_set(im->err, EBADMSG, "invalid",
					     "tarball entry `%s`: more data than declared",
					     b->name);
		sha256_update(&h, (size_t)n, (const uint8_t *)buf);
		r = util_write_all(fd, buf, (size_t)n);
		if (r < 0)
			return isola_err_sys(im->err, -r, NULL, "write blob `%s`", b->name);
		b->size += (uint64_t)n;
	}
	images_sha256_hex(&h, b->sha);
	return 0;
}

/* A libarchive reader of the tar (any compression) at fd. NULL with *im->err set. */
static struct archive *open_tar(struct import *im, int fd)
{
	struct archive *a = archive_read_new();

	if (!a) {
		isola_err_set(im->err, ENOMEM, "internal", "out of memory");
		return NULL;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, 64 * 1024) != ARCHIVE_OK) {
		isola_err_set(im->err, EBADMSG, "invalid", "not a tarball: %s",
			      archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* Copies every file of the outer tarball into blobs/, recording names, sizes and digests. */
static int unpack_outer(struct import *im, int fd, uint64_t total)
{
	struct archive *a = open_tar(im, fd);
	struct archive_entry *e;
	uint64_t bytes = 0, last = 0;
	int r = 0;

	if (!a)
		return -EBADMSG;
	progress(im, "unpack", 0, total);
	for (;;) {
		char name[PATH_MAX], target[PATH_MAX];
		const char *raw, *lt;
		int h = archive_read_next_header(a, &e);
		int64_t size;

		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			r = isola_err_set(im->err, EBADMSG, "invalid", "tarball: %s",
					  archive_error_string(a));
			goto out;
		}
		/* UNTRUSTED: names and sizes of the outer tarball. Names are only compared, never
		 * used as paths: data lands in blobs/<index>. */
		raw = archive_entry_pathname(e);
		r = raw ? extract_norm_path(raw, name, sizeof(name)) : -EBADMSG;
		if (r == -ENOENT) {
			r = 0;
			continue;
		}
		if (r < 0) {
			r = isola_err_set(im->err, EBADMSG, "invalid",
					  "tarball entry `%.200s`: bad path", raw ? raw : "?");
			goto out;
		}
		if (archive_entry_hardlink(e) || archive_entry_filetype(e) == AE_IFLNK) {
			/* docker save writes repeated layers as links to the first copy */
			lt = archive_entry_hardlink(e);
			r = lt ? extract_norm_path(lt, target, sizeof(target))
			       : (archive_entry_symlink(e)
					  ? join_norm(name, archive_entry_symlink(e), target,
						      sizeof(target))
					  : -EBADMSG);
			if (r < 0) {
				r = isola_err_set(im->err, EBADMSG, "invalid",
						  "tarball entry `%s`: bad link target", name);
				goto out;
			}
			r = add_blob(im, name, target);
			if (r < 0)
				goto out;
			continue;
		}
		if (archive_entry_filetype(e) != AE_IFREG)
			continue;
		size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
		if (size < 0 || (uint64_t)size > im->b.max_bytes - bytes) {
			r = isola_err_set(im->err, EFBIG, "too_large",
					  "tarball entry `%s`: bigger than the size cap", name);
			goto out;
		}
		bytes += (uint64_t)size;
		r = add_blob(im, name, NULL);
		if (r == 0)
			r = save_data(im, a, &im->v[im->n - 1], size);
		if (r < 0)
			goto out;
		if (bytes - last >= (4u << 20)) {
			progress(im, "unpack", (uint64_t)archive_filter_bytes(a, -1), total);
			last = bytes;
		}
	}
	progress(im, "unpack", total, total);
out:
	archive_read_free(a);
	return r;
}

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[64] == '\0';
}

/* Whether a tarball entry marks an image archive: oci-layout, index.json or manifest.json at
 * the top. */
static bool archive_marker(const char *name)
{
	return !strcmp(name, "oci-layout") || !strcmp(name, "index.json") ||
	       !strcmp(name, "manifest.json");
}

/*
 * Reads the tarball's headers only (data skipped): one with an image archive's marker at its
 * top (archive_marker) makes it an image archive, else a tarball with entries is a root
 * filesystem. 1 for a rootfs, 0 for an image archive (or no entries), -EBADMSG with *err for
 * what is no tarball. fd is rewound.
 */
static int is_rootfs_tar(struct import *im, int fd)
{
	struct archive *a = open_tar(im, fd);
	struct archive_entry *e;
	int r = 0;

	if (!a)
		return -EBADMSG;
	for (size_t k = 0;; k++) {
		char name[PATH_MAX];
		const char *raw;
		int h = archive_read_next_header(a, &e);

		if (h == ARCHIVE_EOF) {
			r = k > 0;
			break;
		}
		if (h < ARCHIVE_WARN) {
			r = isola_err_set(im->err, EBADMSG, "invalid", "not a tarball: %s",
					  archive_error_string(a));
			goto out;
		}
		/* UNTRUSTED: only compared with the names image archives use. */
		raw = archive_entry_pathname(e);
		if (raw && extract_norm_path(raw, name, sizeof(name)) == 0 && archive_marker(name))
			break;
	}
out:
	archive_read_free(a);
	if (lseek(fd, 0, SEEK_SET) < 0)
		r = isola_err_sys(im->err, errno, NULL, "rewind the tarball");
	return r;
}

/*
 * Adds the regular file dir/rel as blob `rel`. Missing: 0. With digest (the file's sha256,
 * verified by the caller) the file is moved into blobs/ and not read; otherwise it is
 * hard-linked there and hashed.
 */
static int link_file(struct import *im, int dirfd, const char *rel, const char *digest)
{
	struct sha256_ctx h;
	cleanup_fd int fd = openat(dirfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct blob *b;
	char file[32];
	struct stat st;
	int64_t n;

	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 || fstat(fd, &st) < 0)
		return isola_err_sys(im->err, errno, NULL, "open `%s`", rel);
	if (!S_ISREG(st.st_mode))
		return 0;
	if (add_blob(im, rel, NULL) < 0)
		return -ENOMEM;
	b = &im->v[im->n - 1];
	snprintf(file, sizeof(file), "%zu", im->n - 1);
	if (digest) {
		/* Moved, not linked: when the import removes blobs/ before its syncfs, the bytes
		 * of a blob still only in the page cache are never written to disk. */
		if (renameat(dirfd, rel, im->blobsfd, file) < 0)
			return isola_err_sys(im->err, errno, NULL, "move `%s` into the import",
					     rel);
		snprintf(b->sha, sizeof(b->sha), "%s", digest);
		b->size = (uint64_t)st.st_size;
		return 0;
	}
	if (linkat(dirfd, rel, im->blobsfd, file, 0) < 0)
		return isola_err_sys(im->err, errno, NULL, "link `%s` into the import", rel);
	sha256_init(&h);
	n = images_sha256_fd(&h, fd, UINT64_MAX);
	if (n < 0)
		return isola_err_sys(im->err, (int)-n, NULL, "read `%s`", rel);
	b->size = (uint64_t)n;
	images_sha256_hex(&h, b->sha);
	return 0;
}

/* The directory form of unpack_outer: an OCI layout on disk (a pull's spool), whose
 * blobs/sha256/<hex> hold what their names say and are moved (see images_import_dir). */
static int load_dir(struct import *im, const char *dir)
{
	cleanup_fd int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cleanup_free char(*names)[65] = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	char sub[PATH_MAX];
	DIR *bd;
	int r;

	if (dfd < 0)
		return isola_err_sys(im->err, errno, NULL, "open `%s`", dir);
	if ((r = link_file(im, dfd, "oci-layout", NULL)) < 0 ||
	    (r = link_file(im, dfd, "index.json", NULL)) < 0)
		return r;
	snprintf(sub, sizeof(sub), "%s/blobs/sha256", dir);
	bd = opendir(sub);
	if (!bd)
		return isola_err_sys(im->err, errno, NULL, "open `%s`", sub);
	/* The names first, the moves after: no rename while the directory is being read. */
	while ((de = readdir(bd))) {
		if (strlen(de->d_name) != 64 || !is_hex64(de->d_name))
			continue; /* ".", "..", partial downloads */
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char(*nv)[65] = ncap > IMAGES_MAX_OUTER ? NULL : realloc(names, ncap * 65);

			if (!nv) {
				closedir(bd);
				return ncap > IMAGES_MAX_OUTER
					       ? isola_err_set(im->err, EFBIG, "too_large",
							       "`%s`: too many blobs", sub)
					       : isola_err_set(im->err, ENOMEM, "internal",
							       "out of memory");
			}
			names = nv;
			cap = ncap;
		}
		memcpy(names[n++], de->d_name, 65);
	}
	closedir(bd);
	for (size_t i = 0; r == 0 && i < n; i++) {
		char rel[128];

		snprintf(rel, sizeof(rel), "blobs/sha256/%s", names[i]);
		r = link_file(im, dfd, rel, names[i]);
	}
	return r;
}

/* Finds a regular outer file by name, following up to 8 links. -1 when missing. */
static ssize_t find_blob(struct import *im, const char *name)
{
	for (int hop = 0; hop < 8; hop++) {
		ssize_t found = -1;

		for (size_t i = 0; i < im->n; i++)
			if (!strcmp(im->v[i].name, name))
				found = (ssize_t)i; /* the last entry of a name wins, as in tar */
		if (found < 0 || !im->v[found].link)
			return found;
		name = im->v[found].link;
	}
	return -1;
}

/* Checks a blob against an expected sha256 (hex) and size (-1: any). */
static int verify(struct import *im, ssize_t i, const char *hex, int64_t size, const char *what)
{
	if (size >= 0 && im->v[i].size != (uint64_t)size)
		return isola_err_set(im->err, EBADMSG, "invalid",
				     "%s sha256:%.12s…: size %llu, descriptor says %lld", what, hex,
				     (unsigned long long)im->v[i].size, (long long)size);
	if (strcmp(im->v[i].sha, hex))
		return isola_err_set(im->err, EBADMSG, "invalid",
				     "%s sha256:%.12s…: digest mismatch", what, hex);
	return 0;
}

static int open_blob(struct import *im, ssize_t i)
{
	char file[32];

	snprintf(file, sizeof(file), "%zd", i);
	return openat(im->blobsfd, file, O_RDONLY | O_CLOEXEC);
}

/* Parses blob i as JSON (capped). NULL with *err set on failure. */
static json_t *load_json(struct import *im, ssize_t i, const char *what)
{
	cleanup_fd int fd = -1;
	cleanup_free char *buf = NULL;
	json_error_t jerr;
	json_t *j;

	if (i < 0) {
		isola_err_set(im->err, EBADMSG, "invalid", "%s: missing from the tarball", what);
		return NULL;
	}
	if (im->v[i].size > IMAGES_MAX_JSON) {
		isola_err_set(im->err, EFBIG, "too_large", "%s: larger than %u bytes", what,
			      IMAGES_MAX_JSON);
		return NULL;
	}
	fd = open_blob(im, i);
	buf = malloc(im->v[i].size + 1);
	if (fd < 0 || !buf || util_read_exact(fd, buf, im->v[i].size) < 0) {
		isola_err_set(im->err, EIO, "internal", "%s: read failed", what);
		return NULL;
	}
	/* UNTRUSTED: image JSON; every field is type-checked where it is read. */
	j = json_loadb(buf, im->v[i].size, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		isola_err_set(im->err, EBADMSG, "invalid", "%s: bad JSON: %s", what, jerr.text);
	return j;
}

/* An OCI descriptor: {"mediaType", "digest": "sha256:<hex>", "size"}. */
struct desc {
	char hex[65];	   /* digest, hex part */
	int64_t size;	   /* bytes */
	const char *media; /* mediaType or "" (borrowed from the JSON) */
};

static int parse_desc(struct import *im, json_t *d, struct desc *out, const char *what)
{
	const char *dg = json_string_value(json_object_get(d, "digest"));
	json_t *sz = json_object_get(d, "size");

	out->media = json_string_value(json_object_get(d, "mediaType"));
	if (!out->media)
		out->media = "";
	if (!dg || strncmp(dg, "sha256:", 7) || !is_hex64(dg + 7) || !json_is_integer(sz) ||
	    json_integer_value(sz) < 0)
		return isola_err_set(im->err, EBADMSG, "invalid",
				     "%s: bad descriptor (only sha256 digests are supported)",
				     what);
	memcpy(out->hex, dg + 7, 65);
	out->size = json_integer_value(sz);
	return 0;
}

/* Finds and verifies the blob of a descriptor. */
static ssize_t desc_blob(struct import *im, const struct desc *d, const char *what)
{
	char name[96];
	ssize_t i;

	snprintf(name, sizeof(name), "blobs/sha256/%s", d->hex);
	i = find_blob(im, name);
	if (i < 0)
		return isola_err_set(im->err, EBADMSG, "invalid",
				     "%s sha256:%.12s…: blob missing from the tarball", what,
				     d->hex);
	return verify(im, i, d->hex, d->size, what) < 0 ? -1 : i;
}

const char *images_host_arch(void)
{
	static struct utsname u;

	uname(&u);
	if (!strcmp(u.machine, "x86_64"))
		return "amd64";
	if (!strcmp(u.machine, "aarch64"))
		return "arm64";
	return u.machine;
}

json_t *images_index_pick(json_t *index)
{
	json_t *ms = json_object_get(index, "manifests"), *m;
	size_t i;

	json_array_foreach(ms, i, m)
	{
		json_t *p = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(p, "os"));
		const char *arch = json_string_value(json_object_get(p, "architecture"));

		/* An entry without a platform (a one-image OCI layout) fits if it is alone. */
		if ((!p && json_array_size(ms) == 1) ||
		    (os && arch && !strcmp(os, "linux") && !strcmp(arch, images_host_arch())))
			return m;
	}
	return NULL;
}

/* Picks the manifest for this host from an index: the only one, or the linux/<arch> one. */
static json_t *pick(struct import *im, json_t *index, struct desc *out)
{
	json_t *ms = json_object_get(index, "manifests"), *chosen;

	if (!json_is_array(ms) || json_array_size(ms) == 0) {
		isola_err_set(im->err, EBADMSG, "invalid", "index: no manifests");
		return NULL;
	}
	chosen = images_index_pick(index);
	if (!chosen) {
		isola_err_set(im->err, EBADMSG, "invalid", "index: no manifest for linux/%s",
			      images_host_arch());
		return NULL;
	}
	return parse_desc(im, chosen, out, "manifest") < 0 ? NULL : chosen;
}

/* Reads Env, WorkingDir and User from an image config. */
static int read_config(struct import *im, json_t *cfg)
{
	json_t *c = json_object_get(cfg, "config"), *env, *v;
	const char *user = json_string_value(json_object_get(c, "User"));
	const char *wd = json_string_value(json_object_get(c, "WorkingDir"));
	size_t i;

	/* UNTRUSTED: config strings, checked before they become defaults for every exec. */
	snprintf(im->t->default_user, sizeof(im->t->default_user), "root");
	if (user && *user) {
		if (strlen(user) >= sizeof(im->t->default_user) ||
		    strspn(user,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") !=
			    strlen(user))
			return isola_err_set(im->err, EBADMSG, "invalid", "image config: bad User");
		snprintf(im->t->default_user, sizeof(im->t->default_user), "%s", user);
	}
	im->t->workdir[0] = '\0'; /* no WorkingDir: each user starts in their home */
	if (wd && *wd) {
		if (wd[0] != '/' || strlen(wd) >= sizeof(im->t->workdir) || strstr(wd, "/../") ||
		    strspn(wd, "\n\r\t") || strpbrk(wd, "\n\r"))
			return isola_err_set(im->err, EBADMSG, "invalid",
					     "image config: bad WorkingDir");
		snprintf(im->t->workdir, sizeof(im->t->workdir), "%s", wd);
	}
	env = json_object_get(c, "Env");
	if (env && !json_is_array(env) && !json_is_null(env))
		return isola_err_set(im->err, EBADMSG, "invalid", "image config: Env not an array");
	if (json_array_size(env) > IMAGES_MAX_ENV)
		return isola_err_set(im->err, EFBIG, "too_large", "image config: Env too long");
	json_array_foreach(env, i, v)
	{
		const char *kv = json_string_value(v), *eq;
		char key[256];

		eq = kv ? strchr(kv, '=') : NULL;
		if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key) || strlen(eq) > 32768)
			return isola_err_set(im->err, EBADMSG, "invalid",
					     "image config: bad Env entry %zu", i);
		memcpy(key, kv, (size_t)(eq - kv));
		key[eq - kv] = '\0';
		if (json_object_set_new(im->t->env, key, json_string(eq + 1)) < 0)
			return isola_err_set(im->err, EBADMSG, "invalid",
					     "image config: bad Env entry %zu", i);
	}
	return 0;
}

static int apply_layer(struct import *im, ssize_t i, unsigned k, unsigned n, const char *what)
{
	cleanup_fd int fd = open_blob(im, i);
	char phase[32];

	if (fd < 0)
		return isola_err_sys(im->err, errno, NULL, "layer %s: open", what);
	snprintf(phase, sizeof(phase), "layer %u/%u", k + 1, n);
	return images_layer_apply(im->rootfd, fd, im->v[i].size, what, phase, &im->b, im->cb,
				  im->ud, im->err);
}

static int import_oci(struct import *im)
{
	json_t *index = NULL, *doc = NULL, *cfg = NULL, *layers;
	struct desc d;
	ssize_t i;
	int r = -EBADMSG;

	index = load_json(im, find_blob(im, "index.json"), "index.json");
	if (!index)
		goto out;
	/* An index may point at another index (multi-platform): follow a few levels. */
	for (int depth = 0;; depth++) {
		json_t *src = doc ? doc : index;

		if (depth == 4 || !pick(im, src, &d)) {
			if (depth == 4)
				isola_err_set(im->err, EBADMSG, "invalid", "index nested too deep");
			goto out;
		}
		i = desc_blob(im, &d, "manifest");
		json_decref(doc);
		doc = i < 0 ? NULL : load_json(im, i, "manifest");
		if (!doc)
			goto out;
		if (!json_is_array(json_object_get(doc, "manifests")))
			break;
	}
	snprintf(im->digest, sizeof(im->digest), "sha256:%s", d.hex);
	layers = json_object_get(doc, "layers");
	if (parse_desc(im, json_object_get(doc, "config"), &d, "config") < 0)
		goto out;
	i = desc_blob(im, &d, "config");
	cfg = i < 0 ? NULL : load_json(im, i, "config");
	if (!cfg || read_config(im, cfg) < 0)
		goto out;
	if (!json_is_array(layers) || json_array_size(layers) > IMAGES_MAX_LAYERS) {
		isola_err_set(im->err, EBADMSG, "invalid", "manifest: bad layers");
		goto out;
	}
	im->t->layers = (unsigned)json_array_size(layers);
	for (unsigned k = 0; k < im->t->layers; k++) {
		char what[96];

		if (parse_desc(im, json_array_get(layers, k), &d, "layer") < 0)
			goto out;
		snprintf(what, sizeof(what), "sha256:%.12s…", d.hex);
		if (strstr(d.media, "encrypted")) {
			isola_err_set(im->err, EBADMSG, "invalid", "layer %s: encrypted", what);
			goto out;
		}
		i = desc_blob(im, &d, "layer");
		if (i < 0 || apply_layer(im, i, k, im->t->layers, what) < 0)
			goto out;
	}
	r = 0;
out:
	json_decref(index);
	json_decref(doc);
	json_decref(cfg);
	return r;
}

/* sha256 of a layer after decompression (docker-archive diff_ids), capped at the budget. */
static int diff_id(struct import *im, ssize_t i, char hex[65], const char *what)
{
	cleanup_fd int fd = open_blob(im, i);
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	struct sha256_ctx h;
	uint64_t total = 0;
	int r = 0;

	if (!a || fd < 0) {
		if (a)
			archive_read_free(a);
		return isola_err_set(im->err, EIO, "internal", "layer %s: open", what);
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	sha256_init(&h);
	if (archive_read_open_fd(a, fd, 64 * 1024) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		r = -EBADMSG;
	} else {
		for (;;) {
			char buf[64 * 1024];
			la_ssize_t n = archive_read_data(a, buf, sizeof(buf));

			if (n <= 0) {
				r = n < 0 ? -EBADMSG : 0;
				break;
			}
			total += (uint64_t)n;
			if (total > im->b.max_bytes) {
				r = -EFBIG;
				break;
			}
			sha256_update(&h, (size_t)n, (const uint8_t *)buf);
		}
	}
	if (r < 0)
		isola_err_set(im->err, -r, r == -EFBIG ? "too_large" : "invalid", "layer %s: %s",
			      what,
			      r == -EFBIG ? "bigger than the size cap" : archive_error_string(a));
	archive_read_free(a);
	images_sha256_hex(&h, hex);
	return r;
}

static int import_docker(struct import *im)
{
	json_t *m = NULL, *cfg = NULL, *e, *layers, *diffs;
	const char *cname;
	char hex[65];
	ssize_t i;
	int r = -EBADMSG;

	m = load_json(im, find_blob(im, "manifest.json"), "manifest.json");
	if (!m)
		goto out;
	e = json_array_get(m, 0); /* the first image of the archive */
	cname = json_string_value(json_object_get(e, "Config"));
	layers = json_object_get(e, "Layers");
	if (!cname || !json_is_array(layers) || json_array_size(layers) > IMAGES_MAX_LAYERS) {
		isola_err_set(im->err, EBADMSG, "invalid", "manifest.json: no Config or Layers");
		goto out;
	}
	i = find_blob(im, cname);
	/* Docker names the config after its digest: "<hex>.json" or "blobs/sha256/<hex>". */
	if (i >= 0) {
		const char *base = strrchr(cname, '/') ? strrchr(cname, '/') + 1 : cname;

		snprintf(hex, sizeof(hex), "%.64s", base);
		if (strlen(base) >= 64 && is_hex64(hex) &&
		    (!strcmp(base + 64, ".json") || !base[64]) &&
		    verify(im, i, hex, -1, "config") < 0)
			goto out;
	}
	cfg = load_json(im, i, "config");
	if (!cfg || read_config(im, cfg) < 0)
		goto out;
	snprintf(im->digest, sizeof(im->digest), "sha256:%s", im->v[i].sha);
	diffs = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
	if (!json_is_array(diffs) || json_array_size(diffs) != json_array_size(layers)) {
		isola_err_set(im->err, EBADMSG, "invalid",
			      "config: rootfs.diff_ids does not match Layers");
		goto out;
	}
	im->t->layers = (unsigned)json_array_size(layers);
	for (unsigned k = 0; k < im->t->layers; k++) {
		const char *ln = json_string_value(json_array_get(layers, k));
		const char *want = json_string_value(json_array_get(diffs, k));
		char what[PATH_MAX + 8];

		if (!ln || !want || strncmp(want, "sha256:", 7) || !is_hex64(want + 7)) {
			isola_err_set(im->err, EBADMSG, "invalid", "manifest.json: bad layer %u",
				      k);
			goto out;
		}
		snprintf(what, sizeof(what), "`%.200s`", ln);
		i = find_blob(im, ln);
		if (i < 0) {
			isola_err_set(im->err, EBADMSG, "invalid",
				      "layer %s: missing from the tarball", what);
			goto out;
		}
		/* diff_ids are digests of the uncompressed tar: check before unpacking. */
		if (diff_id(im, i, hex, what) < 0)
			goto out;
		if (strcmp(hex, want + 7)) {
			isola_err_set(im->err, EBADMSG, "invalid",
				      "layer %s sha256:%.12s…: digest mismatch", what, want + 7);
			goto out;
		}
		if (apply_layer(im, i, k, im->t->layers, what) < 0)
			goto out;
	}
	r = 0;
out:
	json_decref(m);
	json_decref(cfg);
	return r;
}

/* Imports a root filesystem tarball (fd at offset 0) as the template's only layer. */
static int import_rootfs(struct import *im, int fd, uint64_t size)
{
	snprintf(im->t->source, sizeof(im->t->source), "rootfs");
	im->t->layers = 1;
	progress(im, "unpack", size, size);
	return images_layer_apply(im->rootfd, fd, size, "rootfs tarball", "layer 1/1", &im->b,
				  im->cb, im->ud, im->err);
}

/* Fills tmp/ from path (a tarball, or with is_dir an OCI layout directory) and imports it. */
static int run(struct import *im, const char *src_path, bool is_dir)
{
	unsigned char md[crypto_hash_sha256_BYTES], salt[16];
	crypto_hash_sha256_state h;
	cleanup_fd int fd = -1;
	char path[PATH_MAX];
	struct stat st = {0};
	int r, rootfs = 0;

	if (!is_dir) {
		fd = open(src_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0)
			return isola_err_sys(im->err, errno, NULL, "open `%s`", src_path);
		if (!S_ISREG(st.st_mode))
			return isola_err_set(im->err, EINVAL, "invalid", "`%s`: not a regular file",
					     src_path);
	}
	snprintf(path, sizeof(path), "%s/blobs", im->tmp);
	if (mkdir(path, 0700) < 0 ||
	    (im->blobsfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return isola_err_sys(im->err, errno, NULL, "create `%s`", path);
	snprintf(path, sizeof(path), "%s/rootfs", im->tmp);
	if (mkdir(path, 0755) < 0 || chmod(path, 0755) < 0 ||
	    (im->rootfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return isola_err_sys(im->err, errno, NULL, "create `%s`", path);
	if (is_dir)
		r = load_dir(im, src_path);
	else if ((rootfs = is_rootfs_tar(im, fd)) != 0)
		r = rootfs < 0 ? rootfs : import_rootfs(im, fd, (uint64_t)st.st_size);
	else
		r = unpack_outer(im, fd, (uint64_t)st.st_size);
	if (r < 0)
		return r;
	if (rootfs) {
		/* the digest of a rootfs tarball is not computed: the id's salt makes it unique */
		snprintf(im->digest, sizeof(im->digest), "rootfs");
	} else if (find_blob(im, "oci-layout") >= 0 && find_blob(im, "index.json") >= 0) {
		if (!im->t->source[0])
			snprintf(im->t->source, sizeof(im->t->source), "oci");
		r = import_oci(im);
	} else if (find_blob(im, "manifest.json") >= 0) {
		snprintf(im->t->source, sizeof(im->t->source), "docker-archive");
		r = import_docker(im);
	} else {
		r = isola_err_set(im->err, EBADMSG, "invalid",
				  "neither an OCI layout (oci-layout, index.json), a docker "
				  "archive (manifest.json) nor a root filesystem tarball");
	}
	if (r < 0)
		return r;
	progress(im, "commit", 0, 0);
	close(im->blobsfd);
	im->blobsfd = -1;
	snprintf(path, sizeof(path), "%s/blobs", im->tmp);
	r = util_rm_rf(path);
	if (r < 0)
		return isola_err_sys(im->err, -r, NULL, "remove `%s`", path);
	if (fchmod(im->rootfd, 0755) < 0 || fchown(im->rootfd, 0, 0) < 0 || syncfs(im->rootfd) < 0)
		return isola_err_sys(im->err, errno, NULL, "finish `%s/rootfs`", im->tmp);
	im->t->size_bytes = images_du(im->rootfd);
	im->t->skipped_entries = im->b.skipped;
	im->t->created_at = util_wall_time();
	/* A fresh id per import: a template removed and imported again under the same name
	 * never shares a directory with what an old sandbox may still reference. */
	if (util_random(salt, sizeof(salt)) < 0)
		return isola_err_set(im->err, EIO, "internal", "getrandom failed");
	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const unsigned char *)im->name, strlen(im->name) + 1);
	crypto_hash_sha256_update(&h, (const unsigned char *)im->digest, strlen(im->digest) + 1);
	crypto_hash_sha256_update(&h, salt, sizeof(salt));
	crypto_hash_sha256_final(&h, md);
	images_hex(md, sizeof(md), im->t->id);
	return 0;
}

/* An import of a reserved name; drops the reservation whatever happens. */
static int import_reserved(const char *name, const char *tdir, const char *src_path, bool is_dir,
			   const char *source, const char *origin, images_progress_fn cb, void *ud,
			   struct template_info *out, struct isola_err **err)
{
	struct template_info t = {0};
	struct import im = {
		.name = name,
		.blobsfd = -1,
		.rootfd = -1,
		.cb = cb,
		.ud = ud,
		.t = &t,
		.err = err,
	};
	int r;

	images_get_limits(&im.b);
	snprintf(t.name, sizeof(t.name), "%s", name);
	snprintf(t.source, sizeof(t.source), "%s", source ? source : "");
	snprintf(t.origin, sizeof(t.origin), "%s", origin ? origin : "");
	t.env = json_object();
	if (!t.env) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out_unreserve;
	}
	if (snprintf(im.tmp, sizeof(im.tmp), "%s/.tmp-XXXXXX", tdir) >= (int)sizeof(im.tmp) ||
	    !mkdtemp(im.tmp)) {
		r = isola_err_sys(err, errno, NULL, "mkdtemp in `%s`", tdir);
		goto out_unreserve;
	}
	r = run(&im, src_path, is_dir);
	if (im.blobsfd >= 0)
		close(im.blobsfd);
	if (im.rootfd >= 0)
		close(im.rootfd);
	for (size_t i = 0; i < im.n; i++) {
		free(im.v[i].name);
		free(im.v[i].link);
	}
	free(im.v);
	if (r < 0) {
		util_rm_rf(im.tmp);
		isola_err_wrap(err, "import template `%s`", name);
		goto out_unreserve;
	}
	r = images_commit(im.tmp, &t, err); /* drops the reservation, even on failure */
	if (r < 0) {
		util_rm_rf(im.tmp);
		isola_err_wrap(err, "import template `%s`", name);
		template_info_fini(&t);
		return r;
	}
	if (out)
		*out = t;
	else
		template_info_fini(&t);
	return 0;
out_unreserve:
	images_unreserve(name);
	template_info_fini(&t);
	return r;
}

int images_import(const char *name, const char *tar_path, images_progress_fn cb, void *ud,
		  struct template_info *out, struct isola_err **err)
{
	char tdir[PATH_MAX];
	int r = images_reserve(name, tdir, err);

	if (r < 0)
		return r;
	return import_reserved(name, tdir, tar_path, false, NULL, NULL, cb, ud, out, err);
}

int images_import_dir(const char *name, const char *dir, const char *source, const char *origin,
		      images_progress_fn cb, void *ud, struct template_info *out,
		      struct isola_err **err)
{
	char tdir[PATH_MAX];
	const char *slash = strrchr(dir, '/');

	/* dir is templates/.pull-<hash>: its parent is the templates dir */
	if (!slash || (size_t)(slash - dir) >= sizeof(tdir)) {
		images_unreserve(name);
		return isola_err_set(err, EINVAL, "internal", "bad layout dir `%s`", dir);
	}
	snprintf(tdir, sizeof(tdir), "%.*s", (int)(slash - dir), dir);
	return import_reserved(name, tdir, dir, true, source, origin, cb, ud, out, err);
}
