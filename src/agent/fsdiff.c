/* SPDX-License-Identifier: Apache-2.0 */
/* fsdiff: a manifest of a filesystem tree and the OCI-layer view of what changed since. */
#include "fsdiff.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the second walk found at a recorded name. */
enum rec_state {
	REC_UNSEEN, /* not there (removed, or its type is no longer kept) */
	REC_KEPT,   /* the same directory (inode) is still there */
	REC_OTHER,  /* something is there */
};

struct rec {
	uint64_t ino, size;	    /* st_ino, st_size */
	int64_t ctime_ns, mtime_ns; /* st_ctim, st_mtim */
	uint32_t mode, uid, gid;    /* st_mode (type included), owner */
	uint8_t state;		    /* enum rec_state, set by the second walk */
	char name[];		    /* relative to the root, NUL-terminated */
};

struct fsdiff {
	char root[FSDIFF_MAX_NAME + 1];	 /* the walked tree */
	dev_t dev;			 /* its filesystem: entries elsewhere are skipped */
	struct rec **tab;		 /* open-addressing table of records, NULL = empty */
	size_t cap, n;			 /* slots (a power of two), records */
	uint64_t bytes;			 /* memory taken so far */
	uint64_t max_entries, max_bytes; /* bounds */
};

/* ---- the tree walk both passes share ---- */

struct frame {
	DIR *d;		/* open directory */
	size_t prefix;	/* length of its name in walker.name ("" for the root) */
	struct stat st; /* its metadata */
	bool emitted;	/* fsdiff_walk: yielded already */
	bool force;	/* fsdiff_walk: replaced; everything below it is yielded */
};

struct walker {
	struct frame stack[FSDIFF_MAX_DEPTH + 1]; /* stack[0] is the root */
	int depth;				  /* frames in use */
	dev_t dev;				  /* the root's filesystem */
	char name[FSDIFF_MAX_NAME + 1];		  /* name of the current entry */
};

static int walker_open(struct walker *w, const char *root)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &w->stack[0].st) < 0 || !(w->stack[0].d = fdopendir(fd))) {
		int e = errno;

		close(fd);
		return -e;
	}
	w->dev = w->stack[0].st.st_dev;
	w->stack[0].prefix = 0;
	w->stack[0].emitted = true; /* the root itself is never a layer member */
	w->depth = 1;
	w->name[0] = '\0';
	return 0;
}

static void walker_close(struct walker *w)
{
	while (w->depth > 0)
		closedir(w->stack[--w->depth].d);
}

static bool kept_type(mode_t m)
{
	return S_ISREG(m) || S_ISDIR(m) || S_ISLNK(m);
}

/* The next entry below the root, pre-order: 1 with w->name, *st, *dfd, *base set (*pushed:
 * it is a directory now on top of the stack), 0 at the end. Skips other filesystems,
 * devices, fifos and sockets, names longer than FSDIFF_MAX_NAME, and entries it cannot
 * stat; does not enter directories below FSDIFF_MAX_DEPTH or ones it cannot open. */
static int walker_next(struct walker *w, struct stat *st, int *dfd, const char **base, bool *pushed)
{
	*pushed = false;
	while (w->depth > 0) {
		struct frame *f = &w->stack[w->depth - 1];
		struct dirent *de = readdir(f->d);
		size_t at = f->prefix ? f->prefix + 1 : 0, l;

		if (!de) {
			closedir(f->d);
			w->depth--;
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		l = strlen(de->d_name);
		if (at + l > FSDIFF_MAX_NAME)
			continue;
		if (fstatat(dirfd(f->d), de->d_name, st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st->st_dev != w->dev || !kept_type(st->st_mode))
			continue;
		if (f->prefix)
			w->name[f->prefix] = '/';
		memcpy(w->name + at, de->d_name, l + 1);
		*dfd = dirfd(f->d);
		*base = w->name + at;
		if (S_ISDIR(st->st_mode) && w->depth <= FSDIFF_MAX_DEPTH) {
			int fd = openat(*dfd, de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

			if (d) {
				struct frame *n = &w->stack[w->depth++];

				memset(n, 0, sizeof(*n));
				n->d = d;
				n->prefix = at + l;
				n->st = *st;
				*pushed = true;
			} else if (fd >= 0) {
				close(fd);
			}
		}
		return 1;
	}
	return 0;
}

/* ---- the manifest ---- */

static uint64_t hash_name(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static struct rec **slot_of(const struct fsdiff *m, const char *name)
{
	size_t i = (size_t)hash_name(name) & (m->cap - 1);

	while (m->tab[i] && strcmp(m->tab[i]->name, name))
		i = (i + 1) & (m->cap - 1);
	return &m->tab[i];
}

static struct rec *lookup(const struct fsdiff *m, const char *name)
{
	return *slot_of(m, name);
}

static int grow(struct fsdiff *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	struct rec **old = m->tab;
	size_t ocap = m->cap;

	if (m->bytes + cap * sizeof(*old) > m->max_bytes)
		return -E2BIG;
	m->tab = calloc(cap, sizeof(*old));
	if (!m->tab) {
		m->tab = old;
		return -ENOMEM;
	}
	m->cap = cap;
	m->bytes += cap * sizeof(*old);
	for (size_t i = 0; i < ocap; i++)
		if (old[i])
			*slot_of(m, old[i]->name) = old[i];
	m->bytes -= ocap * sizeof(*old);
	free(old);
	return 0;
}

static int64_t ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void rec_fill(struct rec *r, const struct stat *st)
{
	r->ino = st->st_ino;
	r->size = S_ISREG(st->st_mode) || S_ISLNK(st->st_mode) ? (uint64_t)st->st_size : 0;
	r->ctime_ns = ns(st->st_ctim);
	r->mtime_ns = ns(st->st_mtim);
	r->mode = st->st_mode;
	r->uid = st->st_uid;
	r->gid = st->st_gid;
	r->state = REC_UNSEEN;
}

static bool rec_differs(const struct rec *r, const struct stat *st)
{
	struct rec now;

	rec_fill(&now, st);
	return now.ino != r->ino || now.size != r->size || now.ctime_ns != r->ctime_ns ||
	       now.mtime_ns != r->mtime_ns || now.mode != r->mode || now.uid != r->uid ||
	       now.gid != r->gid;
}

static int add(struct fsdiff *m, const char *name, const struct stat *st)
{
	size_t l = strlen(name);
	struct rec *r, **s;
	int e;

	if (m->n >= m->max_entries || m->bytes + sizeof(*r) + l + 1 > m->max_bytes)
		return -E2BIG;
	if ((m->n + 1) * 2 > m->cap && (e = grow(m)) < 0)
		return e;
	r = malloc(sizeof(*r) + l + 1);
	if (!r)
		return -ENOMEM;
	rec_fill(r, st);
	memcpy(r->name, name, l + 1);
	s = slot_of(m, name);
	if (*s) { /* cannot happen in one walk; keep the newer */
		free(*s);
		m->n--;
	}
	*s = r;
	m->n++;
	m->bytes += sizeof(*r) + l + 1;
	return 0;
}

int fsdiff_mark(const char *root, uint64_t max_entries, uint64_t max_bytes, struct fsdiff **out)
{
	struct fsdiff *m = calloc(1, sizeof(*m));
	struct walker *w = calloc(1, sizeof(*w));
	struct stat st;
	const char *base;
	bool pushed;
	int dfd, r;

	*out = NULL;
	if (!m || !w) {
		free(m);
		free(w);
		return -ENOMEM;
	}
	m->max_entries = max_entries ? max_entries : FSDIFF_MAX_ENTRIES;
	m->max_bytes = max_bytes ? max_bytes : FSDIFF_MAX_BYTES;
	if (strlen(root) > FSDIFF_MAX_NAME) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	snprintf(m->root, sizeof(m->root), "%s", root);
	r = grow(m);
	if (r == 0)
		r = walker_open(w, root);
	if (r < 0)
		goto fail;
	m->dev = w->dev;
	while ((r = walker_next(w, &st, &dfd, &base, &pushed)) > 0)
		if ((r = add(m, w->name, &st)) < 0)
			break;
	walker_close(w);
	if (r < 0)
		goto fail;
	free(w);
	*out = m;
	return 0;
fail:
	free(w);
	fsdiff_free(m);
	return r;
}

size_t fsdiff_count(const struct fsdiff *m)
{
	return m ? m->n : 0;
}

void fsdiff_free(struct fsdiff *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->cap; i++)
		free(m->tab[i]);
	free(m->tab);
	free(m);
}

/* ---- the second walk ---- */

struct fsdiff_walk {
	struct fsdiff *m;		/* the manifest (borrowed) */
	struct walker w;		/* the tree walk */
	bool walked;			/* the tree walk is over: whiteouts now */
	size_t scan;			/* whiteouts: next table slot */
	bool pending;			/* the current entry is to be yielded */
	int anc;			/* frames below this index are its ancestors */
	bool opq;			/* yield `.wh..wh..opq` after it */
	struct stat st;			/* the current entry */
	int dfd;			/* its directory */
	const char *base;		/* its name there */
	bool is_top;			/* it is the top frame (a directory entered) */
	char out[FSDIFF_MAX_NAME + 16]; /* names built for ancestors and whiteouts */
};

int fsdiff_walk_new(struct fsdiff *m, struct fsdiff_walk **out)
{
	struct fsdiff_walk *w = calloc(1, sizeof(*w));
	int r;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->m = m;
	r = walker_open(&w->w, m->root);
	if (r == 0 && w->w.dev != m->dev) {
		walker_close(&w->w);
		r = -EXDEV; /* another filesystem is mounted there now */
	}
	if (r < 0) {
		free(w);
		return r;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->tab[i])
			m->tab[i]->state = REC_UNSEEN;
	*out = w;
	return 0;
}

/* Sorts the entry just walked: recorded state, and whether it is yielded. */
static void classify(struct fsdiff_walk *w, bool pushed)
{
	struct walker *k = &w->w;
	struct frame *parent = &k->stack[k->depth - (pushed ? 2 : 1)];
	struct rec *r = lookup(w->m, k->name);
	bool replaced =
		r && (r->ino != w->st.st_ino || (r->mode & S_IFMT) != (w->st.st_mode & S_IFMT));

	if (r)
		r->state = S_ISDIR(w->st.st_mode) && !replaced ? REC_KEPT : REC_OTHER;
	w->is_top = pushed;
	if (pushed)
		k->stack[k->depth - 1].force = parent->force || (replaced && S_ISDIR(r->mode));
	if (!parent->force && r && !rec_differs(r, &w->st))
		return;
	w->pending = true;
	w->anc = k->depth - (pushed ? 1 : 0);
	/* A directory that took the place of another: the lower one's content must go. Below
	 * a forced parent its own marker already removed everything. */
	w->opq = pushed && !parent->force && replaced && S_ISDIR(r->mode);
}

/* The whiteout of removed record r, or false when its parent covers it. */
static bool whiteout_of(struct fsdiff_walk *w, const struct rec *r)
{
	const char *slash = strrchr(r->name, '/');
	const struct rec *p;

	if (slash) {
		size_t pl = (size_t)(slash - r->name);

		memcpy(w->out, r->name, pl);
		w->out[pl] = '\0';
		p = lookup(w->m, w->out);
		if (!p || p->state != REC_KEPT)
			return false;
		snprintf(w->out + pl, sizeof(w->out) - pl, "/.wh.%s", slash + 1);
	} else {
		snprintf(w->out, sizeof(w->out), ".wh.%s", r->name);
	}
	return strlen(w->out) <= FSDIFF_MAX_NAME;
}

static void marker(struct fsdiff_item *it, const char *name)
{
	memset(it, 0, sizeof(*it));
	it->name = name;
	it->st.st_mode = S_IFREG;
	it->dfd = -1;
	it->whiteout = true;
}

int fsdiff_walk_next(struct fsdiff_walk *w, struct fsdiff_item *it)
{
	struct walker *k = &w->w;
	bool pushed;
	int r;

	for (;;) {
		if (w->pending) {
			/* parents first: the applier creates what a member needs anyway, but
			 * with default metadata */
			for (int i = 1; i < w->anc; i++) {
				struct frame *f = &k->stack[i];

				if (f->emitted)
					continue;
				f->emitted = true;
				memcpy(w->out, k->name, f->prefix);
				w->out[f->prefix] = '\0';
				memset(it, 0, sizeof(*it));
				it->name = w->out;
				it->st = f->st;
				it->dfd = -1;
				it->base = "";
				return 1;
			}
			w->pending = false;
			if (w->is_top)
				k->stack[k->depth - 1].emitted = true;
			memset(it, 0, sizeof(*it));
			it->name = k->name;
			it->st = w->st;
			it->dfd = w->dfd;
			it->base = w->base;
			return 1;
		}
		if (w->opq) {
			w->opq = false;
			snprintf(w->out, sizeof(w->out), "%s/.wh..wh..opq", k->name);
			marker(it, w->out);
			return 1;
		}
		if (!w->walked) {
			r = walker_next(k, &w->st, &w->dfd, &w->base, &pushed);
			if (r < 0)
				return r;
			if (r == 0) {
				w->walked = true;
				continue;
			}
			classify(w, pushed);
			continue;
		}
		while (w->scan < w->m->cap) {
			const struct rec *rc = w->m->tab[w->scan++];

			if (rc && rc->state == REC_UNSEEN && whiteout_of(w, rc)) {
				marker(it, w->out);
				return 1;
			}
		}
		return 0;
	}
}

void fsdiff_walk_free(struct fsdiff_walk *w)
{
	if (!w)
		return;
	walker_close(&w->w);
	free(w);
}
