/* SPDX-License-Identifier: Apache-2.0 */
/* lifecycle: the timeout policy fields of a create and PUT /v1/sandboxes/{id}/lifecycle. */
#include "api-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../core/core.h"
#include "../core/lifecycle.h"

int api_lifecycle_parse(const json_t *b, struct sandbox_request *req, struct isola_err **err)
{
	enum life_policy p;
	uint64_t idle = 0;
	bool resume = false;

	/* UNTRUSTED: the client's JSON; the policy name is checked against the known ones here
	 * and against the tier by core. */
	if (api_json_str(b, "on_timeout", 15, &req->on_timeout, err) < 0 ||
	    api_json_uint(b, "idle_timeout", UINT32_MAX, &idle, err) < 0 ||
	    api_json_bool(b, "auto_resume", &resume, err) < 0)
		return -EINVAL;
	if (req->on_timeout && life_policy_parse(req->on_timeout, &p, err) < 0)
		return -EINVAL;
	req->idle_timeout_s = (uint32_t)idle;
	if (json_object_get(b, "auto_resume"))
		req->auto_resume = resume ? LIFE_RESUME_ALWAYS : LIFE_RESUME_NEVER;
	return 0;
}

enum MHD_Result api_sandbox_lifecycle(struct api_req *r)
{
	static const char *const fields[] = {"on_timeout", "idle_timeout", "auto_resume", NULL};
	cleanup_err struct isola_err *err = NULL;
	json_t *resume, *out = NULL;
	const char *pol = NULL;
	uint64_t idle = 0;
	enum life_policy p;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing JSON body");
	/* UNTRUSTED: the client's JSON, checked field by field; core checks the tier. */
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_str(r->json, "on_timeout", 15, &pol, &err) < 0 ||
	    api_json_uint(r->json, "idle_timeout", UINT32_MAX, &idle, &err) < 0 ||
	    (pol && life_policy_parse(pol, &p, &err) < 0))
		return api_respond_err(r, err);
	resume = json_object_get(r->json, "auto_resume");
	/* null restores the default rule (resume only what policy paused). */
	if (resume && !json_is_null(resume) && !json_is_boolean(resume))
		return api_respond_error(r, "invalid",
					 "field `auto_resume` must be a boolean or null");
	if (core_sandbox_set_lifecycle_for(r->srv->core, api_tenant(r),
					   api_match_get(&r->match, "id"), r->json, &out, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, out);
}
