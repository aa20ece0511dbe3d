/* SPDX-License-Identifier: Apache-2.0 */
/* denials: a bounded ring of one sandbox's most recent egress denials (GET .../network). */
#ifndef ISOLA_NET_DENIALS_H
#define ISOLA_NET_DENIALS_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#define NET_DENIALS_MAX	      32  /* denials kept per sandbox; older ones are overwritten */
#define NET_DENIAL_HOST_MAX   254 /* host name bytes kept (a DNS name's maximum is 253) */
#define NET_DENIAL_ADDR_MAX   46  /* INET6_ADDRSTRLEN */
#define NET_DENIAL_REASON_MAX 32  /* reason token bytes kept */

/* One refused connection. Strings are NUL-terminated printable ASCII (see net_denials_add). */
struct net_denial {
	double at;			    /* unix time of the decision */
	char host[NET_DENIAL_HOST_MAX + 1]; /* SNI/Host name the sandbox sent, "" if none */
	char addr[NET_DENIAL_ADDR_MAX];	    /* destination address the sandbox dialled */
	uint16_t port;			    /* destination port */
	char reason[NET_DENIAL_REASON_MAX]; /* reason token (net_reason_name / deny name) */
};

/* The ring. Embedded in struct net_counters; zeroed memory plus net_denials_init is a valid
 * empty ring. Any thread may add or read: a mutex held for a copy, never across I/O. */
struct net_denials {
	pthread_mutex_t lock;			 /* protects everything below */
	struct net_denial ring[NET_DENIALS_MAX]; /* slot total % NET_DENIALS_MAX is the next */
	uint64_t total;				 /* denials ever added */
};

void net_denials_init(struct net_denials *d);
void net_denials_fini(struct net_denials *d);

/*
 * Records one denial at unix time `at`. host (may be NULL) comes from the sandbox: UNTRUSTED;
 * it is truncated to NET_DENIAL_HOST_MAX bytes and every byte outside printable ASCII becomes
 * '?', so the JSON is always valid UTF-8 (clients must still treat it as text, never markup).
 * addr and reason (may be NULL) are isolad's own. Never fails; the oldest entry is overwritten
 * when the ring is full.
 */
void net_denials_add(struct net_denials *d, double at, const char *host, const char *addr,
		     unsigned port, const char *reason);

/*
 * The ring as {"total": N, "recent": [{"time","host","address","port","reason"}, ...]}, newest
 * first, at most NET_DENIALS_MAX entries (the caller owns the reference). NULL on out of memory.
 */
json_t *net_denials_to_json(struct net_denials *d);

#endif
