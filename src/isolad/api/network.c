/* SPDX-License-Identifier: Apache-2.0 */
/* network: a sandbox's egress policy and counters (/v1/sandboxes/{id}/network, create's
 * `network`), over net/. */
#include "api-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/core.h"
#include "../net/net.h"
#include "../net/proxy.h"

int api_network_check(const json_t *body, struct isola_err **err)
{
	const json_t *pol = json_object_get(body, "network");

	/* UNTRUSTED: the client's policy, validated by the policy parser (net/policy.c). */
	if (!pol || json_is_null(pol))
		return 0;
	if (!json_is_object(pol))
		return isola_err_set(err, EINVAL, "invalid", "field `network` must be an object");
	if (!net_current())
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "field `network`: sandbox networking is off (isolad "
				     "--no-network)");
	if (net_policy_validate(pol, err) < 0)
		return isola_err_wrap(err, "field `network`");
	return 0;
}

int api_network_on_create(struct api_req *r, struct sandbox *s, struct isola_err **err)
{
	const json_t *pol = json_object_get(r->json, "network");
	int ret;

	if (!pol || json_is_null(pol))
		return 0;
	/* No user code has run yet: the sandbox is not listed to the client until we answer. */
	ret = net_sandbox_set_policy(sandbox_id(s), pol, err);
	if (ret < 0) {
		core_sandbox_destroy(r->srv->core, sandbox_id(s), NULL);
		return isola_err_wrap(err, "create sandbox: network policy");
	}
	return 0;
}

json_t *api_network_counters(const char *id)
{
	json_t *info = NULL, *c;

	if (!net_current() || net_sandbox_info(id, &info, NULL) < 0)
		return NULL;
	c = json_incref(json_object_get(info, "counters"));
	json_decref(info);
	return c;
}

/* The sandbox of {id} as the caller's tenant sees it (another tenant's is `not_found`). */
static int network_sandbox(struct api_req *r, struct sandbox **s, struct isola_err **err)
{
	int ret = core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"),
				       s, err);

	/* A joined namespace (docs/oci.md) is the engine's network: no policy of isola's. */
	if (ret == 0 && sandbox_joined_netns(*s)) {
		ret = isola_err_set(err, ENOTSUP, "not_supported",
				    "sandbox `%s` runs in the network namespace `%s` (joined at "
				    "create): isola's egress policy does not apply to it",
				    sandbox_id(*s), sandbox_joined_netns(*s));
		sandbox_unref(*s);
		*s = NULL;
	}
	return ret;
}

enum MHD_Result api_network_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox *s = NULL;
	json_t *out = NULL;
	int ret;

	if (network_sandbox(r, &s, &err) < 0)
		return api_respond_err(r, err);
	ret = net_sandbox_info(sandbox_id(s), &out, &err);
	sandbox_unref(s);
	if (ret < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, out);
}

enum MHD_Result api_network_put(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox *s = NULL;
	json_t *out = NULL;
	int ret;

	/* UNTRUSTED: the client's policy; net_policy_parse validates every rule. The body is
	 * the policy itself, or {"policy": {...}} as GET returns it. */
	if (!r->json || !json_is_object(r->json))
		return api_respond_error(r, "invalid", "body must be a policy object");
	if (network_sandbox(r, &s, &err) < 0)
		return api_respond_err(r, err);
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", sandbox_id(s));
	ret = net_sandbox_set_policy(
		sandbox_id(s),
		json_object_get(r->json, "policy") ? json_object_get(r->json, "policy") : r->json,
		&err);
	if (ret == 0)
		ret = net_sandbox_info(sandbox_id(s), &out, &err);
	sandbox_unref(s);
	if (ret < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, out);
}

static void metric(struct api_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void metric(struct api_buf *b, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(line))
		api_buf_append(b, line, (size_t)n);
}

void api_network_metrics(struct api_buf *b)
{
	struct net_proxy_stats ps;
	uint64_t q, refused;

	if (net_metrics(&ps, &q, &refused) < 0)
		return;
	metric(b,
	       "# HELP isola_egress_connections_total TCP connections from sandboxes the egress "
	       "proxy accepted.\n# TYPE isola_egress_connections_total counter\n"
	       "isola_egress_connections_total %llu\n",
	       (unsigned long long)ps.accepted);
	metric(b,
	       "# HELP isola_egress_allowed_total Proxied connections connected upstream.\n"
	       "# TYPE isola_egress_allowed_total counter\nisola_egress_allowed_total %llu\n",
	       (unsigned long long)ps.allowed);
	metric(b, "# HELP isola_egress_denied_total Connections the egress proxy refused, by "
		  "reason.\n# TYPE isola_egress_denied_total counter\n");
	for (int i = 0; i < NET_PROXY_DENY_COUNT_; i++)
		metric(b, "isola_egress_denied_total{reason=\"%s\"} %llu\n",
		       net_proxy_deny_name((enum net_proxy_deny)i),
		       (unsigned long long)ps.denied[i]);
	metric(b,
	       "# HELP isola_egress_bytes_total Payload bytes through the egress proxy.\n"
	       "# TYPE isola_egress_bytes_total counter\n"
	       "isola_egress_bytes_total{direction=\"out\"} %llu\n"
	       "isola_egress_bytes_total{direction=\"in\"} %llu\n",
	       (unsigned long long)ps.bytes_out, (unsigned long long)ps.bytes_in);
	metric(b,
	       "# HELP isola_dns_queries_total Queries isola's resolver answered for sandboxes.\n"
	       "# TYPE isola_dns_queries_total counter\n"
	       "isola_dns_queries_total{verdict=\"answered\"} %llu\n"
	       "isola_dns_queries_total{verdict=\"refused\"} %llu\n",
	       (unsigned long long)(q - refused), (unsigned long long)refused);
	metric(b,
	       "# HELP isola_network_slots_ready Network slots made ahead and not yet taken "
	       "(isolad --net-slots).\n# TYPE isola_network_slots_ready gauge\n"
	       "isola_network_slots_ready %u\n",
	       net_slots_ready());
}
