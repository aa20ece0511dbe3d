/* SPDX-License-Identifier: Apache-2.0 */
/* store: isolad's durable state in SQLite (WAL) — the source of truth for intent. */
#ifndef ISOLA_STORE_H
#define ISOLA_STORE_H

#include <stddef.h>

#include "../../common/err.h"

/*
 * One connection shared by isolad's threads, serialised by an internal mutex.
 * Every write is its own transaction, durable (synchronous=FULL) before the call
 * returns, so a `kill -9` right after a call loses nothing the call reported done.
 */
struct store;

/* A sandbox row. Strings are heap-owned by the row (store_sandbox_fini frees them). */
struct store_sandbox {
	char id[40];	   /* primary key */
	char state[16];	   /* creating|running|error|destroying */
	char tier[16];	   /* process|microvm */
	char template[65]; /* template id */
	int uid_slot;	   /* index of the host uid range, unique among rows */
	char *spec;	   /* JSON: limits, env, labels, workdir, user (core's format) */
	char *tier_state;  /* JSON the tier saved for reattach, or NULL */
	char *error;	   /* reason when state is error, or NULL */
	double created_at; /* unix time */
	double expires_at; /* unix time, 0 = never */
};

void store_sandbox_fini(struct store_sandbox *r);

/* Opens (creating if needed) the database at path and migrates the schema. */
int store_open(const char *path, struct store **out, struct isola_err **err);
void store_close(struct store *st);

/* Inserts the row, or updates the one with r->id; a uid_slot held by another row fails. */
int store_sandbox_put(struct store *st, const struct store_sandbox *r, struct isola_err **err);

/* Updates state and error (error may be NULL) of an existing row; -ENOENT if none. */
int store_sandbox_set_state(struct store *st, const char *id, const char *state, const char *error,
			    struct isola_err **err);

/* Updates the tier's saved state of an existing row. */
int store_sandbox_set_tier_state(struct store *st, const char *id, const char *tier_state,
				 struct isola_err **err);

/* Updates expires_at of an existing row. */
int store_sandbox_set_expiry(struct store *st, const char *id, double expires_at,
			     struct isola_err **err);

/* Deletes a row; deleting a missing row is not an error. */
int store_sandbox_delete(struct store *st, const char *id, struct isola_err **err);

/* All rows, oldest first. *out is a heap array of *n rows; free each with
 * store_sandbox_fini() and the array with free(). */
int store_sandbox_list(struct store *st, struct store_sandbox **out, size_t *n,
		       struct isola_err **err);

/* Small key/value settings (e.g. the schema version). *val is heap-owned, NULL if absent. */
int store_meta_get(struct store *st, const char *key, char **val, struct isola_err **err);
int store_meta_set(struct store *st, const char *key, const char *val, struct isola_err **err);

#endif
