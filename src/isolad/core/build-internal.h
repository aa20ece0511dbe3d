/* SPDX-License-Identifier: Apache-2.0 */
/* build-internal: what the files of `template build` share (build.c drives; build-cache.c,
 * build-copy.c, build-run.c do one concern each). Only core/build*.c include it. */
#ifndef ISOLA_CORE_BUILD_INTERNAL_H
#define ISOLA_CORE_BUILD_INTERNAL_H

#include "core-internal.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <sodium.h>

#include "../images/dockerfile.h"
#include "../images/images.h"

#define BUILD_RUN_MS   (3600 * 1000) /* one RUN step at most */
#define BUILD_TAIL     4096	     /* output kept for a failing RUN's error */
#define BUILD_LINE_MAX 4096	     /* an output line longer than this is split */

#define BUILD_RUN_MS   (3600 * 1000) /* one RUN step at most */
#define BUILD_TAIL     4096	     /* output kept for a failing RUN's error */
#define BUILD_LINE_MAX 4096	     /* an output line longer than this is split */

/* The state a build carries from step to step. */
struct build {
	struct core *c;			 /* owner (borrowed) */
	const char *tenant;		 /* whose sandboxes run the RUN steps */
	const char *name;		 /* the template being built (borrowed) */
	const struct core_build_opts *o; /* the request (borrowed) */
	core_build_event_fn ev;		 /* progress (may be NULL) */
	void *ud;			 /* for ev */
	struct dockerfile df;		 /* parsed */
	char **sub;			 /* per step: arguments after substitution (owned) */
	json_t **at;		  /* per step: {env (ENV and ARG), user, workdir} it runs with */
	json_t *args;		  /* ARG values {K:V} */
	json_t *env;		  /* ENV so far {K:V} (template's included) */
	json_t *labels;		  /* LABEL {K:V} */
	json_t *ports;		  /* EXPOSE [..] */
	json_t *cmd, *entrypoint; /* CMD / ENTRYPOINT (arrays) or NULL */
	char user[64];		  /* USER so far */
	char workdir[256];	  /* WORKDIR so far */
	char base[64];		  /* FROM */
	struct images_build *b;	  /* the template-so-far */
	char cache[PATH_MAX];	  /* templates/.build-cache */
	unsigned char key[32];	  /* cache key of the chain so far */
	unsigned step, total;	  /* current step (1-based) and steps after FROM */
	char tail[BUILD_TAIL];	  /* last output of the running RUN */
};

/* build.c: sends a progress event (stolen; NULL is ignored) to the client. */
void build_emit(struct build *bd, json_t *ev);

/* build-cache.c: the per-step layer cache. */
/* Chains the cache key: key = sha256(key, a, b, extra). */
void build_key_chain(struct build *bd, const char *a, const char *b, const unsigned char *extra,
		     size_t n);
/* The chain's key as 64 hex digits. */
void build_key_hex(const struct build *bd, char out[65]);
/* Applies the cached layer `<cache>/<key><suffix>` to the template-so-far if present: 1 (path
 * set), 0 when absent (path set: where to store it), or -errno with *err set. */
int build_from_cache(struct build *bd, const char *suffix, bool upper, char *path, size_t n,
		     struct isola_err **err);
/* Stores the layer file `from` (in the cache dir) as entry path (from build_from_cache) of
 * step i, with its record (tenant, instruction, template) beside it, and applies it to the
 * template-so-far (upper: a RUN's overlay layer) under the cache's lock, so no prune removes
 * it in between. *stored: from was renamed (it is gone). 0 or -errno with *err set. */
int build_cache_store(struct build *bd, const char *from, const char *path, size_t i, bool upper,
		      bool *stored, struct isola_err **err);

/* build-copy.c: the context and COPY/ADD. */
/* Opens the context tar (the client's upload) for reading; NULL with *err set. */
struct archive *build_ctx_open(const char *path, struct isola_err **err);
/* Reads the Dockerfile `name` of the context into *out (malloc'd, NUL-terminated). */
int build_read_dockerfile(const char *ctx, const char *name, char **out, size_t *len,
			  struct isola_err **err);
/* COPY/ADD step i: its layer from the context, cached by content, applied. */
int build_step_copy(struct build *bd, size_t i, bool *cached, struct isola_err **err);

/* build-run.c: RUN step i in a sandbox from the template-so-far (or its cached layer). */
/* The build runs its RUN steps in the microvm tier (the request's tier). */
bool build_in_microvm(const struct build *bd);
int build_step_run(struct build *bd, size_t i, bool *cached, struct isola_err **err);

#endif
