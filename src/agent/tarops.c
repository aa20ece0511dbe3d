/* SPDX-License-Identifier: Apache-2.0 */
/* tarops: tar_get (walk and stream entries) and tar_put (confined extraction). */
#include "agent-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fsdiff.h"
#include "proto/proto.h"

#define TAR_MAX_DEPTH 128

/* ---- tar_get ---- */

struct get_frame {
	DIR *d;	       /* open directory */
	size_t prefix; /* length of its archive name in getter.name */
};

struct getter;
/* Produces the next entry (sets pending, maybe fd); false when the walk is over (*err set
 * on failure). */
typedef bool (*getter_next_fn)(struct getter *g, int *err);

struct getter {
	getter_next_fn next;		       /* get_next (tar_get) or diff_next (fs_diff) */
	const char *op;			       /* "tar_get" or "fs_diff", for messages */
	struct fsdiff_walk *diff;	       /* fs_diff: the walk, owned */
	struct get_frame stack[TAR_MAX_DEPTH]; /* directories being walked */
	int depth;			       /* frames in use */
	int fd;				       /* file whose data is being sent, or -1 */
	uint64_t remaining;		       /* of the declared size */
	char *pending;			       /* serialized ENTRY waiting for credit */
	bool started;			       /* the top entry was produced */
	char path[AGENT_MAX_PATH + 1];	       /* what was asked for */
	char name[AGENT_MAX_PATH + 1];	       /* archive name of the current entry */
};

static char *entry_str(const char *name, const struct stat *st, const char *target)
{
	json_t *e = entry_json(name, name, st, target);
	char *s;

	if (!e)
		return NULL;
	json_object_del(e, "path");
	s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	return s;
}

/* Produces the next entry (sets pending, maybe fd); false when the walk is over. */
static bool get_next(struct getter *g, int *err)
{
	char target[AGENT_MAX_PATH + 1];
	struct stat st;
	ssize_t n = -1;
	int dfd = AT_FDCWD;
	const char *base;
	char copy[AGENT_MAX_PATH + 1];

	*err = 0;
	for (;;) {
		if (!g->started) {
			g->started = true;
			strcpy(copy, g->path);
			base = basename(copy);
			if (!strcmp(base, "/") || !*base)
				base = "root";
			snprintf(g->name, sizeof(g->name), "%s", base);
			if (lstat(g->path, &st) < 0) {
				*err = errno;
				return false;
			}
			base = g->path;
			break;
		}
		if (g->depth == 0)
			return false;
		struct get_frame *f = &g->stack[g->depth - 1];
		struct dirent *de = readdir(f->d);

		if (!de) {
			closedir(f->d);
			g->depth--;
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (f->prefix + 1 + strlen(de->d_name) > AGENT_MAX_PATH)
			continue;
		g->name[f->prefix] = '/';
		strcpy(g->name + f->prefix + 1, de->d_name);
		dfd = dirfd(f->d);
		base = de->d_name;
		if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		break;
	}
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dfd, base, target, sizeof(target) - 1);
		if (n >= 0)
			target[n] = '\0';
	} else if (S_ISREG(st.st_mode)) {
		g->fd = openat(dfd, base,
			       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (g->fd < 0)
			return get_next(g, err); /* unreadable: skip it */
		g->remaining = (uint64_t)st.st_size;
	} else if (S_ISDIR(st.st_mode)) {
		if (g->depth < TAR_MAX_DEPTH) {
			int fd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

			if (d) {
				g->stack[g->depth].d = d;
				g->stack[g->depth].prefix = strlen(g->name);
				g->depth++;
			} else if (fd >= 0) {
				close(fd);
			}
		}
	} else {
		return get_next(g, err); /* devices, sockets, fifos are not archived */
	}
	g->pending = entry_str(g->name, &st, n >= 0 ? target : NULL);
	if (!g->pending)
		*err = ENOMEM;
	return g->pending != NULL;
}

static void get_pump(struct chan *ch)
{
	static const uint8_t zeros[PROTO_MAX_PAYLOAD];
	struct getter *g = ch->state;
	uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t room;
	int err;

	ident_enter(&ch->user);
	while (!ch->ended && (room = chan_room(ch)) > 0) {
		if (g->pending) {
			size_t len = strlen(g->pending);

			if (len > room)
				break; /* ENTRY counts against credit: wait for more */
			chan_send_data(ch, PROTO_ENTRY, g->pending, len);
			free(g->pending);
			g->pending = NULL;
		} else if (g->fd >= 0) {
			ssize_t n = 0;

			if (room > g->remaining)
				room = (size_t)g->remaining;
			if (room)
				n = read(g->fd, buf, room);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 && g->remaining) {
				/* the file shrank under us: pad to the size we announced */
				chan_send_data(ch, PROTO_STDOUT, zeros, room);
				g->remaining -= room;
				continue;
			}
			if (n > 0) {
				chan_send_data(ch, PROTO_STDOUT, buf, (size_t)n);
				g->remaining -= (uint64_t)n;
			}
			if (!g->remaining) {
				close(g->fd);
				g->fd = -1;
			}
		} else if (!g->next(g, &err)) {
			if (err)
				chan_fail(ch, err, "%s `%s`: %s", g->op, g->path, strerror(err));
			else
				chan_finish(ch, PROTO_EOF, NULL);
		}
	}
	ident_leave();
}

static void get_release(struct chan *ch)
{
	struct getter *g = ch->state;

	if (!g)
		return;
	while (g->depth > 0)
		closedir(g->stack[--g->depth].d);
	if (g->fd >= 0)
		close(g->fd);
	fsdiff_walk_free(g->diff);
	free(g->pending);
	free(g);
	ch->state = NULL;
}

static const struct chan_ops get_ops = {.pump = get_pump, .release = get_release};

/* A getter on ch (its state); NULL after failing the channel. */
static struct getter *getter_new(struct chan *ch, const char *op, getter_next_fn next)
{
	struct getter *g = calloc(1, sizeof(*g));

	if (!g) {
		chan_fail(ch, ENOMEM, "out of memory");
		return NULL;
	}
	g->fd = -1;
	g->op = op;
	g->next = next;
	ch->state = g;
	ch->ops = &get_ops;
	return g;
}

int op_tar_get(struct chan *ch, json_t *req)
{
	struct getter *g = getter_new(ch, "tar_get", get_next);

	if (!g)
		return 0;
	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", g->path) < 0)
		return 0;
	get_pump(ch);
	return 0;
}

/* ---- fs_mark / fs_diff: the root filesystem's changes as an OCI layer ---- */

/* The manifest of the last fs_mark (one per agent; fs_mark replaces it). */
static struct fsdiff *mark;

/* fs_diff's producer: the next change from the walk, as tar_get's entries. */
static bool diff_next(struct getter *g, int *err)
{
	char target[AGENT_MAX_PATH + 1];
	struct fsdiff_item it;
	ssize_t n;
	int r;

	*err = 0;
	for (;;) {
		r = fsdiff_walk_next(g->diff, &it);
		if (r <= 0) {
			*err = -r;
			return false;
		}
		n = -1;
		if (S_ISLNK(it.st.st_mode)) {
			n = readlinkat(it.dfd, it.base, target, sizeof(target) - 1);
			if (n < 0)
				continue; /* gone since the walk saw it */
			target[n] = '\0';
		} else if (S_ISREG(it.st.st_mode) && !it.whiteout) {
			g->fd = openat(it.dfd, it.base,
				       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
			if (g->fd < 0)
				continue; /* gone since the walk saw it */
			g->remaining = (uint64_t)it.st.st_size;
		}
		break;
	}
	g->pending = entry_str(it.name, &it.st, n >= 0 ? target : NULL);
	if (!g->pending)
		*err = ENOMEM;
	return g->pending != NULL;
}

int op_fs_mark(struct chan *ch, json_t *req)
{
	struct fsdiff *m = NULL;
	int r;

	if (ident_from_req(ch, req) < 0)
		return 0;
	/* Blocks the loop for the walk: a build's RUN sandbox runs nothing else meanwhile. */
	ident_enter(&ch->user);
	r = fsdiff_mark("/", 0, 0, &m);
	ident_leave();
	if (r < 0) {
		chan_fail(ch, -r, "fs_mark `/`: %s%s", strerror(-r),
			  r == -E2BIG ? " (more than the manifest's bound of entries or memory)"
				      : "");
		return 0;
	}
	fsdiff_free(mark);
	mark = m;
	chan_finish(ch, PROTO_RESULT, json_pack("{s:I}", "entries", (json_int_t)fsdiff_count(m)));
	return 0;
}

int op_fs_diff(struct chan *ch, json_t *req)
{
	struct getter *g = getter_new(ch, "fs_diff", diff_next);
	int r;

	if (!g)
		return 0;
	snprintf(g->path, sizeof(g->path), "/");
	if (ident_from_req(ch, req) < 0)
		return 0;
	if (!mark) {
		chan_fail(ch, EINVAL, "fs_diff: no fs_mark before it");
		return 0;
	}
	ident_enter(&ch->user);
	r = fsdiff_walk_new(mark, &g->diff);
	ident_leave();
	if (r < 0) {
		chan_fail(ch, -r, "fs_diff `/`: %s", strerror(-r));
		return 0;
	}
	get_pump(ch);
	return 0;
}

/* ---- tar_put ---- */

struct putter {
	int root;		       /* destination directory (O_PATH) */
	int fd;			       /* file receiving data, or -1 */
	uint64_t remaining;	       /* data bytes still expected for it */
	uint64_t entries;	       /* extracted so far */
	uint64_t bytes;		       /* file bytes written */
	char path[AGENT_MAX_PATH + 1]; /* destination, for messages */
};

/* Removes a non-directory at base so a new entry can take its place. */
static int replace_slot(int pfd, const char *base)
{
	struct stat st;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	return unlinkat(pfd, base, 0) < 0 ? -errno : 0;
}

/* Extracts one entry header; -errno with *what set on refusal. */
static int put_entry(struct putter *p, json_t *e, const char **what)
{
	char name[AGENT_MAX_PATH + 1], parent[AGENT_MAX_PATH + 1], tname[AGENT_MAX_PATH + 1];
	const char *type, *target, *base;
	json_int_t size, mode, mtime;
	cleanup_fd int pfd = -1;
	char *slash;
	int r, fd;

	/* UNTRUSTED: the entry comes from a client's archive; every field is checked */
	type = json_string_value(json_object_get(e, "type"));
	target = json_string_value(json_object_get(e, "target"));
	size = json_integer_value(json_object_get(e, "size"));
	mode = json_integer_value(json_object_get(e, "mode"));
	mtime = json_integer_value(json_object_get(e, "mtime"));
	*what = "entry";
	if (!type || size < 0 || mode < 0 || mode > 07777)
		return -EINVAL;
	*what = "name";
	if (safe_rel_name(json_string_value(json_object_get(e, "name")), name) < 0)
		return -EPERM;
	mode &= 01777;	/* setuid/setgid never survive extraction */
	if (!name[0]) { /* the destination itself */
		if (strcmp(type, "dir"))
			return -EINVAL;
		p->entries++;
		return 0;
	}
	slash = strrchr(name, '/');
	if (slash) {
		memcpy(parent, name, (size_t)(slash - name));
		parent[slash - name] = '\0';
		base = slash + 1;
	} else {
		parent[0] = '\0';
		base = name;
	}
	*what = "parent";
	pfd = safe_open_dir(p->root, parent, true);
	if (pfd < 0)
		return pfd == -ELOOP ? -EPERM : pfd;
	*what = "create";
	if (!strcmp(type, "dir")) {
		if (mkdirat(pfd, base, 0700) < 0 && errno != EEXIST)
			return -errno;
		fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOTDIR || errno == ELOOP ? -EPERM : -errno;
		fchmod(fd, (mode_t)(mode ? mode : 0755));
		close(fd);
	} else if (!strcmp(type, "file")) {
		r = replace_slot(pfd, base);
		if (r < 0)
			return r;
		fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		fchmod(fd, (mode_t)(mode ? mode : 0644));
		if (mtime > 0)
			futimens(fd, (struct timespec[2]){{.tv_nsec = UTIME_OMIT},
							  {.tv_sec = (time_t)mtime}});
		if (size > 0) {
			p->fd = fd;
			p->remaining = (uint64_t)size;
		} else {
			close(fd);
		}
	} else if (!strcmp(type, "symlink")) {
		if (!target || !*target || strlen(target) > AGENT_MAX_PATH)
			return -EINVAL;
		r = replace_slot(pfd, base);
		if (r < 0)
			return r;
		if (symlinkat(target, pfd, base) < 0)
			return -errno;
	} else if (!strcmp(type, "hardlink")) {
		cleanup_fd int tfd = -1;
		const char *tb;

		*what = "link target";
		/* the target must itself be inside the destination, reached without symlinks */
		if (!target || safe_rel_name(target, tname) < 0 || !tname[0])
			return -EPERM;
		slash = strrchr(tname, '/');
		if (slash) {
			*slash = '\0';
			tb = slash + 1;
		} else {
			tb = tname;
		}
		tfd = safe_open_dir(p->root, slash ? tname : "", false);
		if (tfd < 0)
			return tfd == -ELOOP ? -EPERM : tfd;
		r = replace_slot(pfd, base);
		if (r < 0)
			return r;
		if (linkat(tfd, tb, pfd, base, 0) < 0)
			return -errno;
	} else {
		*what = "type";
		return -EPERM; /* device nodes, fifos and anything else are refused */
	}
	p->entries++;
	return 0;
}

static int put_on_entry(struct chan *ch, json_t *e)
{
	struct putter *p = ch->state;
	const char *what = "";
	int r;

	if (p->remaining)
		return -EPROTO; /* isolad must send exactly `size` bytes per file */
	ident_enter(&ch->user);
	r = put_entry(p, e, &what);
	ident_leave();
	if (r < 0) {
		const char *n = json_string_value(json_object_get(e, "name"));

		chan_fail(ch, -r, "tar_put `%s`: entry `%.256s`: %s: %s", p->path, n ? n : "?",
			  what, strerror(-r));
	}
	return 0;
}

static int put_on_data(struct chan *ch, const uint8_t *buf, size_t len)
{
	struct putter *p = ch->state;
	int r;

	if (p->fd < 0 || len > p->remaining)
		return -EPROTO;
	r = util_write_all(p->fd, buf, len);
	if (r < 0) {
		chan_fail(ch, -r, "tar_put `%s`: write: %s", p->path, strerror(-r));
		return 0;
	}
	p->remaining -= len;
	p->bytes += len;
	if (!p->remaining) {
		close(p->fd);
		p->fd = -1;
	}
	chan_grant(ch, len);
	return 0;
}

static int put_on_eof(struct chan *ch)
{
	struct putter *p = ch->state;

	if (p->remaining)
		return -EPROTO;
	chan_finish(ch, PROTO_RESULT,
		    json_pack("{s:I,s:I}", "entries", (json_int_t)p->entries, "bytes",
			      (json_int_t)p->bytes));
	return 0;
}

static void put_release(struct chan *ch)
{
	struct putter *p = ch->state;

	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->root >= 0)
		close(p->root);
	free(p);
	ch->state = NULL;
}

static const struct chan_ops put_ops = {
	.data = put_on_data,
	.eof = put_on_eof,
	.entry = put_on_entry,
	.release = put_release,
};

int op_tar_put(struct chan *ch, json_t *req)
{
	struct putter *p = calloc(1, sizeof(*p));
	int e;

	if (!p) {
		chan_fail(ch, ENOMEM, "out of memory");
		return 0;
	}
	p->fd = p->root = -1;
	ch->state = p;
	ch->ops = &put_ops;
	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", p->path) < 0)
		return 0;
	ident_enter(&ch->user);
	/* the destination itself may be reached through symlinks: the user named it */
	p->root = safe_open_path(p->path, O_PATH | O_DIRECTORY, 0);
	e = p->root < 0 ? -p->root : 0;
	if (p->root < 0)
		p->root = -1;
	ident_leave();
	if (p->root < 0)
		chan_fail(ch, e, "tar_put `%s`: %s", p->path, strerror(e));
	return 0;
}
