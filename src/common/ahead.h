/* SPDX-License-Identifier: Apache-2.0 */
/* ahead: keeps N things made ahead of their use (network slots, writable layers): a filler
 * thread makes them while fewer than N are ready; a taker gets one, or none and makes its own. */
#ifndef ISOLA_AHEAD_H
#define ISOLA_AHEAD_H

#include <stdbool.h>

#include "err.h"

struct ahead;

/* Makes one thing (*out) for the filler, or -errno with *err. */
typedef int (*ahead_make_fn)(void *ud, void **out, struct isola_err **err);
/* Frees one thing that was never taken (ahead_stop). */
typedef void (*ahead_drop_fn)(void *ud, void *thing);

/*
 * Starts a filler thread that keeps n things ready, made by make (called without any lock,
 * one at a time). After a failure it waits a second before trying again, logging each
 * distinct failure once (as "cannot make a <what> ahead: ..."). n == 0: no thread, every
 * take finds nothing. NULL when out of memory or the thread cannot start (the caller then
 * makes everything on the spot).
 */
struct ahead *ahead_start(const char *what, unsigned n, ahead_make_fn make, ahead_drop_fn drop,
			  void *ud);

/* A ready thing (the caller owns it) or NULL when none is ready (a NULL a: always NULL).
 * The filler makes another behind it. Any thread. */
void *ahead_take(struct ahead *a);

/* Things ready now (0 for a NULL a). Any thread. */
unsigned ahead_ready(struct ahead *a);

/* Stops the filler (waiting for a make in progress) and drops every ready thing. */
void ahead_stop(struct ahead *a);

#endif
