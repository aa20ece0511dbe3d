/* SPDX-License-Identifier: Apache-2.0 */
/* test_policy: egress policy parsing, name/address decisions and the always-denied ranges. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "isolad/net/hostaddr.h"
#include "isolad/net/policy.h"

static struct net_policy *parse(const char *text, char *errbuf, size_t errlen)
{
	struct isola_err *err = NULL;
	struct net_policy *p = NULL;
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	if (!j) {
		snprintf(errbuf, errlen, "bad test json: %s", jerr.text);
		return NULL;
	}
	if (net_policy_parse(j, &p, &err) < 0) {
		snprintf(errbuf, errlen, "%s", err->message);
		isola_err_free(err);
	} else {
		errbuf[0] = '\0';
	}
	json_decref(j);
	return p;
}

static bool name_ok(const struct net_policy *p, const char *name, uint16_t port)
{
	return net_policy_check_name(p, name, port, NULL);
}

static struct net_addr A(const char *s) {
	struct net_addr a;

	if (net_addr_parse(s, &a) < 0)
		memset(&a, 0xee, sizeof(a));
	return a;
}

static bool
addr_ok(const struct net_policy *p, const char *s, uint16_t port)
{
	struct net_addr a = A(s);

	return net_policy_check_addr(p, &a, port, NULL);
}

static bool always(const char *s, const struct net_opens *o)
{
	struct net_addr a = A(s);

	return net_addr_always_denied(&a, o);
}

static void test_errors(void)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
		{"[]", "must be a JSON object"},
		{"{\"default\":\"maybe\"}", "default must be"},
		{"{\"allow\":{}}", "`allow` must be an array"},
		{"{\"allow\":[\"ok.com\", {\"domain\":\"a..b\"}]}", "allow[1]: domain `a..b`"},
		{"{\"deny\":[{\"cidr\":\"10.0.0.1/8\"}]}", "deny[0]: cidr `10.0.0.1/8`: host bits"},
		{"{\"allow\":[{\"cidr\":\"10.0.0.0/33\"}]}", "allow[0]: cidr"},
		{"{\"allow\":[{\"cidr\":\"1.2.3.0/24\",\"domain\":\"x.com\"}]}", "exactly one"},
		{"{\"allow\":[{\"domain\":\"x.com\",\"ports\":[0]}]}", "ports[0]: 0 is not a port"},
		{"{\"allow\":[{\"domain\":\"x.com\",\"ports\":[\"90-80\"]}]}", "ports[0]: `90-80`"},
		{"{\"allow\":[{\"domain\":\"x.com\",\"ports\":[]}]}", "ports is empty"},
		{"{\"allow\":[{\"domain\":\"x.com\",\"port\":1}]}", "unknown key `port`"},
		{"{\"allow\":[{\"domain\":\"*x.com\"}]}", "whole first label"},
		{"{\"allow\":[{\"domain\":\"*.com\"}]}", "too broad"},
		{"{\"allow\":[{\"domain\":\"b\\u00fccher.de\"}]}", "not a valid host name"},
		{"{\"allow\":[{\"domain\":\"1.2.3.4\"}]}", "not a valid host name"},
		{"{\"allow\":[\"x.com:99999\"]}", "allow[0]: ports[0]"},
		{"{\"allow\":[42]}", "allow[0]: a rule is"},
		{"{\"allow\":[\"-x.com\"]}", "allow[0]: domain `-x.com`"},
		{"{\"extra\":1}", "unknown key `extra`"},
	};
	char msg[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct net_policy *p = parse(cases[i].json, msg, sizeof(msg));

		ok(!p && strstr(msg, cases[i].want), "rejects %s (%s)", cases[i].json, msg);
		net_policy_free(p);
	}
}

static void test_names(void)
{
	char msg[512];
	struct net_policy *p = parse("{\"allow\":[{\"domain\":\"example.com\"},"
				     "{\"domain\":\"*.wild.org\"},"
				     "{\"domain\":\"api.ports.net\",\"ports\":[443,\"8000-8100\"]},"
				     "\"plain.io\", \"*.plainwild.io\", \"p.io:8443\"],"
				     "\"deny\":[\"evil.wild.org\"]}",
				     msg, sizeof(msg));
	enum net_reason r;

	ok(p != NULL, "parses a mixed policy (%s)", msg);
	if (!p)
		return;
	ok(name_ok(p, "example.com", 443), "exact name allowed");
	ok(name_ok(p, "EXAMPLE.Com.", 80), "case and trailing dot ignored");
	ok(!name_ok(p, "a.example.com", 443), "exact rule does not allow subdomains");
	ok(!name_ok(p, "notexample.com", 443), "notexample.com is not example.com");
	ok(name_ok(p, "a.wild.org", 443), "wildcard matches one label");
	ok(name_ok(p, "a.b.wild.org", 443), "wildcard matches deeper labels");
	ok(!name_ok(p, "wild.org", 443), "wildcard does not match the apex");
	ok(!name_ok(p, "notwild.org", 443), "wildcard does not match notwild.org");
	ok(!name_ok(p, "xwild.org", 443), "wildcard does not match xwild.org");
	ok(!net_policy_check_name(p, "evil.wild.org", 443, &r) && r == NET_REASON_DENY_RULE,
	   "deny beats a matching wildcard allow");
	ok(!net_policy_check_name(p, "other.com", 443, &r) && r == NET_REASON_DENY_DEFAULT,
	   "unlisted name falls to default deny");
	ok(name_ok(p, "api.ports.net", 443) && name_ok(p, "api.ports.net", 8050) &&
		   name_ok(p, "api.ports.net", 8100),
	   "port list and range allow");
	ok(!name_ok(p, "api.ports.net", 80) && !name_ok(p, "api.ports.net", 8101),
	   "ports outside the list denied");
	ok(name_ok(p, "plain.io", 1) && name_ok(p, "x.plainwild.io", 2), "plain string rules");
	ok(name_ok(p, "p.io", 8443) && !name_ok(p, "p.io", 443), "host:port string rule");
	static const char *const bad[] = {
		"",	   "..",	  "a..example.com", "b\xc3\xbc.com",
		"1.2.3.4", "127.1",	  "example.com..",  "*.wild.org",
		"a b.com", "-a.wild.org", "a-.wild.org",    "x.wild.org\t"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!net_policy_check_name(p, bad[i], 443, &r) && r == NET_REASON_DENY_BAD_NAME,
		   "bad name `%s` rejected", bad[i]);
	char longname[300];

	memset(longname, 'a', sizeof(longname));
	memcpy(longname + sizeof(longname) - 10, ".wild.org", 10);
	ok(!name_ok(p, longname, 443), "over-long name rejected");
	ok(!addr_ok(p, "93.184.216.34", 443), "domain rules do not allow raw addresses");

	/* The canonical JSON round-trips. */
	json_t *j = net_policy_to_json(p);
	char *s = json_dumps(j, JSON_COMPACT);
	struct net_policy *q = parse(s, msg, sizeof(msg));

	ok(q && strstr(s, "\"domain\":\"*.wild.org\"") && strstr(s, "[443,\"8000-8100\"]") &&
		   strstr(s, "{\"domain\":\"p.io\",\"ports\":[8443]}"),
	   "to_json is canonical: %s", s);
	json_t *j2 = q ? net_policy_to_json(q) : NULL;

	ok(j2 && json_equal(j, j2), "parse(to_json(p)) == p");
	json_decref(j2);
	json_decref(j);
	free(s);

	/* References: a holder keeps the policy alive after the owner swaps it out. */
	struct net_policy *held = net_policy_ref(p);

	net_policy_free(p);
	ok(name_ok(held, "example.com", 443), "a held reference stays usable");
	net_policy_free(held);
	net_policy_free(q);
}

static void test_addrs(void)
{
	char msg[512];
	struct net_policy *p = parse("{\"allow\":[{\"cidr\":\"203.0.113.0/24\",\"ports\":[443]},"
				     "\"198.51.100.7\", \"2001:db8::/32\"],"
				     "\"deny\":[\"203.0.113.128/25\"]}",
				     msg, sizeof(msg));
	enum net_reason r;

	ok(p != NULL, "parses a CIDR policy (%s)", msg);
	if (!p)
		return;
	ok(addr_ok(p, "203.0.113.5", 443), "in allowed CIDR and port");
	ok(!addr_ok(p, "203.0.113.5", 80), "allowed CIDR, other port");
	ok(addr_ok(p, "::ffff:203.0.113.5", 443), "v4-mapped form matches a v4 rule");
	ok(!net_policy_check_addr(p, &(struct net_addr){0}, 443, &r), "unspecified not allowed");
	struct net_addr a = A("203.0.113.200");

	ok(!net_policy_check_addr(p, &a, 443, &r) && r == NET_REASON_DENY_RULE,
	   "deny CIDR beats allow CIDR");
	ok(!addr_ok(p, "64:ff9b::203.0.113.200", 443) && !addr_ok(p, "2002:cb00:71c8::", 443),
	   "deny CIDR also matches NAT64 and 6to4 embeddings");
	ok(addr_ok(p, "198.51.100.7", 1) && !addr_ok(p, "198.51.100.8", 1), "single address rule");
	ok(addr_ok(p, "2001:db8:1::1", 22) && !addr_ok(p, "2001:db9::1", 22), "v6 CIDR");
	ok(!name_ok(p, "example.com", 443), "CIDR rules never allow a name");
	net_policy_free(p);

	p = parse("{\"default\":\"allow\"}", msg, sizeof(msg));
	ok(p && addr_ok(p, "8.8.8.8", 53) && name_ok(p, "anything.example", 1) &&
		   net_policy_default_allows(p),
	   "default allow");
	net_policy_free(p);
	p = parse("{}", msg, sizeof(msg));
	ok(p && !addr_ok(p, "8.8.8.8", 53) && !name_ok(p, "example.com", 443),
	   "empty policy denies (default deny)");
	net_policy_free(p);
	struct isola_err *err = NULL;

	ok(net_policy_parse(NULL, &p, &err) == 0 && !net_policy_default_allows(p),
	   "NULL policy is deny-all");
	net_policy_free(p);
	json_t *j = json_pack("{}");

	ok(net_policy_parse_default(j, true, &p, &err) == 0 && net_policy_default_allows(p),
	   "operator default applies when absent");
	net_policy_free(p);
	json_decref(j);
}

static void test_always_denied(void)
{
	static const char *const denied[] = {
		"169.254.169.254",
		"::ffff:169.254.169.254",
		"::169.254.169.254",
		"::ffff:0:169.254.169.254",
		"64:ff9b::a9fe:a9fe",
		"64:ff9b:1::1",
		"2002:a9fe:a9fe::1",
		"127.0.0.1",
		"127.255.255.254",
		"0.0.0.0",
		"0.1.2.3",
		"10.1.2.3",
		"172.16.0.1",
		"172.31.255.255",
		"192.168.1.1",
		"100.64.0.1",
		"100.127.255.255",
		"224.0.0.1",
		"239.255.255.250",
		"240.0.0.1",
		"255.255.255.255",
		"::1",
		"::",
		"fe80::1",
		"febf::1",
		"fc00::1",
		"fd12:3456::1",
		"ff02::1",
		"::ffff:10.0.0.1",
		"::ffff:127.0.0.1",
		"fec0::1",
	};
	static const char *const allowed[] = {
		"93.184.216.34",   "8.8.8.8",	      "172.15.255.255",	      "172.32.0.0",
		"100.63.255.255",  "100.128.0.0",     "169.253.255.255",      "169.255.0.0",
		"192.167.255.255", "223.255.255.255", "2001:4860:4860::8888", "2606:4700::1111",
		"11.0.0.1",	   "::ffff:8.8.8.8",  "64:ff9b::8.8.8.8",
	};
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		ok(always(denied[i], NULL), "always denied: %s", denied[i]);
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		ok(!always(allowed[i], NULL), "not always denied: %s", allowed[i]);

	/* Every address of this host, whatever its range. */
	struct ifaddrs *ifa;
	int n = 0, bad = 0;

	if (getifaddrs(&ifa) == 0) {
		for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
			struct net_addr a;
			char s[64];

			if (!i->ifa_addr || net_addr_from_sockaddr(i->ifa_addr, &a, NULL) < 0)
				continue;
			n++;
			if (!net_addr_always_denied(&a, NULL)) {
				net_addr_format(&a, s, sizeof(s));
				printf("# host address %s not denied\n", s);
				bad++;
			}
		}
		freeifaddrs(ifa);
	}
	ok(n > 0 && bad == 0, "all %d host addresses denied", n);

	struct net_opens o;
	struct isola_err *err = NULL;

	ok(net_opens_parse("10.20.0.0/16, fd00::/8", &o, &err) == 0 && o.n == 2, "opens parse");
	ok(!always("10.20.3.4", &o) && !always("::ffff:10.20.3.4", &o) && always("10.21.0.1", &o),
	   "an opened range is no longer always denied, its neighbours are");
	ok(!always("fd00::5", &o) && always("fc00::5", &o), "v6 opened range");
	ok(always("169.254.169.254", &o), "metadata still denied with other ranges open");
	net_opens_fini(&o);
	ok(net_opens_parse("::1/128", &o, &err) == 0 && !always("::1", &o) && always("::2", &o) &&
		   always("127.0.0.1", &o),
	   "opening ::1 opens ::1 (not its bogus v4-compatible reading 0.0.0.1), nothing else");
	net_opens_fini(&o);
	ok(net_opens_parse("0.0.0.0/8", &o, &err) == 0 && always("64:ff9b::a9fe:a9fe", &o),
	   "opening one v4 range does not open another through NAT64");
	net_opens_fini(&o);
	ok(net_opens_parse("10.0.0.1/8", &o, &err) < 0 && err && strstr(err->message, "10.0.0.1/8"),
	   "opens with host bits rejected: %s", err ? err->message : "");
	isola_err_free(err);
}

static void test_addr_helpers(void)
{
	struct net_addr a;
	struct sockaddr_storage ss;
	struct net_cidr c;
	char buf[64];
	uint16_t port = 0;

	ok(net_addr_parse("127.1", &a) < 0 && net_addr_parse("0x7f.0.0.1", &a) < 0 &&
		   net_addr_parse("1.2.3.4 ", &a) < 0,
	   "only strict dotted quads parse");
	a = A("192.0.2.1");
	socklen_t l = net_addr_to_sockaddr(&a, 8080, &ss);

	ok(ss.ss_family == AF_INET && l == sizeof(struct sockaddr_in), "v4 to sockaddr_in");
	ok(net_addr_from_sockaddr((struct sockaddr *)&ss, &a, &port) == 0 && port == 8080,
	   "sockaddr round trip");
	net_addr_format(&a, buf, sizeof(buf));
	ok(!strcmp(buf, "192.0.2.1"), "format v4: %s", buf);
	ok(net_cidr_parse("0.0.0.0/0", &c) == 0 && c.prefix == 96, "v4 /0 is ::ffff:0:0/96");
	ok(net_cidr_parse("1.2.3.0/024", &c) < 0 && net_cidr_parse("1.2.3.0/", &c) < 0 &&
		   net_cidr_parse("/8", &c) < 0,
	   "malformed prefixes rejected");
}

/* Runs a shell command; true if it exited 0. */
static bool sh(const char *cmd)
{
	int st = system(cmd);

	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The i-th (1-based) of the test's host addresses, v4 198.18.0.0/22 or v6 2001:db8:1::/64. */
static void nth(unsigned i, bool v6, char *buf, size_t len)
{
	if (v6)
		snprintf(buf, len, "2001:db8:1::%x", i);
	else
		snprintf(buf, len, "198.18.%u.%u", i >> 8, i & 255);
}

/*
 * The host's addresses come from the kernel's route lookup, complete and current: in a network
 * namespace of its own (root, as in CI), 1,000 IPv4 and 1,000 IPv6 addresses on a veth
 * interface are each denied, the 900th of each included (a list capped at 256 let them through),
 * and so is a prefix that a `local` route delivers to the host, which no address list holds.
 */
static void test_host_addresses_from_the_kernel(void)
{
	enum { N = 1000 };
	char path[] = "/tmp/isola-test-policy-XXXXXX", cmd[128], s[64];
	unsigned bad[2] = {0, 0};
	struct timespec t0, t1;
	FILE *f;
	int fd;

	if (unshare(CLONE_NEWNET) < 0 || !sh("ip link set lo up")) {
		ok(0, "a network namespace of its own (needs root): %s", strerror(errno));
		return;
	}
	ok(!always("198.18.3.132", NULL) && !always("2001:db8:1::384", NULL),
	   "before the addresses exist, the 900th of each is not the host's");
	fd = mkstemp(path);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		ok(0, "batch file `%s`: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "link add hd0 type veth peer name hd1\nlink set hd0 up\nlink set hd1 up\n");
	for (unsigned i = 1; i <= N; i++) {
		nth(i, false, s, sizeof(s));
		fprintf(f, "addr add %s/32 dev hd0\n", s);
		nth(i, true, s, sizeof(s));
		fprintf(f, "addr add %s/128 dev hd0 nodad\n", s);
	}
	fprintf(f, "route add local 198.51.100.0/24 dev lo\nroute add 203.0.113.0/24 dev hd0\n");
	fclose(f);
	snprintf(cmd, sizeof(cmd), "ip -batch %s", path);
	ok(sh(cmd), "1,000 IPv4 and 1,000 IPv6 addresses added (`%s`)", cmd);
	unlink(path);

	for (unsigned i = 1; i <= N; i++)
		for (int v6 = 0; v6 < 2; v6++) {
			nth(i, v6, s, sizeof(s));
			if (!always(s, NULL) && bad[v6]++ < 3)
				printf("# host address %s not denied\n", s);
		}
	ok(bad[0] == 0, "all %d IPv4 host addresses denied (%u not)", N, bad[0]);
	ok(bad[1] == 0, "all %d IPv6 host addresses denied (%u not)", N, bad[1]);
	ok(always("::ffff:198.18.3.132", NULL) && always("64:ff9b::c612:384", NULL) &&
		   always("2002:c612:384::1", NULL),
	   "the 900th IPv4 one inside IPv4-mapped, NAT64 and 6to4 addresses too");
	ok(always("198.51.100.77", NULL), "a prefix the kernel delivers locally (`local` route)");
	ok(!always("203.0.113.5", NULL) && !always("2001:db8:2::1", NULL),
	   "a destination behind a route (or none) is not the host's");

	struct net_addr a = A("198.18.3.132");
	int before = net_hostaddr_lookup(&a);

	ok(sh("ip addr del 198.18.3.132/32 dev hd0") && before == 1 &&
		   net_hostaddr_lookup(&a) == 0 && !always("198.18.3.132", NULL),
	   "an address removed is no longer the host's at once (no cached list)");

	/* The cost of a decision: one lookup per call (docs/network.md quotes this). */
	a = A("2001:db8:1::3e8");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 10000; i++)
		net_hostaddr_lookup(&a);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# route lookup: %.1f us each (10,000 in a namespace with 2,000 addresses)\n",
	       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 10000 / 1e3);
}

int main(void)
{
	test_errors();
	test_names();
	test_addrs();
	test_always_denied();
	test_addr_helpers();
	test_host_addresses_from_the_kernel(); /* last: it leaves the host's namespace */
	return tap_done();
}
