/* SPDX-License-Identifier: Apache-2.0 */
/* cptar: tar streams for `isola cp` uploads — archiving a local tree with libarchive (extraction: cpextract.h). */
#ifndef ISOLA_CLI_CPTAR_H
#define ISOLA_CLI_CPTAR_H

#include <stdbool.h>

#include "../common/err.h"

/*
 * Writes a tar of the local file or directory src to fd, naming its top entry `name` (the
 * tree below keeps its relative names). Symlinks are stored, not followed. Returns 0 or
 * -errno with *err; does not close fd.
 */
int cptar_create(const char *src, const char *name, int fd, struct isola_err **err);

#endif
