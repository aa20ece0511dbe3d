/* SPDX-License-Identifier: Apache-2.0 */
/* images: the template table, manifests on disk, lookup, listing and removal. */
#include "images.h"
#include "images-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/extract.h"
#include "../../common/util.h"
#include "ext4.h"

#define MAX_PENDING 32 /* imports running at once */

static struct {
	pthread_mutex_t lock;		 /* guards everything below */
	bool up;			 /* between images_init and images_shutdown */
	char tdir[400];			 /* <state_dir>/templates, absolute */
	struct template_info *v;	 /* the templates, sorted by name; env owned */
	size_t n, cap;			 /* used and allocated entries of v */
	char pending[MAX_PENDING][64];	 /* names of imports in progress ("" = free) */
	uint64_t max_bytes, max_entries; /* import caps */
} g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.max_bytes = 64ull << 30,
	.max_entries = 1000000,
};

void template_info_fini(struct template_info *t)
{
	if (!t)
		return;
	json_decref(t->env);
	t->env = NULL;
	json_decref(t->config);
	t->config = NULL;
}

bool images_name_is_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 63 || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

void images_hex(const unsigned char *in, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[in[i] >> 4];
		out[2 * i + 1] = d[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int64_t images_sha256_fd(struct sha256_ctx *h, int fd, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		unsigned char buf[64 * 1024];
		ssize_t n = read(fd, buf, len - done < sizeof(buf) ? len - done : sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			if (len != UINT64_MAX)
				return -EIO;
			break;
		}
		sha256_update(h, (size_t)n, buf);
		done += (uint64_t)n;
	}
	return (int64_t)done;
}

void images_sha256_hex(struct sha256_ctx *h, char hex[65])
{
	unsigned char md[SHA256_DIGEST_SIZE];

	sha256_digest(h, sizeof(md), md);
	images_hex(md, sizeof(md), hex);
}

void images_set_limits(uint64_t max_bytes, uint64_t max_entries)
{
	pthread_mutex_lock(&g.lock);
	if (max_bytes)
		g.max_bytes = max_bytes;
	if (max_entries)
		g.max_entries = max_entries;
	pthread_mutex_unlock(&g.lock);
}

void images_get_limits(struct images_budget *b)
{
	pthread_mutex_lock(&g.lock);
	b->max_bytes = g.max_bytes;
	b->max_entries = g.max_entries;
	pthread_mutex_unlock(&g.lock);
}

int images_info_copy(struct template_info *dst, const struct template_info *src)
{
	*dst = *src;
	dst->env = src->env ? json_deep_copy(src->env) : json_object();
	dst->config = src->config ? json_deep_copy(src->config) : NULL;
	return dst->env && (dst->config || !src->config) ? 0 : -ENOMEM;
}

uint64_t images_du(int dfd)
{
	uint64_t sum = 0;
	struct dirent *de;
	DIR *d;
	int fd;

	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		sum += (uint64_t)st.st_blocks * 512 / (st.st_nlink ? st.st_nlink : 1);
		if (S_ISDIR(st.st_mode)) {
			cleanup_fd int cfd = openat(dirfd(d), de->d_name,
						    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (cfd >= 0)
				sum += images_du(cfd);
		}
	}
	closedir(d);
	return sum;
}

int images_manifest_write(const char *dir, const struct template_info *t)
{
	char path[PATH_MAX];
	json_t *m, *binds, *env;
	char *text;
	int r;

	env = t->env ? json_incref(t->env) : json_object();
	binds = json_array();
	for (unsigned i = 0; binds && i < t->n_binds; i++)
		json_array_append_new(binds, json_pack("{s:s,s:s}", "src", t->binds[i].src, "dst",
						       t->binds[i].dst));
	m = json_pack("{s:i,s:s,s:s,s:s,s:f,s:I,s:i,s:I,s:s,s:s,s:o,s:o,s:s}", "version", 1, "id",
		      t->id, "name", t->name, "source", t->source, "created_at", t->created_at,
		      "size_bytes", (json_int_t)t->size_bytes, "layers", (int)t->layers,
		      "skipped_entries", (json_int_t)t->skipped_entries, "default_user",
		      t->default_user, "workdir", t->workdir, "env", env, "binds", binds, "rootfs",
		      "rootfs");
	if (m && t->origin[0])
		json_object_set_new(m, "origin", json_string(t->origin));
	if (m && t->config)
		json_object_set_new(m, "config", json_deep_copy(t->config));
	if (!m)
		return -ENOMEM;
	text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(m);
	if (!text)
		return -ENOMEM;
	if (snprintf(path, sizeof(path), "%s/%s", dir, IMAGES_MANIFEST) >= (int)sizeof(path))
		r = -ENAMETOOLONG;
	else
		r = util_write_file_atomic(path, text, strlen(text), 0644);
	free(text);
	return r;
}

static bool copy_str(char *dst, size_t sz, json_t *v)
{
	const char *s = json_string_value(v);

	if (!s || strlen(s) >= sz)
		return false;
	memcpy(dst, s, strlen(s) + 1);
	return true;
}

/* Loads templates/<id>/manifest.json. The file is ours, but a disk can hold anything: every
 * field is checked before use. -EBADMSG when malformed. */
static int manifest_load(const char *id, struct template_info *t)
{
	char path[PATH_MAX];
	cleanup_free char *text = NULL;
	json_t *m, *binds, *env, *v;
	const char *k;
	size_t len, i;
	int r;

	memset(t, 0, sizeof(*t));
	if (images_path(path, "%s/%s/%s", g.tdir, id, IMAGES_MANIFEST) < 0)
		return -ENAMETOOLONG;
	r = util_read_file(path, IMAGES_MAX_JSON, &text, &len);
	if (r < 0)
		return r;
	/* UNTRUSTED: the manifest; validated field by field below. */
	m = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!m)
		return -EBADMSG;
	r = -EBADMSG;
	if (!copy_str(t->id, sizeof(t->id), json_object_get(m, "id")) || strcmp(t->id, id) ||
	    !copy_str(t->name, sizeof(t->name), json_object_get(m, "name")) ||
	    !images_name_is_valid(t->name) ||
	    !copy_str(t->source, sizeof(t->source), json_object_get(m, "source")) ||
	    !copy_str(t->default_user, sizeof(t->default_user),
		      json_object_get(m, "default_user")) ||
	    !copy_str(t->workdir, sizeof(t->workdir), json_object_get(m, "workdir")))
		goto out;
	if (strcmp(t->source, "host") && strcmp(t->source, "oci") &&
	    strcmp(t->source, "docker-archive") && strcmp(t->source, "rootfs") &&
	    strcmp(t->source, "pull") && strcmp(t->source, "build"))
		goto out;
	/* Optional: manifests written before pulls existed have none. */
	if (json_object_get(m, "origin") &&
	    !copy_str(t->origin, sizeof(t->origin), json_object_get(m, "origin")))
		goto out;
	t->created_at = json_number_value(json_object_get(m, "created_at"));
	t->size_bytes = (uint64_t)json_integer_value(json_object_get(m, "size_bytes"));
	t->layers = (unsigned)json_integer_value(json_object_get(m, "layers"));
	t->skipped_entries = (uint32_t)json_integer_value(json_object_get(m, "skipped_entries"));
	binds = json_object_get(m, "binds");
	if (!json_is_array(binds) || json_array_size(binds) > TIER_MAX_BINDS)
		goto out;
	json_array_foreach(binds, i, v)
	{
		struct tier_bind *b = &t->binds[t->n_binds++];

		if (!copy_str(b->src, sizeof(b->src), json_object_get(v, "src")) ||
		    !copy_str(b->dst, sizeof(b->dst), json_object_get(v, "dst")) ||
		    b->src[0] != '/' || b->dst[0] != '/')
			goto out;
	}
	env = json_object_get(m, "env");
	if (!json_is_object(env))
		goto out;
	json_object_foreach(env, k, v)
	{
		if (!json_is_string(v))
			goto out;
	}
	if (snprintf(t->rootfs, sizeof(t->rootfs), "%s/%s/rootfs", g.tdir, id) >=
	    (int)sizeof(t->rootfs))
		goto out;
	v = json_object_get(m, "config");
	if (v && !json_is_object(v))
		goto out;
	t->config = v ? json_incref(v) : NULL;
	t->env = json_incref(env);
	r = 0;
out:
	json_decref(m);
	return r;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct template_info *)a)->name,
		      ((const struct template_info *)b)->name);
}

/* Adds t (taking its env reference) to the table. Lock held. */
static int table_add(struct template_info *t)
{
	if (g.n == g.cap) {
		size_t ncap = g.cap ? g.cap * 2 : 16;
		struct template_info *nv = realloc(g.v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		g.v = nv;
		g.cap = ncap;
	}
	g.v[g.n++] = *t;
	t->env = NULL;
	qsort(g.v, g.n, sizeof(*g.v), by_name);
	return 0;
}

/* Lock held. */
static struct template_info *table_find(const char *name_or_id)
{
	for (size_t i = 0; i < g.n; i++)
		if (!strcmp(g.v[i].name, name_or_id) || !strcmp(g.v[i].id, name_or_id))
			return &g.v[i];
	return NULL;
}

static void table_clear(void)
{
	for (size_t i = 0; i < g.n; i++)
		template_info_fini(&g.v[i]);
	free(g.v);
	g.v = NULL;
	g.n = g.cap = 0;
}

/* Removes leftovers of crashed imports and removals, then loads every manifest. */
static int scan(struct isola_err **err)
{
	cleanup_fd int tfd = open(g.tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (tfd < 0)
		return isola_err_sys(err, errno, NULL, "open `%s`", g.tdir);
	d = fdopendir(tfd);
	if (!d)
		return isola_err_sys(err, errno, NULL, "read `%s`", g.tdir);
	tfd = -1;
	while ((de = readdir(d))) {
		struct template_info t;
		struct stat st;
		int r;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strncmp(de->d_name, ".pull-", 6))
			continue; /* a pull's spool, kept so the next attempt resumes it */
		if (!strcmp(de->d_name, ".build-cache"))
			continue; /* template build's layer cache (core/build.c), kept */
		if (!strncmp(de->d_name, ".tmp-", 5) || !strncmp(de->d_name, ".rm-", 4)) {
			r = util_rm_rf_at(dirfd(d), de->d_name);
			if (r < 0)
				log_warn("templates: remove leftover `%s/%s`: %s", g.tdir,
					 de->d_name, strerror(-r));
			continue;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		r = manifest_load(de->d_name, &t);
		if (r == -ENOENT) {
			/* Renamed into place, crashed before the manifest: never completed. */
			r = util_rm_rf_at(dirfd(d), de->d_name);
			if (r < 0)
				log_warn("templates: remove unfinished `%s/%s`: %s", g.tdir,
					 de->d_name, strerror(-r));
			continue;
		}
		if (r < 0 || table_find(t.name)) {
			log_warn("templates: skipping `%s/%s`: %s", g.tdir, de->d_name,
				 r < 0 ? "bad manifest" : "duplicate name");
			template_info_fini(&t);
			continue;
		}
		if (table_add(&t) < 0) {
			template_info_fini(&t);
			closedir(d);
			return isola_err_set(err, ENOMEM, "internal",
					     "load templates: out of memory");
		}
	}
	closedir(d);
	return 0;
}

int images_init(const char *state_dir, struct isola_err **err)
{
	char real[PATH_MAX];
	int r;

	if (sodium_init() < 0)
		return isola_err_set(err, EIO, "internal", "templates: libsodium init failed");
	pthread_mutex_lock(&g.lock);
	if (g.up) {
		r = isola_err_set(err, EALREADY, "internal", "templates: already initialised");
		goto out;
	}
	r = util_mkdir_p(state_dir, 0700);
	if (r < 0 || !realpath(state_dir, real)) {
		r = isola_err_sys(err, r < 0 ? -r : errno, NULL, "state dir `%s`", state_dir);
		goto out;
	}
	/* Short enough that <tdir>/<64 hex id>/rootfs fits template_info.rootfs. */
	if (images_path(g.tdir, "%s/templates", real) < 0) {
		r = isola_err_set(err, ENAMETOOLONG, "invalid", "state dir `%s`: path too long",
				  state_dir);
		goto out;
	}
	/* 0700: templates hold setuid binaries from images; no host user may run them. */
	if ((mkdir(g.tdir, 0700) < 0 && errno != EEXIST) || chmod(g.tdir, 0700) < 0) {
		r = isola_err_sys(err, errno, NULL, "create `%s`", g.tdir);
		goto out;
	}
	r = scan(err);
	if (r < 0)
		goto out_clear;
	/* The table's `host` entry (if any) is replaced by what the build writes. */
	for (size_t i = 0; i < g.n; i++) {
		if (!strcmp(g.v[i].id, "host")) {
			template_info_fini(&g.v[i]);
			g.v[i] = g.v[--g.n];
			break;
		}
	}
	{
		cleanup_err struct isola_err *e = NULL;
		char path[PATH_MAX];

		/* On a full or read-only state filesystem the view cannot be refreshed, but the
		 * one built at an earlier start still serves: isolad starts and re-attaches. */
		r = images_host_build(g.tdir, &e);
		if ((r == -ENOSPC || r == -EDQUOT || r == -EROFS) &&
		    images_path(path, "%s/host/%s", g.tdir, IMAGES_MANIFEST) == 0 &&
		    access(path, F_OK) == 0) {
			log_warn("templates: the host template was not refreshed (%s); the one "
				 "already built is used",
				 e ? e->message : strerror(-r));
			r = 0;
		} else if (r < 0) {
			if (err && !*err)
				*err = steal_ptr(&e);
			goto out_clear;
		}
	}
	{
		struct template_info t;

		r = manifest_load("host", &t);
		if (r < 0) {
			r = isola_err_sys(err, -r, "internal", "load `%s/host/%s`", g.tdir,
					  IMAGES_MANIFEST);
			goto out_clear;
		}
		if (table_find("host") || table_add(&t) < 0) {
			template_info_fini(&t);
			r = isola_err_set(err, EEXIST, "internal",
					  "templates: `host` registered twice");
			goto out_clear;
		}
	}
	g.up = true;
	r = 0;
	goto out;
out_clear:
	table_clear();
out:
	pthread_mutex_unlock(&g.lock);
	return r;
}

void images_microvm_prebuild(const char *name)
{
	struct template_info t;
	int r;

	memset(&t, 0, sizeof(t));
	if (images_get(name, &t, NULL) < 0)
		return;
	r = images_ext4_prebuild(t.rootfs, t.binds, t.n_binds);
	if (r < 0)
		log_warn("microvm image of `%s`: background build: %s", name, strerror(-r));
	template_info_fini(&t);
}

void images_shutdown(void)
{
	images_ext4_shutdown(); /* before the table goes: the build thread is ours */
	pthread_mutex_lock(&g.lock);
	table_clear();
	memset(g.pending, 0, sizeof(g.pending));
	g.up = false;
	pthread_mutex_unlock(&g.lock);
}

int images_get(const char *name_or_id, struct template_info *out, struct isola_err **err)
{
	struct template_info *t;
	int r;

	pthread_mutex_lock(&g.lock);
	t = g.up ? table_find(name_or_id) : NULL;
	if (!t)
		r = isola_err_set(err, ENOENT, "not_found", "template `%s` not found", name_or_id);
	else if (images_info_copy(out, t) < 0)
		r = isola_err_set(err, ENOMEM, "internal", "template `%s`: out of memory",
				  name_or_id);
	else
		r = 0;
	pthread_mutex_unlock(&g.lock);
	return r;
}

json_t *images_info_json(const struct template_info *t, bool full)
{
	char path[PATH_MAX];
	struct stat st;
	json_t *j, *binds;

	j = json_pack("{s:s,s:s,s:s,s:s*,s:I,s:n,s:f,s:i,s:s,s:s}", "id", t->id, "name", t->name,
		      "source", t->source, "origin", t->origin[0] ? t->origin : NULL, "size_bytes",
		      (json_int_t)t->size_bytes, "image_size_bytes", "created_at", t->created_at,
		      "layers", (int)t->layers, "default_user", t->default_user, "workdir",
		      t->workdir);
	/* The microvm tier's ext4 image of this template, once built (ext4.c), or its build. */
	if (j && images_path(path, "%s/%s/%s", g.tdir, t->id, images_ext4_file(t->n_binds)) == 0 &&
	    stat(path, &st) == 0) {
		json_object_set_new(j, "image_size_bytes",
				    json_integer((json_int_t)st.st_blocks * 512));
		json_object_set_new(j, "image_build", json_null());
	} else if (j) {
		json_t *b = images_ext4_progress_json(t->id);

		json_object_set_new(j, "image_build", b ? b : json_null());
	}
	if (!j || !full)
		return j;
	binds = json_array();
	for (unsigned i = 0; binds && i < t->n_binds; i++)
		json_array_append_new(binds, json_pack("{s:s,s:s}", "src", t->binds[i].src, "dst",
						       t->binds[i].dst));
	json_object_set_new(j, "binds", binds);
	json_object_set_new(j, "env", t->env ? json_deep_copy(t->env) : json_object());
	json_object_set_new(j, "skipped_entries", json_integer(t->skipped_entries));
	if (t->config)
		json_object_set_new(j, "config", json_deep_copy(t->config));
	return j;
}

int images_list(json_t **out, struct isola_err **err)
{
	json_t *a = json_array();

	if (!a)
		return isola_err_set(err, ENOMEM, "internal", "list templates: out of memory");
	pthread_mutex_lock(&g.lock);
	for (size_t i = 0; i < g.n; i++) {
		const struct template_info *t = &g.v[i];

		if (images_is_build_entry(t->name))
			continue;
		if (json_array_append_new(a, images_info_json(t, false)) < 0) {
			pthread_mutex_unlock(&g.lock);
			json_decref(a);
			return isola_err_set(err, ENOMEM, "internal",
					     "list templates: out of memory");
		}
	}
	pthread_mutex_unlock(&g.lock);
	*out = a;
	return 0;
}

int images_remove(const char *name_or_id, struct isola_err **err)
{
	char from[PATH_MAX], to[PATH_MAX], name[64];
	struct template_info *t;
	cleanup_fd int dfd = -1;
	int r;

	pthread_mutex_lock(&g.lock);
	t = g.up ? table_find(name_or_id) : NULL;
	if (!t) {
		r = isola_err_set(err, ENOENT, "not_found", "template `%s` not found", name_or_id);
		goto out;
	}
	if (!strcmp(t->id, "host")) {
		r = isola_err_set(err, EPERM, "forbidden",
				  "remove template `host`: the host template is built in");
		goto out;
	}
	if (images_is_build_entry(t->name)) {
		r = isola_err_set(err, EBUSY, "conflict",
				  "remove template `%s`: a build in progress uses it", t->name);
		goto out;
	}
	snprintf(name, sizeof(name), "%s", t->name);
	snprintf(from, sizeof(from), "%s/%s", g.tdir, t->id);
	snprintf(to, sizeof(to), "%s/.rm-%s", g.tdir, t->id);
	/* Rename first so a crash never leaves half a template that still looks whole. */
	if (rename(from, to) < 0) {
		r = isola_err_sys(err, errno, NULL, "remove template `%s`: rename `%s`", name,
				  from);
		goto out;
	}
	dfd = open(g.tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		fsync(dfd);
	template_info_fini(t);
	*t = g.v[--g.n];
	qsort(g.v, g.n, sizeof(*g.v), by_name);
	r = 0;
out:
	pthread_mutex_unlock(&g.lock);
	if (r == 0) {
		int q = util_rm_rf(to);

		if (q < 0) /* images_init retries */
			log_warn("remove template `%s`: delete `%s`: %s", name, to, strerror(-q));
	}
	return r;
}

int images_reserve(const char *name, char *tdir, struct isola_err **err)
{
	int r = 0, slot = -1;

	if (!images_name_is_valid(name))
		return isola_err_set(err, EINVAL, "invalid",
				     "template name `%.80s`: use 1-63 of [a-zA-Z0-9._-]", name);
	pthread_mutex_lock(&g.lock);
	if (!g.up) {
		r = isola_err_set(err, ESHUTDOWN, "unavailable", "templates: not initialised");
		goto out;
	}
	if (table_find(name)) {
		r = isola_err_set(err, EEXIST, "conflict", "template `%s` already exists", name);
		goto out;
	}
	for (int i = 0; i < MAX_PENDING; i++) {
		if (!strcmp(g.pending[i], name)) {
			r = isola_err_set(err, EEXIST, "conflict",
					  "template `%s` is already being imported", name);
			goto out;
		}
		if (slot < 0 && !g.pending[i][0])
			slot = i;
	}
	if (slot < 0) {
		r = isola_err_set(err, EBUSY, "unavailable", "templates: too many imports at once");
		goto out;
	}
	snprintf(g.pending[slot], sizeof(g.pending[slot]), "%s", name);
	snprintf(tdir, PATH_MAX, "%s", g.tdir);
out:
	pthread_mutex_unlock(&g.lock);
	return r;
}

static void unreserve_locked(const char *name)
{
	for (int i = 0; i < MAX_PENDING; i++)
		if (!strcmp(g.pending[i], name))
			g.pending[i][0] = '\0';
}

void images_unreserve(const char *name)
{
	pthread_mutex_lock(&g.lock);
	unreserve_locked(name);
	pthread_mutex_unlock(&g.lock);
}

int images_commit(const char *tmpdir, struct template_info *t, struct isola_err **err)
{
	char dir[PATH_MAX];
	struct template_info copy;
	cleanup_fd int dfd = -1;
	int r;

	pthread_mutex_lock(&g.lock);
	if (!g.up) {
		r = isola_err_set(err, ESHUTDOWN, "unavailable",
				  "templates: shut down during import");
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s/%s", g.tdir, t->id);
	if (images_path(t->rootfs, "%s/rootfs", dir) < 0) {
		r = isola_err_set(err, ENAMETOOLONG, "internal", "`%s`: path too long", dir);
		goto out;
	}
	if (rename(tmpdir, dir) < 0) {
		r = isola_err_sys(err, errno, NULL, "rename `%s` to `%s`", tmpdir, dir);
		goto out;
	}
	/* The manifest last: a template dir without one is an unfinished import. */
	r = images_manifest_write(dir, t);
	if (r < 0) {
		util_rm_rf(dir);
		r = isola_err_sys(err, -r, NULL, "write `%s/%s`", dir, IMAGES_MANIFEST);
		goto out;
	}
	dfd = open(g.tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		fsync(dfd);
	if (images_info_copy(&copy, t) < 0 || table_add(&copy) < 0) {
		template_info_fini(&copy);
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	r = 0;
out:
	unreserve_locked(t->name);
	pthread_mutex_unlock(&g.lock);
	return r;
}

bool images_is_build_entry(const char *name)
{
	return !strncmp(name, IMAGES_BUILD_PREFIX, strlen(IMAGES_BUILD_PREFIX));
}

int images_entry_add(const struct template_info *t)
{
	struct template_info copy;
	int r;

	pthread_mutex_lock(&g.lock);
	r = !g.up ? -ESHUTDOWN : images_info_copy(&copy, t);
	if (r == 0) {
		r = table_add(&copy);
		if (r < 0)
			template_info_fini(&copy);
	}
	pthread_mutex_unlock(&g.lock);
	return r;
}

void images_entry_drop(const char *id)
{
	pthread_mutex_lock(&g.lock);
	for (size_t i = 0; i < g.n; i++)
		if (!strcmp(g.v[i].id, id)) {
			template_info_fini(&g.v[i]);
			g.v[i] = g.v[--g.n];
			qsort(g.v, g.n, sizeof(*g.v), by_name);
			break;
		}
	pthread_mutex_unlock(&g.lock);
}

int images_templates_dir(char *out)
{
	int r = 0;

	pthread_mutex_lock(&g.lock);
	if (g.up)
		snprintf(out, PATH_MAX, "%s", g.tdir);
	else
		r = -ESHUTDOWN;
	pthread_mutex_unlock(&g.lock);
	return r;
}
