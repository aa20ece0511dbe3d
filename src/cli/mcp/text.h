/* SPDX-License-Identifier: Apache-2.0 */
/* text.h: text buffers, UTF-8 sanitising and bounded output for MCP results (no I/O; unit-tested). */
#ifndef ISOLA_CLI_MCP_TEXT_H
#define ISOLA_CLI_MCP_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A growing text buffer. */
struct sbuf {
	char *s;    /* NUL-terminated, heap */
	size_t len; /* bytes before the NUL */
	size_t cap; /* bytes allocated at s (grown geometrically: appends stay linear) */
	bool oom;   /* an append failed: the result is unusable */
};
void sb_add(struct sbuf *b, const char *p, size_t n);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends n bytes as valid UTF-8 (each invalid byte becomes U+FFFD). */
void sb_add_utf8(struct sbuf *b, const char *p, size_t n);

/* Removes ANSI escape sequences (CSI `ESC [ ... final`, and a lone ESC with the byte after
 * it) from the NUL-terminated s in place: a colour-coded traceback reads as plain text to a
 * model. Returns the new length. */
size_t mcp_strip_ansi(char *s);

/* Bounded output: a stream's text for the model — all of it when it is at most
 * MCP_OUT_HEAD + MCP_OUT_TAIL bytes, else the head and the tail on line boundaries with a marker
 * naming the byte count and `saved` (the sandbox path of the whole stream, or NULL). */
#define MCP_OUT_HEAD (8u * 1024u)
#define MCP_OUT_TAIL (8u * 1024u)
bool mcp_out_is_long(size_t len);
void mcp_out_bound(struct sbuf *b, const char *p, size_t len, const char *saved);

#endif
