/* SPDX-License-Identifier: Apache-2.0 */
/* tenancy: tenants, their quotas and creation-rate buckets, and hashed API tokens with roles. */
#ifndef ISOLA_TENANCY_H
#define ISOLA_TENANCY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

struct store;
struct tenancy;

#define TENANCY_DEFAULT "default" /* the operator's tenant; exists always, cannot be removed */

/* Ordered: a role may do everything the roles below it may. */
enum tenancy_role {
	TENANCY_READONLY = 0, /* GET only */
	TENANCY_USER = 1,     /* everything on its tenant's sandboxes and templates */
	TENANCY_ADMIN = 2,    /* + tokens of its tenant; admin of `default`: tenants, audit */
};

/* Who is calling, resolved by the API from the connection and the bearer token. */
struct tenancy_principal {
	char who[48];		/* token id, "api.token" (legacy) or "unix:uid=N" */
	char tenant[64];	/* tenant the caller acts for */
	enum tenancy_role role; /* what it may do */
};

/* Per-tenant limits; 0 means unlimited for every field. */
struct tenancy_quota {
	uint32_t max_sandboxes;	   /* concurrent sandboxes */
	uint64_t max_cpu_millis;   /* sum of sandbox CPU limits (1000 = one CPU) */
	uint64_t max_memory_bytes; /* sum of sandbox memory limits */
	uint64_t max_disk_bytes;   /* sum of writable-layer sizes */
	double create_rate;	   /* sandbox creations per second (token bucket refill) */
	uint32_t create_burst;	   /* bucket size (0 with a rate = max(1, rate)) */
};

/* Opens the tenancy layer over the store (borrowed, must outlive it) and makes sure the
 * `default` tenant exists. Any thread may call the other functions concurrently. */
int tenancy_new(struct store *st, struct tenancy **out, struct isola_err **err);
void tenancy_free(struct tenancy *t);

const char *tenancy_role_name(enum tenancy_role r);
/* "admin", "user", "read-only" (also "readonly"); -EINVAL otherwise. */
int tenancy_role_parse(const char *s, enum tenancy_role *out);
/* Tenant names: 1-63 of [a-z0-9-], not starting with '-'. */
bool tenancy_valid_name(const char *name);

/*
 * Resolves a bearer token (UNTRUSTED, len bytes, not NUL-terminated necessarily) to a
 * principal. Returns 0, or -EACCES for anything unknown, malformed or revoked — the caller
 * learns nothing more. Compares hashes in constant time. Updates last_used (at most once a
 * minute per token, so requests do not turn into database writes).
 */
int tenancy_authenticate(struct tenancy *t, const char *token, size_t len,
			 struct tenancy_principal *out);

/*
 * Resolves the principal `who` names ("token:<id>", as tenancy_authenticate writes it) to what
 * that token is now: 0 with *out filled when the token exists and is not revoked (its tenant
 * still exists: removing a tenant removes its tokens), else -EACCES. For credentials derived
 * from a token (the E2B envd access token), so they die with it. Any thread.
 */
int tenancy_principal_check(struct tenancy *t, const char *who, struct tenancy_principal *out);

/* Creates a token for tenant (which must exist) with role and a label. *out is the new
 * token's inventory entry plus "token": the secret, shown this once and never stored. */
int tenancy_token_create(struct tenancy *t, const char *tenant, enum tenancy_role role,
			 const char *name, json_t **out, struct isola_err **err);
/* Inventory (never secrets) of tenant's tokens, or of all when tenant is NULL. */
int tenancy_token_list(struct tenancy *t, const char *tenant, json_t **out, struct isola_err **err);
/* Revokes token id. With scope non-NULL, a token of another tenant is `not_found`. */
int tenancy_token_revoke(struct tenancy *t, const char *scope, const char *id,
			 struct isola_err **err);

int tenancy_tenant_create(struct tenancy *t, const char *name, const struct tenancy_quota *q,
			  json_t **out, struct isola_err **err);
int tenancy_tenant_set_quota(struct tenancy *t, const char *name, const struct tenancy_quota *q,
			     struct isola_err **err);
int tenancy_tenant_list(struct tenancy *t, json_t **out, struct isola_err **err);
/* -ENOENT (not_found) when the tenant does not exist. */
int tenancy_tenant_get(struct tenancy *t, const char *name, struct tenancy_quota *q,
		       struct isola_err **err);
/* Removes a tenant and its tokens (not `default`: forbidden). The core checks it owns no
 * sandbox first. */
int tenancy_tenant_remove(struct tenancy *t, const char *name, struct isola_err **err);

/* Takes one creation token from tenant's bucket. 0, or -EAGAIN with *retry_after_s (> 0)
 * the time until a token is available. Unlimited quotas always succeed. */
int tenancy_rate_take(struct tenancy *t, const char *tenant, const struct tenancy_quota *q,
		      double *retry_after_s);

json_t *tenancy_quota_json(const struct tenancy_quota *q);
/* Reads {max_sandboxes, max_cpu, max_memory, max_disk, create_rate, create_burst}; absent
 * fields keep their value in *q. UNTRUSTED input is validated (`invalid`). */
int tenancy_quota_from_json(const json_t *j, struct tenancy_quota *q, struct isola_err **err);

#endif
