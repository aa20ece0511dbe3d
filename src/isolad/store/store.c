/* SPDX-License-Identifier: Apache-2.0 */
/* store: isolad's durable state in SQLite (WAL) — the source of truth for intent. */
#include "store.h"
#include "store-internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define STORE_SCHEMA_VERSION "3"

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS sandboxes("
	" id TEXT PRIMARY KEY,"
	" state TEXT NOT NULL,"
	" tier TEXT NOT NULL,"
	" template TEXT NOT NULL,"
	" uid_slot INTEGER NOT NULL UNIQUE,"
	" spec TEXT NOT NULL,"
	" tier_state TEXT,"
	" error TEXT,"
	" created_at REAL NOT NULL,"
	" expires_at REAL NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS tenants("
	" name TEXT PRIMARY KEY,"
	" quota TEXT NOT NULL,"
	" created_at REAL NOT NULL);"
	"CREATE TABLE IF NOT EXISTS tokens("
	" id TEXT PRIMARY KEY,"
	" tenant TEXT NOT NULL,"
	" role TEXT NOT NULL,"
	" name TEXT NOT NULL,"
	" salt TEXT NOT NULL,"
	" hash TEXT NOT NULL,"
	" created_at REAL NOT NULL,"
	" last_used REAL NOT NULL DEFAULT 0,"
	" revoked_at REAL NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS template_owners("
	" template TEXT PRIMARY KEY,"
	" tenant TEXT NOT NULL);"
	/* Schema 3: snapshots (named, fork-internal, hibernation images). */
	"CREATE TABLE IF NOT EXISTS snapshots("
	" id TEXT PRIMARY KEY,"
	" name TEXT NOT NULL,"
	" tenant TEXT NOT NULL,"
	" kind TEXT NOT NULL,"
	" state TEXT NOT NULL,"
	" tier TEXT NOT NULL,"
	" template TEXT NOT NULL,"
	" source TEXT NOT NULL,"
	" parent TEXT NOT NULL DEFAULT '',"
	" level INTEGER NOT NULL DEFAULT 0,"
	" size INTEGER NOT NULL DEFAULT 0,"
	" spec TEXT NOT NULL,"
	" created_at REAL NOT NULL);"
	"CREATE UNIQUE INDEX IF NOT EXISTS snapshots_name ON snapshots(tenant, name)"
	" WHERE kind = 'named';"
	/* Records of ended sandboxes (core/tombstone.c). */
	"CREATE TABLE IF NOT EXISTS tombstones("
	" id TEXT PRIMARY KEY,"
	" tenant TEXT NOT NULL,"
	" name TEXT NOT NULL DEFAULT '',"
	" ended_at REAL NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS tombstones_ended ON tombstones(ended_at);";

/* Schema 1 -> 2: sandboxes gained their tenant; older rows belong to `default`. */
static const char migrate_tenant_sql[] =
	"ALTER TABLE sandboxes ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';";

static int store_has_column(sqlite3 *db, const char *table, const char *col)
{
	sqlite3_stmt *s = NULL;
	int found = 0;

	if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name=?2", -1,
			       &s, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(s, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, col, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW)
		found = sqlite3_column_int(s, 0) > 0;
	else
		found = -1;
	sqlite3_finalize(s);
	return found;
}

/*
 * Why the database's files cannot be written, as an errno: EROFS/EPERM/EACCES when one of
 * them (or the filesystem) refuses writes, ENOSPC when the filesystem has no free block;
 * otherwise `fallback`. Reads only metadata, needs no space.
 */
static int store_probe_unwritable(const char *path, int fallback)
{
	static const char *const suffix[] = {"", "-wal", "-shm"};
	char p[600];
	struct statvfs sv;

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		if (access(p, W_OK) < 0 && (errno == EROFS || errno == EPERM || errno == EACCES))
			return errno;
	}
	if (statvfs(path, &sv) == 0 && sv.f_bavail == 0)
		return ENOSPC;
	return fallback;
}

/*
 * Names why the database refused a write, so the API can answer 507 or 503 (api/errors.c)
 * instead of a bare 500: SQLite reports a full filesystem as SQLITE_FULL or as an I/O error
 * whose system errno is ENOSPC/EDQUOT (a WAL or shm page that could not be allocated), and a
 * database it may not write as SQLITE_READONLY or an I/O error with EROFS/EPERM/EACCES (a
 * read-only mount, an immutable file).
 */
int store_fail(struct store *st, struct isola_err **err, const char *what)
{
	int code = sqlite3_extended_errcode(st->db);
	int sys = sqlite3_system_errno(st->db);
	int prim = code & 0xff;

	/* SQLite's system errno is the thread's errno when it noticed, not always the failed
	 * write's: for an I/O error, ask the filesystem what stands in the way. */
	if (prim == SQLITE_IOERR)
		sys = store_probe_unwritable(st->path, sys);

	if (prim == SQLITE_FULL || (prim == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT)))
		return isola_err_set(
			err, ENOSPC, "no_space",
			"store `%s`: %s: the state filesystem is full (ENOSPC: %s); free space "
			"on it and retry",
			st->path, what, sqlite3_errmsg(st->db));
	if (prim == SQLITE_READONLY ||
	    (prim == SQLITE_IOERR && (sys == EROFS || sys == EPERM || sys == EACCES)))
		return isola_err_set(err, EROFS, "unavailable",
				     "store `%s`: %s: the database is read-only or not writable "
				     "(%s%s%s); make it writable and retry",
				     st->path, what, sqlite3_errmsg(st->db), sys ? ": " : "",
				     sys ? strerror(sys) : "");
	return isola_err_set(err, prim == SQLITE_BUSY ? EBUSY : EIO, NULL, "store `%s`: %s: %s",
			     st->path, what, sqlite3_errmsg(st->db));
}

int store_open(const char *path, struct store **out, struct isola_err **err)
{
	struct store *st = calloc(1, sizeof(*st));
	char *msg = NULL;

	if (!st)
		return isola_err_set(err, ENOMEM, NULL, "store `%s`: out of memory", path);
	snprintf(st->path, sizeof(st->path), "%s", path);
	pthread_mutex_init(&st->lock, NULL);
	if (sqlite3_open_v2(path, &st->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK) {
		int r = isola_err_set(err, EIO, NULL, "open store `%s`: %s", path,
				      st->db ? sqlite3_errmsg(st->db) : "out of memory");
		store_close(st);
		return r;
	}
	sqlite3_busy_timeout(st->db, 5000);
	/* The WAL and its index outlive a clean stop (as they outlive a crash): the next start
	 * then opens the store without allocating them, which a full filesystem would refuse. */
	{
		int one = 1;

		sqlite3_file_control(st->db, "main", SQLITE_FCNTL_PERSIST_WAL, &one);
	}
	/* locking_mode=EXCLUSIVE before the first access: isolad is the store's only user (it
	 * holds isolad.lock), and in exclusive mode SQLite keeps the WAL index in heap memory
	 * instead of the mmapped `-shm` file. A shm page a full filesystem could not back raised
	 * SIGBUS in isolad at start (reading the WAL index on restart with the state filesystem
	 * full: tests/integration/test_state_faults.py). Tools that open the store while isolad is
	 * stopped (sqlite3, the tests) use the ordinary shared mode. */
	if (sqlite3_exec(st->db,
			 "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; "
			 "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
			 NULL, NULL, &msg) != SQLITE_OK ||
	    sqlite3_exec(st->db, schema_sql, NULL, NULL, &msg) != SQLITE_OK ||
	    (store_has_column(st->db, "sandboxes", "tenant") == 0 &&
	     sqlite3_exec(st->db, migrate_tenant_sql, NULL, NULL, &msg) != SQLITE_OK)) {
		int r = store_fail(st, err, "open");

		sqlite3_free(msg);
		store_close(st);
		return r;
	}
	/* Written only when it changes: a start on a full state filesystem (where no write can
	 * succeed) must still be able to open the store, re-attach and refuse what needs space. */
	{
		char *ver = NULL;
		int r = store_meta_get(st, "schema_version", &ver, err);

		if (r == 0 && (!ver || strcmp(ver, STORE_SCHEMA_VERSION) != 0))
			r = store_meta_set(st, "schema_version", STORE_SCHEMA_VERSION, err);
		free(ver);
		if (r < 0) {
			store_close(st);
			return r;
		}
	}
	*out = st;
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	if (st->db)
		sqlite3_close(st->db);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

void store_sandbox_fini(struct store_sandbox *r)
{
	free(r->spec);
	free(r->tier_state);
	free(r->error);
	r->spec = r->tier_state = r->error = NULL;
}

/* Binds text or NULL. */
void store_bind_text(sqlite3_stmt *s, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(s, i);
}

/* Contract in store-internal.h. */
int store_write(struct store *st, const char *what, const char *sql, const char *const *texts,
		int n_texts, int real_idx, double real_val, struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int r;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		r = store_fail(st, err, what);
		goto out;
	}
	for (int i = 0; i < n_texts; i++)
		store_bind_text(s, i + 1, texts[i]);
	if (real_idx)
		sqlite3_bind_double(s, real_idx, real_val);
	if (sqlite3_step(s) != SQLITE_DONE) {
		r = store_fail(st, err, what);
		goto out;
	}
	r = sqlite3_changes(st->db);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return r;
}

int store_sandbox_put(struct store *st, const struct store_sandbox *r, struct isola_err **err)
{
	static const char sql[] =
		"INSERT INTO sandboxes(id,state,tier,template,spec,tier_state,error,"
		"uid_slot,created_at,expires_at,tenant) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) "
		"ON CONFLICT(id) DO UPDATE SET state=?2, tier=?3, template=?4, spec=?5, "
		"tier_state=?6, error=?7, uid_slot=?8, created_at=?9, expires_at=?10, tenant=?11";
	sqlite3_stmt *s = NULL;
	int ret = 0;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "put sandbox");
		goto out;
	}
	store_bind_text(s, 1, r->id);
	store_bind_text(s, 2, r->state);
	store_bind_text(s, 3, r->tier);
	store_bind_text(s, 4, r->template);
	store_bind_text(s, 5, r->spec ? r->spec : "{}");
	store_bind_text(s, 6, r->tier_state);
	store_bind_text(s, 7, r->error);
	sqlite3_bind_int(s, 8, r->uid_slot);
	sqlite3_bind_double(s, 9, r->created_at);
	sqlite3_bind_double(s, 10, r->expires_at);
	store_bind_text(s, 11, r->tenant[0] ? r->tenant : "default");
	if (sqlite3_step(s) != SQLITE_DONE)
		ret = store_fail(st, err, "put sandbox");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

/* Reports -ENOENT when an update touched no row of `what` ("sandbox", "snapshot"). */
static int store_expect(int changed, const char *what, const char *id, struct isola_err **err)
{
	if (changed < 0)
		return changed;
	if (changed == 0)
		return isola_err_set(err, ENOENT, "not_found", "%s `%s` not in store", what, id);
	return 0;
}

#define store_expect_row(changed, id, err) store_expect(changed, "sandbox", id, err)

int store_sandbox_set_state(struct store *st, const char *id, const char *state, const char *error,
			    struct isola_err **err)
{
	const char *t[] = {state, error, id};

	return store_expect_row(store_write(st, "set sandbox state",
					    "UPDATE sandboxes SET state=?1, error=?2 WHERE id=?3",
					    t, 3, 0, 0, err),
				id, err);
}

int store_sandbox_set_tier_state(struct store *st, const char *id, const char *tier_state,
				 struct isola_err **err)
{
	const char *t[] = {tier_state, id};

	return store_expect_row(store_write(st, "set tier state",
					    "UPDATE sandboxes SET tier_state=?1 WHERE id=?2", t, 2,
					    0, 0, err),
				id, err);
}

int store_sandbox_set_expiry(struct store *st, const char *id, double expires_at,
			     struct isola_err **err)
{
	const char *t[] = {id};

	return store_expect_row(store_write(st, "set expiry",
					    "UPDATE sandboxes SET expires_at=?2 WHERE id=?1", t, 1,
					    2, expires_at, err),
				id, err);
}

int store_sandbox_delete(struct store *st, const char *id, struct isola_err **err)
{
	const char *t[] = {id};
	int r = store_write(st, "delete sandbox", "DELETE FROM sandboxes WHERE id=?1", t, 1, 0, 0,
			    err);

	return r < 0 ? r : 0;
}

/* Copies a nullable text column into a fixed buffer / a heap string. */
void store_col_copy(sqlite3_stmt *s, int i, char *buf, size_t n)
{
	const unsigned char *v = sqlite3_column_text(s, i);

	snprintf(buf, n, "%s", v ? (const char *)v : "");
}

char *store_col_dup(sqlite3_stmt *s, int i)
{
	const unsigned char *v = sqlite3_column_text(s, i);

	return v ? strdup((const char *)v) : NULL;
}

int store_sandbox_list(struct store *st, struct store_sandbox **out, size_t *n,
		       struct isola_err **err)
{
	static const char sql[] = "SELECT id,state,tier,template,spec,tier_state,error,uid_slot,"
				  "created_at,expires_at,tenant FROM sandboxes ORDER BY created_at";
	struct store_sandbox *rows = NULL;
	size_t used = 0, cap = 0;
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "list sandboxes");
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_sandbox *r;

		if (used == cap) {
			struct store_sandbox *nr;

			cap = cap ? cap * 2 : 16;
			nr = realloc(rows, cap * sizeof(*rows));
			if (!nr) {
				ret = isola_err_set(err, ENOMEM, NULL,
						    "list sandboxes: out of memory");
				goto out;
			}
			rows = nr;
		}
		r = &rows[used++];
		memset(r, 0, sizeof(*r));
		store_col_copy(s, 0, r->id, sizeof(r->id));
		store_col_copy(s, 1, r->state, sizeof(r->state));
		store_col_copy(s, 2, r->tier, sizeof(r->tier));
		store_col_copy(s, 3, r->template, sizeof(r->template));
		r->spec = store_col_dup(s, 4);
		r->tier_state = store_col_dup(s, 5);
		r->error = store_col_dup(s, 6);
		r->uid_slot = sqlite3_column_int(s, 7);
		r->created_at = sqlite3_column_double(s, 8);
		r->expires_at = sqlite3_column_double(s, 9);
		store_col_copy(s, 10, r->tenant, sizeof(r->tenant));
	}
	if (rc != SQLITE_DONE && ret == 0)
		ret = store_fail(st, err, "list sandboxes");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	if (ret < 0) {
		for (size_t i = 0; i < used; i++)
			store_sandbox_fini(&rows[i]);
		free(rows);
		return ret;
	}
	*out = rows;
	*n = used;
	return 0;
}

int store_meta_get(struct store *st, const char *key, char **val, struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	*val = NULL;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE key=?1", -1, &s, NULL) !=
	    SQLITE_OK) {
		ret = store_fail(st, err, "get meta");
		goto out;
	}
	store_bind_text(s, 1, key);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*val = store_col_dup(s, 0);
	else if (rc != SQLITE_DONE)
		ret = store_fail(st, err, "get meta");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int store_meta_set(struct store *st, const char *key, const char *val, struct isola_err **err)
{
	const char *t[] = {key, val};
	int r = store_write(st, "set meta", "INSERT OR REPLACE INTO meta(key,value) VALUES(?1,?2)",
			    t, 2, 0, 0, err);

	return r < 0 ? r : 0;
}

/* --- tenancy ------------------------------------------------------------------------- */

void store_tenant_fini(struct store_tenant *t)
{
	free(t->quota);
	t->quota = NULL;
}

int store_tenant_add(struct store *st, const struct store_tenant *t, struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO tenants(name,quota,created_at) VALUES(?1,?2,?3)", -1,
			       &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "add tenant");
		goto out;
	}
	store_bind_text(s, 1, t->name);
	store_bind_text(s, 2, t->quota ? t->quota : "{}");
	sqlite3_bind_double(s, 3, t->created_at);
	rc = sqlite3_step(s);
	if (rc == SQLITE_CONSTRAINT)
		ret = isola_err_set(err, EEXIST, "exists", "tenant `%s` already exists", t->name);
	else if (rc != SQLITE_DONE)
		ret = store_fail(st, err, "add tenant");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int store_tenant_set_quota(struct store *st, const char *name, const char *quota,
			   struct isola_err **err)
{
	const char *t[] = {quota, name};
	int r = store_write(st, "set tenant quota", "UPDATE tenants SET quota=?1 WHERE name=?2", t,
			    2, 0, 0, err);

	if (r == 0)
		return isola_err_set(err, ENOENT, "not_found", "tenant `%s` not found", name);
	return r < 0 ? r : 0;
}

static void tenant_from_row(sqlite3_stmt *s, struct store_tenant *t)
{
	memset(t, 0, sizeof(*t));
	store_col_copy(s, 0, t->name, sizeof(t->name));
	t->quota = store_col_dup(s, 1);
	t->created_at = sqlite3_column_double(s, 2);
}

int store_tenant_get(struct store *st, const char *name, struct store_tenant *out,
		     struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT name,quota,created_at FROM tenants WHERE name=?1",
			       -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "get tenant");
		goto out;
	}
	store_bind_text(s, 1, name);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		tenant_from_row(s, out);
	else if (rc == SQLITE_DONE)
		ret = isola_err_set(err, ENOENT, "not_found", "tenant `%s` not found", name);
	else
		ret = store_fail(st, err, "get tenant");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int store_tenant_list(struct store *st, struct store_tenant **out, size_t *n,
		      struct isola_err **err)
{
	struct store_tenant *rows = NULL;
	size_t used = 0, cap = 0;
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT name,quota,created_at FROM tenants ORDER BY name",
			       -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "list tenants");
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (used == cap) {
			struct store_tenant *nr;

			cap = cap ? cap * 2 : 8;
			nr = realloc(rows, cap * sizeof(*rows));
			if (!nr) {
				ret = isola_err_set(err, ENOMEM, NULL,
						    "list tenants: out of memory");
				goto out;
			}
			rows = nr;
		}
		tenant_from_row(s, &rows[used++]);
	}
	if (rc != SQLITE_DONE && ret == 0)
		ret = store_fail(st, err, "list tenants");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	if (ret < 0) {
		for (size_t i = 0; i < used; i++)
			store_tenant_fini(&rows[i]);
		free(rows);
		return ret;
	}
	*out = rows;
	*n = used;
	return 0;
}

int store_tenant_delete(struct store *st, const char *name, struct isola_err **err)
{
	const char *t[] = {name};
	int r;

	/* Tokens first: a crash half-way never leaves live tokens of a removed tenant. */
	r = store_write(st, "delete tenant", "DELETE FROM tokens WHERE tenant=?1", t, 1, 0, 0, err);
	if (r < 0)
		return r;
	r = store_write(st, "delete tenant", "DELETE FROM template_owners WHERE tenant=?1", t, 1, 0,
			0, err);
	if (r < 0)
		return r;
	r = store_write(st, "delete tenant", "DELETE FROM tenants WHERE name=?1", t, 1, 0, 0, err);
	if (r == 0)
		return isola_err_set(err, ENOENT, "not_found", "tenant `%s` not found", name);
	return r < 0 ? r : 0;
}

int store_token_add(struct store *st, const struct store_token *t, struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int ret = 0;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO tokens(id,tenant,role,name,salt,hash,created_at) "
			       "VALUES(?1,?2,?3,?4,?5,?6,?7)",
			       -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "add token");
		goto out;
	}
	store_bind_text(s, 1, t->id);
	store_bind_text(s, 2, t->tenant);
	store_bind_text(s, 3, t->role);
	store_bind_text(s, 4, t->name);
	store_bind_text(s, 5, t->salt);
	store_bind_text(s, 6, t->hash);
	sqlite3_bind_double(s, 7, t->created_at);
	if (sqlite3_step(s) != SQLITE_DONE)
		ret = store_fail(st, err, "add token");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

#define TOKEN_COLS "id,tenant,role,name,salt,hash,created_at,last_used,revoked_at"

static void token_from_row(sqlite3_stmt *s, struct store_token *t)
{
	memset(t, 0, sizeof(*t));
	store_col_copy(s, 0, t->id, sizeof(t->id));
	store_col_copy(s, 1, t->tenant, sizeof(t->tenant));
	store_col_copy(s, 2, t->role, sizeof(t->role));
	store_col_copy(s, 3, t->name, sizeof(t->name));
	store_col_copy(s, 4, t->salt, sizeof(t->salt));
	store_col_copy(s, 5, t->hash, sizeof(t->hash));
	t->created_at = sqlite3_column_double(s, 6);
	t->last_used = sqlite3_column_double(s, 7);
	t->revoked_at = sqlite3_column_double(s, 8);
}

int store_token_get(struct store *st, const char *id, struct store_token *out,
		    struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT " TOKEN_COLS " FROM tokens WHERE id=?1", -1, &s,
			       NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "get token");
		goto out;
	}
	store_bind_text(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		token_from_row(s, out);
	else if (rc == SQLITE_DONE)
		ret = isola_err_set(err, ENOENT, "not_found", "token `%s` not found", id);
	else
		ret = store_fail(st, err, "get token");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int store_token_list(struct store *st, const char *tenant, struct store_token **out, size_t *n,
		     struct isola_err **err)
{
	struct store_token *rows = NULL;
	size_t used = 0, cap = 0;
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db,
			       "SELECT " TOKEN_COLS " FROM tokens WHERE ?1 IS NULL OR tenant=?1 "
			       "ORDER BY created_at",
			       -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "list tokens");
		goto out;
	}
	store_bind_text(s, 1, tenant);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (used == cap) {
			struct store_token *nr;

			cap = cap ? cap * 2 : 8;
			nr = realloc(rows, cap * sizeof(*rows));
			if (!nr) {
				ret = isola_err_set(err, ENOMEM, NULL,
						    "list tokens: out of memory");
				goto out;
			}
			rows = nr;
		}
		token_from_row(s, &rows[used++]);
	}
	if (rc != SQLITE_DONE && ret == 0)
		ret = store_fail(st, err, "list tokens");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	if (ret < 0) {
		free(rows);
		return ret;
	}
	*out = rows;
	*n = used;
	return 0;
}

int store_token_revoke(struct store *st, const char *id, double when, struct isola_err **err)
{
	const char *t[] = {id};
	int r = store_write(st, "revoke token",
			    "UPDATE tokens SET revoked_at=?2 WHERE id=?1 AND revoked_at=0", t, 1, 2,
			    when, err);

	if (r == 0)
		return isola_err_set(err, ENOENT, "not_found", "token `%s` not found", id);
	return r < 0 ? r : 0;
}

int store_token_touch(struct store *st, const char *id, double when, struct isola_err **err)
{
	const char *t[] = {id};
	int r = store_write(st, "touch token", "UPDATE tokens SET last_used=?2 WHERE id=?1", t, 1,
			    2, when, err);

	return r < 0 ? r : 0;
}

int store_template_owner_set(struct store *st, const char *template, const char *tenant,
			     struct isola_err **err)
{
	const char *t[] = {template, tenant};
	int r = store_write(st, "set template owner",
			    "INSERT OR REPLACE INTO template_owners(template,tenant) VALUES(?1,?2)",
			    t, 2, 0, 0, err);

	return r < 0 ? r : 0;
}

int store_template_owner_get(struct store *st, const char *template, char *tenant, size_t n,
			     struct isola_err **err)
{
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	tenant[0] = '\0';
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT tenant FROM template_owners WHERE template=?1", -1,
			       &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "get template owner");
		goto out;
	}
	store_bind_text(s, 1, template);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		store_col_copy(s, 0, tenant, n);
	else if (rc != SQLITE_DONE)
		ret = store_fail(st, err, "get template owner");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int store_template_owner_delete(struct store *st, const char *template, struct isola_err **err)
{
	const char *t[] = {template};
	int r = store_write(st, "delete template owner",
			    "DELETE FROM template_owners WHERE template=?1", t, 1, 0, 0, err);

	return r < 0 ? r : 0;
}

/* --- snapshots ------------------------------------------------------------------------ */

void store_snapshot_fini(struct store_snapshot *r)
{
	free(r->spec);
	r->spec = NULL;
}

int store_snapshot_add(struct store *st, const struct store_snapshot *r, struct isola_err **err)
{
	static const char sql[] =
		"INSERT INTO snapshots(id,name,tenant,kind,state,tier,template,source,parent,level,"
		"size,spec,created_at) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)";
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "add snapshot");
		goto out;
	}
	store_bind_text(s, 1, r->id);
	store_bind_text(s, 2, r->name);
	store_bind_text(s, 3, r->tenant);
	store_bind_text(s, 4, r->kind);
	store_bind_text(s, 5, r->state);
	store_bind_text(s, 6, r->tier);
	store_bind_text(s, 7, r->template);
	store_bind_text(s, 8, r->source);
	store_bind_text(s, 9, r->parent);
	sqlite3_bind_int(s, 10, r->level);
	sqlite3_bind_int64(s, 11, (sqlite3_int64)r->size);
	store_bind_text(s, 12, r->spec ? r->spec : "{}");
	sqlite3_bind_double(s, 13, r->created_at);
	rc = sqlite3_step(s);
	if (rc == SQLITE_CONSTRAINT)
		ret = isola_err_set(err, EEXIST, "exists", "snapshot `%s` already exists",
				    r->name[0] ? r->name : r->id);
	else if (rc != SQLITE_DONE)
		ret = store_fail(st, err, "add snapshot");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int store_snapshot_set_ready(struct store *st, const char *id, uint64_t size, int level,
			     struct isola_err **err)
{
	char sz[24], lv[12];
	const char *t[] = {id, sz, lv};

	snprintf(sz, sizeof(sz), "%llu", (unsigned long long)size);
	snprintf(lv, sizeof(lv), "%d", level);
	return store_expect(
		store_write(st, "set snapshot ready",
			    "UPDATE snapshots SET state='ready', size=CAST(?2 AS INTEGER), "
			    "level=CAST(?3 AS INTEGER) WHERE id=?1",
			    t, 3, 0, 0, err),
		"snapshot", id, err);
}

int store_snapshot_set_state(struct store *st, const char *id, const char *state,
			     struct isola_err **err)
{
	const char *t[] = {id, state};

	return store_expect(store_write(st, "set snapshot state",
					"UPDATE snapshots SET state=?2 WHERE id=?1", t, 2, 0, 0,
					err),
			    "snapshot", id, err);
}

int store_snapshot_delete(struct store *st, const char *id, struct isola_err **err)
{
	const char *t[] = {id};
	int r = store_write(st, "delete snapshot", "DELETE FROM snapshots WHERE id=?1", t, 1, 0, 0,
			    err);

	return r < 0 ? r : 0;
}

int store_snapshot_list(struct store *st, struct store_snapshot **out, size_t *n,
			struct isola_err **err)
{
	static const char sql[] = "SELECT id,name,tenant,kind,state,tier,template,source,parent,"
				  "level,size,spec,created_at FROM snapshots ORDER BY created_at";
	struct store_snapshot *rows = NULL;
	size_t used = 0, cap = 0;
	sqlite3_stmt *s = NULL;
	int ret = 0, rc;

	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		ret = store_fail(st, err, "list snapshots");
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_snapshot *r;

		if (used == cap) {
			struct store_snapshot *nr;

			cap = cap ? cap * 2 : 16;
			nr = realloc(rows, cap * sizeof(*rows));
			if (!nr) {
				ret = isola_err_set(err, ENOMEM, NULL,
						    "list snapshots: out of memory");
				goto out;
			}
			rows = nr;
		}
		r = &rows[used++];
		memset(r, 0, sizeof(*r));
		store_col_copy(s, 0, r->id, sizeof(r->id));
		store_col_copy(s, 1, r->name, sizeof(r->name));
		store_col_copy(s, 2, r->tenant, sizeof(r->tenant));
		store_col_copy(s, 3, r->kind, sizeof(r->kind));
		store_col_copy(s, 4, r->state, sizeof(r->state));
		store_col_copy(s, 5, r->tier, sizeof(r->tier));
		store_col_copy(s, 6, r->template, sizeof(r->template));
		store_col_copy(s, 7, r->source, sizeof(r->source));
		store_col_copy(s, 8, r->parent, sizeof(r->parent));
		r->level = sqlite3_column_int(s, 9);
		r->size = (uint64_t)sqlite3_column_int64(s, 10);
		r->spec = store_col_dup(s, 11);
		r->created_at = sqlite3_column_double(s, 12);
	}
	if (rc != SQLITE_DONE && ret == 0)
		ret = store_fail(st, err, "list snapshots");
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->lock);
	if (ret < 0) {
		for (size_t i = 0; i < used; i++)
			store_snapshot_fini(&rows[i]);
		free(rows);
		return ret;
	}
	*out = rows;
	*n = used;
	return 0;
}
