/* SPDX-License-Identifier: Apache-2.0 */
/* envd_process: process.Process (Start, Connect, List, SendInput, CloseStdin, SendSignal, Update). */
#include "e2b-internal.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define MAX_ARGS 4096 /* argv entries in one Start */

/* --- the event stream of Start and Connect ---------------------------------------------- */

struct proc_stream {
	struct sandbox *s;	      /* reference */
	struct agent_chan *ch;	      /* exec or attach channel, owned */
	long pid;		      /* process id (sent in the start event) */
	bool tty;		      /* output is the pty's */
	bool start_sent;	      /* the first event went out */
	struct isola_err *err;	      /* failure before the stream began (sent as its end), owned */
	struct api_server *srv;	      /* for the audit record and core, borrowed */
	struct tenancy_principal who; /* who started the command */
	json_t *audit_argv;	      /* argv until the end is audited, owned */
	char audit_user[64];	      /* user it runs as */
	uint64_t started_ms;	      /* when it started */
};

/* Appends the command's audit record (exit NULL: its end was not seen) once. */
static void proc_stream_audit(struct proc_stream *ps, const json_t *exit)
{
	if (!ps->audit_argv)
		return;
	api_audit_command(ps->srv, &ps->who, sandbox_id(ps->s), ps->audit_argv, ps->audit_user,
			  ps->pid, exit, ps->started_ms);
	json_decref(ps->audit_argv);
	ps->audit_argv = NULL;
}

static void proc_stream_free(void *p)
{
	struct proc_stream *ps = p;

	if (!ps)
		return;
	/* Closing a foreground exec channel turns the process into a background one: a
	 * client that disconnects (handle.disconnect(), a crash) leaves it running. */
	agent_chan_close(ps->ch);
	if (ps->s) {
		proc_stream_audit(ps, NULL);
		sandbox_unref(ps->s);
	}
	isola_err_free(ps->err);
	free(ps);
}

static json_t *event(const char *kind, json_t *value)
{
	return json_pack("{s:{s:o}}", "event", kind, value);
}

/* EndEvent from the agent's EXIT (UNTRUSTED: typed fields only), shaped like envd's Go
 * ProcessState strings: "exit status N" or "signal: killed". */
static json_t *end_event(const json_t *ex)
{
	int code = (int)json_integer_value(json_object_get(ex, "exit_code"));
	int sig = (int)json_integer_value(json_object_get(ex, "signal"));
	char status[64];
	json_t *end;

	if (sig > 0 && sig < 65) {
		const char *name = strsignal(sig);
		size_t i;

		snprintf(status, sizeof(status), "signal: %s", name ? name : "unknown");
		for (i = 8; status[i] && i < 9; i++)
			status[i] = (char)tolower((unsigned char)status[i]);
		end = json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0, "status",
				status, "error", status);
	} else {
		snprintf(status, sizeof(status), "exit status %d", code);
		end = json_pack("{s:i, s:b, s:s}", "exitCode", code, "exited", 1, "status", status);
		if (end && code != 0)
			json_object_set_new(end, "error", json_string(status));
	}
	return end ? event("end", end) : NULL;
}

/* True when the stream's sandbox is destroyed or no longer running (what GET /health
 * answers 502 for). */
static bool proc_sandbox_gone(struct proc_stream *ps)
{
	struct sandbox *s = NULL;
	const char *state;
	bool gone = true;
	json_t *sj;

	if (core_sandbox_get(ps->srv->core, sandbox_id(ps->s), &s, NULL) < 0)
		return true;
	sj = sandbox_to_json(s);
	state = json_string_value(json_object_get(sj, "state"));
	gone = !state || strcmp(state, "running") != 0;
	json_decref(sj);
	sandbox_unref(s);
	return gone;
}

static int proc_next(struct e2b_stream *es, void *ud)
{
	struct proc_stream *ps = ud;
	cleanup_err struct isola_err *err = NULL;
	struct agent_msg m = {0};
	int r;

	if (ps->err) {
		e2b_stream_fail_err(es, ps->err);
		return 1;
	}
	if (!ps->start_sent) {
		ps->start_sent = true;
		return e2b_stream_msg(
			es, event("start", json_pack("{s:I}", "pid", (json_int_t)ps->pid)));
	}
	r = agent_chan_recv(ps->ch, &m, API_POLL_MS, &err);
	if (r == -ETIMEDOUT)
		return e2b_stream_idle(es) ? -1 : 0;
	if (r < 0) {
		/* A sandbox killed (or expired) under a running command: E2B's edge resets the
		 * stream, and its SDK then probes /health (502 here too) and reports "the
		 * sandbox was killed or reached its end of life". Do the same: end the response
		 * without the end-of-stream envelope. A lost agent of a live sandbox is an
		 * error the stream says. */
		if (proc_sandbox_gone(ps))
			return -1;
		e2b_stream_fail(es, "unavailable", "the sandbox agent connection was lost");
		return 1;
	}
	switch (m.type) {
	case PROTO_STDOUT:
	case PROTO_STDERR:
		r = e2b_stream_msg(es, event("data", json_pack("{s:o}",
							       ps->tty			? "pty"
							       : m.type == PROTO_STDOUT ? "stdout"
											: "stderr",
							       api_b64_json(m.data, m.len))));
		break;
	case PROTO_EXIT:
		proc_stream_audit(ps, m.json);
		r = e2b_stream_msg(es, end_event(m.json));
		agent_msg_fini(&m);
		return r < 0 ? -1 : 1;
	case PROTO_ERROR:
		agent_error_to_err(m.json, &err);
		e2b_stream_fail_err(es, err);
		agent_msg_fini(&m);
		return 1;
	default: /* RESULT (attach), DROPPED: nothing to say in E2B's protocol */
		r = 0;
		break;
	}
	agent_msg_fini(&m);
	return r < 0 ? -1 : 0;
}

static enum MHD_Result proc_stream_respond(struct api_req *r, struct proc_stream *ps)
{
	struct e2b_stream_cfg cfg = {
		.next = proc_next,
		.ud = ps,
		.free_ud = proc_stream_free,
		.keepalive_ms = e2b_keepalive_ms(r),
		.keepalive = event("keepalive", json_object()),
	};

	return e2b_stream_respond(r, &cfg);
}

/* --- Start ---------------------------------------------------------------------------------- */

/* Builds the agent exec request from a StartRequest. UNTRUSTED: the client's message. */
static int start_request(const json_t *msg, const char *user, uint64_t timeout_ms, json_t **out,
			 bool *tty, struct isola_err **err)
{
	const json_t *proc = e2b_jget(msg, "process", NULL), *pty = e2b_jget(msg, "pty", NULL);
	const json_t *envs = NULL, *args, *size;
	const char *cmd = NULL, *cwd = NULL, *tag = NULL;
	uint64_t cols = 80, rows = 24;
	bool want_stdin = false;
	json_t *argv, *req, *a;
	size_t i;

	if (!json_is_object(proc))
		return isola_err_set(err, EINVAL, "invalid", "field `process` is required");
	if (e2b_jstr(proc, "cmd", NULL, API_MAX_PATH, &cmd, err) < 0 ||
	    e2b_jstr(proc, "cwd", NULL, API_MAX_PATH, &cwd, err) < 0 ||
	    api_json_str_map(proc, "envs", true, &envs, err) < 0 ||
	    e2b_jstr(msg, "tag", NULL, 256, &tag, err) < 0 ||
	    e2b_jbool(msg, "stdin", NULL, &want_stdin, err) < 0)
		return -EINVAL;
	if (!cmd || !*cmd)
		return isola_err_set(err, EINVAL, "invalid", "field `process.cmd` is required");
	if (pty && !json_is_object(pty))
		return isola_err_set(err, EINVAL, "invalid", "field `pty` must be an object");
	size = pty ? e2b_jget(pty, "size", NULL) : NULL;
	if (size && (e2b_juint(size, "cols", NULL, 65535, &cols, err) < 0 ||
		     e2b_juint(size, "rows", NULL, 65535, &rows, err) < 0))
		return -EINVAL;
	if (!cols || !rows)
		return isola_err_set(err, EINVAL, "invalid", "pty size must be at least 1x1");
	args = e2b_jget(proc, "args", NULL);
	if (args && (!json_is_array(args) || json_array_size(args) > MAX_ARGS))
		return isola_err_set(err, EINVAL, "invalid",
				     "field `process.args` must be an array of strings");
	argv = json_pack("[s]", cmd);
	if (!argv)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	json_array_foreach(args, i, a)
	{
		if (!json_is_string(a) ||
		    memchr(json_string_value(a), '\0', json_string_length(a))) {
			json_decref(argv);
			return isola_err_set(err, EINVAL, "invalid",
					     "field `process.args` must be strings without NUL");
		}
		json_array_append(argv, a);
	}
	*tty = pty != NULL;
	/* A pty always takes input (that is how a terminal is typed into). */
	req = json_pack("{s:s, s:o, s:b, s:I, s:I, s:b, s:b, s:I}", "op", "exec", "argv", argv,
			"tty", *tty, "cols", (json_int_t)cols, "rows", (json_int_t)rows, "stdin",
			want_stdin || *tty, "background", 0, "timeout_ms",
			(json_int_t)(timeout_ms > INT32_MAX ? INT32_MAX : timeout_ms));
	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (envs)
		json_object_set(req, "env", (json_t *)envs);
	if (cwd && *cwd)
		json_object_set_new(req, "cwd", json_string(cwd));
	if (user && *user)
		json_object_set_new(req, "user", json_string(user));
	if (tag && *tag)
		json_object_set_new(req, "tag", json_string(tag));
	*out = req;
	return 0;
}

enum MHD_Result e2b_proc_start(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	struct agent_conn *conn;
	struct proc_stream *ps;
	json_t *msg = NULL, *req = NULL, *res = NULL;

	if (e2b_rpc_request(r, true, &msg) < 0)
		return MHD_YES;
	ps = calloc(1, sizeof(*ps));
	if (!ps) {
		json_decref(msg);
		return MHD_NO;
	}
	ps->srv = r->srv;
	if (start_request(msg, er->user, e2b_timeout_ms(r), &req, &ps->tty, &ps->err) < 0) {
		json_decref(msg);
		return proc_stream_respond(r, ps);
	}
	json_decref(msg);
	if (e2b_rpc_sandbox(r, &ps->s, &conn) < 0) {
		json_decref(req);
		free(ps);
		return MHD_YES;
	}
	sandbox_apply_exec_defaults(ps->s, req);
	if (agent_chan_open(conn, req, &ps->ch, &ps->err) == 0 &&
	    api_chan_expect_result(ps->ch, api_req_fd(r), E2B_CALL_MS, &res, &ps->err) == 0) {
		ps->pid = (long)json_integer_value(json_object_get(res, "pid"));
		/* Every command started in a sandbox is audited (argv, user, exit, duration). */
		ps->who = r->who;
		ps->audit_argv = json_incref(json_object_get(req, "argv"));
		snprintf(ps->audit_user, sizeof(ps->audit_user), "%s",
			 json_string_value(json_object_get(req, "user")) ?: "");
		ps->started_ms = util_now_ms();
	}
	json_decref(res);
	json_decref(req);
	return proc_stream_respond(r, ps);
}

/* --- selectors ------------------------------------------------------------------------------ */

/* The agent's process list (new reference) or -errno. */
static int agent_ps(struct agent_conn *conn, json_t **list, struct isola_err **err)
{
	json_t *req = json_pack("{s:s}", "op", "ps"), *res = NULL;
	int ret = req ? e2b_agent_call(conn, req, &res, err) : -ENOMEM;

	json_decref(req);
	if (ret < 0)
		return ret;
	*list = json_incref(json_object_get(res, "processes"));
	json_decref(res);
	if (!json_is_array(*list)) {
		json_decref(*list);
		return isola_err_set(err, EPROTO, "internal",
				     "agent sent a malformed process list");
	}
	return 0;
}

/*
 * Resolves a ProcessSelector {pid} or {tag} to a pid. With `running`, the process must
 * still run (E2B's envd forgets processes once they exit), and *tty (if not NULL) says
 * whether it has a pty. -ENOENT `not_found` otherwise.
 */
static int select_pid(struct agent_conn *conn, const json_t *msg, bool running, int *pid, bool *tty,
		      struct isola_err **err)
{
	const json_t *sel = e2b_jget(msg, "process", NULL);
	const char *tag = NULL;
	uint64_t want = 0;
	json_t *list = NULL, *p;
	size_t i;

	if (!json_is_object(sel))
		return isola_err_set(err, EINVAL, "invalid", "field `process` is required");
	if (e2b_juint(sel, "pid", NULL, INT32_MAX, &want, err) < 0 ||
	    e2b_jstr(sel, "tag", NULL, 256, &tag, err) < 0)
		return -EINVAL;
	if (!want && !tag)
		return isola_err_set(err, EINVAL, "invalid",
				     "process selector needs `pid` or `tag`");
	if (want && !running && !tag) {
		*pid = (int)want;
		return 0;
	}
	if (agent_ps(conn, &list, err) < 0)
		return -EIO;
	json_array_foreach(list, i, p)
	{
		const char *ptag = json_string_value(json_object_get(p, "tag"));
		long ppid = (long)json_integer_value(json_object_get(p, "pid"));

		if (running && !json_is_true(json_object_get(p, "running")))
			continue;
		if ((want && ppid == (long)want) || (!want && tag && ptag && !strcmp(ptag, tag))) {
			*pid = (int)ppid;
			if (tty)
				*tty = json_is_true(json_object_get(p, "tty"));
			json_decref(list);
			return 0;
		}
	}
	json_decref(list);
	if (tag)
		return isola_err_set(err, ENOENT, "not_found", "process with tag `%s` not found",
				     tag);
	return isola_err_set(err, ENOENT, "not_found", "process %llu not found",
			     (unsigned long long)want);
}

/* --- Connect ---------------------------------------------------------------------------------- */

enum MHD_Result e2b_proc_connect(struct api_req *r)
{
	struct agent_conn *conn;
	struct proc_stream *ps;
	json_t *msg = NULL, *req;
	int pid = 0;

	if (e2b_rpc_request(r, true, &msg) < 0)
		return MHD_YES;
	ps = calloc(1, sizeof(*ps));
	if (!ps) {
		json_decref(msg);
		return MHD_NO;
	}
	ps->srv = r->srv;
	if (e2b_rpc_sandbox(r, &ps->s, &conn) < 0) {
		json_decref(msg);
		free(ps);
		return MHD_YES;
	}
	if (select_pid(conn, msg, true, &pid, &ps->tty, &ps->err) == 0) {
		req = json_pack("{s:s, s:i, s:b}", "op", "attach", "pid", pid, "stdin", 0);
		if (req && agent_chan_open(conn, req, &ps->ch, &ps->err) == 0 &&
		    api_chan_expect_result(ps->ch, api_req_fd(r), E2B_CALL_MS, NULL, &ps->err) == 0)
			ps->pid = pid;
		json_decref(req);
	}
	json_decref(msg);
	return proc_stream_respond(r, ps);
}

/* --- unary methods ----------------------------------------------------------------------------- */

/* Parses the unary message and gets the sandbox. Responds on failure (returns -1). */
static int unary_begin(struct api_req *r, json_t **msg, struct sandbox **s,
		       struct agent_conn **conn)
{
	if (e2b_rpc_request(r, false, msg) < 0)
		return -1;
	if (e2b_rpc_sandbox(r, s, conn) < 0) {
		json_decref(*msg);
		return -1;
	}
	return 0;
}

/* Finishes a unary method: the error, or `ok` (stolen) as the response. */
static enum MHD_Result unary_end(struct api_req *r, json_t *msg, struct sandbox *s, int ret,
				 const struct isola_err *err, json_t *ok)
{
	enum MHD_Result res;

	json_decref(msg);
	sandbox_unref(s);
	if (ret < 0) {
		json_decref(ok);
		return e2b_rpc_err(r, err);
	}
	res = e2b_rpc_ok(r, ok ? ok : json_object());
	return res;
}

enum MHD_Result e2b_proc_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct sandbox *s;
	json_t *msg, *list = NULL, *out = NULL, *p;
	size_t i;
	int ret;

	if (unary_begin(r, &msg, &s, &conn) < 0)
		return MHD_YES;
	ret = agent_ps(conn, &list, &err);
	if (ret == 0) {
		json_t *procs = json_array();

		/* UNTRUSTED: the agent's list, re-encoded field by field. */
		json_array_foreach(list, i, p)
		{
			json_t *argv = json_object_get(p, "argv"), *args, *a, *info;
			const char *tag = json_string_value(json_object_get(p, "tag"));
			size_t k;

			if (!json_is_true(json_object_get(p, "running")) || !json_is_array(argv))
				continue;
			args = json_array();
			json_array_foreach(argv, k, a) if (k > 0 && json_is_string(a))
				json_array_append(args, a);
			info = json_pack("{s:{s:s, s:o, s:{}}, s:I}", "config", "cmd",
					 json_string_value(json_array_get(argv, 0))
						 ? json_string_value(json_array_get(argv, 0))
						 : "",
					 "args", args, "envs", "pid",
					 json_integer_value(json_object_get(p, "pid")));
			if (info && tag && *tag)
				json_object_set_new(info, "tag", json_string(tag));
			json_array_append_new(procs, info);
		}
		out = json_pack("{s:o}", "processes", procs);
	}
	json_decref(list);
	return unary_end(r, msg, s, ret, err, out);
}

/* Writes data to a process's stdin (and/or closes it) through an agent `stdin` op. */
static int send_stdin(struct api_req *r, struct agent_conn *conn, int pid, const uint8_t *data,
		      size_t len, bool close_after, struct isola_err **err)
{
	struct agent_chan *ch = NULL;
	json_t *req = json_pack("{s:s, s:i, s:b}", "op", "stdin", "pid", pid, "close", close_after);
	int ret = req ? agent_chan_open(conn, req, &ch, err) : -ENOMEM;

	json_decref(req);
	if (ret == 0 && len)
		ret = agent_chan_send_data(ch, data, len, err);
	if (ret == 0)
		ret = agent_chan_send_eof(ch, err);
	if (ret == 0)
		ret = api_chan_expect_result(ch, api_req_fd(r), E2B_CALL_MS, NULL, err);
	agent_chan_close(ch);
	return ret;
}

enum MHD_Result e2b_proc_send_input(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct sandbox *s;
	const json_t *in;
	uint8_t *data = NULL;
	size_t len = 0;
	json_t *msg;
	int pid = 0, ret;

	if (unary_begin(r, &msg, &s, &conn) < 0)
		return MHD_YES;
	in = e2b_jget(msg, "input", NULL);
	ret = select_pid(conn, msg, false, &pid, NULL, &err);
	if (ret == 0 && !json_is_object(in))
		ret = isola_err_set(&err, EINVAL, "invalid", "field `input` is required");
	if (ret == 0 && !e2b_jget(in, "stdin", NULL) && !e2b_jget(in, "pty", NULL))
		ret = isola_err_set(&err, EINVAL, "invalid", "`input` needs `stdin` or `pty`");
	if (ret == 0)
		ret = e2b_jbytes(in, e2b_jget(in, "stdin", NULL) ? "stdin" : "pty", NULL,
				 E2B_MAX_BODY, &data, &len, &err);
	if (ret == 0)
		ret = send_stdin(r, conn, pid, data, len, false, &err);
	free(data);
	return unary_end(r, msg, s, ret, err, NULL);
}

enum MHD_Result e2b_proc_close_stdin(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct sandbox *s;
	json_t *msg;
	int pid = 0, ret;

	if (unary_begin(r, &msg, &s, &conn) < 0)
		return MHD_YES;
	ret = select_pid(conn, msg, false, &pid, NULL, &err);
	if (ret == 0)
		ret = send_stdin(r, conn, pid, NULL, 0, true, &err);
	return unary_end(r, msg, s, ret, err, NULL);
}

/* Signal enum by name ("SIGNAL_SIGKILL") or number; 0 when unspecified. */
static int parse_signal(const json_t *msg, int *sig, struct isola_err **err)
{
	json_t *v = e2b_jget(msg, "signal", NULL);
	const char *s = json_string_value(v);

	if (json_is_integer(v)) {
		*sig = (int)json_integer_value(v);
	} else if (s && !strncmp(s, "SIGNAL_", 7)) {
		*sig = !strcmp(s + 7, "UNSPECIFIED") ? 0 : api_signal_from_name(s + 7);
	} else if (s) {
		*sig = api_signal_from_name(s);
	} else {
		*sig = 0;
	}
	if (*sig != SIGKILL && *sig != SIGTERM)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `signal` must be SIGNAL_SIGTERM or SIGNAL_SIGKILL");
	return 0;
}

enum MHD_Result e2b_proc_send_signal(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct sandbox *s;
	json_t *msg, *req = NULL;
	int pid = 0, sig = 0, ret;

	if (unary_begin(r, &msg, &s, &conn) < 0)
		return MHD_YES;
	ret = parse_signal(msg, &sig, &err);
	if (ret == 0)
		ret = select_pid(conn, msg, false, &pid, NULL, &err);
	if (ret == 0) {
		req = json_pack("{s:s, s:i, s:i}", "op", "signal", "pid", pid, "signal", sig);
		ret = req ? e2b_agent_call(conn, req, NULL, &err) : -ENOMEM;
		json_decref(req);
	}
	return unary_end(r, msg, s, ret, err, NULL);
}

enum MHD_Result e2b_proc_update(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct sandbox *s;
	const json_t *pty, *size;
	uint64_t cols = 0, rows = 0;
	json_t *msg, *req;
	int pid = 0, ret;

	if (unary_begin(r, &msg, &s, &conn) < 0)
		return MHD_YES;
	pty = e2b_jget(msg, "pty", NULL);
	size = pty ? e2b_jget(pty, "size", NULL) : NULL;
	ret = select_pid(conn, msg, false, &pid, NULL, &err);
	if (ret == 0 && size &&
	    (e2b_juint(size, "cols", NULL, 65535, &cols, &err) < 0 ||
	     e2b_juint(size, "rows", NULL, 65535, &rows, &err) < 0))
		ret = -EINVAL;
	if (ret == 0 && size) {
		if (!cols || !rows) {
			ret = isola_err_set(&err, EINVAL, "invalid",
					    "pty size must be at least 1x1");
		} else {
			req = json_pack("{s:s, s:i, s:I, s:I}", "op", "resize", "pid", pid, "cols",
					(json_int_t)cols, "rows", (json_int_t)rows);
			ret = req ? e2b_agent_call(conn, req, NULL, &err) : -ENOMEM;
			json_decref(req);
		}
	}
	return unary_end(r, msg, s, ret, err, NULL);
}
