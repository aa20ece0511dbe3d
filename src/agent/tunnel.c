/* SPDX-License-Identifier: Apache-2.0 */
/* tunnel: the `tunnel` op — a byte stream between isolad and a TCP port on the sandbox's loopback. */
#include "agent-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/proto.h"

/*
 * Port exposure reaches a server inside the sandbox without any network path into it
 * (docs/network.md "Port exposure"): isolad opens a `tunnel` channel, the agent connects to
 * 127.0.0.1:port (then ::1) from inside, and relays bytes both ways. STDIN frames go to the
 * socket, what the socket yields goes back as STDOUT, under the usual credit: the agent
 * grants STDIN credit only for bytes the socket took, and reads the socket only while it
 * has STDOUT credit, so either side stalling stalls only this channel.
 *
 * Half-close: isolad's EOF shuts the socket's write side once the pending bytes are
 * written; the socket's end of stream is sent as EOF. The channel ends with RESULT
 * {"bytes_in","bytes_out"} once both directions are finished, with ERROR on a socket
 * error, or when isolad sends CONTROL {"close":true} or CLOSE.
 */

#define TUNNEL_READ_MAX PROTO_MAX_PAYLOAD
#define MAX_CREDIT	(1ull << 30) /* the peer's cap on outstanding credit */

struct tunnel {
	struct watch w;	     /* the socket; first member (the callback casts) */
	struct chan *ch;     /* owning channel (outlives a callback that ends it) */
	struct tunnel *next; /* live list link */
	int port;	     /* target port */
	int family;	     /* AF_INET first, then AF_INET6 */
	bool connected;	     /* connect() completed, RESULT sent */
	uint8_t *wbuf;	     /* bytes from isolad not yet written to the socket, owned */
	size_t wlen;	     /* bytes in wbuf */
	size_t wcap;	     /* allocation of wbuf (<= PROTO_WINDOW) */
	bool in_eof;	     /* isolad sent EOF */
	bool wr_shut;	     /* socket write side shut down */
	bool out_eof;	     /* the socket reached end of stream; EOF sent */
	uint64_t bytes_in;   /* bytes written to the socket (client -> server) */
	uint64_t bytes_out;  /* bytes read from the socket (server -> client) */
};

/*
 * Tunnels whose socket is registered. An epoll batch may still hold an event for a tunnel
 * an earlier callback of the same batch freed, so the callback checks membership (by
 * pointer, without dereferencing) before touching it.
 */
static struct tunnel *tunnels;

static bool tunnel_is_live(const struct watch *w)
{
	for (struct tunnel *t = tunnels; t; t = t->next)
		if (&t->w == w)
			return true;
	return false;
}

static void tunnel_update(struct tunnel *t);

/* Before an end isolad's sender did not ask for (no EOF from it yet), grants it credit up
 * to the cap: a sender blocked waiting for credit wakes, and what it still sends is
 * ignored (the channel is gone). */
static void tunnel_free_sender(struct tunnel *t)
{
	struct chan *ch = t->ch;
	uint64_t g;

	if (t->in_eof || ch->in_credit >= MAX_CREDIT - 1)
		return;
	g = MAX_CREDIT - 1 - ch->in_credit;
	chan_grant(ch, g > UINT32_MAX ? UINT32_MAX : (size_t)g);
}

/* Ends the channel with final frame (type, j consumed). */
static void tunnel_end(struct tunnel *t, uint8_t type, json_t *j)
{
	tunnel_free_sender(t);
	chan_finish(t->ch, type, j);
}

static void tunnel_fail(struct tunnel *t, int errnum, const char *what)
{
	tunnel_free_sender(t);
	chan_fail(t->ch, errnum, "tunnel to port %d: %s: %s", t->port, what, strerror(errnum));
}

/* Both directions done and nothing pending: the channel ends. */
static void tunnel_maybe_done(struct tunnel *t)
{
	if (t->ch->ended || !t->out_eof || !t->wr_shut)
		return;
	tunnel_end(t, PROTO_RESULT,
		   json_pack("{s:I,s:I}", "bytes_in", (json_int_t)t->bytes_in, "bytes_out",
			     (json_int_t)t->bytes_out));
}

/* Starts a non-blocking connect to the loopback address of t->family. 0 when connected or
 * in progress, -errno when it failed at once. */
static int tunnel_connect(struct tunnel *t)
{
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa;
	socklen_t len;
	int fd;

	memset(&sa, 0, sizeof(sa));
	if (t->family == AF_INET) {
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons((uint16_t)t->port);
		sa.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(sa.v4);
	} else {
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons((uint16_t)t->port);
		sa.v6.sin6_addr = in6addr_loopback;
		len = sizeof(sa.v6);
	}
	fd = socket(t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, len) < 0 && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		return -e;
	}
	watch_init(&t->w, fd, t->w.cb);
	watch_set(&t->w, EPOLLOUT);
	return 0;
}

static void tunnel_close_sock(struct tunnel *t)
{
	if (t->w.fd < 0)
		return;
	watch_set(&t->w, 0);
	close(t->w.fd);
	t->w.fd = -1;
}

/* The IPv4 attempt failed with v4err: tries ::1, or reports what failed. */
static void tunnel_try_v6(struct tunnel *t, int v4err)
{
	int r = -v4err;

	if (t->family == AF_INET) {
		t->family = AF_INET6;
		r = tunnel_connect(t);
		if (r == 0)
			return;
		/* no IPv6 loopback, or nothing on it either: the IPv4 answer is the one to give */
		if (r == -ECONNREFUSED || r == -EADDRNOTAVAIL || r == -EAFNOSUPPORT ||
		    r == -ENETUNREACH)
			r = -v4err;
	}
	if (r == -EADDRNOTAVAIL || r == -EAFNOSUPPORT || r == -ENETUNREACH)
		r = -ECONNREFUSED;
	chan_fail(t->ch, -r, "nothing accepts connections on port %d inside the sandbox: %s",
		  t->port, strerror(-r));
}

/* The connect finished (EPOLLOUT): success sends RESULT; a failure over IPv4 retries ::1. */
static void tunnel_connected(struct tunnel *t)
{
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (getsockopt(t->w.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		soerr = errno;
	if (soerr == 0) {
		t->connected = true;
		chan_send_json(t->ch, PROTO_RESULT,
			       json_pack("{s:i,s:s}", "port", t->port, "address",
					 t->family == AF_INET ? "127.0.0.1" : "::1"));
		tunnel_update(t);
		return;
	}
	tunnel_close_sock(t);
	if (t->family == AF_INET)
		tunnel_try_v6(t, soerr);
	else
		tunnel_try_v6(t, soerr == EADDRNOTAVAIL ? ECONNREFUSED : soerr);
}

/* Writes pending bytes to the socket; grants isolad what was written. */
static void tunnel_flush(struct tunnel *t)
{
	size_t done = 0;

	while (done < t->wlen) {
		ssize_t n = send(t->w.fd, t->wbuf + done, t->wlen - done, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			tunnel_fail(t, errno, "write");
			return;
		}
		done += (size_t)n;
	}
	if (done) {
		memmove(t->wbuf, t->wbuf + done, t->wlen - done);
		t->wlen -= done;
		t->bytes_in += done;
		chan_grant(t->ch, done);
	}
	if (t->wlen == 0 && t->in_eof && !t->wr_shut) {
		shutdown(t->w.fd, SHUT_WR);
		t->wr_shut = true;
		tunnel_maybe_done(t);
	}
}

/* Reads from the socket while there is credit, sending STDOUT (and EOF at its end). */
static void tunnel_pump(struct chan *ch)
{
	struct tunnel *t = ch->state;
	uint8_t buf[TUNNEL_READ_MAX];

	if (!t || !t->connected || ch->ended)
		return;
	while (!t->out_eof && !ch->ended) {
		size_t room = chan_room(ch);
		ssize_t n;

		if (room == 0)
			break;
		if (room > sizeof(buf))
			room = sizeof(buf);
		n = recv(t->w.fd, buf, room, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			tunnel_fail(t, errno, "read");
			return;
		}
		if (n == 0) {
			/* the server finished sending: EOF keeps the channel open for the other way */
			t->out_eof = true;
			chan_send_data(ch, PROTO_EOF, NULL, 0); /* 0 bytes: no credit */
			tunnel_maybe_done(t);
			break;
		}
		chan_send_data(ch, PROTO_STDOUT, buf, (size_t)n);
		t->bytes_out += (size_t)n;
	}
	if (!ch->ended)
		tunnel_update(t);
}

/* Sets the epoll mask from the state: readable while there is credit and no EOF yet,
 * writable while bytes wait. */
static void tunnel_update(struct tunnel *t)
{
	uint32_t ev = 0;

	if (t->w.fd < 0 || t->ch->ended)
		return;
	if (!t->out_eof && chan_room(t->ch) > 0)
		ev |= EPOLLIN; /* else the next CREDIT or a drained queue pumps */
	if (t->wlen > 0)
		ev |= EPOLLOUT;
	watch_set(&t->w, ev);
}

static void tunnel_cb(struct watch *w, uint32_t events)
{
	struct tunnel *t;
	struct chan *ch;

	if (!tunnel_is_live(w))
		return; /* freed by an earlier callback of this batch */
	t = (struct tunnel *)w;
	ch = t->ch;
	if (!t->connected) {
		tunnel_connected(t);
		return;
	}
	if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
		tunnel_flush(t);
	if (ch->ended)
		return;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		tunnel_pump(ch);
	if (!ch->ended)
		tunnel_update(t);
}

static int tunnel_data(struct chan *ch, const uint8_t *buf, size_t len)
{
	struct tunnel *t = ch->state;

	if (!t || !t->connected || t->in_eof)
		return -EPROTO; /* data before the RESULT or after EOF */
	/* UNTRUSTED: len was checked against the credit we granted, so wbuf stays within
	 * PROTO_WINDOW (credit comes back only as bytes leave it). */
	if (t->wlen + len > t->wcap) {
		size_t ncap = t->wcap ? t->wcap : 16 * 1024;
		uint8_t *p;

		while (ncap < t->wlen + len)
			ncap *= 2;
		p = realloc(t->wbuf, ncap);
		if (!p) {
			tunnel_fail(t, ENOMEM, "buffer");
			return 0;
		}
		t->wbuf = p;
		t->wcap = ncap;
	}
	memcpy(t->wbuf + t->wlen, buf, len);
	t->wlen += len;
	tunnel_flush(t);
	if (!ch->ended)
		tunnel_update(t);
	return 0;
}

static int tunnel_eof(struct chan *ch)
{
	struct tunnel *t = ch->state;

	if (!t || !t->connected)
		return -EPROTO;
	t->in_eof = true;
	tunnel_flush(t);
	if (!ch->ended)
		tunnel_update(t);
	return 0;
}

static int tunnel_control(struct chan *ch, json_t *j)
{
	struct tunnel *t = ch->state;

	if (t && json_is_true(json_object_get(j, "close")))
		tunnel_end(t, PROTO_RESULT,
			   json_pack("{s:I,s:I,s:b}", "bytes_in", (json_int_t)t->bytes_in,
				     "bytes_out", (json_int_t)t->bytes_out, "closed", 1));
	return 0;
}

static void tunnel_release(struct chan *ch)
{
	struct tunnel *t = ch->state, **pp;

	if (!t)
		return;
	for (pp = &tunnels; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	tunnel_close_sock(t);
	free(t->wbuf);
	free(t);
	ch->state = NULL;
}

static const struct chan_ops tunnel_ops = {
	.data = tunnel_data,
	.eof = tunnel_eof,
	.control = tunnel_control,
	.pump = tunnel_pump,
	.release = tunnel_release,
};

int op_tunnel(struct chan *ch, json_t *req)
{
	struct tunnel *t;
	int64_t port;
	int r;

	if (req_int(ch, req, "port", 0, 1, 65535, &port) < 0)
		return 0;
	if (port == 0) {
		chan_fail(ch, EINVAL, "field `port` is required");
		return 0;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		chan_fail(ch, ENOMEM, "tunnel: out of memory");
		return 0;
	}
	t->ch = ch;
	t->port = (int)port;
	t->family = AF_INET;
	watch_init(&t->w, -1, tunnel_cb);
	t->next = tunnels;
	tunnels = t;
	ch->state = t;
	ch->ops = &tunnel_ops;
	r = tunnel_connect(t);
	if (r < 0)
		tunnel_try_v6(t, -r);
	return 0;
}
