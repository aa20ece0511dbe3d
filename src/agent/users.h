/* SPDX-License-Identifier: Apache-2.0 */
/* users: /etc/passwd and /etc/group parsing for the static agent (no NSS in a static binary). */
#ifndef ISOLA_AGENT_USERS_H
#define ISOLA_AGENT_USERS_H

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

/* users_parse_passwd + users_parse_groups on <etc>/passwd and <etc>/group. */
int users_lookup(const char *etc, const char *spec, struct agent_user *u);

#endif
