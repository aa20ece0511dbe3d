/* SPDX-License-Identifier: Apache-2.0 */
/* test_tenancy: tokens hashed at rest, authentication, revocation, roles, rate buckets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common/util.h"
#include "isolad/store/store.h"
#include "isolad/tenancy/tenancy.h"

int main(void)
{
	char dir[] = "/tmp/isola-ten-XXXXXX", db[128], *raw = NULL;
	struct store *st = NULL;
	struct tenancy *t = NULL;
	struct tenancy_principal p;
	struct tenancy_quota q = {.max_sandboxes = 2, .create_rate = 1, .create_burst = 2};
	json_t *tok = NULL, *list = NULL;
	const char *secret, *id;
	double retry = 0;
	size_t len = 0;

	if (!mkdtemp(dir))
		return 1;
	snprintf(db, sizeof(db), "%s/isola.db", dir);
	ok(store_open(db, &st, NULL) == 0 && tenancy_new(st, &t, NULL) == 0, "open");
	ok(tenancy_tenant_create(t, "acme", &q, NULL, NULL) == 0, "create tenant");
	ok(tenancy_tenant_create(t, "acme", &q, NULL, NULL) == -EEXIST, "duplicate tenant refused");
	ok(tenancy_tenant_create(t, "Bad_Name", &q, NULL, NULL) == -EINVAL, "bad name refused");
	ok(tenancy_token_create(t, "acme", TENANCY_USER, "ci", &tok, NULL) == 0, "create token");
	secret = json_string_value(json_object_get(tok, "token"));
	id = json_string_value(json_object_get(tok, "id"));
	ok(tenancy_authenticate(t, secret, strlen(secret), &p) == 0 && !strcmp(p.tenant, "acme") &&
		   p.role == TENANCY_USER,
	   "token resolves to its tenant and role");
	{
		char bad[128];

		snprintf(bad, sizeof(bad), "%s", secret);
		bad[strlen(bad) - 1] ^= 1;
		ok(tenancy_authenticate(t, bad, strlen(bad), &p) == -EACCES,
		   "a changed secret fails");
		ok(tenancy_authenticate(t, secret, strlen(secret) - 1, &p) == -EACCES,
		   "a truncated secret fails");
		ok(tenancy_authenticate(t, "isola_", 6, &p) == -EACCES, "garbage fails");
	}
	store_close(st);
	st = NULL;
	util_read_file(db, 64 << 20, &raw, &len);
	ok(raw && !memmem(raw, len, secret + 19, strlen(secret) - 19),
	   "secret is not in the database");
	free(raw);
	store_open(db, &st, NULL);
	tenancy_free(t);
	tenancy_new(st, &t, NULL);
	ok(tenancy_token_list(t, "acme", &list, NULL) == 0 && json_array_size(list) == 1 &&
		   !json_object_get(json_array_get(list, 0), "token"),
	   "inventory lists the token without its secret");
	json_decref(list);
	{
		char who[64];
		struct tenancy_principal cp = {0};

		snprintf(who, sizeof(who), "token:%s", id);
		ok(tenancy_principal_check(t, who, &cp) == 0 && !strcmp(cp.who, who) &&
			   !strcmp(cp.tenant, "acme") && cp.role == TENANCY_USER,
		   "principal_check resolves a live token id to its tenant and role");
		ok(tenancy_principal_check(t, "token:nosuchtoken0", &cp) == -EACCES &&
			   tenancy_principal_check(t, "api.token", &cp) == -EACCES &&
			   tenancy_principal_check(t, "token:", &cp) == -EACCES,
		   "principal_check refuses unknown and malformed names");
	}
	ok(tenancy_token_revoke(t, "other", id, NULL) == -ENOENT,
	   "revoking another tenant's token is not_found");
	ok(tenancy_token_revoke(t, "acme", id, NULL) == 0, "revoke");
	ok(tenancy_authenticate(t, secret, strlen(secret), &p) == -EACCES, "a revoked token fails");
	{
		char who[64];

		snprintf(who, sizeof(who), "token:%s", id);
		ok(tenancy_principal_check(t, who, &p) == -EACCES,
		   "principal_check refuses a revoked token");
	}
	ok(tenancy_rate_take(t, "acme", &q, &retry) == 0 &&
		   tenancy_rate_take(t, "acme", &q, &retry) == 0,
	   "burst of 2 admitted");
	ok(tenancy_rate_take(t, "acme", &q, &retry) == -EAGAIN && retry > 0 && retry <= 1.0,
	   "third is refused with a retry-after (%.2f s)", retry);
	ok(tenancy_tenant_remove(t, "default", NULL) == -EPERM, "default cannot be removed");
	ok(tenancy_tenant_remove(t, "acme", NULL) == 0, "remove tenant");
	ok(tenancy_token_list(t, "acme", &list, NULL) == 0 && json_array_size(list) == 0,
	   "its tokens went with it");
	json_decref(list);
	json_decref(tok);
	tenancy_free(t);
	store_close(st);
	util_rm_rf(dir);
	return tap_done();
}
