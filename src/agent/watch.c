/* SPDX-License-Identifier: Apache-2.0 */
/* watch: the `watch` op — inotify on a directory (optionally recursive), events as ENTRY frames. */
#include "agent-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/proto.h"

#define WATCH_MAX_DIRS	  8192 /* inotify watches per channel (recursive trees) */
#define WATCH_MAX_DEPTH	  32   /* directory levels a recursive watch descends */
#define WATCH_MAX_QUEUED  4096 /* events waiting for credit before we count drops */
#define WATCH_TMP_COOKIES 16   /* remembered renames of isola's own temp files */

#define WATCH_MASK                                                                                 \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |             \
	 IN_DELETE_SELF | IN_MOVE_SELF | IN_EXCL_UNLINK | IN_ONLYDIR)

struct wdir {
	int wd;	   /* inotify watch descriptor */
	char *rel; /* directory relative to the root ("" for the root), owned */
};

struct watcher {
	struct watch w;		       /* the inotify fd in the event loop */
	struct chan *ch;	       /* owning channel */
	bool recursive;		       /* watch subdirectories too */
	char root[AGENT_MAX_PATH + 1]; /* watched directory */
	struct wdir *dirs;	       /* watched directories */
	size_t ndirs;		       /* entries in dirs */
	json_t *queue;		       /* events not yet sent (array) */
	uint64_t dropped;	       /* events lost to the queue cap, not yet reported */
	uint32_t tmp_cookies[WATCH_TMP_COOKIES]; /* MOVED_FROM cookies of isola temp files */
	unsigned tmp_next;			 /* next slot in tmp_cookies */
};

/* True for the temp names the agent's own `write` op uses (files.c: ".isola-%08x.tmp"). */
static bool is_isola_tmp(const char *name)
{
	size_t n = strlen(name);

	return n == 19 && !strncmp(name, ".isola-", 7) && !strcmp(name + 15, ".tmp");
}

static struct wdir *dir_by_wd(struct watcher *wt, int wd)
{
	for (size_t i = 0; i < wt->ndirs; i++)
		if (wt->dirs[i].wd == wd)
			return &wt->dirs[i];
	return NULL;
}

static void dir_forget(struct watcher *wt, int wd)
{
	for (size_t i = 0; i < wt->ndirs; i++) {
		if (wt->dirs[i].wd != wd)
			continue;
		free(wt->dirs[i].rel);
		wt->dirs[i] = wt->dirs[--wt->ndirs];
		return;
	}
}

/* Adds a watch on root/rel (and, when recursive, below it). Runs as the channel's user.
 * Returns 0 or -errno for the top directory; failures below it are skipped. */
static int dir_add(struct watcher *wt, const char *rel, int depth)
{
	char path[AGENT_MAX_PATH + 1];
	struct wdir *d;
	DIR *dir;
	struct dirent *de;
	int wd;

	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", wt->root, *rel ? "/" : "", rel) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	if (wt->ndirs >= WATCH_MAX_DIRS)
		return -ENOSPC;
	wd = inotify_add_watch(wt->w.fd, path, WATCH_MASK);
	if (wd < 0)
		return -errno;
	d = dir_by_wd(wt, wd);
	if (!d) {
		struct wdir *nd = realloc(wt->dirs, (wt->ndirs + 1) * sizeof(*nd));
		char *r = strdup(rel);

		if (!nd || !r) {
			free(r);
			if (nd)
				wt->dirs = nd;
			inotify_rm_watch(wt->w.fd, wd);
			return -ENOMEM;
		}
		wt->dirs = nd;
		wt->dirs[wt->ndirs].wd = wd;
		wt->dirs[wt->ndirs].rel = r;
		wt->ndirs++;
	}
	if (!wt->recursive || depth >= WATCH_MAX_DEPTH)
		return 0;
	/* O_NOFOLLOW: a symlink planted in the tree never redirects the walk. */
	{
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0)
			return 0;
		dir = fdopendir(fd);
		if (!dir) {
			close(fd);
			return 0;
		}
	}
	while ((de = readdir(dir))) {
		char sub[AGENT_MAX_PATH + 1];

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "",
				     de->d_name) >= sizeof(sub))
			continue;
		dir_add(wt, sub, depth + 1);
	}
	closedir(dir);
	return 0;
}

static void queue_event(struct watcher *wt, const char *rel, const char *name, const char *type)
{
	char full[AGENT_MAX_PATH + 1];

	if (json_array_size(wt->queue) >= WATCH_MAX_QUEUED) {
		wt->dropped++;
		return;
	}
	snprintf(full, sizeof(full), "%s%s%s", rel, *rel && *name ? "/" : "", name);
	json_array_append_new(wt->queue, json_pack("{s:s,s:s}", "name", full, "type", type));
}

static void watch_pump(struct chan *ch)
{
	struct watcher *wt = ch->state;

	while (json_array_size(wt->queue) || wt->dropped) {
		json_t *ev;
		char *s;
		size_t len;

		if (wt->dropped)
			ev = json_pack("{s:I}", "dropped", (json_int_t)wt->dropped);
		else
			ev = json_incref(json_array_get(wt->queue, 0));
		s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
		json_decref(ev);
		if (!s)
			return;
		len = strlen(s);
		/* ENTRY frames count against the channel's credit (docs/agent-protocol.md). */
		if (chan_room(ch) < len) {
			free(s);
			return;
		}
		chan_send_data(ch, PROTO_ENTRY, s, len);
		free(s);
		if (wt->dropped)
			wt->dropped = 0;
		else
			json_array_remove(wt->queue, 0);
	}
}

static bool tmp_cookie_take(struct watcher *wt, uint32_t cookie)
{
	for (unsigned i = 0; cookie && i < WATCH_TMP_COOKIES; i++) {
		if (wt->tmp_cookies[i] == cookie) {
			wt->tmp_cookies[i] = 0;
			return true;
		}
	}
	return false;
}

/* One inotify event. UNTRUSTED only in the sense that names come from the sandbox's
 * filesystem; they are copied as strings, never used as paths by isolad. */
static void handle_event(struct watcher *wt, const struct inotify_event *e)
{
	struct wdir *d = dir_by_wd(wt, e->wd);
	const char *name = e->len ? e->name : "";
	char rel[AGENT_MAX_PATH + 1];

	if (e->mask & IN_Q_OVERFLOW) {
		wt->dropped++;
		return;
	}
	if (!d)
		return;
	snprintf(rel, sizeof(rel), "%s", d->rel);
	if (e->mask & IN_IGNORED) {
		bool root = rel[0] == '\0';

		dir_forget(wt, e->wd);
		if (root)
			chan_fail(wt->ch, ENOENT, "watched directory `%s` is gone", wt->root);
		return;
	}
	if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
		if (rel[0] == '\0')
			queue_event(wt, "", "", e->mask & IN_DELETE_SELF ? "remove" : "rename");
		return; /* a subdirectory's own removal is reported by its parent */
	}
	/* The agent's atomic write: temp file created, written, renamed over the target.
	 * Report it as the target being created and written, as a direct write would be. */
	if (is_isola_tmp(name)) {
		if (e->mask & IN_MOVED_FROM) {
			wt->tmp_cookies[wt->tmp_next] = e->cookie;
			wt->tmp_next = (wt->tmp_next + 1) % WATCH_TMP_COOKIES;
		}
		return;
	}
	if (e->mask & IN_MOVED_TO && tmp_cookie_take(wt, e->cookie)) {
		queue_event(wt, rel, name, "create");
		queue_event(wt, rel, name, "write");
		return;
	}
	if (e->mask & (IN_CREATE | IN_MOVED_TO)) {
		queue_event(wt, rel, name, "create");
		if (wt->recursive && (e->mask & IN_ISDIR)) {
			char sub[AGENT_MAX_PATH + 1];
			int depth = 1;

			for (const char *c = rel; *c; c++)
				depth += *c == '/';
			if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "",
					     name) < sizeof(sub)) {
				ident_enter(&wt->ch->user);
				dir_add(wt, sub, depth);
				ident_leave();
			}
		}
	}
	if (e->mask & IN_MODIFY)
		queue_event(wt, rel, name, "write");
	if (e->mask & IN_DELETE)
		queue_event(wt, rel, name, "remove");
	if (e->mask & IN_MOVED_FROM)
		queue_event(wt, rel, name, "rename");
	if (e->mask & IN_ATTRIB)
		queue_event(wt, rel, name, "chmod");
}

static void inotify_cb(struct watch *w, uint32_t events)
{
	struct watcher *wt = (struct watcher *)w; /* w is the first member */
	struct chan *ch = wt->ch; /* outlives this callback even if it ends (freed later) */
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		size_t off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		while (off + sizeof(struct inotify_event) <= (size_t)n) {
			const struct inotify_event *e = (const void *)(buf + off);

			if (off + sizeof(*e) + e->len > (size_t)n)
				break;
			handle_event(wt, e);
			if (ch->ended)
				return; /* wt was released with the channel */
			off += sizeof(*e) + e->len;
		}
	}
	watch_pump(ch);
}

static void watch_release(struct chan *ch)
{
	struct watcher *wt = ch->state;

	if (!wt)
		return;
	watch_set(&wt->w, 0);
	if (wt->w.fd >= 0)
		close(wt->w.fd); /* drops every inotify watch with it */
	for (size_t i = 0; i < wt->ndirs; i++)
		free(wt->dirs[i].rel);
	free(wt->dirs);
	json_decref(wt->queue);
	free(wt);
	ch->state = NULL;
}

static const struct chan_ops watch_ops = {
	.pump = watch_pump,
	.release = watch_release,
};

int op_watch(struct chan *ch, json_t *req)
{
	struct watcher *wt;
	bool recursive;
	char path[AGENT_MAX_PATH + 1];
	struct stat st;
	int r;

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", path) < 0 ||
	    req_bool(ch, req, "recursive", false, &recursive) < 0)
		return 0;
	ident_enter(&ch->user);
	r = stat(path, &st) < 0 ? -errno : (S_ISDIR(st.st_mode) ? 0 : -ENOTDIR);
	ident_leave();
	if (r < 0) {
		chan_fail(ch, -r, "watch `%s`: %s", path, strerror(-r));
		return 0;
	}
	wt = calloc(1, sizeof(*wt));
	if (!wt || !(wt->queue = json_array())) {
		free(wt);
		chan_fail(ch, ENOMEM, "watch: out of memory");
		return 0;
	}
	watch_init(&wt->w, inotify_init1(IN_NONBLOCK | IN_CLOEXEC), inotify_cb);
	wt->ch = ch;
	wt->recursive = recursive;
	snprintf(wt->root, sizeof(wt->root), "%s", path);
	/* strip a trailing '/' so relative names join cleanly (but keep "/") */
	while (strlen(wt->root) > 1 && wt->root[strlen(wt->root) - 1] == '/')
		wt->root[strlen(wt->root) - 1] = '\0';
	ch->state = wt;
	ch->ops = &watch_ops;
	if (wt->w.fd < 0) {
		chan_fail(ch, errno, "inotify: %s", strerror(errno));
		return 0;
	}
	ident_enter(&ch->user);
	r = dir_add(wt, "", 0);
	ident_leave();
	if (r < 0) {
		chan_fail(ch, -r, "watch `%s`: %s", path, strerror(-r));
		return 0;
	}
	watch_set(&wt->w, EPOLLIN);
	chan_send_json(ch, PROTO_RESULT,
		       json_pack("{s:s,s:b}", "path", wt->root, "recursive", recursive));
	return 0;
}
