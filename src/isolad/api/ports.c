/* SPDX-License-Identifier: Apache-2.0 */
/* ports: exposed ports of a sandbox (/v1/sandboxes/{id}/ports), over expose/'s registry. */
#include "api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"
#include "../expose/expose.h"

/* The sandbox of {id} as the caller's tenant sees it (another tenant's is `not_found`). */
static int ports_sandbox(struct api_req *r, struct sandbox **s, struct isola_err **err)
{
	return core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), s,
				    err);
}

enum MHD_Result api_ports_add(struct api_req *r)
{
	static const char *const fields[] = {"port", "public", NULL};
	cleanup_err struct isola_err *err = NULL;
	struct sandbox *s = NULL;
	uint64_t port = 0;
	bool pub = false;
	json_t *out = NULL;
	int ret;

	/* UNTRUSTED: the client's JSON, checked field by field */
	if (!r->json)
		return api_respond_error(r, "invalid", "missing field `port`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    api_json_uint(r->json, "port", 65535, &port, &err) < 0 ||
	    api_json_bool(r->json, "public", &pub, &err) < 0)
		return api_respond_err(r, err);
	if (port == 0)
		return api_respond_error(r, "invalid", "field `port` must be 1-65535");
	if (ports_sandbox(r, &s, &err) < 0)
		return api_respond_err(r, err);
	ret = expose_port_add(r->srv->core, s, (int)port, pub, &out, &err);
	sandbox_unref(s);
	if (ret < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 201, out);
}

enum MHD_Result api_ports_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox *s = NULL;
	json_t *out = NULL;
	int ret;

	if (ports_sandbox(r, &s, &err) < 0)
		return api_respond_err(r, err);
	ret = expose_port_list(r->srv->core, s, &out, &err);
	sandbox_unref(s);
	if (ret < 0)
		return api_respond_err(r, err);
	/* A private port's access token opens whatever listens there (a shell, a notebook):
	 * that is write and exec, which a read-only token must never be handed. */
	if (r->who.role < TENANCY_USER) {
		size_t i;
		json_t *e;

		json_array_foreach(json_object_get(out, "ports"), i, e)
		{
			json_object_del(e, "token");
		}
	}
	return api_respond_json(r, 200, out);
}

enum MHD_Result api_ports_remove(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *ps = api_match_get(&r->match, "port");
	struct sandbox *s = NULL;
	uint64_t port = 0;
	int ret;

	/* UNTRUSTED: a path segment */
	if (!ps || api_parse_u64(ps, 65535, &port) < 0 || port == 0)
		return api_respond_error(r, "invalid", "invalid port `%s`: expected 1-65535",
					 ps ? ps : "");
	if (ports_sandbox(r, &s, &err) < 0)
		return api_respond_err(r, err);
	ret = expose_port_remove(r->srv->core, s, (int)port, &err);
	sandbox_unref(s);
	if (ret < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}
