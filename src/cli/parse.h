/* SPDX-License-Identifier: Apache-2.0 */
/* parse: the CLI's pure logic — argument forms, request builders, codecs — kept I/O-free for tests. */
#ifndef ISOLA_CLI_PARSE_H
#define ISOLA_CLI_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "opttab.h"

/* Error code token for command-line mistakes; callers turn it into exit status 2. */
#define CLI_ERR_USAGE "usage"

/*
 * Splits "KEY=VALUE" and stores it in obj as a string (a later KEY replaces an earlier one).
 * The key must be non-empty; the value may be empty. `what` names the flag in the message
 * ("--env"). Returns 0, or -EINVAL with a `usage` error naming the argument.
 */
int cli_parse_kv(json_t *obj, const char *arg, const char *what, struct isola_err **err);

/* A `cp` operand: `ID:PATH` names a path in sandbox ID, anything else is local. */
struct cli_cp_arg {
	bool remote;	  /* true for ID:PATH */
	char id[128];	  /* sandbox id when remote */
	const char *path; /* points into the parsed string: PATH part, or the whole local operand */
};

/*
 * Classifies one cp operand. Remote when a ':' comes before any '/' and the text before it
 * is a non-empty id of [A-Za-z0-9_.-]; so `./a:b` and `/x:y` are local and `-` is local
 * (stdin/stdout). A remote PATH must be non-empty. Borrowed: out->path points into arg.
 * Returns 0 or -EINVAL with a `usage` error.
 */
int cli_parse_cp_arg(const char *arg, struct cli_cp_arg *out, struct isola_err **err);

/* Classifies both operands; exactly one must be remote. */
int cli_parse_cp_args(const char *src, const char *dst, struct cli_cp_arg *s, struct cli_cp_arg *d,
		      struct isola_err **err);

/*
 * Maps a tar entry name from GET .../archive (entries rooted at the basename of the copied
 * path, e.g. "dir/a/b") to the local path it is written to. into_dir: DST is an existing
 * directory, the result is DST/name; otherwise the entry's first component is replaced by
 * DST ("dir/a/b" -> "DST/a/b"). Rejects absolute names, ".." components and empty names
 * (-EINVAL): they would write outside DST. A leading "./" is ignored.
 * Returns 0 or -EINVAL/-ENAMETOOLONG.
 */
int cli_cp_map_entry(const char *name, const char *dst, bool into_dir, char *out, size_t outlen);

/*
 * Splits a path into its parent and last component, ignoring trailing slashes:
 * "/a/b/" -> "/a", "b"; "b" -> ".", "b"; "/b" -> "/", "b"; "/" -> "/", "".
 * Returns 0 or -ENAMETOOLONG.
 */
int cli_path_split(const char *path, char *dir, size_t dirlen, char *name, size_t namelen);

/* Mode bits for cli_parse_sandbox_args(). */
enum cli_sandbox_mode {
	CLI_SB_RUN,    /* isola run: options, then CMD...; --timeout is the command's timeout */
	CLI_SB_CREATE, /* isola create: options only; adds --ttl and --label */
};

/* The result of parsing `run` / `create` arguments. */
struct cli_sandbox_args {
	json_t *req;	  /* POST /v1/sandboxes body (owned; json_decref) */
	long timeout_s;	  /* run: --timeout, 0 when absent */
	int cmd_index;	  /* run: index in argv of CMD (argc when missing) */
	bool help;	  /* -h/--help was given; nothing else is valid */
	bool interactive; /* run -i */
	bool tty;	  /* run -t */
};

/* The options of run and create (rows tagged 1 << CLI_SB_RUN / CLI_SB_CREATE are only there). */
extern const struct cli_opt cli_sandbox_opts[];

/*
 * Reads an env file: KEY=VALUE lines into obj; blank lines and lines starting with # are
 * skipped. Returns 0, or -errno with a `usage` error naming the file and line.
 */
int cli_parse_env_file(json_t *obj, const char *path, struct isola_err **err);

/*
 * Parses `run`/`create` options (argv[0] is the command name) into a create request:
 * {template, tier, cpu (number), memory/disk (bytes), env{}, workdir, user, ttl, labels{}}
 * with only the fields given; g (or NULL) receives global options met anywhere. Uses getopt
 * (resets optind). Returns 0, or -EINVAL with a
 * `usage` error; on failure out->req is NULL.
 */
int cli_parse_sandbox_args(int argc, char **argv, enum cli_sandbox_mode mode, struct cli_globals *g,
			   struct cli_sandbox_args *out, struct isola_err **err);

/*
 * Turns a getopt result that is not a known option ('?' or ':' with optstring starting
 * "+:") into a `usage` error naming the argument. Returns -EINVAL.
 */
int cli_opt_error(char *const argv[], int c, struct isola_err **err);

/* Parses a non-negative integer number of seconds (at most a year). 0 or -EINVAL. */
int cli_parse_seconds(const char *s, long *out);

/* Sets req[key] from a size option ("512M", "2G" or bytes); the error names `--key`. */
int cli_set_size(json_t *req, const char *key, const char *arg, struct isola_err **err);
/* --tmpfs PATH[:OPTS] (Docker's form: ro, rw, noexec, exec, size=SIZE, mode=OCTAL; nosuid
 * and nodev accepted, suid and dev refused) appended to the request's `tmpfs` list. */
int cli_add_tmpfs(json_t *req, const char *arg, struct isola_err **err);

/* Sets req.cpu from a --cpu option (a positive number of CPUs, at most 1024). */
int cli_set_cpu(json_t *req, const char *arg, struct isola_err **err);

/* Parses "TERM", "SIGTERM", "term" or "15" into a signal number; -EINVAL if unknown. */
int cli_parse_signal(const char *s);

/* The canonical name of a signal without "SIG" ("KILL"), or NULL if unknown. */
const char *cli_signal_name(int sig);

/*
 * The CLI's exit status for an exit event/object {"exit_code","signal","timed_out"}:
 * 124 when timed_out, 128+signal when killed, else exit_code (0..255). A missing or
 * malformed object yields 125 (isola could not tell).
 */
int cli_exit_status(const json_t *ev);

/*
 * Formats a request path, URL-escaping every %s argument (RFC 3986 unreserved characters
 * pass through). Supports %s, %d, %ld and %%. Returns a heap string or NULL (ENOMEM).
 */
char *cli_pathf(const char *fmt, ...);

/* Base64 (RFC 4648, with padding). decode: returns decoded length or -EINVAL; out must hold
 * len/4*3 bytes. encode: out must hold 4*((len+2)/3)+1 bytes; returns the string length. */
long cli_b64_decode(const char *in, size_t len, unsigned char *out);
size_t cli_b64_encode(const unsigned char *in, size_t len, char *out);

/* Parses "http://HOST[:PORT][/prefix]" (PORT defaults to 80). host/prefix are written into
 * the given buffers. Returns 0, -EINVAL or -ENAMETOOLONG. Only plain http is supported. */
int cli_parse_url(const char *url, char *host, size_t hostlen, int *port, char *prefix,
		  size_t prefixlen);

#endif
