/* SPDX-License-Identifier: Apache-2.0 */
/* httpresp: reads HTTP/1.x responses (pure; fuzzed by fuzz/fuzz_httpresp.c). */
#include "httpresp.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* Finds the end of the head ("\r\n\r\n" or "\n\n"): its length, or 0. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* Trims blanks and a CR from [*s, *e). */
static void trim(const char **s, const char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r'))
		(*e)--;
}

static bool name_is(const char *s, const char *e, const char *want)
{
	size_t n = strlen(want);

	return (size_t)(e - s) == n && !strncasecmp(s, want, n);
}

static int parse_u64(const char *s, const char *e, uint64_t *out)
{
	uint64_t v = 0;

	if (s == e)
		return -EBADMSG;
	for (; s < e; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -EBADMSG;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int http_resp_head(const char *buf, size_t len, struct http_resp *r)
{
	size_t hl = head_end(buf, len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD);
	const char *p = buf, *end, *eol;
	bool has_len = false;

	if (!hl)
		return len >= HTTP_MAX_HEAD ? -EMSGSIZE : 0;
	memset(r, 0, sizeof(*r));
	r->head_len = hl;
	r->framing = HTTP_BY_CLOSE;
	end = buf + hl;
	/* status line: HTTP/1.x SP 3DIGIT [SP reason] */
	eol = memchr(p, '\n', (size_t)(end - p));
	if (!eol || eol - p < 12 || strncmp(p, "HTTP/1.", 7) || p[8] != ' ')
		return -EBADMSG;
	for (int i = 9; i < 12; i++)
		if (p[i] < '0' || p[i] > '9')
			return -EBADMSG;
	r->status = (unsigned)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
	if (r->status < 100)
		return -EBADMSG;
	for (p = eol + 1; p < end; p = eol + 1) {
		const char *ns, *ne, *vs, *ve, *colon;

		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			return -EBADMSG;
		ve = eol;
		if (ve > p && ve[-1] == '\r')
			ve--;
		if (ve == p)
			break; /* the blank line */
		colon = memchr(p, ':', (size_t)(ve - p));
		if (!colon || colon == p)
			return -EBADMSG;
		ns = p;
		ne = colon;
		vs = colon + 1;
		trim(&vs, &ve);
		for (const char *c = vs; c < ve; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return -EBADMSG;
		if (name_is(ns, ne, "Content-Length")) {
			uint64_t v;

			if (parse_u64(vs, ve, &v) < 0 || (has_len && v != r->left))
				return -EBADMSG;
			has_len = true;
			r->left = v;
			if (r->framing != HTTP_BY_CHUNKS)
				r->framing = HTTP_BY_LENGTH;
		} else if (name_is(ns, ne, "Transfer-Encoding")) {
			if (!name_is(vs, ve, "chunked"))
				return -EBADMSG;
			r->framing = HTTP_BY_CHUNKS; /* chunked wins over a length (RFC 9112) */
			r->left = 0;
			r->chst = HTTP_CH_SIZE;
		} else if (name_is(ns, ne, "Content-Type")) {
			size_t n = (size_t)(ve - vs);

			if (n >= sizeof(r->ctype))
				n = sizeof(r->ctype) - 1;
			memcpy(r->ctype, vs, n);
			r->ctype[n] = '\0';
		}
	}
	/* No body for 1xx, 204 and 304 */
	if (r->status < 200 || r->status == 204 || r->status == 304 ||
	    (r->framing == HTTP_BY_LENGTH && r->left == 0))
		r->done = true;
	return 1;
}

long http_resp_body(struct http_resp *r, const char *in, size_t n, char *out)
{
	size_t i = 0, o = 0;

	if (r->done)
		return 0;
	if (r->framing == HTTP_BY_CLOSE) {
		memmove(out, in, n);
		return (long)n;
	}
	if (r->framing == HTTP_BY_LENGTH) {
		size_t k = n < r->left ? n : (size_t)r->left;

		memmove(out, in, k);
		r->left -= k;
		r->done = r->left == 0;
		return (long)k;
	}
	while (i < n && !r->done) {
		char c = in[i];

		switch (r->chst) {
		case HTTP_CH_SIZE: {
			int h = util_hexval(c);

			if (h >= 0) {
				if (++r->size_digits > 15)
					return -EBADMSG; /* no chunk of a petabyte */
				r->left = r->left * 16 + (uint64_t)h;
				i++;
				break;
			}
			if (!r->size_digits || (c != '\r' && c != '\n' && c != ';' && c != ' '))
				return -EBADMSG;
			r->chst = HTTP_CH_EXT;
			break;
		}
		case HTTP_CH_EXT:
			i++;
			if (c != '\n')
				break;
			r->size_digits = 0;
			if (r->left == 0) {
				r->chst = HTTP_CH_TRAILER;
				r->line_empty = true;
			} else {
				r->chst = HTTP_CH_DATA;
			}
			break;
		case HTTP_CH_DATA: {
			size_t k = n - i < r->left ? n - i : (size_t)r->left;

			memmove(out + o, in + i, k);
			o += k;
			i += k;
			r->left -= k;
			if (!r->left)
				r->chst = HTTP_CH_DATA_CR;
			break;
		}
		case HTTP_CH_DATA_CR:
			i++;
			if (c == '\n') {
				r->chst = HTTP_CH_SIZE;
				break;
			}
			if (c != '\r')
				return -EBADMSG;
			r->chst = HTTP_CH_DATA_LF;
			break;
		case HTTP_CH_DATA_LF:
			i++;
			if (c != '\n')
				return -EBADMSG;
			r->chst = HTTP_CH_SIZE;
			break;
		case HTTP_CH_TRAILER:
			i++;
			if (c == '\n') {
				if (r->line_empty) {
					r->chst = HTTP_CH_DONE;
					r->done = true;
				}
				r->line_empty = true;
			} else if (c != '\r') {
				r->line_empty = false;
			}
			break;
		case HTTP_CH_DONE:
			r->done = true;
			break;
		}
	}
	return (long)o;
}
