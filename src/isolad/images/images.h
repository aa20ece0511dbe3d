/* SPDX-License-Identifier: Apache-2.0 */
/* images: the template store — the host view and OCI/docker-archive imports (docs/templates.md). */
#ifndef ISOLA_IMAGES_H
#define ISOLA_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../../common/err.h"
#include "../tiers/tier.h"

/*
 * One template as the rest of isolad sees it. Filled by images_get()/images_import(); the
 * caller owns the copy and releases it with template_info_fini().
 */
struct template_info {
	char id[65];	  /* sha256-derived hex, or "host" */
	char name[64];	  /* user-visible name, [a-zA-Z0-9._-], 1..63 chars */
	char rootfs[512]; /* absolute path of the rootfs dir (read-only lower layer) */
	struct tier_bind binds[TIER_MAX_BINDS]; /* host dirs shown read-only (host template) */
	unsigned n_binds;			/* used entries of binds */
	uint64_t size_bytes;			/* bytes on disk */
	double created_at;			/* unix time */
	char source[16];       /* "host" | "oci" | "docker-archive" | "rootfs" (imports) | "pull" |
				* "build" */
	char origin[720];      /* pulls: "REF@sha256:<manifest hex>", builds: "sha256:<Dockerfile
				* hex>", else "" */
	char default_user[32]; /* user commands run as unless the request says otherwise */
	char workdir[256];     /* default cwd from the image config, "" = the user's home */
	json_t *env;	       /* image config Env as {K:V} object (owned) */
	unsigned layers;       /* layers applied (0 for host) */
	uint32_t skipped_entries; /* layer entries dropped at import (device nodes) */
	json_t *config;		  /* builds: {entrypoint, cmd, labels, exposed_ports} (owned), or
				   * NULL */
};

/* Releases what a template_info owns (env) and clears it; safe on a zeroed struct. */
void template_info_fini(struct template_info *t);

/*
 * Prepares <state_dir>/templates (0700), removes what a crashed import or remove left
 * (templates/.tmp-*, .rm-*, template dirs without manifest), (re)creates the `host` template
 * (kept untouched when the host view is unchanged), and loads every manifest. The module is
 * thread-safe (one internal mutex); call images_init once before any other call, from one
 * thread. Fails with -EALREADY if already initialised.
 */
int images_init(const char *state_dir, struct isola_err **err);

/* Forgets the in-memory table. Imports still running must have returned first. */
void images_shutdown(void);

/* Starts building template `name`'s microvm image in the background (ext4.c), if it exists;
 * a failure to start is logged. Call after images_init. */
void images_microvm_prebuild(const char *name);

/* Looks a template up by name or id and copies it to *out (caller finis it).
 * -ENOENT (code not_found) naming it if missing. Any thread. */
int images_get(const char *name_or_id, struct template_info *out, struct isola_err **err);

/* A new JSON array (caller decrefs) of images_info_json() objects, sorted by name. Any thread. */
int images_list(json_t **out, struct isola_err **err);

/* The API's view of one template (caller decrefs; NULL on ENOMEM): id, name, source, origin,
 * size_bytes, image_size_bytes (the microvm ext4 image when built, else null), image_build
 * (when not built: its build in progress or failed, images_ext4_progress_json, or null), created_at,
 * layers, default_user, workdir; with `full`, also env, binds and skipped_entries. */
json_t *images_info_json(const struct template_info *t, bool full);

/* Called from the importing thread: phase is "unpack", "layer 2/5" or "commit"; done/total in
 * bytes of the input being read (total 0 when unknown). */
typedef void (*images_progress_fn)(void *ud, const char *phase, uint64_t done, uint64_t total);

/*
 * Imports an OCI image layout tarball, a docker-archive tarball (as written by
 * `skopeo copy ... oci-archive:` / `docker save`) or a plain root filesystem tarball (like
 * `docker import`; plain, gzip, zstd or xz) from tar_path as template `name`. The tarball
 * is hostile input: see docs/templates.md for what is refused. Crash-safe: builds in
 * templates/.tmp-XXXXXX, syncs, renames into place, writes the manifest last. Blocks for the
 * whole import (run it on a worker thread); other images_* calls proceed meanwhile. cb may be
 * NULL. out may be NULL; else it receives the new template (caller finis it).
 * -EINVAL (invalid) for a bad name, -EEXIST (conflict) if the name exists or is being
 * imported, -EFBIG (too_large) past a size cap, -EBADMSG (invalid) for a malformed or
 * hostile archive. On failure templates/ is left as it was.
 */
int images_import(const char *name, const char *tar_path, images_progress_fn cb, void *ud,
		  struct template_info *out, struct isola_err **err);

/* What images_pull() is asked (all borrowed; NULL/false when not given). */
struct images_pull_opts {
	const char *ref;      /* image reference: [registry/]repo[:tag|@sha256:hex] */
	const char *username; /* registry credentials (basic, or for the token handshake) */
	const char *password; /* with username */
	const char *ca_pem;   /* PEM certificates trusted for the registry (the client sends the
			       * text: isolad never opens a path a client names) */
	bool plain_http; /* speak plain HTTP to the registry (else https; loopback falls back) */
};

/*
 * Pulls an image from an OCI distribution (v2) registry and imports it as template `name`
 * (docs/templates.md "Pull"): manifest (index -> linux/<host arch>), config and layers
 * downloaded concurrently into templates/.pull-<hash>/ (kept on failure so a retry resumes
 * each layer with a Range request), each verified against its sha256 digest, then imported
 * exactly as images_import() imports an OCI layout. Progress phases: "manifest",
 * "download sha256:<12 hex>" (done/total bytes of that blob, from several threads), then the
 * import's. Blocks; run it on a worker thread. Errors: -ENOENT (not_found) for an unknown
 * image, -EACCES (forbidden) when the registry refuses the credentials, -EBADMSG (invalid) for
 * a digest mismatch (naming the blob) or a bad manifest, -EPROTO (invalid) for a plain-HTTP
 * registry without plain_http, -EIO (unavailable) for transport failures; plus images_import's.
 */
int images_pull(const char *name, const struct images_pull_opts *o, images_progress_fn cb, void *ud,
		struct template_info *out, struct isola_err **err);

/* The template name a pulled image reference gets when no name is given by the caller (a build's
 * FROM, the E2B SDK's fromImage): [a-z0-9._-] of ref, others as '-'; a long one keeps 34 bytes
 * and a hash of the whole. Valid as a template name, <= 63 bytes, into out. */
void images_ref_template_name(const char *ref, char *out, size_t n);

/* A template being built by `template build` (build.c); owned by the building thread. */
struct images_build;

/*
 * Starts building template `name` from template `base`: reserves the name (-EEXIST
 * `conflict` when taken), makes templates/.tmp-XXXXXX/rootfs holding a copy of base's files
 * (base's binds, env, user and workdir carried over) and registers it as a hidden template
 * (never listed) that RUN sandboxes are created from: images_build_info(). Blocks.
 */
int images_build_begin(const char *name, const char *base, struct images_build **out,
		       struct isola_err **err);

/* The template-so-far (borrowed; valid until commit or abort). */
const struct template_info *images_build_info(const struct images_build *b);

/* The build cache dir templates/.build-cache (PATH_MAX bytes), created 0700. 0 or -errno. */
int images_build_cache_dir(char *out, struct isola_err **err);

/* Bytes the build's remaining layers may still unpack (its size cap less what is applied). */
uint64_t images_build_room(const struct images_build *b);
/* Applies a layer archive (a file) onto the template-so-far: an OCI-style layer, or with
 * upper, a process-tier snapshot of a sandbox's writable layer. Blocks. 0 or -errno. */
int images_build_apply(struct images_build *b, const char *path, bool upper, const char *what,
		       struct isola_err **err);

/* Whether the template-so-far has a directory at path (resolved inside its root). */
bool images_build_has_dir(const struct images_build *b, const char *path);

/* Commits the build as template `name` with t's source, origin, env, default_user, workdir
 * and config (t borrowed); out (may be NULL) gets the new template. b is freed either way. */
int images_build_commit(struct images_build *b, const struct template_info *t,
			struct template_info *out, struct isola_err **err);

/* Abandons the build: the hidden entry, the tmpdir and the reservation go. NULL is fine. */
void images_build_abort(struct images_build *b);

/* Removes a template (not `host`: -EPERM, code forbidden). The caller (core) checks that no
 * sandbox uses it. The directory is renamed away first, then deleted. Any thread. */
int images_remove(const char *name_or_id, struct isola_err **err);

/* Caps on what one import may unpack (defaults 64 GiB and 1,000,000 entries). Any thread;
 * applies to imports that start afterwards. 0 keeps the current value. */
void images_set_limits(uint64_t max_bytes, uint64_t max_entries);

/* Whether the template name is acceptable: [a-zA-Z0-9._-], 1..63 chars, not "." or "..". */
bool images_name_is_valid(const char *name);

#endif
