/* SPDX-License-Identifier: Apache-2.0 */
/* codeint-internal: the embedded service files and the pure HTTP response reader. */
#ifndef ISOLA_CODEINT_INTERNAL_H
#define ISOLA_CODEINT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codeint.h"

/* One embedded file of share/interp (generated codeint_files.c, NULL-name terminated). */
struct codeint_file {
	const char *name;	   /* file name, no directory */
	const unsigned char *data; /* its bytes */
	size_t len;		   /* their count */
};
extern const struct codeint_file codeint_files[];

#define CODEINT_MAX_HEAD 8192 /* bytes of a response head */

enum codeint_framing {
	CODEINT_BY_LENGTH, /* Content-Length */
	CODEINT_BY_CHUNKS, /* Transfer-Encoding: chunked */
	CODEINT_BY_CLOSE,  /* until the connection ends */
};

enum codeint_chunk_state {
	CH_SIZE,    /* hex digits of a chunk size */
	CH_EXT,	    /* rest of the size line, to LF */
	CH_DATA,    /* chunk bytes */
	CH_DATA_CR, /* CR after the data */
	CH_DATA_LF, /* LF after the data */
	CH_TRAILER, /* trailer lines after the last chunk */
	CH_DONE,    /* body complete */
};

/* A response being read: head fields, then the body decoder's state. */
struct codeint_resp {
	unsigned status;	       /* HTTP status */
	char ctype[128];	       /* Content-Type, "" when none */
	size_t head_len;	       /* bytes of the head, blank line included */
	enum codeint_framing framing;  /* how the body ends */
	uint64_t left;		       /* BY_LENGTH: bytes left; chunks: bytes left in the chunk */
	enum codeint_chunk_state chst; /* chunk decoder state */
	unsigned size_digits;	       /* digits of the chunk size seen */
	bool line_empty;	       /* CH_TRAILER: the current trailer line is empty so far */
	bool done;		       /* the body ended */
};

/*
 * Parses a response head at buf[0..len) (UNTRUSTED: the sandbox's bytes). 1 with *r set when
 * complete, 0 when more is needed, -EMSGSIZE past CODEINT_MAX_HEAD, -EBADMSG when malformed
 * (status line, a Content-Length that is not a number, a transfer coding other than chunked).
 */
int codeint_resp_head(const char *buf, size_t len, struct codeint_resp *r);

/*
 * Decodes body bytes in[0..n) (UNTRUSTED) into out (at least n bytes; in == out is fine):
 * returns the decoded byte count, or -EBADMSG. Bytes after the body's end are ignored;
 * r->done says it ended.
 */
long codeint_resp_body(struct codeint_resp *r, const char *in, size_t n, char *out);

/* codeint_call_open without the start on demand: -ECONNREFUSED (no err) when nothing
 * listens on CODEINT_PORT. */
int codeint_call_raw(struct sandbox *s, const char *method, const char *path, const void *body,
		     size_t len, struct codeint_call **out, struct isola_err **err);

#endif
