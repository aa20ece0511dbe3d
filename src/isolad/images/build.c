/* SPDX-License-Identifier: Apache-2.0 */
/* build: a template under construction by `template build` (tmpdir, hidden entry, layers, commit). */
#include "images-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "ext4.h"

struct images_build {
	char name[64];		  /* the template being built (reserved) */
	char tmpdir[PATH_MAX];	  /* templates/.tmp-XXXXXX */
	int rootfd;		  /* tmpdir/rootfs */
	struct template_info t;	  /* the hidden entry: id, rootfs, base's binds and config */
	struct images_budget bud; /* limits over all layers of the build */
	bool registered;	  /* t is in the table */
};

const struct template_info *images_build_info(const struct images_build *b)
{
	return &b->t;
}

int images_build_cache_dir(char *out, struct isola_err **err)
{
	char tdir[PATH_MAX];
	int r;

	/* images_reserve's copy of the templates dir, without reserving a name. */
	r = images_templates_dir(tdir);
	if (r < 0)
		return isola_err_set(err, -r, "unavailable", "templates: not initialised");
	if (snprintf(out, PATH_MAX, "%s/.build-cache", tdir) >= PATH_MAX)
		return isola_err_set(err, ENAMETOOLONG, "internal", "templates dir too long");
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return isola_err_sys(err, errno, "internal", "mkdir `%s`", out);
	return 0;
}

/* Writes the tree at src (a template's rootfs: written by isolad, never followed) to out_fd
 * as a pax archive with names relative to src. */
static int tree_tar(const char *src, int out_fd, struct isola_err **err)
{
	struct archive *d = archive_read_disk_new(), *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t sl = strlen(src);
	char *buf = malloc(1 << 16);
	int r = 0;

	if (!d || !w || !e || !buf) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	archive_read_disk_set_symlink_physical(d);
	archive_read_disk_set_behavior(
		d, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
			   ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS);
	archive_write_set_format_pax_restricted(w);
	if (archive_read_disk_open(d, src) != ARCHIVE_OK ||
	    archive_write_open_fd(w, out_fd) != ARCHIVE_OK) {
		r = isola_err_set(err, EIO, "internal", "copy `%s`: %s", src,
				  archive_error_string(d) ? archive_error_string(d)
							  : archive_error_string(w));
		goto out;
	}
	for (;;) {
		const char *p;
		char rel[PATH_MAX];
		int h;

		archive_entry_clear(e);
		h = archive_read_next_header2(d, e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			r = isola_err_set(err, EIO, "internal", "copy `%s`: %s", src,
					  archive_error_string(d));
			goto out;
		}
		archive_read_disk_descend(d);
		p = archive_entry_pathname(e);
		if (!p || strncmp(p, src, sl) ||
		    snprintf(rel, sizeof(rel), ".%s", p + sl) >= (int)sizeof(rel))
			continue;
		archive_entry_copy_pathname(e, rel);
		archive_entry_set_size(
			e, archive_entry_filetype(e) == AE_IFREG ? archive_entry_size(e) : 0);
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = isola_err_set(err, EIO, "internal", "copy `%s`: %s", rel,
					  archive_error_string(w));
			goto out;
		}
		if (archive_entry_filetype(e) != AE_IFREG)
			continue;
		for (;;) {
			la_ssize_t n = archive_read_data(d, buf, 1 << 16);

			if (n == 0)
				break;
			if (n < 0 || archive_write_data(w, buf, (size_t)n) != n) {
				r = isola_err_set(err, EIO, "internal", "copy `%s`: %s", rel,
						  n < 0 ? archive_error_string(d)
							: archive_error_string(w));
				goto out;
			}
		}
	}
	if (archive_write_close(w) != ARCHIVE_OK)
		r = isola_err_set(err, EIO, "internal", "copy `%s`: %s", src,
				  archive_error_string(w));
out:
	if (d)
		archive_read_free(d);
	if (w)
		archive_write_free(w);
	archive_entry_free(e);
	free(buf);
	return r;
}

int images_build_begin(const char *name, const char *base, struct images_build **out,
		       struct isola_err **err)
{
	struct images_build *b = calloc(1, sizeof(*b));
	char tdir[PATH_MAX], path[PATH_MAX + 16];
	unsigned char rnd[32];
	cleanup_fd int tar = -1;
	int r;

	if (!b)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	b->rootfd = -1;
	r = images_get(base, &b->t, err);
	if (r < 0) {
		free(b);
		return isola_err_wrap(err, "FROM");
	}
	r = images_reserve(name, tdir, err);
	if (r < 0) {
		template_info_fini(&b->t);
		free(b);
		return r;
	}
	snprintf(b->name, sizeof(b->name), "%s", name);
	images_get_limits(&b->bud);
	if (images_path(b->tmpdir, "%s/.tmp-XXXXXX", tdir) < 0 || !mkdtemp(b->tmpdir)) {
		r = isola_err_sys(err, errno, "internal", "mkdtemp in `%s`", tdir);
		b->tmpdir[0] = '\0';
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/rootfs", b->tmpdir);
	if (mkdir(path, 0755) < 0 ||
	    (b->rootfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = isola_err_sys(err, errno, "internal", "mkdir `%s`", path);
		goto fail;
	}
	/* The base's files, through the same layer code as every image layer. */
	snprintf(path, sizeof(path), "%s/base.tar", b->tmpdir);
	tar = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (tar < 0) {
		r = isola_err_sys(err, errno, "internal", "create `%s`", path);
		goto fail;
	}
	unlink(path);
	r = tree_tar(b->t.rootfs, tar, err);
	if (r == 0 && lseek(tar, 0, SEEK_SET) < 0)
		r = isola_err_sys(err, errno, "internal", "seek `%s`", path);
	if (r == 0)
		r = images_layer_apply(b->rootfd, tar, 0, "FROM", "layer", &b->bud, NULL, NULL,
				       err);
	if (r < 0)
		goto fail;
	/* The hidden entry: a fresh id, this rootfs, the base's binds and defaults. */
	util_random(rnd, sizeof(rnd));
	images_hex(rnd, sizeof(rnd), b->t.id);
	snprintf(b->t.name, sizeof(b->t.name), IMAGES_BUILD_PREFIX "%.12s", b->t.id);
	if (snprintf(b->t.rootfs, sizeof(b->t.rootfs), "%s/rootfs", b->tmpdir) >=
	    (int)sizeof(b->t.rootfs)) {
		r = isola_err_set(err, ENAMETOOLONG, "internal", "`%s`: path too long", b->tmpdir);
		goto fail;
	}
	r = images_entry_add(&b->t);
	if (r < 0) {
		r = isola_err_set(err, -r, "internal", "register build of `%s`", name);
		goto fail;
	}
	b->registered = true;
	*out = b;
	return 0;
fail:
	images_build_abort(b);
	return r;
}

uint64_t images_build_room(const struct images_build *b)
{
	return b->bud.max_bytes > b->bud.bytes ? b->bud.max_bytes - b->bud.bytes : 0;
}

int images_build_apply(struct images_build *b, const char *path, bool upper, const char *what,
		       struct isola_err **err)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "open `%s`", path);
	/* The microvm tier's image of the template-so-far (images/ext4.c, made at a microvm
	 * RUN's create) no longer shows these files: drop it, so the next RUN gets a new one
	 * rather than a stale cached image. */
	for (unsigned binds = 0; binds < 2; binds++) {
		char img[PATH_MAX + 32];

		snprintf(img, sizeof(img), "%s/%s", b->tmpdir, images_ext4_file(binds));
		if (unlink(img) < 0 && errno != ENOENT)
			return isola_err_sys(err, errno, "internal", "remove the stale `%s`", img);
	}
	b->t.layers++;
	return upper ? images_layer_apply_upper(b->rootfd, fd, what, &b->bud, err)
		     : images_layer_apply(b->rootfd, fd, 0, what, "layer", &b->bud, NULL, NULL,
					  err);
}

int images_build_commit(struct images_build *b, const struct template_info *cfg,
			struct template_info *out, struct isola_err **err)
{
	struct template_info t;
	unsigned char rnd[16], h[32];
	crypto_hash_sha256_state st;
	int r;

	if (b->registered)
		images_entry_drop(b->t.id);
	b->registered = false;
	memset(&t, 0, sizeof(t));
	/* The id: sha256(name, Dockerfile digest, 16 random bytes), as imports do. */
	util_random(rnd, sizeof(rnd));
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const unsigned char *)b->name, strlen(b->name) + 1);
	crypto_hash_sha256_update(&st, (const unsigned char *)cfg->origin, strlen(cfg->origin));
	crypto_hash_sha256_update(&st, rnd, sizeof(rnd));
	crypto_hash_sha256_final(&st, h);
	images_hex(h, sizeof(h), t.id);
	snprintf(t.name, sizeof(t.name), "%s", b->name);
	snprintf(t.source, sizeof(t.source), "%s", cfg->source);
	snprintf(t.origin, sizeof(t.origin), "%s", cfg->origin);
	snprintf(t.default_user, sizeof(t.default_user), "%s", cfg->default_user);
	snprintf(t.workdir, sizeof(t.workdir), "%s", cfg->workdir);
	memcpy(t.binds, b->t.binds, sizeof(t.binds));
	t.n_binds = b->t.n_binds;
	t.layers = b->t.layers;
	t.skipped_entries = b->bud.skipped;
	t.created_at = util_wall_time();
	t.env = cfg->env ? json_deep_copy(cfg->env) : json_object();
	t.config = cfg->config ? json_deep_copy(cfg->config) : NULL;
	t.size_bytes = images_du(b->rootfd);
	if (syncfs(b->rootfd) < 0)
		log_warn("build `%s`: syncfs: %s", b->name, strerror(errno));
	close(b->rootfd);
	b->rootfd = -1;
	r = images_commit(b->tmpdir, &t, err);
	if (r == 0) {
		b->tmpdir[0] = '\0';
		b->name[0] = '\0'; /* the commit dropped the reservation */
		if (out)
			r = images_info_copy(out, &t) < 0
				    ? isola_err_set(err, ENOMEM, "internal", "out of memory")
				    : 0;
	} else {
		b->name[0] = '\0';
	}
	template_info_fini(&t);
	images_build_abort(b);
	return r;
}

void images_build_abort(struct images_build *b)
{
	if (!b)
		return;
	if (b->registered)
		images_entry_drop(b->t.id);
	if (b->rootfd >= 0)
		close(b->rootfd);
	if (b->tmpdir[0])
		util_rm_rf(b->tmpdir);
	if (b->name[0])
		images_unreserve(b->name);
	template_info_fini(&b->t);
	free(b);
}

bool images_build_has_dir(const struct images_build *b, const char *path)
{
	char rel[PATH_MAX];
	int fd;

	if (extract_norm_path(path, rel, sizeof(rel)) == -ENOENT)
		return true; /* the root */
	fd = extract_open_dir(b->rootfd, rel);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}
