/* SPDX-License-Identifier: Apache-2.0 */
/* params: parsing of query values, headers and JSON request bodies (pure, unit-tested). */
#include "api-internal.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"

int api_parse_bool(const char *s, bool *out)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "")) {
		*out = true;
		return 0;
	}
	if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

int api_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s || strlen(s) > 20)
		return -EINVAL;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*c - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int api_parse_seconds_ms(const char *s, uint64_t max_ms, uint64_t *out)
{
	char *end;
	double v;

	if (!s || !*s || *s == '-' || *s == '+' || strlen(s) > 32)
		return -EINVAL;
	for (const char *c = s; *c; c++)
		if (!((*c >= '0' && *c <= '9') || *c == '.'))
			return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < 0)
		return -EINVAL;
	if (v * 1000.0 > (double)max_ms)
		return -ERANGE;
	*out = (uint64_t)(v * 1000.0 + 0.5);
	return 0;
}

int api_parse_mode(const char *s, uint32_t *out)
{
	uint32_t v = 0;

	if (!s || !*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '7')
			return -EINVAL;
		v = v * 8 + (uint32_t)(*c - '0');
	}
	if (v > 07777)
		return -ERANGE;
	*out = v;
	return 0;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{"HUP", SIGHUP},   {"INT", SIGINT},	{"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
	{"KILL", SIGKILL}, {"USR1", SIGUSR1},	{"USR2", SIGUSR2}, {"PIPE", SIGPIPE},
	{"ALRM", SIGALRM}, {"TERM", SIGTERM},	{"CONT", SIGCONT}, {"STOP", SIGSTOP},
	{"TSTP", SIGTSTP}, {"WINCH", SIGWINCH},
};

int api_signal_from_name(const char *s)
{
	uint64_t n;

	if (!s)
		return -EINVAL;
	if (api_parse_u64(s, 64, &n) == 0)
		return n >= 1 ? (int)n : -EINVAL;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
		if (!strcasecmp(s, signals[i].name))
			return signals[i].sig;
	return -EINVAL;
}

int api_parse_range(const char *hdr, struct api_range *out)
{
	const char *p, *dash;
	char num[24];
	uint64_t a, b;

	/* UNTRUSTED: the client's Range header. One range only; anything else is ignored
	 * (RFC 9110 allows serving the whole representation). */
	if (!hdr || strncmp(hdr, "bytes=", 6) != 0)
		return -EINVAL;
	p = hdr + 6;
	if (strchr(p, ','))
		return -EINVAL;
	dash = strchr(p, '-');
	if (!dash || (size_t)(dash - p) >= sizeof(num) || strlen(dash + 1) >= sizeof(num))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (dash == p) {
		if (api_parse_u64(dash + 1, UINT64_MAX, &b) < 0 || b == 0)
			return -EINVAL;
		out->suffix = true;
		out->len = b;
		return 0;
	}
	memcpy(num, p, (size_t)(dash - p));
	num[dash - p] = '\0';
	if (api_parse_u64(num, UINT64_MAX, &a) < 0)
		return -EINVAL;
	out->start = a;
	out->end = UINT64_MAX;
	if (dash[1]) {
		if (api_parse_u64(dash + 1, UINT64_MAX, &b) < 0 || b < a)
			return -EINVAL;
		out->end = b;
	}
	return 0;
}

int api_range_resolve(const struct api_range *rg, uint64_t size, uint64_t *off, uint64_t *len)
{
	if (rg->suffix) {
		if (size == 0)
			return -ERANGE;
		*len = rg->len < size ? rg->len : size;
		*off = size - *len;
		return 0;
	}
	if (rg->start >= size)
		return -ERANGE;
	*off = rg->start;
	*len = (rg->end >= size - 1 ? size - 1 : rg->end) - rg->start + 1;
	return 0;
}

bool api_json_depth_ok(const char *buf, size_t len, unsigned max)
{
	unsigned depth = 0;
	bool in_str = false;

	/* UNTRUSTED: a request body, scanned before jansson (whose own limit is 2048) sees it. */
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				return false;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return true;
}

int api_json_parse_body(const char *buf, size_t len, json_t **out, struct isola_err **err)
{
	json_error_t je;
	json_t *j;

	*out = NULL;
	if (!api_json_depth_ok(buf, len, API_MAX_JSON_DEPTH))
		return isola_err_set(err, EINVAL, "invalid",
				     "malformed JSON body: nested deeper than %u levels",
				     API_MAX_JSON_DEPTH);
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return isola_err_set(err, EINVAL, "invalid",
				     "malformed JSON body at line %d, column %d (byte %d): %s",
				     je.line, je.column, je.position, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return isola_err_set(err, EINVAL, "invalid", "JSON body must be an object");
	}
	*out = j;
	return 0;
}

int api_json_only(const json_t *obj, const char *const *allowed, struct isola_err **err)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v)
	{
		bool ok = false;

		for (const char *const *a = allowed; *a; a++)
			if (!strcmp(*a, key))
				ok = true;
		if (!ok)
			return isola_err_set(err, EINVAL, "invalid", "unknown field `%.64s`", key);
	}
	return 0;
}

int api_json_str(const json_t *obj, const char *key, size_t max, const char **out,
		 struct isola_err **err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be a string", key);
	if (json_string_length(v) > max)
		return isola_err_set(err, EINVAL, "invalid", "field `%s` is longer than %zu bytes",
				     key, max);
	if (memchr(json_string_value(v), '\0', json_string_length(v)))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` contains a NUL byte", key);
	*out = json_string_value(v);
	return 0;
}

int api_json_bool(const json_t *obj, const char *key, bool *out, struct isola_err **err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be a boolean", key);
	*out = json_is_true(v);
	return 0;
}

int api_json_uint(const json_t *obj, const char *key, uint64_t max, uint64_t *out,
		  struct isola_err **err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` must be a non-negative integer", key);
	if ((uint64_t)json_integer_value(v) > max)
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be at most %llu", key,
				     (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int api_json_num(const json_t *obj, const char *key, double min, double max, double *out,
		 struct isola_err **err)
{
	json_t *v = json_object_get(obj, key);
	double d;

	if (!v)
		return 0;
	if (!json_is_number(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be a number", key);
	d = json_number_value(v);
	if (!isfinite(d) || d < min || d > max)
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be between %g and %g",
				     key, min, max);
	*out = d;
	return 0;
}

int api_json_size(const json_t *obj, const char *key, uint64_t *out, struct isola_err **err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v) && json_string_length(v) < 32 &&
	    util_parse_size(json_string_value(v), out) == 0)
		return 0;
	return isola_err_set(err, EINVAL, "invalid",
			     "field `%s` must be a byte count or a size like \"512M\"", key);
}

static bool env_key_ok(const char *k)
{
	if (!*k || strlen(k) > 255)
		return false;
	for (const char *c = k; *c; c++)
		if (*c == '=')
			return false;
	return true;
}

static bool label_key_ok(const char *k)
{
	if (!*k || strlen(k) > 63)
		return false;
	for (const char *c = k; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.' || *c == '/'))
			return false;
	return true;
}

int api_json_str_map(const json_t *obj, const char *key, bool env_keys, const json_t **out,
		     struct isola_err **err)
{
	json_t *m = json_object_get(obj, key), *v;
	const char *k;

	if (!m)
		return 0;
	if (!json_is_object(m))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be an object", key);
	if (json_object_size(m) > 1024)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` has more than 1024 members", key);
	json_object_foreach(m, k, v)
	{
		if (env_keys ? !env_key_ok(k) : !label_key_ok(k))
			return isola_err_set(err, EINVAL, "invalid",
					     "field `%s`: invalid key `%.64s`", key, k);
		if (!json_is_string(v))
			return isola_err_set(err, EINVAL, "invalid",
					     "field `%s`: value of `%.64s` must be a string", key,
					     k);
		if (memchr(json_string_value(v), '\0', json_string_length(v)) ||
		    json_string_length(v) > (env_keys ? 128u * 1024u : 255u))
			return isola_err_set(
				err, EINVAL, "invalid",
				"field `%s`: value of `%.64s` is too long or has a NUL", key, k);
	}
	*out = m;
	return 0;
}

int api_json_argv(const json_t *obj, json_t **out, struct isola_err **err)
{
	json_t *cmd = json_object_get(obj, "cmd"), *command = json_object_get(obj, "command");
	json_t *argv, *v;
	size_t i;

	if (cmd && command)
		return isola_err_set(err, EINVAL, "invalid", "give `cmd` or `command`, not both");
	if (command) {
		const char *s = NULL;

		if (api_json_str(obj, "command", 128u * 1024u, &s, err) < 0)
			return -EINVAL;
		if (!*s)
			return isola_err_set(err, EINVAL, "invalid", "field `command` is empty");
		*out = json_pack("[sss]", "/bin/sh", "-c", s);
		return *out ? 0 : isola_err_set(err, ENOMEM, "internal", "out of memory");
	}
	if (!cmd)
		return isola_err_set(err, EINVAL, "invalid", "missing field `cmd` (or `command`)");
	if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) > 4096)
		return isola_err_set(
			err, EINVAL, "invalid",
			"field `cmd` must be a non-empty array of strings (at most 4096)");
	argv = json_array();
	if (!argv)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	json_array_foreach(cmd, i, v)
	{
		if (!json_is_string(v) ||
		    memchr(json_string_value(v), '\0', json_string_length(v)) ||
		    json_string_length(v) > 128u * 1024u) {
			json_decref(argv);
			return isola_err_set(
				err, EINVAL, "invalid",
				"field `cmd`: element %zu must be a string without NUL", i);
		}
		json_array_append(argv, v);
	}
	if (!json_string_length(json_array_get(argv, 0))) {
		json_decref(argv);
		return isola_err_set(err, EINVAL, "invalid", "field `cmd`: program is empty");
	}
	*out = argv;
	return 0;
}

int api_json_signal(const json_t *obj, const char *key, int *out, struct isola_err **err)
{
	json_t *v = json_object_get(obj, key);
	int sig = -EINVAL;

	if (!v)
		return isola_err_set(err, EINVAL, "invalid", "missing field `%s`", key);
	if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64)
		sig = (int)json_integer_value(v);
	else if (json_is_string(v) && json_string_length(v) < 16)
		sig = api_signal_from_name(json_string_value(v));
	if (sig < 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` must be a signal name (\"TERM\") or number 1-64",
				     key);
	*out = sig;
	return 0;
}
