/* SPDX-License-Identifier: Apache-2.0 */
/* util: the MCP tools' shared helpers — arguments, text buffers, bounded output, files, default sandbox. */
#include "mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../parse.h"

/* ---- arguments ---- */

int mcp_arg_str(json_t *args, const char *key, bool required, const char **out,
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

int mcp_arg_int(json_t *args, const char *key, long long min, long long max, long long *out,
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
				     "argument `%s` must be between %lld and %lld", key, min, max);
	if ((double)(long long)d != d)
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `%s` must be an integer", key);
	*out = (long long)d;
	return 0;
}

int mcp_arg_bool(json_t *args, const char *key, bool *out, struct isola_err **err)
{
	json_t *v = json_object_get(args, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return isola_err_set(err, EINVAL, MCP_ERR_PARAMS,
				     "argument `%s` must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

int mcp_arg_map(json_t *args, const char *key, json_t **out, struct isola_err **err)
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

/* ---- text buffers ---- */

void sb_add(struct sbuf *b, const char *p, size_t n)
{
	char *ns;

	if (b->oom)
		return;
	ns = realloc(b->s, b->len + n + 1);
	if (!ns) {
		b->oom = true;
		return;
	}
	if (n)
		memcpy(ns + b->len, p, n);
	b->s = ns;
	b->len += n;
	b->s[b->len] = '\0';
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
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

int sb_finish(struct sbuf *b, struct mcp_result *res, struct isola_err **err)
{
	if (b->oom) {
		free(b->s);
		b->s = NULL;
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	free(res->text);
	res->text = b->s ? steal_ptr(&b->s) : strdup("");
	if (!res->text)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	return 0;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	size_t need, i;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		need = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		need = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		need = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n < need)
		return 0;
	for (i = 1; i < need; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return need;
}

void sb_add_utf8(struct sbuf *b, const char *p, size_t n)
{
	const unsigned char *u = (const unsigned char *)p;
	size_t i = 0, run = 0;

	/* UNTRUSTED: bytes a sandboxed program wrote; only valid sequences pass through. */
	while (i < n) {
		size_t k = utf8_seq(u + i, n - i);

		if (k && u[i] != 0) {
			i += k;
			run += k;
			continue;
		}
		sb_add(b, p + i - run, run);
		sb_add(b, "\xef\xbf\xbd", 3);
		run = 0;
		i++;
	}
	sb_add(b, p + i - run, run);
}

/* ---- bounded output ---- */

bool mcp_out_is_long(size_t len)
{
	return len > MCP_OUT_HEAD + MCP_OUT_TAIL;
}

void mcp_out_bound(struct sbuf *b, const char *p, size_t len, const char *saved)
{
	size_t head = MCP_OUT_HEAD, tail = MCP_OUT_TAIL;
	const char *nl;

	if (!mcp_out_is_long(len)) {
		sb_add_utf8(b, p, len);
		return;
	}
	/* Cut on line boundaries when a newline is near, so no line is shown half. */
	nl = memrchr(p, '\n', head);
	if (nl && (size_t)(nl - p) >= head / 2)
		head = (size_t)(nl - p) + 1;
	nl = memchr(p + len - tail, '\n', tail / 2);
	if (nl)
		tail = (size_t)(p + len - nl - 1);
	sb_add_utf8(b, p, head);
	sb_printf(b,
		  "\n[... %zu bytes elided: %zu bytes in total, the first %zu and the last %zu "
		  "shown. ",
		  len - head - tail, len, head, tail);
	if (saved)
		sb_printf(b,
			  "The whole output is in the sandbox at %s: read it in pages with "
			  "sandbox_read_file (start_line/end_line or offset/max_bytes), or "
			  "sandbox_search it. ...]\n",
			  saved);
	else
		sb_printf(b, "It could not be saved in the sandbox. ...]\n");
	sb_add_utf8(b, p + len - tail, tail);
}

/* ---- the call's client and the session's default sandbox ---- */

struct client *mcp_client(struct mcp_call *c, struct isola_err **err)
{
	if (!c->client && client_new(c->s->conf, &c->client, err) < 0)
		return NULL;
	return c->client;
}

void mcp_forget_default(struct mcp_session *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	if (s->default_id && !strcmp(s->default_id, id)) {
		free(s->default_id);
		s->default_id = NULL;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Copies the default sandbox id into buf; false when there is none. */
static bool default_get(struct mcp_session *s, char *buf, size_t len)
{
	bool have;

	pthread_mutex_lock(&s->lock);
	have = s->default_id != NULL;
	if (have)
		snprintf(buf, len, "%s", s->default_id);
	pthread_mutex_unlock(&s->lock);
	return have;
}

int mcp_sandbox(struct mcp_call *c, json_t *args, char *buf, size_t len, const char **id,
		struct isola_err **err)
{
	struct mcp_session *s = c->s;
	json_t *res = NULL, *body;
	struct client *cl;
	const char *v;
	int r;

	if ((r = mcp_arg_str(args, "sandbox_id", false, id, err)) < 0 || *id)
		return r;
	*id = buf;
	if (default_get(s, buf, len))
		return 0;
	/* One creator at a time, so concurrent first calls share one sandbox. */
	pthread_mutex_lock(&s->default_lock);
	if (default_get(s, buf, len)) {
		pthread_mutex_unlock(&s->default_lock);
		return 0;
	}
	r = -ENOMEM;
	body = json_pack("{s:{s:s}}", "labels", "isola-mcp", "session-default");
	cl = mcp_client(c, err);
	if (!cl)
		r = -EIO;
	else if (body)
		r = client_json(cl, "POST", "/v1/sandboxes", body, &res, err);
	else
		isola_err_set(err, ENOMEM, NULL, "out of memory");
	json_decref(body);
	v = json_string_value(json_object_get(res, "id"));
	if (r == 0 && !v)
		r = isola_err_set(err, EPROTO, NULL, "isolad's reply to create has no `id`");
	if (r == 0) {
		snprintf(buf, len, "%s", v);
		pthread_mutex_lock(&s->lock);
		s->default_id = strdup(v);
		pthread_mutex_unlock(&s->lock);
	}
	json_decref(res);
	pthread_mutex_unlock(&s->default_lock);
	return r;
}

/* ---- files in the sandbox ---- */

void mcp_make_parents(struct mcp_call *c, const char *id, const char *path)
{
	cleanup_free char *url = NULL, *dir = strdup(path);
	struct client *cl = mcp_client(c, NULL);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	json_t *body;

	if (!cl || !slash || slash == dir)
		return;
	*slash = '\0';
	url = cli_pathf("/v1/sandboxes/%s/fs/mkdir", id);
	body = json_pack("{s:s, s:b}", "path", dir, "parents", 1);
	/* A failure (it exists, ...) is left to the write that follows to report. */
	if (url && body)
		(void)client_json(cl, "POST", url, body, NULL, NULL);
	json_decref(body);
}

int mcp_put_file(struct mcp_call *c, const char *id, const char *path, const void *data, size_t len,
		 struct isola_err **err)
{
	struct client_req req = {.method = "PUT",
				 .content_type = "application/octet-stream",
				 .accept = "application/json"};
	cleanup_free char *url = NULL;
	cleanup_fd int fd = -1;
	json_t *entry = NULL;
	struct client *cl;
	int r;

	if (!(cl = mcp_client(c, err)))
		return -EIO;
	mcp_make_parents(c, id, path);
	/* The client streams request bodies from an fd: a memfd holds the bytes. */
	fd = memfd_create("isola-mcp-put", MFD_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, NULL, "memfd_create");
	if (util_write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return isola_err_sys(err, errno, NULL, "memfd write");
	url = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, path);
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	req.path = url;
	req.body_fd = fd;
	req.body_size = (int64_t)len;
	req.out = &entry;
	r = client_do(cl, &req, err);
	json_decref(entry);
	return r;
}

/* Collects a file's bytes up to a cap, then stops the transfer. */
struct get_buf {
	struct sbuf b; /* the bytes */
	size_t cap;    /* stop after this many */
	bool more;     /* more bytes were on offer */
};

static int get_data(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	struct get_buf *g = ud;
	size_t room = g->cap - g->b.len;

	sb_add(&g->b, buf, len < room ? len : room);
	if (g->b.oom)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (len > room) {
		g->more = true;
		return isola_err_set(err, EFBIG, "truncated", "file longer than the cap");
	}
	return 0;
}

int mcp_get_file(struct mcp_call *c, const char *id, const char *path, size_t cap, char **out,
		 size_t *len, bool *more, struct isola_err **err)
{
	struct get_buf g = {.cap = cap};
	struct client_req req = {.method = "GET", .body_fd = -1, .on_data = get_data, .ud = &g};
	cleanup_free char *url = NULL;
	struct isola_err *e = NULL;
	struct client *cl;
	int r;

	if (!(cl = mcp_client(c, err)))
		return -EIO;
	url = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, path);
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	req.path = url;
	r = client_do(cl, &req, &e);
	if (r < 0 && !g.more) {
		free(g.b.s);
		if (err && !*err)
			*err = e;
		else
			isola_err_free(e);
		return r;
	}
	isola_err_free(e);
	sb_add(&g.b, "", 0);
	if (g.b.oom) {
		free(g.b.s);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	*len = g.b.len;
	*more = g.more;
	*out = g.b.s;
	return 0;
}
