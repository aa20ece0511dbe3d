/* SPDX-License-Identifier: Apache-2.0 */
/* mcp.h: what the parts of the MCP server (src/cli/mcp/) share — session, call, tool table. */
#ifndef ISOLA_CLI_MCP_H
#define ISOLA_CLI_MCP_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"
#include "../client.h"
#include "text.h"

/*
 * Threads (docs/mcp.md "Design"): a transport thread hands each message to mcp_handle() (one
 * thread at a time per session), which answers the cheap methods itself; every tools/call and resources/read runs on its own worker thread with its
 * own HTTP client (client.c is not thread-safe per client). Writes to the transport go through
 * mcp_send(), serialised by session->lock. A call is owned by its worker; the transport thread
 * reaches it only under session->lock (to cancel it or to report progress).
 */

#define MCP_ERR_PARAMS	 "invalid_params" /* code of an argument error: JSON-RPC -32602 */
#define MCP_MAX_INFLIGHT 64		  /* concurrent calls; more are refused (-32603) */

struct mcp_session;

/* JSON-RPC error codes. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL = -32603,
};

/* How messages leave the server: stdio (stdio.c, `isola mcp`) or Streamable HTTP
 * (src/isolad/api/mcphttp.c, isolad's /mcp). Every op is called under session->lock. */
struct mcp_transport_ops {
	/* Writes one complete JSON-RPC message: `msg` (borrowed) and its compact text `str`.
	 * Returns 0 or -errno (the session then stops sending). */
	int (*send)(struct mcp_session *s, json_t *msg, const char *str, size_t len);
	/* Optional: the request `id` (borrowed) ended without an answer (it was cancelled). */
	void (*dropped)(struct mcp_session *s, const json_t *id);
	/* Optional: a diagnostic line (stderr when NULL). */
	void (*log)(struct mcp_session *s, const char *line);
};

/* One in-flight request on a worker thread. */
struct mcp_call {
	struct mcp_session *s;	/* borrowed */
	int kind;		/* what the worker runs (server.c) */
	json_t *id;		/* the request id (own reference) */
	json_t *params;		/* the request's params (own reference) */
	json_t *progress_token; /* params._meta.progressToken (borrowed from params), or NULL */
	struct client *client;	/* this worker's client, made on first use */
	atomic_bool cancelled;	/* notifications/cancelled or disconnect arrived */
	char sandbox_id[96];	/* the sandbox of the running command (under s->lock) */
	long pid;		/* its pid once known, 0 before (under s->lock) */
	bool killed;		/* the pid was killed already (under s->lock) */
	unsigned long long out_bytes; /* output seen so far (under s->lock), for progress */
	long long started;	 /* CLOCK_MONOTONIC seconds when the command started, 0 = none */
	long long last_progress; /* seconds value of the last progress notification */
	struct mcp_call *next;	 /* session->calls list (under s->lock) */
};

/* One MCP session: the whole `isola mcp` process, or one Mcp-Session-Id of isolad's /mcp. */
struct mcp_session {
	const struct mcp_transport_ops *ops; /* where messages go */
	const struct client_conf *conf;	     /* how to reach isolad (borrowed) */
	pthread_mutex_t lock;		     /* guards the fields below marked (lock) */
	pthread_cond_t idle;		     /* signalled when ncalls drops */
	bool out_broken;		     /* the transport failed: stop (lock) */
	struct mcp_call *calls;		     /* in-flight calls (lock) */
	unsigned ncalls;		     /* their number (lock) */
	unsigned long seq;		     /* counter for saved-output file names (lock) */
	pthread_mutex_t default_lock;	     /* serialises making the default sandbox */
	char *default_id;		     /* the session's default sandbox, or NULL (lock) */
	bool keep;			     /* --keep: leave the default sandbox at exit */
	char **host_dirs;		     /* --allow-host-path, realpath()ed, owned */
	size_t nhost_dirs;		     /* their number */
	struct client *ctl;		     /* transport thread's client (kills, cleanup) */
};

/* A tool's result, filled by its function. */
struct mcp_result {
	char *text;	 /* heap text content, owned (NULL: empty) */
	json_t *data;	 /* structuredContent (own reference), or NULL */
	json_t *content; /* extra content items appended after the text (own), or NULL */
	bool is_error;	 /* the tool ran but reports failure (isError) */
};

/* A tool: its MCP description and the function that runs it. fn returns 0 with *res filled,
 * or -errno with *err (MCP_ERR_PARAMS: a JSON-RPC -32602; anything else: an isError result). */
struct mcp_tool {
	const char *name;
	const char *title;
	const char *description;
	const char *input_schema;  /* JSON Schema of the arguments */
	const char *output_schema; /* JSON Schema of structuredContent, or NULL */
	unsigned hints;		   /* MCP_HINT_* annotations */
	int (*fn)(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err);
};

enum {
	MCP_HINT_READONLY = 1u << 0,	/* readOnlyHint */
	MCP_HINT_DESTRUCTIVE = 1u << 1, /* destructiveHint */
	MCP_HINT_IDEMPOTENT = 1u << 2,	/* idempotentHint */
	MCP_HINT_OPENWORLD = 1u << 3,	/* openWorldHint */
};

/* table.c */
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_ntools;

/* server.c: the transport-independent core. */
/* Initialises s (zeroed by the caller, then keep/host_dirs may be set) to talk to isolad
 * through conf (borrowed for the session's life); ops may be NULL until the transport sets
 * it. Makes s->ctl. Returns 0 or -errno with *err. */
int mcp_session_init(struct mcp_session *s, const struct mcp_transport_ops *ops,
		     const struct client_conf *conf, struct isola_err **err);
/* Releases what mcp_session_init() made and host_dirs; after mcp_session_end(). */
void mcp_session_fini(struct mcp_session *s);
/* Handles one JSON-RPC message (an object; the transport splits batches and answers parse
 * errors). Not reentrant per session: the transport calls it from one thread at a time. */
void mcp_handle(struct mcp_session *s, json_t *msg);
/* Sends notifications/progress for running calls that asked for it; call once a second. */
void mcp_progress_tick(struct mcp_session *s);
/* Ends the session: waits for the calls in flight, cancelling them (and killing their
 * commands) as soon as *stop is non-zero, then destroys the default sandbox unless keep. */
void mcp_session_end(struct mcp_session *s, volatile sig_atomic_t *stop);
/* Sends a message (consumed) on the transport; any thread. */
void mcp_send(struct mcp_session *s, json_t *msg);
/* Sends a JSON-RPC error answer to id (borrowed; NULL: null id). */
void mcp_send_error(struct mcp_session *s, json_t *id, int code, const char *message);
/* True for a protocol version this server speaks ("2025-06-18", ...). */
bool mcp_version_known(const char *v);
/* A diagnostic line through ops->log or to stderr. */
void mcp_log(struct mcp_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* stdio.c (the CLI only): serves stdio until EOF; returns the CLI exit status. */
int mcp_serve_stdio(struct mcp_session *s);

/* util.c: argument helpers; every failure is an MCP_ERR_PARAMS error naming the argument. */
int mcp_arg_str(json_t *args, const char *key, bool required, const char **out,
		struct isola_err **err);
int mcp_arg_int(json_t *args, const char *key, long long min, long long max, long long *out,
		struct isola_err **err);
int mcp_arg_bool(json_t *args, const char *key, bool *out, struct isola_err **err);
int mcp_arg_map(json_t *args, const char *key, json_t **out, struct isola_err **err);

/* The call's client (made on first use); NULL with *err. */
struct client *mcp_client(struct mcp_call *c, struct isola_err **err);
/* client_json() on the call's client; a NULL url (cli_pathf() out of memory) is -ENOMEM. */
int mcp_api(struct mcp_call *c, const char *method, const char *url, const json_t *body,
	    json_t **out, struct isola_err **err);
/* The sandbox a tool acts on: `sandbox_id` when given, else the session's default sandbox
 * (created on first use). *id is borrowed from args or copied into buf. */
int mcp_sandbox(struct mcp_call *c, json_t *args, char *buf, size_t len, const char **id,
		struct isola_err **err);
/* Drops the default sandbox id when it is `id` (after a destroy). */
void mcp_forget_default(struct mcp_session *s, const char *id);

/* Hands the text of b over into res->text; -ENOMEM when an append failed. */
int sb_finish(struct sbuf *b, struct mcp_result *res, struct isola_err **err);

/* Creates the parent directories of `path` in the sandbox (best effort: errors are left to
 * the write that follows). */
void mcp_make_parents(struct mcp_call *c, const char *id, const char *path);
/* Writes len bytes to `path` in the sandbox (parents made). Returns 0 or -errno with *err. */
int mcp_put_file(struct mcp_call *c, const char *id, const char *path, const void *data, size_t len,
		 struct isola_err **err);
/* Reads a file of the sandbox: at most cap bytes into *out (heap, NUL-terminated), *len, and
 * *more when the file had more. Returns 0 or -errno with *err. */
int mcp_get_file(struct mcp_call *c, const char *id, const char *path, size_t cap, char **out,
		 size_t *len, bool *more, struct isola_err **err);

/* tools_*.c */
int mcp_tool_create(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_destroy(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_list(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_snapshot(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_fork(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_expose(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_run(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_run_code(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_ps(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_logs(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_kill(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_search(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_read(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_write(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_edit(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_ls(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_remove(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_mkdir(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_upload(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);
int mcp_tool_download(struct mcp_call *, json_t *, struct mcp_result *, struct isola_err **);

/* resources (tools_files.c): resources/list and resources/read results, or NULL with *err. */
json_t *mcp_resources_list(struct mcp_call *c, struct isola_err **err);
json_t *mcp_resources_read(struct mcp_call *c, const char *uri, struct isola_err **err);

/* Kills the call's running command (if any and not yet killed) through `cl`. */
void mcp_call_kill(struct mcp_call *c, struct client *cl);

#endif
