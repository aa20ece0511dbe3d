/* SPDX-License-Identifier: Apache-2.0 */
/* buildctx: the build context `template build` uploads — a tar of a directory minus .dockerignore. */
#include "buildctx.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"

#define BUILDCTX_MAX_PATTERNS 4096 /* lines of .dockerignore kept */

bool buildctx_match(const char *p, const char *s)
{
	for (; *p; p++, s++) {
		if (p[0] == '*' && p[1] == '*') {
			/* `**` matches any number of directories (none included). */
			p += 2;
			if (*p == '/')
				p++;
			if (!*p)
				return true;
			for (const char *t = s;; t++) {
				if ((t == s || t[-1] == '/') && buildctx_match(p, t))
					return true;
				if (!*t)
					return false;
			}
		}
		if (*p == '*') {
			for (const char *t = s;; t++) {
				if (buildctx_match(p + 1, t))
					return true;
				if (!*t || *t == '/')
					return false;
			}
		}
		if (!*s)
			return false;
		if (*p == '?') {
			if (*s == '/')
				return false;
			continue;
		}
		if (*p == '\\' && p[1])
			p++;
		if (*p != *s)
			return false;
	}
	return !*s;
}

/* A pattern matches the path or one of its parent directories. */
static bool match_or_parent(const char *pat, const char *rel)
{
	char buf[PATH_MAX];
	size_t n = strlen(rel);

	if (n >= sizeof(buf))
		return false;
	memcpy(buf, rel, n + 1);
	for (;;) {
		char *slash;

		if (buildctx_match(pat, buf))
			return true;
		slash = strrchr(buf, '/');
		if (!slash)
			return false;
		*slash = '\0';
	}
}

bool buildctx_excluded(char *const *pats, const char *rel)
{
	bool ex = false;

	for (size_t i = 0; pats && pats[i]; i++) {
		bool neg = pats[i][0] == '!';

		if (match_or_parent(pats[i] + neg, rel))
			ex = !neg;
	}
	return ex;
}

static void patterns_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Reads dir/.dockerignore into a NULL-terminated array (empty when there is none). */
static char **patterns_read(const char *dir, bool *negations)
{
	char path[PATH_MAX], line[PATH_MAX];
	char **v = calloc(BUILDCTX_MAX_PATTERNS + 1, sizeof(char *));
	size_t n = 0;
	FILE *f;

	*negations = false;
	if (!v)
		return NULL;
	snprintf(path, sizeof(path), "%s/.dockerignore", dir);
	f = fopen(path, "re");
	if (!f)
		return v;
	while (n < BUILDCTX_MAX_PATTERNS && fgets(line, sizeof(line), f)) {
		char *s = line, *e;
		bool neg;

		s[strcspn(s, "\r\n")] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		e = s + strlen(s);
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		if (!*s || *s == '#')
			continue;
		neg = *s == '!';
		if (neg)
			s++;
		/* Cleaned as Docker does: no leading `/` or `./`, no trailing `/`. */
		while (*s == '/' || (s[0] == '.' && s[1] == '/'))
			s += *s == '/' ? 1 : 2;
		while (e > s && e[-1] == '/')
			*--e = '\0';
		if (!*s)
			continue;
		if (asprintf(&v[n], "%s%s", neg ? "!" : "", s) < 0) {
			v[n] = NULL;
			break;
		}
		*negations |= neg;
		n++;
	}
	fclose(f);
	return v;
}

static int copy_data(struct archive *in, struct archive *out)
{
	char buf[65536];
	la_ssize_t n;

	while ((n = archive_read_data(in, buf, sizeof(buf))) > 0)
		if (archive_write_data(out, buf, (size_t)n) < 0)
			return -EIO;
	return n < 0 ? -EIO : 0;
}

/* Appends the Dockerfile under BUILDCTX_DOCKERFILE. */
static int add_dockerfile(struct archive *out, const char *path, struct isola_err **err)
{
	cleanup_free char *text = NULL;
	struct archive_entry *e;
	size_t len = 0;
	int r = util_read_file(path, 1u << 20, &text, &len);

	if (r < 0)
		return isola_err_set(err, -r, "invalid", "Dockerfile `%s`: %s", path,
				     r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
	e = archive_entry_new();
	if (!e)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	archive_entry_set_pathname(e, BUILDCTX_DOCKERFILE);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)len);
	r = archive_write_header(out, e) != ARCHIVE_OK ||
			    archive_write_data(out, text, len) != (la_ssize_t)len
		    ? isola_err_set(err, EIO, NULL, "archive Dockerfile: %s",
				    archive_error_string(out))
		    : 0;
	archive_entry_free(e);
	return r;
}

int buildctx_write(const char *dir, const char *dockerfile, int fd, struct isola_err **err)
{
	struct archive *disk = archive_read_disk_new(), *out = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	bool neg = false;
	char **pats = patterns_read(dir, &neg);
	size_t rootlen = strlen(dir);
	int r = 0;

	while (rootlen > 1 && dir[rootlen - 1] == '/')
		rootlen--;
	if (!disk || !out || !e || !pats) {
		r = isola_err_set(err, ENOMEM, NULL, "out of memory");
		goto out;
	}
	archive_read_disk_set_symlink_physical(disk);
	archive_write_set_format_pax_restricted(out);
	if (archive_write_open_fd(out, fd) != ARCHIVE_OK ||
	    archive_read_disk_open(disk, dir) != ARCHIVE_OK) {
		r = isola_err_set(err, EIO, "invalid", "build context `%s`: %s", dir,
				  archive_error_string(disk));
		goto out;
	}
	for (;;) {
		const char *p, *rel;
		int h;

		archive_entry_clear(e);
		h = archive_read_next_header2(disk, e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			r = isola_err_set(err, EIO, "invalid", "build context `%s`: %s", dir,
					  archive_error_string(disk));
			goto out;
		}
		p = archive_entry_pathname(e);
		if (strncmp(p, dir, rootlen) || (p[rootlen] && p[rootlen] != '/'))
			continue;
		rel = p[rootlen] ? p + rootlen + 1 : "";
		if (*rel && buildctx_excluded(pats, rel)) {
			/* An excluded directory is still walked when an exception may re-include
			 * something below it. */
			if (archive_entry_filetype(e) == AE_IFDIR && neg)
				archive_read_disk_descend(disk);
			continue;
		}
		archive_read_disk_descend(disk);
		if (!*rel)
			continue;
		archive_entry_copy_pathname(e, rel);
		archive_entry_set_hardlink(e, NULL);
		if (archive_write_header(out, e) < ARCHIVE_WARN ||
		    (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0 &&
		     copy_data(disk, out) < 0)) {
			r = isola_err_set(err, EIO, NULL, "archive `%s`: %s", p,
					  archive_error_string(out));
			goto out;
		}
	}
	r = add_dockerfile(out, dockerfile, err);
	if (r == 0 && archive_write_close(out) != ARCHIVE_OK)
		r = isola_err_set(err, EIO, NULL, "archive `%s`: %s", dir,
				  archive_error_string(out));
out:
	patterns_free(pats);
	archive_entry_free(e);
	if (disk)
		archive_read_free(disk);
	if (out)
		archive_write_free(out);
	return r;
}
