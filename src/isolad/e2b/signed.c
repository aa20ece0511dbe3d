/* SPDX-License-Identifier: Apache-2.0 */
/* signed: E2B's signed file URLs — the v1 signature and its query parameters (pure, fuzzed). */
#include "e2b-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

/*
 * The SDK's getSignature(): "v1_" + base64(sha256("path:op:user:token[:expiration]")) with the
 * padding removed. `op` is "read" (GET /files) or "write" (POST /files); `user` is the
 * `username` query parameter, "" when absent; `token` is the sandbox's envdAccessToken.
 */

int e2b_sig_parse(const char *sig, const char *exp, struct e2b_sig *out)
{
	size_t n, en;

	/* UNTRUSTED: the `signature` and `signature_expiration` query parameters. Only their
	 * shape is checked here; the caller compares the signature in constant time. */
	memset(out, 0, sizeof(*out));
	if (!sig)
		return -EINVAL;
	n = strnlen(sig, E2B_SIG_LEN + 1);
	if (n != E2B_SIG_LEN || strncmp(sig, "v1_", 3) != 0)
		return -EINVAL;
	for (size_t i = 3; i < n; i++)
		if (!((sig[i] >= 'A' && sig[i] <= 'Z') || (sig[i] >= 'a' && sig[i] <= 'z') ||
		      (sig[i] >= '0' && sig[i] <= '9') || sig[i] == '+' || sig[i] == '/'))
			return -EINVAL;
	memcpy(out->sig, sig, n + 1);
	if (!exp)
		return 0;
	/* Unix seconds, digits only; 12 digits reach the year 33658, so nothing overflows. */
	en = strnlen(exp, 13);
	if (en == 0 || en > 12 || strspn(exp, "0123456789") != en)
		return -EINVAL;
	out->has_exp = true;
	for (size_t i = 0; i < en; i++)
		out->exp = out->exp * 10 + (exp[i] - '0');
	return 0;
}

int e2b_sig_compute(const char *path, const char *op, const char *user, const char *token,
		    const struct e2b_sig *q, char out[E2B_SIG_LEN + 1])
{
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];
	char b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE) + 1];
	char tail[24];
	size_t n;

	if (!path || !op || !user || !token)
		return -EINVAL;
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(path), (const uint8_t *)path);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(op), (const uint8_t *)op);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(user), (const uint8_t *)user);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(token), (const uint8_t *)token);
	if (q && q->has_exp) {
		n = (size_t)snprintf(tail, sizeof(tail), ":%lld", (long long)q->exp);
		sha256_update(&ctx, n, (const uint8_t *)tail);
	}
	sha256_digest(&ctx, sizeof(digest), digest);
	base64_encode_raw(b64, sizeof(digest), digest);
	n = BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE);
	while (n && b64[n - 1] == '=')
		n--;
	if (n + 3 != E2B_SIG_LEN)
		return -EINVAL;
	memcpy(out, "v1_", 3);
	memcpy(out + 3, b64, n);
	out[E2B_SIG_LEN] = '\0';
	return 0;
}

bool e2b_sig_equal(const char *a, const char *b)
{
	unsigned char diff = 0;

	/* Both are E2B_SIG_LEN long (parsed, computed): no early exit, no length leak. */
	for (size_t i = 0; i < E2B_SIG_LEN; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}
