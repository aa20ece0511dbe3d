/* SPDX-License-Identifier: Apache-2.0 */
/* template: E2B's template builder protocol (`Template.build`) served by isola's Dockerfile builder.
 *
 * The SDK's four calls (docs/e2b.md "The SDK's template builder"):
 *   POST /v3/templates {name}                         -> a build record, state `waiting`
 *   GET  /templates/{tid}/files/{hash}                -> {present, url}: url is a PUT back to
 *        isolad with a one-build upload token; the body (a gzip tar of one copy()) lands in
 *        the tenant's file store under its hash
 *   POST /v2/templates/{tid}/builds/{bid} {steps,...} -> steps translated to a Dockerfile,
 *        built on a worker thread by core_template_build_for() from a context tar made of
 *        the Dockerfile and the uploaded files
 *   GET  /templates/{tid}/builds/{bid}/status         -> {status, logEntries, reason}
 * Build records live in memory (TPL_BUILDS_MAX; at most TPL_TENANT_LIVE live ones a tenant,
 * see tpl_slot): an isolad restart forgets them, never the templates they made.
 */
#include "e2b-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "../core/core.h"
#include "../images/images.h"

#define TPL_BUILDS_MAX	64	       /* build records kept */
#define TPL_TENANT_LIVE 8	       /* a tenant's builds waiting or building */
#define TPL_UPLOAD_MAX	(512ull << 20) /* one copy()'s tar */
#define TPL_LOGS_MAX	20000	       /* log entries per build; later output is dropped */
#define TPL_WAIT_TTL_S	3600	       /* a build never started is dropped after this */
#define TPL_STEPS_MAX	500	       /* steps of one template */
#define TPL_ENTRIES_MAX 100000	       /* entries of one upload */

enum tpl_state { TPL_WAITING, TPL_BUILDING, TPL_READY, TPL_ERROR };

static const char *const tpl_state_names[] = {"waiting", "building", "ready", "error"};

/* One build. Reached under tpl_lock; while `building`, the worker also reads the plan fields
 * (never changed after the build starts) and the record is never dropped. */
struct tpl_build {
	char id[33];	      /* build id: 32 hex */
	char name[64];	      /* template name = E2B templateID and alias */
	char tenant[64];      /* whose build (owner of the template) */
	enum tpl_state state; /* see tpl_state_names */
	time_t created;	      /* for expiry of `waiting` records */
	uint64_t seq;	      /* order of creation (which record is oldest) */
	json_t *uploads;      /* {hash: upload token} handed out */
	json_t *logs;	      /* [{timestamp, level, message}] */
	json_t *reason;	      /* {message, step} once failed, else NULL */
	/* the plan, set when the build starts */
	struct api_server *srv; /* for the core and the spool dir */
	char *dockerfile;	/* translated steps */
	json_t *copies;		/* [hash] of the uploads the COPY steps use */
	json_t *stepmap;       /* per Dockerfile step after FROM: E2B step name ("1", "finalize") */
	char cur[16];	       /* E2B step of the Dockerfile step running now */
	char pull_ref[600];    /* operator's fromImage to pull before the build, or "" */
	uint32_t cpu_millis;   /* cpuCount, recorded on the template (0 = not given) */
	uint64_t memory_bytes; /* memoryMB, likewise */
};

static pthread_mutex_t tpl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tpl_build *tpl_builds[TPL_BUILDS_MAX]; /* NULL = free slot */
static uint64_t tpl_seq;			     /* last tpl_build.seq given */

static void tpl_free(struct tpl_build *b)
{
	if (!b)
		return;
	json_decref(b->uploads);
	json_decref(b->logs);
	json_decref(b->reason);
	json_decref(b->copies);
	json_decref(b->stepmap);
	free(b->dockerfile);
	free(b);
}

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[in[i] >> 4];
		out[2 * i + 1] = d[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* Appends a log entry to b (tpl_lock held). */
static void tpl_log(struct tpl_build *b, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void tpl_log(struct tpl_build *b, const char *level, const char *fmt, ...)
{
	char ts[40], *msg = NULL;
	struct timespec now;
	json_t *m;
	va_list ap;

	if (json_array_size(b->logs) >= TPL_LOGS_MAX)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &now);
	e2b_rfc3339((double)now.tv_sec + now.tv_nsec / 1e9, ts, sizeof(ts));
	/* UNTRUSTED: RUN output; json_string_nocheck would keep invalid UTF-8, so the
	 * checked constructor is used and a line it refuses is replaced. */
	m = msg ? json_string(msg) : NULL;
	if (!m)
		m = json_string("(output line that is not UTF-8)");
	json_array_append_new(b->logs, json_pack("{s:s, s:s, s:o}", "timestamp", ts, "level", level,
						 "message", m));
	free(msg);
}

/* The caller's build of this id and template (tpl_lock held), else NULL. */
static struct tpl_build *tpl_find(const char *tenant, const char *name, const char *id)
{
	for (size_t i = 0; i < TPL_BUILDS_MAX; i++) {
		struct tpl_build *b = tpl_builds[i];

		if (b && !strcmp(b->tenant, tenant) && !strcmp(b->name, name) &&
		    (!id || !strcmp(b->id, id)) && (id || b->state == TPL_WAITING))
			return b;
	}
	return NULL;
}

static void tpl_drop(int i)
{
	tpl_free(tpl_builds[i]);
	tpl_builds[i] = NULL;
}

/*
 * A free slot for a new build of tenant (tpl_lock held). A tenant has at most
 * TPL_TENANT_LIVE builds waiting or building: past that its own oldest waiting one is dropped
 * (a waiting build holds nothing but its record), so no tenant can fill the table for the
 * others. A full table drops the oldest finished or expired record, else the oldest waiting
 * one. -1 when the tenant's builds are all running, or every record is a running build.
 */
static int tpl_slot(const char *tenant)
{
	int best = -1, waiting = -1, mine_waiting = -1, mine = 0;
	time_t now = time(NULL);

	for (int i = 0; i < TPL_BUILDS_MAX; i++) {
		struct tpl_build *b = tpl_builds[i];
		bool expired = b && b->state == TPL_WAITING && now - b->created > TPL_WAIT_TTL_S;

		if (expired) {
			tpl_drop(i);
			continue;
		}
		if (!b || strcmp(b->tenant, tenant) || b->state > TPL_BUILDING)
			continue;
		mine++;
		if (b->state == TPL_WAITING &&
		    (mine_waiting < 0 || b->seq < tpl_builds[mine_waiting]->seq))
			mine_waiting = i;
	}
	if (mine >= TPL_TENANT_LIVE) {
		if (mine_waiting < 0)
			return -1;
		tpl_drop(mine_waiting);
		return mine_waiting;
	}
	for (int i = 0; i < TPL_BUILDS_MAX; i++) {
		struct tpl_build *b = tpl_builds[i];

		if (!b)
			return i;
		if (b->state > TPL_BUILDING && (best < 0 || b->seq < tpl_builds[best]->seq))
			best = i;
		if (b->state == TPL_WAITING && (waiting < 0 || b->seq < tpl_builds[waiting]->seq))
			waiting = i;
	}
	if (best < 0)
		best = waiting;
	if (best >= 0)
		tpl_drop(best);
	return best;
}

/* Whether s is exactly len lowercase hex digits. */
static bool lower_hex(const char *s, size_t len)
{
	if (strlen(s) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool e2b_tpl_valid_hash(const char *s)
{
	return lower_hex(s, 64);
}

bool e2b_tpl_valid_build_id(const char *s)
{
	return lower_hex(s, 32);
}

/* --- POST /v3/templates ------------------------------------------------------------------ */

enum MHD_Result e2b_tpl_request(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	const char *name = NULL;
	uint64_t cpus = 0, mem_mb = 0;
	struct template_info t;
	struct tpl_build *b;
	unsigned char rnd[16];
	json_t *body = NULL, *tags;
	enum MHD_Result ret;
	int slot;

	if (e2b_ctl_body(r, &body) < 0)
		return MHD_YES;
	/* UNTRUSTED: the client's body. cpuCount and memoryMB are recorded on the template (its
	 * sandboxes' limits when their create names none, as E2B sizes sandboxes by template);
	 * minFreeDiskMb is accepted and not applied (a sandbox's disk comes from its create). */
	if (e2b_jstr(body, "name", "alias", 255, &name, &err) < 0 ||
	    e2b_juint(body, "cpuCount", "cpu_count", 1024, &cpus, &err) < 0 ||
	    e2b_juint(body, "memoryMB", "memory_mb", 1u << 30, &mem_mb, &err) < 0) {
		ret = e2b_ctl_error(r, 400, "%s", err->message);
		goto out;
	}
	tags = json_object_get(body, "tags");
	if (!name || !*name) {
		ret = e2b_ctl_error(r, 400, "`name` is required (Template.build(template, name))");
		goto out;
	}
	if (strchr(name, ':') || json_array_size(tags)) {
		ret = e2b_ctl_error(r, 400,
				    "template tags are not supported by isola: name the template "
				    "`%.64s` without `:tag` and without `tags`",
				    name);
		goto out;
	}
	if (!api_valid_template_name(name) || !strcmp(name, "base")) {
		ret = e2b_ctl_error(r, 400,
				    "invalid template name `%.64s`: 1-63 of [A-Za-z0-9._-], not "
				    "starting with '.' or '-', and not `base`",
				    name);
		goto out;
	}
	if (mem_mb && mem_mb < 16) {
		ret = e2b_ctl_error(r, 400, "memoryMB %llu: a sandbox needs at least 16 MiB",
				    (unsigned long long)mem_mb);
		goto out;
	}
	memset(&t, 0, sizeof(t));
	if (images_get(name, &t, NULL) == 0) {
		template_info_fini(&t);
		ret = e2b_ctl_error(
			r, 409,
			"template `%s` already exists; isola does not rebuild a template "
			"in place: remove it first (isola template rm %s)",
			name, name);
		goto out;
	}
	b = calloc(1, sizeof(*b));
	if (!b || util_random(rnd, sizeof(rnd)) < 0 || !(b->uploads = json_object()) ||
	    !(b->logs = json_array())) {
		tpl_free(b);
		ret = e2b_ctl_error(r, 500, "out of memory");
		goto out;
	}
	hex(rnd, sizeof(rnd), b->id);
	snprintf(b->name, sizeof(b->name), "%s", name);
	snprintf(b->tenant, sizeof(b->tenant), "%s", api_tenant(r));
	b->created = time(NULL);
	b->srv = r->srv;
	b->cpu_millis = (uint32_t)cpus * 1000;
	b->memory_bytes = mem_mb << 20;
	pthread_mutex_lock(&tpl_lock);
	for (size_t i = 0; i < TPL_BUILDS_MAX; i++) {
		struct tpl_build *o = tpl_builds[i];

		/* Names are one namespace across tenants (make_owned): one build of a name. */
		if (o && !strcmp(o->name, name) && o->state == TPL_BUILDING) {
			pthread_mutex_unlock(&tpl_lock);
			tpl_free(b);
			ret = e2b_ctl_error(r, 409, "template `%s` is being built", name);
			goto out;
		}
	}
	slot = tpl_slot(api_tenant(r));
	if (slot >= 0) {
		b->seq = ++tpl_seq;
		tpl_builds[slot] = b;
		tpl_log(b, "info", "Build %s of template %s requested", b->id, b->name);
	}
	pthread_mutex_unlock(&tpl_lock);
	if (slot < 0) {
		tpl_free(b);
		ret = e2b_ctl_error(
			r, 429,
			"too many template builds are running (%d of this tenant's, %d in "
			"all at most); try again when one ends",
			TPL_TENANT_LIVE, TPL_BUILDS_MAX);
		goto out;
	}
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", name);
	/* The store holds what the tenant uploaded lately (E2B's file cache): older is gone. */
	e2b_tpl_store_prune(r->srv, api_tenant(r));
	ret = api_respond_json(r, 202,
			       json_pack("{s:s, s:s, s:[s], s:[], s:[s], s:b}", "templateID", name,
					 "buildID", b->id, "names", name, "tags", "aliases", name,
					 "public", 0));
out:
	json_decref(body);
	return ret;
}

/* --- GET /templates/{tid}/files/{hash} --------------------------------------------------- */

/* A Host header fit to put in a URL (UNTRUSTED, but only ever handed back to its sender). */
static bool host_ok(const char *h)
{
	if (!h || !*h || strlen(h) > 255)
		return false;
	for (const char *p = h; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(".-:[]", *p)))
			return false;
	return true;
}

enum MHD_Result e2b_tpl_files(struct api_req *r)
{
	const char *tid = api_match_get(&r->match, "tid");
	const char *hash = api_match_get(&r->match, "hash");
	const char *host = api_header(r, MHD_HTTP_HEADER_HOST);
	char token[33], url[700];
	unsigned char rnd[16];
	struct tpl_build *b;
	bool present;

	if (!host_ok(host))
		return e2b_ctl_error(r, 400, "a Host header is needed to make the upload URL");
	present = e2b_tpl_file_present(r->srv, api_tenant(r), hash);
	pthread_mutex_lock(&tpl_lock);
	b = tpl_find(api_tenant(r), tid, NULL);
	if (!b) {
		pthread_mutex_unlock(&tpl_lock);
		return e2b_ctl_error(r, 404,
				     "no build of template `%s` is waiting for files (POST "
				     "/v3/templates first)",
				     tid);
	}
	if (json_object_get(b->uploads, hash)) {
		snprintf(token, sizeof(token), "%s",
			 json_string_value(json_object_get(b->uploads, hash)));
	} else if (json_object_size(b->uploads) >= TPL_STEPS_MAX || util_random(rnd, 16) < 0) {
		pthread_mutex_unlock(&tpl_lock);
		return e2b_ctl_error(r, 400, "too many files for one build (at most %d)",
				     TPL_STEPS_MAX);
	} else {
		hex(rnd, sizeof(rnd), token);
		json_object_set_new(b->uploads, hash, json_string(token));
	}
	pthread_mutex_unlock(&tpl_lock);
	/* The upload is served by isolad itself, on the address the client reached it at; the
	 * token (one build, one hash) is its only credential: the SDK's PUT carries no key. */
	snprintf(url, sizeof(url), "http://%s/templates/%s/files/%s?token=%s", host, tid, hash,
		 token);
	return api_respond_json(r, 201, json_pack("{s:b, s:s}", "present", present, "url", url));
}

/* --- PUT /templates/{tid}/files/{hash}?token= ------------------------------------------- */

struct tpl_upload {
	unsigned status;	   /* answer at the end when non-zero: an error */
	char msg[256];		   /* its message */
	int fd;			   /* spool file */
	char part[PATH_MAX + 100]; /* its path, "" once renamed */
	char final[PATH_MAX + 80]; /* where it goes */
	uint64_t bytes;		   /* received */
};

static void upload_free(void *p)
{
	struct tpl_upload *u = p;

	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	if (u->part[0])
		unlink(u->part);
	free(u);
}

static int upload_refuse(struct tpl_upload *u, unsigned status, const char *msg)
{
	if (!u->status) {
		u->status = status;
		snprintf(u->msg, sizeof(u->msg), "%s", msg);
	}
	return -EINVAL;
}

int e2b_tpl_upload_begin(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	const char *tid = api_match_get(&r->match, "tid");
	const char *hash = api_match_get(&r->match, "hash");
	const char *token = api_query(r, "token");
	const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct tpl_upload *u = calloc(1, sizeof(*u));
	char dir[PATH_MAX], tenant[64] = "";
	int q;

	if (!u)
		return -ENOMEM;
	u->fd = -1;
	er->op = u;
	er->op_free = upload_free;
	pthread_mutex_lock(&tpl_lock);
	for (size_t i = 0; token && strlen(token) == 32 && i < TPL_BUILDS_MAX; i++) {
		struct tpl_build *b = tpl_builds[i];
		const char *want;

		if (!b || b->state != TPL_WAITING || strcmp(b->name, tid))
			continue;
		want = json_string_value(json_object_get(b->uploads, hash));
		/* The token is the credential: compared in constant time. */
		if (want && sodium_memcmp(want, token, 32) == 0) {
			snprintf(tenant, sizeof(tenant), "%s", b->tenant);
			break;
		}
	}
	pthread_mutex_unlock(&tpl_lock);
	if (!tenant[0]) {
		snprintf(r->who.who, sizeof(r->who.who), "anonymous");
		r->who.role = TENANCY_READONLY;
		return upload_refuse(u, 401,
				     "invalid upload token: it is not one this template's waiting "
				     "build handed out for this hash");
	}
	/* The record names who uploaded: the tenant of the build (role user). */
	snprintf(r->who.who, sizeof(r->who.who), "e2b:upload");
	snprintf(r->who.tenant, sizeof(r->who.tenant), "%s", tenant);
	r->who.role = TENANCY_USER;
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", tid);
	if (cl && strtoull(cl, NULL, 10) > TPL_UPLOAD_MAX)
		return upload_refuse(u, 413, "upload larger than the 512 MiB limit of one copy()");
	q = e2b_tpl_store_dir(r->srv, tenant, true, dir, sizeof(dir));
	if (q < 0)
		return upload_refuse(u, 500, "cannot create the template file store");
	snprintf(u->final, sizeof(u->final), "%s/%s", dir, hash);
	snprintf(u->part, sizeof(u->part), "%s/.%s.XXXXXX", dir, hash);
	u->fd = mkostemp(u->part, O_CLOEXEC);
	if (u->fd < 0) {
		u->part[0] = '\0';
		return upload_refuse(u, 500,
				     "cannot create a spool file in the template file store");
	}
	return 0;
}

int e2b_tpl_upload_data(struct api_req *r, const char *buf, size_t len)
{
	struct tpl_upload *u = e2b_req_of(r)->op;

	if (!u || u->status)
		return 0; /* swallowed; answered at the end */
	if (len > TPL_UPLOAD_MAX - u->bytes)
		return upload_refuse(u, 413, "upload larger than the 512 MiB limit of one copy()");
	u->bytes += len;
	if (util_write_all(u->fd, buf, len) < 0)
		return upload_refuse(u, 507, "cannot write the upload (disk full?)");
	return 0;
}

/* Checks an upload is a (gzip) tar of relative paths, regular files, directories and
 * symlinks only. UNTRUSTED: the client's bytes; the builder reads them again (build.c). */
static int upload_check(const char *path, char *why, size_t n)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char norm[PATH_MAX];
	size_t count = 0;
	int r = 0, h;

	if (!a)
		return snprintf(why, n, "out of memory"), -ENOMEM;
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		snprintf(why, n, "not a tar archive: %s", archive_error_string(a));
		archive_read_free(a);
		return -EINVAL;
	}
	while ((h = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);
		mode_t type = archive_entry_filetype(e);

		if (++count > TPL_ENTRIES_MAX) {
			snprintf(why, n, "more than %d entries", TPL_ENTRIES_MAX);
			r = -EINVAL;
			break;
		}
		if (!p || p[0] == '/' || extract_norm_path(p, norm, sizeof(norm)) < 0) {
			snprintf(why, n, "entry `%.100s`: not a relative path inside the context",
				 p ? p : "");
			r = -EINVAL;
			break;
		}
		if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
			snprintf(why, n, "entry `%.100s`: only files, directories and symlinks", p);
			r = -EINVAL;
			break;
		}
	}
	if (r == 0 && h != ARCHIVE_EOF) {
		snprintf(why, n, "corrupt tar archive: %s", archive_error_string(a));
		r = -EINVAL;
	}
	if (r == 0 && count == 0) {
		snprintf(why, n, "empty archive");
		r = -EINVAL;
	}
	archive_read_free(a);
	return r;
}

enum MHD_Result e2b_tpl_upload_end(struct api_req *r)
{
	struct tpl_upload *u = e2b_req_of(r)->op;
	char why[200];

	if (!u)
		return e2b_ctl_error(r, 500, "out of memory");
	if (u->status)
		return e2b_ctl_error(r, u->status, "%s", u->msg);
	close(u->fd);
	u->fd = -1;
	if (upload_check(u->part, why, sizeof(why)) < 0)
		return e2b_ctl_error(r, 400, "upload of files `%.64s`: %s",
				     api_match_get(&r->match, "hash"), why);
	if (rename(u->part, u->final) < 0)
		return e2b_ctl_error(r, 500, "cannot store the upload");
	u->part[0] = '\0';
	return api_respond_empty(r, 200);
}

/* The builder's events as E2B log entries (called on the worker thread). */
static void build_event(void *ud, json_t *ev)
{
	struct tpl_build *b = ud;
	const char *type = json_string_value(json_object_get(ev, "type"));

	pthread_mutex_lock(&tpl_lock);
	if (type && !strcmp(type, "step")) {
		json_int_t step = json_integer_value(json_object_get(ev, "step"));
		const char *sn = json_string_value(json_array_get(b->stepmap, (size_t)step - 1));

		snprintf(b->cur, sizeof(b->cur), "%s", sn ? sn : "");
		tpl_log(b, "info", "[builder %lld/%lld] %s", (long long)step,
			(long long)json_integer_value(json_object_get(ev, "total")),
			json_string_value(json_object_get(ev, "instruction")));
	} else if (type && !strcmp(type, "output")) {
		tpl_log(b, "info", "%s", json_string_value(json_object_get(ev, "line")));
	} else if (type && !strcmp(type, "layer") && json_is_true(json_object_get(ev, "cached"))) {
		tpl_log(b, "info", "CACHED");
	}
	pthread_mutex_unlock(&tpl_lock);
	json_decref(ev);
}

/* The pull a fromImage of the operator's asks for, as the template FROM names (a pull of the
 * same reference that finished meanwhile is taken as it is). 0 or -errno with why. */
static int build_pull(struct tpl_build *b, char *why, size_t n)
{
	cleanup_err struct isola_err *err = NULL;
	struct images_pull_opts o = {.ref = b->pull_ref};
	json_t *out = NULL;
	char name[64];
	int r;

	images_ref_template_name(b->pull_ref, name, sizeof(name));
	pthread_mutex_lock(&tpl_lock);
	snprintf(b->cur, sizeof(b->cur), "base");
	tpl_log(b, "info", "Pulling %s as template %s", b->pull_ref, name);
	pthread_mutex_unlock(&tpl_lock);
	r = core_template_pull_for(b->srv->core, b->tenant, name, &o, NULL, NULL, &out, &err);
	json_decref(out);
	if (r < 0 && err && !strcmp(err->code, "conflict") &&
	    core_template_visible(b->srv->core, b->tenant, name))
		r = 0;
	if (r < 0)
		snprintf(why, n, "fromImage `%.200s`: pull: %.300s", b->pull_ref,
			 err && err->message ? err->message : "failed");
	return r;
}

static void *build_thread(void *arg)
{
	struct tpl_build *b = arg;
	struct api_server *srv = b->srv;
	cleanup_err struct isola_err *err = NULL;
	struct core_build_opts o = {0};
	char ctx[PATH_MAX], store[PATH_MAX], why[600] = "", step[16] = "";
	json_t *out = NULL;
	int fd, r;

	snprintf(ctx, sizeof(ctx), "%s/e2b-context-XXXXXX", srv->spool_dir);
	fd = util_mkdir_p(srv->spool_dir, 0700) < 0 ? -1 : mkostemp(ctx, O_CLOEXEC);
	if (fd < 0 || e2b_tpl_store_dir(srv, b->tenant, false, store, sizeof(store)) < 0) {
		snprintf(why, sizeof(why), "cannot create the build context in `%.200s`",
			 srv->spool_dir);
		r = -EIO;
	} else {
		close(fd);
		r = e2b_tpl_context(store, b->dockerfile, b->copies, ctx, why, sizeof(why), step,
				    sizeof(step));
	}
	if (r == 0 && b->pull_ref[0])
		r = build_pull(b, why, sizeof(why));
	if (r < 0 && step[0]) {
		pthread_mutex_lock(&tpl_lock);
		snprintf(b->cur, sizeof(b->cur), "%s", step);
		pthread_mutex_unlock(&tpl_lock);
	}
	if (r == 0) {
		o.context = ctx;
		o.cpu_millis = b->cpu_millis;
		o.memory_bytes = b->memory_bytes;
		r = core_template_build_for(srv->core, b->tenant, b->name, &o, build_event, b, &out,
					    &err);
		if (r < 0)
			snprintf(why, sizeof(why), "%s",
				 err && err->message ? err->message : "build failed");
	}
	if (fd >= 0)
		unlink(ctx);
	json_decref(out);
	pthread_mutex_lock(&tpl_lock);
	if (r < 0) {
		/* reason.step: the E2B step (stackTraces index) that failed, so the SDK's
		 * BuildError points at the user's line. */
		b->reason =
			json_pack("{s:s, s:s*}", "message", why, "step", b->cur[0] ? b->cur : NULL);
		tpl_log(b, "error", "%s", why);
		b->state = TPL_ERROR;
	} else {
		tpl_log(b, "info", "Template %s built", b->name);
		b->state = TPL_READY;
	}
	/* Logged under the lock: once finished, the record may be dropped by a new request. */
	log_info("e2b template build %s of `%s` (tenant %s): %s", b->id, b->name, b->tenant,
		 r < 0 ? why : "ready");
	pthread_mutex_unlock(&tpl_lock);
	api_server_worker_leave(srv);
	return NULL;
}

enum MHD_Result e2b_tpl_build(struct api_req *r)
{
	const char *tid = api_match_get(&r->match, "tid");
	const char *bid = api_match_get(&r->match, "bid");
	struct e2b_tpl_plan p = {.r = r};
	struct tpl_build *b;
	json_t *body = NULL;
	enum MHD_Result ret;
	pthread_t th;

	if (e2b_ctl_body(r, &body) < 0)
		return MHD_YES;
	snprintf(r->audit_target, sizeof(r->audit_target), "%s", tid);
	p.copies = json_array();
	p.stepmap = json_array();
	if (!p.copies || !p.stepmap) {
		ret = e2b_ctl_error(r, 500, "out of memory");
		goto out;
	}
	/* Everything refusable is refused here, before the build is started. */
	if (e2b_tpl_plan_make(&p, body) < 0) {
		ret = e2b_ctl_error(r, 400, "%s", p.err);
		goto out;
	}
	pthread_mutex_lock(&tpl_lock);
	b = tpl_find(api_tenant(r), tid, bid);
	if (!b || b->state != TPL_WAITING) {
		pthread_mutex_unlock(&tpl_lock);
		ret = b ? e2b_ctl_error(r, 409, "build %s has already started", bid)
			: e2b_ctl_error(r, 404, "build %s of template `%s` not found", bid, tid);
		goto out;
	}
	if (!api_server_worker_enter(r->srv)) {
		pthread_mutex_unlock(&tpl_lock);
		ret = e2b_ctl_error(r, 503, "server is shutting down");
		goto out;
	}
	b->dockerfile = p.df;
	b->copies = p.copies;
	b->stepmap = p.stepmap;
	snprintf(b->pull_ref, sizeof(b->pull_ref), "%s", p.pull_ref);
	p.df = NULL;
	p.copies = p.stepmap = NULL;
	b->state = TPL_BUILDING;
	tpl_log(b, "info", "Building from %zu steps", json_array_size(b->stepmap));
	if (pthread_create(&th, NULL, build_thread, b) != 0) {
		b->state = TPL_ERROR;
		b->reason = json_pack("{s:s}", "message", "cannot start the build thread");
		pthread_mutex_unlock(&tpl_lock);
		api_server_worker_leave(r->srv);
		ret = e2b_ctl_error(r, 503, "cannot start the build");
		goto out;
	}
	pthread_detach(th);
	pthread_mutex_unlock(&tpl_lock);
	ret = api_respond_empty(r, 202);
out:
	e2b_tpl_plan_fini(&p);
	json_decref(body);
	return ret;
}

/* --- GET /templates/{tid}/builds/{bid}/status ------------------------------------------- */

enum MHD_Result e2b_tpl_status(struct api_req *r)
{
	const char *tid = api_match_get(&r->match, "tid");
	const char *bid = api_match_get(&r->match, "bid");
	const char *off = api_query(r, "logsOffset");
	unsigned long long from = 0;
	struct tpl_build *b;
	json_t *entries, *logs, *o;
	char *end = NULL;

	if (off && *off) {
		from = strtoull(off, &end, 10);
		if (*end || off[0] == '-')
			return e2b_ctl_error(r, 400, "logsOffset must be a non-negative integer");
	}
	entries = json_array();
	logs = json_array();
	pthread_mutex_lock(&tpl_lock);
	b = tpl_find(api_tenant(r), tid, bid);
	if (!b) {
		pthread_mutex_unlock(&tpl_lock);
		json_decref(entries);
		json_decref(logs);
		return e2b_ctl_error(r, 404, "build %s of template `%s` not found", bid, tid);
	}
	for (size_t i = (size_t)from; i < json_array_size(b->logs); i++) {
		json_t *e = json_array_get(b->logs, i);

		json_array_append(entries, e);
		json_array_append(logs, json_object_get(e, "message"));
	}
	o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "templateID", b->name, "buildID", b->id,
		      "status", tpl_state_names[b->state], "logEntries", entries, "logs", logs);
	if (o && b->reason)
		json_object_set_new(o, "reason", json_deep_copy(b->reason));
	pthread_mutex_unlock(&tpl_lock);
	return api_respond_json(r, 200, o);
}

/* --- GET /templates/aliases/{alias} (Template.exists) ---------------------------------- */

enum MHD_Result e2b_tpl_alias(struct api_req *r)
{
	const char *alias = api_match_get(&r->match, "alias");

	/* E2B's `base` is isola's default template (as Sandbox.create("base")). */
	if (!strcmp(alias, "base"))
		return api_respond_json(r, 200,
					json_pack("{s:s, s:b}", "templateID", "base", "public", 0));

	if (!core_template_visible(r->srv->core, api_tenant(r), alias) ||
	    !api_valid_template_name(alias)) {
		return e2b_ctl_error(r, 404, "template `%s` not found", alias);
	}
	{
		struct template_info t;

		memset(&t, 0, sizeof(t));
		if (images_get(alias, &t, NULL) < 0)
			return e2b_ctl_error(r, 404, "template `%s` not found", alias);
		template_info_fini(&t);
	}
	return api_respond_json(r, 200, json_pack("{s:s, s:b}", "templateID", alias, "public", 0));
}
