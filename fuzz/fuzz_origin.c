/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_origin: libFuzzer target for /mcp's Origin check (api_origin_ok, hostile headers). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "isolad/api/mcphttp.h"

/* The input is "ORIGIN\0HOST" (no NUL: the whole input is the Origin, Host fixed). Whatever
 * it is, an accepted Origin names exactly the Host, and the Host holds no letter but those of
 * "localhost" (a DNS name is never accepted). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 2), *host;
	const char *auth;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = '\0';
	host = memchr(buf, '\0', size) ? buf + strlen(buf) + 1 : "127.0.0.1:7070";
	if (api_origin_ok(buf, host)) {
		auth = strstr(buf, "://");
		if (!auth || strcasecmp(auth + 3, host) != 0)
			abort();
		if (strncasecmp(host, "localhost", 9) != 0 && host[0] != '[')
			for (const char *p = host; *p && *p != ':'; p++)
				if (!((*p >= '0' && *p <= '9') || *p == '.'))
					abort();
	}
	free(buf);
	return 0;
}
