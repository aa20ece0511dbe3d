/* SPDX-License-Identifier: Apache-2.0 */
/* vmroot: the microvm tier's small root, the host files of a coding agent's Debian packages. */
#include "vmroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fileclone.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "pkgset.h"

#define DPKG_DIR "/var/lib/dpkg"

/* Shell, coreutils (Essential), Python, Node, git, a C toolchain that links, curl with CA
 * certificates, and the everyday tools an agent's scripts call. Names not installed on the
 * host are skipped. */
const char *const images_vmroot_packages[] = {
	"bash",	       "coreutils",    "dash",	 "python3",
	"python3-pip", "python3-venv", "nodejs", "npm",
	"git",	       "gcc",	       "g++",	 "libc6-dev",
	"binutils",    "make",	       "curl",	 "ca-certificates",
	"procps",      "iproute2",     "less",	 "patch",
	"xz-utils",    "bzip2",	       "unzip",	 "file",
	NULL,
};

/* A growable array of heap paths. */
struct paths {
	char **v;   /* owned strings */
	size_t n;   /* used */
	size_t cap; /* allocated */
};

static int paths_add(struct paths *p, const char *s)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 4096;
		char **v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n] = strdup(s);
	return p->v[p->n] ? (p->n++, 0) : -ENOMEM;
}

static void paths_fini(struct paths *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Top-level dirs a merged-/usr host links into /usr. */
static const char *const merged[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

/* out = path with a merged top-level dir mapped into /usr (`/lib/x` -> `/usr/lib/x`). */
static void canonical(const char *path, char *out, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(merged); i++) {
		size_t l = strlen(merged[i]);
		char link[PATH_MAX], target[64];
		const char *t;
		ssize_t n;

		if (path[0] != '/' || strncmp(path + 1, merged[i], l) ||
		    (path[l + 1] != '/' && path[l + 1]))
			continue;
		snprintf(link, sizeof(link), "/%s", merged[i]);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			break;
		target[n] = '\0';
		t = target + (target[0] == '/');
		if (strncmp(t, "usr/", 4) || strcmp(t + 4, merged[i]))
			break;
		snprintf(out, len, "/usr/%s%s", merged[i], path + l + 1);
		return;
	}
	snprintf(out, len, "%s", path);
}

static bool under_usr(const char *p)
{
	return !strncmp(p, "/usr/", 5);
}

/* Adds the /usr paths of one package's file list. */
static int add_list(struct paths *out, const char *name, const char *arch,
		    bool (*skip)(const char *))
{
	cleanup_free char *buf = NULL;
	char path[PATH_MAX];
	size_t len;
	int r;

	snprintf(path, sizeof(path), DPKG_DIR "/info/%s:%s.list", name, arch);
	r = util_read_file(path, 64u << 20, &buf, &len);
	if (r == -ENOENT) {
		snprintf(path, sizeof(path), DPKG_DIR "/info/%s.list", name);
		r = util_read_file(path, 64u << 20, &buf, &len);
	}
	if (r == -ENOENT)
		return 0; /* a package without files (a metapackage) */
	if (r < 0)
		return r;
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char c[PATH_MAX];

		canonical(l, c, sizeof(c));
		if (under_usr(c) && !(skip && skip(c)) && (r = paths_add(out, c)) < 0)
			return r;
	}
	return 0;
}

/* Adds every symlink directly in dir (update-alternatives' /usr/bin/cc -> /etc/alternatives). */
static int add_links(struct paths *out, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return 0;
	while (r == 0 && (de = readdir(d)))
		if (de->d_type == DT_LNK) {
			char p[PATH_MAX];

			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			r = paths_add(out, p);
		}
	closedir(d);
	return r;
}

/* Extra package names from $ISOLA_MICROVM_PACKAGES into names[] (pointing into buf). */
static size_t extra_roots(const char **names, size_t max, char *buf, size_t len)
{
	const char *env = getenv("ISOLA_MICROVM_PACKAGES");
	size_t n = 0;
	char *save = NULL;

	if (!env || strlen(env) >= len)
		return 0;
	snprintf(buf, len, "%s", env);
	for (char *t = strtok_r(buf, ":, ", &save); t && n < max; t = strtok_r(NULL, ":, ", &save))
		names[n++] = t;
	return n;
}

/* The sorted, unique host paths of the small root. */
static int collect(struct paths *out, bool (*skip)(const char *))
{
	cleanup_free char *status = NULL;
	const char *roots[256];
	char extra[4096];
	struct pkgset *set = NULL;
	size_t len, n = 0, w = 0;
	int r;

	r = util_read_file(DPKG_DIR "/status", 256u << 20, &status, &len);
	if (r < 0)
		return r;
	r = pkgset_parse(status, len, &set);
	if (r < 0)
		return r;
	for (size_t i = 0; images_vmroot_packages[i] && n < ARRAY_SIZE(roots); i++)
		roots[n++] = images_vmroot_packages[i];
	n += extra_roots(roots + n, ARRAY_SIZE(roots) - n, extra, sizeof(extra));
	pkgset_close(set, roots, n, true);
	for (size_t i = 0; r == 0 && i < pkgset_count(set); i++)
		if (pkgset_is_marked(set, i))
			r = add_list(out, pkgset_name(set, i), pkgset_arch(set, i), skip);
	pkgset_free(set);
	if (r == 0)
		r = add_links(out, "/usr/bin");
	if (r == 0)
		r = add_links(out, "/usr/sbin");
	if (r < 0)
		return r;
	qsort(out->v, out->n, sizeof(out->v[0]), cmp_str);
	for (size_t i = 0; i < out->n; i++) {
		if (w && !strcmp(out->v[w - 1], out->v[i]))
			free(out->v[i]);
		else
			out->v[w++] = out->v[i];
	}
	out->n = w;
	return 0;
}

/* Copies one host entry (path) to dst: a dir, a hard link or copy of a file, a symlink. */
static int stage_one(const char *path, const char *dst, const struct stat *st, uint64_t *files,
		     uint64_t *bytes)
{
	if (S_ISDIR(st->st_mode)) {
		if (mkdir(dst, 0700) < 0 && errno != EEXIST)
			return -errno;
		if (lchown(dst, st->st_uid, st->st_gid) < 0 || chmod(dst, st->st_mode & 07777) < 0)
			return -errno;
		return 0;
	}
	if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof(target) - 1);

		if (n < 0)
			return -errno;
		target[n] = '\0';
		if (symlink(target, dst) < 0 && errno != EEXIST)
			return -errno;
		return lchown(dst, st->st_uid, st->st_gid) < 0 ? -errno : 0;
	}
	if (!S_ISREG(st->st_mode))
		return 0; /* no devices or fifos from the host */
	(*files)++;
	*bytes += (uint64_t)st->st_size;
	if (link(path, dst) == 0 || errno == EEXIST)
		return 0;
	{
		/* Another filesystem (EXDEV) or protected_hardlinks: a copy (reflink if it can). */
		cleanup_fd int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		cleanup_fd int out = -1;
		int r;

		if (in < 0)
			return -errno;
		out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			return -errno;
		r = fileclone_copy(in, out);
		if (r < 0)
			return r;
		/* chown first: it clears set-id bits, which the chmod then restores. */
		if (fchown(out, st->st_uid, st->st_gid) < 0 || fchmod(out, st->st_mode & 07777) < 0)
			return -errno;
	}
	return 0;
}

/* Makes the parents of stage + path that are missing, with the host's modes. 0, 1 when a
 * parent is not a directory (a symlink to elsewhere: staged as such, path skipped), -errno. */
static int parents(const char *stage, const char *path)
{
	char host[PATH_MAX], dst[PATH_MAX * 2];
	uint64_t f = 0, b = 0;

	snprintf(host, sizeof(host), "%s", path);
	for (char *s = strchr(host + 1, '/'); s; s = strchr(s + 1, '/')) {
		struct stat st;
		int r;

		*s = '\0';
		snprintf(dst, sizeof(dst), "%s%s", stage, host);
		if (lstat(dst, &st) < 0) {
			if (lstat(host, &st) < 0)
				return -errno;
			r = stage_one(host, dst, &st, &f, &b);
			if (r < 0)
				return r;
		}
		if (!S_ISDIR(st.st_mode))
			return 1; /* a symlink (or file) where a parent dir was expected */
		*s = '/';
	}
	return 0;
}

/* Stages the compiled modules next to the .py files of a kept dir (made at install time). */
static int stage_pycache(const char *stage, const char *dir, uint64_t *files, uint64_t *bytes)
{
	char src[PATH_MAX], dst[PATH_MAX * 2];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int r = 0;

	snprintf(src, sizeof(src), "%s/__pycache__", dir);
	if (lstat(src, &st) < 0 || !S_ISDIR(st.st_mode) || !(d = opendir(src)))
		return 0;
	snprintf(dst, sizeof(dst), "%s%s", stage, src);
	r = stage_one(src, dst, &st, files, bytes);
	while (r == 0 && (de = readdir(d))) {
		char s2[PATH_MAX + 256], d2[PATH_MAX * 2 + 256];
		struct stat st2;

		if (de->d_name[0] == '.')
			continue;
		snprintf(s2, sizeof(s2), "%s/%s", src, de->d_name);
		snprintf(d2, sizeof(d2), "%s/%s", dst, de->d_name);
		if (lstat(s2, &st2) == 0 && S_ISREG(st2.st_mode))
			r = stage_one(s2, d2, &st2, files, bytes);
	}
	closedir(d);
	return r;
}

int images_vmroot_stage(const char *stage, bool (*skip)(const char *path),
			images_vmroot_progress_fn cb, void *ud, uint64_t *files, uint64_t *bytes)
{
	struct paths all = {0};
	uint64_t nf = 0, nb = 0;
	int r;

	if (cb)
		cb(ud, "packages", 0, 0);
	r = collect(&all, skip);
	if (r == 0 && mkdir(stage, 0700) < 0)
		r = -errno;
	for (size_t i = 0; r == 0 && i < all.n; i++) {
		char dst[PATH_MAX * 2];
		struct stat st;

		if (lstat(all.v[i], &st) < 0)
			continue; /* listed but gone (a diversion, a removed conffile) */
		snprintf(dst, sizeof(dst), "%s%s", stage, all.v[i]);
		r = parents(stage, all.v[i]);
		if (r == 0)
			r = stage_one(all.v[i], dst, &st, &nf, &nb);
		if (r == 0 && S_ISDIR(st.st_mode))
			r = stage_pycache(stage, all.v[i], &nf, &nb);
		if (r == 1 || r == -ENOENT)
			r = 0; /* below a symlinked dir (the link is staged), or gone meanwhile */
		if (r < 0)
			log_warn("microvm image: stage `%s`: %s", all.v[i], strerror(-r));
		if (cb && (i % 256 == 0 || i + 1 == all.n))
			cb(ud, "staging", i + 1, all.n);
	}
	paths_fini(&all);
	if (files)
		*files = nf;
	if (bytes)
		*bytes = nb;
	return r;
}
