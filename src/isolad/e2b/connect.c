/* SPDX-License-Identifier: Apache-2.0 */
/* connect: Connect protocol envelopes, proto3 JSON getters, base64 and error codes (pure). */
#include "e2b-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int e2b_envelope_parse(const uint8_t *buf, size_t len, const uint8_t **payload, size_t *plen)
{
	uint32_t n;

	/* UNTRUSTED: a request body. The declared length must match what arrived, exactly. */
	if (!buf || len < E2B_ENV_HDR)
		return -EINVAL;
	if (buf[0] & (E2B_FLAG_COMPRESS | E2B_FLAG_END))
		return -ENOTSUP;
	if (buf[0] != 0)
		return -EINVAL;
	n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 |
	    (uint32_t)buf[4];
	if ((size_t)n != len - E2B_ENV_HDR)
		return -EINVAL;
	*payload = buf + E2B_ENV_HDR;
	*plen = n;
	return 0;
}

int e2b_envelope_append(struct api_buf *b, uint8_t flags, const json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	uint8_t hdr[E2B_ENV_HDR];
	size_t n;
	int r;

	if (!s)
		return -ENOMEM;
	n = strlen(s);
	hdr[0] = flags;
	hdr[1] = (uint8_t)(n >> 24);
	hdr[2] = (uint8_t)(n >> 16);
	hdr[3] = (uint8_t)(n >> 8);
	hdr[4] = (uint8_t)n;
	r = api_buf_append(b, hdr, sizeof(hdr));
	if (!r)
		r = api_buf_append(b, s, n);
	free(s);
	return r;
}

int e2b_json_parse(const void *buf, size_t len, json_t **out, struct isola_err **err)
{
	json_error_t je;
	json_t *j;

	*out = NULL;
	/* UNTRUSTED: a client message. Depth first (jansson recurses), then strict parse. */
	if (!api_json_depth_ok(buf, len, API_MAX_JSON_DEPTH))
		return isola_err_set(err, EINVAL, "invalid", "message nests deeper than %d",
				     API_MAX_JSON_DEPTH);
	if (len == 0) {
		*out = json_object();
		return *out ? 0 : isola_err_set(err, ENOMEM, "internal", "out of memory");
	}
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return isola_err_set(err, EINVAL, "invalid", "message is not JSON: %s (line %d)",
				     je.text, je.line);
	if (!json_is_object(j)) {
		json_decref(j);
		return isola_err_set(err, EINVAL, "invalid", "message must be a JSON object");
	}
	*out = j;
	return 0;
}

json_t *e2b_jget(const json_t *obj, const char *camel, const char *snake)
{
	json_t *v = json_object_get(obj, camel);

	if (!v && snake)
		v = json_object_get(obj, snake);
	return json_is_null(v) ? NULL : v;
}

int e2b_jstr(const json_t *obj, const char *camel, const char *snake, size_t max, const char **out,
	     struct isola_err **err)
{
	json_t *v = e2b_jget(obj, camel, snake);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be a string", camel);
	if (json_string_length(v) > max ||
	    memchr(json_string_value(v), '\0', json_string_length(v)))
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` is longer than %zu bytes or contains NUL", camel,
				     max);
	*out = json_string_value(v);
	return 0;
}

int e2b_juint(const json_t *obj, const char *camel, const char *snake, uint64_t max, uint64_t *out,
	      struct isola_err **err)
{
	json_t *v = e2b_jget(obj, camel, snake);
	uint64_t n;

	if (!v)
		return 0;
	/* proto3 JSON: integers as numbers or decimal strings. */
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		n = (uint64_t)json_integer_value(v);
	} else if (json_is_string(v) && api_parse_u64(json_string_value(v), UINT64_MAX, &n) == 0) {
		;
	} else {
		return isola_err_set(err, EINVAL, "invalid",
				     "field `%s` must be a non-negative integer", camel);
	}
	if (n > max)
		return isola_err_set(err, ERANGE, "invalid", "field `%s` is larger than %llu",
				     camel, (unsigned long long)max);
	*out = n;
	return 0;
}

int e2b_jbool(const json_t *obj, const char *camel, const char *snake, bool *out,
	      struct isola_err **err)
{
	json_t *v = e2b_jget(obj, camel, snake);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be a boolean", camel);
	*out = json_is_true(v);
	return 0;
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int e2b_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap, size_t *outlen)
{
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t o = 0, i;

	/* UNTRUSTED: client base64. Padding only at the end; every output byte bounded by cap. */
	while (n > 0 && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		int v = b64_val(s[i]);

		if (v < 0)
			return -EINVAL;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= cap)
				return -E2BIG;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	*outlen = o;
	return 0;
}

int e2b_jbytes(const json_t *obj, const char *camel, const char *snake, size_t max, uint8_t **out,
	       size_t *len, struct isola_err **err)
{
	json_t *v = e2b_jget(obj, camel, snake);
	size_t sl, cap;
	uint8_t *buf;
	int r;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be base64", camel);
	sl = json_string_length(v);
	cap = sl / 4 * 3 + 3;
	if (cap > max + 3)
		return isola_err_set(err, E2BIG, "too_large", "field `%s` is larger than %zu bytes",
				     camel, max);
	buf = malloc(cap ? cap : 1);
	if (!buf)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	r = e2b_b64_decode(json_string_value(v), sl, buf, cap, len);
	if (r < 0 || *len > max) {
		free(buf);
		return isola_err_set(err, EINVAL, "invalid", "field `%s` is not valid base64",
				     camel);
	}
	*out = buf;
	return 0;
}

static const struct {
	const char *isola; /* isola_err code (api/errors.c, agent codes) */
	const char *connect;
} code_map[] = {
	{"invalid", "invalid_argument"},
	{"not_dir", "invalid_argument"},
	{"is_dir", "invalid_argument"},
	{"unauthorized", "unauthenticated"},
	{"forbidden", "permission_denied"},
	{"not_found", "not_found"},
	{"conflict", "failed_precondition"},
	{"exists", "already_exists"},
	{"busy", "resource_exhausted"},
	{"too_large", "resource_exhausted"},
	{"no_space", "resource_exhausted"},
	{"not_supported", "unimplemented"},
	{"unavailable", "unavailable"},
	{"timeout", "deadline_exceeded"},
	{"internal", "internal"},
};

const char *e2b_connect_code(const char *isola_code)
{
	for (size_t i = 0; isola_code && i < sizeof(code_map) / sizeof(code_map[0]); i++)
		if (!strcmp(code_map[i].isola, isola_code))
			return code_map[i].connect;
	return "unknown";
}

static const struct {
	const char *code;
	unsigned status;
} connect_status[] = {
	/* connectrpc.com/docs/protocol#error-codes */
	{"canceled", 499},
	{"unknown", 500},
	{"invalid_argument", 400},
	{"deadline_exceeded", 504},
	{"not_found", 404},
	{"already_exists", 409},
	{"permission_denied", 403},
	{"resource_exhausted", 429},
	{"failed_precondition", 400},
	{"aborted", 409},
	{"out_of_range", 400},
	{"unimplemented", 501},
	{"internal", 500},
	{"unavailable", 503},
	{"data_loss", 500},
	{"unauthenticated", 401},
};

unsigned e2b_connect_status(const char *code)
{
	for (size_t i = 0; code && i < sizeof(connect_status) / sizeof(connect_status[0]); i++)
		if (!strcmp(connect_status[i].code, code))
			return connect_status[i].status;
	return 500;
}

json_t *e2b_connect_error_json(const char *code, const char *message)
{
	return json_pack("{s:s, s:s}", "code", code ? code : "unknown", "message",
			 message ? message : "");
}

void e2b_rfc3339(double t, char *out, size_t n)
{
	time_t s = (time_t)t;
	int ms = (int)((t - (double)s) * 1000.0); /* truncated: never later than t */
	char sec[32];
	struct tm tm;

	/* milliseconds, as E2B's startedAt: list filters compare at that precision */
	if (t <= 0 || !gmtime_r(&s, &tm) || !strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm))
		snprintf(out, n, "1970-01-01T00:00:00.000Z");
	else
		snprintf(out, n, "%s.%03dZ", sec, ms < 0 ? 0 : (ms > 999 ? 999 : ms));
}

/* Reads exactly `n` decimal digits at *p into *v and advances *p. */
static int digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -EINVAL;
		*v = *v * 10 + (**p - '0');
	}
	return 0;
}

int e2b_parse_rfc3339(const char *s, double *out)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0;
	double frac = 0, scale = 0.1;
	const char *p = s;
	struct tm tm = {0};
	time_t t;

	/* UNTRUSTED: a query value; every byte is checked against the grammar below. */
	if (!s || digits(&p, 4, &y) < 0 || *p++ != '-' || digits(&p, 2, &mo) < 0 || *p++ != '-' ||
	    digits(&p, 2, &d) < 0 || (*p != 'T' && *p != 't' && *p != ' ') || !*p++ ||
	    digits(&p, 2, &h) < 0 || *p++ != ':' || digits(&p, 2, &mi) < 0 || *p++ != ':' ||
	    digits(&p, 2, &sec) < 0)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1;

		if (digits(&p, 2, &oh) < 0 || *p++ != ':' || digits(&p, 2, &om) < 0 || oh > 23 ||
		    om > 59)
			return -EINVAL;
		oh *= sign;
		om *= sign;
	} else {
		return -EINVAL;
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1 && y != 1969)
		return -EINVAL;
	*out = (double)t + frac - (double)(oh * 3600 + om * 60);
	return 0;
}
