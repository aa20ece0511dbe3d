/* SPDX-License-Identifier: Apache-2.0 */
/* util: the MCP tools' shared helpers — arguments, the call's client, default sandbox, files. */
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

/* ---- the call's client and the session's default sandbox ---- */

struct client *mcp_client(struct mcp_call *c, struct isola_err **err)
{
	if (!c->client && client_new(c->s->conf, &c->client, err) < 0)
		return NULL;
	return c->client;
}

int mcp_api(struct mcp_call *c, const char *method, const char *url, const json_t *body,
	    json_t **out, struct isola_err **err)
{
	struct client *cl;

	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (!(cl = mcp_client(c, err)))
		return -EIO;
	return client_json(cl, method, url, body, out, err);
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
	if (r == 0 && v) {
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
