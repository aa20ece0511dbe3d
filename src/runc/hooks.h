/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hooks: the spec's POSIX-platform hooks, run on the host as runc runs them (prestart and
 * createRuntime before create returns, poststart after start, poststop after delete), and the
 * empty network namespace a container gets when its engine programs the network from such a
 * hook (Docker's libnetwork-setkey). docs/oci.md, "Hooks".
 */
#ifndef ISOLA_RUNC_HOOKS_H
#define ISOLA_RUNC_HOOKS_H

#include <jansson.h>
#include <stddef.h>

#include "../common/err.h"

/*
 * Runs the hooks of `kind` in hooks (config.c's checked form: {"prestart":[{path, args, env,
 * timeout}]}) one after the other, each with the OCI state `state` on its stdin, its own args
 * and env (nothing of ours), and killed once its timeout (seconds; 0: none) passes. Stops at the
 * first that fails: -errno with *err naming the kind, the index, the path and the exit status or
 * signal, with the start of what it wrote to stdout/stderr. 0 when all succeeded (or none).
 * With on_fail (poststart, poststop: "the remaining hooks and lifecycle continue as if the hook
 * had succeeded"), each failure's message goes to on_fail instead and the rest still run: 0.
 */
int hooks_run(const json_t *hooks, const char *kind, const json_t *state,
	      void (*on_fail)(const char *msg), struct isola_err **err);

/*
 * Makes an empty network namespace (loopback up; the spec's net.* sysctls in `sysctl`, may be
 * NULL, written into it) and bind-mounts it at DIR/netns; path (n bytes) gets that path.
 * Nothing is left behind on failure.
 */
int hooks_netns_make(const char *dir, const json_t *sysctl, char *path, size_t n,
		     struct isola_err **err);

/* Unmounts and removes DIR/netns if it is there (delete, a failed create). */
void hooks_netns_remove(const char *dir);

#endif
