/* SPDX-License-Identifier: Apache-2.0 */
/* xhttp: the exposure listener's head parser, router, rewriter and request framing (pure). */
#include "xhttp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 tchar */
static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Visible characters of a target (no space, no controls, no DEL, no non-ASCII). */
static bool is_target_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

bool xhttp_span_eq(const char *buf, struct xhttp_span s, const char *str)
{
	return strlen(str) == s.len && strncasecmp(buf + s.off, str, s.len) == 0;
}

/* Finds the end of the line starting at off: returns the index of its CR (followed by LF),
 * -1 when the buffer ends first, -2 on a bare CR or LF. */
static long line_end(const char *buf, size_t len, size_t off)
{
	for (size_t i = off; i < len; i++) {
		if (buf[i] == '\n')
			return -2;
		if (buf[i] == '\r') {
			if (i + 1 >= len)
				return -1;
			return buf[i + 1] == '\n' ? (long)i : -2;
		}
	}
	return -1;
}

static int parse_request_line(const char *buf, size_t end, struct xhttp_head *h)
{
	size_t i = 0;

	while (i < end && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || i > 16 || i >= end || buf[i] != ' ')
		return -EBADMSG;
	h->method = (struct xhttp_span){0, i};
	h->target.off = ++i;
	while (i < end && is_target_char((unsigned char)buf[i]))
		i++;
	h->target.len = i - h->target.off;
	if (h->target.len == 0 || buf[h->target.off] != '/' || i >= end || buf[i] != ' ')
		return -EBADMSG; /* absolute-form, authority-form and `*` are refused */
	h->version = (struct xhttp_span){i + 1, end - i - 1};
	if (!xhttp_span_eq(buf, h->version, "HTTP/1.1") &&
	    !xhttp_span_eq(buf, h->version, "HTTP/1.0"))
		return -EBADMSG;
	if (memcmp(buf + h->version.off, "HTTP/", 5) != 0)
		return -EBADMSG; /* the version is case-sensitive */
	return 0;
}

static int parse_field(const char *buf, size_t off, size_t end, struct xhttp_field *f)
{
	size_t i = off, vs, ve;

	/* UNTRUSTED: a header line; obs-fold (leading blank) and a blank before the colon
	 * are refused (request smuggling through disagreeing parsers). */
	while (i < end && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == off || i >= end || buf[i] != ':')
		return -EBADMSG;
	f->name = (struct xhttp_span){off, i - off};
	vs = i + 1;
	while (vs < end && (buf[vs] == ' ' || buf[vs] == '\t'))
		vs++;
	ve = end;
	while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
		ve--;
	for (size_t k = vs; k < ve; k++) {
		unsigned char c = (unsigned char)buf[k];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -EBADMSG;
	}
	f->value = (struct xhttp_span){vs, ve - vs};
	f->line = (struct xhttp_span){off, end + 2 - off};
	return 0;
}

int xhttp_parse(const char *buf, size_t len, struct xhttp_head *h)
{
	size_t off = 0;
	long e;
	int r;

	memset(h, 0, sizeof(*h));
	if (len > XHTTP_MAX_HEAD)
		len = XHTTP_MAX_HEAD; /* a head must end within the cap */
	e = line_end(buf, len, 0);
	if (e == -2)
		return -EBADMSG;
	if (e == -1)
		return len >= XHTTP_MAX_HEAD ? -EMSGSIZE : 0;
	r = parse_request_line(buf, (size_t)e, h);
	if (r < 0)
		return r;
	off = (size_t)e + 2;
	for (;;) {
		e = line_end(buf, len, off);
		if (e == -2)
			return -EBADMSG;
		if (e == -1)
			return len >= XHTTP_MAX_HEAD ? -EMSGSIZE : 0;
		if ((size_t)e == off) {
			h->head_len = off + 2;
			return 1;
		}
		if (h->nfields == XHTTP_MAX_HEADERS)
			return -EMSGSIZE;
		r = parse_field(buf, off, (size_t)e, &h->fields[h->nfields]);
		if (r < 0)
			return r;
		h->nfields++;
		off = (size_t)e + 2;
	}
}

/* Parses a decimal port 1..65535 from s[0..n). */
static int parse_port(const char *s, size_t n)
{
	int v = 0;

	if (n == 0 || n > 5 || s[0] == '0')
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= 65535 ? v : -1;
}

static bool valid_id(const char *s, size_t n)
{
	if (n == 0 || n > XHTTP_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* Host `<port>-<id>.<domain>[:port]` (case-insensitive, as DNS names are). */
static int route_host(const char *v, size_t n, const char *domain, struct xhttp_route *rt)
{
	size_t dl = strlen(domain), i, name_len = n;
	char low[XHTTP_ID_MAX + 1];

	for (i = 0; i < n; i++)
		if (v[i] == ':') {
			if (parse_port(v + i + 1, n - i - 1) < 0)
				return -ENOENT;
			name_len = i;
			break;
		}
	if (name_len > 0 && v[name_len - 1] == '.')
		name_len--; /* fully qualified form */
	if (name_len <= dl + 1 || v[name_len - dl - 1] != '.' ||
	    strncasecmp(v + name_len - dl, domain, dl) != 0)
		return -ENOENT;
	name_len -= dl + 1; /* the label `<port>-<id>` */
	for (i = 0; i < name_len && v[i] != '-'; i++)
		;
	if (i == name_len)
		return -ENOENT;
	rt->port = parse_port(v, i);
	if (rt->port < 0 || name_len - i - 1 > XHTTP_ID_MAX)
		return -ENOENT;
	for (size_t k = i + 1; k < name_len; k++)
		low[k - i - 1] = (char)((v[k] >= 'A' && v[k] <= 'Z') ? v[k] + 32 : v[k]);
	if (!valid_id(low, name_len - i - 1))
		return -ENOENT;
	memcpy(rt->id, low, name_len - i - 1);
	rt->id[name_len - i - 1] = '\0';
	rt->by_host = true;
	return 0;
}

/* Path `/_isola/<id>/<port>` followed by end, `/` or `?`. */
static int route_path(const char *t, size_t n, struct xhttp_route *rt)
{
	static const char pre[] = "/_isola/";
	size_t i, idl, ps;

	if (n < sizeof(pre) - 1 || memcmp(t, pre, sizeof(pre) - 1) != 0)
		return -ENOENT;
	i = sizeof(pre) - 1;
	for (idl = 0; i + idl < n && t[i + idl] != '/'; idl++)
		;
	if (!valid_id(t + i, idl) || i + idl >= n)
		return -ENOENT;
	ps = i + idl + 1;
	for (i = ps; i < n && t[i] != '/' && t[i] != '?'; i++)
		;
	rt->port = parse_port(t + ps, i - ps);
	if (rt->port < 0)
		return -ENOENT;
	memcpy(rt->id, t + sizeof(pre) - 1, idl);
	rt->id[idl] = '\0';
	rt->prefix_len = i;
	rt->by_host = false;
	return 0;
}

/* True when the path (before `?`) has a `..` segment, plain or percent-encoded. */
static bool has_dotdot(const char *t, size_t n)
{
	size_t end = n, s = 0;

	for (size_t i = 0; i < n; i++)
		if (t[i] == '?') {
			end = i;
			break;
		}
	while (s < end) {
		size_t e = s, k = s, dots = 0;

		while (e < end && t[e] != '/')
			e++;
		/* a segment made only of `.` / `%2e` with two dots is `..` */
		while (k < e) {
			if (t[k] == '.') {
				dots++;
				k++;
			} else if (e - k >= 3 && t[k] == '%' && t[k + 1] == '2' &&
				   (t[k + 2] == 'e' || t[k + 2] == 'E')) {
				dots++;
				k += 3;
			} else {
				dots = 99;
				break;
			}
		}
		if (dots == 2)
			return true;
		s = e + 1;
	}
	/* an encoded slash could hide a segment boundary from us but not from the server */
	for (size_t i = 0; i + 2 < end; i++)
		if (t[i] == '%' && t[i + 1] == '2' && (t[i + 2] == 'f' || t[i + 2] == 'F')) {
			for (size_t k = 0; k + 1 < end; k++)
				if (t[k] == '.' && t[k + 1] == '.')
					return true;
		}
	return false;
}

/* Finds `isola_token=` in the query of the target: sets *v to its value. */
static bool query_token(const char *buf, struct xhttp_span t, struct xhttp_span *v,
			struct xhttp_span *param)
{
	const char *q = memchr(buf + t.off, '?', t.len);
	size_t i, end = t.off + t.len, nl = strlen(XHTTP_TOKEN_NAME);

	if (!q)
		return false;
	i = (size_t)(q - buf) + 1;
	while (i < end) {
		size_t e = i;

		while (e < end && buf[e] != '&')
			e++;
		if (e - i > nl && memcmp(buf + i, XHTTP_TOKEN_NAME "=", nl + 1) == 0) {
			*v = (struct xhttp_span){i + nl + 1, e - i - nl - 1};
			*param = (struct xhttp_span){i, e - i};
			return true;
		}
		i = e + 1;
	}
	return false;
}

/* Finds the isola_token pair in a Cookie value: sets *v to its value, *pair to the pair. */
static bool cookie_token(const char *buf, struct xhttp_span c, struct xhttp_span *v,
			 struct xhttp_span *pair)
{
	size_t i = c.off, end = c.off + c.len, nl = strlen(XHTTP_TOKEN_NAME);

	while (i < end) {
		size_t e = i;

		while (i < end && buf[i] == ' ')
			i++;
		e = i;
		while (e < end && buf[e] != ';')
			e++;
		if (e - i > nl && memcmp(buf + i, XHTTP_TOKEN_NAME "=", nl + 1) == 0) {
			*v = (struct xhttp_span){i + nl + 1, e - i - nl - 1};
			*pair = (struct xhttp_span){i, e - i};
			return true;
		}
		i = e + 1;
	}
	return false;
}

int xhttp_route(const char *buf, const struct xhttp_head *h, const char *domain,
		struct xhttp_route *rt)
{
	const struct xhttp_field *host = NULL;
	struct xhttp_span v, unused;
	unsigned ntok = 0;
	int r = -ENOENT;

	memset(rt, 0, sizeof(*rt));
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct xhttp_field *f = &h->fields[i];

		if (xhttp_span_eq(buf, f->name, "Host")) {
			if (host)
				return -EBADMSG; /* two Hosts: which one a server honours varies */
			host = f;
		} else if (xhttp_span_eq(buf, f->name, XHTTP_TOKEN_HDR)) {
			if (++ntok > 1)
				return -EBADMSG;
			rt->token = f->value;
			rt->from = XHTTP_TOK_HEADER;
		}
	}
	if (!host && xhttp_span_eq(buf, h->version, "HTTP/1.1"))
		return -EBADMSG; /* RFC 9112 3.2: a 1.1 request without Host is a 400 */
	if (has_dotdot(buf + h->target.off, h->target.len))
		return -EBADMSG;
	if (host)
		r = route_host(buf + host->value.off, host->value.len, domain, rt);
	if (r == -ENOENT)
		r = route_path(buf + h->target.off, h->target.len, rt);
	if (r < 0)
		return r;
	if (rt->from == XHTTP_TOK_NONE) {
		for (unsigned i = 0; i < h->nfields; i++) {
			const struct xhttp_field *f = &h->fields[i];

			if (xhttp_span_eq(buf, f->name, "Cookie") &&
			    cookie_token(buf, f->value, &v, &unused)) {
				rt->token = v;
				rt->from = XHTTP_TOK_COOKIE;
				break;
			}
		}
	}
	if (rt->from == XHTTP_TOK_NONE && query_token(buf, h->target, &v, &unused)) {
		rt->token = v;
		rt->from = XHTTP_TOK_QUERY;
	}
	return 0;
}

/* Appends n bytes to out at *pos; false when cap would be passed. */
static bool put(char *out, size_t cap, size_t *pos, const char *p, size_t n)
{
	if (n > cap - *pos)
		return false;
	memcpy(out + *pos, p, n);
	*pos += n;
	return true;
}

/* Appends target bytes [from, end) minus the isola_token parameter (and its separator). */
static bool put_target(const char *buf, const struct xhttp_head *h, size_t from, char *out,
		       size_t cap, size_t *pos)
{
	struct xhttp_span v, param;
	size_t end = h->target.off + h->target.len;

	if (!query_token(buf, h->target, &v, &param) || param.off < from)
		return put(out, cap, pos, buf + from, end - from);
	/* before the parameter, without its `&` or `?` when it is the last one */
	{
		size_t pe = param.off + param.len;
		bool last = pe >= end;
		size_t upto = last ? param.off - 1 : param.off;

		if (!put(out, cap, pos, buf + from, upto - from))
			return false;
		if (!last && !put(out, cap, pos, buf + pe + 1, end - pe - 1))
			return false;
	}
	return true;
}

long xhttp_target_without_token(const char *buf, const struct xhttp_head *h, char *out, size_t cap)
{
	size_t pos = 0;

	if (!put_target(buf, h, h->target.off, out, cap, &pos))
		return -ENOSPC;
	return (long)pos;
}

long xhttp_rewrite(const char *buf, const struct xhttp_head *h, const struct xhttp_route *rt,
		   char *out, size_t cap)
{
	size_t pos = 0, from = h->target.off + (rt->by_host ? 0 : rt->prefix_len);
	size_t tstart;

	if (!put(out, cap, &pos, buf + h->method.off, h->method.len) ||
	    !put(out, cap, &pos, " ", 1))
		return -ENOSPC;
	tstart = pos;
	if (buf[from] != '/' && !put(out, cap, &pos, "/", 1))
		return -ENOSPC;
	if (!put_target(buf, h, from, out, cap, &pos))
		return -ENOSPC;
	if (pos == tstart && !put(out, cap, &pos, "/", 1))
		return -ENOSPC;
	if (!put(out, cap, &pos, " ", 1) ||
	    !put(out, cap, &pos, buf + h->version.off, h->version.len) ||
	    !put(out, cap, &pos, "\r\n", 2))
		return -ENOSPC;
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct xhttp_field *f = &h->fields[i];
		struct xhttp_span v, pair;

		if (xhttp_span_eq(buf, f->name, XHTTP_TOKEN_HDR))
			continue;
		if (xhttp_span_eq(buf, f->name, "Cookie") &&
		    cookie_token(buf, f->value, &v, &pair)) {
			/* the value minus the isola_token pair; the header goes when nothing stays */
			size_t ve = f->value.off + f->value.len, pe = pair.off + pair.len;
			size_t head_end = pair.off, tail = pe < ve ? pe + 1 : ve;

			while (head_end > f->value.off &&
			       (buf[head_end - 1] == ' ' || buf[head_end - 1] == ';'))
				head_end--;
			while (tail < ve && buf[tail] == ' ')
				tail++;
			if (head_end == f->value.off && tail >= ve)
				continue;
			if (!put(out, cap, &pos, buf + f->line.off, f->value.off - f->line.off) ||
			    !put(out, cap, &pos, buf + f->value.off, head_end - f->value.off) ||
			    (head_end > f->value.off && tail < ve &&
			     !put(out, cap, &pos, "; ", 2)) ||
			    !put(out, cap, &pos, buf + tail, ve - tail) ||
			    !put(out, cap, &pos, "\r\n", 2))
				return -ENOSPC;
			continue;
		}
		if (!put(out, cap, &pos, buf + f->line.off, f->line.len))
			return -ENOSPC;
	}
	if (!put(out, cap, &pos, "\r\n", 2))
		return -ENOSPC;
	return (long)pos;
}

bool xhttp_head_has(const char *buf, const struct xhttp_head *h, const char *name)
{
	for (unsigned i = 0; i < h->nfields; i++)
		if (xhttp_span_eq(buf, h->fields[i].name, name))
			return true;
	return false;
}

/* ---- request framing (RFC 9112 §6) ---- */

#define CHUNK_MAX_DIGITS 15   /* < 2^60 bytes: no overflow */
#define CHUNK_EXT_MAX	 4096 /* bytes of chunk extensions per chunk */

static bool is_hex(unsigned char c, unsigned *v)
{
	if (c >= '0' && c <= '9')
		*v = c - '0';
	else if (c >= 'a' && c <= 'f')
		*v = c - 'a' + 10;
	else if (c >= 'A' && c <= 'F')
		*v = c - 'A' + 10;
	else
		return false;
	return true;
}

int xhttp_body_init(const char *buf, const struct xhttp_head *h, struct xhttp_body *b)
{
	const struct xhttp_field *cl = NULL, *te = NULL;
	bool upgrade = false;

	memset(b, 0, sizeof(*b));
	b->st = XHTTP_B_DONE;
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct xhttp_field *f = &h->fields[i];

		if (xhttp_span_eq(buf, f->name, "Content-Length")) {
			if (cl)
				return -EBADMSG;
			cl = f;
		} else if (xhttp_span_eq(buf, f->name, "Transfer-Encoding")) {
			if (te)
				return -EBADMSG;
			te = f;
		}
	}
	upgrade = xhttp_head_has(buf, h, "Upgrade");
	/* UNTRUSTED: the framing headers; anything two parsers could read differently closes */
	if (cl && te)
		return -EBADMSG;
	if (te) {
		if (!xhttp_span_eq(buf, te->value, "chunked"))
			return -EBADMSG;
		b->st = XHTTP_B_SIZE;
	} else if (cl) {
		if (cl->value.len == 0 || cl->value.len > 18)
			return -EBADMSG;
		for (size_t i = 0; i < cl->value.len; i++) {
			unsigned char c = (unsigned char)buf[cl->value.off + i];

			if (c < '0' || c > '9')
				return -EBADMSG;
			b->left = b->left * 10 + (c - '0');
		}
		b->st = b->left ? XHTTP_B_LENGTH : XHTTP_B_DONE;
	}
	if (upgrade)
		b->st = XHTTP_B_RAW; /* the server inside decides; we stop reading HTTP */
	return 0;
}

long xhttp_body_feed(struct xhttp_body *b, const char *p, size_t len)
{
	size_t i = 0;

	while (i < len && b->st != XHTTP_B_DONE) {
		unsigned char c = (unsigned char)p[i];
		unsigned v;

		switch (b->st) {
		case XHTTP_B_RAW:
			return (long)len;
		case XHTTP_B_LENGTH:
		case XHTTP_B_DATA: {
			size_t n = len - i < b->left ? len - i : (size_t)b->left;

			i += n;
			b->left -= n;
			if (b->left == 0)
				b->st = b->st == XHTTP_B_LENGTH ? XHTTP_B_DONE : XHTTP_B_DATA_CR;
			continue;
		}
		case XHTTP_B_SIZE:
			if (is_hex(c, &v)) {
				if (++b->ndig > CHUNK_MAX_DIGITS)
					return -EBADMSG;
				b->left = b->left * 16 + v;
			} else if (b->ndig == 0) {
				return -EBADMSG;
			} else if (c == ';') {
				b->st = XHTTP_B_EXT;
				b->tsize = 0;
			} else if (c == '\r') {
				b->st = XHTTP_B_SIZE_LF;
			} else {
				return -EBADMSG; /* no blanks, no bare LF */
			}
			break;
		case XHTTP_B_EXT:
			if (c == '\r')
				b->st = XHTTP_B_SIZE_LF;
			else if ((c < 0x20 && c != '\t') || c == 0x7f || ++b->tsize > CHUNK_EXT_MAX)
				return -EBADMSG;
			break;
		case XHTTP_B_SIZE_LF:
			if (c != '\n')
				return -EBADMSG;
			b->ndig = 0;
			b->tsize = 0;
			b->st = b->left ? XHTTP_B_DATA : XHTTP_B_TRAILER;
			break;
		case XHTTP_B_DATA_CR:
			if (c != '\r')
				return -EBADMSG;
			b->st = XHTTP_B_DATA_LF;
			break;
		case XHTTP_B_DATA_LF:
			if (c != '\n')
				return -EBADMSG;
			b->st = XHTTP_B_SIZE;
			break;
		case XHTTP_B_TRAILER:
			if (c == '\r') {
				b->st = XHTTP_B_FINAL_LF;
				break;
			}
			b->st = XHTTP_B_TRAILER_IN; /* the byte starts a trailer line */
			__attribute__((fallthrough));
		case XHTTP_B_TRAILER_IN:
			if (++b->tsize > XHTTP_MAX_HEAD)
				return -EBADMSG;
			if (c == '\r')
				b->st = XHTTP_B_TRAILER_LF;
			else if ((c < 0x20 && c != '\t') || c == 0x7f)
				return -EBADMSG;
			break;
		case XHTTP_B_TRAILER_LF:
			if (c != '\n')
				return -EBADMSG;
			b->st = XHTTP_B_TRAILER;
			break;
		case XHTTP_B_FINAL_LF:
			if (c != '\n')
				return -EBADMSG;
			b->st = XHTTP_B_DONE;
			break;
		case XHTTP_B_DONE:
			break;
		}
		i++;
	}
	return (long)i;
}

int xhttp_stream_start(struct xhttp_stream *s, const char *buf, const struct xhttp_head *h)
{
	int r = xhttp_body_init(buf, h, &s->body);

	s->hlen = 0;
	s->in_head = r == 0 && s->body.st == XHTTP_B_DONE;
	s->failed = r < 0;
	return r;
}

/* Appends what fits of p to the head buffer and parses it; returns the bytes of p used
 * (all of them while the head is incomplete), or a negative errno. */
static long stream_head(struct xhttp_stream *s, const char *p, size_t len,
			const struct xhttp_stream_ops *ops, void *ctx)
{
	size_t take = len < sizeof(s->hbuf) - s->hlen ? len : sizeof(s->hbuf) - s->hlen;
	size_t old = s->hlen;
	int r;

	memcpy(s->hbuf + s->hlen, p, take);
	s->hlen += take;
	r = xhttp_parse(s->hbuf, s->hlen, &s->head);
	if (r == 0 && s->hlen == sizeof(s->hbuf))
		r = -EMSGSIZE;
	if (r <= 0)
		return r < 0 ? r : (long)take;
	r = xhttp_body_init(s->hbuf, &s->head, &s->body); /* refused framing: nothing passes */
	if (r < 0)
		return r;
	r = ops->head(ctx, s->hbuf, &s->head);
	if (r < 0)
		return r;
	s->in_head = s->body.st == XHTTP_B_DONE;
	s->hlen = 0;
	return (long)(s->head.head_len - old);
}

int xhttp_stream_feed(struct xhttp_stream *s, const char *p, size_t len,
		      const struct xhttp_stream_ops *ops, void *ctx)
{
	size_t i = 0;

	if (s->failed)
		return -EPIPE;
	while (i < len) {
		long n;

		if (s->in_head && s->hlen == 0 && (p[i] == '\r' || p[i] == '\n')) {
			i++; /* an empty line before a request line */
			continue;
		}
		if (s->in_head) {
			n = stream_head(s, p + i, len - i, ops, ctx);
		} else {
			n = xhttp_body_feed(&s->body, p + i, len - i);
			if (n > 0) {
				int r = ops->body(ctx, p + i, (size_t)n);

				if (r < 0)
					n = r;
			}
			if (n >= 0 && s->body.st == XHTTP_B_DONE)
				s->in_head = true;
		}
		if (n < 0) {
			s->failed = true;
			return (int)n;
		}
		i += (size_t)n;
	}
	return 0;
}
