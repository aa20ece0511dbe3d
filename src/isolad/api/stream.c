/* SPDX-License-Identifier: Apache-2.0 */
/* stream: NDJSON/SSE event encoding and MHD responses produced on demand (exec, attach, files). */
#include "api-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/base64.h>

int api_buf_append(struct api_buf *b, const void *p, size_t n)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (n > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *nb;

		while (cap < b->len + n)
			cap *= 2;
		nb = realloc(b->data, cap);
		if (!nb)
			return -ENOMEM;
		b->data = nb;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void api_buf_fini(struct api_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

int api_pick_format(const char *q, const char *accept, enum api_fmt *out, struct isola_err **err)
{
	if (q) {
		if (!strcmp(q, "ndjson") || !strcmp(q, "true") || !strcmp(q, "1"))
			*out = API_FMT_NDJSON;
		else if (!strcmp(q, "sse"))
			*out = API_FMT_SSE;
		else if (!strcmp(q, "json") || !strcmp(q, "false") || !strcmp(q, "0"))
			*out = API_FMT_JSON;
		else
			return isola_err_set(err, EINVAL, "invalid",
					     "query `stream` must be json, ndjson or sse");
		return 0;
	}
	if (accept && strstr(accept, "application/x-ndjson"))
		*out = API_FMT_NDJSON;
	else if (accept && strstr(accept, "text/event-stream"))
		*out = API_FMT_SSE;
	else
		*out = API_FMT_JSON;
	return 0;
}

int api_event_format(enum api_fmt fmt, const json_t *ev, struct api_buf *b)
{
	/* jansson escapes control characters (\n, \r, U+0000) inside strings and JSON_COMPACT
	 * emits no newline, so one event is exactly one line: nothing a sandbox writes can
	 * forge a second event. */
	char *s = json_dumps(ev, JSON_COMPACT);
	const char *type = json_string_value(json_object_get(ev, "type"));
	int r = 0;

	if (!s)
		return -ENOMEM;
	if (fmt == API_FMT_SSE) {
		/* The event name is ours ("stdout", "exit", ...), never the sandbox's. */
		r |= api_buf_append(b, "event: ", 7);
		r |= api_buf_append(b, type ? type : "message", strlen(type ? type : "message"));
		r |= api_buf_append(b, "\ndata: ", 7);
		r |= api_buf_append(b, s, strlen(s));
		r |= api_buf_append(b, "\n\n", 2);
	} else {
		r |= api_buf_append(b, s, strlen(s));
		r |= api_buf_append(b, "\n", 1);
	}
	free(s);
	return r ? -ENOMEM : 0;
}

json_t *api_b64_json(const void *p, size_t n)
{
	size_t len = BASE64_ENCODE_RAW_LENGTH(n);
	char *buf;
	json_t *j;

	if (n > SIZE_MAX / 2)
		return NULL;
	buf = malloc(len + 1);
	if (!buf)
		return NULL;
	base64_encode_raw(buf, n, p);
	buf[len] = '\0';
	j = json_stringn_nocheck(buf, len);
	free(buf);
	return j;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not valid. */
static size_t utf8_seq(const uint8_t *s, size_t avail)
{
	uint8_t c = s[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 1;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 2;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail - 1 < n)
		return 0;
	for (size_t k = 1; k <= n; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n + 1;
}

json_t *api_utf8_json(const void *p, size_t n, bool *was_valid)
{
	/* UNTRUSTED: process output. Invalid bytes become U+FFFD, one per byte. */
	const uint8_t *s = p;
	struct api_buf b = {0};
	bool valid = true;
	json_t *j;
	size_t i = 0;

	while (i < n) {
		size_t k = utf8_seq(s + i, n - i);

		if (k == 0) {
			valid = false;
			if (api_buf_append(&b, "\xef\xbf\xbd", 3) < 0)
				goto oom;
			i++;
			continue;
		}
		if (api_buf_append(&b, s + i, k) < 0)
			goto oom;
		i += k;
	}
	j = json_stringn_nocheck(b.data ? b.data : "", b.len);
	api_buf_fini(&b);
	if (was_valid)
		*was_valid = valid;
	return j;
oom:
	api_buf_fini(&b);
	return NULL;
}

/* A response produced on demand by `produce`. Owned by the MHD response. */
struct api_stream {
	enum api_fmt fmt;	 /* event encoding */
	struct api_buf buf;	 /* bytes produced and not yet handed to MHD */
	api_produce_fn produce;	 /* fills buf */
	void *ud;		 /* produce's state, owned */
	void (*free_ud)(void *); /* releases ud */
	int fd;			 /* client socket, for hang-up checks (borrowed) */
	bool done;		 /* produce reported the end */
	uint64_t sent;		 /* bytes handed to MHD (for api_stream_abort's log) */
};

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct api_stream *st = cls;
	size_t n;

	while (st->buf.off == st->buf.len) {
		int r;

		if (st->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->buf.off = st->buf.len = 0;
		r = st->produce(st, st->ud);
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r > 0)
			st->done = true;
	}
	n = st->buf.len - st->buf.off;
	if (n > max)
		n = max;
	memcpy(out, st->buf.data + st->buf.off, n);
	st->buf.off += n;
	st->sent += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct api_stream *st = cls;

	if (st->free_ud)
		st->free_ud(st->ud);
	api_buf_fini(&st->buf);
	free(st);
}

struct MHD_Response *api_stream_response(struct api_req *r, enum api_fmt fmt, uint64_t size,
					 api_produce_fn produce, void *ud,
					 void (*free_ud)(void *ud))
{
	struct api_stream *st = calloc(1, sizeof(*st));
	struct MHD_Response *resp;

	if (!st) {
		free_ud(ud);
		return NULL;
	}
	st->fmt = fmt;
	st->produce = produce;
	st->ud = ud;
	st->free_ud = free_ud;
	st->fd = api_req_fd(r);
	/* A small block size: every chunk goes out as soon as it is produced. */
	resp = MHD_create_response_from_callback(size, 16 * 1024, stream_read, st, stream_free);
	if (!resp) {
		stream_free(st);
		return NULL;
	}
	if (fmt == API_FMT_NDJSON) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	} else if (fmt == API_FMT_SSE) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	}
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return resp;
}

int api_stream_event(struct api_stream *st, json_t *ev)
{
	int r;

	if (!ev)
		return -ENOMEM;
	r = api_event_format(st->fmt, ev, &st->buf);
	json_decref(ev);
	return r;
}

int api_stream_write(struct api_stream *st, const void *p, size_t n)
{
	return api_buf_append(&st->buf, p, n);
}

bool api_stream_peer_gone(struct api_stream *st)
{
	return api_fd_peer_gone(st->fd);
}

uint64_t api_stream_sent(const struct api_stream *st)
{
	return st->sent;
}

enum api_fmt api_stream_fmt(const struct api_stream *st)
{
	return st->fmt;
}

int api_req_fd(struct api_req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

bool api_fd_peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};

	if (fd < 0)
		return false;
	if (poll(&p, 1, 0) <= 0)
		return false;
	return p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL);
}
