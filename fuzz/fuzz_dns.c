/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_dns: libFuzzer target for isola's resolver, on a sandbox's hostile query bytes. */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "isolad/net/dns.h"
#include "isolad/net/policy.h"

static struct net_dns *dns;
static struct net_policy *policy;

/* Every peer is a sandbox whose policy allows one name, so both the refusal and the forward
 * paths run; the upstream (127.0.0.1:1) refuses at once, so forwards end in SERVFAIL. */
static int lookup(void *ud, const struct sockaddr *peer, char *id, struct net_policy **pol)
{
	(void)ud;
	(void)peer;
	memcpy(id, "fuzz", 5);
	*pol = net_policy_ref(policy);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in peer = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0ac80002)};
	uint8_t out[4096];
	size_t n;

	if (!dns) {
		json_t *j = json_pack("{s:[s]}", "allow", "*.example.com");

		log_set_level(LOG_ERROR);
		if (net_dns_new("127.0.0.1:1", NULL, &dns, NULL) < 0 ||
		    net_policy_parse(j, &policy, NULL) < 0)
			abort();
		json_decref(j);
		net_dns_set_callbacks(dns, lookup, NULL, NULL);
	}
	for (int udp = 0; udp < 2; udp++) {
		n = net_dns_handle(dns, (struct sockaddr *)&peer, data, size, out, sizeof(out),
				   udp);
		if (n > sizeof(out) || (udp && n > 512) || (n && n < 12))
			abort();
		/* A reply always answers the query's id. */
		if (n && size >= 2 && (out[0] != data[0] || out[1] != data[1]))
			abort();
	}
	return 0;
}
