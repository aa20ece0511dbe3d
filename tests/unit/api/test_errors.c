/* SPDX-License-Identifier: Apache-2.0 */
/* test_errors: the isola_err code -> HTTP status table and error bodies. */
#include "isolad/api/api-internal.h"

#include <string.h>

#include "../tap.h"

int main(void)
{
	static const struct {
		const char *code;
		unsigned status;
	} want[] = {
		{"invalid", 400},     {"unauthorized", 401},
		{"forbidden", 403},   {"not_found", 404},
		{"conflict", 409},    {"too_large", 413},
		{"no_space", 507},    {"timeout", 504},
		{"unavailable", 503}, {"not_supported", 501},
		{"internal", 500},    {"exists", 409},
		{"busy", 409},	      {"not_dir", 400},
		{"is_dir", 400},      {"method_not_allowed", 405},
	};
	json_t *body;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ok(api_status_for_code(want[i].code) == want[i].status, "%s -> %u", want[i].code,
		   want[i].status);
	ok(api_status_for_code("something_new") == 500, "unknown code -> 500");
	ok(api_status_for_code(NULL) == 500, "NULL code -> 500");
	/* Every errno's default code maps to a real status (never an accidental 2xx). */
	for (int e = 1; e < 134; e++)
		if (api_status_for_code(isola_err_code_for_errno(e)) < 400)
			ok(0, "errno %d maps below 400", e);
	ok(1, "every errno maps to >= 400");
	body = api_error_json("not_found", "sandbox `x` not found");
	ok(body && !strcmp(json_string_value(json_object_get(body, "code")), "not_found") &&
		   !strcmp(json_string_value(json_object_get(body, "message")),
			   "sandbox `x` not found") &&
		   json_object_size(body) == 2,
	   "error body is {code, message}");
	json_decref(body);
	body = api_error_json(NULL, NULL);
	ok(body && !strcmp(json_string_value(json_object_get(body, "code")), "internal"),
	   "NULL code becomes internal");
	json_decref(body);
	return tap_done();
}
