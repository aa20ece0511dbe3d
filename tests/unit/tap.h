/* SPDX-License-Identifier: Apache-2.0 */
/* tap: a minimal Test Anything Protocol emitter for isola's C unit tests. */
#ifndef ISOLA_TAP_H
#define ISOLA_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

/* Records one test point: `ok N - name` or `not ok N - name`. Returns cond. */
#define ok(cond, ...)                                                                              \
	({                                                                                         \
		int _c = !!(cond);                                                                 \
		printf("%sok %d - ", _c ? "" : "not ", ++tap_n);                                   \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!_c) {                                                                         \
			tap_failed++;                                                              \
			printf("#   failed at %s:%d\n", __FILE__, __LINE__);                       \
		}                                                                                  \
		_c;                                                                                \
	})

/* Prints the plan and returns the exit status (non-zero if anything failed). */
static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
