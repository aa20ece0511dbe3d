/* SPDX-License-Identifier: Apache-2.0 */
/* hostaddr: is a destination the host itself? The kernel's route lookup, asked per decision. */
#ifndef ISOLA_NET_HOSTADDR_H
#define ISOLA_NET_HOSTADDR_H

#include "policy.h"

/*
 * Asks the kernel whether a packet from this host to `a` would be delivered to the host itself:
 * one RTM_GETROUTE for `a` (v4 for IPv4-mapped addresses, v6 otherwise) over a fresh
 * NETLINK_ROUTE socket, so the answer comes from the network namespace of the calling thread,
 * at the time of the call, with every address, `local` route and routing rule the kernel has.
 * Call it from the thread (namespace) that will dial `a`.
 *
 * Returns 1 when the route's type is local, broadcast, anycast or multicast (the host's own),
 * 0 when it is any other route or there is no route (unreachable, prohibit: a connect fails the
 * same way), or -errno when the kernel could not be asked or gave an answer this code does not
 * understand; callers treat that as the host's own (fail closed). Thread-safe, never blocks
 * (the kernel answers a route request before sendto returns). Cost: one socket, one request,
 * one reply (docs/network.md has the measured time).
 */
int net_hostaddr_lookup(const struct net_addr *a);

#endif
