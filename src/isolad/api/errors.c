/* SPDX-License-Identifier: Apache-2.0 */
/* errors: the one place isola_err codes become HTTP statuses and {code, message} bodies. */
#include "api-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"

/* Codes from core (err.h) and from the agent (docs/agent-protocol.md). */
static const struct {
	const char *code;
	unsigned status;
} code_status[] = {
	{"invalid", 400},
	{"not_dir", 400},
	{"is_dir", 400},
	{"unauthorized", 401},
	{"forbidden", 403},
	{"quota_exceeded", 403},
	{"not_found", 404},
	{"method_not_allowed", 405},
	{"conflict", 409},
	{"exists", 409},
	{"name_taken", 409},
	{"sandbox_ended", 410},
	{"busy", 409},
	{"too_large", 413},
	{"failed_dependency", 424},
	{"range_not_satisfiable", 416},
	{"rate_limited", 429},
	{"internal", 500},
	{"not_supported", 501},
	{"unavailable", 503},
	{"timeout", 504},
	{"no_space", 507},
};

unsigned api_status_for_code(const char *code)
{
	if (!code)
		return 500;
	for (size_t i = 0; i < ARRAY_SIZE(code_status); i++)
		if (!strcmp(code_status[i].code, code))
			return code_status[i].status;
	return 500;
}

json_t *api_error_json(const char *code, const char *message)
{
	return json_pack("{s:s, s:s}", "code", code ? code : "internal", "message",
			 message ? message : "");
}

enum MHD_Result api_respond_response(struct api_req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	/* A refused create says when to come back (RFC 6585): whole seconds, at least 1. */
	if (status == 429 && r->retry_after_s > 0) {
		char ra[24];

		snprintf(ra, sizeof(ra), "%llu", (unsigned long long)(r->retry_after_s + 0.999));
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra[0] == '0' ? "1" : ra);
	}
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES) {
		r->responded = true;
		r->status = status;
	}
	return ret;
}

struct MHD_Response *api_json_response(json_t *body)
{
	struct MHD_Response *resp;
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	if (!s)
		return NULL;
	resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(s);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return resp;
}

enum MHD_Result api_respond_json(struct api_req *r, unsigned status, json_t *body)
{
	struct MHD_Response *resp;

	if (!body)
		return api_respond_error(r, "internal", "out of memory building the response");
	resp = api_json_response(body);
	if (!resp)
		return MHD_NO;
	return api_respond_response(r, status, resp);
}

enum MHD_Result api_respond_err(struct api_req *r, const struct isola_err *e)
{
	unsigned status;

	if (!e)
		return api_respond_error(r, "internal", "unknown error");
	status = api_status_for_code(e->code);
	snprintf(r->err_code, sizeof(r->err_code), "%s", e->code);
	if (status >= 500)
		log_warn("api: %s: %s", e->code, e->message ? e->message : "");
	return api_respond_json(r, status, api_error_json(e->code, e->message));
}

enum MHD_Result api_respond_error(struct api_req *r, const char *code, const char *fmt, ...)
{
	char *msg = NULL;
	enum MHD_Result ret;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	snprintf(r->err_code, sizeof(r->err_code), "%s", code);
	ret = api_respond_json(r, api_status_for_code(code), api_error_json(code, msg));
	free(msg);
	return ret;
}

enum MHD_Result api_respond_empty(struct api_req *r, unsigned status)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);

	return api_respond_response(r, status, resp);
}
