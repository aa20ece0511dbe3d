/* SPDX-License-Identifier: Apache-2.0 */
/* build-cache: `template build`'s per-step layer cache (keys chained step to step, lookup, store). */
#include "build-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Chains the cache key: key = sha256(key, parts...). */
void build_key_chain(struct build *bd, const char *a, const char *b, const unsigned char *extra,
		      size_t n)
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, bd->key, sizeof(bd->key));
	crypto_hash_sha256_update(&st, (const unsigned char *)a, strlen(a) + 1);
	crypto_hash_sha256_update(&st, (const unsigned char *)b, strlen(b) + 1);
	if (extra)
		crypto_hash_sha256_update(&st, extra, n);
	crypto_hash_sha256_final(&st, bd->key);
}

void build_key_hex(const struct build *bd, char out[65])
{
	static const char d[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = d[bd->key[i] >> 4];
		out[2 * i + 1] = d[bd->key[i] & 15];
	}
	out[64] = '\0';
}

/* Applies the cached layer `<cache>/<key><suffix>` if present: 1, else 0; or -errno. */
int build_from_cache(struct build *bd, const char *suffix, bool upper, char *path, size_t n,
		      struct isola_err **err)
{
	char hex[65];

	build_key_hex(bd, hex);
	if (snprintf(path, n, "%s/%s%s", bd->cache, hex, suffix) >= (int)n)
		return isola_err_set(err, ENAMETOOLONG, "internal", "cache path too long");
	if (access(path, F_OK) < 0)
		return 0;
	return images_build_apply(bd->b, path, upper, "cached", err) < 0 ? -EIO : 1;
}
