/* SPDX-License-Identifier: Apache-2.0 */
/* server: the transport-independent MCP core — dispatch, worker threads, cancellation, progress. */
#include "mcp.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/util.h"
#include "../cli.h"
#include "../parse.h"

/*
 * The core knows no transport: a transport (stdio.c in the CLI, src/isolad/api/mcphttp.c in
 * isolad) parses messages and hands each one to mcp_handle(); everything that leaves goes
 * through s->ops. mcp_handle() answers initialize, ping, tools/list and the notifications
 * on the calling thread and hands each tools/call, resources/list and resources/read to a
 * new worker thread, so a slow command never holds up another request.
 */

enum { KIND_TOOL, KIND_RES_LIST, KIND_RES_READ };

/* Protocol versions this server speaks, newest first. */
static const char *const mcp_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

static long long mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

void mcp_log(struct mcp_session *s, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (s->ops && s->ops->log)
		s->ops->log(s, line);
	else
		fprintf(stderr, "isola mcp: %s\n", line);
}

void mcp_send(struct mcp_session *s, json_t *msg)
{
	char *str = msg ? json_dumps(msg, JSON_COMPACT) : NULL;

	if (!str) {
		json_decref(msg);
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (!s->out_broken && s->ops->send(s, msg, str, strlen(str)) < 0)
		s->out_broken = true;
	pthread_mutex_unlock(&s->lock);
	json_decref(msg);
	free(str);
}

static void send_result(struct mcp_session *s, json_t *id, json_t *result)
{
	mcp_send(s, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ?: json_null(),
			      "result", result));
}

void mcp_send_error(struct mcp_session *s, json_t *id, int code, const char *message)
{
	mcp_send(s, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ?: json_null(),
			      "error", "code", code, "message", message));
}

bool mcp_version_known(const char *v)
{
	for (size_t i = 0; v && i < ARRAY_SIZE(mcp_versions); i++)
		if (!strcmp(v, mcp_versions[i]))
			return true;
	return false;
}

static json_t *initialize_result(json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = mcp_versions[0];

	for (size_t i = 0; want && i < ARRAY_SIZE(mcp_versions); i++)
		if (!strcmp(want, mcp_versions[i]))
			version = mcp_versions[i];
	return json_pack(
		"{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
		version, "capabilities", "tools", "listChanged", 0, "resources", "listChanged", 0,
		"subscribe", 0, "serverInfo", "name", "isola", "title", "isola sandboxes",
		"version", ISOLA_VERSION, "instructions",
		"Tools to run untrusted code in isola sandboxes. Every tool without sandbox_id "
		"works in this session's default sandbox, created on first use; sandbox_create "
		"makes more. Long command output is cut to head and tail and saved whole in the "
		"sandbox: page through it with sandbox_read_file.");
}

static json_t *tools_list_result(void)
{
	json_t *tools = json_array();

	for (size_t i = 0; tools && i < mcp_ntools; i++) {
		const struct mcp_tool *t = &mcp_tools[i];
		json_error_t jerr;
		json_t *in = json_loads(t->input_schema, 0, &jerr), *tool;

		if (!in) {
			/* A programming error in table.c; tests/mcp lists every tool. */
			fprintf(stderr, "isola mcp: schema of %s: %s\n", t->name, jerr.text);
			in = json_pack("{s:s}", "type", "object");
		}
		tool = json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name",
				 t->name, "title", t->title, "description", t->description,
				 "inputSchema", in, "annotations", "title", t->title,
				 "readOnlyHint", !!(t->hints & MCP_HINT_READONLY),
				 "destructiveHint", !!(t->hints & MCP_HINT_DESTRUCTIVE),
				 "idempotentHint", !!(t->hints & MCP_HINT_IDEMPOTENT),
				 "openWorldHint", !!(t->hints & MCP_HINT_OPENWORLD));
		if (tool && t->output_schema)
			json_object_set_new(tool, "outputSchema",
					    json_loads(t->output_schema, 0, NULL));
		json_array_append_new(tools, tool);
	}
	return json_pack("{s:o}", "tools", tools);
}

/* Runs one tools/call on the worker; returns the result to send, or NULL after an error sent. */
static json_t *tools_call(struct mcp_call *c)
{
	const char *name = json_string_value(json_object_get(c->params, "name"));
	json_t *args = json_object_get(c->params, "arguments"), *empty = NULL, *out;
	cleanup_err struct isola_err *err = NULL;
	struct mcp_result res = {0};
	const struct mcp_tool *tool = NULL;
	int r;

	for (size_t i = 0; name && i < mcp_ntools; i++)
		if (!strcmp(name, mcp_tools[i].name))
			tool = &mcp_tools[i];
	if (!tool) {
		cleanup_free char *msg = NULL;

		if (asprintf(&msg, "unknown tool `%s`", name ?: "") < 0)
			msg = NULL;
		mcp_send_error(c->s, c->id, RPC_INVALID_PARAMS, msg ?: "unknown tool");
		return NULL;
	}
	if (!args || json_is_null(args))
		args = empty = json_object();
	if (!json_is_object(args)) {
		mcp_send_error(c->s, c->id, RPC_INVALID_PARAMS, "`arguments` must be an object");
		return NULL;
	}
	r = tool->fn(c, args, &res, &err);
	json_decref(empty);
	if (r < 0 && err && !strcmp(err->code, MCP_ERR_PARAMS)) {
		cleanup_free char *msg = NULL;

		if (asprintf(&msg, "%s: %s", tool->name, err->message) < 0)
			msg = NULL;
		mcp_send_error(c->s, c->id, RPC_INVALID_PARAMS, msg ?: err->message);
		json_decref(res.data);
		json_decref(res.content);
		free(res.text);
		return NULL;
	}
	if (r < 0) {
		/* An API refusal is a tool result the model can read and act on. */
		free(res.text);
		if (asprintf(&res.text, "isola: %s (%s)",
			     err && err->message ? err->message : "error",
			     err ? err->code : "internal") < 0)
			res.text = NULL;
		json_decref(res.data);
		res.data = NULL;
		res.is_error = true;
	}
	out = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", res.text ?: "",
			"isError", res.is_error);
	if (out && res.data)
		json_object_set(out, "structuredContent", res.data);
	if (out && res.content)
		json_array_extend(json_object_get(out, "content"), res.content);
	json_decref(res.data);
	json_decref(res.content);
	free(res.text);
	return out;
}

static void call_free(struct mcp_call *c)
{
	json_decref(c->id);
	json_decref(c->params);
	if (c->client)
		client_free(c->client);
	free(c);
}

static void *worker(void *arg)
{
	struct mcp_call *c = arg, **pp;
	struct mcp_session *s = c->s;
	cleanup_err struct isola_err *err = NULL;
	json_t *result = NULL;

	if (c->kind == KIND_TOOL) {
		result = tools_call(c);
	} else {
		const char *uri = json_string_value(json_object_get(c->params, "uri"));

		if (c->kind == KIND_RES_LIST)
			result = mcp_resources_list(c, &err);
		else if (!uri)
			isola_err_set(&err, EINVAL, MCP_ERR_PARAMS, "missing `uri`");
		else
			result = mcp_resources_read(c, uri, &err);
		if (!result)
			mcp_send_error(s, c->id,
				       err && !strcmp(err->code, MCP_ERR_PARAMS)
					       ? RPC_INVALID_PARAMS
					       : RPC_INTERNAL,
				       err && err->message ? err->message : "error");
	}
	/* A cancelled request gets no answer (MCP: the receiver SHOULD NOT respond); the
	 * transport hears of it (an HTTP stream waiting for that answer ends). */
	if (result && !atomic_load(&c->cancelled)) {
		send_result(s, c->id, result);
	} else {
		json_decref(result);
		if (atomic_load(&c->cancelled) && s->ops->dropped) {
			pthread_mutex_lock(&s->lock);
			s->ops->dropped(s, c->id);
			pthread_mutex_unlock(&s->lock);
		}
	}
	pthread_mutex_lock(&s->lock);
	for (pp = &s->calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	s->ncalls--;
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	call_free(c);
	return NULL;
}

static void start_call(struct mcp_session *s, json_t *id, json_t *params, int kind)
{
	struct mcp_call *c;
	sigset_t block, old;
	pthread_attr_t attr;
	pthread_t t;
	bool full, started;

	pthread_mutex_lock(&s->lock);
	full = s->ncalls >= MCP_MAX_INFLIGHT;
	pthread_mutex_unlock(&s->lock);
	if (full) {
		mcp_send_error(s, id, RPC_INTERNAL,
			       "too many requests in flight (64); retry later");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		mcp_send_error(s, id, RPC_INTERNAL, "out of memory");
		return;
	}
	c->s = s;
	c->kind = kind;
	c->id = json_incref(id);
	c->params = params ? json_incref(params) : json_object();
	c->progress_token = json_object_get(json_object_get(c->params, "_meta"), "progressToken");
	if (c->progress_token && !json_is_string(c->progress_token) &&
	    !json_is_integer(c->progress_token))
		c->progress_token = NULL;
	atomic_init(&c->cancelled, false);
	pthread_mutex_lock(&s->lock);
	c->next = s->calls;
	s->calls = c;
	s->ncalls++;
	pthread_mutex_unlock(&s->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Workers block the stop signals so they reach this thread and interrupt its poll(). */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	started = pthread_create(&t, &attr, worker, c) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!started) {
		pthread_mutex_lock(&s->lock);
		s->calls = c->next; /* still first: only mcp_handle()'s thread adds */
		s->ncalls--;
		pthread_mutex_unlock(&s->lock);
		mcp_send_error(s, id, RPC_INTERNAL, "cannot start a thread");
		call_free(c);
	}
	pthread_attr_destroy(&attr);
}

/* A kill to send for a cancelled call, copied under the lock (the call may end any time). */
struct kill_target {
	char id[96]; /* sandbox */
	long pid;    /* process */
};

/* Marks calls cancelled (all, or the one whose id equals `id`) and collects their kills. */
static size_t cancel_calls(struct mcp_session *s, const json_t *id, struct kill_target *kt,
			   size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	for (struct mcp_call *c = s->calls; c; c = c->next) {
		if (id && !json_equal(c->id, (json_t *)id))
			continue;
		atomic_store(&c->cancelled, true);
		if (c->pid && !c->killed && n < max) {
			c->killed = true;
			snprintf(kt[n].id, sizeof(kt[n].id), "%s", c->sandbox_id);
			kt[n++].pid = c->pid;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void kill_targets(struct mcp_session *s, const struct kill_target *kt, size_t n)
{
	for (size_t i = 0; i < n && s->ctl; i++) {
		cleanup_free char *url =
			cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", kt[i].id, kt[i].pid);
		json_t *body = json_pack("{s:i}", "signal", 9);

		if (url && body)
			(void)client_json(s->ctl, "POST", url, body, NULL, NULL);
		json_decref(body);
	}
}

void mcp_progress_tick(struct mcp_session *s)
{
	json_t *batch = json_array();
	long long now = mono_s();
	size_t i;
	json_t *m;

	pthread_mutex_lock(&s->lock);
	for (struct mcp_call *c = s->calls; c && batch; c = c->next) {
		char msg[128];

		if (!c->progress_token || !c->started || now - c->started <= c->last_progress ||
		    atomic_load(&c->cancelled))
			continue;
		c->last_progress = now - c->started;
		snprintf(msg, sizeof(msg), "running for %lld s, %llu bytes of output so far",
			 c->last_progress, c->out_bytes);
		json_array_append_new(batch,
				      json_pack("{s:s, s:s, s:{s:O, s:I, s:s}}", "jsonrpc", "2.0",
						"method", "notifications/progress", "params",
						"progressToken", c->progress_token, "progress",
						(json_int_t)c->last_progress, "message", msg));
	}
	pthread_mutex_unlock(&s->lock);
	json_array_foreach(batch, i, m) mcp_send(s, json_incref(m));
	json_decref(batch);
}

void mcp_handle(struct mcp_session *s, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));

	/* UNTRUSTED: the client's message; only these members are read, each type-checked. */
	if (!json_is_object(msg) || !method ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") ||
	    (id && !json_is_string(id) && !json_is_integer(id))) {
		/* Responses from the client (we send no requests) are ignored. */
		if (json_is_object(msg) && !method &&
		    (json_object_get(msg, "result") || json_object_get(msg, "error")))
			return;
		mcp_send_error(s, json_is_string(id) || json_is_integer(id) ? id : NULL,
			       RPC_INVALID_REQUEST, "not a JSON-RPC 2.0 request");
		return;
	}
	if (!id) {
		if (!strcmp(method, "notifications/cancelled") && json_is_object(params)) {
			struct kill_target kt[1];
			json_t *rid = json_object_get(params, "requestId");
			size_t n = rid ? cancel_calls(s, rid, kt, ARRAY_SIZE(kt)) : 0;

			kill_targets(s, kt, n);
		}
		return; /* initialized and other notifications need nothing */
	}
	if (params && !json_is_object(params)) {
		mcp_send_error(s, id, RPC_INVALID_PARAMS, "`params` must be an object");
		return;
	}
	if (!strcmp(method, "initialize"))
		send_result(s, id, initialize_result(params));
	else if (!strcmp(method, "ping"))
		send_result(s, id, json_object());
	else if (!strcmp(method, "tools/list"))
		send_result(s, id, tools_list_result());
	else if (!strcmp(method, "tools/call"))
		start_call(s, id, params, KIND_TOOL);
	else if (!strcmp(method, "resources/list"))
		start_call(s, id, params, KIND_RES_LIST);
	else if (!strcmp(method, "resources/read"))
		start_call(s, id, params, KIND_RES_READ);
	else if (!strcmp(method, "resources/templates/list"))
		send_result(s, id,
			    json_pack("{s:[{s:s, s:s, s:s}]}", "resourceTemplates", "uriTemplate",
				      "isola://sandbox/{sandbox_id}/{+path}", "name",
				      "sandbox file", "description",
				      "a file of a sandbox; the path after the id is absolute "
				      "(isola://sandbox/ID/etc/hostname is /etc/hostname)"));
	else {
		cleanup_free char *str = NULL;

		if (asprintf(&str, "method `%s` not found", method) < 0)
			str = NULL;
		mcp_send_error(s, id, RPC_METHOD_NOT_FOUND, str ?: "method not found");
	}
}

void mcp_session_end(struct mcp_session *s, volatile sig_atomic_t *stop)
{
	struct kill_target kt[MCP_MAX_INFLIGHT];
	bool cancelled = false;
	char *id;

	pthread_mutex_lock(&s->lock);
	while (s->ncalls) {
		struct timespec until;

		if (*stop && !cancelled) {
			size_t n;

			pthread_mutex_unlock(&s->lock);
			n = cancel_calls(s, NULL, kt, ARRAY_SIZE(kt));
			kill_targets(s, kt, n);
			cancelled = true;
			pthread_mutex_lock(&s->lock);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1; /* wakes to see a stop signal */
		pthread_cond_timedwait(&s->idle, &s->lock, &until);
	}
	id = steal_ptr(&s->default_id);
	pthread_mutex_unlock(&s->lock);
	if (id && !s->keep && s->ctl) {
		cleanup_free char *url = cli_pathf("/v1/sandboxes/%s", id);
		cleanup_err struct isola_err *err = NULL;

		if (url && client_json(s->ctl, "DELETE", url, NULL, NULL, &err) < 0)
			mcp_log(s, "destroying the session's sandbox %s: %s", id,
				err && err->message ? err->message : "failed");
	} else if (id) {
		mcp_log(s, "kept the session's sandbox %s", id);
	}
	free(id);
}

int mcp_session_init(struct mcp_session *s, const struct mcp_transport_ops *ops,
		     const struct client_conf *conf, struct isola_err **err)
{
	s->ops = ops;
	s->conf = conf;
	/* Made by the caller's thread before any worker: the first client_new() initialises
	 * libcurl, which is not thread-safe. */
	if (client_new(conf, &s->ctl, err) < 0)
		return -EIO;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->default_lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	return 0;
}

void mcp_session_fini(struct mcp_session *s)
{
	if (s->ctl)
		client_free(s->ctl);
	s->ctl = NULL;
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->default_lock);
	pthread_cond_destroy(&s->idle);
	for (size_t i = 0; i < s->nhost_dirs; i++)
		free(s->host_dirs[i]);
	free(s->host_dirs);
	free(s->default_id);
	s->host_dirs = NULL;
	s->nhost_dirs = 0;
	s->default_id = NULL;
}
