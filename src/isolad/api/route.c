/* SPDX-License-Identifier: Apache-2.0 */
/* route: URL pattern matching and validation of path parameters (pure, unit-tested). */
#include "api-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"

/* Length of the segment starting at s (up to '/' or the end). */
static size_t seg_len(const char *s)
{
	const char *e = strchr(s, '/');

	return e ? (size_t)(e - s) : strlen(s);
}

bool api_route_match(const char *pattern, const char *path, struct api_match *m)
{
	const char *p = pattern, *u = path;

	m->n = 0;
	/* UNTRUSTED: path is the client's (already percent-decoded by MHD). */
	if (*p != '/' || *u != '/')
		return false;
	while (*p == '/' && *u == '/') {
		size_t pl, ul;

		p++;
		u++;
		pl = seg_len(p);
		ul = seg_len(u);
		if (pl >= 2 && p[0] == '{' && p[pl - 1] == '}') {
			if (ul == 0 || ul >= API_MAX_SEGMENT || m->n >= API_MAX_PARAMS)
				return false;
			m->names[m->n] = p + 1;
			m->name_lens[m->n] = pl - 2;
			memcpy(m->values[m->n], u, ul);
			m->values[m->n][ul] = '\0';
			m->n++;
		} else if (pl != ul || memcmp(p, u, pl) != 0) {
			return false;
		}
		p += pl;
		u += ul;
	}
	return *p == '\0' && *u == '\0';
}

const char *api_match_get(const struct api_match *m, const char *name)
{
	size_t n = strlen(name);

	for (unsigned i = 0; i < m->n; i++)
		if (m->name_lens[i] == n && !memcmp(m->names[i], name, n))
			return m->values[i];
	return NULL;
}

bool api_valid_sandbox_id(const char *s)
{
	size_t n = strlen(s);

	/* Ids are [a-z0-9-], at most 39 bytes (struct sandbox_spec.id). */
	if (n == 0 || n > 39)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

bool api_valid_template_name(const char *s)
{
	size_t n = strlen(s);

	/* A directory name on the host: no '/', no leading '.', at most 63 bytes. */
	if (n == 0 || n > 63 || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

int api_parse_pid(const char *s, int *out)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 10)
		return -EINVAL;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*c - '0');
	}
	if (v == 0 || v > INT_MAX)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int api_param_check(const char *name, const char *value, struct isola_err **err)
{
	int pid;

	/* {id} is a sandbox id or its name (core resolves it; server.c). */
	if (!strcmp(name, "id") && !api_valid_sandbox_id(value) && !core_sandbox_name_valid(value))
		return isola_err_set(
			err, EINVAL, "invalid",
			"invalid sandbox id `%s`: expected an id (1-39 of [a-z0-9-]) or "
			"a name (1-63 of [a-z0-9_.-])",
			value);
	if (!strcmp(name, "pid") && api_parse_pid(value, &pid) < 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "invalid pid `%s`: expected a positive integer", value);
	if (!strcmp(name, "name") && !api_valid_template_name(value))
		return isola_err_set(err, EINVAL, "invalid",
				     "invalid template name `%s`: expected 1-63 of [A-Za-z0-9._-], "
				     "not starting with '.' or '-'",
				     value);
	return 0;
}

int api_check_path(const char *what, const char *p, size_t len, struct isola_err **err)
{
	/* UNTRUSTED: a client-supplied path, checked here before it reaches the agent (which
	 * resolves it inside the sandbox; the host never does). */
	if (!p || len == 0)
		return isola_err_set(err, EINVAL, "invalid", "%s: path is empty", what);
	if (memchr(p, '\0', len))
		return isola_err_set(err, EINVAL, "invalid", "%s: path contains a NUL byte", what);
	if (len > API_MAX_PATH)
		return isola_err_set(err, ENAMETOOLONG, "invalid",
				     "%s: path is longer than %u bytes", what, API_MAX_PATH);
	return 0;
}

bool api_tar_name_ok(const char *name, size_t len)
{
	const char *p, *end;

	/* UNTRUSTED: names from an uploaded archive or from the agent's tar_get. Archive
	 * traversal (../, absolute paths) is refused here; the agent refuses it again inside
	 * the sandbox. */
	if (!name || len == 0 || len > API_MAX_PATH || memchr(name, '\0', len) || name[0] == '/')
		return false;
	p = name;
	end = name + len;
	while (p < end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t n = slash ? (size_t)(slash - p) : (size_t)(end - p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n + 1;
	}
	return true;
}

const char *api_ws_protocol_token(const char *h, size_t *len)
{
	static const char prefix[] = API_WS_BEARER;
	const size_t pl = sizeof(prefix) - 1;

	/* UNTRUSTED: the client's Sec-WebSocket-Protocol header, a comma-separated list. */
	while (h && *h) {
		size_t n;

		h += strspn(h, " \t,");
		n = strcspn(h, " \t,");
		if (n > pl && !strncmp(h, prefix, pl)) {
			*len = n - pl;
			return h + pl;
		}
		h += n;
	}
	return NULL;
}
