/* SPDX-License-Identifier: Apache-2.0 */
/* ring: a bounded byte ring addressed by absolute stream offsets (process output retention). */
#ifndef ISOLA_AGENT_RING_H
#define ISOLA_AGENT_RING_H

#include <stddef.h>
#include <stdint.h>

/*
 * Keeps the last `cap` bytes written. Bytes are addressed by their absolute offset in
 * the stream (0 = first byte ever written), so readers keep a cursor and learn how
 * much they missed. Memory grows on demand (doubling) up to cap, then wraps.
 */
struct ring {
	uint8_t *buf;	/* allocation, owned */
	size_t alloc;	/* bytes allocated (<= cap) */
	size_t cap;	/* retention limit */
	uint64_t total; /* bytes ever written */
};

void ring_init(struct ring *r, size_t cap);
void ring_fini(struct ring *r);
/* Appends len bytes, overwriting the oldest when full. 0 or -ENOMEM (nothing written). */
int ring_write(struct ring *r, const void *data, size_t len);
/* Absolute offset of the oldest byte still held (== total when empty or released). */
uint64_t ring_oldest(const struct ring *r);
/* Copies up to len bytes starting at absolute offset `from` (>= ring_oldest) into out.
 * Returns the number of bytes copied. */
size_t ring_read(const struct ring *r, uint64_t from, void *out, size_t len);
/* Frees the storage but keeps `total`, so later readers see everything as dropped. */
void ring_release(struct ring *r);

#endif
