/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_mcp: `isola mcp` — a Model Context Protocol server on stdio exposing sandbox tools. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

/*
 * Transport (MCP "stdio"): one JSON-RPC 2.0 message per line on stdin, one per line on
 * stdout; nothing else is ever written to stdout (diagnostics go to stderr). Requests are
 * answered in order, one at a time. Batches (JSON arrays) are refused: MCP 2025-06-18
 * dropped them. docs/mcp.md lists the tools; each is one or two calls of the native API.
 */

#define MCP_MAX_LINE	    (16u * 1024u * 1024u) /* one request; write_file content is inline */
#define MCP_MAX_READ	    (1u << 20)		  /* default bytes returned by sandbox_read_file */
#define MCP_MAX_READ_LIMIT  (8u << 20)		  /* max_bytes cap of sandbox_read_file */
#define MCP_EXEC_OUTPUT	    (256u * 1024u)	  /* bytes kept per stream by run_command */
#define MCP_DEFAULT_TIMEOUT 60			  /* run_command timeout when absent, seconds */
#define MCP_MAX_TIMEOUT	    3600		  /* largest run_command timeout, seconds */

/* JSON-RPC error codes (JSON-RPC 2.0 section 5.1). */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
};

/* Error code token for a tool call whose arguments do not match its schema: answered as a
 * JSON-RPC error (-32602), not as a tool result with isError. */
#define MCP_ERR_PARAMS "invalid_params"

/* Protocol versions this server speaks, newest first; an initialize asking for one of them
 * gets it back, any other gets the first. */
static const char *const mcp_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

struct mcp {
	struct cli *cli; /* for the client (created on the first tool call) */
	bool out_broken; /* writing to stdout failed: stop */
};

/* A tool: its MCP description and the function that runs it. fn returns 0 with *text set
 * (heap, owned by the caller) and *is_error, or -errno with *err. */
struct mcp_tool {
	const char *name;
	const char *title;
	const char *description;
	const char *schema; /* JSON Schema of the arguments (parsed for tools/list) */
	int (*fn)(struct mcp *m, json_t *args, char **text, bool *is_error, struct isola_err **err);
};

/* ---- argument helpers: every failure is an MCP_ERR_PARAMS error naming the argument ---- */

static int arg_str(json_t *args, const char *key, bool required, const char **out,
		   struct isola_err **err)
{
	json_t *v = json_object_get(args, key);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
					     "missing required argument `%s`", key);
		return 0;
	}
	/* UNTRUSTED: the MCP client's arguments; strings with NUL are refused here. */
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS, "argument `%s` must be a string",
				     key);
	*out = json_string_value(v);
	return 0;
}

/* An integer argument in [min, max]; absent leaves *out unchanged. */
static int arg_int(json_t *args, const char *key, json_int_t min, json_int_t max, json_int_t *out,
		   struct isola_err **err)
{
	json_t *v = json_object_get(args, key);
	double d;

	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v))
		d = (double)json_integer_value(v);
	else if (json_is_real(v))
		d = json_real_value(v); /* 5.0 is accepted as 5; range checked before the cast */
	else
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `%s` must be an integer", key);
	if (!(d >= (double)min && d <= (double)max))
		return isola_err_set(err, ERANGE, MCP_ERR_PARAMS,
				     "argument `%s` must be between %lld and %lld", key,
				     (long long)min, (long long)max);
	if ((double)(json_int_t)d != d)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `%s` must be an integer", key);
	*out = (json_int_t)d;
	return 0;
}

/* An object of string values (env, labels); absent sets *out to NULL. Borrowed. */
static int arg_map(json_t *args, const char *key, json_t **out, struct isola_err **err)
{
	json_t *v = json_object_get(args, key), *x;
	const char *k;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `%s` must be an object of strings", key);
	json_object_foreach(v, k, x)
	{
		if (!json_is_string(x))
			return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
					     "argument `%s`: value of `%s` must be a string", key,
					     k);
	}
	*out = v;
	return 0;
}

static struct client *mcp_client(struct mcp *m, struct isola_err **err)
{
	if (!m->cli->client && client_new(&m->cli->conf, &m->cli->client, err) < 0)
		return NULL;
	return m->cli->client;
}

/* A heap string of a JSON value, pretty-printed with sorted keys. */
static char *json_text(const json_t *v)
{
	return json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
}

/* ---- a growing text buffer for tool results ---- */

struct sbuf {
	char *s;    /* NUL-terminated, heap */
	size_t len; /* bytes before the NUL */
	bool oom;   /* an append failed: the result is unusable */
};

static void sb_add(struct sbuf *b, const char *p, size_t n)
{
	char *ns;

	if (b->oom)
		return;
	ns = realloc(b->s, b->len + n + 1);
	if (!ns) {
		b->oom = true;
		return;
	}
	memcpy(ns + b->len, p, n);
	b->s = ns;
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	sb_add(b, s, (size_t)n);
	free(s);
}

/* Hands the text over (never NULL on success); -ENOMEM when an append failed. */
static int sb_finish(struct sbuf *b, char **text, struct isola_err **err)
{
	if (b->oom || !b->s) {
		free(b->s);
		if (b->oom)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
		b->s = strdup("");
		if (!b->s)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	*text = steal_ptr(&b->s);
	return 0;
}

/* ---- tools ---- */

static int tool_create(struct mcp *m, json_t *args, char **text, bool *is_error,
		       struct isola_err **err)
{
	static const char *const str_keys[] = {"template", "workdir", "user", "tier", "snapshot"};
	json_t *body = json_object(), *sb = NULL, *map, *mem;
	cleanup_free char *dump = NULL;
	json_int_t ttl = -1, pids = -1;
	struct client *c;
	const char *s;
	struct sbuf b = {0};
	int r = 0;

	(void)is_error;
	if (!body)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < ARRAY_SIZE(str_keys) && r == 0; i++) {
		r = arg_str(args, str_keys[i], false, &s, err);
		if (r == 0 && s)
			json_object_set_new(body, str_keys[i], json_string(s));
	}
	if (r == 0 && (json_is_number(json_object_get(args, "cpu"))))
		json_object_set(body, "cpu", json_object_get(args, "cpu"));
	else if (r == 0 && json_object_get(args, "cpu"))
		r = isola_err_set(err, EINVAL, MCP_ERR_PARAMS, "argument `cpu` must be a number");
	mem = json_object_get(args, "memory");
	if (r == 0 && (json_is_integer(mem) || json_is_string(mem)))
		json_object_set(body, "memory", mem);
	else if (r == 0 && mem)
		r = isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				  "argument `memory` must be bytes or a size like \"512M\"");
	if (r == 0)
		r = arg_int(args, "ttl", 0, 4294967295LL, &ttl, err);
	if (r == 0)
		r = arg_int(args, "pids", 1, 2147483647LL, &pids, err);
	if (r == 0 && ttl >= 0)
		json_object_set_new(body, "ttl", json_integer(ttl));
	if (r == 0 && pids >= 0)
		json_object_set_new(body, "pids", json_integer(pids));
	if (r == 0 && (r = arg_map(args, "env", &map, err)) == 0 && map)
		json_object_set(body, "env", map);
	if (r == 0 && (r = arg_map(args, "labels", &map, err)) == 0 && map)
		json_object_set(body, "labels", map);
	if (r == 0 && !(c = mcp_client(m, err)))
		r = -EIO;
	if (r == 0)
		r = client_json(c, "POST", "/v1/sandboxes", body, &sb, err);
	json_decref(body);
	if (r < 0)
		return r;
	dump = json_text(sb);
	sb_printf(&b, "Created sandbox %s (template %s, tier %s).\n%s\n",
		  json_string_value(json_object_get(sb, "id")) ?: "?",
		  json_string_value(json_object_get(sb, "template")) ?: "?",
		  json_string_value(json_object_get(sb, "tier")) ?: "?", dump ?: "");
	json_decref(sb);
	return sb_finish(&b, text, err);
}

/* Appends one stream of an exec result: its text and whether it was cut. */
static void add_stream(struct sbuf *b, const json_t *res, const char *name)
{
	char key[32];
	const json_t *v;

	v = json_object_get(res, name);
	sb_printf(b, "--- %s ---\n", name);
	if (json_string_length(v)) {
		sb_add(b, json_string_value(v), json_string_length(v));
		if (json_string_value(v)[json_string_length(v) - 1] != '\n')
			sb_add(b, "\n", 1);
	}
	snprintf(key, sizeof(key), "%s_truncated", name);
	if (json_is_true(json_object_get(res, key))) {
		snprintf(key, sizeof(key), "%s_bytes", name);
		sb_printf(b, "[%s truncated: %lld bytes in total, the first %u shown]\n", name,
			  (long long)json_integer_value(json_object_get(res, key)),
			  MCP_EXEC_OUTPUT);
	}
}

static int tool_run(struct mcp *m, json_t *args, char **text, bool *is_error,
		    struct isola_err **err)
{
	const char *id, *command, *cwd, *user, *in;
	json_t *body = NULL, *res = NULL, *env, *argv = json_object_get(args, "argv");
	cleanup_free char *url = NULL;
	json_int_t timeout = MCP_DEFAULT_TIMEOUT, code, sig;
	struct sbuf b = {0};
	struct client *c;
	int r;

	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0 ||
	    (r = arg_str(args, "command", false, &command, err)) < 0 ||
	    (r = arg_str(args, "cwd", false, &cwd, err)) < 0 ||
	    (r = arg_str(args, "user", false, &user, err)) < 0 ||
	    (r = arg_str(args, "stdin", false, &in, err)) < 0 ||
	    (r = arg_map(args, "env", &env, err)) < 0 ||
	    (r = arg_int(args, "timeout", 1, MCP_MAX_TIMEOUT, &timeout, err)) < 0)
		return r;
	if (json_is_null(argv))
		argv = NULL;
	if (!!command == !!argv)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "give exactly one of `command` (a shell command line) and "
				     "`argv` (an array of strings)");
	if (argv && (!json_is_array(argv) || !json_array_size(argv)))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `argv` must be a non-empty array of strings");
	body = json_pack("{s:I, s:I}", "timeout", timeout, "max_output",
			 (json_int_t)MCP_EXEC_OUTPUT);
	if (!body)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (command)
		json_object_set_new(body, "command", json_string(command));
	else
		json_object_set(body, "cmd", argv); /* the API checks the element types */
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	if (user)
		json_object_set_new(body, "user", json_string(user));
	if (in)
		json_object_set_new(body, "stdin", json_string(in));
	if (env)
		json_object_set(body, "env", env);
	url = cli_pathf("/v1/sandboxes/%s/exec", id);
	c = mcp_client(m, err);
	if (!url || !c)
		r = c ? isola_err_set(err, ENOMEM, NULL, "out of memory") : -EIO;
	else
		r = client_json(c, "POST", url, body, &res, err);
	json_decref(body);
	if (r < 0)
		return r;
	code = json_integer_value(json_object_get(res, "exit_code"));
	sig = json_integer_value(json_object_get(res, "signal"));
	sb_printf(&b, "exit_code: %lld\n", (long long)code);
	if (json_is_true(json_object_get(res, "timed_out")))
		sb_printf(&b, "[timed out after %lld s: the command was killed]\n",
			  (long long)timeout);
	else if (sig)
		sb_printf(&b, "[killed by signal %lld%s]\n", (long long)sig,
			  json_is_true(json_object_get(res, "oom_killed")) ? ", out of memory"
									   : "");
	add_stream(&b, res, "stdout");
	add_stream(&b, res, "stderr");
	*is_error = code != 0 || json_is_true(json_object_get(res, "timed_out"));
	json_decref(res);
	return sb_finish(&b, text, err);
}

/* Collects a file's bytes up to a cap, then stops the transfer. */
struct read_buf {
	struct sbuf b;	/* the bytes */
	size_t cap;	/* stop after this many */
	bool truncated; /* more bytes were on offer */
};

static int read_data(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	struct read_buf *rb = ud;
	size_t room = rb->cap - rb->b.len;

	sb_add(&rb->b, buf, len < room ? len : room);
	if (rb->b.oom)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (len > room) {
		rb->truncated = true;
		return isola_err_set(err, EFBIG, "truncated", "file larger than max_bytes");
	}
	return 0;
}

static int tool_read(struct mcp *m, json_t *args, char **text, bool *is_error,
		     struct isola_err **err)
{
	struct read_buf rb = {.cap = MCP_MAX_READ};
	cleanup_free char *url = NULL, *b64 = NULL;
	struct isola_err *e = NULL;
	json_int_t max = MCP_MAX_READ;
	struct client_req req = {.method = "GET", .body_fd = -1, .on_data = read_data, .ud = &rb};
	struct sbuf out = {0};
	const char *id, *path;
	struct client *c;
	json_t *probe;
	int r;

	(void)is_error;
	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0 ||
	    (r = arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = arg_int(args, "max_bytes", 1, MCP_MAX_READ_LIMIT, &max, err)) < 0)
		return r;
	rb.cap = (size_t)max;
	url = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, path);
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(c = mcp_client(m, err)))
		return -EIO;
	req.path = url;
	r = client_do(c, &req, &e);
	if (r < 0 && !rb.truncated) {
		free(rb.b.s);
		if (err && !*err)
			*err = e;
		else
			isola_err_free(e);
		return r;
	}
	isola_err_free(e);
	if (!rb.b.s && !rb.b.oom)
		sb_add(&rb.b, "", 0);
	if (rb.b.oom) {
		free(rb.b.s);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	/* Valid UTF-8 is returned as text; anything else as base64 so no byte is lost. */
	probe = json_stringn(rb.b.s, rb.b.len);
	if (probe) {
		sb_add(&out, rb.b.s, rb.b.len);
	} else {
		b64 = malloc(4 * ((rb.b.len + 2) / 3) + 1);
		if (b64) {
			cli_b64_encode((const unsigned char *)rb.b.s, rb.b.len, b64);
			sb_printf(&out, "[binary file, %zu bytes, base64]\n%s", rb.b.len, b64);
		} else {
			out.oom = true;
		}
	}
	json_decref(probe);
	if (rb.truncated)
		sb_printf(&out,
			  "\n[truncated: only the first %zu bytes are shown; pass a larger "
			  "max_bytes (at most %u) for more]",
			  rb.b.len, MCP_MAX_READ_LIMIT);
	free(rb.b.s);
	return sb_finish(&out, text, err);
}

static int tool_write(struct mcp *m, json_t *args, char **text, bool *is_error,
		      struct isola_err **err)
{
	const char *id, *path, *content, *encoding, *mode;
	cleanup_free unsigned char *raw = NULL;
	cleanup_free char *url = NULL;
	cleanup_fd int fd = -1;
	struct client_req req = {.method = "PUT", .content_type = "application/octet-stream"};
	json_t *entry = NULL;
	const void *data;
	struct client *c;
	size_t len;
	struct sbuf b = {0};
	int r;

	(void)is_error;
	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0 ||
	    (r = arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = arg_str(args, "content", true, &content, err)) < 0 ||
	    (r = arg_str(args, "encoding", false, &encoding, err)) < 0 ||
	    (r = arg_str(args, "mode", false, &mode, err)) < 0)
		return r;
	data = content;
	len = json_string_length(json_object_get(args, "content"));
	if (encoding && !strcmp(encoding, "base64")) {
		long n;

		raw = malloc(len / 4 * 3 + 3);
		if (!raw)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
		n = cli_b64_decode(content, len, raw);
		if (n < 0)
			return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
					     "argument `content` is not valid base64");
		data = raw;
		len = (size_t)n;
	} else if (encoding && strcmp(encoding, "utf8") && strcmp(encoding, "utf-8")) {
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `encoding` must be \"utf8\" or \"base64\"");
	}
	/* The client streams request bodies from an fd: a sealed-size memfd holds the bytes. */
	fd = memfd_create("isola-mcp-write", MFD_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, NULL, "memfd_create");
	if (util_write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return isola_err_sys(err, errno, NULL, "memfd write");
	url = mode ? cli_pathf("/v1/sandboxes/%s/files?path=%s&mode=%s", id, path, mode)
		   : cli_pathf("/v1/sandboxes/%s/files?path=%s", id, path);
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(c = mcp_client(m, err)))
		return -EIO;
	req.path = url;
	req.body_fd = fd;
	req.body_size = (int64_t)len;
	req.accept = "application/json";
	req.out = &entry;
	r = client_do(c, &req, err);
	if (r < 0)
		return r;
	sb_printf(&b, "Wrote %zu bytes to %s.", len,
		  json_string_value(json_object_get(entry, "path")) ?: path);
	json_decref(entry);
	return sb_finish(&b, text, err);
}

static int tool_list_files(struct mcp *m, json_t *args, char **text, bool *is_error,
			   struct isola_err **err)
{
	cleanup_free char *url = NULL;
	json_t *res = NULL, *e;
	json_int_t depth = 1;
	const char *id, *path;
	struct sbuf b = {0};
	struct client *c;
	size_t i;
	int r;

	(void)is_error;
	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0 ||
	    (r = arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = arg_int(args, "depth", 1, 16, &depth, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/fs/list?path=%s&depth=%ld", id, path, (long)depth);
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(c = mcp_client(m, err)))
		return -EIO;
	if ((r = client_json(c, "GET", url, NULL, &res, err)) < 0)
		return r;
	json_array_foreach(json_object_get(res, "entries"), i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type")) ?: "other";
		const char *p = json_string_value(json_object_get(e, "path"));
		const char *target = json_string_value(json_object_get(e, "target"));

		if (!p)
			p = json_string_value(json_object_get(e, "name")) ?: "?";
		sb_printf(&b, "%-7s %10lld  %s%s%s%s\n", type,
			  (long long)json_integer_value(json_object_get(e, "size")), p,
			  !strcmp(type, "dir") ? "/" : "", target ? " -> " : "", target ?: "");
	}
	if (!json_array_size(json_object_get(res, "entries")))
		sb_printf(&b, "(empty directory)\n");
	if (json_is_true(json_object_get(res, "truncated")))
		sb_printf(&b, "[listing truncated]\n");
	json_decref(res);
	return sb_finish(&b, text, err);
}

static int tool_destroy(struct mcp *m, json_t *args, char **text, bool *is_error,
			struct isola_err **err)
{
	cleanup_free char *url = NULL;
	struct sbuf b = {0};
	struct client *c;
	const char *id;
	int r;

	(void)is_error;
	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s", id);
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(c = mcp_client(m, err)))
		return -EIO;
	if ((r = client_json(c, "DELETE", url, NULL, NULL, err)) < 0)
		return r;
	sb_printf(&b, "Destroyed sandbox %s.", id);
	return sb_finish(&b, text, err);
}

static int tool_snapshot(struct mcp *m, json_t *args, char **text, bool *is_error,
			 struct isola_err **err)
{
	const char *id, *name;
	json_t *body, *res = NULL;
	struct sbuf b = {0};
	struct client *c;
	int r;

	(void)is_error;
	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0 ||
	    (r = arg_str(args, "name", true, &name, err)) < 0)
		return r;
	if (!(c = mcp_client(m, err)))
		return -EIO;
	body = json_pack("{s:s, s:s}", "sandbox", id, "name", name);
	if (!body)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = client_json(c, "POST", "/v1/snapshots", body, &res, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b,
		  "Took snapshot `%s` of sandbox %s (%s, %lld bytes). Start new sandboxes from it "
		  "with sandbox_create {\"snapshot\": \"%s\"}; it survives the sandbox.\n",
		  name, id, json_string_value(json_object_get(res, "level")) ?: "?",
		  (long long)json_integer_value(json_object_get(res, "size")), name);
	json_decref(res);
	return sb_finish(&b, text, err);
}

static int tool_fork(struct mcp *m, json_t *args, char **text, bool *is_error,
		     struct isola_err **err)
{
	cleanup_free char *url = NULL;
	json_int_t count = 1;
	json_t *body, *res = NULL, *kid;
	struct sbuf b = {0};
	struct client *c;
	const char *id;
	size_t i;
	int r;

	(void)is_error;
	if ((r = arg_str(args, "sandbox_id", true, &id, err)) < 0 ||
	    (r = arg_int(args, "count", 1, 16, &count, err)) < 0)
		return r;
	if (!(url = cli_pathf("/v1/sandboxes/%s/fork", id)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(c = mcp_client(m, err)))
		return -EIO;
	if (!(body = json_pack("{s:I}", "count", count < 1 ? (json_int_t)1 : count)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = client_json(c, "POST", url, body, &res, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b, "Forked sandbox %s into %zu new sandboxes (%s; source paused %lld us):\n", id,
		  json_array_size(json_object_get(res, "children")),
		  json_string_value(json_object_get(res, "level")) ?: "?",
		  (long long)json_integer_value(json_object_get(res, "paused_us")));
	json_array_foreach(json_object_get(res, "children"), i, kid)
		sb_printf(&b, "%s\n", json_string_value(json_object_get(kid, "id")) ?: "?");
	json_decref(res);
	return sb_finish(&b, text, err);
}

static int tool_list(struct mcp *m, json_t *args, char **text, bool *is_error,
		     struct isola_err **err)
{
	struct sbuf path = {0}, b = {0};
	json_t *labels, *res = NULL, *v, *sb;
	cleanup_free char *dump = NULL;
	struct client *c;
	const char *k;
	size_t i;
	int r;

	(void)is_error;
	if ((r = arg_map(args, "labels", &labels, err)) < 0)
		return r;
	sb_printf(&path, "/v1/sandboxes");
	json_object_foreach(labels, k, v)
	{
		cleanup_free char *kv = NULL, *q = NULL;

		if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0 ||
		    !(q = cli_pathf("%s", kv))) {
			path.oom = true;
			break;
		}
		sb_printf(&path, "%clabel=%s", path.s && strchr(path.s, '?') ? '&' : '?', q);
	}
	if (path.oom) {
		free(path.s);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	c = mcp_client(m, err);
	r = c ? client_json(c, "GET", path.s, NULL, &res, err) : -EIO;
	free(path.s);
	if (r < 0)
		return r;
	json_array_foreach(json_object_get(res, "sandboxes"), i, sb)
	{
		dump = json_object_size(json_object_get(sb, "labels"))
			       ? out_fmt_value(json_object_get(sb, "labels"))
			       : NULL;
		sb_printf(&b, "%s  %-9s %-8s %s%s%s\n",
			  json_string_value(json_object_get(sb, "id")) ?: "?",
			  json_string_value(json_object_get(sb, "state")) ?: "?",
			  json_string_value(json_object_get(sb, "tier")) ?: "?",
			  json_string_value(json_object_get(sb, "template")) ?: "?",
			  dump && *dump ? "  " : "", dump ?: "");
		free(steal_ptr(&dump));
	}
	if (!json_array_size(json_object_get(res, "sandboxes")))
		sb_printf(&b, "(no sandboxes)\n");
	json_decref(res);
	return sb_finish(&b, text, err);
}

/* ---- the tool table ---- */

#define ID_PROP "\"sandbox_id\":{\"type\":\"string\",\"description\":\"id of the sandbox\"}"

static const struct mcp_tool mcp_tools[] = {
	{"sandbox_create", "Create sandbox",
	 "Create and start a new isola sandbox (an isolated Linux environment) and return its id. "
	 "Pass the id to the other sandbox_* tools; destroy it with sandbox_destroy when done.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
	 "\"template\":{\"type\":\"string\",\"description\":\"template name (default: the "
	 "daemon's, `host`)\"},"
	 "\"cpu\":{\"type\":\"number\",\"minimum\":0.001,\"description\":\"CPUs, fractions "
	 "allowed\"},"
	 "\"memory\":{\"type\":[\"integer\",\"string\"],\"description\":\"bytes or a size like "
	 "\\\"512M\\\"\"},"
	 "\"pids\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"max processes\"},"
	 "\"ttl\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"seconds until the "
	 "sandbox is destroyed (0: daemon default)\"},"
	 "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
	 "\"description\":\"environment of every command\"},"
	 "\"workdir\":{\"type\":\"string\",\"description\":\"default working directory "
	 "(absolute)\"},"
	 "\"user\":{\"type\":\"string\",\"description\":\"default user of commands\"},"
	 "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
	 "\"description\":\"labels to find the sandbox by\"},"
	 "\"tier\":{\"type\":\"string\",\"enum\":[\"process\",\"microvm\"],\"description\":"
	 "\"isolation tier (default process; microvm = own kernel)\"},"
	 "\"snapshot\":{\"type\":\"string\",\"description\":\"start from this named snapshot "
	 "(see sandbox_snapshot) instead of a template\"}}}",
	 tool_create},
	{"sandbox_run_command", "Run command in sandbox",
	 "Run a command in a sandbox to completion and return its exit code, stdout and stderr. "
	 "`command` is run by /bin/sh -c; `argv` runs a program directly. The result is an "
	 "error when the command exits non-zero or times out.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
	 "\"properties\":{" ID_PROP ","
	 "\"command\":{\"type\":\"string\",\"description\":\"shell command line\"},"
	 "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
	 "\"description\":\"program and arguments (instead of command)\"},"
	 "\"cwd\":{\"type\":\"string\",\"description\":\"working directory\"},"
	 "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
	 "\"user\":{\"type\":\"string\"},"
	 "\"stdin\":{\"type\":\"string\",\"description\":\"text fed to the command's stdin\"},"
	 "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,\"default\":60,"
	 "\"description\":\"seconds; the command is killed after it\"}}}",
	 tool_run},
	{"sandbox_read_file", "Read file from sandbox",
	 "Read a file in a sandbox. UTF-8 text is returned as is; other bytes as base64.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
	 "\"path\"],\"properties\":{" ID_PROP ","
	 "\"path\":{\"type\":\"string\",\"description\":\"absolute, or relative to the user's "
	 "home\"},"
	 "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":8388608,"
	 "\"default\":1048576,\"description\":\"return at most this many bytes\"}}}",
	 tool_read},
	{"sandbox_write_file", "Write file in sandbox",
	 "Create or replace a file in a sandbox (atomically). The parent directory must exist "
	 "(create it with sandbox_run_command `mkdir -p`).",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
	 "\"path\",\"content\"],\"properties\":{" ID_PROP ","
	 "\"path\":{\"type\":\"string\"},"
	 "\"content\":{\"type\":\"string\",\"description\":\"the file's content\"},"
	 "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\"},"
	 "\"mode\":{\"type\":\"string\",\"pattern\":\"^[0-7]{1,5}$\",\"description\":\"octal "
	 "permission bits, default 0644\"}}}",
	 tool_write},
	{"sandbox_list_files", "List files in sandbox",
	 "List a directory in a sandbox: one line per entry with type, size and path.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
	 "\"path\"],\"properties\":{" ID_PROP ","
	 "\"path\":{\"type\":\"string\"},"
	 "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16,\"default\":1}}}",
	 tool_list_files},
	{"sandbox_destroy", "Destroy sandbox",
	 "Destroy a sandbox and everything in it. The id is gone afterwards.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
	 "\"properties\":{" ID_PROP "}}",
	 tool_destroy},
	{"sandbox_snapshot", "Snapshot sandbox",
	 "Take an immutable named snapshot of a sandbox's state (its files; on the microvm tier "
	 "also its memory and processes). New sandboxes start from it with sandbox_create "
	 "`snapshot`; it survives the sandbox.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
	 "\"name\"],\"properties\":{" ID_PROP ","
	 "\"name\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$\","
	 "\"description\":\"snapshot name\"}}}",
	 tool_snapshot},
	{"sandbox_fork", "Fork sandbox",
	 "Make `count` new sandboxes that start with this sandbox's current state (each with a "
	 "fresh identity: id, hostname, RNG). Returns their ids; the source keeps running.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
	 "\"properties\":{" ID_PROP ","
	 "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16,\"default\":1}}}",
	 tool_fork},
	{"sandbox_list", "List sandboxes",
	 "List sandboxes (id, state, tier, template, labels), optionally only those carrying "
	 "every given label.",
	 "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
	 "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}}}",
	 tool_list},
};

/* ---- JSON-RPC ---- */

/* Writes one message as a line on stdout. */
static void send_msg(struct mcp *m, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (!s || m->out_broken) {
		free(s);
		return;
	}
	if (fputs(s, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
		m->out_broken = true;
	free(s);
}

static void send_result(struct mcp *m, json_t *id, json_t *result)
{
	send_msg(m, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ?: json_null(),
			      "result", result));
}

static void send_error(struct mcp *m, json_t *id, int code, const char *message)
{
	send_msg(m, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ?: json_null(),
			      "error", "code", code, "message", message));
}

static json_t *initialize_result(json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = mcp_versions[0];

	for (size_t i = 0; want && i < ARRAY_SIZE(mcp_versions); i++)
		if (!strcmp(want, mcp_versions[i]))
			version = mcp_versions[i];
	return json_pack(
		"{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
		"capabilities", "tools", "listChanged", 0, "serverInfo", "name", "isola", "title",
		"isola sandboxes", "version", ISOLA_VERSION, "instructions",
		"Tools to run untrusted code in isola sandboxes. Create a sandbox with "
		"sandbox_create, use its id with sandbox_run_command and the file tools, and "
		"destroy it with sandbox_destroy when done.");
}

static json_t *tools_list_result(void)
{
	json_t *tools = json_array();

	for (size_t i = 0; tools && i < ARRAY_SIZE(mcp_tools); i++) {
		json_error_t jerr;
		json_t *schema = json_loads(mcp_tools[i].schema, 0, &jerr);

		if (!schema) {
			/* A programming error in the table above; tests/mcp lists every tool. */
			fprintf(stderr, "isola mcp: schema of %s: %s\n", mcp_tools[i].name,
				jerr.text);
			schema = json_pack("{s:s}", "type", "object");
		}
		json_array_append_new(tools,
				      json_pack("{s:s, s:s, s:s, s:o}", "name", mcp_tools[i].name,
						"title", mcp_tools[i].title, "description",
						mcp_tools[i].description, "inputSchema", schema));
	}
	return json_pack("{s:o}", "tools", tools);
}

static void tools_call(struct mcp *m, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	cleanup_err struct isola_err *err = NULL;
	const struct mcp_tool *tool = NULL;
	cleanup_free char *text = NULL;
	bool is_error = false;
	json_t *empty = NULL;
	int r;

	for (size_t i = 0; name && i < ARRAY_SIZE(mcp_tools); i++)
		if (!strcmp(name, mcp_tools[i].name))
			tool = &mcp_tools[i];
	if (!tool) {
		cleanup_free char *msg = NULL;

		if (asprintf(&msg, "unknown tool `%s`", name ?: "") < 0)
			msg = NULL;
		send_error(m, id, RPC_INVALID_PARAMS, msg ?: "unknown tool");
		return;
	}
	if (!args || json_is_null(args))
		args = empty = json_object();
	if (!json_is_object(args)) {
		send_error(m, id, RPC_INVALID_PARAMS, "`arguments` must be an object");
		return;
	}
	r = tool->fn(m, args, &text, &is_error, &err);
	json_decref(empty);
	if (r < 0 && err && !strcmp(err->code, MCP_ERR_PARAMS)) {
		cleanup_free char *msg = NULL;

		if (asprintf(&msg, "%s: %s", tool->name, err->message) < 0)
			msg = NULL;
		send_error(m, id, RPC_INVALID_PARAMS, msg ?: err->message);
		return;
	}
	if (r < 0) {
		/* An API refusal is a tool result the model can read and act on. */
		free(text);
		text = NULL;
		if (asprintf(&text, "isola: %s (%s)", err && err->message ? err->message : "error",
			     err ? err->code : "internal") < 0)
			text = NULL;
		is_error = true;
	}
	send_result(m, id,
		    json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
			      text ?: "", "isError", is_error));
}

/* Handles one parsed message. */
static void handle(struct mcp *m, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));

	/* UNTRUSTED: the client's message; only these members are read, each type-checked. */
	if (!json_is_object(msg) || !method ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") ||
	    (id && !json_is_string(id) && !json_is_integer(id))) {
		/* Responses from the client (we send no requests) are ignored. */
		if (json_is_object(msg) && !method &&
		    (json_object_get(msg, "result") || json_object_get(msg, "error")))
			return;
		send_error(m, json_is_string(id) || json_is_integer(id) ? id : NULL,
			   RPC_INVALID_REQUEST, "not a JSON-RPC 2.0 request");
		return;
	}
	if (!id) {
		/* Notifications: initialized, cancelled (requests run one at a time, so a
		 * cancellation always arrives after its request finished), anything else. */
		return;
	}
	if (params && !json_is_object(params)) {
		send_error(m, id, RPC_INVALID_PARAMS, "`params` must be an object");
		return;
	}
	if (!strcmp(method, "initialize")) {
		send_result(m, id, initialize_result(params));
	} else if (!strcmp(method, "ping")) {
		send_result(m, id, json_object());
	} else if (!strcmp(method, "tools/list")) {
		send_result(m, id, tools_list_result());
	} else if (!strcmp(method, "tools/call")) {
		tools_call(m, id, params);
	} else {
		cleanup_free char *s = NULL;

		if (asprintf(&s, "method `%s` not found", method) < 0)
			s = NULL;
		send_error(m, id, RPC_METHOD_NOT_FOUND, s ?: "method not found");
	}
}

static void handle_line(struct mcp *m, const char *line, size_t n)
{
	json_error_t jerr;
	json_t *msg;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	if (n == 0)
		return;
	/* UNTRUSTED: one line from the MCP client (at most MCP_MAX_LINE bytes). */
	msg = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg) {
		char text[256];

		snprintf(text, sizeof(text), "parse error: %s", jerr.text);
		send_error(m, NULL, RPC_PARSE_ERROR, text);
		return;
	}
	if (json_is_array(msg))
		send_error(m, NULL, RPC_INVALID_REQUEST, "batches are not supported");
	else
		handle(m, msg);
	json_decref(msg);
}

int cmd_mcp(struct cli *cli, int argc, char **argv)
{
	struct mcp m = {.cli = cli};
	char *buf = NULL;
	size_t len = 0, cap = 0;
	bool discarding = false; /* inside a line longer than MCP_MAX_LINE */
	int opt;

	while ((opt = cli_getopt(argc, argv, "h", NULL)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	for (;;) {
		char chunk[65536], *p, *nl;
		ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* EOF: the client closed the session */
		p = chunk;
		while (n > 0 && !m.out_broken) {
			size_t k;

			nl = memchr(p, '\n', (size_t)n);
			k = nl ? (size_t)(nl - p) : (size_t)n;
			if (!discarding && len + k > MCP_MAX_LINE) {
				discarding = true;
				len = 0;
				send_error(&m, NULL, RPC_INVALID_REQUEST,
					   "message longer than 16 MiB");
			}
			if (!discarding) {
				if (len + k + 1 > cap) {
					size_t ncap = (len + k + 1) * 2;
					char *nb;

					if (ncap > MCP_MAX_LINE + 1)
						ncap = MCP_MAX_LINE + 1;
					nb = realloc(buf, ncap);
					if (!nb) {
						free(buf);
						fprintf(stderr, "isola mcp: out of memory\n");
						return CLI_EXIT_FAIL;
					}
					buf = nb;
					cap = ncap;
				}
				memcpy(buf + len, p, k);
				len += k;
			}
			if (!nl)
				break;
			if (!discarding)
				handle_line(&m, buf, len);
			discarding = false;
			len = 0;
			p = nl + 1;
			n -= (ssize_t)k + 1;
		}
		if (m.out_broken)
			break;
	}
	if (len && !discarding && !m.out_broken)
		handle_line(&m, buf, len); /* a last message without its newline */
	free(buf);
	return m.out_broken ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
