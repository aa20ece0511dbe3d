/* SPDX-License-Identifier: Apache-2.0 */
/* pools: warm pools through the API — GET /v1/pools, PUT /v1/pools/{template}/{tier}. */
#include "api-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../core/core.h"
#include "../core/pool.h"

enum MHD_Result api_pool_list(struct api_req *r)
{
	enum MHD_Result ret;

	/* Claims and misses are every tenant's creates: the operator's view only. */
	if (api_deny_unless_operator(r, &ret))
		return ret;
	return api_respond_json(r, 200, json_pack("{s:o}", "pools", core_pool_list(r->srv->core)));
}

enum MHD_Result api_pool_set(struct api_req *r)
{
	static const char *const fields[] = {"size", "auto_max", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *tmpl = api_match_get(&r->match, "template");
	const char *tier = api_match_get(&r->match, "tier");
	uint64_t size = UINT64_MAX, auto_max = UINT64_MAX;
	enum MHD_Result ret;
	json_t *list, *p;
	size_t i;
	int q;

	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (!r->json)
		return api_respond_error(r, "invalid", "missing field `size` or `auto_max`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_uint(r->json, "size", POOL_MAX_SIZE, &size, &err) < 0 ||
	    api_json_uint(r->json, "auto_max", POOL_MAX_SIZE, &auto_max, &err) < 0)
		return api_respond_err(r, err);
	if ((size == UINT64_MAX) == (auto_max == UINT64_MAX))
		return api_respond_error(r, "invalid", "expected one of `size` and `auto_max`");
	/* UNTRUSTED: path segments; the name is checked here, the tier by core. */
	if (!api_valid_template_name(tmpl))
		return api_respond_error(r, "invalid", "invalid template name `%.64s`", tmpl);
	if (auto_max != UINT64_MAX && (strcmp(tmpl, "host") || strcmp(tier, "process")))
		return api_respond_error(r, "invalid",
					 "`auto_max`: the automatic pool is host/process only, not "
					 "`%.64s/%.16s`",
					 tmpl, tier);
	q = auto_max != UINT64_MAX ? core_pool_auto(r->srv->core, (uint32_t)auto_max, &err)
				   : core_pool_set(r->srv->core, tmpl, tier, (uint32_t)size, &err);
	if (q < 0)
		return api_respond_err(r, err);
	list = core_pool_list(r->srv->core);
	json_array_foreach(list, i, p)
	{
		if (!strcmp(json_string_value(json_object_get(p, "tier")), tier) &&
		    !strcmp(json_string_value(json_object_get(p, "template")), tmpl)) {
			ret = api_respond_json(r, 200, json_incref(p));
			json_decref(list);
			return ret;
		}
	}
	json_decref(list);
	/* Size (or auto_max) 0 removed it. */
	return api_respond_json(
		r, 200, json_pack("{s:s, s:s, s:i}", "template", tmpl, "tier", tier, "size", 0));
}
