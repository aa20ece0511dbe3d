/* SPDX-License-Identifier: Apache-2.0 */
/* test_imageref: image reference normalisation (as docker) and WWW-Authenticate parsing. */
#include <stdio.h>
#include <string.h>

#include "common/imageref.h"
#include "../tap.h"

static void norm(const char *in, const char *want, const char *api)
{
	struct imageref r;
	char buf[700];
	int rc = imageref_parse(in, &r);

	if (rc == 0)
		imageref_format(&r, buf, sizeof(buf));
	ok(rc == 0 && !strcmp(buf, want) && !strcmp(r.api_host, api), "`%s` -> `%s` at %s (got %s)",
	   in, want, api, rc == 0 ? buf : "error");
}

int main(void)
{
	static const char *const bad[] = {
		"",
		"Busybox",
		"busybox:",
		"busybox:-x",
		"a//b",
		"/a",
		"a/",
		"busybox@sha256:abc",
		"busybox@md5:0123",
		"r:5000/a/../b",
		"busybox:a/b",
	};
	char scheme[16], realm[128], service[64], scope[64];
	struct imageref r;

	norm("busybox", "docker.io/library/busybox:latest", "registry-1.docker.io");
	norm("library/busybox:1.36", "docker.io/library/busybox:1.36", "registry-1.docker.io");
	norm("someone/tool", "docker.io/someone/tool:latest", "registry-1.docker.io");
	norm("index.docker.io/x/y:2", "docker.io/x/y:2", "registry-1.docker.io");
	norm("localhost/a", "localhost/a:latest", "localhost");
	norm("127.0.0.1:5000/tools/hello:1", "127.0.0.1:5000/tools/hello:1", "127.0.0.1:5000");
	norm("ghcr.io/o/r@sha256:"
	     "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	     "ghcr.io/o/r@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	     "ghcr.io");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(imageref_parse(bad[i], &r) < 0, "`%s` refused", bad[i]);

	ok(imageref_host_is_loopback("127.0.0.1:5000") && imageref_host_is_loopback("localhost") &&
		   imageref_host_is_loopback("[::1]:5000") &&
		   imageref_host_is_loopback("127.9.9.9"),
	   "loopback hosts");
	ok(!imageref_host_is_loopback("127.0.0.1.example.com") &&
		   !imageref_host_is_loopback("10.0.0.1:5000") &&
		   !imageref_host_is_loopback("localhost.evil") &&
		   !imageref_host_is_loopback("[::2]"),
	   "non-loopback hosts");

	ok(imageref_parse_challenge("Bearer realm=\"https://auth.example/token\",service=\"reg\","
				    "scope=\"repository:a/b:pull\"",
				    scheme, sizeof(scheme), realm, sizeof(realm), service,
				    sizeof(service), scope, sizeof(scope)) == 0 &&
		   !strcmp(scheme, "Bearer") && !strcmp(realm, "https://auth.example/token") &&
		   !strcmp(service, "reg") && !strcmp(scope, "repository:a/b:pull"),
	   "bearer challenge");
	ok(imageref_parse_challenge("Basic realm=\"isola \\\"test\\\"\"", scheme, sizeof(scheme),
				    realm, sizeof(realm), service, sizeof(service), scope,
				    sizeof(scope)) == 0 &&
		   !strcmp(scheme, "Basic") && !strcmp(realm, "isola \"test\"") && !service[0],
	   "basic challenge with escaped quotes");
	ok(imageref_parse_challenge("", scheme, sizeof(scheme), realm, sizeof(realm), service,
				    sizeof(service), scope, sizeof(scope)) < 0,
	   "empty challenge refused");
	ok(imageref_parse_challenge("Bearer realm=\"unterminated", scheme, sizeof(scheme), realm,
				    sizeof(realm), service, sizeof(service), scope,
				    sizeof(scope)) == 0 &&
		   !strcmp(realm, "unterminated"),
	   "unterminated quote stops at the end");
	return tap_done();
}
