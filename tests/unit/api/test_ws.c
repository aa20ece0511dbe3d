/* SPDX-License-Identifier: Apache-2.0 */
/* test_ws: WebSocket accept key, frame encoding and the incremental decoder's caps and checks. */
#include "common/ws.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"

static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};

/* Feeds all of buf (in pieces of `step`); returns the last result and the message. */
static int feed_all(struct ws_decoder *d, const uint8_t *buf, size_t len, size_t step,
		    struct ws_message *m, int *msgs)
{
	size_t off = 0;
	int r = 0;

	*msgs = 0;
	while (off < len) {
		size_t n = len - off < step ? len - off : step, used = 0;

		r = ws_decoder_feed(d, buf + off, n, &used, m);
		if (r < 0)
			return r;
		off += used;
		if (r == 1)
			(*msgs)++;
	}
	return r;
}

int main(void)
{
	char accept[WS_ACCEPT_KEY_SIZE], ckey[WS_CLIENT_KEY_SIZE];
	struct ws_decoder d;
	struct ws_message m;
	uint8_t *f, hdr[WS_MAX_HEADER], big[70000];
	size_t flen, used;
	int msgs, r;

	/* RFC 6455 section 1.3 example. */
	ok(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", accept) == 0 &&
		   !strcmp(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
	   "accept key of the RFC example");
	ok(ws_accept_key("short", accept) == -EINVAL, "short key refused");
	ok(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=!", accept) == -EINVAL, "bad padding refused");
	ok(ws_accept_key(NULL, accept) == -EINVAL, "NULL key refused");
	ok(ws_client_key(ckey) == 0 && strlen(ckey) == 24 && ws_accept_key(ckey, accept) == 0,
	   "client key is acceptable");

	ok(ws_frame_header(hdr, WS_OP_TEXT, NULL, 5) == 2 && hdr[0] == 0x81 && hdr[1] == 5,
	   "small header");
	ok(ws_frame_header(hdr, WS_OP_BINARY, NULL, 300) == 4 && hdr[1] == 126 && hdr[2] == 1 &&
		   hdr[3] == 44,
	   "16-bit length");
	ok(ws_frame_header(hdr, WS_OP_BINARY, mask, 70000) == 14 && hdr[1] == (0x80 | 127),
	   "64-bit length, masked");
	ok(ws_frame_header(hdr, WS_OP_PING, NULL, 126) == -EINVAL, "control over 125 refused");
	ok(ws_frame_header(hdr, 3, NULL, 1) == -EINVAL, "reserved opcode refused");

	/* Server decoder: masked client frames round-trip, split at every byte. */
	ok(ws_frame_encode(WS_OP_TEXT, mask, "Hello", 5, &f, &flen) == 0 && flen == 11,
	   "masked encode");
	ws_decoder_init(&d, true, 1024);
	r = feed_all(&d, f, flen, 1, &m, &msgs);
	ok(r == 1 && msgs == 1 && m.opcode == WS_OP_TEXT && m.len == 5 &&
		   !memcmp(m.data, "Hello", 5),
	   "byte-by-byte decode unmasks");
	ws_decoder_fini(&d);
	free(f);

	/* Unmasked client frame refused by a server. */
	ws_frame_encode(WS_OP_BINARY, NULL, "x", 1, &f, &flen);
	ws_decoder_init(&d, true, 1024);
	ok(ws_decoder_feed(&d, f, flen, &used, &m) == -EPROTO && d.close_code == WS_CLOSE_PROTOCOL,
	   "unmasked client frame refused (1002)");
	ws_decoder_fini(&d);
	/* ... and accepted by a client decoder, which refuses masked ones. */
	ws_decoder_init(&d, false, 1024);
	ok(ws_decoder_feed(&d, f, flen, &used, &m) == 1 && m.len == 1, "client accepts unmasked");
	ws_decoder_fini(&d);
	free(f);
	ws_frame_encode(WS_OP_BINARY, mask, "x", 1, &f, &flen);
	ws_decoder_init(&d, false, 1024);
	ok(ws_decoder_feed(&d, f, flen, &used, &m) == -EPROTO, "client refuses masked");
	ws_decoder_fini(&d);
	free(f);

	/* Oversized frame refused from the header, before any payload or allocation. */
	ws_frame_header(hdr, WS_OP_BINARY, mask, 70000);
	ws_decoder_init(&d, true, 65536);
	ok(ws_decoder_feed(&d, hdr, 14, &used, &m) == -EMSGSIZE &&
		   d.close_code == WS_CLOSE_TOO_BIG && d.msg == NULL,
	   "oversized frame refused (1009) without allocating");
	ws_decoder_fini(&d);
	/* 2^63 length refused. */
	{
		uint8_t h[14] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};

		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, h, 14, &used, &m) == -EPROTO,
		   "MSB of 64-bit length refused");
		ws_decoder_fini(&d);
	}
	/* RSV bits, unknown opcode, fragmented control, oversized control. */
	{
		uint8_t rsv[] = {0xc1, 0x80, 1, 2, 3, 4}, op3[] = {0x83, 0x80, 1, 2, 3, 4},
			fragping[] = {0x09, 0x80, 1, 2, 3, 4},
			bigping[] = {0x89, 0xfe, 0, 126, 1, 2, 3, 4};

		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, rsv, sizeof(rsv), &used, &m) == -EPROTO, "RSV1 refused");
		ws_decoder_fini(&d);
		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, op3, sizeof(op3), &used, &m) == -EPROTO, "opcode 3 refused");
		ws_decoder_fini(&d);
		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, fragping, sizeof(fragping), &used, &m) == -EPROTO,
		   "fragmented ping refused");
		ws_decoder_fini(&d);
		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, bigping, sizeof(bigping), &used, &m) == -EPROTO,
		   "126-byte ping refused");
		ws_decoder_fini(&d);
	}
	/* Fragmented message with an interleaved ping. */
	{
		uint8_t buf[64];
		size_t n = 0;
		uint8_t frag1[] = {0x02, 0x83, 0, 0, 0, 0, 'a', 'b', 'c'};
		uint8_t ping[] = {0x89, 0x81, 0, 0, 0, 0, 'p'};
		uint8_t frag2[] = {0x80, 0x82, 0, 0, 0, 0, 'd', 'e'};

		memcpy(buf + n, frag1, sizeof(frag1));
		n += sizeof(frag1);
		memcpy(buf + n, ping, sizeof(ping));
		n += sizeof(ping);
		memcpy(buf + n, frag2, sizeof(frag2));
		n += sizeof(frag2);
		ws_decoder_init(&d, true, 1024);
		r = ws_decoder_feed(&d, buf, n, &used, &m);
		ok(r == 1 && m.opcode == WS_OP_PING && m.len == 1 && m.data[0] == 'p',
		   "ping between fragments delivered first");
		r = ws_decoder_feed(&d, buf + used, n - used, &used, &m);
		ok(r == 1 && m.opcode == WS_OP_BINARY && m.len == 5 && !memcmp(m.data, "abcde", 5),
		   "fragments reassembled");
		ws_decoder_fini(&d);
	}
	/* Continuation without a start; new message inside a fragmented one. */
	{
		uint8_t cont[] = {0x80, 0x80, 0, 0, 0, 0};
		uint8_t two[] = {0x01, 0x80, 0, 0, 0, 0, 0x81, 0x80, 0, 0, 0, 0};

		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, cont, sizeof(cont), &used, &m) == -EPROTO,
		   "orphan continuation refused");
		ws_decoder_fini(&d);
		ws_decoder_init(&d, true, 1024);
		ok(ws_decoder_feed(&d, two, sizeof(two), &used, &m) == -EPROTO,
		   "data frame inside a fragmented message refused");
		ws_decoder_fini(&d);
	}
	/* Reassembled message over the cap. */
	{
		uint8_t a[8 + 600];

		memset(a, 0, sizeof(a));
		ws_frame_header(a, WS_OP_BINARY, mask, 600);
		a[0] &= 0x7f; /* not FIN */
		ws_decoder_init(&d, true, 1000);
		r = ws_decoder_feed(&d, a, 8 + 600, &used, &m);
		ok(r == 0, "first fragment under the cap");
		a[0] = 0x00; /* continuation, not FIN, 600 more */
		r = ws_decoder_feed(&d, a, 8, &used, &m);
		ok(r == -EMSGSIZE, "message over the cap across fragments refused");
		ws_decoder_fini(&d);
	}
	/* Invalid UTF-8 in a text message. */
	ws_frame_encode(WS_OP_TEXT, mask, "\xff", 1, &f, &flen);
	ws_decoder_init(&d, true, 1024);
	ok(ws_decoder_feed(&d, f, flen, &used, &m) == -EILSEQ &&
		   d.close_code == WS_CLOSE_INVALID_DATA,
	   "invalid UTF-8 text refused (1007)");
	ws_decoder_fini(&d);
	free(f);
	/* Large binary round trip, two messages in one buffer, empty frame. */
	memset(big, 'z', sizeof(big));
	ws_frame_encode(WS_OP_BINARY, mask, big, sizeof(big), &f, &flen);
	ws_decoder_init(&d, true, 1 << 20);
	r = feed_all(&d, f, flen, 4096, &m, &msgs);
	ok(r == 1 && msgs == 1 && m.len == sizeof(big) && !memcmp(m.data, big, sizeof(big)),
	   "70000-byte frame in 4 KiB pieces");
	free(f);
	ws_frame_encode(WS_OP_BINARY, mask, "", 0, &f, &flen);
	ok(ws_decoder_feed(&d, f, flen, &used, &m) == 1 && m.len == 0, "empty frame");
	free(f);
	ws_decoder_fini(&d);
	/* Close payload parsing. */
	{
		uint16_t code;
		const uint8_t *reason;
		size_t rl;

		ok(ws_parse_close((const uint8_t *)"\x03\xe8"
						   "bye",
				  5, &code, &reason, &rl) == 0 &&
			   code == 1000 && rl == 3,
		   "close 1000 with reason");
		ok(ws_parse_close(NULL, 0, &code, &reason, &rl) == 0 && code == 1005,
		   "empty close");
		ok(ws_parse_close((const uint8_t *)"\x03", 1, &code, &reason, &rl) < 0,
		   "one-byte close refused");
		ok(ws_parse_close((const uint8_t *)"\x03\xed", 2, &code, &reason, &rl) < 0,
		   "close 1005 on the wire refused");
	}
	ok(ws_utf8_valid((const uint8_t *)"\xf4\x8f\xbf\xbf", 4), "U+10FFFF valid");
	ok(!ws_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4), "above U+10FFFF invalid");
	return tap_done();
}
