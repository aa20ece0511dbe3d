/* SPDX-License-Identifier: Apache-2.0 */
/* images-internal: what the images component's files share (store, host view, import, layers). */
#ifndef ISOLA_IMAGES_INTERNAL_H
#define ISOLA_IMAGES_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include <nettle/sha2.h>

#include "images.h"

#define IMAGES_MANIFEST	  "manifest.json"
#define IMAGES_MAX_JSON	  (4u << 20) /* cap on any JSON document read from an image */
#define IMAGES_MAX_LAYERS 256	     /* cap on layers of one image */
#define IMAGES_MAX_OUTER  100000     /* cap on entries of the outer tarball */
#define IMAGES_MAX_ENV	  1024	     /* cap on Env entries kept from an image config */

/* snprintf into a char array: 0, or -ENAMETOOLONG when the result did not fit. */
#define images_path(buf, ...)                                                                      \
	(snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf) ? -ENAMETOOLONG : 0)

/* Limits and running totals of one import (all layers together). */
struct images_budget {
	uint64_t max_bytes;   /* cap on bytes unpacked (declared sizes, so sparse files count) */
	uint64_t max_entries; /* cap on entries unpacked */
	uint64_t bytes;	      /* bytes unpacked so far */
	uint64_t entries;     /* entries unpacked so far */
	uint32_t skipped;     /* entries dropped (device nodes, sockets) */
};

/* images.c */

/* Current limits (a snapshot under the module lock). */
void images_get_limits(struct images_budget *b);

/* Reserves name for an import in progress and copies the templates dir (PATH_MAX bytes) out.
 * -EINVAL bad name, -EEXIST taken or being imported, -EBUSY too many imports at once. */
int images_reserve(const char *name, char *tdir, struct isola_err **err);

/* Drops a reservation (failed import). */
void images_unreserve(const char *name);

/* Moves the finished build tmpdir into place as templates/<t->id>, writes its manifest last,
 * adds t to the table (t->env is copied) and drops the reservation. Fills t->rootfs. */
int images_commit(const char *tmpdir, struct template_info *t, struct isola_err **err);

/* Deep copy of src into dst (dst->env gets its own reference). 0 or -ENOMEM. */
int images_info_copy(struct template_info *dst, const struct template_info *src);

/* Writes <dir>/manifest.json atomically from t (rootfs is stored relative). 0 or -errno. */
int images_manifest_write(const char *dir, const struct template_info *t);

/* Bytes on disk under dir (hard links counted once, roughly). */
uint64_t images_du(int dirfd);

/* Hex-encodes n bytes into out (2n+1 bytes). */
void images_hex(const unsigned char *in, size_t n, char *out);

/*
 * Blob digests are nettle's SHA-256 (SHA-NI where the CPU has it, several times libsodium's
 * portable code: a pull hashes every byte of an image once). images_sha256_fd feeds len bytes
 * of fd from its current offset into h (UINT64_MAX: to end of file) and returns the count, or
 * -errno (-EIO when the file ends first). images_sha256_hex finishes h into 64 hex digits.
 */
int64_t images_sha256_fd(struct sha256_ctx *h, int fd, uint64_t len);
void images_sha256_hex(struct sha256_ctx *h, char hex[65]);

/* Names of the hidden entries a build registers for its RUN sandboxes (never listed). */
#define IMAGES_BUILD_PREFIX ".build-"

/* Whether name is such a hidden build entry. */
bool images_is_build_entry(const char *name);

/* Adds a copy of t to the table as it is (no directory moved, no manifest): a build's
 * template-so-far. 0 or -errno. */
int images_entry_add(const struct template_info *t);

/* Copies the templates dir (PATH_MAX bytes) out. 0 or -ESHUTDOWN. */
int images_templates_dir(char *out);

/* Drops the table entry with this id (nothing on disk changes). */
void images_entry_drop(const char *id);

/* import.c */

/*
 * Imports the OCI image layout directory `dir` (oci-layout, index.json, blobs/sha256/<hex>;
 * other files are ignored) as template `name`, already reserved with images_reserve() (the
 * reservation is dropped whatever happens). The caller has verified that every
 * blobs/sha256/<hex> holds bytes whose sha256 is <hex> (a pull hashes each blob as it lands):
 * they are moved into the import (dir loses them) and not hashed again; sizes and the manifest
 * chain are checked as a tarball's are. source/origin are recorded on the template.
 */
int images_import_dir(const char *name, const char *dir, const char *source, const char *origin,
		      images_progress_fn cb, void *ud, struct template_info *out,
		      struct isola_err **err);

/* "amd64", "arm64" or uname's machine. */
const char *images_host_arch(void);

/* The entry of an OCI index / docker manifest list for linux/<host arch> (or the only entry
 * when it names no platform); borrowed from index, NULL when there is none. */
json_t *images_index_pick(json_t *index);

/* host.c */

/* Builds the host template into a temp dir under tdir and swaps it in as tdir/host unless the
 * existing one is identical. 0 or -errno with *err set. */
int images_host_build(const char *tdir, struct isola_err **err);

/* layer.c */

/*
 * Applies one layer tarball (gzip, zstd, xz or plain; blob_fd is read from its current
 * offset and not closed) onto the rootfs at rootfd with OCI whiteout semantics. `what` names
 * the layer in errors; phase names it in progress calls. Charges b. 0 or -errno with *err.
 */
int images_layer_apply(int rootfd, int blob_fd, uint64_t blob_size, const char *what,
		       const char *phase, struct images_budget *b, images_progress_fn cb, void *ud,
		       struct isola_err **err);

/* Like images_layer_apply for an archive of a sandbox's overlay upper dir (the process tier's
 * snapshot format): a char 0:0 entry is a whiteout of its name, a directory with the xattr
 * user.overlay.opaque="y" is opaque. Only for archives isolad wrote itself. */
int images_layer_apply_upper(int rootfd, int blob_fd, const char *what, struct images_budget *b,
			     struct isola_err **err);

#endif
