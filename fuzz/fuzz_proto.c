/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_proto: libFuzzer target for the frame decoder and the JSON payload path. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/proto.h"

/* Splits the input at points derived from its first byte, as a socket would. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_decoder d;
	size_t off = 0, step;

	if (size < 1 || proto_decoder_init(&d) < 0)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	while (off < size) {
		size_t chunk = size - off < step ? size - off : step, used;
		struct proto_header h;
		const uint8_t *p;
		int r = proto_decoder_feed(&d, data + off, chunk, &used, &h, &p);

		if (r < 0)
			break;
		off += used;
		if (r == 1) {
			if (h.len > PROTO_MAX_PAYLOAD || h.type < 1 || h.type > PROTO_TYPE_MAX)
				__builtin_trap();
			if (proto_type_is_json(h.type)) {
				json_t *j = json_loadb((const char *)p, h.len,
						       JSON_REJECT_DUPLICATES, NULL);

				if (j && json_is_object(j))
					json_string_value(json_object_get(j, "op"));
				json_decref(j);
			}
		} else if (used == 0) {
			break;
		}
	}
	proto_decoder_fini(&d);
	return 0;
}
