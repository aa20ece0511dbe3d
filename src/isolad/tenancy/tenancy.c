/* SPDX-License-Identifier: Apache-2.0 */
/* tenancy: tenants, their quotas and creation-rate buckets, and hashed API tokens with roles. */
#include "tenancy.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../store/store.h"

#define TOKEN_PREFIX	 "isola_"
#define TOKEN_ID_LEN	 12 /* public part: [a-z0-9] */
#define TOKEN_SECRET_LEN 32 /* random bytes behind the id */
#define TOKEN_SALT_LEN	 32 /* per-token BLAKE2b key */
#define TOKEN_HASH_LEN	 32 /* BLAKE2b-256 */
#define TOUCH_PERIOD_S	 60 /* last_used is refreshed at most this often */
#define MAX_BUCKETS	 1024

/* A creation-rate token bucket of one tenant. */
struct bucket {
	char tenant[64]; /* owner */
	double tokens;	 /* available creations */
	double last;	 /* monotonic seconds of the last refill */
};

struct tenancy {
	struct store *store;	/* borrowed */
	pthread_mutex_t lock;	/* protects buckets */
	struct bucket *buckets; /* one per tenant that created something */
	size_t n_buckets;	/* used entries */
};

static const char *const role_names[] = {"read-only", "user", "admin"};

const char *tenancy_role_name(enum tenancy_role r)
{
	return (unsigned)r < 3 ? role_names[r] : "read-only";
}

int tenancy_role_parse(const char *s, enum tenancy_role *out)
{
	for (int i = 0; i < 3; i++)
		if (s && !strcmp(s, role_names[i])) {
			*out = (enum tenancy_role)i;
			return 0;
		}
	if (s && !strcmp(s, "readonly")) {
		*out = TENANCY_READONLY;
		return 0;
	}
	return -EINVAL;
}

bool tenancy_valid_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 63 || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

json_t *tenancy_quota_json(const struct tenancy_quota *q)
{
	return json_pack("{s:I, s:f, s:I, s:I, s:f, s:I}", "max_sandboxes",
			 (json_int_t)q->max_sandboxes, "max_cpu", q->max_cpu_millis / 1000.0,
			 "max_memory", (json_int_t)q->max_memory_bytes, "max_disk",
			 (json_int_t)q->max_disk_bytes, "create_rate", q->create_rate,
			 "create_burst", (json_int_t)q->create_burst);
}

/* A non-negative number field; absent keeps *out. */
static int quota_num(const json_t *j, const char *key, double max, double *out,
		     struct isola_err **err)
{
	json_t *v = json_object_get(j, key);

	if (!v)
		return 0;
	if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > max ||
	    isnan(json_number_value(v)))
		return isola_err_set(err, EINVAL, "invalid",
				     "quota `%s` must be a number between 0 and %.0f", key, max);
	*out = json_number_value(v);
	return 0;
}

int tenancy_quota_from_json(const json_t *j, struct tenancy_quota *q, struct isola_err **err)
{
	double sb = q->max_sandboxes, cpu = q->max_cpu_millis / 1000.0,
	       mem = (double)q->max_memory_bytes, disk = (double)q->max_disk_bytes,
	       rate = q->create_rate, burst = q->create_burst;

	/* UNTRUSTED when it comes from a client; the stored copy went through here first. */
	if (!json_is_object(j))
		return isola_err_set(err, EINVAL, "invalid", "quota must be an object");
	if (quota_num(j, "max_sandboxes", 1e6, &sb, err) < 0 ||
	    quota_num(j, "max_cpu", 1e6, &cpu, err) < 0 ||
	    quota_num(j, "max_memory", 1e18, &mem, err) < 0 ||
	    quota_num(j, "max_disk", 1e18, &disk, err) < 0 ||
	    quota_num(j, "create_rate", 1e6, &rate, err) < 0 ||
	    quota_num(j, "create_burst", 1e6, &burst, err) < 0)
		return -EINVAL;
	q->max_sandboxes = (uint32_t)sb;
	q->max_cpu_millis = (uint64_t)(cpu * 1000.0 + 0.5);
	q->max_memory_bytes = (uint64_t)mem;
	q->max_disk_bytes = (uint64_t)disk;
	q->create_rate = rate;
	q->create_burst = (uint32_t)burst;
	return 0;
}

int tenancy_new(struct store *st, struct tenancy **out, struct isola_err **err)
{
	struct tenancy *t;
	struct store_tenant row = {0};
	int r;

	if (sodium_init() < 0)
		return isola_err_set(err, EIO, "internal", "libsodium failed to initialise");
	t = calloc(1, sizeof(*t));
	if (!t)
		return isola_err_set(err, ENOMEM, "internal", "tenancy: out of memory");
	t->store = st;
	pthread_mutex_init(&t->lock, NULL);
	snprintf(row.name, sizeof(row.name), "%s", TENANCY_DEFAULT);
	row.quota = "{}";
	row.created_at = util_wall_time();
	{
		struct isola_err *e = NULL;

		r = store_tenant_add(st, &row, &e);
		if (r == -EEXIST)
			r = 0;
		else if (r < 0 && err && !*err)
			*err = steal_ptr(&e);
		isola_err_free(e);
	}
	if (r < 0) {
		tenancy_free(t);
		return r;
	}
	*out = t;
	return 0;
}

void tenancy_free(struct tenancy *t)
{
	if (!t)
		return;
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* hex(BLAKE2b-256(secret) keyed with the salt). Tokens carry 256 random bits, so a fast
 * keyed hash is enough: no dictionary to slow down, and the salt defeats precomputation. */
static int token_hash(const unsigned char *secret, size_t len, const char *salt_hex, char *out,
		      size_t n)
{
	unsigned char salt[TOKEN_SALT_LEN], h[TOKEN_HASH_LEN];
	size_t got = 0;

	if (sodium_hex2bin(salt, sizeof(salt), salt_hex, strlen(salt_hex), NULL, &got, NULL) != 0 ||
	    got != sizeof(salt))
		return -EINVAL;
	crypto_generichash(h, sizeof(h), secret, len, salt, sizeof(salt));
	sodium_bin2hex(out, n, h, sizeof(h));
	sodium_memzero(salt, sizeof(salt));
	return 0;
}

int tenancy_authenticate(struct tenancy *t, const char *token, size_t len,
			 struct tenancy_principal *out)
{
	struct store_token row;
	char id[TOKEN_ID_LEN + 1], want[2 * TOKEN_HASH_LEN + 1];
	const char *secret;
	size_t plen = strlen(TOKEN_PREFIX), slen;
	double now;
	int ok;

	/* UNTRUSTED: the bearer token. Shape: isola_<12 id chars>_<secret>. */
	if (!token || len < plen + TOKEN_ID_LEN + 2 || len > 256 ||
	    memcmp(token, TOKEN_PREFIX, plen) || token[plen + TOKEN_ID_LEN] != '_')
		return -EACCES;
	memcpy(id, token + plen, TOKEN_ID_LEN);
	id[TOKEN_ID_LEN] = '\0';
	for (int i = 0; i < TOKEN_ID_LEN; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
			return -EACCES;
	secret = token + plen + TOKEN_ID_LEN + 1;
	slen = len - (plen + TOKEN_ID_LEN + 1);
	if (store_token_get(t->store, id, &row, NULL) < 0)
		return -EACCES;
	if (token_hash((const unsigned char *)secret, slen, row.salt, want, sizeof(want)) < 0 ||
	    strlen(row.hash) != 2 * TOKEN_HASH_LEN)
		return -EACCES;
	ok = sodium_memcmp(want, row.hash, 2 * TOKEN_HASH_LEN) == 0;
	if (!ok || row.revoked_at > 0)
		return -EACCES;
	/* Its tenant may have been removed between the row read and now: refuse then. */
	if (tenancy_role_parse(row.role, &out->role) < 0)
		return -EACCES;
	snprintf(out->who, sizeof(out->who), "token:%s", row.id);
	snprintf(out->tenant, sizeof(out->tenant), "%s", row.tenant);
	now = util_wall_time();
	if (now - row.last_used > TOUCH_PERIOD_S)
		store_token_touch(t->store, row.id, now, NULL);
	return 0;
}

int tenancy_principal_check(struct tenancy *t, const char *who, struct tenancy_principal *out)
{
	struct store_token row;

	if (!who || strncmp(who, "token:", 6) != 0 || strlen(who + 6) != TOKEN_ID_LEN)
		return -EACCES;
	if (store_token_get(t->store, who + 6, &row, NULL) < 0 || row.revoked_at > 0 ||
	    tenancy_role_parse(row.role, &out->role) < 0)
		return -EACCES;
	snprintf(out->who, sizeof(out->who), "token:%s", row.id);
	snprintf(out->tenant, sizeof(out->tenant), "%s", row.tenant);
	return 0;
}

static json_t *token_json(const struct store_token *r)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:f}", "id", r->id, "tenant", r->tenant, "role",
			      r->role, "name", r->name, "created_at", r->created_at);

	if (!j)
		return NULL;
	json_object_set_new(j, "last_used",
			    r->last_used > 0 ? json_real(r->last_used) : json_null());
	json_object_set_new(j, "revoked_at",
			    r->revoked_at > 0 ? json_real(r->revoked_at) : json_null());
	json_object_set_new(j, "active", json_boolean(r->revoked_at <= 0));
	return j;
}

int tenancy_token_create(struct tenancy *t, const char *tenant, enum tenancy_role role,
			 const char *name, json_t **out, struct isola_err **err)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char raw[TOKEN_ID_LEN], secret[TOKEN_SECRET_LEN], salt[TOKEN_SALT_LEN];
	char b64[sodium_base64_ENCODED_LEN(TOKEN_SECRET_LEN,
					   sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
	char full[128];
	struct store_token row = {0};
	struct store_tenant tr = {0};
	json_t *j;
	int r;

	if (!tenancy_valid_name(tenant))
		return isola_err_set(err, EINVAL, "invalid", "invalid tenant name `%.64s`",
				     tenant ? tenant : "");
	if (name && strlen(name) > 63)
		return isola_err_set(err, EINVAL, "invalid", "token name is longer than 63 bytes");
	r = store_tenant_get(t->store, tenant, &tr, err);
	if (r < 0)
		return r;
	store_tenant_fini(&tr);
	randombytes_buf(raw, sizeof(raw));
	randombytes_buf(secret, sizeof(secret));
	randombytes_buf(salt, sizeof(salt));
	for (size_t i = 0; i < sizeof(raw); i++)
		row.id[i] = alphabet[raw[i] % 36];
	snprintf(row.tenant, sizeof(row.tenant), "%s", tenant);
	snprintf(row.role, sizeof(row.role), "%s", tenancy_role_name(role));
	snprintf(row.name, sizeof(row.name), "%s", name ? name : "");
	sodium_bin2hex(row.salt, sizeof(row.salt), salt, sizeof(salt));
	sodium_bin2base64(b64, sizeof(b64), secret, sizeof(secret),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	token_hash((const unsigned char *)b64, strlen(b64), row.salt, row.hash, sizeof(row.hash));
	row.created_at = util_wall_time();
	r = store_token_add(t->store, &row, err);
	if (r < 0)
		goto out;
	snprintf(full, sizeof(full), TOKEN_PREFIX "%s_%s", row.id, b64);
	j = token_json(&row);
	if (!j) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	json_object_set_new(j, "token", json_string(full));
	*out = j;
	log_info("token %s created for tenant %s (role %s)", row.id, tenant, row.role);
out:
	sodium_memzero(secret, sizeof(secret));
	sodium_memzero(b64, sizeof(b64));
	sodium_memzero(full, sizeof(full));
	return r;
}

int tenancy_token_list(struct tenancy *t, const char *tenant, json_t **out, struct isola_err **err)
{
	struct store_token *rows;
	json_t *arr;
	size_t n;
	int r = store_token_list(t->store, tenant, &rows, &n, err);

	if (r < 0)
		return r;
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, token_json(&rows[i]));
	free(rows);
	if (!arr)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	*out = arr;
	return 0;
}

int tenancy_token_revoke(struct tenancy *t, const char *scope, const char *id,
			 struct isola_err **err)
{
	struct store_token row;
	int r = store_token_get(t->store, id, &row, err);

	if (r < 0)
		return r;
	if (scope && strcmp(scope, row.tenant) != 0)
		return isola_err_set(err, ENOENT, "not_found", "token `%s` not found", id);
	r = store_token_revoke(t->store, id, util_wall_time(), err);
	if (r == 0)
		log_info("token %s of tenant %s revoked", id, row.tenant);
	return r;
}

static json_t *tenant_json(const char *name, const struct tenancy_quota *q, double created)
{
	return json_pack("{s:s, s:o, s:f}", "name", name, "quota", tenancy_quota_json(q),
			 "created_at", created);
}

int tenancy_tenant_create(struct tenancy *t, const char *name, const struct tenancy_quota *q,
			  json_t **out, struct isola_err **err)
{
	struct store_tenant row = {0};
	json_t *qj;
	int r;

	if (!tenancy_valid_name(name))
		return isola_err_set(err, EINVAL, "invalid",
				     "invalid tenant name `%.64s`: expected 1-63 of [a-z0-9-]",
				     name ? name : "");
	qj = tenancy_quota_json(q);
	snprintf(row.name, sizeof(row.name), "%s", name);
	row.quota = qj ? json_dumps(qj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(qj);
	if (!row.quota)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	row.created_at = util_wall_time();
	r = store_tenant_add(t->store, &row, err);
	if (r == 0 && out)
		*out = tenant_json(name, q, row.created_at);
	if (r == 0)
		log_info("tenant %s created", name);
	store_tenant_fini(&row);
	return r;
}

int tenancy_tenant_set_quota(struct tenancy *t, const char *name, const struct tenancy_quota *q,
			     struct isola_err **err)
{
	json_t *qj = tenancy_quota_json(q);
	char *text = qj ? json_dumps(qj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	int r;

	json_decref(qj);
	if (!text)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	r = store_tenant_set_quota(t->store, name, text, err);
	free(text);
	return r;
}

/* Parses a stored quota; a damaged row means "unlimited" is NOT assumed: it fails. */
static int quota_from_text(const char *name, const char *text, struct tenancy_quota *q,
			   struct isola_err **err)
{
	json_t *j = json_loads(text ? text : "{}", 0, NULL);
	int r;

	memset(q, 0, sizeof(*q));
	if (!j)
		return isola_err_set(err, EINVAL, "internal", "tenant `%s`: malformed stored quota",
				     name);
	r = tenancy_quota_from_json(j, q, err);
	json_decref(j);
	return r;
}

int tenancy_tenant_list(struct tenancy *t, json_t **out, struct isola_err **err)
{
	struct store_tenant *rows;
	json_t *arr;
	size_t n;
	int r = store_tenant_list(t->store, &rows, &n, err);

	if (r < 0)
		return r;
	arr = json_array();
	for (size_t i = 0; i < n; i++) {
		struct tenancy_quota q;

		if (arr && quota_from_text(rows[i].name, rows[i].quota, &q, NULL) == 0)
			json_array_append_new(arr,
					      tenant_json(rows[i].name, &q, rows[i].created_at));
		store_tenant_fini(&rows[i]);
	}
	free(rows);
	if (!arr)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	*out = arr;
	return 0;
}

int tenancy_tenant_get(struct tenancy *t, const char *name, struct tenancy_quota *q,
		       struct isola_err **err)
{
	struct store_tenant row;
	int r;

	if (!tenancy_valid_name(name))
		return isola_err_set(err, ENOENT, "not_found", "tenant `%.64s` not found",
				     name ? name : "");
	r = store_tenant_get(t->store, name, &row, err);
	if (r < 0)
		return r;
	r = quota_from_text(name, row.quota, q, err);
	store_tenant_fini(&row);
	return r;
}

int tenancy_tenant_remove(struct tenancy *t, const char *name, struct isola_err **err)
{
	int r;

	if (name && !strcmp(name, TENANCY_DEFAULT))
		return isola_err_set(err, EPERM, "forbidden", "tenant `default` cannot be removed");
	if (!tenancy_valid_name(name))
		return isola_err_set(err, ENOENT, "not_found", "tenant `%.64s` not found",
				     name ? name : "");
	r = store_tenant_delete(t->store, name, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n_buckets; i++)
		if (!strcmp(t->buckets[i].tenant, name)) {
			t->buckets[i] = t->buckets[--t->n_buckets];
			break;
		}
	pthread_mutex_unlock(&t->lock);
	log_info("tenant %s removed", name);
	return 0;
}

int tenancy_rate_take(struct tenancy *t, const char *tenant, const struct tenancy_quota *q,
		      double *retry_after_s)
{
	double burst, now = (double)util_now_ms() / 1000.0;
	struct bucket *b = NULL;
	int r = 0;

	if (q->create_rate <= 0)
		return 0;
	burst = q->create_burst ? q->create_burst : (q->create_rate < 1 ? 1 : q->create_rate);
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n_buckets; i++)
		if (!strcmp(t->buckets[i].tenant, tenant))
			b = &t->buckets[i];
	if (!b) {
		struct bucket *nb = t->n_buckets < MAX_BUCKETS
					    ? realloc(t->buckets, (t->n_buckets + 1) * sizeof(*nb))
					    : NULL;

		if (!nb) {
			/* Fail closed: a tenant with a rate limit is never unlimited by accident. */
			pthread_mutex_unlock(&t->lock);
			*retry_after_s = 1;
			return -EAGAIN;
		}
		t->buckets = nb;
		b = &t->buckets[t->n_buckets++];
		snprintf(b->tenant, sizeof(b->tenant), "%s", tenant);
		b->tokens = burst;
		b->last = now;
	}
	b->tokens += (now - b->last) * q->create_rate;
	if (b->tokens > burst)
		b->tokens = burst;
	b->last = now;
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
	} else {
		*retry_after_s = (1.0 - b->tokens) / q->create_rate;
		r = -EAGAIN;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}
