/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_dockerfile: libFuzzer target for template build's Dockerfile parser and substitution. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/images/dockerfile.h"

static const char *lookup(void *ud, const char *name)
{
	(void)ud;
	return name[0] == 'A' ? "value with spaces" : NULL;
}

/* Every parsed step must have its text; substitution and word splitting of it must return
 * NUL-terminated strings or a clean error. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dockerfile d;
	struct isola_err *err = NULL;

	if (dockerfile_parse((const char *)data, size, &d, &err) == 0) {
		for (size_t i = 0; i < d.n; i++) {
			char *s = NULL, **w = NULL;
			size_t n = 0;

			if (!d.steps[i].args)
				abort();
			if (dockerfile_subst(d.steps[i].args, d.escape, lookup, NULL, &s, &err) ==
			    0) {
				if (dockerfile_words(s, d.escape, &w, &n, &err) == 0 && w[n])
					abort();
				dockerfile_words_free(w);
				free(s);
			}
			isola_err_free(err);
			err = NULL;
		}
	}
	dockerfile_fini(&d);
	isola_err_free(err);
	return 0;
}
