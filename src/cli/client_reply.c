/* SPDX-License-Identifier: Apache-2.0 */
/* client_reply: what both transports of client.h share: a reply's body into the request's
 * sink, its result, client_json and the cancel flag. */
#include "client-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

#define CLIENT_MAX_ERROR_BODY (64u * 1024u)	    /* an error reply is small */
#define CLIENT_MAX_JSON_BODY  (64u * 1024u * 1024u) /* a whole JSON reply (sandbox lists) */
#define CLIENT_MAX_LINE	      (16u * 1024u * 1024u) /* one NDJSON event */

static volatile sig_atomic_t *cancel_flag;

void client_set_cancel_flag(volatile sig_atomic_t *flag)
{
	cancel_flag = flag;
}

bool client_cancelled(void)
{
	return cancel_flag && *cancel_flag;
}

static int buf_append(struct client_xfer *x, const char *p, size_t n, size_t max)
{
	if (x->len + n > max)
		return -EFBIG;
	if (x->len + n + 1 > x->cap) {
		size_t cap = (x->len + n + 1) * 2;
		char *nb;

		if (cap > max + 1)
			cap = max + 1;
		nb = realloc(x->buf, cap);
		if (!nb)
			return -ENOMEM;
		x->buf = nb;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	x->buf[x->len] = '\0';
	return 0;
}

/* Hands one complete NDJSON line to on_event. */
static int emit_line(struct client_xfer *x, const char *line, size_t n)
{
	json_error_t jerr;
	json_t *ev;
	int r;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' '))
		n--;
	if (n == 0)
		return 0;
	/* UNTRUSTED: daemon reply; only objects reach the command's handler. */
	ev = json_loadb(line, n, 0, &jerr);
	if (!json_is_object(ev)) {
		json_decref(ev);
		return isola_err_set(&x->cb_err, EPROTO, "internal",
				     "isolad sent a malformed event: %s", jerr.text);
	}
	r = x->req->on_event(x->req->ud, ev, &x->cb_err);
	json_decref(ev);
	return r;
}

static int feed_lines(struct client_xfer *x, const char *p, size_t n)
{
	const char *nl;
	int r;

	while ((nl = memchr(p, '\n', n))) {
		size_t k = (size_t)(nl - p);

		if (x->len) {
			r = buf_append(x, p, k, CLIENT_MAX_LINE);
			if (r == 0)
				r = emit_line(x, x->buf, x->len);
			x->len = 0;
		} else {
			r = emit_line(x, p, k);
		}
		if (r < 0)
			return r;
		p = nl + 1;
		n -= k + 1;
	}
	if (n && buf_append(x, p, n, CLIENT_MAX_LINE) < 0)
		return isola_err_set(&x->cb_err, EFBIG, "too_large",
				     "isolad sent an event over %u bytes", CLIENT_MAX_LINE);
	return 0;
}

int client_xfer_body(struct client_xfer *x, const char *p, size_t n)
{
	if (x->is_error) {
		/* Keep the start of an error body; the rest is not needed for the message. */
		if (x->len < CLIENT_MAX_ERROR_BODY)
			buf_append(x, p,
				   n < CLIENT_MAX_ERROR_BODY - x->len
					   ? n
					   : CLIENT_MAX_ERROR_BODY - x->len,
				   CLIENT_MAX_ERROR_BODY);
		return 0;
	}
	if (x->req->on_data)
		return x->req->on_data(x->req->ud, p, n, &x->cb_err);
	if (x->req->on_event)
		return feed_lines(x, p, n);
	if (x->req->out && buf_append(x, p, n, CLIENT_MAX_JSON_BODY) < 0)
		return isola_err_set(&x->cb_err, EFBIG, "too_large",
				     "reply from isolad is too large");
	return 0;
}

/* Builds the error for a non-2xx reply from the API's {code, message}. */
static int reply_error(struct client_xfer *x, long status, struct isola_err **err)
{
	json_t *body = x->buf ? json_loadb(x->buf, x->len, 0, NULL) : NULL;
	json_t *e = body;
	const char *code, *msg;
	int r;

	/* UNTRUSTED: the reply is only read as two strings. */
	if (json_is_object(json_object_get(body, "error")))
		e = json_object_get(body, "error");
	code = json_string_value(json_object_get(e, "code"));
	msg = json_string_value(json_object_get(e, "message"));
	if (msg)
		r = isola_err_set(err, status == 404 ? ENOENT : EIO, code ? code : "internal", "%s",
				  msg);
	else
		r = isola_err_set(err, EIO, "internal", "isolad replied HTTP %ld to %s %s", status,
				  x->req->method, x->req->path);
	json_decref(body);
	return r;
}

int client_xfer_finish(struct client_xfer *x, long status, struct isola_err **err)
{
	if (status < 200 || status >= 300)
		return reply_error(x, status, err);
	if (x->req->on_event && x->len) {
		/* The last event may lack its newline. */
		if (emit_line(x, x->buf, x->len) < 0) {
			int r = -x->cb_err->errnum;

			if (err && !*err)
				*err = steal_ptr(&x->cb_err);
			return r;
		}
	} else if (x->req->out) {
		json_error_t jerr;

		*x->req->out = NULL;
		/* UNTRUSTED: the reply is parsed here and read field by field by the commands. */
		if (x->len && !(*x->req->out = json_loadb(x->buf, x->len, 0, &jerr)))
			return isola_err_set(err, EPROTO, "internal",
					     "isolad sent malformed JSON: %s", jerr.text);
	}
	return 0;
}

void client_xfer_fini(struct client_xfer *x)
{
	isola_err_free(x->cb_err);
	x->cb_err = NULL;
	free(x->buf);
	x->buf = NULL;
	x->len = x->cap = 0;
}

const char *client_connect_hint(const struct client_conf *conf)
{
	if (conf->url || !conf->socket)
		return "";
	if (access(conf->socket, R_OK | W_OK) == 0)
		return "; is isolad running? (systemctl status isolad)";
	if (errno == EACCES)
		return "; permission denied: add yourself to group isola "
		       "(sudo usermod -aG isola $USER, then log in again)";
	if (errno == ENOENT)
		return "; no socket there: is isolad running? (systemctl status isolad)";
	return "";
}

int client_json(struct client *c, const char *method, const char *path, const json_t *body,
		json_t **out, struct isola_err **err)
{
	struct client_req r = {
		.method = method,
		.path = path,
		.body = body,
		.body_fd = -1,
		.accept = "application/json",
		.out = out,
	};

	if (out)
		*out = NULL;
	return client_do(c, &r, err);
}
