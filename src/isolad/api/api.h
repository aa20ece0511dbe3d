/* SPDX-License-Identifier: Apache-2.0 */
/* api: isola's native HTTP API (/v1, docs/openapi.yaml) on a unix socket and optional TCP. */
#ifndef ISOLA_API_H
#define ISOLA_API_H

#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"

struct core;
struct api_server;

/* Listener settings. Strings are borrowed for the duration of api_server_bind(). */
struct api_config {
	const char *socket_path;   /* unix socket, e.g. /run/isola/isolad.sock (required) */
	const char *listen_addr;   /* "127.0.0.1:PORT" / "[::1]:PORT" for TCP+token, or NULL */
	uint64_t max_upload_bytes; /* cap on file/archive/template uploads, 0 = 1 GiB */
	const char *spool_dir;	   /* where template uploads are spooled (0700, created);
				      NULL = "/var/lib/isola/tmp" */
	unsigned idle_timeout_s;   /* a connection that sends nothing this long is closed
				      (slow or stalled clients); 0 = 120 s */
	long socket_gid;	   /* >= 0: the socket is 0660 with this group (its members
				      are the operator, like root), and its directory g+x;
				      -1 = 0600 */
	bool console_off;	   /* do not serve the web console at / (docs/console.md) */
};

/*
 * Creates the unix socket (parent directory 0700 created if missing, a stale socket
 * replaced, the socket chmod 0600 — or 0660 to socket_gid — before listen) and, if
 * listen_addr is set, the TCP listener, and returns them in *out without serving yet: call
 * it before anything that takes kernel-picked ports. Returns 0, or -errno with *err naming
 * what failed; nothing is left listening on failure.
 */
int api_server_bind(const struct api_config *cfg, struct api_server **out, struct isola_err **err);

/*
 * Starts serving what api_server_bind() bound: libmicrohttpd daemons, one thread per
 * connection; TCP requires `Authorization: Bearer <core_api_token(c)>`. `c` is borrowed and
 * must outlive the server. Returns 0, or -errno with *err set and s freed (nothing left
 * listening). Call from the main thread.
 */
int api_server_start(struct core *c, struct api_server *s, struct isola_err **err);

/* Stops accepting, ends WebSocket sessions, waits for in-flight requests, removes the
 * socket file and frees s; a server bound and never started is closed and freed. NULL is
 * fine. Call from the thread that started it. */
void api_server_stop(struct api_server *s);

#endif
