/* SPDX-License-Identifier: Apache-2.0 */
/* auth: X-API-KEY (control plane), per-sandbox envd access tokens, Basic users, sandbox ids. */
#include "e2b-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "../../common/util.h"
#include "../core/core.h"
#include "../tenancy/tenancy.h"

/* Compares without an early exit, so timing says nothing about the secret b. */
static bool secret_equal(const char *a, const char *b)
{
	size_t alen = strlen(a), blen = strlen(b);
	unsigned char diff = alen != blen;

	for (size_t i = 0; i < blen; i++)
		diff |= (unsigned char)(b[i] ^ (i < alen ? a[i] : 0));
	return diff == 0;
}

bool e2b_api_key_auth(struct api_req *r)
{
	const char *tok = core_api_token(r->srv->core);
	const char *key = api_header(r, "X-API-KEY");
	const char *auth = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);

	/* UNTRUSTED: client headers. X-API-KEY wins; `Authorization: Bearer` is the fallback
	 * some E2B clients send. An empty server token never matches. */
	if (!key && auth && !strncmp(auth, "Bearer ", 7))
		key = auth + 7;
	if (!key)
		return false;
	if (tok && *tok && secret_equal(key, tok)) {
		snprintf(r->who.who, sizeof(r->who.who), "e2b:api.token");
		snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", TENANCY_DEFAULT);
		r->who.role = TENANCY_ADMIN;
		return true;
	}
	/* A tenant token: the caller acts as that tenant with that role (docs/e2b.md). */
	if (tenancy_authenticate(core_tenancy(r->srv->core), key, strlen(key), &r->who) < 0)
		return false;
	return true;
}

/* hex HMAC-SHA-256 of (sandbox id, role, issuer) under a key derived from isolad's API token,
 * into out (2 * crypto_auth_hmacsha256_BYTES + 1). -EIO when there is no key. */
static int envd_mac(struct api_req *r, const char *sandbox_id, char role, const char *who,
		    char *out, size_t n)
{
	const char *tok = core_api_token(r->srv->core);
	unsigned char key[crypto_auth_hmacsha256_KEYBYTES], mac[crypto_auth_hmacsha256_BYTES];
	char msg[160];
	int len;

	if (sodium_init() < 0 || !tok || !*tok || n < 2 * sizeof(mac) + 1)
		return -EIO;
	crypto_hash_sha256(key, (const unsigned char *)tok, strlen(tok));
	len = snprintf(msg, sizeof(msg), "isola-e2b-envd:2\n%s\n%c\n%s", sandbox_id, role, who);
	if (len < 0 || (size_t)len >= sizeof(msg)) {
		sodium_memzero(key, sizeof(key));
		return -EINVAL;
	}
	crypto_auth_hmacsha256(mac, (const unsigned char *)msg, (unsigned long long)len, key);
	sodium_bin2hex(out, n, mac, sizeof(mac));
	sodium_memzero(key, sizeof(key));
	return 0;
}

void e2b_envd_token(struct api_req *r, const char *sandbox_id, char *out, size_t n)
{
	char mac[E2B_TOKEN_HEX + 1];

	/* Bound to the sandbox, the caller and its role: e2b_envd_auth() re-checks the caller
	 * on every request, so the token dies with the issuing token (revoke, tenant removal)
	 * and never grants more than the role it was issued to (docs/e2b.md). */
	if (n)
		out[0] = '\0';
	if (!e2b_access_who_ok(r->who.who) ||
	    envd_mac(r, sandbox_id, e2b_access_role_char(r->who.role), r->who.who, mac,
		     sizeof(mac)) < 0)
		return;
	e2b_access_format(mac, r->who.role, r->who.who, out, n);
	sodium_memzero(mac, sizeof(mac));
}

int e2b_envd_auth(struct api_req *r, const char *sandbox_id)
{
	char want[E2B_TOKEN_HEX + 1];
	struct tenancy_principal p = {0};
	struct e2b_access a;
	bool ok;

	/* UNTRUSTED: the client's header. Its shape is public; only the MAC is secret and is
	 * compared in constant time. */
	if (e2b_access_parse(api_header(r, "X-Access-Token"), &a) < 0 ||
	    envd_mac(r, sandbox_id, e2b_access_role_char(a.role), a.who, want, sizeof(want)) < 0)
		return -EACCES;
	ok = secret_equal(a.mac, want);
	sodium_memzero(want, sizeof(want));
	if (!ok)
		return -EACCES;
	/* The issuer as it is now: the operator's paths are the admin of `default` while the API
	 * token (the MAC's key) stays; a tenant token must still exist and not be revoked. */
	if (!strcmp(a.who, "e2b:api.token") || !strcmp(a.who, "e2b:unix")) {
		snprintf(p.who, sizeof(p.who), "%s", a.who);
		snprintf(p.tenant, sizeof(p.tenant), "%s", TENANCY_DEFAULT);
		p.role = TENANCY_ADMIN;
	} else if (tenancy_principal_check(core_tenancy(r->srv->core), a.who, &p) < 0) {
		return -EACCES;
	}
	/* Never more than the role it was issued to, nor more than the token has now. */
	if (a.role < p.role)
		p.role = a.role;
	r->who = p;
	return 0;
}

int e2b_basic_user(const char *hdr, char *out, size_t n)
{
	uint8_t dec[192];
	size_t dl = 0, ul;
	const char *b64;
	uint8_t *colon;

	out[0] = '\0';
	if (!hdr)
		return 0;
	/* UNTRUSTED: Authorization header. "Basic base64(user:)"; anything else is refused. */
	if (strncasecmp(hdr, "Basic ", 6) != 0)
		return -EINVAL;
	b64 = hdr + 6;
	while (*b64 == ' ')
		b64++;
	if (strlen(b64) > 4 * (sizeof(dec) / 3) ||
	    e2b_b64_decode(b64, strlen(b64), dec, sizeof(dec), &dl) < 0)
		return -EINVAL;
	colon = memchr(dec, ':', dl);
	ul = colon ? (size_t)(colon - dec) : dl;
	if (ul == 0 || ul >= n || ul > 63)
		return -EINVAL;
	for (size_t i = 0; i < ul; i++) {
		char c = (char)dec[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	memcpy(out, dec, ul);
	out[ul] = '\0';
	return 0;
}

int e2b_envd_sandbox(struct api_req *r, char *out, size_t n)
{
	const char *id = api_header(r, "E2b-Sandbox-Id");
	const char *host = api_header(r, MHD_HTTP_HEADER_HOST);
	char buf[64];

	/* UNTRUSTED: headers; the id must look like one of ours before it is used at all. */
	if (!id && host && !strncmp(host, E2B_ENVD_PORT "-", strlen(E2B_ENVD_PORT) + 1)) {
		const char *s = host + strlen(E2B_ENVD_PORT) + 1;
		size_t l = strcspn(s, ".:");

		if (l == 0 || l >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, s, l);
		buf[l] = '\0';
		id = buf;
	}
	if (!id || !api_valid_sandbox_id(id) || strlen(id) >= n)
		return -EINVAL;
	snprintf(out, n, "%s", id);
	return 0;
}

/* --- signed URLs ---------------------------------------------------------------------------- */

/* One candidate issuer of a sandbox's access token. */
struct sig_try {
	struct api_req *r;	 /* the request (for the MAC key) */
	const char *path, *op;	 /* what the URL names */
	const char *user;	 /* its username, "" when absent */
	const struct e2b_sig *q; /* the parsed signature */
	json_t *tokens;		 /* tenant -> its token list, read once per request */
};

/* Does the access token that (sandbox, role, who) would get sign t's URL? */
static bool sig_matches(const struct sig_try *t, const char *sandbox_id, enum tenancy_role role,
			const char *who)
{
	char mac[E2B_TOKEN_HEX + 1], tok[E2B_TOKEN_MAX], want[E2B_SIG_LEN + 1];
	bool ok;

	if (!e2b_access_who_ok(who) ||
	    envd_mac(t->r, sandbox_id, e2b_access_role_char(role), who, mac, sizeof(mac)) < 0)
		return false;
	ok = e2b_access_format(mac, role, who, tok, sizeof(tok)) == 0 &&
	     e2b_sig_compute(t->path, t->op, t->user, tok, t->q, want) == 0 &&
	     e2b_sig_equal(t->q->sig, want);
	sodium_memzero(mac, sizeof(mac));
	sodium_memzero(tok, sizeof(tok));
	return ok;
}

/* The issuer (in *who, *role) of a token of sandbox_id (of tenant) that signs t's URL. The
 * operator's issuers hold `default`'s sandboxes; each active token of the sandbox's tenant is
 * tried with its own role (the role an access token is issued with). */
static bool sig_find_issuer(const struct sig_try *t, const char *sandbox_id, const char *tenant,
			    char *who, size_t wn, enum tenancy_role *role)
{
	static const char *const operator_issuers[] = {"e2b:api.token", "e2b:unix"};
	json_t *tokens, *tk;
	size_t i;

	if (!strcmp(tenant, TENANCY_DEFAULT))
		for (i = 0; i < ARRAY_SIZE(operator_issuers); i++)
			if (sig_matches(t, sandbox_id, TENANCY_ADMIN, operator_issuers[i])) {
				snprintf(who, wn, "%s", operator_issuers[i]);
				*role = TENANCY_ADMIN;
				return true;
			}
	tokens = json_object_get(t->tokens, tenant);
	if (!tokens) {
		if (tenancy_token_list(core_tenancy(t->r->srv->core), tenant, &tokens, NULL) < 0)
			return false;
		json_object_set_new(t->tokens, tenant, tokens);
	}
	json_array_foreach(tokens, i, tk)
	{
		const char *id = json_string_value(json_object_get(tk, "id"));
		const char *rs = json_string_value(json_object_get(tk, "role"));
		enum tenancy_role tr;
		char name[E2B_WHO_MAX];

		if (!id || !rs || !json_is_true(json_object_get(tk, "active")) ||
		    tenancy_role_parse(rs, &tr) < 0 ||
		    (size_t)snprintf(name, sizeof(name), "token:%s", id) >= sizeof(name))
			continue;
		if (sig_matches(t, sandbox_id, tr, name)) {
			snprintf(who, wn, "%s", name);
			*role = tr;
			return true;
		}
	}
	return false;
}

int e2b_signed_auth(struct api_req *r, const char *op, char *sandbox, size_t n)
{
	const char *sig = api_query(r, "signature"), *exp = api_query(r, "signature_expiration");
	const char *path = api_query(r, "path"), *user = api_query(r, "username");
	struct sig_try t = {.r = r, .op = op};
	struct tenancy_principal p = {0};
	char who[E2B_WHO_MAX], id[64];
	enum tenancy_role role = TENANCY_READONLY;
	struct e2b_sig q;
	json_t *list = NULL, *s, *detail;
	bool found = false;
	size_t i;

	/* UNTRUSTED: the URL's query. Its shape is checked first; the signature is compared in
	 * constant time against the one each candidate access token makes. */
	if (e2b_sig_parse(sig, exp, &q) < 0)
		return -EACCES;
	/* envd refuses an expired signature before anything else (the SDK's own check too). */
	if (q.has_exp && q.exp < (int64_t)util_wall_time())
		return -EKEYEXPIRED;
	t.path = path ? path : "";
	t.user = user ? user : "";
	t.q = &q;
	/* Cost: (sandboxes) x (2 + tokens of their tenants) HMAC and SHA-256 computations, one
	 * token list read per tenant; nothing else before the signature is known good. */
	t.tokens = json_object();
	if (!t.tokens)
		return -ENOMEM;
	/* The URL names its sandbox when the SDK built it from a sandbox domain (Host
	 * 49983-<id>.<domain>) or a client adds E2b-Sandbox-Id; with only E2B_SANDBOX_URL it
	 * names none, and the signature itself says which sandbox it is for. */
	if (e2b_envd_sandbox(r, id, sizeof(id)) == 0)
		list = json_pack("[{s:s}]", "id", id);
	else if (core_sandbox_list(r->srv->core, NULL, &list, NULL) < 0)
		list = NULL;
	json_array_foreach(list, i, s)
	{
		const char *sid = json_string_value(json_object_get(s, "id"));
		const char *tenant = json_string_value(json_object_get(s, "tenant"));
		struct sandbox *sb = NULL;

		if (!sid || !api_valid_sandbox_id(sid))
			continue;
		if (!tenant) {
			/* the named sandbox: its tenant from core */
			if (core_sandbox_get(r->srv->core, sid, &sb, NULL) < 0)
				continue;
			tenant = sandbox_tenant(sb);
		}
		found = sig_find_issuer(&t, sid, tenant ? tenant : TENANCY_DEFAULT, who,
					sizeof(who), &role);
		if (sb)
			sandbox_unref(sb);
		if (found) {
			snprintf(sandbox, n, "%s", sid);
			break;
		}
	}
	json_decref(list);
	json_decref(t.tokens);
	if (!found)
		return -EACCES;
	/* The issuer as it is now, exactly as for X-Access-Token (e2b_envd_auth). */
	if (!strcmp(who, "e2b:api.token") || !strcmp(who, "e2b:unix")) {
		snprintf(p.who, sizeof(p.who), "%s", who);
		snprintf(p.tenant, sizeof(p.tenant), "%s", TENANCY_DEFAULT);
		p.role = TENANCY_ADMIN;
	} else if (tenancy_principal_check(core_tenancy(r->srv->core), who, &p) < 0) {
		return -EACCES;
	}
	if (role < p.role)
		p.role = role;
	r->who = p;
	/* Who used a signed URL, for what: the request's own record says the outcome. */
	detail = json_pack("{s:s, s:s, s:s}", "path", t.path, "operation", op, "user", t.user);
	if (detail && q.has_exp)
		json_object_set_new(detail, "expires", json_integer((json_int_t)q.exp));
	api_audit(r, "e2b signed url", sandbox, "ok", detail);
	json_decref(detail);
	return 0;
}
