/* SPDX-License-Identifier: Apache-2.0 */
/* store-internal: what the store's own files share (the connection, statement helpers). */
#ifndef ISOLA_STORE_INTERNAL_H
#define ISOLA_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "store.h"

struct store {
	sqlite3 *db;	      /* the connection, used under lock */
	pthread_mutex_t lock; /* serialises every statement */
	char path[512];	      /* for error messages */
};

/* Sets *err from the connection's last error, naming the store and `what`; returns -errno
 * (no_space for a full filesystem, unavailable for a read-only database). Lock held. */
int store_fail(struct store *st, struct isola_err **err, const char *what);

/* Prepares sql, binds text parameters (NULL allowed) and an optional real at index
 * real_idx (0 = none), runs it; returns rows changed or -errno. Takes the lock. */
int store_write(struct store *st, const char *what, const char *sql, const char *const *texts,
		int n_texts, int real_idx, double real_val, struct isola_err **err);

/* Binds text or NULL. */
void store_bind_text(sqlite3_stmt *s, int i, const char *v);
/* Copies a nullable text column into a fixed buffer / a heap string (NULL for NULL). */
void store_col_copy(sqlite3_stmt *s, int i, char *buf, size_t n);
char *store_col_dup(sqlite3_stmt *s, int i);

#endif
