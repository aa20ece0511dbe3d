/* SPDX-License-Identifier: Apache-2.0 */
/* dns: isola's resolver for sandboxes (answers only allowed names, logs every query) and the
 * upstream client the proxy resolves through. Wire format by libldns. */
#include "dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"

#define DNS_TIMEOUT_MS 2000 /* upstream answer, and a sandbox's TCP query */
#define DNS_MAX_MSG    4096 /* the most we read from anyone */
#define DNS_UDP_MAX    512  /* answers to sandboxes over UDP (no EDNS) */
#define DNS_WORKERS    4    /* threads serving queries (one slow upstream blocks one) */
#define DNS_BIND_TRIES 32   /* kernel-picked ports tried for a UDP+TCP pair */

struct net_dns {
	struct sockaddr_storage up;	/* upstream address */
	socklen_t up_len;		/* its length */
	char up_text[64];		/* for logs */
	const struct net_opens *opens;	/* borrowed */
	int udp_fd;			/* listening UDP socket, -1 */
	int tcp_fd;			/* listening TCP socket, -1 */
	int stop_fd;			/* eventfd: readable once stopping */
	uint16_t port;			/* bound port */
	net_dns_lookup_fn lookup;	/* peer -> sandbox */
	net_dns_count_fn count;		/* counters, may be NULL */
	void *ud;			/* for both */
	pthread_t workers[DNS_WORKERS]; /* serving threads */
	unsigned n_workers;		/* started */
};

static void pktp(ldns_pkt **p)
{
	if (*p)
		ldns_pkt_free(*p);
}
#define cleanup_pkt __attribute__((cleanup(pktp)))

/* "ADDR", "ADDR:PORT", "[V6]:PORT", "V6". */
static int parse_upstream(const char *s, struct sockaddr_storage *out, socklen_t *len)
{
	char host[64];
	const char *port = NULL;
	unsigned long p = 53;
	struct sockaddr_in *v4 = (struct sockaddr_in *)out;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
	char *end;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || (size_t)(close - s - 1) >= sizeof(host))
			return -EINVAL;
		snprintf(host, sizeof(host), "%.*s", (int)(close - s - 1), s + 1);
		if (close[1] == ':')
			port = close + 2;
		else if (close[1])
			return -EINVAL;
	} else {
		const char *colon = strchr(s, ':');

		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* a bare IPv6 address */
		if (strlen(s) >= sizeof(host))
			return -EINVAL;
		snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
		if (colon)
			port = colon + 1;
	}
	if (port) {
		p = strtoul(port, &end, 10);
		if (!*port || *end || p == 0 || p > 65535)
			return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)p);
		*len = sizeof(*v4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)p);
		*len = sizeof(*v6);
		return 0;
	}
	return -EINVAL;
}

/* The first `nameserver` line of /etc/resolv.conf. */
static int upstream_from_resolv_conf(char *out, size_t n)
{
	cleanup_free char *body = NULL;
	char *save = NULL;
	int r = util_read_file("/etc/resolv.conf", 1 << 16, &body, NULL);

	if (r < 0)
		return r;
	for (char *line = strtok_r(body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char addr[64];

		if (sscanf(line, " nameserver %63s", addr) == 1) {
			snprintf(out, n, "%s", addr);
			return 0;
		}
	}
	return -ENOENT;
}

int net_dns_new(const char *upstream, const struct net_opens *opens, struct net_dns **out,
		struct isola_err **err)
{
	struct net_dns *d = calloc(1, sizeof(*d));
	char conf[64];

	if (!d)
		return isola_err_set(err, ENOMEM, "internal", "resolver: out of memory");
	d->udp_fd = d->tcp_fd = d->stop_fd = -1;
	d->opens = opens;
	if (!upstream || !*upstream) {
		if (upstream_from_resolv_conf(conf, sizeof(conf)) < 0) {
			/* Not fatal: allowed names then get SERVFAIL, and the log says why. */
			log_warn("dns: /etc/resolv.conf names no nameserver and no --dns-upstream "
				 "was given: allowed names will not resolve");
			snprintf(d->up_text, sizeof(d->up_text), "(none)");
			*out = d;
			return 0;
		}
		upstream = conf;
	}
	if (parse_upstream(upstream, &d->up, &d->up_len) < 0) {
		free(d);
		return isola_err_set(err, EINVAL, "invalid",
				     "DNS upstream `%s` is not ADDR, ADDR:PORT or [V6]:PORT",
				     upstream);
	}
	snprintf(d->up_text, sizeof(d->up_text), "%s", upstream);
	*out = d;
	return 0;
}

void net_dns_set_callbacks(struct net_dns *d, net_dns_lookup_fn lookup, net_dns_count_fn count,
			   void *ud)
{
	d->lookup = lookup;
	d->count = count;
	d->ud = ud;
}

uint16_t net_dns_port(const struct net_dns *d)
{
	return d->port;
}

/* Sends wire[0..len) to the upstream and waits for the answer with the same id. */
static int upstream_exchange(struct net_dns *d, const uint8_t *wire, size_t len, uint16_t id,
			     ldns_pkt **answer)
{
	cleanup_fd int fd = -1;
	uint64_t deadline = util_now_ms() + DNS_TIMEOUT_MS;
	uint8_t buf[DNS_MAX_MSG];

	if (!d->up_len)
		return -ENETUNREACH; /* no upstream configured */
	fd = socket(d->up.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Connected: the kernel drops datagrams from anyone but the upstream. */
	if (connect(fd, (struct sockaddr *)&d->up, d->up_len) < 0)
		return -errno;
	if (send(fd, wire, len, 0) != (ssize_t)len)
		return -errno;
	for (;;) {
		uint64_t now = util_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;
		ldns_pkt *pkt = NULL;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)(deadline - now)) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno; /* ECONNREFUSED: nothing listens there */
		}
		/* UNTRUSTED: the upstream's bytes; ldns checks every length against n. */
		if (ldns_wire2pkt(&pkt, buf, (size_t)n) != LDNS_STATUS_OK)
			continue;
		if (ldns_pkt_id(pkt) != id || !ldns_pkt_qr(pkt)) {
			ldns_pkt_free(pkt);
			continue;
		}
		*answer = pkt;
		return 0;
	}
}

/* Asks the upstream for name/type (a fresh random id, RD set). */
static int upstream_query(struct net_dns *d, const char *name, ldns_rr_type type,
			  ldns_rr_class klass, ldns_pkt **answer)
{
	ldns_rdf *dname = ldns_dname_new_frm_str(name);
	cleanup_pkt ldns_pkt *q = NULL;
	uint8_t *wire = NULL;
	size_t len = 0;
	uint16_t id;
	int r;

	if (!dname)
		return -EINVAL;
	q = ldns_pkt_query_new(dname, type, klass, LDNS_RD); /* owns dname */
	if (!q)
		return -ENOMEM;
	if (util_random(&id, sizeof(id)) < 0)
		return -EIO;
	ldns_pkt_set_id(q, id);
	if (ldns_pkt2wire(&wire, q, &len) != LDNS_STATUS_OK)
		return -EINVAL;
	r = upstream_exchange(d, wire, len, id, answer);
	free(wire);
	return r;
}

/* The address an A or AAAA record carries, or -EINVAL. */
static int rr_addr(const ldns_rr *rr, struct sockaddr_storage *ss)
{
	const ldns_rdf *rd = ldns_rr_rdf(rr, 0);

	memset(ss, 0, sizeof(*ss));
	if (!rd)
		return -EINVAL;
	if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A && ldns_rdf_size(rd) == 4) {
		struct sockaddr_in *v4 = (struct sockaddr_in *)ss;

		v4->sin_family = AF_INET;
		memcpy(&v4->sin_addr, ldns_rdf_data(rd), 4);
		return 0;
	}
	if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_AAAA && ldns_rdf_size(rd) == 16) {
		struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;

		v6->sin6_family = AF_INET6;
		memcpy(&v6->sin6_addr, ldns_rdf_data(rd), 16);
		return 0;
	}
	return -EINVAL;
}

int net_dns_resolve(struct net_dns *d, const char *name, struct sockaddr_storage *out, size_t max,
		    size_t *n, struct isola_err **err)
{
	static const ldns_rr_type types[] = {LDNS_RR_TYPE_A, LDNS_RR_TYPE_AAAA};
	char norm[256];
	int last = -ENOENT;

	*n = 0;
	if (net_name_normalize(name, norm, sizeof(norm)) < 0)
		return isola_err_set(err, EINVAL, "invalid", "resolve `%.64s`: not a host name",
				     name);
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		cleanup_pkt ldns_pkt *a = NULL;
		ldns_rr_list *ans;
		int r = upstream_query(d, norm, types[t], LDNS_RR_CLASS_IN, &a);

		if (r < 0) {
			last = r;
			continue;
		}
		ans = ldns_pkt_answer(a);
		for (size_t i = 0; ans && i < ldns_rr_list_rr_count(ans) && *n < max; i++)
			if (rr_addr(ldns_rr_list_rr(ans, i), &out[*n]) == 0)
				(*n)++;
	}
	if (*n)
		return 0;
	if (last == -ETIMEDOUT)
		return isola_err_set(err, ETIMEDOUT, "unavailable",
				     "resolve `%s`: DNS upstream %s did not answer", norm,
				     d->up_text);
	if (last != -ENOENT)
		return isola_err_sys(err, -last, "unavailable", "resolve `%s` through %s", norm,
				     d->up_text);
	return isola_err_set(err, ENOENT, "not_found", "resolve `%s`: no address", norm);
}

/* True if an answer record must not reach the sandbox: an address always denied or denied by a
 * CIDR rule (DNS rebinding: an allowed name answered with 169.254.169.254 or 127.0.0.1). */
static bool rr_is_denied(struct net_dns *d, const struct net_policy *p, const ldns_rr *rr)
{
	struct sockaddr_storage ss;
	struct net_addr a;

	if (rr_addr(rr, &ss) < 0)
		return false; /* not an address record */
	if (net_addr_from_sockaddr((struct sockaddr *)&ss, &a, NULL) < 0)
		return true;
	return net_addr_always_denied(&a, d->opens) || net_policy_denies_addr(p, &a, 0);
}

/* A reply carrying only the question and rcode. */
static ldns_pkt *reply_new(const ldns_pkt *q, const ldns_rr *question, uint8_t rcode)
{
	ldns_pkt *r = ldns_pkt_new();

	if (!r)
		return NULL;
	ldns_pkt_set_id(r, ldns_pkt_id(q));
	ldns_pkt_set_qr(r, true);
	ldns_pkt_set_opcode(r, ldns_pkt_get_opcode(q));
	ldns_pkt_set_rd(r, ldns_pkt_rd(q));
	ldns_pkt_set_ra(r, true);
	ldns_pkt_set_rcode(r, rcode);
	if (question)
		ldns_pkt_push_rr(r, LDNS_SECTION_QUESTION, ldns_rr_clone(question));
	return r;
}

/* Header-only FORMERR/REFUSED for a query ldns could not parse (id and opcode copied). */
static size_t raw_reply(const uint8_t *q, size_t qlen, uint8_t rcode, uint8_t *out)
{
	if (qlen < 12)
		return 0;
	memset(out, 0, 12);
	out[0] = q[0];
	out[1] = q[1];
	out[2] = (uint8_t)(0x80 | (q[2] & 0x78)); /* QR, opcode */
	out[3] = rcode;
	return 12;
}

struct verdict {
	char id[40];	  /* sandbox, "" if unknown */
	char name[256];	  /* question name */
	char type[16];	  /* question type */
	const char *what; /* verdict for the log */
	bool refused;	  /* counted as refused */
};

/*
 * The header's counts, read before ldns parses anything: a query carries one question, no
 * answer or authority records and at most one additional record (EDNS's OPT); nothing a
 * resolver answers needs more. ldns (1.8.3) loses the first of two TSIG records in one packet
 * (found by fuzz_dns: a leak per such query), so such packets never reach it.
 */
static bool query_counts_ok(const uint8_t *q, size_t qlen)
{
	if (qlen < 12)
		return false;
	return ((q[4] << 8) | q[5]) == 1 && ((q[6] << 8) | q[7]) == 0 &&
	       ((q[8] << 8) | q[9]) == 0 && ((q[10] << 8) | q[11]) <= 1;
}

/* Builds the answer to one query; returns the reply packet or NULL to send a raw one. */
static ldns_pkt *answer_query(struct net_dns *d, const struct sockaddr *peer, const uint8_t *q,
			      size_t qlen, struct verdict *v, uint8_t *raw_rcode)
{
	cleanup_pkt ldns_pkt *pkt = NULL;
	cleanup_pkt ldns_pkt *up = NULL;
	struct net_policy *pol = NULL;
	ldns_rr *question;
	ldns_pkt *reply = NULL;
	ldns_rr_list *ans;
	char *s;
	size_t len;
	enum net_reason reason;

	if (d->lookup(d->ud, peer, v->id, &pol) < 0) {
		v->what = "refused: not a sandbox";
		*raw_rcode = LDNS_RCODE_REFUSED;
		return NULL;
	}
	/* UNTRUSTED: the sandbox's query; ldns validates every length against qlen. */
	if (!query_counts_ok(q, qlen) || ldns_wire2pkt(&pkt, q, qlen) != LDNS_STATUS_OK ||
	    ldns_pkt_qr(pkt) || ldns_pkt_get_opcode(pkt) != LDNS_PACKET_QUERY ||
	    ldns_pkt_qdcount(pkt) != 1 || !ldns_pkt_question(pkt) ||
	    ldns_rr_list_rr_count(ldns_pkt_question(pkt)) != 1) {
		v->what = "formerr";
		*raw_rcode = LDNS_RCODE_FORMERR;
		v->refused = true;
		net_policy_free(pol);
		return NULL;
	}
	question = ldns_rr_list_rr(ldns_pkt_question(pkt), 0);
	s = ldns_rdf2str(ldns_rr_owner(question));
	snprintf(v->name, sizeof(v->name), "%s", s ? s : "");
	free(s);
	s = ldns_rr_type2str(ldns_rr_get_type(question));
	snprintf(v->type, sizeof(v->type), "%s", s ? s : "?");
	free(s);
	len = strlen(v->name);
	if (len > 1 && v->name[len - 1] == '.')
		v->name[len - 1] = '\0';
	/* Every type is answered only for names the policy allows: TXT, long labels and any
	 * other exfiltration channel is confined to those names. The check validates the name. */
	if (ldns_rr_get_class(question) != LDNS_RR_CLASS_IN ||
	    !net_policy_check_name(pol, v->name, 0, &reason)) {
		v->what = ldns_rr_get_class(question) != LDNS_RR_CLASS_IN ? "refused: class"
									  : net_reason_name(reason);
		v->refused = true;
		net_policy_free(pol);
		return reply_new(pkt, question, LDNS_RCODE_REFUSED);
	}
	if (upstream_query(d, v->name, ldns_rr_get_type(question), LDNS_RR_CLASS_IN, &up) < 0) {
		v->what = "servfail: upstream";
		net_policy_free(pol);
		return reply_new(pkt, question, LDNS_RCODE_SERVFAIL);
	}
	reply = reply_new(pkt, question, ldns_pkt_get_rcode(up));
	ans = ldns_pkt_answer(up);
	v->what = "allowed";
	for (size_t i = 0; reply && ans && i < ldns_rr_list_rr_count(ans); i++) {
		ldns_rr *rr = ldns_rr_list_rr(ans, i);

		if (rr_is_denied(d, pol, rr)) {
			v->what = "allowed, denied addresses removed";
			continue;
		}
		ldns_pkt_push_rr(reply, LDNS_SECTION_ANSWER, ldns_rr_clone(rr));
	}
	if (reply)
		ldns_pkt_set_tc(reply, ldns_pkt_tc(up));
	net_policy_free(pol);
	return reply;
}

size_t net_dns_handle(struct net_dns *d, const struct sockaddr *peer, const uint8_t *q, size_t qlen,
		      uint8_t *out, size_t cap, bool udp)
{
	struct verdict v = {.what = "?"};
	uint8_t rcode = 0;
	cleanup_pkt ldns_pkt *reply = NULL;
	uint8_t *wire = NULL;
	size_t len = 0;

	if (qlen < 12)
		return 0; /* not even a header: nothing to answer */
	reply = answer_query(d, peer, q, qlen, &v, &rcode);
	if (!reply) {
		len = raw_reply(q, qlen, rcode, out);
	} else if (ldns_pkt2wire(&wire, reply, &len) == LDNS_STATUS_OK) {
		if (udp && len > DNS_UDP_MAX) {
			/* Too big for UDP without EDNS: truncated, the client retries over TCP. */
			free(wire);
			wire = NULL;
			ldns_rr_list_deep_free(ldns_pkt_answer(reply));
			ldns_pkt_set_answer(reply, ldns_rr_list_new());
			ldns_pkt_set_ancount(reply, 0);
			ldns_pkt_set_tc(reply, true);
			if (ldns_pkt2wire(&wire, reply, &len) != LDNS_STATUS_OK)
				len = 0;
		}
		if (wire && len <= cap)
			memcpy(out, wire, len);
		else
			len = 0;
		free(wire);
	}
	log_info("dns: sandbox %s query %s %s: %s", v.id[0] ? v.id : "-", v.type[0] ? v.type : "-",
		 v.name[0] ? v.name : "-", v.what);
	if (d->count && v.id[0])
		d->count(d->ud, v.id, v.refused);
	return len;
}

static void serve_udp(struct net_dns *d)
{
	uint8_t q[DNS_MAX_MSG], out[DNS_MAX_MSG];
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	ssize_t n =
		recvfrom(d->udp_fd, q, sizeof(q), MSG_DONTWAIT, (struct sockaddr *)&peer, &plen);
	size_t len;

	if (n <= 0)
		return;
	len = net_dns_handle(d, (struct sockaddr *)&peer, q, (size_t)n, out, sizeof(out), true);
	if (len)
		sendto(d->udp_fd, out, len, MSG_DONTWAIT, (struct sockaddr *)&peer, plen);
}

/* One query per TCP connection, each read bounded by DNS_TIMEOUT_MS. */
static void serve_tcp(struct net_dns *d)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	struct timeval tv = {.tv_sec = DNS_TIMEOUT_MS / 1000};
	cleanup_fd int fd = accept4(d->tcp_fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
	uint8_t hdr[2], q[DNS_MAX_MSG], out[2 + DNS_MAX_MSG];
	size_t qlen, len;

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (util_read_exact(fd, hdr, 2) < 0)
		return;
	/* UNTRUSTED: the length prefix, checked against our buffer before reading. */
	qlen = (size_t)hdr[0] << 8 | hdr[1];
	if (qlen < 12 || qlen > sizeof(q) || util_read_exact(fd, q, qlen) < 0)
		return;
	len = net_dns_handle(d, (struct sockaddr *)&peer, q, qlen, out + 2, sizeof(out) - 2, false);
	if (!len)
		return;
	out[0] = (uint8_t)(len >> 8);
	out[1] = (uint8_t)len;
	util_write_all(fd, out, len + 2);
}

static void *worker(void *arg)
{
	struct net_dns *d = arg;

	util_thread_name("dns");
	for (;;) {
		struct pollfd p[3] = {
			{.fd = d->stop_fd, .events = POLLIN},
			{.fd = d->udp_fd, .events = POLLIN},
			{.fd = d->tcp_fd, .events = POLLIN},
		};

		if (poll(p, 3, -1) < 0)
			continue;
		if (p[0].revents)
			return NULL;
		/* Sockets are non-blocking: a worker that lost the race gets EAGAIN. */
		if (p[1].revents & POLLIN)
			serve_udp(d);
		if (p[2].revents & POLLIN)
			serve_tcp(d);
	}
}

static int bind_socket(int type, uint16_t port, struct isola_err **err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	cleanup_fd int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;

	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "resolver socket");
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return isola_err_sys(err, errno, "unavailable", "bind resolver port %u", port);
	if (type == SOCK_STREAM && listen(fd, 128) < 0)
		return isola_err_sys(err, errno, "internal", "listen on resolver port %u", port);
	return steal_fd(&fd);
}

int net_dns_serve(struct net_dns *d, uint16_t port, net_dns_lookup_fn lookup,
		  net_dns_count_fn count, void *ud, struct isola_err **err)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	net_dns_set_callbacks(d, lookup, count, ud);
	/* UDP first with the requested port (0: the kernel picks), then TCP on the same one. A
	 * port the kernel picked is free for UDP only: a TCP socket may hold the same number (seen:
	 * an isolad restart failing with "bind resolver port N: Address already in use"), so
	 * another pick is tried. */
	for (unsigned tries = 1;; tries++) {
		d->udp_fd = bind_socket(SOCK_DGRAM, port, err);
		if (d->udp_fd < 0)
			return d->udp_fd;
		if (getsockname(d->udp_fd, (struct sockaddr *)&sa, &len) < 0)
			return isola_err_sys(err, errno, "internal", "resolver port");
		d->port = ntohs(sa.sin_port);
		d->tcp_fd = bind_socket(SOCK_STREAM, d->port, err);
		if (d->tcp_fd >= 0)
			break;
		if (port != 0 || tries == DNS_BIND_TRIES || d->tcp_fd != -EADDRINUSE)
			return d->tcp_fd;
		if (err) {
			isola_err_free(*err);
			*err = NULL;
		}
		close(d->udp_fd);
		d->udp_fd = -1;
	}
	d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->stop_fd < 0)
		return isola_err_sys(err, errno, "internal", "resolver eventfd");
	for (unsigned i = 0; i < DNS_WORKERS; i++) {
		int r = pthread_create(&d->workers[i], NULL, worker, d);

		if (r != 0)
			return isola_err_sys(err, r, "internal", "start resolver thread");
		d->n_workers++;
	}
	log_info("dns: resolver on port %u, upstream %s", d->port, d->up_text);
	return 0;
}

void net_dns_free(struct net_dns *d)
{
	uint64_t one = 1;

	if (!d)
		return;
	if (d->stop_fd >= 0 && write(d->stop_fd, &one, sizeof(one)) < 0)
		log_warn("dns: cannot stop resolver threads: %s", strerror(errno));
	for (unsigned i = 0; i < d->n_workers; i++)
		pthread_join(d->workers[i], NULL);
	if (d->udp_fd >= 0)
		close(d->udp_fd);
	if (d->tcp_fd >= 0)
		close(d->tcp_fd);
	if (d->stop_fd >= 0)
		close(d->stop_fd);
	free(d);
}
