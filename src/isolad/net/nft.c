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
 * flushed and refilled. The rules match this isolad's interfaces by their name prefix
 * (`ifprefix`*): an interface is filtered from the instant it exists, across isolad restarts,
 * and adding or removing a sandbox costs no ruleset change (each one would make libnftables
 * fetch the whole ruleset: ~100 ms per create on a busy host).
 */
int net_nft_install(const char *table, const char *ifprefix, uint16_t dns_port, uint16_t proxy_port,
		    struct isola_err **err)
{
	char buf[4096];
	int n;

	n = snprintf(
		buf, sizeof(buf),
		"add table inet %1$s\n"
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
		"add rule inet %1$s sb_pre iifname != \"%4$s*\" accept\n"
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
		"add rule inet %1$s sb_nat iifname \"%4$s*\" udp dport 53 redirect to :%2$u\n"
		"add rule inet %1$s sb_nat iifname \"%4$s*\" tcp dport 53 redirect to :%2$u\n"
		"add rule inet %1$s sb_nat iifname \"%4$s*\" meta l4proto tcp redirect to :%3$u\n"
		/* The host's own services are unreachable: only the resolver and the proxy. */
		"add rule inet %1$s sb_input iifname \"%4$s*\" udp dport %2$u accept\n"
		"add rule inet %1$s sb_input iifname \"%4$s*\" tcp dport { %2$u, %3$u } accept\n"
		"add rule inet %1$s sb_input iifname \"%4$s*\" drop\n"
		/* The resolver and the proxy serve sandboxes only, not the host's other networks:
		 * requests from those to these ports (a TCP SYN, any UDP) are dropped. Loopback is
		 * the host itself, and replies are not requests: this table outlives an isolad
		 * killed with SIGKILL, and its two port numbers go back into the ephemeral pool,
		 * where a host socket or listener may get them. Matching every packet to the port
		 * dropped SYN-ACKs to such a client and SYNs to such a listener (seen in the tests:
		 * loopback connects hanging for minutes). */
		"add rule inet %1$s sb_input iifname != \"lo\" tcp dport { %2$u, %3$u } "
		"tcp flags & (syn | ack) == syn drop\n"
		"add rule inet %1$s sb_input iifname != \"lo\" udp dport %2$u drop\n"
		/* No routing to or from a sandbox, even on a host that forwards for others. */
		"add rule inet %1$s sb_forward iifname \"%4$s*\" drop\n"
		"add rule inet %1$s sb_forward oifname \"%4$s*\" drop\n",
		table, (unsigned)dns_port, (unsigned)proxy_port, ifprefix);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return isola_err_set(err, ENAMETOOLONG, "internal",
				     "nftables: table name too long");
	return nft_run(buf, "install the sandbox table", err);
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
