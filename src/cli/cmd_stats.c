/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_stats: `isola stats` — live CPU, memory, disk and network per sandbox, like docker stats. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

enum { OPT_NO_STREAM = 256, OPT_INTERVAL };

const struct cli_opt cli_stats_opts[] = {
	{"no-stream", OPT_NO_STREAM, NULL, "print one sample and exit", 0},
	{"interval", OPT_INTERVAL, "SECONDS", "seconds between samples (default 2)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static volatile sig_atomic_t stats_stop;

static void on_stop(int sig)
{
	(void)sig;
	stats_stop = 1;
}

/* The ids to sample: the operands, or every running sandbox (new ref array of strings). */
static json_t *stats_ids(struct client *c, int argc, char **argv, struct isola_err **err)
{
	json_t *ids = json_array(), *reply = NULL, *list, *sb;
	size_t i;

	if (argc > 0) {
		for (int k = 0; k < argc; k++)
			json_array_append_new(ids, json_string(argv[k]));
		return ids;
	}
	if (client_json(c, "GET", "/v1/sandboxes", NULL, &reply, err) < 0) {
		json_decref(ids);
		return NULL;
	}
	list = json_is_array(reply) ? reply : json_object_get(reply, "sandboxes");
	json_array_foreach(list, i, sb)
	{
		const char *state = json_string_value(json_object_get(sb, "state"));

		if (state && !strcmp(state, "running"))
			json_array_append(ids, json_object_get(sb, "id"));
	}
	json_decref(reply);
	return ids;
}

/* One sample of every id: an object id -> stats reply (failed ones are left out). */
static json_t *sample(struct client *c, const json_t *ids)
{
	json_t *out = json_object(), *id;
	size_t i;

	json_array_foreach(ids, i, id)
	{
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path =
			cli_pathf("/v1/sandboxes/%s/stats", json_string_value(id));
		json_t *s = NULL;

		if (path && client_json(c, "GET", path, NULL, &s, &err) == 0)
			json_object_set_new(out, json_string_value(id), s);
	}
	return out;
}

static double num(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* CPU use between two samples in percent of one CPU (docker's convention). */
static double cpu_pct(const json_t *a, const json_t *b)
{
	double dt = num(b, "time") - num(a, "time");

	if (!a || dt <= 0)
		return 0;
	return (num(b, "cpu_seconds") - num(a, "cpu_seconds")) / dt * 100.0;
}

static void print_table(const json_t *prev, const json_t *cur, const json_t *ids, bool clear)
{
	static const char *const head[] = {"ID",      "CPU %", "MEM USAGE / LIMIT", "MEM %", "DISK",
					   "NET I/O", "PIDS"};
	struct table *t = table_new(head, ARRAY_SIZE(head));
	json_t *id;
	size_t i;

	if (!t)
		return;
	json_array_foreach(ids, i, id)
	{
		const json_t *s = json_object_get(cur, json_string_value(id));
		const json_t *net;
		char cpu[32], mem[64], memp[32], disk[32], netio[64], pids[32], a[16], b[16];
		double lim;
		const char *row[7];

		if (!s)
			continue;
		snprintf(cpu, sizeof(cpu), "%.2f%%",
			 cpu_pct(json_object_get(prev, json_string_value(id)), s));
		out_fmt_size((uint64_t)num(s, "memory_bytes"), a, sizeof(a));
		lim = num(s, "memory_limit_bytes");
		if (lim > 0)
			out_fmt_size((uint64_t)lim, b, sizeof(b));
		else
			snprintf(b, sizeof(b), "-");
		snprintf(mem, sizeof(mem), "%s / %s", a, b);
		if (lim > 0)
			snprintf(memp, sizeof(memp), "%.2f%%", num(s, "memory_bytes") / lim * 100);
		else
			snprintf(memp, sizeof(memp), "-");
		out_fmt_size((uint64_t)num(s, "disk_bytes"), disk, sizeof(disk));
		net = json_object_get(s, "network");
		if (json_is_object(net)) {
			out_fmt_size((uint64_t)num(net, "rx_bytes"), a, sizeof(a));
			out_fmt_size((uint64_t)num(net, "tx_bytes"), b, sizeof(b));
			snprintf(netio, sizeof(netio), "%s / %s", a, b);
		} else {
			snprintf(netio, sizeof(netio), "-");
		}
		snprintf(pids, sizeof(pids), "%lld",
			 (long long)json_integer_value(json_object_get(s, "pids")));
		row[0] = json_string_value(id);
		row[1] = cpu;
		row[2] = mem;
		row[3] = memp;
		row[4] = disk;
		row[5] = netio;
		row[6] = pids;
		table_add(t, row);
	}
	if (clear)
		fputs("\033[H\033[2J", stdout);
	table_print(t, stdout);
	fflush(stdout);
	table_free(t);
}

/* Prints a --json sample: an array of the stats replies with cpu_percent added. */
static void print_json(const json_t *prev, json_t *cur)
{
	json_t *arr = json_array(), *s;
	const char *id;

	json_object_foreach(cur, id, s)
	{
		json_object_set_new(s, "cpu_percent",
				    json_real(cpu_pct(json_object_get(prev, id), s)));
		json_array_append(arr, s);
	}
	out_json_line(stdout, arr);
	fflush(stdout);
	json_decref(arr);
}

static void pause_s(long s)
{
	struct timespec ts = {.tv_sec = s};

	while (!stats_stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int cmd_stats(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	struct sigaction sa = {.sa_handler = on_stop};
	bool stream = true, tty = isatty(STDOUT_FILENO);
	json_t *ids, *prev, *cur;
	struct client *c;
	long interval = 2;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == OPT_NO_STREAM)
			stream = false;
		else if (opt == OPT_INTERVAL && cli_parse_seconds(optarg, &interval) == 0 &&
			 interval > 0)
			continue;
		else if (opt == OPT_INTERVAL)
			return cli_usage_err(cli, "--interval `%s`: expected seconds > 0", optarg);
		else
			return cli_bad_opt(cli, argc, argv, opt);
	}
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	ids = stats_ids(c, argc - optind, argv + optind, &err);
	if (!ids)
		return cli_fail(err, CLI_EXIT_FAIL);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* CPU % needs two samples: the first one only sets the baseline. */
	prev = sample(c, ids);
	pause_s(1);
	for (;;) {
		cur = sample(c, ids);
		if (argc > optind && json_object_size(cur) == 0) {
			json_decref(prev);
			json_decref(cur);
			json_decref(ids);
			cli_errorf("not_found", "no sandbox to sample");
			return CLI_EXIT_FAIL;
		}
		if (cli->json)
			print_json(prev, cur);
		else
			print_table(prev, cur, ids, stream && tty);
		json_decref(prev);
		prev = cur;
		if (!stream || stats_stop)
			break;
		pause_s(interval);
		if (stats_stop)
			break;
	}
	json_decref(prev);
	json_decref(ids);
	return CLI_EXIT_OK;
}
