/* SPDX-License-Identifier: Apache-2.0 */
/* exec: POST /v1/sandboxes/{id}/exec, and the output pump shared with attach and processes. */
#include "api-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

static int64_t jint(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

json_t *api_exit_json(const json_t *e, bool oom_killed)
{
	/* UNTRUSTED: the agent's EXIT frame; only typed fields are copied. */
	return json_pack("{s:I, s:I, s:b, s:b, s:I}", "exit_code", (json_int_t)jint(e, "exit_code"),
			 "signal", (json_int_t)jint(e, "signal"), "timed_out",
			 json_is_true(json_object_get(e, "timed_out")), "oom_killed", oom_killed,
			 "duration_ms", (json_int_t)jint(e, "duration_ms"));
}

int api_chan_expect_result(struct agent_chan *ch, int peer_fd, int timeout_ms, json_t **result,
			   struct isola_err **err)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : util_now_ms() + (uint64_t)timeout_ms;
	struct agent_msg m = {0};
	int r;

	for (;;) {
		r = agent_chan_recv(ch, &m, API_POLL_MS, err);
		if (r == -ETIMEDOUT) {
			if (err && *err) {
				isola_err_free(*err);
				*err = NULL;
			}
			if (api_fd_peer_gone(peer_fd))
				return isola_err_set(err, ECONNABORTED, "internal",
						     "client went away");
			if (util_now_ms() >= deadline)
				return isola_err_set(err, ETIMEDOUT, "timeout",
						     "the sandbox agent did not answer in time");
			continue;
		}
		if (r < 0)
			return r;
		break;
	}
	if (m.type == PROTO_RESULT) {
		if (result)
			*result = m.json ? json_incref(m.json) : json_object();
		agent_msg_fini(&m);
		return 0;
	}
	if (m.type == PROTO_ERROR) {
		r = agent_error_to_err(m.json, err);
		agent_msg_fini(&m);
		return r;
	}
	agent_msg_fini(&m);
	return isola_err_set(err, EPROTO, "internal", "unexpected frame type %u from the agent",
			     m.type);
}

struct api_output *api_output_new(struct api_req *r, struct sandbox *s, struct agent_chan *ch)
{
	struct api_output *o = calloc(1, sizeof(*o));

	if (!o || !(o->dropped = json_array())) {
		free(o);
		agent_chan_close(ch);
		sandbox_unref(s);
		return NULL;
	}
	o->srv = r->srv;
	o->s = s;
	o->ch = ch;
	o->peer_fd = api_req_fd(r);
	o->cap = API_DEFAULT_OUTPUT;
	return o;
}

void api_output_free(void *p)
{
	struct api_output *o = p;

	if (!o)
		return;
	if (o->audit_argv) /* the command's end was not seen (client gone, agent failed) */
		api_audit_command(o->srv, &o->who, sandbox_id(o->s), o->audit_argv, o->audit_user,
				  o->pid, NULL, o->started_ms);
	json_decref(o->audit_argv);
	agent_chan_close(o->ch);
	sandbox_unref(o->s);
	api_buf_fini(&o->out[0]);
	api_buf_fini(&o->out[1]);
	json_decref(o->exit);
	json_decref(o->dropped);
	json_decref(o->error);
	free(o);
}

bool api_exit_oom(struct sandbox *s, const json_t *e, int64_t fallback_base)
{
	/* UNTRUSTED: oom_base comes back from the agent. A lying agent can only misreport
	 * its own command's end. */
	json_t *b = json_object_get(e, "oom_base");
	int64_t base = json_is_integer(b) && json_integer_value(b) >= 0
			       ? (int64_t)json_integer_value(b)
			       : fallback_base;
	struct tier_stats st;
	cleanup_err struct isola_err *err = NULL;

	/* Any process of the command counts, not only the one whose status this is: under
	 * `sh -c 'dd ...; echo rc=$?'` the kernel kills dd and sh exits 0. The counter is the
	 * sandbox cgroup's (v2 memory.events, v1 memory.oom_control oom_kill; the microvm
	 * guest's vmstat), so a kill of another command running at the same time in the same
	 * sandbox counts too (docs/process-tier.md "oom_killed"). */
	if (base < 0)
		return false;
	if (sandbox_stats(s, &st, &err) < 0)
		return false;
	return st.oom_kills > (uint64_t)base;
}

void api_exec_set_oom_base(struct sandbox *s, json_t *req)
{
	struct tier_stats st;

	if (sandbox_stats(s, &st, NULL) == 0)
		json_object_set_new(req, "oom_base", json_integer((json_int_t)st.oom_kills));
}

static bool oom_killed(struct api_output *o, const json_t *e)
{
	return api_exit_oom(o->s, e, o->check_oom ? (int64_t)o->oom_before : -1);
}

/*
 * Waits for the next frame. -ECONNABORTED when the client went away or the server stops,
 * -ENODATA at a quiet end (no follow), other -errno with *err when the agent failed.
 */
static int output_recv(struct api_output *o, struct agent_msg *m, struct isola_err **err)
{
	uint64_t last = util_now_ms();
	int r;

	for (;;) {
		int wait = API_POLL_MS;

		if (o->quiet_ms > 0 && o->quiet_ms < wait)
			wait = o->quiet_ms;
		r = agent_chan_recv(o->ch, m, wait, err);
		if (r != -ETIMEDOUT)
			return r;
		if (*err) {
			isola_err_free(*err);
			*err = NULL;
		}
		if (api_fd_peer_gone(o->peer_fd) || api_server_is_stopping(o->srv))
			return -ECONNABORTED;
		if (o->quiet_ms > 0 && util_now_ms() - last >= (uint64_t)o->quiet_ms)
			return -ENODATA;
	}
}

/* Turns one frame into an event (streamed) or into the collected state (JSON). Returns the
 * event (new reference) or NULL when the frame yields none. */
static json_t *output_event(struct api_output *o, struct agent_msg *m, bool collect)
{
	switch (m->type) {
	case PROTO_STDOUT:
	case PROTO_STDERR: {
		int i = m->type == PROTO_STDERR;

		o->bytes[i] += m->len;
		if (collect) {
			size_t keep = o->out[i].len < o->cap ? o->cap - o->out[i].len : 0;

			if (keep > m->len)
				keep = m->len;
			if (keep && api_buf_append(&o->out[i], m->data, keep) < 0)
				return NULL;
			return NULL;
		}
		return json_pack("{s:s, s:o}", "type", i ? "stderr" : "stdout", "data",
				 api_b64_json(m->data, m->len));
	}
	case PROTO_DROPPED: {
		/* UNTRUSTED: agent JSON; the stream name is one of ours. */
		const char *sn = json_string_value(json_object_get(m->json, "stream"));
		json_t *ev = json_pack("{s:s, s:s, s:I}", "type", "dropped", "stream",
				       sn && !strcmp(sn, "stderr") ? "stderr" : "stdout", "bytes",
				       (json_int_t)jint(m->json, "bytes"));

		if (collect) {
			json_array_append_new(o->dropped, ev);
			return NULL;
		}
		return ev;
	}
	case PROTO_EXIT: {
		json_t *ex = api_exit_json(m->json, oom_killed(o, m->json));

		o->ended = true;
		if (o->audit_argv) {
			api_audit_command(o->srv, &o->who, sandbox_id(o->s), o->audit_argv,
					  o->audit_user, o->pid, ex, o->started_ms);
			json_decref(o->audit_argv);
			o->audit_argv = NULL;
		}
		if (collect) {
			o->exit = ex;
			return NULL;
		}
		if (ex)
			json_object_set_new(ex, "type", json_string("exit"));
		return ex;
	}
	case PROTO_ERROR: {
		cleanup_err struct isola_err *e = NULL;
		json_t *ev;

		agent_error_to_err(m->json, &e);
		o->ended = true;
		ev = json_pack("{s:s, s:s, s:s}", "type", "error", "code", e ? e->code : "internal",
			       "message", e && e->message ? e->message : "agent error");
		if (collect) {
			o->error = ev;
			return NULL;
		}
		return ev;
	}
	case PROTO_RESULT:
		if (!o->pid && json_is_integer(json_object_get(m->json, "pid")))
			o->pid = (long)jint(m->json, "pid");
		return NULL;
	default:
		return NULL;
	}
}

static json_t *error_event(const struct isola_err *e)
{
	return json_pack("{s:s, s:s, s:s}", "type", "error", "code", e ? e->code : "internal",
			 "message", e && e->message ? e->message : "error");
}

static int output_produce(struct api_stream *st, void *ud)
{
	struct api_output *o = ud;
	cleanup_err struct isola_err *err = NULL;
	struct agent_msg m = {0};
	json_t *ev;
	int r;

	if (o->ended)
		return 1;
	if (!o->start_sent) {
		o->start_sent = true;
		return api_stream_event(st, json_pack("{s:s, s:I}", "type", "start", "pid",
						      (json_int_t)o->pid)) < 0
			       ? -1
			       : 0;
	}
	r = output_recv(o, &m, &err);
	if (r == -ECONNABORTED)
		return -1;
	if (r == -ENODATA)
		return 1;
	if (r < 0) {
		o->ended = true;
		return api_stream_event(st, error_event(err)) < 0 ? -1 : 0;
	}
	ev = output_event(o, &m, false);
	agent_msg_fini(&m);
	if (ev && api_stream_event(st, ev) < 0)
		return -1;
	return 0;
}

static json_t *collected_json(struct api_output *o)
{
	bool valid[2] = {true, true};
	json_t *j = json_object();

	if (!j)
		return NULL;
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "stderr" : "stdout";
		char key[32];

		json_object_set_new(j, name,
				    api_utf8_json(o->out[i].data, o->out[i].len, &valid[i]));
		snprintf(key, sizeof(key), "%s_truncated", name);
		json_object_set_new(j, key, json_boolean(o->bytes[i] > o->out[i].len));
		snprintf(key, sizeof(key), "%s_bytes", name);
		json_object_set_new(j, key, json_integer((json_int_t)o->bytes[i]));
		if (!valid[i]) {
			snprintf(key, sizeof(key), "%s_b64", name);
			json_object_set_new(j, key, api_b64_json(o->out[i].data, o->out[i].len));
		}
	}
	return j;
}

enum MHD_Result api_output_respond(struct api_req *r, struct api_output *o, enum api_fmt fmt)
{
	cleanup_err struct isola_err *err = NULL;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	json_t *j;

	if (fmt != API_FMT_JSON) {
		resp = api_stream_response(r, fmt, MHD_SIZE_UNKNOWN, output_produce, o,
					   api_output_free);
		return resp ? api_respond_response(r, 200, resp) : MHD_NO;
	}
	while (!o->ended) {
		struct agent_msg m = {0};
		int q = output_recv(o, &m, &err);

		if (q == -ECONNABORTED) {
			api_output_free(o);
			return MHD_NO;
		}
		if (q == -ENODATA)
			break;
		if (q < 0) {
			ret = api_respond_err(r, err);
			api_output_free(o);
			return ret;
		}
		output_event(o, &m, true);
		agent_msg_fini(&m);
	}
	api_req_keepalive(r);
	if (o->error) {
		const char *code = json_string_value(json_object_get(o->error, "code"));

		json_object_del(o->error, "type");
		ret = api_respond_json(r, api_status_for_code(code), json_incref(o->error));
		api_output_free(o);
		return ret;
	}
	j = collected_json(o);
	if (j && json_array_size(o->dropped))
		json_object_set(j, "dropped", o->dropped);
	if (j && o->exit)
		json_object_update(j, o->exit);
	api_output_free(o);
	return api_respond_json(r, 200, j);
}

static const char *const exec_fields[] = {
	"cmd",	      "command",	"env", "cwd", "user", "timeout", "stdin",
	"max_output", API_SPAWN_FIELDS, NULL,
};

/* Builds the agent request. UNTRUSTED: the client's JSON body. */
static int parse_exec(const json_t *b, json_t **req, const char **stdin_data, size_t *stdin_len,
		      uint64_t *max_output, struct isola_err **err)
{
	const char *cwd = NULL, *user = NULL, *in = NULL;
	const json_t *env = NULL;
	double timeout = 0;
	json_t *argv = NULL;

	*max_output = API_DEFAULT_OUTPUT;
	if (api_json_only(b, exec_fields, err) < 0 ||
	    api_json_str_map(b, "env", true, &env, err) < 0 ||
	    api_json_str(b, "cwd", API_MAX_PATH, &cwd, err) < 0 ||
	    api_json_str(b, "user", 64, &user, err) < 0 ||
	    api_json_num(b, "timeout", 0, 31 * 86400.0, &timeout, err) < 0 ||
	    api_json_uint(b, "max_output", API_MAX_OUTPUT, max_output, err) < 0)
		return -EINVAL;
	if (json_object_get(b, "stdin")) {
		json_t *v = json_object_get(b, "stdin");

		if (!json_is_string(v))
			return isola_err_set(err, EINVAL, "invalid",
					     "field `stdin` must be a string");
		/* Sent before the output is read: it must fit in the channel's initial credit,
		 * or a command that writes before it reads would stall both sides. */
		if (json_string_length(v) > PROTO_WINDOW)
			return isola_err_set(
				err, E2BIG, "too_large",
				"field `stdin` is larger than %u bytes; use a background "
				"process and POST .../stdin",
				PROTO_WINDOW);
		in = json_string_value(v);
		*stdin_len = json_string_length(v);
	}
	if (api_json_argv(b, &argv, err) < 0)
		return -EINVAL;
	*req = json_pack("{s:s, s:o, s:b, s:b, s:b, s:I}", "op", "exec", "argv", argv, "tty", 0,
			 "stdin", in != NULL, "background", 0, "timeout_ms",
			 (json_int_t)(timeout * 1000.0));
	if (!*req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (env)
		json_object_set(*req, "env", (json_t *)env);
	if (cwd)
		json_object_set_new(*req, "cwd", json_string(cwd));
	if (user)
		json_object_set_new(*req, "user", json_string(user));
	if (api_spawn_narrowing(b, *req, err) < 0) {
		json_decref(*req);
		*req = NULL;
		return -EINVAL;
	}
	*stdin_data = in;
	return 0;
}

enum MHD_Result api_exec(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *in = NULL;
	size_t in_len = 0;
	uint64_t max_output;
	struct agent_conn *conn;
	struct agent_chan *ch = NULL;
	struct sandbox *s = NULL;
	struct api_output *o;
	struct tier_stats st;
	json_t *req = NULL, *res = NULL;
	enum api_fmt fmt;
	enum MHD_Result ret;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing JSON body with `cmd`");
	if (api_req_format(r, &fmt, &err) < 0 ||
	    parse_exec(r->json, &req, &in, &in_len, &max_output, &err) < 0)
		return api_respond_err(r, err);
	if (api_sandbox_agent(r, &s, &conn, &err) < 0)
		goto fail;
	sandbox_apply_exec_defaults(s, req);
	api_exec_set_oom_base(s, req);
	if (agent_chan_open(conn, req, &ch, &err) < 0)
		goto fail;
	o = api_output_new(r, s, ch);
	s = NULL;
	ch = NULL;
	if (!o) {
		json_decref(req);
		return MHD_NO;
	}
	/* Every command is audited: argv and user now, exit status and duration at its end;
	 * never its output. */
	api_metrics_exec("exec");
	o->who = r->who;
	o->started_ms = util_now_ms();
	o->audit_argv = json_incref(json_object_get(req, "argv"));
	snprintf(o->audit_user, sizeof(o->audit_user), "%s",
		 json_string_value(json_object_get(req, "user")) ?: "");
	o->cap = (size_t)max_output;
	if (sandbox_stats(o->s, &st, NULL) == 0) {
		o->check_oom = true;
		o->oom_before = st.oom_kills;
	}
	json_decref(req);
	if (api_chan_expect_result(o->ch, o->peer_fd, 60000, &res, &err) < 0)
		goto fail_output;
	o->pid = (long)jint(res, "pid");
	json_decref(res);
	if (in) {
		if ((in_len && agent_chan_send_data(o->ch, in, in_len, &err) < 0) ||
		    agent_chan_send_eof(o->ch, &err) < 0)
			goto fail_output;
	}
	return api_output_respond(r, o, fmt);

fail_output:
	ret = api_respond_err(r, err);
	api_output_free(o);
	return ret;
fail:
	json_decref(req);
	agent_chan_close(ch);
	if (s)
		sandbox_unref(s);
	return api_respond_err(r, err);
}
