/* SPDX-License-Identifier: Apache-2.0 */
/* keystore: per-object keys and encryption at rest (libsodium secretstream); delete = shred. */
#ifndef ISOLA_KEYSTORE_H
#define ISOLA_KEYSTORE_H

#include <stdbool.h>

#include "../../common/err.h"

/*
 * One key per object (a snapshot, a hibernation image), 32 random bytes in
 * <dir>/<object>.key (0600, dir 0700). Files are encrypted with
 * crypto_secretstream_xchacha20poly1305 in 64 KiB chunks behind a small header
 * ("ISOLAENC" magic, version, stream header); the last chunk carries TAG_FINAL, so a
 * truncated, reordered or edited file fails to decrypt (-EBADMSG). Destroying an object's
 * key makes every copy of its ciphertext unreadable (crypto-shredding): the key file is
 * overwritten, synced and unlinked. Nothing in isolad uses this yet — snapshots and
 * hibernation images arrive with the persistence issue (docs/compliance.md).
 * Thread-safe: every call works on files only.
 */
struct keystore;

/* Opens (creating dir 0700 if needed). */
int keystore_open(const char *dir, struct keystore **out, struct isola_err **err);
void keystore_close(struct keystore *ks);

/* Object ids: 1-64 of [A-Za-z0-9._-], not starting with '.'. */
bool keystore_valid_id(const char *id);

/* Creates a fresh key for id; -EEXIST (exists) if it has one. */
int keystore_create(struct keystore *ks, const char *id, struct isola_err **err);
bool keystore_has(struct keystore *ks, const char *id);
/* Shreds id's key; -ENOENT (not_found) if it has none. */
int keystore_destroy(struct keystore *ks, const char *id, struct isola_err **err);

/* Encrypts everything readable from in_fd to out_fd with id's key. */
int keystore_encrypt_fd(struct keystore *ks, const char *id, int in_fd, int out_fd,
			struct isola_err **err);
/* Decrypts; -EBADMSG (invalid) for a damaged, truncated or foreign file, -ENOENT when the
 * key was destroyed. Output written before a failure must be discarded by the caller. */
int keystore_decrypt_fd(struct keystore *ks, const char *id, int in_fd, int out_fd,
			struct isola_err **err);

#endif
