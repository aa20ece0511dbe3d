/* SPDX-License-Identifier: Apache-2.0 */
/* counters: the guest kernel's own counters (OOM kills), asked over the VM's counters port. */
#include "microvm-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../common/util.h"

#define ANSWER_LINE_MAX 256	    /* longest answer line accepted after the nonce */
#define DRAIN_MAX	(64u << 10) /* stale bytes dropped per query, at most */

static bool key_char(char c)
{
	return (c >= 'a' && c <= 'z') || c == '_';
}

int mvm_counters_parse(const char *buf, size_t len, const char *nonce,
		       struct mvm_guest_counters *out)
{
	char head[64];
	const char *hit, *p, *end;
	bool have_oom = false;
	int hl;

	hl = snprintf(head, sizeof(head), "%s%s ", MVM_COUNTERS_REPLY, nonce);
	if (hl < 0 || (size_t)hl >= sizeof(head))
		return -EINVAL;
	/* UNTRUSTED: buf is whatever the guest wrote to its counters port. Only the answer
	 * carrying our nonce is read; its line is bounded, every value overflow-checked. */
	hit = memmem(buf, len, head, (size_t)hl);
	if (!hit)
		return 0;
	p = hit + hl;
	end = memchr(p, '\n', len - (size_t)(p - buf));
	if (!end)
		return len - (size_t)(p - buf) > ANSWER_LINE_MAX ? -EPROTO : 0;
	if (end - p > ANSWER_LINE_MAX)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *k = p;
		uint64_t v = 0;
		size_t kl;

		while (p < end && key_char(*p))
			p++;
		kl = (size_t)(p - k);
		if (kl == 0 || kl > 32 || p >= end || *p != '=')
			return -EPROTO;
		p++;
		if (p >= end || *p < '0' || *p > '9')
			return -EPROTO;
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			uint64_t d = (uint64_t)(*p - '0');

			if (v > (UINT64_MAX - d) / 10)
				return -EPROTO;
			v = v * 10 + d;
		}
		if (p < end && *p++ != ' ')
			return -EPROTO;
		if (kl == 8 && !memcmp(k, "oom_kill", 8)) {
			out->oom_kill = v;
			have_oom = true;
		}
		/* other keys: a newer agent's counters, ignored */
	}
	if (!have_oom)
		return -EPROTO;
	return (int)(end + 1 - buf);
}

static void counters_close(struct tier_sandbox *s)
{
	if (s->cnt_fd >= 0)
		close(s->cnt_fd);
	s->cnt_fd = -1;
}

static int counters_connect(struct tier_sandbox *s)
{
	char path[sizeof(s->vmdir) + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", s->vmdir, MVM_COUNTERS_SOCK);
	fd = util_unix_connect(path, SOCK_NONBLOCK);
	if (fd < 0)
		return fd;
	s->cnt_fd = fd;
	return 0;
}

/* Drops what is already queued (answers to requests we gave up on). -EPIPE once the
 * stream is closed, else 0. */
static int counters_drain(int fd)
{
	char buf[4096];
	size_t total = 0;

	while (total < DRAIN_MAX) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0)
			return -EPIPE;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		total += (size_t)n;
	}
	return 0;
}

int mvm_counters_query(struct tier_sandbox *s, struct mvm_guest_counters *out)
{
	unsigned char raw[MVM_COUNTERS_HEX / 2];
	char nonce[MVM_COUNTERS_HEX + 1], req[64], buf[4096 + ANSWER_LINE_MAX + 64];
	int timeout = s->cnt_slow ? MVM_COUNTERS_SLOW_MS : MVM_COUNTERS_TIMEOUT_MS;
	uint64_t deadline = util_now_ms() + (uint64_t)timeout;
	size_t have = 0;
	int r;

	if (s->cnt_fd >= 0 && counters_drain(s->cnt_fd) < 0)
		counters_close(s); /* QEMU went away or restarted the chardev: connect again */
	if (s->cnt_fd < 0 && (r = counters_connect(s)) < 0)
		return r;
	if (util_random(raw, sizeof(raw)) < 0)
		return -EIO;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
	r = snprintf(req, sizeof(req), "%s%s\n", MVM_COUNTERS_ASK, nonce);
	if (send(s->cnt_fd, req, (size_t)r, MSG_DONTWAIT | MSG_NOSIGNAL) != r) {
		r = errno ? -errno : -EIO;
		counters_close(s);
		return r;
	}
	for (;;) {
		struct pollfd p = {.fd = s->cnt_fd, .events = POLLIN};
		uint64_t now = util_now_ms();
		ssize_t n;

		if (now >= deadline)
			break;
		if (poll(&p, 1, (int)(deadline - now)) <= 0)
			continue;
		n = recv(s->cnt_fd, buf + have, sizeof(buf) - 1 - have, MSG_DONTWAIT);
		if (n == 0) {
			counters_close(s);
			return -EPIPE;
		}
		if (n < 0)
			continue;
		have += (size_t)n;
		r = mvm_counters_parse(buf, have, nonce, out);
		if (r > 0) {
			s->cnt_slow = false;
			return 0;
		}
		if (r < 0) {
			counters_close(s);
			return r;
		}
		/* Keep a tail that may hold the start of our answer. */
		if (have > ANSWER_LINE_MAX + 64) {
			memmove(buf, buf + have - (ANSWER_LINE_MAX + 64), ANSWER_LINE_MAX + 64);
			have = ANSWER_LINE_MAX + 64;
		}
	}
	/* No answer: the guest is paused, busy or not listening. Reconnect next time (the agent
	 * sees the host come back, which heals a missed connect), and wait less until it
	 * answers again, so a silent guest cannot hold its sandbox's lock for long. */
	counters_close(s);
	s->cnt_slow = true;
	return -ETIMEDOUT;
}

void mvm_counters_fini(struct tier_sandbox *s)
{
	counters_close(s);
}
