/* SPDX-License-Identifier: Apache-2.0 */
/* network: E2B's allow_internet_access / network {allowOut, denyOut} as an isola egress policy. */
#include "e2b-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../common/util.h"
#include "../core/core.h"
#include "../net/net.h"

#define E2B_NET_MAX_RULES 256

/* True for E2B's "everything" (0.0.0.0/0), which isola expresses as default deny. */
static bool is_everything(const char *s)
{
	return !strcmp(s, "0.0.0.0/0") || !strcmp(s, "::/0");
}

/* Appends one allowOut/denyOut entry: a bare address becomes a host CIDR (E2B accepts
 * "8.8.8.8"; isola's rules take CIDRs and domain names). */
static int add_rule(json_t *list, const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];
	char cidr[64];

	if (inet_pton(AF_INET, s, buf) == 1)
		snprintf(cidr, sizeof(cidr), "%s/32", s);
	else if (inet_pton(AF_INET6, s, buf) == 1)
		snprintf(cidr, sizeof(cidr), "%s/128", s);
	else
		snprintf(cidr, sizeof(cidr), "%.63s", s);
	return json_array_append_new(list, json_string(cidr));
}

/* Reads a list of strings `key` of net into out; sets *everything when it holds 0.0.0.0/0. */
static int read_list(const json_t *net, const char *key, json_t *out, bool *everything,
		     struct isola_err **err)
{
	const json_t *arr = json_object_get(net, key), *v;
	size_t i;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > E2B_NET_MAX_RULES)
		return isola_err_set(err, EINVAL, "invalid",
				     "field `network.%s` must be a list of at most %d strings", key,
				     E2B_NET_MAX_RULES);
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 253)
			return isola_err_set(err, EINVAL, "invalid",
					     "`network.%s[%zu]` must be a CIDR, an address or a "
					     "domain name",
					     key, i);
		if (is_everything(json_string_value(v))) {
			*everything = true;
			continue;
		}
		if (add_rule(out, json_string_value(v)) < 0)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	return 0;
}

int e2b_network_policy(const json_t *internet, const json_t *net, json_t **out,
		       struct isola_err **err)
{
	static const char *const unsupported[] = {"egressProxy", "rules", "maskRequestHost",
						  "httpsPorts"};
	bool deny_all = false, unused = false;
	json_t *pol, *allow, *deny;
	const json_t *pub;

	*out = NULL;
	if ((!internet || json_is_null(internet)) && (!net || json_is_null(net)))
		return 0; /* nothing said: the operator's default policy applies */
	if (internet && !json_is_null(internet) && !json_is_boolean(internet))
		return isola_err_set(err, EINVAL, "invalid",
				     "field `allow_internet_access` must be a boolean");
	if (net && !json_is_null(net) && !json_is_object(net))
		return isola_err_set(err, EINVAL, "invalid", "field `network` must be an object");
	/* UNTRUSTED: the client's network config. What isola cannot enforce is refused, not
	 * dropped: a policy the caller believes in must be the one that holds. */
	for (size_t i = 0; net && i < ARRAY_SIZE(unsupported); i++) {
		const json_t *v = json_object_get(net, unsupported[i]);

		if (v && !json_is_null(v) &&
		    !((json_is_object(v) || json_is_array(v)) && json_object_size(v) == 0 &&
		      json_array_size(v) == 0))
			return isola_err_set(err, ENOTSUP, "not_supported",
					     "`network.%s` is not supported by isola (docs/e2b.md)",
					     unsupported[i]);
	}
	pub = net ? json_object_get(net, "allowPublicTraffic") : NULL;
	if (pub && json_is_false(pub))
		return isola_err_set(
			err, ENOTSUP, "not_supported",
			"`network.allowPublicTraffic: false` is not supported: isola's "
			"exposed ports always need their token unless made public "
			"(docs/network.md)");
	pol = json_object();
	allow = json_array();
	deny = json_array();
	if (!pol || !allow || !deny) {
		json_decref(pol);
		json_decref(allow);
		json_decref(deny);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	json_object_set_new(pol, "allow", allow);
	json_object_set_new(pol, "deny", deny);
	if (read_list(net, "allowOut", allow, &unused, err) < 0 ||
	    read_list(net, "denyOut", deny, &deny_all, err) < 0) {
		json_decref(pol);
		return -EINVAL;
	}
	/* E2B: internet on unless allow_internet_access is false or denyOut holds 0.0.0.0/0;
	 * allowOut entries are reachable either way. isola's always-denied ranges (metadata,
	 * private, host) stay denied whatever this says. */
	if (json_is_false(internet))
		deny_all = true;
	json_object_set_new(pol, "default", json_string(deny_all ? "deny" : "allow"));
	if (!net_current()) {
		json_decref(pol);
		return isola_err_set(
			err, ENOTSUP, "not_supported",
			"network rules: sandbox networking is off (isolad --no-network)");
	}
	if (net_policy_validate(pol, err) < 0) {
		json_decref(pol);
		return isola_err_wrap(err, "field `network`");
	}
	*out = pol;
	return 0;
}

enum MHD_Result e2b_ctl_network(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;
	struct sandbox *s = NULL;
	json_t *b = NULL, *pol = NULL;
	enum MHD_Result ret;

	if (er->too_large)
		return e2b_ctl_error(r, 413, "request body is larger than %u bytes", E2B_MAX_BODY);
	if (e2b_json_parse(er->body.data, er->body.len, &b, &err) < 0)
		return e2b_ctl_error(r, 400, "%s", err->message);
	/* The update body is the network config itself, with allow_internet_access in it;
	 * omitting a field clears it (E2B's semantics): an empty body allows the internet. */
	if (!json_object_get(b, "allow_internet_access"))
		json_object_set_new(b, "allow_internet_access", json_true());
	if (e2b_network_policy(json_object_get(b, "allow_internet_access"), b, &pol, &err) < 0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	if (core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), &s,
				 &err) < 0 ||
	    net_sandbox_set_policy(sandbox_id(s), pol, &err) < 0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	ret = api_respond_empty(r, 204);
out:
	if (s)
		sandbox_unref(s);
	json_decref(pol);
	json_decref(b);
	return ret;
}
