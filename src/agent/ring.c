/* SPDX-License-Identifier: Apache-2.0 */
/* ring: bounded byte ring with absolute offsets. */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RING_MIN_ALLOC 4096u

void ring_init(struct ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->cap = cap ? cap : 1;
}

void ring_fini(struct ring *r)
{
	free(r->buf);
	r->buf = NULL;
	r->alloc = 0;
}

void ring_release(struct ring *r)
{
	ring_fini(r);
	r->cap = 0; /* never allocate again */
}

/* Grows the allocation while nothing has wrapped yet (total <= alloc), so offsets below
 * total sit at buf[offset] both before and after the realloc. */
static int ring_grow(struct ring *r, size_t want)
{
	size_t n = r->alloc ? r->alloc : RING_MIN_ALLOC;
	uint8_t *p;

	while (n < want && n < r->cap)
		n = n > r->cap / 2 ? r->cap : n * 2;
	if (n > r->cap)
		n = r->cap;
	if (n <= r->alloc)
		return 0;
	p = realloc(r->buf, n);
	if (!p)
		return -ENOMEM;
	r->buf = p;
	r->alloc = n;
	return 0;
}

int ring_write(struct ring *r, const void *data, size_t len)
{
	const uint8_t *src = data;
	size_t pos, n;

	if (len == 0)
		return 0;
	if (r->total <= r->alloc && r->alloc < r->cap && r->total + len > r->alloc) {
		uint64_t want = r->total + len;

		if (ring_grow(r, want > r->cap ? r->cap : (size_t)want) < 0)
			return -ENOMEM;
	}
	if (!r->buf) {
		/* released (process finished, storage reclaimed): count only */
		r->total += len;
		return 0;
	}
	if (len > r->alloc) { /* only the tail survives */
		r->total += len - r->alloc;
		src += len - r->alloc;
		len = r->alloc;
	}
	pos = r->total % r->alloc;
	n = r->alloc - pos < len ? r->alloc - pos : len;
	memcpy(r->buf + pos, src, n);
	memcpy(r->buf, src + n, len - n);
	r->total += len;
	return 0;
}

uint64_t ring_oldest(const struct ring *r)
{
	if (!r->buf)
		return r->total;
	return r->total > r->alloc ? r->total - r->alloc : 0;
}

size_t ring_read(const struct ring *r, uint64_t from, void *out, size_t len)
{
	uint8_t *dst = out;
	size_t pos, n;

	if (from < ring_oldest(r) || from >= r->total)
		return 0;
	if (len > r->total - from)
		len = r->total - from;
	pos = from % r->alloc;
	n = r->alloc - pos < len ? r->alloc - pos : len;
	memcpy(dst, r->buf + pos, n);
	memcpy(dst + n, r->buf, len - n);
	return len;
}
