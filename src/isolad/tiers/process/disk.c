/* SPDX-License-Identifier: Apache-2.0 */
/* disk: the writable layer on the host's disk: a nameless sparse ext4 image on a loop device, mounted detached, per create or made ahead. */
#include "process-internal.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/ahead.h"
#include "../../../common/spawnguard.h"
#include "../../../common/log.h"
#include "../../../common/util.h"

#define DISK_BLOCK	4096u	    /* ext4 block size, and the loop device's logical block size */
#define DISK_INODE	256u	    /* ext4 inode size (mke2fs's default: ns timestamps, y2038) */
#define DISK_LOOP_TRIES 32	    /* LOOP_CTL_GET_FREE races with other loop users */
#define DISK_PROTOS	4	    /* formatted images kept in memory, one per (size, inodes) */
#define DISK_PROTO_MAX	(16u << 20) /* a formatted image with more data is not kept */

/* ext4's "going down" ioctl (fs/ext4/ext4.h; not in Debian 12's uapi headers): after it the
 * filesystem writes nothing more, dirty pages are dropped. NOLOGFLUSH: no journal flush. */
#ifndef EXT4_IOC_SHUTDOWN
#define EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#endif
#define DISK_GOING_NOLOGFLUSH 0x2
#define DISK_EXT4_MAGIC	      0xEF53
/* A destroyed layer with at least this much written and not yet on its image is shut down
 * before its unmount, one with less is unmounted as it is. The shutdown's "shut down
 * requested" line is KERN_ALERT, so every console prints it (~1 ms of CPU per destroy on a
 * serial console, and a dmesg line per sandbox); writing back a few MiB through the loop
 * device costs less than that (docs/process-tier.md, "Destroy": measured). */
#define DISK_DISCARD_MIN (8ull << 20)

extern char **environ;

uint64_t proc_disk_image_size(uint64_t disk, uint64_t inodes)
{
	/* ext4 reports its size without its own metadata (bsddf), so the image is the
	 * allowance plus what mke2fs takes from it: the inode tables, per 128 MiB block group
	 * a block and an inode bitmap, and the clusters ext4 holds back from writers for its
	 * own extent updates (2% of the blocks, at most 4096: ext4_calculate_resv_clusters).
	 * Measured from 1 MiB to 10000 MiB with 65536 inodes: the sandbox can store between
	 * disk - 0.5 MiB and disk + 0.15 MiB of files (docs/process-tier.md). */
	uint64_t groups = disk / (128ull << 20) + 1;
	uint64_t resv = disk / 50 < 4096ull * DISK_BLOCK ? disk / 50 : 4096ull * DISK_BLOCK;
	uint64_t sz = disk + inodes * DISK_INODE + groups * 2 * DISK_BLOCK + resv;

	return sz & ~(uint64_t)(DISK_BLOCK - 1);
}

/* The -N to give mke2fs for at most `inodes` inodes in an image of `size` bytes: mke2fs
 * rounds the inodes of each block group up to whole inode-table blocks, so an even share
 * rounded down to 16 (inodes per 4 KiB block) keeps the total at or under the limit. */
static uint64_t mkfs_inodes(uint64_t size, uint64_t inodes)
{
	uint64_t blocks = size / DISK_BLOCK, groups = (blocks + 32767) / 32768;
	uint64_t per = groups ? inodes / groups / 16 * 16 : inodes;

	return (per ? per : 16) * (groups ? groups : 1);
}

/* True if `name` is an executable file in one of $PATH's directories (execvp's
 * search, without running it); out (n bytes, or NULL) gets its path. */
static bool in_path(const char *name, char *out, size_t n)
{
	const char *path = getenv("PATH");
	char buf[4096], dir[4096];

	if (!path)
		path = "/usr/bin:/bin";
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
		if (snprintf(dir, sizeof(dir), "%s/%s", d, name) < (int)sizeof(dir) &&
		    access(dir, X_OK) == 0) {
			if (out)
				snprintf(out, n, "%s", dir);
			return true;
		}
	return false;
}

/*
 * Runs mke2fs on the image open at img (as /dev/fd/3 of the child: the image has no name),
 * root directory owned by host root (the mount's root is chowned to the sandbox after).
 * No journal (the image dies with the sandbox and with the host: after a crash there is
 * nothing to replay), no reserved blocks (-m 0: the sandbox gets all of it), no resize
 * inode, inode tables left unzeroed (lazy_itable_init: the sparse file reads as zeros, and
 * the mount says noinit_itable so no kernel thread writes them later), no discard pass.
 */
static int run_mkfs(int img, uint64_t size, uint64_t inodes, struct isola_err **err)
{
	char size_s[32], inodes_s[32], ext_s[64];
	char feat[] = "^has_journal,^resize_inode";
	char *argv[] = {"mke2fs", "-q",	    "-F", "-t", "ext4", "-b",  "4096",	    "-m",   "0",
			"-N",	  inodes_s, "-O", feat, "-E",	ext_s, "/dev/fd/3", size_s, NULL};
	char path[4096];
	pid_t pid, parent = getpid();
	int st = 0;

	snprintf(size_s, sizeof(size_s), "%lluk", (unsigned long long)(size >> 10));
	snprintf(inodes_s, sizeof(inodes_s), "%llu", (unsigned long long)mkfs_inodes(size, inodes));
	snprintf(ext_s, sizeof(ext_s), "lazy_itable_init=1,nodiscard,root_owner=0:0");
	if (!in_path("mke2fs", path, sizeof(path)))
		return isola_err_set(err, ENOENT, "unavailable",
				     "run mke2fs for the writable layer: not in PATH (install "
				     "e2fsprogs)");
	/* A child of the spawn guard (common/spawnguard.h): only the image kept, and it dies
	 * with isolad (PDEATHSIG), which the layer filler may run it beside at any time. */
	pid = fork();
	if (pid < 0)
		return isola_err_sys(err, errno, "internal", "run mke2fs for the writable layer");
	if (pid == 0) {
		const int keep[] = {img};

		if (spawnguard_child_enter(keep, 1) < 0 || getppid() != parent ||
		    dup2(img, 3) < 0 || fcntl(3, F_SETFD, 0) < 0)
			_exit(127);
		execve(path, argv, environ);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return isola_err_sys(err, errno, "internal", "wait for mke2fs");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return isola_err_set(err, EIO, "internal",
			     "mke2fs of the writable layer failed (status %d)",
			     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/*
 * Formatted images, kept in memory as their data extents (a fresh sparse ext4 of 1 GiB with
 * 65536 inodes holds about 150 KiB of data: superblocks, group descriptors, bitmaps, root
 * and lost+found). A create writes those extents into its new sparse file instead of running
 * mke2fs: well under a millisecond instead of 10-60 ms of fork, exec and mke2fs. The image is
 * isolad's own mke2fs output, never anything a sandbox wrote. Every sandbox's filesystem then
 * has the same UUID and directory hash seed, which only matters to tools that look them up
 * by UUID (none sees these mounts) or to a sandbox colliding names in its own directories.
 */
struct disk_proto {
	uint64_t size;	     /* image bytes (0: slot unused) */
	uint64_t inodes;     /* the inode limit it was made for */
	uint64_t used;	     /* LRU clock of its last use */
	size_t n;	     /* entries of off/len */
	uint64_t *off;	     /* extent offsets in the image */
	size_t *len;	     /* extent lengths */
	unsigned char *data; /* the extents' bytes, back to back */
};

static struct disk_proto protos[DISK_PROTOS]; /* guarded by protos_lock */
static uint64_t protos_clock;		      /* guarded by protos_lock */
static pthread_mutex_t protos_lock = PTHREAD_MUTEX_INITIALIZER;

static void proto_fini(struct disk_proto *p)
{
	free(p->off);
	free(p->len);
	free(p->data);
	memset(p, 0, sizeof(*p));
}

/* Reads exactly len bytes at off. 0 or -errno (-EIO on a short file). */
static int pread_all(int fd, unsigned char *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t k = pread(fd, buf, len, off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		buf += k;
		len -= (size_t)k;
		off += k;
	}
	return 0;
}

/* Appends one extent's slot to p (grows off/len). 0 or -ENOMEM. */
static int proto_grow(struct disk_proto *p, size_t *cap)
{
	size_t nc = *cap ? *cap * 2 : 16;
	uint64_t *no;
	size_t *nl;

	if (p->n < *cap)
		return 0;
	no = realloc(p->off, nc * sizeof(*no));
	if (!no)
		return -ENOMEM;
	p->off = no;
	nl = realloc(p->len, nc * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	p->len = nl;
	*cap = nc;
	return 0;
}

/* Reads the data extents of the formatted image fd (size bytes) into p. 0 or -errno
 * (-E2BIG past DISK_PROTO_MAX). */
static int proto_read(int fd, uint64_t size, struct disk_proto *p)
{
	size_t cap = 0, total = 0, len;
	unsigned char *nd;
	off_t pos = 0, d, h;
	int r;

	while ((uint64_t)pos < size) {
		d = lseek(fd, pos, SEEK_DATA);
		if (d < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (d < 0 || (h = lseek(fd, d, SEEK_HOLE)) < 0)
			return -errno;
		len = (size_t)(h - d);
		if (total + len > DISK_PROTO_MAX)
			return -E2BIG;
		r = proto_grow(p, &cap);
		if (r < 0)
			return r;
		nd = realloc(p->data, total + len);
		if (!nd)
			return -ENOMEM;
		p->data = nd;
		r = pread_all(fd, p->data + total, len, d);
		if (r < 0)
			return r;
		p->off[p->n] = (uint64_t)d;
		p->len[p->n++] = len;
		total += len;
		pos = h;
	}
	return 0;
}

/* Writes the prototype's extents into img (already sized). 0 or -errno. */
static int proto_write(const struct disk_proto *p, int img)
{
	size_t at = 0;

	for (size_t i = 0; i < p->n; i++) {
		for (size_t done = 0; done < p->len[i];) {
			ssize_t k = pwrite(img, p->data + at + done, p->len[i] - done,
					   (off_t)(p->off[i] + done));

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return k < 0 ? -errno : -EIO;
			done += (size_t)k;
		}
		at += p->len[i];
	}
	return 0;
}

/*
 * Formats img (sized `size`, sparse, empty): from the kept prototype for (size, inodes), or
 * by mke2fs, whose result becomes the prototype (the least recently used one goes). A
 * result too large to keep is used once and not kept. 0 or -errno with *err.
 */
static int format_image(int img, uint64_t size, uint64_t inodes, struct isola_err **err)
{
	struct disk_proto *slot = NULL, fresh = {0};
	int r;

	pthread_mutex_lock(&protos_lock);
	for (unsigned i = 0; i < DISK_PROTOS; i++)
		if (protos[i].size == size && protos[i].inodes == inodes) {
			protos[i].used = ++protos_clock;
			r = proto_write(&protos[i], img);
			pthread_mutex_unlock(&protos_lock);
			return r < 0 ? isola_err_sys(err, -r,
						     -r == ENOSPC ? "no_space" : "internal",
						     "write the writable layer image")
				     : 0;
		}
	pthread_mutex_unlock(&protos_lock);
	r = run_mkfs(img, size, inodes, err);
	if (r < 0)
		return r;
	if (proto_read(img, size, &fresh) < 0) {
		proto_fini(&fresh);
		return 0; /* formatted all the same; only not kept */
	}
	fresh.size = size;
	fresh.inodes = inodes;
	pthread_mutex_lock(&protos_lock);
	for (unsigned i = 0; i < DISK_PROTOS; i++) {
		if (protos[i].size == size && protos[i].inodes == inodes) {
			slot = NULL; /* another thread kept one meanwhile */
			break;
		}
		if (!slot || protos[i].used < slot->used)
			slot = &protos[i];
	}
	if (slot) {
		proto_fini(slot);
		*slot = fresh;
		slot->used = ++protos_clock;
		memset(&fresh, 0, sizeof(fresh));
	}
	pthread_mutex_unlock(&protos_lock);
	proto_fini(&fresh);
	return 0;
}

/* Makes the node /dev/loop<n> of a device the kernel just created, where /dev is not a
 * devtmpfs (a container's /dev) and so does not get it by itself. Its number is the
 * kernel's (/sys/devices/virtual/block/loop<n>/dev). 0 or -errno. */
static int loop_mknod(int n, const char *dev)
{
	cleanup_free char *b = NULL;
	unsigned maj, min;
	char sys[80];

	snprintf(sys, sizeof(sys), "/sys/devices/virtual/block/loop%d/dev", n);
	if (util_read_file(sys, 64, &b, NULL) < 0 || sscanf(b, "%u:%u", &maj, &min) != 2)
		return -ENOENT;
	if (mknod(dev, S_IFBLK | 0600, makedev(maj, min)) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * Binds img to a free loop device with LOOP_CONFIGURE (one ioctl: no window in which the
 * device is bound but not yet auto-clearing). LO_FLAGS_AUTOCLEAR detaches it when its last
 * opener goes (the mounted filesystem, or our fd if the mount never happens), and the
 * detached device drops the last reference to the nameless image. Direct I/O where the
 * backing filesystem allows it: the data is cached once (in the sandbox's own page cache),
 * not twice. Returns the loop fd (O_RDWR) and its number in *nr, or -errno.
 */
static int loop_attach_locked(int img, const char *id, int *nr)
{
	cleanup_fd int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	struct loop_config cfg;
	char dev[32];

	if (ctl < 0)
		return -errno;
	for (int i = 0; i < DISK_LOOP_TRIES; i++) {
		cleanup_fd int lfd = -1;
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			return -errno;
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0 && errno == ENOENT && loop_mknod(n, dev) == 0)
			lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			if (errno == ENXIO) /* removed meanwhile */
				continue;
			return -errno;
		}
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (uint32_t)img;
		cfg.block_size = DISK_BLOCK;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
		/* Shown by losetup: whose device this is. */
		snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "isola:%s",
			 id);
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
			if (errno == EBUSY)
				continue; /* taken between GET_FREE and here */
			if (errno != EINVAL)
				return -errno;
			/* A backing filesystem without O_DIRECT: buffered. */
			cfg.info.lo_flags &= ~(uint32_t)LO_FLAGS_DIRECT_IO;
			if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
				if (errno == EBUSY)
					continue;
				return -errno;
			}
		}
		*nr = n;
		return steal_fd(&lfd);
	}
	return -EBUSY;
}

/* LOOP_CTL_GET_FREE hands the lowest unbound device to every caller at once, so in a burst of
 * creates all but one lose it, then all but one the next, and a loser runs out of tries (a
 * burst of 50 failed 8 creates with EBUSY): isolad's own attaches take turns (LOOP_CONFIGURE
 * takes well under a millisecond); the tries are left for other programs' loop users. */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static int loop_attach(int img, const char *id, int *nr)
{
	int r;

	pthread_mutex_lock(&attach_lock);
	r = loop_attach_locked(img, id, nr);
	pthread_mutex_unlock(&attach_lock);
	return r;
}

/* Mounts the ext4 on /dev/loop<nr> detached: nosuid, nodev, and made by isolad (owned by
 * the host's user namespace), so the sandbox's root cannot remount or unmount it. */
static int mount_ext4(int nr)
{
	cleanup_fd int fs = -1;
	char dev[32];
	int fd;

	snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
	fs = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    /* The inode tables were never zeroed (lazy_itable_init): no kernel thread should
	     * write them now; the sparse image reads as zeros. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    /* Freed blocks are punched out of the image: the host's disk follows what the
	     * sandbox holds now, not the most it ever held. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "discard", NULL, 0) < 0 ||
	    /* No cache flushes to the host's disk on fsync: the image does not outlive the
	     * sandbox (nor a host crash), so durability buys nothing; a flush through the loop
	     * device is an fsync of the image on the host filesystem, tens of ms per call. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "nobarrier", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	fd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return fd < 0 ? -errno : fd;
}

/* A nameless image file in dir: O_TMPFILE, or (on a filesystem without it) a new name
 * unlinked at once. Nothing is left on disk by any crash after this returns. */
static int open_image(const char *dir, struct isola_err **err)
{
	char path[600];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd >= 0 ? fd : isola_err_sys(err, errno, "internal", "image in `%s`", dir);
	snprintf(path, sizeof(path), "%s/.disk.img", dir);
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", path);
	unlink(path);
	return fd;
}

/* The image size for (disk, inodes), defaults applied; `invalid` when too large. */
static int layer_size(const char *id, uint64_t *disk, uint64_t *inodes, uint64_t *size,
		      struct isola_err **err)
{
	if (!*inodes)
		*inodes = PROC_DISK_DEFAULT_INODES;
	if (!*disk)
		*disk = PROC_DISK_DEFAULT_BYTES;
	*size = proc_disk_image_size(*disk, *inodes);
	if (*disk > (1ull << 62) || *inodes > (1ull << 32) || *size < *disk)
		return isola_err_set(
			err, EFBIG, "invalid",
			"writable layer of `%s`: %llu bytes with %llu inodes is too large", id,
			(unsigned long long)*disk, (unsigned long long)*inodes);
	return 0;
}

/*
 * Makes a layer up to its chown: a nameless sparse image of `size` bytes in dir, formatted,
 * on a loop device named `isola:<id>`, its ext4 mounted detached, lost+found gone, root owned
 * by host root. Returns the mount fd or -errno with *err.
 */
static int layer_make(const char *dir, const char *id, uint64_t size, uint64_t inodes,
		      struct isola_err **err)
{
	cleanup_fd int img = -1;
	cleanup_fd int lfd = -1;
	int nr = -1, fd;

	img = open_image(dir, err);
	if (img < 0)
		return img;
	/* Sparse: the host's disk is used as the sandbox writes, up to `size`. */
	if (ftruncate(img, (off_t)size) < 0)
		return isola_err_sys(err, errno, errno == EFBIG ? "invalid" : "internal",
				     "size the writable layer image in `%s` to %llu bytes", dir,
				     (unsigned long long)size);
	fd = format_image(img, size, inodes, err);
	if (fd < 0)
		return fd;
	lfd = loop_attach(img, id, &nr);
	if (lfd < 0)
		return isola_err_sys(err, -lfd, -lfd == ENOENT ? "unavailable" : "internal",
				     "attach the writable layer image of `%s` to a loop device",
				     id);
	fd = mount_ext4(nr);
	if (fd < 0)
		return isola_err_sys(err, -fd, "internal",
				     "mount the writable layer of `%s` (loop%d)", id, nr);
	/* No fsck ever runs on this image (it dies with the sandbox): the sandbox's layer
	 * root holds only what setup makes there (lower, upper, work, root). */
	if (unlinkat(fd, "lost+found", AT_REMOVEDIR) < 0 && errno != ENOENT) {
		int e = errno;

		close(fd);
		return isola_err_sys(err, e, "internal",
				     "writable layer of `%s`: remove lost+found", id);
	}
	/* lfd and img close here: the mount holds the device, the device the image. */
	return fd;
}

/*
 * Layers made ahead (docs/process-tier.md, "Layers made ahead"): a filler keeps
 * --layer-slots layers of the default size and inodes ready, each a detached mount fd
 * (its image nameless in <state>/layers, its loop device bound). Only isolad ever wrote
 * them; each is taken once and given to one sandbox, and an isolad exit or kill frees the
 * ready ones with its fds (the mounts were never attached anywhere).
 */
static struct ahead *layers;	       /* set by tier_process_layer_slots_start, main thread */
static char layers_dir[PATH_MAX];      /* <state>/layers */
static _Atomic uint64_t layers_taken;  /* creates served from the pool */
static _Atomic uint64_t layers_inline; /* default-size creates made on the spot */

static int layer_make_ahead(void *ud, void **out, struct isola_err **err)
{
	uint64_t disk = 0, inodes = 0, size;
	int *fdp = malloc(sizeof(*fdp));
	int fd;

	(void)ud;
	if (!fdp)
		return isola_err_set(err, ENOMEM, "internal", "writable layer: out of memory");
	fd = layer_size("ahead", &disk, &inodes, &size, err);
	if (fd == 0)
		fd = layer_make(layers_dir, "ahead", size, inodes, err);
	if (fd < 0) {
		free(fdp);
		return fd;
	}
	*fdp = fd;
	*out = fdp;
	return 0;
}

static void layer_drop_ahead(void *ud, void *thing)
{
	int *fdp = thing;

	(void)ud;
	close(*fdp);
	free(fdp);
}

int tier_process_layer_slots_start(const char *state_dir, unsigned n, struct isola_err **err)
{
	int r;

	if (n == 0)
		return 0;
	if ((size_t)snprintf(layers_dir, sizeof(layers_dir), "%s/layers", state_dir) >=
	    sizeof(layers_dir))
		return isola_err_set(err, ENAMETOOLONG, "invalid", "state dir `%s` is too long",
				     state_dir);
	r = util_mkdir_p(layers_dir, 0700);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "create `%s`", layers_dir);
	layers = ahead_start("writable layer", n, layer_make_ahead, layer_drop_ahead, NULL);
	if (!layers)
		log_warn("writable layers: no filler thread; each create makes its own");
	return 0;
}

void tier_process_layer_slots_stop(void)
{
	ahead_stop(layers);
	layers = NULL;
}

unsigned tier_process_layer_slots_ready(void)
{
	return ahead_ready(layers);
}

void tier_process_layer_slots_counts(uint64_t *taken, uint64_t *made_inline)
{
	*taken = atomic_load(&layers_taken);
	*made_inline = atomic_load(&layers_inline);
}

int proc_disk_mount(const char *dir, const char *id, uint64_t disk, uint64_t inodes, uint32_t uid,
		    uint32_t gid, struct isola_err **err)
{
	uint64_t size;
	int *ready = NULL, fd;

	fd = layer_size(id, &disk, &inodes, &size, err);
	if (fd < 0)
		return fd;
	if (disk == PROC_DISK_DEFAULT_BYTES && inodes == PROC_DISK_DEFAULT_INODES) {
		ready = ahead_take(layers);
		atomic_fetch_add(ready ? &layers_taken : &layers_inline, 1);
	}
	if (ready) {
		fd = *ready;
		free(ready);
	} else {
		fd = layer_make(dir, id, size, inodes, err);
		if (fd < 0)
			return fd;
	}
	/* The root is the sandbox's root's (the prototype's is host root's): the one step a
	 * layer made ahead still needs. */
	if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0) {
		int e = errno;

		close(fd);
		return isola_err_sys(err, e, "internal", "writable layer of `%s`: chown its root",
				     id);
	}
	return fd;
}

bool proc_disk_available(char *why, size_t len)
{
	cleanup_free char *fss = NULL;
	int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, len, "/dev/loop-control: %s", strerror(errno));
		return false;
	}
	close(fd);
	if (util_read_file("/proc/filesystems", 1 << 16, &fss, NULL) < 0 ||
	    !strstr(fss, "\text4\n")) {
		snprintf(why, len, "the kernel has no ext4");
		return false;
	}
	if (!in_path("mke2fs", NULL, 0)) {
		snprintf(why, len, "mke2fs not in PATH (install e2fsprogs)");
		return false;
	}
	snprintf(why, len, "loop devices, ext4 and mke2fs available");
	return true;
}

static _Atomic uint64_t layers_dropped; /* destroyed layers shut down: writes dropped */
static _Atomic uint64_t layers_kept;	/* destroyed layers unmounted as they were */

/*
 * What the sandbox wrote to the ext4 mounted at root_fd that is still only in memory:
 * ext4's delayed-allocation blocks (/sys/fs/ext4/<loop device>/delayed_allocation_blocks,
 * exact: a per-filesystem counter) times the block size. Rewrites of blocks already on the
 * image are not in it (they are dirty pages of allocated blocks). -errno when unknown.
 */
static int64_t layer_unwritten_bytes(int root_fd, uint64_t block_size)
{
	char link[64], target[PATH_MAX], path[PATH_MAX + 64];
	const char *name;
	struct stat st;
	long long blocks;
	ssize_t n;

	if (fstat(root_fd, &st) < 0)
		return -errno;
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	name = strrchr(target, '/');
	snprintf(path, sizeof(path), "/sys/fs/ext4/%s/delayed_allocation_blocks",
		 name ? name + 1 : target);
	blocks = util_file_key(path, "");
	return blocks < 0 ? -ENOENT : (int64_t)blocks * (int64_t)block_size;
}

void proc_disk_discard(int root_fd)
{
	uint32_t how = DISK_GOING_NOLOGFLUSH;
	struct statfs sf;
	int64_t unwritten;
	int fd;

	if (root_fd < 0 || fstatfs(root_fd, &sf) < 0 || sf.f_type != DISK_EXT4_MAGIC)
		return;
	/* Unknown (no sysfs): shut down, as the safe way to never write much back. */
	unwritten = layer_unwritten_bytes(root_fd, (uint64_t)sf.f_bsize);
	if (unwritten >= 0 && (uint64_t)unwritten < DISK_DISCARD_MIN) {
		atomic_fetch_add(&layers_kept, 1);
		return;
	}
	fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	ioctl(fd, EXT4_IOC_SHUTDOWN, &how);
	close(fd);
	atomic_fetch_add(&layers_dropped, 1);
}

void tier_process_layer_release_counts(uint64_t *dropped, uint64_t *kept)
{
	*dropped = atomic_load(&layers_dropped);
	*kept = atomic_load(&layers_kept);
}

/* A layer whose release proc_disk_release() left to the closer thread. */
struct disk_release {
	int fd;			   /* root fd of the layer, owned */
	struct disk_release *next; /* queue under release_lock */
};

static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t release_cond = PTHREAD_COND_INITIALIZER;
static struct disk_release *release_head;		   /* FIFO, under release_lock */
static struct disk_release **release_tail = &release_head; /* its last next pointer */
static int release_thread = 0; /* 0 not started, 1 running, -1 could not start */

static void release_now(int fd)
{
	close(fd);
}

/* The closer: one detached thread for the process, started with the first release. */
static void *release_main(void *arg)
{
	struct disk_release *j;

	(void)arg;
	util_thread_name("layer release");
	pthread_mutex_lock(&release_lock);
	for (;;) {
		while (!release_head)
			pthread_cond_wait(&release_cond, &release_lock);
		j = release_head;
		release_head = j->next;
		if (!release_head)
			release_tail = &release_head;
		pthread_mutex_unlock(&release_lock);
		release_now(j->fd);
		free(j);
		pthread_mutex_lock(&release_lock);
	}
	return NULL;
}

void proc_disk_release(int root_fd)
{
	struct disk_release *j;
	pthread_attr_t attr;
	pthread_t t;

	if (root_fd < 0)
		return;
	j = calloc(1, sizeof(*j));
	pthread_mutex_lock(&release_lock);
	if (j && release_thread == 0) {
		release_thread = -1;
		if (pthread_attr_init(&attr) == 0) {
			pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
			if (pthread_create(&t, &attr, release_main, NULL) == 0)
				release_thread = 1;
			pthread_attr_destroy(&attr);
		}
	}
	if (j && release_thread == 1) {
		j->fd = root_fd;
		*release_tail = j;
		release_tail = &j->next;
		pthread_cond_signal(&release_cond);
		j = NULL;
		root_fd = -1;
	}
	pthread_mutex_unlock(&release_lock);
	free(j);
	if (root_fd >= 0) /* no thread, or out of memory: here, as before */
		release_now(root_fd);
}
