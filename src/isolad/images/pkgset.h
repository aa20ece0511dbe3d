/* SPDX-License-Identifier: Apache-2.0 */
/* pkgset: dpkg's status file parsed, and the Depends/Pre-Depends closure of a few packages. */
#ifndef ISOLA_IMAGES_PKGSET_H
#define ISOLA_IMAGES_PKGSET_H

#include <stdbool.h>
#include <stddef.h>

/* The installed packages of a dpkg status file (opaque). */
struct pkgset;

/*
 * Parses a dpkg status file (UNTRUSTED in the sense of "any bytes": it is the host's, but the
 * parser is fuzzed) of len bytes: stanzas of `Field: value` lines separated by blank lines.
 * Keeps the packages whose Status ends in `installed`, with Architecture, Essential, Depends,
 * Pre-Depends and Provides. At most PKGSET_MAX packages; fields longer than 64 KiB are cut.
 * *out owned by the caller (pkgset_free). 0, -ENOMEM, or -E2BIG (too many packages).
 */
#define PKGSET_MAX 65536
int pkgset_parse(const char *status, size_t len, struct pkgset **out);

/*
 * Marks `roots` (names not installed are skipped, and so is a name only a virtual package
 * provides but no installed one does), every `Essential: yes` package when `essential`, and
 * then everything they Depend or Pre-Depend on, transitively. Of alternatives (`a | b`) the
 * first installed one (or an installed provider of it) is taken. Returns how many are marked.
 */
size_t pkgset_close(struct pkgset *p, const char *const *roots, size_t n_roots, bool essential);

/* Packages in the set (installed ones), their name and architecture, and whether marked. */
size_t pkgset_count(const struct pkgset *p);
const char *pkgset_name(const struct pkgset *p, size_t i);
const char *pkgset_arch(const struct pkgset *p, size_t i);
bool pkgset_is_marked(const struct pkgset *p, size_t i);

void pkgset_free(struct pkgset *p);

#endif
