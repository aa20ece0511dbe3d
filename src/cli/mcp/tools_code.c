/* SPDX-License-Identifier: Apache-2.0 */
/* tools_code: sandbox_run_code — the sandbox's code interpreter, results as MCP content. */
#include "mcp.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../client.h"
#include "../parse.h"

#define CODE_OUT_KEEP	(256u * 1024u)	     /* stdout/stderr bytes kept per stream */
#define CODE_MAX_IMAGES 4		     /* images returned as image content */
#define CODE_MAX_IMAGE	(4u * 1024u * 1024u) /* base64 bytes of one image */

/* Images a result may carry, in the order they are looked for. */
static const struct {
	const char *field; /* the result's field */
	const char *mime;  /* its MIME type */
} images[] = {{"png", "image/png"}, {"jpeg", "image/jpeg"}};

/* What one execution sent, gathered from the NDJSON events of /code/execute. */
struct code_state {
	struct mcp_call *c;
	struct sbuf out[2];	     /* stdout, stderr: the first CODE_OUT_KEEP bytes each */
	unsigned long long total[2]; /* bytes seen per stream */
	struct sbuf text;	     /* text results, one per line */
	json_t *results;	     /* structured results: {mime types present, text} */
	json_t *images;		     /* MCP image content items */
	json_t *error;		     /* {name, value, traceback}, or NULL */
};

static int on_code_event(void *ud, json_t *ev, struct isola_err **err)
{
	struct code_state *st = ud;
	const char *type = json_string_value(json_object_get(ev, "type"));
	const char *text = json_string_value(json_object_get(ev, "text"));

	if (atomic_load(&st->c->cancelled))
		return isola_err_set(err, ECANCELED, "cancelled", "cancelled by the client");
	if (!type)
		return 0;
	/* UNTRUSTED: the sandbox's output; kept bounded and made valid UTF-8 for the model. */
	if ((!strcmp(type, "stdout") || !strcmp(type, "stderr")) && text) {
		int k = type[3] == 'e';
		size_t n = strlen(text), room = CODE_OUT_KEEP - st->out[k].len;

		st->total[k] += n;
		if (st->out[k].len < CODE_OUT_KEEP)
			sb_add_utf8(&st->out[k], text, n < room ? n : room);
		pthread_mutex_lock(&st->c->s->lock);
		st->c->out_bytes += n;
		pthread_mutex_unlock(&st->c->s->lock);
	} else if (!strcmp(type, "result")) {
		json_t *kinds = json_array();
		bool image = false;
		const char *k;
		json_t *v;

		json_object_foreach(ev, k, v)
		{
			if (strcmp(k, "type") && strcmp(k, "is_main_result") && !json_is_null(v))
				json_array_append_new(kinds, json_string(k));
		}
		for (size_t i = 0; i < ARRAY_SIZE(images); i++) {
			const char *d = json_string_value(json_object_get(ev, images[i].field));

			if (!d)
				continue;
			image = true;
			if (json_array_size(st->images) < CODE_MAX_IMAGES &&
			    strlen(d) <= CODE_MAX_IMAGE)
				json_array_append_new(st->images,
						      json_pack("{s:s, s:s, s:s}", "type", "image",
								"data", d, "mimeType",
								images[i].mime));
		}
		/* A figure's text is its repr ("<Figure size ...>"): the image stands for it. */
		if (text && !image) {
			sb_add_utf8(&st->text, text, strlen(text));
			sb_add(&st->text, "\n", 1);
		}
		json_array_append_new(st->results,
				      json_pack("{s:o, s:b, s:s*}", "formats", kinds,
						"is_main_result",
						json_is_true(json_object_get(ev, "is_main_result")),
						"text", image ? NULL : text));
	} else if (!strcmp(type, "error") && !st->error) {
		char *tb = strdup(json_string_value(json_object_get(ev, "traceback")) ?: "");

		if (tb)
			mcp_strip_ansi(tb); /* IPython colours its tracebacks */
		st->error =
			json_pack("{s:s, s:s, s:s}", "name",
				  json_string_value(json_object_get(ev, "name")) ?: "Error",
				  "value", json_string_value(json_object_get(ev, "value")) ?: "",
				  "traceback", tb ? tb : "");
		free(tb);
	}
	return 0;
}

static void add_stream(struct sbuf *b, const struct code_state *st, int k)
{
	static const char *const names[] = {"stdout", "stderr"};

	if (!st->total[k])
		return;
	sb_printf(b, "--- %s (%llu bytes) ---\n", names[k], st->total[k]);
	mcp_out_bound(b, st->out[k].s, st->out[k].len, NULL);
	if (st->out[k].len && st->out[k].s[st->out[k].len - 1] != '\n')
		sb_add(b, "\n", 1);
	if (st->total[k] > st->out[k].len)
		sb_printf(b, "[only the first %zu of %llu bytes were kept]\n", st->out[k].len,
			  st->total[k]);
}

int mcp_tool_run_code(struct mcp_call *c, json_t *args, struct mcp_result *res,
		      struct isola_err **err)
{
	struct code_state st = {.c = c, .results = json_array(), .images = json_array()};
	const char *id, *code, *lang = NULL, *ctx = NULL;
	cleanup_free char *path = NULL;
	struct client *cl;
	json_t *env = NULL, *body = NULL;
	struct sbuf b = {0};
	long long timeout = 0;
	char buf[96];
	int r;

	if (mcp_arg_str(args, "code", true, &code, err) < 0 ||
	    mcp_arg_str(args, "language", false, &lang, err) < 0 ||
	    mcp_arg_str(args, "context", false, &ctx, err) < 0 ||
	    mcp_arg_map(args, "env", &env, err) < 0 ||
	    mcp_arg_int(args, "timeout", 0, 3600, &timeout, err) < 0) {
		r = -EINVAL;
		goto out;
	}
	r = mcp_sandbox(c, args, buf, sizeof(buf), &id, err);
	if (r < 0)
		goto out;
	body = json_pack("{s:s, s:s*, s:s*, s:O*}", "code", code, "language", lang, "context", ctx,
			 "env", env);
	if (body && timeout > 0)
		json_object_set_new(body, "timeout", json_integer(timeout));
	path = cli_pathf("/v1/sandboxes/%s/code/execute", id);
	cl = mcp_client(c, err);
	if (!cl || !path || !body || !st.results || !st.images) {
		r = cl ? isola_err_set(err, ENOMEM, NULL, "out of memory") : -EIO;
		goto out;
	}
	{
		struct client_req req = {.method = "POST",
					 .path = path,
					 .body = body,
					 .body_fd = -1,
					 .accept = "application/x-ndjson",
					 .on_event = on_code_event,
					 .ud = &st};

		r = client_do(cl, &req, err);
	}
	if (r < 0)
		goto out;
	add_stream(&b, &st, 0);
	add_stream(&b, &st, 1);
	if (st.text.len)
		sb_add(&b, st.text.s, st.text.len);
	if (json_array_size(st.images))
		sb_printf(&b, "[%zu image%s below]\n", json_array_size(st.images),
			  json_array_size(st.images) == 1 ? "" : "s");
	if (st.error) {
		const char *tb = json_string_value(json_object_get(st.error, "traceback"));

		if (tb && *tb)
			sb_printf(&b, "%s\n", tb);
		else
			sb_printf(&b, "%s: %s\n",
				  json_string_value(json_object_get(st.error, "name")),
				  json_string_value(json_object_get(st.error, "value")));
		res->is_error = true;
	}
	if (!b.len)
		sb_printf(&b, "(no output)\n");
	r = sb_finish(&b, res, err);
	if (r < 0)
		goto out;
	res->data = json_pack("{s:s, s:O, s:O, s:I, s:I}", "sandbox_id", id, "results", st.results,
			      "error", st.error ? st.error : json_null(), "stdout_bytes",
			      (json_int_t)st.total[0], "stderr_bytes", (json_int_t)st.total[1]);
	if (json_array_size(st.images))
		res->content = json_incref(st.images);
out:
	free(b.s);
	free(st.out[0].s);
	free(st.out[1].s);
	free(st.text.s);
	json_decref(st.results);
	json_decref(st.images);
	json_decref(st.error);
	json_decref(body);
	return r;
}
