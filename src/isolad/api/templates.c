/* SPDX-License-Identifier: Apache-2.0 */
/* templates: list, inspect, import (tar spooled to disk) and pull (from a registry), with
 * progress streamed as NDJSON, and remove. */
#include "api-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../common/imageref.h"
#include "../core/core.h"
#include "../images/images.h"

enum MHD_Result api_template_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list = NULL;

	if (core_template_list_for(r->srv->core, api_tenant(r), &list, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, json_pack("{s:o}", "templates", list));
}

/* GET /v1/templates/build/cache: the build cache entries the caller may see (the operator:
 * all; another principal: its tenant's). */
enum MHD_Result api_template_cache_list(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *list = NULL;

	if (core_build_cache_list_for(r->srv->core, api_is_operator(r) ? NULL : api_tenant(r),
				      &list, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, json_pack("{s:o}", "entries", list));
}

/* POST /v1/templates/build/cache/prune {all: bool} or {older_than: seconds}: removes the
 * caller's entries (the operator: everyone's), all or those unused for older_than. */
enum MHD_Result api_template_cache_prune(struct api_req *r)
{
	static const char *const fields[] = {"all", "older_than", NULL};
	cleanup_err struct isola_err *err = NULL;
	json_t *out = NULL;
	bool all = false;
	double older = -1;

	/* UNTRUSTED: the body, checked field by field. */
	if (r->json && (api_json_only(r->json, fields, &err) < 0 ||
			api_json_bool(r->json, "all", &all, &err) < 0 ||
			api_json_num(r->json, "older_than", 0, 1e10, &older, &err) < 0))
		return api_respond_err(r, err);
	if (all == (older >= 0))
		return api_respond_error(r, "invalid",
					 "prune the build cache: give one of `all` (true) or "
					 "`older_than` (seconds)");
	if (core_build_cache_prune_for(r->srv->core, api_is_operator(r) ? NULL : api_tenant(r), all,
				       older < 0 ? 0 : older, &out, &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, out);
}

enum MHD_Result api_template_delete(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;

	if (core_template_remove_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "name"),
				     &err) < 0)
		return api_respond_err(r, err);
	return api_respond_empty(r, 204);
}

enum MHD_Result api_template_get(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *t = NULL;

	if (core_template_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "name"), &t,
				  &err) < 0)
		return api_respond_err(r, err);
	return api_respond_json(r, 200, t);
}

/*
 * An import or a pull. An import's upload is spooled to a file under the spool dir (the cap is enforced by
 * the server as bytes arrive); then a worker thread runs core_template_import() and the
 * response streams its progress. The worker and the response each hold a reference; the
 * last one out removes the spool file and frees.
 */
struct import {
	struct api_server *srv;	      /* server (worker registered with it) */
	char name[64];		      /* template name */
	char tenant[64];	      /* importing tenant (becomes the owner) */
	char path[600];		      /* spool file (import) */
	int fd;			      /* spool file, written by the connection thread */
	json_t *req;		      /* pull: the request body (owned; opts point into it) */
	bool build;		      /* a build: path is the context, bopts what to build */
	struct core_build_opts bopts; /* build: options (strings point into breq) */
	json_t *breq;		      /* build: {dockerfile, build_args, allow, tier} (owned) */
	json_t *queue;		      /* build: events in order, none coalesced (owned) */
	struct images_pull_opts opts; /* pull: what to pull */
	pthread_mutex_t lock;	      /* protects what follows */
	pthread_cond_t cond;	      /* signalled on a new event */
	unsigned refs;		      /* worker + response */
	json_t *progress;	      /* {phase: latest unsent progress event} (coalesced per phase:
				 * a pull's layers each keep theirs), owned */
	json_t *final;		      /* done/error event once the import ended, owned */
	bool final_sent;	      /* the response has emitted `final` */
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
	if (im->req)
		json_decref(im->req);
	json_decref(im->breq);
	json_decref(im->queue);
	pthread_cond_destroy(&im->cond);
	pthread_mutex_destroy(&im->lock);
	free(im);
}

static void import_state_free(void *p)
{
	if (p)
		import_unref(p);
}

/* A new import/pull of template `name`, made the request's state. NULL on ENOMEM. */
static struct import *import_new(struct api_req *r, const char *name)
{
	struct import *im = calloc(1, sizeof(*im));

	if (!im)
		return NULL;
	im->progress = json_object();
	if (!im->progress) {
		free(im);
		return NULL;
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
	return im;
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
	im = import_new(r, name);
	if (!im) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
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
	/* coalesced per phase: a slow client sees the latest of each */
	if (ev)
		json_object_set_new(im->progress, phase ? phase : "", ev);
	pthread_cond_broadcast(&im->cond);
	pthread_mutex_unlock(&im->lock);
}

#define BUILD_QUEUE_MAX 20000 /* queued build events; output lines past it are dropped */

static void build_event(void *ud, json_t *ev)
{
	struct import *im = ud;

	pthread_mutex_lock(&im->lock);
	/* A client that does not read: drop output lines, never step events. */
	if (json_array_size(im->queue) < BUILD_QUEUE_MAX ||
	    strcmp(json_string_value(json_object_get(ev, "type")), "output"))
		json_array_append(im->queue, ev);
	pthread_cond_broadcast(&im->cond);
	pthread_mutex_unlock(&im->lock);
	json_decref(ev);
}

static void *import_thread(void *p)
{
	struct import *im = p;
	struct api_server *srv = im->srv;
	cleanup_err struct isola_err *err = NULL;
	json_t *tmpl = NULL, *ev;

	if ((im->build ? core_template_build_for(srv->core, im->tenant, im->name, &im->bopts,
						 build_event, im, &tmpl, &err)
	     : im->req ? core_template_pull_for(srv->core, im->tenant, im->name, &im->opts,
						import_progress, im, &tmpl, &err)
		       : core_template_import_for(srv->core, im->tenant, im->name, im->path,
						  import_progress, im, &tmpl, &err)) < 0)
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
		if (json_array_size(im->queue)) {
			ev = json_incref(json_array_get(im->queue, 0));
			json_array_remove(im->queue, 0);
			break;
		}
		if (json_object_size(im->progress)) {
			void *it = json_object_iter(im->progress);

			ev = json_incref(json_object_iter_value(it));
			json_object_del(im->progress, json_object_iter_key(it));
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
		if (!json_object_size(im->progress) && !im->final && api_stream_peer_gone(st))
			break;
	}
	pthread_mutex_unlock(&im->lock);
	if (end)
		return 1;
	if (!ev)
		return -1; /* client gone; the worker finishes and frees */
	return api_stream_event(st, ev) < 0 ? -1 : 0;
}

static enum MHD_Result import_start(struct api_req *r, struct import *im);

enum MHD_Result api_template_import_end(struct api_req *r)
{
	struct import *im = r->state;
	struct stat sb;

	if (fstat(im->fd, &sb) < 0 || sb.st_size == 0)
		return api_respond_error(r, "invalid",
					 "empty upload: send the template as a tar body");
	close(im->fd);
	im->fd = -1;
	return import_start(r, im);
}

int api_template_build_begin(struct api_req *r)
{
	struct isola_err *err = NULL;
	const char *opts = api_query(r, "options"), *k;
	struct import *im;
	json_t *o = NULL, *v;
	int q = api_template_import_begin(r); /* the name check and the spool file */

	if (q < 0 || !r->state)
		return q;
	im = r->state;
	im->build = true;
	im->queue = json_array();
	if (!im->queue) {
		isola_err_set(&err, ENOMEM, "internal", "out of memory");
		return api_req_fail(r, err);
	}
	double cpu = 0;
	uint64_t memory = 0;

	/* UNTRUSTED: the client's options, checked field by field (rules by the net code). */
	if (opts) {
		o = json_loads(opts, JSON_REJECT_DUPLICATES, NULL);
		im->breq = o;
		if (!json_is_object(o) ||
		    ((v = json_object_get(o, "dockerfile")) && !json_is_string(v)) ||
		    ((v = json_object_get(o, "build_args")) && !json_is_object(v)) ||
		    ((v = json_object_get(o, "allow")) && !json_is_array(v)) ||
		    ((v = json_object_get(o, "tier")) && !json_is_string(v))) {
			isola_err_set(&err, EINVAL, "invalid",
				      "query `options` must be a JSON object {dockerfile: string, "
				      "build_args: {K: string}, allow: [rule], tier: string, cpu: "
				      "number, "
				      "memory: size}");
			return api_req_fail(r, err);
		}
		v = json_object_get(o, "tier");
		if (v && strcmp(json_string_value(v), "process") &&
		    strcmp(json_string_value(v), "microvm")) {
			isola_err_set(&err, EINVAL, "invalid",
				      "options.tier `%.32s` is unknown (known: process, microvm)",
				      json_string_value(v));
			return api_req_fail(r, err);
		}
		/* cpu and memory: the defaults recorded for the template's sandboxes */
		if (api_json_num(o, "cpu", 0.001, 1024, &cpu, &err) < 0 ||
		    api_json_size(o, "memory", &memory, &err) < 0 ||
		    core_resources_check(0, memory, &err) < 0) {
			isola_err_wrap(&err, "options");
			return api_req_fail(r, err);
		}
		json_object_foreach(json_object_get(o, "build_args"), k, v)
		{
			if (!json_is_string(v)) {
				isola_err_set(&err, EINVAL, "invalid",
					      "options.build_args.%.64s must be a string", k);
				return api_req_fail(r, err);
			}
		}
	}
	im->bopts = (struct core_build_opts){
		.context = im->path,
		.dockerfile = json_string_value(json_object_get(o, "dockerfile")),
		.build_args = json_object_get(o, "build_args"),
		.allow = json_object_get(o, "allow"),
		.pull = api_is_operator(r),
		.cpu_millis = (uint32_t)(cpu * 1000 + 0.5),
		.memory_bytes = memory,
		.tier = json_string_value(json_object_get(o, "tier")),
	};
	return 0;
}

static const char *const pull_fields[] = {"ref",    "name",	  "username", "password",
					  "ca_pem", "plain_http", NULL};

enum MHD_Result api_template_pull(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *ref = NULL, *name = NULL, *user = NULL, *pass = NULL, *ca = NULL;
	char derived[64];
	struct imageref ir;
	struct import *im;
	bool plain = false;
	enum MHD_Result ret;

	/* isolad dials the registry from the host, outside every sandbox's egress policy and
	 * able to reach loopback: only the operator may point it somewhere (a tenant's pull
	 * would be a request forgery into the host's network). */
	if (api_deny_unless_operator(r, &ret))
		return ret;
	if (!r->json)
		return api_respond_error(r, "invalid", "body must be a JSON object with `ref`");
	if (api_json_only(r->json, pull_fields, &err) < 0 ||
	    api_json_str(r->json, "ref", 600, &ref, &err) < 0 ||
	    api_json_str(r->json, "name", 63, &name, &err) < 0 ||
	    api_json_str(r->json, "username", 255, &user, &err) < 0 ||
	    api_json_str(r->json, "password", 4096, &pass, &err) < 0 ||
	    api_json_str(r->json, "ca_pem", 1 << 20, &ca, &err) < 0 ||
	    api_json_bool(r->json, "plain_http", &plain, &err) < 0)
		return api_respond_err(r, err);
	if (!ref || imageref_parse(ref, &ir) < 0)
		return api_respond_error(r, "invalid",
					 "`ref` must be an image reference "
					 "([registry/]repository[:tag][@sha256:hex])");
	if (!name || !*name) {
		/* The repository's last component: docker.io/library/python:3 -> python. */
		const char *base = strrchr(ir.repo, '/') ? strrchr(ir.repo, '/') + 1 : ir.repo;

		snprintf(derived, sizeof(derived), "%.63s", base);
		name = derived;
	}
	if (!api_valid_template_name(name))
		return api_respond_error(r, "invalid", "invalid template name `%.64s`", name);
	im = import_new(r, name);
	if (!im)
		return api_respond_error(r, "internal", "out of memory");
	im->req = json_incref(r->json); /* the strings below stay valid while it lives */
	im->opts = (struct images_pull_opts){
		.ref = ref, .username = user, .password = pass, .ca_pem = ca, .plain_http = plain};
	return import_start(r, im);
}

/* Starts the worker of an import/pull whose request state is im and streams its progress. */
static enum MHD_Result import_start(struct api_req *r, struct import *im)
{
	struct MHD_Response *resp;
	pthread_t th;

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
