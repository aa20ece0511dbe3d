/* SPDX-License-Identifier: Apache-2.0 */
/* test_layer: the writable-layer archive (layer-snapshot.c) on crafted hostile upper dirs and archives. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/extract.h"
#include "common/util.h"
#include "isolad/tiers/process/process-internal.h"
#include "../tap.h"

#define B1    200000u /* source sandbox's uid_base */
#define B2    300000u /* restored sandbox's uid_base */
#define DEPTH 1500    /* "d/d/.../f": a path of about 3000 bytes */

static char t[] = "/tmp/isola-layer-XXXXXX";

static void die(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static void mount_tmpfs(const char *dir, const char *opts)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		die(dir);
	if (mount("tmpfs", dir, "tmpfs", 0, opts) < 0)
		die("mount tmpfs");
}

static void put(int dfd, const char *name, const char *data, size_t len, mode_t mode, uid_t uid,
		gid_t gid)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || util_write_all(fd, data, len) < 0 || fchown(fd, uid, gid) < 0 ||
	    fchmod(fd, mode) < 0)
		die(name);
	close(fd);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *weird = "name\nwith newline \xff\xfe";

/* The crafted upper dir: every kind of entry overlay and a hostile sandbox can leave. */
static void make_upper(int up)
{
	struct timespec ts[2] = {{1000, 123456789}, {1000, 123456789}};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, cur, s;

	if (fchown(up, B1, B1) < 0)
		die("chown upper");
	put(up, "hello", "hello world\n", 12, 0644, B1 + 1000, B1 + 1000);
	if (utimensat(up, "hello", ts, 0) < 0)
		die("utimensat");
	put(up, "secret", "s3cret", 6, 0600, B1, B1);
	put(up, "suid", "#!/bin/sh\n", 10, 04755, B1, B1);
	put(up, "alien", "alien", 5, 0644, 5, 6); /* outside the range: a host id */
	put(up, weird, "weird", 5, 0644, B1, B1);
	/* Not UTF-8: a directory (the walk's stack and the reader's mtime list keep names as
	 * bytes) holding a hard-linked file (so is the link table). */
	if (mkdirat(up, "dir\xff", 0755) < 0 || fchownat(up, "dir\xff", B1, B1, 0) < 0)
		die("non-UTF-8 dir");
	put(up, "dir\xff/f\xfe", "bytes", 5, 0644, B1, B1);
	if (linkat(up, "dir\xff/f\xfe", up, "dir\xff/g\xfe", 0) < 0)
		die("non-UTF-8 link");
	if (symlinkat("/etc/shadow", up, "link-shadow") < 0 ||
	    symlinkat("../../../../etc/passwd", up, "link-up") < 0 ||
	    fchownat(up, "link-shadow", B1 + 7, B1 + 7, AT_SYMLINK_NOFOLLOW) < 0)
		die("symlink");
	if (mknodat(up, "fifo", S_IFIFO | 0640, 0) < 0 || fchownat(up, "fifo", B1, B1, 0) < 0)
		die("fifo");
	if (mknodat(up, "wh", S_IFCHR | 0000, makedev(0, 0)) < 0 ||
	    fchownat(up, "wh", B1, B1, AT_SYMLINK_NOFOLLOW) < 0)
		die("whiteout");
	if (mkdirat(up, "opq", 0755) < 0 || fchownat(up, "opq", B1, B1, 0) < 0)
		die("opq");
	fd = openat(up, "opq", O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fsetxattr(fd, "user.overlay.opaque", "y", 1, 0) < 0 ||
	    fsetxattr(fd, "trusted.isola-test", "t", 1, 0) < 0)
		die("opaque xattr");
	put(fd, "x", "x", 1, 0644, B1, B1);
	close(fd);
	ts[0].tv_sec = ts[1].tv_sec = 2000;
	if (utimensat(up, "opq", ts, 0) < 0)
		die("utimensat dir");
	if (mkdirat(up, "sub", 0700) < 0 || fchownat(up, "sub", B1 + 1000, B1 + 1000, 0) < 0)
		die("sub");
	put(up, "hard1", "linked", 6, 0640, B1 + 1000, B1 + 1000);
	if (linkat(up, "hard1", up, "sub/hard2", 0) < 0)
		die("link");
	/* 10 GB apparent, two data blocks. */
	fd = openat(up, "sparse", O_RDWR | O_CREAT, 0644);
	if (fd < 0 || pwrite(fd, "MIDDLE", 6, 5ll << 30) != 6 ||
	    pwrite(fd, "END", 3, (10ll << 30) - 3) != 3 || fchown(fd, B1, B1) < 0)
		die("sparse");
	close(fd);
	fd = openat(up, "holes", O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0 || fchown(fd, B1, B1) < 0)
		die("holes");
	close(fd);
	/* A socket is recorded nowhere (meaningless without its process). */
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/src/upper/sock", t);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("socket");
	close(s);
	cur = dup(up);
	for (int i = 0; i < DEPTH; i++) {
		int n;

		if (mkdirat(cur, "d", 0755) < 0 || fchownat(cur, "d", B1, B1, 0) < 0)
			die("deep mkdir");
		n = openat(cur, "d", O_RDONLY | O_DIRECTORY);
		close(cur);
		cur = n;
	}
	put(cur, "f", "bottom", 6, 0644, B1, B1);
	close(cur);
}

static bool same_meta(int a, int b, const char *name, bool times)
{
	struct stat sa, sb;

	if (fstatat(a, name, &sa, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fstatat(b, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	if ((sa.st_mode != sb.st_mode) || sa.st_uid - B1 != sb.st_uid - B2 ||
	    sa.st_gid - B1 != sb.st_gid - B2 || sa.st_size != sb.st_size ||
	    sa.st_rdev != sb.st_rdev) {
		printf("# %s: mode %o/%o uid %u/%u size %lld/%lld\n", name, sa.st_mode, sb.st_mode,
		       sa.st_uid, sb.st_uid, (long long)sa.st_size, (long long)sb.st_size);
		return false;
	}
	return !times ||
	       (sa.st_mtim.tv_sec == sb.st_mtim.tv_sec && sa.st_mtim.tv_nsec == sb.st_mtim.tv_nsec);
}

static bool content(int dfd, const char *name, off_t off, const char *want)
{
	char buf[64] = "";
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW);
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, strlen(want), off);

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)strlen(want) && !memcmp(buf, want, (size_t)n);
}

static bool restore_ok(int dst, const char *arch, uint32_t base, struct isola_err **err)
{
	int fd = open(arch, O_RDONLY);
	int r = proc_layer_read(dst, "upper", base, fd, arch, err);

	close(fd);
	return r == 0;
}

static void test_round_trip(void)
{
	char src[300], dst[300], arch[300], link[256];
	struct proc_layer_stats st;
	struct isola_err *err = NULL;
	int sfd, up, dfd, out, rfd, cur;
	struct stat a, b;
	char v[8] = "";
	int64_t t0;
	ssize_t n;
	int r;

	snprintf(src, sizeof(src), "%s/src", t);
	snprintf(dst, sizeof(dst), "%s/dst", t);
	snprintf(arch, sizeof(arch), "%s/layer.tar", t);
	mount_tmpfs(src, "size=64m");
	mount_tmpfs(dst, "size=64m");
	sfd = open(src, O_RDONLY | O_DIRECTORY);
	if (sfd < 0 || mkdirat(sfd, "upper", 0755) < 0)
		die("upper");
	up = openat(sfd, "upper", O_RDONLY | O_DIRECTORY);
	make_upper(up);
	out = open(arch, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	t0 = now_us();
	r = proc_layer_write(up, B1, out, arch, &st, &err);
	ok(r == 0,
	   "snapshot of a hostile upper dir (10 GB sparse, FIFO, socket, %d-deep tree) "
	   "succeeds%s%s",
	   DEPTH, err ? ": " : "", err ? err->message : "");
	close(out);
	stat(arch, &a);
	ok(a.st_size < (16 << 20) && now_us() - t0 < 20000000,
	   "the 10 GB sparse file costs its data only: %lld bytes in %lld ms", (long long)a.st_size,
	   (long long)((now_us() - t0) / 1000));
	ok(st.skipped == 1, "only the socket was skipped (%llu)", (unsigned long long)st.skipped);
	dfd = open(dst, O_RDONLY | O_DIRECTORY);
	ok(restore_ok(dfd, arch, B2, &err), "restore into another uid range%s%s", err ? ": " : "",
	   err ? err->message : "");
	isola_err_free(err);
	err = NULL;
	rfd = openat(dfd, "upper", O_RDONLY | O_DIRECTORY);
	ok(rfd >= 0 && fstat(rfd, &b) == 0 && b.st_uid == B2 && (b.st_mode & 07777) == 0755,
	   "the upper dir itself is owned by the new range's root");
	ok(same_meta(up, rfd, "hello", true) && content(rfd, "hello", 0, "hello world\n"),
	   "a file: content, mode, shifted owner, mtime in ns");
	ok(same_meta(up, rfd, "secret", true) && same_meta(up, rfd, "suid", true),
	   "a 0600 file stays 0600 and owned by the same in-sandbox id; setuid bit kept");
	ok(fstatat(rfd, "alien", &b, 0) == 0 && b.st_uid == B2 + 65534 &&
		   (b.st_mode & 07777) == 0444,
	   "a host-owned file becomes nobody with no more than the other bits (%o)",
	   b.st_mode & 07777);
	ok(same_meta(up, rfd, weird, true) && content(rfd, weird, 0, "weird"),
	   "a name with a newline and non-UTF-8 bytes survives byte for byte");
	ok(fstatat(rfd, "dir\xff/f\xfe", &a, 0) == 0 && fstatat(rfd, "dir\xff/g\xfe", &b, 0) == 0 &&
		   a.st_ino == b.st_ino && content(rfd, "dir\xff/g\xfe", 0, "bytes") &&
		   same_meta(up, rfd, "dir\xff", true),
	   "a non-UTF-8 directory and hard-linked file names survive");
	n = readlinkat(rfd, "link-shadow", link, sizeof(link) - 1);
	ok(n == 11 && !memcmp(link, "/etc/shadow", 11) && same_meta(up, rfd, "link-shadow", true),
	   "a symlink to /etc/shadow is recorded as a link, not followed");
	n = readlinkat(rfd, "link-up", link, sizeof(link) - 1);
	ok(n == 22 && !memcmp(link, "../../../../etc/passwd", 22),
	   "a relative escaping symlink too");
	ok(fstatat(rfd, "fifo", &b, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(b.st_mode) &&
		   same_meta(up, rfd, "fifo", true),
	   "a FIFO is recorded (never opened) and recreated");
	ok(fstatat(rfd, "wh", &b, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(b.st_mode) &&
		   b.st_rdev == makedev(0, 0) && same_meta(up, rfd, "wh", false),
	   "an overlay whiteout (char 0:0) is kept");
	cur = openat(rfd, "opq", O_RDONLY | O_DIRECTORY);
	ok(cur >= 0 && fgetxattr(cur, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y' &&
		   fgetxattr(cur, "trusted.isola-test", v, sizeof(v)) < 0 &&
		   same_meta(up, rfd, "opq", true),
	   "an opaque dir keeps user.overlay.opaque (and its mtime); trusted.* is not copied");
	close(cur);
	ok(fstatat(rfd, "hard1", &a, 0) == 0 && fstatat(rfd, "sub/hard2", &b, 0) == 0 &&
		   a.st_ino == b.st_ino && a.st_nlink == 2 && same_meta(up, rfd, "hard1", true),
	   "hard links stay one inode");
	ok(fstatat(rfd, "sparse", &b, 0) == 0 && b.st_size == 10ll << 30 &&
		   b.st_blocks * 512 < (1 << 20) && content(rfd, "sparse", 5ll << 30, "MIDDLE") &&
		   content(rfd, "sparse", (10ll << 30) - 3, "END"),
	   "the sparse file is 10 GB apparent, sparse again, data in place");
	ok(fstatat(rfd, "holes", &b, 0) == 0 && b.st_size == 1 << 20 && b.st_blocks * 512 <= 8192,
	   "an all-hole file stays (almost) all hole");
	ok(faccessat(rfd, "sock", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "the socket is not recreated");
	{
		char p[2 * DEPTH + 8];

		for (int i = 0; i < DEPTH; i++)
			memcpy(p + 2 * i, "d/", 2);
		memcpy(p + 2 * DEPTH, "f", 2);
		ok(content(rfd, p, 0, "bottom"), "the bottom of the %d-deep tree is there", DEPTH);
	}
	close(rfd);
	close(up);
	close(sfd);
	close(dfd);
	umount2(dst, MNT_DETACH);
	umount2(src, MNT_DETACH);
}

/* ---- hostile archives ---- */

struct ent {
	const char *path;
	mode_t type;
	const char *link;     /* symlink target */
	const char *hardlink; /* hard link target */
	const char *xattr;    /* one xattr name */
	dev_t rdev;
};

static void write_archive(const char *path, const struct ent *e, size_t n, bool end)
{
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();

	archive_write_set_format_pax(a);
	if (archive_write_open_filename(a, path) != ARCHIVE_OK)
		die("archive open");
	for (size_t i = 0; i < n + 1 + end; i++) {
		const struct ent root = {.path = ".", .type = AE_IFDIR};
		const struct ent *x = i == 0 || i == n + 1 ? &root : &e[i - 1];

		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, x->path);
		archive_entry_set_filetype(ae, x->type);
		archive_entry_set_perm(ae, 0644);
		if (x->link)
			archive_entry_set_symlink(ae, x->link);
		if (x->hardlink)
			archive_entry_set_hardlink(ae, x->hardlink);
		if (x->xattr)
			archive_entry_xattr_add_entry(ae, x->xattr, "y", 1);
		archive_entry_set_rdev(ae, x->rdev);
		archive_entry_set_size(ae, x->type == AE_IFREG && !x->hardlink ? 5 : 0);
		archive_write_header(a, ae);
		if (x->type == AE_IFREG && !x->hardlink)
			archive_write_data(a, "pwned", 5);
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(ae);
}

static bool outside_untouched(void)
{
	char p[300];
	struct stat st;
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "%s/outside", t);
	d = opendir(p);
	if (!d)
		return false;
	while ((de = readdir(d)))
		n++;
	closedir(d);
	snprintf(p, sizeof(p), "%s/outside/target", t);
	/* Only the canary target is there, unchanged and not linked from elsewhere. */
	return n == 3 && stat(p, &st) == 0 && st.st_nlink == 1 && st.st_size == 6;
}

static void hostile(int dfd, const char *name, const struct ent *e, size_t n, bool end,
		    const char *code)
{
	char arch[300];
	struct isola_err *err = NULL;
	bool failed;

	snprintf(arch, sizeof(arch), "%s/hostile.tar", t);
	write_archive(arch, e, n, end);
	failed = !restore_ok(dfd, arch, B2, &err);
	bool printable = err && err->message;

	for (const char *p = err && err->message ? err->message : ""; *p; p++)
		printable &= (unsigned char)*p >= 0x20 && *p != 0x7f;
	ok(failed && err && !strcmp(err->code, code) && strstr(err->message, arch) && printable &&
		   faccessat(dfd, "upper", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && outside_untouched(),
	   "%s: refused (%s), named, nothing left, nothing outside: %s", name, code,
	   err ? err->message : "(no error)");
	isola_err_free(err);
}

static void test_hostile(void)
{
	char dst[300], out[300], abs_esc[300], hl_esc[300];
	int dfd;

	snprintf(dst, sizeof(dst), "%s/hdst", t);
	mount_tmpfs(dst, "size=8m");
	dfd = open(dst, O_RDONLY | O_DIRECTORY);
	snprintf(out, sizeof(out), "%s/outside", t);
	mkdir(out, 0755);
	snprintf(abs_esc, sizeof(abs_esc), "%s/outside/pwned", t);
	snprintf(out, sizeof(out), "%s/outside/target", t);
	put(AT_FDCWD, out, "target", 6, 0644, 0, 0);
	snprintf(hl_esc, sizeof(hl_esc), "%s/outside/target", t);
	snprintf(out, sizeof(out), "%s/outside", t);
	{
		const struct ent e[] = {{.path = "../outside/pwned", .type = AE_IFREG}};
		hostile(dfd, "`..` entry", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = abs_esc, .type = AE_IFREG}};
		hostile(dfd, "absolute entry", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "esc", .type = AE_IFLNK, .link = out},
					{.path = "esc/pwned", .type = AE_IFREG}};
		hostile(dfd, "symlink to a host dir, then a file through it", e, 2, true,
			"invalid");
	}
	{
		const struct ent e[] = {
			{.path = "up", .type = AE_IFLNK, .link = "../../../../../.."},
			{.path = "up/tmp/pwned", .type = AE_IFREG}};
		hostile(dfd, "relative escaping symlink, then a file through it", e, 2, true,
			"invalid");
	}
	{
		const struct ent e[] = {{.path = "hl", .type = AE_IFREG, .hardlink = hl_esc}};
		hostile(dfd, "hard link to an absolute host file", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {
			{.path = "hl", .type = AE_IFREG, .hardlink = "../outside/target"}};
		hostile(dfd, "hard link with `..`", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "up", .type = AE_IFLNK, .link = hl_esc},
					{.path = "hl", .type = AE_IFREG, .hardlink = "up"},
					{.path = "hl2", .type = AE_IFREG, .hardlink = "up/x"}};
		hostile(dfd, "hard link through a symlink", e, 3, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "null", .type = AE_IFCHR, .rdev = makedev(1, 3)}};
		hostile(dfd, "a device node other than a whiteout", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "blk", .type = AE_IFBLK, .rdev = makedev(8, 0)}};
		hostile(dfd, "a block device", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {
			{.path = "f", .type = AE_IFREG, .xattr = "trusted.overlay.opaque"}};
		hostile(dfd, "a trusted.* xattr", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "f", .type = AE_IFREG},
					{.path = "f", .type = AE_IFREG}};
		hostile(dfd, "a duplicate entry", e, 2, true, "invalid");
	}
	{
		/* Found by fuzz_layer: fsetxattr's EINVAL was filed as an internal error. */
		const struct ent e[] = {{.path = "f", .type = AE_IFREG, .xattr = "user."}};
		hostile(dfd, "an xattr named `user.` alone", e, 1, true, "invalid");
	}
	{
		static char longname[300];
		const struct ent e[] = {{.path = "f", .type = AE_IFREG, .xattr = longname}};

		memset(longname, 'a', sizeof(longname) - 1);
		memcpy(longname, "user.", 5);
		hostile(dfd, "an xattr name over 255 bytes", e, 1, true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "f", .type = AE_IFREG},
					{.path = "g", .type = AE_IFREG},
					{.path = "g", .type = AE_IFREG, .hardlink = "f"}};
		hostile(dfd, "a hard link over an existing entry (a duplicate)", e, 3, true,
			"invalid");
	}
	{
		const struct ent e[] = {{.path = "no-parent\n\x1b[31mFORGED/x", .type = AE_IFREG}};
		hostile(dfd, "a name with a newline and an escape (message stays printable)", e, 1,
			true, "invalid");
	}
	{
		const struct ent e[] = {{.path = "f", .type = AE_IFREG}};
		hostile(dfd, "no end marker (truncated at an entry boundary)", e, 1, false,
			"invalid");
	}
	close(dfd);
	umount2(dst, MNT_DETACH);
}

static void test_truncated(void)
{
	char src[300], dst[300], arch[300], cut[300];
	struct isola_err *err = NULL;
	int sfd, up, out, dfd;
	struct stat st;

	snprintf(src, sizeof(src), "%s/tsrc", t);
	snprintf(dst, sizeof(dst), "%s/tdst", t);
	mount_tmpfs(src, "size=16m");
	mount_tmpfs(dst, "size=16m");
	sfd = open(src, O_RDONLY | O_DIRECTORY);
	mkdirat(sfd, "upper", 0755);
	up = openat(sfd, "upper", O_RDONLY | O_DIRECTORY);
	fchown(up, B1, B1);
	for (int i = 0; i < 50; i++) {
		char name[16], data[4096];

		snprintf(name, sizeof(name), "f%d", i);
		memset(data, 'a' + i % 26, sizeof(data));
		put(up, name, data, sizeof(data), 0644, B1, B1);
	}
	dfd = open(dst, O_RDONLY | O_DIRECTORY);
	for (int level = 1; level >= 0; level--) {
		snprintf(arch, sizeof(arch), "%s/t%d.tar", t, level);
		snprintf(cut, sizeof(cut), "%s/cut%d.tar", t, level);
		out = open(arch, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (proc_layer_write(up, B1, out, arch, NULL, NULL) < 0)
			die("write for truncation");
		if (level) {
			char z[310];
			int zfd;

			snprintf(z, sizeof(z), "%s.zst", arch);
			zfd = open(z, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (proc_layer_compress(out, zfd, z, NULL) < 0 || rename(z, arch) < 0)
				die("compress for truncation");
			close(zfd);
		}
		close(out);
		stat(arch, &st);
		static const double cuts[] = {0.0, 0.1, 0.5, 0.9, 0.99};
		for (size_t i = 0; i < ARRAY_SIZE(cuts); i++) {
			off_t len = (off_t)(st.st_size * cuts[i]);
			char cmd[700];
			bool failed;

			snprintf(cmd, sizeof(cmd), "head -c %lld %s > %s", (long long)len, arch,
				 cut);
			if (system(cmd) != 0)
				die("head");
			failed = !restore_ok(dfd, cut, B2, &err);
			ok(failed && err && !strcmp(err->code, "invalid") &&
				   strstr(err->message, cut) &&
				   faccessat(dfd, "upper", F_OK, AT_SYMLINK_NOFOLLOW) < 0,
			   "%s archive cut to %lld of %lld bytes: invalid, named, nothing left: %s",
			   level ? "zstd" : "plain", (long long)len, (long long)st.st_size,
			   err ? err->message : "(restored!)");
			isola_err_free(err);
			err = NULL;
		}
		/* Plain tar cut inside the zero padding after the end marker: no entry is lost,
		 * so the restore is whole (every file back). */
		if (!level) {
			char cmd[700];
			struct stat fs;

			snprintf(cmd, sizeof(cmd), "head -c %lld %s > %s",
				 (long long)(st.st_size - 100), arch, cut);
			if (system(cmd) != 0)
				die("head");
			ok(restore_ok(dfd, cut, B2, &err) &&
				   fstatat(dfd, "upper/f49", &fs, 0) == 0 && fs.st_size == 4096,
			   "plain archive cut inside its trailing padding: restored whole");
			isola_err_free(err);
			err = NULL;
			if (util_rm_rf_at(dfd, "upper") < 0)
				die("rm upper");
		}
	}
	close(dfd);
	close(up);
	close(sfd);
	umount2(dst, MNT_DETACH);
	umount2(src, MNT_DETACH);
}

static void fill_random(int dfd, const char *name, size_t len)
{
	char *buf = malloc(len);
	int fd = open("/dev/urandom", O_RDONLY);

	if (!buf || fd < 0 || util_read_exact(fd, buf, len) < 0)
		die("urandom");
	close(fd);
	put(dfd, name, buf, len, 0644, B1, B1);
	free(buf);
}

static void test_enospc(void)
{
	char src[300], tiny[300], arch[300], dst[300];
	struct isola_err *err = NULL;
	int sfd, up, tfd, out, dfd, r;

	snprintf(src, sizeof(src), "%s/esrc", t);
	snprintf(tiny, sizeof(tiny), "%s/tiny", t);
	mount_tmpfs(src, "size=16m");
	mount_tmpfs(tiny, "size=64k");
	sfd = open(src, O_RDONLY | O_DIRECTORY);
	mkdirat(sfd, "upper", 0755);
	up = openat(sfd, "upper", O_RDONLY | O_DIRECTORY);
	fchown(up, B1, B1);
	fill_random(up, "big", 1 << 20);
	for (int i = 0; i < 60; i++) {
		char name[16];

		snprintf(name, sizeof(name), "small%d", i);
		put(up, name, "x", 1, 0644, B1, B1);
	}
	tfd = open(tiny, O_RDONLY | O_DIRECTORY);
	out = openat(tfd, "layer.tar.zst", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	r = proc_layer_write(up, B1, out, "tiny/layer.tar.zst", NULL, &err);
	ok(r == -ENOSPC && err && !strcmp(err->code, "no_space") &&
		   strstr(err->message, "tiny/layer.tar.zst"),
	   "snapshot onto a full filesystem: no_space naming the file: %s",
	   err ? err->message : "(succeeded)");
	isola_err_free(err);
	err = NULL;
	close(out);
	unlinkat(tfd, "layer.tar.zst", 0);
	/* The compression step onto a full filesystem too. */
	{
		char plain[300];
		int pfd;

		snprintf(plain, sizeof(plain), "%s/plain.tar", t);
		pfd = open(plain, O_RDWR | O_CREAT | O_TRUNC, 0600);
		out = openat(tfd, "layer.tar.zst", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (pfd < 0 || proc_layer_write(up, B1, pfd, plain, NULL, NULL) < 0)
			die("plain");
		r = proc_layer_compress(pfd, out, "tiny/layer.tar.zst", &err);
		ok(r == -ENOSPC && err && !strcmp(err->code, "no_space") &&
			   strstr(err->message, "tiny/layer.tar.zst"),
		   "compression onto a full filesystem: no_space naming the file: %s",
		   err ? err->message : "(succeeded)");
		isola_err_free(err);
		err = NULL;
		close(pfd);
		close(out);
		unlinkat(tfd, "layer.tar.zst", 0);
	}

	/* Restore into a sandbox whose disk limit is too small, then whose inode limit is. */
	snprintf(arch, sizeof(arch), "%s/e.tar.zst", t);
	out = open(arch, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (proc_layer_write(up, B1, out, arch, NULL, NULL) < 0)
		die("write");
	close(out);
	static const char *const limits[] = {"size=512k", "size=16m,nr_inodes=20"};
	for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
		snprintf(dst, sizeof(dst), "%s/edst%zu", t, i);
		mount_tmpfs(dst, limits[i]);
		dfd = open(dst, O_RDONLY | O_DIRECTORY);
		r = restore_ok(dfd, arch, B2, &err);
		ok(!r && err && !strcmp(err->code, "no_space") && strstr(err->message, arch) &&
			   faccessat(dfd, "upper", F_OK, AT_SYMLINK_NOFOLLOW) < 0,
		   "restore into a tmpfs with %s: no_space, nothing left: %s", limits[i],
		   err ? err->message : "(succeeded)");
		isola_err_free(err);
		err = NULL;
		close(dfd);
		umount2(dst, MNT_DETACH);
	}
	close(up);
	close(sfd);
	close(tfd);
	umount2(tiny, MNT_DETACH);
	umount2(src, MNT_DETACH);
}

/* A sandbox that is not frozen (the writer must not rely on it): a child rewrites, truncates,
 * deletes and recreates files and swaps a directory for a symlink to /etc while snapshots
 * run. Each one must finish and restore; none may follow the symlink. */
static void test_races(void)
{
	char src[300], dst[300], arch[300];
	struct isola_err *err = NULL;
	int sfd, up, dfd, good = 0, restored = 0;
	bool followed = false;
	pid_t pid;

	snprintf(src, sizeof(src), "%s/rsrc", t);
	snprintf(dst, sizeof(dst), "%s/rdst", t);
	snprintf(arch, sizeof(arch), "%s/r.tar", t);
	mount_tmpfs(src, "size=64m");
	mount_tmpfs(dst, "size=64m");
	sfd = open(src, O_RDONLY | O_DIRECTORY);
	mkdirat(sfd, "upper", 0755);
	up = openat(sfd, "upper", O_RDONLY | O_DIRECTORY);
	fchown(up, B1, B1);
	pid = fork();
	if (pid == 0) {
		static char buf[200000];

		memset(buf, 'x', sizeof(buf));
		for (unsigned i = 0;; i++) {
			char n[32];
			int fd;

			snprintf(n, sizeof(n), "f%u", i % 64);
			fd = openat(up, n, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0) {
				if (write(fd, buf, (i * 7919) % sizeof(buf)) < 0)
					_exit(1);
				close(fd);
			}
			snprintf(n, sizeof(n), "f%u", (i + 32) % 64);
			unlinkat(up, n, 0);
			if (i % 2) {
				unlinkat(up, "swap", 0);
				mkdirat(up, "swap", 0755);
				fd = openat(up, "swap/inner", O_WRONLY | O_CREAT, 0644);
				if (fd >= 0)
					close(fd);
			} else {
				unlinkat(up, "swap/inner", 0);
				unlinkat(up, "swap", AT_REMOVEDIR);
				symlinkat("/etc", up, "swap");
			}
		}
	}
	dfd = open(dst, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 30; i++) {
		int out = open(arch, O_RDWR | O_CREAT | O_TRUNC, 0600);

		if (proc_layer_write(up, B1, out, arch, NULL, &err) == 0)
			good++;
		else
			printf("# snapshot %d: %s\n", i, err->message);
		isola_err_free(err);
		err = NULL;
		close(out);
		out = open(arch, O_RDONLY);
		if (proc_layer_read(dfd, "upper", B2, out, arch, &err) == 0)
			restored++;
		else
			printf("# restore %d: %s\n", i, err->message);
		isola_err_free(err);
		err = NULL;
		close(out);
		/* Nothing of the host's /etc came through the swapped symlink. */
		{
			struct stat sw;

			followed |=
				fstatat(dfd, "upper/swap", &sw, AT_SYMLINK_NOFOLLOW) == 0 &&
				S_ISDIR(sw.st_mode) &&
				faccessat(dfd, "upper/swap/passwd", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		}
		util_rm_rf_at(dfd, "upper");
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ok(good == 30 && restored == 30 && !followed,
	   "30 snapshots of a layer changing underneath all finish and restore (%d, %d), none "
	   "followed the swapped symlink",
	   good, restored);
	close(dfd);
	close(up);
	close(sfd);
	umount2(dst, MNT_DETACH);
	umount2(src, MNT_DETACH);
}

/* Not a timed assertion: prints what a ~50 MB layer costs with and without zstd. */
static void measure_50mb(void)
{
	char src[300], arch[300];
	int sfd, up;

	snprintf(src, sizeof(src), "%s/msrc", t);
	mount_tmpfs(src, "size=128m");
	sfd = open(src, O_RDONLY | O_DIRECTORY);
	mkdirat(sfd, "upper", 0755);
	up = openat(sfd, "upper", O_RDONLY | O_DIRECTORY);
	fchown(up, B1, B1);
	/* Half incompressible (random), half source-like text, in 100 KiB files. */
	for (int i = 0; i < 500; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%03d", i);
		if (i % 2) {
			fill_random(up, name, 100 << 10);
		} else {
			char *b = malloc(100 << 10);
			size_t o = 0;

			while (o < (100 << 10)) {
				int n = snprintf(b + o, (100 << 10) - o,
						 "int f%d(int x) { return x * %d + %zu; }\n", i,
						 i * 7, o);
				o += n > 0 ? (size_t)n : 1;
			}
			put(up, name, b, 100 << 10, 0644, B1, B1);
			free(b);
		}
	}
	{
		char plain[300];
		struct stat st;
		int64_t t0;
		int pfd;

		snprintf(plain, sizeof(plain), "%s/m.tar", t);
		pfd = open(plain, O_RDWR | O_CREAT | O_TRUNC, 0600);
		t0 = now_us();
		if (proc_layer_write(up, B1, pfd, plain, NULL, NULL) < 0)
			die("measure");
		printf("# 50 MB layer, plain archive (the frozen part): %lld ms, %lld bytes\n",
		       (long long)((now_us() - t0) / 1000),
		       (long long)(fstat(pfd, &st) == 0 ? st.st_size : -1));
		for (int level = 1; level <= 3; level += 2) {
			int out;

			snprintf(arch, sizeof(arch), "%s/m%d.tar.zst", t, level);
			proc_layer_set_compression(level);
			out = open(arch, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			t0 = now_us();
			if (proc_layer_compress(pfd, out, arch, NULL) < 0)
				die("measure compress");
			printf("# then zstd level %d: %lld ms, %lld bytes\n", level,
			       (long long)((now_us() - t0) / 1000),
			       (long long)(fstat(out, &st) == 0 ? st.st_size : -1));
			close(out);
			unlink(arch);
		}
		close(pfd);
		unlink(plain);
	}
	proc_layer_set_compression(1);
	close(up);
	close(sfd);
	umount2(src, MNT_DETACH);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (tmpfs mounts, chown into uid ranges)\n");
		return 0;
	}
	/* Mounts made here die with the process. */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("private mount namespace");
	if (!mkdtemp(t))
		die("mkdtemp");
	test_round_trip();
	test_hostile();
	test_truncated();
	test_enospc();
	test_races();
	if (getenv("ISOLA_MEASURE"))
		measure_50mb();
	{
		char cmd[100];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", t);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", t);
	}
	return tap_done();
}
