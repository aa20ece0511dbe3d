/* SPDX-License-Identifier: Apache-2.0 */
/* files: stat, list, mkdir, rename, remove, read and write — run as the requesting user. */
#include "agent-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/proto.h"

#define LIST_MAX_DEPTH	 16
#define LIST_MAX_ENTRIES 20000

json_t *entry_json(const char *name, const char *path, const struct stat *st, const char *target)
{
	const char *type = "other";
	char owner[64], group[64];
	json_t *e;

	if (S_ISREG(st->st_mode))
		type = "file";
	else if (S_ISDIR(st->st_mode))
		type = "dir";
	else if (S_ISLNK(st->st_mode))
		type = "symlink";
	/* Owner and group names come from the sandbox's own /etc (never the host's); an id
	 * without an entry has no name and clients show the number. */
	if (users_id_name(ident_etc, false, (unsigned)st->st_uid, owner, sizeof(owner)) < 0)
		owner[0] = '\0';
	if (users_id_name(ident_etc, true, (unsigned)st->st_gid, group, sizeof(group)) < 0)
		group[0] = '\0';
	e = json_pack("{s:s,s:s,s:s,s:I,s:i,s:I,s:I,s:I,s:s?}", "name", name, "path", path, "type",
		      type, "size", (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777),
		      "uid", (json_int_t)st->st_uid, "gid", (json_int_t)st->st_gid, "mtime",
		      (json_int_t)st->st_mtim.tv_sec, "target", target);
	if (e && owner[0])
		json_object_set_new(e, "owner", json_string(owner));
	if (e && group[0])
		json_object_set_new(e, "group", json_string(group));
	return e;
}

/*
 * File metadata (E2B's `files.write(..., {metadata})`): kept as user.e2b.<key> xattrs on the
 * file itself, so it moves with a rename, goes with the file, and is carried by snapshots
 * (which keep user.* xattrs). Limits: META_MAX entries, keys of META_KEY_MAX bytes, values
 * of META_VALUE_MAX; isolad enforces the same ones before the request gets here.
 */
#define META_PREFIX	"user.e2b."
#define META_MAX	32
#define META_KEY_MAX	128
#define META_VALUE_MAX	1024
#define META_LIST_BYTES 8192

/* Adds "metadata" to entry e from path's user.e2b.* xattrs (regular files and directories
 * only: user xattrs do not exist on symlinks). Missing or unreadable xattrs add nothing. */
static void entry_add_metadata(json_t *e, const char *path, const struct stat *st)
{
	char names[META_LIST_BYTES], val[META_VALUE_MAX + 1];
	json_t *m;
	ssize_t n;

	if (!e || !(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)))
		return;
	n = llistxattr(path, names, sizeof(names));
	if (n <= 0)
		return;
	m = json_object();
	/* UNTRUSTED: xattrs inside the sandbox, which user code may set: bounded, and only
	 * printable ASCII keys and values are reported. */
	for (char *k = names; k < names + n && m && json_object_size(m) < META_MAX;
	     k += strlen(k) + 1) {
		const char *key = k + strlen(META_PREFIX);
		ssize_t vl;
		bool clean = true;

		if (strncmp(k, META_PREFIX, strlen(META_PREFIX)) || !*key ||
		    strlen(key) > META_KEY_MAX)
			continue;
		vl = lgetxattr(path, k, val, META_VALUE_MAX);
		if (vl < 0)
			continue;
		val[vl] = '\0';
		for (ssize_t i = 0; clean && i < vl; i++)
			clean = val[i] >= 0x20 && val[i] <= 0x7e;
		for (const char *c = key; clean && *c; c++)
			clean = *c > 0x20 && *c < 0x7f;
		if (clean)
			json_object_set_new(m, key, json_string(val));
	}
	if (m && json_object_size(m))
		json_object_set_new(e, "metadata", m);
	else
		json_decref(m);
}

/* Stats path (not following a final symlink) into an entry; -errno. */
static int stat_entry(const char *path, json_t **out)
{
	char target[AGENT_MAX_PATH + 1];
	cleanup_free char *copy = strdup(path);
	struct stat st;
	ssize_t n = -1;

	if (!copy)
		return -ENOMEM;
	if (lstat(path, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode)) {
		n = readlink(path, target, sizeof(target) - 1);
		if (n >= 0)
			target[n] = '\0';
	}
	*out = entry_json(basename(copy), path, &st, n >= 0 ? target : NULL);
	entry_add_metadata(*out, path, &st);
	return *out ? 0 : -ENOMEM;
}

/* Runs a one-shot op as the channel's user and answers with the entry of `path`. */
static void reply_entry(struct chan *ch, const char *path)
{
	json_t *e = NULL;
	int r = stat_entry(path, &e);

	if (r < 0)
		chan_fail(ch, -r, "stat `%s`: %s", path, strerror(-r));
	else
		chan_finish(ch, PROTO_RESULT, e);
}

int op_stat(struct chan *ch, json_t *req)
{
	char path[AGENT_MAX_PATH + 1];

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", path) < 0)
		return 0;
	ident_enter(&ch->user);
	reply_entry(ch, path);
	ident_leave();
	return 0;
}

/* ---- list ---- */

struct lister {
	json_t *entries; /* result array */
	size_t used;	 /* serialized bytes so far */
	bool truncated;	 /* hit the frame or entry limit */
};

static int list_dir(struct lister *l, int dfd, const char *path, const char *rel, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return -errno;
	}
	while (!l->truncated && (de = readdir(d))) {
		char p[AGENT_MAX_PATH + 1], r[AGENT_MAX_PATH + 1], target[AGENT_MAX_PATH + 1];
		struct stat st;
		ssize_t n = -1;
		json_t *e;
		char *s;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", strcmp(path, "/") ? path : "",
				     de->d_name) >= sizeof(p) ||
		    (size_t)snprintf(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
			    sizeof(r))
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
			if (n >= 0)
				target[n] = '\0';
		}
		e = entry_json(r, p, &st, n >= 0 ? target : NULL);
		entry_add_metadata(e, p, &st);
		s = e ? json_dumps(e, JSON_COMPACT) : NULL;
		if (!s || l->used + strlen(s) + 1 > PROTO_MAX_JSON - 128 ||
		    json_array_size(l->entries) >= LIST_MAX_ENTRIES) {
			l->truncated = true;
			free(s);
			json_decref(e);
			break;
		}
		l->used += strlen(s) + 1;
		free(s);
		json_array_append_new(l->entries, e);
		if (S_ISDIR(st.st_mode) && depth > 1) {
			int fd = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0)
				list_dir(l, fd, p, r, depth - 1);
		}
	}
	closedir(d);
	return 0;
}

int op_list(struct chan *ch, json_t *req)
{
	struct lister l = {.used = 64};
	char path[AGENT_MAX_PATH + 1];
	int64_t depth;
	int fd, r;

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", path) < 0 ||
	    req_int(ch, req, "depth", 1, 1, LIST_MAX_DEPTH, &depth) < 0)
		return 0;
	ident_enter(&ch->user);
	fd = safe_open_path(path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0) {
		r = -fd;
		ident_leave();
		chan_fail(ch, r, "list `%s`: %s", path, strerror(r));
		return 0;
	}
	l.entries = json_array();
	r = l.entries ? list_dir(&l, fd, path, "", (int)depth) : -ENOMEM;
	ident_leave();
	if (r < 0) {
		json_decref(l.entries);
		chan_fail(ch, -r, "list `%s`: %s", path, strerror(-r));
		return 0;
	}
	chan_finish(ch, PROTO_RESULT,
		    json_pack("{s:o,s:b}", "entries", l.entries, "truncated", l.truncated));
	return 0;
}

/* ---- mkdir, rename, remove ---- */

static int mkdir_parents(char *path, mode_t mode)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, mode) < 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, mode) < 0) {
		struct stat st;

		if (errno != EEXIST)
			return -errno;
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	return 0;
}

int op_mkdir(struct chan *ch, json_t *req)
{
	char path[AGENT_MAX_PATH + 1];
	int64_t mode;
	bool parents;
	int r = 0;

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", path) < 0 ||
	    req_int(ch, req, "mode", 0755, 0, 0777, &mode) < 0 ||
	    req_bool(ch, req, "parents", false, &parents) < 0)
		return 0;
	ident_enter(&ch->user);
	if (parents)
		r = mkdir_parents(path, (mode_t)mode);
	else if (mkdir(path, (mode_t)mode) < 0)
		r = -errno;
	if (r < 0)
		chan_fail(ch, -r, "mkdir `%s`: %s", path, strerror(-r));
	else
		reply_entry(ch, path);
	ident_leave();
	return 0;
}

int op_rename(struct chan *ch, json_t *req)
{
	char from[AGENT_MAX_PATH + 1], to[AGENT_MAX_PATH + 1];
	bool overwrite;
	int r = 0;

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "from", from) < 0 ||
	    req_path(ch, req, "to", to) < 0 ||
	    req_bool(ch, req, "overwrite", false, &overwrite) < 0)
		return 0;
	ident_enter(&ch->user);
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
		r = -errno;
		if (r == -EINVAL && !overwrite) { /* filesystem without RENAME_NOREPLACE */
			struct stat st;

			if (lstat(to, &st) == 0)
				r = -EEXIST;
			else if (rename(from, to) == 0)
				r = 0;
			else
				r = -errno;
		}
	}
	if (r < 0)
		chan_fail(ch, -r, "rename `%s` to `%s`: %s", from, to, strerror(-r));
	else
		reply_entry(ch, to);
	ident_leave();
	return 0;
}

int op_remove(struct chan *ch, json_t *req)
{
	char path[AGENT_MAX_PATH + 1];
	struct stat st;
	bool recursive;
	int r = 0;

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", path) < 0 ||
	    req_bool(ch, req, "recursive", false, &recursive) < 0)
		return 0;
	if (!strcmp(path, "/")) {
		chan_fail(ch, EPERM, "remove `/`: refused");
		return 0;
	}
	ident_enter(&ch->user);
	if (lstat(path, &st) < 0)
		r = -errno;
	else if (!S_ISDIR(st.st_mode))
		r = unlink(path) < 0 ? -errno : 0;
	else if (recursive)
		r = util_rm_rf(path); /* never follows symlinks, never crosses a mount */
	else
		r = rmdir(path) < 0 ? -errno : 0;
	ident_leave();
	if (r < 0)
		chan_fail(ch, -r, "remove `%s`: %s", path, strerror(-r));
	else
		chan_finish(ch, PROTO_RESULT, json_object());
	return 0;
}

/* ---- read ---- */

struct reader {
	int fd;		    /* open file */
	uint64_t remaining; /* bytes still to send, UINT64_MAX = to EOF */
};

static void read_pump(struct chan *ch)
{
	struct reader *rd = ch->state;
	uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t room;

	while ((room = chan_room(ch)) > 0) {
		ssize_t n;

		if (rd->remaining < room)
			room = (size_t)rd->remaining;
		n = room ? read(rd->fd, buf, room) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			chan_fail(ch, errno, "read: %s", strerror(errno));
			return;
		}
		if (n == 0) {
			chan_finish(ch, PROTO_EOF, NULL);
			return;
		}
		if (rd->remaining != UINT64_MAX)
			rd->remaining -= (uint64_t)n;
		chan_send_data(ch, PROTO_STDOUT, buf, (size_t)n);
	}
}

static void read_release(struct chan *ch)
{
	struct reader *rd = ch->state;

	if (rd) {
		close(rd->fd);
		free(rd);
		ch->state = NULL;
	}
}

static const struct chan_ops read_ops = {.pump = read_pump, .release = read_release};

int op_read(struct chan *ch, json_t *req)
{
	char path[AGENT_MAX_PATH + 1];
	int64_t offset, length;
	struct reader *rd;
	struct stat st;
	int fd, e;

	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", path) < 0 ||
	    req_int(ch, req, "offset", 0, 0, INT64_MAX, &offset) < 0 ||
	    req_int(ch, req, "length", -1, -1, INT64_MAX, &length) < 0)
		return 0;
	ident_enter(&ch->user);
	/* O_NONBLOCK: a FIFO planted at the path must not block PID 1 */
	fd = safe_open_path(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
	e = fd < 0 ? -fd : 0;
	ident_leave();
	if (fd < 0) {
		chan_fail(ch, e, "open `%s`: %s", path, strerror(e));
		return 0;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		chan_fail(ch, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
			  "read `%s`: not a regular file", path);
		return 0;
	}
	if (offset && lseek(fd, (off_t)offset, SEEK_SET) < 0) {
		e = errno;
		close(fd);
		chan_fail(ch, e, "seek `%s`: %s", path, strerror(e));
		return 0;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		close(fd);
		chan_fail(ch, ENOMEM, "out of memory");
		return 0;
	}
	rd->fd = fd;
	rd->remaining = length < 0 ? UINT64_MAX : (uint64_t)length;
	ch->state = rd;
	ch->ops = &read_ops;
	chan_send_json(ch, PROTO_RESULT,
		       json_pack("{s:I,s:i,s:I}", "size", (json_int_t)st.st_size, "mode",
				 (int)(st.st_mode & 07777), "mtime",
				 (json_int_t)st.st_mtim.tv_sec));
	read_pump(ch);
	return 0;
}

/* ---- write ---- */

struct writer {
	int fd;			       /* temp file (or target when appending) */
	bool append;		       /* writing the target in place */
	mode_t mode;		       /* final mode */
	uint64_t size;		       /* bytes written */
	char path[AGENT_MAX_PATH + 1]; /* target */
	char tmp[AGENT_MAX_PATH + 32]; /* temp name, "" once renamed */
	json_t *metadata;	       /* {key: value} to store as xattrs, or NULL */
};

static void write_release(struct chan *ch)
{
	struct writer *w = ch->state;

	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp[0]) {
		ident_enter(&ch->user);
		unlink(w->tmp);
		ident_leave();
	}
	json_decref(w->metadata);
	free(w);
	ch->state = NULL;
}

/* Checks the request's "metadata" ({key: value}, strings) into w->metadata. 0 or -1 after
 * answering. */
static int write_metadata_req(struct chan *ch, json_t *req, struct writer *w)
{
	json_t *m = json_object_get(req, "metadata"), *v;
	const char *k;

	if (!m || json_is_null(m))
		return 0;
	/* UNTRUSTED: checked like every request field (isolad checked it too). */
	if (!json_is_object(m) || json_object_size(m) > META_MAX) {
		chan_fail(ch, EINVAL, "field `metadata` must be an object of at most %d strings",
			  META_MAX);
		return -1;
	}
	json_object_foreach(m, k, v)
	{
		size_t vl = json_string_length(v);

		if (!json_is_string(v) || !*k || strlen(k) > META_KEY_MAX || strchr(k, '/') ||
		    vl > META_VALUE_MAX || memchr(json_string_value(v), '\0', vl)) {
			chan_fail(ch, EINVAL,
				  "metadata `%.64s`: key of 1-%d bytes and a string "
				  "value of at most %d bytes",
				  k, META_KEY_MAX, META_VALUE_MAX);
			return -1;
		}
	}
	w->metadata = json_incref(m);
	return 0;
}

/* Stores w->metadata on the written file as user.e2b.<key> xattrs. -errno. */
static int write_metadata(struct writer *w)
{
	char name[sizeof(META_PREFIX) + META_KEY_MAX];
	const char *k;
	json_t *v;

	json_object_foreach(w->metadata, k, v)
	{
		snprintf(name, sizeof(name), META_PREFIX "%s", k);
		if (fsetxattr(w->fd, name, json_string_value(v), json_string_length(v), 0) < 0)
			return -errno;
	}
	return 0;
}

static int write_data(struct chan *ch, const uint8_t *buf, size_t len)
{
	struct writer *w = ch->state;
	int r = util_write_all(w->fd, buf, len);

	if (r < 0) {
		chan_fail(ch, -r, "write `%s`: %s", w->path, strerror(-r));
		return 0;
	}
	w->size += len;
	chan_grant(ch, len);
	return 0;
}

/*
 * Ends a write: mode and metadata on the temp file, then the rename over the target
 * (readers see the old file or the new one, never a mix). No fsync: the writable layer
 * outlives neither the sandbox nor a host crash (docs/process-tier.md, "nobarrier"), and
 * whatever persists the sandbox reads or captures the files with the page cache (the process
 * tier's layer archive walks the mount; the microvm tier's snapshot takes guest RAM with the
 * disk), so a flush here would only cost the caller a synchronous disk write. RESULT is the
 * written file's entry, as stat answers it, taken as the request's user after the rename; if
 * that stat fails (something in the sandbox removed the file already), the write still
 * succeeded and answers {path,size}.
 */
static int write_eof(struct chan *ch)
{
	struct writer *w = ch->state;
	json_t *e = NULL;
	int r = 0;

	if (!w->append && fchmod(w->fd, w->mode) < 0)
		r = -errno;
	if (!r && w->metadata && (r = write_metadata(w)) < 0) {
		chan_fail(ch, -r, "write `%s`: store metadata as xattrs: %s", w->path,
			  strerror(-r));
		return 0;
	}
	ident_enter(&ch->user);
	if (!r && !w->append) {
		if (rename(w->tmp, w->path) < 0)
			r = -errno;
		else
			w->tmp[0] = '\0';
	}
	if (!r && stat_entry(w->path, &e) < 0)
		e = NULL;
	ident_leave();
	if (r < 0) {
		chan_fail(ch, -r, "write `%s`: %s", w->path, strerror(-r));
		return 0;
	}
	if (!e)
		e = json_pack("{s:s,s:I}", "path", w->path, "size", (json_int_t)w->size);
	chan_finish(ch, PROTO_RESULT, e);
	return 0;
}

static const struct chan_ops write_ops = {
	.data = write_data,
	.eof = write_eof,
	.release = write_release,
};

/* `parents`: the missing directories above path, made as the request's user (mode 0755, as
 * envd does before an upload). What fails here is left for the file's open to report. */
static void write_parents(const char *path)
{
	char dir[AGENT_MAX_PATH + 1];
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
		return;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	mkdir_parents(dir, 0755);
}

int op_write(struct chan *ch, json_t *req)
{
	struct writer *w;
	int64_t mode;
	bool append, parents;
	uint32_t rnd = 0;
	struct stat st;
	char *slash;
	int e;

	w = calloc(1, sizeof(*w));
	if (!w) {
		chan_fail(ch, ENOMEM, "out of memory");
		return 0;
	}
	w->fd = -1;
	ch->state = w;
	ch->ops = &write_ops; /* release frees w on every path below */
	if (ident_from_req(ch, req) < 0 || req_path(ch, req, "path", w->path) < 0 ||
	    req_int(ch, req, "mode", 0644, 0, 0777, &mode) < 0 ||
	    req_bool(ch, req, "append", false, &append) < 0 ||
	    req_bool(ch, req, "parents", false, &parents) < 0 || write_metadata_req(ch, req, w) < 0)
		return 0;
	w->mode = (mode_t)mode;
	w->append = append;
	ident_enter(&ch->user);
	if (parents)
		write_parents(w->path);
	if (append) {
		w->fd = safe_open_path(
			w->path, O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_NONBLOCK, w->mode);
		if (w->fd < 0) {
			errno = -w->fd;
			w->fd = -1;
		}
	} else {
		util_random(&rnd, sizeof(rnd));
		slash = strrchr(w->path, '/');
		snprintf(w->tmp, sizeof(w->tmp), "%.*s/.isola-%08x.tmp", (int)(slash - w->path),
			 w->path, rnd);
		w->fd = safe_open_path(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		if (w->fd < 0) {
			errno = -w->fd;
			w->fd = -1;
			w->tmp[0] = '\0';
		}
	}
	e = errno;
	ident_leave();
	if (w->fd < 0) {
		chan_fail(ch, e, "write `%s`: %s", w->path, strerror(e));
		return 0;
	}
	if (fstat(w->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		chan_fail(ch, EINVAL, "write `%s`: not a regular file", w->path);
		return 0;
	}
	return 0;
}
