/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_sandbox: `isola run`, `create`, `ls`, `inspect`, `rm` — sandbox lifecycle commands. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"
#include "progress.h"

/* Parses run/create options; returns -1 to go on, else the exit status. */
static int parse_sandbox(struct cli *cli, int argc, char **argv, enum cli_sandbox_mode mode,
			 struct cli_sandbox_args *a)
{
	cleanup_err struct isola_err *err = NULL;
	int r;

	r = cli_parse_sandbox_args(argc, argv, mode, &cli->g, a, &err);
	cli_apply_globals(cli);
	if (r < 0)
		return cli_usage_err(cli, "%s", err->message);
	if (a->help) {
		json_decref(a->req);
		return cli_help(cli);
	}
	return -1;
}

/*
 * A microvm create waits for its template's microvm image when isolad is building it (at
 * start, docs/microvm.md): says so, with the build's step and progress, as a progress line on
 * a terminal or NDJSON events on stderr with --json, until the build ends. The create then
 * finds the image (or reports the build's failure). Best effort: any error just goes on.
 */
static volatile sig_atomic_t run_signal; /* `run` was interrupted (on_run_signal) */

static void wait_image(struct client *c, const json_t *req, bool json)
{
	const char *tier = json_string_value(json_object_get(req, "tier"));
	const char *name = json_string_value(json_object_get(req, "template"));
	struct progress p = {.tty = !json && isatty(STDERR_FILENO)};
	cleanup_free char *path = NULL;
	char phase[96];
	bool said = false;

	if (!tier || strcmp(tier, "microvm"))
		return;
	path = cli_pathf("/v1/templates/%s", name && *name ? name : "host");
	snprintf(phase, sizeof(phase), "microvm image of %s", name && *name ? name : "host");
	while (!run_signal) {
		cleanup_err struct isola_err *e = NULL;
		json_t *t = NULL, *b;
		const char *state, *step;
		json_int_t done, total;

		if (!path || client_json(c, "GET", path, NULL, &t, &e) < 0)
			break;
		b = json_object_get(t, "image_build");
		state = json_string_value(json_object_get(b, "state"));
		if (!state || strcmp(state, "building")) {
			json_decref(t);
			break;
		}
		step = json_string_value(json_object_get(b, "step"));
		done = json_integer_value(json_object_get(b, "done"));
		total = json_integer_value(json_object_get(b, "total"));
		if (json) {
			json_t *ev = json_pack("{s:s,s:s,s:s,s:O}", "type", "progress", "phase",
					       "microvm image", "state", "building image",
					       "image_build", b);

			if (ev)
				out_json_line(stderr, ev);
			json_decref(ev);
		} else if (!p.tty && !said) {
			fprintf(stderr, "isola: waiting for isolad to build the %s\n", phase);
		}
		said = true;
		progress_update(&p, phase, step ? step : "", done > 0 ? (uint64_t)done : 0,
				total > 0 ? (uint64_t)total : 0, false);
		json_decref(t);
		usleep(300 * 1000);
	}
	progress_end(&p);
}

static int create_sandbox(struct client *c, json_t *req, bool json, json_t **sb,
			  struct isola_err **err)
{
	int r;

	wait_image(c, req, json);
	r = client_json(c, "POST", "/v1/sandboxes", req, sb, err);

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
	r = create_sandbox(c, a.req, cli->json, &sb, &err);
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
	s.timeout_s = a.timeout_s;
	if (a.interactive || a.tty) {
		/* The terminal carries Ctrl-C to the process; the session ends with it. */
		status = cli_exec_attached(cli, c, id, body, a.interactive, a.tty);
		goto destroy;
	}
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
destroy:
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
	r = c ? create_sandbox(c, a.req, cli->json, &sb, &err) : -EIO;
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

/* The STATE cell: "running", "ended (expired)", "exited (out of memory)". */
static void state_cell(const json_t *sb, char *buf, size_t len)
{
	const char *state = str_or(sb, "state", "");
	const char *why = str_or(sb, "end_reason", NULL);

	if (why && !strcmp(why, "oom"))
		why = "out of memory";
	if (why)
		snprintf(buf, len, "%s (%s)", state, why);
	else
		snprintf(buf, len, "%s", state);
}

static void print_sandboxes(const json_t *list)
{
	static const char *const head[] = {"ID",    "NAME",    "TEMPLATE", "TIER",
					   "STATE", "CREATED", "LABELS"};
	struct table *t = table_new(head, ARRAY_SIZE(head));
	double now = util_wall_time();
	size_t i;
	json_t *sb;

	if (!t)
		return;
	json_array_foreach(list, i, sb)
	{
		char age[64], state[96];
		cleanup_free char *labels = NULL;
		const char *row[7];

		out_fmt_age(json_object_get(sb, "created_at") ?: json_object_get(sb, "ended_at"),
			    now, age, sizeof(age));
		state_cell(sb, state, sizeof(state));
		labels = json_object_size(json_object_get(sb, "labels"))
				 ? out_fmt_value(json_object_get(sb, "labels"))
				 : NULL;
		row[0] = str_or(sb, "id", "");
		row[1] = str_or(sb, "name", "");
		row[2] = str_or(sb, "template", "");
		row[3] = str_or(sb, "tier", "");
		row[4] = state;
		row[5] = age;
		row[6] = labels ? labels : "";
		table_add(t, row);
	}
	table_print(t, stdout);
	table_free(t);
}

const struct cli_opt cli_ls_opts[] = {
	{"all", 'a', NULL, "also list ended sandboxes (their tombstones)", 0},
	{"filter", 'f', "KEY=VALUE",
	 "only matching: label=K=V, name=N, state=S, tier=T, template=T", 0},
	{"label", 'l', "KEY=VALUE", "only sandboxes with this label (repeatable)", 0},
	{"quiet", 'q', NULL, "print only ids", 0},
	{NULL, 0, NULL, NULL, 0},
};

/* Appends a query parameter (q, already escaped; consumed) to the list path. */
static int add_query(char **path, char *q)
{
	char *np = NULL;

	if (!*path || !q || asprintf(&np, "%s%c%s", *path, strchr(*path, '?') ? '&' : '?', q) < 0) {
		free(q);
		return -ENOMEM;
	}
	free(q);
	free(*path);
	*path = np;
	return 0;
}

/* The filter key before `eq` in arg, as a static string (one of the known keys). */
static const char *keyname(const char *arg, const char *eq)
{
	static char key[16];

	snprintf(key, sizeof(key), "%.*s", (int)(eq - arg), arg);
	return key;
}

/* Whether sb passes every name/state/tier/template filter in f (an object key -> value). */
static bool ls_match(const json_t *sb, const json_t *f)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)f, k,
			    v) if (strcmp(str_or(sb, k, ""), json_string_value(v))) return false;
	return true;
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = strdup("/v1/sandboxes");
	json_t *reply = NULL, *list, *filt = json_object(), *out, *sb;
	bool all = false, quiet = false;
	struct client *c;
	int opt, r;
	size_t i;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		const char *kv = optarg;

		if (opt == 'a' || opt == 'q') {
			*(opt == 'a' ? &all : &quiet) = true;
			continue;
		}
		if (opt == 'f') {
			const char *eq = strchr(optarg, '=');
			static const char *const keys[] = {"name", "state", "tier", "template",
							   "id"};
			bool known = false;

			if (eq && !strncmp(optarg, "label=", 6)) {
				kv = optarg + 6;
			} else {
				for (size_t k = 0; eq && k < ARRAY_SIZE(keys); k++)
					known |= strlen(keys[k]) == (size_t)(eq - optarg) &&
						 !strncmp(optarg, keys[k], (size_t)(eq - optarg));
				if (!known) {
					json_decref(filt);
					return cli_usage_err(cli,
							     "--filter `%s`: expected label=K=V, "
							     "name=N, state=S, "
							     "tier=T, template=T or id=ID",
							     optarg);
				}
				json_object_set_new(filt, keyname(optarg, eq), json_string(eq + 1));
				continue;
			}
		} else if (opt != 'l') {
			json_decref(filt);
			return cli_bad_opt(cli, argc, argv, opt);
		}
		if (!strchr(kv, '=') || kv[0] == '=') {
			json_decref(filt);
			return cli_usage_err(cli, "label `%s`: expected KEY=VALUE", kv);
		}
		if (add_query(&path, cli_pathf("label=%s", kv)) < 0) {
			json_decref(filt);
			return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc) {
		json_decref(filt);
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	}
	c = cli_client(cli);
	if (!c || (all && add_query(&path, strdup("all=true")) < 0)) {
		json_decref(filt);
		return CLI_EXIT_FAIL;
	}
	r = client_json(c, "GET", path, NULL, &reply, &err);
	if (r < 0) {
		json_decref(filt);
		return cli_fail(err, CLI_EXIT_FAIL);
	}
	list = list_of(reply, "sandboxes");
	out = json_array();
	json_array_foreach(list, i, sb) if (ls_match(sb, filt) &&
					    (all || strcmp(str_or(sb, "state", ""), "ended")))
		json_array_append(out, sb);
	if (cli->json)
		out_json(stdout, out);
	else if (quiet || cli->quiet)
		json_array_foreach(out, i, sb) printf("%s\n", str_or(sb, "id", ""));
	else
		print_sandboxes(out);
	json_decref(out);
	json_decref(filt);
	json_decref(reply);
	return CLI_EXIT_OK;
}

/* Prints `key: value` lines, the usual fields first in a fixed order, then the rest sorted. */
static void print_object(const json_t *o)
{
	static const char *const first[] = {"id",	  "name",	"state",       "end_reason",
					    "detail",	  "tier",	"template",    "cpu",
					    "memory",	  "disk",	"persistence", "labels",
					    "created_at", "expires_at", "ended_at",    "error"};
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
		if (json_is_number(v) &&
		    (!strcmp(key, "last_active") || !strcmp(key, "idle_since") ||
		     (strlen(key) > 3 && !strcmp(key + strlen(key) - 3, "_at")))) {
			char when[96];

			out_fmt_time(json_number_value(v), util_wall_time(), when, sizeof(when));
			printf("%s: %s\n", key, when);
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

const struct cli_opt cli_rm_opts[] = {
	{"force", 'f', NULL, "accepted for docker habits; rm always destroys running sandboxes", 0},
	{NULL, 0, NULL, NULL, 0},
};

int cmd_rm(struct cli *cli, int argc, char **argv)
{
	json_t *removed = json_array(), *failed = json_array(), *res;
	struct client *c;
	int opt, status = CLI_EXIT_OK;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 'f')
			continue; /* rm already destroys running sandboxes */
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
			cli_errorf(err->code, "rm %s: %s", argv[i], err->message);
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

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
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

const struct cli_opt cli_prune_opts[] = {
	{"older-than", 'o', "SECONDS", "only records that ended at least SECONDS ago", 0},
	{"state", 's', "STATE", "only this state: ended or error (repeatable; default both)", 0},
	{NULL, 0, NULL, NULL, 0},
};

int cmd_prune(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *body = json_object(), *states = json_array(), *reply = NULL, *id;
	struct client *c;
	long older = -1;
	size_t i;
	int opt;

	json_object_set_new(body, "states", states);
	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 'o' && cli_parse_seconds(optarg, &older) == 0)
			continue;
		if (opt == 's' && (!strcmp(optarg, "ended") || !strcmp(optarg, "error"))) {
			json_array_append_new(states, json_string(optarg));
			continue;
		}
		json_decref(body);
		if (opt == 'o')
			return cli_usage_err(cli, "--older-than `%s`: expected seconds", optarg);
		if (opt == 's')
			return cli_usage_err(cli, "--state `%s`: expected ended or error", optarg);
		return cli_bad_opt(cli, argc, argv, opt);
	}
	if (optind < argc) {
		json_decref(body);
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	}
	if (!json_array_size(states)) {
		json_array_append_new(states, json_string("ended"));
		json_array_append_new(states, json_string("error"));
	}
	if (older >= 0)
		json_object_set_new(body, "older_than", json_integer(older));
	c = cli_client(cli);
	if (!c || client_json(c, "POST", "/v1/sandboxes/prune", body, &reply, &err) < 0) {
		json_decref(body);
		return c ? cli_fail(err, CLI_EXIT_FAIL) : CLI_EXIT_FAIL;
	}
	json_decref(body);
	if (cli->json) {
		out_json(stdout, reply);
	} else {
		json_array_foreach(json_object_get(reply, "removed"), i, id)
			printf("%s\n", json_string_value(id));
		if (!cli->quiet)
			fprintf(stderr, "isola: pruned %zu\n",
				json_array_size(json_object_get(reply, "removed")));
	}
	json_decref(reply);
	return CLI_EXIT_OK;
}

int cmd_wait(struct cli *cli, int argc, char **argv)
{
	struct client *c;
	int opt, status = CLI_EXIT_OK;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind >= argc)
		return cli_usage_err(cli, "missing sandbox ID");
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	for (int i = optind; i < argc; i++) {
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/wait", argv[i]);
		json_t *t = NULL;
		char state[96];

		/* An ended sandbox answers 410 with its tombstone's words: that is a result. */
		if (client_json(c, "GET", path, NULL, &t, &err) < 0 &&
		    (!err || strcmp(err->code, "sandbox_ended"))) {
			status = cli_fail(err, CLI_EXIT_FAIL);
			continue;
		}
		if (cli->json && t) {
			out_json(stdout, t);
		} else if (t) {
			state_cell(t, state, sizeof(state));
			printf("%s %s\n", argv[i], state);
		} else {
			printf("%s %s\n", argv[i], err->message);
		}
		json_decref(t);
	}
	return status;
}
