/* SPDX-License-Identifier: Apache-2.0 */
/* userseed: gives a sandbox that lacks it the E2B default user `user` (passwd, group, home). */
#include "users.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/*
 * E2B runs commands whose request names no user as `user` (uid 1000, home /home/user) with
 * passwordless sudo; E2B's SDK names none. isolad's envd sends that name, so every sandbox
 * needs the account: a template that lacks it gets it here, once per sandbox (the entries
 * land in the writable layer and so survive hibernate, snapshot and fork).
 *
 * Runs in the sandbox's root (after pivot_root or the guest's chroot), as root of its user
 * namespace. The template is hostile: /etc, /home and every file touched are opened one
 * level at a time with O_NOFOLLOW, files must be regular and at most USERS_MAX_FILE bytes,
 * and anything unexpected makes the seed skip the step rather than write elsewhere.
 */

#define SEED_NAME "user"

/* True if some line of a colon-separated file has `id` in field `field` (2 = uid/gid). */
static bool id_taken(const char *text, size_t len, int field, unsigned int id)
{
	const char *p = text, *end = text + len;
	char want[16];
	size_t wl = (size_t)snprintf(want, sizeof(want), "%u", id);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *f = p;

		for (int i = 0; i < field && f; i++) {
			f = memchr(f, ':', (size_t)(le - f));
			f = f ? f + 1 : NULL;
		}
		if (f) {
			const char *c = memchr(f, ':', (size_t)(le - f));
			size_t fl = c ? (size_t)(c - f) : (size_t)(le - f);

			if (fl == wl && !memcmp(f, want, wl))
				return true;
		}
		p = nl ? nl + 1 : end;
	}
	return false;
}

/* The gid of group `name` in group text, or -ENOENT. */
static int group_gid(const char *text, size_t len, const char *name, unsigned int *gid)
{
	const char *p = text, *end = text + len;
	size_t nl_ = strlen(name);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if ((size_t)(le - p) > nl_ + 1 && !memcmp(p, name, nl_) && p[nl_] == ':') {
			const char *f = memchr(p + nl_ + 1, ':', (size_t)(le - p - (long)nl_ - 1));
			unsigned long v = 0;
			const char *q;

			if (!f)
				return -EINVAL;
			for (q = f + 1; q < le && *q >= '0' && *q <= '9' && v < 0xffffffffUL; q++)
				v = v * 10 + (unsigned long)(*q - '0');
			if (q == f + 1 || (q < le && *q != ':') || v >= 0xffffffffUL)
				return -EINVAL;
			*gid = (unsigned int)v;
			return 0;
		}
		p = nl ? nl + 1 : end;
	}
	return -ENOENT;
}

int users_seed_plan(const char *passwd, size_t plen, const char *group, size_t glen,
		    struct users_seed *s)
{
	struct agent_user u;
	unsigned int gid;
	int r;

	/* UNTRUSTED: both texts come from the template; parsed with users.c's strict rules. */
	memset(s, 0, sizeof(*s));
	if (users_parse_passwd(passwd, plen, SEED_NAME, &u) == 0) {
		s->uid = u.uid;
		s->gid = u.gid;
		return 0;
	}
	s->add_passwd = true;
	for (s->uid = 1000; id_taken(passwd, plen, 2, s->uid); s->uid++)
		if (s->uid >= 60000)
			return -ENOSPC;
	r = group_gid(group, glen, SEED_NAME, &gid);
	if (r == 0) {
		s->gid = gid;
		return 0;
	}
	s->add_group = true;
	if (!id_taken(group, glen, 2, s->uid)) {
		s->gid = s->uid;
		return 0;
	}
	for (s->gid = 1000; id_taken(group, glen, 2, s->gid); s->gid++)
		if (s->gid >= 60000)
			return -ENOSPC;
	return 0;
}

/* Reads etc/<name> (regular, not a symlink, bounded); a missing file reads as empty. */
static int read_at(int etc, const char *name, char **out, size_t *len)
{
	int r = users_read_file(etc, name, true, out, len);

	if (r == -ENOENT) {
		*out = strdup("");
		*len = 0;
		r = *out ? 0 : -ENOMEM;
	}
	return r;
}

/* Appends line to etc/<name> (created 0644 if missing when create), starting a new line
 * first when the file does not end with one. */
static int append_at(int etc, const char *name, const char *cur, size_t cur_len, mode_t mode,
		     const char *line)
{
	cleanup_fd int fd =
		users_open_regular(etc, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, mode);
	int r;

	if (fd < 0)
		return fd;
	if (cur_len && cur[cur_len - 1] != '\n' && (r = util_write_all(fd, "\n", 1)) < 0)
		return r;
	return util_write_all(fd, line, strlen(line));
}

/* /home/user: created 0755 if missing, owned by the user when it is a real directory. */
static void seed_home(int root, const struct users_seed *s)
{
	cleanup_fd int home = -1, dir = -1;
	struct stat st;

	if (mkdirat(root, "home", 0755) < 0 && errno != EEXIST)
		return;
	home = openat(root, "home", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (home < 0)
		return;
	if (mkdirat(home, SEED_NAME, 0755) < 0 && errno != EEXIST)
		return;
	dir = openat(home, SEED_NAME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || fstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (st.st_uid == 0 && fchown(dir, s->uid, s->gid) < 0) {
		/* left to root: the user then cannot write its home, nothing worse */
	}
}

/* Passwordless sudo for the user, where the template has sudo (an /etc/sudoers.d). */
static bool seed_sudo(int etc)
{
	static const char rule[] = SEED_NAME " ALL=(ALL:ALL) NOPASSWD: ALL\n";
	cleanup_fd int d =
		openat(etc, "sudoers.d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_fd int fd = -1;

	if (d < 0)
		return false;
	fd = openat(d, "isola-user", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0440);
	if (fd < 0)
		return false;
	return util_write_all(fd, rule, sizeof(rule) - 1) == 0 && fchmod(fd, 0440) == 0;
}

int users_seed_default(int root, struct users_seed *s)
{
	cleanup_fd int etc = openat(root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_free char *passwd = NULL, *group = NULL, *shadow = NULL;
	size_t plen, glen, slen;
	char line[160];
	int r;

	memset(s, 0, sizeof(*s));
	if (etc < 0)
		return -errno;
	if ((r = read_at(etc, "passwd", &passwd, &plen)) < 0 ||
	    (r = read_at(etc, "group", &group, &glen)) < 0)
		return r;
	if ((r = users_seed_plan(passwd, plen, group, glen, s)) < 0 || !s->add_passwd)
		return r;
	if (s->add_group) {
		snprintf(line, sizeof(line), SEED_NAME ":x:%u:\n", s->gid);
		if ((r = append_at(etc, "group", group, glen, 0644, line)) < 0)
			return r;
	}
	snprintf(line, sizeof(line), SEED_NAME ":x:%u:%u::/home/" SEED_NAME ":/bin/bash\n", s->uid,
		 s->gid);
	if ((r = append_at(etc, "passwd", passwd, plen, 0644, line)) < 0)
		return r;
	/* shadow only where the template keeps one; `!`: no password, sudo needs none. */
	if (faccessat(etc, "shadow", F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
	    read_at(etc, "shadow", &shadow, &slen) == 0)
		append_at(etc, "shadow", shadow, slen, 0640, SEED_NAME ":!::0:99999:7:::\n");
	seed_home(root, s);
	s->sudo = seed_sudo(etc);
	return 0;
}
