/* SPDX-License-Identifier: Apache-2.0 */
/* test_proxy: the egress proxy on loopback — real sockets, real upstream servers judged at the sink. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common/util.h"
#include "isolad/net/net.h"
#include "isolad/net/proxy.h"

/* Addresses: the proxy listens on 127.0.0.1; sandboxes dial from 127.0.0.3 (A) and 127.0.0.4
 * (B); allowed upstreams listen on 127.0.0.2 (the operator "opened" 127.0.0.2/32 for the test);
 * a forbidden upstream listens on 127.0.0.1, which stays always denied. */
#define SB_A	  "127.0.0.3"
#define SB_B	  "127.0.0.4"
#define UP_OK	  "127.0.0.2"
#define UP_DENIED "127.0.0.1"
#define STRANGER  "127.0.0.9"

/* ---- upstream servers (the sinks) --------------------------------------------------------- */

enum mode { ECHO, SOURCE, BANNER, COUNT_ONLY };

struct server {
	enum mode mode;	       /* what it does with a connection */
	int lfd;	       /* listener */
	uint16_t port;	       /* its port */
	atomic_int accepted;   /* connections that arrived */
	atomic_llong received; /* bytes received in all */
	pthread_mutex_t lock;  /* first */
	char first[512];       /* first bytes of the last connection */
	size_t first_len;      /* their count */
	atomic_int saw_eof;    /* connections that ended with the client's FIN */
};

struct sconn {
	struct server *s;
	int fd;
};

static void *serve_conn(void *arg)
{
	struct sconn *sc = arg;
	struct server *s = sc->s;
	char buf[65536];
	size_t got = 0;
	ssize_t n;

	if (s->mode == BANNER && write(sc->fd, "220 banner\r\n", 12) != 12)
		goto out;
	if (s->mode == SOURCE) { /* "GET /<bytes> ..." → that many bytes, then close */
		char req[2048];
		size_t rl = 0;

		while (rl < sizeof(req) - 1 &&
		       (n = read(sc->fd, req + rl, sizeof(req) - 1 - rl)) > 0) {
			rl += (size_t)n;
			req[rl] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		long long want = rl > 5 ? atoll(req + 5) : 0;

		memset(buf, 'x', sizeof(buf));
		while (want > 0) {
			n = write(sc->fd, buf,
				  want < (long long)sizeof(buf) ? (size_t)want : sizeof(buf));
			if (n <= 0)
				break;
			want -= n;
		}
		goto out;
	}
	while ((n = read(sc->fd, buf, sizeof(buf))) > 0) {
		pthread_mutex_lock(&s->lock);
		if (got == 0)
			s->first_len = 0;
		if (s->first_len < sizeof(s->first)) {
			size_t k = sizeof(s->first) - s->first_len < (size_t)n
					   ? sizeof(s->first) - s->first_len
					   : (size_t)n;

			memcpy(s->first + s->first_len, buf, k);
			s->first_len += k;
		}
		pthread_mutex_unlock(&s->lock);
		got += (size_t)n;
		atomic_fetch_add(&s->received, n);
		if (s->mode != COUNT_ONLY && util_write_all(sc->fd, buf, (size_t)n) < 0)
			break;
	}
	if (n == 0)
		atomic_fetch_add(&s->saw_eof, 1);
out:
	close(sc->fd);
	free(sc);
	return NULL;
}

static void *serve(void *arg)
{
	struct server *s = arg;

	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0)
			return NULL;
		atomic_fetch_add(&s->accepted, 1);
		struct sconn *sc = malloc(sizeof(*sc));

		sc->s = s;
		sc->fd = fd;
		pthread_create(&t, NULL, serve_conn, sc);
		pthread_detach(t);
	}
}

static void sockaddr_of(const char *ip, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	inet_pton(AF_INET, ip, &sa->sin_addr);
}

static void server_start(struct server *s, const char *ip, enum mode m)
{
	struct sockaddr_storage sa;
	struct net_addr a;
	socklen_t l;
	pthread_t t;
	int one = 1;

	memset(s, 0, sizeof(*s));
	s->mode = m;
	pthread_mutex_init(&s->lock, NULL);
	if (net_addr_parse(ip, &a) < 0)
		abort();
	l = net_addr_to_sockaddr(&a, 0, &sa);
	s->lfd = socket(sa.ss_family, SOCK_STREAM, 0);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->lfd, (struct sockaddr *)&sa, l) < 0 || listen(s->lfd, 64) < 0)
		abort();
	l = sizeof(sa);
	getsockname(s->lfd, (struct sockaddr *)&sa, &l);
	net_addr_from_sockaddr((struct sockaddr *)&sa, &a, &s->port);
	pthread_create(&t, NULL, serve, s);
	pthread_detach(t);
}

/* ---- the proxy's environment: sandboxes, original destinations, DNS ---------------------- */

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_policy *policy_a, *policy_b; /* current policies (swapped live) */
static struct net_counters counters_a, counters_b;
static atomic_int counter_gets, counter_puts;
static struct sockaddr_in orig[65536]; /* original destination by client source port */
static atomic_int resolves;

static int lookup(void *arg, const struct sockaddr *peer, char *id, struct net_policy **policy,
		  struct net_counters **counters)
{
	const struct sockaddr_in *s = (const struct sockaddr_in *)peer;
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
	pthread_mutex_lock(&env_lock);
	if (!strcmp(ip, SB_A)) {
		strcpy(id, "sbA");
		*policy = net_policy_ref(policy_a);
		*counters = &counters_a;
	} else if (!strcmp(ip, SB_B)) {
		strcpy(id, "sbB");
		*policy = net_policy_ref(policy_b);
		*counters = &counters_b;
	} else {
		pthread_mutex_unlock(&env_lock);
		return -ENOENT;
	}
	pthread_mutex_unlock(&env_lock);
	atomic_fetch_add(&counter_gets, 1);
	return 0;
}

static void put_counters(struct net_counters *c)
{
	atomic_fetch_add(&counter_puts, 1);
}

static int original_dst(void *arg, int fd, struct sockaddr_storage *out)
{
	struct sockaddr_in peer;
	socklen_t l = sizeof(peer);

	if (getpeername(fd, (struct sockaddr *)&peer, &l) < 0)
		return -errno;
	pthread_mutex_lock(&env_lock);
	memcpy(out, &orig[ntohs(peer.sin_port)], sizeof(struct sockaddr_in));
	pthread_mutex_unlock(&env_lock);
	return out->ss_family == AF_INET ? 0 : -ENOENT;
}

/* The stub DNS: our test double of the upstream resolver. */
static int resolve(void *arg, const char *name, struct sockaddr_storage *out, size_t max, size_t *n,
		   struct isola_err **err)
{
	static const struct {
		const char *name;
		const char *addrs[4];
	} zone[] = {
		{"allowed.test", {UP_OK}},
		{"other.allowed.test", {UP_OK}},
		{"rebind.test", {"169.254.169.254", UP_DENIED}},
		{"mixed.test", {"169.254.169.254", UP_DENIED, UP_OK}},
		{"denied-cidr.test", {"203.0.113.9"}},
		{"slow.test", {UP_OK}},
		{"v6.test", {"::1"}},
	};

	atomic_fetch_add(&resolves, 1);
	if (!strcmp(name, "slow.test"))
		usleep(1500 * 1000);
	*n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(zone); i++) {
		if (strcmp(zone[i].name, name))
			continue;
		for (size_t k = 0; k < 4 && zone[i].addrs[k] && *n < max; k++) {
			struct net_addr a;

			net_addr_parse(zone[i].addrs[k], &a);
			net_addr_to_sockaddr(&a, 0, &out[(*n)++]);
		}
		return 0;
	}
	return isola_err_set(err, ENOENT, "not_found", "resolve `%s`: NXDOMAIN", name);
}

static struct net_policy *mkpolicy(const char *text)
{
	struct isola_err *err = NULL;
	struct net_policy *p = NULL;
	json_t *j = json_loads(text, 0, NULL);

	if (!j || net_policy_parse(j, &p, &err) < 0) {
		printf("# policy %s: %s\n", text, err ? err->message : "bad json");
		abort();
	}
	json_decref(j);
	return p;
}

static void set_policy(struct net_policy **slot, const char *text)
{
	struct net_policy *np = mkpolicy(text), *old;

	pthread_mutex_lock(&env_lock);
	old = *slot;
	*slot = np;
	pthread_mutex_unlock(&env_lock);
	net_policy_free(old);
}

static struct net_opens opens;

static struct net_proxy *proxy_with(uint32_t max_conns, uint64_t rate, uint32_t idle_ms)
{
	struct net_proxy_config cfg = {
		.listen_fd = -1,
		.opens = &opens,
		.lookup = lookup,
		.put_counters = put_counters,
		.resolve = resolve,
		.original_dst = original_dst,
		.max_conns = max_conns,
		.rate_bytes = rate,
		.silent_ms = 200,
		.head_timeout_ms = 1000,
		.idle_timeout_ms = idle_ms,
	};
	struct net_proxy *p = NULL;
	struct isola_err *err = NULL;

	sockaddr_of("127.0.0.1", 0, (struct sockaddr_in *)&cfg.listen_addr);
	if (net_proxy_start(&cfg, &p, &err) < 0) {
		printf("# net_proxy_start: %s\n", err->message);
		abort();
	}
	return p;
}

/* ---- clients ------------------------------------------------------------------------------ */

/* Connects from `src` to the proxy as if the sandbox had dialled dst_ip:dst_port. */
static int dial(struct net_proxy *p, const char *src, const char *dst_ip, uint16_t dst_port)
{
	/* A connect() on this loaded shared host has been seen waiting on SYN retransmits for
	 * 20+ s while the proxy was idle and served other clients: bound it and retry on a new
	 * port, so the harness cannot hang (the proxy's verdicts are judged elsewhere). */
	for (int attempt = 0; attempt < 5; attempt++) {
		struct sockaddr_in sa, px;
		struct timeval tv = {.tv_sec = 3};
		socklen_t l = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		sockaddr_of(src, 0, &sa);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			abort();
		getsockname(fd, (struct sockaddr *)&sa, &l);
		pthread_mutex_lock(&env_lock);
		sockaddr_of(dst_ip, dst_port, &orig[ntohs(sa.sin_port)]);
		pthread_mutex_unlock(&env_lock);
		sockaddr_of("127.0.0.1", net_proxy_port(p), &px);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, (struct sockaddr *)&px, sizeof(px)) == 0) {
			tv.tv_sec = 0;
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			return fd;
		}
		printf("# dial from %s: connect: %s; retrying\n", src, strerror(errno));
		close(fd);
	}
	abort();
}

/* Reads until n bytes, EOF, error or timeout. Returns bytes read; *err = errno of a failure. */
static ssize_t read_for(int fd, char *buf, size_t n, int timeout_ms, int *err)
{
	size_t got = 0;

	*err = 0;
	while (got < n) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};

		if (poll(&pf, 1, timeout_ms) <= 0) {
			*err = ETIMEDOUT;
			break;
		}
		ssize_t r = recv(fd, buf + got, n - got, 0);

		if (r < 0) {
			*err = errno;
			break;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int last_send_errno; /* of the last send_str() */

static void send_str(int fd, const char *s)
{
	last_send_errno = send(fd, s, strlen(s), MSG_NOSIGNAL) < 0 ? errno : 0;
}

/* True if the proxy reset the connection (a denial), judged by what the client reads: a reset,
 * or, when the reset came before our last send (which then consumed it), EOF after that send
 * failed with ECONNRESET/EPIPE. Not a byte comes back either way. */
static bool was_reset(int fd)
{
	char b[64];
	int e;
	ssize_t n = read_for(fd, b, sizeof(b), 5000, &e);

	return n == 0 && (e == ECONNRESET ||
			  (e == 0 && (last_send_errno == ECONNRESET || last_send_errno == EPIPE)));
}

static char *http_get(const char *host)
{
	static char req[512];

	snprintf(req, sizeof(req), "GET /hello HTTP/1.1\r\nHost: %s\r\nUser-Agent: t\r\n\r\n",
		 host);
	return req;
}

/* An echo round trip of s; true if it came back whole. */
static bool echo_ok(int fd, const char *s)
{
	char b[1024];
	int e;

	send_str(fd, s);
	return read_for(fd, b, strlen(s), 3000, &e) == (ssize_t)strlen(s) &&
	       !memcmp(b, s, strlen(s));
}

/* A minimal ClientHello with SNI `name`, as two TLS records. */
static size_t client_hello(const char *name, uint8_t *out)
{
	uint8_t hs[512];
	size_t n = 0, nl = strlen(name), split;
	size_t o = 0;

	hs[n++] = 1;
	n += 3; /* length later */
	hs[n++] = 3, hs[n++] = 3;
	memset(hs + n, 7, 32), n += 32;
	hs[n++] = 0;		  /* session id */
	hs[n++] = 0, hs[n++] = 2; /* cipher suites */
	hs[n++] = 0x13, hs[n++] = 0x01;
	hs[n++] = 1, hs[n++] = 0;		  /* compression */
	hs[n++] = 0, hs[n++] = (uint8_t)(nl + 9); /* extensions */
	hs[n++] = 0, hs[n++] = 0;		  /* server_name */
	hs[n++] = 0, hs[n++] = (uint8_t)(nl + 5);
	hs[n++] = 0, hs[n++] = (uint8_t)(nl + 3);
	hs[n++] = 0;
	hs[n++] = 0, hs[n++] = (uint8_t)nl;
	memcpy(hs + n, name, nl), n += nl;
	hs[1] = 0, hs[2] = (uint8_t)((n - 4) >> 8), hs[3] = (uint8_t)(n - 4);
	split = n / 2;
	for (size_t off = 0; off < n; off = split, split = n) {
		out[o++] = 0x16, out[o++] = 3, out[o++] = 1;
		out[o++] = (uint8_t)((split - off) >> 8), out[o++] = (uint8_t)(split - off);
		memcpy(out + o, hs + off, split - off), o += split - off;
	}
	return o;
}

static uint64_t ms_since(uint64_t t0)
{
	return (util_now_ns() - t0) / 1000000;
}

/* ---- tests -------------------------------------------------------------------------------- */

static struct server echo, denied_srv, source, banner;

static void test_names(struct net_proxy *p)
{
	int fd;
	char b[256];
	int e;

	/* HTTP: the request reaches the allowed upstream byte for byte, the answer comes back. */
	int before = atomic_load(&echo.accepted);

	fd = dial(p, SB_A, "198.51.100.1", echo.port); /* the sandbox dialled some address */
	send_str(fd, http_get("allowed.test"));
	ssize_t n = read_for(fd, b, strlen(http_get("allowed.test")), 3000, &e);

	ok(n == (ssize_t)strlen(http_get("allowed.test")) &&
		   !memcmp(b, http_get("allowed.test"), (size_t)n),
	   "HTTP Host allowed.test: echoed back through the proxy");
	ok(atomic_load(&echo.accepted) == before + 1 && echo.first_len >= (size_t)n &&
		   !memcmp(echo.first, http_get("allowed.test"), (size_t)n),
	   "the upstream (resolved name, original port) got the head replayed intact");
	ok(echo_ok(fd, "more bytes after the head"), "relay continues after the head");
	close(fd);

	/* TLS: SNI in a ClientHello split over two records and two writes. */
	uint8_t ch[600];
	size_t chl = client_hello("allowed.test", ch);

	before = atomic_load(&echo.accepted);
	fd = dial(p, SB_A, "198.51.100.1", echo.port);
	send(fd, ch, 20, 0);
	usleep(50 * 1000);
	send(fd, ch + 20, chl - 20, 0);
	n = read_for(fd, b, chl, 3000, &e);
	ok(n == (ssize_t)chl && !memcmp(b, ch, chl) && atomic_load(&echo.accepted) == before + 1,
	   "TLS SNI allowed.test over split reads: connected, ClientHello replayed");
	close(fd);

	/* Names the policy does not allow: RST, and nothing reaches any upstream. */
	static const char *const denied_names[] = {"denied.test", "notallowed.test",
						   "allowed.test.evil", "sub.other.allowed.test"};
	for (size_t i = 0; i < ARRAY_SIZE(denied_names); i++) {
		before = atomic_load(&echo.accepted);
		fd = dial(p, SB_A, "198.51.100.1", echo.port);
		send_str(fd, http_get(denied_names[i]));
		ok(was_reset(fd) && atomic_load(&echo.accepted) == before,
		   "Host %s denied with RST; the upstream saw nothing", denied_names[i]);
		close(fd);
	}
	before = atomic_load(&echo.accepted);
	fd = dial(p, SB_A, "198.51.100.1", echo.port);
	chl = client_hello("denied.test", ch);
	send(fd, ch, chl, 0);
	ok(was_reset(fd) && atomic_load(&echo.accepted) == before, "TLS SNI denied.test: RST");
	close(fd);

	/* Wildcard: *.wild.test allowed, resolved through the stub (NXDOMAIN here → deny). */
	fd = dial(p, SB_A, "198.51.100.1", echo.port);
	send_str(fd, http_get("nx.wild.test"));
	ok(was_reset(fd), "allowed name that does not resolve: RST");
	close(fd);

	/* Malformed heads. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	send_str(fd, "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n");
	ok(was_reset(fd), "two Host headers: RST");
	close(fd);
	fd = dial(p, SB_A, UP_OK, echo.port);
	send_str(fd, "GET / HTTP/1.1\r\nHost: b\xc3\xbc\x63her.test\r\n\r\n");
	ok(was_reset(fd), "non-ASCII Host: RST");
	close(fd);
}

static void test_rebinding(struct net_proxy *p)
{
	int fd, before_ok = atomic_load(&echo.accepted),
		before_denied = atomic_load(&denied_srv.accepted);
	struct net_proxy_stats st0, st1;

	net_proxy_get_stats(p, &st0);
	/* rebind.test is allowed by name but resolves to 169.254.169.254 and 127.0.0.1: the
	 * original port is the forbidden server's, so a wrong connect would land there. */
	fd = dial(p, SB_A, UP_OK, denied_srv.port);
	send_str(fd, http_get("rebind.test"));
	ok(was_reset(fd), "allowed name resolving to metadata/loopback: RST");
	close(fd);
	usleep(100 * 1000);
	ok(atomic_load(&denied_srv.accepted) == before_denied,
	   "the loopback server behind the rebound name received nothing");
	net_proxy_get_stats(p, &st1);
	ok(st1.denied[NET_PROXY_DENY_ALWAYS] == st0.denied[NET_PROXY_DENY_ALWAYS] + 1,
	   "counted as always_denied");

	/* mixed.test: the denied addresses are skipped, the allowed one is used. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	ok(echo_ok(fd, http_get("mixed.test")) && atomic_load(&echo.accepted) == before_ok + 1,
	   "name with metadata, loopback and allowed addresses: only the allowed one is dialled");
	close(fd);

	/* A name whose address a deny CIDR covers. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	send_str(fd, http_get("denied-cidr.test"));
	ok(was_reset(fd), "allowed name resolving into a deny CIDR: RST");
	close(fd);
}

/* A name that resolves to IPv6 is dialled over IPv6 (::1 opened by the operator for the test). */
static void test_ipv6_upstream(struct net_proxy *p)
{
	static struct server v6; /* its thread outlives this function */
	int fd;

	server_start(&v6, "::1", ECHO);
	fd = dial(p, SB_A, "198.51.100.1", v6.port);
	ok(echo_ok(fd, http_get("v6.test")) && atomic_load(&v6.accepted) == 1,
	   "a name resolving to ::1 is dialled over IPv6 and relayed");
	close(fd);
}

static void test_addresses(struct net_proxy *p)
{
	int fd, before = atomic_load(&echo.accepted), bd = atomic_load(&denied_srv.accepted);
	char b[64];
	int e;

	/* Raw TCP (no name) to an address a CIDR rule allows. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	ok(echo_ok(fd, "\x01\x02raw bytes"), "raw TCP to an allowed CIDR: relayed");
	close(fd);
	ok(atomic_load(&echo.accepted) == before + 1, "the upstream saw the raw connection");

	/* Sandbox B allows everything by default; the always-denied ranges still hold. */
	fd = dial(p, SB_B, UP_DENIED, denied_srv.port);
	send_str(fd, "\x01raw");
	ok(was_reset(fd), "default allow: raw TCP to 127.0.0.1 reset");
	close(fd);
	fd = dial(p, SB_B, UP_DENIED, denied_srv.port);
	send_str(fd, http_get("127.0.0.1"));
	ok(was_reset(fd), "default allow: Host 127.0.0.1 (literal) to 127.0.0.1 reset");
	close(fd);
	fd = dial(p, SB_B, "169.254.169.254", 80);
	send_str(fd, http_get("169.254.169.254"));
	ok(was_reset(fd), "default allow: metadata 169.254.169.254 reset");
	close(fd);
	fd = dial(p, SB_B, "10.1.2.3", 80);
	send_str(fd, "\x01raw");
	ok(was_reset(fd), "default allow: 10.1.2.3 reset");
	close(fd);
	fd = dial(p, SB_B, UP_DENIED, denied_srv.port);
	send_str(fd, http_get("rebind.test"));
	ok(was_reset(fd), "default allow: an allowed name dialled at 127.0.0.1 reset");
	close(fd);
	usleep(100 * 1000);
	ok(atomic_load(&denied_srv.accepted) == bd, "nothing reached the loopback server");

	/* Default allow, a name: the name adds nothing, the sandbox's destination is dialled
	 * without a lookup (the address checks above still apply). */
	int r0 = atomic_load(&resolves);

	fd = dial(p, SB_B, UP_OK, echo.port);
	ok(echo_ok(fd, http_get("not-in-any-zone.example")) && atomic_load(&resolves) == r0,
	   "default allow: a name goes to the dialled address, no lookup");
	close(fd);

	/* Policy A: a name no rule allows, to an address a CIDR rule allows, passes as raw. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	ok(echo_ok(fd, http_get("unlisted.example")),
	   "unlisted name to a CIDR-allowed destination: relayed to that destination");
	close(fd);
	/* ...but an explicitly denied name does not, even there. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	send_str(fd, http_get("blocked.allowed.test"));
	ok(was_reset(fd), "a deny-rule name to a CIDR-allowed destination: RST");
	close(fd);

	/* A peer that is no sandbox. */
	struct net_proxy_stats st0, st1;

	net_proxy_get_stats(p, &st0);
	fd = dial(p, STRANGER, UP_OK, echo.port);
	send_str(fd, "\x01");
	ok(was_reset(fd), "unknown peer: RST");
	close(fd);
	net_proxy_get_stats(p, &st1);
	ok(st1.denied[NET_PROXY_DENY_UNKNOWN] == st0.denied[NET_PROXY_DENY_UNKNOWN] + 1,
	   "counted as unknown_peer");

	/* A silent client (server-first protocol): after silent_ms it is raw TCP. */
	uint64_t t0 = util_now_ns();

	fd = dial(p, SB_A, UP_OK, banner.port);
	ssize_t n = read_for(fd, b, 12, 3000, &e);

	ok(n == 12 && !memcmp(b, "220 banner\r\n", 12),
	   "server-first protocol: the banner arrives after the silent wait (%llu ms)",
	   (unsigned long long)ms_since(t0));
	close(fd);

	/* Denied raw TCP under policy A (no rule for 198.51.100.1). */
	fd = dial(p, SB_A, "198.51.100.1", 443);
	send_str(fd, "\x01");
	ok(was_reset(fd), "raw TCP to an address nothing allows: RST");
	close(fd);
}

static void test_relay(struct net_proxy *p)
{
	int fd, e;
	char b[70000];
	int eof_before = atomic_load(&echo.saw_eof);

	/* Half-close: the client's FIN reaches the upstream, the echo still comes back. */
	fd = dial(p, SB_A, "198.51.100.1", echo.port);
	send_str(fd, http_get("allowed.test"));
	shutdown(fd, SHUT_WR);
	ssize_t n = read_for(fd, b, sizeof(b), 3000, &e);

	ok(n == (ssize_t)strlen(http_get("allowed.test")) && e == 0,
	   "half-close: echo returned, then EOF");
	usleep(50 * 1000);
	ok(atomic_load(&echo.saw_eof) == eof_before + 1, "half-close: the upstream saw the FIN");
	close(fd);

	/* A large transfer through the echo both ways, in one go (buffers fill up, flow control). */
	static char big[4 << 20], back[4 << 20];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	memcpy(big, "\x02", 1);
	fd = dial(p, SB_A, UP_OK, echo.port);
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	size_t sent = 0, got = 0;
	uint64_t t0 = util_now_ns();

	while (got < sizeof(big) && ms_since(t0) < 10000) {
		struct pollfd pf = {.fd = fd,
				    .events = POLLIN | (sent < sizeof(big) ? POLLOUT : 0)};

		poll(&pf, 1, 1000);
		if (sent < sizeof(big)) {
			ssize_t w = send(fd, big + sent, sizeof(big) - sent, MSG_NOSIGNAL);

			if (w > 0)
				sent += (size_t)w;
		}
		ssize_t r = recv(fd, back + got, sizeof(back) - got, 0);

		if (r > 0)
			got += (size_t)r;
		else if (r == 0)
			break;
	}
	ok(got == sizeof(big) && !memcmp(big, back, sizeof(big)),
	   "4 MiB echoed through the proxy intact (%zu bytes back)", got);
	close(fd);
}

static void test_dns_does_not_block(struct net_proxy *p)
{
	int slow, fast;
	uint64_t t0;

	fast = dial(p, SB_A, UP_OK, echo.port);
	ok(echo_ok(fast, http_get("allowed.test")), "a connection relaying");
	slow = dial(p, SB_A, "198.51.100.1", echo.port);
	send_str(slow, http_get("slow.test")); /* its lookup takes 1.5 s */
	usleep(100 * 1000);
	t0 = util_now_ns();
	ok(echo_ok(fast, "ping during a slow lookup") && ms_since(t0) < 1000,
	   "relay answers while a lookup blocks a worker (%llu ms)",
	   (unsigned long long)ms_since(t0));
	int other = dial(p, SB_A, UP_OK, echo.port);

	t0 = util_now_ns();
	ok(echo_ok(other, http_get("allowed.test")) && ms_since(t0) < 1000,
	   "a new named connection resolves on the other worker meanwhile (%llu ms)",
	   (unsigned long long)ms_since(t0));
	char b[256];
	int e;

	ok(read_for(slow, b, strlen(http_get("slow.test")), 3000, &e) ==
		   (ssize_t)strlen(http_get("slow.test")),
	   "the slow name connects once resolved (%llu ms)", (unsigned long long)ms_since(t0));
	close(other);
	close(slow);
	close(fast);
}

/* A sandbox with many slow lookups queues behind its own, not in front of everybody's. */
static void test_dns_fairness(struct net_proxy *p)
{
	int slow[10], fd;
	uint64_t t0;

	set_policy(&policy_b, "{\"allow\":[\"allowed.test\"]}");
	for (int i = 0; i < 10; i++) {
		slow[i] = dial(p, SB_A, "198.51.100.1", echo.port);
		send_str(slow[i], http_get("slow.test"));
	}
	usleep(200 * 1000);
	t0 = util_now_ns();
	fd = dial(p, SB_B, "198.51.100.1", echo.port);
	ok(echo_ok(fd, http_get("allowed.test")) && ms_since(t0) < 1000,
	   "B's lookup is not queued behind A's 10 slow ones (%llu ms)",
	   (unsigned long long)ms_since(t0));
	close(fd);
	for (int i = 0; i < 10; i++)
		close(slow[i]);
	set_policy(&policy_b, "{\"default\":\"allow\"}");
}

static void test_live_policy(struct net_proxy *p)
{
	int held = dial(p, SB_A, "198.51.100.1", echo.port);

	ok(echo_ok(held, http_get("allowed.test")), "connection open under the old policy");
	set_policy(&policy_a, "{\"default\":\"deny\"}");
	ok(echo_ok(held, "still here"), "an open connection keeps the policy it was judged under");
	int fd = dial(p, SB_A, "198.51.100.1", echo.port);

	send_str(fd, http_get("allowed.test"));
	ok(was_reset(fd), "a new connection is judged under the new policy: RST");
	close(fd);
	close(held);
}

static void test_limits(void)
{
	struct net_proxy *p = proxy_with(3, 0, 0);
	int fds[3], fd;
	bool all = true;
	uint64_t denied0 = atomic_load(&counters_a.denied);

	for (int i = 0; i < 3; i++) {
		fds[i] = dial(p, SB_A, UP_OK, echo.port);
		all = all && echo_ok(fds[i], "\x01held");
	}
	ok(all, "3 connections open (the limit)");
	fd = dial(p, SB_A, UP_OK, echo.port);
	send_str(fd, "\x01");
	ok(was_reset(fd), "a 4th connection of the same sandbox: RST");
	close(fd);
	ok(atomic_load(&counters_a.denied) == denied0 + 1, "sandbox counter: one denied");
	{
		json_t *j = net_denials_to_json(&counters_a.denials);
		json_t *e = json_array_get(json_object_get(j, "recent"), 0);

		ok(json_integer_value(json_object_get(j, "total")) == (json_int_t)denied0 + 1 &&
			   !strcmp(json_string_value(json_object_get(e, "reason")),
				   "sandbox_connection_limit") &&
			   json_integer_value(json_object_get(e, "port")) == echo.port,
		   "the denial is in the sandbox's recent denials (reason "
		   "sandbox_connection_limit, its port)");
		json_decref(j);
	}
	fd = dial(p, SB_B, UP_OK, echo.port);
	ok(echo_ok(fd, http_get("allowed.test")), "another sandbox is not affected by A's limit");
	close(fd);
	close(fds[0]);
	usleep(100 * 1000);
	fd = dial(p, SB_A, UP_OK, echo.port);
	ok(echo_ok(fd, "\x01again"), "after one closes, a new one is admitted");
	close(fd);
	close(fds[1]);
	close(fds[2]);
	net_proxy_stop(p);
}

/* Downloads `bytes` from the source server through p (or directly if p is NULL). */
static double download(struct net_proxy *p, const char *src, long long bytes, int *ok_out)
{
	static char buf[1 << 16];
	char req[128];
	long long got = 0;
	uint64_t t0 = util_now_ns();
	int fd;

	if (p) {
		fd = dial(p, src, "198.51.100.1", source.port);
	} else {
		struct sockaddr_in sa;

		sockaddr_of(UP_OK, source.port, &sa);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	snprintf(req, sizeof(req), "GET /%lld HTTP/1.1\r\nHost: allowed.test\r\n\r\n", bytes);
	send_str(fd, req);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	*ok_out = got == bytes;
	return (double)(util_now_ns() - t0) / 1e9;
}

static void test_bandwidth(void)
{
	struct net_proxy *p = proxy_with(0, 2 << 20, 0); /* 2 MiB/s per direction */
	int okd;
	double s = download(p, SB_A, 4 << 20, &okd);

	/* 4 MiB at 2 MiB/s with a 256 KiB burst: at least ~1.87 s. */
	ok(okd && s >= 1.6 && s < 8, "4 MiB at 2 MiB/s took %.2f s", s);
	net_proxy_stop(p);
}

/* Not a timed assertion: the numbers are printed for the report (the machine is shared). Best of
 * three alternating runs each, so a neighbour's burst does not decide the ratio. */
static void test_throughput(struct net_proxy *p)
{
	long long bytes = 100ll << 20;
	double direct = 1e9, proxied = 1e9;
	int all = 1;

	for (int i = 0; i < 3; i++) {
		int ok1, ok2;
		double d = download(NULL, NULL, bytes, &ok1);
		double x = download(p, SB_A, bytes, &ok2);

		all = all && ok1 && ok2;
		direct = d < direct ? d : direct;
		proxied = x < proxied ? x : proxied;
	}
	ok(all, "100 MiB downloads, directly and through the proxy, arrive whole");

	/* Added latency: connect, a request naming allowed.test (looked up by the stub, policy
	 * checked) and the first byte back; median of 21. */
	uint64_t lat[2][21];

	for (int i = 0; i < 21; i++) {
		for (int via = 0; via < 2; via++) {
			int okd;
			uint64_t t0 = util_now_ns();

			download(via ? p : NULL, SB_A, 1, &okd);
			lat[via][i] = okd ? util_now_ns() - t0 : UINT64_MAX;
		}
	}
	for (int via = 0; via < 2; via++)
		for (int i = 1; i < 21; i++)
			for (int k = i; k > 0 && lat[via][k - 1] > lat[via][k]; k--) {
				uint64_t t = lat[via][k];

				lat[via][k] = lat[via][k - 1];
				lat[via][k - 1] = t;
			}
	printf("# latency (connect + request + first byte, median of 21): direct %llu us, proxied "
	       "%llu us\n",
	       (unsigned long long)lat[0][10] / 1000, (unsigned long long)lat[1][10] / 1000);
	printf("# throughput (best of 3, 100 MiB on loopback): direct %.0f MiB/s, proxied %.0f "
	       "MiB/s, proxied/direct %.2f\n",
	       100 / direct, 100 / proxied, direct / proxied);
}

static void test_idle(void)
{
	struct net_proxy *p = proxy_with(0, 0, 300);
	int fd = dial(p, SB_A, UP_OK, echo.port);
	char b[8];
	int e;

	ok(echo_ok(fd, "\x01idle"), "connection up");
	uint64_t t0 = util_now_ns();
	ssize_t n = read_for(fd, b, sizeof(b), 3000, &e);

	ok(n == 0 && e != ETIMEDOUT && ms_since(t0) >= 250,
	   "idle connection closed after the idle timeout (%llu ms)",
	   (unsigned long long)ms_since(t0));
	close(fd);
	net_proxy_stop(p);
}

static void test_partial_head(struct net_proxy *p)
{
	uint8_t ch[600];
	size_t chl = client_hello("allowed.test", ch);
	int before = atomic_load(&echo.accepted), fd, e;
	uint64_t t0 = util_now_ns();
	char b[64];

	/* A ClientHello that stops short: after head_timeout_ms it is raw TCP to where it was
	 * dialled, which policy A does not allow. */
	fd = dial(p, SB_A, "198.51.100.1", echo.port);
	send(fd, ch, chl / 2, 0);
	ok(was_reset(fd) && ms_since(t0) >= 900 && atomic_load(&echo.accepted) == before,
	   "a truncated ClientHello is judged as raw TCP after the head timeout: RST (%llu ms)",
	   (unsigned long long)ms_since(t0));
	close(fd);

	/* A truncated HTTP head to a CIDR-allowed destination: relayed as raw bytes. */
	fd = dial(p, SB_A, UP_OK, echo.port);
	send_str(fd, "GET / HTTP/1.1\r\nHo");
	ok(read_for(fd, b, 18, 4000, &e) == 18 && !memcmp(b, "GET / HTTP/1.1\r\nHo", 18),
	   "a truncated HTTP head to a CIDR-allowed address is relayed after the head timeout");
	close(fd);
	(void)chl;
}

struct flood {
	struct net_proxy *p; /* target */
	int fds[8];	     /* A's downloads */
	atomic_bool stop;    /* end the flood */
	long long bytes;     /* read in all */
	int denied;	     /* extra connections refused */
	int admitted;	     /* extra connections NOT refused (must stay 0) */
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	static char buf[1 << 16];
	char req[128];

	snprintf(req, sizeof(req), "GET /%lld HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 1ll << 40);
	for (int i = 0; i < 8; i++) {
		f->fds[i] = dial(f->p, SB_A, "198.51.100.1", source.port);
		send(f->fds[i], req, strlen(req), MSG_NOSIGNAL);
		fcntl(f->fds[i], F_SETFL, O_NONBLOCK);
	}
	while (!atomic_load(&f->stop)) {
		struct pollfd pf[8];

		for (int i = 0; i < 8; i++)
			pf[i] = (struct pollfd){.fd = f->fds[i], .events = POLLIN};
		poll(pf, 8, 100);
		for (int i = 0; i < 8; i++) {
			ssize_t n = read(f->fds[i], buf, sizeof(buf));

			if (n > 0)
				f->bytes += n;
		}
		/* and a stream of connections over the limit */
		int x = dial(f->p, SB_A, UP_OK, echo.port);
		struct timeval tv = {.tv_sec = 2};
		char c;

		/* Bounded: if the limit failed to hold, the test reports it instead of hanging. */
		setsockopt(x, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

		if (recv(x, &c, 1, 0) < 0 && errno == ECONNRESET)
			f->denied++;
		else
			f->admitted++;
		close(x);
	}
	for (int i = 0; i < 8; i++)
		close(f->fds[i]);
	return NULL;
}

/* Sandbox A saturates its connection limit and the link; B's round trips still go through. */
static void test_flood(void)
{
	struct net_proxy *p = proxy_with(8, 0, 0);
	struct flood f = {.p = p};
	pthread_t t;
	uint64_t ms[20], worst = 0;
	int slow = 0;
	bool all = true;

	pthread_create(&t, NULL, flood_main, &f);
	usleep(300 * 1000);
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = util_now_ns();
		int fd = dial(p, SB_B, UP_OK, echo.port);

		all = all && echo_ok(fd, http_get("allowed.test"));
		close(fd);
		ms[i] = ms_since(t0);
		worst = ms[i] > worst ? ms[i] : worst;
		slow += ms[i] >= 1000;
	}
	atomic_store(&f.stop, true);
	pthread_join(t, NULL);
	/* At most one slow outlier: a lost SYN on this loaded host costs a 1-3 s retransmit in
	 * the kernel, before the proxy sees anything. Starvation would slow every one. */
	ok(all && slow <= 1,
	   "B: 20 connections with round trips during A's flood, %d over 1 s, slowest %llu ms (A "
	   "read %lld MiB, %d over-limit connections reset)",
	   slow, (unsigned long long)worst, f.bytes >> 20, f.denied);
	ok(f.bytes > (1 << 20) && f.denied > 0 && f.admitted == 0,
	   "the flood was real (A moved data and hit its limit; %d over the limit admitted)",
	   f.admitted);
	net_proxy_stop(p);
}

/* Runs a shell command; true if it exited 0. */
static bool sh(const char *cmd)
{
	int st = system(cmd);

	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/*
 * The production path: a real nftables `redirect` and SO_ORIGINAL_DST (original_dst NULL), in a
 * private network namespace so nothing on the host changes. Connections from 127.0.0.3 to port
 * P are redirected to the proxy; the proxy's own connections (from 127.0.0.1) are not.
 */
static void test_redirect(void)
{
	static struct server up, forbidden; /* their threads outlive this function */
	struct net_proxy *p;
	struct sockaddr_in sa;
	char nft[1024];
	int fd, before;

	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0 || !sh("ip link set lo up")) {
		printf("ok %d # SKIP redirect test: needs root and a network namespace\n", ++tap_n);
		return;
	}
	/* Threads started from here on live in the new namespace. */
	server_start(&up, UP_OK, ECHO);
	server_start(&forbidden, UP_DENIED, COUNT_ONLY);
	struct net_proxy_config cfg = {
		.listen_fd = -1,
		.opens = &opens,
		.lookup = lookup,
		.put_counters = put_counters,
		.resolve = resolve,
		.silent_ms = 200,
	};
	struct isola_err *err = NULL;

	sockaddr_of("127.0.0.1", 0, (struct sockaddr_in *)&cfg.listen_addr);
	if (net_proxy_start(&cfg, &p, &err) < 0)
		abort();
	snprintf(nft, sizeof(nft),
		 "nft -f - <<'EOF'\n"
		 "table ip isola_test {\n"
		 "  chain out {\n"
		 "    type nat hook output priority -100; policy accept;\n"
		 "    ip saddr %s tcp dport { %u, %u } redirect to :%u\n"
		 "  }\n"
		 "}\n"
		 "EOF",
		 SB_A, up.port, forbidden.port, net_proxy_port(p));
	if (!sh(nft)) {
		printf("ok %d # SKIP redirect test: nft could not install a table\n", ++tap_n);
		net_proxy_stop(p);
		return;
	}
	/* Raw TCP to 127.0.0.2:P (CIDR-allowed): the proxy learns the destination itself. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_of(SB_A, 0, &sa);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	sockaddr_of(UP_OK, up.port, &sa);
	before = atomic_load(&up.accepted);
	ok(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && echo_ok(fd, "\x01redirected") &&
		   atomic_load(&up.accepted) == before + 1,
	   "nftables redirect + SO_ORIGINAL_DST: raw TCP reaches 127.0.0.2:%u through the proxy",
	   up.port);
	close(fd);
	struct net_proxy_stats st;

	net_proxy_get_stats(p, &st);
	ok(st.allowed == 1, "it went through the proxy (allowed=%llu)",
	   (unsigned long long)st.allowed);

	/* 127.0.0.1 (always denied): reset, the server there sees nothing. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_of(SB_A, 0, &sa);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	sockaddr_of(UP_DENIED, forbidden.port, &sa);
	connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	send_str(fd, http_get("allowed.test.example"));
	ok(was_reset(fd) && atomic_load(&forbidden.accepted) == 0,
	   "redirected connection to 127.0.0.1: RST, nothing reached the server");
	close(fd);
	net_proxy_stop(p);
}

static void test_log_line(struct net_proxy *p)
{
	char path[] = "/tmp/test_proxy_log.XXXXXX";
	int lf = mkstemp(path), saved = dup(2), fd;
	char buf[8192] = "";

	fflush(stderr);
	dup2(lf, 2);
	fd = dial(p, SB_A, "198.51.100.1", echo.port);
	send_str(fd, http_get("denied.test"));
	was_reset(fd);
	close(fd);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(lf, buf, sizeof(buf) - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	close(lf);
	unlink(path);
	char want[160];

	snprintf(want, sizeof(want),
		 "egress deny: sandbox=sbA name=denied.test addr=198.51.100.1 port=%u "
		 "reason=deny_default",
		 echo.port);
	ok(strstr(buf, want) != NULL, "decision logged: %s", want);
}

int main(void)
{
	struct isola_err *err = NULL;

	signal(SIGPIPE, SIG_IGN);
	net_denials_init(&counters_a.denials);
	net_denials_init(&counters_b.denials);
	if (net_opens_parse("127.0.0.2/32,::1/128", &opens, &err) < 0)
		abort();
	server_start(&echo, UP_OK, ECHO);
	server_start(&denied_srv, UP_DENIED, COUNT_ONLY);
	server_start(&source, UP_OK, SOURCE);
	server_start(&banner, UP_OK, BANNER);
	policy_a = mkpolicy(
		"{\"allow\":[\"allowed.test\", \"v6.test\", \"*.wild.test\", \"rebind.test\","
		"\"mixed.test\", \"slow.test\", \"denied-cidr.test\","
		"\"127.0.0.2/32\"],"
		"\"deny\":[\"blocked.allowed.test\", \"203.0.113.0/24\"]}");
	policy_b = mkpolicy("{\"default\":\"allow\"}");

	struct net_proxy *p = proxy_with(0, 0, 0);

	test_names(p);
	test_rebinding(p);
	test_ipv6_upstream(p);
	test_addresses(p);
	test_relay(p);
	test_dns_does_not_block(p);
	test_partial_head(p);
	test_dns_fairness(p);
	test_log_line(p);
	test_throughput(p);
	test_live_policy(p);
	net_proxy_stop(p);

	set_policy(&policy_a, "{\"allow\":[\"127.0.0.2/32\", \"allowed.test\"]}");
	test_limits();
	test_flood();
	test_bandwidth();
	test_idle();
	test_redirect(); /* last: moves the process into a new network namespace */

	ok(atomic_load(&counter_gets) == atomic_load(&counter_puts) &&
		   atomic_load(&counter_gets) > 0,
	   "every counters reference taken was put back (%d)", atomic_load(&counter_gets));
	ok(atomic_load(&counters_a.active) == 0 && atomic_load(&counters_b.active) == 0,
	   "no connection left active in the counters");
	ok(atomic_load(&counters_a.bytes_out) > (4u << 20) &&
		   atomic_load(&counters_a.bytes_in) > (100u << 20) &&
		   atomic_load(&counters_a.connections) > 10,
	   "sandbox counters: %llu out, %llu in, %llu connections, %llu denied",
	   (unsigned long long)atomic_load(&counters_a.bytes_out),
	   (unsigned long long)atomic_load(&counters_a.bytes_in),
	   (unsigned long long)atomic_load(&counters_a.connections),
	   (unsigned long long)atomic_load(&counters_a.denied));
	net_policy_free(policy_a);
	net_policy_free(policy_b);
	net_opens_fini(&opens);
	return tap_done();
}
