/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_spec_seccomp: libFuzzer target for the spec seccomp profile checker and compiler. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "common/err.h"
#include "isolad/core/specseccomp.h"

/* A client's `seccomp` create field (or a bundle's linux.seccomp through isola-runc): any JSON
 * either compiles to a program within the bounds or is refused with a message, never more. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	struct isola_err *err = NULL;
	uint32_t flags = 0;
	int fd = -1;

	if (!j)
		return 0;
	if (spec_seccomp_compile(j, &fd, &flags, &err) == 0) {
		off_t n = lseek(fd, 0, SEEK_END);

		if (n <= 0 || n % 8 || n / 8 > SPEC_SECCOMP_MAX_INSNS)
			__builtin_trap();
		close(fd);
	} else if (!err || !err->message) {
		__builtin_trap();
	}
	isola_err_free(err);
	json_decref(j);
	return 0;
}
