/* SPDX-License-Identifier: Apache-2.0 */
/* sni: finds the host name in the first bytes of a sandbox's TCP connection (TLS SNI, HTTP Host). */
#include "sni.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define TLS_HANDSHAKE	 0x16
#define TLS_CLIENT_HELLO 0x01
#define TLS_MAX_RECORD	 16384 /* plaintext record limit (RFC 8446 5.1) */
#define TLS_EXT_SNI	 0x0000
#define SNI_HOST_NAME	 0x00
#define HTTP_METHOD_MAX	 20 /* longest method token we wait for */

static const char *const kind_names[] = {"raw", "tls", "http"};

const char *net_sni_kind_name(enum net_sni_kind k)
{
	return (unsigned)k < 3 ? kind_names[k] : "unknown";
}

static int fail(struct net_sni_head *out, const char *why)
{
	out->error = why;
	out->name[0] = '\0';
	return -EINVAL;
}

/* Copies a name of n bytes; refuses empty, over-long and control bytes. */
static int set_name(struct net_sni_head *out, const uint8_t *s, size_t n)
{
	if (n == 0)
		return fail(out, "empty host name");
	if (n >= sizeof(out->name))
		return fail(out, "host name longer than 255 bytes");
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] == 0x7f)
			return fail(out, "control byte in host name");
	memcpy(out->name, s, n);
	out->name[n] = '\0';
	return 0;
}

/* ---- TLS ---------------------------------------------------------------------------------- */

/* A bounds-checked reader over a byte range. Every read fails once short; callers check `bad`. */
struct cur {
	const uint8_t *p; /* next byte */
	size_t n;	  /* bytes left */
	bool bad;	  /* a read ran past the end */
};

static unsigned get_u8(struct cur *c)
{
	if (c->n < 1) {
		c->bad = true;
		return 0;
	}
	c->n--;
	return *c->p++;
}

static unsigned get_u16(struct cur *c)
{
	unsigned hi = get_u8(c);

	return hi << 8 | get_u8(c);
}

/* Takes the next n bytes as a sub-cursor. */
static struct cur take(struct cur *c, size_t n)
{
	struct cur sub = {.p = c->p, .n = n};

	if (c->bad || c->n < n) {
		c->bad = true;
		sub.n = 0;
		sub.bad = true;
		return sub;
	}
	c->p += n;
	c->n -= n;
	return sub;
}

/* The server_name extension (RFC 6066 3): exactly one host_name, of 1..255 bytes. */
static int parse_sni_ext(struct cur ext, struct net_sni_head *out)
{
	struct cur list = take(&ext, get_u16(&ext));
	bool have = false;

	if (ext.bad || ext.n != 0 || list.n == 0)
		return fail(out, "malformed server_name extension length");
	while (list.n > 0) {
		unsigned type = get_u8(&list);
		struct cur name = take(&list, get_u16(&list));

		if (list.bad)
			return fail(out, "malformed server_name entry length");
		if (type != SNI_HOST_NAME)
			continue;
		if (have)
			return fail(out, "several host_name entries in server_name");
		if (set_name(out, name.p, name.n) < 0)
			return -EINVAL;
		have = true;
	}
	return 0;
}

/* A complete ClientHello body (after the 4-byte handshake header). */
static int parse_client_hello(const uint8_t *p, size_t n, struct net_sni_head *out)
{
	struct cur c = {.p = p, .n = n};
	struct cur exts;
	bool seen_sni = false;
	size_t sid, cs, cm;

	take(&c, 2 + 32); /* legacy_version, random */
	sid = get_u8(&c);
	if (sid > 32)
		return fail(out, "session id longer than 32 bytes");
	take(&c, sid);
	cs = get_u16(&c);
	if (!c.bad && (cs < 2 || cs % 2))
		return fail(out, "bad cipher_suites length");
	take(&c, cs);
	cm = get_u8(&c);
	if (!c.bad && cm < 1)
		return fail(out, "empty compression_methods");
	take(&c, cm);
	if (c.bad)
		return fail(out, "ClientHello shorter than its fields");
	if (c.n == 0)
		return 0; /* no extensions, so no name */
	exts = take(&c, get_u16(&c));
	if (c.bad || c.n != 0)
		return fail(out, "extensions length does not match the ClientHello");
	while (exts.n > 0) {
		unsigned type = get_u16(&exts);
		struct cur ext = take(&exts, get_u16(&exts));

		if (exts.bad)
			return fail(out, "malformed extension length");
		if (type != TLS_EXT_SNI)
			continue;
		if (seen_sni)
			return fail(out, "several server_name extensions");
		seen_sni = true;
		if (parse_sni_ext(ext, out) < 0)
			return -EINVAL;
	}
	return 0;
}

/* An incomplete TLS head: wait for more, unless it already reached the bound. */
static int need_more(size_t len, struct net_sni_head *out)
{
	return len >= NET_SNI_MAX ? fail(out, "TLS head longer than 16 KiB") : -EAGAIN;
}

/*
 * Reassembles the first handshake message across records (a ClientHello may be split over several
 * records, and records over several reads) and parses it once complete.
 */
static int parse_tls(const uint8_t *p, size_t len, struct net_sni_head *out)
{
	static __thread uint8_t hs[NET_SNI_MAX]; /* reassembled handshake bytes */
	size_t off = 0, hl = 0, need = 0;

	out->kind = NET_SNI_TLS;
	for (;;) {
		size_t rlen, avail;

		if (len - off < 5)
			return need_more(len, out);
		if (p[off] != TLS_HANDSHAKE)
			return fail(out, "non-handshake record before the ClientHello ended");
		if (p[off + 1] != 3 || p[off + 2] > 4)
			return fail(out, "bad TLS record version");
		rlen = (size_t)p[off + 3] << 8 | p[off + 4];
		if (rlen == 0 || rlen > TLS_MAX_RECORD)
			return fail(out, "bad TLS record length");
		avail = len - off - 5 < rlen ? len - off - 5 : rlen;
		if (hl + avail > sizeof(hs))
			return fail(out, "TLS head longer than 16 KiB");
		memcpy(hs + hl, p + off + 5, avail);
		hl += avail;
		if (!need && hl >= 4) {
			if (hs[0] != TLS_CLIENT_HELLO)
				return fail(out, "first handshake message is not a ClientHello");
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (need > sizeof(hs))
				return fail(out, "ClientHello longer than 16 KiB");
		}
		if (need && hl >= need)
			return parse_client_hello(hs + 4, need - 4, out);
		if (avail < rlen)
			return need_more(len, out);
		off += 5 + rlen;
	}
}

/* ---- HTTP/1.x ----------------------------------------------------------------------------- */

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* "host", "host:port", "[v6]", "[v6]:port" → the host part. */
static int parse_authority(const char *s, size_t n, const char **host, size_t *hlen)
{
	size_t i;

	if (n > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (!rb)
			return -EINVAL;
		*host = s + 1;
		*hlen = (size_t)(rb - s) - 1;
		i = (size_t)(rb - s) + 1;
	} else {
		for (i = 0; i < n && s[i] != ':'; i++)
			;
		*host = s;
		*hlen = i;
	}
	if (*hlen == 0)
		return -EINVAL;
	for (size_t k = 0; k < *hlen; k++)
		if (!is_tchar((unsigned char)(*host)[k]) && (*host)[k] != ':')
			return -EINVAL; /* no spaces, commas, '@', '/' in a host */
	if (i < n) {
		if (s[i] != ':')
			return -EINVAL;
		for (i++; i < n; i++)
			if (s[i] < '0' || s[i] > '9')
				return -EINVAL;
	}
	return 0;
}

/* The authority of an absolute-form target "scheme://authority/path", if it is one. */
static int absolute_authority(const char *t, size_t n, const char **auth, size_t *alen)
{
	size_t i = 0, a;

	while (i < n &&
	       ((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
		(i && ((t[i] >= '0' && t[i] <= '9') || t[i] == '+' || t[i] == '-' || t[i] == '.'))))
		i++;
	if (i == 0 || n - i < 3 || memcmp(t + i, "://", 3))
		return 0; /* origin-form "/x", asterisk-form, authority-form */
	i += 3;
	for (a = i; a < n && t[a] != '/' && t[a] != '?' && t[a] != '#'; a++)
		if (t[a] == '@')
			return -EINVAL; /* userinfo is not allowed in a request target */
	*auth = t + i;
	*alen = a - i;
	return 1;
}

static bool token_is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !strncasecmp(s, lit, n);
}

/* Returns the length of the line at s (up to but excluding CRLF/LF) and sets *next. */
static size_t line_len(const char *s, const char *end_of_line, size_t *next)
{
	size_t l = (size_t)(end_of_line - s);

	*next = l + 1;
	if (l > 0 && s[l - 1] == '\r')
		l--;
	return l;
}

static int parse_http(const char *p, size_t len, struct net_sni_head *out)
{
	const char *host = NULL, *abs_host = NULL;
	size_t host_len = 0, abs_len = 0, off = 0, next, l;
	bool have_host = false, connect;
	const char *nl, *sp1, *sp2;

	out->kind = NET_SNI_HTTP;
	/* The whole head first: bounded, and no NUL, bare CR or control byte anywhere in it. */
	for (size_t i = 0;; i++) {
		if (i == len)
			return len >= NET_SNI_MAX ? fail(out, "HTTP head longer than 16 KiB")
						  : -EAGAIN;
		unsigned char c = (unsigned char)p[i];

		if (c == '\r' && i + 1 < len && p[i + 1] != '\n')
			return fail(out, "bare CR in the HTTP head");
		if ((c < 0x20 && c != '\r' && c != '\n' && c != '\t') || c == 0x7f)
			return fail(out, "control byte in the HTTP head");
		if (c == '\n' && ((i >= 1 && p[i - 1] == '\n') ||
				  (i >= 2 && p[i - 1] == '\r' && p[i - 2] == '\n'))) {
			if (i >= NET_SNI_MAX)
				return fail(out, "HTTP head longer than 16 KiB");
			len = i + 1; /* the head ends here; the body is not ours */
			break;
		}
	}

	/* Request line: METHOD SP target SP HTTP/1.x */
	nl = memchr(p, '\n', len);
	l = line_len(p, nl, &next);
	sp1 = memchr(p, ' ', l);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', l - (size_t)(sp1 + 1 - p)) : NULL;
	if (!sp1 || !sp2 || sp2 == sp1 + 1)
		return fail(out, "malformed HTTP request line");
	if (token_is(sp2 + 1, l - (size_t)(sp2 + 1 - p), "HTTP/2.0")) {
		out->kind = NET_SNI_RAW; /* h2c prior knowledge: no Host in a text head */
		return 0;
	}
	if ((size_t)(p + l - sp2 - 1) != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) || sp2[8] < '0' ||
	    sp2[8] > '9')
		return fail(out, "not an HTTP/1.x request line");
	connect = token_is(p, (size_t)(sp1 - p), "CONNECT");
	if (!connect) {
		int r = absolute_authority(sp1 + 1, (size_t)(sp2 - sp1 - 1), &abs_host, &abs_len);

		if (r < 0)
			return fail(out, "userinfo in the request target");
		if (r > 0 && parse_authority(abs_host, abs_len, &abs_host, &abs_len) < 0)
			return fail(out, "malformed authority in the request target");
	}

	/* Header fields. */
	for (off = next; off < len;) {
		const char *s = p + off, *colon, *v, *ve;

		nl = memchr(s, '\n', len - off);
		l = line_len(s, nl, &next);
		off += next;
		if (l == 0)
			break; /* end of head */
		if (s[0] == ' ' || s[0] == '\t')
			return fail(out, "obsolete line folding in the HTTP head");
		colon = memchr(s, ':', l);
		if (!colon || colon == s)
			return fail(out, "malformed HTTP header line");
		for (const char *k = s; k < colon; k++)
			if (!is_tchar((unsigned char)*k))
				return fail(out, "malformed HTTP header name");
		if (!token_is(s, (size_t)(colon - s), "host"))
			continue;
		if (have_host)
			return fail(out, "several Host headers");
		have_host = true;
		for (v = colon + 1; v < s + l && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = s + l; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		if (ve > v && parse_authority(v, (size_t)(ve - v), &host, &host_len) < 0)
			return fail(out, "malformed Host header");
	}

	if (abs_host && host && (abs_len != host_len || strncasecmp(abs_host, host, host_len) != 0))
		return fail(out, "Host header conflicts with the request target");
	if (abs_host)
		return set_name(out, (const uint8_t *)abs_host, abs_len);
	if (host)
		return set_name(out, (const uint8_t *)host, host_len);
	return 0; /* HTTP/1.0 without Host: no name */
}

/* "GET ", "OPTIONS ": uppercase letters then a space. 1 = yes, 0 = not HTTP, -EAGAIN = too short. */
static int looks_like_http(const char *p, size_t len)
{
	for (size_t i = 0; i < len && i <= HTTP_METHOD_MAX; i++) {
		if (p[i] == ' ')
			return i > 0;
		if (p[i] < 'A' || p[i] > 'Z')
			return 0;
	}
	return len <= HTTP_METHOD_MAX ? -EAGAIN : 0;
}

int net_sni_parse(const void *buf, size_t len, struct net_sni_head *out)
{
	const uint8_t *p = buf;
	int r;

	out->kind = NET_SNI_RAW;
	out->name[0] = '\0';
	out->error = NULL;
	if (len == 0)
		return -EAGAIN;
	if (p[0] == TLS_HANDSHAKE) {
		if (len < 3)
			return -EAGAIN;
		if (p[1] == 3 && p[2] <= 4)
			return parse_tls(p, len, out);
		return 0; /* not TLS: raw */
	}
	r = looks_like_http(buf, len);
	if (r < 0)
		return r;
	if (r > 0)
		return parse_http(buf, len, out);
	return 0;
}
