/* SPDX-License-Identifier: Apache-2.0 */
/* narrow: an exec request's narrowing fields (additional_gids, umask, rlimits, oom_score_adj),
 * checked against what the agent itself holds so that none can widen it. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The agent's own oom_score_adj (every spawned process inherits it), or 0 unread. */
static int own_oom_score_adj(void)
{
	char buf[16] = "";
	int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n > 0 ? atoi(buf) : 0;
}

/* `additional_gids`: appended to u's groups (duplicates once). */
static int narrow_gids(struct chan *ch, const json_t *v, struct agent_user *u)
{
	const json_t *g;
	size_t i;

	if (!json_is_array(v)) {
		chan_fail(ch, EINVAL, "field `additional_gids` must be an array");
		return -1;
	}
	json_array_foreach(v, i, g)
	{
		json_int_t gid = json_integer_value(g);
		bool dup = false;

		/* UNTRUSTED (isolad checked it too): a gid of the sandbox's mapped range. */
		if (!json_is_integer(g) || gid < 0 || gid > 65535) {
			chan_fail(ch, EINVAL,
				  "field `additional_gids`: entry %zu is outside the sandbox's gid "
				  "range 0-65535",
				  i);
			return -1;
		}
		for (int k = 0; k < u->ngroups; k++)
			dup = dup || u->groups[k] == (gid_t)gid;
		if (dup)
			continue;
		if (u->ngroups >= USERS_MAX_GROUPS) {
			chan_fail(
				ch, EINVAL,
				"field `additional_gids`: the user would be in more than %d groups",
				USERS_MAX_GROUPS);
			return -1;
		}
		u->groups[u->ngroups++] = (gid_t)gid;
	}
	return 0;
}

/* `rlimits`: each lowered as asked, never raised: a hard limit above the agent's own is
 * refused, or with cap (`rlimits_cap`) lowered to it (the agent's limits are isola's:
 * RLIMIT_NOFILE from the plan, the rest isolad's). */
static int narrow_rlimits(struct chan *ch, const json_t *v, bool cap, struct spawn_narrow *out)
{
	const json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) > RLIMITS_MAX) {
		chan_fail(ch, EINVAL, "field `rlimits` must be an array of at most %d objects",
			  RLIMITS_MAX);
		return -1;
	}
	json_array_foreach(v, i, e)
	{
		const json_t *soft = json_object_get(e, "soft"), *hard = json_object_get(e, "hard");
		int res = rlimits_parse(json_string_value(json_object_get(e, "type")));
		struct rlimits_entry *r = &out->rlimits[out->n_rlimits];
		struct rlimit cur;

		if (res < 0 || !json_is_integer(soft) || !json_is_integer(hard) ||
		    json_integer_value(soft) < 0 ||
		    json_integer_value(soft) > json_integer_value(hard)) {
			chan_fail(ch, EINVAL,
				  "field `rlimits`: entry %zu needs a known type and 0 <= soft <= "
				  "hard",
				  i);
			return -1;
		}
		r->resource = res;
		r->soft = (uint64_t)json_integer_value(soft);
		r->hard = (uint64_t)json_integer_value(hard);
		if (getrlimit(res, &cur) < 0) {
			chan_fail(ch, errno, "field `rlimits`: %s: %s", rlimits_name(res),
				  strerror(errno));
			return -1;
		}
		/* Never widened (docs/process-tier.md): lowering needs no privilege, raising
		 * would take CAP_SYS_RESOURCE, which no sandbox process holds. */
		if (cap && cur.rlim_max != RLIM_INFINITY && r->hard > (uint64_t)cur.rlim_max) {
			r->hard = (uint64_t)cur.rlim_max;
			if (r->soft > r->hard)
				r->soft = r->hard;
		}
		if (cur.rlim_max != RLIM_INFINITY && r->hard > (uint64_t)cur.rlim_max) {
			chan_fail(ch, EPERM,
				  "field `rlimits`: %s hard limit %llu is above the sandbox's "
				  "%llu (a limit may be lowered, never raised)",
				  rlimits_name(res), (unsigned long long)r->hard,
				  (unsigned long long)cur.rlim_max);
			return -1;
		}
		out->n_rlimits++;
	}
	return 0;
}

int narrow_from_req(struct chan *ch, json_t *req, struct agent_user *u, struct spawn_narrow *out)
{
	const json_t *v;
	bool cap;
	int64_t n;

	memset(out, 0, sizeof(*out));
	out->umask = -1;
	/* `gid`: the primary group instead of the user's passwd one (a spec's process.user.gid,
	 * docker run -u UID:GID), inside the sandbox's mapped range. */
	if (req_int(ch, req, "gid", -1, 0, 65535, &n) < 0)
		return -1;
	if (n >= 0) {
		u->gid = (gid_t)n;
		u->groups[0] = (gid_t)n;
		if (u->ngroups < 1)
			u->ngroups = 1;
	}
	if ((v = json_object_get(req, "additional_gids")) && !json_is_null(v) &&
	    narrow_gids(ch, v, u) < 0)
		return -1;
	if (req_int(ch, req, "umask", -1, 0, 0777, &n) < 0)
		return -1;
	out->umask = (int)n;
	if (req_bool(ch, req, "rlimits_cap", false, &cap) < 0)
		return -1;
	if ((v = json_object_get(req, "rlimits")) && !json_is_null(v) &&
	    narrow_rlimits(ch, v, cap, out) < 0)
		return -1;
	if (req_int(ch, req, "oom_score_adj", INT64_MIN, -1000, 1000, &n) < 0)
		return -1;
	if (n != INT64_MIN) {
		int own = own_oom_score_adj();

		/* Raised only: the process is killed sooner, never later, than isola's. */
		if (n < own) {
			chan_fail(ch, EPERM,
				  "field `oom_score_adj` %lld is below the sandbox's %d (it may "
				  "only be raised)",
				  (long long)n, own);
			return -1;
		}
		out->set_oom = true;
		out->oom_score_adj = (int)n;
	}
	return 0;
}
