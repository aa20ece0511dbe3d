/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_pool: isola pool ls|set — warm pools of ready sandboxes (operator; docs/persistence.md). */
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

static int pool_set(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *body, *out = NULL;
	unsigned long size;
	struct client *c;
	char *end = NULL;
	int opt, r;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 3)
		return cli_usage_err(cli, "expected TEMPLATE TIER SIZE");
	size = strtoul(argv[optind + 2], &end, 10);
	if (!*argv[optind + 2] || *end || size > 1000000)
		return cli_usage_err(cli, "SIZE `%s` is not a number", argv[optind + 2]);
	c = cli_client(cli);
	path = cli_pathf("/v1/pools/%s/%s", argv[optind], argv[optind + 1]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	body = json_pack("{s:I}", "size", (json_int_t)size);
	r = client_json(c, "PUT", path, body, &out, &err);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json)
		out_json(stdout, out);
	else
		printf("pool %s/%s: size %lld\n", argv[optind], argv[optind + 1],
		       (long long)json_integer_value(json_object_get(out, "size")));
	json_decref(out);
	return CLI_EXIT_OK;
}

static const struct cli_cmd cli_pool_cmds[] = {
	{"ls", pool_ls, "",
	 "list warm pools: size, ready, claims, misses, the automatic pool's cap",
	 .example = "isola pool ls"},
	{"set", pool_set, "TEMPLATE TIER SIZE",
	 "keep SIZE ready sandboxes of TEMPLATE on TIER (0 removes the pool)",
	 .example = "isola pool set debian process 4"},
};
const struct cli_group cli_pool_group = {"pool", cli_pool_cmds, ARRAY_SIZE(cli_pool_cmds)};
