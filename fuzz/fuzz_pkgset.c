/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_pkgset: libFuzzer target for the dpkg status parser and the dependency closure. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/images/pkgset.h"

/* The input is a status file; the closure of a few names (and Essential) must stay in it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const roots[] = {"bash", "python3", "a", "gcc"};
	struct pkgset *p = NULL;
	size_t marked, n = 0;

	if (pkgset_parse((const char *)data, size, &p) < 0)
		return 0;
	marked = pkgset_close(p, roots, 4, true);
	for (size_t i = 0; i < pkgset_count(p); i++) {
		if (!pkgset_name(p, i)[0] || !pkgset_arch(p, i))
			abort();
		n += pkgset_is_marked(p, i);
	}
	if (n != marked)
		abort();
	pkgset_free(p);
	return 0;
}
