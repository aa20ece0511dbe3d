/* SPDX-License-Identifier: Apache-2.0 */
/* net: the sandbox network manager: veths, firewall, resolver, policies, counters. */
#ifndef ISOLA_NET_H
#define ISOLA_NET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../common/err.h"
#include "../tiers/tier.h"
#include "denials.h"
#include "policy.h"

struct net;

/* isolad's network settings (main.c flags). */
struct net_config {
	char state_dir[512];	  /* names this isolad's nftables table */
	char pool[64];		  /* source address pool, "10.200.0.0/16" */
	char dns_upstream[128];	  /* "ADDR[:PORT]", "" = /etc/resolv.conf */
	bool default_allow;	  /* --egress-default allow */
	char opens[512];	  /* --egress-open "CIDR[,CIDR...]" */
	uint16_t dns_port;	  /* 0 = ephemeral */
	uint16_t proxy_port;	  /* 0 = ephemeral */
	uint64_t rate_bytes;	  /* per-sandbox egress bandwidth, bytes/s (0 = unlimited) */
	uint32_t max_connections; /* per-sandbox concurrent proxied connections (0 = unlimited) */
	bool disabled;		  /* --no-network */
	unsigned slots;		  /* --net-slots: network slots kept ready (0 = made per create) */
};

#define NET_SLOTS_MAX 64 /* --net-slots' bound */

void net_config_defaults(struct net_config *cfg);

/* isolad's network flags, numbered from a base the caller picks (main.c's option table). */
enum net_option {
	NET_OPT_NONE,	    /* --no-network: sandboxes get an empty namespace, nothing else */
	NET_OPT_DEFAULT,    /* --egress-default deny|allow */
	NET_OPT_OPEN,	    /* --egress-open CIDR[,CIDR...] */
	NET_OPT_POOL,	    /* --net-pool CIDR */
	NET_OPT_UPSTREAM,   /* --dns-upstream ADDR[:PORT] */
	NET_OPT_DNS_PORT,   /* --dns-port N */
	NET_OPT_PROXY_PORT, /* --proxy-port N */
	NET_OPT_RATE,	    /* --egress-rate BYTES/s (512k, 10M) */
	NET_OPT_MAX_CONNS,  /* --egress-max-conns N */
	NET_OPT_SLOTS,	    /* --net-slots N */
};
#define NET_LONG_OPTIONS(base)                                                                     \
	{"no-network", no_argument, NULL, (base) + NET_OPT_NONE},                                  \
		{"egress-default", required_argument, NULL, (base) + NET_OPT_DEFAULT},             \
		{"egress-open", required_argument, NULL, (base) + NET_OPT_OPEN},                   \
		{"net-pool", required_argument, NULL, (base) + NET_OPT_POOL},                      \
		{"dns-upstream", required_argument, NULL, (base) + NET_OPT_UPSTREAM},              \
		{"dns-port", required_argument, NULL, (base) + NET_OPT_DNS_PORT},                  \
		{"proxy-port", required_argument, NULL, (base) + NET_OPT_PROXY_PORT},              \
		{"egress-rate", required_argument, NULL, (base) + NET_OPT_RATE},                   \
		{"net-slots", required_argument, NULL, (base) + NET_OPT_SLOTS},                    \
	{                                                                                          \
		"egress-max-conns", required_argument, NULL, (base) + NET_OPT_MAX_CONNS            \
	}
#define NET_USAGE                                                                                  \
	"              [--no-network] [--egress-default deny|allow] [--egress-open CIDR,...]\n"    \
	"              [--net-pool CIDR] [--dns-upstream ADDR[:PORT]] [--dns-port N]\n"            \
	"              [--proxy-port N] [--egress-rate BYTES] [--egress-max-conns N]\n"            \
	"              [--net-slots N]\n"

/* Applies one flag (arg NULL for NET_OPT_NONE). Prints why to stderr and returns -1 when the
 * value is invalid (flag parsing only). */
int net_config_option(struct net_config *cfg, enum net_option which, const char *arg);

/* Per-sandbox counters (atomics; any thread). */
struct net_counters {
	_Atomic uint64_t connections; /* proxied connections opened */
	_Atomic uint64_t active;      /* proxied connections open now */
	_Atomic uint64_t denied;      /* connections the proxy refused */
	_Atomic uint64_t bytes_out;   /* payload bytes sent through the proxy */
	_Atomic uint64_t bytes_in;    /* payload bytes received through the proxy */
	_Atomic uint64_t dns_queries; /* queries the resolver answered */
	_Atomic uint64_t dns_refused; /* of which refused by policy */
	struct net_denials denials;   /* the proxy's most recent refusals (denials.h) */
};

/*
 * Starts the network: takes back the networks of sandboxes that outlived the previous isolad
 * (<state>/network/<id>.json whose interface still exists), installs this isolad's nftables
 * table, starts the resolver and the proxy. Becomes the process's current network
 * (net_current); there is one. Fails (`unavailable`) when nftables or netlink cannot be used.
 */
int net_start(const struct net_config *cfg, struct net **out, struct isola_err **err);

/* Stops the resolver and the proxy; deletes the table when no sandbox is attached. */
void net_stop(struct net *n);

/* The running network, or NULL (--no-network, unit tests): every hook is then a no-op. */
struct net *net_current(void);

/* The listening socket the proxy accepts on (borrowed) and the resolver (borrowed). */
int net_proxy_listen_fd(struct net *n);
struct net_dns *net_resolver(struct net *n);
const struct net_opens *net_opens(struct net *n);
const struct net_config *net_config(struct net *n);

/* ---- hooks for core (each a no-op returning 0 without a current network) ---- */

/*
 * Network slots (docs/network.md): a slot is a network namespace of isolad's own, already
 * holding everything a sandbox's network has that does not depend on the sandbox (lo, the
 * veth, its /30, addresses and default route, filtered from the instant it exists). A filler
 * thread keeps --net-slots of them ready; a create takes one (made on the spot when none is
 * ready) and the sandbox's processes are cloned into it. A slot serves one sandbox and is
 * never reused: its destroy deletes it, and the filler makes a new one.
 */
struct net_slot;

/* Takes a ready slot (*out NULL without a current network). The caller hands it to
 * net_sandbox_attach, or to net_slot_drop if the sandbox was never built. */
int net_slot_take(struct net_slot **out, struct isola_err **err);

/* The slot's namespace and a detached read-only sysfs mount of it (borrowed: the slot's). */
int net_slot_netns_fd(const struct net_slot *s);
int net_slot_sysfs_fd(const struct net_slot *s);

/* Deletes a slot no sandbox was attached to (NULL: nothing). */
void net_slot_drop(struct net_slot *s);

/* Slots ready now (0 without a current network); for /metrics. Any thread. */
unsigned net_slots_ready(void);

/*
 * Gives a just-built (or resumed) sandbox its network: the slot its processes were cloned
 * into (consumed, whatever the outcome), else (slot NULL: a tier that cannot join one) a veth (named with this isolad's prefix,
 * which its nftables table judges), addresses, and the
 * policy of <state>/network/<id>.json if it has one (hibernated), else the policy of
 * sandbox `policy_from` (a fork's source; NULL or "" for none), else the operator's default. A tier without netns_fd gets nothing (no device: nothing gets out). On failure
 * nothing is left behind and the caller destroys the sandbox.
 */
int net_sandbox_attach(const struct tier_ops *t, struct tier_sandbox *ts,
		       const struct sandbox_spec *spec, const char *policy_from,
		       struct net_slot *slot, struct isola_err **err);

/* Removes the veth and the policy file; idempotent, any state. Not for
 * hibernation: the policy must survive until the sandbox is resumed or destroyed.
 * On return the sandbox is unreachable (the proxy and the resolver no longer know its
 * address); the veth and the record are removed behind it by net's reaper thread, which
 * net_stop() drains, and which a crash leaves to net_forget_unknown() at the next start. */
void net_sandbox_detach(const struct sandbox_spec *spec);

/* Makes sandbox id's record (its policy) durable: before a hibernation, whose sandbox must
 * find it after a host crash (an attach writes it without fsync). 0 without a record. */
int net_sandbox_sync(const char *id, struct isola_err **err);

/* At start, after core reconciled: removes the network (record, interface, filter) of every
 * <state>/network/<id>.json whose id known() does not recognise, such as a sandbox whose
 * destroy or create a crash cut short after its network was made. Main thread. */
void net_forget_unknown(bool (*known)(void *ud, const char *id), void *ud);

/* ---- for the microvm tier ---- */

/* The guest's side of its tap, the same in every VM (the tap is the VM's alone): guestinit
 * configures eth0 as NET_GUEST_ADDR/30 via NET_GUEST_GW from `isola.net=` on the kernel
 * command line. QEMU's namespace masquerades it to the sandbox's /30 address, so the host
 * sees the same source addresses as for a process sandbox. */
#define NET_GUEST_ADDR "169.254.100.2"
#define NET_GUEST_GW   "169.254.100.1"

/*
 * Before QEMU runs: in QEMU's network namespace (netns_fd), a persistent tap `tap0` owned by
 * uid (QEMU attaches with -netdev tap,ifname=tap0 and no privilege), NET_GUEST_GW/30 on it,
 * forwarding on and a masquerade to `eth0` (the veth peer net_sandbox_attach adds later);
 * nothing from the guest is accepted by QEMU's namespace itself. 0 without a current network.
 */
int net_microvm_prepare(int netns_fd, uint32_t uid, struct isola_err **err);

/* ---- API ---- */

/* Validates a policy object as create / PUT would take it (`invalid` naming the rule). */
int net_policy_validate(const json_t *policy, struct isola_err **err);

/* Replaces a sandbox's policy live (written to <state>/network/<id>.json first). `not_found`
 * when the sandbox has no network (`not_supported` without a current network). */
int net_sandbox_set_policy(const char *id, const json_t *policy, struct isola_err **err);

/*
 * The byte counters of sandbox id's veth (*tx: sent by the sandbox, *rx: received), read from
 * the host side's sysfs statistics. -ENOENT without networking or without that interface
 * (the outputs are left alone). Any thread; takes no lock.
 */
int net_sandbox_bytes(const char *id, uint64_t *tx, uint64_t *rx);
/* {policy, denials, interface, address, gateway, counters} of a sandbox (new reference). */
int net_sandbox_info(const char *id, json_t **out, struct isola_err **err);

/* Totals since start for /metrics: the proxy's counters and the resolver's queries (refused
 * of them by policy). -ENOENT without a current network. Any thread. */
struct net_proxy_stats;
int net_metrics(struct net_proxy_stats *proxy, uint64_t *dns_queries, uint64_t *dns_refused);

/* ---- callbacks for the proxy and the resolver ---- */

/*
 * Maps a peer address (a connection or query from a sandbox) to its sandbox: id (>= 40 bytes),
 * *policy (one reference; caller frees with net_policy_free) and, if counters is non-NULL,
 * *counters (one reference; release with net_counters_put, so counters outlive a destroy in
 * the middle of a connection). -ENOENT for anyone else. Any thread.
 */
int net_lookup_peer(struct net *n, const struct sockaddr *peer, char *id,
		    struct net_policy **policy, struct net_counters **counters);
void net_counters_put(struct net_counters *c);

#endif
