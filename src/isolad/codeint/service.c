/* SPDX-License-Identifier: Apache-2.0 */
/* service: ships the code interpreter's files into a sandbox and starts the service on demand. */
#include "codeint-internal.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define CALL_MS	 30000 /* one-shot agent ops */
#define PROBE_MS 60000 /* the python3 import check */
#define POLL_MS	 150   /* between /health tries while it starts */
#define TAIL_MAX 600   /* bytes of a failed command's output quoted in an error */

/*
 * Starts are serialised by one lock for all sandboxes: a start takes a second or two and
 * happens once per sandbox life (or after the service died), and a second caller for the
 * same sandbox must wait for the first and then find it running rather than start a
 * second copy that would fail to bind the port.
 */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* The template's name of s, for messages (into out). */
static void template_of(struct sandbox *s, char *out, size_t n)
{
	json_t *j = sandbox_to_json(s);
	const char *t = json_string_value(json_object_get(j, "template"));

	snprintf(out, n, "%s", t ? t : "?");
	json_decref(j);
}

/* Keeps the last n-1 bytes of everything appended, printable (for an error message). */
static void tail_add(char *tail, size_t n, const uint8_t *p, size_t len)
{
	size_t have = strlen(tail);

	if (len >= n - 1) {
		p += len - (n - 1);
		len = n - 1;
	}
	if (have + len > n - 1) {
		size_t drop = have + len - (n - 1);

		memmove(tail, tail + drop, have - drop + 1);
		have -= drop;
	}
	for (size_t i = 0; i < len; i++)
		tail[have + i] = (p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\n' ? (char)p[i] : '?';
	tail[have + len] = '\0';
}

/*
 * Drains an exec or attach channel until EXIT: 0 with *code (exit code, or 128 + signal)
 * and the output's tail; -ENOENT when the program is missing (agent `not_found`); -errno
 * with err otherwise.
 */
static int drain(struct agent_chan *ch, int timeout_ms, int *code, char *tail, size_t n,
		 struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + (uint64_t)timeout_ms;

	tail[0] = '\0';
	for (;;) {
		struct agent_msg m = {0};
		uint64_t now = util_now_ms();
		int r;

		if (now >= deadline)
			return isola_err_set(err, ETIMEDOUT, "timeout", "no exit in %d ms",
					     timeout_ms);
		r = agent_chan_recv(ch, &m, (int)(deadline - now), err);
		if (r < 0)
			return r;
		switch (m.type) {
		case PROTO_STDOUT:
		case PROTO_STDERR:
			tail_add(tail, n, m.data, m.len);
			break;
		case PROTO_EXIT: {
			/* UNTRUSTED: the agent's numbers, only printed */
			json_int_t sig = json_integer_value(json_object_get(m.json, "signal"));

			*code = sig > 0 ? 128 + (int)sig
					: (int)json_integer_value(
						  json_object_get(m.json, "exit_code"));
			agent_msg_fini(&m);
			return 0;
		}
		case PROTO_ERROR: {
			const char *c = json_string_value(json_object_get(m.json, "code"));

			r = c && !strcmp(c, "not_found") ? -ENOENT
							 : agent_error_to_err(m.json, err);
			agent_msg_fini(&m);
			return r;
		}
		default:
			break;
		}
		agent_msg_fini(&m);
	}
}

/* Writes every embedded file into CODEINT_DIR as root, mode 0755. */
static int ship(struct agent_conn *conn, struct isola_err **err)
{
	json_t *req = json_pack("{s:s, s:s, s:i, s:b, s:s}", "op", "mkdir", "path", CODEINT_DIR,
				"mode", 0755, "parents", 1, "user", "root");
	json_t *res = NULL;
	int r = req ? agent_call(conn, req, CALL_MS, &res, err)
		    : isola_err_set(err, ENOMEM, "internal", "out of memory");

	json_decref(req);
	json_decref(res);
	if (r < 0)
		return isola_err_wrap(err, "code interpreter: mkdir `%s`", CODEINT_DIR);
	for (const struct codeint_file *f = codeint_files; f->name; f++) {
		struct agent_chan *ch = NULL;
		struct agent_msg m = {0};
		char path[256];

		snprintf(path, sizeof(path), "%s/%s", CODEINT_DIR, f->name);
		req = json_pack("{s:s, s:s, s:i, s:b, s:s}", "op", "write", "path", path, "mode",
				0755, "append", 0, "user", "root");
		r = req ? agent_chan_open(conn, req, &ch, err)
			: isola_err_set(err, ENOMEM, "internal", "out of memory");
		json_decref(req);
		if (r == 0 && f->len)
			r = agent_chan_send_data(ch, f->data, f->len, err);
		if (r == 0)
			r = agent_chan_send_eof(ch, err);
		if (r == 0)
			r = agent_chan_recv(ch, &m, CALL_MS, err);
		if (r == 0 && m.type == PROTO_ERROR)
			r = agent_error_to_err(m.json, err);
		else if (r == 0 && m.type != PROTO_RESULT)
			r = isola_err_set(err, EPROTO, "internal", "unexpected agent frame");
		agent_msg_fini(&m);
		agent_chan_close(ch);
		if (r < 0)
			return isola_err_wrap(err, "code interpreter: write `%s`", path);
	}
	return 0;
}

/* Runs argv in the foreground with the sandbox's defaults: see drain(). */
static int run(struct sandbox *s, struct agent_conn *conn, json_t *argv, int timeout_ms, int *code,
	       char *tail, size_t n, struct isola_err **err)
{
	struct agent_chan *ch = NULL;
	json_t *req = json_pack("{s:s, s:o, s:b, s:b, s:I}", "op", "exec", "argv", argv, "stdin", 0,
				"background", 0, "timeout_ms", (json_int_t)timeout_ms);
	int r;

	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	sandbox_apply_exec_defaults(s, req);
	r = agent_chan_open(conn, req, &ch, err);
	json_decref(req);
	if (r == 0)
		r = drain(ch, timeout_ms + CALL_MS, code, tail, n, err);
	agent_chan_close(ch);
	return r;
}

/* Does the sandbox's python3 import what the service needs? 0, or `failed_dependency`. */
static int probe(struct sandbox *s, struct agent_conn *conn, struct isola_err **err)
{
	char tail[TAIL_MAX], tmpl[80];
	int code = 0, r;

	r = run(s, conn,
		json_pack("[s, s, s]", "python3", "-c", "import jupyter_client, ipykernel"),
		PROBE_MS, &code, tail, sizeof(tail), err);
	if (r == 0 && code == 0)
		return 0;
	if (r < 0 && r != -ENOENT)
		return isola_err_wrap(err, "code interpreter: python3 check");
	template_of(s, tmpl, sizeof(tmpl));
	isola_err_free(*err);
	*err = NULL;
	if (r == -ENOENT)
		return isola_err_set(err, ENOENT, "failed_dependency",
				     "template `%s` has no python3 with jupyter_client: the code "
				     "interpreter needs python3 with jupyter_client and ipykernel "
				     "(Debian: python3-jupyter-client python3-ipykernel; "
				     "docs/code-interpreter.md)",
				     tmpl);
	return isola_err_set(err, ENOENT, "failed_dependency",
			     "template `%s` has no python3 with jupyter_client: the code "
			     "interpreter needs python3 with jupyter_client and ipykernel "
			     "(Debian: python3-jupyter-client python3-ipykernel; "
			     "docs/code-interpreter.md); python3 said: %s",
			     tmpl, tail);
}

/* Starts the service in the background: 0 with *pid. */
static int start(struct sandbox *s, struct agent_conn *conn, int *pid, struct isola_err **err)
{
	char script[256], port[16];
	json_t *req, *res = NULL;
	int r;

	snprintf(script, sizeof(script), "%s/server.py", CODEINT_DIR);
	snprintf(port, sizeof(port), "%d", CODEINT_PORT);
	req = json_pack("{s:s, s:[s, s, s, s], s:b, s:b, s:s}", "op", "exec", "argv", "python3",
			script, "--port", port, "stdin", 0, "background", 1, "tag", CODEINT_TAG);
	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	sandbox_apply_exec_defaults(s, req);
	r = agent_call(conn, req, CALL_MS, &res, err);
	json_decref(req);
	if (r < 0)
		return isola_err_wrap(err, "code interpreter: start");
	*pid = (int)json_integer_value(json_object_get(res, "pid"));
	json_decref(res);
	return 0;
}

/* If process pid ended, `unavailable` with its exit and output tail; else 0. */
static int check_alive(struct agent_conn *conn, int pid, struct isola_err **err)
{
	struct agent_chan *ch = NULL;
	json_t *req = json_pack("{s:s, s:i, s:b}", "op", "attach", "pid", pid, "stdin", 0);
	json_t *ps = json_pack("{s:s}", "op", "ps"), *res = NULL, *procs;
	char tail[TAIL_MAX] = "";
	int code = -1, r;
	size_t i;
	json_t *p;

	r = agent_call(conn, ps, CALL_MS, &res, err); /* borrows ps */
	json_decref(ps);
	if (r < 0) {
		json_decref(req);
		return r;
	}
	procs = json_object_get(res, "processes");
	json_array_foreach(procs, i, p)
	{
		if (json_integer_value(json_object_get(p, "pid")) == pid &&
		    json_is_true(json_object_get(p, "running"))) {
			json_decref(res);
			json_decref(req);
			return 0;
		}
	}
	json_decref(res);
	/* It ended: its buffered output says why (a traceback, a bind error). */
	if (req && agent_chan_open(conn, req, &ch, NULL) == 0)
		drain(ch, CALL_MS, &code, tail, sizeof(tail), NULL);
	agent_chan_close(ch);
	json_decref(req);
	return isola_err_set(err, ECHILD, "unavailable",
			     "the code interpreter service exited (status %d) before answering: %s",
			     code, tail[0] ? tail : "no output");
}

/* GET /health: 0 when it answers 200, -ECONNREFUSED when nothing listens, else -errno. */
static int health(struct sandbox *s, struct isola_err **err)
{
	struct codeint_call *c = NULL;
	int r = codeint_call_raw(s, "GET", "/health", NULL, 0, &c, err);

	if (r == 0 && codeint_call_status(c) != 200)
		r = isola_err_set(err, EIO, "unavailable",
				  "the code interpreter's /health answered %u",
				  codeint_call_status(c));
	codeint_call_free(c);
	return r;
}

int codeint_ensure(struct sandbox *s, struct isola_err **err)
{
	struct agent_conn *conn;
	uint64_t deadline;
	int r, pid = 0;

	pthread_mutex_lock(&start_lock);
	/* Running (0) or nothing listening (start it). Anything else is a service that is
	 * still starting or dying (killed, its port not yet closed): wait for either. */
	deadline = util_now_ms() + CODEINT_START_MS;
	for (;;) {
		struct isola_err *e = NULL;

		r = health(s, &e);
		if (r == 0 || r == -ECONNREFUSED || util_now_ms() >= deadline ||
		    !strcmp(e ? e->code : "", "conflict")) {
			if (r < 0 && r != -ECONNREFUSED) {
				*err = e;
				goto out;
			}
			isola_err_free(e);
			break;
		}
		isola_err_free(e);
		usleep(POLL_MS * 1000);
	}
	if (r == 0)
		goto out;
	if (!codeint_files[0].name) {
		r = isola_err_set(err, ENOTSUP, "not_supported",
				  "this isolad was built without the code interpreter service "
				  "(share/interp was missing at build time)");
		goto out;
	}
	r = sandbox_agent(s, &conn, err);
	if (r < 0)
		goto out;
	log_info("sandbox %s: starting the code interpreter", sandbox_id(s));
	if ((r = ship(conn, err)) < 0 || (r = probe(s, conn, err)) < 0 ||
	    (r = start(s, conn, &pid, err)) < 0)
		goto out;
	deadline = util_now_ms() + CODEINT_START_MS;
	for (;;) {
		struct isola_err *e = NULL;

		r = health(s, &e);
		if (r == 0)
			break;
		isola_err_free(e);
		if (r != -ECONNREFUSED && r != -ECONNRESET && r != -EBADMSG && r != -EIO) {
			r = health(s, err); /* once more, for its error */
			goto out;
		}
		r = check_alive(conn, pid, err);
		if (r < 0)
			goto out;
		if (util_now_ms() >= deadline) {
			r = isola_err_set(err, ETIMEDOUT, "unavailable",
					  "the code interpreter did not answer /health within %d s",
					  CODEINT_START_MS / 1000);
			goto out;
		}
		usleep(POLL_MS * 1000);
	}
	log_info("sandbox %s: code interpreter ready (pid %d)", sandbox_id(s), pid);
out:
	pthread_mutex_unlock(&start_lock);
	return r;
}
