/* SPDX-License-Identifier: Apache-2.0 */
/* setup: the agent's first stage in the process tier — builds the sandbox it will be PID 1 of. */
#include "setup.h"
#include "agent-internal.h"

#include "common/util.h"
#include "users.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/caps.h"

/*
 * The plan (docs/process-tier.md): one SOCK_SEQPACKET message from isolad with a
 * JSON object and SCM_RIGHTS fds. isolad is trusted, but the plan is still checked
 * (fd indices in range, sizes capped) so a bug there fails loudly here.
 */
#define PLAN_MAX_BYTES (64 * 1024)
#define PLAN_MAX_FDS   40 /* >= 6 + TIER_MAX_BINDS (src/isolad/tiers/tier.h): a slot's sysfs too */
#define BPF_MAX_INSNS  4096
#define STAGE	       "/tmp" /* where the writable tmpfs is attached while assembling */

static int report_fd = -1; /* the setup socket: failures are reported here */

static __attribute__((noreturn)) void report_exit(const char *prefix, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s: ", prefix);

	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	if (report_fd >= 0)
		send(report_fd, buf, strlen(buf), MSG_NOSIGNAL);
	_exit(1);
}

/* Reports "error: <msg>" to isolad and exits. Only this short-lived stage may die. */
static __attribute__((noreturn, format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_exit("error", fmt, ap);
}

/* Reports "refused: <msg>" (the template is unusable, not isola broken) and exits. */
static __attribute__((noreturn, format(printf, 1, 2))) void refuse(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_exit("refused", fmt, ap);
}

#define fail_errno(fmt, ...) fail(fmt ": %s", ##__VA_ARGS__, strerror(errno))

struct plan {
	json_t *json;	       /* the parsed plan, owned */
	int fds[PLAN_MAX_FDS]; /* received fds, -1 once consumed */
	unsigned nfds;	       /* received count */
	bool no_openat2;       /* test hook: force the O_NOFOLLOW walk */
};

static void recv_plan(int sock, struct plan *p)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * PLAN_MAX_FDS)];
		struct cmsghdr align;
	} u;
	static char data[PLAN_MAX_BYTES];
	struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	json_error_t je;
	ssize_t n;

	memset(&u, 0, sizeof(u));
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		fail("no plan from isolad");
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		fail("plan truncated");
	p->nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		p->nfds = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (p->nfds > PLAN_MAX_FDS)
			fail("too many fds in plan");
		memcpy(p->fds, CMSG_DATA(c), sizeof(int) * p->nfds);
	}
	p->json = json_loadb(data, (size_t)n, 0, &je);
	if (!p->json || !json_is_object(p->json))
		fail("plan is not a JSON object: %s", je.text);
}

/* Takes the fd named by plan.fds.<key> (ownership passes to the caller). */
static int plan_take_fd(struct plan *p, json_t *idx, const char *what)
{
	json_int_t i = json_integer_value(idx);
	int fd;

	if (!json_is_integer(idx) || i < 0 || i >= (json_int_t)p->nfds || p->fds[i] < 0)
		fail("plan: bad fd index for %s", what);
	fd = p->fds[i];
	p->fds[i] = -1;
	return fd;
}

static int open_how(int dfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC, .resolve = resolve};

	return (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
}

/*
 * Opens directory `path` inside the tree at rootfd for use as a mount target,
 * creating missing components (0755). The template is hostile: no component may
 * be a symlink (runc CVE-2023-27561, CVE-2025-31133 class: a symlinked /dev or
 * /proc would send our mounts onto the host) and ".." is refused. Each component
 * is resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), or, without openat2 (or forced by the test hook), with
 * openat(O_NOFOLLOW) plus an fstat check. Returns an O_PATH fd or dies.
 */
static int open_target_dir(int rootfd, const char *path, bool no_openat2)
{
	char buf[256], *save = NULL;
	int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);

	if (cur < 0 || strlen(path) >= sizeof(buf))
		fail("mount target `%s`: bad path", path);
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		struct stat st;
		int next = -1;

		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, ".."))
			refuse("mount target `%s`: `..` not allowed", path);
		if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST)
			refuse("mount target `%s`: mkdir `%s`: %s", path, c, strerror(errno));
		if (!no_openat2) {
			/* No O_NOFOLLOW: with O_PATH it would hand back the link itself;
			 * without it, RESOLVE_NO_SYMLINKS refuses a symlink here with ELOOP. */
			next = open_how(cur, c, O_PATH | O_DIRECTORY,
					RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
						RESOLVE_NO_MAGICLINKS);
			if (next < 0 && errno == ENOSYS)
				no_openat2 = true;
		}
		if (no_openat2)
			next = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 || fstat(next, &st) < 0 || !S_ISDIR(st.st_mode))
			refuse("mount target `%s`: `%s` is a symlink or not a directory in the "
			       "template (%s)",
			       path, c, strerror(next < 0 ? errno : ENOTDIR));
		close(cur);
		cur = next;
	}
	return cur;
}

/*
 * Opens (creating it empty, 0644, when missing) the regular file `path` inside the tree at
 * rootfd as the target of a file bind (an engine's /etc/resolv.conf, /etc/hosts). Its
 * directory is found like open_target_dir's; the file itself must be no symlink (openat2
 * RESOLVE_NO_SYMLINKS, or O_NOFOLLOW plus fstat without openat2) and no directory. Returns
 * an O_PATH fd or dies.
 */
static int open_target_file(int rootfd, const char *path, bool no_openat2)
{
	char dir[256];
	const char *name = strrchr(path, '/');
	struct stat st;
	int d, f = -1;

	if (!name || !name[1] || (size_t)(name - path) >= sizeof(dir) || !strcmp(name + 1, "..") ||
	    !strcmp(name + 1, "."))
		fail("mount target `%s`: bad file path", path);
	snprintf(dir, sizeof(dir), "%.*s", (int)(name - path), path);
	name++;
	d = open_target_dir(rootfd, dir[0] ? dir : "/", no_openat2);
	/* O_EXCL and O_NOFOLLOW: an existing name (a symlink included) is left as it is and
	 * judged below. */
	f = openat(d, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (f < 0 && errno != EEXIST)
		refuse("mount target `%s`: create: %s", path, strerror(errno));
	if (f >= 0)
		close(f);
	f = -1;
	if (!no_openat2) {
		f = open_how(d, name, O_PATH,
			     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
		if (f < 0 && errno == ENOSYS)
			no_openat2 = true;
	}
	if (no_openat2)
		f = openat(d, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode))
		refuse("mount target `%s` is a symlink or not a regular file in the template (%s)",
		       path, strerror(f < 0 ? errno : EISDIR));
	close(d);
	return f;
}

/* Attaches the detached mount mfd onto the O_PATH target (consumes both). */
static void attach(int mfd, int target, const char *what)
{
	if (move_mount(mfd, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		fail_errno("attach %s", what);
	close(mfd);
	close(target);
}

/* A new detached filesystem: fsopen + string options + fsmount. Returns the mount fd
 * or -1 (errno set). `source` is what mountinfo shows as its source (the names runc's
 * default spec uses: "proc", "sysfs", "shm", ...; OCI validation compares them); `opts` is
 * a NULL-terminated key, value list (value NULL = flag). */
static int new_fs(const char *type, const char *source, const char *const *opts, unsigned attrs)
{
	int fs = fsopen(type, FSOPEN_CLOEXEC), m;

	if (fs < 0)
		return -1;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "source", source, 0) < 0) {
		int e = errno;

		close(fs);
		errno = e;
		return -1;
	}
	for (; opts && opts[0]; opts += 2) {
		int r = opts[1] ? fsconfig(fs, FSCONFIG_SET_STRING, opts[0], opts[1], 0)
				: fsconfig(fs, FSCONFIG_SET_FLAG, opts[0], NULL, 0);

		if (r < 0) {
			int e = errno;

			close(fs);
			errno = e;
			return -1;
		}
	}
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		int e = errno;

		close(fs);
		errno = e;
		return -1;
	}
	m = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
	close(fs);
	return m;
}

/* Mounts a new filesystem of type on the directory /dev/<dir> (devfd: the new /dev). */
static void mount_in_dev(int devfd, const char *dir, const char *type, const char *source,
			 const char *const *opts, unsigned attrs)
{
	int m = new_fs(type, source, opts, attrs);
	int t = openat(devfd, dir, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	char what[32];

	snprintf(what, sizeof(what), "/dev/%s", dir);
	if (m < 0 || t < 0)
		fail_errno("%s", what);
	attach(m, t, what);
}

/* Clones the (already attached) mount at dfd/name, optionally making it read-only. */
static int clone_at(int dfd, const char *name, bool ro)
{
	struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					   MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
	int m = open_tree(dfd, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);

	if (m < 0)
		return -1;
	if (ro && mount_setattr(m, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
		close(m);
		return -1;
	}
	return m;
}

/*
 * Masking: an entry that leaks host information or reaches a host-wide knob is covered
 * by an overmount. Files get a clone of /dev/null (reads are empty, writes vanish);
 * directories get an empty read-only tmpfs. The first tmpfs is made with fsopen, later
 * ones are clones of it (one superblock however many CPUs have a thermal_throttle dir).
 * The masks cannot be lifted from inside: no process there holds CAP_SYS_ADMIN, and
 * seccomp refuses umount2/move_mount/open_tree (tests/security/test_fsview.py).
 */
struct masker {
	int empty; /* O_PATH fd of the first attached empty tmpfs, -1 until made */
};

static const char *const ro_tmpfs_opts[] = {"size", "0", "nr_inodes", "1", "mode", "0555", NULL};

/* Covers the O_PATH target t (consumed): a clone of /dev/null over a non-directory, the empty
 * read-only tmpfs over a directory (made once, kept at mk->empty for the next ones). */
static void mask_fd(struct masker *mk, int t, bool dir, const char *what)
{
	int m;

	if (!dir) {
		m = open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	} else if (mk->empty >= 0) {
		m = open_tree(mk->empty, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	} else {
		m = new_fs("tmpfs", "tmpfs", ro_tmpfs_opts,
			   MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				   MOUNT_ATTR_NOEXEC);
		/* The mount fd stays usable once attached: later masks are its clones. */
		if (m >= 0 && (mk->empty = fcntl(m, F_DUPFD_CLOEXEC, 3)) < 0)
			fail_errno("keep mask %s", what);
	}
	if (m < 0)
		fail_errno("mask %s", what);
	attach(m, t, what);
}

/* Masks dfd/name if it exists (entries this kernel lacks are skipped). */
static void mask_at(struct masker *mk, int dfd, const char *name, const char *what)
{
	struct stat st;
	int t;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	t = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		fail_errno("open %s", what);
	mask_fd(mk, t, S_ISDIR(st.st_mode), what);
}

/*
 * Opens `path` (absolute) in the tree at rootfd for a spec's masked or read-only path, with
 * /proc, /dev, /sys and the binds in place. The path is the caller's and the tree hostile:
 * symlinks are resolved inside the root (openat2 RESOLVE_IN_ROOT: `..` and absolute links
 * stop at it; RESOLVE_NO_MAGICLINKS: no /proc/PID/root jump), or, without openat2 (or forced
 * by the test hook), a walk of O_NOFOLLOW components that refuses any symlink. Returns an
 * O_PATH fd, or -1 when the path does not exist (skipped, as runc does); refuses otherwise.
 */
static int open_in_root(int rootfd, const char *path, bool no_openat2, const char *what)
{
	char buf[256], *save = NULL;
	int cur;

	if (!no_openat2) {
		cur = open_how(rootfd, path, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
		if (cur >= 0)
			return cur;
		if (errno == ENOENT || errno == ENOTDIR)
			return -1;
		if (errno != ENOSYS)
			refuse("%s `%s`: %s", what, path, strerror(errno));
	}
	if (strlen(path) >= sizeof(buf))
		refuse("%s `%s`: too long", what, path);
	snprintf(buf, sizeof(buf), "%s", path);
	cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		fail_errno("dup root");
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		struct stat st;
		int next = openat(cur, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);

		close(cur);
		if (next < 0 && (errno == ENOENT || errno == ENOTDIR))
			return -1;
		if (next < 0 || fstat(next, &st) < 0)
			refuse("%s `%s`: `%s`: %s", what, path, c, strerror(errno));
		if (S_ISLNK(st.st_mode))
			refuse("%s `%s`: `%s` is a symlink (refused without openat2)", what, path,
			       c);
		cur = next;
	}
	return cur;
}

/* The spec's read-only (kind "readonly") or masked ("masked") paths from plan.mounts. A
 * read-only path is a recursive read-only clone of itself on itself (its submounts, isola's
 * masks among them, come along; its other flags, exec included, are kept); a masked one is
 * covered like isola's own masks. Missing paths are skipped. */
static void apply_paths(struct masker *mk, int rootfd, const json_t *mounts, const char *kind,
			bool no_openat2)
{
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	const json_t *e;
	size_t i;

	json_array_foreach(mounts, i, e)
	{
		const char *path = json_string_value(json_object_get(e, "path"));
		struct stat st;
		int t, m;

		if (strcmp(json_string_value(json_object_get(e, "kind")), kind))
			continue;
		t = open_in_root(rootfd, path, no_openat2,
				 *kind == 'm' ? "masked path" : "read-only path");
		if (t < 0)
			continue;
		if (*kind == 'm') {
			if (fstat(t, &st) < 0)
				fail_errno("stat masked path `%s`", path);
			mask_fd(mk, t, S_ISDIR(st.st_mode), path);
			continue;
		}
		m = open_tree(t, "",
			      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
		if (m < 0 ||
		    mount_setattr(m, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro)) < 0)
			fail_errno("read-only path `%s`", path);
		attach(m, t, path);
	}
}

/* A spec's tmpfs mount (plan.mounts kind "tmpfs"): always nosuid and nodev, noexec and
 * read-only when asked; size (isolad bounded it by the sandbox's memory, which its pages
 * are charged to) and mode as given; on a target resolved like a bind's. */
static void mount_tmpfs(int rootfd, const json_t *e, bool no_openat2)
{
	const char *path = json_string_value(json_object_get(e, "path"));
	json_int_t size = json_integer_value(json_object_get(e, "size"));
	json_int_t mode = json_integer_value(json_object_get(e, "mode"));
	unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	char sz[32], md[16];
	const char *opts[] = {"size", sz, "mode", md, NULL};
	int m;

	if (size <= 0 || mode < 0 || mode > 07777)
		fail("plan: tmpfs `%s` has a bad size or mode", path);
	snprintf(sz, sizeof(sz), "%lld", (long long)size);
	snprintf(md, sizeof(md), "%llo", (long long)mode);
	if (json_is_true(json_object_get(e, "noexec")))
		attrs |= MOUNT_ATTR_NOEXEC;
	if (json_is_true(json_object_get(e, "readonly")))
		attrs |= MOUNT_ATTR_RDONLY;
	m = new_fs("tmpfs", "tmpfs", opts, attrs);
	if (m < 0)
		fail_errno("tmpfs `%s`", path);
	attach(m, open_target_dir(rootfd, path, no_openat2), path);
}

/* Number of components of a clean absolute path (`/a/b`: 2). */
static unsigned path_depth(const char *p)
{
	unsigned n = 0;

	for (; *p; p++)
		if (*p == '/' && p[1] && p[1] != '/')
			n++;
	return n;
}

/* A fresh copy of the detached mount m (consumed) made here, so that it gets its mount id
 * (the order /proc/self/mountinfo lists mounts in) in setup's order rather than the one
 * isolad made it in; flags, idmap and submounts are kept. Without the kernel's support
 * (cloning a detached mount: Linux 6.15), m itself. */
static int fresh_mount(int m)
{
	int c = open_tree(m, "",
			  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);

	if (c < 0)
		return m;
	close(m);
	return c;
}

/*
 * A copy, made here, of isolad's detached bind m (consumed): attached on a scratch name in the
 * stage, cloned from there (with its submounts; flags and idmap kept) and the original taken
 * off again. The copy's mount id, which orders /proc/self/mountinfo, then follows setup's
 * order (a spec's mounts after isola's own filesystems, as runtime-tools checks) rather than
 * the one isolad made the binds in; a detached bind of another namespace cannot be cloned
 * directly.
 */
static int staged_copy(int stage, int m, bool file)
{
	const char *name = file ? "bind-file" : "bind-dir";
	char path[64];
	int t, c;

	if (file)
		t = openat(stage, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	else
		t = mkdirat(stage, name, 0700) < 0 && errno != EEXIST ? -1 : 0;
	if (t < 0)
		fail_errno("stage a bind");
	if (file)
		close(t);
	t = openat(stage, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		fail_errno("open the staged bind");
	attach(m, t, "a bind on the stage");
	c = open_tree(stage, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	snprintf(path, sizeof(path), STAGE "/%s", name);
	if (c < 0 || umount2(path, MNT_DETACH) < 0)
		fail_errno("copy a bind");
	return c;
}

/*
 * Binds (the template's, then the operator's) and the spec's tmpfs mounts, parents first: by
 * the depth of their destination, tmpfs mounts before binds at the same depth (neither can
 * then be below the other; on one destination the bind shows), each list in its own order
 * (Docker and containerd pass mounts sorted by depth the same way), so a bind below a tmpfs
 * (or a tmpfs below a bind) is not hidden by the other. Targets are checked for symlinks.
 */
static void mount_binds_tmpfs(struct plan *p, int rootfd, int stage, const json_t *binds,
			      const json_t *mounts)
{
	const json_t *e;
	size_t i;

	for (unsigned d = 1; d <= 128; d++) {
		json_array_foreach(mounts, i, e)
		{
			if (!strcmp(json_string_value(json_object_get(e, "kind")), "tmpfs") &&
			    path_depth(json_string_value(json_object_get(e, "path"))) == d)
				mount_tmpfs(rootfd, e, p->no_openat2);
		}
		json_array_foreach(binds, i, e)
		{
			const char *dst = json_string_value(json_object_get(e, "dst"));
			bool file = json_is_true(json_object_get(e, "file"));

			if (path_depth(dst) != d)
				continue;
			attach(staged_copy(stage, plan_take_fd(p, json_object_get(e, "fd"), "bind"),
					   file),
			       file ? open_target_file(rootfd, dst, p->no_openat2)
				    : open_target_dir(rootfd, dst, p->no_openat2),
			       dst);
		}
	}
	/* The scratch names go: the stage's root keeps only the layer. */
	unlinkat(stage, "bind-file", 0);
	unlinkat(stage, "bind-dir", AT_REMOVEDIR);
}

/* Checks plan.binds and plan.mounts before anything is mounted (isolad is trusted, but a bug
 * there fails loudly here). */
static void check_plan_mounts(const json_t *binds, const json_t *mounts)
{
	static const char *const kinds[] = {"tmpfs", "masked", "readonly"};
	const json_t *e;
	size_t i;

	if ((binds && !json_is_array(binds)) || (mounts && !json_is_array(mounts)) ||
	    json_array_size(mounts) > 64)
		fail("plan: bad binds or mounts");
	json_array_foreach(binds, i, e)
	{
		const char *dst = json_string_value(json_object_get(e, "dst"));

		if (!dst || dst[0] != '/' || path_depth(dst) > 128)
			fail("plan: bind %zu has no absolute dst", i);
	}
	json_array_foreach(mounts, i, e)
	{
		const char *kind = json_string_value(json_object_get(e, "kind"));
		const char *path = json_string_value(json_object_get(e, "path"));
		bool known = false;

		for (size_t k = 0; kind && k < sizeof(kinds) / sizeof(kinds[0]); k++)
			known = known || !strcmp(kind, kinds[k]);
		if (!known || !path || path[0] != '/' || strlen(path) > 255 || !path_depth(path))
			fail("plan: mount %zu has no known kind or no absolute path", i);
	}
}

/* Docker's masked and read-only procfs lists, plus /proc/interrupts (host IRQ counts
 * per CPU: a side channel on other tenants' activity). */
static void mask_proc(struct masker *mk, int procfd)
{
	static const char *const masked[] = {
		"kcore",	 "keys", "timer_list", "timer_stats", "sched_debug",
		"latency_stats", "acpi", "scsi",       "asound",      "interrupts",
	};
	static const char *const readonly[] = {"bus", "fs", "irq", "sys", "sysrq-trigger"};

	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
		mask_at(mk, procfd, masked[i], masked[i]);
	for (size_t i = 0; i < sizeof(readonly) / sizeof(readonly[0]); i++) {
		int t, m;

		if (faccessat(procfd, readonly[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		m = clone_at(procfd, readonly[i], true);
		t = openat(procfd, readonly[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (m < 0 || t < 0)
			fail_errno("read-only /proc/%s", readonly[i]);
		attach(m, t, readonly[i]);
	}
}

/*
 * /proc/sys/kernel/random/boot_id: the host's would tell every sandbox the host's boot and
 * make a hibernated sandbox's restore look like no reboot. Each setup (a create, or the
 * restore of a hibernated sandbox: both are a boot) writes a fresh random UUID v4 to a
 * file on the writable tmpfs (outside the overlay's upper dir, so no snapshot carries it),
 * binds it read-only over the procfs entry and unlinks the name; a freezer pause keeps the mount, so the
 * value, as a kernel's would. procfd is the attached procfs, stage the tmpfs root.
 */
static void bind_boot_id(int procfd, int stage)
{
	unsigned char b[16];
	char line[40];
	int fd, t, m;

	if (util_random(b, sizeof(b)) < 0)
		fail("boot_id: no random bytes");
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(line, sizeof(line),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
	fd = openat(stage, "boot_id", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0 || util_write_all(fd, line, strlen(line)) < 0)
		fail_errno("write boot_id");
	close(fd);
	t = openat(procfd, "sys/kernel/random/boot_id", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		return; /* a kernel without it: nothing to cover */
	m = clone_at(stage, "boot_id", true);
	if (m < 0)
		fail_errno("clone boot_id");
	attach(m, t, "/proc/sys/kernel/random/boot_id");
	/* The mount holds the file; the name goes, so the tmpfs root keeps only the layer. */
	if (unlinkat(stage, "boot_id", 0) < 0)
		fail_errno("unlink the staged boot_id");
}

/* E2B's default user, when the template lacks it (agent/userseed.c). A template whose /etc
 * cannot take it still starts: requests naming `user` then fail with "no such user". */
static void seed_default_user(void)
{
	struct users_seed us;
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (root < 0)
		return;
	users_seed_default(root, &us);
	close(root);
}

/* Docker's masked sysfs paths: firmware tables (ACPI, DMI, EFI variables), RAPL energy
 * counters (powercap: the Platypus power side channel, CVE-2020-8694/8695) and per-CPU
 * thermal_throttle counters (a covert channel between tenants). /sys itself is
 * read-only already; these are also unreadable. */
static void mask_sys(struct masker *mk, int sysfd)
{
	int cpus;
	DIR *d;
	struct dirent *de;

	mask_at(mk, sysfd, "firmware", "/sys/firmware");
	mask_at(mk, sysfd, "devices/virtual/powercap", "/sys/devices/virtual/powercap");
	cpus = openat(sysfd, "devices/system/cpu", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (cpus < 0)
		return;
	d = fdopendir(cpus);
	if (!d)
		fail_errno("list /sys/devices/system/cpu");
	while ((de = readdir(d))) {
		char rel[64];

		if (strncmp(de->d_name, "cpu", 3) || de->d_name[3] < '0' || de->d_name[3] > '9' ||
		    strlen(de->d_name) > 32)
			continue;
		snprintf(rel, sizeof(rel), "%s/thermal_throttle", de->d_name);
		mask_at(mk, dirfd(d), rel, "/sys/devices/system/cpu/cpuN/thermal_throttle");
	}
	closedir(d);
}

/*
 * Minimal /dev, exactly: null zero full random urandom tty (the host's nodes, bound),
 * pts (a private devpts), shm (bounded tmpfs), mqueue (the POSIX message queues of the
 * sandbox's own ipc namespace, as runc's default spec mounts it), and the symlinks ptmx ->
 * pts/ptmx, fd stdin stdout stderr -> /proc/self/fd/... that programs expect. Nothing else:
 * no console, kmsg, mem, block or loop devices.
 */
static void make_dev(int rootfd, uint64_t shm_bytes, bool no_openat2)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	static const char *const links[][2] = {
		{"ptmx", "pts/ptmx"},	       {"fd", "/proc/self/fd"},
		{"stdin", "/proc/self/fd/0"},  {"stdout", "/proc/self/fd/1"},
		{"stderr", "/proc/self/fd/2"},
	};
	static const char *const dev_opts[] = {"mode",	    "0755", "size", "65536",
					       "nr_inodes", "64",   NULL};
	static const char *const pts_opts[] = {"newinstance", NULL,  "ptmxmode", "0666", "mode",
					       "0620",	      "gid", "5",	 NULL};
	char shm_size[32];
	const char *shm_opts[] = {"mode", "1777", "size", shm_size, NULL};
	int devfd, t, m;

	snprintf(shm_size, sizeof(shm_size), "%llu", (unsigned long long)shm_bytes);
	devfd = new_fs("tmpfs", "tmpfs", dev_opts,
		       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (devfd < 0)
		fail_errno("tmpfs for /dev");
	attach(fcntl(devfd, F_DUPFD_CLOEXEC, 3), open_target_dir(rootfd, "dev", no_openat2),
	       "/dev");
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		char host[32];

		snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
		t = openat(devfd, nodes[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
		if (t < 0)
			fail_errno("create /dev/%s", nodes[i]);
		close(t);
		t = openat(devfd, nodes[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
		m = open_tree(AT_FDCWD, host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (t < 0 || m < 0)
			fail_errno("bind %s", host);
		attach(m, t, host);
	}
	if (mkdirat(devfd, "pts", 0755) < 0 || mkdirat(devfd, "shm", 01777) < 0 ||
	    mkdirat(devfd, "mqueue", 01777) < 0)
		fail_errno("mkdir in /dev");
	mount_in_dev(devfd, "pts", "devpts", "devpts", pts_opts,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	/* /dev/shm: bounded, and its pages are charged to the sandbox's memory cgroup. */
	mount_in_dev(devfd, "shm", "tmpfs", "shm", shm_opts,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	/* The mqueue filesystem shows the queues of the ipc namespace it is mounted from: ours
	 * (a new one at clone), never the host's. Its size is bounded by the ipc namespace's
	 * own limits (fs.mqueue.*, per namespace). */
	mount_in_dev(devfd, "mqueue", "mqueue", "mqueue", NULL,
		     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlinkat(links[i][1], devfd, links[i][0]) < 0)
			fail_errno("symlink /dev/%s", links[i][0]);
	close(devfd);
}

/* sysfs >= 0: isolad's sysfs of our network namespace (a network slot's, which our user
 * namespace does not own, so the kernel would refuse us our own). */
static void mount_sys(struct masker *mk, int rootfd, bool no_openat2, int sysfs)
{
	unsigned ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	int m = sysfs >= 0 ? fresh_mount(sysfs) : new_fs("sysfs", "sysfs", NULL, ro);

	/* A fresh sysfs shows this netns's devices. If the kernel refuses it, fall back
	 * to a recursive read-only clone of the host's. */
	if (m < 0)
		m = clone_at(AT_FDCWD, "/sys", true);
	if (m < 0)
		fail_errno("sysfs");
	attach(fcntl(m, F_DUPFD_CLOEXEC, 3), open_target_dir(rootfd, "sys", no_openat2), "/sys");
	mask_sys(mk, m);
	close(m);
}

static void loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		fail_errno("socket for lo");
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		fail_errno("SIOCGIFFLAGS lo");
	/* A network slot's lo is up already, and ours to change only in our own namespace. */
	if ((ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING)) {
		close(s);
		return;
	}
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		fail_errno("SIOCSIFFLAGS lo");
	close(s);
}

/* Drops to what the agent needs itself (switching to a sandbox user, signalling its
 * processes, creating files for them) plus the sandbox root's set (root_caps, which
 * spawn.c hands to uid-0 processes), bounding set too, in the sandbox's user namespace only.
 * Without CAP_SYS_ADMIN the agent cannot remount, unshare or undo any of the above even if
 * a seccomp bug let the syscall through. */
static void drop_caps(uint64_t root_caps)
{
	static const int keep[] = {CAP_SETUID, CAP_SETGID,	 CAP_SETPCAP, CAP_KILL,
				   CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER};
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	uint64_t mask = root_caps;
	int last = CAP_LAST_CAP;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");

	if (f) {
		if (fscanf(f, "%d", &last) != 1 || last < 0 || last > 63)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		mask |= 1ull << keep[i];
	for (int c = 0; c <= last; c++)
		if (!(mask & (1ull << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			fail_errno("drop capability %d from the bounding set", c);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		fail_errno("clear ambient capabilities");
	memset(d, 0, sizeof(d));
	d[0].effective = d[0].permitted = (uint32_t)mask;
	d[1].effective = d[1].permitted = (uint32_t)(mask >> 32);
	if (syscall(SYS_capset, &h, d) < 0)
		fail_errno("capset");
}

/* Reads the sealed memfd of a BPF program isolad compiled (`what` names it) into prog
 * (insns on the heap) and closes the memfd. */
static void read_program(int memfd, const char *what, struct sock_fprog *prog)
{
	struct stat st;
	struct sock_filter *insns;

	if (fstat(memfd, &st) < 0)
		fail_errno("stat %s program", what);
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) ||
	    st.st_size > (off_t)(BPF_MAX_INSNS * sizeof(struct sock_filter)))
		fail("%s program has a bad size (%lld)", what, (long long)st.st_size);
	insns = malloc((size_t)st.st_size);
	if (!insns || pread(memfd, insns, (size_t)st.st_size, 0) != st.st_size)
		fail_errno("read %s program", what);
	prog->len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	prog->filter = insns;
	close(memfd);
}

static void install_seccomp(int memfd)
{
	struct sock_fprog prog;

	read_program(memfd, "seccomp", &prog);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		fail_errno("install seccomp filter");
	free(prog.filter);
}

/* The spec's own filter, when the plan carries one (fds.spec_seccomp): kept for spawn.c,
 * which installs it in each process the agent starts (the agent is never under it). Only
 * the flags isolad compiles for are accepted. */
static void keep_spec_seccomp(struct plan *p, json_t *fds)
{
	const unsigned known = SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW;
	json_t *flags = json_object_get(p->json, "spec_seccomp_flags");
	struct sock_fprog prog;

	if (!json_object_get(fds, "spec_seccomp"))
		return;
	if (flags && (!json_is_integer(flags) || json_integer_value(flags) < 0 ||
		      ((uint64_t)json_integer_value(flags) & ~(uint64_t)known)))
		fail("plan: bad spec_seccomp_flags");
	read_program(plan_take_fd(p, json_object_get(fds, "spec_seccomp"), "spec_seccomp"),
		     "spec seccomp", &prog);
	agent_spec_seccomp.insns = prog.filter;
	agent_spec_seccomp.len = prog.len;
	agent_spec_seccomp.flags = flags ? (unsigned)json_integer_value(flags) : 0;
}

/*
 * create's readonly_root (docker run --read-only, a spec's root.readonly): the root mount, the
 * template under the writable layer, becomes read-only, once the default user is seeded.
 * Only the root mount itself: /proc, /dev (with /dev/shm and /dev/mqueue), /sys and the
 * spec's binds and tmpfs mounts keep their own flags, as under Docker. The sandbox holds no
 * CAP_SYS_ADMIN to undo it. isolad still reaches the layer (AGENT_UPPER_FD) for snapshots.
 */
static void readonly_root(void)
{
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};

	if (mount_setattr(AT_FDCWD, "/", 0, &ro, sizeof(ro)) < 0)
		fail_errno("make the root read-only");
}

int agent_setup_run(int setup_fd, uint64_t *root_caps)
{
	struct plan p = {.json = NULL};
	struct masker mk = {.empty = -1};
	json_t *fds, *binds, *mounts, *caps;
	const char *hostname;
	int listen_fd, rootfs, upper, sc, sysfs, stage, rootfd, t, m;
	uint64_t shm;
	json_int_t nofile;
	struct rlimit rl;
	char opts[256];

	report_fd = setup_fd;
	/* The setup socket's number is reused for AGENT_UPPER_FD when setup ends. */
	if (setup_fd != AGENT_UPPER_FD)
		fail("setup socket on fd %d, not %d", setup_fd, AGENT_UPPER_FD);
	/* isolad runs with umask 077 for its own files; sandbox users expect the usual 022. */
	umask(022);
	memset(p.fds, -1, sizeof(p.fds));
	recv_plan(setup_fd, &p);
	fds = json_object_get(p.json, "fds");
	hostname = json_string_value(json_object_get(p.json, "hostname"));
	binds = json_object_get(p.json, "binds");
	mounts = json_object_get(p.json, "mounts");
	nofile = json_integer_value(json_object_get(p.json, "nofile"));
	shm = (uint64_t)json_integer_value(json_object_get(p.json, "shm_bytes"));
	p.no_openat2 = json_is_true(json_object_get(p.json, "no_openat2"));
	/* The sandbox root's capabilities (absent: the default set). isolad validated them;
	 * a mask with a never-listed bit is refused here too, so no plan can grant one. */
	caps = json_object_get(p.json, "caps");
	if (caps) {
		if (!json_is_integer(caps) || json_integer_value(caps) < 0 ||
		    !caps_mask_allowed((uint64_t)json_integer_value(caps)))
			fail("plan: bad caps");
		*root_caps = (uint64_t)json_integer_value(caps);
	}
	if (json_integer_value(json_object_get(p.json, "version")) != 1 || !json_is_object(fds) ||
	    !hostname || strlen(hostname) > 63)
		fail("plan: missing or bad fields");
	check_plan_mounts(binds, mounts);
	listen_fd = plan_take_fd(&p, json_object_get(fds, "listen"), "listen");
	rootfs = plan_take_fd(&p, json_object_get(fds, "rootfs"), "rootfs");
	upper = plan_take_fd(&p, json_object_get(fds, "upper"), "upper");
	sc = plan_take_fd(&p, json_object_get(fds, "seccomp"), "seccomp");
	sysfs = json_object_get(fds, "sysfs")
			? plan_take_fd(&p, json_object_get(fds, "sysfs"), "sysfs")
			: -1;
	keep_spec_seccomp(&p, fds);

	/* isolad wrote our uid/gid maps before sending the plan: become the namespace's
	 * root (host uid_base) instead of the unmapped overflow id. */
	if (setresgid(0, 0, 0) < 0)
		fail_errno("setresgid(0) in the user namespace");
	if (setresuid(0, 0, 0) < 0)
		fail_errno("setresuid(0) in the user namespace");
	if (setgroups(0, NULL) < 0)
		fail_errno("setgroups in the user namespace");
	/* isolad moved us into our cgroup after clone: make that our cgroup root. */
	if (json_is_true(json_object_get(p.json, "unshare_cgroupns")) &&
	    unshare(CLONE_NEWCGROUP) < 0)
		fail_errno("unshare cgroup namespace");
	/* Nothing we mount may propagate back to the host's mount namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail_errno("make / private");

	/* Stage: the writable tmpfs (isolad's, size/inode-capped) holds the overlay's
	 * upper and work dirs and the mount points it is assembled on. */
	stage = open(STAGE, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (stage < 0)
		fail_errno("open " STAGE);
	attach(upper, stage, "writable layer on " STAGE);
	stage = open(STAGE, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* upper may exist already: a restore filled it (isolad, before the plan was sent). */
	if (stage < 0 || mkdirat(stage, "lower", 0700) < 0 ||
	    (mkdirat(stage, "upper", 0755) < 0 && errno != EEXIST) ||
	    mkdirat(stage, "work", 0700) < 0 || mkdirat(stage, "root", 0755) < 0)
		fail_errno("prepare the writable layer");
	t = openat(stage, "lower", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		fail_errno("open lower");
	attach(rootfs, t, "template");
	/* userxattr: overlay keeps its metadata in user.* xattrs, the only ones an
	 * unprivileged (userns) mount may write. Fall back for older kernels. */
	snprintf(opts, sizeof(opts),
		 "lowerdir=" STAGE "/lower,upperdir=" STAGE "/upper,workdir=" STAGE "/work");
	/* nosuid, nodev: a setuid binary or device node in the template or written later
	 * grants nothing (no_new_privs and the userns already say so; this is the third
	 * layer). */
	if (mount("overlay", STAGE "/root", "overlay", MS_NOSUID | MS_NODEV,
		  strncat(opts, ",userxattr", sizeof(opts) - strlen(opts) - 1)) < 0) {
		opts[strlen(opts) - strlen(",userxattr")] = '\0';
		if (mount("overlay", STAGE "/root", "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
			fail_errno("mount overlay root");
	}
	rootfd = open(STAGE "/root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		fail_errno("open new root");

	/* /proc of our pid namespace, with the host-revealing parts covered. */
	m = new_fs("proc", "proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (m < 0)
		fail_errno("procfs");
	attach(fcntl(m, F_DUPFD_CLOEXEC, 3), open_target_dir(rootfd, "proc", p.no_openat2),
	       "/proc");
	mask_proc(&mk, m);
	bind_boot_id(m, stage);
	close(m);
	make_dev(rootfd, shm ? shm : 64ull << 20, p.no_openat2);
	mount_sys(&mk, rootfd, p.no_openat2, sysfs);
	/* Host template binds (e.g. /usr), read-only, the operator's (isola-runc's spec mounts:
	 * directories or files) and the spec's tmpfs mounts, on targets checked for symlinks;
	 * after isola's own filesystems, where a spec lists them (runtime-tools' mount order). */
	mount_binds_tmpfs(&p, rootfd, stage, binds, mounts);
	/* The spec's read-only, then masked paths (runc's order), over everything above: they
	 * only narrow what the sandbox sees (docs/oci.md). */
	apply_paths(&mk, rootfd, mounts, "readonly", p.no_openat2);
	apply_paths(&mk, rootfd, mounts, "masked", p.no_openat2);
	if (mk.empty >= 0)
		close(mk.empty);

	/* Enter the new root; the old one (the host's tree) is detached entirely. */
	if (fchdir(rootfd) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		fail_errno("pivot_root");
	close(rootfd);
	/* stage stays open: it becomes AGENT_UPPER_FD once the setup socket is closed. */

	seed_default_user();
	if (json_is_true(json_object_get(p.json, "readonly_root")))
		readonly_root();
	if (sethostname(hostname, strlen(hostname)) < 0)
		fail_errno("sethostname");
	/* A joined network namespace (docs/oci.md) belongs to the engine that made it; we hold
	 * no CAP_NET_ADMIN over it anyway. */
	if (!json_is_true(json_object_get(p.json, "net_joined")))
		loopback_up();
	rl.rlim_cur = rl.rlim_max = nofile > 0 && nofile < (1 << 20) ? (rlim_t)nofile : 1024;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail_errno("RLIMIT_NOFILE");

	drop_caps(*root_caps);
	/* No setuid binary can ever raise privileges again (also required for an
	 * unprivileged seccomp filter); not dumpable: no ptrace attach, /proc/1 is root's. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail_errno("no_new_privs/dumpable");
	install_seccomp(sc);

	for (unsigned k = 0; k < p.nfds; k++)
		if (p.fds[k] >= 0)
			close(p.fds[k]);
	json_decref(p.json);
	if (send(setup_fd, "ok", 2, MSG_NOSIGNAL) < 0)
		_exit(1);
	close(setup_fd);
	report_fd = -1;
	/*
	 * The root of the writable tmpfs (O_PATH, close-on-exec) stays open at AGENT_UPPER_FD
	 * for the agent's whole life: after an isolad restart, isolad takes it back with
	 * pidfd_getfd() to snapshot the layer. No sandbox process can reach it: the spawn
	 * child closes every fd above 2 it does not hand over, close-on-exec drops it at
	 * execve, and /proc/1/fd/N, pidfd_getfd and ptrace need CAP_SYS_PTRACE over this
	 * non-dumpable process, which nothing inside holds (tests/security/
	 * test_persist_agent_fd.py). fd 3 was the setup socket, closed just above, so this
	 * replaces nothing.
	 */
	if (dup3(stage, AGENT_UPPER_FD, O_CLOEXEC) < 0)
		_exit(1);
	close(stage);
	return listen_fd;
}
