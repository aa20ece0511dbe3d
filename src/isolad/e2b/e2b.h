/* SPDX-License-Identifier: Apache-2.0 */
/* e2b: the E2B-compatible API (control plane + envd) served beside /v1 on isolad's listeners. */
#ifndef ISOLA_E2B_H
#define ISOLA_E2B_H

#include <stdbool.h>

struct api_req;

#define E2B_NOT_MINE (-1) /* e2b_request_begin(): the path is not an E2B route */

/*
 * First call for a request whose path is outside /v1/ (api/server.c). When method+url is
 * an E2B route (control plane: /sandboxes, /v2/sandboxes, ...; envd: /health, /files,
 * /process.Process/..., /filesystem.Filesystem/...), it sets r->route to the E2B handler,
 * prepares its state (r->state) and returns MHD_YES/MHD_NO as an enum MHD_Result would,
 * possibly having queued an error response already. E2B routes authenticate themselves
 * (X-API-KEY or X-Access-Token) when `need_auth` (TCP listener); the native bearer token
 * check does not apply to them. Returns E2B_NOT_MINE for any other path. Called from an
 * MHD connection thread.
 */
int e2b_request_begin(struct api_req *r, const char *url, const char *method, bool need_auth);

struct api_server;

/* A tenant was removed: deletes its E2B template file store (the uploads of its builds), so
 * a tenant created later under the same name finds none of them. Any thread. */
void e2b_tenant_removed(struct api_server *srv, const char *tenant);

#endif
