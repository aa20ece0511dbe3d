/* SPDX-License-Identifier: Apache-2.0 */
/* test_extract: archive names normalised, parents resolved inside a root (openat2 and the
 * fallback walk), trees removed without following symlinks, positional writes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "common/extract.h"
#include "common/util.h"

static char root[] = "/tmp/isola-extract-XXXXXX";
static char host[] = "/tmp/isola-extract-host-XXXXXX";

static void test_norm_path(void)
{
	char out[PATH_MAX], small[8], longname[NAME_MAX + 8];

	ok(extract_norm_path("./usr//bin/./x", out, sizeof(out)) == 0 && !strcmp(out, "usr/bin/x"),
	   "./ // and . components dropped");
	ok(extract_norm_path("a/b/", out, sizeof(out)) == 0 && !strcmp(out, "a/b"),
	   "trailing slash dropped");
	ok(extract_norm_path("./", out, sizeof(out)) == -ENOENT, "the root entry is -ENOENT");
	ok(extract_norm_path("", out, sizeof(out)) == -ENOENT, "an empty name is -ENOENT");
	ok(extract_norm_path("/etc/passwd", out, sizeof(out)) == -EPERM, "absolute refused");
	ok(extract_norm_path("a/../../etc", out, sizeof(out)) == -EPERM, ".. refused");
	ok(extract_norm_path("a/..b/c..", out, sizeof(out)) == 0 && !strcmp(out, "a/..b/c.."),
	   "names that only start or end with .. are names");
	ok(extract_norm_path("abcdefgh", small, sizeof(small)) == -ENAMETOOLONG,
	   "a result over outsz refused");
	memset(longname, 'x', NAME_MAX + 1);
	longname[NAME_MAX + 1] = '\0';
	ok(extract_norm_path(longname, out, sizeof(out)) == -ENAMETOOLONG,
	   "a component over NAME_MAX refused");
}

static void test_split(void)
{
	char dir[PATH_MAX];
	const char *leaf;

	leaf = extract_split("usr/bin/x", dir);
	ok(!strcmp(dir, "usr/bin") && !strcmp(leaf, "x"), "usr/bin/x -> usr/bin, x");
	leaf = extract_split("x", dir);
	ok(!strcmp(dir, "") && !strcmp(leaf, "x"), "x -> \"\", x");
}

/* The inode of rel inside the root as extract_open_dir resolves it, or 0. */
static ino_t ino_in_root(int rootfd, const char *rel, int *err)
{
	struct stat st;
	int fd = extract_open_dir(rootfd, rel);

	*err = fd < 0 ? fd : 0;
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0)
		st.st_ino = 0;
	close(fd);
	return st.st_ino;
}

static void test_open_dir(void)
{
	char p[PATH_MAX];
	struct stat in, hostst;
	cleanup_fd int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int e;

	snprintf(p, sizeof(p), "%s/etc/sub", root);
	util_mkdir_p(p, 0755);
	snprintf(p, sizeof(p), "%s/etc", root);
	stat(p, &in);
	stat(host, &hostst);
	/* A link to the host dir by absolute path, and one climbing out by "..". */
	snprintf(p, sizeof(p), "%s/abs", root);
	ok(symlink(host, p) == 0, "symlink abs -> %s", host);
	snprintf(p, sizeof(p), "%s/up", root);
	ok(symlink("../../../../../..", p) == 0, "symlink up -> ../../..");
	snprintf(p, sizeof(p), "%s/etclink", root);
	ok(symlink("/etc", p) == 0, "symlink etclink -> /etc");

	ok(ino_in_root(rootfd, "etc", &e) == in.st_ino, "a plain directory opens");
	ok(ino_in_root(rootfd, "", &e) != 0 && e == 0, "\"\" is the root");
	ok(ino_in_root(rootfd, "etclink", &e) == in.st_ino,
	   "openat2: an absolute symlink resolves inside the root (the root's etc)");
	ok(ino_in_root(rootfd, "abs", &e) != hostst.st_ino, "openat2: never the host dir");
	ok(ino_in_root(rootfd, "up", &e) != 0 && e == 0 &&
		   ino_in_root(rootfd, "up", &e) == ino_in_root(rootfd, "", &e),
	   "openat2: .. stops at the root");
	ok(ino_in_root(rootfd, "missing", &e) == 0 && e == -ENOENT, "missing: -ENOENT");

	extract_test_force_fallback(true);
	ok(ino_in_root(rootfd, "etc/sub", &e) != 0 && e == 0, "fallback: a plain path opens");
	ino_in_root(rootfd, "etclink", &e);
	ok(e == -ELOOP || e == -ENOTDIR, "fallback: a symlinked component is refused (%d)", e);
	ino_in_root(rootfd, "abs", &e);
	ok(e == -ELOOP || e == -ENOTDIR, "fallback: the host link is refused (%d)", e);
	extract_test_force_fallback(false);
}

static void test_rm_at(void)
{
	char p[PATH_MAX], victim[PATH_MAX];
	cleanup_fd int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	int fd;

	snprintf(victim, sizeof(victim), "%s/victim", host);
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ok(fd >= 0 && write(fd, "host\n", 5) == 5, "victim file on the host");
	if (fd >= 0)
		close(fd);
	snprintf(p, sizeof(p), "%s/tree/a/b", root);
	util_mkdir_p(p, 0755);
	snprintf(p, sizeof(p), "%s/tree/a/tohost", root);
	symlink(host, p);
	snprintf(p, sizeof(p), "%s/tree/a/b/f", root);
	close(open(p, O_WRONLY | O_CREAT, 0644));
	ok(util_rm_rf_at(rootfd, "tree") == 0, "a tree with a symlink to the host removed");
	snprintf(p, sizeof(p), "%s/tree", root);
	ok(lstat(p, &st) < 0 && errno == ENOENT, "the tree is gone");
	ok(stat(victim, &st) == 0 && st.st_size == 5, "what the symlink named is untouched");
	ok(util_rm_rf_at(rootfd, "tree") == 0, "a missing name is 0");
}

static void test_pwrite_all(void)
{
	char p[PATH_MAX], buf[16] = {0};
	cleanup_fd int fd = -1;

	snprintf(p, sizeof(p), "%s/data", root);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ok(extract_pwrite_all(fd, "world", 5, 6) == 0 && extract_pwrite_all(fd, "hello", 5, 0) == 0,
	   "two positional writes");
	ok(pread(fd, buf, sizeof(buf), 0) == 11 && !memcmp(buf, "hello\0world", 11),
	   "each landed at its offset, the gap a hole of zeros");
	ok(extract_pwrite_all(-1, "x", 1, 0) == -EBADF, "a bad fd is -EBADF");
}

int main(void)
{
	if (!mkdtemp(root) || !mkdtemp(host)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	test_norm_path();
	test_split();
	test_open_dir();
	test_rm_at();
	test_pwrite_all();
	util_rm_rf(root);
	util_rm_rf(host);
	return tap_done();
}
