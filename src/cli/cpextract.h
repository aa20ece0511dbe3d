/* SPDX-License-Identifier: Apache-2.0 */
/* cpextract: `isola cp` downloads — a hostile tar extracted into a fresh temporary directory, moved into place only once complete. */
#ifndef ISOLA_CLI_CPEXTRACT_H
#define ISOLA_CLI_CPEXTRACT_H

#include <stdbool.h>

#include "../common/err.h"

/* One download being extracted. Not thread-safe: one thread drives it. */
struct cptar_out;

/*
 * Prepares to extract into dst: into_dir puts the archive's top entry inside the existing
 * directory dst (as dst/TOP), otherwise the top entry becomes dst. Creates the temporary
 * directory (.isola-cp-XXXXXX, 0700) beside the result. Returns 0 with *out (free with
 * cptar_out_free) or -errno with *err.
 */
int cptar_out_new(const char *dst, bool into_dir, struct cptar_out **out, struct isola_err **err);

/*
 * Extracts the tar read from fd (to its end or the first error; fd is not closed) into the
 * temporary directory. Refuses (-EPERM, "forbidden") absolute names, "..", entries outside the
 * archive's single top entry, hard links to anything but a regular file it extracted itself;
 * skips devices, FIFOs and sockets; drops owners and setuid/setgid/sticky bits. -EPROTO for a
 * malformed or truncated archive. Nothing outside the temporary directory is touched.
 */
int cptar_extract(struct cptar_out *x, int fd, struct isola_err **err);

/*
 * Moves the extracted tree into place: a rename when the result does not exist; a file
 * replaces a file (rename: a symlink in the way is replaced, never followed); a directory is
 * merged into an existing one entry by entry. Call only once the archive AND its transport
 * ended cleanly. 0 or -errno with *err.
 */
int cptar_commit(struct cptar_out *x, struct isola_err **err);

/* Special files skipped so far. */
unsigned cptar_out_skipped(const struct cptar_out *x);

/* Removes the temporary directory (and whatever an uncommitted extraction left in it) and
 * frees x. NULL is a no-op. */
void cptar_out_free(struct cptar_out *x);

#endif
