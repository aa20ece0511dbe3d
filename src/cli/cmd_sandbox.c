/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_sandbox: `isola run`, `create`, `ls`, `inspect`, `rm` — sandbox lifecycle commands. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

/* Parses run/create options; returns -1 to go on, else the exit status. */
static int parse_sandbox(struct cli *cli, int argc, char **argv, enum cli_sandbox_mode mode,
			 struct cli_sandbox_args *a)
{
	cleanup_err struct isola_err *err = NULL;

	if (cli_parse_sandbox_args(argc, argv, mode, a, &err) < 0)
		return cli_usage_err(cli, "%s", err->message);
	if (a->help) {
		json_decref(a->req);
		return cli_help(cli);
	}
	return -1;
}

static int create_sandbox(struct client *c, json_t *req, json_t **sb, struct isola_err **err)
{
	int r = client_json(c, "POST", "/v1/sandboxes", req, sb, err);

	if (r == 0 && !json_is_string(json_object_get(*sb, "id"))) {
		json_decref(*sb);
		*sb = NULL;
		return isola_err_set(err, EPROTO, "internal", "isolad did not return a sandbox id");
	}
	return r;
}

static int destroy_sandbox(struct client *c, const char *id, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s", id);

	if (!path)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	return client_json(c, "DELETE", path, NULL, NULL, err);
}

static volatile sig_atomic_t run_signal;

static void on_run_signal(int sig)
{
	run_signal = sig;
}

int cmd_run(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	struct cli_stream s = {.json = cli->json};
	struct sigaction sa = {.sa_handler = on_run_signal};
	struct cli_sandbox_args a;
	json_t *sb = NULL, *body = NULL;
	cleanup_free char *path = NULL;
	struct client_req req = {.method = "POST", .body_fd = -1};
	struct client *c;
	const char *id;
	int r, status;

	r = parse_sandbox(cli, argc, argv, CLI_SB_RUN, &a);
	if (r >= 0)
		return r;
	c = cli_client(cli);
	body = cli_exec_body(argv + a.cmd_index, argc - a.cmd_index, NULL, NULL, NULL, a.timeout_s);
	if (!c || !body) {
		json_decref(a.req);
		json_decref(body);
		return CLI_EXIT_ISOLA;
	}
	/* From here on an interrupt must still destroy the sandbox: no SA_RESTART, and the
	 * create request itself is never cancelled so its id cannot be lost. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	r = create_sandbox(c, a.req, &sb, &err);
	json_decref(a.req);
	if (r < 0) {
		json_decref(body);
		return cli_fail(err, CLI_EXIT_ISOLA);
	}
	id = json_string_value(json_object_get(sb, "id"));
	path = cli_pathf("/v1/sandboxes/%s/exec", id);
	req.path = path;
	req.body = body;
	req.accept = "application/x-ndjson";
	req.on_event = cli_stream_event;
	req.ud = &s;
	s.c = c;
	s.sandbox = id;
	if (!run_signal) {
		client_set_cancel_flag(&run_signal);
		r = client_do(c, &req, &err);
		client_set_cancel_flag(NULL);
	}
	if (run_signal)
		status = 128 + run_signal;
	else if (r < 0)
		status = cli_fail(err, CLI_EXIT_ISOLA);
	else
		status = cli_stream_finish(&s);
	json_decref(s.exit);
	free(s.error);
	isola_err_free(steal_ptr(&err));
	if (destroy_sandbox(c, id, &err) < 0) {
		fprintf(stderr, "isola: destroy sandbox %s: %s\n", id, err->message);
		if (status == 0)
			status = CLI_EXIT_ISOLA;
	}
	json_decref(body);
	json_decref(sb);
	return status;
}

int cmd_create(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	struct cli_sandbox_args a;
	struct client *c;
	json_t *sb = NULL;
	int r;

	r = parse_sandbox(cli, argc, argv, CLI_SB_CREATE, &a);
	if (r >= 0)
		return r;
	c = cli_client(cli);
	r = c ? create_sandbox(c, a.req, &sb, &err) : -EIO;
	json_decref(a.req);
	if (!c)
		return CLI_EXIT_FAIL;
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json)
		out_json(stdout, sb);
	else
		printf("%s\n", json_string_value(json_object_get(sb, "id")));
	json_decref(sb);
	return CLI_EXIT_OK;
}

/* The array of a list reply: either the array itself or {key: [...]}. */
static json_t *list_of(json_t *reply, const char *key)
{
	return json_is_array(reply) ? reply : json_object_get(reply, key);
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : dflt;
}

static void print_sandboxes(const json_t *list)
{
	static const char *const head[] = {"ID", "TEMPLATE", "TIER", "STATE", "CREATED", "LABELS"};
	struct table *t = table_new(head, ARRAY_SIZE(head));
	double now = util_wall_time();
	size_t i;
	json_t *sb;

	if (!t)
		return;
	json_array_foreach(list, i, sb)
	{
		char age[64];
		cleanup_free char *labels = NULL;
		const char *row[6];

		out_fmt_age(json_object_get(sb, "created_at"), now, age, sizeof(age));
		labels = json_object_size(json_object_get(sb, "labels"))
				 ? out_fmt_value(json_object_get(sb, "labels"))
				 : NULL;
		row[0] = str_or(sb, "id", "");
		row[1] = str_or(sb, "template", "");
		row[2] = str_or(sb, "tier", "");
		row[3] = str_or(sb, "state", "");
		row[4] = age;
		row[5] = labels ? labels : "";
		table_add(t, row);
	}
	table_print(t, stdout);
	table_free(t);
}

static const struct option ls_longopts[] = {
	{"label", required_argument, NULL, 'l'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = strdup("/v1/sandboxes");
	json_t *reply = NULL, *list;
	struct client *c;
	int opt, r;

	while ((opt = cli_getopt(argc, argv, "l:h", ls_longopts)) != -1) {
		cleanup_free char *q = NULL;
		char *np = NULL;

		if (opt != 'l')
			return cli_bad_opt(cli, argc, argv, opt);
		if (!strchr(optarg, '=') || optarg[0] == '=')
			return cli_usage_err(cli, "--label `%s`: expected KEY=VALUE", optarg);
		q = cli_pathf("label=%s", optarg);
		if (!path || !q ||
		    asprintf(&np, "%s%c%s", path, strchr(path, '?') ? '&' : '?', q) < 0)
			return CLI_EXIT_FAIL;
		free(path);
		path = np;
	}
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	r = client_json(c, "GET", path, NULL, &reply, &err);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	list = list_of(reply, "sandboxes");
	if (!json_is_array(list)) {
		json_decref(reply);
		reply = list = json_array();
	}
	if (cli->json)
		out_json(stdout, list);
	else
		print_sandboxes(list);
	json_decref(reply);
	return CLI_EXIT_OK;
}

/* Prints `key: value` lines, the usual fields first in a fixed order, then the rest sorted. */
static void print_object(const json_t *o)
{
	static const char *const first[] = {"id",     "state",	    "tier",	  "template",
					    "cpu",    "memory",	    "disk",	  "persistence",
					    "labels", "created_at", "expires_at", "error"};
	cleanup_free const char **keys = calloc(json_object_size(o) + 1, sizeof(*keys));
	size_t n = 0;
	const char *k;
	json_t *v;

	if (!keys)
		return;
	json_object_foreach((json_t *)o, k, v)
	{
		bool known = false;

		for (size_t i = 0; i < ARRAY_SIZE(first); i++)
			known |= !strcmp(k, first[i]);
		if (!known)
			keys[n++] = k;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(keys[j], keys[i]) < 0) {
				const char *t = keys[i];

				keys[i] = keys[j];
				keys[j] = t;
			}
	for (size_t i = 0; i < ARRAY_SIZE(first) + n; i++) {
		const char *key = i < ARRAY_SIZE(first) ? first[i] : keys[i - ARRAY_SIZE(first)];
		cleanup_free char *s = NULL;
		char size[32];

		v = json_object_get(o, key);
		if (!v)
			continue;
		if ((!strcmp(key, "memory") || !strcmp(key, "disk")) && json_is_integer(v)) {
			out_fmt_size((uint64_t)json_integer_value(v), size, sizeof(size));
			printf("%s: %s\n", key, size);
			continue;
		}
		s = out_fmt_value(v);
		printf("%s: %s\n", key, s ? s : "");
	}
}

int cmd_inspect(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {
		.path = "/v1/sandboxes/%s", .id = true, .print = print_object};

	return cli_show(cli, argc, argv, &show);
}

int cmd_rm(struct cli *cli, int argc, char **argv)
{
	json_t *removed = json_array(), *failed = json_array(), *res;
	struct client *c;
	int opt, status = CLI_EXIT_OK;

	while ((opt = cli_getopt(argc, argv, "h", NULL)) != -1) {
		json_decref(removed);
		json_decref(failed);
		return cli_bad_opt(cli, argc, argv, opt);
	}
	c = optind < argc ? cli_client(cli) : NULL;
	if (optind >= argc || !c) {
		json_decref(removed);
		json_decref(failed);
		return c || optind < argc ? CLI_EXIT_FAIL
					  : cli_usage_err(cli, "missing sandbox ID");
	}
	for (int i = optind; i < argc; i++) {
		cleanup_err struct isola_err *err = NULL;

		if (destroy_sandbox(c, argv[i], &err) == 0) {
			json_array_append_new(removed, json_string(argv[i]));
			if (!cli->json)
				printf("%s\n", argv[i]);
			continue;
		}
		status = CLI_EXIT_FAIL;
		json_array_append_new(failed, json_pack("{s:s,s:s,s:s}", "id", argv[i], "code",
							err->code, "message", err->message));
		if (!cli->json)
			fprintf(stderr, "isola: rm %s: %s\n", argv[i], err->message);
	}
	if (cli->json) {
		res = json_pack("{s:o,s:o}", "removed", removed, "failed", failed);
		out_json(stdout, res);
		json_decref(res);
	} else {
		json_decref(removed);
		json_decref(failed);
	}
	return status;
}

int cmd_console(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct client_req req = {.method = "GET", .body_fd = -1, .on_data = cli_stdout_write};
	struct client *c;
	int opt;

	while ((opt = cli_getopt(argc, argv, "h", NULL)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 1)
		return cli_usage_err(cli, "expected one sandbox id");
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/console", argv[optind]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	req.path = path;
	if (client_do(c, &req, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	return CLI_EXIT_OK;
}
