/* SPDX-License-Identifier: Apache-2.0 */
/* stdio: the MCP stdio transport of `isola mcp` — one JSON-RPC message per line on stdin/stdout. */
#include "mcp.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../cli.h"

/*
 * Transport (MCP "stdio"): one JSON-RPC 2.0 message per line on stdin, one per line on
 * stdout; nothing else is ever written to stdout (diagnostics go to stderr). Batches (JSON
 * arrays) are refused: MCP 2025-06-18 dropped them.
 */

#define MCP_MAX_LINE (16u * 1024u * 1024u) /* one request; write_file content is inline */

/* SIGTERM/SIGINT/SIGHUP: the client is ending the session (the SDK's close() sends SIGTERM
 * when stdin's EOF did not end us quickly); handled like EOF so the default sandbox goes. */
static volatile sig_atomic_t mcp_stop;

static void on_stop(int sig)
{
	(void)sig;
	mcp_stop = 1;
}

static void handle_line(struct mcp_session *s, const char *line, size_t n)
{
	json_error_t jerr;
	json_t *msg;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	if (n == 0)
		return;
	/* UNTRUSTED: one line from the MCP client (at most MCP_MAX_LINE bytes). */
	msg = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg) {
		char text[256];

		snprintf(text, sizeof(text), "parse error: %s", jerr.text);
		mcp_send_error(s, NULL, RPC_PARSE_ERROR, text);
		return;
	}
	if (json_is_array(msg))
		mcp_send_error(s, NULL, RPC_INVALID_REQUEST, "batches are not supported");
	else
		mcp_handle(s, msg);
	json_decref(msg);
}

static int stdio_send(struct mcp_session *s, json_t *json, const char *msg, size_t len)
{
	(void)s;
	(void)json;
	if (util_write_all(STDOUT_FILENO, msg, len) < 0 ||
	    util_write_all(STDOUT_FILENO, "\n", 1) < 0)
		return -errno;
	return 0;
}

static const struct mcp_transport_ops stdio_ops = {.send = stdio_send};

int mcp_serve_stdio(struct mcp_session *s)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	bool discarding = false; /* inside a line longer than MCP_MAX_LINE */
	int status = CLI_EXIT_OK;
	struct sigaction sa = {.sa_handler = on_stop};

	s->ops = &stdio_ops;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is an EPIPE write error */
	while (!mcp_stop) {
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		char chunk[65536], *p, *nl;
		ssize_t n;
		int pr;

		mcp_progress_tick(s);
		pr = poll(&pfd, 1, 1000); /* wakes once a second for progress */
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			continue;
		n = read(STDIN_FILENO, chunk, sizeof(chunk));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break; /* EOF: the client closed the session */
		p = chunk;
		while (n > 0) {
			size_t k;

			nl = memchr(p, '\n', (size_t)n);
			k = nl ? (size_t)(nl - p) : (size_t)n;
			if (!discarding && len + k > MCP_MAX_LINE) {
				discarding = true;
				len = 0;
				mcp_send_error(s, NULL, RPC_INVALID_REQUEST,
					       "message longer than 16 MiB");
			}
			if (!discarding) {
				if (len + k + 1 > cap) {
					size_t ncap = (len + k + 1) * 2;
					char *nb;

					if (ncap > MCP_MAX_LINE + 1)
						ncap = MCP_MAX_LINE + 1;
					nb = realloc(buf, ncap);
					if (!nb) {
						fprintf(stderr, "isola mcp: out of memory\n");
						status = CLI_EXIT_FAIL;
						goto out;
					}
					buf = nb;
					cap = ncap;
				}
				memcpy(buf + len, p, k);
				len += k;
			}
			if (!nl)
				break;
			if (!discarding)
				handle_line(s, buf, len);
			discarding = false;
			len = 0;
			p = nl + 1;
			n -= (ssize_t)k + 1;
		}
		pthread_mutex_lock(&s->lock);
		pr = s->out_broken;
		pthread_mutex_unlock(&s->lock);
		if (pr)
			break;
	}
	if (len && !discarding && !mcp_stop)
		handle_line(s, buf, len); /* a last message without its newline */
out:
	free(buf);
	/* At EOF the calls in flight are finished and answered (`echo REQ | isola mcp` gets its
	 * answer); a stop signal cancels them and kills their commands. */
	mcp_session_end(s, &mcp_stop);
	if (s->out_broken)
		status = CLI_EXIT_FAIL;
	return status;
}
