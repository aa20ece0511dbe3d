/* SPDX-License-Identifier: Apache-2.0 */
/* output: human tables and values vs --json documents, so every command prints the same way. */
#include "output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"

struct table {
	const char *const *headers; /* borrowed column titles */
	size_t ncols;		    /* cells per row */
	char **cells;		    /* nrows * ncols heap strings, row-major */
	size_t nrows;		    /* rows added */
	size_t cap;		    /* rows allocated */
};

struct table *table_new(const char *const *headers, size_t ncols)
{
	struct table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->headers = headers;
	t->ncols = ncols;
	return t;
}

int table_add(struct table *t, const char *const *cells)
{
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **nc = reallocarray(t->cells, cap * t->ncols, sizeof(*nc));

		if (!nc)
			return -ENOMEM;
		t->cells = nc;
		t->cap = cap;
	}
	for (size_t i = 0; i < t->ncols; i++) {
		char *c = strdup(cells[i] ? cells[i] : "");

		if (!c) {
			for (size_t j = 0; j < i; j++)
				free(t->cells[t->nrows * t->ncols + j]);
			return -ENOMEM;
		}
		t->cells[t->nrows * t->ncols + i] = c;
	}
	t->nrows++;
	return 0;
}

/* Display width of a UTF-8 string, counting one per code point. */
static size_t utf8_width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static void print_row(const struct table *t, const char *const *row, const size_t *width, FILE *out)
{
	for (size_t i = 0; i < t->ncols; i++) {
		fputs(row[i], out);
		if (i + 1 == t->ncols)
			break;
		for (size_t pad = utf8_width(row[i]); pad < width[i] + 3; pad++)
			fputc(' ', out);
	}
	fputc('\n', out);
}

bool out_color(FILE *f)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	/* https://no-color.org: any non-empty NO_COLOR turns colour off. */
	if ((no && *no) || (term && !strcmp(term, "dumb")))
		return false;
	return isatty(fileno(f));
}

void table_print(const struct table *t, FILE *out)
{
	size_t *width = calloc(t->ncols, sizeof(*width));

	if (!width)
		return;
	for (size_t i = 0; i < t->ncols; i++)
		width[i] = utf8_width(t->headers[i]);
	for (size_t r = 0; r < t->nrows; r++)
		for (size_t i = 0; i < t->ncols; i++) {
			size_t w = utf8_width(t->cells[r * t->ncols + i]);

			if (w > width[i])
				width[i] = w;
		}
	if (out_color(out))
		fputs("\033[1m", out);
	print_row(t, t->headers, width, out);
	if (out_color(out))
		fputs("\033[0m", out); /* headers bold on a terminal */
	for (size_t r = 0; r < t->nrows; r++)
		print_row(t, (const char *const *)&t->cells[r * t->ncols], width, out);
	free(width);
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

void out_json(FILE *out, const json_t *v)
{
	json_dumpf(v, out, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	fputc('\n', out);
	fflush(out);
}

void out_json_line(FILE *out, const json_t *v)
{
	json_dumpf(v, out, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	fputc('\n', out);
	fflush(out);
}

void out_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	util_fmt_size(bytes, buf, len);
}

/* Parses "2026-01-02T03:04:05[.frac](Z|+hh:mm)" into epoch seconds; false if not that. */
static bool parse_rfc3339(const char *s, double *out)
{
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	double t;

	if (!p)
		return false;
	t = (double)timegm(&tm);
	if (*p == '.') {
		char *end;

		t += strtod(p, &end);
		p = end;
	}
	if (*p == 'Z' && !p[1]) {
		*out = t;
		return true;
	}
	if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		int off = atoi(p + 1) * 3600 + atoi(p + 4) * 60;

		*out = *p == '+' ? t - off : t + off;
		return true;
	}
	return false;
}

void out_fmt_age(const json_t *t, double now, char *buf, size_t len)
{
	static const struct {
		double secs;
		const char *unit;
	} units[] = {{86400, "day"}, {3600, "hour"}, {60, "minute"}, {1, "second"}};
	double when, d;

	if (json_is_number(t)) {
		when = json_number_value(t);
	} else if (json_is_string(t)) {
		if (!parse_rfc3339(json_string_value(t), &when)) {
			snprintf(buf, len, "%s", json_string_value(t));
			return;
		}
	} else {
		snprintf(buf, len, "%s", "");
		return;
	}
	d = now - when;
	if (d < 1) {
		snprintf(buf, len, "%s", "just now");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		long n = (long)(d / units[i].secs);

		if (n >= 1) {
			snprintf(buf, len, "%ld %s%s ago", n, units[i].unit, n == 1 ? "" : "s");
			return;
		}
	}
}

void out_fmt_time(double t, double now, char *buf, size_t len)
{
	time_t secs = (time_t)t;
	struct tm tm;
	char date[40], rel[64];
	json_t *j;

	if (!gmtime_r(&secs, &tm) || !strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", &tm)) {
		snprintf(buf, len, "%.0f", t);
		return;
	}
	if (t > now + 1) {
		j = json_real(2 * now - t); /* as far ahead as that is behind */
		out_fmt_age(j, now, rel, sizeof(rel));
		json_decref(j);
		if (strlen(rel) > 4 && !strcmp(rel + strlen(rel) - 4, " ago")) {
			rel[strlen(rel) - 4] = '\0';
			snprintf(buf, len, "%s (in %s)", date, rel);
			return;
		}
	}
	j = json_real(t);
	out_fmt_age(j, now, rel, sizeof(rel));
	json_decref(j);
	snprintf(buf, len, "%s (%s)", date, rel);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *out_fmt_value(const json_t *v)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);

	if (!f)
		return NULL;
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		fputs(json_string_value(v), f);
		break;
	case JSON_INTEGER:
		fprintf(f, "%lld", (long long)json_integer_value(v));
		break;
	case JSON_REAL:
		fprintf(f, "%g", json_real_value(v));
		break;
	case JSON_TRUE:
		fputs("true", f);
		break;
	case JSON_FALSE:
		fputs("false", f);
		break;
	case JSON_OBJECT: {
		size_t n = json_object_size(v), i = 0;
		const char **keys = calloc(n ? n : 1, sizeof(*keys));
		const char *k;
		json_t *x;

		if (!keys)
			break;
		json_object_foreach((json_t *)v, k, x) keys[i++] = k;
		qsort(keys, n, sizeof(*keys), cmp_str);
		for (i = 0; i < n; i++) {
			char *sub = out_fmt_value(json_object_get(v, keys[i]));

			fprintf(f, "%s%s=%s", i ? "," : "", keys[i], sub ? sub : "");
			free(sub);
		}
		free(keys);
		break;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *x;

		json_array_foreach(v, i, x)
		{
			char *sub = out_fmt_value(x);

			fprintf(f, "%s%s", i ? " " : "", sub ? sub : "");
			free(sub);
		}
		break;
	}
	default:
		fputs("-", f);
		break;
	}
	if (fclose(f) != 0) {
		free(s);
		return NULL;
	}
	return s;
}
