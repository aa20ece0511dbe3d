/* SPDX-License-Identifier: Apache-2.0 */
/* test_snapdir: sealing, verifying and cleaning crash-safe snapshot directories. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "common/util.h"
#include "isolad/snapshots/snapdir.h"

static char root[64];

static void put(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		perror(path);
	if (fd >= 0)
		close(fd);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Seals a fresh snapshot <root>/<name> with files a (5 bytes) and sub/b (3 bytes). */
static int make(const char *name, char *final, size_t n, uint64_t *size)
{
	cleanup_err struct isola_err *e = NULL;
	char tmp[256], p[512];
	json_t *meta = json_pack("{s:s}", "kind", "test");
	int r;

	snprintf(final, n, "%s/%s", root, name);
	r = snapdir_tmp_new(root, name, tmp, sizeof(tmp), &e);
	if (r < 0)
		return r;
	snprintf(p, sizeof(p), "%s/a", tmp);
	put(p, "hello");
	snprintf(p, sizeof(p), "%s/sub", tmp);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/sub/b", tmp);
	put(p, "xyz");
	r = snapdir_commit(tmp, final, meta, size, &e);
	json_decref(meta);
	return r;
}

/* Runs verify and checks it fails `invalid` with every word of want in the message. */
static void expect_bad(const char *dir, const char *what, const char *w1, const char *w2)
{
	cleanup_err struct isola_err *e = NULL;
	int r = snapdir_verify(dir, NULL, &e);

	ok(r < 0 && e && !strcmp(e->code, "invalid"), "%s: verify fails `invalid`", what);
	ok(e && strstr(e->message, w1) && (!w2 || strstr(e->message, w2)),
	   "%s: message names `%s`%s%s (%s)", what, w1, w2 ? " and " : "", w2 ? w2 : "",
	   e ? e->message : "-");
}

int main(void)
{
	cleanup_err struct isola_err *e = NULL;
	char final[256], p[512], tmp[256];
	json_t *meta = NULL;
	uint64_t size = 0;
	struct stat st;

	snprintf(root, sizeof(root), "/tmp/isola-snapdir-XXXXXX");
	if (!mkdtemp(root))
		return 1;

	/* tmp dir: 0700, prefixed, under the parent */
	ok(snapdir_tmp_new(root, "t", tmp, sizeof(tmp), &e) == 0, "tmp dir made");
	ok(stat(tmp, &st) == 0 && (st.st_mode & 0777) == 0700, "tmp dir is 0700");
	ok(strstr(tmp, "/.tmp-t-") != NULL, "tmp dir is named .tmp-<tag>-<random>");

	/* commit + verify */
	ok(make("good", final, sizeof(final), &size) == 0, "commit succeeds");
	ok(size == 8, "size counts every file (%llu)", (unsigned long long)size);
	snprintf(p, sizeof(p), "%s/manifest.json", final);
	ok(exists(p), "manifest written");
	ok(snapdir_verify(final, &meta, &e) == 0, "intact snapshot verifies");
	ok(meta && !strcmp(json_string_value(json_object_get(meta, "kind")) ?: "", "test"),
	   "meta comes back");
	json_decref(meta);

	/* commit never overwrites a final dir */
	{
		cleanup_err struct isola_err *e2 = NULL;
		char t2[256];

		snapdir_tmp_new(root, "dup", t2, sizeof(t2), &e2);
		ok(snapdir_commit(t2, final, NULL, NULL, &e2) < 0,
		   "commit onto an existing dir fails");
		ok(snapdir_verify(final, NULL, NULL) == 0, "the existing snapshot is untouched");
		util_rm_rf(t2);
	}

	/* damage, one kind per snapshot */
	make("flip", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/sub/b", final);
	put(p, "xyZ");
	expect_bad(final, "flipped byte", "sub/b", "SHA-256");

	make("trunc", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/a", final);
	truncate(p, 2);
	expect_bad(final, "truncated file", "`a`", "truncated");

	make("long", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/a", final);
	put(p, "hello world");
	expect_bad(final, "grown file", "`a`", "too long");

	make("missing", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/sub/b", final);
	unlink(p);
	expect_bad(final, "missing file", "sub/b", "missing");

	make("link", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/a", final);
	unlink(p);
	symlink("/etc/hostname", p);
	expect_bad(final, "file replaced by a symlink", "`a`", NULL);

	make("man", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/manifest.json", final);
	truncate(p, 20);
	expect_bad(final, "truncated manifest", "manifest.json", "does not parse");

	make("noman", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/manifest.json", final);
	unlink(p);
	expect_bad(final, "no manifest", "incomplete", NULL);

	make("trav", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/manifest.json", final);
	put(p, "{\"format\":\"isola-snapshot\",\"version\":1,\"files\":[{\"name\":\"../good/a\","
	       "\"size\":5,\"sha256\":"
	       "\"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\"}]}");
	expect_bad(final, "`..` in a manifest name", "malformed", NULL);

	make("ver", final, sizeof(final), NULL);
	snprintf(p, sizeof(p), "%s/manifest.json", final);
	put(p, "{\"format\":\"isola-snapshot\",\"version\":99,\"files\":[]}");
	expect_bad(final, "unknown version", "version 99", NULL);

	/* commit refuses what is not a regular file or directory */
	{
		cleanup_err struct isola_err *e2 = NULL;
		char t2[256], f2[256];

		snapdir_tmp_new(root, "sym", t2, sizeof(t2), &e2);
		snprintf(p, sizeof(p), "%s/l", t2);
		symlink("/etc/passwd", p);
		snprintf(f2, sizeof(f2), "%s/sym", root);
		ok(snapdir_commit(t2, f2, NULL, NULL, &e2) < 0 && !exists(f2),
		   "a symlink in the tier's output is refused, nothing sealed");
	}

	/* startup cleaning: only .tmp-* goes */
	{
		int n;

		snprintf(p, sizeof(p), "%s/.tmp-crash-1", root);
		mkdir(p, 0700);
		n = snapdir_clean_tmp(root);
		ok(n >= 2, "clean_tmp removed the temp dirs (%d)", n);
		ok(!exists(p), "crash leftover gone");
		snprintf(p, sizeof(p), "%s/good/manifest.json", root);
		ok(exists(p), "sealed snapshots kept");
	}

	util_rm_rf(root);
	return tap_done();
}
