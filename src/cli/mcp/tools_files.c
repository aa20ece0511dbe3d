/* SPDX-License-Identifier: Apache-2.0 */
/* tools_files: MCP tools and resources on a sandbox's files — read, write, edit, ls, rm, mkdir, host transfer. */
#include "mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../parse.h"

#define SID_LEN	     96			   /* room for a sandbox id */
#define READ_DEFAULT (256u * 1024u)	   /* bytes sandbox_read_file returns by default */
#define READ_LIMIT   (8u * 1024u * 1024u)  /* its max_bytes cap */
#define WHOLE_LIMIT  (64u * 1024u * 1024u) /* bytes fetched to find lines or edit */
#define RES_SCHEME   "isola://sandbox/"	   /* resource URI prefix: isola://sandbox/ID/PATH */

/* Appends bytes as text when they are UTF-8, else as base64 so no byte is lost. */
static void add_content(struct sbuf *b, const char *p, size_t n)
{
	json_t *probe = json_stringn(p, n);
	char *b64;

	if (probe) {
		sb_add(b, p, n);
		json_decref(probe);
		return;
	}
	b64 = malloc(4 * ((n + 2) / 3) + 1);
	if (!b64) {
		b->oom = true;
		return;
	}
	cli_b64_encode((const unsigned char *)p, n, b64);
	sb_printf(b, "[binary, %zu bytes, base64]\n%s", n, b64);
	free(b64);
}

/* The byte offset where 1-based line `line` starts in p[0..n), or n when there are fewer. */
static size_t line_start(const char *p, size_t n, long long line)
{
	size_t off = 0;

	for (long long l = 1; l < line && off < n; l++) {
		const char *nl = memchr(p + off, '\n', n - off);

		off = nl ? (size_t)(nl - p) + 1 : n;
	}
	return off;
}

static size_t count_lines(const char *p, size_t n)
{
	size_t lines = 0;

	for (const char *q = p; (q = memchr(q, '\n', n - (size_t)(q - p))); q++)
		lines++;
	return lines + (n && p[n - 1] != '\n');
}

int mcp_tool_read(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	long long max = READ_DEFAULT, offset = 0, first = 0, last = 0;
	cleanup_free char *data = NULL;
	const char *id, *path;
	size_t len = 0, from, to, cap;
	char sid[SID_LEN];
	struct sbuf b = {0};
	bool more = false, lines;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = mcp_arg_int(args, "max_bytes", 1, READ_LIMIT, &max, err)) < 0 ||
	    (r = mcp_arg_int(args, "offset", 0, WHOLE_LIMIT, &offset, err)) < 0 ||
	    (r = mcp_arg_int(args, "start_line", 1, 1LL << 40, &first, err)) < 0 ||
	    (r = mcp_arg_int(args, "end_line", 1, 1LL << 40, &last, err)) < 0)
		return r;
	lines = first || last;
	if (lines && json_object_get(args, "offset"))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "give either `offset` or `start_line`/`end_line`, not both");
	if (last && first > last)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "`end_line` (%lld) is before `start_line` (%lld)", last,
				     first);
	cap = lines ? WHOLE_LIMIT : (size_t)(offset + max);
	if ((r = mcp_get_file(c, id, path, cap, &data, &len, &more, err)) < 0)
		return r;
	if (lines) {
		from = line_start(data, len, first ?: 1);
		to = last ? line_start(data, len, last + 1) : len;
	} else {
		from = (size_t)offset < len ? (size_t)offset : len;
		to = len;
	}
	if (to - from > (size_t)max)
		to = from + (size_t)max;
	add_content(&b, data + from, to - from);
	if (lines)
		sb_printf(&b, "\n[lines %lld-%lld of %s%zu; bytes %zu-%zu]", first ?: 1,
			  (long long)(first ?: 1) - 1 +
				  (long long)count_lines(data + from, to - from),
			  more ? "more than " : "", count_lines(data, len), from, to);
	else if (to < len || more)
		sb_printf(&b,
			  "\n[bytes %zu-%zu shown; the file goes on: read on with offset %zu, or "
			  "use start_line/end_line]",
			  from, to, to);
	return sb_finish(&b, res, err);
}

int mcp_tool_write(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	const char *id, *path, *content, *encoding;
	cleanup_free unsigned char *raw = NULL;
	const void *data;
	char sid[SID_LEN];
	struct sbuf b = {0};
	size_t len;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = mcp_arg_str(args, "content", true, &content, err)) < 0 ||
	    (r = mcp_arg_str(args, "encoding", false, &encoding, err)) < 0)
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
	} else if (encoding && strcmp(encoding, "utf8")) {
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `encoding` must be \"utf8\" or \"base64\"");
	}
	if ((r = mcp_put_file(c, id, path, data, len, err)) < 0)
		return r;
	sb_printf(&b, "Wrote %zu bytes to %s.", len, path);
	return sb_finish(&b, res, err);
}

int mcp_tool_edit(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	const char *id, *path, *old, *new;
	cleanup_free char *data = NULL;
	size_t len = 0, olen, nlen, n = 0;
	bool more = false, all = false;
	char sid[SID_LEN];
	struct sbuf out = {0}, b = {0};
	const char *p, *q;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = mcp_arg_str(args, "old_string", true, &old, err)) < 0 ||
	    (r = mcp_arg_str(args, "new_string", true, &new, err)) < 0 ||
	    (r = mcp_arg_bool(args, "replace_all", &all, err)) < 0)
		return r;
	olen = strlen(old);
	nlen = strlen(new);
	if (!olen)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS, "argument `old_string` is empty");
	if ((r = mcp_get_file(c, id, path, WHOLE_LIMIT, &data, &len, &more, err)) < 0)
		return r;
	if (more)
		return isola_err_set(err, EFBIG, "too_large", "`%s` is larger than %u bytes", path,
				     WHOLE_LIMIT);
	for (p = data; (q = memmem(p, len - (size_t)(p - data), old, olen)); p = q + olen)
		n++;
	if (n == 0 || (n > 1 && !all))
		return isola_err_set(
			err, EINVAL, "no_unique_match",
			"`old_string` matches %zu times in `%s`; it must match exactly "
			"once%s",
			n, path,
			n ? " (add surrounding lines to make it unique, or pass "
			    "replace_all)"
			  : "");
	for (p = data; (q = memmem(p, len - (size_t)(p - data), old, olen)); p = q + olen) {
		sb_add(&out, p, (size_t)(q - p));
		sb_add(&out, new, nlen);
	}
	sb_add(&out, p, len - (size_t)(p - data));
	if (out.oom) {
		free(out.s);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	r = mcp_put_file(c, id, path, out.s ?: "", out.len, err);
	free(out.s);
	if (r < 0)
		return r;
	sb_printf(&b, "Replaced %zu occurrence%s in %s.", n, n == 1 ? "" : "s", path);
	return sb_finish(&b, res, err);
}

int mcp_tool_ls(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	json_t *out = NULL, *e, *list;
	long long depth = 1;
	const char *id, *path, *glob;
	char sid[SID_LEN];
	struct sbuf b = {0};
	size_t i;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", false, &path, err)) < 0 ||
	    (r = mcp_arg_str(args, "glob", false, &glob, err)) < 0 ||
	    (r = mcp_arg_int(args, "depth", 1, 16, &depth, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/fs/list?path=%s&depth=%ld", id, path ?: ".", (long)depth);
	if ((r = mcp_api(c, "GET", url, NULL, &out, err)) < 0)
		return r;
	list = json_array();
	json_array_foreach(json_object_get(out, "entries"), i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type")) ?: "other";
		const char *name = json_string_value(json_object_get(e, "name")) ?: "?";
		const char *p = json_string_value(json_object_get(e, "path")) ?: name;
		const char *target = json_string_value(json_object_get(e, "target"));
		json_int_t size = json_integer_value(json_object_get(e, "size"));

		/* `*` matches across `/` too (no FNM_PATHNAME): "*.c" finds nested files. */
		if (glob && fnmatch(glob, name, 0) != 0)
			continue;
		sb_printf(&b, "%-7s %10lld  %s%s%s%s\n", type, (long long)size, p,
			  !strcmp(type, "dir") ? "/" : "", target ? " -> " : "", target ?: "");
		json_array_append_new(
			list, json_pack("{s:s, s:s, s:I}", "path", p, "type", type, "size", size));
	}
	if (!json_array_size(list))
		sb_printf(&b, glob ? "(nothing matches)\n" : "(empty directory)\n");
	if (json_is_true(json_object_get(out, "truncated")))
		sb_printf(&b, "[listing truncated]\n");
	res->data = json_pack("{s:o, s:b}", "entries", list, "truncated",
			      json_is_true(json_object_get(out, "truncated")));
	json_decref(out);
	return sb_finish(&b, res, err);
}

/* POSTs {path, FLAG: flag} to /v1/sandboxes/ID/fs/OP. */
static int fs_op(struct mcp_call *c, json_t *args, const char *op, const char *flag, bool dflt,
		 const char *done, struct mcp_result *res, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	const char *id, *path;
	char sid[SID_LEN];
	bool on = dflt;
	struct sbuf b = {0};
	json_t *body;
	int r;

	if ((r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = mcp_arg_bool(args, flag, &on, err)) < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/fs/%s", id, op);
	if (!(body = json_pack("{s:s, s:b}", "path", path, flag, on)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = mcp_api(c, "POST", url, body, NULL, err);
	json_decref(body);
	if (r < 0)
		return r;
	sb_printf(&b, "%s %s.", done, path);
	return sb_finish(&b, res, err);
}

int mcp_tool_remove(struct mcp_call *c, json_t *args, struct mcp_result *res,
		    struct isola_err **err)
{
	return fs_op(c, args, "remove", "recursive", false, "Removed", res, err);
}

int mcp_tool_mkdir(struct mcp_call *c, json_t *args, struct mcp_result *res, struct isola_err **err)
{
	return fs_op(c, args, "mkdir", "parents", true, "Created directory", res, err);
}

/* ---- host transfer, inside the operator's --allow-host-path directories only ---- */

/* Is the resolved path `real` inside one of the allowed directories? */
static bool host_allowed(const struct mcp_session *s, const char *real)
{
	for (size_t i = 0; i < s->nhost_dirs; i++) {
		size_t n = strlen(s->host_dirs[i]);

		if (!strncmp(real, s->host_dirs[i], n) &&
		    (real[n] == '/' || real[n] == '\0' || !strcmp(s->host_dirs[i], "/")))
			return true;
	}
	return false;
}

/*
 * Resolves a host path the model gave. SECURITY: the model is untrusted; only paths whose
 * realpath() (symlinks and `..` resolved) lies inside an --allow-host-path directory pass.
 * For a file to create (`create`), the parent is resolved and the last component must be a
 * plain name; the file is then opened with O_NOFOLLOW so a symlink planted there is refused.
 */
static int host_path(const struct mcp_session *s, const char *path, bool create, char *out,
		     struct isola_err **err)
{
	cleanup_free char *dir = NULL;
	char real[PATH_MAX];
	const char *base;

	if (!s->nhost_dirs)
		return isola_err_set(err, EACCES, "forbidden",
				     "host file transfer is off: the operator starts `isola mcp "
				     "--allow-host-path DIR` to allow a directory");
	if (path[0] != '/')
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `host_path` must be absolute");
	if (create) {
		dir = strdup(path);
		if (!dir)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
		*strrchr(dir, '/') = '\0';
		base = strrchr(path, '/') + 1;
		if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
			return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
					     "argument `host_path` must name a file");
		if (!realpath(*dir ? dir : "/", real))
			return isola_err_sys(err, errno, NULL, "host path `%s`", path);
		if (strlen(real) + 1 + strlen(base) >= PATH_MAX)
			return isola_err_set(err, ENAMETOOLONG, NULL, "host path `%s` too long",
					     path);
		if (!strcmp(real, "/"))
			real[0] = '\0';
		memcpy(out, real, strlen(real));
		out[strlen(real)] = '/';
		memcpy(out + strlen(real) + 1, base, strlen(base) + 1);
	} else if (!realpath(path, out)) {
		return isola_err_sys(err, errno, NULL, "host path `%s`", path);
	}
	if (!host_allowed(s, out))
		return isola_err_set(err, EACCES, "forbidden",
				     "host path `%s` is outside the directories the operator "
				     "allowed (--allow-host-path)",
				     path);
	return 0;
}

int mcp_tool_upload(struct mcp_call *c, json_t *args, struct mcp_result *res,
		    struct isola_err **err)
{
	struct client_req req = {.method = "PUT",
				 .content_type = "application/octet-stream",
				 .accept = "application/json"};
	cleanup_free char *url = NULL;
	const char *id, *src, *path;
	char sid[SID_LEN], real[PATH_MAX];
	cleanup_fd int fd = -1;
	struct sbuf b = {0};
	json_t *entry = NULL;
	struct client *cl;
	struct stat st;
	int r;

	if ((r = mcp_arg_str(args, "host_path", true, &src, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = host_path(c->s, src, false, real, err)) < 0 ||
	    (r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0)
		return r;
	fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return isola_err_sys(err, errno, NULL, "open `%s`", real);
	if (!S_ISREG(st.st_mode))
		return isola_err_set(err, EINVAL, NULL, "`%s` is not a regular file", real);
	if (!(url = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, path)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(cl = mcp_client(c, err)))
		return -EIO;
	req.path = url;
	req.body_fd = fd;
	req.body_size = st.st_size;
	req.out = &entry;
	mcp_make_parents(c, id, path);
	if ((r = client_do(cl, &req, err)) < 0)
		return r;
	json_decref(entry);
	sb_printf(&b, "Uploaded %s (%lld bytes) to %s in sandbox %s.", real, (long long)st.st_size,
		  path, id);
	return sb_finish(&b, res, err);
}

struct dl {
	int fd;		      /* the host file */
	unsigned long long n; /* bytes written */
};

static int dl_data(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	struct dl *d = ud;

	if (util_write_all(d->fd, buf, len) < 0)
		return isola_err_sys(err, errno, NULL, "write");
	d->n += len;
	return 0;
}

int mcp_tool_download(struct mcp_call *c, json_t *args, struct mcp_result *res,
		      struct isola_err **err)
{
	struct dl d = {.fd = -1};
	struct client_req req = {.method = "GET", .body_fd = -1, .on_data = dl_data, .ud = &d};
	cleanup_free char *url = NULL;
	const char *id, *dst, *path;
	char sid[SID_LEN], real[PATH_MAX];
	struct sbuf b = {0};
	struct client *cl;
	int r;

	if ((r = mcp_arg_str(args, "host_path", true, &dst, err)) < 0 ||
	    (r = mcp_arg_str(args, "path", true, &path, err)) < 0 ||
	    (r = host_path(c->s, dst, true, real, err)) < 0 ||
	    (r = mcp_sandbox(c, args, sid, sizeof(sid), &id, err)) < 0)
		return r;
	if (!(url = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, path)))
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(cl = mcp_client(c, err)))
		return -EIO;
	d.fd = open(real, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (d.fd < 0)
		return isola_err_sys(err, errno, NULL, "open `%s`", real);
	req.path = url;
	r = client_do(cl, &req, err);
	close(d.fd);
	if (r < 0) {
		unlink(real); /* no half file left behind */
		return r;
	}
	sb_printf(&b, "Downloaded %s from sandbox %s to %s (%llu bytes).", path, id, real, d.n);
	return sb_finish(&b, res, err);
}

/* ---- resources: isola://sandbox/ID/PATH ---- */

json_t *mcp_resources_list(struct mcp_call *c, struct isola_err **err)
{
	cleanup_free char *url = NULL;
	json_t *out = NULL, *e, *list = json_array();
	char id[SID_LEN];
	struct client *cl;
	size_t i;

	pthread_mutex_lock(&c->s->lock);
	snprintf(id, sizeof(id), "%s", c->s->default_id ?: "");
	pthread_mutex_unlock(&c->s->lock);
	/* Only the session's default sandbox is listed (when it exists): its working tree. */
	if (!list || !*id)
		return json_pack("{s:o}", "resources", list ?: json_array());
	url = cli_pathf("/v1/sandboxes/%s/fs/list?path=.&depth=2", id);
	if (!url || !(cl = mcp_client(c, err)) ||
	    client_json(cl, "GET", url, NULL, &out, err) < 0) {
		json_decref(list);
		if (!url)
			isola_err_set(err, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	json_array_foreach(json_object_get(out, "entries"), i, e)
	{
		const char *p = json_string_value(json_object_get(e, "path"));
		cleanup_free char *uri = NULL;

		if (!p || *p != '/' ||
		    strcmp(json_string_value(json_object_get(e, "type")) ?: "", "file") ||
		    asprintf(&uri, RES_SCHEME "%s%s", id, p) < 0)
			continue;
		json_array_append_new(list,
				      json_pack("{s:s, s:s, s:I}", "uri", uri, "name", p, "size",
						json_integer_value(json_object_get(e, "size"))));
	}
	json_decref(out);
	return json_pack("{s:o}", "resources", list);
}

json_t *mcp_resources_read(struct mcp_call *c, const char *uri, struct isola_err **err)
{
	cleanup_free char *data = NULL, *id = NULL, *b64 = NULL;
	const char *rest, *slash;
	size_t len = 0;
	bool more = false;
	json_t *probe;

	/* UNTRUSTED: the URI; the path is resolved by the sandbox's agent inside the sandbox. */
	if (strncmp(uri, RES_SCHEME, strlen(RES_SCHEME)))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "resource `%s` is not an isola://sandbox/ID/PATH URI", uri),
		       NULL;
	rest = uri + strlen(RES_SCHEME);
	slash = strchr(rest, '/');
	if (!slash || slash == rest || !slash[1])
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "resource `%s` names no sandbox file", uri),
		       NULL;
	id = strndup(rest, (size_t)(slash - rest));
	if (!id || mcp_get_file(c, id, slash, READ_LIMIT, &data, &len, &more, err) < 0)
		return !id ? (isola_err_set(err, ENOMEM, NULL, "out of memory"), NULL) : NULL;
	probe = json_stringn(data, len);
	if (probe)
		return json_pack("{s:[{s:s, s:s, s:o}]}", "contents", "uri", uri, "mimeType",
				 "text/plain", "text", probe);
	b64 = malloc(4 * ((len + 2) / 3) + 1);
	if (!b64)
		return isola_err_set(err, ENOMEM, NULL, "out of memory"), NULL;
	cli_b64_encode((const unsigned char *)data, len, b64);
	return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
			 "application/octet-stream", "blob", b64);
}
