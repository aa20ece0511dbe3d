/* SPDX-License-Identifier: Apache-2.0 */
/* filetype: tells what a file given to `template import` is before it is uploaded. */
#ifndef ISOLA_CLI_FILETYPE_H
#define ISOLA_CLI_FILETYPE_H

#include <stddef.h>

/* What `template import` can take. */
enum cli_import_kind {
	CLI_IMPORT_NOT_TAR,   /* anything else: refused before the upload */
	CLI_IMPORT_TAR,	      /* a tar (plain, gzip, zstd, xz): layout, docker archive or rootfs */
	CLI_IMPORT_OCI_DIR,   /* a directory holding an OCI layout (oci-layout, index.json) */
	CLI_IMPORT_OTHER_DIR, /* a directory that is no OCI layout */
};

/* Names what the first bytes of a file are ("a PNG image", "a ZIP archive", "an ELF
 * executable", "text", ...) for a refusal; "data" when unknown. Pure. */
const char *cli_filetype_describe(const unsigned char *buf, size_t n);

/*
 * Classifies path: a directory (OCI layout or not) or a file, which is a tar when libarchive
 * reads a tar header from it (through any compression). For CLI_IMPORT_NOT_TAR, what is
 * filled with cli_filetype_describe() of its first bytes (or the open error). Reads at most
 * the first header.
 */
enum cli_import_kind cli_import_classify(const char *path, char *what, size_t what_size);

#endif
