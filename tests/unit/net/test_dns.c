/* SPDX-License-Identifier: Apache-2.0 */
/* test_dns: isola's resolver against a fake upstream on loopback (policy, rebinding, hostile
 * queries, net_dns_resolve), judged by what the upstream received and what the reply holds. */
#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isolad/net/dns.h"
#include "isolad/net/policy.h"
#include "../tap.h"

/* ---- fake upstream: answers every A query with the addresses in `zone`, logs names ---- */

struct zone_entry {
	const char *name;  /* lower case, no trailing dot */
	const char *addrs; /* comma-separated A records */
};

static const struct zone_entry zone[] = {
	{"allowed.test", "198.18.1.10"},
	{"rebind.allowed.test", "169.254.169.254,198.18.1.11"},
	{"loop.allowed.test", "127.0.0.1"},
};

static int up_fd;
static char seen[64][256]; /* names the upstream received */
static atomic_int n_seen;

static void *upstream(void *arg)
{
	uint8_t buf[4096];

	(void)arg;
	for (;;) {
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		ssize_t n = recvfrom(up_fd, buf, sizeof(buf), 0, (struct sockaddr *)&peer, &pl);
		ldns_pkt *q = NULL, *r;
		ldns_rr *qr;
		char *name;
		uint8_t *wire = NULL;
		size_t len;

		if (n <= 0) /* shut down (or closed) at the end of the test */
			return NULL;
		if (ldns_wire2pkt(&q, buf, (size_t)n) != LDNS_STATUS_OK)
			continue;
		qr = ldns_rr_list_rr(ldns_pkt_question(q), 0);
		name = ldns_rdf2str(ldns_rr_owner(qr));
		name[strlen(name) - 1] = '\0';
		if (atomic_load(&n_seen) < 64)
			snprintf(seen[atomic_fetch_add(&n_seen, 1)], 256, "%s", name);
		r = ldns_pkt_new();
		ldns_pkt_set_id(r, ldns_pkt_id(q));
		ldns_pkt_set_qr(r, true);
		ldns_pkt_push_rr(r, LDNS_SECTION_QUESTION, ldns_rr_clone(qr));
		ldns_pkt_set_rcode(r, LDNS_RCODE_NXDOMAIN);
		for (size_t i = 0; i < sizeof(zone) / sizeof(zone[0]); i++) {
			char addrs[128], *save = NULL;

			if (strcmp(zone[i].name, name) != 0)
				continue;
			ldns_pkt_set_rcode(r, LDNS_RCODE_NOERROR);
			if (ldns_rr_get_type(qr) != LDNS_RR_TYPE_A)
				break;
			snprintf(addrs, sizeof(addrs), "%s", zone[i].addrs);
			for (char *a = strtok_r(addrs, ",", &save); a;
			     a = strtok_r(NULL, ",", &save)) {
				char text[400];
				ldns_rr *rr = NULL;

				snprintf(text, sizeof(text), "%s. 60 IN A %s", name, a);
				if (ldns_rr_new_frm_str(&rr, text, 0, NULL, NULL) == LDNS_STATUS_OK)
					ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, rr);
			}
		}
		if (ldns_pkt2wire(&wire, r, &len) == LDNS_STATUS_OK)
			sendto(up_fd, wire, len, 0, (struct sockaddr *)&peer, pl);
		free(wire);
		free(name);
		ldns_pkt_free(q);
		ldns_pkt_free(r);
	}
}

static bool upstream_saw(const char *name)
{
	for (int i = 0; i < atomic_load(&n_seen); i++)
		if (!strcmp(seen[i], name))
			return true;
	return false;
}

/* ---- the sandbox side ---- */

static struct net_policy *policy; /* the one sandbox's policy */
static atomic_int counted, counted_refused;

static int lookup(void *ud, const struct sockaddr *peer, char *id, struct net_policy **pol)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)peer;

	(void)ud;
	if (peer->sa_family != AF_INET || in->sin_addr.s_addr != htonl(0x0ac80002)) /* 10.200.0.2 */
		return -ENOENT;
	snprintf(id, 40, "sandbox1");
	*pol = net_policy_ref(policy);
	return 0;
}

static void count(void *ud, const char *id, bool refused)
{
	(void)ud;
	(void)id;
	atomic_fetch_add(&counted, 1);
	if (refused)
		atomic_fetch_add(&counted_refused, 1);
}

static struct sockaddr_in sandbox = {.sin_family = AF_INET};
static struct sockaddr_in stranger = {.sin_family = AF_INET};

static uint16_t ask_edns_size; /* > 0: ask's queries carry EDNS's OPT with this size */

/* Sends one query through the resolver; returns the reply (caller frees) or NULL. */
static ldns_pkt *ask(struct net_dns *d, const struct sockaddr_in *from, const char *name,
		     ldns_rr_type type, int *rcode)
{
	ldns_pkt *q =
		ldns_pkt_query_new(ldns_dname_new_frm_str(name), type, LDNS_RR_CLASS_IN, LDNS_RD);
	uint8_t *wire = NULL, out[4096];
	size_t len, n;
	ldns_pkt *r = NULL;

	ldns_pkt_set_id(q, 0x4242);
	if (ask_edns_size)
		ldns_pkt_set_edns_udp_size(q, ask_edns_size);
	ldns_pkt2wire(&wire, q, &len);
	n = net_dns_handle(d, (const struct sockaddr *)from, wire, len, out, sizeof(out), true);
	free(wire);
	ldns_pkt_free(q);
	*rcode = -1;
	if (n && ldns_wire2pkt(&r, out, n) == LDNS_STATUS_OK) {
		*rcode = ldns_pkt_get_rcode(r);
		if (ldns_pkt_id(r) != 0x4242) {
			ldns_pkt_free(r);
			return NULL;
		}
	}
	return r;
}

/* The A answers of r as "a,b,". */
static void answers(const ldns_pkt *r, char *buf, size_t len)
{
	const ldns_rr_list *l = r ? ldns_pkt_answer(r) : NULL;

	buf[0] = '\0';
	for (size_t i = 0; l && i < ldns_rr_list_rr_count(l); i++) {
		char a[64];
		const ldns_rdf *rd = ldns_rr_rdf(ldns_rr_list_rr(l, i), 0);

		inet_ntop(AF_INET, ldns_rdf_data(rd), a, sizeof(a));
		strncat(buf, a, len - strlen(buf) - 1);
		strncat(buf, ",", len - strlen(buf) - 1);
	}
}

int main(void)
{
	struct sockaddr_in up = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t ul = sizeof(up);
	struct isola_err *err = NULL;
	struct net_dns *d = NULL;
	struct sockaddr_storage addrs[8];
	char upstr[64], got[256];
	ldns_pkt *r;
	pthread_t t;
	json_t *pj;
	size_t n;
	int rc;

	up_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (up_fd < 0 || bind(up_fd, (struct sockaddr *)&up, sizeof(up)) < 0 ||
	    getsockname(up_fd, (struct sockaddr *)&up, &ul) < 0) {
		printf("1..0 # SKIP no loopback UDP\n");
		return 0;
	}
	pthread_create(&t, NULL, upstream, NULL);
	snprintf(upstr, sizeof(upstr), "127.0.0.1:%u", ntohs(up.sin_port));
	sandbox.sin_addr.s_addr = htonl(0x0ac80002);
	stranger.sin_addr.s_addr = htonl(0x7f000001);

	ok(net_dns_new("not an address", NULL, &d, &err) == -EINVAL && err, "bad upstream refused");
	isola_err_free(err);
	err = NULL;
	ok(net_dns_new(upstr, NULL, &d, &err) == 0, "resolver on %s", upstr);
	net_dns_set_callbacks(d, lookup, count, NULL);
	pj = json_pack("{s:[s]}", "allow", "*.allowed.test");
	ok(net_policy_parse(pj, &policy, &err) == 0, "policy *.allowed.test");
	json_decref(pj);

	/* net_dns_resolve (the proxy's path): no policy, every address. */
	ok(net_dns_resolve(d, "allowed.test", addrs, 8, &n, &err) == 0 && n == 1 &&
		   ((struct sockaddr_in *)&addrs[0])->sin_addr.s_addr == htonl(0xc612010a),
	   "net_dns_resolve returns the upstream's address");
	ok(net_dns_resolve(d, "nxdomain.test", addrs, 8, &n, &err) == -ENOENT && err &&
		   !strcmp(err->code, "not_found"),
	   "NXDOMAIN is not_found");
	isola_err_free(err);
	err = NULL;
	ok(net_dns_resolve(d, "bad..name", addrs, 8, &n, &err) == -EINVAL, "bad name refused");
	isola_err_free(err);
	err = NULL;

	/* An allowed name: forwarded, answered. */
	atomic_store(&n_seen, 0);
	r = ask(d, &sandbox, "www.allowed.test", LDNS_RR_TYPE_A, &rc);
	ok(rc == LDNS_RCODE_NXDOMAIN && upstream_saw("www.allowed.test"),
	   "allowed name forwarded (upstream's NXDOMAIN passed on)");
	ldns_pkt_free(r);

	/* Rebinding: the always-denied address is removed, the other stays. */
	r = ask(d, &sandbox, "rebind.allowed.test", LDNS_RR_TYPE_A, &rc);
	answers(r, got, sizeof(got));
	ok(rc == 0 && !strcmp(got, "198.18.1.11,"), "rebinding: 169.254.169.254 removed (%s)", got);
	ldns_pkt_free(r);
	r = ask(d, &sandbox, "loop.allowed.test", LDNS_RR_TYPE_A, &rc);
	answers(r, got, sizeof(got));
	ok(rc == 0 && !strcmp(got, ""), "rebinding: 127.0.0.1 removed");
	ldns_pkt_free(r);

	/* Names the policy does not allow never reach the upstream, whatever the type. */
	atomic_store(&n_seen, 0);
	r = ask(d, &sandbox, "allowed.test", LDNS_RR_TYPE_A, &rc);
	ok(rc == LDNS_RCODE_REFUSED, "the apex is not under *.allowed.test: REFUSED");
	ldns_pkt_free(r);
	r = ask(d, &sandbox, "secret.exfil.test", LDNS_RR_TYPE_TXT, &rc);
	ok(rc == LDNS_RCODE_REFUSED, "TXT for another name: REFUSED");
	ldns_pkt_free(r);
	r = ask(d, &sandbox, "xallowed.test", LDNS_RR_TYPE_A, &rc);
	ok(rc == LDNS_RCODE_REFUSED, "suffix without the dot: REFUSED");
	ldns_pkt_free(r);
	r = ask(d, &stranger, "www.allowed.test", LDNS_RR_TYPE_A, &rc);
	ok(rc == LDNS_RCODE_REFUSED, "a peer that is no sandbox: REFUSED");
	ldns_pkt_free(r);
	ok(atomic_load(&n_seen) == 0, "the upstream saw none of them");

	/* Hostile bytes: short, garbage, a response, two questions. */
	{
		uint8_t junk[64], out[512];

		memset(junk, 0xff, sizeof(junk));
		ok(net_dns_handle(d, (struct sockaddr *)&sandbox, junk, 5, out, sizeof(out),
				  true) == 0,
		   "under a header: no answer");
		n = net_dns_handle(d, (struct sockaddr *)&sandbox, junk, sizeof(junk), out,
				   sizeof(out), true);
		ok(n == 12 && (out[3] & 15) == LDNS_RCODE_FORMERR && out[0] == 0xff,
		   "garbage: FORMERR with the id");
	}
	/* A query with EDNS's OPT (one additional record) is answered; one with two additional
	 * records is FORMERR before ldns parses it: two TSIGs (type 250) in one packet leaked
	 * the first in ldns 1.8.3 (fuzz_dns; the ASan build's run of this test catches a leak). */
	{
		static const uint8_t two_tsig[] = {
			0x0e, 0x00, 0,	  0, 0,	   1, 0, 0, 0, 0, 0,
			2,			/* header: 1 question, 2 additional */
			0,    0,    1,	  0, 1, /* . A IN */
			0,    0,    0xfa, 0, 0xff, 0, 0, 0, 0, 0, 0, /* . TSIG ANY, no data */
			0,    0,    0xfa, 0, 0xff, 0, 0, 0, 0, 0, 0, /* . TSIG ANY, no data */
		};
		uint8_t out[512];

		ask_edns_size = 1232;
		r = ask(d, &sandbox, "rebind.allowed.test", LDNS_RR_TYPE_A, &rc);
		ask_edns_size = 0;
		answers(r, got, sizeof(got));
		ok(rc == 0 && !strcmp(got, "198.18.1.11,"),
		   "a query with EDNS's OPT is answered (%s)", got);
		ldns_pkt_free(r);
		n = net_dns_handle(d, (struct sockaddr *)&sandbox, two_tsig, sizeof(two_tsig), out,
				   sizeof(out), true);
		ok(n == 12 && (out[3] & 15) == LDNS_RCODE_FORMERR && out[0] == 0x0e,
		   "two additional records (TSIG, TSIG): FORMERR with the id");
	}
	ok(atomic_load(&counted) >= 6 && atomic_load(&counted_refused) >= 4,
	   "queries counted (%d, %d refused)", atomic_load(&counted),
	   atomic_load(&counted_refused));

	net_dns_free(d);
	net_policy_free(policy);
	shutdown(up_fd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(up_fd);
	return tap_done();
}
