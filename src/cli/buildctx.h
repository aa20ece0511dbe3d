/* SPDX-License-Identifier: Apache-2.0 */
/* buildctx: the build context `template build` uploads — a tar of a directory minus .dockerignore. */
#ifndef ISOLA_CLI_BUILDCTX_H
#define ISOLA_CLI_BUILDCTX_H

#include <stdbool.h>

#include "../common/err.h"

/* The name the Dockerfile travels under at the end of the context tar (isolad never copies it). */
#define BUILDCTX_DOCKERFILE ".isola-dockerfile"

/*
 * Writes dir as a pax tar to fd (names relative, no leading ./), leaving out what
 * dir/.dockerignore excludes (Docker's syntax: `*`, `?`, `**`, `!` exceptions, later lines
 * win, a directory pattern excludes what is below it), then appends the file `dockerfile` as
 * BUILDCTX_DOCKERFILE. Hard links are stored as separate files. 0 or -errno with *err.
 */
int buildctx_write(const char *dir, const char *dockerfile, int fd, struct isola_err **err);

/* Whether rel (a path relative to the context, no leading `/`) is excluded by the patterns
 * (a NULL-terminated array as read from .dockerignore, `!` kept). For tests and the writer. */
bool buildctx_excluded(char *const *patterns, const char *rel);

/* Docker's pattern match of one .dockerignore pattern (no `!`) against a whole path. */
bool buildctx_match(const char *pattern, const char *path);

#endif
