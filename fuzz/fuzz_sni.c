/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_sni: libFuzzer target for the egress proxy's head parser (TLS SNI, HTTP Host) and names. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/net/policy.h"
#include "isolad/net/sni.h"

static uint8_t wrapped[NET_SNI_MAX + 16];

static void check(const uint8_t *data, size_t size)
{
	struct net_sni_head h, hp;
	size_t split = size ? data[0] % (size + 1) : 0;
	int r = net_sni_parse(data, size, &h), rp;
	char norm[256];

	if (r != 0 && r != -EAGAIN && r != -EINVAL)
		abort();
	if (r == -EAGAIN && size >= NET_SNI_MAX)
		abort(); /* the bound holds */
	if (r == -EINVAL && !h.error)
		abort();
	if (r == 0) {
		size_t n = strnlen(h.name, sizeof(h.name));

		if (n == sizeof(h.name))
			abort();
		for (size_t i = 0; i < n; i++)
			if ((uint8_t)h.name[i] < 0x20)
				abort();
		if (net_name_normalize(h.name, norm, sizeof(norm)) == 0 && strlen(norm) > 253)
			abort();
	}
	/* A prefix that already decided must decide the same as the whole. */
	rp = net_sni_parse(data, split, &hp);
	if (rp != -EAGAIN && (rp != r || hp.kind != h.kind || strcmp(hp.name, h.name)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check(data, size);
	/* The same bytes behind a TLS record header, so the ClientHello parser is reached quickly. */
	if (size <= NET_SNI_MAX) {
		wrapped[0] = 0x16;
		wrapped[1] = 3;
		wrapped[2] = 1;
		wrapped[3] = (uint8_t)(size >> 8);
		wrapped[4] = (uint8_t)size;
		memcpy(wrapped + 5, data, size);
		check(wrapped, size + 5);
	}
	return 0;
}
