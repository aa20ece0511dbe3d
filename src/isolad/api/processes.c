/* SPDX-License-Identifier: Apache-2.0 */
/* processes: background processes — start, list, output, stdin, signal, resize, wait. */
#include "api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define PROC_CALL_TIMEOUT_MS 30000

static int req_pid(struct api_req *r)
{
	int pid = 0;

	api_parse_pid(api_match_get(&r->match, "pid"), &pid); /* validated by the router */
	return pid;
}

/* One-shot agent op on the sandbox of {id}; *result may be NULL. Responds on failure. */
static int proc_call(struct api_req *r, json_t *req, json_t **result, struct isola_err **err)
{
	struct agent_conn *conn;
	struct sandbox *s;
	int ret;

	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	ret = api_sandbox_agent(r, &s, &conn, err);
	if (ret == 0) {
		json_t *res = NULL;

		ret = agent_call(conn, req, PROC_CALL_TIMEOUT_MS, &res, err);
		if (result)
			*result = res;
		else
			json_decref(res);
		sandbox_unref(s);
	}
	json_decref(req);
	return ret;
}

static const char *const start_fields[] = {
	"cmd",	"command", "env",     "cwd", "user",	       "tty",
	"cols", "rows",	   "timeout", "tag", API_SPAWN_FIELDS, NULL,
};

enum MHD_Result api_proc_start(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *cwd = NULL, *user = NULL, *tag = NULL;
	const json_t *env = NULL;
	uint64_t cols = 80, rows = 24;
	double timeout = 0;
	bool tty = false;
	json_t *argv = NULL, *req, *res = NULL, *out;
	struct agent_conn *conn;
	struct agent_chan *ch = NULL;
	struct sandbox *s;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing JSON body with `cmd`");
	/* UNTRUSTED: the client's JSON body. */
	if (api_json_only(r->json, start_fields, &err) < 0 ||
	    api_json_str_map(r->json, "env", true, &env, &err) < 0 ||
	    api_json_str(r->json, "cwd", API_MAX_PATH, &cwd, &err) < 0 ||
	    api_json_str(r->json, "user", 64, &user, &err) < 0 ||
	    api_json_str(r->json, "tag", 64, &tag, &err) < 0 ||
	    api_json_bool(r->json, "tty", &tty, &err) < 0 ||
	    api_json_uint(r->json, "cols", 65535, &cols, &err) < 0 ||
	    api_json_uint(r->json, "rows", 65535, &rows, &err) < 0 ||
	    api_json_num(r->json, "timeout", 0, 366 * 86400.0, &timeout, &err) < 0 ||
	    api_json_argv(r->json, &argv, &err) < 0)
		return api_respond_err(r, err);
	if (!cols || !rows) {
		json_decref(argv);
		return api_respond_error(r, "invalid", "`cols` and `rows` must be at least 1");
	}
	req = json_pack("{s:s, s:O, s:b, s:I, s:I, s:b, s:b, s:I}", "op", "exec", "argv", argv,
			"tty", tty, "cols", (json_int_t)cols, "rows", (json_int_t)rows, "stdin", 1,
			"background", 1, "timeout_ms", (json_int_t)(timeout * 1000.0));
	if (!req) {
		json_decref(argv);
		return MHD_NO;
	}
	if (env)
		json_object_set(req, "env", (json_t *)env);
	if (cwd)
		json_object_set_new(req, "cwd", json_string(cwd));
	if (user)
		json_object_set_new(req, "user", json_string(user));
	if (tag)
		json_object_set_new(req, "tag", json_string(tag));
	if (api_spawn_narrowing(r->json, req, &err) < 0 ||
	    api_sandbox_agent(r, &s, &conn, &err) < 0) {
		json_decref(req);
		json_decref(argv);
		return api_respond_err(r, err);
	}
	sandbox_apply_exec_defaults(s, req);
	api_exec_set_oom_base(s, req);
	if (agent_chan_open(conn, req, &ch, &err) == 0)
		api_chan_expect_result(ch, api_req_fd(r), PROC_CALL_TIMEOUT_MS, &res, &err);
	agent_chan_close(ch);
	api_metrics_exec("process");
	{
		/* A background command: audited when it starts, and when it ends (procwatch). */
		json_t *d = json_pack("{s:O, s:s, s:b, s:O}", "argv", argv, "user",
				      json_string_value(json_object_get(req, "user")) ?: "",
				      "background", 1, "pid",
				      res ? json_object_get(res, "pid") : json_null());

		api_audit(r, "command.start", sandbox_id(s), res ? "ok" : "error", d);
		json_decref(d);
		if (res)
			api_procwatch_start(r, s, argv,
					    json_string_value(json_object_get(req, "user")),
					    (long)json_integer_value(json_object_get(res, "pid")));
	}
	sandbox_unref(s);
	json_decref(req);
	if (!res) {
		json_decref(argv);
		return api_respond_err(r, err);
	}
	out = json_pack("{s:O, s:o, s:b, s:s, s:b}", "pid", json_object_get(res, "pid"), "argv",
			argv, "tty", tty, "tag", tag ? tag : "", "running", 1);
	json_decref(res);
	return api_respond_json(r, 201, out);
}

/* The agent's process list (UNTRUSTED: passed through as JSON values, re-encoded). */
static int proc_list(struct api_req *r, json_t **list, struct isola_err **err)
{
	json_t *res = NULL;
	int ret = proc_call(r, json_pack("{s:s}", "op", "ps"), &res, err);

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

enum MHD_Result api_proc_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list;

	if (proc_list(r, &list, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, json_pack("{s:o}", "processes", list));
}

enum MHD_Result api_proc_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	int pid = req_pid(r);
	json_t *list, *p, *found = NULL;
	size_t i;

	if (proc_list(r, &list, &err) < 0)
		return api_respond_err(r, err);
	json_array_foreach(list, i, p) if (json_integer_value(json_object_get(p, "pid")) == pid)
		found = json_incref(p);
	json_decref(list);
	if (!found)
		return api_respond_error(r, "not_found", "no process %d in sandbox `%s`", pid,
					 api_match_get(&r->match, "id"));
	return api_respond_json(r, 200, found);
}

enum MHD_Result api_proc_output(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *fq = api_query(r, "follow");
	bool follow = false;
	struct agent_conn *conn;
	struct agent_chan *ch = NULL;
	struct sandbox *s;
	struct api_output *o;
	enum api_fmt fmt;
	json_t *req;
	enum MHD_Result ret;

	if (fq && api_parse_bool(fq, &follow) < 0)
		return api_respond_error(r, "invalid", "query `follow` must be true or false");
	if (api_req_format(r, &fmt, &err) < 0)
		return api_respond_err(r, err);
	if (api_sandbox_agent(r, &s, &conn, &err) < 0)
		return api_respond_err(r, err);
	req = json_pack("{s:s, s:i, s:b}", "op", "attach", "pid", req_pid(r), "stdin", 0);
	if (!req || agent_chan_open(conn, req, &ch, &err) < 0) {
		json_decref(req);
		sandbox_unref(s);
		return err ? api_respond_err(r, err) : MHD_NO;
	}
	json_decref(req);
	o = api_output_new(r, s, ch);
	if (!o)
		return MHD_NO;
	if (api_chan_expect_result(o->ch, o->peer_fd, PROC_CALL_TIMEOUT_MS, NULL, &err) < 0) {
		ret = api_respond_err(r, err);
		api_output_free(o);
		return ret;
	}
	o->pid = req_pid(r);
	/* Without follow: the buffered tail, ending once the agent has nothing more to send
	 * for 200 ms (or at exit). The protocol has no end-of-tail marker yet. */
	if (!follow)
		o->quiet_ms = 200;
	o->cap = API_MAX_OUTPUT;
	return api_output_respond(r, o, fmt);
}

/* Streamed stdin: an agent `stdin` channel fed as the body arrives. */
struct stdin_state {
	struct sandbox *s;     /* reference */
	struct agent_chan *ch; /* owned */
};

static void stdin_state_free(void *p)
{
	struct stdin_state *st = p;

	if (!st)
		return;
	agent_chan_close(st->ch);
	if (st->s)
		sandbox_unref(st->s);
	free(st);
}

int api_proc_stdin_begin(struct api_req *r)
{
	struct isola_err *err = NULL;
	const char *cq = api_query(r, "close");
	bool close_after = false;
	struct agent_conn *conn;
	struct stdin_state *st;
	json_t *req;

	if (cq && api_parse_bool(cq, &close_after) < 0) {
		isola_err_set(&err, EINVAL, "invalid", "query `close` must be true or false");
		return api_req_fail(r, err);
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	r->state = st;
	r->state_free = stdin_state_free;
	if (api_sandbox_agent(r, &st->s, &conn, &err) < 0)
		return api_req_fail(r, err);
	req = json_pack("{s:s, s:i, s:b}", "op", "stdin", "pid", req_pid(r), "close", close_after);
	if (!req) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	if (agent_chan_open(conn, req, &st->ch, &err) < 0) {
		json_decref(req);
		return api_req_fail(r, err);
	}
	json_decref(req);
	return 0;
}

/* Returns -errno with *err when the agent already ended the channel with an ERROR. */
static int early_error(struct agent_chan *ch, struct isola_err **err)
{
	struct agent_msg m = {0};
	int r = agent_chan_recv(ch, &m, 0, err);

	if (r == -ETIMEDOUT) {
		isola_err_free(*err);
		*err = NULL;
		return 0;
	}
	if (r < 0)
		return r;
	if (m.type == PROTO_ERROR)
		r = agent_error_to_err(m.json, err);
	else
		r = isola_err_set(err, EPROTO, "internal",
				  "unexpected frame type %u from the agent", m.type);
	agent_msg_fini(&m);
	return r;
}

int api_proc_stdin_data(struct api_req *r, const char *buf, size_t len)
{
	struct stdin_state *st = r->state;
	struct isola_err *err = NULL;

	if (early_error(st->ch, &err) < 0 || agent_chan_send_data(st->ch, buf, len, &err) < 0)
		return api_req_fail(r, err);
	return 0;
}

enum MHD_Result api_proc_stdin_end(struct api_req *r)
{
	struct stdin_state *st = r->state;
	cleanup_err struct isola_err *err = NULL;
	json_t *res = NULL;

	if (agent_chan_send_eof(st->ch, &err) < 0 ||
	    api_chan_expect_result(st->ch, api_req_fd(r), PROC_CALL_TIMEOUT_MS, &res, &err) < 0)
		return api_respond_err(r, err);
	json_decref(res);
	return api_respond_json(r, 200, json_pack("{s:I}", "bytes", (json_int_t)r->uploaded));
}

enum MHD_Result api_proc_close_stdin(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct agent_chan *ch = NULL;
	struct sandbox *s;
	json_t *req;
	int ret;

	if (api_sandbox_agent(r, &s, &conn, &err) < 0)
		return api_respond_err(r, err);
	req = json_pack("{s:s, s:i, s:b}", "op", "stdin", "pid", req_pid(r), "close", 1);
	ret = req ? agent_chan_open(conn, req, &ch, &err) : -ENOMEM;
	json_decref(req);
	if (ret == 0)
		ret = agent_chan_send_eof(ch, &err);
	if (ret == 0)
		ret = api_chan_expect_result(ch, api_req_fd(r), PROC_CALL_TIMEOUT_MS, NULL, &err);
	agent_chan_close(ch);
	sandbox_unref(s);
	if (ret < 0)
		return err ? api_respond_err(r, err) : MHD_NO;
	return api_respond_empty(r, 204);
}

enum MHD_Result api_proc_signal(struct api_req *r)
{
	static const char *const fields[] = {"signal", NULL};
	cleanup_err struct isola_err *err = NULL;
	int sig;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing field `signal`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_signal(r->json, "signal", &sig, &err) < 0 ||
	    proc_call(
		    r,
		    json_pack("{s:s, s:i, s:i}", "op", "signal", "pid", req_pid(r), "signal", sig),
		    NULL, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}

enum MHD_Result api_proc_resize(struct api_req *r)
{
	static const char *const fields[] = {"cols", "rows", NULL};
	cleanup_err struct isola_err *err = NULL;
	uint64_t cols = 0, rows = 0;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing fields `cols` and `rows`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_uint(r->json, "cols", 65535, &cols, &err) < 0 ||
	    api_json_uint(r->json, "rows", 65535, &rows, &err) < 0)
		return api_respond_err(r, err);
	if (!cols || !rows)
		return api_respond_error(r, "invalid", "`cols` and `rows` must be 1-65535");
	if (proc_call(r,
		      json_pack("{s:s, s:i, s:I, s:I}", "op", "resize", "pid", req_pid(r), "cols",
				(json_int_t)cols, "rows", (json_int_t)rows),
		      NULL, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}

enum MHD_Result api_proc_wait(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *tq = api_query(r, "timeout");
	uint64_t timeout_ms = UINT64_MAX, start = util_now_ms();
	struct agent_conn *conn;
	struct agent_chan *ch = NULL;
	struct agent_msg m = {0};
	struct sandbox *s;
	json_t *req, *ex;
	bool oom;
	int ret;

	if (tq && api_parse_seconds_ms(tq, 366ull * 86400 * 1000, &timeout_ms) < 0)
		return api_respond_error(r, "invalid", "query `timeout` must be seconds (>= 0)");
	if (api_sandbox_agent(r, &s, &conn, &err) < 0)
		return api_respond_err(r, err);
	req = json_pack("{s:s, s:i}", "op", "wait", "pid", req_pid(r));
	ret = req ? agent_chan_open(conn, req, &ch, &err) : -ENOMEM;
	json_decref(req);
	while (ret == 0) {
		ret = agent_chan_recv(ch, &m, API_POLL_MS, &err);
		if (ret != -ETIMEDOUT)
			break;
		isola_err_free(err);
		err = NULL;
		if (api_fd_peer_gone(api_req_fd(r)) || api_server_is_stopping(r->srv)) {
			ret = -ECONNABORTED;
			break;
		}
		if (util_now_ms() - start >= timeout_ms) {
			ret = isola_err_set(&err, ETIMEDOUT, "timeout",
					    "process %d still running after the timeout",
					    req_pid(r));
			break;
		}
		ret = 0;
	}
	agent_chan_close(ch);
	oom = ret == 0 && m.type == PROTO_EXIT && api_exit_oom(s, m.json, -1);
	sandbox_unref(s);
	api_req_keepalive(r);
	if (ret == -ECONNABORTED)
		return MHD_NO;
	if (ret < 0)
		return err ? api_respond_err(r, err) : MHD_NO;
	if (m.type == PROTO_ERROR) {
		agent_error_to_err(m.json, &err);
		agent_msg_fini(&m);
		return api_respond_err(r, err);
	}
	if (m.type != PROTO_EXIT) {
		agent_msg_fini(&m);
		return api_respond_error(r, "internal", "unexpected frame type from the agent");
	}
	ex = api_exit_json(m.json, oom);
	if (ex)
		json_object_set_new(ex, "pid", json_integer(req_pid(r)));
	agent_msg_fini(&m);
	api_audit(r, "command.exit", api_match_get(&r->match, "id"), "ok", ex);
	return api_respond_json(r, 200, ex);
}
