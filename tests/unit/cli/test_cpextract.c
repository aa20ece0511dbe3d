/* SPDX-License-Identifier: Apache-2.0 */
/* test_cpextract: `isola cp` download extraction against hostile archives (TAP). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpextract.h"
#include "common/extract.h"
#include "common/util.h"
#include "../tap.h"

#define PRECIOUS "precious\n"

static char box[] = "/tmp/isola-cpextract-XXXXXX";
static char dst[256], outside[256], victim[300], ovictim[300];

/* One archive being built in memory. */
struct tb {
	struct archive *a;
	char *buf;
	size_t used;
};

static void tb_open(struct tb *t)
{
	t->buf = calloc(1, 1 << 20);
	t->used = 0;
	t->a = archive_write_new();
	archive_write_set_format_pax_restricted(t->a);
	archive_write_open_memory(t->a, t->buf, 1 << 20, &t->used);
}

static void tb_add(struct tb *t, const char *name, mode_t type, const char *data, const char *link,
		   bool hard)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
	if (link && hard)
		archive_entry_set_hardlink(e, link);
	else if (link)
		archive_entry_set_symlink(e, link);
	archive_entry_set_size(e, data ? (la_int64_t)strlen(data) : 0);
	archive_write_header(t->a, e);
	if (data)
		archive_write_data(t->a, data, strlen(data));
	archive_entry_free(e);
}

/* Closes the archive; returns a memfd holding its first `cut` bytes (0: all). */
static int tb_fd(struct tb *t, size_t cut)
{
	int fd = memfd_create("tar", MFD_CLOEXEC);

	archive_write_close(t->a);
	archive_write_free(t->a);
	if (util_write_all(fd, t->buf, cut ? cut : t->used) < 0)
		abort();
	lseek(fd, 0, SEEK_SET);
	free(t->buf);
	return fd;
}

static char *slurp(const char *p)
{
	static char b[256];
	int fd = open(p, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, b, sizeof(b) - 1);

	if (fd >= 0)
		close(fd);
	b[n < 0 ? 0 : n] = '\0';
	return b;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static bool victims_intact(void)
{
	return !strcmp(slurp(victim), PRECIOUS) && !strcmp(slurp(ovictim), PRECIOUS) &&
	       count_entries(outside) == 1;
}

/* Runs an extraction into dst (into_dir); returns its result. */
static int run(int fd, char *msg, size_t msglen)
{
	struct isola_err *err = NULL;
	struct cptar_out *x = NULL;
	int r = cptar_out_new(dst, true, &x, &err);

	if (r == 0)
		r = cptar_extract(x, fd, &err);
	if (r == 0)
		r = cptar_commit(x, &err);
	snprintf(msg, msglen, "%s", err ? err->message : "");
	cptar_out_free(x);
	isola_err_free(err);
	close(fd);
	return r;
}

static void test_refused(const char *what, void (*build)(struct tb *), const char *words)
{
	char msg[512];
	struct tb t;
	int r;

	tb_open(&t);
	build(&t);
	r = run(tb_fd(&t, 0), msg, sizeof(msg));
	ok(r < 0 && strstr(msg, words), "%s: refused (%s)", what, msg);
	ok(victims_intact(), "%s: victims intact, nothing outside", what);
	ok(count_entries(dst) == 1, "%s: DST unchanged, no temporary directory left", what);
}

static void b_hardlink_data(struct tb *t)
{
	tb_add(t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(t, "out/x", AE_IFREG, "PWNED", "victim.txt", true);
}

static void b_symlink_then_file(struct tb *t)
{
	tb_add(t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(t, "out/esc", AE_IFLNK, NULL, outside, false);
	tb_add(t, "out/esc/pwned", AE_IFREG, "PWNED", NULL, false);
}

static void b_dotdot(struct tb *t)
{
	tb_add(t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(t, "out/../../outside/victim.txt", AE_IFREG, "PWNED", NULL, false);
}

static void b_absolute(struct tb *t)
{
	tb_add(t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(t, ovictim, AE_IFREG, "PWNED", NULL, false);
}

static void b_link_to_symlink(struct tb *t)
{
	tb_add(t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(t, "out/s", AE_IFLNK, NULL, ovictim, false);
	tb_add(t, "out/h", AE_IFREG, "PWNED", "out/s", true);
}

static void test_good_and_merge(void)
{
	char msg[512], p[400];
	struct stat a, b;
	struct tb t;
	int r;

	tb_open(&t);
	tb_add(&t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(&t, "out/a", AE_IFREG, "AAA", NULL, false);
	tb_add(&t, "out/b", AE_IFREG, NULL, "out/a", true);
	tb_add(&t, "out/sub", AE_IFDIR, NULL, NULL, false);
	tb_add(&t, "out/sub/c", AE_IFREG, "CCC", NULL, false);
	r = run(tb_fd(&t, 0), msg, sizeof(msg));
	snprintf(p, sizeof(p), "%s/out/a", dst);
	stat(p, &a);
	snprintf(p, sizeof(p), "%s/out/b", dst);
	stat(p, &b);
	ok(r == 0 && a.st_ino == b.st_ino, "a tree with a hard link inside it (%s)", msg);
	/* Again into the now existing dst/out, with a symlink to the outside victim in the way. */
	snprintf(p, sizeof(p), "%s/out/a", dst);
	unlink(p);
	symlink(ovictim, p);
	tb_open(&t);
	tb_add(&t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(&t, "out/a", AE_IFREG, "NEW", NULL, false);
	tb_add(&t, "out/sub/d", AE_IFREG, "DDD", NULL, false);
	r = run(tb_fd(&t, 0), msg, sizeof(msg));
	ok(r == 0 && !strcmp(slurp(p), "NEW") && victims_intact(),
	   "merge replaces a symlink in the way instead of writing through it (%s)", msg);
	snprintf(p, sizeof(p), "%s/out/sub/c", dst);
	ok(!strcmp(slurp(p), "CCC"), "merge keeps what the archive does not name");
	snprintf(p, sizeof(p), "%s/out", dst);
	util_rm_rf(p);
}

static void test_truncated(void)
{
	char msg[512], big[5000];
	struct tb t;
	int r;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tb_open(&t);
	tb_add(&t, "out", AE_IFDIR, NULL, NULL, false);
	tb_add(&t, "out/big", AE_IFREG, big, NULL, false);
	r = run(tb_fd(&t, 3 * 512), msg, sizeof(msg));
	ok(r < 0 && count_entries(dst) == 1, "a truncated archive leaves nothing (%s)", msg);
}

int main(void)
{
	if (!mkdtemp(box))
		return 1;
	snprintf(dst, sizeof(dst), "%s/dst", box);
	snprintf(outside, sizeof(outside), "%s/outside", box);
	snprintf(victim, sizeof(victim), "%s/victim.txt", dst);
	snprintf(ovictim, sizeof(ovictim), "%s/victim.txt", outside);
	mkdir(dst, 0755);
	mkdir(outside, 0755);
	for (int i = 0; i < 2; i++) {
		const char *v[] = {victim, ovictim};

		int fd = open(v[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		util_write_all(fd, PRECIOUS, strlen(PRECIOUS));
		close(fd);
	}
	for (int fb = 0; fb < 2; fb++) {
		/* Both ways of resolving parents: openat2, and the O_NOFOLLOW walk. */
		extract_test_force_fallback(fb);
		printf("# parent resolution: %s\n", fb ? "fallback walk" : "openat2");
		test_refused("hard link with data onto an existing file", b_hardlink_data,
			     "hard link");
		test_refused("symlink then a file through it", b_symlink_then_file, "out/esc");
		test_refused("`..`", b_dotdot, "outside");
		test_refused("absolute name", b_absolute, "outside");
		test_refused("hard link to a symlink", b_link_to_symlink, "hard link");
		test_good_and_merge();
		test_truncated();
	}
	util_rm_rf(box);
	return tap_done();
}
