/* SPDX-License-Identifier: Apache-2.0 */
/* code: the code interpreter's native routes — execute (NDJSON stream) and contexts — over codeint. */
#include "api-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../codeint/codeint-internal.h"
#include "../core/core.h"

/*
 * Every route here forwards to the service inside the sandbox (codeint starts it on first
 * use) and answers with what it said. The service runs inside the sandbox, so everything
 * it returns is as hostile as the sandbox: execute's stream is re-framed line by line (each
 * line must parse as a JSON object and is re-serialised, so a line can never break the
 * NDJSON framing or pass the line cap), and error bodies are quoted, truncated, in our own
 * {code, message}.
 */

#define CODE_MAX_LINE                                                                              \
	(16u                                                                                       \
	 << 20) /* one NDJSON event (a large PNG result, base64); the SDKs cap lines there too */
#define CODE_MAX_REPLY (1u << 20) /* a contexts reply */
#define CODE_POLL_MS   500	  /* stream wake-ups: client hang-up and timeout checks */
#define CODE_MAX_CODE  (1u << 20) /* bytes of code (the JSON body cap) */

bool api_code_context_ok(const char *s)
{
	size_t n = 0;

	for (; s && s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
		      (s[n] >= '0' && s[n] <= '9') || s[n] == '-' || s[n] == '_' || s[n] == '.'))
			return false;
	return n > 0 && n <= 64;
}

/* The isola error code for a service status. */
static const char *code_for_status(unsigned st)
{
	if (st == 400 || st == 422)
		return "invalid";
	if (st == 404)
		return "not_found";
	if (st == 409)
		return "conflict";
	if (st == 504 || st == 408)
		return "timeout";
	return "unavailable";
}

/* Answers a non-2xx reply of the service as our error, quoting its body. */
static enum MHD_Result relay_error(struct api_req *r, struct codeint_call *c, const char *what)
{
	cleanup_err struct isola_err *err = NULL;
	unsigned st = codeint_call_status(c);
	char *body = NULL, quoted[400];
	size_t len = 0;
	json_t *j;
	const char *msg = NULL;

	codeint_call_body(c, 64 * 1024, &body, &len, &err);
	/* UNTRUSTED: the service's body; only quoted (a JSON `error`/`message`, or its text) */
	j = body ? json_loadb(body, len, 0, NULL) : NULL;
	if (json_is_object(j))
		msg = json_string_value(json_object_get(j, "error"))
			      ?: json_string_value(json_object_get(j, "message"))
					 ?: json_string_value(json_object_get(j, "detail"));
	if (!msg)
		msg = body ? body : "";
	snprintf(quoted, sizeof(quoted), "%s", msg);
	for (char *p = quoted; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	json_decref(j);
	free(body);
	return api_respond_error(r, code_for_status(st), "%s: the code interpreter answered %u: %s",
				 what, st, quoted);
}

/* --- execute ---------------------------------------------------------------------------- */

struct exec_stream {
	struct codeint_call *c; /* tunnel, owned */
	struct api_buf line;	/* a partial line */
	uint64_t deadline;	/* ms; 0 = none */
	double timeout_s;	/* for the timeout event */
	bool cut;		/* ended by us (timeout, bad stream) */
};

static void exec_stream_free(void *p)
{
	struct exec_stream *es = p;

	codeint_call_free(es->c);
	api_buf_fini(&es->line);
	free(es);
}

/* One line of the service's stream, re-serialised into st; bad lines are dropped. */
static int emit_line(struct api_stream *st, const char *p, size_t n)
{
	json_t *j;

	while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (!n)
		return 0;
	/* UNTRUSTED: one line of the sandbox's service; must be a JSON object */
	j = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "type"))) {
		json_decref(j);
		log_debug("code: dropped a stream line that is not a JSON event");
		return 0;
	}
	return api_stream_event(st, j);
}

/* Ends the stream with an error event `name`: `value` (the execution is abandoned). */
static int cut(struct exec_stream *es, struct api_stream *st, const char *name, const char *value)
{
	es->cut = true;
	return api_stream_event(st, json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", name,
					      "value", value, "traceback", "")) < 0
		       ? -1
		       : 1;
}

static int exec_produce(struct api_stream *st, void *ud)
{
	struct exec_stream *es = ud;
	cleanup_err struct isola_err *err = NULL;
	char buf[64 * 1024];
	ssize_t n;

	if (es->cut)
		return 1;
	if (api_stream_peer_gone(st))
		return -1; /* freeing the stream closes the tunnel: the service sees it */
	if (es->deadline && util_now_ms() >= es->deadline) {
		return cut(es, st, "TimeoutError", "execution did not finish within the timeout");
	}
	n = codeint_call_read(es->c, buf, sizeof(buf), CODE_POLL_MS, &err);
	if (n == -ETIMEDOUT)
		return 0;
	if (n < 0) {
		return cut(es, st, "ServiceError", err && err->message ? err->message : "error");
	}
	if (n == 0) {
		if (es->line.len > es->line.off &&
		    emit_line(st, es->line.data + es->line.off, es->line.len - es->line.off) < 0)
			return -1;
		return 1;
	}
	for (ssize_t i = 0, start = 0; i <= n; i++) {
		if (i < n && buf[i] != '\n')
			continue;
		if (i == n) {
			if (api_buf_append(&es->line, buf + start, (size_t)(n - start)) < 0)
				return -1;
			break;
		}
		if (es->line.len > es->line.off) {
			if (api_buf_append(&es->line, buf + start, (size_t)(i - start)) < 0 ||
			    emit_line(st, es->line.data + es->line.off,
				      es->line.len - es->line.off) < 0)
				return -1;
			es->line.off = es->line.len = 0;
		} else if (emit_line(st, buf + start, (size_t)(i - start)) < 0) {
			return -1;
		}
		start = i + 1;
	}
	if (es->line.len - es->line.off > CODE_MAX_LINE) {
		return cut(es, st, "ServiceError", "a result passed the 16 MiB event cap");
	}
	return 0;
}

static const char *const exec_fields[] = {"code", "language", "context", "env", "timeout", NULL};

enum MHD_Result api_code_execute(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *code = NULL, *lang = NULL, *ctx = NULL;
	const json_t *env = NULL;
	double timeout = 0;
	struct codeint_call *c = NULL;
	struct exec_stream *es;
	struct sandbox *s;
	json_t *body;
	char *text;
	int ret;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing JSON body with `code`");
	/* UNTRUSTED: the client's JSON body */
	if (api_json_only(r->json, exec_fields, &err) < 0 ||
	    api_json_str(r->json, "code", CODE_MAX_CODE, &code, &err) < 0 ||
	    api_json_str(r->json, "language", 32, &lang, &err) < 0 ||
	    api_json_str(r->json, "context", 64, &ctx, &err) < 0 ||
	    api_json_str_map(r->json, "env", true, &env, &err) < 0 ||
	    api_json_num(r->json, "timeout", 0, 86400.0, &timeout, &err) < 0)
		return api_respond_err(r, err);
	if (!code)
		return api_respond_error(r, "invalid", "`code` is required");
	if (ctx && !api_code_context_ok(ctx))
		return api_respond_error(r, "invalid",
					 "`context` must be 1-64 of [A-Za-z0-9._-]: a context id");
	if (ctx && lang)
		return api_respond_error(r, "invalid",
					 "give `context` or `language`, not both: a context has "
					 "its language");
	body = json_pack("{s:s}", "code", code);
	if (lang)
		json_object_set_new(body, "language", json_string(lang));
	if (ctx)
		json_object_set_new(body, "context_id", json_string(ctx));
	if (env)
		json_object_set(body, "env_vars", (json_t *)env);
	if (timeout > 0)
		json_object_set_new(body, "timeout", json_real(timeout));
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return MHD_NO;
	if (api_sandbox_agent(r, &s, NULL, &err) < 0) {
		free(text);
		return api_respond_err(r, err);
	}
	ret = codeint_call_open(s, "POST", "/execute", text, strlen(text), &c, &err);
	sandbox_unref(s);
	free(text);
	if (ret < 0)
		return api_respond_err(r, err);
	if (codeint_call_status(c) / 100 != 2) {
		enum MHD_Result mr = relay_error(r, c, ctx ? "execute in context" : "execute");

		codeint_call_free(c);
		return mr;
	}
	es = calloc(1, sizeof(*es));
	if (!es) {
		codeint_call_free(c);
		return MHD_NO;
	}
	es->c = c;
	es->timeout_s = timeout;
	if (timeout > 0)
		es->deadline = util_now_ms() + (uint64_t)(timeout * 1000.0);
	return api_respond_response(r, 200,
				    api_stream_response(r, API_FMT_NDJSON, MHD_SIZE_UNKNOWN,
							exec_produce, es, exec_stream_free));
}

/* --- contexts ---------------------------------------------------------------------------- */

/* Calls the service and answers with its JSON reply (wrapped by `key` when set), or
 * nothing when ok_status is 204. A GET does not start the service (a read-only token may
 * GET, and reading starts no process): when it does not run, `idle` (new reference, stolen)
 * is the answer. */
static enum MHD_Result contexts_call(struct api_req *r, const char *method, const char *path,
				     const json_t *req, const char *what, unsigned ok_status,
				     const char *key, json_t *idle)
{
	cleanup_err struct isola_err *err = NULL;
	struct codeint_call *c = NULL;
	char *text = req ? json_dumps(req, JSON_COMPACT) : NULL, *body = NULL;
	enum MHD_Result mr;
	struct sandbox *s;
	size_t len = 0;
	json_t *j;
	int ret;

	if (api_sandbox_agent(r, &s, NULL, &err) < 0) {
		free(text);
		json_decref(idle);
		return api_respond_err(r, err);
	}
	ret = idle ? codeint_call_raw(s, method, path, text, text ? strlen(text) : 0, &c, &err)
		   : codeint_call_open(s, method, path, text, text ? strlen(text) : 0, &c, &err);
	sandbox_unref(s);
	free(text);
	if (ret == -ECONNREFUSED && idle)
		return api_respond_json(r, ok_status, idle);
	json_decref(idle);
	if (ret < 0)
		return api_respond_err(r, err);
	if (codeint_call_status(c) / 100 != 2) {
		mr = relay_error(r, c, what);
		codeint_call_free(c);
		return mr;
	}
	if (ok_status == 204) {
		codeint_call_free(c);
		return api_respond_empty(r, 204);
	}
	ret = codeint_call_body(c, CODE_MAX_REPLY, &body, &len, &err);
	codeint_call_free(c);
	if (ret < 0)
		return api_respond_err(r, err);
	/* UNTRUSTED: the service's reply; it must be JSON and is re-serialised */
	j = json_loadb(body, len, 0, NULL);
	free(body);
	if (!j)
		return api_respond_error(r, "unavailable",
					 "%s: the code interpreter's reply is not JSON", what);
	if (key)
		j = json_pack("{s:o}", key, j);
	return api_respond_json(r, ok_status, j);
}

enum MHD_Result api_code_contexts_list(struct api_req *r)
{
	return contexts_call(r, "GET", "/contexts", NULL, "list contexts", 200, "contexts",
			     json_pack("{s:[]}", "contexts"));
}

static const char *const ctx_fields[] = {"language", "cwd", NULL};

enum MHD_Result api_code_context_create(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *lang = NULL, *cwd = NULL;
	enum MHD_Result mr;
	json_t *req;

	/* UNTRUSTED: the client's JSON body (may be absent: a Python context in the home) */
	if (r->json && (api_json_only(r->json, ctx_fields, &err) < 0 ||
			api_json_str(r->json, "language", 32, &lang, &err) < 0 ||
			api_json_str(r->json, "cwd", API_MAX_PATH, &cwd, &err) < 0))
		return api_respond_err(r, err);
	req = json_object();
	if (lang)
		json_object_set_new(req, "language", json_string(lang));
	if (cwd)
		json_object_set_new(req, "cwd", json_string(cwd));
	mr = contexts_call(r, "POST", "/contexts", req, "create context", 201, NULL, NULL);
	json_decref(req);
	return mr;
}

/* The {ctx} path parameter, checked before it goes into the service's path. */
static const char *ctx_param(struct api_req *r)
{
	const char *ctx = api_match_get(&r->match, "ctx");

	return api_code_context_ok(ctx) ? ctx : NULL;
}

/* A call on one context: `method` /contexts/{ctx}`suffix`, named `verb` in errors. */
static enum MHD_Result context_op(struct api_req *r, const char *method, const char *suffix,
				  const char *verb)
{
	const char *ctx = ctx_param(r);
	char path[128], what[128];

	if (!ctx)
		return api_respond_error(r, "invalid", "a context id is 1-64 of [A-Za-z0-9._-]");
	snprintf(path, sizeof(path), "/contexts/%s%s", ctx, suffix);
	snprintf(what, sizeof(what), "%s context `%s`", verb, ctx);
	return contexts_call(r, method, path, NULL, what, 204, NULL, NULL);
}

enum MHD_Result api_code_context_restart(struct api_req *r)
{
	return context_op(r, "POST", "/restart", "restart");
}

enum MHD_Result api_code_context_delete(struct api_req *r)
{
	return context_op(r, "DELETE", "", "remove");
}
