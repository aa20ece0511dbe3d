/* SPDX-License-Identifier: Apache-2.0 */
/* expose: port exposure — the exposed-port registry and the exposure listener (docs/network.md). */
#ifndef ISOLA_EXPOSE_H
#define ISOLA_EXPOSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"

struct core;
struct sandbox;
struct expose;

#define EXPOSE_DEFAULT_DOMAIN	 "isola.localhost"
#define EXPOSE_DEFAULT_MAX_CONNS 64 /* concurrent tunnelled connections per sandbox */

struct expose_config {
	const char *listen_addr;  /* "127.0.0.1:PORT" ("HOST:0" = any free port); NULL = off */
	const char *domain;	  /* Host routing domain; NULL = EXPOSE_DEFAULT_DOMAIN */
	unsigned max_conns;	  /* per sandbox; 0 = EXPOSE_DEFAULT_MAX_CONNS */
	unsigned head_timeout_ms; /* time allowed for a request head; 0 = 10000 */
};

/*
 * Binds the exposure listener's socket (isolad does it before anything takes a
 * kernel-picked port: api.h). With listen_addr NULL nothing listens, *out is NULL and the
 * port routes answer `unavailable`. Fails with `invalid` for a bad address or domain, the
 * bind error otherwise; nothing is left listening then.
 */
int expose_bind(const struct expose_config *cfg, struct expose **out, struct isola_err **err);

/*
 * Starts serving what expose_bind() bound (one accept thread, one thread per connection
 * plus one per tunnelled connection's upload direction). x NULL (listener off) is fine.
 * Only one may run per process (the port routes find it). Called from the main thread;
 * on failure the caller still owns x (expose_stop).
 */
int expose_start(struct core *core, struct expose *x, struct isola_err **err);

/* Stops accepting, ends every tunnel and joins all threads. NULL is fine. Call before
 * core_free. */
void expose_stop(struct expose *x);

/* The bound address "HOST:PORT" (borrowed), or NULL when the listener is off. */
const char *expose_listen_addr(void);

/*
 * The port registry, for api/ports.c (any thread). Exposures are stored in the sandbox's
 * directory (`ports.json`, 0600) so they survive an isolad restart and go with the sandbox.
 * add: port 1..65535, public; an existing exposure of the port is replaced (same token).
 * *out is the exposure object {port, public, url, path_url, token, created_at, ...counters}.
 * list: {"ports":[...], "max_connections", "connections_active", "bytes_in", "bytes_out"}.
 * remove: `not_found` when the port is not exposed; live connections to it are cut.
 * All fail `unavailable` when the listener is off.
 */
int expose_port_add(struct core *core, struct sandbox *s, int port, bool public, json_t **out,
		    struct isola_err **err);
int expose_port_list(struct core *core, struct sandbox *s, json_t **out, struct isola_err **err);
int expose_port_remove(struct core *core, struct sandbox *s, int port, struct isola_err **err);

/*
 * Makes every port of s that has no exposure of its own public on the listener (the
 * sandbox's E2B-style `<port>-<id>.<domain>` names; an explicit exposure still decides for
 * its port). Used for sandboxes made through the E2B API, whose ports E2B serves publicly.
 * `unavailable` when the listener is off. Any thread.
 */
int expose_port_all_public(struct sandbox *s, struct isola_err **err);

/* True when port of sandbox id is reachable without a token through the listener: the
 * sandbox was made through the E2B API (every port public) or the port has a public
 * exposure. False when the listener is off. Any thread. */
bool expose_port_is_public(const char *id, int port);

/* "<domain>:<port>" of the running listener (just "<domain>" on port 80) into out, the
 * suffix E2B's getHost() puts after `<port>-<id>.`. 0, -ENOTSUP when off, -ENAMETOOLONG. */
int expose_host_suffix(char *out, size_t n);

#endif
