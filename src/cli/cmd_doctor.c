/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_doctor: `isola doctor` — what this host supports and what isola does about each check. */
#include "cli.h"

#include <string.h>

#include "../common/util.h"
#include "output.h"

/* One check: {"ok", "detail", "isola", ...facts}. `status` ("ok"/"warn"/"fail") is accepted
 * too. Returns the mark to print: a check without a verdict is informational. */
static const char *check_mark(const json_t *c)
{
	const char *status = json_string_value(json_object_get(c, "status"));
	const json_t *ok = json_object_get(c, "ok");

	if (json_is_boolean(ok))
		return json_is_true(ok) ? "\u2713" : "\u2717";
	if (status)
		return !strcmp(status, "ok") || !strcmp(status, "pass") ? "\u2713" : "\u2717";
	return "\u2022";
}

/* Prints the check's facts: its `detail`, or its scalar fields as k=v. */
static void print_facts(const json_t *c)
{
	const char *detail = json_string_value(json_object_get(c, "detail"));
	const char *k;
	json_t *v;
	bool first = true;

	if (!detail)
		detail = json_string_value(json_object_get(c, "message"));
	if (detail) {
		fputs(detail, stdout);
		return;
	}
	json_object_foreach((json_t *)c, k, v)
	{
		cleanup_free char *text = NULL;

		if (!strcmp(k, "ok") || !strcmp(k, "isola") || !strcmp(k, "status"))
			continue;
		text = out_fmt_value(v);
		printf("%s%s=%s", first ? "" : ", ", k, text ? text : "?");
		first = false;
	}
}

static void print_check(const char *name, const json_t *c)
{
	const char *isola = json_string_value(json_object_get(c, "isola"));

	printf("%s %s: ", check_mark(c), name);
	print_facts(c);
	putchar('\n');
	if (isola)
		printf("    isola: %s\n", isola);
}

static void print_checks(const json_t *reply)
{
	json_t *checks = json_is_object(reply) && json_object_get(reply, "checks")
				 ? json_object_get(reply, "checks")
				 : (json_t *)reply;
	const char *name;
	json_t *c;
	size_t i;

	/* An array of checks, or an object of name -> check. */
	if (json_is_array(checks)) {
		json_array_foreach(checks, i, c)
		{
			name = json_string_value(json_object_get(c, "name"));
			print_check(name ? name : "?", c);
		}
	} else {
		json_object_foreach(checks, name, c) if (json_is_object(c)) print_check(name, c);
	}
}

int cmd_doctor(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/doctor", .print = print_checks};

	return cli_show(cli, argc, argv, &show);
}
