/* SPDX-License-Identifier: Apache-2.0 */
/* qmp: a small synchronous QMP client over QEMU's control socket (commands, fds, no events). */
#include "microvm-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../common/util.h"

/* One QMP session. Owned by one thread at a time (the tier op that opened it). */
struct mvm_qmp {
	int fd;		 /* connected stream socket, owned */
	int timeout_ms;	 /* per reply */
	char *buf;	 /* received bytes not yet consumed, MVM_QMP_LINE_MAX + 1 */
	size_t len;	 /* valid bytes in buf */
	unsigned serial; /* next command id */
};

void mvm_qmp_close(struct mvm_qmp *q)
{
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q->buf);
	free(q);
}

/*
 * The next complete line as a JSON object (caller decrefs), skipping blank lines. -ETIMEDOUT,
 * -EPIPE (peer closed), -E2BIG (line past MVM_QMP_LINE_MAX), -EBADMSG (not a JSON object).
 */
static int read_obj(struct mvm_qmp *q, json_t **out)
{
	uint64_t deadline = util_now_ms() + (uint64_t)q->timeout_ms;

	for (;;) {
		char *nl = memchr(q->buf, '\n', q->len);
		struct pollfd p = {.fd = q->fd, .events = POLLIN};
		uint64_t now;
		ssize_t n;
		int pr;

		if (nl) {
			size_t ll = (size_t)(nl - q->buf);
			json_t *j;

			/* UNTRUSTED: QEMU's bytes (QEMU runs next to a hostile guest); a bounded
			 * line, parsed by jansson, used only through typed accessors. */
			j = ll ? json_loadb(q->buf, ll, JSON_REJECT_DUPLICATES, NULL) : NULL;
			memmove(q->buf, nl + 1, q->len - ll - 1);
			q->len -= ll + 1;
			if (!ll)
				continue;
			if (!json_is_object(j)) {
				json_decref(j);
				return -EBADMSG;
			}
			*out = j;
			return 0;
		}
		if (q->len >= MVM_QMP_LINE_MAX)
			return -E2BIG;
		now = util_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		pr = poll(&p, 1, (int)(deadline - now));
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr <= 0)
			continue;
		n = recv(q->fd, q->buf + q->len, MVM_QMP_LINE_MAX - q->len, MSG_DONTWAIT);
		if (n == 0)
			return -EPIPE;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		q->len += (size_t)n;
	}
}

static const char *read_what(int r)
{
	switch (r) {
	case -ETIMEDOUT:
		return "no answer in time";
	case -EPIPE:
		return "QEMU closed the connection";
	case -E2BIG:
		return "reply line too long";
	case -EBADMSG:
		return "reply is not a JSON object";
	default:
		return strerror(-r);
	}
}

/* Sends one line, with fd as SCM_RIGHTS when fd >= 0. */
static int send_line(struct mvm_qmp *q, const char *line, size_t len, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = (void *)line, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	/* The fd rides on the first byte; the rest (if the kernel splits) goes plainly. */
	do
		n = sendmsg(q->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n < len)
		return util_write_all(q->fd, line + n, len - (size_t)n);
	return 0;
}

int mvm_qmp_exec(struct mvm_qmp *q, const char *cmd, json_t *args, int fd, json_t **ret,
		 struct isola_err **err)
{
	unsigned id = q->serial++;
	json_t *req;
	char *line;
	int r;

	if (ret)
		*ret = NULL;
	req = json_pack("{s:s, s:I}", "execute", cmd, "id", (json_int_t)id);
	if (req && args)
		json_object_set(req, "arguments", args);
	line = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!line)
		return isola_err_set(err, ENOMEM, "internal", "QMP `%s`: out of memory", cmd);
	{
		size_t n = strlen(line);

		line[n] = '\n'; /* json_dumps leaves room for the NUL only: send n+1 bytes */
		r = send_line(q, line, n + 1, fd);
		line[n] = '\0';
	}
	free(line);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "QMP `%s`: send", cmd);
	for (;;) {
		json_t *j = NULL, *rid, *e;

		r = read_obj(q, &j);
		if (r < 0)
			return isola_err_set(err, -r, "internal", "QMP `%s`: %s", cmd,
					     read_what(r));
		rid = json_object_get(j, "id");
		/* Events (and answers to commands we gave up on) are not ours: skip them. */
		if (json_object_get(j, "event") || !json_is_integer(rid) ||
		    json_integer_value(rid) != (json_int_t)id) {
			json_decref(j);
			continue;
		}
		e = json_object_get(j, "error");
		if (e) {
			const char *cls = json_string_value(json_object_get(e, "class"));
			const char *desc = json_string_value(json_object_get(e, "desc"));

			r = isola_err_set(err, EIO, "internal", "QMP `%s` failed: %.40s: %.300s",
					  cmd, cls ? cls : "?", desc ? desc : "(no description)");
			json_decref(j);
			return r;
		}
		if (!json_object_get(j, "return")) {
			json_decref(j);
			return isola_err_set(err, EBADMSG, "internal",
					     "QMP `%s`: reply has neither return nor error", cmd);
		}
		if (ret)
			*ret = json_incref(json_object_get(j, "return"));
		json_decref(j);
		return 0;
	}
}

int mvm_qmp_open_fd(int fd, int timeout_ms, struct mvm_qmp **out, struct isola_err **err)
{
	struct mvm_qmp *q = calloc(1, sizeof(*q));
	json_t *greet = NULL;
	int r;

	if (!q || !(q->buf = malloc(MVM_QMP_LINE_MAX + 1))) {
		free(q);
		close(fd);
		return isola_err_set(err, ENOMEM, "internal", "QMP: out of memory");
	}
	q->fd = fd;
	q->timeout_ms = timeout_ms;
	r = read_obj(q, &greet);
	if (r < 0) {
		r = isola_err_set(err, -r, "internal", "QMP greeting: %s", read_what(r));
		goto fail;
	}
	r = json_is_object(json_object_get(greet, "QMP")) ? 0 : -EPROTO;
	json_decref(greet);
	if (r < 0) {
		r = isola_err_set(err, EPROTO, "internal", "QMP greeting: not a QMP server");
		goto fail;
	}
	r = mvm_qmp_exec(q, "qmp_capabilities", NULL, -1, NULL, err);
	if (r < 0)
		goto fail;
	*out = q;
	return 0;
fail:
	mvm_qmp_close(q);
	return r;
}

int mvm_qmp_open(const char *path, int timeout_ms, struct mvm_qmp **out, struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + (uint64_t)timeout_ms;
	int fd;

	/* QEMU creates the socket a moment after it starts: retry until the deadline. */
	for (;;) {
		fd = util_unix_connect(path, 0);
		if (fd >= 0)
			break;
		if (fd == -ENAMETOOLONG)
			return isola_err_set(err, ENAMETOOLONG, "internal",
					     "QMP socket `%s`: too long", path);
		if ((fd != -ENOENT && fd != -ECONNREFUSED) || util_now_ms() >= deadline)
			return isola_err_sys(err, -fd, "unavailable", "connect to QMP `%s`", path);
		poll(NULL, 0, 2);
	}
	return mvm_qmp_open_fd(fd, timeout_ms, out, err);
}
