/* SPDX-License-Identifier: Apache-2.0 */
/* attach: an interactive session (-i/-t) with a sandbox process over isolad's WebSocket. */
#include "attach.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/util.h"
#include "cli.h"
#include "parse.h"
#include "wsclient.h"

static struct termios saved_termios;
static bool termios_saved;

/* Restores the terminal; registered with atexit() as well so no exit path leaves it raw. */
static void restore_terminal(void)
{
	if (!termios_saved)
		return;
	tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
	termios_saved = false;
}

static int make_raw(void)
{
	static bool registered;
	struct termios raw;

	if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
		return -errno;
	raw = saved_termios;
	cfmakeraw(&raw);
	if (!registered) {
		atexit(restore_terminal);
		registered = true;
	}
	termios_saved = true;
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) < 0) {
		termios_saved = false;
		return -errno;
	}
	return 0;
}

static int send_json(struct wsc *w, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	int r;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	r = wsc_send(w, WS_OP_TEXT, s, strlen(s));
	free(s);
	return r;
}

static int send_resize(struct wsc *w)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
		return 0;
	return send_json(w, json_pack("{s:s,s:i,s:i}", "type", "resize", "cols", ws.ws_col, "rows",
				      ws.ws_row));
}

/* A session in progress. */
struct session {
	struct wsc *w;	 /* the WebSocket */
	int status;	 /* exit status once done */
	bool done;	 /* an exit or error ended the session */
	bool stdin_open; /* still forwarding stdin */
};

/* Handles a text frame: exit, error, or base64 output for streams a binary frame cannot name. */
static int on_text(struct session *s, const struct ws_message *m)
{
	/* UNTRUSTED: a JSON control message from isolad, read field by field. */
	json_t *ev = json_loadb((const char *)m->data, m->len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	struct cli_stream st = {0};

	if (!type) {
		json_decref(ev);
		return 0;
	}
	if (!strcmp(type, "exit")) {
		s->status = cli_exit_status(ev);
		s->done = true;
		if (json_is_true(json_object_get(ev, "oom_killed"))) {
			restore_terminal();
			/* No HTTP client in a WebSocket session: the limit is left out. */
			cli_report_oom(NULL, NULL, ev);
		}
	} else if (!strcmp(type, "error")) {
		const char *msg = json_string_value(json_object_get(ev, "message"));

		restore_terminal();
		fprintf(stderr, "isola: %s\n", msg ? msg : "session failed");
		s->status = CLI_EXIT_ISOLA;
		s->done = true;
	} else if (!strcmp(type, "stdout") || !strcmp(type, "stderr") || !strcmp(type, "dropped")) {
		cleanup_err struct isola_err *err = NULL;

		cli_stream_event(&st, ev, &err);
	}
	json_decref(ev);
	return 0;
}

static int on_socket(struct session *s)
{
	struct ws_message m;
	int r;

	r = wsc_fill(s->w);
	if (r < 0)
		return r;
	while (!s->done && (r = wsc_next(s->w, &m)) == 1) {
		if (m.opcode == WS_OP_BINARY) {
			if (util_write_all(STDOUT_FILENO, m.data, m.len) < 0 && errno != EPIPE)
				return -errno;
		} else if (m.opcode == WS_OP_TEXT) {
			on_text(s, &m);
		} else if (m.opcode == WS_OP_CLOSE) {
			return -EPIPE;
		}
	}
	return r < 0 ? r : 0;
}

static int on_stdin(struct session *s)
{
	char buf[32768];
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (n == 0) {
		s->stdin_open = false;
		return send_json(s->w, json_pack("{s:s}", "type", "close_stdin"));
	}
	return wsc_send(s->w, WS_OP_BINARY, buf, (size_t)n);
}

/* Signals the session handles synchronously through a signalfd. */
static void session_sigset(sigset_t *set, bool raw)
{
	sigemptyset(set);
	sigaddset(set, SIGWINCH);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	if (!raw)
		sigaddset(set, SIGINT); /* in raw mode ^C is a byte for the remote terminal */
}

static int relay(struct session *s, int sfd, bool tty)
{
	while (!s->done) {
		struct pollfd p[3] = {
			{.fd = wsc_fd(s->w), .events = POLLIN},
			{.fd = sfd, .events = POLLIN},
			{.fd = s->stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
		};
		struct signalfd_siginfo si;
		int r;

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[0].revents) {
			r = on_socket(s);
			if (r < 0)
				return r;
		}
		if (p[1].revents && read(sfd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGWINCH) {
				if (tty)
					send_resize(s->w);
			} else {
				s->status = 128 + (int)si.ssi_signo;
				return 0;
			}
		}
		if (p[2].revents && !s->done) {
			r = on_stdin(s);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

int cli_attach(const struct client_conf *conf, const char *id, long pid, bool interactive, bool tty)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/processes/%ld/ws", id, pid);
	struct session s = {.status = CLI_EXIT_ISOLA, .stdin_open = interactive};
	sigset_t set, old;
	bool raw = tty && interactive && isatty(STDIN_FILENO);
	int sfd, r;

	if (!path)
		return CLI_EXIT_ISOLA;
	if (wsc_connect(conf, path, &s.w, &err) < 0)
		return cli_fail(err, CLI_EXIT_ISOLA);
	session_sigset(&set, raw);
	sigprocmask(SIG_BLOCK, &set, &old);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (raw && make_raw() < 0)
		raw = false;
	if (sfd < 0)
		r = -errno;
	else
		r = relay(&s, sfd, tty);
	restore_terminal();
	if (r < 0 && !s.done) {
		fprintf(stderr, "isola: session with process %ld ended: %s\n", pid,
			r == -EPIPE ? "connection closed before the process exited" : strerror(-r));
		s.status = CLI_EXIT_ISOLA;
	}
	wsc_send(s.w, WS_OP_CLOSE, "\x03\xe8", 2); /* 1000: normal closure */
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	wsc_free(s.w);
	return s.status;
}
