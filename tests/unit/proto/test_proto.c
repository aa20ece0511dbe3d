/* SPDX-License-Identifier: Apache-2.0 */
/* test_proto: TAP tests for frame header encoding/validation and the incremental decoder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "../tap.h"

static int decode(uint32_t len, uint32_t ch, uint8_t type, uint8_t flags, uint16_t rsv)
{
	struct proto_header h = {.len = len, .channel = ch, .type = type, .flags = 0};
	uint8_t b[PROTO_HEADER_SIZE];

	proto_header_encode(&h, b);
	b[9] = flags;
	b[10] = rsv & 0xff;
	b[11] = rsv >> 8;
	return proto_header_decode(b, &h);
}

/* Builds a stream of frames: each (type, channel, payload). */
static size_t build_stream(uint8_t *out, int nframes, unsigned seed)
{
	size_t o = 0;
	int i;

	srand(seed);
	for (i = 0; i < nframes; i++) {
		struct proto_header h = {.channel = (uint32_t)i + 1, .type = PROTO_STDOUT};
		size_t len = (size_t)(rand() % 3000) + 1, k;

		if (i % 3 == 1) {
			h.type = PROTO_EOF;
			len = 0;
		}
		h.len = (uint32_t)len;
		proto_header_encode(&h, out + o);
		o += PROTO_HEADER_SIZE;
		for (k = 0; k < len; k++)
			out[o + k] = (uint8_t)(i + k);
		o += len;
	}
	return o;
}

/* Feeds stream in chunks drawn by chunker; counts frames and checks payloads. */
static int feed_all(const uint8_t *s, size_t n, int nframes, size_t (*chunk)(size_t))
{
	struct proto_decoder d;
	size_t off = 0;
	int frames = 0, bad = 0;

	proto_decoder_init(&d);
	while (off < n) {
		size_t c = chunk(n - off), used;
		size_t base = off;

		while (off < base + c) {
			struct proto_header h;
			const uint8_t *p;
			int r = proto_decoder_feed(&d, s + off, base + c - off, &used, &h, &p);

			off += used;
			if (r < 0) {
				bad++;
				break;
			}
			if (r == 0)
				break;
			if (h.channel != (uint32_t)frames + 1)
				bad++;
			for (size_t k = 0; k < h.len; k++)
				if (p[k] != (uint8_t)(frames + k))
					bad++;
			frames++;
		}
		if (bad)
			break;
	}
	proto_decoder_fini(&d);
	return bad ? -1 : frames == nframes ? 0 : -2;
}

static size_t one_byte(size_t left)
{
	return 1;
}

static size_t random_split(size_t left)
{
	size_t c = (size_t)(rand() % 5000) + 1;

	return c > left ? left : c;
}

static size_t whole(size_t left)
{
	return left;
}

int main(void)
{
	struct proto_header h = {.len = 1234, .channel = 0xdeadbeef, .type = PROTO_STDIN}, g;
	uint8_t b[PROTO_HEADER_SIZE];
	static uint8_t stream[200 * 3100];
	size_t n;
	int t;

	proto_header_encode(&h, b);
	ok(b[0] == 0xd2 && b[1] == 0x04 && b[4] == 0xef && b[7] == 0xde && b[8] == PROTO_STDIN,
	   "encode is little endian");
	ok(proto_header_decode(b, &g) == 0 && g.len == 1234 && g.channel == 0xdeadbeef &&
		   g.type == PROTO_STDIN && g.flags == 0,
	   "round trip");
	for (t = 1; t <= PROTO_TYPE_MAX; t++) {
		uint32_t len = t == PROTO_CREDIT ? 4 : (t == PROTO_EOF || t == PROTO_CLOSE) ? 0 : 2;

		if (!ok(decode(len, t == PROTO_HELLO ? 0 : 7, (uint8_t)t, 0, 0) == 0,
			"type %d valid", t))
			break;
	}
	ok(decode(2, 1, 0, 0, 0) == -EPROTO, "type 0 rejected");
	ok(decode(2, 1, PROTO_TYPE_MAX + 1, 0, 0) == -EPROTO, "type past max rejected");
	ok(decode(2, 1, 255, 0, 0) == -EPROTO, "type 255 rejected");
	ok(decode(2, 1, PROTO_OPEN, 1, 0) == -EPROTO, "non-zero flags rejected");
	ok(decode(2, 1, PROTO_OPEN, 0x80, 0) == -EPROTO, "high flag rejected");
	ok(decode(2, 1, PROTO_OPEN, 0, 1) == -EPROTO, "reserved low byte rejected");
	ok(decode(2, 1, PROTO_OPEN, 0, 0x100) == -EPROTO, "reserved high byte rejected");
	ok(decode(2, 1, PROTO_HELLO, 0, 0) == -EPROTO, "HELLO off channel 0 rejected");
	ok(decode(2, 0, PROTO_OPEN, 0, 0) == -EPROTO, "OPEN on channel 0 rejected");
	ok(decode(PROTO_MAX_JSON, 1, PROTO_OPEN, 0, 0) == 0, "JSON at the limit");
	ok(decode(PROTO_MAX_JSON + 1, 1, PROTO_OPEN, 0, 0) == -EPROTO, "JSON over the limit");
	ok(decode(1, 1, PROTO_RESULT, 0, 0) == -EPROTO, "JSON shorter than {} rejected");
	ok(decode(PROTO_MAX_PAYLOAD, 1, PROTO_STDOUT, 0, 0) == 0, "data at the limit");
	ok(decode(PROTO_MAX_PAYLOAD + 1, 1, PROTO_STDIN, 0, 0) == -EPROTO, "data over the limit");
	ok(decode(0xffffffffu, 1, PROTO_STDERR, 0, 0) == -EPROTO, "4 GiB length rejected");
	ok(decode(0, 1, PROTO_STDOUT, 0, 0) == -EPROTO, "empty data frame rejected");
	ok(decode(3, 1, PROTO_CREDIT, 0, 0) == -EPROTO &&
		   decode(5, 1, PROTO_CREDIT, 0, 0) == -EPROTO,
	   "CREDIT must be 4 bytes");
	ok(decode(1, 1, PROTO_EOF, 0, 0) == -EPROTO && decode(1, 1, PROTO_CLOSE, 0, 0) == -EPROTO,
	   "EOF and CLOSE must be empty");
	ok(proto_type_uses_credit(PROTO_ENTRY) && proto_type_uses_credit(PROTO_STDIN) &&
		   !proto_type_uses_credit(PROTO_RESULT),
	   "credit accounting covers data and ENTRY");

	n = build_stream(stream, 200, 1);
	ok(feed_all(stream, n, 200, whole) == 0, "decoder: whole stream at once");
	ok(feed_all(stream, n, 200, one_byte) == 0, "decoder: byte by byte");
	srand(42);
	ok(feed_all(stream, n, 200, random_split) == 0, "decoder: random splits");
	{
		struct proto_decoder d;
		uint8_t bad[PROTO_HEADER_SIZE];
		struct proto_header hh = {
			.len = PROTO_MAX_PAYLOAD + 1, .channel = 1, .type = PROTO_STDOUT};
		const uint8_t *p;
		size_t used;
		int r1, r2;

		proto_header_encode(&hh, bad);
		proto_decoder_init(&d);
		r1 = proto_decoder_feed(&d, bad, 6, &used, &hh, &p);
		r2 = proto_decoder_feed(&d, bad + 6, 6, &used, &hh, &p);
		ok(r1 == 0 && r2 == -EPROTO, "oversize header split in two is rejected");
		ok(proto_decoder_feed(&d, stream, 12, &used, &hh, &p) == -EPROTO,
		   "decoder stays failed after an error");
		proto_decoder_fini(&d);
	}
	{
		struct proto_decoder d;
		struct proto_header hh = {.len = 2, .channel = 3, .type = PROTO_RESULT};
		uint8_t two[2 * (PROTO_HEADER_SIZE + 2)];
		const uint8_t *p;
		size_t used;
		int r;

		proto_header_encode(&hh, two);
		memcpy(two + 12, "{}", 2);
		memcpy(two + 14, two, 14);
		proto_decoder_init(&d);
		r = proto_decoder_feed(&d, two, sizeof(two), &used, &hh, &p);
		ok(r == 1 && used == 14 && p[2] == '\0',
		   "stops after one frame; payload NUL-terminated");
		r = proto_decoder_feed(&d, two + used, sizeof(two) - used, &used, &hh, &p);
		ok(r == 1 && used == 14 && hh.channel == 3, "second frame from the rest");
		proto_decoder_fini(&d);
	}
	return tap_done();
}
