/* SPDX-License-Identifier: Apache-2.0 */
/* system: GET /v1/health and GET /v1/doctor. */
#include "api-internal.h"

#include "../core/core.h"

enum MHD_Result api_health(struct api_req *r)
{
	return api_respond_json(r, 200,
				json_pack("{s:s, s:s}", "status", "ok", "version", API_VERSION));
}

/* Every token may ask what the host supports (which tiers work, and how); the host's paths
 * (the state directory, the guest kernel's) are the operator's alone. */
enum MHD_Result api_doctor(struct api_req *r)
{
	json_t *j = core_doctor(r->srv->core);

	if (j && !api_is_operator(r)) {
		json_object_del(j, "state_dir");
		json_object_del(json_object_get(j, "microvm"), "kernel");
	}
	return api_respond_json(r, 200, j);
}
