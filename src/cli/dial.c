/* SPDX-License-Identifier: Apache-2.0 */
/* dial: a connected stream socket to isolad (the WebSocket client and isola-runc's client). */
#include "dial.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "parse.h"

int dial_unix(const char *path, struct isola_err **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return isola_err_set(err, ENAMETOOLONG, "invalid", "socket path `%s` is too long",
				     path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return isola_err_sys(err, errno, NULL, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return isola_err_sys(err, e, "unavailable", "cannot reach isolad at %s", path);
	}
	return fd;
}

int dial_tcp(const char *url, char *host, size_t hostlen, struct isola_err **err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	char prefix[256], port_s[16];
	int port, fd = -1, e = ECONNREFUSED;

	if (cli_parse_url(url, host, hostlen, &port, prefix, sizeof(prefix)) < 0)
		return isola_err_set(err, EINVAL, "usage",
				     "URL `%s`: expected http://HOST[:PORT] (plain http)", url);
	snprintf(port_s, sizeof(port_s), "%d", port);
	if (getaddrinfo(host, port_s, &hints, &res) != 0)
		return isola_err_set(err, ENOENT, "unavailable", "cannot resolve `%s`", host);
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return isola_err_sys(err, e, "unavailable", "cannot reach isolad at %s", url);
	return fd;
}
