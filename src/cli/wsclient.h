/* SPDX-License-Identifier: Apache-2.0 */
/* wsclient: a minimal blocking WebSocket client to isolad over its unix socket or TCP. */
#ifndef ISOLA_CLI_WSCLIENT_H
#define ISOLA_CLI_WSCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/ws.h"
#include "client.h"

struct wsc;

/*
 * Connects to isolad (conf->socket, or conf->url's host and port), sends the upgrade request
 * for `path` with the bearer token, and checks the 101 reply and Sec-WebSocket-Accept.
 * A refused upgrade becomes an error with the API's message. Returns 0 or -errno with *err.
 */
int wsc_connect(const struct client_conf *conf, const char *path, struct wsc **out,
		struct isola_err **err);

/* Closes the socket and frees the client. NULL is fine. */
void wsc_free(struct wsc *w);

/* The socket, for poll(). */
int wsc_fd(const struct wsc *w);

/* Sends one masked frame (text, binary, close, pong). 0 or -errno. */
int wsc_send(struct wsc *w, uint8_t opcode, const void *buf, size_t len);

/* Reads once from the socket into the decoder's input. 0, -EPIPE at EOF, or -errno. */
int wsc_fill(struct wsc *w);

/*
 * Yields the next complete message from what wsc_fill() read: 1 with *msg (valid until the
 * next call), 0 when more input is needed, or a negative errno for a protocol violation
 * (the caller then closes). Pings are answered here and not returned.
 */
int wsc_next(struct wsc *w, struct ws_message *msg);

#endif
