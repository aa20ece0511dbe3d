/* SPDX-License-Identifier: Apache-2.0 */
/* tools_exec: MCP tools on processes — run (streamed, cancellable, bounded), ps, logs, kill, search. */
#include "mcp.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/util.h"
#include "../output.h"
#include "../parse.h"

#define SID_LEN		    96			  /* room for a sandbox id */
#define RUN_KEEP	    (64u * 1024u * 1024u) /* output kept per stream (saved whole up to it) */
#define RUN_DEFAULT_TIMEOUT 60			  /* seconds */
#define RUN_MAX_TIMEOUT	    3600		  /* seconds */
#define SEARCH_OUTPUT	    (4u * 1024u * 1024u)  /* bytes of grep output read */
#define OUT_DIR		    "/tmp/isola-mcp"	  /* where whole outputs are saved in the sandbox */

static const char *const stream_names[2] = {"stdout", "stderr"};

/* Builds the common part of an exec / process-start body from the tool's arguments. */
static int command_body(json_t *args, json_t **out, struct isola_err **err)
{
	const char *command, *cwd, *user;
	json_t *body, *env, *argv = json_object_get(args, "argv");
	int r;

	if ((r = mcp_arg_str(args, "command", false, &command, err)) < 0 ||
	    (r = mcp_arg_str(args, "cwd", false, &cwd, err)) < 0 ||
	    (r = mcp_arg_str(args, "user", false, &user, err)) < 0 ||
	    (r = mcp_arg_map(args, "env", &env, err)) < 0)
		return r;
	if (json_is_null(argv))
		argv = NULL;
	if (!!command == !!argv)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "give exactly one of `command` (a shell command line) and "
				     "`argv` (an array of strings)");
	if (argv && (!json_is_array(argv) || !json_array_size(argv)))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `argv` must be a non-empty array of strings");
	if (!(body = json_object()))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (command)
		json_object_set_new(body, "command", json_string(command));
	else
		json_object_set(body, "cmd", argv); /* the API checks the element types */
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	if (user)
		json_object_set_new(body, "user", json_string(user));
	if (env)
		json_object_set(body, "env", env);
	*out = body;
	return 0;
}

static long long now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

void mcp_call_kill(struct mcp_call *c, struct client *cl)
{
	cleanup_free char *url = NULL;
	char id[SID_LEN];
	json_t *body;
	long pid;

	pthread_mutex_lock(&c->s->lock);
	pid = c->killed ? 0 : c->pid;
	if (pid)
		c->killed = true;
	snprintf(id, sizeof(id), "%s", c->sandbox_id);
	pthread_mutex_unlock(&c->s->lock);
	if (!pid || !cl)
		return;
	url = cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", id, pid);
	body = json_pack("{s:i}", "signal", SIGKILL);
	if (url && body)
		(void)client_json(cl, "POST", url, body, NULL, NULL); /* gone already: fine */
	json_decref(body);
}

/* A foreground command's state while its events stream in. */
struct run_state {
	struct mcp_call *c;
	struct sbuf out[2];	     /* stdout, stderr: the first RUN_KEEP bytes */
	unsigned long long total[2]; /* bytes seen per stream */
	json_t *exit;		     /* the exit event (own), or NULL */
};

static int run_event(void *ud, json_t *ev, struct isola_err **err)
{
	struct run_state *st = ud;
	struct mcp_call *c = st->c;
	const char *type = json_string_value(json_object_get(ev, "type")) ?: "";
	const char *data;
	unsigned char *raw;
	long n;
	int k;

	/* UNTRUSTED: events relayed from the sandbox's agent; lengths come from the decoder. */
	if (!strcmp(type, "start")) {
		pthread_mutex_lock(&c->s->lock);
		c->pid = (long)json_integer_value(json_object_get(ev, "pid"));
		c->started = now_s();
		c->last_progress = 0;
		pthread_mutex_unlock(&c->s->lock);
	} else if ((k = !strcmp(type, "stdout") ? 0 : !strcmp(type, "stderr") ? 1 : -1) >= 0) {
		data = json_string_value(json_object_get(ev, "data")) ?: "";
		raw = malloc(strlen(data) / 4 * 3 + 3);
		if (!raw)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
		n = cli_b64_decode(data, strlen(data), raw);
		if (n > 0) {
			size_t room = RUN_KEEP - st->out[k].len;

			sb_add(&st->out[k], (const char *)raw, (size_t)n < room ? (size_t)n : room);
			st->total[k] += (unsigned long long)n;
			pthread_mutex_lock(&c->s->lock);
			c->out_bytes += (unsigned long long)n;
			pthread_mutex_unlock(&c->s->lock);
		}
		free(raw);
		if (st->out[k].oom)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
	} else if (!strcmp(type, "exit")) {
		json_decref(st->exit);
		st->exit = json_incref(ev);
	} else if (!strcmp(type, "error")) {
		return isola_err_set(err, EIO, json_string_value(json_object_get(ev, "code")), "%s",
				     json_string_value(json_object_get(ev, "message")) ?: "error");
	}
	if (atomic_load(&c->cancelled))
		return isola_err_set(err, ECANCELED, "cancelled", "cancelled by the client");
	return 0;
}

/* Appends one stream, bounded; saves it whole in the sandbox first when it is long. */
static void add_stream(struct run_state *st, struct sbuf *b, const char *id, int k,
		       unsigned long seq, json_t *data)
{
	const char *p = st->out[k].s ?: "";
	size_t len = st->out[k].len;
	char path[128];
	bool saved = false;

	sb_printf(b, "--- %s (%llu bytes) ---\n", stream_names[k], st->total[k]);
	if (mcp_out_is_long(len)) {
		snprintf(path, sizeof(path), OUT_DIR "/run-%lu.%s", seq, stream_names[k]);
		saved = mcp_put_file(st->c, id, path, p, len, NULL) == 0;
		if (saved) {
			char key[32];

			snprintf(key, sizeof(key), "%s_file", stream_names[k]);
			json_object_set_new(data, key, json_string(path));
		}
	}
	mcp_out_bound(b, p, len, saved ? path : NULL);
	if (len && p[len - 1] != '\n')
		sb_add(b, "\n", 1);
	if (st->total[k] > len)
		sb_printf(b, "[only the first %zu of %llu bytes were kept]\n", len, st->total[k]);
}

static int run_background(struct mcp_call *c, const char *id, json_t *body, struct mcp_result *res,
			  struct isola_err **err)
{
	cleanup_free char *url = cli_pathf("/v1/sandboxes/%s/processes", id);
	struct sbuf b = {0};
	json_t *out = NULL;
	long long pid;
	int r;

	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if ((r = mcp_api(c, "POST", url, body, &out, err)) < 0)
		return r;
	pid = json_integer_value(json_object_get(out, "pid"));
	json_decref(out);
	sb_printf(&b,
		  "Started pid %lld in sandbox %s in the background. See its output with "
		  "sandbox_process_logs, stop it with sandbox_process_kill.\n",
		  pid, id);
	res->data = json_pack("{s:s, s:I, s:b}", "sandbox_id", id, "pid", (json_int_t)pid,
			      "background", 1);
	return sb_finish(&b, res, err);
}

int mcp_tool_run(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	struct client_req req = {.method = "POST",
				 .body_fd = -1,
				 .accept = "application/x-ndjson",
				 .on_event = run_event};
	struct run_state st = {.c = c};
	cleanup_free char *url = NULL;
	long long timeout = RUN_DEFAULT_TIMEOUT, code, sig;
	json_t *body = NULL, *data;
	char sid[SID_LEN];
	bool bg = false;
	const char *id, *in;
	struct sbuf b = {0};
	struct client *cl;
	unsigned long seq;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "stdin", false, &in, err)) < 0 ||
	    (r = mcp_arg_bool(args, "background", &bg, err)) < 0 ||
	    (r = mcp_arg_int(args, "timeout", 0, RUN_MAX_TIMEOUT, &timeout, err)) < 0 ||
	    (r = command_body(args, &body, err)) < 0)
		return r;
	if (bg) {
		if (json_object_get(args, "timeout"))
			json_object_set_new(body, "timeout", json_integer(timeout));
		json_object_set_new(body, "tag", json_string("mcp"));
		r = in ? isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				       "argument `stdin` cannot be used with `background`")
		       : run_background(c, id, body, res, err);
		json_decref(body);
		return r;
	}
	json_object_set_new(body, "timeout", json_integer(timeout));
	if (in)
		json_object_set_new(body, "stdin", json_string(in));
	pthread_mutex_lock(&c->s->lock);
	snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", id);
	seq = ++c->s->seq;
	pthread_mutex_unlock(&c->s->lock);
	url = cli_pathf("/v1/sandboxes/%s/exec?stream=ndjson", id);
	cl = mcp_client(c, err);
	if (!url || !cl) {
		json_decref(body);
		return cl ? isola_err_set(err, ENOMEM, NULL, "out of memory") : -EIO;
	}
	req.path = url;
	req.body = body;
	req.ud = &st;
	r = client_do(cl, &req, err);
	json_decref(body);
	pthread_mutex_lock(&c->s->lock);
	c->started = 0;
	pthread_mutex_unlock(&c->s->lock);
	if (atomic_load(&c->cancelled))
		mcp_call_kill(c, cl); /* the stream was cut: the command would run on */
	if (r == 0 && !st.exit)
		r = isola_err_set(err, EPROTO, NULL, "the command's output ended without an exit");
	if (r < 0)
		goto out;
	code = json_integer_value(json_object_get(st.exit, "exit_code"));
	sig = json_integer_value(json_object_get(st.exit, "signal"));
	data = json_pack("{s:s, s:I, s:I, s:b, s:I, s:I}", "sandbox_id", id, "exit_code",
			 (json_int_t)code, "signal", (json_int_t)sig, "timed_out",
			 json_is_true(json_object_get(st.exit, "timed_out")), "stdout_bytes",
			 (json_int_t)st.total[0], "stderr_bytes", (json_int_t)st.total[1]);
	sb_printf(&b, "exit_code: %lld\n", code);
	if (json_is_true(json_object_get(st.exit, "timed_out")))
		sb_printf(&b, "[timed out after %lld s: the command was killed]\n", timeout);
	else if (sig)
		sb_printf(&b, "[killed by signal %lld%s]\n", sig,
			  json_is_true(json_object_get(st.exit, "oom_killed")) ? ", out of memory"
									       : "");
	add_stream(&st, &b, id, 0, seq, data);
	add_stream(&st, &b, id, 1, seq, data);
	res->is_error = code != 0 || json_is_true(json_object_get(st.exit, "timed_out"));
	res->data = data;
	r = sb_finish(&b, res, err);
out:
	free(st.out[0].s);
	free(st.out[1].s);
	json_decref(st.exit);
	return r;
}

/* A process's pid argument (required). */
static int arg_pid(json_t *args, long long *pid, struct isola_err **err)
{
	int r = mcp_arg_int(args, "pid", 1, 2147483647LL, pid, err);

	if (r == 0 && !*pid)
		r = isola_err_set(err, EINVAL, MCP_ERR_PARAMS, "missing required argument `pid`");
	return r;
}

int mcp_tool_ps(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	json_t *out = NULL, *p, *list;
	char sid[SID_LEN];
	struct sbuf b = {0};
	const char *id;
	size_t i;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/processes", id);
	if ((r = mcp_api(c, "GET", url, NULL, &out, err)) < 0)
		return r;
	list = json_array();
	json_array_foreach(json_object_get(out, "processes"), i, p)
	{
		cleanup_free char *cmd = out_fmt_value(json_object_get(p, "argv"));
		bool running = json_is_true(json_object_get(p, "running"));

		sb_printf(&b, "%-7lld %-12s %s\n",
			  (long long)json_integer_value(json_object_get(p, "pid")),
			  running ? "running" : "exited", cmd ?: "?");
		json_array_append_new(
			list, json_pack("{s:I, s:O?, s:b, s:O?, s:s?}", "pid",
					json_integer_value(json_object_get(p, "pid")), "argv",
					json_object_get(p, "argv"), "running", running, "exit_code",
					json_object_get(p, "exit_code"), "tag",
					json_string_value(json_object_get(p, "tag"))));
	}
	if (!json_array_size(list))
		sb_printf(&b, "(no processes)\n");
	json_decref(out);
	res->data = json_pack("{s:o}", "processes", list);
	return sb_finish(&b, res, err);
}

int mcp_tool_logs(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	json_t *out = NULL;
	long long pid = 0;
	char sid[SID_LEN];
	struct sbuf b = {0};
	const char *id;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = arg_pid(args, &pid, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/processes/%ld/output", id, (long)pid);
	if ((r = mcp_api(c, "GET", url, NULL, &out, err)) < 0)
		return r;
	if (json_object_get(out, "exit_code"))
		sb_printf(&b, "exited: exit_code %lld\n",
			  (long long)json_integer_value(json_object_get(out, "exit_code")));
	else
		sb_printf(&b, "running\n");
	for (int k = 0; k < 2; k++) {
		const json_t *v = json_object_get(out, stream_names[k]);

		sb_printf(&b, "--- %s ---\n", stream_names[k]);
		mcp_out_bound(&b, json_string_value(v) ?: "", json_string_length(v), NULL);
		if (json_string_length(v) &&
		    json_string_value(v)[json_string_length(v) - 1] != '\n')
			sb_add(&b, "\n", 1);
	}
	if (json_object_get(out, "dropped"))
		sb_printf(&b, "[earlier output was dropped: the agent keeps the last 1 MiB]\n");
	json_decref(out);
	return sb_finish(&b, res, err);
}

int mcp_tool_kill(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	const char *id, *name;
	long long pid = 0;
	char sid[SID_LEN];
	struct sbuf b = {0};
	json_t *body;
	int r, sig = SIGTERM;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = arg_pid(args, &pid, err)) < 0 ||
	    (r = mcp_arg_str(args, "signal", false, &name, err)) < 0)
		return r;
	if (name && (sig = cli_parse_signal(name)) < 0)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS, "unknown signal `%s`", name);
	url = cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", id, (long)pid);
	if (!(body = json_pack("{s:i}", "signal", sig)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = mcp_api(c, "POST", url, body, NULL, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b, "Sent signal %d to pid %lld in sandbox %s.\n", sig, pid, id);
	return sb_finish(&b, res, err);
}

int mcp_tool_search(struct mcp_call *c, json_t *args, struct mcp_result *res,
		    struct isola_err **err)
{
	cleanup_free char *url = NULL, *include = NULL;
	const char *id, *pattern, *path, *glob, *p, *end;
	long long max = 100, code, n = 0;
	json_t *body, *out = NULL, *matches, *argv;
	bool icase = false;
	char sid[SID_LEN];
	struct sbuf b = {0};
	struct client *cl;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "pattern", true, &pattern, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", false, &path, err)) < 0 ||
	    (r = mcp_arg_str(args, "glob", false, &glob, err)) < 0 ||
	    (r = mcp_arg_bool(args, "ignore_case", &icase, err)) < 0 ||
	    (r = mcp_arg_int(args, "max_results", 1, 1000, &max, err)) < 0)
		return r;
	if (glob && asprintf(&include, "--include=%s", glob) < 0)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	/* grep -E in the sandbox: the pattern is an argv element, never shell text. */
	argv = json_pack("[s, s]", "grep", "-rnIE");
	if (argv && icase)
		json_array_append_new(argv, json_string("-i"));
	if (argv && include)
		json_array_append_new(argv, json_string(include));
	for (size_t i = 0; argv && i < 3; i++)
		json_array_append_new(argv, json_string(i == 0 ? "--" : i == 1 ? pattern : path ?: "."));
	body = argv ? json_pack("{s:o, s:I, s:i}", "cmd", argv, "max_output",
				(json_int_t)SEARCH_OUTPUT, "timeout", 60)
		    : NULL;
	if (!body || !(url = cli_pathf("/v1/sandboxes/%s/exec", id))) {
		json_decref(body);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	cl = mcp_client(c, err);
	r = cl ? client_json(cl, "POST", url, body, &out, err) : -EIO;
	json_decref(body);
	if (r < 0)
		return r;
	code = json_integer_value(json_object_get(out, "exit_code"));
	if (code > 1) {
		sb_printf(&b, "grep failed (exit %lld): ", code);
		sb_add_utf8(&b, json_string_value(json_object_get(out, "stderr")) ?: "",
			    json_string_length(json_object_get(out, "stderr")));
		res->is_error = true;
		json_decref(out);
		return sb_finish(&b, res, err);
	}
	matches = json_array();
	p = json_string_value(json_object_get(out, "stdout")) ?: "";
	for (; *p && n < max; p = *end ? end + 1 : end, n++) {
		end = strchr(p, '\n') ?: p + strlen(p);
		sb_add(&b, p, (size_t)(end - p));
		sb_add(&b, "\n", 1);
		json_array_append_new(matches, json_stringn(p, (size_t)(end - p)));
	}
	if (!n)
		sb_printf(&b, "No matches.\n");
	if (*p || json_is_true(json_object_get(out, "stdout_truncated")))
		sb_printf(&b,
			  "[more matches: only the first %lld are shown; narrow `path`/`glob` or "
			  "raise max_results]\n",
			  max);
	res->data = json_pack("{s:o, s:b}", "matches", matches, "more",
			      *p || json_is_true(json_object_get(out, "stdout_truncated")));
	json_decref(out);
	return sb_finish(&b, res, err);
}
