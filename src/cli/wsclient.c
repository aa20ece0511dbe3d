/* SPDX-License-Identifier: Apache-2.0 */
/* wsclient: a minimal blocking WebSocket client to isolad over its unix socket or TCP. */
#include "wsclient.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/util.h"
#include "dial.h"
#include "parse.h"

#define WSC_MAX_MESSAGE	  (1u << 20) /* largest message accepted from isolad */
#define WSC_MAX_HANDSHAKE 16384	     /* upgrade reply headers */

struct wsc {
	int fd;		       /* connected socket, owned */
	struct ws_decoder dec; /* frames from isolad (unmasked) */
	uint8_t in[65536];     /* bytes read but not yet fed to the decoder */
	size_t in_off;	       /* first unfed byte */
	size_t in_len;	       /* end of valid bytes */
};

/* Finds header `name` in the reply head; copies its trimmed value. */
static bool find_header(const char *head, const char *name, char *val, size_t len)
{
	size_t n = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
		l += 2;
		if (strncasecmp(l, name, n) || l[n] != ':')
			continue;
		l += n + 1;
		l += strspn(l, " \t");
		n = strcspn(l, "\r\n");
		while (n && (l[n - 1] == ' ' || l[n - 1] == '\t'))
			n--;
		snprintf(val, len, "%.*s", (int)n, l);
		return true;
	}
	return false;
}

/* Error for a refused upgrade, from the {code, message} body when there is one. */
static int refused(const char *head, const char *body, int status, struct isola_err **err)
{
	json_t *j = json_loads(body, 0, NULL), *e;
	const char *msg;
	int r;

	e = json_is_object(json_object_get(j, "error")) ? json_object_get(j, "error") : j;
	msg = json_string_value(json_object_get(e, "message"));
	if (msg)
		r = isola_err_set(err, EIO, "internal", "%s", msg);
	else
		r = isola_err_set(err, EPROTO, "internal", "isolad refused the WebSocket (HTTP %d)",
				  status);
	json_decref(j);
	return r;
}

static int handshake(struct wsc *w, const struct client_conf *conf, const char *host,
		     const char *path, struct isola_err **err)
{
	char key[WS_CLIENT_KEY_SIZE], accept[WS_ACCEPT_KEY_SIZE], got[64];
	char head[WSC_MAX_HANDSHAKE + 1];
	cleanup_free char *req = NULL;
	size_t have = 0;
	char *end = NULL;
	int n, status;

	if (ws_client_key(key) < 0 || ws_accept_key(key, accept) < 0)
		return isola_err_set(err, EIO, "internal", "cannot make a WebSocket key");
	n = asprintf(&req,
		     "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		     "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
		     "User-Agent: isola-cli/" ISOLA_VERSION "\r\n%s%s%s\r\n",
		     path, host, key, conf->token ? "Authorization: Bearer " : "",
		     conf->token ? conf->token : "", conf->token ? "\r\n" : "");
	if (n < 0)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (util_write_all(w->fd, req, (size_t)n) < 0)
		return isola_err_sys(err, errno, "unavailable", "send WebSocket upgrade");
	/* UNTRUSTED: reply headers are bounded by WSC_MAX_HANDSHAKE and only searched as text. */
	while (!end) {
		ssize_t k;

		if (have == WSC_MAX_HANDSHAKE)
			return isola_err_set(err, EPROTO, "internal", "WebSocket reply too large");
		k = read(w->fd, head + have, WSC_MAX_HANDSHAKE - have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return isola_err_set(err, EPIPE, "unavailable",
					     "isolad closed the connection during the upgrade");
		have += (size_t)k;
		head[have] = '\0';
		end = strstr(head, "\r\n\r\n");
	}
	if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
		return isola_err_set(err, EPROTO, "internal", "malformed WebSocket reply");
	if (status != 101)
		return refused(head, end + 4, status, err);
	if (!find_header(head, "Sec-WebSocket-Accept", got, sizeof(got)) || strcmp(got, accept))
		return isola_err_set(err, EPROTO, "internal",
				     "bad Sec-WebSocket-Accept from isolad");
	/* Frames that arrived with the reply head. */
	w->in_len = have - (size_t)(end + 4 - head);
	memcpy(w->in, end + 4, w->in_len);
	return 0;
}

int wsc_connect(const struct client_conf *conf, const char *path, struct wsc **out,
		struct isola_err **err)
{
	char host[256] = "localhost", full[2048], prefix[256] = "", tmp[256];
	struct wsc *w;
	int port, r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	ws_decoder_init(&w->dec, false, WSC_MAX_MESSAGE);
	if (conf->url) {
		if (cli_parse_url(conf->url, tmp, sizeof(tmp), &port, prefix, sizeof(prefix)) < 0)
			prefix[0] = '\0';
		w->fd = dial_tcp(conf->url, host, sizeof(host), err);
	} else {
		w->fd = dial_unix(conf->socket, err);
	}
	if (w->fd < 0) {
		r = w->fd;
		w->fd = -1;
		wsc_free(w);
		return r;
	}
	snprintf(full, sizeof(full), "%s%s", prefix, path);
	r = handshake(w, conf, host, full, err);
	if (r < 0) {
		wsc_free(w);
		return r;
	}
	*out = w;
	return 0;
}

void wsc_free(struct wsc *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	ws_decoder_fini(&w->dec);
	free(w);
}

int wsc_fd(const struct wsc *w)
{
	return w->fd;
}

int wsc_send(struct wsc *w, uint8_t opcode, const void *buf, size_t len)
{
	cleanup_free uint8_t *frame = NULL;
	uint8_t mask[4];
	size_t n;
	int r;

	/* Client frames are masked (RFC 6455 5.3) so proxies cannot be cache-poisoned. */
	r = util_random(mask, sizeof(mask));
	if (r < 0)
		return r;
	r = ws_frame_encode(opcode, mask, buf, len, &frame, &n);
	if (r < 0)
		return r;
	return util_write_all(w->fd, frame, n);
}

int wsc_fill(struct wsc *w)
{
	ssize_t n;

	if (w->in_off == w->in_len)
		w->in_off = w->in_len = 0;
	if (w->in_len == sizeof(w->in))
		return 0;
	do
		n = read(w->fd, w->in + w->in_len, sizeof(w->in) - w->in_len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	w->in_len += (size_t)n;
	return 0;
}

int wsc_next(struct wsc *w, struct ws_message *msg)
{
	while (w->in_off < w->in_len) {
		size_t used = 0;
		int r;

		/* UNTRUSTED: frames from isolad; the decoder enforces sizes and framing. */
		r = ws_decoder_feed(&w->dec, w->in + w->in_off, w->in_len - w->in_off, &used, msg);
		w->in_off += used;
		if (r < 0)
			return r;
		if (r == 0)
			return 0;
		if (msg->opcode == WS_OP_PING) {
			r = wsc_send(w, WS_OP_PONG, msg->data, msg->len);
			if (r < 0)
				return r;
			continue;
		}
		if (msg->opcode == WS_OP_PONG)
			continue;
		return 1;
	}
	return 0;
}
