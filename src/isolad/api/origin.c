/* SPDX-License-Identifier: Apache-2.0 */
/* origin: the Origin check of browser-reachable endpoints (/mcp) against DNS rebinding. */
#include "mcphttp.h"

#include <string.h>
#include <strings.h>

/* True for a host that only names this machine's listener: an IP literal or localhost. A
 * DNS name could be an attacker's pointing at us (DNS rebinding). */
static bool host_is_literal(const char *h, size_t n)
{
	if (n >= 9 && !strncasecmp(h, "localhost", 9) && (n == 9 || h[9] == ':'))
		return true;
	if (n && h[0] == '[')
		return true;
	for (size_t i = 0; i < n && h[i] != ':'; i++)
		if (!(h[i] == '.' || (h[i] >= '0' && h[i] <= '9')))
			return false;
	return n > 0 && h[0] != ':';
}

bool api_origin_ok(const char *origin, const char *host)
{
	const char *auth;

	/* UNTRUSTED: both headers. No Origin: not a browser (or a same-origin GET). */
	if (!origin)
		return true;
	if (!host)
		return false;
	if (!strncasecmp(origin, "http://", 7))
		auth = origin + 7;
	else if (!strncasecmp(origin, "https://", 8))
		auth = origin + 8;
	else
		return false; /* "null" and other schemes */
	return !strcasecmp(auth, host) && host_is_literal(host, strlen(host));
}
