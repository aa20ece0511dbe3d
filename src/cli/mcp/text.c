/* SPDX-License-Identifier: Apache-2.0 */
/* text: growing text buffers, UTF-8 sanitising and bounded output for MCP results (pure logic). */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"

/* ---- text buffers ---- */

void sb_add(struct sbuf *b, const char *p, size_t n)
{
	char *ns;

	if (b->oom)
		return;
	if (!b->s || b->len + n + 1 > b->cap) {
		size_t cap = b->s && b->cap * 2 > b->len + n + 1 ? b->cap * 2 : b->len + n + 64;

		ns = realloc(b->s, cap);
		if (!ns) {
			b->oom = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	if (n)
		memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	sb_add(b, s, (size_t)n);
	free(s);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	size_t need, i;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		need = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		need = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		need = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n < need)
		return 0;
	for (i = 1; i < need; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return need;
}

void sb_add_utf8(struct sbuf *b, const char *p, size_t n)
{
	const unsigned char *u = (const unsigned char *)p;
	size_t i = 0, run = 0;

	/* UNTRUSTED: bytes a sandboxed program wrote; only valid sequences pass through. */
	while (i < n) {
		size_t k = utf8_seq(u + i, n - i);

		if (k && u[i] != 0) {
			i += k;
			run += k;
			continue;
		}
		sb_add(b, p + i - run, run);
		sb_add(b, "\xef\xbf\xbd", 3);
		run = 0;
		i++;
	}
	sb_add(b, p + i - run, run);
}

/* ---- bounded output ---- */

bool mcp_out_is_long(size_t len)
{
	return len > MCP_OUT_HEAD + MCP_OUT_TAIL;
}

void mcp_out_bound(struct sbuf *b, const char *p, size_t len, const char *saved)
{
	size_t head = MCP_OUT_HEAD, tail = MCP_OUT_TAIL;
	const char *nl;

	if (!mcp_out_is_long(len)) {
		sb_add_utf8(b, p, len);
		return;
	}
	/* Cut on line boundaries when a newline is near, so no line is shown half. */
	nl = memrchr(p, '\n', head);
	if (nl && (size_t)(nl - p) >= head / 2)
		head = (size_t)(nl - p) + 1;
	nl = memchr(p + len - tail, '\n', tail / 2);
	if (nl)
		tail = (size_t)(p + len - nl - 1);
	sb_add_utf8(b, p, head);
	sb_printf(b,
		  "\n[... %zu bytes elided: %zu bytes in total, the first %zu and the last %zu "
		  "shown. ",
		  len - head - tail, len, head, tail);
	if (saved)
		sb_printf(b,
			  "The whole output is in the sandbox at %s: read it in pages with "
			  "sandbox_read_file (start_line/end_line or offset/max_bytes), or "
			  "sandbox_search it. ...]\n",
			  saved);
	else
		sb_printf(b, "The elided part is not kept. ...]\n");
	sb_add_utf8(b, p + len - tail, tail);
}

size_t mcp_strip_ansi(char *s)
{
	char *w = s;

	for (const char *r = s; *r;) {
		if (*r != '\x1b') {
			*w++ = *r++;
			continue;
		}
		r++;
		if (*r == '[') { /* CSI: parameters and intermediates, then one final byte */
			r++;
			while (*r && (unsigned char)*r >= 0x20 && (unsigned char)*r <= 0x3f)
				r++;
			while (*r && (unsigned char)*r >= 0x20 && (unsigned char)*r <= 0x2f)
				r++;
			if (*r && (unsigned char)*r >= 0x40 && (unsigned char)*r <= 0x7e)
				r++;
		} else if (*r) {
			r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}
