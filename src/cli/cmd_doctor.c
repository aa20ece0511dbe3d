/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_doctor: `isola doctor` — what this host supports and what isola does about each check. */
#include "cli.h"

#include <string.h>

#include "../common/util.h"
#include "output.h"

/* One check: {"name","ok","value","detail"}; `status` ("ok"/"warn"/"fail") is accepted too. */
static bool check_ok(const json_t *c)
{
	const char *status = json_string_value(json_object_get(c, "status"));
	const json_t *ok = json_object_get(c, "ok");

	if (json_is_boolean(ok))
		return json_is_true(ok);
	return status && (!strcmp(status, "ok") || !strcmp(status, "pass"));
}

static void print_check(const char *name, const json_t *c)
{
	cleanup_free char *value = NULL;
	const char *detail = json_string_value(json_object_get(c, "detail"));

	if (!detail)
		detail = json_string_value(json_object_get(c, "message"));
	if (json_object_get(c, "value"))
		value = out_fmt_value(json_object_get(c, "value"));
	printf("%s %s: %s%s%s\n", check_ok(c) ? "\u2713" : "\u2717", name, value ? value : "-",
	       detail ? " \u2014 " : "", detail ? detail : "");
}

int cmd_doctor(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *reply = NULL, *checks, *c;
	struct client *cl;
	const char *name;
	size_t i;
	int opt;

	while ((opt = cli_getopt(argc, argv, "h", NULL)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	cl = cli_client(cli);
	if (!cl)
		return CLI_EXIT_FAIL;
	if (client_json(cl, "GET", "/v1/doctor", NULL, &reply, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json) {
		out_json(stdout, reply);
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	checks = json_is_object(reply) && json_object_get(reply, "checks")
			 ? json_object_get(reply, "checks")
			 : reply;
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
	json_decref(reply);
	return CLI_EXIT_OK;
}
