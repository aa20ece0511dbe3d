/* SPDX-License-Identifier: Apache-2.0 */
/* xhttp: the exposure listener's request-head parser, router and rewriter (pure, fuzzed). */
#ifndef ISOLA_EXPOSE_XHTTP_H
#define ISOLA_EXPOSE_XHTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XHTTP_MAX_HEAD	  (16u * 1024u) /* bytes of a request head, request line included */
#define XHTTP_MAX_HEADERS 64		/* header lines in a request head */
#define XHTTP_ID_MAX	  39		/* longest sandbox id ([a-z0-9-]) */
#define XHTTP_TOKEN_NAME  "isola_token" /* query parameter and cookie carrying the token */
#define XHTTP_TOKEN_HDR	  "X-Isola-Access-Token"

/* A byte range of the parsed buffer. */
struct xhttp_span {
	size_t off; /* first byte */
	size_t len; /* length */
};

struct xhttp_field {
	struct xhttp_span name;	 /* header name */
	struct xhttp_span value; /* value without surrounding blanks */
	struct xhttp_span line;	 /* the whole line, CRLF included */
};

/* One parsed request head. Spans point into the caller's buffer. */
struct xhttp_head {
	struct xhttp_span method;  /* request method token */
	struct xhttp_span target;  /* origin-form target ("/..."), query included */
	struct xhttp_span version; /* "HTTP/1.0" or "HTTP/1.1" */
	size_t head_len;	   /* bytes up to and including the blank line */
	unsigned nfields;	   /* header lines */
	struct xhttp_field fields[XHTTP_MAX_HEADERS]; /* in order */
};

/*
 * Parses the request head at the start of buf[0..len). Strict: CRLF line ends only, an
 * origin-form target (absolute-form and `*` are refused so a request cannot name another
 * host), token method and header names, no obsolete line folding, no control bytes in
 * values. Returns 1 with *h filled when the head is complete, 0 when more bytes are
 * needed, -EMSGSIZE when it passed XHTTP_MAX_HEAD bytes or XHTTP_MAX_HEADERS lines,
 * -EBADMSG when malformed. UNTRUSTED input; it never reads beyond len.
 */
int xhttp_parse(const char *buf, size_t len, struct xhttp_head *h);

/* How a request found its target. */
enum xhttp_token_from {
	XHTTP_TOK_NONE,	  /* no token offered */
	XHTTP_TOK_HEADER, /* X-Isola-Access-Token */
	XHTTP_TOK_COOKIE, /* isola_token cookie */
	XHTTP_TOK_QUERY,  /* ?isola_token= */
};

struct xhttp_route {
	char id[XHTTP_ID_MAX + 1];  /* sandbox id */
	int port;		    /* port inside the sandbox */
	bool by_host;		    /* routed by Host `<port>-<id>.<domain>`; else by path */
	size_t prefix_len;	    /* path form: bytes of `/_isola/<id>/<port>` to strip */
	struct xhttp_span token;    /* the token offered (into the buffer) */
	enum xhttp_token_from from; /* where it came from (the header wins, then cookie) */
};

/*
 * Finds the target of a parsed head: by Host `<port>-<id>.<domain>[:port]` (exactly one
 * Host header is required; two are refused), else by a path `/_isola/<id>/<port>[/...]`.
 * Refuses a `..` segment (plain or percent-encoded) anywhere in the path. Returns 0,
 * -ENOENT when neither form names a target (404), -EBADMSG when the head is ambiguous or
 * hostile (400). domain is the exposure domain ("isola.localhost").
 */
int xhttp_route(const char *buf, const struct xhttp_head *h, const char *domain,
		struct xhttp_route *rt);

/*
 * Writes the head as the server inside will see it into out (cap bytes): the path-form
 * prefix removed, the isola_token query parameter, the X-Isola-Access-Token header and the
 * isola_token cookie dropped (the token never reaches the sandbox). Returns the length, or
 * -ENOSPC when cap is too small (2 * XHTTP_MAX_HEAD is always enough).
 */
long xhttp_rewrite(const char *buf, const struct xhttp_head *h, const struct xhttp_route *rt,
		   char *out, size_t cap);

/* The target without the isola_token parameter (path form keeps its prefix: this is where
 * a browser is sent back after a ?isola_token= login). Same return as xhttp_rewrite. */
long xhttp_target_without_token(const char *buf, const struct xhttp_head *h, char *out, size_t cap);

/* Case-insensitive comparison of a span with a NUL-terminated string. */
bool xhttp_span_eq(const char *buf, struct xhttp_span s, const char *str);

#endif
