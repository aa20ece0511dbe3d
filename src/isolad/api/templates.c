/* SPDX-License-Identifier: Apache-2.0 */
/* templates: list, import (tar spooled to disk, progress streamed as NDJSON) and remove. */
#include "api-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../core/core.h"

enum MHD_Result api_template_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list = NULL;

	if (core_template_list_for(r->srv->core, api_tenant(r), &list, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, json_pack("{s:o}", "templates", list));
}

enum MHD_Result api_template_delete(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;

	if (core_template_remove_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "name"),
				     &err) < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}

/*
 * An import. The upload is spooled to a file under the spool dir (the cap is enforced by
 * the server as bytes arrive); then a worker thread runs core_template_import() and the
 * response streams its progress. The worker and the response each hold a reference; the
 * last one out removes the spool file and frees.
 */
struct import {
	struct api_server *srv; /* server (worker registered with it) */
	char name[64];		/* template name */
	char tenant[64];	/* importing tenant (becomes the owner) */
	char path[600];		/* spool file */
	int fd;			/* spool file, written by the connection thread */
	pthread_mutex_t lock;	/* protects what follows */
	pthread_cond_t cond;	/* signalled on a new event */
	unsigned refs;		/* worker + response */
	json_t *progress;	/* latest unsent progress event (coalesced), owned */
	json_t *final;		/* done/error event once the import ended, owned */
	bool final_sent;	/* the response has emitted `final` */
};

static void import_unref(struct import *im)
{
	bool last;

	pthread_mutex_lock(&im->lock);
	last = --im->refs == 0;
	pthread_mutex_unlock(&im->lock);
	if (!last)
		return;
	if (im->fd >= 0)
		close(im->fd);
	if (im->path[0])
		unlink(im->path);
	json_decref(im->progress);
	json_decref(im->final);
	pthread_cond_destroy(&im->cond);
	pthread_mutex_destroy(&im->lock);
	free(im);
}

static void import_state_free(void *p)
{
	if (p)
		import_unref(p);
}

int api_template_import_begin(struct api_req *r)
{
	struct isola_err *err = NULL;
	const char *name = api_query(r, "name");
	struct import *im;
	int q;

	if (!name || !api_valid_template_name(name)) {
		isola_err_set(&err, EINVAL, "invalid",
			      "query `name` must be 1-63 of [A-Za-z0-9._-], not starting with '.' "
			      "or '-'");
		return api_req_fail(r, err);
	}
	im = calloc(1, sizeof(*im));
	if (!im) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	im->srv = r->srv;
	im->fd = -1;
	im->refs = 1;
	pthread_mutex_init(&im->lock, NULL);
	pthread_cond_init(&im->cond, NULL);
	snprintf(im->name, sizeof(im->name), "%s", name);
	snprintf(im->tenant, sizeof(im->tenant), "%s", api_tenant(r));
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", name);
	r->state = im;
	r->state_free = import_state_free;
	q = util_mkdir_p(r->srv->spool_dir, 0700);
	if (q < 0) {
		isola_err_sys(&err, -q, NULL, "create spool directory `%s`", r->srv->spool_dir);
		return api_req_fail(r, err);
	}
	snprintf(im->path, sizeof(im->path), "%s/template-XXXXXX", r->srv->spool_dir);
	im->fd = mkostemp(im->path, O_CLOEXEC);
	if (im->fd < 0) {
		isola_err_sys(&err, errno, NULL, "create spool file in `%s`", r->srv->spool_dir);
		im->path[0] = '\0';
		return api_req_fail(r, err);
	}
	return 0;
}

int api_template_import_data(struct api_req *r, const char *buf, size_t len)
{
	struct import *im = r->state;
	struct isola_err *err = NULL;
	int q = util_write_all(im->fd, buf, len);

	if (q < 0) {
		isola_err_sys(&err, -q, q == -ENOSPC ? "no_space" : NULL, "spool template upload");
		return api_req_fail(r, err);
	}
	return 0;
}

static void import_progress(void *ud, const char *phase, uint64_t done, uint64_t total)
{
	struct import *im = ud;
	json_t *ev =
		json_pack("{s:s, s:s, s:I, s:I}", "type", "progress", "phase", phase ? phase : "",
			  "done", (json_int_t)done, "total", (json_int_t)total);

	pthread_mutex_lock(&im->lock);
	json_decref(im->progress);
	im->progress = ev; /* coalesced: a slow client sees the latest only */
	pthread_cond_broadcast(&im->cond);
	pthread_mutex_unlock(&im->lock);
}

static void *import_thread(void *p)
{
	struct import *im = p;
	struct api_server *srv = im->srv;
	cleanup_err struct isola_err *err = NULL;
	json_t *tmpl = NULL, *ev;

	if (core_template_import_for(srv->core, im->tenant, im->name, im->path, import_progress, im,
				     &tmpl, &err) < 0)
		ev = json_pack("{s:s, s:s, s:s}", "type", "error", "code",
			       err ? err->code : "internal", "message",
			       err && err->message ? err->message : "import failed");
	else
		ev = json_pack("{s:s, s:o}", "type", "done", "template",
			       tmpl ? tmpl : json_object());
	pthread_mutex_lock(&im->lock);
	im->final = ev ? ev : json_pack("{s:s}", "type", "error");
	pthread_cond_broadcast(&im->cond);
	pthread_mutex_unlock(&im->lock);
	import_unref(im);
	api_server_worker_leave(srv);
	return NULL;
}

static int import_produce(struct api_stream *st, void *ud)
{
	struct import *im = ud;
	json_t *ev = NULL;
	bool end = false;

	pthread_mutex_lock(&im->lock);
	for (;;) {
		if (im->progress) {
			ev = im->progress;
			im->progress = NULL;
			break;
		}
		if (im->final && !im->final_sent) {
			ev = json_incref(im->final);
			im->final_sent = true;
			break;
		}
		if (im->final_sent) {
			end = true;
			break;
		}
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&im->cond, &im->lock, &ts);
		}
		if (!im->progress && !im->final && api_stream_peer_gone(st))
			break;
	}
	pthread_mutex_unlock(&im->lock);
	if (end)
		return 1;
	if (!ev)
		return -1; /* client gone; the worker finishes and frees */
	return api_stream_event(st, ev) < 0 ? -1 : 0;
}

enum MHD_Result api_template_import_end(struct api_req *r)
{
	struct import *im = r->state;
	struct MHD_Response *resp;
	pthread_t th;
	struct stat sb;

	if (fstat(im->fd, &sb) < 0 || sb.st_size == 0)
		return api_respond_error(r, "invalid",
					 "empty upload: send the template as a tar body");
	close(im->fd);
	im->fd = -1;
	if (!api_server_worker_enter(r->srv))
		return api_respond_error(r, "unavailable", "server is shutting down");
	im->refs = 3; /* request state (dropped at completion), worker, response */
	if (pthread_create(&th, NULL, import_thread, im) != 0) {
		im->refs = 1;
		api_server_worker_leave(r->srv);
		return api_respond_error(r, "unavailable", "cannot start the import");
	}
	pthread_detach(th);
	resp = api_stream_response(r, API_FMT_NDJSON, MHD_SIZE_UNKNOWN, import_produce, im,
				   import_state_free);
	if (!resp)
		return MHD_NO;
	return api_respond_response(r, 200, resp);
}
