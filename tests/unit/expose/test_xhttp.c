/* SPDX-License-Identifier: Apache-2.0 */
/* test_xhttp: the exposure listener's head parser, router and rewriter. */
#include "isolad/expose/xhttp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../tap.h"

#define TOK "B2KzezZi1_9whrdodnjMmILFiC-s_8iIaIWuO0wZjvQ"

static struct xhttp_head h;
static struct xhttp_route rt;
static char out[2 * XHTTP_MAX_HEAD];

static int parse(const char *s)
{
	return xhttp_parse(s, strlen(s), &h);
}

/* Parses and routes s; returns the route result (or the parse failure). */
static int route(const char *s)
{
	int r = parse(s);

	if (r != 1)
		return r < 0 ? r : -EAGAIN;
	return xhttp_route(s, &h, "isola.localhost", &rt);
}

/* Rewrites s (already routed) into out; returns out or NULL. */
static const char *rewrite(const char *s)
{
	long n = xhttp_rewrite(s, &h, &rt, out, sizeof(out) - 1);

	if (n < 0)
		return NULL;
	out[n] = '\0';
	return out;
}

int main(void)
{
	char big[XHTTP_MAX_HEAD + 64], many[8192];
	const char *s;
	size_t off;

	/* parsing */
	ok(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == 1 && h.nfields == 1, "minimal head");
	ok(parse("GET / HTTP/1.1\r\nHost: a\r\n") == 0, "incomplete head wants more");
	ok(parse("GET / HTTP/1.1\r") == 0, "split CRLF wants more");
	ok(parse("GET / HTTP/1.1\nHost: a\n\n") == -EBADMSG, "bare LF refused");
	ok(parse("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n") == -EBADMSG, "obs-fold refused");
	ok(parse("GET / HTTP/1.1\r\nHost : a\r\n\r\n") == -EBADMSG, "blank before colon refused");
	ok(parse("GET http://x/ HTTP/1.1\r\nHost: a\r\n\r\n") == -EBADMSG, "absolute-form refused");
	ok(parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n") == -EBADMSG, "asterisk-form refused");
	ok(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == -EBADMSG, "HTTP/2.0 refused");
	ok(parse("GET / http/1.1\r\nHost: a\r\n\r\n") == -EBADMSG, "lower-case version refused");
	ok(parse("GET  / HTTP/1.1\r\n\r\n") == -EBADMSG, "double space refused");
	ok(xhttp_parse("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26, &h) == -EBADMSG,
	   "NUL in a value refused");
	ok(parse("GET / HTTP/1.1\r\nX:\t v \t\r\n\r\n") == 1 && h.fields[0].value.len == 1,
	   "value trimmed");
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	ok(xhttp_parse(big, sizeof(big), &h) == -EMSGSIZE, "head over the cap");
	off = (size_t)snprintf(many, sizeof(many), "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= XHTTP_MAX_HEADERS; i++)
		off += (size_t)snprintf(many + off, sizeof(many) - off, "X%d: v\r\n", i);
	snprintf(many + off, sizeof(many) - off, "\r\n");
	ok(parse(many) == -EMSGSIZE, "too many header lines");

	/* routing */
	ok(route("GET /a HTTP/1.1\r\nHost: 8000-abc-1.isola.localhost:9000\r\n\r\n") == 0 &&
		   rt.by_host && rt.port == 8000 && !strcmp(rt.id, "abc-1"),
	   "host route with port");
	ok(route("GET /a HTTP/1.1\r\nHost: 8000-ABC.Isola.Localhost.\r\n\r\n") == 0 &&
		   !strcmp(rt.id, "abc"),
	   "host route is case-insensitive, trailing dot");
	ok(route("GET /a HTTP/1.1\r\nHost: 8000-abc.isola.localhost.evil\r\n\r\n") == -ENOENT,
	   "suffix must be the domain");
	ok(route("GET /a HTTP/1.1\r\nHost: 8000-abc.xisola.localhost\r\n\r\n") == -ENOENT,
	   "domain label boundary");
	ok(route("GET /a HTTP/1.1\r\nHost: 0800-abc.isola.localhost\r\n\r\n") == -ENOENT,
	   "leading zero port refused");
	ok(route("GET /a HTTP/1.1\r\nHost: 70000-abc.isola.localhost\r\n\r\n") == -ENOENT,
	   "port range");
	ok(route("GET /a HTTP/1.1\r\nHost: 80-a_b.isola.localhost\r\n\r\n") == -ENOENT,
	   "bad id char");
	ok(route("GET /a HTTP/1.1\r\nHost: 80-a.isola.localhost\r\nHost: 80-b.isola.localhost"
		 "\r\n\r\n") == -EBADMSG,
	   "two Host headers");
	ok(route("GET /a HTTP/1.1\r\n\r\n") == -EBADMSG, "HTTP/1.1 without Host");
	ok(route("GET /_isola/abc/8000/x HTTP/1.0\r\n\r\n") == 0 && !rt.by_host &&
		   rt.port == 8000 && rt.prefix_len == strlen("/_isola/abc/8000"),
	   "path route (HTTP/1.0, no Host)");
	ok(route("GET /_isola/abc/8000 HTTP/1.1\r\nHost: h\r\n\r\n") == 0, "path route, no slash");
	ok(route("GET /_isola/abc/8000x/ HTTP/1.1\r\nHost: h\r\n\r\n") == -ENOENT, "bad port");
	ok(route("GET /_isola/abc/ HTTP/1.1\r\nHost: h\r\n\r\n") == -ENOENT, "no port");
	ok(route("GET /_isola/a/80/../../_isola/b/80/ HTTP/1.1\r\nHost: h\r\n\r\n") == -EBADMSG,
	   "dot-dot refused");
	ok(route("GET /_isola/a/80/%2E%2e/x HTTP/1.1\r\nHost: h\r\n\r\n") == -EBADMSG,
	   "encoded dot-dot refused");
	ok(route("GET /_isola/a/80/x..y/..z HTTP/1.1\r\nHost: h\r\n\r\n") == 0,
	   "dots inside a name pass");
	ok(route("GET /other HTTP/1.1\r\nHost: localhost\r\n\r\n") == -ENOENT, "no route");

	/* tokens */
	ok(route("GET / HTTP/1.1\r\nHost: 1-a.isola.localhost\r\nX-Isola-Access-Token: " TOK
		 "\r\n\r\n") == 0 &&
		   rt.from == XHTTP_TOK_HEADER && rt.token.len == 43,
	   "token from the header");
	ok(route("GET /?isola_token=q HTTP/1.1\r\nHost: 1-a.isola.localhost\r\nCookie: x=1; "
		 "isola_token=c\r\n\r\n") == 0 &&
		   rt.from == XHTTP_TOK_COOKIE && rt.token.len == 1,
	   "cookie before query");
	ok(route("GET /?a=1&isola_token=q HTTP/1.1\r\nHost: 1-a.isola.localhost\r\n\r\n") == 0 &&
		   rt.from == XHTTP_TOK_QUERY,
	   "token from the query");
	ok(route("GET / HTTP/1.1\r\nHost: 1-a.isola.localhost\r\nX-Isola-Access-Token: a\r\n"
		 "X-Isola-Access-Token: b\r\n\r\n") == -EBADMSG,
	   "two token headers refused");

	/* rewriting */
	s = "GET /_isola/abc/8000/x/y?a=1&isola_token=t&b=2 HTTP/1.1\r\nHost: h\r\n"
	    "X-Isola-Access-Token: t\r\nCookie: isola_token=t; k=v\r\nAccept: */*\r\n\r\n";
	ok(route(s) == 0 && rewrite(s) &&
		   !strcmp(out, "GET /x/y?a=1&b=2 HTTP/1.1\r\nHost: h\r\nCookie: k=v\r\n"
				"Accept: */*\r\n\r\n"),
	   "prefix, token parameter, header and cookie removed");
	s = "GET /_isola/abc/8000?isola_token=t HTTP/1.1\r\nHost: h\r\nCookie: isola_token=t"
	    "\r\n\r\n";
	ok(route(s) == 0 && rewrite(s) && !strcmp(out, "GET / HTTP/1.1\r\nHost: h\r\n\r\n"),
	   "bare prefix becomes /, lone cookie header dropped");
	s = "GET /p?isola_token=t&z=9 HTTP/1.1\r\nHost: 1-a.isola.localhost\r\nCookie: a=1; "
	    "isola_token=t; b=2\r\n\r\n";
	ok(route(s) == 0 && rewrite(s) &&
		   !strcmp(out, "GET /p?z=9 HTTP/1.1\r\nHost: 1-a.isola.localhost\r\n"
				"Cookie: a=1; b=2\r\n\r\n"),
	   "host route keeps the path");
	ok(xhttp_target_without_token(s, &h, out, sizeof(out)) == 6 && !memcmp(out, "/p?z=9", 6),
	   "redirect target without the token");
	ok(xhttp_rewrite(s, &h, &rt, out, 10) == -ENOSPC, "small buffer refused");
	return tap_done();
}
