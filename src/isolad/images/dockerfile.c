/* SPDX-License-Identifier: Apache-2.0 */
/* dockerfile: parses a Dockerfile into steps, refusing what `template build` does not do. */
#include "dockerfile.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *name; /* keyword, upper case */
	int op;		  /* enum df_op, or -1: refused */
	const char *why;  /* for refused ones */
} keywords[] = {
	{"FROM", DF_FROM, NULL},
	{"RUN", DF_RUN, NULL},
	{"COPY", DF_COPY, NULL},
	{"ADD", DF_ADD, NULL},
	{"ENV", DF_ENV, NULL},
	{"ARG", DF_ARG, NULL},
	{"WORKDIR", DF_WORKDIR, NULL},
	{"USER", DF_USER, NULL},
	{"LABEL", DF_LABEL, NULL},
	{"EXPOSE", DF_EXPOSE, NULL},
	{"CMD", DF_CMD, NULL},
	{"ENTRYPOINT", DF_ENTRYPOINT, NULL},
	{"HEALTHCHECK", -1, "health checks are not supported by template build"},
	{"ONBUILD", -1, "ONBUILD triggers are not supported by template build"},
	{"STOPSIGNAL", -1, "a stop signal is not recorded by template build"},
	{"SHELL", -1, "RUN always uses /bin/sh -c in template build"},
	{"VOLUME", -1, "volumes are not supported by template build"},
	{"MAINTAINER", -1, "deprecated: use LABEL maintainer=..."},
};

const char *dockerfile_op_name(enum df_op op)
{
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (keywords[i].op == (int)op)
			return keywords[i].name;
	return "?";
}

void dockerfile_words_free(char **words)
{
	if (!words)
		return;
	for (char **w = words; *w; w++)
		free(*w);
	free(words);
}

static void step_fini(struct df_step *s)
{
	free(s->args);
	dockerfile_words_free(s->argv);
	free(s->chown);
	free(s->heredoc);
	memset(s, 0, sizeof(*s));
}

void dockerfile_fini(struct dockerfile *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		step_fini(&d->steps[i]);
	free(d->steps);
	d->steps = NULL;
	d->n = 0;
}

/* ---- growable string ---- */

struct sb {
	char *p;    /* NUL-terminated text (owned) */
	size_t n;   /* length */
	size_t cap; /* allocated */
};

static int sb_add(struct sb *b, const char *s, size_t n)
{
	if (b->n + n + 1 > DF_MAX_TEXT)
		return -EFBIG;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

/* Takes the text out of b (an empty string when nothing was added). */
static char *sb_take(struct sb *b)
{
	char *p = b->p ? b->p : strdup("");

	memset(b, 0, sizeof(*b));
	return p;
}

static int oom(struct isola_err **err)
{
	return isola_err_set(err, ENOMEM, "internal", "out of memory");
}

static int sb_err(int r, const char *what, struct isola_err **err)
{
	if (r == -EFBIG)
		return isola_err_set(err, EFBIG, "too_large",
				     "Dockerfile: %s: longer than %u bytes", what, DF_MAX_TEXT);
	return oom(err);
}

/* ---- substitution and words ---- */

static bool is_name_char(char c, bool first)
{
	return c == '_' || isalpha((unsigned char)c) || (!first && isdigit((unsigned char)c));
}

int dockerfile_subst(const char *in, char escape, df_lookup_fn fn, void *ud, char **out,
		     struct isola_err **err)
{
	struct sb b = {0};
	int r = 0;

	for (const char *p = in; *p && r == 0;) {
		char name[256];
		const char *v, *word = NULL, *end;
		size_t n = 0, wn = 0;
		char mod = 0;

		if (*p == escape && p[1] == '$') {
			r = sb_add(&b, "$", 1);
			p += 2;
			continue;
		}
		if (*p != '$' || !(p[1] == '{' || is_name_char(p[1], true))) {
			r = sb_add(&b, p, 1);
			p++;
			continue;
		}
		if (p[1] == '{') {
			p += 2;
			while (is_name_char(*p, n == 0) && n < sizeof(name) - 1)
				name[n++] = *p++;
			name[n] = '\0';
			if (!n) {
				free(b.p);
				return isola_err_set(err, EINVAL, "invalid",
						     "bad substitution: `${` without a name");
			}
			if (p[0] == ':' && (p[1] == '-' || p[1] == '+')) {
				mod = p[1];
				word = p + 2;
				end = strchr(word, '}');
				if (!end) {
					free(b.p);
					return isola_err_set(err, EINVAL, "invalid",
							     "bad substitution: `${%s` has no `}`",
							     name);
				}
				wn = (size_t)(end - word);
				p = end;
			}
			if (*p != '}') {
				free(b.p);
				return isola_err_set(err, EINVAL, "invalid",
						     "bad substitution: `${%s` has no `}`", name);
			}
			p++;
		} else {
			p++;
			while (is_name_char(*p, n == 0) && n < sizeof(name) - 1)
				name[n++] = *p++;
			name[n] = '\0';
		}
		v = fn ? fn(ud, name) : NULL;
		if (mod == '-' && (!v || !*v))
			r = sb_add(&b, word, wn);
		else if (mod == '+')
			r = v && *v ? sb_add(&b, word, wn) : 0;
		else if (v)
			r = sb_add(&b, v, strlen(v));
	}
	if (r < 0) {
		free(b.p);
		return sb_err(r, "substituted text", err);
	}
	*out = sb_take(&b);
	return *out ? 0 : oom(err);
}

int dockerfile_words(const char *in, char escape, char ***words, size_t *n, struct isola_err **err)
{
	char **v = calloc(1, sizeof(*v));
	size_t k = 0;
	const char *p = in;
	int r = 0;

	if (!v)
		return oom(err);
	for (;;) {
		struct sb b = {0};
		char q = 0;
		bool any = false;

		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		while (*p && r == 0 && (q || !isspace((unsigned char)*p))) {
			if (q != '\'' && *p == escape && p[1]) {
				r = sb_add(&b, p + 1, 1);
				p += 2;
			} else if (!q && (*p == '"' || *p == '\'')) {
				q = *p++;
			} else if (q && *p == q) {
				q = 0;
				p++;
			} else {
				r = sb_add(&b, p, 1);
				p++;
			}
			any = true;
		}
		if (r == 0 && q)
			r = -EINVAL;
		if (r == 0 && k + 2 > DF_MAX_WORDS)
			r = -E2BIG;
		if (r == 0 && any) {
			char **nv = realloc(v, (k + 2) * sizeof(*v));

			if (!nv)
				r = -ENOMEM;
			else {
				v = nv;
				v[k++] = sb_take(&b);
				v[k] = NULL;
				if (!v[k - 1])
					r = -ENOMEM;
			}
		}
		free(b.p);
		if (r < 0)
			break;
	}
	if (r < 0) {
		dockerfile_words_free(v);
		if (r == -EINVAL)
			return isola_err_set(err, EINVAL, "invalid",
					     "unterminated quote in `%.80s`", in);
		if (r == -E2BIG)
			return isola_err_set(err, EFBIG, "too_large", "more than %u words",
					     DF_MAX_WORDS);
		return sb_err(r, "word", err);
	}
	*words = v;
	*n = k;
	return 0;
}

/* ---- the parser ---- */

/* The physical lines of the input (pointers into the parser's copy). */
struct lines {
	char **v;  /* each NUL-terminated, without its newline */
	size_t n;  /* count */
	size_t at; /* next line to read */
};

static int fail(struct isola_err **err, unsigned line, const char *fmt, const char *a,
		const char *b)
{
	return isola_err_set(err, EINVAL, "invalid", "Dockerfile line %u: %s%s%s", line, a,
			     fmt ? fmt : "", b ? b : "");
}

static bool blank(const char *s)
{
	while (*s && isspace((unsigned char)*s))
		s++;
	return !*s;
}

static bool comment(const char *s)
{
	while (*s && isspace((unsigned char)*s))
		s++;
	return *s == '#';
}

/* Strips trailing whitespace; true when the line then ends with the escape (removed). */
static bool continues(char *s, char escape)
{
	size_t n = strlen(s);

	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	if (n && s[n - 1] == escape) {
		s[n - 1] = '\0';
		return true;
	}
	return false;
}

/* Parser directives before anything else: `# syntax=...` (ignored), `# escape=\` or '`'. */
static int directives(struct lines *l, char *escape, struct isola_err **err)
{
	while (l->at < l->n) {
		char *s = l->v[l->at], key[16];
		size_t k = 0;

		if (*s != '#')
			return 0;
		s++;
		while (*s == ' ' || *s == '\t')
			s++;
		while ((isalpha((unsigned char)*s)) && k < sizeof(key) - 1)
			key[k++] = (char)tolower((unsigned char)*s++);
		key[k] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (!k || *s != '=')
			return 0; /* an ordinary comment ends the directives */
		s++;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!strcmp(key, "escape")) {
			if (!((s[0] == '\\' || s[0] == '`') && blank(s + 1)))
				return fail(err, (unsigned)l->at + 1,
					    ": the escape character must be \\ or `",
					    "# escape=", NULL);
			*escape = s[0];
		} else if (strcmp(key, "syntax") != 0 && strcmp(key, "check") != 0) {
			return 0;
		}
		l->at++;
	}
	return 0;
}

/* Reads one heredoc body after the logical line, up to a line equal to its word. */
static int heredoc_body(struct lines *l, const char *word, bool strip_tabs, unsigned line,
			struct sb *body, struct isola_err **err)
{
	while (l->at < l->n) {
		const char *s = l->v[l->at++];
		int r;

		if (strip_tabs)
			while (*s == '\t')
				s++;
		if (!strcmp(s, word))
			return 0;
		r = sb_add(body, s, strlen(s));
		if (r == 0)
			r = sb_add(body, "\n", 1);
		if (r < 0)
			return sb_err(r, "heredoc", err);
	}
	return isola_err_set(err, EINVAL, "invalid",
			     "Dockerfile line %u: heredoc `%s` is never terminated", line, word);
}

/* Finds `<<WORD`, `<<-WORD`, `<<"WORD"`, `<<'WORD'` in a RUN's text: its start, or NULL. */
static const char *heredoc_find(const char *s, char *word, size_t n, bool *strip, size_t *len)
{
	for (const char *p = strstr(s, "<<"); p; p = strstr(p + 2, "<<")) {
		const char *q = p + 2;
		char quote = 0;
		size_t k = 0;

		*strip = *q == '-';
		if (*strip)
			q++;
		if (*q == '"' || *q == '\'')
			quote = *q++;
		while (is_name_char(*q, false) && k < n - 1)
			word[k++] = *q++;
		word[k] = '\0';
		if (!k || (quote && *q++ != quote))
			continue;
		*len = (size_t)(q - p);
		return p;
	}
	return NULL;
}

/* Parses a JSON array of strings (exec form) into argv; false when text is not one. */
static bool exec_form(const char *text, struct df_step *st)
{
	json_t *j, *v;
	size_t i;

	if (text[0] != '[')
		return false;
	j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_array(j) || json_array_size(j) > DF_MAX_WORDS) {
		json_decref(j);
		return false;
	}
	json_array_foreach(j, i, v) if (!json_is_string(v))
	{
		json_decref(j);
		return false;
	}
	st->argv = calloc(json_array_size(j) + 1, sizeof(char *));
	if (!st->argv) {
		json_decref(j);
		return false;
	}
	json_array_foreach(j, i, v)
	{
		st->argv[i] = strdup(json_string_value(v));
		if (!st->argv[i])
			break;
	}
	st->argc = i;
	json_decref(j);
	return true;
}

/* Takes the leading `--flag[=value]` words off *text: COPY/ADD --chown; anything else refused. */
static int flags(struct df_step *st, char **text, const char *kw, struct isola_err **err)
{
	char *p = *text;

	while (p[0] == '-' && p[1] == '-') {
		char *end = p, *eq;
		size_t n;

		while (*end && !isspace((unsigned char)*end))
			end++;
		n = (size_t)(end - p);
		eq = memchr(p, '=', n);
		if ((st->op == DF_COPY || st->op == DF_ADD) && eq && eq - p == 7 &&
		    !strncmp(p, "--chown", 7)) {
			free(st->chown);
			st->chown = strndup(eq + 1, (size_t)(end - eq - 1));
			if (!st->chown)
				return oom(err);
		} else {
			char flag[64];

			snprintf(flag, sizeof(flag), "%.*s", (int)(eq ? (size_t)(eq - p) : n), p);
			if (!strcmp(flag, "--from"))
				return fail(err, st->line,
					    ": multi-stage builds are not supported by template "
					    "build",
					    kw, " --from");
			return isola_err_set(
				err, EINVAL, "invalid",
				"Dockerfile line %u: %s: flag `%s` is not supported by "
				"template build",
				st->line, kw, flag);
		}
		while (*end && isspace((unsigned char)*end))
			end++;
		p = end;
	}
	*text = p;
	return 0;
}

/* Builds step st from keyword kw and its joined text (modified in place). */
static int step_make(struct lines *l, struct df_step *st, const char *kw, char *text, char escape,
		     struct isola_err **err)
{
	int r;

	if (st->op == DF_FROM || st->op == DF_RUN || st->op == DF_COPY || st->op == DF_ADD) {
		r = flags(st, &text, kw, err);
		if (r < 0)
			return r;
	}
	if (blank(text))
		return fail(err, st->line, " needs arguments", kw, NULL);
	if (st->op == DF_FROM) {
		char **w = NULL;
		size_t n = 0;

		bool as;

		r = dockerfile_words(text, escape, &w, &n, err);
		if (r < 0)
			return isola_err_wrap(err, "Dockerfile line %u: FROM", st->line);
		as = n == 3 && !strcasecmp(w[1], "as");
		dockerfile_words_free(w);
		if (n != 1) {
			return fail(err, st->line,
				    as ? ": multi-stage builds (FROM ... AS) are not supported by "
					 "template build"
				       : ": takes one image (template name or image reference)",
				    kw, NULL);
		}
	}
	if (st->op == DF_RUN) {
		char word[64];
		bool strip;
		size_t hl;
		const char *h = heredoc_find(text, word, sizeof(word), &strip, &hl);

		if (h) {
			struct sb body = {0};

			r = heredoc_body(l, word, strip, st->line, &body, err);
			if (r < 0) {
				free(body.p);
				return r;
			}
			if (blank(text + hl) && h == text) {
				/* RUN <<EOF: the body is the script. */
				st->args = sb_take(&body);
				return st->args ? 0 : oom(err);
			}
			/* RUN cmd <<EOF: the shell reads the heredoc itself. */
			{
				struct sb all = {0};

				r = sb_add(&all, text, strlen(text));
				if (r == 0)
					r = sb_add(&all, "\n", 1);
				if (r == 0 && body.p)
					r = sb_add(&all, body.p, body.n);
				if (r == 0)
					r = sb_add(&all, word, strlen(word));
				free(body.p);
				if (r < 0) {
					free(all.p);
					return sb_err(r, "heredoc", err);
				}
				st->heredoc = sb_take(&all);
				if (!st->heredoc)
					return oom(err);
			}
		}
	}
	if ((st->op == DF_RUN || st->op == DF_CMD || st->op == DF_ENTRYPOINT || st->op == DF_COPY ||
	     st->op == DF_ADD) &&
	    !st->heredoc)
		exec_form(text, st);
	if ((st->op == DF_COPY || st->op == DF_ADD) && !st->argv) {
		char **w = NULL;
		size_t n = 0;

		r = dockerfile_words(text, escape, &w, &n, err);
		dockerfile_words_free(w);
		if (r < 0)
			return isola_err_wrap(err, "Dockerfile line %u: %s", st->line, kw);
		if (n < 2)
			return fail(err, st->line, " needs a source and a destination", kw, NULL);
	} else if ((st->op == DF_COPY || st->op == DF_ADD) && st->argc < 2) {
		return fail(err, st->line, " needs a source and a destination", kw, NULL);
	}
	st->args = strdup(text);
	return st->args ? 0 : oom(err);
}

static int split_lines(char *buf, struct lines *l)
{
	size_t cap = 0;

	for (char *p = buf; p;) {
		char *nl = strchr(p, '\n');

		if (nl)
			*nl = '\0';
		if (nl && nl > p && nl[-1] == '\r')
			nl[-1] = '\0';
		if (!nl && !*p)
			break;
		if (l->n == cap) {
			char **v = realloc(l->v, (cap ? cap * 2 : 64) * sizeof(*v));

			if (!v)
				return -ENOMEM;
			l->v = v;
			cap = cap ? cap * 2 : 64;
		}
		l->v[l->n++] = p;
		p = nl ? nl + 1 : NULL;
	}
	return 0;
}

static int parse_lines(struct lines *l, struct dockerfile *d, struct isola_err **err)
{
	bool from = false;
	size_t cap = 0;
	int r;

	r = directives(l, &d->escape, err);
	if (r < 0)
		return r;
	while (l->at < l->n) {
		struct sb text = {0};
		struct df_step st = {0};
		char *s = l->v[l->at++], kw[16];
		size_t k = 0;
		int op = -2;
		bool more;

		if (blank(s) || comment(s))
			continue;
		st.line = (unsigned)l->at;
		while (isspace((unsigned char)*s))
			s++;
		while (*s && !isspace((unsigned char)*s) && k < sizeof(kw) - 1)
			kw[k++] = (char)toupper((unsigned char)*s++);
		kw[k] = '\0';
		if (*s && !isspace((unsigned char)*s))
			return isola_err_set(err, EINVAL, "invalid",
					     "Dockerfile line %u: `%s...`: unknown instruction",
					     st.line, kw);
		for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
			if (!strcmp(kw, keywords[i].name)) {
				op = keywords[i].op;
				if (op < 0)
					return isola_err_set(err, EINVAL, "invalid",
							     "Dockerfile line %u: %s: %s", st.line,
							     kw, keywords[i].why);
			}
		if (op == -2)
			return isola_err_set(err, EINVAL, "invalid",
					     "Dockerfile line %u: `%s`: unknown instruction",
					     st.line, kw);
		st.op = (enum df_op)op;
		if (st.op == DF_FROM && from)
			return fail(err, st.line,
				    ": multi-stage builds (a second FROM) are not supported by "
				    "template build",
				    "FROM", NULL);
		if (!from && st.op != DF_FROM && st.op != DF_ARG)
			return fail(err, st.line, " before FROM", kw, NULL);
		from = from || st.op == DF_FROM;
		/* The logical line: continuations joined; comment and empty lines inside skipped. */
		more = continues(s, d->escape);
		r = sb_add(&text, s, strlen(s));
		while (r == 0 && more && l->at < l->n) {
			char *c = l->v[l->at++];

			if (comment(c) || blank(c))
				continue;
			more = continues(c, d->escape);
			r = sb_add(&text, c, strlen(c));
		}
		if (r < 0) {
			free(text.p);
			return sb_err(r, kw, err);
		}
		if (d->n == DF_MAX_STEPS) {
			free(text.p);
			return isola_err_set(err, EFBIG, "too_large",
					     "Dockerfile: more than %u instructions", DF_MAX_STEPS);
		}
		{
			char *t = text.p ? text.p : (char *)"";

			while (isspace((unsigned char)*t))
				t++;
			r = step_make(l, &st, kw, t, d->escape, err);
		}
		free(text.p);
		if (r == 0 && d->n == cap) {
			struct df_step *v = realloc(d->steps, (cap ? cap * 2 : 16) * sizeof(*v));

			if (!v)
				r = oom(err);
			else {
				d->steps = v;
				cap = cap ? cap * 2 : 16;
			}
		}
		if (r < 0) {
			step_fini(&st);
			return r;
		}
		d->steps[d->n++] = st;
	}
	if (!from)
		return isola_err_set(err, EINVAL, "invalid", "Dockerfile: no FROM instruction");
	return 0;
}

int dockerfile_parse(const char *text, size_t len, struct dockerfile *out, struct isola_err **err)
{
	struct lines l = {0};
	char *buf;
	int r;

	memset(out, 0, sizeof(*out));
	out->escape = '\\';
	if (len > DF_MAX_BYTES)
		return isola_err_set(err, EFBIG, "too_large", "Dockerfile: larger than %u bytes",
				     DF_MAX_BYTES);
	/* UNTRUSTED: the client's Dockerfile; a NUL inside is refused, every line is bounded
	 * by the copy's NUL, every string built from it by DF_MAX_TEXT. */
	if (memchr(text, '\0', len))
		return isola_err_set(err, EINVAL, "invalid", "Dockerfile: contains a NUL byte");
	buf = malloc(len + 1);
	if (!buf)
		return oom(err);
	memcpy(buf, text, len);
	buf[len] = '\0';
	r = split_lines(buf, &l);
	if (r < 0)
		r = oom(err);
	else
		r = parse_lines(&l, out, err);
	free(l.v);
	free(buf);
	return r;
}
