/* SPDX-License-Identifier: Apache-2.0 */
/* test_agentconn: isolad's agent channel against a scripted agent on a socketpair (TAP). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "isolad/core/agentconn.h"
#include "proto/proto.h"
#include "../tap.h"

#define SMALL_FRAMES 5000 /* more than agentconn's cap on queued non-credit frames (4096) */
#define SMALL_LEN    16	  /* 5000 x 16 bytes fit in one window: no credit needed */

static int send_frame(int fd, uint32_t ch, uint8_t type, const void *p, size_t len)
{
	struct proto_header h = {.len = (uint32_t)len, .channel = ch, .type = type};
	uint8_t hdr[PROTO_HEADER_SIZE];

	proto_header_encode(&h, hdr);
	if (util_write_all(fd, hdr, sizeof(hdr)) < 0)
		return -1;
	return len ? util_write_all(fd, p, len) : 0;
}

/* Reads frames until one of `type` arrives (dropping any read past it: callers wait for
 * frames that come alone); counts CREDIT frames and bytes on the way. */
static int read_until(int fd, struct proto_decoder *d, uint8_t type, uint32_t *ch,
		      unsigned *credits, uint64_t *credit_bytes)
{
	uint8_t buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		size_t off = 0;

		if (n <= 0)
			return -1;
		while (off < (size_t)n) {
			struct proto_header h;
			const uint8_t *p;
			size_t used;
			int r = proto_decoder_feed(d, buf + off, (size_t)n - off, &used, &h, &p);

			if (r < 0)
				return -1;
			off += used;
			if (r == 0)
				break;
			if (h.type == PROTO_CREDIT && credits) {
				(*credits)++;
				*credit_bytes += (uint32_t)p[0] | (uint32_t)p[1] << 8 |
						 (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
			}
			if (h.type == type) {
				if (ch)
					*ch = h.channel;
				return 0;
			}
		}
	}
}

struct fake {
	int fd;		       /* the agent's end */
	unsigned credits;      /* CREDIT frames isolad sent back */
	uint64_t credit_bytes; /* bytes they granted */
	int ok;		       /* script ran to its end */
};

/* The agent: HELLO, wait for OPEN (skipping isolad's HELLO), then SMALL_FRAMES small STDOUT frames and an EOF all
 * at once (a tar_get of many small entries, isolad's reader slower than the agent), then
 * wait for the CLOSE and count the credit granted meanwhile. */
static void *fake_agent(void *arg)
{
	struct fake *f = arg;
	static const char hello[] = "{\"version\":1,\"agent\":\"fake\"}";
	uint8_t data[SMALL_LEN];
	struct proto_decoder d;
	uint32_t ch = 0;

	memset(data, 'x', sizeof(data));
	if (proto_decoder_init(&d) < 0)
		return NULL;
	if (send_frame(f->fd, 0, PROTO_HELLO, hello, strlen(hello)) < 0 ||
	    read_until(f->fd, &d, PROTO_OPEN, &ch, NULL, NULL) < 0)
		goto out;
	for (int i = 0; i < SMALL_FRAMES; i++)
		if (send_frame(f->fd, ch, PROTO_STDOUT, data, sizeof(data)) < 0)
			goto out;
	if (send_frame(f->fd, ch, PROTO_EOF, NULL, 0) < 0)
		goto out;
	if (read_until(f->fd, &d, PROTO_CLOSE, NULL, &f->credits, &f->credit_bytes) < 0)
		goto out;
	f->ok = 1;
out:
	proto_decoder_fini(&d);
	return NULL;
}

static void test_many_small_frames_then_eof(void)
{
	struct isola_err *err = NULL;
	struct agent_conn *c = NULL;
	struct agent_chan *ch = NULL;
	struct fake f = {0};
	struct agent_msg m = {0};
	json_t *req = json_pack("{s:s, s:s}", "op", "tar_get", "path", "/x");
	unsigned frames = 0;
	uint64_t bytes = 0;
	bool eof = false;
	pthread_t th;
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	f.fd = sp[1];
	pthread_create(&th, NULL, fake_agent, &f);
	ok(agent_conn_new(sp[0], 5000, &c, &err) == 0, "handshake with the scripted agent");
	if (!c)
		return;
	ok(agent_chan_open(c, req, &ch, &err) == 0, "channel opened");
	/* Let the whole burst and its EOF queue up before consuming anything. */
	for (int i = 0; i < 500 && agent_conn_is_alive(c); i++) {
		usleep(10000);
		if (i > 20 && agent_conn_channels(c) == 1)
			break;
	}
	while (!eof && agent_chan_recv(ch, &m, 10000, &err) == 0) {
		if (m.type == PROTO_STDOUT) {
			frames++;
			bytes += m.len;
		}
		eof = m.type == PROTO_EOF;
		agent_msg_fini(&m);
	}
	ok(eof && frames == SMALL_FRAMES,
	   "%u small frames then EOF all arrive (got %u frames, eof %d: %s)", SMALL_FRAMES, frames,
	   eof, err ? err->message : "no error");
	ok(agent_conn_is_alive(c), "the agent connection survives a slow consumer");
	agent_chan_close(ch);
	pthread_join(th, NULL);
	ok(f.ok, "the agent saw CLOSE");
	ok(f.credit_bytes <= bytes && f.credits <= bytes / (PROTO_WINDOW / 4) + 1,
	   "credit comes back in batches (%u CREDIT frames for %llu bytes)", f.credits,
	   (unsigned long long)f.credit_bytes);
	isola_err_free(err);
	json_decref(req);
	agent_conn_free(c);
	close(sp[1]);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* a killed connection must fail a check, not the binary */
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_many_small_frames_then_eof();
	return tap_done();
}
