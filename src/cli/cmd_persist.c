/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_persist: isola pause|resume|hibernate|fork and isola snapshot create|ls|rm (docs/persistence.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "cli.h"
#include "output.h"
#include "parse.h"

/* POSTs to /v1/sandboxes/ID/<op> for each ID and prints the new state (or the objects). */
static int state_change(struct cli *cli, int argc, char **argv, const char *op)
{
	struct client *c;
	int opt, status = CLI_EXIT_OK;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind >= argc)
		return cli_usage_err(cli, "expected at least one sandbox ID");
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	for (int i = optind; i < argc; i++) {
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/%s", argv[i], op);
		json_t *sb = NULL;

		if (!path)
			return CLI_EXIT_FAIL;
		if (client_json(c, "POST", path, NULL, &sb, &err) < 0) {
			status = cli_fail(err, CLI_EXIT_FAIL);
			continue;
		}
		if (cli->json)
			out_json(stdout, sb);
		else
			printf("%s %s\n", argv[i],
			       json_string_value(json_object_get(sb, "state")) ?: "?");
		json_decref(sb);
	}
	return status;
}

int cmd_pause(struct cli *cli, int argc, char **argv)
{
	return state_change(cli, argc, argv, "pause");
}

int cmd_resume(struct cli *cli, int argc, char **argv)
{
	return state_change(cli, argc, argv, "resume");
}

int cmd_hibernate(struct cli *cli, int argc, char **argv)
{
	return state_change(cli, argc, argv, "hibernate");
}

/* Parses --count N / -n N / --count=N anywhere on the line ("fork ID --count 3"). */
static int fork_count(struct cli *cli, const char *v, unsigned long *count)
{
	char *end;

	*count = strtoul(v, &end, 10);
	if (!*v || *end || *count < 1 || *count > 64)
		return cli_usage_err(cli, "--count `%s` is not 1-64", v);
	return -1;
}

int cmd_fork(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	unsigned long count = 1;
	json_t *body, *out = NULL, *kids, *k;
	const char *id = NULL;
	struct client *c;
	size_t i;
	int r;

	while ((r = cli_nextopt(cli, argc, argv)) != -1) {
		if (r != 'n')
			return cli_bad_opt(cli, argc, argv, r);
		r = fork_count(cli, optarg, &count);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_err(cli, "expected one sandbox ID");
	id = argv[optind];
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/fork", id);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	body = json_pack("{s:I}", "count", (json_int_t)count);
	r = client_json(c, "POST", path, body, &out, &err);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json) {
		out_json(stdout, out);
	} else {
		/* One child id per line on stdout (scripts); the pause time on stderr. */
		kids = json_object_get(out, "children");
		json_array_foreach(kids, i, k)
			printf("%s\n", json_string_value(json_object_get(k, "id")));
		fprintf(stderr, "isola: forked %s into %zu (source paused %lld us)\n", id,
			json_array_size(kids),
			(long long)json_integer_value(json_object_get(out, "paused_us")));
	}
	json_decref(out);
	return CLI_EXIT_OK;
}

const struct cli_opt cli_fork_opts[] = {
	{"count", 'n', "N", "how many sandboxes to make (default 1)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static int snapshot_create(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *body, *out = NULL;
	struct client *c;
	int opt, r;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 2)
		return cli_usage_err(cli, "expected ID NAME");
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	body = json_pack("{s:s, s:s}", "sandbox", argv[optind], "name", argv[optind + 1]);
	r = client_json(c, "POST", "/v1/snapshots", body, &out, &err);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json)
		out_json(stdout, out);
	else
		printf("%s\n", json_string_value(json_object_get(out, "name")) ?: "");
	json_decref(out);
	return CLI_EXIT_OK;
}

static void print_snapshots(const json_t *list)
{
	static const char *const head[] = {"NAME", "TIER",    "TEMPLATE", "LEVEL",
					   "SIZE", "CREATED", "SOURCE",	  "PARENT"};
	struct table *t = table_new(head, ARRAY_SIZE(head));
	double now = util_wall_time();
	const json_t *s;
	size_t i;

	if (!t)
		return;
	json_array_foreach(list, i, s)
	{
		char size[32], age[64];
		const char *row[8];
		const char *parent = json_string_value(json_object_get(s, "parent"));

		out_fmt_size((uint64_t)json_integer_value(json_object_get(s, "size")), size,
			     sizeof(size));
		out_fmt_age(json_object_get(s, "created_at"), now, age, sizeof(age));
		row[0] = json_string_value(json_object_get(s, "name")) ?: "";
		row[1] = json_string_value(json_object_get(s, "tier")) ?: "";
		row[2] = json_string_value(json_object_get(s, "template")) ?: "";
		row[3] = json_string_value(json_object_get(s, "level")) ?: "";
		row[4] = size;
		row[5] = age;
		row[6] = json_string_value(json_object_get(s, "source")) ?: "";
		row[7] = parent ? parent : "-";
		table_add(t, row);
	}
	table_print(t, stdout);
	table_free(t);
}

static int snapshot_ls(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/snapshots",
					     .list = "snapshots",
					     .json_list = true,
					     .print = print_snapshots};

	return cli_show(cli, argc, argv, &show);
}

static int snapshot_rm(struct cli *cli, int argc, char **argv)
{
	struct client *c;
	int opt, status = CLI_EXIT_OK;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind >= argc)
		return cli_usage_err(cli, "expected at least one snapshot NAME");
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	for (int i = optind; i < argc; i++) {
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = cli_pathf("/v1/snapshots/%s", argv[i]);

		if (!path)
			return CLI_EXIT_FAIL;
		if (client_json(c, "DELETE", path, NULL, NULL, &err) < 0)
			status = cli_fail(err, CLI_EXIT_FAIL);
	}
	return status;
}

static const struct cli_cmd cli_snapshot_cmds[] = {
	{"create", snapshot_create, "ID NAME", "snapshot a sandbox as NAME (immutable)",
	 .example = "isola snapshot create web base"},
	{"ls", snapshot_ls, "", "list snapshots: size, level, source, parent",
	 .example = "isola snapshot ls"},
	{"delete", snapshot_rm, "NAME...", "delete snapshots",
	 .example = "isola snapshot delete base"},
	{"rm", snapshot_rm, "NAME...", "same as delete", .example = "isola snapshot rm base"},
};
const struct cli_group cli_snapshot_group = {"snapshot", cli_snapshot_cmds,
					     ARRAY_SIZE(cli_snapshot_cmds)};
