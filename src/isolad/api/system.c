/* SPDX-License-Identifier: Apache-2.0 */
/* system: GET /v1/health and GET /v1/doctor. */
#include "api-internal.h"

#include "../core/core.h"

enum MHD_Result api_health(struct api_req *r)
{
	return api_respond_json(r, 200,
				json_pack("{s:s, s:s}", "status", "ok", "version", API_VERSION));
}

enum MHD_Result api_doctor(struct api_req *r)
{
	return api_respond_json(r, 200, core_doctor(r->srv->core));
}
