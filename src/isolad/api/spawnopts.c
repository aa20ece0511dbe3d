/* SPDX-License-Identifier: Apache-2.0 */
/* spawnopts: a command's narrowing fields (additional_gids, umask, rlimits, oom_score_adj). */
#include "api-internal.h"

#include <errno.h>
#include <string.h>

#include "../../common/rlimits.h"

#define SPAWN_MAX_GIDS 32    /* additional_gids entries (the agent keeps 64 groups per user) */
#define SPAWN_MAX_ID   65535 /* a sandbox maps ids 0-65535 (docs/process-tier.md) */

/* `additional_gids`: [gid...], each inside the sandbox's id range. */
static int parse_gids(const json_t *v, json_t *req, struct isola_err **err)
{
	const json_t *g;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) > SPAWN_MAX_GIDS)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `additional_gids` must be an array of at most %d gids",
				     SPAWN_MAX_GIDS);
	json_array_foreach(v, i, g)
	{
		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > SPAWN_MAX_ID)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `additional_gids`: entry %zu must be a gid "
					     "inside the sandbox's range 0-%d",
					     i, SPAWN_MAX_ID);
	}
	json_object_set(req, "additional_gids", (json_t *)v);
	return 0;
}

/* `umask`: an integer 0-0777 (JSON has no octal: 18 is 022) or an octal string ("022"). */
static int parse_umask(const json_t *v, json_t *req, struct isola_err **err)
{
	uint32_t mode = 0;

	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 0777)
		mode = (uint32_t)json_integer_value(v);
	else if (!json_is_string(v) || api_parse_mode(json_string_value(v), &mode) < 0 ||
		 mode > 0777)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `umask` must be 0-0777 (an integer, or an octal string "
				     "such as \"022\")");
	json_object_set_new(req, "umask", json_integer(mode));
	return 0;
}

/* `rlimits`: [{type, soft, hard}], each type once, soft <= hard; the agent refuses a hard
 * limit above the one the sandbox's processes hold (never widened). */
static int parse_rlimits(const json_t *v, json_t *req, struct isola_err **err)
{
	json_t *out = json_array();
	uint32_t seen = 0;
	const json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) > RLIMITS_MAX) {
		json_decref(out);
		return isola_err_set(err, EINVAL, "invalid",
				     "field `rlimits` must be an array of at most %d objects",
				     RLIMITS_MAX);
	}
	json_array_foreach(v, i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type"));
		const json_t *soft = json_object_get(e, "soft"), *hard = json_object_get(e, "hard");
		int res = rlimits_parse(type);

		if (res < 0 || json_object_size(e) != 3 || !json_is_integer(soft) ||
		    !json_is_integer(hard) || json_integer_value(soft) < 0 ||
		    json_integer_value(hard) < 0) {
			json_decref(out);
			return isola_err_set(
				err, EINVAL, "invalid",
				"field `rlimits`: entry %zu must be {type, soft, hard} "
				"with a type such as RLIMIT_NOFILE and non-negative "
				"integer limits",
				i);
		}
		if (json_integer_value(soft) > json_integer_value(hard) || (seen & (1u << res))) {
			json_decref(out);
			return isola_err_set(
				err, EINVAL, "invalid", "field `rlimits`: %s %s", rlimits_name(res),
				(seen & (1u << res)) ? "is given twice" : "has soft above hard");
		}
		seen |= 1u << res;
		json_array_append_new(out, json_pack("{s:s, s:O, s:O}", "type", rlimits_name(res),
						     "soft", soft, "hard", hard));
	}
	json_object_set_new(req, "rlimits", out);
	return 0;
}

int api_spawn_narrowing(const json_t *body, json_t *req, struct isola_err **err)
{
	const json_t *v;
	int r = 0;

	/* `gid`: the primary group instead of the user's passwd one (docker run -u UID:GID). */
	if ((v = json_object_get(body, "gid")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > SPAWN_MAX_ID)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `gid` must be a gid inside the sandbox's range "
					     "0-%d",
					     SPAWN_MAX_ID);
		json_object_set(req, "gid", (json_t *)v);
	}
	if ((v = json_object_get(body, "additional_gids")) && !json_is_null(v))
		r = parse_gids(v, req, err);
	if (r == 0 && (v = json_object_get(body, "umask")) && !json_is_null(v))
		r = parse_umask(v, req, err);
	if (r == 0 && (v = json_object_get(body, "rlimits")) && !json_is_null(v))
		r = parse_rlimits(v, req, err);
	if (r == 0 && (v = json_object_get(body, "rlimits_cap")) && !json_is_null(v)) {
		if (!json_is_boolean(v))
			return isola_err_set(err, EINVAL, "invalid",
					     "field `rlimits_cap` must be a boolean");
		json_object_set(req, "rlimits_cap", (json_t *)v);
	}
	if (r == 0 && (v = json_object_get(body, "oom_score_adj")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < -1000 ||
		    json_integer_value(v) > 1000)
			return isola_err_set(err, EINVAL, "invalid",
					     "field `oom_score_adj` must be an integer -1000-1000 "
					     "(at or above the sandbox's own)");
		json_object_set(req, "oom_score_adj", (json_t *)v);
	}
	return r;
}
