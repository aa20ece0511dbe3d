/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_httpresp: libFuzzer target for the HTTP/1.x response head parser and body decoder. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/httpresp.h"

/* The service inside a sandbox writes these bytes: a head, then a body fed in pieces of a
 * size the first byte picks; decoded output must never outgrow its input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_resp r;
	size_t step, off;
	char *buf;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 37 + 1;
	data++;
	size--;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (http_resp_head(buf, size, &r) == 1) {
		for (off = r.head_len; off < size; off += step) {
			size_t k = size - off < step ? size - off : step;
			long d = http_resp_body(&r, buf + off, k, buf + off);

			if (d < 0)
				break;
			if ((size_t)d > k)
				abort();
		}
	}
	free(buf);
	return 0;
}
