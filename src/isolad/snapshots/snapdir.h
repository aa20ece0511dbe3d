/* SPDX-License-Identifier: Apache-2.0 */
/* snapdir: crash-safe snapshot directories — temp dir, fsync, rename, manifest last, verify. */
#ifndef ISOLA_SNAPDIR_H
#define ISOLA_SNAPDIR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

#define SNAPDIR_MANIFEST     "manifest.json"
#define SNAPDIR_FORMAT	     "isola-snapshot"
#define SNAPDIR_VERSION	     1
#define SNAPDIR_MAX_FILES    256	/* entries a manifest may list */
#define SNAPDIR_MAX_MANIFEST (1u << 20) /* bytes a manifest may have */
#define SNAPDIR_TMP_PREFIX   ".tmp-"

/*
 * A snapshot directory is written under a temporary name (`<parent>/.tmp-<tag>-<random>`),
 * sealed by snapdir_commit — every file fsynced and hashed, manifest.json written last,
 * the directory renamed to its final name and the parent fsynced — and checked by
 * snapdir_verify before anything reads it. A crash at any point leaves either no final
 * directory or a complete one; `.tmp-*` leftovers are removed by snapdir_clean_tmp at start.
 *
 * The manifest: {"format":"isola-snapshot","version":1,"meta":{...},
 *                "files":[{"name":"rel/path","size":N,"sha256":"hex"}...]}.
 * All functions are reentrant; callers serialise work on one directory.
 */

/* Creates an empty 0700 directory `<parent>/.tmp-<tag>-<16 hex>` (parent made if missing)
 * and writes its path into out. */
int snapdir_tmp_new(const char *parent, const char *tag, char *out, size_t n,
		    struct isola_err **err);

/*
 * Seals `tmp` into `final` (which must not exist; same filesystem): fsyncs and hashes every
 * regular file under tmp (subdirectories allowed; anything else is refused), writes the
 * manifest with `meta` (borrowed, may be NULL) last, fsyncs tmp, renames, fsyncs the parent.
 * *size (may be NULL) gets the total bytes of the files. ENOSPC is `no_space`. On failure
 * tmp is left for the caller to remove and final does not exist.
 */
int snapdir_commit(const char *tmp, const char *final, const json_t *meta, uint64_t *size,
		   struct isola_err **err);

/*
 * Checks `dir` against its manifest: the manifest parses and is complete, every listed
 * file is a regular file with the listed size and SHA-256, and no file is missing.
 * *meta (may be NULL) receives the manifest's meta object (new reference). A mismatch is
 * `invalid` with a message naming the snapshot, the file and what is wrong (truncated,
 * corrupted, missing); nothing is modified.
 */
int snapdir_verify(const char *dir, json_t **meta, struct isola_err **err);

/* Removes every `.tmp-*` entry directly under parent. Returns how many, or -errno. */
int snapdir_clean_tmp(const char *parent);

#endif
