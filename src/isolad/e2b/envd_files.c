/* SPDX-License-Identifier: Apache-2.0 */
/* envd_files: envd's plain HTTP — GET /health, GET /files, POST /files (multipart, octet-stream). */
#include "e2b-internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define PP_BUFFER 16384 /* MHD post processor buffer (multipart headers, boundaries) */

/* envd's plain-HTTP error shape: {"code": status, "message"}. */
static enum MHD_Result files_error(struct api_req *r, const struct isola_err *e)
{
	const char *code = e ? e->code : "internal";
	unsigned status = api_status_for_code(code);

	/* no_space -> 507 (NotEnoughSpaceError), not_found -> 404 (FileNotFoundError) */
	return e2b_ctl_error(r, status, "%s", e && e->message ? e->message : "error");
}

/* The sandbox and agent of an envd request; 502 (the SDK's "sandbox is gone") if not. */
static int files_sandbox(struct api_req *r, struct sandbox **s, struct agent_conn **conn)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;

	if (e2b_envd_sandbox_get(r, s) < 0) {
		e2b_ctl_error(r, 502,
			      "sandbox `%s` not found: it was killed or its timeout "
			      "expired",
			      er->sandbox);
		return -1;
	}
	if (conn && sandbox_agent(*s, conn, &err) < 0) {
		sandbox_unref(*s);
		*s = NULL;
		e2b_ctl_error(r, 502, "%s", err && err->message ? err->message : "not running");
		return -1;
	}
	return 0;
}

/* ?path= (binary-safe) and ?username=. path may be optional. -1 after responding. */
static int files_query(struct api_req *r, bool need_path, const char **path, char *user, size_t un)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;
	const char *v = NULL, *uq = api_query(r, "username");
	size_t n = 0;

	if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, "path", 4, &v, &n) !=
	    MHD_YES)
		v = NULL;
	*path = NULL;
	if (v || need_path) {
		/* UNTRUSTED: a client path, checked before it reaches the agent. */
		if (api_check_path("path", v, v ? n : 0, &err) < 0) {
			e2b_ctl_error(r, 400, "%s", err->message);
			return -1;
		}
		*path = v;
	}
	snprintf(user, un, "%s", er->user);
	if (uq && *uq) {
		/* UNTRUSTED: the username query, same rules as a Basic user. */
		size_t l = strlen(uq);

		if (l >= un || l > 63 ||
		    strspn(uq, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
			       "WXYZ0123456789._-") != l) {
			e2b_ctl_error(r, 400, "invalid username");
			return -1;
		}
		snprintf(user, un, "%s", uq);
	}
	return 0;
}

/* --- GET /health -------------------------------------------------------------------------------- */

enum MHD_Result e2b_health(struct api_req *r)
{
	struct sandbox *s;
	json_t *sj;
	const char *state;
	bool up;

	if (files_sandbox(r, &s, NULL) < 0)
		return MHD_YES;
	sj = sandbox_to_json(s);
	state = json_string_value(json_object_get(sj, "state"));
	up = state && !strcmp(state, "running");
	json_decref(sj);
	sandbox_unref(s);
	if (!up)
		return e2b_ctl_error(r, 502, "sandbox is not running");
	return api_respond_empty(r, 204);
}

/* --- GET /files ----------------------------------------------------------------------------------- */

/* A download, gzip-encoded on the way out when the client accepts it (envd does the same). */
struct gz_download {
	struct api_download d; /* first: api_download_free() frees the whole */
	struct e2b_gz gz;      /* encoder, ready when the response is gzip */
	struct api_stream *st; /* the response being produced (for gz_out) */
};

static int gz_out(void *ud, const void *buf, size_t len)
{
	struct gz_download *g = ud;

	return api_stream_write(g->st, buf, len);
}

static int gz_filter(struct api_download *d, struct api_stream *st, const void *buf, size_t n,
		     bool last)
{
	struct gz_download *g = (struct gz_download *)d;

	g->st = st;
	return e2b_gzip_feed(&g->gz, buf, n, last, gz_out, g);
}

static void gz_download_free(void *p)
{
	struct gz_download *g = p;

	e2b_gz_fini(&g->gz);
	api_download_free(&g->d);
}

enum MHD_Result e2b_files_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct gz_download *g;
	struct api_download *d;
	struct MHD_Response *resp;
	const char *path;
	char user[64];
	json_t *req, *res = NULL;
	json_int_t size;
	enum MHD_Result ret;
	bool gzip = e2b_accepts_gzip(api_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING));

	if (files_query(r, true, &path, user, sizeof(user)) < 0)
		return MHD_YES;
	g = calloc(1, sizeof(*g));
	if (!g)
		return MHD_NO;
	d = &g->d;
	d->srv = r->srv;
	if (gzip && e2b_gzip_init(&g->gz) < 0) {
		free(g);
		return MHD_NO;
	}
	if (gzip)
		d->filter = gz_filter;
	if (files_sandbox(r, &d->s, &conn) < 0) {
		gz_download_free(g);
		return MHD_YES;
	}
	req = json_pack("{s:s, s:s, s:I, s:I}", "op", "read", "path", path, "offset", (json_int_t)0,
			"length", (json_int_t)-1);
	if (req && user[0])
		json_object_set_new(req, "user", json_string(user));
	if (!req || agent_chan_open(conn, req, &d->ch, &err) < 0 ||
	    api_chan_expect_result(d->ch, api_req_fd(r), E2B_CALL_MS, &res, &err) < 0) {
		json_decref(req);
		ret = err ? files_error(r, err) : MHD_NO;
		gz_download_free(g);
		return ret;
	}
	json_decref(req);
	size = json_integer_value(json_object_get(res, "size"));
	json_decref(res);
	d->remaining = size > 0 ? (uint64_t)size : 0;
	/* gzip: the encoded length is not known up front, so the response is chunked. */
	resp = api_stream_response(r, API_FMT_RAW, gzip ? MHD_SIZE_UNKNOWN : d->remaining,
				   api_download_produce, g, gz_download_free);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	if (gzip)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	return api_respond_response(r, 200, resp);
}

/* --- POST /files ------------------------------------------------------------------------------------ */

struct upload {
	struct api_req *r;		  /* the request (for its fd) */
	struct sandbox *s;		  /* reference */
	struct agent_conn *conn;	  /* borrowed while s is held */
	char user[64];			  /* identity for the writes */
	json_t *metadata;		  /* X-Metadata-* headers as {key: value}, or NULL */
	char *qpath;			  /* ?path=, owned, or NULL */
	struct MHD_PostProcessor *pp;	  /* multipart parser, or NULL (octet-stream) */
	struct agent_chan *ch;		  /* write channel of the current file */
	char cur[API_MAX_PATH + 1];	  /* path of the current file */
	unsigned files;			  /* files begun */
	char part_name[API_MAX_PATH + 1]; /* filename of the current multipart part */
	uint64_t part_len;		  /* bytes received for the current part */
	json_t *results;		  /* [{path, name, type}] */
	struct e2b_gz gz;		  /* Content-Encoding: gzip decoder, when ready */
	struct isola_err *err;		  /* first failure, owned */
	bool responded;			  /* begin() already answered (auth-like failures) */
};

static void upload_free(void *p)
{
	struct upload *u = p;

	if (!u)
		return;
	if (u->pp)
		MHD_destroy_post_processor(u->pp);
	e2b_gz_fini(&u->gz);
	/* Closing a write channel before EOF abandons it: the agent removes its temp file. */
	agent_chan_close(u->ch);
	if (u->s)
		sandbox_unref(u->s);
	free(u->qpath);
	json_decref(u->results);
	json_decref(u->metadata);
	isola_err_free(u->err);
	free(u);
}

static int upload_fail(struct upload *u, struct isola_err *e)
{
	int ret = e ? -e->errnum : -EIO;

	if (u->err)
		isola_err_free(e);
	else
		u->err = e;
	return ret;
}

/* Opens the write channel for one file (parents created first, as envd does: by the write op
 * itself when the agent can, else by a mkdir call before it). */
static int file_open(struct upload *u, const char *path)
{
	struct isola_err *err = NULL;
	char dir[API_MAX_PATH + 1];
	char *slash;
	json_t *req;
	bool parents = agent_conn_has(u->conn, PROTO_FEATURE_WRITE_PARENTS);

	if (api_check_path("filename", path, strlen(path), &err) < 0)
		return upload_fail(u, err);
	snprintf(u->cur, sizeof(u->cur), "%s", path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!parents && slash && slash != dir) {
		*slash = '\0';
		req = json_pack("{s:s, s:s, s:b, s:i}", "op", "mkdir", "path", dir, "parents", 1,
				"mode", 0755);
		if (req && u->user[0])
			json_object_set_new(req, "user", json_string(u->user));
		if (req)
			e2b_agent_call(u->conn, req, NULL, NULL); /* the write reports */
		json_decref(req);
	}
	req = json_pack("{s:s, s:s, s:i, s:b}", "op", "write", "path", path, "mode", 0644, "append",
			0);
	if (req && parents)
		json_object_set_new(req, "parents", json_true());
	if (req && u->user[0])
		json_object_set_new(req, "user", json_string(u->user));
	if (req && u->metadata)
		json_object_set(req, "metadata", u->metadata);
	if (!req) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return upload_fail(u, err);
	}
	if (agent_chan_open(u->conn, req, &u->ch, &err) < 0) {
		json_decref(req);
		return upload_fail(u, err);
	}
	json_decref(req);
	u->files++;
	return 0;
}

static int file_write(struct upload *u, const void *buf, size_t len)
{
	struct isola_err *err = NULL;

	if (api_upload_check(u->ch, &err) < 0)
		return upload_fail(u, err);
	if (len && agent_chan_send_data(u->ch, buf, len, &err) < 0) {
		/* The channel ended while we sent: the agent's reason (ENOSPC: 507) is queued
		 * on it, and says more than "ended". */
		struct isola_err *why = NULL;

		if (api_upload_check(u->ch, &why) < 0) {
			isola_err_free(err);
			err = why;
		}
		return upload_fail(u, err);
	}
	return 0;
}

/* Ends the current file: EOF, the agent's RESULT, one result entry. */
static int file_close(struct upload *u)
{
	struct isola_err *err = NULL;
	json_t *res = NULL;
	const char *path, *base;

	if (!u->ch)
		return 0;
	if (agent_chan_send_eof(u->ch, &err) < 0 ||
	    api_chan_expect_result(u->ch, api_req_fd(u->r), E2B_CALL_MS, &res, &err) < 0) {
		agent_chan_close(u->ch);
		u->ch = NULL;
		return upload_fail(u, err);
	}
	agent_chan_close(u->ch);
	u->ch = NULL;
	/* UNTRUSTED: the agent's path is only echoed back as a string. */
	path = json_string_value(json_object_get(res, "path"));
	if (!path)
		path = u->cur;
	base = strrchr(path, '/');
	json_array_append_new(u->results, json_pack("{s:s, s:s, s:s}", "path", path, "name",
						    base ? base + 1 : path, "type", "file"));
	json_decref(res);
	return 0;
}

/* MHD multipart iterator: each part named `file` is one file. */
static enum MHD_Result part_cb(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *filename, const char *content_type,
			       const char *transfer_encoding, const char *data, uint64_t off,
			       size_t size)
{
	struct upload *u = cls;

	if (u->err)
		return MHD_NO;
	if (!key || strcmp(key, "file") != 0)
		return MHD_YES; /* other form fields are ignored, as envd does */
	/* MHD may call with off 0 more than once for one part (first without data); a part
	 * starts when off is 0 and the current one already had data or another name. */
	if (off == 0 &&
	    (!u->ch || u->part_len > 0 || strcmp(filename ? filename : "", u->part_name) != 0)) {
		/* A new part. With ?path= the (single) file goes there; without, the part's
		 * filename is the full path (E2B's multi-file upload). */
		const char *path = u->qpath && u->files == 0 ? u->qpath : filename;

		if (file_close(u) < 0)
			return MHD_NO;
		if (!path || !*path) {
			struct isola_err *err = NULL;

			isola_err_set(&err, EINVAL, "invalid",
				      "multipart part without a filename and no ?path=");
			upload_fail(u, err);
			return MHD_NO;
		}
		if (file_open(u, path) < 0)
			return MHD_NO;
		snprintf(u->part_name, sizeof(u->part_name), "%s", filename ? filename : "");
		u->part_len = 0;
	}
	u->part_len += size;
	if (!u->ch)
		return MHD_NO;
	return file_write(u, data, size) < 0 ? MHD_NO : MHD_YES;
}

/* Header iterator state for upload_metadata. */
struct meta_scan {
	json_t *meta;		/* collected {key: value} */
	struct isola_err **err; /* the first bad header */
};

static enum MHD_Result meta_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	static const char prefix[] = "X-Metadata-";
	static const char token[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789!#$%&'*+-.^_`|~";
	struct meta_scan *m = cls;
	char k[E2B_META_KEY_MAX + 1];
	size_t kl, vl;

	(void)kind;
	if (!key || strncasecmp(key, prefix, sizeof(prefix) - 1))
		return MHD_YES;
	/* UNTRUSTED: client headers. Keys are HTTP tokens (what the SDK allows), stored
	 * lower-case (header names are case-insensitive, fetch sends them lower-case);
	 * values printable ASCII; both bounded, and so is their number. */
	key += sizeof(prefix) - 1;
	kl = strlen(key);
	vl = value ? strlen(value) : 0;
	if (kl == 0 || kl > E2B_META_KEY_MAX || strspn(key, token) != kl) {
		isola_err_set(m->err, EINVAL, "invalid",
			      "metadata header `X-Metadata-%.64s`: the key must be 1-%d token "
			      "characters",
			      key, E2B_META_KEY_MAX);
		return MHD_NO;
	}
	for (size_t i = 0; i < vl; i++)
		if (value[i] < 0x20 || value[i] > 0x7e) {
			isola_err_set(m->err, EINVAL, "invalid",
				      "metadata `%s`: the value must be printable ASCII", key);
			return MHD_NO;
		}
	if (vl > E2B_META_VALUE_MAX || json_object_size(m->meta) >= E2B_META_MAX) {
		isola_err_set(m->err, EINVAL, "invalid",
			      "metadata `%s`: at most %d entries of %d bytes", key, E2B_META_MAX,
			      E2B_META_VALUE_MAX);
		return MHD_NO;
	}
	for (size_t i = 0; i <= kl; i++)
		k[i] = (char)tolower((unsigned char)key[i]);
	json_object_set_new(m->meta, k, json_string(value ? value : ""));
	return MHD_YES;
}

/* Collects the upload's X-Metadata-<key> headers (E2B's file metadata) into *out (NULL
 * when there are none). 0, or -EINVAL with *err naming the bad header. */
static int upload_metadata(struct api_req *r, json_t **out, struct isola_err **err)
{
	struct meta_scan m = {.meta = json_object(), .err = err};

	*out = NULL;
	if (!m.meta)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, meta_header, &m);
	if (*err) {
		json_decref(m.meta);
		return -EINVAL;
	}
	if (json_object_size(m.meta))
		*out = m.meta;
	else
		json_decref(m.meta);
	return 0;
}

static bool header_is(struct api_req *r, const char *hdr, const char *want)
{
	const char *v = api_header(r, hdr);
	size_t n = strlen(want);

	return v && !strncasecmp(v, want, n) && (v[n] == '\0' || v[n] == ';' || v[n] == ' ');
}

int e2b_files_post_begin(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	struct isola_err *err = NULL;
	const char *path, *enc = api_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
	struct upload *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	er->op = u;
	er->op_free = upload_free;
	u->r = r;
	u->results = json_array();
	/* Query problems are answered at the end, in the envd error shape. */
	if (files_query(r, false, &path, u->user, sizeof(u->user)) < 0) {
		u->responded = true;
		return -EINVAL;
	}
	if (upload_metadata(r, &u->metadata, &err) < 0)
		return upload_fail(u, err);
	if (path && !(u->qpath = strdup(path)))
		return upload_fail(u,
				   (isola_err_set(&err, ENOMEM, "internal", "out of memory"), err));
	if (enc && (!strcasecmp(enc, "gzip") || !strcasecmp(enc, "x-gzip"))) {
		/* Decoded as it arrives (gzip.c): bounded memory; the sandbox's disk bounds
		 * what a gzip bomb can write (the agent's ENOSPC answers 507). */
		if (e2b_gunzip_init(&u->gz) < 0)
			return upload_fail(
				u, (isola_err_set(&err, ENOMEM, "internal", "out of memory"), err));
	} else if (enc && strcasecmp(enc, "identity") != 0) {
		isola_err_set(&err, EOPNOTSUPP, "not_supported",
			      "Content-Encoding `%.32s` is not supported for uploads; send the "
			      "file uncompressed or gzip-encoded",
			      enc);
		return upload_fail(u, err);
	}
	if (files_sandbox(r, &u->s, &u->conn) < 0) {
		u->responded = true;
		return -ENOENT;
	}
	if (header_is(r, MHD_HTTP_HEADER_CONTENT_TYPE, "multipart/form-data")) {
		u->pp = MHD_create_post_processor(r->conn, PP_BUFFER, part_cb, u);
		if (!u->pp) {
			isola_err_set(&err, EINVAL, "invalid", "malformed multipart/form-data");
			return upload_fail(u, err);
		}
		return 0;
	}
	if (!u->qpath) {
		isola_err_set(&err, EINVAL, "invalid", "an octet-stream upload needs ?path=");
		return upload_fail(u, err);
	}
	return file_open(u, u->qpath);
}

/* The upload's plain (decoded) bytes: into the multipart parser or the file. */
static int upload_plain(void *ud, const void *buf, size_t len)
{
	struct upload *u = ud;
	struct isola_err *err = NULL;

	if (u->err)
		return -ECANCELED;
	if (u->pp) {
		if (MHD_post_process(u->pp, buf, len) != MHD_YES && !u->err) {
			isola_err_set(&err, EINVAL, "invalid", "malformed multipart/form-data");
			upload_fail(u, err);
		}
		return u->err ? -ECANCELED : 0;
	}
	return file_write(u, buf, len);
}

int e2b_files_post_data(struct api_req *r, const char *buf, size_t len)
{
	struct upload *u = e2b_req_of(r)->op;
	struct isola_err *err = NULL;
	const char *why = NULL;

	/* UNTRUSTED: upload bytes; sizes are capped by the server (max upload). */
	if (!u || u->responded || u->err)
		return 0;
	if (u->gz.ready) {
		/* UNTRUSTED: gzip; the decoder checks it, the failure is answered at the end
		 * (after the body) and the file being written is abandoned. */
		if (e2b_gunzip_feed(&u->gz, buf, len, upload_plain, u, &why) == -EINVAL &&
		    !u->err) {
			isola_err_set(&err, EINVAL, "invalid",
				      "Content-Encoding gzip: the body is not valid gzip (%s)",
				      why ? why : "corrupt data");
			upload_fail(u, err);
		}
		return 0;
	}
	if (u->pp) {
		if (MHD_post_process(u->pp, buf, len) != MHD_YES && !u->err) {
			isola_err_set(&err, EINVAL, "invalid", "malformed multipart/form-data");
			upload_fail(u, err);
		}
		return 0;
	}
	return file_write(u, buf, len);
}

enum MHD_Result e2b_files_post_end(struct api_req *r)
{
	struct upload *u = e2b_req_of(r)->op;
	struct isola_err *err = NULL;
	json_t *out;

	if (r->responded)
		return MHD_YES;
	if (!u)
		return MHD_NO;
	if (!u->err && u->gz.ready) {
		const char *why = NULL;

		if (e2b_gunzip_finish(&u->gz, &why) < 0) {
			isola_err_set(&err, EINVAL, "invalid",
				      "Content-Encoding gzip: the body is not valid gzip (%s)",
				      why ? why : "corrupt data");
			upload_fail(u, err);
		}
	}
	if (!u->err && u->pp) {
		/* Destroying the processor flushes the last part to the iterator. */
		if (MHD_destroy_post_processor(u->pp) != MHD_YES && !u->err) {
			isola_err_set(&err, EINVAL, "invalid", "truncated multipart/form-data");
			upload_fail(u, err);
		}
		u->pp = NULL;
	}
	if (!u->err)
		file_close(u);
	if (!u->err && json_array_size(u->results) == 0) {
		isola_err_set(&err, EINVAL, "invalid", "no file in the upload");
		upload_fail(u, err);
	}
	if (u->err)
		return files_error(r, u->err);
	api_req_keepalive(r);
	out = json_incref(u->results);
	return api_respond_json(r, 200, out);
}
