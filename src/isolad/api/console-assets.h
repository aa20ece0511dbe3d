/* SPDX-License-Identifier: Apache-2.0 */
/* console-assets: the web console's files, embedded at build time (scripts/embed-console.py). */
#ifndef ISOLA_CONSOLE_ASSETS_H
#define ISOLA_CONSOLE_ASSETS_H

#include <stddef.h>

/* One file of the console, as isolad serves it. All static, read-only. */
struct console_asset {
	const char *path;	   /* URL path, e.g. "/console/app.js" ("/" is index.html) */
	const char *type;	   /* Content-Type */
	const unsigned char *data; /* the bytes (NUL-terminated for convenience) */
	size_t len;		   /* their length */
	const char *etag;	   /* strong ETag, quoted: a hash of the bytes */
};

extern const struct console_asset console_assets[];
extern const size_t console_assets_n;

#endif
