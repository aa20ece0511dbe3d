/* SPDX-License-Identifier: Apache-2.0 */
/* users: parse passwd(5) and group(5) text without NSS. */
#include "users.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define MAX_FIELDS 8

/* Splits one line [p, end) at ':' into at most max fields (pointer + length). */
static int split_fields(const char *p, const char *end, const char **f, size_t *fl, int max)
{
	int n = 0;

	while (n < max) {
		const char *c = memchr(p, ':', (size_t)(end - p));

		f[n] = p;
		fl[n] = c ? (size_t)(c - p) : (size_t)(end - p);
		n++;
		if (!c)
			break;
		p = c + 1;
	}
	return n;
}

/* Parses a decimal id of at most 10 digits that fits in 32 bits minus (uid_t)-1. */
static int parse_id(const char *s, size_t len, unsigned int *out)
{
	unsigned long v = 0;
	size_t i;

	if (len == 0 || len > 10)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v >= UINT_MAX)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static bool field_eq(const char *f, size_t fl, const char *s)
{
	return strlen(s) == fl && memcmp(f, s, fl) == 0;
}

int users_parse_passwd(const char *text, size_t len, const char *spec, struct agent_user *u)
{
	const char *p = text, *end = text + len;
	unsigned int want_uid = 0;
	bool numeric;

	/* UNTRUSTED: passwd lives in the sandbox and user code may have rewritten it. Every
	 * field is bounded and parsed strictly here; malformed lines are skipped. */
	if (!spec || !*spec || strlen(spec) >= sizeof(u->name))
		return -EINVAL;
	numeric = parse_id(spec, strlen(spec), &want_uid) == 0;
	if (!numeric && (strchr(spec, ':') || strchr(spec, '\n')))
		return -EINVAL;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *f[MAX_FIELDS];
		size_t fl[MAX_FIELDS];
		unsigned int uid, gid;
		int n = split_fields(p, le, f, fl, MAX_FIELDS);

		p = nl ? nl + 1 : end;
		if (n != 7 || fl[0] == 0 || fl[0] >= sizeof(u->name))
			continue;
		if (parse_id(f[2], fl[2], &uid) < 0 || parse_id(f[3], fl[3], &gid) < 0)
			continue;
		if (numeric ? uid != want_uid : !field_eq(f[0], fl[0], spec))
			continue;
		memset(u, 0, sizeof(*u));
		u->uid = uid;
		u->gid = gid;
		memcpy(u->name, f[0], fl[0]);
		if (fl[5] > 0 && fl[5] < sizeof(u->home) && f[5][0] == '/' &&
		    !memchr(f[5], '\0', fl[5]))
			memcpy(u->home, f[5], fl[5]);
		else
			strcpy(u->home, "/");
		u->groups[0] = gid;
		u->ngroups = 1;
		return 0;
	}
	if (!numeric)
		return -ENOENT;
	memset(u, 0, sizeof(*u));
	u->uid = want_uid;
	u->gid = 0;
	snprintf(u->name, sizeof(u->name), "%u", want_uid);
	strcpy(u->home, "/");
	u->groups[0] = 0;
	u->ngroups = 1;
	return 0;
}

/* True if the comma-separated member list contains name. */
static bool list_has(const char *f, size_t fl, const char *name)
{
	const char *p = f, *end = f + fl;

	while (p < end) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		const char *e = c ? c : end;

		if (field_eq(p, (size_t)(e - p), name))
			return true;
		p = c ? c + 1 : end;
	}
	return false;
}

void users_parse_groups(const char *text, size_t len, struct agent_user *u)
{
	const char *p = text, *end = text + len;

	/* UNTRUSTED: /etc/group from the sandbox; same strictness as passwd. */
	while (p < end && u->ngroups < USERS_MAX_GROUPS) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *f[MAX_FIELDS];
		size_t fl[MAX_FIELDS];
		unsigned int gid;
		int i, n = split_fields(p, le, f, fl, MAX_FIELDS);
		bool dup = false;

		p = nl ? nl + 1 : end;
		if (n != 4 || parse_id(f[2], fl[2], &gid) < 0)
			continue;
		if (!list_has(f[3], fl[3], u->name))
			continue;
		for (i = 0; i < u->ngroups; i++)
			dup |= u->groups[i] == gid;
		if (!dup)
			u->groups[u->ngroups++] = gid;
	}
}

int users_open_regular(int dfd, const char *path, int flags, mode_t mode)
{
	int fd = openat(dfd, path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, mode);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = fstat(fd, &st) < 0 ? errno : EINVAL;

		close(fd);
		return -e;
	}
	return fd;
}

int users_read_file(int dfd, const char *path, bool nofollow, char **out, size_t *len)
{
	cleanup_fd int fd =
		users_open_regular(dfd, path, O_RDONLY | (nofollow ? O_NOFOLLOW : 0), 0);
	struct stat st;
	size_t used = 0;
	char *buf;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size < 0 || (uint64_t)st.st_size > USERS_MAX_FILE)
		return -EFBIG;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM;
	while (used < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + used, (size_t)st.st_size - used);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	*out = buf;
	*len = used;
	return 0;
}

/* Symlinks are followed: after setup they stay inside the sandbox's root. */
static int read_small(const char *path, char **out, size_t *len)
{
	return users_read_file(AT_FDCWD, path, false, out, len);
}

int users_lookup(const char *etc, const char *spec, struct agent_user *u)
{
	char path[256];
	char *text = NULL;
	size_t len = 0;
	int r;

	snprintf(path, sizeof(path), "%s/passwd", etc);
	r = read_small(path, &text, &len);
	if (r < 0) {
		text = NULL;
		len = 0;
	}
	r = users_parse_passwd(text ? text : "", len, spec, u);
	free(text);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/group", etc);
	text = NULL;
	if (read_small(path, &text, &len) == 0)
		users_parse_groups(text, len, u);
	free(text);
	return 0;
}

int users_name_of(const char *text, size_t len, unsigned int id, char *out, size_t n)
{
	const char *p = text, *end = text + len;

	/* UNTRUSTED: passwd or group text of the sandbox; names are kept only when they are
	 * short and printable without ':' (they go into JSON and into E2B's owner field). */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *f[MAX_FIELDS];
		size_t fl[MAX_FIELDS];
		unsigned int v;
		int n_ = split_fields(p, le, f, fl, MAX_FIELDS);
		bool clean = fl[0] > 0 && fl[0] < n;

		p = nl ? nl + 1 : end;
		if (n_ < 3 || parse_id(f[2], fl[2], &v) < 0 || v != id)
			continue;
		for (size_t i = 0; clean && i < fl[0]; i++)
			clean = f[0][i] > ' ' && f[0][i] < 0x7f;
		if (!clean)
			continue;
		memcpy(out, f[0], fl[0]);
		out[fl[0]] = '\0';
		return 0;
	}
	return -ENOENT;
}

/* One cached file of users_id_name: re-read when its identity or mtime changes. */
struct name_cache {
	char *text;	       /* contents, NUL-terminated, or NULL */
	size_t len;	       /* bytes in text */
	dev_t dev;	       /* identity of the file read */
	ino_t ino;	       /* ditto */
	off_t size;	       /* ditto */
	struct timespec mtime; /* ditto */
};

int users_id_name(const char *etc, bool group, unsigned int id, char *out, size_t n)
{
	static struct name_cache cache[2];
	struct name_cache *c = &cache[group];
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", etc, group ? "group" : "passwd");
	if (stat(path, &st) < 0) {
		free(c->text);
		memset(c, 0, sizeof(*c));
		return -ENOENT;
	}
	if (!c->text || c->dev != st.st_dev || c->ino != st.st_ino || c->size != st.st_size ||
	    c->mtime.tv_sec != st.st_mtim.tv_sec || c->mtime.tv_nsec != st.st_mtim.tv_nsec) {
		free(c->text);
		memset(c, 0, sizeof(*c));
		if (read_small(path, &c->text, &c->len) < 0)
			return -ENOENT;
		c->dev = st.st_dev;
		c->ino = st.st_ino;
		c->size = st.st_size;
		c->mtime = st.st_mtim;
	}
	return users_name_of(c->text, c->len, id, out, n);
}
