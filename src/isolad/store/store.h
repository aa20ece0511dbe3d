/* SPDX-License-Identifier: Apache-2.0 */
/* store: isolad's durable state in SQLite (WAL) — the source of truth for intent. */
#ifndef ISOLA_STORE_H
#define ISOLA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

/*
 * One connection shared by isolad's threads, serialised by an internal mutex. Every write
 * is its own transaction in WAL mode with synchronous=NORMAL: a committed write survives
 * a crash or `kill -9` of isolad (it is in the OS's page cache and the WAL), and only a
 * power loss or kernel crash can drop the last transactions — which also ends every
 * sandbox those rows describe. This keeps fsync off the create/destroy path (see
 * docs/benchmarks.md: with synchronous=FULL a burst of creates queued behind fsyncs).
 */
struct store;

/* A sandbox row. Strings are heap-owned by the row (store_sandbox_fini frees them). */
struct store_sandbox {
	char id[40];	   /* primary key */
	char state[16];	   /* a core state name (creating, running, paused, hibernated...) */
	char tier[16];	   /* process|microvm */
	char template[65]; /* template id */
	int uid_slot;	   /* index of the host uid range, unique among rows */
	char *spec;	   /* JSON: limits, env, labels, workdir, user (core's format) */
	char *tier_state;  /* JSON the tier saved for reattach, or NULL */
	char *error;	   /* reason when state is error, or NULL */
	double created_at; /* unix time */
	double expires_at; /* unix time, 0 = never */
	char tenant[64];   /* owning tenant ("default" for rows from before tenancy) */
};

void store_sandbox_fini(struct store_sandbox *r);

/*
 * Write failures name their cause: a full state filesystem is -ENOSPC with code `no_space`
 * (HTTP 507), a read-only or unwritable database -EROFS with code `unavailable` (HTTP 503).
 */

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

/* --- tenancy (src/isolad/tenancy): tenants, hashed tokens, template owners ------------- */

/* A tenant row. quota is heap-owned JSON (tenancy's format); free with store_tenant_fini. */
struct store_tenant {
	char name[64];	   /* primary key, [a-z0-9-] */
	char *quota;	   /* JSON limits, owned */
	double created_at; /* unix time */
};
void store_tenant_fini(struct store_tenant *t);

/* Inserts a tenant; -EEXIST (code exists) when the name is taken. */
int store_tenant_add(struct store *st, const struct store_tenant *t, struct isola_err **err);
/* Replaces a tenant's quota JSON; -ENOENT if the tenant does not exist. */
int store_tenant_set_quota(struct store *st, const char *name, const char *quota,
			   struct isola_err **err);
/* Reads one tenant into *out (caller finis it); -ENOENT (not_found) if missing. */
int store_tenant_get(struct store *st, const char *name, struct store_tenant *out,
		     struct isola_err **err);
/* All tenants by name; heap array of *n rows (fini each, free the array). */
int store_tenant_list(struct store *st, struct store_tenant **out, size_t *n,
		      struct isola_err **err);
/* Deletes a tenant, its tokens and its template ownership rows in one transaction. */
int store_tenant_delete(struct store *st, const char *name, struct isola_err **err);

/* A token row: never the secret, only a salted keyed BLAKE2b of it. */
struct store_token {
	char id[32];	   /* public id, primary key */
	char tenant[64];   /* owning tenant */
	char role[16];	   /* admin|user|read-only */
	char name[64];	   /* operator's label */
	char salt[65];	   /* hex, per token */
	char hash[129];	   /* hex BLAKE2b(secret, key = salt) */
	double created_at; /* unix time */
	double last_used;  /* unix time, 0 = never */
	double revoked_at; /* unix time, 0 = active */
};
int store_token_add(struct store *st, const struct store_token *t, struct isola_err **err);
/* -ENOENT (not_found) if no token has this id. */
int store_token_get(struct store *st, const char *id, struct store_token *out,
		    struct isola_err **err);
/* Tokens of `tenant` (NULL = all), oldest first. */
int store_token_list(struct store *st, const char *tenant, struct store_token **out, size_t *n,
		     struct isola_err **err);
/* Marks a token revoked at `when`; -ENOENT if missing or already revoked. */
int store_token_revoke(struct store *st, const char *id, double when, struct isola_err **err);
int store_token_touch(struct store *st, const char *id, double when, struct isola_err **err);

/* Which tenant imported a template (templates without a row belong to `default`). */
int store_template_owner_set(struct store *st, const char *template, const char *tenant,
			     struct isola_err **err);
/* *tenant (size n) receives the owner, or "" when the template has no row. */
int store_template_owner_get(struct store *st, const char *template, char *tenant, size_t n,
			     struct isola_err **err);
int store_template_owner_delete(struct store *st, const char *template, struct isola_err **err);

/* --- snapshots (core/snapshots.c): one row per snapshot directory ---------------------- */

/* A snapshot row; spec is heap-owned (store_snapshot_fini frees it). */
struct store_snapshot {
	char id[40];	   /* primary key, also the directory name under the snapshot dir */
	char name[64];	   /* tenant-visible name, unique per tenant among `named` rows */
	char tenant[64];   /* owner */
	char kind[16];	   /* named|internal (fork) */
	char state[16];	   /* creating|ready|deleting */
	char tier[16];	   /* tier that wrote it */
	char template[65]; /* source's template id */
	char source[40];   /* sandbox it was taken from */
	char parent[40];   /* snapshot the source was restored from, "" = none */
	int level;	   /* enum tier_persistence it captured */
	uint64_t size;	   /* bytes of its files */
	char *spec;	   /* source sandbox's spec JSON (core's format), owned */
	double created_at; /* unix time */
};
void store_snapshot_fini(struct store_snapshot *r);

/* Inserts a row; a named row whose (tenant, name) is taken fails -EEXIST (`exists`). */
int store_snapshot_add(struct store *st, const struct store_snapshot *r, struct isola_err **err);
/* Marks a row ready with its size and level; -ENOENT if missing. */
int store_snapshot_set_ready(struct store *st, const char *id, uint64_t size, int level,
			     struct isola_err **err);
int store_snapshot_set_state(struct store *st, const char *id, const char *state,
			     struct isola_err **err);
/* Deletes a row; a missing row is not an error. */
int store_snapshot_delete(struct store *st, const char *id, struct isola_err **err);
/* All rows, oldest first (fini each, free the array). */
int store_snapshot_list(struct store *st, struct store_snapshot **out, size_t *n,
			struct isola_err **err);

/* --- tombstones (core/tombstone.c): records of ended sandboxes ------------------------- */

/* A tombstone row; body is heap-owned JSON (core's format), free with store_tombstone_fini. */
struct store_tombstone {
	char id[40];	 /* the ended sandbox's id, primary key */
	char tenant[64]; /* its tenant */
	char name[64];	 /* its name, "" = none */
	double ended_at; /* unix time */
	char *body;	 /* JSON object, owned */
};
void store_tombstone_fini(struct store_tombstone *t);

/* Inserts or replaces the row of t->id. */
int store_tombstone_put(struct store *st, const struct store_tombstone *t, struct isola_err **err);
/* The newest row whose id or name is `ref`, of `tenant` (NULL = any) into *out (caller finis
 * it); -ENOENT (no error set) when there is none. */
int store_tombstone_find(struct store *st, const char *tenant, const char *ref,
			 struct store_tombstone *out, struct isola_err **err);
/* Rows of `tenant` (NULL = all), newest first; heap array of *n rows (fini each, free it). */
int store_tombstone_list(struct store *st, const char *tenant, struct store_tombstone **out,
			 size_t *n, struct isola_err **err);
/* Deletes one row (a missing row is not an error). */
int store_tombstone_delete(struct store *st, const char *id, struct isola_err **err);
/* Deletes rows that ended before `before` and all but the newest `keep` rows; returns the
 * number of rows deleted or -errno. */
int store_tombstone_trim(struct store *st, double before, unsigned keep, struct isola_err **err);

#endif
