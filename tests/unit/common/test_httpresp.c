/* SPDX-License-Identifier: Apache-2.0 */
/* test_httpresp: the HTTP/1.x response head parser and body decoder (lengths, chunks, hostile input). */
#include <errno.h>
#include <string.h>

#include "../tap.h"
#include "common/httpresp.h"

/* Decodes body in pieces of `step` bytes into out; returns the decoded length or -1. */
static long feed(struct http_resp *r, const char *body, size_t n, size_t step, char *out)
{
	char tmp[4096];
	long total = 0;

	for (size_t off = 0; off < n; off += step) {
		size_t k = n - off < step ? n - off : step;
		long d;

		memcpy(tmp, body + off, k);
		d = http_resp_body(r, tmp, k, tmp);
		if (d < 0)
			return -1;
		memcpy(out + total, tmp, (size_t)d);
		total += d;
	}
	return total;
}

int main(void)
{
	struct http_resp r;
	const char *h1 = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n";
	const char *chunks =
		"5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld\n\r\n0\r\nX-T: 1\r\n\r\nJUNK";
	char out[256];
	long n;

	ok(http_resp_head(h1, strlen(h1) - 1, &r) == 0, "an incomplete head needs more");
	ok(http_resp_head(h1, strlen(h1), &r) == 1 && r.status == 200 &&
		   r.framing == HTTP_BY_CHUNKS && !strcmp(r.ctype, "application/x-ndjson") &&
		   r.head_len == strlen(h1),
	   "a chunked head");
	for (size_t step = 1; step <= 8; step++) {
		http_resp_head(h1, strlen(h1), &r);
		n = feed(&r, chunks, strlen(chunks), step, out);
		ok(n == 12 && !memcmp(out, "hello world\n", 12) && r.done,
		   "chunks decoded in pieces of %zu, trailer skipped, junk after the end ignored",
		   step);
	}

	ok(http_resp_head("HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\n",
			  strlen("HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\n"), &r) == 1 &&
		   r.status == 404 && r.framing == HTTP_BY_LENGTH && r.left == 3,
	   "a length-framed head");
	n = feed(&r, "abcdef", 6, 2, out);
	ok(n == 3 && !memcmp(out, "abc", 3) && r.done, "a length body stops at its length");
	ok(http_resp_head("HTTP/1.1 204 No Content\r\n\r\n",
			  strlen("HTTP/1.1 204 No Content\r\n\r\n"), &r) == 1 &&
		   r.done,
	   "204 has no body");
	ok(http_resp_head("HTTP/1.0 200 OK\n\n", strlen("HTTP/1.0 200 OK\n\n"), &r) == 1 &&
		   r.framing == HTTP_BY_CLOSE,
	   "bare LF lines, a body until close");

	ok(http_resp_head("HTTP/2 200\r\n\r\n", strlen("HTTP/2 200\r\n\r\n"), &r) == -EBADMSG,
	   "not HTTP/1.x");
	ok(http_resp_head("HTTP/1.1 2x0 OK\r\n\r\n", strlen("HTTP/1.1 2x0 OK\r\n\r\n"), &r) ==
		   -EBADMSG,
	   "bad status digits");
	ok(http_resp_head("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
			  strlen("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"), &r) == -EBADMSG,
	   "bad Content-Length");
	ok(http_resp_head(
		   "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		   strlen("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
		   &r) == -EBADMSG,
	   "conflicting Content-Lengths");
	ok(http_resp_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
			  strlen("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
			  &r) == -EBADMSG,
	   "a transfer coding other than chunked");
	ok(http_resp_head("HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
			  strlen("HTTP/1.1 200 OK\r\nno colon\r\n\r\n"), &r) == -EBADMSG,
	   "a header line without a colon");
	{
		static char big[HTTP_MAX_HEAD + 10];

		memset(big, 'a', sizeof(big));
		memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
		ok(http_resp_head(big, sizeof(big), &r) == -EMSGSIZE, "a head past the cap");
	}
	http_resp_head(h1, strlen(h1), &r);
	ok(feed(&r, "zz\r\n", 4, 4, out) == -1, "a chunk size that is not hex");
	http_resp_head(h1, strlen(h1), &r);
	ok(feed(&r, "1234567890abcdef0\r\n", 19, 19, out) == -1, "a chunk size past 15 digits");
	http_resp_head(h1, strlen(h1), &r);
	ok(feed(&r, "2\r\nabX\r\n", 8, 8, out) == -1, "chunk data not followed by CRLF");
	return tap_done();
}
