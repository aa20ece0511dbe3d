/* SPDX-License-Identifier: Apache-2.0 */
/* config: maps an OCI bundle's config.json onto isolad's create and process requests. */
#ifndef ISOLA_RUNC_CONFIG_H
#define ISOLA_RUNC_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

/* config.json larger than this is refused before parsing. */
#define OCI_CONFIG_MAX (1u << 20)

/* What one config.json becomes (docs/oci.md, "honoured, mapped, tightened, refused"). */
struct oci_mapped {
	json_t *create;	     /* body of POST /v1/sandboxes, owned; `rootfs` is root.path as
			      * written (joined to the bundle when relative), not yet resolved */
	json_t *process;     /* body of POST /v1/sandboxes/{id}/processes, owned */
	json_t *annotations; /* the spec's annotations object, owned (may be empty) */
	json_t *skipped;     /* strings: spec mounts not applied and why (for warnings), owned */
	json_t *hooks;	     /* {"prestart":[{path,args,env,timeout}],...} of the kinds run on
			      * the host (timeout 0: none), owned; NULL when there are none */
	json_t *net_sysctl;  /* the spec's net.* sysctls applied to a namespace of our own (the
			      * two Docker sets), owned; NULL when none */
	bool engine_netns;   /* a new network namespace with prestart/createRuntime hooks: the
			      * engine programs it, so isola-runc makes an empty one (hooks.h) */
	json_t *ns_paths;    /* {"ipc"|"uts"|"pid": path} of the spec's namespace paths of those
			      * types, for podns_resolve to map or refuse (podns.h), owned; NULL
			      * when none */
};

/*
 * Parses config.json (text, len bytes; UNTRUSTED: the bundle is the engine's, its contents the
 * image author's) and maps it for container `id` of bundle `bundle` (an absolute path).
 * Returns 0 with *out filled (release with oci_mapped_fini), or -errno with *err naming the
 * field and the reason (`invalid` for malformed input, `not_supported` for what this slice
 * refuses: createContainer/startContainer hooks, joining a mount, user, cgroup or time
 * namespace, sysctl). A network namespace path becomes the create request's `netns`; ipc, uts
 * and pid paths go to ns_paths, which podns_resolve must see before the request is sent.
 * Pure: no I/O.
 */
int oci_config_map(const char *text, size_t len, const char *bundle, const char *id,
		   struct oci_mapped *out, struct isola_err **err);

/*
 * Maps a process.json (runc exec --process: a runtime-spec `process` object; UNTRUSTED) onto
 * the body of POST /v1/sandboxes/{id}/processes (*out, new ref; `tty` from `terminal`).
 * Errors name the field as config.json's do ("config.json: `process.args` ...").
 */
int oci_process_map(const char *text, size_t len, json_t **out, struct isola_err **err);

/* Releases what m owns and zeroes it; safe on a zeroed struct. */
void oci_mapped_fini(struct oci_mapped *m);

/* True for a container id runc accepts: 1-128 of [A-Za-z0-9_.+-], not "." or "..". */
bool oci_id_valid(const char *id);

/* The config.json `isola-runc spec` writes (new reference). */
json_t *oci_spec_default(void);

/* The features document (runtime-spec features.md) for `isola-runc features` (new ref). */
json_t *oci_features(void);

#endif
