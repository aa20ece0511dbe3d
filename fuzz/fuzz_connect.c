/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_connect: libFuzzer target for the E2B adapter's Connect envelope parser, proto3 JSON
 * getters, base64 decoder (src/isolad/e2b/connect.c), access-token shape (access.c), gzip decoder
 * (gzip.c) and signed-URL query (signed.c). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/e2b/e2b-internal.h"

/* Every typed getter on every member of a parsed message, as the handlers call them. */
static void getters(const json_t *msg, unsigned depth)
{
	const char *k;
	json_t *v;

	if (depth > 4)
		return;
	json_object_foreach((json_t *)msg, k, v)
	{
		struct isola_err *err = NULL;
		const char *s = NULL;
		uint64_t u = 0;
		bool b = false;
		uint8_t *bytes = NULL;
		size_t blen = 0;

		e2b_jstr(msg, k, NULL, 4096, &s, &err);
		isola_err_free(err);
		err = NULL;
		e2b_juint(msg, k, NULL, UINT32_MAX, &u, &err);
		isola_err_free(err);
		err = NULL;
		e2b_jbool(msg, k, NULL, &b, &err);
		isola_err_free(err);
		err = NULL;
		if (e2b_jbytes(msg, k, NULL, 1 << 16, &bytes, &blen, &err) == 0 && bytes) {
			if (blen > (1 << 16))
				abort();
			free(bytes);
		}
		isola_err_free(err);
		if (json_is_object(v))
			getters(v, depth + 1);
	}
}

/* Counts decoded bytes down from *ud; refuses past it (a sandbox's disk, in miniature). */
static int gz_sink(void *ud, const void *buf, size_t len)
{
	size_t *room = ud;

	(void)buf;
	if (len > E2B_GZ_CHUNK)
		abort(); /* the decoder's promise: bounded chunks */
	if (len > *room)
		return -ENOSPC;
	*room -= len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *payload = NULL;
	size_t plen = 0, outlen = 0;
	struct isola_err *err = NULL;
	json_t *msg = NULL;
	uint8_t *out;

	/* 1. A request body as the envd handlers see it: one envelope, then its JSON. */
	if (e2b_envelope_parse(data, size, &payload, &plen) == 0) {
		if (payload != data + E2B_ENV_HDR || plen != size - E2B_ENV_HDR)
			abort();
		if (e2b_json_parse(payload, plen, &msg, &err) == 0) {
			struct api_buf b = {0};
			const uint8_t *p2;
			size_t l2;

			getters(msg, 0);
			/* Round trip: what we frame, we parse back to the same message. */
			if (e2b_envelope_append(&b, 0, msg) == 0) {
				json_t *again = NULL;

				if (e2b_envelope_parse((const uint8_t *)b.data, b.len, &p2, &l2) !=
				    0)
					abort();
				if (e2b_json_parse(p2, l2, &again, NULL) != 0 ||
				    !json_equal(msg, again))
					abort();
				json_decref(again);
			}
			api_buf_fini(&b);
			json_decref(msg);
		}
		isola_err_free(err);
	}
	/* 2. A unary body: bare JSON. */
	err = NULL;
	if (e2b_json_parse(data, size, &msg, &err) == 0) {
		getters(msg, 0);
		json_decref(msg);
	}
	isola_err_free(err);
	/* 3. The X-Access-Token header's shape; what parses formats back to the same text. */
	{
		char *tok = malloc(size + 1), again[E2B_TOKEN_MAX];
		struct e2b_access a;

		if (tok) {
			memcpy(tok, data, size);
			tok[size] = '\0';
			if (e2b_access_parse(tok, &a) == 0 &&
			    (e2b_access_format(a.mac, a.role, a.who, again, sizeof(again)) != 0 ||
			     strcmp(again, tok) != 0))
				abort();
			free(tok);
		}
	}
	/* 3b. RFC 3339 times (list filters): what parses formats back to the same second. */
	{
		char *t = malloc(size + 1), again[40];
		double v;

		if (t) {
			memcpy(t, data, size);
			t[size] = '\0';
			if (e2b_parse_rfc3339(t, &v) == 0 && v > 0 && v < 253402300800.0) {
				double w;

				e2b_rfc3339(v, again, sizeof(again));
				if (e2b_parse_rfc3339(again, &w) != 0 ||
				    (long long)w != (long long)v)
					abort();
			}
			free(t);
		}
	}
	/* 5. A gzip upload body (gzip.c): decoded in two pieces into a bounded sink; Accept-
	 * Encoding; a signed URL's query (signed.c). */
	{
		struct e2b_gz g;
		const char *why = NULL;
		size_t half = size / 2, room = 1 << 20;
		char *s = malloc(size + 1), again[E2B_SIG_LEN + 1];
		struct e2b_sig q;

		if (e2b_gunzip_init(&g) == 0) {
			if (e2b_gunzip_feed(&g, data, half, gz_sink, &room, &why) == 0 &&
			    e2b_gunzip_feed(&g, data + half, size - half, gz_sink, &room, &why) ==
				    0)
				e2b_gunzip_finish(&g, &why);
			e2b_gz_fini(&g);
		}
		if (s) {
			char *exp;

			memcpy(s, data, size);
			s[size] = '\0';
			(void)e2b_accepts_gzip(s);
			exp = strchr(s, '&');
			if (exp)
				*exp++ = '\0';
			if (e2b_sig_parse(s, exp, &q) == 0 &&
			    (strlen(q.sig) != E2B_SIG_LEN ||
			     e2b_sig_compute(s, "read", "", "t", &q, again) != 0))
				abort();
			free(s);
		}
	}
	/* 4. base64 (bytes fields, Basic auth) with a tight output bound. */
	out = malloc(size + 1);
	if (out && e2b_b64_decode((const char *)data, size, out, size / 2 + 1, &outlen) == 0 &&
	    outlen > size / 2 + 1)
		abort();
	free(out);
	return 0;
}
