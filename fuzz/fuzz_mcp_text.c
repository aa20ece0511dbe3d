/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_mcp_text: libFuzzer target for the MCP server's UTF-8 sanitiser and output bounding. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mcp/text.h"

/* The input is what a hostile program in a sandbox prints; the text handed to the model must
 * be valid UTF-8 without NUL (jansson accepts it) and bounded. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbuf b = {0};
	char *buf = malloc(size ? size : 1);
	json_t *j;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	mcp_out_bound(&b, buf, size, size & 1 ? "/tmp/isola-mcp/run-1.stdout" : NULL);
	if (!b.oom) {
		if (!b.s || strlen(b.s) != b.len)
			abort();
		j = json_stringn(b.s, b.len);
		if (!j)
			abort(); /* not valid UTF-8 */
		json_decref(j);
		if (mcp_out_is_long(size) && b.len > 3 * (MCP_OUT_HEAD + MCP_OUT_TAIL) + 512)
			abort(); /* each byte may grow to U+FFFD (3 bytes), no more */
	}
	free(b.s);
	free(buf);
	return 0;
}
