// SPDX-License-Identifier: Apache-2.0
/* test_dns_port: the resolver's kernel-picked port is one that is free for UDP and TCP. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isolad/net/dns.h"
#include "../tap.h"

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

static int lookup(void *ud, const struct sockaddr *peer, char *sid, struct net_policy **policy)
{
	(void)ud, (void)peer, (void)sid, (void)policy;
	return -ENOENT;
}

static void count(void *ud, const char *sid, bool allowed)
{
	(void)ud, (void)sid, (void)allowed;
}

int main(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(40000)};
	int busy, one = 1, fails = 0, other = 0;

	/* A network namespace of its own with two ephemeral ports, one of them held by a TCP
	 * listener: a UDP pick lands on it about every other time. */
	if (unshare(CLONE_NEWNET) < 0 ||
	    write_file("/proc/sys/net/ipv4/ip_local_port_range", "40000 40001") < 0) {
		ok(0, "a network namespace of its own (needs root): %s", strerror(errno));
		return tap_done();
	}
	busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(busy, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok(busy >= 0 && bind(busy, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(busy, 1) == 0,
	   "TCP port 40000 held");
	for (int i = 0; i < 24; i++) {
		struct isola_err *err = NULL;
		struct net_dns *d = NULL;

		if (net_dns_new("127.0.0.1:9", NULL, &d, &err) < 0 ||
		    net_dns_serve(d, 0, lookup, count, NULL, &err) < 0) {
			printf("# serve: %s\n", err ? err->message : "?");
			fails++;
		} else if (net_dns_port(d) != 40001) {
			other++;
		}
		isola_err_free(err);
		net_dns_free(d);
	}
	ok(fails == 0, "24 resolvers started on a kernel-picked port (%d failed)", fails);
	ok(other == 0, "each on the port free for both UDP and TCP (%d elsewhere)", other);
	/* An explicit port that TCP holds is an error that names it, never another port. */
	{
		struct isola_err *err = NULL;
		struct net_dns *d = NULL;
		int r = net_dns_new("127.0.0.1:9", NULL, &d, &err);

		if (r == 0)
			r = net_dns_serve(d, 40000, lookup, count, NULL, &err);
		ok(r == -EADDRINUSE && err && strstr(err->message, "40000"),
		   "--dns-port 40000 held by TCP: EADDRINUSE naming the port (%s)",
		   err ? err->message : "no error");
		isola_err_free(err);
		net_dns_free(d);
	}
	close(busy);
	return tap_done();
}
