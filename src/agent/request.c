/* SPDX-License-Identifier: Apache-2.0 */
/* request: validation of OPEN request fields, and errno -> protocol error codes. */
#include "agent-internal.h"

#include <errno.h>
#include <string.h>

/*
 * UNTRUSTED: every helper here reads a field of a request isolad sent. isolad is the
 * more trusted side, but the agent validates anyway: type, range, length, no NUL.
 */

int req_bool(struct chan *ch, json_t *req, const char *key, bool def, bool *out)
{
	json_t *v = json_object_get(req, key);

	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_boolean(v)) {
		chan_fail(ch, EINVAL, "field `%s` must be a boolean", key);
		return -1;
	}
	*out = json_is_true(v);
	return 0;
}

int req_int(struct chan *ch, json_t *req, const char *key, int64_t def, int64_t min, int64_t max,
	    int64_t *out)
{
	json_t *v = json_object_get(req, key);
	json_int_t n;

	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v)) {
		chan_fail(ch, EINVAL, "field `%s` must be an integer", key);
		return -1;
	}
	n = json_integer_value(v);
	if (n < min || n > max) {
		chan_fail(ch, EINVAL, "field `%s` out of range [%lld, %lld]", key, (long long)min,
			  (long long)max);
		return -1;
	}
	*out = n;
	return 0;
}

int req_str(struct chan *ch, json_t *req, const char *key, size_t maxlen, const char **out)
{
	json_t *v = json_object_get(req, key);
	const char *s;

	if (!v || json_is_null(v)) {
		*out = NULL;
		return 0;
	}
	if (!json_is_string(v)) {
		chan_fail(ch, EINVAL, "field `%s` must be a string", key);
		return -1;
	}
	s = json_string_value(v);
	if (json_string_length(v) != strlen(s) || json_string_length(v) > maxlen) {
		chan_fail(ch, EINVAL, "field `%s` too long or contains NUL", key);
		return -1;
	}
	*out = s;
	return 0;
}

int req_path(struct chan *ch, json_t *req, const char *key, char out[AGENT_MAX_PATH + 1])
{
	const char *s;
	size_t hl;

	if (req_str(ch, req, key, AGENT_MAX_PATH, &s) < 0)
		return -1;
	if (!s || !*s) {
		chan_fail(ch, EINVAL, "field `%s` is required", key);
		return -1;
	}
	if (s[0] == '/') {
		strcpy(out, s);
		return 0;
	}
	hl = strlen(ch->user.home);
	if (hl + 1 + strlen(s) > AGENT_MAX_PATH) {
		chan_fail(ch, ENAMETOOLONG, "field `%s`: path too long", key);
		return -1;
	}
	memcpy(out, ch->user.home, hl);
	if (hl == 0 || out[hl - 1] != '/')
		out[hl++] = '/';
	strcpy(out + hl, s);
	return 0;
}

const char *agent_errno_code(int errnum)
{
	switch (errnum) {
	case ENOENT:
	case ESRCH:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "exists";
	case ENOTDIR:
		return "not_dir";
	case EISDIR:
		return "is_dir";
	case EACCES:
	case EPERM:
	case ELOOP:
	case EXDEV:
	case EROFS: /* a read-only root (readonly_root) or mount */
		return "forbidden";
	case EINVAL:
	case ENAMETOOLONG:
	case EPROTO:
		return "invalid";
	case EFBIG:
	case E2BIG:
	case EMSGSIZE:
		return "too_large";
	case ENOSPC:
	case EDQUOT:
		return "no_space";
	case EBUSY:
	case EAGAIN:
	case ETXTBSY:
		return "busy";
	default:
		return "internal";
	}
}
