/* SPDX-License-Identifier: Apache-2.0 */
/* jail: QEMU's process — own pid/mount/net/ipc/uts namespaces, a tiny root, an unprivileged uid. */
#include "microvm-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../../common/fileclone.h"
#include "../../../common/log.h"
#include "../../../common/spawnguard.h"
#include "../../../common/util.h"

/*
 * Plan first, execute later (bubblewrap's shape): the parent formats every path and option
 * string into a jail_plan before clone3, and the child — a copy of a multithreaded process —
 * runs only system calls over it. The root it builds holds: /usr (read-only; QEMU and its
 * libraries, firmware in /usr/share/qemu), the host's lib/bin symlinks (merged /usr),
 * /etc/ld.so.cache, /dev/{null,zero,urandom} (+ /dev/kvm with KVM), a fresh /proc of its
 * own pid namespace, /k (kernel, initramfs), /t (the template image, read-only), /vm (the
 * sandbox's vm dir, read-write) and /mem (a tmpfs for guest RAM, owned by QEMU's uid).
 * Nothing else of the host is reachable from QEMU.
 */

#define JAIL_MAX_OPS 48

enum jail_op_kind {
	J_MKDIR,   /* mkdir a (mode) */
	J_FILE,	   /* create empty file a (bind target) */
	J_SYMLINK, /* symlink b -> a */
	J_BIND,	   /* bind a onto b; ro: remount read-only */
	J_MOUNT,   /* mount fstype a on b with data c */
};

struct jail_op {
	enum jail_op_kind kind; /* what */
	char a[512];		/* source / path / link target */
	char b[512];		/* destination (relative to the new root) */
	char c[128];		/* fs data */
	bool ro;		/* read-only bind */
	mode_t mode;		/* for J_MKDIR */
};

struct jail_plan {
	const char *root;		  /* new root mount point */
	struct jail_op ops[JAIL_MAX_OPS]; /* in order */
	unsigned n;			  /* used ops */
	uint32_t uid;			  /* target uid/gid */
	gid_t kvm_gid;			  /* supplementary group for /dev/kvm, or (gid_t)-1 */
	int log_fd, devnull, go_fd;	  /* fds the child uses */
	int ram_fd;			  /* restore: RAM image for /mem/ram, or -1 */
	int record_fd;			  /* spawnguard record, closed at handover */
	bool tap;			  /* attach to tap0 of the new netns, as fd 3 for QEMU */
	char *const *argv;		  /* QEMU */
};

static struct jail_op *op_add(struct jail_plan *p, enum jail_op_kind k, const char *a,
			      const char *b)
{
	struct jail_op *o;

	if (p->n >= JAIL_MAX_OPS)
		return NULL;
	o = &p->ops[p->n++];
	memset(o, 0, sizeof(*o));
	o->kind = k;
	snprintf(o->a, sizeof(o->a), "%s", a ? a : "");
	snprintf(o->b, sizeof(o->b), "%s", b ? b : "");
	o->mode = 0755;
	return o;
}

static void op_bind_file(struct jail_plan *p, const char *src, const char *dst, bool ro)
{
	struct jail_op *o;

	op_add(p, J_FILE, dst, NULL);
	o = op_add(p, J_BIND, src, dst);
	if (o)
		o->ro = ro;
}

static __attribute__((noreturn)) void child(const struct jail_plan *p)
{
	const int keep[] = {p->go_fd, p->log_fd, p->devnull, p->ram_fd, p->record_fd};
	char go;
	int fd, tap = -1;

	/* First act: none of isolad's fds stays in a process that may outlive it, and our copy
	 * of go's write end is gone, so isolad's death is EOF below (spawnguard.h). */
	if (spawnguard_child_enter(keep, ARRAY_SIZE(keep)) < 0)
		_exit(99);
	/* Wait until the parent put us into the cgroup; EOF means it died: exit. */
	if (read(p->go_fd, &go, 1) != 1)
		_exit(100);
	/* Handed over: in the cgroup, where a restart's kill reaches us. */
	spawnguard_child_handover();
	if (p->record_fd >= 0)
		close(p->record_fd);
	umask(022); /* isolad runs with 077: the jail's dirs must be traversable by QEMU */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		_exit(101);
	if (mount("tmpfs", p->root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0)
		_exit(102);
	if (chdir(p->root) < 0)
		_exit(103);
	for (unsigned i = 0; i < p->n; i++) {
		const struct jail_op *o = &p->ops[i];
		const char *rel = o->kind == J_BIND || o->kind == J_MOUNT ? o->b + 1 : o->a + 1;

		switch (o->kind) {
		case J_MKDIR:
			if (mkdir(rel, o->mode) < 0 && errno != EEXIST)
				_exit(104);
			break;
		case J_FILE:
			fd = open(rel, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
			if (fd < 0)
				_exit(105);
			close(fd);
			break;
		case J_SYMLINK:
			if (symlink(o->a, o->b + 1) < 0)
				_exit(106);
			break;
		case J_BIND:
			if (mount(o->a, rel, NULL, MS_BIND | MS_REC, NULL) < 0)
				_exit(107);
			if (o->ro && mount(NULL, rel, NULL,
					   MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
					   NULL) < 0)
				_exit(108);
			break;
		case J_MOUNT:
			if (mount(o->a, rel, o->a, MS_NOSUID | MS_NODEV | MS_NOEXEC, o->c) < 0)
				_exit(109);
			break;
		}
	}
	/* The NIC: while still root, attach to the tap isolad made in this namespace
	 * (docs/network.md) and hand QEMU the fd; QEMU gets no /dev/net/tun and cannot make or
	 * attach to any other interface. */
	if (p->tap) {
		struct ifreq ifr;

		memset(&ifr, 0, sizeof(ifr));
		memcpy(ifr.ifr_name, "tap0", 5);
		ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
		/* Above 9, so neither the stdio dup2s nor the one to MVM_TAP_FD hit it; no
		 * close-on-exec on the copy that QEMU inherits. */
		tap = open("/dev/net/tun", O_RDWR);
		if (tap >= 0 && tap < 10)
			tap = fcntl(tap, F_DUPFD, 10);
		if (tap < 0 || ioctl(tap, TUNSETIFF, &ifr) < 0)
			_exit(115);
	}
	/* Restore with RAM on the jail's tmpfs: guest RAM from the snapshot, copied (charged to
	 * the sandbox's cgroup, which we are already in) and owned by QEMU's uid. The snapshot
	 * file itself is never reachable from QEMU, so no sandbox can change it. (RAM on the
	 * state filesystem: the parent cloned it already, plan_mem.) */
	if (p->ram_fd >= 0) {
		fd = open("mem/ram", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 || fchown(fd, p->uid, p->uid) < 0 || fileclone_copy(p->ram_fd, fd) < 0)
			_exit(115);
		close(fd);
	}
	/* The host tree goes away: pivot onto the tmpfs and detach the old root. */
	if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		_exit(110);
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		_exit(111);
	sethostname("qemu", 4);
	/* Sockets QEMU creates (agent, console, QMP) are 0600. */
	umask(077);
	/* Privileges: from real root to the sandbox's uid; setresuid from 0 to non-0 clears
	 * every capability set, no_new_privs keeps it that way across exec. */
	if (setgroups(p->kvm_gid == (gid_t)-1 ? 0 : 1, &p->kvm_gid) < 0 ||
	    setresgid(p->uid, p->uid, p->uid) < 0 || setresuid(p->uid, p->uid, p->uid) < 0)
		_exit(112);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		_exit(113);
	if (dup2(p->devnull, 0) < 0 || dup2(p->log_fd, 1) < 0 || dup2(p->log_fd, 2) < 0)
		_exit(114);
	if (tap >= 0 && dup2(tap, MVM_TAP_FD) < 0)
		_exit(116);
	syscall(SYS_close_range, tap >= 0 ? MVM_TAP_FD + 1 : 3, ~0u, 0);
	execve(p->argv[0], p->argv, (char *[]){"PATH=/usr/bin", NULL});
	_exit(127);
}

/* Mirrors the host's merged-/usr links (bin -> usr/bin, ...) into the plan. */
static void plan_libdirs(struct jail_plan *p)
{
	static const char *const names[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32"};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char src[32], dst[32], target[256];
		struct stat st;
		ssize_t n;

		snprintf(src, sizeof(src), "/%s", names[i]);
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(src, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			op_add(p, J_SYMLINK, target, src);
		} else if (S_ISDIR(st.st_mode)) {
			snprintf(dst, sizeof(dst), "/%s", names[i]);
			op_add(p, J_MKDIR, dst, NULL);
			op_add(p, J_BIND, src, dst)->ro = true;
		}
	}
}

/*
 * Where guest RAM (/mem/ram) lives. When <vmdir> is on a filesystem that reflinks (XFS with
 * reflink=1, btrfs) and $ISOLA_MICROVM_RAM is not "tmpfs": a file in <vmdir>/mem bound at
 * /mem, so a snapshot clones it and a restore clones the snapshot's back (O(extents), blocks
 * shared until one side writes them); a restore's clone is made here, in the parent, and the
 * child then has nothing to copy. Else a tmpfs private to the jail, sized to the RAM, which
 * the child fills on a restore. 0 or -errno.
 */
static int plan_mem(struct jail_plan *p, const struct mvm_jail *j)
{
	const char *env = getenv("ISOLA_MICROVM_RAM");
	char dir[sizeof(p->ops[0].a)];
	cleanup_fd int vfd = -1;
	cleanup_fd int mfd = -1;
	cleanup_fd int rfd = -1;
	struct jail_op *o;
	uint64_t t0;
	int r;

	op_add(p, J_MKDIR, "/mem", NULL);
	if (!(env && !strcmp(env, "tmpfs")))
		vfd = open(j->vmdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (vfd < 0 || !fileclone_dir_can_reflink(vfd)) {
		o = op_add(p, J_MOUNT, "tmpfs", "/mem");
		if (!o)
			return -E2BIG;
		/* Sized to the RAM, owned by QEMU's uid, charged to its cgroup. */
		snprintf(o->c, sizeof(o->c), "size=%llu,mode=0700,uid=%u,gid=%u",
			 (unsigned long long)(j->mem_bytes + (2ull << 20)), j->uid, j->uid);
		return 0;
	}
	if ((size_t)snprintf(dir, sizeof(dir), "%s/mem", j->vmdir) >= sizeof(dir))
		return -ENAMETOOLONG;
	if (mkdirat(vfd, "mem", 0700) < 0 && errno != EEXIST)
		return -errno;
	/* <vmdir> belongs to QEMU's uid, but no QEMU of this sandbox runs yet. */
	mfd = openat(vfd, "mem", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (mfd < 0 || fchown(mfd, j->uid, j->uid) < 0 || fchmod(mfd, 0700) < 0)
		return -errno;
	/* The guest writes its RAM 4 KiB at a time: CoW it that way (XFS would reserve 128 KiB
	 * per written page of a clone). Inherited by the RAM file QEMU or we create here. */
	r = fileclone_small_cow_unit(mfd);
	if (r < 0)
		log_debug("%s: no per-block copy-on-write hint: %s", dir, strerror(-r));
	if (unlinkat(mfd, "ram", 0) < 0 && errno != ENOENT) /* an earlier attempt's */
		return -errno;
	if (j->ram_fd >= 0) {
		t0 = util_now_ns();
		rfd = openat(mfd, "ram", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			     0600);
		if (rfd < 0)
			return -errno;
		r = fileclone_copy(j->ram_fd, rfd);
		if (r < 0)
			return r;
		if (fchown(rfd, j->uid, j->uid) < 0)
			return -errno;
		log_info("%s/ram: guest RAM as a %s of the snapshot's in %.1f ms", dir,
			 fileclone_how_name(r), (double)(util_now_ns() - t0) / 1e6);
		p->ram_fd = -1;
	}
	return op_add(p, J_BIND, dir, "/mem") ? 0 : -E2BIG;
}

int mvm_copy_sparse(int in, int out)
{
	char link[32], path[PATH_MAX];
	uint64_t t0 = util_now_ns();
	int r = fileclone_copy(in, out);
	ssize_t n;

	if (r < 0)
		return r;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", out);
	n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = '\0';
	log_info("%s: %s of the snapshot's file in %.1f ms", path, fileclone_how_name(r),
		 (double)(util_now_ns() - t0) / 1e6);
	return r;
}

pid_t mvm_jail_spawn(const struct mvm_jail *j, int go_fd, int *pidfd)
{
	static __thread struct jail_plan p; /* large; per thread (creates run concurrently) */
	struct clone_args ca;
	cleanup_fd int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct jail_op *o;
	pid_t pid;
	int pfd = -1, r;

	if (devnull < 0)
		return -errno;
	memset(&p, 0, sizeof(p));
	p.root = j->root;
	p.uid = j->uid;
	p.kvm_gid = (gid_t)-1;
	p.log_fd = j->log_fd;
	p.devnull = devnull;
	p.go_fd = go_fd;
	p.argv = j->argv;
	p.ram_fd = j->ram_fd;
	p.record_fd = j->record_fd;
	op_add(&p, J_MKDIR, "/usr", NULL);
	op_add(&p, J_BIND, "/usr", "/usr")->ro = true;
	plan_libdirs(&p);
	op_add(&p, J_MKDIR, "/etc", NULL);
	if (access("/etc/ld.so.cache", R_OK) == 0)
		op_bind_file(&p, "/etc/ld.so.cache", "/etc/ld.so.cache", true);
	op_add(&p, J_MKDIR, "/dev", NULL);
	op_bind_file(&p, "/dev/null", "/dev/null", false);
	op_bind_file(&p, "/dev/zero", "/dev/zero", false);
	op_bind_file(&p, "/dev/urandom", "/dev/urandom", false);
	p.tap = j->tap;
	if (j->kvm) {
		struct stat st;

		/* /dev/kvm is 0660 root:kvm: QEMU keeps that one group, nothing more. */
		if (stat("/dev/kvm", &st) == 0)
			p.kvm_gid = st.st_gid;
		op_bind_file(&p, "/dev/kvm", "/dev/kvm", false);
	}
	op_add(&p, J_MKDIR, "/proc", NULL);
	o = op_add(&p, J_MOUNT, "proc", "/proc");
	snprintf(o->c, sizeof(o->c), "hidepid=2");
	op_add(&p, J_MKDIR, "/k", NULL);
	op_bind_file(&p, j->kernel, MVM_JAIL_KERNEL, true);
	op_bind_file(&p, j->initrd, MVM_JAIL_INITRD, true);
	op_add(&p, J_MKDIR, "/t", NULL);
	op_bind_file(&p, j->base, MVM_JAIL_BASE, true);
	op_add(&p, J_MKDIR, MVM_JAIL_VM, NULL);
	op_add(&p, J_BIND, j->vmdir, MVM_JAIL_VM);
	r = plan_mem(&p, j);
	if (r < 0)
		return r;

	memset(&ca, 0, sizeof(ca));
	ca.flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		   CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)&pfd;
	ca.exit_signal = SIGCHLD;
	pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child(&p);
	*pidfd = pfd;
	return pid;
}
