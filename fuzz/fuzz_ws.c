/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_ws: libFuzzer target for the WebSocket frame decoder (both sides) and encoder round trip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ws.h"

static void drive(const uint8_t *data, size_t size, bool server)
{
	struct ws_decoder d;
	size_t off = 0;

	/* First byte picks the chunking so split headers and payloads are explored. */
	size_t step = size ? (size_t)(data[0] % 17) + 1 : 1;

	ws_decoder_init(&d, server, 4096);
	while (off < size) {
		struct ws_message m;
		size_t n = size - off < step ? size - off : step, used = 0;
		int r = ws_decoder_feed(&d, data + off, n, &used, &m);

		if (r < 0)
			break;
		if (used > n)
			abort();
		if (r == 1 && m.len > 4096 && m.opcode != 0)
			abort();
		off += used;
	}
	ws_decoder_fini(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mask[4] = {1, 2, 3, 4};
	uint8_t *f;
	size_t flen;

	drive(data, size, true);
	drive(data, size, false);
	if (size <= 4096 && ws_frame_encode(WS_OP_BINARY, mask, data, size, &f, &flen) == 0) {
		struct ws_decoder d;
		struct ws_message m;
		size_t used;

		ws_decoder_init(&d, true, 4096);
		if (ws_decoder_feed(&d, f, flen, &used, &m) != 1 || m.len != size ||
		    (size && memcmp(m.data, data, size)))
			abort();
		ws_decoder_fini(&d);
		free(f);
	}
	return 0;
}
