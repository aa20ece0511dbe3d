/* SPDX-License-Identifier: Apache-2.0 */
/* build-cache: `template build`'s per-step layer cache (keys chained step to step, lookup, store,
 * listing and pruning). */
#include "build-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"

#define CACHE_DEBRIS_S (2 * 3600) /* a .run-/.tmp- this old is a crashed build's (RUN <= 1 h) */

/* Builds hold it shared while they read or store an entry, a prune exclusively while it
 * deletes: a prune never removes a layer a build is applying. */
static pthread_rwlock_t cache_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Chains the cache key: key = sha256(key, parts...). */
void build_key_chain(struct build *bd, const char *a, const char *b, const unsigned char *extra,
		     size_t n)
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, bd->key, sizeof(bd->key));
	crypto_hash_sha256_update(&st, (const unsigned char *)a, strlen(a) + 1);
	crypto_hash_sha256_update(&st, (const unsigned char *)b, strlen(b) + 1);
	if (extra)
		crypto_hash_sha256_update(&st, extra, n);
	crypto_hash_sha256_final(&st, bd->key);
}

void build_key_hex(const struct build *bd, char out[65])
{
	static const char d[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = d[bd->key[i] >> 4];
		out[2 * i + 1] = d[bd->key[i] & 15];
	}
	out[64] = '\0';
}

/* Applies the cached layer `<cache>/<key><suffix>` if present: 1, else 0; or -errno. */
int build_from_cache(struct build *bd, const char *suffix, bool upper, char *path, size_t n,
		     struct isola_err **err)
{
	char hex[65];
	int r;

	build_key_hex(bd, hex);
	if (snprintf(path, n, "%s/%s%s", bd->cache, hex, suffix) >= (int)n)
		return isola_err_set(err, ENAMETOOLONG, "internal", "cache path too long");
	pthread_rwlock_rdlock(&cache_lock);
	if (access(path, F_OK) < 0) {
		pthread_rwlock_unlock(&cache_lock);
		return 0;
	}
	utimensat(AT_FDCWD, path, NULL, 0); /* last used: what --older-than goes by */
	r = images_build_apply(bd->b, path, upper, "cached", err) < 0 ? -EIO : 1;
	pthread_rwlock_unlock(&cache_lock);
	return r;
}

int build_cache_store(struct build *bd, const char *from, const char *path, size_t i, bool upper,
		      bool *stored, struct isola_err **err)
{
	char meta[PATH_MAX], instr[300];
	const char *dot = strchr(strrchr(path, '/') + 1, '.');
	json_t *m;
	char *text;
	int r = 0;

	*stored = false;
	snprintf(instr, sizeof(instr), "%s %.280s", dockerfile_op_name(bd->df.steps[i].op),
		 bd->sub[i]);
	snprintf(meta, sizeof(meta), "%.*s.json", (int)(dot - path), path);
	m = json_pack("{s:s, s:s, s:s, s:f}", "tenant", bd->tenant, "instruction", instr,
		      "template", bd->name, "created_at", util_wall_time());
	text = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	pthread_rwlock_rdlock(&cache_lock);
	/* The record first: an entry is never listed without its tenant. */
	if (!text || util_write_file_atomic(meta, text, strlen(text), 0600) < 0)
		r = isola_err_sys(err, text ? errno : ENOMEM, "internal", "write `%s`", meta);
	else if (rename(from, path) < 0)
		r = isola_err_sys(err, errno, "internal", "rename `%s`", from);
	else
		*stored = true;
	if (r == 0)
		r = images_build_apply(bd->b, path, upper, upper ? "RUN" : "COPY", err);
	pthread_rwlock_unlock(&cache_lock);
	free(text);
	return r;
}

/* One entry's view: {key, kind, tenant, instruction, template, size_bytes, created_at,
 * last_used_at}; NULL when name is not an entry's layer. */
static json_t *entry_json(int dfd, const char *name)
{
	size_t n = strlen(name);
	const char *kind = n == 64 + 8 && !strcmp(name + 64, ".tar.zst") ? "run"
			   : n == 64 + 4 && !strcmp(name + 64, ".tar")	 ? "copy"
									 : NULL;
	char key[65], meta[80], buf[4096];
	struct stat st;
	json_t *m = NULL, *out;
	int fd;

	if (!kind || strspn(name, "0123456789abcdef") != 64 ||
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	memcpy(key, name, 64);
	key[64] = '\0';
	snprintf(meta, sizeof(meta), "%s.json", key);
	fd = openat(dfd, meta, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t got = read(fd, buf, sizeof(buf) - 1);

		/* isolad's own file, bounded anyway */
		if (got > 0)
			m = json_loadb(buf, (size_t)got, 0, NULL);
		close(fd);
	}
	/* A microvm RUN's layer is an OCI-style .tar like COPY's: its record says what it is. */
	if (json_is_string(json_object_get(m, "instruction")) &&
	    !strncmp(json_string_value(json_object_get(m, "instruction")), "RUN ", 4))
		kind = "run";
	out = json_pack(
		"{s:s, s:s, s:O?, s:O?, s:O?, s:I, s:O?, s:f}", "key", key, "kind", kind, "tenant",
		json_object_get(m, "tenant"), "instruction", json_object_get(m, "instruction"),
		"template", json_object_get(m, "template"), "size_bytes",
		(json_int_t)st.st_blocks * 512, "created_at", json_object_get(m, "created_at"),
		"last_used_at", (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9);
	json_decref(m);
	return out;
}

/* Calls fn for each entry of the cache tenant may see (NULL: all), sorted by key. */
static int cache_walk(const char *tenant, int (*fn)(int dfd, json_t *e, void *ud), void *ud,
		      struct isola_err **err)
{
	char dir[PATH_MAX];
	struct dirent **names = NULL;
	int n, dfd, r = 0;

	r = images_build_cache_dir(dir, err);
	if (r < 0)
		return r;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return isola_err_sys(err, errno, "internal", "open `%s`", dir);
	n = scandirat(dfd, ".", &names, NULL, alphasort);
	if (n < 0)
		r = isola_err_sys(err, errno, "internal", "read `%s`", dir);
	for (int i = 0; i < n; i++) {
		json_t *e = r == 0 ? entry_json(dfd, names[i]->d_name) : NULL;
		const char *t = json_string_value(json_object_get(e, "tenant"));

		/* An entry without its record (made before records existed) is the operator's. */
		if (e && (!tenant || (t && !strcmp(t, tenant))))
			r = fn(dfd, e, ud);
		json_decref(e);
		free(names[i]);
	}
	free(names);
	close(dfd);
	return r;
}

static int list_one(int dfd, json_t *e, void *ud)
{
	(void)dfd;
	return json_array_append(ud, e) < 0 ? -ENOMEM : 0;
}

int core_build_cache_list_for(struct core *c, const char *tenant, json_t **out,
			      struct isola_err **err)
{
	json_t *list = json_array();
	int r;

	(void)c;
	if (!list)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	pthread_rwlock_rdlock(&cache_lock);
	r = cache_walk(tenant, list_one, list, err);
	pthread_rwlock_unlock(&cache_lock);
	if (r < 0) {
		json_decref(list);
		return r < 0 && !*err ? isola_err_set(err, -r, "internal", "build cache") : r;
	}
	*out = list;
	return 0;
}

struct prune {
	double before;	 /* remove entries last used before this (wall time) */
	json_t *removed; /* keys */
	uint64_t freed;	 /* bytes */
};

static int prune_one(int dfd, json_t *e, void *ud)
{
	struct prune *p = ud;
	const char *key = json_string_value(json_object_get(e, "key"));
	bool run = !strcmp(json_string_value(json_object_get(e, "kind")), "run");
	char name[80];

	if (json_real_value(json_object_get(e, "last_used_at")) >= p->before)
		return 0;
	snprintf(name, sizeof(name), "%s%s", key, run ? ".tar.zst" : ".tar");
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	snprintf(name, sizeof(name), "%s.json", key);
	unlinkat(dfd, name, 0);
	p->freed += (uint64_t)json_integer_value(json_object_get(e, "size_bytes"));
	return json_array_append_new(p->removed, json_string(key)) < 0 ? -ENOMEM : 0;
}

/* What a crashed build left, older than a RUN may take: .run-XXXXXX dirs, .tmp-XXXXXX files and
 * records without their layer. */
static void prune_debris(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 260];
	double now = util_wall_time();
	struct dirent *d;
	struct stat st;
	DIR *dp;

	if (images_build_cache_dir(dir, NULL) < 0 || !(dp = opendir(dir)))
		return;
	while ((d = readdir(dp))) {
		size_t n = strlen(d->d_name);
		bool record = n == 64 + 5 && !strcmp(d->d_name + 64, ".json");

		if (strncmp(d->d_name, ".run-", 5) && strncmp(d->d_name, ".tmp-", 5) && !record)
			continue;
		/* A record whose layer is missing: a build crashed between the two renames. */
		if (record && (snprintf(path, sizeof(path), "%s/%.64s.tar", dir, d->d_name),
			       access(path, F_OK) == 0))
			continue;
		if (record && (snprintf(path, sizeof(path), "%s/%.64s.tar.zst", dir, d->d_name),
			       access(path, F_OK) == 0))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (lstat(path, &st) == 0 && st.st_mtime + CACHE_DEBRIS_S < now) {
			log_info("build cache: removing `%s`, left by a crashed build", path);
			util_rm_rf(path);
		}
	}
	closedir(dp);
}

int core_build_cache_prune_for(struct core *c, const char *tenant, bool all, double older_than_s,
			       json_t **out, struct isola_err **err)
{
	struct prune p = {.before = all ? 1e300 : util_wall_time() - older_than_s,
			  .removed = json_array()};
	int r;

	(void)c;
	if (!p.removed)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	pthread_rwlock_wrlock(&cache_lock);
	r = cache_walk(tenant, prune_one, &p, err);
	if (!tenant)
		prune_debris();
	pthread_rwlock_unlock(&cache_lock);
	if (r < 0 && !*err)
		isola_err_sys(err, -r, "internal", "prune the build cache");
	if (r < 0) {
		json_decref(p.removed);
		return r;
	}
	log_info("build cache: pruned %zu entries (%llu bytes)%s%s", json_array_size(p.removed),
		 (unsigned long long)p.freed, tenant ? " of tenant " : "", tenant ? tenant : "");
	*out = json_pack("{s:o, s:I}", "removed", p.removed, "freed_bytes", (json_int_t)p.freed);
	return 0;
}
