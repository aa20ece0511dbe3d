/* SPDX-License-Identifier: Apache-2.0 */
/* client-internal: what the two transports of client.h share (client_reply.c): the reply's
 * body handed to the request's sink, and the request's result once the reply ended. */
#ifndef ISOLA_CLI_CLIENT_INTERNAL_H
#define ISOLA_CLI_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "client.h"

#define CLIENT_USER_AGENT "isola-cli/" ISOLA_VERSION

/* One transfer's reply as it arrives. */
struct client_xfer {
	const struct client_req *req; /* the request being performed */
	char *buf;		  /* accumulated body: error reply, JSON reply or a partial line */
	size_t len;		  /* bytes in buf */
	size_t cap;		  /* bytes allocated */
	struct isola_err *cb_err; /* error set by a sink; aborts the transfer */
	bool is_error;		  /* the reply status is not 2xx (set before the body) */
};

/* Hands n body bytes to the request's sink (on_data, on_event per line, the `out` buffer)
 * or keeps the start of an error body. 0 or -errno with x->cb_err set (abort). */
int client_xfer_body(struct client_xfer *x, const char *p, size_t n);

/* The request's result once the whole reply (status) was read: the API's error for a
 * non-2xx reply, the last event line without its newline, the parsed `out` JSON. 0 or
 * -errno with *err. */
int client_xfer_finish(struct client_xfer *x, long status, struct isola_err **err);

/* Frees the transfer's buffer and error. */
void client_xfer_fini(struct client_xfer *x);

/* True once the flag of client_set_cancel_flag() is set. */
bool client_cancelled(void);

/* Why a unix socket refused us, as advice (static text; "" when nothing is known). */
const char *client_connect_hint(const struct client_conf *conf);

#endif
