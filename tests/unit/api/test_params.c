/* SPDX-License-Identifier: Apache-2.0 */
/* test_params: query values, Range headers, signals and strict JSON body parsing. */
#include "isolad/api/api-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"

static json_t *j(const char *s)
{
	return json_loads(s, 0, NULL);
}

int main(void)
{
	struct isola_err *err = NULL;
	struct api_range rg;
	uint64_t u = 0, off, len;
	uint32_t mode = 0;
	bool b = false;
	json_t *body, *argv = NULL;
	const char *str = NULL;
	double d = 0;
	int sig;
	char deep[200];

	ok(api_parse_bool("true", &b) == 0 && b, "bool true");
	ok(api_parse_bool("0", &b) == 0 && !b, "bool 0");
	ok(api_parse_bool("maybe", &b) < 0, "bool garbage refused");
	ok(api_parse_u64("123", 1000, &u) == 0 && u == 123, "u64");
	ok(api_parse_u64("18446744073709551616", UINT64_MAX, &u) < 0, "u64 overflow refused");
	ok(api_parse_u64("5", 4, &u) == -ERANGE, "u64 over max");
	ok(api_parse_u64("+5", 10, &u) < 0 && api_parse_u64("", 10, &u) < 0, "u64 signs/empty");
	ok(api_parse_seconds_ms("1.5", 10000, &u) == 0 && u == 1500, "seconds to ms");
	ok(api_parse_seconds_ms("-1", 10000, &u) < 0, "negative seconds refused");
	ok(api_parse_seconds_ms("1e9", UINT64_MAX, &u) < 0, "exponent refused");
	ok(api_parse_mode("0644", &mode) == 0 && mode == 0644, "mode 0644");
	ok(api_parse_mode("755", &mode) == 0 && mode == 0755, "mode 755");
	ok(api_parse_mode("0999", &mode) < 0, "non-octal mode refused");
	ok(api_parse_mode("17777", &mode) < 0, "mode above 07777 refused");

	ok(api_signal_from_name("TERM") == SIGTERM, "TERM");
	ok(api_signal_from_name("sigkill") == SIGKILL, "sigkill");
	ok(api_signal_from_name("9") == 9, "9");
	ok(api_signal_from_name("0") < 0 && api_signal_from_name("65") < 0, "0 and 65 refused");
	ok(api_signal_from_name("BOGUS") < 0, "unknown name refused");

	ok(api_parse_range("bytes=0-99", &rg) == 0 && rg.start == 0 && rg.end == 99, "range a-b");
	ok(api_range_resolve(&rg, 50, &off, &len) == 0 && off == 0 && len == 50, "range clamped");
	ok(api_parse_range("bytes=10-", &rg) == 0 && rg.end == UINT64_MAX, "range a-");
	ok(api_range_resolve(&rg, 10, &off, &len) == -ERANGE, "range start at size: 416");
	ok(api_range_resolve(&rg, 11, &off, &len) == 0 && off == 10 && len == 1, "last byte");
	ok(api_parse_range("bytes=-5", &rg) == 0 && rg.suffix && rg.len == 5, "suffix range");
	ok(api_range_resolve(&rg, 3, &off, &len) == 0 && off == 0 && len == 3, "suffix > size");
	ok(api_range_resolve(&rg, 0, &off, &len) == -ERANGE, "suffix of empty file: 416");
	ok(api_parse_range("bytes=5-1", &rg) < 0, "reversed range refused");
	ok(api_parse_range("bytes=0-1,5-6", &rg) < 0, "multi-range ignored");
	ok(api_parse_range("items=0-1", &rg) < 0, "other unit ignored");
	ok(api_parse_range("bytes=-0", &rg) < 0, "empty suffix refused");

	ok(api_json_depth_ok("{\"a\":[[[]]]}", 11, 4), "depth 4 ok");
	ok(!api_json_depth_ok("{\"a\":[[[]]]}", 11, 3), "depth 4 over 3");
	ok(api_json_depth_ok("{\"a\":\"[[[[[[\"}", 14, 1), "brackets in strings ignored");
	ok(api_json_depth_ok("{\"a\":\"\\\"[[[\"}", 13, 1), "escaped quote handled");
	memset(deep, '[', 33);
	memset(deep + 33, ']', 33);
	ok(api_json_parse_body(deep, 66, &body, &err) < 0 && strstr(err->message, "deeper"),
	   "depth 33 refused");
	isola_err_free(err);
	err = NULL;
	ok(api_json_parse_body("{\"a\":", 5, &body, &err) < 0 && strstr(err->message, "line 1"),
	   "malformed JSON names position");
	isola_err_free(err);
	err = NULL;
	ok(api_json_parse_body("[1]", 3, &body, &err) < 0, "non-object refused");
	isola_err_free(err);
	err = NULL;
	ok(api_json_parse_body("{\"a\":1,\"a\":2}", 13, &body, &err) < 0, "duplicate keys refused");
	isola_err_free(err);
	err = NULL;

	body = j("{\"template\":\"x\",\"bogus\":1}");
	{
		static const char *const allowed[] = {"template", NULL};

		ok(api_json_only(body, allowed, &err) < 0 && strstr(err->message, "bogus"),
		   "unknown field named");
	}
	isola_err_free(err);
	err = NULL;
	json_decref(body);

	body = j("{\"s\":\"x\",\"n\":1,\"f\":1.5,\"neg\":-1,\"b\":true,\"sz\":\"512M\"}");
	ok(api_json_str(body, "s", 10, &str, &err) == 0 && !strcmp(str, "x"), "string field");
	ok(api_json_str(body, "n", 10, &str, &err) < 0 && strstr(err->message, "`n`"),
	   "wrong type names field");
	isola_err_free(err);
	err = NULL;
	ok(api_json_uint(body, "neg", 10, &u, &err) < 0, "negative uint refused");
	isola_err_free(err);
	err = NULL;
	ok(api_json_uint(body, "f", 10, &u, &err) < 0, "float for uint refused");
	isola_err_free(err);
	err = NULL;
	ok(api_json_num(body, "f", 0, 2, &d, &err) == 0 && d == 1.5, "number field");
	ok(api_json_bool(body, "b", &b, &err) == 0 && b, "bool field");
	ok(api_json_size(body, "sz", &u, &err) == 0 && u == 512ull << 20, "size string");
	ok(api_json_size(body, "n", &u, &err) == 0 && u == 1, "size integer");
	ok(api_json_size(body, "b", &u, &err) < 0, "size bool refused");
	isola_err_free(err);
	err = NULL;
	u = 77;
	ok(api_json_uint(body, "absent", 10, &u, &err) == 0 && u == 77, "absent leaves value");
	json_decref(body);

	body = j("{\"command\":\"echo hi\"}");
	ok(api_json_argv(body, &argv, &err) == 0 && json_array_size(argv) == 3 &&
		   !strcmp(json_string_value(json_array_get(argv, 1)), "-c"),
	   "command becomes sh -c");
	json_decref(argv);
	json_decref(body);
	body = j("{\"cmd\":[\"ls\",1]}");
	ok(api_json_argv(body, &argv, &err) < 0, "non-string argv refused");
	isola_err_free(err);
	err = NULL;
	json_decref(body);
	body = j("{\"cmd\":[\"ls\"],\"command\":\"ls\"}");
	ok(api_json_argv(body, &argv, &err) < 0, "cmd and command refused together");
	isola_err_free(err);
	err = NULL;
	json_decref(body);
	body = j("{\"cmd\":[]}");
	ok(api_json_argv(body, &argv, &err) < 0, "empty argv refused");
	isola_err_free(err);
	err = NULL;
	json_decref(body);

	body = j("{\"env\":{\"A\":\"1\"},\"bad\":{\"A=B\":\"1\"},\"num\":{\"A\":1}}");
	{
		const json_t *m = NULL;

		ok(api_json_str_map(body, "env", true, &m, &err) == 0 && m, "env map");
		ok(api_json_str_map(body, "bad", true, &m, &err) < 0, "env key with = refused");
		isola_err_free(err);
		err = NULL;
		ok(api_json_str_map(body, "num", true, &m, &err) < 0,
		   "non-string env value refused");
		isola_err_free(err);
		err = NULL;
	}
	json_decref(body);
	body = j("{\"a\":\"TERM\",\"b\":9,\"c\":\"NOPE\",\"d\":true}");
	ok(api_json_signal(body, "a", &sig, &err) == 0 && sig == SIGTERM, "signal by name");
	ok(api_json_signal(body, "b", &sig, &err) == 0 && sig == 9, "signal by number");
	ok(api_json_signal(body, "c", &sig, &err) < 0, "bad signal name refused");
	isola_err_free(err);
	err = NULL;
	ok(api_json_signal(body, "d", &sig, &err) < 0, "bool signal refused");
	isola_err_free(err);
	json_decref(body);
	return tap_done();
}
