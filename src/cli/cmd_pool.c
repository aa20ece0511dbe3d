/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_pool: isola pool ls|set|auto — warm pools of ready sandboxes (operator; docs/persistence.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "cli.h"
#include "output.h"
#include "parse.h"

static void print_pools(const json_t *pools)
{
	static const char *const headers[] = {"TEMPLATE", "TIER",     "SIZE",
					      "READY",	  "CREATING", "CLAIMS",
					      "MISSES",	  "AUTO MAX", "LAST ERROR"};
	struct table *t = table_new(headers, ARRAY_SIZE(headers));
	const json_t *p;
	size_t i;

	if (!t)
		return;
	json_array_foreach(pools, i, p)
	{
		char n[6][24];
		const char *keys[] = {"size", "ready", "creating", "claims", "misses", "auto_max"};
		const char *err = json_string_value(json_object_get(p, "last_error"));
		const char *cells[9];

		for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
			snprintf(n[k], sizeof(n[k]), "%lld",
				 (long long)json_integer_value(json_object_get(p, keys[k])));
		cells[0] = json_string_value(json_object_get(p, "template"));
		cells[1] = json_string_value(json_object_get(p, "tier"));
		for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
			cells[2 + k] = n[k];
		if (!json_integer_value(json_object_get(p, "auto_max")))
			cells[7] = "-"; /* a fixed-size pool */
		cells[8] = err ? err : "-";
		table_add(t, cells);
	}
	table_print(t, stdout);
	table_free(t);
}

static int pool_ls(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {
		.path = "/v1/pools", .list = "pools", .print = print_pools};

	return cli_show(cli, argc, argv, &show);
}

/* PUT /v1/pools/{tmpl}/{tier} {key: N}; arg is N as typed (`what` names it in errors). */
static int pool_put(struct cli *cli, const char *tmpl, const char *tier, const char *key,
		    const char *arg, const char *what)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *body, *out = NULL;
	unsigned long n;
	struct client *c;
	char *end = NULL;
	int r;

	n = strtoul(arg, &end, 10);
	if (!*arg || *arg == '-' || *end || n > 1000000)
		return cli_usage_err(cli, "%s `%s` is not a number", what, arg);
	c = cli_client(cli);
	path = cli_pathf("/v1/pools/%s/%s", tmpl, tier);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	body = json_pack("{s:I}", key, (json_int_t)n);
	r = client_json(c, "PUT", path, body, &out, &err);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json)
		out_json(stdout, out);
	else if (!strcmp(key, "auto_max"))
		printf("pool %s/%s: automatic, at most %lld\n", tmpl, tier,
		       (long long)json_integer_value(json_object_get(out, "auto_max")));
	else
		printf("pool %s/%s: size %lld\n", tmpl, tier,
		       (long long)json_integer_value(json_object_get(out, "size")));
	json_decref(out);
	return CLI_EXIT_OK;
}

static int pool_set(struct cli *cli, int argc, char **argv)
{
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 3)
		return cli_usage_err(cli, "expected TEMPLATE TIER SIZE");
	return pool_put(cli, argv[optind], argv[optind + 1], "size", argv[optind + 2], "SIZE");
}

/* The automatic pool (host/process): isolad --pool-auto MAX, from the CLI. */
static int pool_auto(struct cli *cli, int argc, char **argv)
{
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 1)
		return cli_usage_err(cli, "expected MAX");
	return pool_put(cli, "host", "process", "auto_max", argv[optind], "MAX");
}

static const struct cli_cmd cli_pool_cmds[] = {
	{"ls", pool_ls, "",
	 "list warm pools: size, ready, claims, misses, the automatic pool's cap",
	 .example = "isola pool ls"},
	{"set", pool_set, "TEMPLATE TIER SIZE",
	 "keep SIZE ready sandboxes of TEMPLATE on TIER (0 removes the pool)",
	 .example = "isola pool set debian process 4"},
	{"auto", pool_auto, "MAX",
	 "keep host/process sandboxes ready as demand asks, at most MAX (0: off; isolad's "
	 "default: 32, --pool-auto)",
	 .example = "isola pool auto 16"},
};
const struct cli_group cli_pool_group = {"pool", cli_pool_cmds, ARRAY_SIZE(cli_pool_cmds)};
