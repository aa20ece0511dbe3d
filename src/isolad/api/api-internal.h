/* SPDX-License-Identifier: Apache-2.0 */
/* api-internal: what the API's files share — server, request, routes, parsing, responses. */
#ifndef ISOLA_API_INTERNAL_H
#define ISOLA_API_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "../../common/err.h"
#include "../tenancy/tenancy.h"

#define API_VERSION	     "0.1.0"
#define API_MAX_JSON_BODY    (1u << 20)	   /* JSON request bodies */
#define API_MAX_JSON_DEPTH   32		   /* nesting of JSON request bodies */
#define API_MAX_PATH	     4096	   /* sandbox paths in requests */
#define API_MAX_PARAMS	     4		   /* {params} in one route pattern */
#define API_MAX_SEGMENT	     128	   /* bytes in one URL path segment */
#define API_MAX_HEADER_BYTES (16u * 1024u) /* MHD per-connection memory (headers) */
#define API_IDLE_TIMEOUT_S   120	   /* idle connection timeout */
#define API_FD_RESERVE	     256	   /* fds per process not given to API connections */
#define API_LISTEN_BACKLOG   1024	   /* listen(2) backlog: bursts of connects (tcp_listen) */
#define API_DEFAULT_OUTPUT   (1u << 20)	   /* exec max_output default, per stream */
#define API_MAX_OUTPUT	     (64u << 20)   /* exec max_output ceiling, per stream */
#define API_DISCARD_LIMIT    (64u << 20)   /* body bytes swallowed after a failure */
#define API_POLL_MS	     500	   /* wake-up period of blocking waits */
#define API_WS_PROTOCOL	     "isola"	   /* WebSocket subprotocol ws.c echoes when offered */
#define API_WS_BEARER	     "isola.bearer." /* + token: a browser's WebSocket auth */

struct core;
struct sandbox;
struct agent_conn;
struct agent_chan;

struct api_server;

/* Which listener a connection came through (the MHD access handler's closure). */
struct api_listener {
	struct api_server *srv; /* the server */
	bool need_auth;		/* TCP: bearer token required */
};

/* One running API server. Shared by all connection threads; fields after `lock` are
 * protected by it. */
struct api_server {
	struct core *core;	    /* borrowed, outlives the server */
	struct MHD_Daemon *unix_d;  /* daemon on the unix socket */
	struct MHD_Daemon *tcp_d;   /* daemon on TCP, or NULL */
	struct api_listener unix_l; /* closure of unix_d: no auth (the socket is 0600) */
	struct api_listener tcp_l;  /* closure of tcp_d: bearer token */
	char socket_path[108];	    /* unix socket path (removed at stop) */
	char listen_addr[128];	    /* TCP listen address, "" for none */
	int ufd, tfd;		    /* bound listening sockets until the daemons take them, or -1 */
	bool serving;		    /* api_server_start() succeeded */
	char spool_dir[512];	    /* template upload spool directory */
	uint64_t max_upload;	    /* cap on streamed uploads, bytes */
	unsigned idle_timeout_s;    /* MHD connection timeout, seconds */
	pthread_mutex_t lock;	    /* protects what follows */
	pthread_cond_t cond;	    /* signalled when `workers` drops */
	unsigned workers;	    /* live threads we started (WebSocket sessions, imports) */
	bool stopping;		    /* api_server_stop() has begun */
	bool console;		    /* serve the web console at / (console.c) */
};

/* Registers a worker thread; false when the server is stopping (do not start it). */
bool api_server_worker_enter(struct api_server *srv);
void api_server_worker_leave(struct api_server *srv);
bool api_server_is_stopping(struct api_server *srv);

/* Path parameters captured by a route pattern's {name} segments. */
struct api_match {
	unsigned n;				      /* captured parameters */
	const char *names[API_MAX_PARAMS];	      /* parameter names, into the pattern */
	size_t name_lens[API_MAX_PARAMS];	      /* their lengths */
	char values[API_MAX_PARAMS][API_MAX_SEGMENT]; /* captured segment values */
};

enum api_body {
	API_BODY_NONE,	 /* body ignored */
	API_BODY_JSON,	 /* buffered (<= API_MAX_JSON_BODY), parsed, handed to handle() */
	API_BODY_STREAM, /* streamed to begin()/data(), then handle() */
};

struct api_req;

/* Queues the final response; returns MHD_NO to drop the connection. */
typedef enum MHD_Result (*api_handle_fn)(struct api_req *r);
/* Streamed bodies: 0, or -errno after setting r->fail (the rest of the body is discarded
 * and the error becomes the response). */
typedef int (*api_begin_fn)(struct api_req *r);
typedef int (*api_data_fn)(struct api_req *r, const char *buf, size_t len);

/* One route. The table lives in server.c (api_routes[]) between ROUTES-BEGIN/ROUTES-END. */
struct api_route {
	const char *method;   /* "GET", "POST", ... */
	const char *pattern;  /* "/v1/sandboxes/{id}"; {id}, {pid}, {name} are validated */
	enum api_body body;   /* how the request body is handled */
	api_handle_fn handle; /* final step, always set */
	api_begin_fn begin;   /* API_BODY_STREAM: once the headers are in (optional) */
	api_data_fn data;     /* API_BODY_STREAM: each body chunk */
};

/* One HTTP request, from the first access-handler call to MHD's completion callback. */
struct api_req {
	struct api_server *srv;	       /* the server */
	struct MHD_Connection *conn;   /* borrowed for the request's life */
	const struct api_route *route; /* matched route */
	struct api_match match;	       /* path parameters */
	char *body;		       /* API_BODY_JSON: bytes so far, owned */
	size_t body_len;	       /* bytes in body */
	json_t *json;		       /* API_BODY_JSON: parsed body (NULL when empty), owned */
	uint64_t uploaded;	       /* API_BODY_STREAM: bytes received */
	uint64_t discarded;	       /* body bytes swallowed after a failure */
	struct isola_err *fail;	       /* failure decided while the body was arriving, owned */
	unsigned fail_status;	       /* status override for `fail` (0 = from its code) */
	bool responded;		       /* a response was queued */
	struct tenancy_principal who;  /* the caller, resolved before routing */
	char method[8];		       /* request method (for the audit record) */
	char path[128];		       /* request path, truncated (for the audit record) */
	unsigned status;	       /* HTTP status queued (0 = none yet) */
	char err_code[32];	       /* code of the error response, "" on success */
	char audit_target[64];	       /* object acted on, when no path parameter names it */
	double retry_after_s;	       /* > 0: a 429 carries Retry-After */
	void *state;		       /* handler state for streamed bodies, owned via state_free */
	void (*state_free)(void *state); /* releases state; runs on completion or disconnect */
};

/* --- route.c: pure matching and validation ------------------------------------------ */

/* True when path matches pattern segment by segment; {x} segments capture into m. */
bool api_route_match(const char *pattern, const char *path, struct api_match *m);

/* The value captured for {name}, or NULL. */
const char *api_match_get(const struct api_match *m, const char *name);

/* Validates a captured parameter by its name (id, pid, name); other names pass. */
int api_param_check(const char *name, const char *value, struct isola_err **err);
/* True for ?key=true|1|yes. */
bool api_query_true(struct api_req *r, const char *key);

bool api_valid_sandbox_id(const char *s);
bool api_valid_template_name(const char *s);
int api_parse_pid(const char *s, int *out);

/* True when a tar member name is safe to hand to a client or the agent: relative, no ".."
 * component, no NUL within len, at most API_MAX_PATH. */
bool api_tar_name_ok(const char *name, size_t len);
/*
 * A browser cannot set headers on a WebSocket, so the web console offers its token as the
 * subprotocol `isola.bearer.<token>` (next to `isola`, which ws.c echoes; docs/console.md).
 * Returns where the token starts in the Sec-WebSocket-Protocol value h (NULL is fine) with its
 * length in *len, or NULL when no element carries one. Pure; h is borrowed.
 */
const char *api_ws_protocol_token(const char *h, size_t *len);

/* Checks a path given for a sandbox: non-empty, no NUL within len, at most API_MAX_PATH. */
int api_check_path(const char *what, const char *p, size_t len, struct isola_err **err);

/* --- params.c: pure value and JSON body parsing -------------------------------------- */

int api_parse_bool(const char *s, bool *out);
int api_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* Seconds as a decimal ("1.5") into milliseconds; max in ms. */
int api_parse_seconds_ms(const char *s, uint64_t max_ms, uint64_t *out);
/* An octal permission string ("0644", "755") up to 07777. */
int api_parse_mode(const char *s, uint32_t *out);
/* "TERM", "SIGTERM", "9" -> signal number. */
int api_signal_from_name(const char *s);

/* HTTP Range (one range only): bytes=a-b, bytes=a-, bytes=-n. */
struct api_range {
	bool suffix;	/* bytes=-n: the last `len` bytes */
	uint64_t start; /* first byte (not suffix) */
	uint64_t end;	/* last byte inclusive, UINT64_MAX when open */
	uint64_t len;	/* suffix length */
};
/* 0, or -EINVAL when malformed or multi-range (the header is then ignored). */
int api_parse_range(const char *hdr, struct api_range *out);
/* Resolves against the file size: offset and length to send; -ERANGE if unsatisfiable. */
int api_range_resolve(const struct api_range *rg, uint64_t size, uint64_t *off, uint64_t *len);

/* True when the JSON text nests no deeper than max (strings skipped correctly). */
bool api_json_depth_ok(const char *buf, size_t len, unsigned max);
/* Parses a request body: an object, depth-checked; `invalid` naming line/column. */
int api_json_parse_body(const char *buf, size_t len, json_t **out, struct isola_err **err);
/* Refuses members of obj not in the NULL-terminated allowed list (`invalid` naming it). */
int api_json_only(const json_t *obj, const char *const *allowed, struct isola_err **err);

/* Typed getters: absent members leave *out untouched and return 0; a wrong type is
 * `invalid` naming the field. */
int api_json_str(const json_t *obj, const char *key, size_t max, const char **out,
		 struct isola_err **err);
int api_json_bool(const json_t *obj, const char *key, bool *out, struct isola_err **err);
int api_json_uint(const json_t *obj, const char *key, uint64_t max, uint64_t *out,
		  struct isola_err **err);
int api_json_num(const json_t *obj, const char *key, double min, double max, double *out,
		 struct isola_err **err);
/* A byte size: integer or "512M". */
int api_json_size(const json_t *obj, const char *key, uint64_t *out, struct isola_err **err);
/* {string: string} with checked keys; *out borrowed from obj. */
int api_json_str_map(const json_t *obj, const char *key, bool env_keys, const json_t **out,
		     struct isola_err **err);
/* argv from "cmd" (array of strings) or "command" (shell string): new reference. */
int api_json_argv(const json_t *obj, json_t **out, struct isola_err **err);
/* "signal": name or number. */
int api_json_signal(const json_t *obj, const char *key, int *out, struct isola_err **err);

/* --- spawnopts.c: a command's narrowing fields --------------------------------------- */

/* The body fields api_spawn_narrowing reads, for a request's list of allowed fields. */
#define API_SPAWN_FIELDS                                                                           \
	"gid", "additional_gids", "umask", "rlimits", "rlimits_cap", "oom_score_adj"
/*
 * Checks the narrowing fields of a command's body (POST .../exec, .../processes; UNTRUSTED:
 * the client's JSON) and copies them into req, the agent's exec request: `gid` (the primary
 * group instead of the user's, 0-65535; neutral inside the sandbox), `additional_gids`
 * (gids 0-65535), `umask` (0-0777), `rlimits` ([{type, soft, hard}], known types once each,
 * soft <= hard; `rlimits_cap`: a limit above the sandbox's is lowered to it, not refused) and
 * `oom_score_adj` (-1000-1000). Any principal may set them: they only
 * narrow, and the agent refuses what would widen (a hard limit above the sandbox's, an
 * oom_score_adj below it; docs/process-tier.md). Returns 0 or -EINVAL with *err naming the field.
 */
int api_spawn_narrowing(const json_t *body, json_t *req, struct isola_err **err);

/* --- errors.c: the one error -> HTTP mapping ----------------------------------------- */

unsigned api_status_for_code(const char *code);
json_t *api_error_json(const char *code, const char *message);
enum MHD_Result api_respond_json(struct api_req *r, unsigned status, json_t *body);
/* A compact JSON response with Content-Type application/json, for replies that add headers
 * before api_respond_response(). Consumes body (NULL is out of memory); NULL on ENOMEM. */
struct MHD_Response *api_json_response(json_t *body);
enum MHD_Result api_respond_err(struct api_req *r, const struct isola_err *e);
enum MHD_Result api_respond_error(struct api_req *r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
enum MHD_Result api_respond_empty(struct api_req *r, unsigned status);
enum MHD_Result api_respond_response(struct api_req *r, unsigned status, struct MHD_Response *resp);

/* --- stream.c: streamed responses ------------------------------------------------------ */

enum api_fmt {
	API_FMT_JSON,	/* one JSON document at the end */
	API_FMT_NDJSON, /* application/x-ndjson: one event per line */
	API_FMT_SSE,	/* text/event-stream */
	API_FMT_RAW,	/* bytes as they are */
};

/* A growable byte buffer with a read offset. */
struct api_buf {
	char *data; /* owned */
	size_t len; /* bytes written */
	size_t off; /* bytes consumed */
	size_t cap; /* allocated */
};
int api_buf_append(struct api_buf *b, const void *p, size_t n);
void api_buf_fini(struct api_buf *b);

/* Picks the event format from the ?stream= value (json|ndjson|sse; NULL if absent), then
 * the Accept header (may be NULL). -EINVAL for a bad ?stream value. */
int api_pick_format(const char *stream_q, const char *accept, enum api_fmt *out,
		    struct isola_err **err);
/* api_pick_format() for a request. */
#define api_req_format(r, out, err)                                                                \
	api_pick_format(api_query((r), "stream"), api_header((r), MHD_HTTP_HEADER_ACCEPT), (out),  \
			(err))
/* Appends one event (an object with "type") as NDJSON or SSE to b. */
int api_event_format(enum api_fmt fmt, const json_t *ev, struct api_buf *b);
/* base64 of bytes as a new JSON string. */
json_t *api_b64_json(const void *p, size_t n);
/* Valid UTF-8 copy of bytes (invalid sequences become U+FFFD) as a new JSON string. */
json_t *api_utf8_json(const void *p, size_t n, bool *was_valid);

struct api_stream;
/* Produces more output into st (api_stream_event / api_stream_write). Returns 0 to be called
 * again, 1 at the end of the stream, or -1 to abort (connection dropped). May block. */
typedef int (*api_produce_fn)(struct api_stream *st, void *ud);

/* A response whose content is produced on demand. `size` is MHD_SIZE_UNKNOWN (chunked) or
 * the exact length. The stream owns ud and frees it with free_ud when MHD is done (also on
 * client disconnect). Returns NULL on ENOMEM (ud freed). */
struct MHD_Response *api_stream_response(struct api_req *r, enum api_fmt fmt, uint64_t size,
					 api_produce_fn produce, void *ud,
					 void (*free_ud)(void *ud));
int api_stream_event(struct api_stream *st, json_t *ev); /* steals ev */
int api_stream_write(struct api_stream *st, const void *p, size_t n);
/* True once the client has gone (checked while waiting). */
bool api_stream_peer_gone(struct api_stream *st);
/*
 * Breaks off a stream whose headers are out because isolad cannot finish it (agent lost or
 * failed, encoder error): logs `kind` (a /metrics label, "archive" or "file"), the bytes
 * already handed to MHD and the cause (printf fmt), counts it with code (the cause's error
 * code) in /metrics, and returns -1 for produce to return. MHD then closes the connection
 * without the chunked terminator (or short of Content-Length): every HTTP client sees a
 * truncated body, never a clean end. Call from produce only.
 */
int api_stream_abort(struct api_stream *st, const char *kind, const char *code, const char *fmt,
		     ...) __attribute__((format(printf, 4, 5)));
/* Bytes of st handed to MHD so far. */
uint64_t api_stream_sent(const struct api_stream *st);
enum api_fmt api_stream_fmt(const struct api_stream *st);

/* The client socket of r, and whether its peer has hung up. */
int api_req_fd(struct api_req *r);
bool api_fd_peer_gone(int fd);
/* Resets the idle timer after a long blocking wait. */
void api_req_keepalive(struct api_req *r);

/* --- server.c helpers ------------------------------------------------------------------ */

const char *api_query(struct api_req *r, const char *key);
const char *api_header(struct api_req *r, const char *key);
/* Looks up the sandbox of {id}, touches it and gets its agent. On failure responds. */
int api_sandbox_agent(struct api_req *r, struct sandbox **s, struct agent_conn **conn,
		      struct isola_err **err);
/* Sets r->fail (steals e) for a streamed body. Returns -errnum. */
int api_req_fail(struct api_req *r, struct isola_err *e);

/* --- exec.c: draining exec/attach channels (used by exec, processes, ws) ---------------- */

/* A channel being drained into an HTTP response: a foreground exec or an attach. */
struct api_output {
	struct api_server *srv;	      /* for the stopping flag */
	struct sandbox *s;	      /* reference, owned */
	struct agent_chan *ch;	      /* owned */
	int peer_fd;		      /* client socket (hang-up checks), borrowed */
	bool check_oom;		      /* compare oom_kills on a SIGKILL exit */
	uint64_t oom_before;	      /* sandbox oom_kills before the command started */
	int quiet_ms;		      /* > 0: end after this long without a frame (no follow) */
	long pid;		      /* process id, 0 until known */
	bool start_sent;	      /* streamed: the start event went out */
	bool ended;		      /* EXIT, ERROR or quiet end seen */
	size_t cap;		      /* JSON: bytes kept per stream */
	struct api_buf out[2];	      /* JSON: stdout, stderr (first cap bytes) */
	uint64_t bytes[2];	      /* total bytes seen per stream */
	json_t *exit;		      /* exit object once seen, owned */
	json_t *dropped;	      /* array of dropped events, owned */
	json_t *error;		      /* error event once seen, owned */
	json_t *audit_argv;	      /* exec: argv to audit at exit, owned; NULL = not audited */
	char audit_user[64];	      /* exec: the user it runs as */
	struct tenancy_principal who; /* exec: who started it */
	uint64_t started_ms;	      /* exec: when it was started */
};

/* Takes ownership of s (a reference) and ch. NULL on ENOMEM (both released). */
struct api_output *api_output_new(struct api_req *r, struct sandbox *s, struct agent_chan *ch);
void api_output_free(void *o);
/* Responds with the output: collected into one JSON document, or streamed as events.
 * Consumes o on every path. */
enum MHD_Result api_output_respond(struct api_req *r, struct api_output *o, enum api_fmt fmt);

/* Whether a process of the command whose agent EXIT frame this is was killed by the OOM
 * killer while it ran: the sandbox's OOM-kill counter grew past the `oom_base` the frame
 * echoes (the counter when the command started; api_exec_set_oom_base put it in the
 * request), or past fallback_base (-1: unknown) for frames without one. The exit status
 * does not matter (a shell survives its child's kill and exits 0). Concurrent commands in
 * one sandbox are not told apart: one command's OOM kill reads as OOM for every command
 * running at that moment. */
bool api_exit_oom(struct sandbox *s, const json_t *agent_exit, int64_t fallback_base);
/* Adds `oom_base` (the sandbox's OOM-kill counter now) to an agent exec request. */
void api_exec_set_oom_base(struct sandbox *s, json_t *req);
/* Builds the "exit" object from an agent EXIT frame (UNTRUSTED: typed fields only). */
json_t *api_exit_json(const json_t *agent_exit, bool oom_killed);
/* Waits for a channel's first RESULT; an ERROR becomes *err. *result may be NULL. */
int api_chan_expect_result(struct agent_chan *ch, int peer_fd, int timeout_ms, json_t **result,
			   struct isola_err **err);

/* --- audit and metrics hooks (admin.c, metrics.c) ------------------------------------ */

/* Tenant the request acts for (the principal's). */
#define api_tenant(r) ((r)->who.tenant)
/* Appends an audit record as r's principal. detail borrowed, may be NULL. */
void api_audit(struct api_req *r, const char *action, const char *target, const char *outcome,
	       const json_t *detail);
/* The audit record of a finished API call (server.c's completion callback). */
void api_audit_request(struct api_req *r);
/* A file read from the agent streamed as a raw response of a promised length (files.c;
 * also served by the E2B /files route). */
struct api_download {
	struct api_server *srv; /* for the stopping flag */
	struct sandbox *s;	/* reference (may be NULL) */
	struct agent_chan *ch;	/* read channel, owned */
	uint64_t remaining;	/* bytes still promised in Content-Length */
	/* Transforms the bytes on their way out (the E2B gzip encoding), or NULL: called with
	 * each chunk, then once with last set when the file is complete. <0 cuts the
	 * response. The response then has no Content-Length (remaining still counts the file). */
	int (*filter)(struct api_download *d, struct api_stream *st, const void *buf, size_t n,
		      bool last);
};
/* Before each chunk of an upload: 0 while the write channel is still open (nothing has
 * arrived), else -errno with *err: the agent's refusal (an ERROR ends the channel), `internal`
 * for any other frame, `unavailable` when the connection died. Never blocks (files.c; also
 * the E2B /files upload). */
int api_upload_check(struct agent_chan *ch, struct isola_err **err);
/* api_stream producer: copies STDOUT frames until `remaining` is 0; cuts the response on
 * anything else. */
int api_download_produce(struct api_stream *st, void *ud);
/* Frees an api_download (closes its channel, drops its sandbox reference). */
void api_download_free(void *p);

/* Starts a thread that audits a background command's end (procwatch.c). s, argv borrowed. */
void api_procwatch_start(struct api_req *r, struct sandbox *s, const json_t *argv, const char *user,
			 long pid);
/* Audits a command that ended (or whose end was not seen: exit NULL). */
void api_audit_command(struct api_server *srv, const struct tenancy_principal *who,
		       const char *sandbox, const json_t *argv, const char *user, long pid,
		       const json_t *exit, uint64_t started_ms);
/* True when r's principal is the operator (the admin of the `default` tenant). */
bool api_is_operator(const struct api_req *r);
/* True (after responding 403) when r's principal is not the operator (admin of default). */
bool api_deny_unless_operator(struct api_req *r, enum MHD_Result *ret);

/* Counters for GET /metrics. Thread-safe. */
void api_metrics_request(const struct api_req *r);
void api_metrics_create(double seconds, const char *err_code);
void api_metrics_exec(const char *kind);
/* A streamed response of `kind` ("archive", "file") broken off by isolad; `code` is the
 * error code of the cause (also counted in isola_api_errors_total). */
void api_metrics_stream_abort(const char *kind, const char *code);

/* --- handlers (one file per resource) ---------------------------------------------------- */

enum MHD_Result api_health(struct api_req *r);
enum MHD_Result api_doctor(struct api_req *r);
enum MHD_Result api_sandbox_create(struct api_req *r);
enum MHD_Result api_sandbox_list(struct api_req *r);
enum MHD_Result api_sandbox_get(struct api_req *r);
enum MHD_Result api_sandbox_delete(struct api_req *r);
enum MHD_Result api_sandbox_console(struct api_req *r);
enum MHD_Result api_sandbox_timeout(struct api_req *r);
enum MHD_Result api_sandbox_wait(struct api_req *r);
enum MHD_Result api_sandbox_prune(struct api_req *r);
/* persist.c: pause, resume, hibernate, fork, named snapshots */
enum MHD_Result api_sandbox_pause(struct api_req *r);
enum MHD_Result api_sandbox_resume(struct api_req *r);
enum MHD_Result api_sandbox_hibernate(struct api_req *r);
enum MHD_Result api_sandbox_fork(struct api_req *r);
enum MHD_Result api_snapshot_create(struct api_req *r);
enum MHD_Result api_snapshot_list(struct api_req *r);
enum MHD_Result api_snapshot_get(struct api_req *r);
enum MHD_Result api_snapshot_delete(struct api_req *r);
enum MHD_Result api_exec(struct api_req *r);
enum MHD_Result api_proc_start(struct api_req *r);
enum MHD_Result api_proc_list(struct api_req *r);
enum MHD_Result api_proc_get(struct api_req *r);
enum MHD_Result api_proc_output(struct api_req *r);
int api_proc_stdin_begin(struct api_req *r);
int api_proc_stdin_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result api_proc_stdin_end(struct api_req *r);
enum MHD_Result api_proc_close_stdin(struct api_req *r);
enum MHD_Result api_proc_signal(struct api_req *r);
enum MHD_Result api_proc_resize(struct api_req *r);
enum MHD_Result api_proc_wait(struct api_req *r);
enum MHD_Result api_proc_ws(struct api_req *r);
enum MHD_Result api_file_get(struct api_req *r);
int api_file_put_begin(struct api_req *r);
int api_file_put_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result api_file_put_end(struct api_req *r);
enum MHD_Result api_fs_list(struct api_req *r);
enum MHD_Result api_fs_stat(struct api_req *r);
enum MHD_Result api_fs_mkdir(struct api_req *r);
enum MHD_Result api_fs_rename(struct api_req *r);
enum MHD_Result api_fs_remove(struct api_req *r);
enum MHD_Result api_archive_get(struct api_req *r);
int api_archive_put_begin(struct api_req *r);
int api_archive_put_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result api_archive_put_end(struct api_req *r);
enum MHD_Result api_template_list(struct api_req *r);
enum MHD_Result api_template_cache_list(struct api_req *r);
enum MHD_Result api_template_cache_prune(struct api_req *r);
int api_template_import_begin(struct api_req *r);
int api_template_import_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result api_template_import_end(struct api_req *r);
enum MHD_Result api_template_delete(struct api_req *r);
enum MHD_Result api_template_get(struct api_req *r);
enum MHD_Result api_template_pull(struct api_req *r);
/* POST /v1/templates/build?name=N&options={...}: the body is the context tar (import's data
 * and end handlers); streams the build's NDJSON events. */
int api_template_build_begin(struct api_req *r);
enum MHD_Result api_metrics(struct api_req *r);
enum MHD_Result api_sandbox_stats(struct api_req *r);
/* GET /v1/sandboxes/{id}/metrics?start=&end=: the kept samples (core/history.c) in range. */
enum MHD_Result api_sandbox_metrics(struct api_req *r);
enum MHD_Result api_whoami(struct api_req *r);
enum MHD_Result api_token_create(struct api_req *r);
enum MHD_Result api_token_list(struct api_req *r);
enum MHD_Result api_token_revoke(struct api_req *r);
/* console.c: true for the paths the web console owns (/, /console, /console/...). */
bool api_console_path(const char *url);
/* Answers a console path: the embedded file with its security headers, 404 when the console is
 * off or has no such file, 405 for a method but GET/HEAD. No authentication (public files). */
enum MHD_Result api_console_serve(struct api_req *r, const char *url, const char *method);
/* events.c: GET /v1/events, the tenant's sandbox changes as server-sent events. */
enum MHD_Result api_events(struct api_req *r);
/* List scans made by the event streams so far (events.c; /metrics). */
uint64_t api_events_scans(void);

enum MHD_Result api_tenant_create(struct api_req *r);
enum MHD_Result api_tenant_list(struct api_req *r);
enum MHD_Result api_tenant_get(struct api_req *r);
enum MHD_Result api_tenant_update(struct api_req *r);
enum MHD_Result api_tenant_delete(struct api_req *r);
enum MHD_Result api_audit_verify(struct api_req *r);
enum MHD_Result api_audit_export(struct api_req *r);
enum MHD_Result api_audit_seal(struct api_req *r);
enum MHD_Result api_audit_prune(struct api_req *r);
enum MHD_Result api_compliance(struct api_req *r);
enum MHD_Result api_code_execute(struct api_req *r);	     /* code.c */
enum MHD_Result api_code_contexts_list(struct api_req *r);   /* code.c */
enum MHD_Result api_code_context_create(struct api_req *r);  /* code.c */
enum MHD_Result api_code_context_restart(struct api_req *r); /* code.c */
enum MHD_Result api_code_context_delete(struct api_req *r);  /* code.c */
/* A code interpreter context id: 1-64 of [A-Za-z0-9._-] (it goes into the service's path). */
bool api_code_context_ok(const char *s);
enum MHD_Result api_ports_add(struct api_req *r);    /* ports.c */
enum MHD_Result api_ports_list(struct api_req *r);   /* ports.c */
enum MHD_Result api_ports_remove(struct api_req *r); /* ports.c */
enum MHD_Result api_network_get(struct api_req *r);  /* network.c */
enum MHD_Result api_network_put(struct api_req *r);  /* network.c */
/* Create's `network`: validated before the sandbox is built (api_network_check), applied
 * before the client hears of it (api_network_on_create destroys the sandbox on failure). */
int api_network_check(const json_t *body, struct isola_err **err);
int api_network_on_create(struct api_req *r, struct sandbox *s, struct isola_err **err);
/* A sandbox's network counters for stats (new reference), or NULL without a network. */
json_t *api_network_counters(const char *id);
/* Egress proxy and resolver totals in Prometheus text (nothing without a network). */
void api_network_metrics(struct api_buf *b);
enum MHD_Result api_sandbox_lifecycle(struct api_req *r); /* lifecycle.c */
enum MHD_Result api_pool_list(struct api_req *r);	  /* pools.c */
enum MHD_Result api_pool_set(struct api_req *r);	  /* pools.c */
struct sandbox_request;
/* Fills on_timeout, idle_timeout_s and auto_resume of a create request (lifecycle.c). */
int api_lifecycle_parse(const json_t *b, struct sandbox_request *req, struct isola_err **err);

#endif
