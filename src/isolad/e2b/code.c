/* SPDX-License-Identifier: Apache-2.0 */
/* code: @e2b/code-interpreter's port 49999 (E2b-Sandbox-Port) relayed to isola's code interpreter. */
#include "e2b-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../codeint/codeint-internal.h"
#include "../core/core.h"
#include "../expose/expose.h"

/*
 * The SDK talks to the service exactly as to E2B's (routes, JSON bodies, the NDJSON
 * stream), so the service's answer is relayed as it is: status, Content-Type and body
 * bytes (the chunked framing is undone and redone by isolad's HTTP server). What isolad
 * answers itself (a sandbox that is gone, a template without python3, a service that will
 * not start) is {code, message} JSON with the status the SDK maps: 502 for a sandbox that
 * is gone (its TimeoutError), 404 for an unknown one, 424/503 for the service.
 */

#define CODE_POLL_MS 500 /* stream wake-ups: client hang-up checks */

int e2b_code_public(struct api_req *r, const char *sandbox_id)
{
	struct sandbox *s = NULL;

	if (!expose_port_is_public(sandbox_id, CODEINT_PORT) ||
	    core_sandbox_get(r->srv->core, sandbox_id, &s, NULL) < 0)
		return -EACCES;
	snprintf(r->who.who, sizeof(r->who.who), "e2b:public");
	snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", sandbox_tenant(s));
	r->who.role = TENANCY_USER;
	sandbox_unref(s);
	return 0;
}

static enum MHD_Result fail(struct api_req *r, unsigned status, const char *code, const char *msg)
{
	return api_respond_json(
		r, status,
		json_pack("{s:i, s:s, s:s}", "code", (int)status, "name", code, "message", msg));
}

struct relay {
	struct codeint_call *c; /* tunnel, owned */
};

static void relay_free(void *p)
{
	struct relay *rl = p;

	codeint_call_free(rl->c);
	free(rl);
}

static int relay_produce(struct api_stream *st, void *ud)
{
	struct relay *rl = ud;
	cleanup_err struct isola_err *err = NULL;
	char buf[64 * 1024];
	ssize_t n;

	if (api_stream_peer_gone(st))
		return -1; /* freeing the relay closes the tunnel: the service sees it */
	/* UNTRUSTED: the service's body bytes, relayed unread to the sandbox's own client */
	n = codeint_call_read(rl->c, buf, sizeof(buf), CODE_POLL_MS, &err);
	if (n == -ETIMEDOUT)
		return 0;
	if (n < 0)
		return -1; /* cut, as E2B's edge cuts a stream whose sandbox failed */
	if (n == 0)
		return 1;
	return api_stream_write(st, buf, (size_t)n) < 0 ? -1 : 0;
}

/* Forwards method + path (+ the buffered body) and relays the answer. With `idle` (a GET:
 * reads start no process, a read-only token may send them) nothing is started: when the
 * service does not run, idle (a JSON text) is the answer, with status idle_status. */
static enum MHD_Result forward_as(struct api_req *r, const char *method, const char *path,
				  const char *idle, unsigned idle_status)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;
	struct codeint_call *c = NULL;
	struct MHD_Response *resp;
	struct sandbox *s = NULL;
	struct relay *rl;
	int ret;

	if (er->too_large)
		return fail(r, 413, "too_large", "request body larger than 1 MiB");
	if (e2b_envd_sandbox_get(r, &s) < 0)
		return fail(r, 502, "unavailable",
			    "sandbox not found: it was killed or its timeout expired");
	ret = idle ? codeint_call_raw(s, method, path, NULL, 0, &c, &err)
		   : codeint_call_open(s, method, path, er->body.len ? er->body.data : NULL,
				       er->body.len, &c, &err);
	sandbox_unref(s);
	if (ret == -ECONNREFUSED && idle)
		return api_respond_json(r, idle_status, json_loads(idle, 0, NULL));
	if (ret < 0)
		return fail(r, api_status_for_code(err ? err->code : NULL),
			    err ? err->code : "internal", err ? err->message : "error");
	rl = calloc(1, sizeof(*rl));
	if (!rl) {
		codeint_call_free(c);
		return MHD_NO;
	}
	rl->c = c;
	resp = api_stream_response(r, API_FMT_JSON, MHD_SIZE_UNKNOWN, relay_produce, rl,
				   relay_free);
	if (resp && codeint_call_ctype(c)[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, codeint_call_ctype(c));
	return api_respond_response(r, codeint_call_status(c), resp);
}

static enum MHD_Result forward(struct api_req *r, const char *method, const char *path)
{
	return forward_as(r, method, path, NULL, 0);
}

/* The {ctx} parameter, checked before it goes into the service's path; NULL when bad. */
static const char *ctx_param(struct api_req *r)
{
	const char *ctx = api_match_get(&r->match, "ctx");

	return api_code_context_ok(ctx) ? ctx : NULL;
}

enum MHD_Result e2b_code_health(struct api_req *r)
{
	return forward_as(r, "GET", "/health",
			  "{\"code\":503,\"message\":\"the code interpreter is not running; "
			  "it starts on the first execute or context create\"}",
			  503);
}

enum MHD_Result e2b_code_execute(struct api_req *r)
{
	return forward(r, "POST", "/execute");
}

enum MHD_Result e2b_code_contexts(struct api_req *r)
{
	return forward_as(r, "GET", "/contexts", "[]", 200);
}

enum MHD_Result e2b_code_context_create(struct api_req *r)
{
	return forward(r, "POST", "/contexts");
}

/* `method` /contexts/{ctx}`suffix`, the id checked first. */
static enum MHD_Result context_op(struct api_req *r, const char *method, const char *suffix)
{
	const char *ctx = ctx_param(r);
	char path[128];

	if (!ctx)
		return fail(r, 404, "not_found", "no such context");
	snprintf(path, sizeof(path), "/contexts/%s%s", ctx, suffix);
	return forward(r, method, path);
}

enum MHD_Result e2b_code_context_restart(struct api_req *r)
{
	return context_op(r, "POST", "/restart");
}

enum MHD_Result e2b_code_context_delete(struct api_req *r)
{
	return context_op(r, "DELETE", "");
}
