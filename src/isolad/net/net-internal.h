/* SPDX-License-Identifier: Apache-2.0 */
/* net-internal: what the network manager's own files share (links, nftables). */
#ifndef ISOLA_NET_INTERNAL_H
#define ISOLA_NET_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"

#define NET_IFNAME_MAX 16 /* IFNAMSIZ */

/* Counters of a sandbox's host-side veth, as the sandbox sees them. */
struct net_link_counters {
	uint64_t tx_bytes;   /* sent by the sandbox (received by the host side) */
	uint64_t tx_packets; /* likewise, packets */
	uint64_t rx_bytes;   /* received by the sandbox (sent by the host side) */
	uint64_t rx_packets; /* likewise, packets */
};

/* ---- link.c: veths and addresses over netlink (libnl-route-3) ---- */

/*
 * Picks the first /30 of pool (network byte order base, prefix 8..28) that holds no IPv4
 * address of the host, and returns its base address (host order) in *block. Call under the
 * host-wide lock (net_link_lock) and assign the gateway before unlocking.
 */
int net_link_pick_block(uint32_t pool_base, unsigned pool_prefix, uint32_t *block,
			struct isola_err **err);

/* Takes / releases the host-wide allocation lock (/run/isola/net.lock); returns an fd or
 * -errno. */
int net_link_lock(struct isola_err **err);
void net_link_unlock(int fd);

/*
 * Creates the veth `host_if` (host side, no address yet, down) whose peer `eth0` lives in the
 * namespace netns_fd. Needs no lock: the host-wide lock covers only the pick and
 * net_link_set_gateway(), so concurrent creates make their veths in parallel. -EEXIST
 * `conflict` if host_if exists already (after one retry past a dying namesake).
 */
int net_link_create(const char *host_if, int netns_fd, struct isola_err **err);

/* Gives host_if the gateway address block+1/30 and brings it up; under net_link_lock, right
 * after net_link_pick_block(), so no other create picks the same block. */
int net_link_set_gateway(const char *host_if, uint32_t block, struct isola_err **err);

/*
 * Inside the namespace netns_fd (from a short-lived thread that setns()es into it): lo up,
 * eth0 block+2/30 up, default route via block+1.
 */
int net_link_configure_inside(int netns_fd, uint32_t block, struct isola_err **err);

/*
 * A network namespace of isolad's own (a network slot's, docs/network.md), made in a
 * short-lived thread: ip_unprivileged_port_start 0 (the sandbox's root, whose user namespace
 * does not own it, binds low ports only so) and *sysfs_fd, a detached read-only sysfs of it
 * for the sandbox's /sys. Its lo and eth0 come from net_link_configure_inside.
 */
int net_link_new_netns(int *netns_fd, int *sysfs_fd, struct isola_err **err);

/* Sets netns_fd's ip_unprivileged_port_start to 0 (open) or 1024: a sandbox without
 * CAP_NET_BIND_SERVICE gets the kernel's default. */
int net_link_set_low_ports(int netns_fd, bool open, struct isola_err **err);

/* The names of the host's interfaces that start with prefix: fn(name, ud) for each. */
void net_link_each(const char *prefix, void (*fn)(const char *name, void *ud), void *ud);

/* Inside QEMU's namespace netns_fd (a setns()ed thread): the persistent tap `tap0` owned by
 * uid with gw_addr/30 (host order), forwarding on, and net_nft_guest_nat's rules. */
int net_link_tap_prepare(int netns_fd, uint32_t uid, uint32_t gw_addr, struct isola_err **err);

/* Deletes host_if (and so its peer); 0 if it does not exist. */
int net_link_delete(const char *host_if);

/* True if host_if exists in the host namespace. */
bool net_link_exists(const char *host_if);

/* Reads host_if's statistics from sysfs; -errno if it does not exist. */
int net_link_counters(const char *host_if, struct net_link_counters *out);

/* ---- nft.c: this isolad's nftables table (libnftables) ---- */

/* Installs (or replaces) table `table`, whose chains judge every interface named
 * `ifprefix`*: DNS to dns_port, other TCP to proxy_port, the rest dropped. One transaction. */
int net_nft_install(const char *table, const char *ifprefix, uint16_t dns_port, uint16_t proxy_port,
		    struct isola_err **err);

/* In the calling thread's namespace (QEMU's): masquerade what leaves through `eth0`, forward
 * only tap0 -> eth0 (and its replies), accept nothing from tap0 for the namespace itself. */
int net_nft_guest_nat(struct isola_err **err);

/* Deletes the table (isolad stopping with no sandbox). */
int net_nft_remove(const char *table, struct isola_err **err);

#endif
