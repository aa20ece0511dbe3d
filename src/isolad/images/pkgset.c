/* SPDX-License-Identifier: Apache-2.0 */
/* pkgset: dpkg's status file parsed, and the Depends/Pre-Depends closure of a few packages. */
#include "pkgset.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#define FIELD_MAX (64u << 10)

struct pkg {
	char *name;	/* Package (owned) */
	char *arch;	/* Architecture, "" when absent (owned) */
	char *deps;	/* Pre-Depends ", " Depends (owned) */
	char *provides; /* Provides (owned) */
	bool essential; /* Essential: yes */
	bool marked;	/* in the closure */
};

struct pkgset {
	struct pkg *v; /* sorted by name after parsing */
	size_t n;      /* used entries */
	size_t cap;    /* allocated entries */
};

static char *dupn(const char *s, size_t n)
{
	char *d;

	if (n > FIELD_MAX)
		n = FIELD_MAX;
	d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* Appends ", " + s[0..n) to *dst (a heap string or NULL). */
static int append(char **dst, const char *s, size_t n)
{
	size_t have = *dst ? strlen(*dst) : 0;
	char *d;

	if (n > FIELD_MAX)
		n = FIELD_MAX;
	d = realloc(*dst, have + n + 3);
	if (!d)
		return -ENOMEM;
	if (have)
		memcpy(d + have, ", ", 2), have += 2;
	memcpy(d + have, s, n);
	d[have + n] = '\0';
	*dst = d;
	return 0;
}

static void pkg_fini(struct pkg *k)
{
	free(k->name);
	free(k->arch);
	free(k->deps);
	free(k->provides);
	memset(k, 0, sizeof(*k));
}

/* One stanza's fields as they are read. */
struct stanza {
	struct pkg k;	/* what becomes the package */
	bool installed; /* Status: ... installed */
};

static int finish(struct pkgset *p, struct stanza *s)
{
	int r = 0;

	if (s->installed && s->k.name && s->k.name[0]) {
		if (p->n == PKGSET_MAX) {
			r = -E2BIG;
		} else if (p->n == p->cap) {
			size_t cap = p->cap ? p->cap * 2 : 256;
			struct pkg *v = realloc(p->v, cap * sizeof(*v));

			if (!v)
				r = -ENOMEM;
			else
				p->v = v, p->cap = cap;
		}
		if (r == 0) {
			if (!s->k.arch)
				s->k.arch = strdup("");
			if (!s->k.arch)
				r = -ENOMEM;
		}
		if (r == 0) {
			p->v[p->n++] = s->k;
			memset(&s->k, 0, sizeof(s->k));
		}
	}
	pkg_fini(&s->k);
	s->installed = false;
	return r;
}

static bool field_is(const char *line, size_t klen, const char *name)
{
	return strlen(name) == klen && !strncasecmp(line, name, klen);
}

/* One `Key: value` line (continuation lines never matter for the fields kept). */
static int field(struct stanza *s, const char *line, size_t len)
{
	const char *colon = memchr(line, ':', len);
	const char *v;
	size_t klen, vlen;

	if (!colon)
		return 0;
	klen = (size_t)(colon - line);
	v = colon + 1;
	vlen = len - klen - 1;
	while (vlen && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t' || v[vlen - 1] == '\r'))
		vlen--;
	if (field_is(line, klen, "Package")) {
		free(s->k.name);
		s->k.name = dupn(v, vlen);
		return s->k.name ? 0 : -ENOMEM;
	}
	if (field_is(line, klen, "Architecture")) {
		free(s->k.arch);
		s->k.arch = dupn(v, vlen);
		return s->k.arch ? 0 : -ENOMEM;
	}
	if (field_is(line, klen, "Status")) {
		s->installed = vlen >= 10 && !memcmp(v + vlen - 10, " installed", 10);
		return 0;
	}
	if (field_is(line, klen, "Essential")) {
		s->k.essential = vlen == 3 && !strncasecmp(v, "yes", 3);
		return 0;
	}
	if (field_is(line, klen, "Depends") || field_is(line, klen, "Pre-Depends"))
		return append(&s->k.deps, v, vlen);
	if (field_is(line, klen, "Provides"))
		return append(&s->k.provides, v, vlen);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct pkg *)a)->name, ((const struct pkg *)b)->name);
}

int pkgset_parse(const char *status, size_t len, struct pkgset **out)
{
	struct pkgset *p = calloc(1, sizeof(*p));
	struct stanza s;
	size_t off = 0;
	int r = 0;

	if (!p)
		return -ENOMEM;
	memset(&s, 0, sizeof(s));
	while (r == 0 && off < len) {
		const char *line = status + off;
		const char *nl = memchr(line, '\n', len - off);
		size_t l = nl ? (size_t)(nl - line) : len - off;

		off += l + (nl ? 1 : 0);
		if (l == 0 || (l == 1 && line[0] == '\r'))
			r = finish(p, &s);
		else if (line[0] != ' ' && line[0] != '\t')
			r = field(&s, line, l);
	}
	if (r == 0)
		r = finish(p, &s);
	pkg_fini(&s.k);
	if (r < 0) {
		pkgset_free(p);
		return r;
	}
	if (p->n)
		qsort(p->v, p->n, sizeof(p->v[0]), by_name);
	*out = p;
	return 0;
}

static struct pkg *find(struct pkgset *p, const char *name)
{
	struct pkg key = {.name = (char *)name};

	return p->n ? bsearch(&key, p->v, p->n, sizeof(p->v[0]), by_name) : NULL;
}

/* Whether a comma-separated Provides list names `name` (versions and spaces ignored). */
static bool provides(const char *list, const char *name)
{
	size_t nl = strlen(name);

	for (const char *s = list; s && *s;) {
		size_t l;

		while (*s == ' ' || *s == ',' || *s == '\t')
			s++;
		l = strcspn(s, " (,:\t");
		if (l == nl && !strncmp(s, name, nl))
			return true;
		s += strcspn(s, ",");
	}
	return false;
}

/* The installed package `name` names (itself, else its first installed provider), or NULL. */
static struct pkg *resolve(struct pkgset *p, const char *name)
{
	struct pkg *k = find(p, name);

	for (size_t i = 0; !k && i < p->n; i++)
		if (p->v[i].provides && provides(p->v[i].provides, name))
			k = &p->v[i];
	return k;
}

/* Marks k and pushes it on the stack (sized p->n: each package is pushed once). */
static void mark(struct pkg *k, struct pkg **stack, size_t *top)
{
	if (!k || k->marked)
		return;
	k->marked = true;
	stack[(*top)++] = k;
}

/* Marks one dependency group `a (>= 1) | b:any | c [amd64]` (group points at it, len long). */
static void mark_group(struct pkgset *p, const char *group, size_t len, struct pkg **stack,
		       size_t *top)
{
	size_t off = 0;

	while (off < len) {
		const char *alt = group + off;
		const char *bar = memchr(alt, '|', len - off);
		size_t al = bar ? (size_t)(bar - alt) : len - off;
		char name[256];
		size_t nl;

		off += al + (bar ? 1 : 0);
		while (al && (*alt == ' ' || *alt == '\t'))
			alt++, al--;
		nl = 0;
		while (nl < al && alt[nl] != ' ' && alt[nl] != '(' && alt[nl] != ':' &&
		       alt[nl] != '[' && alt[nl] != '\t')
			nl++;
		if (nl == 0 || nl >= sizeof(name))
			continue;
		memcpy(name, alt, nl);
		name[nl] = '\0';
		{
			struct pkg *k = resolve(p, name);

			if (k) {
				mark(k, stack, top);
				return;
			}
		}
	}
}

size_t pkgset_close(struct pkgset *p, const char *const *roots, size_t n_roots, bool essential)
{
	struct pkg **stack;
	size_t top = 0, count = 0;

	if (!p->n)
		return 0;
	stack = calloc(p->n, sizeof(*stack));
	if (!stack)
		return 0;
	for (size_t i = 0; i < n_roots; i++)
		mark(resolve(p, roots[i]), stack, &top);
	for (size_t i = 0; essential && i < p->n; i++)
		if (p->v[i].essential)
			mark(&p->v[i], stack, &top);
	while (top) {
		struct pkg *k = stack[--top];
		const char *d = k->deps;

		while (d && *d) {
			size_t gl = strcspn(d, ",");

			mark_group(p, d, gl, stack, &top);
			d += gl + (d[gl] == ',' ? 1 : 0);
		}
	}
	free(stack);
	for (size_t i = 0; i < p->n; i++)
		count += p->v[i].marked;
	return count;
}

size_t pkgset_count(const struct pkgset *p)
{
	return p->n;
}

const char *pkgset_name(const struct pkgset *p, size_t i)
{
	return p->v[i].name;
}

const char *pkgset_arch(const struct pkgset *p, size_t i)
{
	return p->v[i].arch;
}

bool pkgset_is_marked(const struct pkgset *p, size_t i)
{
	return p->v[i].marked;
}

void pkgset_free(struct pkgset *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		pkg_fini(&p->v[i]);
	free(p->v);
	free(p);
}
