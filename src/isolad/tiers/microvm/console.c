/* SPDX-License-Identifier: Apache-2.0 */
/* console: the guest's serial console, drained from QEMU into a ring and a bounded log file. */
#include "microvm-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../../common/log.h"
#include "../../../common/util.h"

#define CONNECT_TRIES_MS 30000 /* QEMU creates the socket at start; give up after this */

int mvm_ring_init(struct mvm_ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(cap ? cap : 1);
	if (!r->buf)
		return -ENOMEM;
	r->cap = cap ? cap : 1;
	return 0;
}

void mvm_ring_fini(struct mvm_ring *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

void mvm_ring_push(struct mvm_ring *r, const void *p, size_t n)
{
	const char *s = p;

	r->total += n;
	if (n >= r->cap) { /* only the last cap bytes can survive */
		s += n - r->cap;
		n = r->cap;
	}
	while (n) {
		size_t chunk = r->cap - r->head < n ? r->cap - r->head : n;

		memcpy(r->buf + r->head, s, chunk);
		r->head = (r->head + chunk) % r->cap;
		s += chunk;
		n -= chunk;
		r->len = r->len + chunk > r->cap ? r->cap : r->len + chunk;
	}
}

char *mvm_ring_tail(const struct mvm_ring *r, size_t max, size_t *n)
{
	size_t take = r->len < max ? r->len : max;
	size_t start = (r->head + r->cap - take) % r->cap;
	char *out = malloc(take + 1), *nl;

	if (!out)
		return NULL;
	for (size_t i = 0; i < take; i++)
		out[i] = r->buf[(start + i) % r->cap];
	out[take] = '\0';
	/* Start at a line boundary when we cut into the middle of the ring's content. */
	if (take < r->total && (nl = memchr(out, '\n', take)) && (size_t)(nl - out) + 1 < take) {
		size_t skip = (size_t)(nl - out) + 1;

		memmove(out, out + skip, take - skip + 1);
		take -= skip;
	}
	if (n)
		*n = take;
	return out;
}

struct mvm_console {
	char sock[108];	      /* QEMU's serial socket */
	char log[512];	      /* <dir>/console.log */
	char log1[512];	      /* <dir>/console.log.1 (previous half) */
	pthread_t thread;     /* reader */
	int stop_fd;	      /* eventfd: stop */
	pthread_mutex_t lock; /* ring, eof */
	pthread_cond_t cond;  /* eof reached */
	struct mvm_ring ring; /* last MVM_CONSOLE_RING bytes */
	bool eof;	      /* QEMU closed the console */
	int log_fd;	      /* open console.log, -1 if none */
	uint64_t log_bytes;   /* size of console.log */
};

static int console_connect(struct mvm_console *c)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint64_t deadline = util_now_ms() + CONNECT_TRIES_MS;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->sock);
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct pollfd p = {.fd = c->stop_fd, .events = POLLIN};

		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		if (util_now_ms() > deadline || poll(&p, 1, 10) > 0)
			return -ETIMEDOUT;
	}
}

/* Appends to console.log; past the cap, console.log becomes console.log.1 (the old .1 is
 * dropped), so the files never hold more than 2 × MVM_CONSOLE_FILE_CAP. */
static void log_append(struct mvm_console *c, const char *buf, size_t n)
{
	if (c->log_fd >= 0 && c->log_bytes + n > MVM_CONSOLE_FILE_CAP) {
		close(c->log_fd);
		c->log_fd = -1;
		rename(c->log, c->log1);
	}
	if (c->log_fd < 0) {
		struct stat st;

		c->log_fd =
			open(c->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (c->log_fd < 0)
			return;
		c->log_bytes = fstat(c->log_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	}
	if (util_write_all(c->log_fd, buf, n) == 0)
		c->log_bytes += n;
}

static void *console_main(void *arg)
{
	struct mvm_console *c = arg;
	char buf[4096];
	int fd = console_connect(c);

	while (fd >= 0) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
				      {.fd = c->stop_fd, .events = POLLIN}};
		ssize_t n;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!p[0].revents)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		/* UNTRUSTED: guest console bytes; stored, capped, never interpreted. */
		pthread_mutex_lock(&c->lock);
		mvm_ring_push(&c->ring, buf, (size_t)n);
		pthread_mutex_unlock(&c->lock);
		log_append(c, buf, (size_t)n);
	}
	if (fd >= 0)
		close(fd);
	pthread_mutex_lock(&c->lock);
	c->eof = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

struct mvm_console *mvm_console_start(const char *sock, const char *dir)
{
	struct mvm_console *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	snprintf(c->sock, sizeof(c->sock), "%s", sock);
	snprintf(c->log, sizeof(c->log), "%s/console.log", dir);
	snprintf(c->log1, sizeof(c->log1), "%s/console.log.1", dir);
	c->log_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (c->stop_fd < 0 || mvm_ring_init(&c->ring, MVM_CONSOLE_RING) < 0)
		goto fail;
	if (pthread_create(&c->thread, NULL, console_main, c) != 0)
		goto fail;
	return c;
fail:
	if (c->stop_fd >= 0)
		close(c->stop_fd);
	mvm_ring_fini(&c->ring);
	free(c);
	return NULL;
}

void mvm_console_drain(struct mvm_console *c, int ms)
{
	struct timespec ts;

	if (!c)
		return;
	util_deadline_ts(CLOCK_REALTIME, ms > 0 ? (uint64_t)ms : 0, &ts);
	pthread_mutex_lock(&c->lock);
	while (!c->eof)
		if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) != 0)
			break;
	pthread_mutex_unlock(&c->lock);
}

char *mvm_console_tail(struct mvm_console *c, size_t max, size_t *n)
{
	char *out;

	if (!c)
		return NULL;
	pthread_mutex_lock(&c->lock);
	out = mvm_ring_tail(&c->ring, max, n);
	pthread_mutex_unlock(&c->lock);
	return out;
}

void mvm_console_stop(struct mvm_console *c)
{
	uint64_t one = 1;

	if (!c)
		return;
	if (write(c->stop_fd, &one, sizeof(one)) < 0)
		log_warn("console: cannot wake reader");
	pthread_join(c->thread, NULL);
	close(c->stop_fd);
	if (c->log_fd >= 0)
		close(c->log_fd);
	mvm_ring_fini(&c->ring);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

char *mvm_console_tail_files(const char *dir, size_t max, size_t *n)
{
	struct mvm_ring r;
	char path[600];
	char *out;

	if (mvm_ring_init(&r, max) < 0)
		return NULL;
	for (int i = 0; i < 2; i++) {
		cleanup_free char *body = NULL;
		size_t len = 0;

		snprintf(path, sizeof(path), "%s/console.log%s", dir, i == 0 ? ".1" : "");
		if (util_read_file(path, 2 * MVM_CONSOLE_FILE_CAP, &body, &len) == 0)
			mvm_ring_push(&r, body, len);
	}
	out = mvm_ring_tail(&r, max, n);
	mvm_ring_fini(&r);
	return out;
}

/* Copies at most the last `lines` lines of text (trailing newlines dropped) into out, lines
 * joined by " | ", bytes below 0x20 replaced by '?'. */
static void last_lines(const char *text, unsigned lines, char *out, size_t n)
{
	size_t len = text ? strlen(text) : 0, j = 0;
	const char *start;

	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	start = text ? text + len : NULL;
	for (unsigned k = 0; start && start > text && k < lines;) {
		start--;
		if (*start == '\n' && ++k == lines) {
			start++;
			break;
		}
	}
	for (const char *p = start; p && p < text + len && j + 4 < n; p++) {
		if (*p == '\n') {
			memcpy(out + j, " | ", 3);
			j += 3;
		} else if (*p != '\r') {
			out[j++] = (unsigned char)*p < 0x20 ? '?' : *p;
		}
	}
	out[j] = '\0';
}

void mvm_boot_failure_explain(struct isola_err **err, const char *exit_reason,
			      const char *qemu_stderr, const char *console, unsigned lines)
{
	char q[1024], c[1600], *msg = NULL;

	if (!err || !*err)
		return;
	last_lines(qemu_stderr, lines, q, sizeof(q));
	last_lines(console, lines, c, sizeof(c));
	if (asprintf(&msg, "%s%s%s; QEMU stderr (last lines): %s; console (last lines): %s",
		     (*err)->message ? (*err)->message : "",
		     exit_reason && *exit_reason ? "; QEMU " : "", exit_reason ? exit_reason : "",
		     q[0] ? q : "(nothing)", c[0] ? c : "(nothing)") < 0)
		return;
	free((*err)->message);
	(*err)->message = msg;
}
