/* SPDX-License-Identifier: Apache-2.0 */
/* users: /etc/passwd and /etc/group parsing for the static agent (no NSS in a static binary). */
#ifndef ISOLA_AGENT_USERS_H
#define ISOLA_AGENT_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define USERS_MAX_GROUPS 64	    /* supplementary groups kept per user */
#define USERS_MAX_FILE	 (4u << 20) /* larger passwd/group files are refused */

struct agent_user {
	uid_t uid;			/* numeric uid */
	gid_t gid;			/* primary gid */
	char name[64];			/* login name, or the numeric uid as text */
	char home[512];			/* home directory ("/" if unknown or unusable) */
	gid_t groups[USERS_MAX_GROUPS]; /* supplementary groups (primary included) */
	int ngroups;			/* entries used in groups */
};

/*
 * Finds spec (a login name, or a decimal uid) in passwd text. A numeric uid absent
 * from passwd is accepted with gid 0 and home "/" (as container runtimes do).
 * Returns 0, -ENOENT (unknown name) or -EINVAL (malformed spec).
 */
int users_parse_passwd(const char *text, size_t len, const char *spec, struct agent_user *u);

/* Adds to u->groups every group in group text that lists u->name as a member. */
void users_parse_groups(const char *text, size_t len, struct agent_user *u);

/*
 * Opens dfd/path with flags (plus O_CLOEXEC, O_NONBLOCK, O_NOCTTY) and mode; the result must
 * be a regular file. Returns the fd (caller closes) or -errno (-EINVAL when not regular).
 */
int users_open_regular(int dfd, const char *path, int flags, mode_t mode);

/*
 * Reads a sandbox-controlled file (path relative to dfd) into a NUL-terminated heap buffer
 * (*out, caller frees; *len bytes). It must be a regular file (a FIFO would block PID 1
 * forever) of at most USERS_MAX_FILE bytes; with nofollow a final symlink is refused.
 * 0 or -errno (-EINVAL not regular, -EFBIG too large).
 */
int users_read_file(int dfd, const char *path, bool nofollow, char **out, size_t *len);

/* users_parse_passwd + users_parse_groups on <etc>/passwd and <etc>/group. */
int users_lookup(const char *etc, const char *spec, struct agent_user *u);

/*
 * The name of the first entry of passwd or group text (name:x:id:...) whose id is `id`,
 * into out (n bytes). 0, or -ENOENT when no entry with a clean name (1..n-1 printable
 * characters) has that id.
 */
int users_name_of(const char *text, size_t len, unsigned int id, char *out, size_t n);

/*
 * users_name_of on <etc>/passwd (group false) or <etc>/group, cached until the file
 * changes (a listing names thousands of owners). Not thread-safe: the agent is one thread.
 */
int users_id_name(const char *etc, bool group, unsigned int id, char *out, size_t n);

/* What userseed.c adds for E2B's default user `user` (docs/e2b.md). */
struct users_seed {
	bool add_passwd;  /* passwd lacked `user`: an entry was (or is to be) added */
	bool add_group;	  /* group lacked a `user` group: one was (or is to be) added */
	bool sudo;	  /* a NOPASSWD drop-in went into /etc/sudoers.d */
	unsigned int uid; /* the user's uid: 1000, or the first free one above it */
	unsigned int
		gid; /* its primary gid: an existing `user` group's, else uid or the first free */
};

/*
 * Decides, from passwd and group text, whether `user` must be added and with which ids.
 * Pure. 0, or -ENOSPC when no id below 60000 is free.
 */
int users_seed_plan(const char *passwd, size_t plen, const char *group, size_t glen,
		    struct users_seed *s);

/*
 * Adds `user` to the tree at dirfd root when its etc/passwd lacks it: passwd, group and
 * (if present) shadow entries, a home /home/user owned by it, and a sudoers.d drop-in
 * where the template has sudo. Never follows a symlink. 0 (also when nothing was missing,
 * s->add_passwd false) or -errno; a failure leaves the template's files as they were, or
 * with the complete lines added before it.
 */
int users_seed_default(int root, struct users_seed *s);

#endif
