/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_expose_http: libFuzzer target for the exposure head parser, router and rewriter. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/expose/xhttp.h"

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
