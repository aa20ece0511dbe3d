/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_socket: client.h over a plain socket, without libcurl — HTTP/1.1 to isolad's unix
 * socket or an http:// URL, one connection per request. isola-runc links this one: an engine
 * runs it four or more times per container, and loading libcurl and the 30-odd libraries it
 * pulls in costs more per run than the request itself (docs/oci.md, "Transport").
 */
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/httpresp.h"
#include "../common/util.h"
#include "client-internal.h"
#include "dial.h"
#include "parse.h"

#define SOCK_IO_CHUNK	 65536 /* bytes read or sent per call */
#define SOCK_TICK_MS	 1000  /* the cancel flag is checked at least this often */
#define SOCK_MAX_REQHEAD 4096  /* our own request head */

struct client {
	struct client_conf conf; /* borrowed strings */
	char host[256];		 /* Host header: "localhost" or the URL's host */
	char prefix[256];	 /* the URL's path prefix, "" for none */
};

int client_new(const struct client_conf *conf, struct client **out, struct isola_err **err)
{
	struct client *c = calloc(1, sizeof(*c));
	int port;

	if (!c)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	c->conf = *conf;
	snprintf(c->host, sizeof(c->host), "localhost");
	if (conf->url && cli_parse_url(conf->url, c->host, sizeof(c->host), &port, c->prefix,
				       sizeof(c->prefix)) < 0) {
		free(c);
		return isola_err_set(err, EINVAL, "usage",
				     "isolad URL `%s`: this client speaks plain HTTP only "
				     "(http://HOST[:PORT]); use isolad's unix socket instead",
				     conf->url);
	}
	*out = c;
	return 0;
}

void client_free(struct client *c)
{
	free(c);
}

const struct client_conf *client_conf(const struct client *c)
{
	return &c->conf;
}

/* Waits until fd is ready for `events`, checking the cancel flag every tick. 0 or -errno. */
static int wait_fd(int fd, short events)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int n;

		if (client_cancelled())
			return -ECANCELED;
		n = poll(&p, 1, SOCK_TICK_MS);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k;
		int r = wait_fd(fd, POLLOUT);

		if (r < 0)
			return r;
		k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Sends the body read from r->body_fd: as it is with a known size, else chunked. */
static int send_fd_body(int fd, const struct client_req *r, struct isola_err **err)
{
	bool chunked = r->body_size < 0;
	uint64_t sent = 0, total = chunked ? 0 : (uint64_t)r->body_size;
	char *buf = malloc(SOCK_IO_CHUNK + 32);
	int ret = 0;

	if (!buf)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	for (;;) {
		size_t want = SOCK_IO_CHUNK, off = 0;
		char size_line[24];
		ssize_t n;

		if (!chunked && total - sent < want)
			want = (size_t)(total - sent);
		if (!chunked && !want)
			break;
		do
			n = read(r->body_fd, buf + 16, want);
		while (n < 0 && errno == EINTR && !client_cancelled());
		if (n < 0) {
			ret = isola_err_sys(err, errno, NULL, "read request body");
			break;
		}
		if (n == 0 && !chunked) {
			ret = isola_err_set(err, EIO, "internal",
					    "request body ended after %" PRIu64 " of %" PRIu64
					    " bytes",
					    sent, total);
			break;
		}
		if (chunked) {
			int k = snprintf(size_line, sizeof(size_line), "%zx\r\n", (size_t)n);

			off = 16 - (size_t)k;
			memcpy(buf + off, size_line, (size_t)k);
			memcpy(buf + 16 + n, "\r\n", 2);
		}
		ret = send_all(fd, buf + (chunked ? off : 16),
			       (size_t)n + (chunked ? 16 - off + 2 : 0));
		if (ret < 0) {
			ret = isola_err_sys(err, -ret, "unavailable",
					    "send request body to isolad");
			break;
		}
		sent += (uint64_t)n;
		if (r->on_upload)
			r->on_upload(r->ud, sent, total);
		if (chunked && n == 0)
			break; /* "0\r\n\r\n" went out: the last chunk */
	}
	free(buf);
	return ret;
}

/* The request head (and a JSON body) in *out; its length or -errno. */
static int request_head(const struct client *c, const struct client_req *r, const char *json,
			char **out)
{
	char len_line[48] = "", type_line[160] = "", auth[600] = "", accept[160] = "";

	if (json) {
		snprintf(len_line, sizeof(len_line), "Content-Length: %zu\r\n", strlen(json));
		snprintf(type_line, sizeof(type_line), "Content-Type: application/json\r\n");
	} else if (r->body_fd >= 0) {
		if (r->body_size >= 0)
			snprintf(len_line, sizeof(len_line), "Content-Length: %" PRId64 "\r\n",
				 r->body_size);
		else
			snprintf(len_line, sizeof(len_line), "Transfer-Encoding: chunked\r\n");
		snprintf(type_line, sizeof(type_line), "Content-Type: %.120s\r\n",
			 r->content_type ? r->content_type : "application/octet-stream");
	} else if (strcmp(r->method, "GET") && strcmp(r->method, "DELETE")) {
		snprintf(len_line, sizeof(len_line), "Content-Length: 0\r\n");
	}
	if (c->conf.token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %.512s\r\n", c->conf.token);
	if (r->accept)
		snprintf(accept, sizeof(accept), "Accept: %.120s\r\n", r->accept);
	return asprintf(out,
			"%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: " CLIENT_USER_AGENT
			"\r\nConnection: close\r\n%s%s%s%s\r\n%s",
			r->method, c->prefix, r->path, c->host, auth, accept, type_line, len_line,
			json ? json : "");
}

/* Reads the reply, head then body, into x. 0, or -errno with *err. */
static int read_reply(const struct client *c, int fd, struct client_xfer *x, long *status,
		      struct isola_err **err)
{
	const struct client_req *r = x->req;
	char *buf = malloc(HTTP_MAX_HEAD + SOCK_IO_CHUNK);
	struct http_resp resp;
	size_t have = 0, off = 0;
	uint64_t got = 0;
	bool head = false;
	int ret = 0;

	if (!buf)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	for (;;) {
		ssize_t n;
		long d;
		int w = wait_fd(fd, POLLIN);

		if (w < 0) {
			ret = w == -ECANCELED
				      ? isola_err_set(err, ECANCELED, "cancelled", "interrupted")
				      : isola_err_sys(err, -w, "unavailable", "wait for isolad");
			break;
		}
		n = read(fd, buf + have, (head ? 0 : HTTP_MAX_HEAD) + SOCK_IO_CHUNK - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = isola_err_sys(err, errno, "unavailable", "read the reply to %s %s",
					    r->method, r->path);
			break;
		}
		if (n == 0) {
			/* The end of the connection: the end of a body framed by it, else a reply
			 * cut short. */
			if (head && (resp.framing == HTTP_BY_CLOSE || resp.done))
				break;
			if (head && !x->is_error)
				ret = isola_err_set(err, EPIPE, "unavailable",
						    "isolad broke off the reply to %s %s after "
						    "%" PRIu64
						    " bytes; isolad's log names the cause",
						    r->method, r->path, got);
			else
				ret = isola_err_set(err, EPIPE, "unavailable",
						    "isolad at %s closed the connection before it "
						    "answered %s %s",
						    c->conf.url ? c->conf.url : c->conf.socket,
						    r->method, r->path);
			break;
		}
		have += (size_t)n;
		if (!head) {
			/* UNTRUSTED only as far as isolad is: bounded and checked like a sandbox's. */
			int h = http_resp_head(buf, have, &resp);

			if (h == 0)
				continue;
			if (h < 0) {
				ret = isola_err_set(err, EPROTO, "internal",
						    "isolad sent a malformed reply head to %s %s",
						    r->method, r->path);
				break;
			}
			if (resp.status < 200 && resp.status >= 100) {
				/* An interim reply (100 Continue): its head goes, the real one follows. */
				memmove(buf, buf + resp.head_len, have - resp.head_len);
				have -= resp.head_len;
				continue;
			}
			head = true;
			*status = (long)resp.status;
			x->is_error = resp.status < 200 || resp.status >= 300;
			off = resp.head_len;
		}
		/* The body bytes of this read, decoded in place and handed to the sink. */
		d = http_resp_body(&resp, buf + off, have - off, buf);
		have = off = 0;
		if (d < 0 || (d > 0 && client_xfer_body(x, buf, (size_t)d) < 0)) {
			ret = d < 0 ? isola_err_set(err, EPROTO, "internal",
						    "isolad sent a malformed reply body")
				    : -1;
			break;
		}
		got += (uint64_t)d;
		if (resp.done)
			break;
	}
	free(buf);
	if (ret == -1) { /* a sink refused the body: its error */
		ret = -x->cb_err->errnum;
		if (err && !*err)
			*err = steal_ptr(&x->cb_err);
	}
	return ret;
}

int client_do(struct client *c, const struct client_req *r, struct isola_err **err)
{
	struct client_xfer x = {.req = r};
	cleanup_free char *json = NULL, *head = NULL;
	long status = 0;
	int fd, n, ret;

	if (r->body && !(json = json_dumps(r->body, JSON_COMPACT)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	n = request_head(c, r, json, &head);
	if (n < 0)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!json && (size_t)n > SOCK_MAX_REQHEAD)
		return isola_err_set(err, E2BIG, "invalid", "request to %s is too long", r->path);
	if (c->conf.url) {
		char host[256];

		fd = dial_tcp(c->conf.url, host, sizeof(host), err);
	} else {
		fd = dial_unix(c->conf.socket, err);
		if (fd < 0 && err && *err && !strstr((*err)->message, "is isolad running") &&
		    *client_connect_hint(&c->conf)) {
			const char *hint = client_connect_hint(&c->conf);

			isola_err_free(*err);
			*err = NULL;
			fd = isola_err_set(err, ECONNREFUSED, "unavailable",
					   "cannot reach isolad at %s%s", c->conf.socket, hint);
		}
	}
	if (fd < 0)
		return fd;
	ret = send_all(fd, head, (size_t)n);
	if (ret < 0)
		ret = ret == -ECANCELED ? isola_err_set(err, ECANCELED, "cancelled", "interrupted")
					: isola_err_sys(err, -ret, "unavailable",
							"send %s %s to isolad", r->method, r->path);
	if (ret == 0 && !json && r->body_fd >= 0)
		ret = send_fd_body(fd, r, err);
	if (ret == 0)
		ret = read_reply(c, fd, &x, &status, err);
	close(fd);
	if (ret == 0)
		ret = client_xfer_finish(&x, status, err);
	client_xfer_fini(&x);
	return ret;
}
