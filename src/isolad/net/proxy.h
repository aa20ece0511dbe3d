/* SPDX-License-Identifier: Apache-2.0 */
/* proxy: the egress proxy every sandbox TCP connection is redirected to (decide, connect, relay). */
#ifndef ISOLA_NET_PROXY_H
#define ISOLA_NET_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../common/err.h"
#include "policy.h"

struct net_proxy;
struct net_counters; /* net.h: per-sandbox counters, atomics, reference-counted by net */

/* Why the proxy refused a connection (log token and index of net_proxy_stats.denied). */
enum net_proxy_deny {
	NET_PROXY_DENY_POLICY,	  /* the policy: a deny rule, or nothing allowed it */
	NET_PROXY_DENY_ALWAYS,	  /* always-denied address (metadata, private, host), incl. a
				     name that resolved to one (rebinding) */
	NET_PROXY_DENY_BAD_NAME,  /* SNI/Host is not a valid host name */
	NET_PROXY_DENY_MALFORMED, /* the TLS or HTTP head was malformed or over 16 KiB */
	NET_PROXY_DENY_RESOLVE,	  /* the allowed name did not resolve */
	NET_PROXY_DENY_LIMIT,	  /* the sandbox's connection limit, or the proxy's */
	NET_PROXY_DENY_UNKNOWN,	  /* the peer is no sandbox */
	NET_PROXY_DENY_COUNT_
};
const char *net_proxy_deny_name(enum net_proxy_deny d);

/*
 * Maps a connection's peer address to its sandbox (net_lookup_peer's shape): fills id (>= 64
 * bytes), *policy (one reference, the proxy frees it) and *counters (one reference, the proxy
 * releases it with put_counters when the connection ends). -ENOENT for anyone else. Called on
 * the proxy's loop thread: must not block.
 */
typedef int (*net_proxy_lookup_fn)(void *arg, const struct sockaddr *peer, char *id,
				   struct net_policy **policy, struct net_counters **counters);
typedef void (*net_proxy_put_counters_fn)(struct net_counters *c);

/*
 * Resolves name to up to max addresses (net_dns_resolve's shape; port ignored). 0 and *n, or
 * -errno with *err. Called on a resolver worker thread: may block (bounded by its own timeout).
 */
typedef int (*net_proxy_resolve_fn)(void *arg, const char *name, struct sockaddr_storage *out,
				    size_t max, size_t *n, struct isola_err **err);

/* The destination the sandbox dialled, before nftables redirected it to the proxy: 0 or -errno.
 * The default (NULL in the config) reads SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST. */
typedef int (*net_proxy_original_dst_fn)(void *arg, int fd, struct sockaddr_storage *out);

struct net_proxy_config {
	int listen_fd;				/* >= 0: a listening TCP socket (borrowed; made
					      non-blocking); < 0: bind listen_addr */
	struct sockaddr_storage listen_addr;	/* when listen_fd < 0 (owned socket) */
	const struct net_opens *opens;		/* operator-opened ranges (borrowed, may be NULL) */
	net_proxy_lookup_fn lookup;		/* required */
	net_proxy_put_counters_fn put_counters; /* required */
	net_proxy_resolve_fn resolve;		/* required */
	net_proxy_original_dst_fn original_dst; /* NULL = SO_ORIGINAL_DST (production) */
	void *arg;				/* passed to lookup, resolve, original_dst */
	uint32_t max_conns;			/* per sandbox, concurrent (0 = unlimited) */
	uint64_t rate_bytes;	     /* per sandbox, bytes/s in each direction (0 = unlimited) */
	uint32_t max_conns_total;    /* whole proxy (0 = 4096) */
	uint32_t head_timeout_ms;    /* time to complete a started TLS/HTTP head (0 = 5000) */
	uint32_t silent_ms;	     /* a client that sent nothing by then is raw TCP (0 = 1000) */
	uint32_t connect_timeout_ms; /* per upstream address tried (0 = 10000) */
	uint32_t idle_timeout_ms;    /* no byte either way closes the connection (0 = 600000) */
	unsigned resolver_threads;   /* DNS worker threads (0 = 4) */
};

/* Proxy-wide counters (a snapshot). */
struct net_proxy_stats {
	uint64_t accepted;			/* connections accepted */
	uint64_t allowed;			/* connected upstream */
	uint64_t denied[NET_PROXY_DENY_COUNT_]; /* refused, by reason */
	uint64_t connect_failed;		/* allowed, but no address answered */
	uint64_t active;			/* open now (any state) */
	uint64_t bytes_out;			/* sandbox → upstream */
	uint64_t bytes_in;			/* upstream → sandbox */
};

/*
 * Starts the proxy: one epoll loop thread (accept, head reading, decisions, connect, relay) and
 * resolver_threads workers for DNS, so no lookup ever blocks the relay. The config is copied;
 * what it points to is borrowed for the proxy's life. Returns 0 and *out, or -errno with *err.
 *
 * Per connection: original destination (original_dst), peer → sandbox (lookup; unknown → RST),
 * connection limits, then the head: TLS SNI or HTTP Host (sni.h), waiting at most silent_ms for
 * a first byte and head_timeout_ms for the rest (an undecided head is raw TCP). Decision:
 *  - a name (not an IP literal): the policy's name check; allowed → resolved on a worker; every
 *    address is checked against the always-denied ranges and the policy's deny CIDRs, the first
 *    that passes is dialled on the original port (so rebinding to 169.254.169.254 fails). A name
 *    nothing allows is still let through when a CIDR allow rule names the original destination
 *    (and it is not always-denied): it is then dialled as raw TCP.
 *  - no name, an IP literal, or raw TCP: the policy's address check and the always-denied check
 *    on the original destination.
 * A denied connection is closed with RST without contacting anyone. An allowed one relays both
 * ways (the bytes already read first), half-close kept, with per-sandbox token buckets and an
 * idle timeout. Each decision is logged (sandbox, name, address, port, verdict, reason).
 */
int net_proxy_start(const struct net_proxy_config *cfg, struct net_proxy **out,
		    struct isola_err **err);

/* Stops the threads, closes every connection (and the socket it owns), frees p. NULL is fine.
 * Must not be called from a callback. */
void net_proxy_stop(struct net_proxy *p);

/* The port the proxy listens on (host order). */
uint16_t net_proxy_port(const struct net_proxy *p);

/* A snapshot of the proxy-wide counters. Any thread. */
void net_proxy_get_stats(const struct net_proxy *p, struct net_proxy_stats *out);

/* The production original-destination reader (SO_ORIGINAL_DST, IPv4 and IPv6). */
int net_proxy_so_original_dst(void *arg, int fd, struct sockaddr_storage *out);

#endif
