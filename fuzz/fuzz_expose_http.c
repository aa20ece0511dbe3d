/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_expose_http: libFuzzer target for the exposure head parser, router, rewriter and
 * keep-alive request framing (xhttp_stream). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/expose/xhttp.h"

/* A stream's events, hashed in order: heads (their bytes) and body bytes (merged across
 * pieces, so any split of the input must give the same hash). */
struct rec {
	uint64_t hash, heads, body;
};

static void mix(struct rec *r, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		r->hash = (r->hash ^ (unsigned char)p[i]) * 1099511628211ull;
}

static int on_head(void *ctx, const char *buf, const struct xhttp_head *hh)
{
	struct rec *r = ctx;

	if (hh->head_len == 0 || hh->head_len > XHTTP_MAX_HEAD)
		abort();
	mix(r, "\x01", 1);
	mix(r, buf, hh->head_len);
	r->heads++;
	/* a head the listener would refuse (a `Refuse` header name) stops the stream */
	for (unsigned i = 0; i < hh->nfields; i++)
		if (xhttp_span_eq(buf, hh->fields[i].name, "Refuse"))
			return -EPERM;
	return 0;
}

static int on_body(void *ctx, const char *p, size_t n)
{
	struct rec *r = ctx;

	if (n == 0)
		abort(); /* empty pieces are never delivered */
	mix(r, p, n);
	r->body += n;
	return 0;
}

static const struct xhttp_stream_ops ops = {.head = on_head, .body = on_body};
static struct xhttp_stream st1, st2;

/* The stream fed whole and in pieces of step bytes: same result, same events. */
static void stream_check(const char *buf, size_t size, size_t step)
{
	struct rec a = {0}, b = {0};
	int ra, rb = 0;

	memset(&st1, 0, sizeof(st1));
	memset(&st2, 0, sizeof(st2));
	st1.in_head = st2.in_head = true;
	ra = xhttp_stream_feed(&st1, buf, size, &ops, &a);
	for (size_t i = 0; i < size && rb == 0; i += step)
		rb = xhttp_stream_feed(&st2, buf + i, size - i < step ? size - i : step, &ops, &b);
	if (ra != rb)
		abort();
	if (ra == 0 && (a.hash != b.hash || a.heads != b.heads || a.body != b.body))
		abort();
	if (ra == 0 && a.body > size)
		abort();
	if (ra < 0 && xhttp_stream_feed(&st1, "x", 1, &ops, &a) != -EPIPE)
		abort(); /* a failed stream accepts nothing more */
}

static char out[2 * XHTTP_MAX_HEAD];

/* Feeds growing prefixes (as reads would deliver them); a complete head is routed and
 * rewritten, and the rewritten head must parse again as one complete head. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct xhttp_head h, h2;
	struct xhttp_route rt;
	size_t step, len = 0;
	const char *buf;
	int r = 0;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 61 + 1;
	buf = (const char *)data + 1;
	size--;
	stream_check(buf, size, step);
	while (len < size) {
		len = len + step > size ? size : len + step;
		r = xhttp_parse(buf, len, &h);
		if (r != 0)
			break;
	}
	if (r != 1)
		return 0;
	if (h.head_len > len || h.head_len > XHTTP_MAX_HEAD)
		abort();
	if (xhttp_route(buf, &h, "isola.localhost", &rt) == 0) {
		long n = xhttp_rewrite(buf, &h, &rt, out, sizeof(out));

		if (n < 0)
			abort(); /* 2 * XHTTP_MAX_HEAD always fits */
		if (rt.port < 1 || rt.port > 65535 || strlen(rt.id) == 0)
			abort();
		if ((size_t)n <= XHTTP_MAX_HEAD && xhttp_parse(out, (size_t)n, &h2) != 1)
			abort(); /* what we forward must be a well-formed head */
		xhttp_target_without_token(buf, &h, out, sizeof(out));
	}
	return 0;
}
