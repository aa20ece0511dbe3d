/* SPDX-License-Identifier: Apache-2.0 */
/* policy: per-sandbox egress policy (allow/deny by CIDR, domain, port) and the always-denied ranges. */
#ifndef ISOLA_NET_POLICY_H
#define ISOLA_NET_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../common/err.h"

/* An IP address in IPv6 form; IPv4 is kept IPv4-mapped (::ffff:a.b.c.d), so a v4 rule and a
 * v4-mapped v6 connection are the same thing to every check below. */
struct net_addr {
	uint8_t b[16]; /* network byte order */
};

/* A prefix in the same 128-bit space: 203.0.113.0/24 is ::ffff:203.0.113.0/120. */
struct net_cidr {
	struct net_addr addr; /* host bits are zero */
	uint8_t prefix;	      /* 0..128 (v4 rules: 96 + the v4 prefix) */
};

/* Ranges the operator opened explicitly (isolad --net-open CIDR[,CIDR...]): addresses in them
 * are not "always denied" (the policy still decides). Immutable after parse. */
struct net_opens {
	struct net_cidr *v; /* heap-owned, n entries */
	size_t n;	    /* count */
};

/* Why a decision went the way it did; also the counter index for denials. */
enum net_reason {
	NET_REASON_ALLOW_RULE,	  /* an allow rule matched (and no deny rule) */
	NET_REASON_ALLOW_DEFAULT, /* nothing matched, default is allow */
	NET_REASON_DENY_RULE,	  /* a deny rule matched (deny beats allow) */
	NET_REASON_DENY_DEFAULT,  /* nothing matched, default is deny */
	NET_REASON_DENY_BAD_NAME, /* the name is not a valid ASCII host name */
	NET_REASON_DENY_ALWAYS,	  /* metadata, loopback, private, host or multicast address */
	NET_REASON_COUNT_
};

/* "allow_rule", "deny_default", ... (stable tokens for logs and counters). */
const char *net_reason_name(enum net_reason r);

/* A parsed policy: immutable and reference-counted, so a live edit builds a new one and swaps the
 * pointer while connections in flight keep the old one. Any thread may read or ref/free it. */
struct net_policy;

/*
 * Parses {"default":"deny"|"allow", "allow":[rule...], "deny":[rule...]} (all keys optional,
 * "default" absent = deny). A rule is {"cidr":"203.0.113.0/24"} or {"domain":"example.com"} /
 * {"domain":"*.example.com"}, optionally with "ports":[443, "8000-8100"]; or a string
 * "example.com", "*.example.com", "203.0.113.0/24", "203.0.113.7", "2001:db8::/32",
 * "example.com:443", "203.0.113.0/24:443". j NULL means the default policy (deny all).
 * Returns 0 and *out (one reference, release with net_policy_free), or -EINVAL with *err naming
 * the rule ("allow[2]: domain `x..y`: empty label"), code "invalid".
 */
int net_policy_parse(const json_t *j, struct net_policy **out, struct isola_err **err);

/* Like net_policy_parse, with the operator's default used when "default" is absent. */
int net_policy_parse_default(const json_t *j, bool default_allow, struct net_policy **out,
			     struct isola_err **err);

/* A policy with no rules and the given default; NULL only on allocation failure. */
struct net_policy *net_policy_new_default(bool default_allow);

/* The canonical JSON form (object rules, ports as numbers or "a-b" strings); caller owns it.
 * net_policy_parse(net_policy_to_json(p)) yields the same policy. NULL on allocation failure. */
json_t *net_policy_to_json(const struct net_policy *p);

/* Adds a reference and returns p. */
struct net_policy *net_policy_ref(struct net_policy *p);
/* Drops a reference; the last one frees. NULL is fine. */
void net_policy_free(struct net_policy *p);

bool net_policy_default_allows(const struct net_policy *p);

/*
 * Decides a connection to host name `name` (UNTRUSTED: from SNI, Host or a DNS query; validated
 * here) on `port` (0 = any port, used by the DNS resolver to answer a name). Exact domain rules
 * match the name; `*.example.com` matches a.example.com and a.b.example.com, never example.com
 * nor notexample.com. Case-insensitive; one trailing dot ignored. Deny rules beat allow rules.
 * CIDR rules never match a name. IP literals and non-LDH names are NET_REASON_DENY_BAD_NAME.
 * Returns true to allow; *reason (may be NULL) says why.
 */
bool net_policy_check_name(const struct net_policy *p, const char *name, uint16_t port,
			   enum net_reason *reason);

/*
 * Decides a connection to `addr`:`port` that has no name (raw TCP or an IP literal): CIDR rules
 * only, deny beats allow, then the default. A v4 deny rule also matches the v4 address embedded in
 * a v6 one (mapped, compatible, NAT64, 6to4). Does NOT apply the always-denied ranges: call
 * net_addr_always_denied too.
 */
bool net_policy_check_addr(const struct net_policy *p, const struct net_addr *addr, uint16_t port,
			   enum net_reason *reason);

/* True if a deny CIDR rule matches addr:port (for the resolved addresses of an allowed name). */
bool net_policy_denies_addr(const struct net_policy *p, const struct net_addr *addr, uint16_t port);

/*
 * True if addr is in a range denied whatever the policy says: 0/8, 10/8, 100.64/10, 127/8,
 * 169.254/16, 172.16/12, 192.168/16, 224/4, 240/4 (incl. 255.255.255.255), ::, ::1, fe80::/10,
 * fec0::/10, fc00::/7, ff00::/8, any destination the kernel delivers to this host itself (a route
 * lookup per call in the calling thread's namespace, net_hostaddr_lookup; a failed lookup
 * denies), and the v4 address embedded in IPv4-mapped, -compatible, -translated, NAT64
 * (64:ff9b::/96, 64:ff9b:1::/48) and 6to4 forms. An address in `opens` (may be NULL) is never
 * denied; an embedded v4 is denied unless it is in `opens` itself. Thread-safe.
 */
bool net_addr_always_denied(const struct net_addr *addr, const struct net_opens *opens);

/* Parses "CIDR[,CIDR...]" (or "" for none) into *out (release with net_opens_fini). */
int net_opens_parse(const char *list, struct net_opens *out, struct isola_err **err);
void net_opens_fini(struct net_opens *o);

/* Address helpers. from_sockaddr: AF_INET/AF_INET6 (port optional, host order) or -EAFNOSUPPORT.
 * to_sockaddr: AF_INET for v4-mapped, AF_INET6 otherwise; returns the length. parse: a literal
 * v4 or v6 address (-EINVAL otherwise). format: v4-mapped as dotted quad; buf >= 46 bytes. */
int net_addr_from_sockaddr(const struct sockaddr *sa, struct net_addr *out, uint16_t *port);
socklen_t net_addr_to_sockaddr(const struct net_addr *a, uint16_t port,
			       struct sockaddr_storage *out);
int net_addr_parse(const char *s, struct net_addr *out);
void net_addr_format(const struct net_addr *a, char *buf, size_t len);
bool net_addr_is_v4(const struct net_addr *a);
/* "203.0.113.0/24", "2001:db8::/32", "203.0.113.7" (= /32); host bits must be zero. */
int net_cidr_parse(const char *s, struct net_cidr *out);
bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a);

/* Lower-cases and validates a host name into out (>= 254 bytes): ASCII letters, digits, '-',
 * '_' labels of 1-63, at most 253 in all, one trailing dot dropped, last label not all-digits
 * (so no IP literal passes as a name). Returns 0 or -EINVAL. */
int net_name_normalize(const char *name, char *out, size_t outlen);

#endif
