/* SPDX-License-Identifier: Apache-2.0 */
/* files: file download (with Range), streamed upload, and fs/ list, stat, mkdir, rename, remove. */
#include "api-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define FS_CALL_TIMEOUT_MS 60000

/* ?key=PATH, binary-safe (a %00 in the query is caught, not truncated). */
static int query_path(struct api_req *r, const char *key, const char **out, struct isola_err **err)
{
	const char *v = NULL;
	size_t n = 0;

	if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v,
					  &n) != MHD_YES)
		v = NULL;
	if (api_check_path(key, v, v ? n : 0, err) < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A JSON body's path member, checked like a query path. */
static int body_path(const json_t *b, const char *key, const char **out, struct isola_err **err)
{
	json_t *v = json_object_get(b, key);

	if (v && !json_is_string(v))
		return isola_err_set(err, EINVAL, "invalid", "field `%s` must be a string", key);
	if (api_check_path(key, json_string_value(v), v ? json_string_length(v) : 0, err) < 0)
		return -EINVAL;
	*out = json_string_value(v);
	return 0;
}

/* One-shot agent op on the sandbox of {id}; steals req. */
static int fs_call(struct api_req *r, json_t *req, json_t **result, struct isola_err **err)
{
	struct agent_conn *conn;
	struct sandbox *s;
	int ret;

	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	ret = api_sandbox_agent(r, &s, &conn, err);
	if (ret == 0) {
		sandbox_apply_file_defaults(s, req);
		ret = agent_call(conn, req, FS_CALL_TIMEOUT_MS, result, err);
		sandbox_unref(s);
	}
	json_decref(req);
	return ret;
}

/* --- GET /files ------------------------------------------------------------------------ */

void api_download_free(void *p)
{
	struct api_download *d = p;

	agent_chan_close(d->ch);
	sandbox_unref(d->s);
	free(d);
}

int api_download_produce(struct api_stream *st, void *ud)
{
	struct api_download *d = ud;
	cleanup_err struct isola_err *err = NULL;
	const char *sid = d->s ? sandbox_id(d->s) : "?";
	struct agent_msg m = {0};
	int r;

	if (d->remaining == 0)
		return d->filter && d->filter(d, st, NULL, 0, true) < 0 ? -1 : 1;
	r = agent_chan_recv(d->ch, &m, API_POLL_MS, &err);
	if (r == -ETIMEDOUT) {
		if (api_server_is_stopping(d->srv))
			return api_stream_abort(st, "file", "unavailable", "sandbox %s: %s", sid,
						"isolad is stopping");
		return api_stream_peer_gone(st) ? -1 : 0; /* the client left */
	}
	if (r < 0)
		return api_stream_abort(st, "file", err->code, "sandbox %s: %s", sid, err->message);
	if (m.type == PROTO_STDOUT) {
		/* UNTRUSTED: the agent's data; never more than the length we announced. */
		size_t n = m.len < d->remaining ? m.len : (size_t)d->remaining;

		r = d->filter ? d->filter(d, st, m.data, n, false)
			      : api_stream_write(st, m.data, n);
		d->remaining -= n;
		agent_msg_fini(&m);
		return r < 0 ? api_stream_abort(st, "file", "internal", "sandbox %s: %s", sid,
						"out of memory")
			     : 0;
	}
	/* EOF, ERROR or anything else before the promised length: cut the response so the
	 * client sees a short body rather than a silently truncated file. */
	if (m.type == PROTO_ERROR)
		agent_error_to_err(m.json, &err);
	else
		isola_err_set(&err, EPROTO, "internal", "agent ended the file %llu bytes short",
			      (unsigned long long)d->remaining);
	agent_msg_fini(&m);
	return api_stream_abort(st, "file", err->code, "sandbox %s: %s", sid, err->message);
}

enum MHD_Result api_file_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *path, *range_hdr = api_header(r, MHD_HTTP_HEADER_RANGE);
	struct api_range rg;
	bool ranged = range_hdr && api_parse_range(range_hdr, &rg) == 0;
	uint64_t off = 0, len, size;
	struct agent_conn *conn;
	struct api_download *d;
	struct MHD_Response *resp;
	json_t *req, *res = NULL;
	char buf[96];
	enum MHD_Result ret;

	if (query_path(r, "path", &path, &err) < 0)
		return api_respond_err(r, err);
	d = calloc(1, sizeof(*d));
	if (!d)
		return MHD_NO;
	d->srv = r->srv;
	if (api_sandbox_agent(r, &d->s, &conn, &err) < 0) {
		free(d);
		return api_respond_err(r, err);
	}
	if (ranged && rg.suffix) {
		json_t *stat = NULL;

		/* The suffix needs the size first. */
		req = json_pack("{s:s, s:s}", "op", "stat", "path", path);
		if (req)
			sandbox_apply_file_defaults(d->s, req);
		if (!req || agent_call(conn, req, FS_CALL_TIMEOUT_MS, &stat, &err) < 0) {
			json_decref(req);
			goto fail;
		}
		json_decref(req);
		size = (uint64_t)json_integer_value(json_object_get(stat, "size"));
		json_decref(stat);
		if (api_range_resolve(&rg, size, &off, &len) < 0)
			goto unsatisfiable;
		rg.suffix = false;
		rg.start = off;
		rg.end = off + len - 1;
	} else if (ranged) {
		off = rg.start;
	}
	req = json_pack("{s:s, s:s, s:I, s:I}", "op", "read", "path", path, "offset",
			(json_int_t)off, "length",
			ranged && rg.end != UINT64_MAX ? (json_int_t)(rg.end - rg.start + 1)
						       : (json_int_t)-1);
	if (req)
		sandbox_apply_file_defaults(d->s, req);
	if (!req || agent_chan_open(conn, req, &d->ch, &err) < 0) {
		json_decref(req);
		goto fail;
	}
	json_decref(req);
	if (api_chan_expect_result(d->ch, api_req_fd(r), FS_CALL_TIMEOUT_MS, &res, &err) < 0)
		goto fail;
	/* UNTRUSTED: the size reported by the agent bounds what we promise, nothing more. */
	size = json_integer_value(json_object_get(res, "size")) > 0
		       ? (uint64_t)json_integer_value(json_object_get(res, "size"))
		       : 0;
	json_decref(res);
	if (ranged) {
		if (api_range_resolve(&rg, size, &off, &len) < 0)
			goto unsatisfiable;
	} else {
		len = size;
	}
	d->remaining = len;
	resp = api_stream_response(r, API_FMT_RAW, len, api_download_produce, d, api_download_free);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	if (ranged) {
		snprintf(buf, sizeof(buf), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off,
			 off + len - 1, size);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, buf);
	}
	return api_respond_response(r, ranged ? 206 : 200, resp);

unsatisfiable:
	api_download_free(d);
	snprintf(buf, sizeof(buf), "bytes */%" PRIu64, size);
	resp = api_json_response(api_error_json("range_not_satisfiable", "range not satisfiable"));
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, buf);
	return api_respond_response(r, 416, resp);
fail:
	ret = api_respond_err(r, err);
	api_download_free(d);
	return ret;
}

/* --- PUT /files ------------------------------------------------------------------------ */

struct upload {
	struct sandbox *s;	 /* reference */
	struct agent_conn *conn; /* borrowed while s is held */
	struct agent_chan *ch;	 /* owned */
	json_t *req;		 /* the write op's request, owned */
};

static void upload_free(void *p)
{
	struct upload *u = p;

	if (!u)
		return;
	/* Closing a write channel before EOF abandons it: the agent removes its temp file,
	 * so a client that disconnects mid-upload leaves the old file intact. */
	agent_chan_close(u->ch);
	if (u->s)
		sandbox_unref(u->s);
	json_decref(u->req);
	free(u);
}

int api_file_put_begin(struct api_req *r)
{
	struct isola_err *err = NULL;
	const char *path, *mq = api_query(r, "mode");
	uint32_t mode = 0644;
	struct upload *u;
	json_t *req;

	if (query_path(r, "path", &path, &err) < 0)
		return api_req_fail(r, err);
	if (mq && api_parse_mode(mq, &mode) < 0) {
		isola_err_set(&err, EINVAL, "invalid", "query `mode` must be octal, e.g. 0644");
		return api_req_fail(r, err);
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	r->state = u;
	r->state_free = upload_free;
	if (api_sandbox_agent(r, &u->s, &u->conn, &err) < 0)
		return api_req_fail(r, err);
	req = json_pack("{s:s, s:s, s:i, s:b}", "op", "write", "path", path, "mode", (int)mode,
			"append", 0);
	if (req)
		sandbox_apply_file_defaults(u->s, req);
	if (!req || agent_chan_open(u->conn, req, &u->ch, &err) < 0) {
		json_decref(req);
		if (!err)
			isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	u->req = req; /* kept for agent_write_entry */
	return 0;
}

int api_upload_check(struct agent_chan *ch, struct isola_err **err)
{
	struct isola_err *e = NULL;
	struct agent_msg m = {0};
	int q;

	/* The agent may have refused the path already (ERROR ends the channel). */
	q = agent_chan_recv(ch, &m, 0, &e);
	isola_err_free(e);
	if (q == 0) {
		if (m.type == PROTO_ERROR)
			q = agent_error_to_err(m.json, err);
		else
			q = isola_err_set(err, EPROTO, "internal",
					  "unexpected frame from the agent");
		agent_msg_fini(&m);
		return q;
	}
	if (q != -ETIMEDOUT)
		return isola_err_set(err, ECONNRESET, "unavailable",
				     "sandbox agent connection lost");
	return 0;
}

int api_file_put_data(struct api_req *r, const char *buf, size_t len)
{
	struct upload *u = r->state;
	struct isola_err *err = NULL;

	if (api_upload_check(u->ch, &err) < 0 || agent_chan_send_data(u->ch, buf, len, &err) < 0)
		return api_req_fail(r, err);
	return 0;
}

enum MHD_Result api_file_put_end(struct api_req *r)
{
	struct upload *u = r->state;
	cleanup_err struct isola_err *err = NULL;
	json_t *res = NULL;

	if (agent_chan_send_eof(u->ch, &err) < 0 ||
	    api_chan_expect_result(u->ch, api_req_fd(r), FS_CALL_TIMEOUT_MS, &res, &err) < 0)
		return api_respond_err(r, err);
	agent_chan_close(u->ch);
	u->ch = NULL;
	api_req_keepalive(r);
	/* The API answers with the written file's entry: the write's own RESULT (an older
	 * agent's {path,size} costs a stat call). */
	agent_write_entry(u->conn, u->req, FS_CALL_TIMEOUT_MS, &res);
	return api_respond_json(r, 200, res);
}

/* --- fs/ -------------------------------------------------------------------------------- */

enum MHD_Result api_fs_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *path, *dq = api_query(r, "depth");
	uint64_t depth = 1;
	json_t *res = NULL;

	if (query_path(r, "path", &path, &err) < 0)
		return api_respond_err(r, err);
	if (dq && (api_parse_u64(dq, 16, &depth) < 0 || depth < 1))
		return api_respond_error(r, "invalid", "query `depth` must be 1-16");
	if (fs_call(r,
		    json_pack("{s:s, s:s, s:I}", "op", "list", "path", path, "depth",
			      (json_int_t)depth),
		    &res, &err) < 0)
		return api_respond_err(r, err);
	if (!json_is_array(json_object_get(res, "entries"))) {
		json_decref(res);
		return api_respond_error(r, "internal", "agent sent a malformed listing");
	}
	{
		json_t *out =
			json_pack("{s:O, s:b}", "entries", json_object_get(res, "entries"),
				  "truncated", json_is_true(json_object_get(res, "truncated")));

		json_decref(res);
		return api_respond_json(r, 200, out);
	}
}

enum MHD_Result api_fs_stat(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *path;
	json_t *res = NULL;

	if (query_path(r, "path", &path, &err) < 0 ||
	    fs_call(r, json_pack("{s:s, s:s}", "op", "stat", "path", path), &res, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, res);
}

enum MHD_Result api_fs_mkdir(struct api_req *r)
{
	static const char *const fields[] = {"path", "parents", "mode", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *path = NULL, *ms = NULL;
	bool parents = false;
	uint32_t mode = 0755;
	json_t *res = NULL, *mv;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing field `path`");
	mv = json_object_get(r->json, "mode");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    body_path(r->json, "path", &path, &err) < 0 ||
	    api_json_bool(r->json, "parents", &parents, &err) < 0)
		return api_respond_err(r, err);
	/* mode: "0755" (octal string) or an integer (decimal value of the bits). */
	if (mv && json_is_integer(mv) && json_integer_value(mv) >= 0 &&
	    json_integer_value(mv) <= 07777)
		mode = (uint32_t)json_integer_value(mv);
	else if (mv &&
		 (api_json_str(r->json, "mode", 8, &ms, &err) < 0 || api_parse_mode(ms, &mode) < 0))
		return api_respond_error(r, "invalid", "field `mode` must be an octal string");
	if (fs_call(r,
		    json_pack("{s:s, s:s, s:i, s:b}", "op", "mkdir", "path", path, "mode",
			      (int)mode, "parents", parents),
		    &res, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, res);
}

enum MHD_Result api_fs_rename(struct api_req *r)
{
	static const char *const fields[] = {"from", "to", "overwrite", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *from = NULL, *to = NULL;
	bool overwrite = false;
	json_t *res = NULL;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing fields `from` and `to`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    body_path(r->json, "from", &from, &err) < 0 ||
	    body_path(r->json, "to", &to, &err) < 0 ||
	    api_json_bool(r->json, "overwrite", &overwrite, &err) < 0 ||
	    fs_call(r,
		    json_pack("{s:s, s:s, s:s, s:b}", "op", "rename", "from", from, "to", to,
			      "overwrite", overwrite),
		    &res, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, res);
}

enum MHD_Result api_fs_remove(struct api_req *r)
{
	static const char *const fields[] = {"path", "recursive", NULL};
	cleanup_err struct isola_err *err = NULL;
	const char *path = NULL;
	bool recursive = false;
	json_t *res = NULL;

	if (!r->json)
		return api_respond_error(r, "invalid", "missing field `path`");
	if (api_json_only(r->json, fields, &err) < 0 ||
	    body_path(r->json, "path", &path, &err) < 0 ||
	    api_json_bool(r->json, "recursive", &recursive, &err) < 0 ||
	    fs_call(r,
		    json_pack("{s:s, s:s, s:b}", "op", "remove", "path", path, "recursive",
			      recursive),
		    &res, &err) < 0)
		return api_respond_err(r, err);
	json_decref(res);
	return api_respond_empty(r, 204);
}
