/* SPDX-License-Identifier: Apache-2.0 */
/* gzip: streaming gzip decode (uploads) and encode (downloads) for envd's /files (pure, fuzzed). */
#include "e2b-internal.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

/*
 * Memory is bounded whatever the input: zlib's state (a 32 KiB window for inflate, about
 * 256 KiB for deflate at level 6) plus one E2B_GZ_CHUNK output buffer on the stack. Output is
 * handed to the caller chunk by chunk, never accumulated, so a gzip bomb costs time and the
 * destination's space (the sandbox's disk), not isolad's memory.
 */

int e2b_gunzip_init(struct e2b_gz *g)
{
	memset(g, 0, sizeof(*g));
	/* 16 + MAX_WBITS: a gzip wrapper only (no raw deflate, no zlib header). */
	if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	g->inflating = true;
	g->ready = true;
	return 0;
}

int e2b_gzip_init(struct e2b_gz *g)
{
	memset(g, 0, sizeof(*g));
	if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	g->ready = true;
	return 0;
}

void e2b_gz_fini(struct e2b_gz *g)
{
	if (!g->ready)
		return;
	if (g->inflating)
		inflateEnd(&g->z);
	else
		deflateEnd(&g->z);
	g->ready = false;
}

static const char *why_of(const z_stream *z, const char *fallback)
{
	return z->msg ? z->msg : fallback;
}

int e2b_gunzip_feed(struct e2b_gz *g, const void *in, size_t n, e2b_gz_out_fn out, void *ud,
		    const char **why)
{
	unsigned char buf[E2B_GZ_CHUNK];

	/* UNTRUSTED: a client's gzip bytes. zlib checks every length, the CRC-32 and ISIZE. */
	*why = NULL;
	if (!g->ready || !g->inflating)
		return -EINVAL;
	g->z.next_in = (unsigned char *)(uintptr_t)in;
	g->z.avail_in = 0;
	for (;;) {
		int zr, r;
		size_t got;

		if (n > 0 && g->z.avail_in == 0) {
			/* avail_in is an unsigned int: feed large buffers in slices */
			g->z.avail_in = n > (1u << 30) ? (1u << 30) : (unsigned)n;
			n -= g->z.avail_in;
		}
		if (g->member_end) {
			if (g->z.avail_in == 0)
				break;
			/* Concatenated members are one stream (RFC 1952 2.2; Go's reader does
			 * the same); anything else after a member is corrupt data. */
			if (inflateReset(&g->z) != Z_OK)
				return -ENOMEM;
			g->member_end = false;
		}
		g->z.next_out = buf;
		g->z.avail_out = sizeof(buf);
		zr = inflate(&g->z, Z_NO_FLUSH);
		got = sizeof(buf) - g->z.avail_out;
		if (zr == Z_STREAM_END) {
			g->member_end = true;
			g->members++;
		} else if (zr == Z_BUF_ERROR && got == 0) {
			if (g->z.avail_in == 0 && n == 0)
				break; /* wants more input */
			*why = "no progress";
			return -EINVAL;
		} else if (zr != Z_OK && zr != Z_BUF_ERROR) {
			*why = why_of(&g->z, zr == Z_MEM_ERROR ? "out of memory" : "corrupt data");
			return zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
		}
		g->total_out += got;
		if (got && (r = out(ud, buf, got)) < 0)
			return r;
		/* done with this input once it is consumed and zlib has nothing more to give */
		if (g->z.avail_in == 0 && n == 0 && g->z.avail_out != 0)
			break;
	}
	return 0;
}

int e2b_gunzip_finish(const struct e2b_gz *g, const char **why)
{
	*why = NULL;
	if (!g->ready || !g->inflating)
		return -EINVAL;
	if (g->members == 0 && !g->z.total_in) {
		*why = "empty body";
		return -EINVAL;
	}
	if (!g->member_end) {
		*why = "truncated stream";
		return -EINVAL;
	}
	return 0;
}

int e2b_gzip_feed(struct e2b_gz *g, const void *in, size_t n, bool finish, e2b_gz_out_fn out,
		  void *ud)
{
	unsigned char buf[E2B_GZ_CHUNK];
	int zr;

	if (!g->ready || g->inflating)
		return -EINVAL;
	g->z.next_in = (unsigned char *)(uintptr_t)in;
	g->z.avail_in = 0;
	do {
		size_t got;
		int r;

		if (n > 0 && g->z.avail_in == 0) {
			g->z.avail_in = n > (1u << 30) ? (1u << 30) : (unsigned)n;
			n -= g->z.avail_in;
		}
		g->z.next_out = buf;
		g->z.avail_out = sizeof(buf);
		zr = deflate(&g->z, finish && n == 0 ? Z_FINISH : Z_NO_FLUSH);
		if (zr == Z_STREAM_ERROR)
			return -EINVAL;
		got = sizeof(buf) - g->z.avail_out;
		g->total_out += got;
		if (got && (r = out(ud, buf, got)) < 0)
			return r;
		/* until the input is consumed, and on finish until the trailer is out */
	} while (n > 0 || g->z.avail_in > 0 || g->z.avail_out == 0 ||
		 (finish && zr != Z_STREAM_END));
	return 0;
}

bool e2b_accepts_gzip(const char *accept_encoding)
{
	const char *p = accept_encoding;

	/* UNTRUSTED: Accept-Encoding. "gzip" or "x-gzip" as a token, not refused by q=0. */
	while (p && *p) {
		size_t len;
		const char *q, *end;

		p += strspn(p, " \t,");
		len = strcspn(p, ",");
		end = p + len;
		q = memchr(p, ';', len);
		if (q == NULL)
			q = end;
		while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
			q--;
		if (((size_t)(q - p) == 4 && !strncasecmp(p, "gzip", 4)) ||
		    ((size_t)(q - p) == 6 && !strncasecmp(p, "x-gzip", 6))) {
			const char *qv = memchr(q, '=', (size_t)(end - q));

			/* q=0, q=0.0, q=0.00... refuses it */
			if (!qv)
				return true;
			qv++;
			while (qv < end && *qv == ' ')
				qv++;
			if (qv < end && *qv == '0') {
				qv++;
				if (qv < end && *qv == '.')
					qv++;
				while (qv < end && *qv == '0')
					qv++;
				if (qv >= end || *qv == ' ' || *qv == ';')
					return false;
			}
			return true;
		}
		p = end;
	}
	return false;
}
