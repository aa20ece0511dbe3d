/* SPDX-License-Identifier: Apache-2.0 */
/* codeint: the code interpreter service — shipped into a sandbox, started on demand, called over a tunnel. */
#ifndef ISOLA_CODEINT_H
#define ISOLA_CODEINT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../../common/err.h"

struct sandbox;

/*
 * The service (share/interp/server.py, written by the interp component) speaks E2B's
 * code-interpreter protocol on the sandbox's own loopback: POST /execute (NDJSON stream),
 * /contexts (create, list), /contexts/{id}/restart, DELETE /contexts/{id}, GET /health.
 * isolad embeds its files at build time (embed.py), writes them into the sandbox through
 * the agent's file ops on first use, starts it as a background process tagged
 * CODEINT_TAG, and reaches it only through agent tunnels (docs/code-interpreter.md).
 */
#define CODEINT_PORT	 49999		     /* E2B's JUPYTER_PORT */
#define CODEINT_DIR	 "/opt/isola-interp" /* where the files go inside the sandbox */
#define CODEINT_TAG	 "isola-interp"	     /* the process's tag in `isola ps` */
#define CODEINT_START_MS 90000		     /* bound on a start, python3 check to /health */

/*
 * Makes sure the service answers GET /health in s, shipping and starting it when it does
 * not (it died, was killed, or never ran). Starts in one sandbox are serialised; a caller
 * that finds it started by another returns at once. Fails with `failed_dependency` when
 * the template has no python3 with jupyter_client (the message names the template and
 * docs/code-interpreter.md), `unavailable` when it exited or did not answer within
 * CODEINT_START_MS (its output's tail in the message), `not_supported` when this isolad
 * was built without the service, or the sandbox's state (`conflict`). Any thread; blocks.
 */
int codeint_ensure(struct sandbox *s, struct isola_err **err);

/* One HTTP/1.1 exchange with the service through an agent tunnel. */
struct codeint_call;

/*
 * Sends `method path` with body (len bytes of JSON; NULL for none) to the service of s,
 * starting it first when nothing listens (codeint_ensure), and reads the response head.
 * *out is owned by the caller (codeint_call_free). Errors as codeint_ensure's, plus
 * `unavailable` for a service that does not answer HTTP. Any thread; blocks.
 */
int codeint_call_open(struct sandbox *s, const char *method, const char *path, const void *body,
		      size_t len, struct codeint_call **out, struct isola_err **err);

/* The response's HTTP status and Content-Type ("" when none; borrowed). */
unsigned codeint_call_status(const struct codeint_call *c);
const char *codeint_call_ctype(const struct codeint_call *c);

/*
 * The next bytes of the response body (de-chunked) into buf: > 0 bytes, 0 at the body's
 * end, -ETIMEDOUT when nothing came within timeout_ms (call again), -errno with err when
 * the tunnel failed or the service sent a malformed body.
 */
ssize_t codeint_call_read(struct codeint_call *c, void *buf, size_t cap, int timeout_ms,
			  struct isola_err **err);

/* The whole body (at most max bytes, else `too_large`), NUL-terminated, *out malloc'd. */
int codeint_call_body(struct codeint_call *c, size_t max, char **out, size_t *len,
		      struct isola_err **err);

/* Closes the tunnel and frees. NULL is fine. */
void codeint_call_free(struct codeint_call *c);

#endif
