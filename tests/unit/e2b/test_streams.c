/* SPDX-License-Identifier: Apache-2.0 */
/* test_streams: signed-URL signatures (signed.c) and streaming gzip (gzip.c) of the E2B adapter. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "isolad/e2b/e2b-internal.h"
#include "../tap.h"

/* Vectors from the SDK's own formula (node: "v1_" + base64(sha256(s)) without padding). */
static void signatures(void)
{
	struct e2b_sig q, none = {0};
	char out[E2B_SIG_LEN + 1];

	ok(e2b_sig_compute("/home/user/a.txt", "read", "user", "tok123", &none, out) == 0 &&
		   !strcmp(out, "v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0"),
	   "read signature without expiration matches the SDK's: %s", out);
	ok(e2b_sig_parse("v1_uIdxfZtTzWXHuNmOOA944c+crd2gllEzNIjJAHEpJ6w", "1700000000", &q) == 0 &&
		   q.has_exp && q.exp == 1700000000,
	   "parse keeps the expiration");
	ok(e2b_sig_compute("/tmp/x", "write", "", "tok123", &q, out) == 0 &&
		   e2b_sig_equal(out, q.sig),
	   "write signature with expiration and no user matches the SDK's");
	ok(e2b_sig_compute("/tmp/y", "write", "", "tok123", &q, out) == 0 &&
		   !e2b_sig_equal(out, q.sig),
	   "another path does not match");
	ok(e2b_sig_compute("/tmp/x", "read", "", "tok123", &q, out) == 0 &&
		   !e2b_sig_equal(out, q.sig),
	   "another operation does not match");
	ok(e2b_sig_compute("/tmp/x", "write", "root", "tok123", &q, out) == 0 &&
		   !e2b_sig_equal(out, q.sig),
	   "another user does not match");
	ok(e2b_sig_compute("/tmp/x", "write", "", "tok124", &q, out) == 0 &&
		   !e2b_sig_equal(out, q.sig),
	   "another token does not match");
	q.exp++;
	ok(e2b_sig_compute("/tmp/x", "write", "", "tok123", &q, out) == 0 &&
		   !e2b_sig_equal(out, q.sig),
	   "another expiration does not match");

	static const char *const bad_sig[] = {
		"",
		"v1_",
		"v2_uIdxfZtTzWXHuNmOOA944c+crd2gllEzNIjJAHEpJ6w",
		"v1_uIdxfZtTzWXHuNmOOA944c+crd2gllEzNIjJAHEpJ6w=", /* padded */
		"v1_uIdxfZtTzWXHuNmOOA944c+crd2gllEzNIjJAHEpJ6",   /* short */
		"v1_uIdxfZtTzWXHuNmOOA944c-crd2gllEzNIjJAHEpJ6w",  /* url-safe alphabet */
		"v1_uIdxfZtTzWXHuNmOOA944c crd2gllEzNIjJAHEpJ6w",
	};
	for (size_t i = 0; i < sizeof(bad_sig) / sizeof(bad_sig[0]); i++)
		ok(e2b_sig_parse(bad_sig[i], NULL, &q) == -EINVAL, "signature refused: `%s`",
		   bad_sig[i]);
	ok(e2b_sig_parse(NULL, NULL, &q) == -EINVAL, "no signature refused");
	static const char *const bad_exp[] = {"",    "-1", "12a", "1e9", " 1", "1234567890123",
					      "0x10"};
	for (size_t i = 0; i < sizeof(bad_exp) / sizeof(bad_exp[0]); i++)
		ok(e2b_sig_parse("v1_uIdxfZtTzWXHuNmOOA944c+crd2gllEzNIjJAHEpJ6w", bad_exp[i],
				 &q) == -EINVAL,
		   "expiration refused: `%s`", bad_exp[i]);
}

struct sink {
	unsigned char *buf; /* collected output */
	size_t len, cap;    /* its length, capacity */
	size_t max_chunk;   /* largest single callback */
};

static int sink_out(void *ud, const void *buf, size_t len)
{
	struct sink *s = ud;

	if (len > s->max_chunk)
		s->max_chunk = len;
	if (s->len + len > s->cap)
		return -ENOSPC;
	memcpy(s->buf + s->len, buf, len);
	s->len += len;
	return 0;
}

/* Encodes src with gzip.c, decodes it back in `step`-byte pieces; true when equal. */
static bool round_trip(const unsigned char *src, size_t n, size_t step, size_t *gz_len)
{
	struct sink enc = {malloc(n + 1024), 0, n + 1024, 0}, dec = {malloc(n + 1), 0, n + 1, 0};
	struct e2b_gz g;
	const char *why;
	bool good = false;

	if (!enc.buf || !dec.buf || e2b_gzip_init(&g) < 0)
		goto out;
	for (size_t off = 0; off < n; off += step)
		if (e2b_gzip_feed(&g, src + off, n - off < step ? n - off : step, false, sink_out,
				  &enc) < 0)
			goto fini;
	if (e2b_gzip_feed(&g, NULL, 0, true, sink_out, &enc) < 0)
		goto fini;
	e2b_gz_fini(&g);
	*gz_len = enc.len;
	if (e2b_gunzip_init(&g) < 0)
		goto out;
	for (size_t off = 0; off < enc.len; off += step)
		if (e2b_gunzip_feed(&g, enc.buf + off, enc.len - off < step ? enc.len - off : step,
				    sink_out, &dec, &why) < 0)
			goto fini;
	good = e2b_gunzip_finish(&g, &why) == 0 && dec.len == n && !memcmp(dec.buf, src, n) &&
	       dec.max_chunk <= E2B_GZ_CHUNK;
fini:
	e2b_gz_fini(&g);
out:
	free(enc.buf);
	free(dec.buf);
	return good;
}

/* Decodes all of in at once; returns the feed/finish result and *why. */
static int decode(const unsigned char *in, size_t n, struct sink *out, const char **why)
{
	struct e2b_gz g;
	int r;

	if (e2b_gunzip_init(&g) < 0)
		return -ENOMEM;
	r = e2b_gunzip_feed(&g, in, n, sink_out, out, why);
	if (r == 0)
		r = e2b_gunzip_finish(&g, why);
	e2b_gz_fini(&g);
	return r;
}

static void gzip(void)
{
	size_t n = 1 << 20, gz_len = 0;
	unsigned char *src = malloc(n), *two;
	unsigned char big[256];
	struct sink s = {big, 0, sizeof(big), 0};
	const char *why = NULL;
	size_t one_len;

	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)((i * 7) ^ (i >> 9));
	ok(round_trip(src, n, n, &gz_len), "1 MiB round trip in one piece (%zu bytes gzip)",
	   gz_len);
	ok(round_trip(src, n, 1000, &gz_len), "1 MiB round trip in 1000-byte pieces");
	ok(round_trip(src, 0, 1, &gz_len) && gz_len >= 20, "an empty file is a valid gzip stream");

	/* two members, concatenated: one stream (gzip(1), Go's reader) */
	{
		struct e2b_gz g;
		struct sink enc = {malloc(4096), 0, 4096, 0};

		e2b_gzip_init(&g);
		e2b_gzip_feed(&g, "hello ", 6, true, sink_out, &enc);
		e2b_gz_fini(&g);
		one_len = enc.len;
		e2b_gzip_init(&g);
		e2b_gzip_feed(&g, "world", 5, true, sink_out, &enc);
		e2b_gz_fini(&g);
		two = enc.buf;
		s.len = 0;
		ok(decode(two, enc.len, &s, &why) == 0 && s.len == 11 &&
			   !memcmp(big, "hello world", 11),
		   "two members decode as one stream");
		s.len = 0;
		ok(decode(two, one_len + 5, &s, &why) == -EINVAL && why && strstr(why, "truncated"),
		   "a truncated second member is refused: %s", why ? why : "");
		s.len = 0;
		ok(decode(two, one_len - 4, &s, &why) == -EINVAL && why,
		   "a member without its trailer is refused: %s", why ? why : "");
		two[one_len - 8] ^= 1; /* CRC-32 of the first member */
		s.len = 0;
		ok(decode(two, enc.len, &s, &why) == -EINVAL && why,
		   "a wrong CRC-32 is refused: %s", why ? why : "");
		free(two);
	}
	s.len = 0;
	ok(decode((const unsigned char *)"not gzip at all", 15, &s, &why) == -EINVAL && why,
	   "not gzip is refused: %s", why ? why : "");
	s.len = 0;
	ok(decode((const unsigned char *)"", 0, &s, &why) == -EINVAL && why && strstr(why, "empty"),
	   "an empty body is refused: %s", why ? why : "");
	/* a bomb: 64 MiB of zeros in about 64 KiB, decoded into 256 bytes of room; the
	 * output arrives in bounded chunks and the sink's refusal stops the decoder */
	{
		size_t zn = 64u << 20, cn = compressBound(zn);
		unsigned char *zeros = calloc(1, zn);
		struct e2b_gz g;
		struct sink enc = {malloc(cn + 64), 0, cn + 64, 0};

		e2b_gzip_init(&g);
		e2b_gzip_feed(&g, zeros, zn, true, sink_out, &enc);
		e2b_gz_fini(&g);
		s.len = 0;
		s.max_chunk = 0;
		ok(enc.len < zn / 500 && decode(enc.buf, enc.len, &s, &why) == -ENOSPC &&
			   s.max_chunk <= E2B_GZ_CHUNK,
		   "a bomb (%zu bytes for 64 MiB) stops at the sink's limit", enc.len);
		free(zeros);
		free(enc.buf);
	}
	free(src);
}

static void accept_encoding(void)
{
	static const struct {
		const char *v;
		bool want;
	} cases[] = {
		{"gzip", true},
		{"gzip, deflate, br", true},
		{"br, GZIP;q=0.5", true},
		{"x-gzip", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"gzip;q=0.1", true},
		{"deflate, br", false},
		{"gzipx", false},
		{"identity", false},
		{"", false},
		{NULL, false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(e2b_accepts_gzip(cases[i].v) == cases[i].want, "Accept-Encoding `%s`: %s",
		   cases[i].v ? cases[i].v : "(none)", cases[i].want ? "gzip" : "identity");
}

int main(void)
{
	signatures();
	gzip();
	accept_encoding();
	return tap_done();
}
