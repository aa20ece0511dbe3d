/* SPDX-License-Identifier: Apache-2.0 */
/* tombstones: the store's rows for ended sandboxes (what core/tombstone.c keeps 24 h). */
#include "store-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_tombstone_fini(struct store_tombstone *t)
{
	free(t->body);
	t->body = NULL;
}

int store_tombstone_put(struct store *st, const struct store_tombstone *t, struct isola_err **err)
{
	const char *txt[] = {t->id, t->tenant, t->name, t->body ? t->body : "{}"};
	int r = store_write(st, "put tombstone",
			    "INSERT OR REPLACE INTO tombstones(id,tenant,name,body,ended_at) "
			    "VALUES(?1,?2,?3,?4,?5)",
			    txt, 4, 5, t->ended_at, err);

	return r < 0 ? r : 0;
}

/* Runs a SELECT id,tenant,name,ended_at,body with text parameters; rows into *out. */
static int tomb_query(struct store *st, const char *sql, const char *const *texts, int n_texts,
		      struct store_tombstone **out, size_t *n, struct isola_err **err)
{
	struct store_tombstone *rows = NULL;
	size_t used = 0, cap = 0;
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "list tombstones");
		goto out;
	}
	for (int i = 0; i < n_texts; i++)
		store_bind_text(s, i + 1, texts[i]);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_tombstone *t;

		if (used == cap) {
			struct store_tombstone *nr;

			cap = cap ? cap * 2 : 16;
			nr = realloc(rows, cap * sizeof(*rows));
			if (!nr) {
				ret = isola_err_set(err, ENOMEM, NULL,
						    "list tombstones: out of memory");
				goto out;
			}
			rows = nr;
		}
		t = &rows[used++];
		memset(t, 0, sizeof(*t));
		store_col_copy(s, 0, t->id, sizeof(t->id));
		store_col_copy(s, 1, t->tenant, sizeof(t->tenant));
		store_col_copy(s, 2, t->name, sizeof(t->name));
		t->ended_at = sqlite3_column_double(s, 3);
		t->body = store_col_dup(s, 4);
	}
	if (rc != SQLITE_DONE && ret == 0)
		ret = store_fail(st, err, "list tombstones");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	if (ret < 0) {
		for (size_t i = 0; i < used; i++)
			store_tombstone_fini(&rows[i]);
		free(rows);
		return ret;
	}
	*out = rows;
	*n = used;
	return 0;
}

int store_tombstone_find(struct store *st, const char *tenant, const char *ref,
			 struct store_tombstone *out, struct isola_err **err)
{
	const char *txt[] = {ref, tenant};
	struct store_tombstone *rows = NULL;
	size_t n = 0;
	int r = tomb_query(st,
			   "SELECT id,tenant,name,ended_at,body FROM tombstones "
			   "WHERE (id=?1 OR name=?1) AND (?2 IS NULL OR tenant=?2) "
			   "ORDER BY (id=?1) DESC, ended_at DESC LIMIT 1",
			   txt, 2, &rows, &n, err);

	if (r < 0)
		return r;
	if (n == 0) {
		free(rows);
		return -ENOENT;
	}
	*out = rows[0];
	free(rows);
	return 0;
}

int store_tombstone_list(struct store *st, const char *tenant, struct store_tombstone **out,
			 size_t *n, struct isola_err **err)
{
	const char *txt[] = {tenant};

	return tomb_query(st,
			  "SELECT id,tenant,name,ended_at,body FROM tombstones "
			  "WHERE (?1 IS NULL OR tenant=?1) ORDER BY ended_at DESC",
			  txt, 1, out, n, err);
}

int store_tombstone_delete(struct store *st, const char *id, struct isola_err **err)
{
	const char *txt[] = {id};
	int r = store_write(st, "delete tombstone", "DELETE FROM tombstones WHERE id=?1", txt, 1,
			    0, 0, err);

	return r < 0 ? r : 0;
}

int store_tombstone_trim(struct store *st, double before, unsigned keep, struct isola_err **err)
{
	char keep_s[16];
	const char *txt[] = {keep_s};
	int a, b;

	snprintf(keep_s, sizeof(keep_s), "%u", keep);
	a = store_write(st, "expire tombstones", "DELETE FROM tombstones WHERE ended_at < ?1",
			NULL, 0, 1, before, err);
	if (a < 0)
		return a;
	b = store_write(st, "trim tombstones",
			"DELETE FROM tombstones WHERE id NOT IN (SELECT id FROM tombstones "
			"ORDER BY ended_at DESC LIMIT CAST(?1 AS INTEGER))",
			txt, 1, 0, 0, err);
	return b < 0 ? b : a + b;
}
