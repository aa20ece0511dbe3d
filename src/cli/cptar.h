/* SPDX-License-Identifier: Apache-2.0 */
/* cptar: tar streams for `isola cp` — safe local extraction and archiving with libarchive. */
#ifndef ISOLA_CLI_CPTAR_H
#define ISOLA_CLI_CPTAR_H

#include <stdbool.h>

#include "../common/err.h"

/*
 * Extracts the tar read from fd under dst (cli_cp_map_entry() maps each name: into_dir puts
 * the entries inside dst, otherwise the archive's top entry becomes dst). Entries with
 * absolute names, "..", or that would pass through a symlink are refused; devices and FIFOs
 * are skipped; ownership and setuid bits are not restored. Returns 0 or -errno with *err.
 * Reads fd to its end or the first error; does not close it.
 */
int cptar_extract(int fd, const char *dst, bool into_dir, struct isola_err **err);

/*
 * Writes a tar of the local file or directory src to fd, naming its top entry `name` (the
 * tree below keeps its relative names). Symlinks are stored, not followed. Returns 0 or
 * -errno with *err; does not close fd.
 */
int cptar_create(const char *src, const char *name, int fd, struct isola_err **err);

#endif
