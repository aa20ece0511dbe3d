/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_ws_protocol: libFuzzer target for the WebSocket bearer subprotocol scanner (route.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/api/api-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h = malloc(size + 1);
	const char *t;
	size_t len = 0;

	if (!h)
		return 0;
	memcpy(h, data, size);
	h[size] = '\0';
	t = api_ws_protocol_token(h, &len);
	/* A token lies inside the header, is not empty and holds no separator. */
	if (t && (t < h || t + len > h + strlen(h) || len == 0 || strcspn(t, " \t,") < len))
		abort();
	free(h);
	return 0;
}
