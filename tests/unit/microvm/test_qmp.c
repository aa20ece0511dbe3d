/* SPDX-License-Identifier: Apache-2.0 */
/* test_qmp: the microvm tier's QMP client against a peer scripted over a socketpair. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "isolad/tiers/microvm/microvm-internal.h"

#define GREETING "{\"QMP\": {\"version\": {}, \"capabilities\": [\"oob\"]}}\r\n"

/* The peer's side of a session: what it will answer is written before the client asks. */
struct peer {
	int fd;	       /* our end */
	int client_fd; /* the end handed to mvm_qmp_open_fd */
};

static void peer_new(struct peer *p)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	p->fd = sv[0];
	p->client_fd = sv[1];
}

static void say(struct peer *p, const char *s)
{
	if (write(p->fd, s, strlen(s)) != (ssize_t)strlen(s))
		abort();
}

/* Everything the client sent so far (NUL-terminated, static), and an fd if one came along. */
static const char *heard(struct peer *p, int *fd_out)
{
	static char buf[65536];
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(p->fd, &mh, MSG_DONTWAIT);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	if (fd_out) {
		*fd_out = -1;
		if (n > 0 && c && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd_out, CMSG_DATA(c), sizeof(int));
	}
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* A session past the greeting and qmp_capabilities (id 0). */
static struct mvm_qmp *open_ok(struct peer *p, int timeout_ms)
{
	struct mvm_qmp *q = NULL;
	struct isola_err *e = NULL;

	peer_new(p);
	say(p, GREETING "{\"return\": {}, \"id\": 0}\r\n");
	if (mvm_qmp_open_fd(p->client_fd, timeout_ms, &q, &e) < 0)
		abort();
	heard(p, NULL);
	return q;
}

static void *write_long_line(void *arg)
{
	struct peer *p = arg;
	size_t n = MVM_QMP_LINE_MAX + 16;
	char *big = malloc(n);

	memset(big, 'x', n);
	(void)!write(p->fd, big, n); /* may stop short when the client gives up and closes */
	free(big);
	return NULL;
}

int main(void)
{
	struct peer p;
	struct mvm_qmp *q = NULL;
	struct isola_err *e = NULL;
	json_t *ret = NULL;
	int r, fd, pipefd[2];
	struct stat a, b;

	/* Handshake: greeting, then qmp_capabilities is the first thing sent. */
	peer_new(&p);
	say(&p, GREETING "{\"return\": {}, \"id\": 0}\r\n");
	r = mvm_qmp_open_fd(p.client_fd, 1000, &q, &e);
	ok(r == 0 && q, "open: greeting and capabilities accepted");
	ok(strstr(heard(&p, NULL), "\"execute\":\"qmp_capabilities\"") != NULL,
	   "open: sent qmp_capabilities");

	/* Events and stale replies are skipped; the answer with our id is returned. */
	say(&p, "{\"event\": \"STOP\", \"timestamp\": {}}\r\n"
		"{\"return\": {\"status\": \"stale\"}, \"id\": 77}\r\n"
		"{\"return\": {\"status\": \"paused\", \"running\": false}, \"id\": 1}\r\n");
	r = mvm_qmp_exec(q, "query-status", NULL, -1, &ret, &e);
	ok(r == 0 && !strcmp(json_string_value(json_object_get(ret, "status")) ?: "", "paused"),
	   "exec: skips an event and a stale reply, returns ours");
	json_decref(ret);
	ok(strstr(heard(&p, NULL), "{\"execute\":\"query-status\",\"id\":1}\n") != NULL,
	   "exec: one line with execute and id");

	/* Arguments go under "arguments". */
	say(&p, "{\"return\": {}, \"id\": 2}\n");
	{
		json_t *args = json_pack("{s:s}", "uri", "fd:x");

		r = mvm_qmp_exec(q, "migrate", args, -1, NULL, &e);
		json_decref(args);
	}
	ok(r == 0 && strstr(heard(&p, NULL), "\"arguments\":{\"uri\":\"fd:x\"}") != NULL,
	   "exec: arguments sent");

	/* An error reply becomes -EIO naming the command, class and description. */
	say(&p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"boom here\"}, \"id\": 3}\n");
	r = mvm_qmp_exec(q, "cont", NULL, -1, NULL, &e);
	ok(r == -EIO && e && strstr(e->message, "`cont`") && strstr(e->message, "GenericError") &&
		   strstr(e->message, "boom here"),
	   "exec: error reply -> -EIO with class and desc (%s)", e ? e->message : "-");
	isola_err_free(e);
	e = NULL;

	/* An fd rides along as SCM_RIGHTS and is the same file on the other side. */
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		abort();
	say(&p, "{\"return\": {}, \"id\": 4}\n");
	r = mvm_qmp_exec(q, "getfd", NULL, pipefd[0], NULL, &e);
	heard(&p, &fd);
	ok(r == 0 && fd >= 0 && fstat(fd, &a) == 0 && fstat(pipefd[0], &b) == 0 &&
		   a.st_ino == b.st_ino,
	   "exec: fd passed with SCM_RIGHTS");
	if (fd >= 0)
		close(fd);
	close(pipefd[0]);
	close(pipefd[1]);

	/* A reply with neither return nor error. */
	say(&p, "{\"id\": 5}\n");
	r = mvm_qmp_exec(q, "stop", NULL, -1, NULL, &e);
	ok(r == -EBADMSG, "exec: reply without return/error -> -EBADMSG");
	isola_err_free(e);
	e = NULL;

	/* Garbage is not a JSON object. */
	say(&p, "this is not json\n");
	r = mvm_qmp_exec(q, "stop", NULL, -1, NULL, &e);
	ok(r == -EBADMSG, "exec: garbage line -> -EBADMSG");
	isola_err_free(e);
	e = NULL;

	/* Silence -> timeout. */
	r = mvm_qmp_exec(q, "stop", NULL, -1, NULL, &e);
	ok(r == -ETIMEDOUT && e && strstr(e->message, "no answer"), "exec: no reply -> -ETIMEDOUT");
	isola_err_free(e);
	e = NULL;

	/* QEMU gone mid-command -> -EPIPE. */
	close(p.fd);
	r = mvm_qmp_exec(q, "stop", NULL, -1, NULL, &e);
	ok(r == -EPIPE || r == -ECONNRESET, "exec: peer closed -> -EPIPE (%d)", r);
	isola_err_free(e);
	e = NULL;
	mvm_qmp_close(q);

	/* A line longer than MVM_QMP_LINE_MAX is refused, not buffered without end. */
	{
		pthread_t t;

		q = open_ok(&p, 5000);
		pthread_create(&t, NULL, write_long_line, &p);
		r = mvm_qmp_exec(q, "query-status", NULL, -1, NULL, &e);
		ok(r == -E2BIG, "exec: over-long reply line -> -E2BIG");
		isola_err_free(e);
		e = NULL;
		mvm_qmp_close(q);
		pthread_join(t, NULL);
		close(p.fd);
	}

	/* Not a QMP greeting. */
	peer_new(&p);
	say(&p, "{\"hello\": 1}\n");
	q = NULL;
	r = mvm_qmp_open_fd(p.client_fd, 1000, &q, &e);
	ok(r == -EPROTO && !q, "open: a non-QMP greeting is refused");
	isola_err_free(e);
	e = NULL;
	close(p.fd);

	/* capabilities refused. */
	peer_new(&p);
	say(&p, GREETING "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"no\"}, "
			 "\"id\": 0}\n");
	r = mvm_qmp_open_fd(p.client_fd, 1000, &q, &e);
	ok(r == -EIO, "open: refused qmp_capabilities -> -EIO");
	isola_err_free(e);
	e = NULL;
	close(p.fd);

	/* No socket at all: a clear error after the deadline. */
	r = mvm_qmp_open("/nonexistent/qmp.sock", 50, &q, &e);
	ok(r == -ENOENT && e && strstr(e->message, "/nonexistent/qmp.sock"),
	   "open: missing socket -> -ENOENT naming the path");
	isola_err_free(e);
	return tap_done();
}
