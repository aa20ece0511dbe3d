/* SPDX-License-Identifier: Apache-2.0 */
/* archive: tar download (agent tar_get -> libarchive) and streamed tar upload (-> tar_put). */
#include "api-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/agenttar.h"
#include "../core/core.h"

#define TAR_CALL_TIMEOUT_MS 120000
#define TAR_MAX_ENTRIES	    1000000

static int64_t jint(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static int query_path(struct api_req *r, const char **out, struct isola_err **err)
{
	const char *v = NULL;
	size_t n = 0;

	if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, "path", 4, &v, &n) !=
	    MHD_YES)
		v = NULL;
	if (api_check_path("path", v, v ? n : 0, err) < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* --- GET /archive ------------------------------------------------------------------------ */

static bool name_ok(const char *n, size_t l)
{
	return api_tar_name_ok(n, l);
}

struct tar_out {
	struct api_server *srv; /* for the stopping flag */
	struct sandbox *s;	/* reference */
	struct agent_chan *ch;	/* owned */
	struct archive *a;	/* libarchive writer, owned */
	struct api_stream *st;	/* the stream being filled (set in produce) */
	struct agent_msg first; /* first frame, read before the headers went out */
	bool have_first;	/* `first` not yet consumed */
	bool finished;		/* trailer written */
	struct agent_tar w;	/* the stream's state (its writer is `a`) */
	char what[320];		/* "sandbox ID path P" (for the abort message) */
};

static la_ssize_t tar_out_write(struct archive *a, void *cls, const void *buf, size_t n)
{
	struct tar_out *t = cls;

	if (api_stream_write(t->st, buf, n) < 0) {
		archive_set_error(a, ENOMEM, "out of memory");
		return -1;
	}
	return (la_ssize_t)n;
}

static void tar_out_free(void *p)
{
	struct tar_out *t = p;

	if (t->a)
		archive_write_free(t->a);
	if (t->have_first)
		agent_msg_fini(&t->first);
	agent_chan_close(t->ch);
	sandbox_unref(t->s);
	free(t);
}

/* Breaks the download off (see api_stream_abort): the cause goes to the log and /metrics,
 * and the client sees a truncated body. */
#define tar_out_abort(t, code, fmt, ...)                                                           \
	api_stream_abort((t)->st, "archive", (code), "%s: " fmt, (t)->what, __VA_ARGS__)

/* Handles one frame from the agent (agent_tar_frame); -1 (after tar_out_abort) ends the
 * stream. */
static int tar_out_frame(struct tar_out *t, struct agent_msg *m)
{
	cleanup_err struct isola_err *err = NULL;

	if (agent_tar_frame(&t->w, m, &err) < 0)
		return tar_out_abort(t, err->code, "%s", err->message);
	t->finished = t->w.finished;
	return 0;
}

static int tar_out_produce(struct api_stream *st, void *ud)
{
	struct tar_out *t = ud;
	cleanup_err struct isola_err *err = NULL;
	struct agent_msg m = {0};
	int r;

	t->st = st;
	if (t->finished)
		return 1;
	if (t->have_first) {
		m = t->first;
		t->have_first = false;
	} else {
		r = agent_chan_recv(t->ch, &m, API_POLL_MS, &err);
		if (r == -ETIMEDOUT) {
			if (api_server_is_stopping(t->srv))
				return tar_out_abort(t, "unavailable", "%s", "isolad is stopping");
			/* The client left: nothing to report to it, and no fault of isolad's. */
			return api_stream_peer_gone(st) ? -1 : 0;
		}
		if (r < 0)
			return tar_out_abort(t, err->code, "%s", err->message);
	}
	r = tar_out_frame(t, &m);
	agent_msg_fini(&m);
	return r;
}

enum MHD_Result api_archive_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct MHD_Response *resp;
	struct agent_conn *conn;
	struct tar_out *t;
	const char *path;
	json_t *req;
	enum MHD_Result ret;
	int q;

	if (query_path(r, &path, &err) < 0)
		return api_respond_err(r, err);
	t = calloc(1, sizeof(*t));
	if (!t)
		return MHD_NO;
	t->srv = r->srv;
	if (api_sandbox_agent(r, &t->s, &conn, &err) < 0) {
		free(t);
		return api_respond_err(r, err);
	}
	snprintf(t->what, sizeof(t->what), "sandbox %s `%.256s`", sandbox_id(t->s), path);
	snprintf(t->w.entry, sizeof(t->w.entry), "(start)");
	req = json_pack("{s:s, s:s}", "op", "tar_get", "path", path);
	if (req)
		sandbox_apply_file_defaults(t->s, req);
	if (!req || agent_chan_open(conn, req, &t->ch, &err) < 0) {
		json_decref(req);
		goto fail;
	}
	json_decref(req);
	/* The first frame decides the status: an ERROR (no such path) is still a 4xx. */
	do {
		q = agent_chan_recv(t->ch, &t->first, API_POLL_MS, &err);
		if (q == -ETIMEDOUT) {
			isola_err_free(err);
			err = NULL;
			if (api_fd_peer_gone(api_req_fd(r)))
				goto abort;
		}
	} while (q == -ETIMEDOUT);
	if (q < 0)
		goto fail;
	t->have_first = true;
	if (t->first.type == PROTO_ERROR) {
		agent_error_to_err(t->first.json, &err);
		goto fail;
	}
	t->a = archive_write_new();
	if (!t->a || archive_write_set_format_pax_restricted(t->a) != ARCHIVE_OK ||
	    archive_write_open(t->a, t, NULL, tar_out_write, NULL) != ARCHIVE_OK) {
		isola_err_set(&err, ENOMEM, "internal", "cannot set up the tar writer");
		goto fail;
	}
	t->w.a = t->a;
	t->w.perm_mask = 0777; /* a download never carries setuid/setgid bits */
	t->w.name_ok = name_ok;
	resp = api_stream_response(r, API_FMT_RAW, MHD_SIZE_UNKNOWN, tar_out_produce, t,
				   tar_out_free);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
	return api_respond_response(r, 200, resp);

fail:
	ret = api_respond_err(r, err);
	tar_out_free(t);
	return ret;
abort:
	tar_out_free(t);
	return MHD_NO;
}

/* --- PUT /archive ------------------------------------------------------------------------ */

/*
 * The upload arrives on the connection thread (MHD pushes chunks); libarchive pulls. A
 * socketpair joins them: the connection thread writes each chunk into sp[0] (blocking while
 * the reader is behind, so memory stays bounded by the socket buffer), a reader thread runs
 * libarchive on sp[1] and sends ENTRY/STDIN frames to the agent. Only the reader thread
 * touches the agent channel until it is joined.
 */
struct tar_in {
	struct sandbox *s;     /* reference */
	struct agent_chan *ch; /* owned; used by the reader thread only while it runs */
	int sp[2];	       /* [0] written by the connection thread, [1] read by libarchive */
	pthread_t th;	       /* reader thread */
	bool started;	       /* th is running or not yet joined */
	uint64_t max_bytes;    /* cap on extracted bytes */
	struct isola_err *err; /* reader's failure, owned */
	json_t *result;	       /* agent RESULT {"entries","bytes"}, owned */
	char entry[256];       /* name of the entry in progress (for messages) */
	uint8_t buf[PROTO_MAX_PAYLOAD]; /* reader thread's data buffer */
};

static int tar_in_fail(struct tar_in *t, int errnum, const char *code, const char *msg)
{
	return isola_err_set(&t->err, errnum, code, "archive entry `%s`: %s", t->entry, msg);
}

/* Non-blocking check for an ERROR the agent sent while we were still sending. */
static int tar_in_agent_error(struct tar_in *t)
{
	struct isola_err *e = NULL;
	struct agent_msg m = {0};
	int r = agent_chan_recv(t->ch, &m, 0, &e);

	if (r == -ETIMEDOUT) {
		isola_err_free(e);
		return 0;
	}
	if (r < 0) {
		t->err = e;
		return r;
	}
	r = -EPROTO;
	if (m.type == PROTO_ERROR) {
		r = agent_error_to_err(m.json, &e);
		/* The agent refused what we sent: the client's archive is at fault (400), unless
		 * the sandbox ran out of space or the agent broke. */
		if (e && strcmp(e->code, "no_space") && strcmp(e->code, "internal") &&
		    strcmp(e->code, "not_found") && strcmp(e->code, "unavailable"))
			snprintf(e->code, sizeof(e->code), "invalid");
		isola_err_wrap(&e, "archive entry `%s`", t->entry);
		t->err = e;
	} else {
		isola_err_set(&t->err, EPROTO, "internal", "unexpected frame from the agent");
	}
	agent_msg_fini(&m);
	return r;
}

static int tar_in_filters(struct archive *a)
{
	/* Only decompressors built into libarchive: ARCHIVE_WARN means it would fork an
	 * external program from isolad, which we refuse. */
	if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
	    archive_read_support_filter_bzip2(a) != ARCHIVE_OK ||
	    archive_read_support_filter_xz(a) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(a) != ARCHIVE_OK)
		return -ENOTSUP;
	return 0;
}

/* Sends one entry's header and data. UNTRUSTED: everything read from the archive. */
static int tar_in_entry(struct tar_in *t, struct archive *a, struct archive_entry *e,
			uint64_t *total)
{
	const char *name = archive_entry_pathname(e), *type, *target = NULL;
	int64_t size = 0;
	json_t *j;
	int r;

	snprintf(t->entry, sizeof(t->entry), "%s", name ? name : "");
	if (!name || !api_tar_name_ok(name, strlen(name)))
		return tar_in_fail(t, EINVAL, "invalid", "unsafe name (absolute or ..)");
	if (archive_entry_hardlink(e)) {
		/* A link to an earlier member; the agent resolves it inside the destination. */
		type = "hardlink";
		target = archive_entry_hardlink(e);
		if (!api_tar_name_ok(target, strlen(target)))
			return tar_in_fail(t, EINVAL, "invalid", "unsafe hard link target");
		goto send;
	}
	switch (archive_entry_filetype(e)) {
	case AE_IFREG:
		type = "file";
		size = archive_entry_size(e);
		if (size < 0)
			return tar_in_fail(t, EINVAL, "invalid", "negative size");
		/* Sparse and bomb archives: the declared size counts before any data. */
		if ((uint64_t)size > t->max_bytes - *total)
			return tar_in_fail(t, EFBIG, "too_large",
					   "extracted size exceeds the upload cap");
		*total += (uint64_t)size;
		break;
	case AE_IFDIR:
		type = "dir";
		break;
	case AE_IFLNK:
		type = "symlink";
		target = archive_entry_symlink(e);
		if (!target || strlen(target) > API_MAX_PATH)
			return tar_in_fail(t, EINVAL, "invalid", "bad symlink target");
		break;
	default:
		return tar_in_fail(t, EINVAL, "invalid",
				   "devices, fifos and sockets are not supported");
	}
send:
	if (tar_in_agent_error(t) < 0)
		return -EINVAL;
	/* setuid/setgid/sticky bits are dropped. */
	j = json_pack("{s:s, s:s, s:I, s:i, s:I}", "name", name, "type", type, "size",
		      (json_int_t)size, "mode", (int)(archive_entry_perm(e) & 0777), "mtime",
		      (json_int_t)archive_entry_mtime(e));
	if (!j)
		return isola_err_set(&t->err, ENOMEM, "internal", "out of memory");
	if (target)
		json_object_set_new(j, "target", json_string(target));
	r = agent_chan_send_json(t->ch, PROTO_ENTRY, j, &t->err);
	json_decref(j);
	if (r < 0)
		return r;
	for (int64_t sent = 0; sent < size;) {
		la_ssize_t n = archive_read_data(a, t->buf, sizeof(t->buf));

		if (n < 0)
			return tar_in_fail(t, EINVAL, "invalid", archive_error_string(a));
		if (n == 0)
			return tar_in_fail(t, EINVAL, "invalid", "truncated data");
		if (tar_in_agent_error(t) < 0)
			return -EINVAL;
		r = agent_chan_send_data(t->ch, t->buf, (size_t)n, &t->err);
		if (r < 0)
			return r;
		sent += n;
	}
	return 0;
}

static void *tar_in_thread(void *p)
{
	struct tar_in *t = p;
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	uint64_t total = 0, count = 0;
	int r;

	if (!a || tar_in_filters(a) < 0) {
		isola_err_set(&t->err, ENOTSUP, "internal", "archive reader unavailable");
		goto out;
	}
	if (archive_read_open_fd(a, t->sp[1], 64 * 1024) != ARCHIVE_OK) {
		isola_err_set(&t->err, EINVAL, "invalid", "not a tar archive: %s",
			      archive_error_string(a));
		goto out;
	}
	for (;;) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			isola_err_set(&t->err, EINVAL, "invalid",
				      "malformed archive after `%s`: %s", t->entry,
				      archive_error_string(a));
			goto out;
		}
		if (++count > TAR_MAX_ENTRIES) {
			isola_err_set(&t->err, E2BIG, "too_large", "more than %u entries",
				      TAR_MAX_ENTRIES);
			goto out;
		}
		if (tar_in_entry(t, a, e, &total) < 0)
			goto out;
	}
	if (agent_chan_send_eof(t->ch, &t->err) < 0)
		goto out;
	if (api_chan_expect_result(t->ch, -1, TAR_CALL_TIMEOUT_MS, &t->result, &t->err) < 0 &&
	    t->err && strcmp(t->err->code, "no_space") && strcmp(t->err->code, "internal"))
		snprintf(t->err->code, sizeof(t->err->code), "invalid");
out:
	if (a)
		archive_read_free(a);
	/* Unblocks the connection thread if it is still writing. */
	shutdown(t->sp[1], SHUT_RDWR);
	return NULL;
}

static void tar_in_join(struct tar_in *t)
{
	if (!t->started)
		return;
	shutdown(t->sp[0], SHUT_WR);
	pthread_join(t->th, NULL);
	t->started = false;
}

static void tar_in_free(void *p)
{
	struct tar_in *t = p;

	if (!t)
		return;
	/* A client gone mid-upload: the reader sees a truncated archive and stops. */
	tar_in_join(t);
	if (t->sp[0] >= 0)
		close(t->sp[0]);
	if (t->sp[1] >= 0)
		close(t->sp[1]);
	agent_chan_close(t->ch);
	if (t->s)
		sandbox_unref(t->s);
	isola_err_free(t->err);
	json_decref(t->result);
	free(t);
}

int api_archive_put_begin(struct api_req *r)
{
	struct isola_err *err = NULL;
	struct agent_conn *conn;
	struct tar_in *t;
	const char *path;
	json_t *req;

	if (query_path(r, &path, &err) < 0)
		return api_req_fail(r, err);
	t = calloc(1, sizeof(*t));
	if (!t) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	t->sp[0] = t->sp[1] = -1;
	t->max_bytes = r->srv->max_upload;
	r->state = t;
	r->state_free = tar_in_free;
	if (api_sandbox_agent(r, &t->s, &conn, &err) < 0)
		return api_req_fail(r, err);
	req = json_pack("{s:s, s:s}", "op", "tar_put", "path", path);
	if (req)
		sandbox_apply_file_defaults(t->s, req);
	if (!req || agent_chan_open(conn, req, &t->ch, &err) < 0) {
		json_decref(req);
		if (!err)
			isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	json_decref(req);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t->sp) < 0) {
		isola_err_sys(&err, errno, NULL, "socketpair");
		return api_req_fail(r, err);
	}
	if (pthread_create(&t->th, NULL, tar_in_thread, t) != 0) {
		isola_err_set(&err, EAGAIN, "unavailable", "cannot start the archive reader");
		return api_req_fail(r, err);
	}
	t->started = true;
	return 0;
}

/* The reader stopped early: join it and make its error the response. */
static int tar_in_take_error(struct api_req *r, struct tar_in *t)
{
	struct isola_err *e;

	tar_in_join(t);
	e = t->err;
	t->err = NULL;
	if (!e)
		isola_err_set(&e, EINVAL, "invalid", "archive ended before the upload did");
	return api_req_fail(r, e);
}

int api_archive_put_data(struct api_req *r, const char *buf, size_t len)
{
	struct tar_in *t = r->state;

	while (len > 0) {
		ssize_t n = send(t->sp[0], buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return tar_in_take_error(r, t);
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

enum MHD_Result api_archive_put_end(struct api_req *r)
{
	struct tar_in *t = r->state;
	json_t *res;

	tar_in_join(t);
	api_req_keepalive(r);
	if (t->err)
		return api_respond_err(r, t->err);
	if (!t->result)
		return api_respond_error(r, "internal",
					 "archive extraction ended without a result");
	res = json_pack("{s:I, s:I}", "entries", (json_int_t)jint(t->result, "entries"), "bytes",
			(json_int_t)jint(t->result, "bytes"));
	return api_respond_json(r, 200, res);
}
