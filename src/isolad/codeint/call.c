/* SPDX-License-Identifier: Apache-2.0 */
/* call: one HTTP exchange with the code interpreter service through an agent tunnel. */
#include "codeint-internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define OPEN_MS 10000 /* the agent connecting to the port inside */
#define HEAD_MS 60000 /* the service's response head (a context create starts a kernel) */

struct codeint_call {
	struct sandbox *s;     /* reference, owned */
	struct agent_chan *ch; /* tunnel, owned */
	struct http_resp resp; /* head and body decoder */
	char *pend;	       /* body bytes received but not yet returned, owned */
	size_t pend_off;       /* first unreturned byte of pend */
	size_t pend_len;       /* bytes in pend */
	bool eof;	       /* the tunnel ended */
};

unsigned codeint_call_status(const struct codeint_call *c)
{
	return c->resp.status;
}

const char *codeint_call_ctype(const struct codeint_call *c)
{
	return c->resp.ctype;
}

void codeint_call_free(struct codeint_call *c)
{
	if (!c)
		return;
	agent_chan_close(c->ch);
	sandbox_unref(c->s);
	free(c->pend);
	free(c);
}

/* Opens a tunnel to the service's port. 0; -ECONNREFUSED (nothing listens, no err set);
 * -errno with err otherwise. */
static int tunnel(struct sandbox *s, struct agent_chan **out, struct isola_err **err)
{
	struct agent_conn *conn;
	struct agent_msg m = {0};
	json_t *req;
	int r;

	*out = NULL;
	r = sandbox_agent(s, &conn, err);
	if (r < 0)
		return r;
	req = json_pack("{s:s, s:i}", "op", "tunnel", "port", CODEINT_PORT);
	r = req ? agent_chan_open(conn, req, out, err)
		: isola_err_set(err, ENOMEM, "internal", "out of memory");
	json_decref(req);
	if (r < 0)
		return r;
	r = agent_chan_recv(*out, &m, OPEN_MS, err);
	if (r < 0) {
		agent_chan_close(*out);
		*out = NULL;
		return r;
	}
	if (m.type == PROTO_RESULT) {
		agent_msg_fini(&m);
		return 0;
	}
	if (m.type == PROTO_ERROR) {
		/* UNTRUSTED: the agent's error; its errno is only compared */
		json_int_t e = json_integer_value(json_object_get(m.json, "errno"));

		r = e == ECONNREFUSED ? -ECONNREFUSED
				      : isola_err_set(err, EHOSTUNREACH, "unavailable",
						      "code interpreter port %d is unreachable",
						      CODEINT_PORT);
	} else {
		r = isola_err_set(err, EPROTO, "unavailable", "tunnel: unexpected agent frame");
	}
	agent_msg_fini(&m);
	agent_chan_close(*out);
	*out = NULL;
	return r;
}

/* Appends STDOUT bytes of the tunnel to c->pend; 0, -ETIMEDOUT, 1 at its end, -errno. */
static int fill(struct codeint_call *c, int timeout_ms, struct isola_err **err)
{
	struct agent_msg m = {0};
	int r;

	struct isola_err *e = NULL;

	if (c->eof)
		return 1;
	r = agent_chan_recv(c->ch, &m, timeout_ms, &e);
	isola_err_free(e); /* a timeout is the caller's to report; a lost agent is ours */
	if (r < 0)
		return r == -ETIMEDOUT ? r
				       : isola_err_set(err, ECONNRESET, "unavailable",
						       "sandbox agent connection lost");
	switch (m.type) {
	case PROTO_STDOUT: {
		char *nb;

		if (c->pend_off == c->pend_len)
			c->pend_off = c->pend_len = 0;
		nb = realloc(c->pend, c->pend_len + m.len + 1);
		if (!nb) {
			agent_msg_fini(&m);
			return isola_err_set(err, ENOMEM, "internal", "out of memory");
		}
		c->pend = nb;
		memcpy(c->pend + c->pend_len, m.data, m.len);
		c->pend_len += m.len;
		break;
	}
	case PROTO_EOF:
	case PROTO_RESULT:
	case PROTO_EXIT:
	case PROTO_CLOSE:
		c->eof = true;
		break;
	case PROTO_ERROR:
		c->eof = true;
		agent_msg_fini(&m);
		return isola_err_set(err, ECONNRESET, "unavailable",
				     "the code interpreter's connection failed");
	default:
		break;
	}
	agent_msg_fini(&m);
	return c->eof ? 1 : 0;
}

static int send_request(struct codeint_call *c, const char *method, const char *path,
			const void *body, size_t len, struct isola_err **err)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			 method, path, CODEINT_PORT, body ? len : 0);

	if (n < 0 || (size_t)n >= sizeof(head))
		return isola_err_set(err, ENAMETOOLONG, "invalid", "request path too long");
	if (agent_chan_send_data(c->ch, head, (size_t)n, err) < 0 ||
	    (body && len && agent_chan_send_data(c->ch, body, len, err) < 0))
		return -ECONNRESET;
	/* No half-close after the body: the service takes a client's EOF for a client that
	 * went away and stops the execution. Connection: close ends the exchange instead. */
	return 0;
}

static int call_open(struct sandbox *s, const char *method, const char *path, const void *body,
		     size_t len, bool ensure, struct codeint_call **out, struct isola_err **err)
{
	struct codeint_call *c = calloc(1, sizeof(*c));
	uint64_t deadline = util_now_ms() + HEAD_MS;
	bool retried = false;
	int r;

	*out = NULL;
	if (!c)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	sandbox_ref(s);
	c->s = s;
again:
	r = tunnel(s, &c->ch, err);
	if (r == -ECONNREFUSED && ensure) {
		/* nothing listens: ship and start the service, then once more */
		r = codeint_ensure(s, err);
		if (r == 0)
			r = tunnel(s, &c->ch, err);
		if (r == -ECONNREFUSED)
			r = isola_err_set(err, ECONNREFUSED, "unavailable",
					  "the code interpreter stopped listening on port %d",
					  CODEINT_PORT);
	}
	if (r < 0 || (r = send_request(c, method, path, body, len, err)) < 0)
		goto fail;
	for (;;) {
		uint64_t now = util_now_ms();

		/* UNTRUSTED: the service's bytes (the sandbox's code may have replaced it) */
		r = http_resp_head(c->pend ? c->pend : "", c->pend_len, &c->resp);
		if (r == 1)
			break;
		if (r < 0) {
			r = isola_err_set(err, EBADMSG, "unavailable",
					  "the code interpreter sent a malformed response head");
			goto fail;
		}
		if (now >= deadline) {
			r = isola_err_set(err, ETIMEDOUT, "timeout",
					  "the code interpreter did not answer %s %s in %d s",
					  method, path, HEAD_MS / 1000);
			goto fail;
		}
		r = fill(c, (int)(deadline - now), err);
		if ((r == 1 || r == -ECONNRESET) && ensure && !retried && c->pend_len == 0) {
			/* Closed without a byte of answer: a service that is dying (killed, its
			 * port not yet closed). Start it again and send the request once more
			 * (it was not answered, so it most likely never ran). */
			isola_err_free(*err);
			*err = NULL;
			agent_chan_close(c->ch);
			c->ch = NULL;
			c->eof = false;
			retried = true;
			r = codeint_ensure(s, err);
			if (r < 0)
				goto fail;
			goto again;
		}
		if (r == 1) {
			r = isola_err_set(err, ECONNRESET, "unavailable",
					  "the code interpreter closed the connection before "
					  "answering %s %s",
					  method, path);
			goto fail;
		}
		if (r < 0 && r != -ETIMEDOUT)
			goto fail;
	}
	c->pend_off = c->resp.head_len;
	*out = c;
	return 0;
fail:
	codeint_call_free(c);
	return r;
}

int codeint_call_open(struct sandbox *s, const char *method, const char *path, const void *body,
		      size_t len, struct codeint_call **out, struct isola_err **err)
{
	return call_open(s, method, path, body, len, true, out, err);
}

int codeint_call_raw(struct sandbox *s, const char *method, const char *path, const void *body,
		     size_t len, struct codeint_call **out, struct isola_err **err)
{
	return call_open(s, method, path, body, len, false, out, err);
}

ssize_t codeint_call_read(struct codeint_call *c, void *buf, size_t cap, int timeout_ms,
			  struct isola_err **err)
{
	for (;;) {
		if (c->pend_off < c->pend_len && !c->resp.done) {
			size_t n = c->pend_len - c->pend_off;
			long d;

			if (n > cap)
				n = cap;
			/* UNTRUSTED: body framing from the service; decoded output <= input */
			d = http_resp_body(&c->resp, c->pend + c->pend_off, n, buf);
			if (d < 0)
				return isola_err_set(err, EBADMSG, "unavailable",
						     "the code interpreter sent a malformed body");
			c->pend_off += n;
			if (d > 0)
				return d;
			continue;
		}
		if (c->resp.done)
			return 0;
		{
			int r = fill(c, timeout_ms, err);

			if (r == 1) {
				if (c->pend_off < c->pend_len)
					continue;
				if (c->resp.framing == HTTP_BY_CLOSE)
					return 0;
				return isola_err_set(err, ECONNRESET, "unavailable",
						     "the code interpreter's response was cut off");
			}
			if (r < 0)
				return r;
		}
	}
}

int codeint_call_body(struct codeint_call *c, size_t max, char **out, size_t *len,
		      struct isola_err **err)
{
	size_t n = 0, cap = 4096;
	char *b = malloc(cap + 1);

	*out = NULL;
	*len = 0;
	if (!b)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	for (;;) {
		ssize_t k;

		if (cap - n < 4096) {
			char *nb;

			if (cap > max) {
				free(b);
				return isola_err_set(
					err, EFBIG, "too_large",
					"the code interpreter's answer passed %zu bytes", max);
			}
			nb = realloc(b, cap * 2 + 1);
			if (!nb) {
				free(b);
				return isola_err_set(err, ENOMEM, "internal", "out of memory");
			}
			b = nb;
			cap *= 2;
		}
		k = codeint_call_read(c, b + n, cap - n, HEAD_MS, err);
		if (k == 0)
			break;
		if (k < 0) {
			free(b);
			return k == -ETIMEDOUT ? isola_err_set(err, ETIMEDOUT, "timeout",
							       "the code interpreter's answer "
							       "stalled")
					       : (int)k;
		}
		n += (size_t)k;
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}
