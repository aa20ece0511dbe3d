/* SPDX-License-Identifier: Apache-2.0 */
/* test_origin: the /mcp Origin check (DNS rebinding) — api_origin_ok(). */
#include "isolad/api/mcphttp.h"

#include "../tap.h"

int main(void)
{
	ok(api_origin_ok(NULL, "127.0.0.1:7070"), "no Origin (not a browser): allowed");
	ok(api_origin_ok(NULL, NULL), "no Origin, no Host: allowed");
	ok(api_origin_ok("http://127.0.0.1:7070", "127.0.0.1:7070"), "own IPv4 origin");
	ok(api_origin_ok("https://127.0.0.1:7070", "127.0.0.1:7070"), "own origin over https");
	ok(api_origin_ok("http://localhost:7070", "localhost:7070"), "localhost");
	ok(api_origin_ok("http://LOCALHOST:7070", "localhost:7070"), "case-insensitive");
	ok(api_origin_ok("http://[::1]:7070", "[::1]:7070"), "IPv6 literal");
	ok(api_origin_ok("http://10.1.2.3:7070", "10.1.2.3:7070"), "a LAN address named as such");
	ok(!api_origin_ok("http://evil.example:7070", "evil.example:7070"),
	   "a DNS name, even matching Host: refused (rebinding)");
	ok(!api_origin_ok("http://localhost.evil.example:7070", "localhost.evil.example:7070"),
	   "a name that starts with localhost: refused");
	ok(!api_origin_ok("http://1.2.3.4.nip.io:7070", "1.2.3.4.nip.io:7070"),
	   "a name made of an address: refused");
	ok(!api_origin_ok("http://127.0.0.1:8000", "127.0.0.1:7070"), "another port: refused");
	ok(!api_origin_ok("http://evil.example", "127.0.0.1:7070"), "another host: refused");
	ok(!api_origin_ok("null", "127.0.0.1:7070"), "opaque origin: refused");
	ok(!api_origin_ok("file://", "127.0.0.1:7070"), "other scheme: refused");
	ok(!api_origin_ok("http://127.0.0.1:7070", NULL), "no Host: refused");
	ok(!api_origin_ok("http://127.0.0.1:7070/", "127.0.0.1:7070"), "a path is not an origin");
	ok(!api_origin_ok("http://", ""), "empty authority: refused");
	return tap_done();
}
