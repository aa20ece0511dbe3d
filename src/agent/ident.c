/* SPDX-License-Identifier: Apache-2.0 */
/* ident: which user an op runs as — lookup, and fsuid/fsgid switching around file ops. */
#include "agent-internal.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <unistd.h>

const char *ident_etc = "/etc";

/*
 * File ops run in the agent itself, as the requesting user: fsuid/fsgid make the kernel
 * check permissions (and assign ownership) as that user, and dropping the fs uid away
 * from 0 also clears the agent's CAP_DAC_OVERRIDE/CAP_FOWNER/CAP_CHOWN from its effective
 * set until it switches back — so "user" ops cannot use the agent's capabilities. The
 * agent is single-threaded, so the switch cannot leak into another op.
 */
void ident_enter(const struct agent_user *u)
{
	if (u->uid == geteuid() && u->gid == getegid())
		return;
	/* setgroups failing (unprivileged standalone agent) only matters if the user differs,
	 * and then setfsuid fails too and the op simply runs with fewer rights. */
	setgroups((size_t)u->ngroups, u->groups);
	setfsgid(u->gid);
	setfsuid(u->uid);
}

void ident_leave(void)
{
	setfsuid(geteuid());
	setfsgid(getegid());
	setgroups(0, NULL);
}

int ident_from_req(struct chan *ch, json_t *req)
{
	json_t *v = json_object_get(req, "user");
	char spec[64];
	const char *s;
	int r;

	if (!v || json_is_null(v)) {
		if (geteuid() == 0)
			snprintf(spec, sizeof(spec), "root");
		else
			snprintf(spec, sizeof(spec), "%u", (unsigned)geteuid());
	} else if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);

		if (n < 0 || n >= 0xffffffffll) {
			chan_fail(ch, EINVAL, "field `user` out of range");
			return -1;
		}
		snprintf(spec, sizeof(spec), "%lld", (long long)n);
	} else {
		if (req_str(ch, req, "user", sizeof(spec) - 1, &s) < 0)
			return -1;
		snprintf(spec, sizeof(spec), "%s", s);
	}
	r = users_lookup(ident_etc, spec, &ch->user);
	if (r < 0) {
		chan_fail(ch, -r == ENOENT ? ENOENT : EINVAL, "user `%s`: %s", spec,
			  r == -ENOENT ? "no such user" : "invalid");
		return -1;
	}
	return 0;
}
