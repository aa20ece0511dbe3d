/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_exec: `isola exec` — streamed, detached (-d) or interactive (-i/-t) commands in a sandbox. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../common/util.h"
#include "attach.h"
#include "output.h"
#include "parse.h"

json_t *cli_exec_body(char **argv, int argc, const json_t *env, const char *cwd, const char *user,
		      long timeout_s)
{
	json_t *body = json_object(), *cmd = json_array();

	if (!body || !cmd) {
		json_decref(body);
		json_decref(cmd);
		return NULL;
	}
	for (int i = 0; i < argc; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	json_object_set_new(body, "cmd", cmd);
	if (env && json_object_size(env))
		json_object_set(body, "env", (json_t *)env);
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	if (user)
		json_object_set_new(body, "user", json_string(user));
	if (timeout_s)
		json_object_set_new(body, "timeout", json_integer(timeout_s));
	return body;
}

/* Writes base64 `data` of a stdout/stderr event to fd. */
static int write_data(int fd, const json_t *data, struct isola_err **err)
{
	const char *s = json_string_value(data);
	size_t n = json_string_length(data);
	cleanup_free unsigned char *buf = NULL;
	long len;

	if (!s)
		return isola_err_set(err, EPROTO, "internal", "output event without data");
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	/* UNTRUSTED: output bytes from the sandbox; they are only copied to our stdout/stderr. */
	len = cli_b64_decode(s, n, buf);
	if (len < 0)
		return isola_err_set(err, EPROTO, "internal", "output event with malformed base64");
	if (fd == STDOUT_FILENO)
		fflush(stdout);
	if (util_write_all(fd, buf, (size_t)len) < 0 && errno != EPIPE)
		return isola_err_sys(err, errno, NULL, "write output");
	return 0;
}

int cli_stream_event(void *ud, json_t *ev, struct isola_err **err)
{
	struct cli_stream *s = ud;
	const char *type = json_string_value(json_object_get(ev, "type"));

	if (!type)
		return 0; /* unknown events are ignored: newer daemons may add some */
	if (s->json)
		out_json_line(stdout, ev);
	if (!strcmp(type, "start")) {
		s->started = true;
		s->pid = (long)json_integer_value(json_object_get(ev, "pid"));
	} else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
		if (!s->json)
			return write_data(type[3] == 'o' ? STDOUT_FILENO : STDERR_FILENO,
					  json_object_get(ev, "data"), err);
	} else if (!strcmp(type, "dropped")) {
		const char *stream = json_string_value(json_object_get(ev, "stream"));

		if (!s->json)
			fprintf(stderr, "isola: %lld bytes of %s were dropped (retention limit)\n",
				(long long)json_integer_value(json_object_get(ev, "bytes")),
				stream ? stream : "output");
	} else if (!strcmp(type, "exit")) {
		json_decref(s->exit);
		s->exit = json_incref(ev);
	} else if (!strcmp(type, "error")) {
		const char *msg = json_string_value(json_object_get(ev, "message"));

		free(s->error);
		s->error = strdup(msg ? msg : "command failed");
	}
	return 0;
}

void cli_report_oom(struct client *c, const char *id, const json_t *exit)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *sb = NULL, *mem;
	char lim[32] = "";

	if (!json_is_true(json_object_get(exit, "oom_killed")))
		return;
	if (c && id && (path = cli_pathf("/v1/sandboxes/%s", id)) &&
	    client_json(c, "GET", path, NULL, &sb, &err) == 0) {
		mem = json_object_get(sb, "memory");
		if (json_is_integer(mem) && json_integer_value(mem) > 0)
			out_fmt_size((uint64_t)json_integer_value(mem), lim, sizeof(lim));
	}
	json_decref(sb);
	if (lim[0])
		fprintf(stderr, "killed: out of memory (limit %s)\n", lim);
	else
		fprintf(stderr, "killed: out of memory\n");
}

int cli_stream_finish(struct cli_stream *s)
{
	int status;

	if (s->error) {
		if (!s->json)
			fprintf(stderr, "isola: %s\n", s->error);
		status = CLI_EXIT_ISOLA;
	} else if (s->exit) {
		status = cli_exit_status(s->exit);
		if (!s->json)
			cli_report_oom(s->c, s->sandbox, s->exit);
		if (!s->json && json_is_true(json_object_get(s->exit, "timed_out")))
			fprintf(stderr, "timed out after %lds\n",
				s->timeout_s ? s->timeout_s
					     : (long)(json_integer_value(json_object_get(
							      s->exit, "duration_ms")) /
						      1000));
	} else {
		fprintf(stderr, "isola: output stream ended without an exit status\n");
		status = CLI_EXIT_ISOLA;
	}
	json_decref(s->exit);
	s->exit = NULL;
	free(s->error);
	s->error = NULL;
	return status;
}

/* Options of one `isola exec`. */
struct exec_opts {
	bool interactive; /* -i: forward stdin */
	bool tty;	  /* -t: allocate a pseudo-terminal */
	bool detach;	  /* -d: start in the background, print the pid */
	json_t *env;	  /* --env pairs (owned) */
	const char *cwd;  /* --workdir */
	const char *user; /* --user */
	long timeout_s;	  /* --timeout, 0 = none */
};

/*
 * Ctrl-C on a streamed exec, as docker does it: the first SIGINT is sent to the process inside
 * (POST .../processes/PID/signal), a second one sends SIGKILL; the stream goes on and ends with
 * the process's own exit. The handler only writes a byte to a pipe; a thread with its own
 * client makes the requests, so the streaming transfer is never interrupted.
 */
struct interrupt_fwd {
	int pipe[2];			/* handler -> thread; write end closed to stop the thread */
	_Atomic long pid;		/* the process, once the start event named it */
	const struct client_conf *conf; /* where isolad is (borrowed) */
	const char *sandbox;		/* the sandbox id (borrowed) */
	pthread_t thread;
	struct cli_stream *s; /* the stream the events go to */
};

static int interrupt_pipe = -1; /* write end for the SIGINT handler, -1 when not forwarding */

static void on_interrupt(int sig)
{
	int saved = errno;
	char b = 1;

	(void)sig;
	if (interrupt_pipe >= 0 && write(interrupt_pipe, &b, 1) < 0) {
		/* nothing to do in a handler */
	}
	errno = saved;
}

static void *interrupt_thread(void *arg)
{
	struct interrupt_fwd *f = arg;
	struct client *c = NULL;
	int n = 0;
	char b;

	while (read(f->pipe[0], &b, 1) == 1) {
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = NULL;
		long pid = atomic_load(&f->pid);
		json_t *body, *reply = NULL;

		if (!pid)
			continue; /* not started yet: nothing to signal */
		n++;
		path = cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", f->sandbox, pid);
		body = json_pack("{s:i}", "signal", n == 1 ? SIGINT : SIGKILL);
		if (!c && client_new(f->conf, &c, &err) < 0) {
			json_decref(body);
			continue;
		}
		if (client_json(c, "POST", path, body, &reply, &err) < 0)
			fprintf(stderr, "isola: signal process %ld: %s\n", pid, err->message);
		json_decref(body);
		json_decref(reply);
	}
	client_free(c);
	return NULL;
}

/* cli_stream_event that also tells the interrupt thread the pid. */
static int fwd_event(void *ud, json_t *ev, struct isola_err **err)
{
	struct interrupt_fwd *f = ud;
	int r = cli_stream_event(f->s, ev, err);

	if (f->s->pid)
		atomic_store(&f->pid, f->s->pid);
	return r;
}

static int exec_streamed(struct cli *cli, struct client *c, const char *id, json_t *body)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/exec", id);
	struct cli_stream s = {
		.json = cli->json,
		.c = c,
		.sandbox = id,
		.timeout_s = (long)json_integer_value(json_object_get(body, "timeout")),
	};
	struct client_req r = {
		.method = "POST",
		.path = path,
		.body = body,
		.body_fd = -1,
		.accept = "application/x-ndjson",
		.on_event = fwd_event,
	};
	struct interrupt_fwd f = {.conf = client_conf(c), .sandbox = id, .s = &s};
	struct sigaction sa = {.sa_handler = on_interrupt}, old;
	bool fwd;
	int rc;

	r.ud = &f;
	fwd = pipe2(f.pipe, O_CLOEXEC) == 0;
	if (fwd && pthread_create(&f.thread, NULL, interrupt_thread, &f) != 0) {
		close(f.pipe[0]);
		close(f.pipe[1]);
		fwd = false;
	}
	if (fwd) {
		interrupt_pipe = f.pipe[1];
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(SIGINT, &sa, &old);
	}
	rc = client_do(c, &r, &err);
	if (fwd) {
		sigaction(SIGINT, &old, NULL);
		interrupt_pipe = -1;
		close(f.pipe[1]);
		pthread_join(f.thread, NULL);
		close(f.pipe[0]);
	}
	if (rc < 0) {
		json_decref(s.exit);
		free(s.error);
		return cli_fail(err, CLI_EXIT_ISOLA);
	}
	return cli_stream_finish(&s);
}

/* Starts the command as a background process; *pid receives its pid. */
static int start_process(struct client *c, const char *id, json_t *body, json_t **reply, long *pid,
			 struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/processes", id);
	int r;

	r = client_json(c, "POST", path, body, reply, err);
	if (r < 0)
		return r;
	*pid = (long)json_integer_value(json_object_get(*reply, "pid"));
	if (*pid <= 0)
		return isola_err_set(err, EPROTO, "internal", "isolad did not return a pid");
	return 0;
}

static int exec_process(struct cli *cli, struct client *c, const char *id, json_t *body,
			const struct exec_opts *o)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *reply = NULL;
	struct winsize ws;
	long pid = 0;
	int r;

	if (o->tty) {
		json_object_set_new(body, "tty", json_true());
		if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
			json_object_set_new(body, "cols", json_integer(ws.ws_col));
			json_object_set_new(body, "rows", json_integer(ws.ws_row));
		}
	}
	r = start_process(c, id, body, &reply, &pid, &err);
	if (r < 0) {
		json_decref(reply);
		return cli_fail(err, CLI_EXIT_ISOLA);
	}
	if (o->detach) {
		if (cli->json)
			out_json(stdout, reply);
		else
			printf("%ld\n", pid);
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	json_decref(reply);
	return cli_attach(client_conf(c), id, pid, o->interactive, o->tty);
}

enum { OPT_TIMEOUT = 256, OPT_ENV_FILE };

const struct cli_opt cli_exec_opts[] = {
	{"interactive", 'i', NULL, "attach stdin", 0},
	{"tty", 't', NULL, "allocate a terminal", 0},
	{"detach", 'd', NULL, "start in the background and print the pid", 0},
	{"env", 'e', "KEY=VALUE", "set an environment variable (repeatable)", 0},
	{"env-file", OPT_ENV_FILE, "FILE", "read KEY=VALUE lines from FILE", 0},
	{"workdir", 'w', "DIR", "working directory", 0},
	{"user", 'u', "USER", "user to run as", 0},
	{"timeout", OPT_TIMEOUT, "SECONDS", "kill the command after SECONDS (exit 124)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static int parse_exec_opt(struct cli *cli, int argc, char **argv, int c, struct exec_opts *o)
{
	cleanup_err struct isola_err *err = NULL;

	switch (c) {
	case 'i':
		o->interactive = true;
		return 0;
	case 't':
		o->tty = true;
		return 0;
	case 'd':
		o->detach = true;
		return 0;
	case 'e':
		if (cli_parse_kv(o->env, optarg, "--env", &err) < 0)
			return cli_fail(err, CLI_EXIT_USAGE);
		return 0;
	case OPT_ENV_FILE:
		if (cli_parse_env_file(o->env, optarg, &err) < 0)
			return cli_fail(err, CLI_EXIT_USAGE);
		return 0;
	case 'w':
		o->cwd = optarg;
		return 0;
	case 'u':
		o->user = optarg;
		return 0;
	case OPT_TIMEOUT:
		if (cli_parse_seconds(optarg, &o->timeout_s) < 0)
			return cli_usage_err(cli, "--timeout `%s`: expected seconds", optarg);
		return 0;
	default:
		return cli_bad_opt(cli, argc, argv, c) ?: -1;
	}
}

int cli_exec_attached(struct cli *cli, struct client *c, const char *id, json_t *body,
		      bool interactive, bool tty)
{
	struct exec_opts o = {.interactive = interactive, .tty = tty};

	return exec_process(cli, c, id, body, &o);
}

int cmd_exec(struct cli *cli, int argc, char **argv)
{
	struct exec_opts o = {.env = json_object()};
	struct client *c;
	json_t *body = NULL;
	const char *id;
	int opt, r = CLI_EXIT_USAGE;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		r = parse_exec_opt(cli, argc, argv, opt, &o);
		if (r) {
			r = r < 0 ? CLI_EXIT_OK : r;
			goto out;
		}
	}
	if (optind >= argc) {
		r = cli_usage_err(cli, "missing sandbox ID");
		goto out;
	}
	id = argv[optind++];
	if (optind >= argc) {
		r = cli_usage_err(cli, "missing command");
		goto out;
	}
	if (o.detach && (o.interactive || o.tty)) {
		r = cli_usage_err(cli, "-d cannot be combined with -i or -t");
		goto out;
	}
	body = cli_exec_body(argv + optind, argc - optind, o.env, o.cwd, o.user, o.timeout_s);
	c = cli_client(cli);
	if (!body || !c) {
		r = CLI_EXIT_ISOLA;
		goto out;
	}
	if (o.detach || o.interactive || o.tty)
		r = exec_process(cli, c, id, body, &o);
	else
		r = exec_streamed(cli, c, id, body);
out:
	json_decref(body);
	json_decref(o.env);
	return r;
}
