/* SPDX-License-Identifier: Apache-2.0 */
/* test_store: the SQLite store keeps rows across reopen and reports missing rows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "common/util.h"
#include "isolad/store/store.h"

int main(void)
{
	char dir[] = "/tmp/isola-store-XXXXXX", path[256];
	struct store *st = NULL;
	struct store_sandbox row, *rows = NULL;
	struct isola_err *e = NULL;
	size_t n = 0;
	char *val = NULL;

	ok(mkdtemp(dir) != NULL, "tmp dir");
	snprintf(path, sizeof(path), "%s/isola.db", dir);
	ok(store_open(path, &st, &e) == 0, "open creates the database");
	memset(&row, 0, sizeof(row));
	snprintf(row.id, sizeof(row.id), "abc");
	snprintf(row.state, sizeof(row.state), "creating");
	snprintf(row.tier, sizeof(row.tier), "process");
	snprintf(row.template, sizeof(row.template), "host");
	row.uid_slot = 3;
	row.spec = "{\"x\":1}";
	row.created_at = 100;
	ok(store_sandbox_put(st, &row, &e) == 0, "put");
	ok(store_sandbox_set_state(st, "abc", "running", NULL, &e) == 0, "set state");
	ok(store_sandbox_set_tier_state(st, "abc", "{\"pid\":1}", &e) == 0, "set tier state");
	ok(store_sandbox_set_state(st, "nope", "running", NULL, &e) == -ENOENT && e &&
		   !strcmp(e->code, "not_found"),
	   "missing row reported as not_found");
	isola_err_free(e);
	e = NULL;
	snprintf(row.id, sizeof(row.id), "def");
	ok(store_sandbox_put(st, &row, &e) == -EIO, "uid_slot is unique");
	isola_err_free(e);
	e = NULL;
	store_close(st);
	st = NULL;

	ok(store_open(path, &st, &e) == 0, "reopen");
	ok(store_sandbox_list(st, &rows, &n, &e) == 0 && n == 1, "one row survives reopen");
	if (n == 1) {
		ok(!strcmp(rows[0].state, "running") && rows[0].uid_slot == 3 &&
			   !strcmp(rows[0].tier_state, "{\"pid\":1}") &&
			   !strcmp(rows[0].spec, "{\"x\":1}"),
		   "row fields round-trip");
		store_sandbox_fini(&rows[0]);
	}
	free(rows);
	ok(store_meta_get(st, "schema_version", &val, &e) == 0 && val && !strcmp(val, "3"),
	   "schema version recorded");
	free(val);
	ok(store_sandbox_delete(st, "abc", &e) == 0, "delete");
	ok(store_sandbox_list(st, &rows, &n, &e) == 0 && n == 0, "gone after delete");
	free(rows);
	store_close(st);

	/* Schema 1 -> 2: a database from before tenancy gains sandboxes.tenant = "default". */
	{
		char old[600], cmd[1400];

		snprintf(old, sizeof(old), "%s/v1.db", dir);
		snprintf(cmd, sizeof(cmd),
			 "python3 -c \"import sqlite3;c=sqlite3.connect('%s');c.executescript("
			 "'CREATE TABLE sandboxes(id TEXT PRIMARY KEY, state TEXT NOT NULL, tier "
			 "TEXT "
			 "NOT NULL, template TEXT NOT NULL, uid_slot INTEGER NOT NULL UNIQUE, spec "
			 "TEXT "
			 "NOT NULL, tier_state TEXT, error TEXT, created_at REAL NOT NULL, "
			 "expires_at "
			 "REAL NOT NULL DEFAULT 0);INSERT INTO sandboxes VALUES(\\'old\\',"
			 "\\'running\\',\\'process\\',\\'host\\',1,\\'{}\\',NULL,NULL,1,0);');"
			 "c.commit()\"",
			 old);
		if (system(cmd) == 0) {
			ok(store_open(old, &st, &e) == 0 &&
				   store_sandbox_list(st, &rows, &n, &e) == 0 && n == 1 &&
				   !strcmp(rows[0].tenant, "default"),
			   "schema 1 database migrates: old rows belong to `default`");
			if (n == 1)
				store_sandbox_fini(&rows[0]);
			free(rows);
			store_close(st);
		} else {
			ok(1, "# SKIP python3 sqlite3 unavailable to build a schema-1 database");
		}
	}
	/* snapshots (schema 3): names unique per tenant among named rows only */
	{
		struct store_snapshot a = {0}, *srows = NULL;
		size_t sn = 0;
		char sp[512];

		snprintf(sp, sizeof(sp), "%s/snap.db", dir);
		ok(store_open(sp, &st, &e) == 0, "open for snapshots");
		snprintf(a.id, sizeof(a.id), "s1");
		snprintf(a.name, sizeof(a.name), "base");
		snprintf(a.tenant, sizeof(a.tenant), "t1");
		snprintf(a.kind, sizeof(a.kind), "named");
		snprintf(a.state, sizeof(a.state), "creating");
		snprintf(a.tier, sizeof(a.tier), "process");
		a.created_at = 1;
		ok(store_snapshot_add(st, &a, &e) == 0, "named snapshot row added");
		snprintf(a.id, sizeof(a.id), "s2");
		ok(store_snapshot_add(st, &a, &e) == -EEXIST && !strcmp(e->code, "exists"),
		   "same name, same tenant: exists");
		isola_err_free(steal_ptr(&e));
		snprintf(a.tenant, sizeof(a.tenant), "t2");
		ok(store_snapshot_add(st, &a, &e) == 0, "same name, other tenant: fine");
		snprintf(a.id, sizeof(a.id), "s3");
		a.name[0] = '\0';
		snprintf(a.kind, sizeof(a.kind), "internal");
		ok(store_snapshot_add(st, &a, &e) == 0, "internal row without a name");
		snprintf(a.id, sizeof(a.id), "s4");
		ok(store_snapshot_add(st, &a, &e) == 0, "a second internal row: names not unique");
		ok(store_snapshot_set_ready(st, "s1", 12345, 1, &e) == 0, "set ready");
		ok(store_snapshot_set_ready(st, "nope", 1, 1, &e) == -ENOENT, "set ready: missing");
		isola_err_free(steal_ptr(&e));
		ok(store_snapshot_delete(st, "s4", &e) == 0, "delete");
		store_close(st);
		ok(store_open(sp, &st, &e) == 0 && store_snapshot_list(st, &srows, &sn, &e) == 0 &&
			   sn == 3,
		   "rows survive reopen (%zu)", sn);
		ok(sn == 3 && !strcmp(srows[0].id, "s1") && !strcmp(srows[0].state, "ready") &&
			   srows[0].size == 12345 && srows[0].level == 1,
		   "ready row keeps size and level");
		for (size_t i = 0; i < sn; i++)
			store_snapshot_fini(&srows[i]);
		free(srows);
		store_close(st);
	}
	{ /* tombstones: find by id or name (newest), list per tenant, trim by age and count */
		struct store_tombstone t = {0}, got = {0}, *trows = NULL;
		size_t tn = 0;
		int r;

		ok(store_open(path, &st, &e) == 0, "reopen for tombstones");
		for (int i = 0; i < 4; i++) {
			snprintf(t.id, sizeof(t.id), "t%d", i);
			snprintf(t.tenant, sizeof(t.tenant), "%s", i == 3 ? "other" : "default");
			snprintf(t.name, sizeof(t.name), "%s", i < 2 ? "web" : "");
			t.ended_at = 1000 + i;
			t.body = i == 1 ? "{\"n\":1}" : "{}";
			ok(store_tombstone_put(st, &t, &e) == 0, "put tombstone t%d", i);
		}
		ok(store_tombstone_find(st, "default", "web", &got, &e) == 0 &&
			   !strcmp(got.id, "t1") && !strcmp(got.body, "{\"n\":1}"),
		   "a name finds the newest tombstone holding it");
		store_tombstone_fini(&got);
		ok(store_tombstone_find(st, "default", "t3", &got, &e) == -ENOENT && !e,
		   "another tenant's tombstone is not found");
		ok(store_tombstone_find(st, NULL, "t3", &got, &e) == 0, "the operator finds it");
		store_tombstone_fini(&got);
		ok(store_tombstone_list(st, "default", &trows, &tn, &e) == 0 && tn == 3 &&
			   !strcmp(trows[0].id, "t2"),
		   "list: one tenant's, newest first");
		for (size_t i = 0; i < tn; i++)
			store_tombstone_fini(&trows[i]);
		free(trows);
		r = store_tombstone_trim(st, 1001, 10, &e);
		ok(r == 1, "trim by age drops the one older (%d)", r);
		r = store_tombstone_trim(st, 0, 1, &e);
		ok(r == 2, "trim by count keeps the newest (%d)", r);
		ok(store_tombstone_delete(st, "t3", &e) == 0 &&
			   store_tombstone_list(st, NULL, &trows, &tn, &e) == 0 && tn == 0,
		   "delete empties it");
		free(trows);
		store_close(st);
	}
	util_rm_rf(dir);
	return tap_done();
}
