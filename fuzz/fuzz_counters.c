/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_counters: libFuzzer target for isolad's reader of a microvm guest's counters answer. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/tiers/microvm/microvm-internal.h"

/* The input is what a hostile guest writes to its counters port, read with the nonce isolad
 * would be waiting for; a copy of exactly size bytes, so reads past the end are caught. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mvm_guest_counters gc;
	char *buf = malloc(size ? size : 1);
	int r;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	r = mvm_counters_parse(buf, size, "0123456789abcdef", &gc);
	if (r > (int)size)
		abort();
	free(buf);
	return 0;
}
