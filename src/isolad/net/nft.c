/* SPDX-License-Identifier: Apache-2.0 */
/* nft: this isolad's nftables table, the only packets a sandbox interface may send. */
#include "net-internal.h"

#include <errno.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nft_ctx is not thread-safe and its caches go stale: one context per command, serialised. */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

static int nft_run(const char *cmd, const char *what, struct isola_err **err)
{
	struct nft_ctx *ctx;
	int rc, r = 0;

	pthread_mutex_lock(&nft_lock);
	ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx) {
		pthread_mutex_unlock(&nft_lock);
		return isola_err_set(err, ENOMEM, "internal", "nftables: no context for %s", what);
	}
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	rc = nft_run_cmd_from_buffer(ctx, cmd);
	if (rc != 0) {
		const char *e = nft_ctx_get_error_buffer(ctx);
		size_t n = e ? strcspn(e, "\n") : 0;

		r = isola_err_set(err, EIO, "unavailable", "nftables: %s: %.*s", what, (int)n,
				  e ? e : "failed");
	}
	nft_ctx_free(ctx);
	pthread_mutex_unlock(&nft_lock);
	return r;
}

/*
 * Everything is one transaction, so no packet ever meets a half-built table. Chains are
 * flushed and refilled; the set `ifs` keeps its elements, because sandboxes outlive an
 * isolad restart and their interfaces must stay filtered while it is down.
 */
int net_nft_install(const char *table, uint16_t dns_port, uint16_t proxy_port,
		    struct isola_err **err)
{
	char buf[4096];
	int n;

	n = snprintf(
		buf, sizeof(buf),
		"add table inet %1$s\n"
		"add set inet %1$s ifs { type ifname; }\n"
		"add chain inet %1$s sb_pre { type filter hook prerouting priority -150; "
		"policy accept; }\n"
		"add chain inet %1$s sb_nat { type nat hook prerouting priority dstnat; "
		"policy accept; }\n"
		"add chain inet %1$s sb_input { type filter hook input priority filter; "
		"policy accept; }\n"
		"add chain inet %1$s sb_forward { type filter hook forward priority filter; "
		"policy accept; }\n"
		"flush chain inet %1$s sb_pre\n"
		"flush chain inet %1$s sb_nat\n"
		"flush chain inet %1$s sb_input\n"
		"flush chain inet %1$s sb_forward\n"
		"add rule inet %1$s sb_pre iifname != @ifs accept\n"
		/* IPv6 is not offered: link-local autoconfiguration must not open a path. */
		"add rule inet %1$s sb_pre meta nfproto != ipv4 drop\n"
		/* Anti-spoofing: the sandbox is root in its netns and may put any address on eth0;
		 * a source not routed back through the interface it came in on is dropped, so the
		 * peer address names the sandbox to the proxy and the resolver. */
		"add rule inet %1$s sb_pre fib saddr . iif oif missing drop\n"
		/* DNS over TLS is never let out (it would bypass the resolver). */
		"add rule inet %1$s sb_pre meta l4proto { tcp, udp } th dport 853 drop\n"
		"add rule inet %1$s sb_pre meta l4proto { tcp, udp } th dport 53 accept\n"
		"add rule inet %1$s sb_pre meta l4proto tcp accept\n"
		/* Other UDP, ICMP, everything else. */
		"add rule inet %1$s sb_pre drop\n"
		/* Every DNS packet, whatever address it was sent to, goes to isola's resolver; every
		 * other TCP connection to the proxy. Nothing is forwarded or masqueraded. */
		"add rule inet %1$s sb_nat iifname @ifs udp dport 53 redirect to :%2$u\n"
		"add rule inet %1$s sb_nat iifname @ifs tcp dport 53 redirect to :%2$u\n"
		"add rule inet %1$s sb_nat iifname @ifs meta l4proto tcp redirect to :%3$u\n"
		/* The host's own services are unreachable: only the resolver and the proxy. */
		"add rule inet %1$s sb_input iifname @ifs udp dport %2$u accept\n"
		"add rule inet %1$s sb_input iifname @ifs tcp dport { %2$u, %3$u } accept\n"
		"add rule inet %1$s sb_input iifname @ifs drop\n"
		/* The resolver and the proxy serve sandboxes only, not the host's other networks. */
		"add rule inet %1$s sb_input meta l4proto { tcp, udp } th dport { %2$u, %3$u } "
		"drop\n"
		/* No routing to or from a sandbox, even on a host that forwards for others. */
		"add rule inet %1$s sb_forward iifname @ifs drop\n"
		"add rule inet %1$s sb_forward oifname @ifs drop\n",
		table, (unsigned)dns_port, (unsigned)proxy_port);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return isola_err_set(err, ENAMETOOLONG, "internal",
				     "nftables: table name too long");
	return nft_run(buf, "install the sandbox table", err);
}

int net_nft_iface(const char *table, const char *ifname, bool add, struct isola_err **err)
{
	char buf[256];

	/* `delete element` fails for a missing one; `add` first makes removal idempotent. */
	snprintf(buf, sizeof(buf),
		 add ? "add element inet %1$s ifs { \"%2$s\" }\n"
		     : "add element inet %1$s ifs { \"%2$s\" }\n"
		       "delete element inet %1$s ifs { \"%2$s\" }\n",
		 table, ifname);
	return nft_run(buf, add ? "add a sandbox interface" : "remove a sandbox interface", err);
}

int net_nft_guest_nat(struct isola_err **err)
{
	/* A fresh namespace of isola's own (QEMU's jail): the guest is root in its VM and may
	 * send anything on its tap; what leaves is rewritten to the namespace's eth0 address,
	 * where the host's table judges it like any sandbox's traffic. */
	return nft_run("add table ip isola_vm\n"
		       "add chain ip isola_vm vm_post { type nat hook postrouting priority srcnat; "
		       "policy accept; }\n"
		       "add chain ip isola_vm vm_in { type filter hook input priority filter; "
		       "policy accept; }\n"
		       "add chain ip isola_vm vm_fwd { type filter hook forward priority filter; "
		       "policy drop; }\n"
		       "add rule ip isola_vm vm_post oifname \"eth0\" masquerade\n"
		       "add rule ip isola_vm vm_in iifname \"tap0\" drop\n"
		       "add rule ip isola_vm vm_fwd iifname \"tap0\" oifname \"eth0\" accept\n"
		       "add rule ip isola_vm vm_fwd iifname \"eth0\" oifname \"tap0\" ct state "
		       "established,related accept\n",
		       "set up the VM namespace's masquerade", err);
}

int net_nft_remove(const char *table, struct isola_err **err)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "add table inet %1$s\ndelete table inet %1$s\n", table);
	return nft_run(buf, "remove the sandbox table", err);
}
