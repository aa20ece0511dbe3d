/* SPDX-License-Identifier: Apache-2.0 */
/* guestserial: the agent's connection over a virtio-serial port (microvm guest), with resync. */
#include "agent-internal.h"
#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/util.h"

/*
 * A virtio-serial port has no accept(): the host end (QEMU's chardev socket, to which isolad
 * connects) comes and goes while the port stays open here. So a connection is delimited by
 * a sync handshake instead. isolad sends "\nISOLA-SYNC <32 hex>\n"; we discard every byte
 * before it (a previous connection's leftovers), answer "\nISOLA-ACK <same hex>\n" and start
 * the protocol (our HELLO) right behind it; isolad discards everything before the ACK with
 * its nonce. Host connects and disconnects reach us as SIGIO (O_ASYNC) and as POLLHUP / a
 * read of 0 on the port; a 250 ms timer re-checks while the host is away, in case a SIGIO is
 * lost.
 */

#define TOKEN_HEX 32

enum gs_state {
	GS_WAITING,   /* host not connected: no watch on the port, timer armed */
	GS_SYNCING,   /* host connected: scanning for the sync token */
	GS_CONNECTED, /* a protocol connection (a dup of the port fd) is installed */
};

static struct {
	const char *path;     /* port device path */
	int fd;		      /* the port, open for the agent's life */
	enum gs_state state;  /* see above */
	struct watch port_w;  /* port fd in GS_SYNCING */
	struct watch sig_w;   /* signalfd for SIGIO */
	struct watch timer_w; /* timerfd re-checking the host in GS_WAITING */
	char scan[64];	      /* tail of scanned bytes (token may straddle reads) */
	size_t scan_len;      /* bytes in scan */
	int cfd;	      /* the counters port, or -1 */
	struct watch cnt_w;   /* cfd while its host end is connected */
	char cscan[64];	      /* tail of scanned counters bytes */
	size_t cscan_len;     /* bytes in cscan */
} gs = {.fd = -1, .cfd = -1};

static const char sync_prefix[] = "\nISOLA-SYNC ";

/* True when the host end of the port fd is connected. */
static bool host_connected(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (poll(&p, 1, 0) < 0)
		return false;
	return !(p.revents & POLLHUP);
}

static void timer_arm(bool on)
{
	struct itimerspec its = {0};

	if (on) {
		its.it_value.tv_nsec = 250 * 1000000L;
		its.it_interval.tv_nsec = 250 * 1000000L;
	}
	timerfd_settime(gs.timer_w.fd, 0, &its, NULL);
}

static void enter(enum gs_state st)
{
	gs.state = st;
	gs.scan_len = 0;
	watch_set(&gs.port_w, st == GS_SYNCING ? EPOLLIN : 0);
	timer_arm(st == GS_WAITING);
}

/* The counters port is watched only while its host end is connected: with the host away
 * the port polls POLLHUP, which a level-triggered watch would report forever. */
static void counters_recheck(void)
{
	if (gs.cfd < 0)
		return;
	if (!host_connected(gs.cfd))
		gs.cscan_len = 0;
	watch_set(&gs.cnt_w, host_connected(gs.cfd) ? EPOLLIN : 0);
}

/* Re-evaluates the host side when no connection is installed. */
static void recheck(void)
{
	counters_recheck();
	if (gs.state == GS_CONNECTED)
		return;
	enter(host_connected(gs.fd) ? GS_SYNCING : GS_WAITING);
}

/* Writes all of buf to the non-blocking port, waiting up to 2 s. 0 or -errno. */
static int port_write_all(const char *buf, size_t len)
{
	uint64_t deadline = util_now_ms() + 2000;

	while (len) {
		ssize_t n = write(gs.fd, buf, len);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (util_now_ms() > deadline)
			return -ETIMEDOUT;
		poll(&(struct pollfd){.fd = gs.fd, .events = POLLOUT}, 1, 50);
	}
	return 0;
}

int guest_sync_find(const char *buf, size_t len, char nonce[TOKEN_HEX + 1])
{
	return guest_token_find(buf, len, sync_prefix, TOKEN_HEX, nonce);
}

/*
 * The counters port: isolad writes GUEST_COUNTERS_ASK <nonce>, we answer with the counters
 * and the same nonce, so isolad can tell its answer from one it gave up waiting for. No
 * state beyond the scan tail: bytes that are not a request are dropped.
 */
static void counters_cb(struct watch *w, uint32_t events)
{
	char buf[4096 + sizeof(gs.cscan)], nonce[GUEST_COUNTERS_HEX + 1], reply[160];
	size_t have, off = 0, keep;
	bool asked = false;
	ssize_t n;
	int r;

	(void)w;
	(void)events;
	memcpy(buf, gs.cscan, gs.cscan_len);
	n = read(gs.cfd, buf + gs.cscan_len, 4096);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* the host is gone */
		counters_recheck();
		return;
	}
	/* UNTRUSTED: bytes from the host side; only compared against the request pattern. Only
	 * the last request of a read is answered: earlier ones were given up on. */
	have = gs.cscan_len + (size_t)n;
	for (;;) {
		r = guest_token_find(buf + off, have - off, GUEST_COUNTERS_ASK, GUEST_COUNTERS_HEX,
				     nonce);
		if (r < 0)
			break;
		off += (size_t)r;
		asked = true;
	}
	keep = have - off < sizeof(gs.cscan) ? have - off : sizeof(gs.cscan);
	memmove(gs.cscan, buf + have - keep, keep);
	gs.cscan_len = keep;
	if (!asked)
		return;
	r = guest_counters_reply(nonce, reply, sizeof(reply));
	if (r < 0) {
		fprintf(stderr, "isola-agent: counters: %s\n", strerror(-r));
		return;
	}
	/* Non-blocking, never waiting: a host that does not read gets no answer and asks
	 * again (the port's buffers hold many answers). */
	if (write(gs.cfd, reply, (size_t)r) != r)
		fprintf(stderr, "isola-agent: counters reply: %s\n", strerror(errno));
}

static void port_cb(struct watch *w, uint32_t events)
{
	char buf[4096 + sizeof(gs.scan)], nonce[TOKEN_HEX + 1], ack[80];
	ssize_t n;
	int fd, r;

	(void)w;
	if (gs.state != GS_SYNCING)
		return;
	memcpy(buf, gs.scan, gs.scan_len);
	n = read(gs.fd, buf + gs.scan_len, 4096);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* 0: the host is gone and nothing is buffered */
		enter(GS_WAITING);
		recheck();
		return;
	}
	/* UNTRUSTED: bytes from the host side; only compared against the token pattern. */
	n += (ssize_t)gs.scan_len;
	if (guest_sync_find(buf, (size_t)n, nonce) < 0) {
		size_t keep = (size_t)n < sizeof(gs.scan) ? (size_t)n : sizeof(gs.scan);

		memcpy(gs.scan, buf + n - (ssize_t)keep, keep);
		gs.scan_len = keep;
		return;
	}
	snprintf(ack, sizeof(ack), "\nISOLA-ACK %s\n", nonce);
	r = port_write_all(ack, strlen(ack));
	if (r < 0) {
		fprintf(stderr, "isola-agent: serial sync reply: %s\n", strerror(-r));
		recheck();
		return;
	}
	fd = fcntl(gs.fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		recheck();
		return;
	}
	enter(GS_CONNECTED);
	server_install_conn(fd);
}

static void sig_cb(struct watch *w, uint32_t events)
{
	struct signalfd_siginfo si;

	(void)events;
	while (read(w->fd, &si, sizeof(si)) == sizeof(si))
		;
	recheck();
}

static void timer_cb(struct watch *w, uint32_t events)
{
	uint64_t ticks;

	(void)events;
	if (read(w->fd, &ticks, sizeof(ticks)) < 0)
		return;
	recheck();
}

static int gs_start(void)
{
	sigset_t set;
	int sfd, tfd;

	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (sfd < 0 || tfd < 0)
		return -errno;
	watch_init(&gs.sig_w, sfd, sig_cb);
	watch_set(&gs.sig_w, EPOLLIN);
	watch_init(&gs.timer_w, tfd, timer_cb);
	watch_set(&gs.timer_w, EPOLLIN);
	watch_init(&gs.port_w, gs.fd, port_cb);
	/* SIGIO on every host connect/disconnect (virtio_console's fasync). */
	if (fcntl(gs.fd, F_SETOWN, getpid()) < 0 ||
	    fcntl(gs.fd, F_SETFL, fcntl(gs.fd, F_GETFL) | O_ASYNC) < 0)
		fprintf(stderr, "isola-agent: %s: O_ASYNC: %s (falling back to polling)\n", gs.path,
			strerror(errno));
	if (gs.cfd >= 0) {
		watch_init(&gs.cnt_w, gs.cfd, counters_cb);
		/* The same SIGIO: a host connect we miss is healed by isolad, which reconnects
		 * after an unanswered request (microvm/counters.c). */
		if (fcntl(gs.cfd, F_SETOWN, getpid()) < 0 ||
		    fcntl(gs.cfd, F_SETFL, fcntl(gs.cfd, F_GETFL) | O_ASYNC) < 0)
			fprintf(stderr, "isola-agent: counters port: O_ASYNC: %s\n",
				strerror(errno));
	}
	gs.state = GS_WAITING;
	recheck();
	return 0;
}

static void gs_dropped(void)
{
	if (gs.state != GS_CONNECTED)
		return;
	gs.state = GS_WAITING;
	recheck();
}

static const struct server_transport gs_transport = {
	.start = gs_start,
	.dropped = gs_dropped,
};

int guest_serial_run(const char *path, const char *cpath)
{
	int r;

	gs.path = path;
	gs.fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (gs.fd < 0)
		return -errno;
	if (cpath) {
		gs.cfd = open(cpath, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (gs.cfd < 0) /* served without counters: isolad's oom_killed stays false */
			fprintf(stderr, "isola-agent: counters port %s: %s\n", cpath,
				strerror(errno));
	}
	server_set_transport(&gs_transport);
	r = server_run(-1, false);
	return r;
}
