/* SPDX-License-Identifier: Apache-2.0 */
/* httpresp: an incremental HTTP/1.x response reader (pure; fuzzed by fuzz/fuzz_httpresp.c): the
 * head's status and framing, then the body (Content-Length, chunked, or until close). Used by
 * isolad's code interpreter calls and by isola-runc's client. */
#ifndef ISOLA_COMMON_HTTPRESP_H
#define ISOLA_COMMON_HTTPRESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD 8192 /* bytes of a response head */

enum http_framing {
	HTTP_BY_LENGTH, /* Content-Length */
	HTTP_BY_CHUNKS, /* Transfer-Encoding: chunked */
	HTTP_BY_CLOSE,	/* until the connection ends */
};

enum http_chunk_state {
	HTTP_CH_SIZE,	 /* hex digits of a chunk size */
	HTTP_CH_EXT,	 /* rest of the size line, to LF */
	HTTP_CH_DATA,	 /* chunk bytes */
	HTTP_CH_DATA_CR, /* CR after the data */
	HTTP_CH_DATA_LF, /* LF after the data */
	HTTP_CH_TRAILER, /* trailer lines after the last chunk */
	HTTP_CH_DONE,	 /* body complete */
};

/* A response being read: head fields, then the body decoder's state. */
struct http_resp {
	unsigned status;	    /* HTTP status */
	char ctype[128];	    /* Content-Type, "" when none */
	size_t head_len;	    /* bytes of the head, blank line included */
	enum http_framing framing;  /* how the body ends */
	uint64_t left;		    /* BY_LENGTH: bytes left; chunks: bytes left in the chunk */
	enum http_chunk_state chst; /* chunk decoder state */
	unsigned size_digits;	    /* digits of the chunk size seen */
	bool line_empty;	    /* HTTP_CH_TRAILER: the current trailer line is empty so far */
	bool done;		    /* the body ended */
};

/*
 * Parses a response head at buf[0..len) (UNTRUSTED: the peer's bytes). 1 with *r set when
 * complete, 0 when more is needed, -EMSGSIZE past HTTP_MAX_HEAD, -EBADMSG when malformed
 * (status line, a Content-Length that is not a number, a transfer coding other than chunked).
 */
int http_resp_head(const char *buf, size_t len, struct http_resp *r);

/*
 * Decodes body bytes in[0..n) (UNTRUSTED) into out (at least n bytes; in == out is fine):
 * returns the decoded byte count, or -EBADMSG. Bytes after the body's end are ignored;
 * r->done says it ended.
 */
long http_resp_body(struct http_resp *r, const char *in, size_t n, char *out);

#endif
