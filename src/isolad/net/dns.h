/* SPDX-License-Identifier: Apache-2.0 */
/* dns: isola's per-sandbox DNS resolver (policy-checked, logged) and the upstream client. */
#ifndef ISOLA_NET_DNS_H
#define ISOLA_NET_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../common/err.h"
#include "policy.h"

struct net_dns; /* one resolver: upstream address, listening sockets, server thread */

/*
 * Who is asking: maps a peer address to a sandbox. Fills id (>= 40 bytes) and *policy (one
 * reference, the caller frees) and returns 0, or -ENOENT for an address that is no sandbox's.
 * Called from the resolver thread; must be thread-safe.
 */
typedef int (*net_dns_lookup_fn)(void *ud, const struct sockaddr *peer, char *id,
				 struct net_policy **policy);

/* Optional counter callback: one query answered for sandbox `id`, refused or not. */
typedef void (*net_dns_count_fn)(void *ud, const char *id, bool refused);

/*
 * Creates a resolver forwarding to `upstream` ("ADDR", "ADDR:PORT", "[V6]:PORT"; NULL or ""
 * = the first nameserver of /etc/resolv.conf, port 53). `opens` (borrowed for the resolver's
 * life, may be NULL) are the operator's opened ranges. Nothing listens yet.
 */
int net_dns_new(const char *upstream, const struct net_opens *opens, struct net_dns **out,
		struct isola_err **err);

/*
 * Listens on 0.0.0.0:port (UDP and TCP; port 0 = ephemeral) and starts the server thread.
 * lookup/count/ud are borrowed for the resolver's life.
 */
int net_dns_serve(struct net_dns *d, uint16_t port, net_dns_lookup_fn lookup,
		  net_dns_count_fn count, void *ud, struct isola_err **err);

/*
 * The resolver's answer to one query (UNTRUSTED q[0..qlen) from peer): written to out (cap
 * bytes), returns its length or 0 to send nothing. udp: truncate past 512 bytes. Logs and
 * counts the query. Blocks on the upstream for allowed names (2 s at most). Used by the server
 * threads, the unit tests and fuzz/fuzz_dns.c.
 */
size_t net_dns_handle(struct net_dns *d, const struct sockaddr *peer, const uint8_t *q, size_t qlen,
		      uint8_t *out, size_t cap, bool udp);

/* Sets the callbacks without serving (tests, fuzzing); net_dns_serve sets them too. */
void net_dns_set_callbacks(struct net_dns *d, net_dns_lookup_fn lookup, net_dns_count_fn count,
			   void *ud);

/* The port the server listens on (after net_dns_serve), host order. */
uint16_t net_dns_port(const struct net_dns *d);

/* Stops the thread, closes the sockets, frees d. NULL is fine. */
void net_dns_free(struct net_dns *d);

/*
 * Resolves `name` (A, then AAAA) through the upstream and writes up to `max` addresses into out
 * (port 0), *n = how many. Applies no policy and no always-denied filter: the caller (the
 * proxy) checks every address. -ENOENT `not_found` for NXDOMAIN or no address, -ETIMEDOUT
 * `unavailable` when the upstream does not answer within 2 s, -EINVAL `invalid` for a bad
 * name. Thread-safe (one socket per call).
 */
int net_dns_resolve(struct net_dns *d, const char *name, struct sockaddr_storage *out, size_t max,
		    size_t *n, struct isola_err **err);

#endif
