/* SPDX-License-Identifier: Apache-2.0 */
/* test_sni: TLS ClientHello SNI and HTTP Host extraction, split reads, malformed and hostile heads. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "isolad/net/sni.h"

extern char **environ;

struct buf {
	uint8_t b[70000];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static void put8(struct buf *b, unsigned v)
{
	b->b[b->n++] = (uint8_t)v;
}
static void put16(struct buf *b, unsigned v)
{
	put8(b, v >> 8);
	put8(b, v);
}
static void put24(struct buf *b, unsigned v)
{
	put8(b, v >> 16);
	put16(b, v & 0xffff);
}

/* A ClientHello handshake message with the given SNI names (NULL-terminated list of host_name
 * entries inside one extension; `nexts` copies of the extension), preceded by `pad` bytes of an
 * unknown extension. */
static void client_hello(struct buf *hs, const char *const *names, int nexts, size_t pad)
{
	struct buf body = {.n = 0}, exts = {.n = 0};

	put16(&body, 0x0303);
	for (int i = 0; i < 32; i++)
		put8(&body, i);
	put8(&body, 0);	 /* session id */
	put16(&body, 2); /* cipher suites */
	put16(&body, 0x1301);
	put8(&body, 1); /* compression */
	put8(&body, 0);
	if (pad) {
		put16(&exts, 0xfe0d); /* an extension we skip */
		put16(&exts, (unsigned)pad);
		memset(exts.b + exts.n, 'p', pad);
		exts.n += pad;
	}
	for (int e = 0; e < nexts; e++) {
		struct buf list = {.n = 0};

		for (int i = 0; names && names[i]; i++) {
			put8(&list, 0);
			put16(&list, (unsigned)strlen(names[i]));
			put(&list, names[i], strlen(names[i]));
		}
		put16(&exts, 0);
		put16(&exts, (unsigned)list.n + 2);
		put16(&exts, (unsigned)list.n);
		put(&exts, list.b, list.n);
	}
	put16(&body, (unsigned)exts.n);
	put(&body, exts.b, exts.n);
	hs->n = 0;
	put8(hs, 1);
	put24(hs, (unsigned)body.n);
	put(hs, body.b, body.n);
}

/* Wraps handshake bytes in records of at most `rec` bytes. */
static void records(struct buf *out, const struct buf *hs, size_t rec)
{
	out->n = 0;
	for (size_t off = 0; off < hs->n; off += rec) {
		size_t n = hs->n - off < rec ? hs->n - off : rec;

		put8(out, 0x16);
		put16(out, 0x0301);
		put16(out, (unsigned)n);
		put(out, hs->b + off, n);
	}
}

/* Feeds the buffer one more byte at a time; every proper prefix must say "need more". */
static int parse_incrementally(const struct buf *b, struct net_sni_head *h, size_t *again)
{
	int r = -EAGAIN;

	*again = 0;
	for (size_t n = 1; n <= b->n; n++) {
		r = net_sni_parse(b->b, n, h);
		if (r != -EAGAIN)
			return n == b->n ? r : -EPROTO;
		(*again)++;
	}
	return r;
}

static void test_tls(void)
{
	struct buf hs, rec;
	struct net_sni_head h;
	size_t again;
	const char *one[] = {"api.example.com", NULL};

	client_hello(&hs, one, 1, 0);
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == 0 && h.kind == NET_SNI_TLS &&
		   !strcmp(h.name, "api.example.com"),
	   "SNI from one record: %s", h.name);
	ok(parse_incrementally(&rec, &h, &again) == 0 && again == rec.n - 1 &&
		   !strcmp(h.name, "api.example.com"),
	   "byte-by-byte reads: need more until the last byte");
	records(&rec, &hs, 7);
	ok(net_sni_parse(rec.b, rec.n, &h) == 0 && !strcmp(h.name, "api.example.com"),
	   "ClientHello split over %zu records of 7 bytes", (hs.n + 6) / 7);
	ok(parse_incrementally(&rec, &h, &again) == 0, "split records, byte-by-byte reads");

	client_hello(&hs, one, 1, 9000);
	records(&rec, &hs, 4000);
	ok(net_sni_parse(rec.b, rec.n, &h) == 0 && !strcmp(h.name, "api.example.com"),
	   "large ClientHello over 3 records, SNI last");

	client_hello(&hs, NULL, 0, 0);
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == 0 && h.kind == NET_SNI_TLS && !h.name[0],
	   "ClientHello without SNI: TLS, no name");

	const char *two[] = {"a.com", "b.com", NULL};

	client_hello(&hs, two, 1, 0);
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL && strstr(h.error, "several host_name"),
	   "two host_name entries rejected");
	client_hello(&hs, one, 2, 0);
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL && strstr(h.error, "several server_name"),
	   "two server_name extensions rejected");
	const char *nul[] = {"a\x01.com", NULL};

	client_hello(&hs, nul, 1, 0);
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL, "control byte in SNI rejected");

	/* Malformed lengths. */
	client_hello(&hs, one, 1, 0);
	hs.b[1] = 0xff; /* handshake length 16 MiB */
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL && strstr(h.error, "longer than 16 KiB"),
	   "huge handshake length rejected at once (%s)", h.error);
	client_hello(&hs, one, 1, 0);
	hs.b[hs.n - strlen("api.example.com") - 2] ^= 0x40; /* entry length past its extension */
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL, "entry length past the extension: %s",
	   h.error);
	client_hello(&hs, one, 1, 0);
	hs.b[4 + 2 + 32] = 33; /* session id length 33 */
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL, "session id > 32 rejected: %s", h.error);
	client_hello(&hs, one, 1, 0);
	hs.n -= 3; /* handshake shorter than its extensions say */
	hs.b[3] = (uint8_t)(hs.b[3] - 3);
	records(&rec, &hs, 16384);
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL, "extensions past the ClientHello: %s",
	   h.error);
	uint8_t rec0[] = {0x16, 3, 1, 0, 0};

	ok(net_sni_parse(rec0, sizeof(rec0), &h) == -EINVAL, "zero-length record rejected");
	uint8_t big[] = {0x16, 3, 1, 0x48, 0x01};

	ok(net_sni_parse(big, sizeof(big), &h) == -EINVAL, "record over 2^14 rejected");
	client_hello(&hs, one, 1, 0);
	records(&rec, &hs, 20);
	rec.b[25] = 0x17; /* second record is application data */
	ok(net_sni_parse(rec.b, rec.n, &h) == -EINVAL && strstr(h.error, "non-handshake"),
	   "non-handshake record mid-ClientHello rejected");
	uint8_t sh[] = {0x16, 3, 3, 0, 4, 2, 0, 0, 0};

	ok(net_sni_parse(sh, sizeof(sh), &h) == -EINVAL, "ServerHello is not a ClientHello");

	/* A never-ending stream of tiny records is cut at the bound. */
	client_hello(&hs, one, 1, 9000);
	records(&rec, &hs, 1);
	ok(net_sni_parse(rec.b, NET_SNI_MAX - 1, &h) == -EAGAIN &&
		   net_sni_parse(rec.b, NET_SNI_MAX, &h) == -EINVAL,
	   "1-byte records: need more below 16 KiB, rejected at it");

	uint8_t notls[] = {0x16, 0x41, 0x42};

	ok(net_sni_parse(notls, sizeof(notls), &h) == 0 && h.kind == NET_SNI_RAW,
	   "0x16 without a TLS version is raw");
}

static int http(const char *s, struct net_sni_head *h)
{
	return net_sni_parse(s, strlen(s), h);
}

static void test_http(void)
{
	struct net_sni_head h;
	struct buf b;
	size_t again;
	const char *req = "GET /x HTTP/1.1\r\nUser-Agent: t\r\nhOsT:  Files.Example.ORG:8080 \r\n"
			  "Accept: */*\r\n\r\nBODY";

	ok(http(req, &h) == 0 && h.kind == NET_SNI_HTTP && !strcmp(h.name, "Files.Example.ORG"),
	   "Host with port, case and spaces: %s", h.name);
	b.n = 0;
	put(&b, req, strlen(req) - 4);
	ok(parse_incrementally(&b, &h, &again) == 0 && again == b.n - 1,
	   "HTTP head byte by byte: need more until the blank line");
	ok(http("GET http://abs.example.com:81/p?q HTTP/1.1\r\nHost: abs.example.com\r\n\r\n",
		&h) == 0 &&
		   !strcmp(h.name, "abs.example.com"),
	   "absolute-form URI agreeing with Host");
	ok(http("GET http://abs.example.com/ HTTP/1.0\r\n\r\n", &h) == 0 &&
		   !strcmp(h.name, "abs.example.com"),
	   "absolute-form URI without Host");
	ok(http("GET http://evil.com/ HTTP/1.1\r\nHost: good.com\r\n\r\n", &h) == -EINVAL &&
		   strstr(h.error, "conflicts"),
	   "absolute-form URI conflicting with Host rejected");
	ok(http("GET / HTTP/1.1\r\nHost: a.com\r\nHost: b.com\r\n\r\n", &h) == -EINVAL &&
		   strstr(h.error, "several Host"),
	   "two Host headers rejected");
	ok(http("GET / HTTP/1.1\r\nHost: a.com\r\nhost: a.com\r\n\r\n", &h) == -EINVAL,
	   "two identical Host headers rejected too");
	ok(http("GET / HTTP/1.1\r\nHost: a.com, b.com\r\n\r\n", &h) == -EINVAL,
	   "Host list rejected");
	ok(http("GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n", &h) == 0 &&
		   !strcmp(h.name, "2001:db8::1"),
	   "bracketed IPv6 Host: %s", h.name);
	ok(http("GET / HTTP/1.1\nHost: lf.example\n\n", &h) == 0 && !strcmp(h.name, "lf.example"),
	   "bare LF line endings");
	ok(http("GET / HTTP/1.0\r\n\r\n", &h) == 0 && h.kind == NET_SNI_HTTP && !h.name[0],
	   "HTTP/1.0 without Host: no name");
	ok(http("GET / HTTP/1.1\r\nX: y\r\n Host: folded.com\r\n\r\n", &h) == -EINVAL,
	   "obs-fold rejected");
	ok(http("GET / HTTP/1.1\r\nHost : a.com\r\n\r\n", &h) == -EINVAL,
	   "space before colon rejected");
	ok(http("GET / HTTP/1.1\r\nX: a\rHost: b.com\r\n\r\n", &h) == -EINVAL, "bare CR rejected");
	ok(net_sni_parse("GET / HTTP/1.1\r\nHost: a\0.com\r\n\r\n", 32, &h) == -EINVAL,
	   "NUL in head rejected");
	ok(http("GET / HTTP/1.1\r\nHost: u@a.com\r\n\r\n", &h) == -EINVAL, "userinfo in Host");
	ok(http("GET http://u@a.com/ HTTP/1.1\r\n\r\n", &h) == -EINVAL, "userinfo in target");
	ok(http("GET / FTP/1.0\r\n\r\n", &h) == -EINVAL, "not HTTP/1.x rejected");
	ok(http("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &h) == 0 && h.kind == NET_SNI_RAW,
	   "h2c preface is raw");
	ok(http("CONNECT evil.com:443 HTTP/1.1\r\nHost: proxy.corp\r\n\r\n", &h) == 0 &&
		   !strcmp(h.name, "proxy.corp"),
	   "CONNECT routes by Host, not by its target");

	/* Over-long heads. */
	static char huge[NET_SNI_MAX + 100];

	memset(huge, 'a', sizeof(huge));
	memcpy(huge, "GET / HTTP/1.1\r\nX: ", 19);
	ok(net_sni_parse(huge, NET_SNI_MAX - 1, &h) == -EAGAIN &&
		   net_sni_parse(huge, NET_SNI_MAX, &h) == -EINVAL,
	   "HTTP head without end: need more below 16 KiB, rejected at it");
	memcpy(huge + NET_SNI_MAX + 10, "\r\n\r\n", 4);
	ok(net_sni_parse(huge, sizeof(huge), &h) == -EINVAL, "head ending past 16 KiB rejected");
}

static void test_raw(void)
{
	struct net_sni_head h;

	ok(net_sni_parse("", 0, &h) == -EAGAIN, "nothing yet: need more");
	ok(net_sni_parse("SSH-2.0-OpenSSH_9.2\r\n", 21, &h) == 0 && h.kind == NET_SNI_RAW,
	   "SSH banner is raw");
	ok(net_sni_parse("GE", 2, &h) == -EAGAIN, "method prefix: need more");
	ok(net_sni_parse("\x00\x01\x02", 3, &h) == 0 && h.kind == NET_SNI_RAW, "binary is raw");
	ok(net_sni_parse("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26, &h) == 0 && h.kind == NET_SNI_RAW,
	   "long uppercase run without space is raw");
	ok(net_sni_parse("get / HTTP/1.1\r\n\r\n", 18, &h) == 0 && h.kind == NET_SNI_RAW,
	   "lowercase method is not HTTP");
}

/* Runs argv with stdin closed, as a real client of a listener on 127.0.0.1:port; returns what it
 * sent first (up to the first pause). */
static ssize_t capture(char *const argv[], int lfd, uint8_t *out, size_t cap)
{
	pid_t pid;
	posix_spawn_file_actions_t fa;
	ssize_t total = 0;
	int c;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0)
		return -1;
	posix_spawn_file_actions_destroy(&fa);
	c = accept(lfd, NULL, NULL);
	while (c >= 0 && (size_t)total < cap) {
		struct pollfd p = {.fd = c, .events = POLLIN};

		if (poll(&p, 1, total ? 300 : 5000) <= 0)
			break;
		ssize_t n = read(c, out + total, cap - (size_t)total);

		if (n <= 0)
			break;
		total += n;
	}
	if (c >= 0)
		close(c);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return total;
}

static void test_real_clients(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	static uint8_t got[NET_SNI_MAX];
	char port[8], url[128], resolve[128];
	struct net_sni_head h;
	ssize_t n;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		ok(0, "listener for real clients");
		return;
	}
	snprintf(port, sizeof(port), "%u", ntohs(sa.sin_port));
	char connect_to[64];

	snprintf(connect_to, sizeof(connect_to), "127.0.0.1:%s", port);
	char *openssl[] = {"openssl",	  "s_client",	       "-connect", connect_to,
			   "-servername", "real.openssl.test", NULL};

	n = capture(openssl, lfd, got, sizeof(got));
	ok(n > 0 && net_sni_parse(got, (size_t)n, &h) == 0 && h.kind == NET_SNI_TLS &&
		   !strcmp(h.name, "real.openssl.test"),
	   "openssl s_client's ClientHello (%zd bytes): %s", n, h.name);

	snprintf(url, sizeof(url), "https://real.curl.test:%s/", port);
	snprintf(resolve, sizeof(resolve), "real.curl.test:%s:127.0.0.1", port);
	char *curl_tls[] = {"curl", "-sk", "--max-time", "3", "--resolve", resolve, url, NULL};

	n = capture(curl_tls, lfd, got, sizeof(got));
	ok(n > 0 && net_sni_parse(got, (size_t)n, &h) == 0 && !strcmp(h.name, "real.curl.test"),
	   "curl's ClientHello (%zd bytes): %s", n, h.name);
	snprintf(url, sizeof(url), "http://real.curl.test:%s/path", port);
	char *curl_http[] = {"curl", "-s", "--max-time", "3", "--resolve", resolve, url, NULL};

	n = capture(curl_http, lfd, got, sizeof(got));
	ok(n > 0 && net_sni_parse(got, (size_t)n, &h) == 0 && h.kind == NET_SNI_HTTP &&
		   !strcmp(h.name, "real.curl.test"),
	   "curl's HTTP request head: %s", h.name);
	close(lfd);
}

int main(void)
{
	test_tls();
	test_http();
	test_raw();
	test_real_clients();
	return tap_done();
}
