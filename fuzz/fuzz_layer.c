/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_layer: libFuzzer target for the process tier's snapshot reader (proc_layer_read). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/err.h"
#include "common/extract.h"
#include "common/util.h"
#include "isolad/tiers/process/process-internal.h"

/*
 * Each input is a snapshot archive (plain pax or zstd: the reader sniffs it) extracted by the
 * real reader, the same code path a restore takes, into box/a/parent/upper. The box is a
 * fresh tmpfs when we may mount one (root: fast, and a bomb hits its size cap, not the
 * host's disk), else a plain directory. After every run the box must hold exactly what it
 * held before: box/a/parent (empty again: a failed read removes `upper`, a good one is
 * removed here) and box/a/canary with its bytes. Anything else in the box came from an
 * entry that escaped `upper` through `..`, a symlink or a hard link, and aborts. An absolute
 * escape would land outside the box: the dictionary steers names at ESCAPE, which must
 * never exist.
 *
 * ISOLA_FUZZ_LAYER_INTERNAL=1 prints every failure filed as `internal` (triage).
 * ISOLA_FUZZ_LAYER_SEEDS=<dir> instead writes seed archives made by the real writer from a
 * crafted upper dir (every entry kind it records) into <dir> and exits (fuzz/corpus/).
 */

#define ESCAPE "/tmp/isola-fuzz-layer-escape"
#define CANARY "canary bytes\n"

static char box[] = "/tmp/isola-fuzz-layer-XXXXXX";
static bool mounted;
static int parentfd = -1;    /* box/a/parent: the reader's parent dir */
static int afd = -1;	     /* box/a */
static int boxfd = -1;	     /* box */
static int in_fd = -1;	     /* memfd holding the current input */
static uint32_t uid_base;    /* 100000 as root (a sandbox's range), else our own uid */
static bool report_internal; /* $ISOLA_FUZZ_LAYER_INTERNAL: print `internal` failures */

static void die(const char *what)
{
	fprintf(stderr, "fuzz_layer: %s: %s\n", what, strerror(errno));
	abort();
}

static void cleanup(void)
{
	if (mounted)
		umount2(box, MNT_DETACH);
	util_rm_rf_at(AT_FDCWD, box);
}

/* The names in dir, sorted into one '/'-separated string (small dirs only). */
static void list(int dfd, char *out, size_t len)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;
	size_t n = 0;

	out[0] = '\0';
	if (!d)
		die("list the box");
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s/", de->d_name);
	}
	closedir(d);
}

static void check_box(void)
{
	char names[512], buf[64];
	struct stat st;
	ssize_t n;
	int fd;

	list(boxfd, names, sizeof(names));
	if (strcmp(names, "a/"))
		fprintf(stderr, "fuzz_layer: box holds `%s`\n", names), abort();
	list(afd, names, sizeof(names));
	if (strcmp(names, "parent/canary/") && strcmp(names, "canary/parent/"))
		fprintf(stderr, "fuzz_layer: box/a holds `%s`\n", names), abort();
	list(parentfd, names, sizeof(names));
	if (names[0])
		fprintf(stderr, "fuzz_layer: box/a/parent holds `%s`\n", names), abort();
	fd = openat(afd, "canary", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != getuid() || (st.st_mode & 07777) != 0600)
		fprintf(stderr, "fuzz_layer: the canary changed\n"), abort();
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n != (ssize_t)strlen(CANARY) || memcmp(buf, CANARY, (size_t)n))
		fprintf(stderr, "fuzz_layer: the canary's bytes changed\n"), abort();
	if (faccessat(AT_FDCWD, ESCAPE, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		fprintf(stderr, "fuzz_layer: %s exists\n", ESCAPE), abort();
}

static void put(int dfd, const char *name, const char *data, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		die(name);
	close(fd);
}

/* Seeds: the writer's own archives of an upper dir holding every kind of entry it keeps. */
static void write_seeds(const char *dir)
{
	struct isola_err *err = NULL;
	char path[4096];
	int up = -1, sub = -1, out, plain;

	if (mkdirat(boxfd, "seed", 0755) < 0 ||
	    (up = openat(boxfd, "seed", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("seed dir");
	fchown(up, uid_base, uid_base);
	put(up, "file", "hello world\n", 0644);
	put(up, "suid", "#!/bin/sh\n", 04755);
	if (mkdirat(up, "sub", 0755) < 0 ||
	    (sub = openat(up, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("sub");
	put(sub, "inner", "inner\n", 0600);
	fsetxattr(sub, "user.overlay.opaque", "y", 1, 0);
	if (linkat(up, "file", sub, "hard", 0) < 0 || symlinkat("../file", sub, "rel") < 0 ||
	    symlinkat("/etc/shadow", up, "abs") < 0 || mkfifoat(up, "fifo", 0644) < 0 ||
	    mknodat(up, "whiteout", S_IFCHR | 0, makedev(0, 0)) < 0)
		die("seed entries");
	{
		int fd = openat(up, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		if (fd < 0 || pwrite(fd, "mid", 3, 1 << 20) != 3 || ftruncate(fd, 4 << 20) < 0)
			die("sparse");
		fsetxattr(fd, "user.note", "v", 1, 0);
		close(fd);
	}
	{
		static const char *const mine[] = {"suid", "sub",  "sub/inner", "sub/rel",
						   "abs",  "fifo", "whiteout",	"sparse"};

		for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++)
			fchownat(up, mine[i], uid_base, uid_base, AT_SYMLINK_NOFOLLOW);
		fchownat(up, "file", uid_base + 1000, uid_base + 1000, 0);
		fchmodat(up, "suid", 04755, 0); /* chown cleared the setuid bit */
	}
	close(sub);
	snprintf(path, sizeof(path), "%s/seed-plain", dir);
	plain = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (plain < 0 || proc_layer_write(up, uid_base, plain, path, NULL, &err) < 0)
		fprintf(stderr, "fuzz_layer: seed: %s\n", err ? err->message : strerror(errno)),
			abort();
	snprintf(path, sizeof(path), "%s/seed-zstd", dir);
	out = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0 || proc_layer_compress(plain, out, path, &err) < 0)
		fprintf(stderr, "fuzz_layer: seed: %s\n", err ? err->message : strerror(errno)),
			abort();
	close(out);
	close(plain);
	close(up);
	util_rm_rf_at(boxfd, "seed");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("ISOLA_FUZZ_LAYER_SEEDS");
	int fd;

	(void)argc;
	(void)argv;
	report_internal = getenv("ISOLA_FUZZ_LAYER_INTERNAL") != NULL;
	/* Not root (CI runs as root): chown only works to our own uid, so most entries with
	 * other owners fail early; the run still exercises the parser. */
	uid_base = geteuid() == 0 ? 100000u : (uint32_t)geteuid();
	umask(022);
	if (!mkdtemp(box))
		die("mkdtemp");
	atexit(cleanup);
	/* In a mount namespace of our own, the tmpfs goes away with the process even when a
	 * finding aborts it (atexit does not run then). */
	mounted = unshare(CLONE_NEWNS) == 0 &&
		  mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		  mount("tmpfs", box, "tmpfs", MS_NOSUID | MS_NODEV,
			"size=64m,nr_inodes=20000,mode=0700") == 0;
	boxfd = open(box, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (boxfd < 0 || mkdirat(boxfd, "a", 0755) < 0 ||
	    (afd = openat(boxfd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    mkdirat(afd, "parent", 0755) < 0 ||
	    (parentfd = openat(afd, "parent", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("make the box");
	fd = openat(afd, "canary", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, CANARY, strlen(CANARY)) != (ssize_t)strlen(CANARY))
		die("canary");
	close(fd);
	in_fd = memfd_create("fuzz-layer", MFD_CLOEXEC);
	if (in_fd < 0)
		die("memfd_create");
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	check_box();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct isola_err *err = NULL;
	struct stat st;
	int r;

	if (ftruncate(in_fd, 0) < 0 || (size && pwrite(in_fd, data, size, 0) != (ssize_t)size) ||
	    lseek(in_fd, 0, SEEK_SET) != 0)
		die("input memfd");
	r = proc_layer_read(parentfd, PROC_LAYER_UPPER, uid_base, in_fd, "fuzz.tar.zst", &err);
	if (r < 0) {
		/* The error contract: a code and a message naming the archive; nothing left. */
		if (!err || !err->code[0] || !err->message || !strstr(err->message, "fuzz.tar.zst"))
			fprintf(stderr, "fuzz_layer: failure %d without a proper error\n", r),
				abort();
		if (fstatat(parentfd, PROC_LAYER_UPPER, &st, AT_SYMLINK_NOFOLLOW) == 0)
			fprintf(stderr, "fuzz_layer: a failed read left `upper`\n"), abort();
		/* Triage aid: hostile bytes should read `invalid` (or `no_space`); an
		 * `internal` answer is a misfiled refusal worth a look. */
		if (report_internal && !strcmp(err->code, "internal"))
			fprintf(stderr, "fuzz_layer: internal: %s\n", err->message);
		isola_err_free(err);
	} else {
		if (err)
			abort();
		if (fstatat(parentfd, PROC_LAYER_UPPER, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			fprintf(stderr, "fuzz_layer: a good read made no `upper`\n"), abort();
		if (util_rm_rf_at(parentfd, PROC_LAYER_UPPER) < 0)
			die("remove upper");
	}
	check_box();
	return 0;
}
