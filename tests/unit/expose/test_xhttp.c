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

/* Records a stream's events: "\n[H <request line>]" per head, body bytes as they come
 * (consecutive pieces merged), so any split of the input must give the same record. */
struct rec {
	char s[4096];
	size_t n;
	unsigned heads;
};

static void rec_put(struct rec *r, const char *p, size_t n)
{
	if (r->n + n < sizeof(r->s)) {
		memcpy(r->s + r->n, p, n);
		r->n += n;
		r->s[r->n] = '\0';
	}
}

static int rec_head(void *ctx, const char *buf, const struct xhttp_head *hh)
{
	struct rec *r = ctx;

	rec_put(r, "\n[H ", 4);
	rec_put(r, buf, hh->version.off + hh->version.len);
	rec_put(r, "]", 1);
	r->heads++;
	return strstr(buf, "Refuse-Me") && strstr(buf, "Refuse-Me") < buf + hh->head_len ? -EPERM
											 : 0;
}

static int rec_body(void *ctx, const char *p, size_t n)
{
	rec_put(ctx, p, n);
	return 0;
}

static const struct xhttp_stream_ops rec_ops = {.head = rec_head, .body = rec_body};
static struct xhttp_stream strm;

/* Feeds s whole (step 0) or in pieces of step bytes; returns the first error or 0. */
static int feed(const char *s, size_t step, struct rec *r)
{
	size_t len = strlen(s), i = 0;
	int e = 0;

	memset(r, 0, sizeof(*r));
	memset(&strm, 0, sizeof(strm));
	strm.in_head = true;
	while (i < len && e == 0) {
		size_t n = step && len - i > step ? step : len - i;

		e = xhttp_stream_feed(&strm, s + i, n, &rec_ops, r);
		i += n;
	}
	return e;
}

/* The same record (and result) for the whole input and for every piece size 1..7. After an
 * error only the result is compared: the body bytes before the bad one may have passed. */
static bool same_any_split(const char *s, int want, const char *want_rec)
{
	struct rec whole, part;
	int e = feed(s, 0, &whole);

	if (e != want || (want_rec && strcmp(whole.s, want_rec) != 0)) {
		printf("# got %d (want %d), record: %s\n", e, want, whole.s);
		return false;
	}
	for (size_t step = 1; step < 8; step++)
		if (feed(s, step, &part) != want || (!want && strcmp(part.s, whole.s) != 0)) {
			printf("# split %zu differs: %s\n", step, part.s);
			return false;
		}
	return true;
}

int main(void)
{
	char big[XHTTP_MAX_HEAD + 64], many[8192];
	const char *s;
	struct rec rc;
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

	/* request framing on a keep-alive connection */
	ok(same_any_split("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n", 0,
			  "\n[H GET /a HTTP/1.1]\n[H GET /b HTTP/1.1]"),
	   "two heads without bodies");
	ok(same_any_split("POST /a HTTP/1.1\r\nContent-Length: 19\r\n\r\nGET /x HTTP/1.1\r\n\r\n"
			  "GET /b HTTP/1.1\r\n\r\n",
			  0, "\n[H POST /a HTTP/1.1]GET /x HTTP/1.1\r\n\r\n\n[H GET /b HTTP/1.1]"),
	   "a Content-Length body is data even when it looks like a head");
	ok(same_any_split("POST /a HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
			  "5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: 1\r\n\r\n"
			  "GET /b HTTP/1.1\r\n\r\n",
			  0,
			  "\n[H POST /a HTTP/1.1]5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: 1"
			  "\r\n\r\n\n[H GET /b HTTP/1.1]"),
	   "chunked body with extension and trailer, then a head");
	ok(same_any_split("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
			  0, "\n[H GET /ws HTTP/1.1]GET /b HTTP/1.1\r\n\r\n"),
	   "after an Upgrade request every byte is raw");
	ok(same_any_split("GET /a HTTP/1.1\r\n\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 0,
			  "\n[H GET /a HTTP/1.1]\n[H GET /b HTTP/1.1]"),
	   "an empty line between requests is skipped");
	ok(same_any_split("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nRefuse-Me: 1\r\n\r\n"
			  "GET /c HTTP/1.1\r\n\r\n",
			  -EPERM, NULL),
	   "a refused head stops the stream");
	ok(feed("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nRefuse-Me: 1\r\n\r\n", 0, &rc) ==
			   -EPERM &&
		   xhttp_stream_feed(&strm, "GET /c HTTP/1.1\r\n\r\n", 19, &rec_ops, &rc) ==
			   -EPIPE &&
		   rc.heads == 2,
	   "nothing passes after a refusal");
	ok(same_any_split("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\nHost: x\n\n", -EBADMSG, NULL),
	   "malformed second head refused");
	ok(feed("GET /a HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, &rc) ==
			   -EBADMSG &&
		   rc.heads == 0,
	   "Transfer-Encoding other than chunked refused before the head passes");
	ok(same_any_split("GET /a HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: "
			  "chunked\r\n\r\n",
			  -EBADMSG, NULL),
	   "Content-Length with Transfer-Encoding refused");
	ok(same_any_split("GET /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
			  -EBADMSG, NULL),
	   "two Content-Length headers refused");
	ok(same_any_split("GET /a HTTP/1.1\r\nContent-Length: +1\r\n\r\n", -EBADMSG, NULL) &&
		   same_any_split("GET /a HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n",
				  -EBADMSG, NULL),
	   "a signed or 19-digit Content-Length refused");
	ok(same_any_split("POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello",
			  -EBADMSG, NULL) &&
		   same_any_split("POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello",
				  -EBADMSG, NULL) &&
		   same_any_split(
			   "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello",
			   -EBADMSG, NULL) &&
		   same_any_split("POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
				  "1000000000000000\r\n",
				  -EBADMSG, NULL),
	   "bad chunk framing refused (blank, bare LF, data overrun, 16 hex digits)");
	ok(xhttp_stream_start(&strm, "", &(struct xhttp_head){0}) == 0 && strm.in_head,
	   "a start with no body expects the next head");
	return tap_done();
}
