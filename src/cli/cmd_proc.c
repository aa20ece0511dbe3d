/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_proc: `isola ps`, `logs`, `kill` — processes running in a sandbox. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

/* Parses a PID operand; 0 when it is not a positive integer. */
static long parse_pid(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v <= 0 ? 0 : v;
}

/* STATUS column: running, exited (N), killed (SIG). */
static void proc_status(const json_t *p, char *buf, size_t len)
{
	const json_t *sig = json_object_get(p, "signal");

	if (json_is_true(json_object_get(p, "running"))) {
		snprintf(buf, len, "running");
	} else if (json_is_true(json_object_get(p, "oom_killed"))) {
		snprintf(buf, len, "out of memory");
	} else if (json_is_true(json_object_get(p, "timed_out"))) {
		snprintf(buf, len, "timed out");
	} else if (json_is_integer(sig) && json_integer_value(sig) > 0) {
		const char *name = cli_signal_name((int)json_integer_value(sig));

		if (name)
			snprintf(buf, len, "killed (%s)", name);
		else
			snprintf(buf, len, "killed (%lld)", (long long)json_integer_value(sig));
	} else {
		snprintf(buf, len, "exited (%lld)",
			 (long long)json_integer_value(json_object_get(p, "exit_code")));
	}
}

static void print_procs(const json_t *list)
{
	static const char *const head[] = {"PID", "TAG", "TTY", "STATUS", "CMD"};
	struct table *t = table_new(head, ARRAY_SIZE(head));
	size_t i;
	json_t *p;

	if (!t)
		return;
	json_array_foreach(list, i, p)
	{
		cleanup_free char *cmd = out_fmt_value(json_object_get(p, "argv"));
		const char *tag = json_string_value(json_object_get(p, "tag"));
		char pid[24], status[48];
		const char *row[5];

		snprintf(pid, sizeof(pid), "%lld",
			 (long long)json_integer_value(json_object_get(p, "pid")));
		proc_status(p, status, sizeof(status));
		row[0] = pid;
		row[1] = tag ? tag : "";
		row[2] = json_is_true(json_object_get(p, "tty")) ? "yes" : "no";
		row[3] = status;
		row[4] = cmd;
		table_add(t, row);
	}
	table_print(t, stdout);
	table_free(t);
}

/* The process list does not say why a process got SIGKILL; its exit record does (oom_killed).
 * Copies it into each killed process of list so that ps can say "out of memory". */
static void add_oom(struct client *c, const char *id, json_t *list)
{
	size_t i;
	json_t *p;

	json_array_foreach(list, i, p)
	{
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = NULL;
		json_t *ex = NULL;

		if (json_is_true(json_object_get(p, "running")) ||
		    json_integer_value(json_object_get(p, "signal")) != SIGKILL)
			continue;
		path = cli_pathf("/v1/sandboxes/%s/processes/%ld/wait?timeout=0", id,
				 (long)json_integer_value(json_object_get(p, "pid")));
		if (path && client_json(c, "POST", path, NULL, &ex, &err) == 0 &&
		    json_is_true(json_object_get(ex, "oom_killed")))
			json_object_set_new(p, "oom_killed", json_true());
		json_decref(ex);
	}
}

int cmd_ps(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/sandboxes/%s/processes",
					     .id = true,
					     .list = "processes",
					     .json_list = true,
					     .print = print_procs,
					     .complete = add_oom};

	return cli_show(cli, argc, argv, &show);
}

int cmd_top(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *spath = NULL, *ppath = NULL;
	json_t *st = NULL, *procs = NULL, *list;
	char mem[16], lim[16], disk[16];
	struct client *c;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 1)
		return cli_usage_err(cli,
				     argc - optind ? "too many arguments" : "missing sandbox ID");
	c = cli_client(cli);
	spath = cli_pathf("/v1/sandboxes/%s/stats", argv[optind]);
	ppath = cli_pathf("/v1/sandboxes/%s/processes", argv[optind]);
	if (!c || !spath || !ppath)
		return CLI_EXIT_FAIL;
	if (client_json(c, "GET", spath, NULL, &st, &err) < 0 ||
	    client_json(c, "GET", ppath, NULL, &procs, &err) < 0) {
		json_decref(st);
		return cli_fail(err, CLI_EXIT_FAIL);
	}
	list = json_is_array(procs) ? procs : json_object_get(procs, "processes");
	add_oom(c, argv[optind], list);
	if (cli->json) {
		json_t *o = json_pack("{s:O,s:O}", "stats", st, "processes", list);

		out_json(stdout, o);
		json_decref(o);
	} else {
		double l = json_number_value(json_object_get(st, "memory_limit_bytes"));

		out_fmt_size((uint64_t)json_number_value(json_object_get(st, "memory_bytes")), mem,
			     sizeof(mem));
		if (l > 0)
			out_fmt_size((uint64_t)l, lim, sizeof(lim));
		else
			snprintf(lim, sizeof(lim), "-");
		out_fmt_size((uint64_t)json_number_value(json_object_get(st, "disk_bytes")), disk,
			     sizeof(disk));
		printf("cpu %.2fs   mem %s / %s   disk %s   pids %lld\n\n",
		       json_number_value(json_object_get(st, "cpu_seconds")), mem, lim, disk,
		       (long long)json_integer_value(json_object_get(st, "pids")));
		print_procs(list);
	}
	json_decref(st);
	json_decref(procs);
	return CLI_EXIT_OK;
}

const struct cli_opt cli_logs_opts[] = {
	{"follow", 'f', NULL, "keep printing until the process exits", 0},
	{NULL, 0, NULL, NULL, 0},
};

int cmd_logs(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct cli_stream s = {.json = cli->json};
	struct client_req r = {.method = "GET", .body_fd = -1, .accept = "application/x-ndjson"};
	bool follow = false;
	struct client *c;
	long pid;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt != 'f')
			return cli_bad_opt(cli, argc, argv, opt);
		follow = true;
	}
	if (argc - optind != 2)
		return cli_usage_err(cli, "expected ID and PID");
	pid = parse_pid(argv[optind + 1]);
	if (!pid)
		return cli_usage_err(cli, "PID `%s`: expected a process id", argv[optind + 1]);
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/processes/%ld/output?follow=%s", argv[optind], pid,
			 follow ? "true" : "false");
	if (!c || !path)
		return CLI_EXIT_FAIL;
	r.path = path;
	r.on_event = cli_stream_event;
	r.ud = &s;
	s.c = c;
	s.sandbox = argv[optind];
	if (client_do(c, &r, &err) < 0) {
		json_decref(s.exit);
		free(s.error);
		return cli_fail(err, CLI_EXIT_FAIL);
	}
	/* Without -f the stream ends at the retained tail; a missing exit event is normal. */
	json_decref(s.exit);
	if (s.error) {
		if (!cli->json)
			fprintf(stderr, "isola: %s\n", s.error);
		free(s.error);
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

int cmd_kill(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *body, *reply = NULL;
	struct client *c;
	int opt, sig = SIGTERM, r;
	long pid;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind < 2 || argc - optind > 3)
		return cli_usage_err(cli, "expected ID PID [SIGNAL]");
	pid = parse_pid(argv[optind + 1]);
	if (!pid)
		return cli_usage_err(cli, "PID `%s`: expected a process id", argv[optind + 1]);
	if (argc - optind == 3 && (sig = cli_parse_signal(argv[optind + 2])) < 0)
		return cli_usage_err(cli, "unknown signal `%s`", argv[optind + 2]);
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", argv[optind], pid);
	body = json_pack("{s:i}", "signal", sig);
	if (!c || !path || !body) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	r = client_json(c, "POST", path, body, &reply, &err);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json) {
		if (!reply)
			reply = json_object();
		out_json(stdout, reply);
	}
	json_decref(reply);
	return CLI_EXIT_OK;
}
