/* SPDX-License-Identifier: Apache-2.0 */
/* test_route: route pattern matching and path-parameter / path validation. */
#include "isolad/api/api-internal.h"
#include "isolad/core/core.h"

#include <string.h>

#include "../tap.h"

int main(void)
{
	struct api_match m;
	struct isola_err *err = NULL;
	char longseg[300], longpath[5000];
	int pid = 0;

	ok(api_route_match("/v1/health", "/v1/health", &m) && m.n == 0, "static route matches");
	ok(!api_route_match("/v1/health", "/v1/health/", &m), "trailing slash does not match");
	ok(!api_route_match("/v1/health", "/v1/healthz", &m), "longer segment does not match");
	ok(!api_route_match("/v1/sandboxes/{id}", "/v1/sandboxes", &m), "missing param");
	ok(!api_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/", &m), "empty param");
	ok(api_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/abc-1", &m) && m.n == 1 &&
		   !strcmp(api_match_get(&m, "id"), "abc-1"),
	   "param captured");
	ok(api_route_match("/v1/sandboxes/{id}/processes/{pid}/ws",
			   "/v1/sandboxes/x/processes/42/ws", &m) &&
		   m.n == 2 && !strcmp(api_match_get(&m, "pid"), "42") &&
		   !strcmp(api_match_get(&m, "id"), "x"),
	   "two params captured");
	ok(api_match_get(&m, "name") == NULL, "absent param is NULL");
	ok(!api_route_match("/v1/sandboxes/{id}/exec", "/v1/sandboxes/x/exec/more", &m),
	   "extra segment does not match");
	ok(!api_route_match("/v1/sandboxes/{id}", "v1/sandboxes/x", &m), "relative url refused");
	ok(!api_route_match("/v1/sandboxes/{id}", "//v1/sandboxes/x", &m), "double slash refused");
	memset(longseg, 'a', sizeof(longseg) - 1);
	longseg[sizeof(longseg) - 1] = '\0';
	snprintf(longpath, sizeof(longpath), "/v1/sandboxes/%s", longseg);
	ok(!api_route_match("/v1/sandboxes/{id}", longpath, &m), "over-long segment refused");

	ok(api_valid_sandbox_id("abc-123"), "valid id");
	ok(!api_valid_sandbox_id(""), "empty id refused");
	ok(!api_valid_sandbox_id("ABC"), "uppercase id refused");
	ok(!api_valid_sandbox_id("a/b"), "slash in id refused");
	ok(!api_valid_sandbox_id("../x"), "dots in id refused");
	ok(!api_valid_sandbox_id("0123456789012345678901234567890123456789"), "40-byte id refused");
	ok(api_valid_template_name("debian-12.slim_x"), "valid template name");
	ok(!api_valid_template_name(".hidden"), "leading dot refused");
	ok(!api_valid_template_name(".."), "dotdot refused");
	ok(!api_valid_template_name("a/b"), "slash in template name refused");
	ok(api_parse_pid("42", &pid) == 0 && pid == 42, "pid parsed");
	ok(api_parse_pid("0", &pid) < 0, "pid 0 refused");
	ok(api_parse_pid("-1", &pid) < 0, "negative pid refused");
	ok(api_parse_pid("2147483648", &pid) < 0, "pid above INT_MAX refused");
	ok(api_parse_pid("12a", &pid) < 0, "non-numeric pid refused");
	ok(api_param_check("id", "Bad!", &err) < 0 && err && !strcmp(err->code, "invalid"),
	   "param check names invalid id");
	isola_err_free(err);
	err = NULL;
	ok(api_param_check("other", "anything", &err) == 0, "unknown param names pass");
	/* {id} takes a sandbox name too: [a-z0-9][a-z0-9_.-]{0,62} */
	ok(api_param_check("id", "web-1.a_b", &err) == 0, "a name is accepted as {id}");
	ok(core_sandbox_name_valid("a") && core_sandbox_name_valid("0x_y.z-w"), "valid names");
	ok(!core_sandbox_name_valid("") && !core_sandbox_name_valid("-a") &&
		   !core_sandbox_name_valid(".a") && !core_sandbox_name_valid("_a"),
	   "a name starts with a letter or digit");
	ok(!core_sandbox_name_valid("Web") && !core_sandbox_name_valid("a/b") &&
		   !core_sandbox_name_valid("a b"),
	   "uppercase, slash, space refused");
	{
		char n63[64], n64[65];

		memset(n63, 'a', 63);
		n63[63] = '\0';
		memset(n64, 'a', 64);
		n64[64] = '\0';
		ok(core_sandbox_name_valid(n63) && !core_sandbox_name_valid(n64),
		   "63 bytes at most");
		ok(api_param_check("id", n64, &err) < 0, "a 64-byte {id} refused");
		isola_err_free(err);
		err = NULL;
	}

	ok(api_check_path("path", "/etc/x", 6, &err) == 0, "ordinary path ok");
	ok(api_check_path("path", "", 0, &err) < 0, "empty path refused");
	isola_err_free(err);
	err = NULL;
	ok(api_check_path("path", "a\0b", 3, &err) < 0 && strstr(err->message, "NUL"),
	   "NUL in path refused");
	isola_err_free(err);
	err = NULL;
	memset(longpath, 'a', 4097);
	ok(api_check_path("path", longpath, 4097, &err) < 0, "path over 4096 refused");
	isola_err_free(err);
	err = NULL;
	ok(api_check_path("path", longpath, 4096, &err) == 0, "path of 4096 ok");

	ok(api_tar_name_ok("a/b/c.txt", 9), "tar name ok");
	ok(api_tar_name_ok("a/..b/c", 7), "dotdot prefix in a name is fine");
	ok(!api_tar_name_ok("/etc/passwd", 11), "absolute tar name refused");
	ok(!api_tar_name_ok("../x", 4), "leading .. refused");
	ok(!api_tar_name_ok("a/../../x", 9), "inner .. refused");
	ok(!api_tar_name_ok("a/..", 4), "trailing .. refused");
	ok(!api_tar_name_ok("", 0), "empty tar name refused");

	{
		size_t tl = 0;
		const char *t = api_ws_protocol_token("isola, isola.bearer.abc_D-9", &tl);

		ok(t && tl == 7 && !strncmp(t, "abc_D-9", 7) && t[tl] == '\0',
		   "token after the plain subprotocol");
		t = api_ws_protocol_token(" isola.bearer.xyz ,isola", &tl);
		ok(t && tl == 3 && !strncmp(t, "xyz", 3), "token first, spaces around it");
		ok(!api_ws_protocol_token("isola", &tl), "no token element");
		ok(!api_ws_protocol_token("isola.bearer.", &tl), "empty token refused");
		ok(!api_ws_protocol_token("xisola.bearer.abc", &tl),
		   "prefix must start the element");
		ok(!api_ws_protocol_token(NULL, &tl), "no header");
		ok(!api_ws_protocol_token(",,, ", &tl), "only separators");
	}
	return tap_done();
}
