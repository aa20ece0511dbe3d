/* SPDX-License-Identifier: Apache-2.0 */
/* snapdir: crash-safe snapshot directories — temp dir, fsync, rename, manifest last, verify. */
#include "snapdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"

#define SNAPDIR_MAX_DEPTH 8
#define SNAPDIR_BUF	  (256u * 1024u)

/* The last path component, for messages. */
static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* A system error on `path` while doing `what`; ENOSPC and EDQUOT become `no_space`. */
static int sys_err(struct isola_err **err, int e, const char *what, const char *path)
{
	if (e == ENOSPC || e == EDQUOT)
		return isola_err_set(err, ENOSPC, "no_space", "%s `%s`: %s", what, path,
				     strerror(e));
	return isola_err_set(err, e, NULL, "%s `%s`: %s", what, path, strerror(e));
}

int snapdir_tmp_new(const char *parent, const char *tag, char *out, size_t n,
		    struct isola_err **err)
{
	unsigned char raw[8];
	int r, len;

	r = util_mkdir_p(parent, 0700);
	if (r < 0)
		return sys_err(err, -r, "create snapshot dir", parent);
	r = util_random(raw, sizeof(raw));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "snapshot temp name");
	len = snprintf(out, n, "%s/" SNAPDIR_TMP_PREFIX "%s-%02x%02x%02x%02x%02x%02x%02x%02x",
		       parent, tag, raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]);
	if (len < 0 || (size_t)len >= n)
		return isola_err_set(err, ENAMETOOLONG, "internal", "snapshot path too long");
	if (mkdir(out, 0700) < 0)
		return sys_err(err, errno, "create", out);
	return 0;
}

/* Hashes fd from its start into hex (65 bytes); *size gets the bytes read. 0 or -errno. */
static int hash_fd(int fd, char hex[65], uint64_t *size)
{
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];
	cleanup_free uint8_t *buf = malloc(SNAPDIR_BUF);
	uint64_t total = 0;
	ssize_t got;

	if (!buf)
		return -ENOMEM;
	sha256_init(&ctx);
	for (;;) {
		got = read(fd, buf, SNAPDIR_BUF);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		sha256_update(&ctx, (size_t)got, buf);
		total += (uint64_t)got;
	}
	sha256_digest(&ctx, sizeof(digest), digest);
	for (size_t i = 0; i < sizeof(digest); i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	*size = total;
	return 0;
}

static int fd_of(DIR *d)
{
	return dirfd(d);
}

/* Walks dirfd (relative prefix `rel`), fsyncing and hashing each regular file into files. */
static int collect(int dfd, const char *top, const char *rel, int depth, json_t *files,
		   uint64_t *total, struct isola_err **err)
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth > SNAPDIR_MAX_DEPTH)
		return isola_err_set(err, ELOOP, "internal",
				     "snapshot `%s`: directories nest "
				     "deeper than %d",
				     top, SNAPDIR_MAX_DEPTH);
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return isola_err_sys(err, errno, NULL, "read snapshot `%s`", top);
	}
	while (r == 0 && (de = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!*rel && !strcmp(de->d_name, SNAPDIR_MANIFEST))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "",
				     de->d_name) >= sizeof(path)) {
			r = isola_err_set(err, ENAMETOOLONG, "internal",
					  "snapshot `%s`: name too "
					  "long",
					  top);
			break;
		}
		if (fstatat(fd_of(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = isola_err_sys(err, errno, NULL, "snapshot `%s`: stat `%s`", top, path);
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			fd = openat(fd_of(d), de->d_name,
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0) {
				r = isola_err_sys(err, errno, NULL, "snapshot `%s`: open `%s`", top,
						  path);
				break;
			}
			if (fsync(fd) < 0) {
				r = sys_err(err, errno, "fsync snapshot file", path);
				close(fd);
				break;
			}
			r = collect(fd, top, path, depth + 1, files, total, err);
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			r = isola_err_set(err, EINVAL, "internal",
					  "snapshot `%s`: `%s` is not a regular file", top, path);
			break;
		}
		if (json_array_size(files) >= SNAPDIR_MAX_FILES) {
			r = isola_err_set(err, E2BIG, "internal",
					  "snapshot `%s`: more than %u files", top,
					  SNAPDIR_MAX_FILES);
			break;
		}
		fd = openat(fd_of(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			r = isola_err_sys(err, errno, NULL, "snapshot `%s`: open `%s`", top, path);
			break;
		}
		{
			char hex[65];
			uint64_t size = 0;
			int h = fsync(fd) < 0 ? -errno : hash_fd(fd, hex, &size);

			close(fd);
			if (h < 0) {
				r = sys_err(err, -h, "fsync snapshot file", path);
				break;
			}
			json_array_append_new(files,
					      json_pack("{s:s, s:I, s:s}", "name", path, "size",
							(json_int_t)size, "sha256", hex));
			*total += size;
		}
	}
	closedir(d);
	return r;
}

/* fsyncs a directory by path. 0 or -errno. */
static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int snapdir_commit(const char *tmp, const char *final, const json_t *meta, uint64_t *size,
		   struct isola_err **err)
{
	json_t *files = json_array(), *man = NULL;
	char path[PATH_MAX], parent[PATH_MAX];
	cleanup_free char *text = NULL;
	uint64_t total = 0;
	char *slash;
	int fd, r;

	fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		json_decref(files);
		return isola_err_sys(err, errno, NULL, "open snapshot `%s`", tmp);
	}
	r = collect(fd, base_name(tmp), "", 0, files, &total, err);
	if (r < 0) {
		json_decref(files);
		return r;
	}
	man = json_pack("{s:s, s:i, s:o, s:o}", "format", SNAPDIR_FORMAT, "version",
			SNAPDIR_VERSION, "meta", meta ? json_deep_copy(meta) : json_object(),
			"files", files);
	text = man ? json_dumps(man, JSON_COMPACT) : NULL;
	json_decref(man);
	if (!text)
		return isola_err_set(err, ENOMEM, NULL, "snapshot manifest: out of memory");
	/* The manifest is the last file written: its presence means the rest is complete. */
	snprintf(path, sizeof(path), "%s/%s", tmp, SNAPDIR_MANIFEST);
	r = util_write_file_atomic(path, text, strlen(text), 0600);
	if (r < 0)
		return sys_err(err, -r, "write", path);
	r = fsync_dir(tmp);
	if (r < 0)
		return sys_err(err, -r, "fsync", tmp);
	if (rename(tmp, final) < 0)
		return sys_err(err, errno, "rename snapshot to", final);
	snprintf(parent, sizeof(parent), "%s", final);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = '\0';
	r = fsync_dir(parent);
	if (r < 0)
		return sys_err(err, -r, "fsync", parent);
	if (size)
		*size = total;
	return 0;
}

/* A manifest file name: relative, no empty, `.` or `..` component, printable. */
static bool name_is_valid(const char *name)
{
	const char *p = name;

	if (!*name || strlen(name) >= 1024 || name[0] == '/')
		return false;
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20)
			return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
		else
			break;
	}
	return name[strlen(name) - 1] != '/';
}

/* Opens rel under dirfd one component at a time, never following a symlink. -errno. */
static int open_beneath(int dirfd, const char *rel)
{
	char buf[1024], *save = NULL, *comp, *next;
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0); /* a fork+exec elsewhere must not inherit it */

	if (fd < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%s", rel);
	comp = strtok_r(buf, "/", &save);
	while (comp) {
		int nfd;

		next = strtok_r(NULL, "/", &save);
		nfd = openat(fd, comp,
			     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (next ? O_DIRECTORY : O_NONBLOCK));
		close(fd);
		if (nfd < 0)
			return -errno;
		fd = nfd;
		comp = next;
	}
	return fd;
}

/* Checks one manifest entry. UNTRUSTED: the entry comes from a file on disk. */
static int verify_entry(int dirfd, const char *snap, const json_t *e, struct isola_err **err)
{
	const char *name = NULL, *want = NULL;
	json_int_t size = -1;
	struct stat st;
	char hex[65];
	uint64_t got = 0;
	int fd, r;

	if (json_unpack((json_t *)e, "{s:s, s:I, s:s}", "name", &name, "size", &size, "sha256",
			&want) < 0 ||
	    size < 0 || strlen(want) != 64 || !name_is_valid(name))
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: manifest.json has a malformed "
				     "file entry",
				     snap);
	fd = open_beneath(dirfd, name);
	if (fd < 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: file `%s` is missing (%s)", snap,
				     name, strerror(-fd));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: `%s` is not a regular file", snap,
				     name);
	}
	if ((uint64_t)st.st_size != (uint64_t)size) {
		close(fd);
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: file `%s` is %s: %llu bytes, the "
				     "manifest says %llu",
				     snap, name,
				     (uint64_t)st.st_size < (uint64_t)size ? "truncated"
									   : "too long",
				     (unsigned long long)st.st_size, (unsigned long long)size);
	}
	r = hash_fd(fd, hex, &got);
	close(fd);
	if (r < 0)
		return isola_err_set(err, -r, NULL, "snapshot `%s`: read `%s`: %s", snap, name,
				     strerror(-r));
	if (got != (uint64_t)size || strcmp(hex, want) != 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: file `%s` does not match its "
				     "SHA-256 in the manifest (its content changed)",
				     snap, name);
	return 0;
}

int snapdir_verify(const char *dir, json_t **meta, struct isola_err **err)
{
	const char *snap = base_name(dir);
	cleanup_free char *text = NULL;
	char path[PATH_MAX];
	json_error_t jerr;
	json_t *man, *files, *e;
	const char *format = "";
	int version = 0, dirfd, r = 0;
	size_t len = 0, i;

	snprintf(path, sizeof(path), "%s/%s", dir, SNAPDIR_MANIFEST);
	r = util_read_file(path, SNAPDIR_MAX_MANIFEST, &text, &len);
	if (r == -ENOENT)
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is incomplete: manifest.json is missing", snap);
	if (r == -EFBIG)
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: manifest.json is larger than %u "
				     "bytes",
				     snap, SNAPDIR_MAX_MANIFEST);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "read `%s`", path);
	/* UNTRUSTED: manifest bytes from disk; jansson parses, we check every field. */
	man = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!man)
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: manifest.json does not parse (%s "
				     "at byte %d; truncated?)",
				     snap, jerr.text, jerr.position);
	if (json_unpack(man, "{s:s, s:i, s:o}", "format", &format, "version", &version, "files",
			&files) < 0 ||
	    strcmp(format, SNAPDIR_FORMAT) != 0 || !json_is_array(files) ||
	    json_array_size(files) > SNAPDIR_MAX_FILES) {
		json_decref(man);
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s` is corrupt: manifest.json is not an isola "
				     "snapshot manifest",
				     snap);
	}
	if (version != SNAPDIR_VERSION) {
		json_decref(man);
		return isola_err_set(err, EINVAL, "invalid",
				     "snapshot `%s`: manifest version %d is not supported "
				     "(expected %d)",
				     snap, version, SNAPDIR_VERSION);
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		json_decref(man);
		return isola_err_sys(err, errno, NULL, "open snapshot `%s`", dir);
	}
	json_array_foreach(files, i, e)
	{
		r = verify_entry(dirfd, snap, e, err);
		if (r < 0)
			break;
	}
	close(dirfd);
	if (r == 0 && meta) {
		json_t *m = json_object_get(man, "meta");

		*meta = json_is_object(m) ? json_incref(m) : json_object();
	}
	json_decref(man);
	return r;
}

int snapdir_clean_tmp(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *de;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX];

		if (strncmp(de->d_name, SNAPDIR_TMP_PREFIX, strlen(SNAPDIR_TMP_PREFIX)) != 0)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", parent, de->d_name) >=
		    sizeof(path))
			continue;
		if (util_rm_rf(path) == 0)
			n++;
	}
	closedir(d);
	return n;
}
