/* SPDX-License-Identifier: Apache-2.0 */
/* envd_fs: filesystem.Filesystem — stat, mkdir, move, list, remove, WatchDir and watchers. */
#include "e2b-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define MAX_WATCHERS	 256	      /* CreateWatcher watchers alive at once, all sandboxes */
#define WATCHER_IDLE_MS	 (600 * 1000) /* a watcher nobody polls for this long is removed */
#define MAX_WATCH_EVENTS 4096	      /* events returned by one GetWatcherEvents */

/* --- EntryInfo ------------------------------------------------------------------------------ */

/* Go's FileMode.String() for the types isola reports ("drwxr-xr-x"). */
static void perm_string(const char *type, unsigned mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = !strcmp(type, "dir") ? 'd' : !strcmp(type, "symlink") ? 'L' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
	out[10] = '\0';
}

/* The owner (or group) of an agent entry: the name the agent resolved in the sandbox's own
 * /etc/passwd (/etc/group), else the number. */
static void owner_string(const json_t *name, const json_t *id, char *out, size_t n)
{
	const char *s = json_string_value(name);
	bool clean = s && *s && strlen(s) < n;

	/* UNTRUSTED: the name comes from the sandbox; only short printable names are used. */
	for (const char *p = s; clean && *p; p++)
		clean = *p > ' ' && *p < 0x7f;
	if (clean)
		snprintf(out, n, "%s", s);
	else
		snprintf(out, n, "%lld", (long long)json_integer_value(id));
}

/*
 * E2B reports a symlink's target as an absolute path: a relative target is taken from the
 * link's directory, and "." and ".." are resolved lexically (the chain is not followed:
 * the host never resolves a sandbox path). Writes at most n bytes; false when it does not fit.
 */
static bool symlink_abs(const char *link, const char *target, char *out, size_t n)
{
	char buf[2 * API_MAX_PATH + 2];
	size_t used = 0, dl;
	const char *p;

	if (target[0] == '/') {
		snprintf(buf, sizeof(buf), "%s", target);
	} else {
		p = strrchr(link, '/');
		dl = p ? (size_t)(p - link) : 0;
		if (dl + strlen(target) + 2 > sizeof(buf))
			return false;
		snprintf(buf, sizeof(buf), "%.*s/%s", (int)dl, link, target);
	}
	/* Lexical clean into out: components pushed, ".." pops one, "." and "" skipped. */
	for (p = buf; *p;) {
		const char *e = strchr(p, '/');
		size_t cl = e ? (size_t)(e - p) : strlen(p);

		if (cl == 2 && !strncmp(p, "..", 2)) {
			while (used > 0 && out[used - 1] != '/')
				used--;
			if (used > 0)
				used--;
		} else if (cl > 0 && !(cl == 1 && p[0] == '.')) {
			if (used + 1 + cl + 1 > n)
				return false;
			out[used++] = '/';
			memcpy(out + used, p, cl);
			used += cl;
		}
		p += cl;
		if (*p == '/')
			p++;
	}
	if (used == 0) {
		if (n < 2)
			return false;
		out[used++] = '/';
	}
	out[used] = '\0';
	return true;
}

json_t *e2b_entry_info(const json_t *e)
{
	/* UNTRUSTED: an agent entry; only typed fields are copied. */
	const char *type = json_string_value(json_object_get(e, "type"));
	const char *path = json_string_value(json_object_get(e, "path"));
	const char *target = json_string_value(json_object_get(e, "target"));
	const char *ftype = "FILE_TYPE_UNSPECIFIED", *base;
	unsigned mode = (unsigned)json_integer_value(json_object_get(e, "mode")) & 07777;
	char perms[11], owner[64], group[64], mtime[40], size[24];
	json_t *o, *meta;

	if (!type)
		type = "other";
	if (!path)
		path = "";
	if (!strcmp(type, "file"))
		ftype = "FILE_TYPE_FILE";
	else if (!strcmp(type, "dir"))
		ftype = "FILE_TYPE_DIRECTORY";
	else if (!strcmp(type, "symlink"))
		ftype = "FILE_TYPE_SYMLINK";
	base = strrchr(path, '/');
	base = base && base[1] ? base + 1 : (base ? "/" : path);
	perm_string(type, mode, perms);
	owner_string(json_object_get(e, "owner"), json_object_get(e, "uid"), owner, sizeof(owner));
	owner_string(json_object_get(e, "group"), json_object_get(e, "gid"), group, sizeof(group));
	e2b_rfc3339((double)json_integer_value(json_object_get(e, "mtime")), mtime, sizeof(mtime));
	snprintf(size, sizeof(size), "%lld",
		 (long long)json_integer_value(json_object_get(e, "size")));
	o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "name", base, "type", ftype,
		      "path", path, "size", size, "mode", (int)mode, "permissions", perms, "owner",
		      owner, "group", group, "modifiedTime", mtime);
	meta = json_object_get(e, "metadata");
	if (o && json_is_object(meta) && json_object_size(meta) > 0) {
		/* UNTRUSTED: xattr values from the sandbox; only string values are copied and
		 * the agent already bounded their size and number. */
		json_t *m = json_object();
		const char *k;
		json_t *v;

		json_object_foreach(meta, k,
				    v) if (json_is_string(v) && json_object_size(m) < E2B_META_MAX)
			json_object_set(m, k, v);
		json_object_set_new(o, "metadata", m);
	}
	if (o && target) {
		char abs[API_MAX_PATH + 1];

		json_object_set_new(
			o, "symlinkTarget",
			json_string(symlink_abs(path, target, abs, sizeof(abs)) ? abs : target));
	}
	return o;
}

/* --- unary methods ----------------------------------------------------------------------------- */

/* One-shot agent op as the request's user; *res may be NULL. */
static int fs_call(struct agent_conn *conn, const char *user, json_t *req, json_t **res,
		   struct isola_err **err)
{
	int r;

	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (user && *user)
		json_object_set_new(req, "user", json_string(user));
	r = e2b_agent_call(conn, req, res, err);
	json_decref(req);
	return r;
}

/* A path field, checked like every client path (non-empty, no NUL, bounded). */
static int msg_path(const json_t *msg, const char *camel, const char **out, struct isola_err **err)
{
	const char *p = NULL;

	if (e2b_jstr(msg, camel, NULL, API_MAX_PATH, &p, err) < 0)
		return -EINVAL;
	return api_check_path(camel, p, p ? strlen(p) : 0, err) < 0 ? -EINVAL : (*out = p, 0);
}

struct fs_ctx {
	json_t *msg;		 /* request message, owned */
	struct sandbox *s;	 /* reference */
	struct agent_conn *conn; /* borrowed while s is held */
	const char *user;	 /* Basic user or NULL */
};

static int fs_begin(struct api_req *r, struct fs_ctx *c)
{
	struct e2b_req *er = e2b_req_of(r);

	if (e2b_rpc_request(r, false, &c->msg) < 0)
		return -1;
	if (e2b_rpc_sandbox(r, &c->s, &c->conn) < 0) {
		json_decref(c->msg);
		return -1;
	}
	c->user = er->user[0] ? er->user : NULL;
	return 0;
}

static enum MHD_Result fs_end(struct api_req *r, struct fs_ctx *c, int ret,
			      const struct isola_err *err, json_t *ok)
{
	json_decref(c->msg);
	sandbox_unref(c->s);
	if (ret < 0) {
		json_decref(ok);
		return e2b_rpc_err(r, err);
	}
	return e2b_rpc_ok(r, ok ? ok : json_object());
}

/* {"entry": EntryInfo} from an agent entry (consumed). */
static json_t *entry_reply(json_t *agent_entry)
{
	json_t *o = json_pack("{s:o}", "entry", e2b_entry_info(agent_entry));

	json_decref(agent_entry);
	return o;
}

enum MHD_Result e2b_fs_stat(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct fs_ctx c = {0};
	const char *path = NULL;
	json_t *res = NULL;
	int ret;

	if (fs_begin(r, &c) < 0)
		return MHD_YES;
	ret = msg_path(c.msg, "path", &path, &err);
	if (ret == 0)
		ret = fs_call(c.conn, c.user, json_pack("{s:s, s:s}", "op", "stat", "path", path),
			      &res, &err);
	return fs_end(r, &c, ret, err, ret == 0 ? entry_reply(res) : NULL);
}

/* Creates the parent directories of path (errors ignored: the real op reports them). */
static void ensure_parent(struct agent_conn *conn, const char *user, const char *path)
{
	char dir[API_MAX_PATH + 1];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	fs_call(conn, user,
		json_pack("{s:s, s:s, s:b, s:i}", "op", "mkdir", "path", dir, "parents", 1, "mode",
			  0755),
		NULL, NULL);
}

enum MHD_Result e2b_fs_make_dir(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct fs_ctx c = {0};
	const char *path = NULL;
	json_t *res = NULL;
	int ret;

	if (fs_begin(r, &c) < 0)
		return MHD_YES;
	ret = msg_path(c.msg, "path", &path, &err);
	/* E2B: already_exists when anything is there (the SDK answers false). */
	if (ret == 0 && fs_call(c.conn, c.user, json_pack("{s:s, s:s}", "op", "stat", "path", path),
				&res, NULL) == 0) {
		json_decref(res);
		res = NULL;
		ret = isola_err_set(&err, EEXIST, "exists", "`%s` already exists", path);
	}
	if (ret == 0)
		ret = fs_call(c.conn, c.user,
			      json_pack("{s:s, s:s, s:b, s:i}", "op", "mkdir", "path", path,
					"parents", 1, "mode", 0755),
			      &res, &err);
	return fs_end(r, &c, ret, err, ret == 0 ? entry_reply(res) : NULL);
}

enum MHD_Result e2b_fs_move(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct fs_ctx c = {0};
	const char *from = NULL, *to = NULL;
	json_t *res = NULL;
	int ret;

	if (fs_begin(r, &c) < 0)
		return MHD_YES;
	ret = msg_path(c.msg, "source", &from, &err);
	if (ret == 0)
		ret = msg_path(c.msg, "destination", &to, &err);
	if (ret == 0) {
		ensure_parent(c.conn, c.user, to);
		ret = fs_call(c.conn, c.user,
			      json_pack("{s:s, s:s, s:s, s:b}", "op", "rename", "from", from, "to",
					to, "overwrite", 1),
			      &res, &err);
	}
	return fs_end(r, &c, ret, err, ret == 0 ? entry_reply(res) : NULL);
}

enum MHD_Result e2b_fs_list_dir(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct fs_ctx c = {0};
	const char *path = NULL;
	uint64_t depth = 1;
	json_t *res = NULL, *out = NULL, *e;
	size_t i;
	int ret;

	if (fs_begin(r, &c) < 0)
		return MHD_YES;
	ret = msg_path(c.msg, "path", &path, &err);
	if (ret == 0)
		ret = e2b_juint(c.msg, "depth", NULL, 16, &depth, &err);
	if (ret == 0)
		ret = fs_call(c.conn, c.user,
			      json_pack("{s:s, s:s, s:I}", "op", "list", "path", path, "depth",
					(json_int_t)(depth ? depth : 1)),
			      &res, &err);
	if (ret == 0) {
		json_t *entries = json_array();

		json_array_foreach(json_object_get(res, "entries"), i, e)
			json_array_append_new(entries, e2b_entry_info(e));
		out = json_pack("{s:o}", "entries", entries);
	}
	json_decref(res);
	return fs_end(r, &c, ret, err, out);
}

enum MHD_Result e2b_fs_remove(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct fs_ctx c = {0};
	const char *path = NULL;
	int ret;

	if (fs_begin(r, &c) < 0)
		return MHD_YES;
	ret = msg_path(c.msg, "path", &path, &err);
	if (ret == 0)
		ret = fs_call(
			c.conn, c.user,
			json_pack("{s:s, s:s, s:b}", "op", "remove", "path", path, "recursive", 1),
			NULL, &err);
	/* E2B: removing what is not there succeeds (envd ignores os.IsNotExist). */
	if (ret == -ENOENT) {
		isola_err_free(err);
		err = NULL;
		ret = 0;
	}
	return fs_end(r, &c, ret, err, NULL);
}

/* --- watching ------------------------------------------------------------------------------------ */

/* What WatchDir and CreateWatcher share: an agent `watch` channel and its root. */
struct watch_src {
	struct sandbox *s;	     /* reference */
	struct agent_conn *conn;     /* borrowed while s is held */
	struct agent_chan *ch;	     /* the agent watch channel, owned */
	char user[64];		     /* for entry stats */
	char root[API_MAX_PATH + 1]; /* watched directory as the client named it */
	bool include_entry;	     /* stat each event's path */
};

static void watch_src_fini(struct watch_src *w)
{
	agent_chan_close(w->ch);
	w->ch = NULL;
	if (w->s)
		sandbox_unref(w->s);
	w->s = NULL;
}

/* Opens the agent watch from a WatchDirRequest / CreateWatcherRequest. */
static int watch_open(struct api_req *r, const json_t *msg, struct watch_src *w,
		      struct isola_err **err)
{
	struct e2b_req *er = e2b_req_of(r);
	const char *path = NULL;
	bool recursive = false;
	json_t *req;
	int ret;

	if (msg_path(msg, "path", &path, err) < 0 ||
	    e2b_jbool(msg, "recursive", NULL, &recursive, err) < 0 ||
	    e2b_jbool(msg, "includeEntry", "include_entry", &w->include_entry, err) < 0)
		return -EINVAL;
	snprintf(w->root, sizeof(w->root), "%s", path);
	snprintf(w->user, sizeof(w->user), "%s", er->user);
	req = json_pack("{s:s, s:s, s:b}", "op", "watch", "path", path, "recursive", recursive);
	if (!req)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (er->user[0])
		json_object_set_new(req, "user", json_string(er->user));
	ret = agent_chan_open(w->conn, req, &w->ch, err);
	json_decref(req);
	if (ret == 0)
		ret = api_chan_expect_result(w->ch, api_req_fd(r), E2B_CALL_MS, NULL, err);
	return ret;
}

/* FilesystemEvent from an agent watch ENTRY (UNTRUSTED: typed fields only), or NULL when
 * the frame carries no event (a `dropped` count). */
static json_t *fs_event(struct watch_src *w, const json_t *ev)
{
	static const struct {
		const char *agent, *e2b;
	} types[] = {
		{"create", "EVENT_TYPE_CREATE"}, {"write", "EVENT_TYPE_WRITE"},
		{"remove", "EVENT_TYPE_REMOVE"}, {"rename", "EVENT_TYPE_RENAME"},
		{"chmod", "EVENT_TYPE_CHMOD"},
	};
	const char *name = json_string_value(json_object_get(ev, "name"));
	const char *type = json_string_value(json_object_get(ev, "type"));
	const char *et = NULL;
	json_t *o;

	for (size_t i = 0; type && i < ARRAY_SIZE(types); i++)
		if (!strcmp(types[i].agent, type))
			et = types[i].e2b;
	if (!name || !et)
		return NULL;
	o = json_pack("{s:s, s:s}", "name", name, "type", et);
	if (o && w->include_entry && strcmp(type, "remove") != 0 && strcmp(type, "rename") != 0) {
		char full[API_MAX_PATH * 2 + 2];
		json_t *res = NULL;

		snprintf(full, sizeof(full), "%s%s%s", w->root, *name ? "/" : "", name);
		if (fs_call(w->conn, w->user, json_pack("{s:s, s:s}", "op", "stat", "path", full),
			    &res, NULL) == 0)
			json_object_set_new(o, "entry", e2b_entry_info(res));
		json_decref(res);
	}
	return o;
}

/* WatchDir: a server stream of {"start":{}}, then {"filesystem": event}... */
struct watch_stream {
	struct watch_src w;    /* the watch */
	bool start_sent;       /* first frame out */
	struct isola_err *err; /* failure before the stream began, owned */
};

static void watch_stream_free(void *p)
{
	struct watch_stream *ws = p;

	watch_src_fini(&ws->w);
	isola_err_free(ws->err);
	free(ws);
}

static int watch_next(struct e2b_stream *es, void *ud)
{
	struct watch_stream *ws = ud;
	cleanup_err struct isola_err *err = NULL;
	struct agent_msg m = {0};
	json_t *ev;
	int r;

	if (ws->err) {
		e2b_stream_fail_err(es, ws->err);
		return 1;
	}
	if (!ws->start_sent) {
		ws->start_sent = true;
		return e2b_stream_msg(es, json_pack("{s:{}}", "start"));
	}
	r = agent_chan_recv(ws->w.ch, &m, API_POLL_MS, &err);
	if (r == -ETIMEDOUT)
		return e2b_stream_idle(es) ? -1 : 0;
	if (r < 0) {
		e2b_stream_fail(es, "unavailable", "the sandbox agent connection was lost");
		return 1;
	}
	if (m.type == PROTO_ERROR) {
		agent_error_to_err(m.json, &err);
		e2b_stream_fail_err(es, err);
		agent_msg_fini(&m);
		return 1;
	}
	ev = m.type == PROTO_ENTRY ? fs_event(&ws->w, m.json) : NULL;
	agent_msg_fini(&m);
	if (ev)
		return e2b_stream_msg(es, json_pack("{s:o}", "filesystem", ev)) < 0 ? -1 : 0;
	return 0;
}

enum MHD_Result e2b_fs_watch_dir(struct api_req *r)
{
	struct watch_stream *ws;
	json_t *msg = NULL;
	struct e2b_stream_cfg cfg = {.next = watch_next, .free_ud = watch_stream_free};

	if (e2b_rpc_request(r, true, &msg) < 0)
		return MHD_YES;
	ws = calloc(1, sizeof(*ws));
	if (!ws) {
		json_decref(msg);
		return MHD_NO;
	}
	if (e2b_rpc_sandbox(r, &ws->w.s, &ws->w.conn) < 0) {
		json_decref(msg);
		free(ws);
		return MHD_YES;
	}
	watch_open(r, msg, &ws->w, &ws->err);
	json_decref(msg);
	cfg.ud = ws;
	cfg.keepalive_ms = e2b_keepalive_ms(r);
	cfg.keepalive = json_pack("{s:{}}", "keepalive");
	return e2b_stream_respond(r, &cfg);
}

/* --- CreateWatcher / GetWatcherEvents / RemoveWatcher ------------------------------------------- */

struct watcher {
	char id[33];	    /* public watcher id (random hex) */
	char sandbox[40];   /* the sandbox it belongs to */
	struct watch_src w; /* the watch */
	uint64_t last_poll; /* monotonic ms of the last GetWatcherEvents */
};

/* All watchers; the table lock also serializes use of their channels. */
static struct watcher *watchers[MAX_WATCHERS];
static pthread_mutex_t watchers_lock = PTHREAD_MUTEX_INITIALIZER;

static void watcher_free(struct watcher *wt)
{
	watch_src_fini(&wt->w);
	free(wt);
}

/* Drops watchers whose sandbox is gone or that nobody polled for WATCHER_IDLE_MS, so a
 * client that forgets RemoveWatcher cannot pin sandboxes or agent channels. Locked. */
static void watchers_sweep_locked(struct api_req *r)
{
	uint64_t now = util_now_ms();

	for (size_t i = 0; i < MAX_WATCHERS; i++) {
		struct sandbox *s = NULL;
		bool gone;

		if (!watchers[i])
			continue;
		gone = core_sandbox_get(r->srv->core, watchers[i]->sandbox, &s, NULL) < 0;
		if (s)
			sandbox_unref(s);
		if (gone || now - watchers[i]->last_poll > WATCHER_IDLE_MS) {
			watcher_free(watchers[i]);
			watchers[i] = NULL;
		}
	}
}

static struct watcher **watcher_slot_locked(const char *id, const char *sandbox)
{
	for (size_t i = 0; i < MAX_WATCHERS; i++)
		if (watchers[i] && !strcmp(watchers[i]->id, id) &&
		    !strcmp(watchers[i]->sandbox, sandbox))
			return &watchers[i];
	return NULL;
}

enum MHD_Result e2b_fs_create_watcher(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;
	unsigned char rnd[16];
	struct watcher *wt;
	json_t *msg = NULL;
	char id[33];
	size_t slot;

	if (e2b_rpc_request(r, false, &msg) < 0)
		return MHD_YES;
	wt = calloc(1, sizeof(*wt));
	if (!wt || sodium_init() < 0) {
		free(wt);
		json_decref(msg);
		return e2b_rpc_error(r, "internal", "out of memory");
	}
	if (e2b_rpc_sandbox(r, &wt->w.s, &wt->w.conn) < 0) {
		json_decref(msg);
		free(wt);
		return MHD_YES;
	}
	if (watch_open(r, msg, &wt->w, &err) < 0) {
		json_decref(msg);
		watcher_free(wt);
		return e2b_rpc_err(r, err);
	}
	json_decref(msg);
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(wt->id, sizeof(wt->id), rnd, sizeof(rnd));
	snprintf(wt->sandbox, sizeof(wt->sandbox), "%s", er->sandbox);
	wt->last_poll = util_now_ms();
	snprintf(id, sizeof(id), "%s", wt->id); /* wt may be swept once it is in the table */
	pthread_mutex_lock(&watchers_lock);
	watchers_sweep_locked(r);
	for (slot = 0; slot < MAX_WATCHERS && watchers[slot]; slot++)
		;
	if (slot < MAX_WATCHERS)
		watchers[slot] = wt;
	pthread_mutex_unlock(&watchers_lock);
	if (slot == MAX_WATCHERS) {
		watcher_free(wt);
		return e2b_rpc_error(r, "resource_exhausted", "too many watchers (%d)",
				     MAX_WATCHERS);
	}
	return e2b_rpc_ok(r, json_pack("{s:s}", "watcherId", id));
}

/* The watcherId of a message. Responds on error, returns NULL. */
static const char *watcher_id(struct api_req *r, json_t **msg)
{
	cleanup_err struct isola_err *err = NULL;
	const char *id = NULL;

	if (e2b_rpc_request(r, false, msg) < 0)
		return NULL;
	if (e2b_jstr(*msg, "watcherId", "watcher_id", 64, &id, &err) < 0 || !id) {
		json_decref(*msg);
		if (!err)
			isola_err_set(&err, EINVAL, "invalid", "field `watcherId` is required");
		e2b_rpc_err(r, err);
		return NULL;
	}
	return id;
}

enum MHD_Result e2b_fs_get_watcher_events(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;
	struct watcher **slot;
	const char *id;
	json_t *msg = NULL, *events;
	bool failed = false;

	id = watcher_id(r, &msg);
	if (!id)
		return MHD_YES;
	events = json_array();
	pthread_mutex_lock(&watchers_lock);
	slot = watcher_slot_locked(id, er->sandbox);
	if (!slot) {
		pthread_mutex_unlock(&watchers_lock);
		json_decref(msg);
		json_decref(events);
		return e2b_rpc_error(r, "not_found", "watcher not found");
	}
	(*slot)->last_poll = util_now_ms();
	while (json_array_size(events) < MAX_WATCH_EVENTS) {
		struct agent_msg m = {0};
		json_t *ev;
		int q = agent_chan_recv((*slot)->w.ch, &m, 0, &err);

		if (q == -ETIMEDOUT) {
			isola_err_free(err);
			err = NULL;
			break;
		}
		if (q < 0 || m.type == PROTO_ERROR) {
			if (q == 0)
				agent_error_to_err(m.json, &err);
			agent_msg_fini(&m);
			failed = true;
			break;
		}
		ev = m.type == PROTO_ENTRY ? fs_event(&(*slot)->w, m.json) : NULL;
		agent_msg_fini(&m);
		if (ev)
			json_array_append_new(events, ev);
	}
	if (failed) {
		/* The watch ended (directory removed, sandbox gone): report it once. */
		watcher_free(*slot);
		*slot = NULL;
	}
	pthread_mutex_unlock(&watchers_lock);
	json_decref(msg);
	if (failed && json_array_size(events) == 0) {
		json_decref(events);
		return e2b_rpc_err(r, err);
	}
	return e2b_rpc_ok(r, json_pack("{s:o}", "events", events));
}

enum MHD_Result e2b_fs_remove_watcher(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);
	struct watcher **slot, *wt = NULL;
	const char *id;
	json_t *msg = NULL;

	id = watcher_id(r, &msg);
	if (!id)
		return MHD_YES;
	pthread_mutex_lock(&watchers_lock);
	slot = watcher_slot_locked(id, er->sandbox);
	if (slot) {
		wt = *slot;
		*slot = NULL;
	}
	pthread_mutex_unlock(&watchers_lock);
	json_decref(msg);
	if (!wt)
		return e2b_rpc_error(r, "not_found", "watcher not found");
	watcher_free(wt);
	return e2b_rpc_ok(r, json_object());
}
