/* SPDX-License-Identifier: Apache-2.0 */
/* policy: per-sandbox egress policy (allow/deny by CIDR, domain, port) and the always-denied ranges. */
#include "policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "hostaddr.h"

#define MAX_RULES      4096 /* per list; a policy is operator/client input */
#define MAX_PORT_SPANS 64   /* per rule */

enum rule_kind { RULE_CIDR, RULE_DOMAIN, RULE_WILDCARD };

struct port_span {
	uint16_t lo, hi; /* inclusive */
};

struct rule {
	enum rule_kind kind;	 /* what is matched */
	struct net_cidr cidr;	 /* RULE_CIDR */
	char *domain;		 /* RULE_DOMAIN: the name; RULE_WILDCARD: ".example.com" */
	struct port_span *ports; /* NULL = every port */
	size_t n_ports;		 /* entries in ports */
};

struct rule_list {
	struct rule *v; /* heap */
	size_t n;	/* count */
};

struct net_policy {
	atomic_int refs;	/* references; the last net_policy_free frees */
	bool default_allow;	/* verdict when no rule matches */
	struct rule_list allow; /* allow rules, in input order */
	struct rule_list deny;	/* deny rules, in input order */
};

static const char *const reason_names[NET_REASON_COUNT_] = {
	[NET_REASON_ALLOW_RULE] = "allow_rule",	 [NET_REASON_ALLOW_DEFAULT] = "allow_default",
	[NET_REASON_DENY_RULE] = "deny_rule",	 [NET_REASON_DENY_DEFAULT] = "deny_default",
	[NET_REASON_DENY_BAD_NAME] = "bad_name", [NET_REASON_DENY_ALWAYS] = "always_denied",
};

const char *net_reason_name(enum net_reason r)
{
	return (unsigned)r < NET_REASON_COUNT_ ? reason_names[r] : "unknown";
}

/* ---- addresses ---------------------------------------------------------------------------- */

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool net_addr_is_v4(const struct net_addr *a)
{
	return memcmp(a->b, v4_mapped_prefix, 12) == 0;
}

static void addr_from_v4(const void *v4, struct net_addr *out)
{
	memcpy(out->b, v4_mapped_prefix, 12);
	memcpy(out->b + 12, v4, 4);
}

int net_addr_from_sockaddr(const struct sockaddr *sa, struct net_addr *out, uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		addr_from_v4(&s4->sin_addr, out);
		if (port)
			*port = ntohs(s4->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		memcpy(out->b, &s6->sin6_addr, 16);
		if (port)
			*port = ntohs(s6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

socklen_t net_addr_to_sockaddr(const struct net_addr *a, uint16_t port,
			       struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (net_addr_is_v4(a)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)out;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a->b + 12, 4);
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	memcpy(&s6->sin6_addr, a->b, 16);
	return sizeof(*s6);
}

int net_addr_parse(const char *s, struct net_addr *out)
{
	struct in_addr v4;

	if (!s)
		return -EINVAL;
	/* inet_pton(AF_INET) accepts only the strict dotted quad (no "0x7f.1", no "127.1"). */
	if (inet_pton(AF_INET, s, &v4) == 1) {
		addr_from_v4(&v4, out);
		return 0;
	}
	if (inet_pton(AF_INET6, s, out->b) == 1)
		return 0;
	return -EINVAL;
}

void net_addr_format(const struct net_addr *a, char *buf, size_t len)
{
	if (net_addr_is_v4(a)) {
		if (!inet_ntop(AF_INET, a->b + 12, buf, (socklen_t)len) && len)
			buf[0] = '\0';
	} else if (!inet_ntop(AF_INET6, a->b, buf, (socklen_t)len) && len) {
		buf[0] = '\0';
	}
}

bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a)
{
	unsigned full = c->prefix / 8, rest = c->prefix % 8;

	if (memcmp(c->addr.b, a->b, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));

	return (c->addr.b[full] & mask) == (a->b[full] & mask);
}

static bool host_bits_zero(const struct net_cidr *c)
{
	for (unsigned bit = c->prefix; bit < 128; bit++)
		if (c->addr.b[bit / 8] & (0x80 >> (bit % 8)))
			return false;
	return true;
}

int net_cidr_parse(const char *s, struct net_cidr *out)
{
	char buf[64];
	const char *slash;
	size_t alen;
	unsigned long pfx;
	char *end;

	if (!s)
		return -EINVAL;
	slash = strchr(s, '/');
	alen = slash ? (size_t)(slash - s) : strlen(s);
	if (alen == 0 || alen >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (net_addr_parse(buf, &out->addr) < 0)
		return -EINVAL;
	bool v4 = net_addr_is_v4(&out->addr) && !strchr(buf, ':');
	unsigned max = v4 ? 32 : 128;

	if (slash) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		errno = 0;
		pfx = strtoul(slash + 1, &end, 10);
		if (errno || *end || pfx > max || (slash[1] == '0' && slash[2]))
			return -EINVAL;
	} else {
		pfx = max;
	}
	out->prefix = (uint8_t)(v4 ? 96 + pfx : pfx);
	return host_bits_zero(out) ? 0 : -EDOM;
}

static void cidr_format(const struct net_cidr *c, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	bool v4 = net_addr_is_v4(&c->addr) && c->prefix >= 96;

	net_addr_format(&c->addr, a, sizeof(a));
	if (!v4 && net_addr_is_v4(&c->addr)) /* a v6 prefix shorter than ::ffff:0:0/96 */
		inet_ntop(AF_INET6, c->addr.b, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, v4 ? c->prefix - 96u : c->prefix);
}

/* ---- names -------------------------------------------------------------------------------- */

int net_name_normalize(const char *name, char *out, size_t outlen)
{
	size_t n, label = 0;
	bool all_digits = true;

	if (!name)
		return -EINVAL;
	n = strnlen(name, 256);
	if (n && name[n - 1] == '.')
		n--;
	if (n == 0 || n > 253 || n + 1 > outlen)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '.') {
			if (label == 0 || out[i - 1] == '-')
				return -EINVAL;
			label = 0;
			all_digits = true;
			out[i] = '.';
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return -EINVAL; /* UTF-8 (raw IDNA), spaces, NUL, '*', ... */
		if (c == '-' && label == 0)
			return -EINVAL;
		if (!(c >= '0' && c <= '9'))
			all_digits = false;
		if (++label > 63)
			return -EINVAL;
		out[i] = (char)c;
	}
	if (out[n - 1] == '-' || all_digits)
		return -EINVAL; /* all-digit last label: an IP literal or a numeric trick, not a name */
	out[n] = '\0';
	return 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */

static void rule_fini(struct rule *r)
{
	free(r->domain);
	free(r->ports);
}

static void list_fini(struct rule_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		rule_fini(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Parses "443" or "8000-8100" (the whole string). */
static int port_span_parse(const char *s, struct port_span *out)
{
	unsigned long lo, hi;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	lo = strtoul(s, &end, 10);
	if (errno || lo < 1 || lo > 65535)
		return -EINVAL;
	hi = lo;
	if (*end == '-') {
		if (end[1] < '0' || end[1] > '9')
			return -EINVAL;
		hi = strtoul(end + 1, &end, 10);
		if (errno || hi < lo || hi > 65535)
			return -EINVAL;
	}
	if (*end)
		return -EINVAL;
	out->lo = (uint16_t)lo;
	out->hi = (uint16_t)hi;
	return 0;
}

static int rule_set_ports(struct rule *r, const json_t *ports, const char *where,
			  struct isola_err **err)
{
	size_t n = json_array_size(ports);

	if (!json_is_array(ports))
		return isola_err_set(err, EINVAL, "invalid", "%s: ports must be an array", where);
	if (n == 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "%s: ports is empty (omit it for every port)", where);
	if (n > MAX_PORT_SPANS)
		return isola_err_set(err, EINVAL, "invalid", "%s: more than %d port entries", where,
				     MAX_PORT_SPANS);
	r->ports = calloc(n, sizeof(*r->ports));
	if (!r->ports)
		return isola_err_set(err, ENOMEM, "internal", "%s: out of memory", where);
	r->n_ports = n;
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(ports, i);

		if (json_is_integer(p)) {
			json_int_t v = json_integer_value(p);

			if (v < 1 || v > 65535)
				return isola_err_set(err, EINVAL, "invalid",
						     "%s: ports[%zu]: %lld is not a port (1-65535)",
						     where, i, (long long)v);
			r->ports[i].lo = r->ports[i].hi = (uint16_t)v;
		} else if (json_is_string(p)) {
			if (port_span_parse(json_string_value(p), &r->ports[i]) < 0)
				return isola_err_set(err, EINVAL, "invalid",
						     "%s: ports[%zu]: `%s` is not a port or a "
						     "range lo-hi (1-65535)",
						     where, i, json_string_value(p));
		} else {
			return isola_err_set(err, EINVAL, "invalid",
					     "%s: ports[%zu] must be a number or \"lo-hi\"", where,
					     i);
		}
	}
	return 0;
}

static int rule_set_domain(struct rule *r, const char *d, const char *where, struct isola_err **err)
{
	char norm[256];
	bool wild = d[0] == '*';

	if (wild && d[1] != '.')
		return isola_err_set(
			err, EINVAL, "invalid",
			"%s: domain `%s`: a wildcard must be a whole first label (*.example.com)",
			where, d);
	if (net_name_normalize(wild ? d + 2 : d, norm, sizeof(norm)) < 0)
		return isola_err_set(
			err, EINVAL, "invalid",
			"%s: domain `%s`: not a valid host name (ASCII letters, digits, "
			"'-' labels of 1-63, at most 253 in all, not an IP address)",
			where, d);
	if (wild && !strchr(norm, '.'))
		return isola_err_set(
			err, EINVAL, "invalid",
			"%s: domain `%s`: a wildcard over a top-level domain is too broad", where,
			d);
	if (wild) {
		r->kind = RULE_WILDCARD;
		if (asprintf(&r->domain, ".%s", norm) < 0)
			r->domain = NULL;
	} else {
		r->kind = RULE_DOMAIN;
		r->domain = strdup(norm);
	}
	if (!r->domain)
		return isola_err_set(err, ENOMEM, "internal", "%s: out of memory", where);
	return 0;
}

static int rule_set_cidr(struct rule *r, const char *s, const char *where, struct isola_err **err)
{
	int rc = net_cidr_parse(s, &r->cidr);

	if (rc == -EDOM)
		return isola_err_set(err, EINVAL, "invalid",
				     "%s: cidr `%s`: host bits are set after the prefix", where, s);
	if (rc < 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "%s: cidr `%s`: not an address or address/prefix", where, s);
	r->kind = RULE_CIDR;
	return 0;
}

static bool looks_like_address(const char *s)
{
	/* Digits, dots, '/', or any ':' (v6): an address, not a name. */
	if (strchr(s, ':'))
		return true;
	for (; *s && *s != '/'; s++)
		if (!((*s >= '0' && *s <= '9') || *s == '.'))
			return false;
	return true;
}

/* "example.com", "*.example.com", "203.0.113.0/24", "2001:db8::/32", "example.com:443". */
static int rule_from_string(struct rule *r, const char *s, const char *where,
			    struct isola_err **err)
{
	char host[300];
	const char *colon = strchr(s, ':');
	int rc;

	if (colon && !strchr(colon + 1, ':')) { /* one ':' = host:port (v6 has several) */
		size_t hl = (size_t)(colon - s);
		json_t *ports;

		if (hl == 0 || hl >= sizeof(host))
			return isola_err_set(err, EINVAL, "invalid", "%s: `%s`: bad host:port",
					     where, s);
		memcpy(host, s, hl);
		host[hl] = '\0';
		ports = json_pack("[s]", colon + 1);
		if (!ports)
			return isola_err_set(err, ENOMEM, "internal", "%s: out of memory", where);
		rc = rule_set_ports(r, ports, where, err);
		json_decref(ports);
		if (rc < 0)
			return rc;
		s = host;
	}
	if (looks_like_address(s))
		return rule_set_cidr(r, s, where, err);
	return rule_set_domain(r, s, where, err);
}

static int rule_parse(struct rule *r, const json_t *j, const char *where, struct isola_err **err)
{
	const json_t *cidr, *domain, *ports;
	const char *key;
	json_t *v;

	if (json_is_string(j))
		return rule_from_string(r, json_string_value(j), where, err);
	if (!json_is_object(j))
		return isola_err_set(
			err, EINVAL, "invalid",
			"%s: a rule is an object {\"cidr\"|\"domain\", \"ports\"} or a string",
			where);
	json_object_foreach((json_t *)j, key, v)
	{
		if (strcmp(key, "cidr") && strcmp(key, "domain") && strcmp(key, "ports"))
			return isola_err_set(err, EINVAL, "invalid", "%s: unknown key `%s`", where,
					     key);
	}
	cidr = json_object_get(j, "cidr");
	domain = json_object_get(j, "domain");
	ports = json_object_get(j, "ports");
	if (!!cidr == !!domain)
		return isola_err_set(err, EINVAL, "invalid",
				     "%s: exactly one of \"cidr\" and \"domain\" is required",
				     where);
	if ((cidr && !json_is_string(cidr)) || (domain && !json_is_string(domain)))
		return isola_err_set(err, EINVAL, "invalid", "%s: %s must be a string", where,
				     cidr ? "cidr" : "domain");
	if (ports && rule_set_ports(r, ports, where, err) < 0)
		return -EINVAL;
	if (cidr)
		return rule_set_cidr(r, json_string_value(cidr), where, err);
	return rule_set_domain(r, json_string_value(domain), where, err);
}

static int list_parse(struct rule_list *l, const json_t *arr, const char *name,
		      struct isola_err **err)
{
	size_t n;

	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return isola_err_set(err, EINVAL, "invalid", "policy: `%s` must be an array", name);
	n = json_array_size(arr);
	if (n > MAX_RULES)
		return isola_err_set(err, EINVAL, "invalid", "policy: `%s` has more than %d rules",
				     name, MAX_RULES);
	if (n == 0)
		return 0;
	l->v = calloc(n, sizeof(*l->v));
	if (!l->v)
		return isola_err_set(err, ENOMEM, "internal", "policy: out of memory");
	for (size_t i = 0; i < n; i++) {
		char where[48];

		snprintf(where, sizeof(where), "policy %s[%zu]", name, i);
		l->n = i + 1; /* so list_fini frees the partial rule too */
		if (rule_parse(&l->v[i], json_array_get(arr, i), where, err) < 0)
			return -EINVAL;
	}
	return 0;
}

struct net_policy *net_policy_new_default(bool default_allow)
{
	struct net_policy *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	atomic_init(&p->refs, 1);
	p->default_allow = default_allow;
	return p;
}

int net_policy_parse_default(const json_t *j, bool default_allow, struct net_policy **out,
			     struct isola_err **err)
{
	struct net_policy *p;
	const json_t *def;
	const char *key;
	json_t *v;

	*out = NULL;
	if (j && !json_is_object(j) && !json_is_null(j))
		return isola_err_set(err, EINVAL, "invalid", "policy: must be a JSON object");
	p = net_policy_new_default(default_allow);
	if (!p)
		return isola_err_set(err, ENOMEM, "internal", "policy: out of memory");
	if (!json_is_object(j))
		goto done;
	json_object_foreach((json_t *)j, key, v)
	{
		if (strcmp(key, "default") && strcmp(key, "allow") && strcmp(key, "deny")) {
			isola_err_set(err, EINVAL, "invalid",
				      "policy: unknown key `%s` (default, allow, deny)", key);
			goto fail;
		}
	}
	def = json_object_get(j, "default");
	if (def) {
		const char *d = json_string_value(def);

		if (d && !strcmp(d, "allow")) {
			p->default_allow = true;
		} else if (d && !strcmp(d, "deny")) {
			p->default_allow = false;
		} else {
			isola_err_set(err, EINVAL, "invalid",
				      "policy: default must be \"allow\" or \"deny\"");
			goto fail;
		}
	}
	if (list_parse(&p->allow, json_object_get(j, "allow"), "allow", err) < 0 ||
	    list_parse(&p->deny, json_object_get(j, "deny"), "deny", err) < 0)
		goto fail;
done:
	*out = p;
	return 0;
fail:
	net_policy_free(p);
	return -EINVAL;
}

int net_policy_parse(const json_t *j, struct net_policy **out, struct isola_err **err)
{
	return net_policy_parse_default(j, false, out, err);
}

struct net_policy *net_policy_ref(struct net_policy *p)
{
	if (p)
		atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	return p;
}

void net_policy_free(struct net_policy *p)
{
	if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
		return;
	list_fini(&p->allow);
	list_fini(&p->deny);
	free(p);
}

bool net_policy_default_allows(const struct net_policy *p)
{
	return p->default_allow;
}

/* ---- serialising -------------------------------------------------------------------------- */

static json_t *rule_to_json(const struct rule *r)
{
	char buf[300];
	json_t *o = json_object(), *ports;

	if (!o)
		return NULL;
	if (r->kind == RULE_CIDR) {
		cidr_format(&r->cidr, buf, sizeof(buf));
		json_object_set_new(o, "cidr", json_string(buf));
	} else {
		snprintf(buf, sizeof(buf), "%s%s", r->kind == RULE_WILDCARD ? "*" : "", r->domain);
		json_object_set_new(o, "domain", json_string(buf));
	}
	if (r->ports) {
		ports = json_array();
		for (size_t i = 0; ports && i < r->n_ports; i++) {
			if (r->ports[i].lo == r->ports[i].hi) {
				json_array_append_new(ports, json_integer(r->ports[i].lo));
			} else {
				snprintf(buf, sizeof(buf), "%u-%u", r->ports[i].lo, r->ports[i].hi);
				json_array_append_new(ports, json_string(buf));
			}
		}
		json_object_set_new(o, "ports", ports);
	}
	return o;
}

static json_t *list_to_json(const struct rule_list *l)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->n; i++)
		if (json_array_append_new(a, rule_to_json(&l->v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

json_t *net_policy_to_json(const struct net_policy *p)
{
	return json_pack("{s:s, s:o, s:o}", "default", p->default_allow ? "allow" : "deny", "allow",
			 list_to_json(&p->allow), "deny", list_to_json(&p->deny));
}

/* ---- decisions ---------------------------------------------------------------------------- */

static bool port_matches(const struct rule *r, uint16_t port)
{
	if (!r->ports || port == 0)
		return true;
	for (size_t i = 0; i < r->n_ports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return true;
	return false;
}

static bool name_matches(const struct rule *r, const char *name, size_t len)
{
	size_t dl;

	if (r->kind == RULE_DOMAIN)
		return !strcmp(r->domain, name);
	if (r->kind != RULE_WILDCARD)
		return false;
	dl = strlen(r->domain); /* ".example.com": a strict suffix at a label boundary */
	return len > dl && !strcmp(name + len - dl, r->domain);
}

static bool list_matches_name(const struct rule_list *l, const char *name, uint16_t port)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < l->n; i++)
		if (name_matches(&l->v[i], name, len) && port_matches(&l->v[i], port))
			return true;
	return false;
}

bool net_policy_check_name(const struct net_policy *p, const char *name, uint16_t port,
			   enum net_reason *reason)
{
	char norm[256];
	enum net_reason r;

	if (net_name_normalize(name, norm, sizeof(norm)) < 0)
		r = NET_REASON_DENY_BAD_NAME;
	else if (list_matches_name(&p->deny, norm, port))
		r = NET_REASON_DENY_RULE;
	else if (list_matches_name(&p->allow, norm, port))
		r = NET_REASON_ALLOW_RULE;
	else
		r = p->default_allow ? NET_REASON_ALLOW_DEFAULT : NET_REASON_DENY_DEFAULT;
	if (reason)
		*reason = r;
	return r == NET_REASON_ALLOW_RULE || r == NET_REASON_ALLOW_DEFAULT;
}

/* The IPv4 address carried inside a v6 one, if any, as v4-mapped in *out. */
static bool embedded_v4(const struct net_addr *a, struct net_addr *out)
{
	static const uint8_t compat[12] = {0};
	static const uint8_t translated[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
	const uint8_t *b = a->b;

	if (net_addr_is_v4(a))
		return false; /* already the v4 form */
	if (!memcmp(b, compat, 12) || !memcmp(b, translated, 12) || !memcmp(b, nat64, 12)) {
		addr_from_v4(b + 12, out);
		return true;
	}
	if (b[0] == 0x20 && b[1] == 0x02) { /* 6to4 2002:V4ADDR::/48 */
		addr_from_v4(b + 2, out);
		return true;
	}
	return false;
}

static bool list_matches_addr(const struct rule_list *l, const struct net_addr *a, uint16_t port)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].kind == RULE_CIDR && port_matches(&l->v[i], port) &&
		    net_cidr_contains(&l->v[i].cidr, a))
			return true;
	return false;
}

bool net_policy_denies_addr(const struct net_policy *p, const struct net_addr *addr, uint16_t port)
{
	struct net_addr inner;

	if (list_matches_addr(&p->deny, addr, port))
		return true;
	return embedded_v4(addr, &inner) && list_matches_addr(&p->deny, &inner, port);
}

bool net_policy_check_addr(const struct net_policy *p, const struct net_addr *addr, uint16_t port,
			   enum net_reason *reason)
{
	enum net_reason r;

	if (net_policy_denies_addr(p, addr, port))
		r = NET_REASON_DENY_RULE;
	else if (list_matches_addr(&p->allow, addr, port))
		r = NET_REASON_ALLOW_RULE;
	else
		r = p->default_allow ? NET_REASON_ALLOW_DEFAULT : NET_REASON_DENY_DEFAULT;
	if (reason)
		*reason = r;
	return r == NET_REASON_ALLOW_RULE || r == NET_REASON_ALLOW_DEFAULT;
}

/* ---- always denied ------------------------------------------------------------------------ */

/* The ranges no policy can open (only the operator, through net_opens). */
static const char *const denied_ranges[] = {
	"0.0.0.0/8",	  /* "this network"; 0.0.0.0 reaches the host's own listeners */
	"10.0.0.0/8",	  /* RFC 1918 */
	"100.64.0.0/10",  /* carrier-grade NAT (RFC 6598), often cloud-internal */
	"127.0.0.0/8",	  /* loopback: the host's own services, isolad's API */
	"169.254.0.0/16", /* link-local: cloud metadata 169.254.169.254 */
	"172.16.0.0/12",  /* RFC 1918 */
	"192.168.0.0/16", /* RFC 1918 */
	"224.0.0.0/4",	  /* multicast */
	"240.0.0.0/4",	  /* reserved, incl. broadcast 255.255.255.255 */
	"::/128",	  /* unspecified */
	"::1/128",	  /* loopback */
	"fe80::/10",	  /* link-local */
	"fec0::/10",	  /* deprecated site-local */
	"fc00::/7",	  /* unique local (ULA) */
	"ff00::/8",	  /* multicast */
	"64:ff9b:1::/48", /* local-use NAT64 (RFC 8215): v4 embedded at operator-chosen offsets */
};

static struct net_cidr denied_cidrs[ARRAY_SIZE(denied_ranges)];
static pthread_once_t denied_once = PTHREAD_ONCE_INIT;

static void denied_init(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(denied_ranges); i++)
		if (net_cidr_parse(denied_ranges[i], &denied_cidrs[i]) < 0)
			abort(); /* a typo in the table above: caught by the first unit test */
}

/* The host's own addresses: a sandbox reaching a public address of the host reaches every service
 * bound to 0.0.0.0 on it. The kernel's route lookup decides (hostaddr.h), in the namespace of the
 * calling thread, which is the one the proxy dials from; a lookup that fails denies. */
static bool is_host_addr(const struct net_addr *a)
{
	return net_hostaddr_lookup(a) != 0;
}

static bool opened(const struct net_addr *a, const struct net_opens *opens)
{
	for (size_t i = 0; opens && i < opens->n; i++)
		if (net_cidr_contains(&opens->v[i], a))
			return true;
	return false;
}

static bool denied_one(const struct net_addr *a, const struct net_opens *opens)
{
	bool hit = false;

	for (size_t i = 0; i < ARRAY_SIZE(denied_cidrs) && !hit; i++)
		hit = net_cidr_contains(&denied_cidrs[i], a);
	if (!hit)
		hit = is_host_addr(a);
	return hit && !opened(a, opens);
}

bool net_addr_always_denied(const struct net_addr *addr, const struct net_opens *opens)
{
	struct net_addr inner;

	pthread_once(&denied_once, denied_init);
	if (opened(addr, opens))
		return false; /* the operator opened this very address: its embedding is moot */
	if (denied_one(addr, opens))
		return true;
	/* ::ffff:169.254.169.254, 64:ff9b::a9fe:a9fe, 2002:a9fe:a9fe:: all reach the v4 address. */
	return embedded_v4(addr, &inner) && denied_one(&inner, opens);
}

int net_opens_parse(const char *list, struct net_opens *out, struct isola_err **err)
{
	cleanup_free char *copy = NULL;
	char *save = NULL, *tok;
	size_t cap = 0;

	out->v = NULL;
	out->n = 0;
	if (!list || !*list)
		return 0;
	copy = strdup(list);
	if (!copy)
		return isola_err_set(err, ENOMEM, "internal", "net opens: out of memory");
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		if (out->n == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct net_cidr *nv = realloc(out->v, ncap * sizeof(*nv));

			if (!nv) {
				net_opens_fini(out);
				return isola_err_set(err, ENOMEM, "internal",
						     "net opens: out of memory");
			}
			out->v = nv;
			cap = ncap;
		}
		if (net_cidr_parse(tok, &out->v[out->n]) < 0) {
			isola_err_set(
				err, EINVAL, "invalid",
				"net open range `%s`: not an address/prefix with zero host bits",
				tok);
			net_opens_fini(out);
			return -EINVAL;
		}
		out->n++;
	}
	return 0;
}

void net_opens_fini(struct net_opens *o)
{
	free(o->v);
	o->v = NULL;
	o->n = 0;
}
