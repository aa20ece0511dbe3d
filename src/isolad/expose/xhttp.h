/* SPDX-License-Identifier: Apache-2.0 */
/* xhttp: the exposure listener's head parser, router, rewriter and request framing (pure). */
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

/* true when the head has a field named `name` (case-insensitive). */
bool xhttp_head_has(const char *buf, const struct xhttp_head *h, const char *name);

/*
 * Request framing (RFC 9112 §6): what follows a request head on the client->sandbox
 * direction of a keep-alive connection. The listener parses EVERY request head (not only
 * the first) so each one is routed, authorized and rewritten; bodies stream through
 * untouched and are never buffered.
 */
enum xhttp_body_state {
	XHTTP_B_DONE,	    /* body complete: the next byte starts a request head */
	XHTTP_B_LENGTH,	    /* `left` bytes of a Content-Length body remain */
	XHTTP_B_SIZE,	    /* chunked: in the chunk-size hex digits */
	XHTTP_B_EXT,	    /* chunked: in a chunk extension (`;...`) */
	XHTTP_B_SIZE_LF,    /* chunked: CR of the size line seen, LF expected */
	XHTTP_B_DATA,	    /* chunked: `left` bytes of chunk data remain */
	XHTTP_B_DATA_CR,    /* chunked: CR after the chunk data expected */
	XHTTP_B_DATA_LF,    /* chunked: LF after the chunk data expected */
	XHTTP_B_TRAILER,    /* chunked: at the start of a trailer line (or the final CRLF) */
	XHTTP_B_TRAILER_IN, /* chunked: inside a trailer line */
	XHTTP_B_TRAILER_LF, /* chunked: CR of a trailer line seen, LF expected */
	XHTTP_B_FINAL_LF,   /* chunked: CR of the final empty line seen, LF expected */
	XHTTP_B_RAW,	    /* Upgrade requested: every later byte is opaque (WebSocket) */
};

struct xhttp_body {
	enum xhttp_body_state st;
	uint64_t left; /* bytes left in a Content-Length body or a chunk */
	unsigned ndig; /* chunk-size digits so far */
	bool last;     /* the chunk being sized is the last (size 0) */
	size_t tsize;  /* chunk-extension / trailer bytes so far (bounded) */
};

/*
 * Sets *b to the framing of the body that follows head h: Upgrade header -> RAW (the
 * server inside decides whether it switches; the listener stops reading HTTP), else
 * `Transfer-Encoding: chunked` -> chunked, else Content-Length -> that many bytes, else
 * none. Returns 0, or -EBADMSG (the connection must close, RFC 9112 §6.3): a
 * Transfer-Encoding other than exactly `chunked`, more than one Transfer-Encoding or
 * Content-Length header, both together, or a Content-Length that is not 1..18 digits.
 */
int xhttp_body_init(const char *buf, const struct xhttp_head *h, struct xhttp_body *b);

/*
 * Consumes body bytes from p[0..len): returns how many of them belong to the body
 * (b->st becomes XHTTP_B_DONE when the body ended; the rest of p starts the next head),
 * or -EBADMSG on malformed chunked framing. Works on any split of the input.
 */
long xhttp_body_feed(struct xhttp_body *b, const char *p, size_t len);

/* A client->sandbox byte stream: heads buffered (bounded), bodies passed on in pieces. */
struct xhttp_stream_ops {
	/* A complete request head in buf[0..h->head_len). < 0 stops the stream (returned). */
	int (*head)(void *ctx, const char *buf, const struct xhttp_head *h);
	/* Body (or raw) bytes, in order. < 0 stops the stream (returned). */
	int (*body)(void *ctx, const char *p, size_t n);
};

struct xhttp_stream {
	struct xhttp_body body; /* framing of the current body */
	bool in_head;		/* accumulating a head */
	bool failed;		/* a previous feed failed: nothing more is accepted */
	size_t hlen;		/* bytes in hbuf */
	char hbuf[XHTTP_MAX_HEAD];
	struct xhttp_head head; /* the last parsed head */
};

/* Starts a stream whose first head h (in buf) was already handled by the caller. Returns
 * xhttp_body_init's result. */
int xhttp_stream_start(struct xhttp_stream *s, const char *buf, const struct xhttp_head *h);

/*
 * Feeds client bytes: every complete head goes to ops->head (then its framing is set up),
 * body bytes to ops->body. Empty lines before a request line are skipped (RFC 9112 §2.2).
 * Returns 0; -EBADMSG (malformed head or framing), -EMSGSIZE (head over XHTTP_MAX_HEAD or
 * XHTTP_MAX_HEADERS), or a callback's negative value: the stream is then failed and
 * every later feed returns -EPIPE. UNTRUSTED input.
 */
int xhttp_stream_feed(struct xhttp_stream *s, const char *p, size_t len,
		      const struct xhttp_stream_ops *ops, void *ctx);

#endif
