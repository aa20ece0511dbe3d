/* SPDX-License-Identifier: Apache-2.0 */
/* log: structured JSON-lines logging to stderr for isolad (thread-safe). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

static enum log_level min_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level lvl)
{
	min_level = lvl;
}

/* Appends s to out as a JSON string body (escaping quotes, backslashes, controls). */
static void json_escape(FILE *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;

	if (lvl < min_level)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	flockfile(stderr);
	fprintf(stderr, "{\"ts\":%.3f,\"level\":\"%s\",\"msg\":\"", util_wall_time(),
		level_names[lvl]);
	json_escape(stderr, msg ? msg : fmt);
	fputs("\"}\n", stderr);
	funlockfile(stderr);
	free(msg);
}
