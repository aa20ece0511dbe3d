/* SPDX-License-Identifier: Apache-2.0 */
/* e2b-internal: what the E2B adapter's files share — request state, Connect codec, auth. */
#ifndef ISOLA_E2B_INTERNAL_H
#define ISOLA_E2B_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "../api/api-internal.h"
#include "e2b.h"

#define E2B_ENVD_VERSION  "0.6.13"   /* what the SDKs gate features on (>= 0.5.7 etc.) */
#define E2B_CLIENT_ID	  "isola"    /* Sandbox.clientID */
#define E2B_MAX_BODY	  (1u << 20) /* buffered JSON / envelope request bodies */
#define E2B_DEFAULT_TTL_S 300	     /* create without `timeout` (E2B's SDK default) */
#define E2B_ENVD_PORT	  "49983"    /* E2b-Sandbox-Port the SDK sends for envd */
#define E2B_CALL_MS	  60000	     /* one-shot agent calls */
#define E2B_KEEPALIVE_MAX 3600	     /* cap on Keepalive-Ping-Interval, seconds */
#define E2B_TOKEN_HEX	  64	     /* envdAccessToken: hex MAC length */
#define E2B_TOKEN_MAX	  128	     /* envdAccessToken: MAC '.' role issuer, with the NUL */

enum e2b_kind {
	E2B_CONTROL, /* api.e2b.app-like: X-API-KEY */
	E2B_ENVD,    /* the in-sandbox daemon: E2b-Sandbox-Id + X-Access-Token */
	E2B_CODE,    /* the code interpreter (E2b-Sandbox-Port: 49999): token, or a public port */
	E2B_UPLOAD,  /* a template file upload: the build's one-hash token (template.c) */
};

/* One E2B route. `api` comes first: r->route points at it, so server.c drives the body
 * (API_BODY_NONE or API_BODY_STREAM) and calls api.handle at the end. */
struct e2b_route {
	struct api_route api; /* method, pattern, body kind, handle, data */
	enum e2b_kind kind;   /* which auth applies */
	bool buffered;	      /* API_BODY_STREAM collected into e2b_req.body (<= E2B_MAX_BODY) */
	enum tenancy_role min_role; /* least role of the caller (envd: of the token's issuer) */
};

/* Per-request state (r->state), freed by e2b_req_free when MHD completes the request. */
struct e2b_req {
	const struct e2b_route *route; /* matched route */
	bool need_auth;		       /* TCP listener: X-API-KEY / X-Access-Token required */
	bool too_large;		       /* buffered body passed E2B_MAX_BODY (rest swallowed) */
	bool signed_url;	       /* envd: authorised by a signed /files URL */
	struct api_buf body;	       /* buffered request body */
	char sandbox[40];	       /* envd: sandbox id from E2b-Sandbox-Id (validated) */
	char user[64];		       /* envd: user from Authorization: Basic, "" = default */
	void *op;		       /* route state for streamed uploads, owned via op_free */
	void (*op_free)(void *op);     /* releases op */
	struct api_route deny_route;   /* a refusal answered after the body (envd_refuse) */
	unsigned deny_status;	       /* its HTTP status */
	const char *deny_code;	       /* its Connect code, static */
	const char *deny_msg;	       /* its message, static */
};

static inline struct e2b_req *e2b_req_of(struct api_req *r)
{
	return r->state;
}

/* --- connect.c: Connect protocol pieces (pure; fuzzed by fuzz/fuzz_connect.c) ---------- */

#define E2B_ENV_HDR	  5    /* envelope header: flags u8, length u32 big-endian */
#define E2B_FLAG_COMPRESS 0x01 /* compressed message (refused) */
#define E2B_FLAG_END	  0x02 /* end-of-stream message */

/* Parses a request body that must hold exactly one uncompressed message envelope.
 * UNTRUSTED input. 0 with *payload and *plen into buf, or -EINVAL (malformed, trailing bytes,
 * length mismatch), -ENOTSUP (compressed / end-stream flag). */
int e2b_envelope_parse(const uint8_t *buf, size_t len, const uint8_t **payload, size_t *plen);
/* Appends one envelope (flags, then JSON text of j) to b. j borrowed. 0 or -ENOMEM. */
int e2b_envelope_append(struct api_buf *b, uint8_t flags, const json_t *j);

/* Parses a Connect JSON message: an object, depth-checked, duplicates refused. */
int e2b_json_parse(const void *buf, size_t len, json_t **out, struct isola_err **err);
/* A proto3 JSON field by its lowerCamelCase name or its original snake_case name. */
json_t *e2b_jget(const json_t *obj, const char *camel, const char *snake);
/* Typed proto3 getters. Absent or null: *out untouched, 0. Wrong type: -EINVAL with an
 * `invalid` error naming the field. Numbers may arrive as JSON numbers or strings. */
int e2b_jstr(const json_t *obj, const char *camel, const char *snake, size_t max, const char **out,
	     struct isola_err **err);
int e2b_juint(const json_t *obj, const char *camel, const char *snake, uint64_t max, uint64_t *out,
	      struct isola_err **err);
int e2b_jbool(const json_t *obj, const char *camel, const char *snake, bool *out,
	      struct isola_err **err);
/* proto3 `bytes`: standard or URL-safe base64, padding optional. *out malloc'd. */
int e2b_jbytes(const json_t *obj, const char *camel, const char *snake, size_t max, uint8_t **out,
	       size_t *len, struct isola_err **err);
/* Decodes base64 (standard or URL-safe, padding optional). -EINVAL on bad input. */
int e2b_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap, size_t *outlen);

/* isola error code -> Connect code ("not_found", "invalid_argument", ...). */
const char *e2b_connect_code(const char *isola_code);
/* Connect code -> HTTP status for unary errors (Connect protocol table). */
unsigned e2b_connect_status(const char *connect_code);
/* {"code": connect code, "message"} (new reference). */
json_t *e2b_connect_error_json(const char *connect_code, const char *message);
/* RFC 3339 UTC with milliseconds ("2026-01-02T03:04:05.678Z") into out (>= 32 bytes). */
void e2b_rfc3339(double unix_time, char *out, size_t n);
/* Parses an RFC 3339 time ("2026-01-02T03:04:05.678Z", "...+01:00"; UNTRUSTED, NUL-terminated)
 * into unix seconds. 0, or -EINVAL for anything else. */
int e2b_parse_rfc3339(const char *s, double *out);

/* --- access.c: the envd access token's shape (pure; fuzzed by fuzz/fuzz_connect.c) -------- */

#define E2B_WHO_MAX 48 /* issuer with its NUL: sizeof(struct tenancy_principal.who) */

/* A parsed "<64 hex MAC>.<role letter><issuer>". */
struct e2b_access {
	char mac[E2B_TOKEN_HEX + 1]; /* lowercase hex, as sent (not yet verified) */
	enum tenancy_role role;	     /* r, u, a */
	char who[E2B_WHO_MAX];	     /* issuer: "token:<id>", "e2b:api.token", "e2b:unix" */
};

/* 'r', 'u' or 'a'. */
char e2b_access_role_char(enum tenancy_role role);
/* An issuer name an access token may carry: 1..47 of [a-z0-9:._-]. */
bool e2b_access_who_ok(const char *who);
/* Splits an access token (UNTRUSTED, NUL-terminated) into *out. 0, or -EINVAL for anything
 * not of the shape above (length, hex, separator, role letter, issuer characters). */
int e2b_access_parse(const char *tok, struct e2b_access *out);
/* Formats mac (64 hex), role and who into out (size n, >= E2B_TOKEN_MAX is enough). 0,
 * -EINVAL (bad mac or who) or -ENOSPC; out is "" on failure. */
int e2b_access_format(const char *mac, enum tenancy_role role, const char *who, char *out,
		      size_t n);

/* --- signed.c: signed file URLs (pure; fuzzed by fuzz/fuzz_connect.c) ------------------------ */

#define E2B_SIG_LEN 46 /* "v1_" + 43 base64 characters of a SHA-256, padding removed */

/* A signed URL's query: `signature` and the optional `signature_expiration`. */
struct e2b_sig {
	char sig[E2B_SIG_LEN + 1]; /* "v1_...", as sent (not yet verified) */
	bool has_exp;		   /* signature_expiration was given */
	int64_t exp;		   /* its unix seconds */
};

/* Checks the shape of sig and exp (UNTRUSTED, NUL-terminated; exp may be NULL) into *out.
 * 0, or -EINVAL for anything that is not "v1_" + 43 base64 characters / 1-12 digits. */
int e2b_sig_parse(const char *sig, const char *exp, struct e2b_sig *out);
/* The SDK's signature of (path, op, user, token[, q's expiration]) into out. 0 or -EINVAL. */
int e2b_sig_compute(const char *path, const char *op, const char *user, const char *token,
		    const struct e2b_sig *q, char out[E2B_SIG_LEN + 1]);
/* Compares two E2B_SIG_LEN signatures in constant time. */
bool e2b_sig_equal(const char *a, const char *b);

/* --- gzip.c: streaming gzip for /files (pure; fuzzed by fuzz/fuzz_connect.c) ------------------ */

#define E2B_GZ_CHUNK (32u * 1024) /* output handed to the callback at a time */

/* A zlib stream in one direction. Embedded: e2b_gunzip_init/e2b_gzip_init, then e2b_gz_fini. */
struct e2b_gz {
	z_stream z;	    /* zlib state */
	bool ready;	    /* initialised (fini releases) */
	bool inflating;	    /* decoder (else encoder) */
	bool member_end;    /* decoder: the last member ended (a next one may follow) */
	unsigned members;   /* decoder: complete members seen */
	uint64_t total_out; /* bytes handed to the callback */
};

/* Receives output; a negative return stops the feed and is returned by it. */
typedef int (*e2b_gz_out_fn)(void *ud, const void *buf, size_t len);

/* A gzip decoder (gzip wrapper only). 0 or -ENOMEM. */
int e2b_gunzip_init(struct e2b_gz *g);
/* Decodes in (UNTRUSTED), calling out for every E2B_GZ_CHUNK or less. 0; -EINVAL for
 * corrupt data with *why (static) saying what; -ENOMEM; or out's negative return. */
int e2b_gunzip_feed(struct e2b_gz *g, const void *in, size_t n, e2b_gz_out_fn out, void *ud,
		    const char **why);
/* At the end of input: 0 when every member was complete, else -EINVAL with *why. */
int e2b_gunzip_finish(const struct e2b_gz *g, const char **why);
/* A gzip encoder (level 6). 0 or -ENOMEM. */
int e2b_gzip_init(struct e2b_gz *g);
/* Encodes in; with finish, also flushes and writes the trailer. 0 or out's negative return. */
int e2b_gzip_feed(struct e2b_gz *g, const void *in, size_t n, bool finish, e2b_gz_out_fn out,
		  void *ud);
void e2b_gz_fini(struct e2b_gz *g);
/* Does an Accept-Encoding value (may be NULL) accept gzip? */
bool e2b_accepts_gzip(const char *accept_encoding);

/* --- auth.c ------------------------------------------------------------------------------- */

/* Resolves X-API-KEY (or Authorization: Bearer) to r->who: the operator's API token is the
 * admin of `default`, a tenant token acts as its tenant and role. False when neither. */
bool e2b_api_key_auth(struct api_req *r);
/* The envdAccessToken r's caller gets for a sandbox: "<MAC>.<role><issuer>", the MAC a hex
 * HMAC-SHA-256 of (sandbox id, role, issuer = r->who.who) under a key derived from the API
 * token, so it needs no storage and survives isolad restarts. out >= E2B_TOKEN_MAX bytes;
 * "" when it cannot be made. */
void e2b_envd_token(struct api_req *r, const char *sandbox_id, char *out, size_t n);
/* Checks X-Access-Token for sandbox_id (MAC in constant time), then its issuer as it is now
 * (a tenant token must exist and not be revoked). 0 with r->who set to the issuer with the
 * smaller of the issued and the current role; -EACCES otherwise. */
int e2b_envd_auth(struct api_req *r, const char *sandbox_id);
/* A signed /files URL (no X-Access-Token): finds the sandbox (the request's E2b-Sandbox-Id or
 * Host if it names one, else every sandbox) and the issuer whose envdAccessToken signs
 * (path, op, username[, expiration]); then acts as that issuer, like e2b_envd_auth(), and
 * writes the sandbox id to sandbox (n bytes). -EKEYEXPIRED past the expiration, -EACCES
 * when nothing signs it. Audited either way. */
int e2b_signed_auth(struct api_req *r, const char *op, char *sandbox, size_t n);
/* The user named by `Authorization: Basic base64(user:)`, "" when absent. -EINVAL when
 * present but malformed. UNTRUSTED input, validated: [A-Za-z0-9._-], 1..63 bytes. */
int e2b_basic_user(const char *hdr, char *out, size_t n);

/* The user an envd request without one runs as, as on E2B (uid 1000, home /home/user). */
#define E2B_DEFAULT_USER "user"

/* File metadata (`files.write(..., {metadata})`, X-Metadata-* headers): stored by the agent
 * as user.e2b.<key> xattrs; the limits keep every name under XATTR_NAME_MAX. */
#define E2B_META_MAX	   32	/* entries per file */
#define E2B_META_KEY_MAX   128	/* key bytes */
#define E2B_META_VALUE_MAX 1024 /* value bytes */
/* The sandbox id an envd request addresses: E2b-Sandbox-Id, else a Host of the form
 * "49983-<id>.<domain>". -EINVAL when neither names a valid id. */
int e2b_envd_sandbox(struct api_req *r, char *out, size_t n);

/* --- control.c: control plane handlers ------------------------------------------------------ */

enum MHD_Result e2b_ctl_create(struct api_req *r);
enum MHD_Result e2b_ctl_list(struct api_req *r);
enum MHD_Result e2b_ctl_list_v1(struct api_req *r);
enum MHD_Result e2b_ctl_get(struct api_req *r);
enum MHD_Result e2b_ctl_kill(struct api_req *r);
enum MHD_Result e2b_ctl_timeout(struct api_req *r);
enum MHD_Result e2b_ctl_refresh(struct api_req *r);
enum MHD_Result e2b_ctl_pause(struct api_req *r);
enum MHD_Result e2b_ctl_resume(struct api_req *r);
enum MHD_Result e2b_ctl_connect(struct api_req *r);
enum MHD_Result e2b_ctl_metrics(struct api_req *r);
/* PUT /sandboxes/{id}/network (updateNetwork): replaces the sandbox's egress policy. */
enum MHD_Result e2b_ctl_network(struct api_req *r);
/* E2B's allow_internet_access (boolean or NULL) and network config (object or NULL) as an
 * isola egress policy in *out (new reference), validated; *out NULL when both are absent (the
 * operator's default applies). What isola cannot enforce is `not_supported`. */
int e2b_network_policy(const json_t *internet, const json_t *net, json_t **out,
		       struct isola_err **err);
/* {"code": status, "message"} with that HTTP status. */
enum MHD_Result e2b_ctl_error(struct api_req *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Maps an isola error to the control plane's shape (429 + Retry-After for a full host). */
enum MHD_Result e2b_ctl_err(struct api_req *r, const struct isola_err *e);
/* The sandbox of {id} (reference in *s) as JSON (sandbox_to_json, new reference in *sj);
 * responds 404 and returns -1 if unknown. */
int e2b_ctl_sandbox(struct api_req *r, struct sandbox **s, json_t **sj);
/* 200 with the JSON array `items` (borrowed) and, when next is non-empty, the next page's
 * token in X-Next-Token (the SDK's paginators read it). */
enum MHD_Result e2b_ctl_page(struct api_req *r, json_t *items, const char *next);
/* The buffered JSON body (an object; {} when empty). Responds and returns -1 on error. */
int e2b_ctl_body(struct api_req *r, json_t **out);
/* E2B's Sandbox (detail: SandboxDetail) for sandbox_to_json() output sj (borrowed), with an
 * envdAccessToken for r's caller and the `domain` getHost() uses. New reference or NULL. */
json_t *e2b_sandbox_obj(struct api_req *r, const json_t *sj, bool detail);
/* After a create through the E2B API: every port of sandbox id is reachable through the
 * exposure listener (E2B's public traffic), when the listener runs. Best effort: logged. */
void e2b_ctl_expose_all(struct sandbox *s);
/* True when `name` is one of r's tenant's named snapshots. */
bool e2b_is_snapshot(struct api_req *r, const char *name);

/* --- template.c: the SDK's template builder (Template.build) -------------------------------- */

/* POST /v3/templates {name} -> 202 {templateID, buildID}: a build record, `waiting`. */
enum MHD_Result e2b_tpl_request(struct api_req *r);
/* GET /templates/{tid}/files/{hash} -> 201 {present, url}: url PUTs the files to isolad. */
enum MHD_Result e2b_tpl_files(struct api_req *r);
/* PUT /templates/{tid}/files/{hash}?token=: a (gzip) tar of one copy(), size-capped and
 * checked, into the tenant's file store. */
int e2b_tpl_upload_begin(struct api_req *r);
int e2b_tpl_upload_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result e2b_tpl_upload_end(struct api_req *r);
/* POST /v2/templates/{tid}/builds/{bid} {fromImage|fromTemplate, steps, startCmd}: the
 * steps as a Dockerfile, built on a worker thread; refusals (400) name the step. */
enum MHD_Result e2b_tpl_build(struct api_req *r);
/* GET /templates/{tid}/builds/{bid}/status?logsOffset= -> {status, logEntries, reason}. */
enum MHD_Result e2b_tpl_status(struct api_req *r);
/* GET /templates/aliases/{alias} -> 200 {templateID} or 404 (Template.exists). */
enum MHD_Result e2b_tpl_alias(struct api_req *r);

/* --- template_plan.c: steps -> Dockerfile, the file store, the build context --------------- */

#define E2B_TPL_FILES_TTL_S 86400 /* an upload unused this long is removed from the store */

/* The SDK's template translated for the Dockerfile builder (e2b_tpl_plan_make). */
struct e2b_tpl_plan {
	struct api_req *r;  /* caller (borrowed): its tenant's templates and files */
	char *df;	    /* the Dockerfile (owned) */
	size_t len;	    /* its length */
	json_t *copies;	    /* [{hash, src, dest, step}] of the COPY steps (owned, set by caller) */
	json_t *stepmap;    /* per Dockerfile step after FROM: its E2B step ("1", "finalize")
			    * (owned, set by caller) */
	char user[64];	    /* USER in effect (restored after a runCmd as another user) */
	char pull_ref[600]; /* operator's fromImage to pull first as FROM's template, or "" */
	char err[512];	    /* what was refused, naming the step */
};
/* Translates the SDK's body {fromImage|fromTemplate, steps, startCmd, readyCmd} (UNTRUSTED)
 * into p (copies and stepmap already made by the caller). 0, or -EINVAL with p->err. */
int e2b_tpl_plan_make(struct e2b_tpl_plan *p, json_t *body);
/* Releases what p owns. */
void e2b_tpl_plan_fini(struct e2b_tpl_plan *p);
/* The tenant's file store, <spool>/e2b-files/<sha256(tenant) hex, 32>, made when create.
 * 0 or -errno. */
int e2b_tpl_store_dir(struct api_server *srv, const char *tenant, bool create, char *out, size_t n);
/* Is the upload of hash in the tenant's store? */
bool e2b_tpl_file_present(struct api_server *srv, const char *tenant, const char *hash);
/* Removes the tenant's uploads unused for E2B_TPL_FILES_TTL_S. Best effort. */
void e2b_tpl_store_prune(struct api_server *srv, const char *tenant);
/* Writes the build context tar at path: the Dockerfile, then the entries of every copy's
 * upload (from store), each upload first checked against its hash where it can be (see
 * template_plan.c). 0, or -errno with why and, when a COPY is at fault, its E2B step. Worker
 * thread. */
int e2b_tpl_context(const char *store, const char *dockerfile, const json_t *copies,
		    const char *path, char *why, size_t n, char *step, size_t sn);
/* Path parameter shapes: a files hash (64 lowercase hex), a build id (32 lowercase hex). */
bool e2b_tpl_valid_hash(const char *s);
bool e2b_tpl_valid_build_id(const char *s);

/* --- snapshot.c: snapshots and fork ------------------------------------------------------ */

/* POST /sandboxes/{id}/snapshots {name?} -> 201 {snapshotID, names}. */
enum MHD_Result e2b_ctl_snapshot(struct api_req *r);
/* GET /snapshots?sandboxID=&name=&limit=&nextToken= -> 200 [{snapshotID, names}]. */
enum MHD_Result e2b_ctl_snapshot_list(struct api_req *r);
/* DELETE /templates/{id}: deletes the snapshot of that id (the SDK's deleteSnapshot). */
enum MHD_Result e2b_ctl_snapshot_delete(struct api_req *r);
/* POST /sandboxes/{id}/fork {timeout?, count?} -> 201 [{sandbox} | {error}]. */
enum MHD_Result e2b_ctl_fork(struct api_req *r);

/* --- envd.c: envd plumbing shared by the services ------------------------------------------ */

/* A Connect unary error response. */
enum MHD_Result e2b_rpc_error(struct api_req *r, const char *connect_code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An isola error as a Connect unary error. */
enum MHD_Result e2b_rpc_err(struct api_req *r, const struct isola_err *e);
/* A Connect unary success (steals body). */
enum MHD_Result e2b_rpc_ok(struct api_req *r, json_t *body);
/* Parses the unary request message (application/json) or the single envelope of a
 * server-streaming request (application/connect+json, `stream` true). Responds on error
 * and returns -1. */
int e2b_rpc_request(struct api_req *r, bool stream, json_t **msg);
/* Looks up the envd request's sandbox (reference in *s), makes the caller act for its
 * tenant and marks it active; -ENOENT when it is gone. */
int e2b_envd_sandbox_get(struct api_req *r, struct sandbox **s);
/* The addressed sandbox with its agent (reference in *s). Responds on error, returns -1. */
int e2b_rpc_sandbox(struct api_req *r, struct sandbox **s, struct agent_conn **conn);
/* agent_call() with E2B_CALL_MS; result may be NULL (the reply is dropped). */
int e2b_agent_call(struct agent_conn *conn, const json_t *req, json_t **result,
		   struct isola_err **err);
/* Keepalive-Ping-Interval in ms (0 = none asked). */
uint64_t e2b_keepalive_ms(struct api_req *r);
/* Connect-Timeout-Ms (0 = none). */
uint64_t e2b_timeout_ms(struct api_req *r);

/* A server-streaming response: `next` is called to produce envelopes; it returns 0 to be
 * called again, 1 after its last message, -1 to abort. On 1 the stream appends the
 * end-of-stream envelope itself ({} or the error recorded with e2b_stream_fail). */
struct e2b_stream;
typedef int (*e2b_next_fn)(struct e2b_stream *st, void *ud);
struct e2b_stream_cfg {
	e2b_next_fn next;	   /* producer */
	void *ud;		   /* producer state, owned */
	void (*free_ud)(void *ud); /* releases ud */
	uint64_t keepalive_ms;	   /* 0 = no keepalive messages */
	json_t *keepalive;	   /* the keepalive message (stolen) */
};
enum MHD_Result e2b_stream_respond(struct api_req *r, const struct e2b_stream_cfg *cfg);
/* Appends one message envelope (steals j). 0 or -ENOMEM. */
int e2b_stream_msg(struct e2b_stream *st, json_t *j);
/* Records the error the end-of-stream envelope will carry. */
void e2b_stream_fail(struct e2b_stream *st, const char *connect_code, const char *message);
void e2b_stream_fail_err(struct e2b_stream *st, const struct isola_err *e);
/* True once the client is gone or the server stops; also sends a keepalive when due.
 * Call while waiting. */
bool e2b_stream_idle(struct e2b_stream *st);
/* The api_req's client fd, for waits. */
int e2b_stream_fd(struct e2b_stream *st);

/* --- envd_process.c / envd_fs.c / envd_files.c -------------------------------------------- */

enum MHD_Result e2b_proc_start(struct api_req *r);
enum MHD_Result e2b_proc_connect(struct api_req *r);
enum MHD_Result e2b_proc_list(struct api_req *r);
enum MHD_Result e2b_proc_send_input(struct api_req *r);
enum MHD_Result e2b_proc_close_stdin(struct api_req *r);
enum MHD_Result e2b_proc_send_signal(struct api_req *r);
enum MHD_Result e2b_proc_update(struct api_req *r);
enum MHD_Result e2b_rpc_unimplemented(struct api_req *r);

enum MHD_Result e2b_fs_stat(struct api_req *r);
enum MHD_Result e2b_fs_make_dir(struct api_req *r);
enum MHD_Result e2b_fs_move(struct api_req *r);
enum MHD_Result e2b_fs_list_dir(struct api_req *r);
enum MHD_Result e2b_fs_remove(struct api_req *r);
enum MHD_Result e2b_fs_watch_dir(struct api_req *r);
enum MHD_Result e2b_fs_create_watcher(struct api_req *r);
enum MHD_Result e2b_fs_get_watcher_events(struct api_req *r);
enum MHD_Result e2b_fs_remove_watcher(struct api_req *r);
/* EntryInfo (proto3 JSON) from an agent entry (UNTRUSTED: typed fields only). */
json_t *e2b_entry_info(const json_t *agent_entry);

/* --- code.c: the code interpreter's port (49999) through the E2B headers ------------------ */

/* The E2b-Sandbox-Port the code interpreter SDK sends (E2B's JUPYTER_PORT). */
#define E2B_CODE_PORT "49999"
/* @e2b/code-interpreter's default template id: the default template unless one has the name. */
#define E2B_CODE_TEMPLATE "code-interpreter-v1"
#define E2B_CODE_MEMORY	  (1024ull << 20) /* its sandboxes' memory: a few Python contexts */
/* A code request without X-Access-Token: allowed when the sandbox's port 49999 is public
 * (made through the E2B API, as E2B serves it); then r->who acts for the sandbox's tenant as
 * `e2b:public` with role user. -EACCES otherwise. */
int e2b_code_public(struct api_req *r, const char *sandbox_id);
/* Each forwards the request to the service (started on demand) and relays its answer:
 * status, Content-Type and body, the body streamed as it comes. */
enum MHD_Result e2b_code_health(struct api_req *r);
enum MHD_Result e2b_code_execute(struct api_req *r);
enum MHD_Result e2b_code_contexts(struct api_req *r);
enum MHD_Result e2b_code_context_create(struct api_req *r);
enum MHD_Result e2b_code_context_restart(struct api_req *r);
enum MHD_Result e2b_code_context_delete(struct api_req *r);

enum MHD_Result e2b_health(struct api_req *r);
enum MHD_Result e2b_files_get(struct api_req *r);
int e2b_files_post_begin(struct api_req *r);
int e2b_files_post_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result e2b_files_post_end(struct api_req *r);

#endif
