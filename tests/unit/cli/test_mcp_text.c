/* SPDX-License-Identifier: Apache-2.0 */
/* test_mcp_text: the MCP server's text helpers — UTF-8 sanitising and head+tail output bounding. */
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "cli/mcp/text.h"

/* seq 1 N as one string. */
static char *seq(int n, size_t *len)
{
	struct sbuf b = {0};

	for (int i = 1; i <= n; i++)
		sb_printf(&b, "%d\n", i);
	*len = b.len;
	return b.s;
}

int main(void)
{
	struct sbuf b = {0};
	size_t len;
	char *s;

	sb_add_utf8(&b, "h\xc3\xa9llo", 6);
	ok(b.len == 6 && !memcmp(b.s, "h\xc3\xa9llo", 6), "valid UTF-8 passes unchanged");
	free(b.s);
	b = (struct sbuf){0};
	sb_add_utf8(&b,
		    "a\xff"
		    "b\xc3",
		    4);
	ok(!strcmp(b.s, "a\xef\xbf\xbd"
			"b\xef\xbf\xbd"),
	   "an invalid byte and a cut sequence become U+FFFD");
	free(b.s);
	b = (struct sbuf){0};
	sb_add_utf8(&b,
		    "\xed\xa0\x80"
		    "x",
		    4);
	ok(!strcmp(b.s, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
			"x"),
	   "a UTF-16 surrogate is not UTF-8");
	free(b.s);
	b = (struct sbuf){0};
	sb_add_utf8(&b, "a\0b", 3);
	ok(b.len == 5 && !memcmp(b.s,
				 "a\xef\xbf\xbd"
				 "b",
				 5),
	   "NUL is replaced (results are C strings)");
	free(b.s);

	b = (struct sbuf){0};
	mcp_out_bound(&b, "short\n", 6, "/x");
	ok(!strcmp(b.s, "short\n"), "short output is whole, with no marker");
	free(b.s);

	s = seq(200000, &len);
	ok(len == 1288895, "seq 1 200000 is 1288895 bytes");
	b = (struct sbuf){0};
	mcp_out_bound(&b, s, len, "/tmp/isola-mcp/run-1.stdout");
	ok(b.len < MCP_OUT_HEAD + MCP_OUT_TAIL + 512, "bounded: %zu bytes", b.len);
	ok(!strncmp(b.s, "1\n2\n3\n", 6), "the head is kept");
	ok(len > 14 && !strcmp(b.s + b.len - 14, "199999\n200000\n"), "the tail is kept");
	ok(strstr(b.s, "bytes elided: 1288895 bytes in total") != NULL,
	   "the marker names the byte count");
	ok(strstr(b.s, "in the sandbox at /tmp/isola-mcp/run-1.stdout") != NULL,
	   "and the saved path");
	{
		const char *m = strstr(b.s, "\n[... ");
		const char *after = strstr(b.s, "...]\n");

		ok(m && m[-1] == '\n' && after && after[5] >= '1' && after[5] <= '9',
		   "head and tail are cut on line boundaries");
	}
	free(b.s);
	b = (struct sbuf){0};
	mcp_out_bound(&b, s, len, NULL);
	ok(strstr(b.s, "The elided part is not kept") != NULL,
	   "without a saved file the marker says so");
	free(b.s);
	free(s);

	/* One long line: no newline to cut at, the byte windows are used as they are. */
	s = malloc(100000);
	memset(s, 'x', 100000);
	b = (struct sbuf){0};
	mcp_out_bound(&b, s, 100000, NULL);
	ok(strstr(b.s,
		  "83616 bytes elided: 100000 bytes in total, the first 8192 and the last 8192") !=
		   NULL,
	   "a single long line is cut at the byte limits");
	free(b.s);
	free(s);
	{
		char t[] =
			"\x1b[0;31mZeroDivisionError\x1b[0m: x\x1b[38;5;241;43m1\x1b[39;49m \x1b";
		size_t n = mcp_strip_ansi(t);

		ok(n == strlen("ZeroDivisionError: x1 ") && !strcmp(t, "ZeroDivisionError: x1 "),
		   "ANSI colour sequences (and a trailing lone ESC) are removed");
	}
	return tap_done();
}
