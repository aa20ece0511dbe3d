/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_imageref: libFuzzer target for image references and registry WWW-Authenticate headers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/imageref.h"

/* The input, NUL-terminated, is parsed as a reference and as a challenge; every output
 * must stay a NUL-terminated string inside its buffer. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), scheme[16], realm[64], service[32], scope[32], buf[700];
	struct imageref r;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	if (imageref_parse(s, &r) == 0) {
		imageref_format(&r, buf, sizeof(buf));
		if (!memchr(r.repo, 0, sizeof(r.repo)) || !r.repo[0] || !r.registry[0])
			abort();
		(void)imageref_host_is_loopback(r.api_host);
	}
	if (imageref_parse_challenge(s, scheme, sizeof(scheme), realm, sizeof(realm), service,
				     sizeof(service), scope, sizeof(scope)) == 0 &&
	    (!memchr(realm, 0, sizeof(realm)) || !memchr(scope, 0, sizeof(scope))))
		abort();
	free(s);
	return 0;
}
