/* SPDX-License-Identifier: Apache-2.0 */
/* ext4: builds and caches templates/<id>/rootfs.ext4 for the microvm tier (mkfs.ext4 -d). */
#include "ext4.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "vmroot.h"

#define EXT4_MAX_EXCLUDES 32

/* Host paths a guest never needs: documentation, firmware and the host's kernel modules
 * (the guest has its own kernel), debug symbols, and GPU toolkits. */
static const char *const default_excludes[] = {
	"/usr/share/doc",    "/usr/share/man",	 "/usr/share/info", "/usr/lib/debug",
	"/usr/lib/firmware", "/usr/lib/modules", "/usr/src",	    "/usr/local/cuda",
};

static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* Image mode for templates with host binds: the package closure (small) or all of them. */
static bool full_mode;

/* The build in progress, or the last one that failed, for GET /v1/templates/{name}. */
static struct {
	pthread_mutex_t lock;  /* protects what follows */
	char template_id[80];  /* template dir's name ("" = none yet) */
	char state[16];	       /* "building" or "failed" */
	char step[16];	       /* packages, staging, measuring, mkfs */
	uint64_t done;	       /* items (staging: paths, mkfs: bytes) so far */
	uint64_t total;	       /* items in all, 0 = unknown */
	uint64_t started_ms;   /* util_now_ms() at the start */
	char error[256];       /* failed: why */
	volatile int cancel;   /* set by images_ext4_shutdown: stop mkfs and fail */
	pthread_t prebuild;    /* the background build thread */
	bool prebuild_running; /* prebuild is joinable */
} prog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void prog_set(const char *step, uint64_t done, uint64_t total)
{
	pthread_mutex_lock(&prog.lock);
	snprintf(prog.step, sizeof(prog.step), "%s", step);
	prog.done = done;
	prog.total = total;
	pthread_mutex_unlock(&prog.lock);
}

static void on_stage(void *ud, const char *step, uint64_t done, uint64_t total)
{
	(void)ud;
	prog_set(step, done, total);
}

int images_ext4_set_mode(const char *mode)
{
	if (!strcmp(mode, "small"))
		full_mode = false;
	else if (!strcmp(mode, "full"))
		full_mode = true;
	else
		return -EINVAL;
	return 0;
}

const char *images_ext4_file(unsigned n_binds)
{
	return n_binds && !full_mode ? "rootfs-small.ext4" : "rootfs.ext4";
}

json_t *images_ext4_progress_json(const char *template_id)
{
	json_t *j = NULL;

	pthread_mutex_lock(&prog.lock);
	if (prog.template_id[0] && !strcmp(prog.template_id, template_id))
		j = json_pack("{s:s,s:s,s:I,s:I,s:I,s:s*}", "state", prog.state, "step", prog.step,
			      "done", (json_int_t)prog.done, "total", (json_int_t)prog.total,
			      "elapsed_ms", (json_int_t)(util_now_ms() - prog.started_ms), "error",
			      prog.error[0] ? prog.error : NULL);
	pthread_mutex_unlock(&prog.lock);
	return j;
}

#define EXT4_JOURNAL_MIB 32 /* -J size=: fixed, so the tight size below can count it */

uint64_t images_ext4_size_for(uint64_t used, uint64_t inodes)
{
	/* Tight: the image's free space is all a sandbox gets beyond its `disk` allowance
	 * (the guest grows the filesystem only to the allowance), so leave little. Files
	 * (`used` counts whole host blocks, so it overestimates), 256-byte inodes, the
	 * journal, then 2% + 16 MiB for bitmaps, group descriptors, directories and extent
	 * blocks. Measured on the host template (2.9 GiB of files): ~60 MiB free. */
	uint64_t sz = used + used / 50 + inodes * 256 + ((EXT4_JOURNAL_MIB + 16ull) << 20);

	return (sz + (1ull << 20) - 1) & ~((1ull << 20) - 1);
}

/* The size the build falls back to when the tight one did not hold the files (a host
 * filesystem that compresses makes st_blocks undercount): the old, roomy estimate. */
static uint64_t size_roomy(uint64_t used, uint64_t inodes)
{
	uint64_t sz = used + used / 10 + inodes * 512 + (96ull << 20);

	return (sz + (1ull << 20) - 1) & ~((1ull << 20) - 1);
}

/* The exclude list: defaults plus $ISOLA_MICROVM_EXCLUDE; the strings are static or
 * point into `buf`. */
static unsigned excludes(const char **out, char *buf, size_t buflen)
{
	const char *env = getenv("ISOLA_MICROVM_EXCLUDE");
	unsigned n = 0;
	char *save = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(default_excludes); i++)
		out[n++] = default_excludes[i];
	if (env && strlen(env) < buflen) {
		snprintf(buf, buflen, "%s", env);
		for (char *t = strtok_r(buf, ":", &save); t && n < EXT4_MAX_EXCLUDES;
		     t = strtok_r(NULL, ":", &save))
			if (t[0] == '/' && !strstr(t, ".."))
				out[n++] = t;
	}
	return n;
}

/* ---- size walk (parent, under build_lock: nftw has no user pointer) ---- */

static struct {
	const char **ex; /* excluded host paths */
	unsigned n_ex;	 /* entries of ex */
	uint64_t bytes;	 /* allocated bytes seen */
	uint64_t inodes; /* entries seen */
	bool whole;	 /* count every file whole (a staged tree: its links are ours) */
} walk;

static bool excluded(const char *path)
{
	for (unsigned i = 0; i < walk.n_ex; i++) {
		size_t l = strlen(walk.ex[i]);

		if (!strncmp(path, walk.ex[i], l) && (path[l] == '\0' || path[l] == '/'))
			return true;
	}
	return false;
}

static bool skip_path(const char *path)
{
	return excluded(path);
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	if (excluded(path))
		return type == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
	walk.inodes++;
	if (type == FTW_F && (st->st_nlink <= 1 || walk.whole))
		walk.bytes += (uint64_t)st->st_blocks * 512;
	else if (type == FTW_F)
		walk.bytes += (uint64_t)st->st_blocks * 512 / st->st_nlink + 1;
	else
		walk.bytes += 4096;
	return FTW_CONTINUE;
}

/* ---- the staging child (fork of a multithreaded process: syscalls only) ---- */

struct stage_plan {
	const char *stage;			       /* staging dir (empty on the host) */
	const char *rootfs;			       /* template rootfs dir */
	char bind_dst[TIER_MAX_BINDS][PATH_MAX + 300]; /* stage + dst */
	const char *bind_src[TIER_MAX_BINDS];	       /* host dirs */
	unsigned n_binds;			       /* used entries */
	char ex_dst[EXT4_MAX_EXCLUDES]
		   [PATH_MAX + 300]; /* stage + excluded path (existing dirs only) */
	unsigned n_ex;		     /* used entries */
	char *const *argv;	     /* mkfs.ext4 command */
};

static __attribute__((noreturn)) void stage_child(const struct stage_plan *p, int devnull,
						  pid_t parent)
{
	/* Dies with isolad (PDEATHSIG; checked against a death before it was set): a build an
	 * isolad killed mid-way leaves no mkfs holding its state dir's files, and the next
	 * isolad builds the image again. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(119);
	/* A private mount namespace: nothing below is visible on the host, and it all goes
	 * away when mkfs exits. */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		_exit(120);
	if (mount(p->rootfs, p->stage, NULL, MS_BIND | MS_REC, NULL) < 0)
		_exit(121);
	for (unsigned i = 0; i < p->n_binds; i++)
		if (mount(p->bind_src[i], p->bind_dst[i], NULL, MS_BIND | MS_REC, NULL) < 0)
			_exit(122);
	for (unsigned i = 0; i < p->n_ex; i++)
		mount("tmpfs", p->ex_dst[i], "tmpfs", MS_RDONLY, "size=4k,mode=0755");
	dup2(devnull, 0);
	dup2(devnull, 1);
	execvp(p->argv[0], p->argv);
	_exit(127);
}

/* Runs mkfs in the staging child; reports the image's allocated bytes (out of `total`) as the
 * mkfs step's progress while it writes, and kills it on images_ext4_shutdown. */
static int run_build(const struct stage_plan *p, int img_fd, uint64_t total, struct isola_err **err)
{
	cleanup_fd int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	int status;
	pid_t pid, w;

	pid_t parent = getpid();

	pid = fork();
	if (pid < 0)
		return isola_err_sys(err, errno, "internal", "fork for mkfs.ext4");
	if (pid == 0)
		stage_child(p, devnull, parent);
	for (;;) {
		struct stat st;

		w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return isola_err_sys(err, errno, "internal", "wait for mkfs.ext4");
		if (prog.cancel) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			return isola_err_set(err, ECANCELED, "unavailable",
					     "isolad is stopping: image build cancelled");
		}
		if (fstat(img_fd, &st) == 0) {
			uint64_t b = (uint64_t)st.st_blocks * 512;

			prog_set("mkfs", b < total ? b : total, total);
		}
		usleep(100 * 1000);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return isola_err_set(err, ENOENT, "unavailable",
				     "mkfs.ext4 not found (install e2fsprogs)");
	return isola_err_set(err, EIO, "internal",
			     "building the template's ext4 image failed (mkfs.ext4 status %d, "
			     "staging step %d)",
			     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* One mkfs.ext4 of the staged tree (stage, as p->stage) into fd (tmp) at size bytes. */
static int mkfs_at(struct stage_plan *p, char *stage, int fd, char *tmp, uint64_t size,
		   uint64_t inodes, struct isola_err **err)
{
	char size_s[32], inodes_s[32], journal_s[32];
	char *argv[] = {"mkfs.ext4", "-q",     "-F",	     "-b",   "4096",
			"-N",	     inodes_s, "-m",	     "0",    "-J",
			journal_s,   "-L",     "isola-root", "-E",   "root_owner=0:0",
			"-d",	     stage,    tmp,	     size_s, NULL};
	int r;

	/* A fresh file each time: a failed attempt leaves a half-written image. */
	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)size) < 0)
		return isola_err_sys(err, errno, "internal", "size `%s`", tmp);
	snprintf(size_s, sizeof(size_s), "%lluk", (unsigned long long)(size >> 10));
	snprintf(inodes_s, sizeof(inodes_s), "%llu", (unsigned long long)inodes);
	snprintf(journal_s, sizeof(journal_s), "size=%d", EXT4_JOURNAL_MIB);
	p->argv = argv;
	r = run_build(p, fd, size, err);
	p->argv = NULL;
	return r;
}

/* Everything after the template dir is known; caller holds build_lock. */
static int build(const char *tdir, const char *rootfs, const struct tier_bind *binds,
		 unsigned n_binds, const char *img, struct isola_err **err)
{
	static struct stage_plan p;			   /* large; build_lock serialises */
	static char mapped[TIER_MAX_BINDS][PATH_MAX + 64]; /* small mode: staged bind sources */
	char stage[PATH_MAX + 32], tmp[PATH_MAX + 32], host[PATH_MAX + 32], exbuf[4096];
	const char *ex[EXT4_MAX_EXCLUDES], *src[TIER_MAX_BINDS];
	uint64_t size, inodes, files = 0, bytes = 0;
	bool small = !full_mode && n_binds > 0;
	cleanup_fd int fd = -1;
	int r;

	memset(&p, 0, sizeof(p));
	if (n_binds > TIER_MAX_BINDS)
		n_binds = TIER_MAX_BINDS;
	snprintf(stage, sizeof(stage), "%s/.ext4-stage", tdir);
	snprintf(tmp, sizeof(tmp), "%s/.rootfs.ext4.tmp", tdir);
	snprintf(host, sizeof(host), "%s/.ext4-host", tdir);
	walk.ex = ex;
	walk.n_ex = excludes(ex, exbuf, sizeof(exbuf));
	util_rm_rf(stage);
	util_rm_rf(host);
	unlink(tmp);
	/* Small: /usr is the package closure (vmroot.c), staged under `host` and shown at
	 * /usr instead of the host's; other binds (/etc/ssl/certs) stay whole. */
	for (unsigned i = 0; i < n_binds; i++) {
		src[i] = binds[i].src;
		if (small && !strncmp(binds[i].src, "/usr", 4) &&
		    (binds[i].src[4] == '/' || !binds[i].src[4])) {
			snprintf(mapped[i], sizeof(mapped[i]), "%s%s", host, binds[i].src);
			src[i] = mapped[i];
		}
	}
	if (small) {
		r = images_vmroot_stage(host, skip_path, on_stage, NULL, &files, &bytes);
		if (r == -ENOENT) { /* not a dpkg host: no closure to take, so all of /usr */
			log_warn("microvm image: no %s on this host; the image copies all of "
				 "/usr (as --microvm-image full)",
				 "/var/lib/dpkg/status");
			util_rm_rf(host);
			for (unsigned i = 0; i < n_binds; i++)
				src[i] = binds[i].src;
			small = false;
			r = 0;
		}
		if (r < 0) {
			r = isola_err_sys(err, -r, "internal",
					  "microvm image: the package closure of the host's /usr "
					  "(--microvm-image full copies all of it)");
			goto out;
		}
		if (small)
			log_info("microvm image: %llu files (%llu MiB) of the package closure "
				 "staged",
				 (unsigned long long)files, (unsigned long long)(bytes >> 20));
	}
	prog_set("measuring", 0, 0);
	walk.bytes = walk.inodes = 0;
	walk.whole = false;
	if (nftw(rootfs, walk_cb, 64, FTW_PHYS | FTW_ACTIONRETVAL) < 0) {
		r = isola_err_sys(err, errno, "internal", "measure `%s`", rootfs);
		goto out;
	}
	for (unsigned i = 0; i < n_binds; i++) {
		walk.whole = src[i] != binds[i].src;
		nftw(src[i], walk_cb, 64, FTW_PHYS | FTW_ACTIONRETVAL);
	}
	walk.whole = false;
	inodes = walk.inodes + walk.inodes / 4 + 16384;
	size = images_ext4_size_for(walk.bytes, inodes);

	if (mkdir(stage, 0700) < 0) {
		r = isola_err_sys(err, errno, "internal", "mkdir `%s`", stage);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	/* 0644 despite isolad's umask: QEMU reads it as the sandbox's uid (through a bind). */
	if (fd < 0 || fchmod(fd, 0644) < 0) {
		r = isola_err_sys(err, errno, "internal", "create `%s`", tmp);
		goto out;
	}
	p.stage = stage;
	p.rootfs = rootfs;
	for (unsigned i = 0; i < n_binds && i < TIER_MAX_BINDS; i++) {
		struct stat st;

		/* The template made each dst as a directory (or it is a bind of a
		 * file, which mkfs copies the same way); skip what is missing. */
		snprintf(p.bind_dst[p.n_binds], sizeof(p.bind_dst[0]), "%s/%s", rootfs,
			 binds[i].dst);
		if (stat(p.bind_dst[p.n_binds], &st) < 0 || stat(src[i], &st) < 0)
			continue;
		snprintf(p.bind_dst[p.n_binds], sizeof(p.bind_dst[0]), "%s%s", stage, binds[i].dst);
		p.bind_src[p.n_binds++] = src[i];
	}
	for (unsigned i = 0; i < walk.n_ex; i++) {
		struct stat st;

		/* Excludes name host paths; they apply where a bind shows that path. */
		if (stat(ex[i], &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		for (unsigned b = 0; b < p.n_binds; b++) {
			size_t l = strlen(p.bind_src[b]);

			if (strncmp(ex[i], p.bind_src[b], l) || (ex[i][l] != '/' && ex[i][l]))
				continue;
			if (p.n_ex < EXT4_MAX_EXCLUDES)
				snprintf(p.ex_dst[p.n_ex++], sizeof(p.ex_dst[0]), "%s%s", stage,
					 ex[i]);
		}
	}
	log_info("building ext4 image for `%s` (%llu MiB of files, %llu inodes, %llu MiB image)",
		 rootfs, (unsigned long long)(walk.bytes >> 20), (unsigned long long)walk.inodes,
		 (unsigned long long)(size >> 20));
	/* -m 0: no root reserve (the guest's root would get it on top of `disk`). */
	{
		cleanup_err struct isola_err *tight = NULL;

		r = mkfs_at(&p, stage, fd, tmp, size, inodes, &tight);
		if (r == -ENOENT) { /* no mkfs.ext4 at all */
			r = isola_err_set(err, ENOENT, tight->code, "%s", tight->message);
			goto out;
		}
		if (r < 0) {
			uint64_t roomy = size_roomy(walk.bytes, inodes);

			log_warn("ext4 image for `%s`: %s; retrying at %llu MiB (its free space "
				 "then adds to every sandbox's disk allowance)",
				 rootfs, tight->message, (unsigned long long)(roomy >> 20));
			r = mkfs_at(&p, stage, fd, tmp, roomy, inodes, err);
		}
	}
	if (r < 0)
		goto out;
	if (fsync(fd) < 0 || rename(tmp, img) < 0) {
		r = isola_err_sys(err, errno, "internal", "install `%s`", img);
		goto out;
	}
	{
		cleanup_fd int dfd = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0)
			fsync(dfd);
	}
	r = 0;
out:
	if (r < 0)
		unlink(tmp);
	rmdir(stage);
	util_rm_rf(host);
	return r;
}

int images_ext4_get(const char *rootfs, const struct tier_bind *binds, unsigned n_binds, char *out,
		    size_t len, struct isola_err **err)
{
	char tdir[PATH_MAX], img[PATH_MAX + 32];
	const char *slash;
	struct stat st;
	int r = 0;

	slash = strrchr(rootfs, '/');
	if (!slash || slash == rootfs || strcmp(slash, "/rootfs") != 0 ||
	    (size_t)(slash - rootfs) >= sizeof(tdir))
		return isola_err_set(err, EINVAL, "internal",
				     "template rootfs `%s` is not "
				     ".../<id>/rootfs",
				     rootfs);
	memcpy(tdir, rootfs, (size_t)(slash - rootfs));
	tdir[slash - rootfs] = '\0';
	if (snprintf(img, sizeof(img), "%s/%s", tdir, images_ext4_file(n_binds)) >=
		    (int)sizeof(img) ||
	    strlen(img) >= len)
		return isola_err_set(err, ENAMETOOLONG, "internal", "image path too long");
	pthread_mutex_lock(&build_lock);
	if (stat(img, &st) < 0) {
		const char *id = strrchr(tdir, '/');

		pthread_mutex_lock(&prog.lock);
		snprintf(prog.template_id, sizeof(prog.template_id), "%.79s", id ? id + 1 : tdir);
		snprintf(prog.state, sizeof(prog.state), "building");
		snprintf(prog.step, sizeof(prog.step), "starting");
		prog.done = prog.total = 0;
		prog.error[0] = '\0';
		prog.started_ms = util_now_ms();
		pthread_mutex_unlock(&prog.lock);
		r = build(tdir, rootfs, binds, n_binds, img, err);
		pthread_mutex_lock(&prog.lock);
		if (r < 0) {
			snprintf(prog.state, sizeof(prog.state), "failed");
			snprintf(prog.error, sizeof(prog.error), "%s",
				 *err ? (*err)->message : strerror(-r));
		} else {
			prog.template_id[0] = '\0'; /* built: image_size_bytes says so */
		}
		pthread_mutex_unlock(&prog.lock);
		if (r == 0)
			log_info("microvm image `%s` built in %llu ms", img,
				 (unsigned long long)(util_now_ms() - prog.started_ms));
	}
	pthread_mutex_unlock(&build_lock);
	if (r < 0)
		return isola_err_wrap(err, "template ext4 image `%s`", img);
	snprintf(out, len, "%s", img);
	return 0;
}

/* What the background build builds (copied: the caller's template may go away). */
static struct {
	char rootfs[PATH_MAX];			/* template rootfs dir */
	struct tier_bind binds[TIER_MAX_BINDS]; /* its binds */
	unsigned n_binds;			/* used entries */
} pre;

static void *prebuild_main(void *arg)
{
	cleanup_err struct isola_err *err = NULL;
	char img[PATH_MAX + 32];

	(void)arg;
	util_thread_name("vm image build");
	if (images_ext4_get(pre.rootfs, pre.binds, pre.n_binds, img, sizeof(img), &err) < 0)
		log_warn("microvm image: background build: %s", err->message);
	return NULL;
}

int images_ext4_prebuild(const char *rootfs, const struct tier_bind *binds, unsigned n_binds)
{
	int r;

	if (prog.prebuild_running)
		return -EBUSY;
	snprintf(pre.rootfs, sizeof(pre.rootfs), "%s", rootfs);
	pre.n_binds = n_binds < TIER_MAX_BINDS ? n_binds : TIER_MAX_BINDS;
	memcpy(pre.binds, binds, pre.n_binds * sizeof(binds[0]));
	prog.cancel = 0;
	r = -pthread_create(&prog.prebuild, NULL, prebuild_main, NULL);
	if (r == 0)
		prog.prebuild_running = true;
	return r;
}

void images_ext4_shutdown(void)
{
	if (!prog.prebuild_running)
		return;
	prog.cancel = 1;
	pthread_join(prog.prebuild, NULL);
	prog.prebuild_running = false;
	prog.cancel = 0;
}
