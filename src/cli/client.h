/* SPDX-License-Identifier: Apache-2.0 */
/* client: HTTP to isolad over its unix socket or TCP (libcurl), JSON and NDJSON streaming. */
#ifndef ISOLA_CLI_CLIENT_H
#define ISOLA_CLI_CLIENT_H

#include <jansson.h>
#include <signal.h>
#include <stdint.h>

#include "../common/err.h"

/* Where isolad listens. Strings are borrowed for the client's lifetime. */
struct client_conf {
	const char *socket; /* unix socket path; used when url is NULL */
	const char *url;    /* "http://host:port", or NULL */
	const char *token;  /* bearer token (TCP), or NULL */
};

struct client;

/* Called per NDJSON line of a 2xx reply with the parsed object (borrowed for the call).
 * Return 0 to go on, a negative errno (and set *err) to abort the transfer. */
typedef int (*client_event_fn)(void *ud, json_t *ev, struct isola_err **err);
/* Called with raw bytes of a 2xx reply. Same return contract. */
typedef int (*client_data_fn)(void *ud, const void *buf, size_t len, struct isola_err **err);
/* Upload progress: bytes sent so far and the total (0 when unknown). */
typedef void (*client_progress_fn)(void *ud, uint64_t sent, uint64_t total);

/* One request. Fields not needed stay zero (body_fd must then be -1). */
struct client_req {
	const char *method;	      /* "GET", "POST", "PUT", "DELETE" */
	const char *path;	      /* "/v1/..." with the query already escaped (cli_pathf) */
	const json_t *body;	      /* JSON request body (borrowed), or NULL */
	int body_fd;		      /* raw body read from this fd when >= 0 (body must be NULL) */
	int64_t body_size;	      /* bytes of the fd body, -1 = unknown (chunked) */
	const char *content_type;     /* of the fd body; default application/octet-stream */
	const char *accept;	      /* Accept header, or NULL */
	json_t **out;		      /* receives the whole 2xx JSON reply (new ref), or NULL */
	client_event_fn on_event;     /* receives each NDJSON line of a 2xx reply, or NULL */
	client_data_fn on_data;	      /* receives the raw 2xx body, or NULL */
	client_progress_fn on_upload; /* upload progress, or NULL */
	void *ud;		      /* passed to the callbacks */
};

/* Creates a client (no connection is made yet). Returns 0 or -errno with *err. */
int client_new(const struct client_conf *conf, struct client **out, struct isola_err **err);

void client_free(struct client *c);

/* The configuration the client was made with (for the WebSocket client). */
const struct client_conf *client_conf(const struct client *c);

/*
 * Performs one request. A non-2xx reply becomes an error whose code and message come from
 * the API's {code, message} body (or {"error":{...}}); a transport failure is `unavailable`
 * naming the socket or URL. Returns 0 or -errno with *err. Not thread-safe per client.
 */
int client_do(struct client *c, const struct client_req *r, struct isola_err **err);

/* client_do() for a JSON body (may be NULL) and a JSON reply (*out may be NULL on 204). */
int client_json(struct client *c, const char *method, const char *path, const json_t *body,
		json_t **out, struct isola_err **err);

/*
 * Makes every transfer abort (with `cancelled`) soon after *flag becomes non-zero; a signal
 * handler sets it. Checked at least once a second. NULL disables.
 */
void client_set_cancel_flag(volatile sig_atomic_t *flag);

#endif
