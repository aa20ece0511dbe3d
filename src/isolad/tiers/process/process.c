/* SPDX-License-Identifier: Apache-2.0 */
/* process: the process tier's lifecycle (create, connect, save/reattach, stats, destroy). */
#include "process-internal.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../common/log.h"
#include "../../../common/spawnguard.h"
#include "../../../common/util.h"

#define SETUP_TIMEOUT_MS  10000		       /* from clone to the agent's "ok" */
#define KILL_TIMEOUT_MS	  5000		       /* from SIGKILL to empty cgroups */
#define PLAN_MAX_FDS	  (6 + TIER_MAX_BINDS) /* listen, rootfs, upper, 2 seccomp, binds, sysfs */
#define FREEZE_TIMEOUT_MS 5000		       /* from cgroup.freeze/freezer.state to frozen */

/* One live sandbox. Owned by core; one thread at a time (core serialises). */
struct tier_sandbox {
	char id[40];	   /* sandbox id (copied from the spec) */
	uint32_t uid_base; /* first host uid of the sandbox's range (snapshot shifts from it) */
	char dir[512];	   /* per-sandbox state dir (copied) */
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* <dir>/agent.sock */
	pid_t pid;		      /* host pid of the sandbox's PID 1, 0 if none */
	int pidfd;		      /* pidfd of pid, -1 if none */
	uint64_t start_time;	      /* /proc/<pid>/stat field 22, pins pid identity */
	const struct cgroup_ops *cgo; /* cgroup backend of cg */
	struct proc_cgroup cg;	      /* cgroup dirs we made (cg.n == 0: none) */
	int upper_fd;		      /* fd of the writable tmpfs root (stats, snapshot), or -1 */
	uint64_t upper_dev;	      /* st_dev of that root, recorded at create (0 = unknown) */
	uint64_t upper_ino;	      /* st_ino of that root: with upper_dev, its identity */
	enum proc_idmap_mode idmap;   /* how the template is shown inside */
	bool paused;		      /* frozen by pause() (snapshot's own freeze is not) */
	void *spawn_stack;	      /* PID 1's stack until its exec (proc_spawn), or NULL */
};

static bool force_no_openat2;

void tier_process_set_force_no_openat2(bool on)
{
	force_no_openat2 = on;
}

static bool id_is_valid(const char *id)
{
	size_t n = strnlen(id, 40);

	if (n == 0 || n >= 40)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') ||
		      id[i] == '-'))
			return false;
	return true;
}

static struct tier_sandbox *sandbox_new(const struct sandbox_spec *spec)
{
	struct tier_sandbox *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->id, sizeof(s->id), "%s", spec->id);
	snprintf(s->dir, sizeof(s->dir), "%s", spec->dir);
	s->uid_base = spec->uid_base;
	if (snprintf(s->sock, sizeof(s->sock), "%s/agent.sock", spec->dir) >=
	    (int)sizeof(s->sock)) {
		free(s);
		errno = ENAMETOOLONG;
		return NULL;
	}
	s->pidfd = -1;
	s->upper_fd = -1;
	return s;
}

/* Kills PID 1 (the kernel then kills the whole pid namespace) and reaps it. */
#ifndef PIDFD_GET_MNT_NAMESPACE
#define PIDFD_GET_MNT_NAMESPACE _IO(0xFF, 3) /* PIDFS_IOCTL_MAGIC; Linux 6.11 */
#endif

static void kill_init(struct tier_sandbox *s)
{
	/* A PID 1 that never reached its exec may still run on spawn_stack: kept (leaked)
	 * unless it is known dead. */
	if (proc_pidfd_kill(&s->pidfd, KILL_TIMEOUT_MS))
		proc_spawn_stack_free(&s->spawn_stack);
	else if (s->spawn_stack)
		log_warn("sandbox %s: PID 1 outlived its kill before its exec; its spawn stack "
			 "is kept",
			 s->id);
	s->pid = 0;
}

/* Removes everything; idempotent. Returns the first failure. */
static int teardown(struct tier_sandbox *s, struct isola_err **err)
{
	uint64_t t0 = util_now_ns(), t_kill, t_cg;
	int r = 0, mntns;

	/* A frozen v1 task does not die on SIGKILL until thawed: thaw first (idempotent; after
	 * a reattach isolad does not know whether it was paused). */
	if (s->cg.n && s->cgo && s->cgo->freeze)
		s->cgo->freeze(&s->cg, false, KILL_TIMEOUT_MS, NULL);
	s->paused = false;
	/* Held across the kill, the mount namespace is not torn down by PID 1's exit: the
	 * unmount of the sandbox's overlay, /proc, /dev and binds (most of what the kill waited
	 * for) is left to the closer thread, after the answer. The processes are as dead as
	 * before when kill_init returns; only their mounts outlive them, reachable by nobody. */
	mntns = proc_open_ns(s->pid, s->pidfd, "mnt", PIDFD_GET_MNT_NAMESPACE);
	kill_init(s);
	t_kill = util_now_ns();
	if (s->cg.n && s->cgo) {
		/* Stragglers (there should be none once PID 1 is gone). */
		if (!proc_cgroup_is_empty(&s->cg))
			s->cgo->kill_all(&s->cg);
		r = proc_cgroup_remove(&s->cg, KILL_TIMEOUT_MS, err);
		if (r == 0)
			s->cg.n = 0;
	}
	/* Nothing of the sandbox's writes is left dirty here: the sandbox's overlay, unmounted
	 * with its mount namespace as its last process died, synced its upper layer (this
	 * ext4) then, unless a destroy shut the ext4 down first (process_discard). */
	t_cg = util_now_ns();
	/* The unmounts and the loop device's release finish behind the destroy's answer: the
	 * namespace's first (its overlay's upper is the layer), then the layer's. */
	if (mntns >= 0)
		proc_disk_release(mntns);
	proc_disk_release(s->upper_fd);
	s->upper_fd = -1;
	if (unlink(s->sock) < 0 && errno != ENOENT && r == 0)
		r = isola_err_sys(err, errno, "internal", "unlink `%s`", s->sock);
	spawnguard_record_remove(s->dir);
	log_debug("sandbox %s: teardown took %.2f ms: kill %.2f, cgroups %.2f, layer %.2f", s->id,
		  (util_now_ns() - t0) / 1e6, (t_kill - t0) / 1e6, (t_cg - t_kill) / 1e6,
		  (util_now_ns() - t_cg) / 1e6);
	return r;
}

static int make_listener(const char *path, struct isola_err **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	cleanup_fd int fd = -1;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "socket for `%s`", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return isola_err_sys(err, errno, "internal", "unlink stale `%s`", path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return isola_err_sys(err, errno, "internal", "bind `%s`", path);
	/* The state dir is 0700 already; 0600 says the same on the socket itself. */
	if (chmod(path, 0600) < 0 || listen(fd, 8) < 0) {
		int e = errno;

		unlink(path);
		return isola_err_sys(err, e, "internal", "listen `%s`", path);
	}
	return steal_fd(&fd);
}

/* Sends the plan JSON with its fds as one SOCK_SEQPACKET message. */
static int send_plan(int sock, const char *json, const int *fds, unsigned nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * PLAN_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)json, .iov_len = strlen(json)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	m.msg_control = u.buf;
	m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Waits for setup's one-message reply: "ok", "error: <reason>" or "refused: <reason>". */
static int wait_setup(int sock, const char *id, struct isola_err **err)
{
	struct pollfd p = {.fd = sock, .events = POLLIN};
	char buf[1024];
	ssize_t n;
	int r;

	do
		r = poll(&p, 1, SETUP_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return isola_err_set(err, ETIMEDOUT, "internal",
				     "sandbox `%s`: setup did not finish in %d ms", id,
				     SETUP_TIMEOUT_MS);
	n = recv(sock, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	if (n <= 0)
		return isola_err_set(err, EPIPE, "internal",
				     "sandbox `%s`: setup exited without a report", id);
	/* UNTRUSTED: bytes from the sandbox's setup stage; printed only, length-capped. */
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = '?';
	if (strcmp(buf, "ok") == 0)
		return 0;
	/* The template itself is unusable (a symlinked /dev, /proc or /sys, a mount target
	 * that is a file): the client's choice, not an isola fault. */
	if (strncmp(buf, "refused: ", 9) == 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "sandbox `%s`: the template is refused: %.900s", id, buf + 9);
	return isola_err_set(err, EIO, "internal", "sandbox `%s`: setup failed: %.900s", id,
			     strncmp(buf, "error: ", 7) == 0 ? buf + 7 : buf);
}

/* The spec's tmpfs mounts, masked and read-only paths for the agent (setup.c). */
static json_t *plan_mounts(const struct sandbox_spec *spec)
{
	static const char *const kinds[] = {[TIER_MOUNT_TMPFS] = "tmpfs",
					    [TIER_MOUNT_MASKED] = "masked",
					    [TIER_MOUNT_READONLY] = "readonly"};
	json_t *a = json_array();

	for (unsigned i = 0; i < spec->n_mounts && i < TIER_MAX_MOUNTS; i++) {
		const struct tier_mount *m = &spec->mounts[i];

		if (m->kind < TIER_MOUNT_TMPFS || m->kind > TIER_MOUNT_READONLY)
			continue;
		json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:i, s:b, s:b}", "kind",
						   kinds[m->kind], "path", m->path, "size",
						   (json_int_t)m->size, "mode", (int)m->mode,
						   "noexec", m->noexec, "readonly", m->readonly));
	}
	return a;
}

/* fds[first_bind_fd + i] is the mount of spec->binds[i]: a file bind needs a file target.
 * sysfs_fd: the index of a network slot's sysfs mount among the fds, -1 for none (the agent
 * mounts a sysfs of its own namespace). spec_sc_fd: the index of the spec's seccomp program,
 * -1 for none. */
static char *plan_json(const struct sandbox_spec *spec, bool idmapped, const int *fds,
		       unsigned first_bind_fd, int sysfs_fd, int spec_sc_fd)
{
	json_t *binds = json_array(), *j;
	uint64_t shm = spec->memory_bytes ? spec->memory_bytes / 2 : 64ull << 20;
	char *out;

	for (unsigned i = 0; i < spec->n_binds; i++) {
		struct stat st;
		bool file = fstat(fds[first_bind_fd + i], &st) == 0 && !S_ISDIR(st.st_mode);

		json_array_append_new(binds, json_pack("{s:i, s:s, s:b}", "fd", first_bind_fd + i,
						       "dst", spec->binds[i].dst, "file", file));
	}
	j = json_pack("{s:i, s:s, s:b, s:b, s:I, s:I, s:b, s:{s:i, s:i, s:i, s:i}, s:o}", "version",
		      1, "hostname", tier_hostname(spec), "idmap", idmapped, "unshare_cgroupns", 1,
		      "nofile", (json_int_t)(spec->nofile ? spec->nofile : 1024), "shm_bytes",
		      (json_int_t)shm, "no_openat2",
		      force_no_openat2 || getenv("ISOLA_TEST_NO_OPENAT2"), "fds", "listen", 0,
		      "rootfs", 1, "upper", 2, "seccomp", 3, "binds", binds);
	if (!j)
		return NULL;
	if (sysfs_fd >= 0)
		json_object_set_new(json_object_get(j, "fds"), "sysfs", json_integer(sysfs_fd));
	/* The spec's own filter: the agent installs it in each process it starts (spawn.c). */
	if (spec_sc_fd >= 0) {
		json_object_set_new(json_object_get(j, "fds"), "spec_seccomp",
				    json_integer(spec_sc_fd));
		json_object_set_new(j, "spec_seccomp_flags", json_integer(spec->seccomp->flags));
	}
	/* A joined network (docs/oci.md) is the engine's: setup leaves its interfaces alone. */
	json_object_set_new(j, "net_joined", json_boolean(spec->netns_path[0] != '\0'));
	/* What the sandbox's root holds (agent spawn.c); validated by core at create. */
	json_object_set_new(j, "caps", json_integer((json_int_t)spec->caps));
	json_object_set_new(j, "mounts", plan_mounts(spec));
	json_object_set_new(j, "readonly_root", json_boolean(spec->readonly_root));
	out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/*
 * The writable layer's filesystem: an ext4 image on the host's disk (disk.c), so `disk` is
 * disk and not memory. On a host without loop devices or mke2fs (`unavailable`) it falls
 * back to a tmpfs capped at the same size, which is memory charged to the sandbox's memory
 * cgroup, and says so in the log; doctor reports it too.
 */
static int writable_layer(const struct sandbox_spec *spec, struct isola_err **err)
{
	struct isola_err *e = NULL;
	int fd;

	fd = proc_disk_mount(spec->dir, spec->id, spec->disk_bytes, spec->inodes, spec->uid_base,
			     spec->uid_base, &e);
	if (fd >= 0 || strcmp(e->code, "unavailable") != 0) {
		if (fd < 0 && err)
			*err = e;
		else
			isola_err_free(e);
		return fd;
	}
	log_warn("sandbox `%s`: %s; its writable layer is a tmpfs (memory, charged to its memory "
		 "limit)",
		 spec->id, e->message);
	isola_err_free(e);
	fd = proc_mount_tmpfs(spec->disk_bytes, spec->inodes, spec->uid_base, spec->uid_base);
	if (fd < 0)
		return isola_err_sys(err, -fd, "internal", "writable tmpfs for `%s`", spec->id);
	return fd;
}

/* create and restore: layer_fd >= 0 is an archive (named layer_name) that fills the new
 * writable layer before the plan is sent, so no code of the sandbox has run yet. */
static int create_sandbox(const struct sandbox_spec *spec, int layer_fd, const char *layer_name,
			  struct tier_sandbox **out, struct isola_err **err)
{
	struct proc_cg_limits lim = {spec->memory_bytes, spec->pids, spec->cpu_millis};
	int fds[PLAN_MAX_FDS];
	unsigned nfds = 0;
	cleanup_fd int agent_fd = -1;
	cleanup_fd int devnull = -1;
	cleanup_fd int userns = -1;
	cleanup_fd int record = -1;
	cleanup_fd int join_net = -1;
	int sp[2] = {-1, -1};
	struct tier_sandbox *s;
	cleanup_free char *plan = NULL;
	bool idm = true;
	int r, sysfs_idx = -1, spec_sc_idx = -1, slot_net;
	uint64_t t0 = util_now_ns(), t_cg = 0, t_clone = 0, t_tmpl = 0, t_layer = 0, t_setup = 0;

	for (unsigned i = 0; i < PLAN_MAX_FDS; i++)
		fds[i] = -1;
	if (!id_is_valid(spec->id))
		return isola_err_set(err, EINVAL, "invalid", "sandbox id `%.40s` is not [a-z0-9-]",
				     spec->id);
	if (spec->n_binds > TIER_MAX_BINDS || spec->uid_base == 0 ||
	    spec->uid_base > UINT32_MAX - 65536)
		return isola_err_set(err, EINVAL, "invalid", "sandbox `%s`: bad binds or uid_base",
				     spec->id);
	s = sandbox_new(spec);
	if (!s)
		return isola_err_sys(err, errno ? errno : ENOMEM, "internal",
				     "sandbox `%s`: new handle", spec->id);
	s->cgo = proc_cgroup_detect(err);
	if (!s->cgo) {
		r = -ENOTSUP;
		goto err_free;
	}
	agent_fd = proc_agent_memfd(err);
	if (agent_fd < 0) {
		r = agent_fd;
		goto err_free;
	}
	fds[3] = proc_seccomp_memfd(err);
	if (fds[3] < 0) {
		r = fds[3];
		goto err_free;
	}
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0) {
		r = isola_err_sys(err, errno, "internal", "open /dev/null");
		goto err_free;
	}
	fds[0] = make_listener(s->sock, err);
	if (fds[0] < 0) {
		r = fds[0];
		goto err_free;
	}
	r = s->cgo->create(spec->id, &lim, &s->cg, err);
	if (r < 0)
		goto err_teardown;
	t_cg = util_now_ns();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		r = isola_err_sys(err, errno, "internal", "socketpair");
		goto err_teardown;
	}
	/* The record a restart finds an orphan by (src/common/spawnguard.h): made before the
	 * clone, held by the child until it is in the sandbox's cgroups. */
	record = spawnguard_record_open(s->dir);
	if (record < 0) {
		r = isola_err_sys(err, -record, "internal", "sandbox `%s`: create `%s/%s`",
				  spec->id, s->dir, SPAWNGUARD_RECORD);
		goto err_teardown;
	}
	/* Opened and checked by isolad itself, right before the clone that joins it. A joined
	 * sandbox never holds a network slot (core takes none for it). */
	slot_net = spec->netns ? spec->netns->netns_fd : -1;
	if (spec->netns_path[0]) {
		join_net = proc_open_join_netns(spec->netns_path, err);
		if (join_net < 0) {
			r = join_net;
			goto err_teardown;
		}
	}
	s->pid = proc_spawn(sp[1], agent_fd, devnull, record, join_net >= 0 ? join_net : slot_net,
			    &s->pidfd, &s->spawn_stack);
	if (s->pid < 0) {
		r = isola_err_sys(err, -s->pid, "internal", "sandbox `%s`: clone3", spec->id);
		s->pid = 0;
		goto err_teardown;
	}
	close(sp[1]);
	sp[1] = -1;
	/* Test hook: holds the window between the clone and the handover open, so a test can
	 * list the child's fds and kill -9 isolad inside it (tests/integration/test_spawn_guard.py). */
	if (getenv("ISOLA_TEST_SPAWN_HOLD_MS"))
		usleep((useconds_t)atoi(getenv("ISOLA_TEST_SPAWN_HOLD_MS")) * 1000u);
	/* The child blocks reading the plan until all of this is in place, so no code
	 * of the sandbox runs outside its cgroup or before its id maps exist. */
	r = proc_write_idmaps(s->pid, spec->uid_base);
	if (r < 0) {
		isola_err_sys(err, -r, "internal", "sandbox `%s`: write uid/gid map", spec->id);
		goto err_teardown;
	}
	r = s->cgo->attach(&s->cg, s->pid, err);
	if (r < 0)
		goto err_teardown;
	/* Maps written and cgroup joined: the child may become root in its namespace
	 * and exec the agent. */
	if (send(sp[0], "m", 1, MSG_NOSIGNAL) != 1) {
		r = isola_err_sys(err, errno, "internal", "sandbox `%s`: release child", spec->id);
		goto err_teardown;
	}
	t_clone = util_now_ns();
	userns = proc_open_userns(s->pid, s->pidfd);
	if (userns < 0) {
		r = isola_err_sys(err, -userns, "internal", "sandbox `%s`: open user namespace",
				  spec->id);
		goto err_teardown;
	}
	fds[1] = proc_mount_clone(spec->rootfs, userns, true, true, &idm);
	if (fds[1] < 0) {
		r = isola_err_sys(err, -fds[1], "internal", "clone template `%s`", spec->rootfs);
		goto err_teardown;
	}
	s->idmap = idm ? PROC_IDMAP_ON : PROC_IDMAP_NONE;
	nfds = 4;
	for (unsigned i = 0; i < spec->n_binds; i++) {
		const struct tier_bind *b = &spec->binds[i];
		bool bidm;

		/* Read-only binds follow the template's mode so ownership inside is consistent.
		 * A writable one is never idmapped: through an idmap the sandbox's root would
		 * create files owned by host uid 0 (setuid ones included) in a host directory. */
		fds[nfds] = proc_mount_clone(b->src, idm && !b->writable ? userns : -1,
					     !b->writable, !b->single, &bidm);
		if (fds[nfds] < 0) {
			r = isola_err_sys(err, -fds[nfds], "internal", "clone bind `%s`",
					  spec->binds[i].src);
			goto err_teardown;
		}
		nfds++;
	}
	t_tmpl = util_now_ns();
	fds[2] = writable_layer(spec, err);
	if (fds[2] < 0) {
		r = fds[2];
		goto err_teardown;
	}
	t_layer = util_now_ns();
	s->upper_fd = fcntl(fds[2], F_DUPFD_CLOEXEC, 3);
	{
		struct stat ust;

		/* Recorded in the saved state: after a restart the fd the agent hands back
		 * must be this very inode (reattach_upper). */
		if (s->upper_fd >= 0 && fstat(s->upper_fd, &ust) == 0) {
			s->upper_dev = (uint64_t)ust.st_dev;
			s->upper_ino = (uint64_t)ust.st_ino;
		}
	}
	if (layer_fd >= 0) {
		/* A failure leaves nothing: the tmpfs is a detached mount that goes with its
		 * fds, the rest unwinds like a failed create. */
		r = proc_restore_layer(s->cgo, &s->cg, fds[2], layer_fd, s->uid_base, layer_name,
				       err);
		if (r < 0) {
			isola_err_wrap(err, "sandbox `%s`", spec->id);
			goto err_teardown;
		}
	}
	if (spec->netns) {
		fds[nfds] = fcntl(spec->netns->sysfs_fd, F_DUPFD_CLOEXEC, 3);
		if (fds[nfds] < 0) {
			r = isola_err_sys(err, errno, "internal", "sandbox `%s`: dup sysfs",
					  spec->id);
			goto err_teardown;
		}
		sysfs_idx = (int)nfds++;
	}
	if (spec->seccomp) {
		fds[nfds] = fcntl(spec->seccomp->fd, F_DUPFD_CLOEXEC, 3);
		if (fds[nfds] < 0) {
			r = isola_err_sys(err, errno, "internal",
					  "sandbox `%s`: dup the spec's seccomp program", spec->id);
			goto err_teardown;
		}
		spec_sc_idx = (int)nfds++;
	}
	plan = plan_json(spec, idm, fds, 4, sysfs_idx, spec_sc_idx);
	if (!plan) {
		r = isola_err_set(err, ENOMEM, "internal", "sandbox `%s`: plan", spec->id);
		goto err_teardown;
	}
	r = send_plan(sp[0], plan, fds, nfds);
	if (r < 0) {
		isola_err_sys(err, -r, "internal", "sandbox `%s`: send plan", spec->id);
		goto err_teardown;
	}
	close_fds(fds, PLAN_MAX_FDS);
	r = wait_setup(sp[0], spec->id, err);
	if (r < 0)
		goto err_teardown;
	/* Setup answered: PID 1 runs the agent, its own memory and stack. */
	proc_spawn_stack_free(&s->spawn_stack);
	t_setup = util_now_ns();
	close(sp[0]);
	sp[0] = -1;
	r = proc_read_start_time(s->pid, &s->start_time);
	if (r < 0) {
		isola_err_sys(err, -r, "internal", "sandbox `%s`: read start time", spec->id);
		goto err_teardown;
	}
	spawnguard_record_remove(s->dir);
	log_debug("sandbox %s: tier create took %.2f ms: cgroups %.2f, clone and maps %.2f, "
		  "template %.2f, layer %.2f, setup %.2f, rest %.2f",
		  spec->id, (util_now_ns() - t0) / 1e6, (t_cg - t0) / 1e6, (t_clone - t_cg) / 1e6,
		  (t_tmpl - t_clone) / 1e6, (t_layer - t_tmpl) / 1e6, (t_setup - t_layer) / 1e6,
		  (util_now_ns() - t_setup) / 1e6);
	*out = s;
	return 0;

err_teardown:
	close_fds(fds, PLAN_MAX_FDS);
	if (sp[0] >= 0)
		close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	teardown(s, NULL);
	free(s);
	return r;
err_free:
	close_fds(fds, PLAN_MAX_FDS);
	free(s);
	return r;
}

static int process_create(const struct sandbox_spec *spec, struct tier_sandbox **out,
			  struct isola_err **err)
{
	return create_sandbox(spec, -1, NULL, out, err);
}

static int process_agent_connect(struct tier_sandbox *s, struct isola_err **err)
{
	int fd = util_unix_connect(s->sock, 0);

	if (fd < 0)
		return isola_err_sys(err, -fd, "unavailable", "connect `%s`", s->sock);
	return fd;
}

static char *process_save(struct tier_sandbox *s)
{
	json_t *paths = json_array(), *j;
	char st[32];
	char *out;

	for (unsigned i = 0; i < s->cg.n; i++)
		json_array_append_new(paths, json_string(s->cg.path[i]));
	snprintf(st, sizeof(st), "%" PRIu64, s->start_time);
	j = json_pack("{s:i, s:i, s:s, s:{s:i, s:o}, s:s, s:s}", "version", 1, "pid", (int)s->pid,
		      "start_time", st, "cgroup", "version", s->cg.version, "paths", paths, "idmap",
		      s->idmap == PROC_IDMAP_ON ? "idmapped" : "none", "sock", s->sock);
	if (!j)
		return NULL;
	if (s->upper_dev || s->upper_ino) {
		char dev[32], ino[32];

		snprintf(dev, sizeof(dev), "%" PRIu64, s->upper_dev);
		snprintf(ino, sizeof(ino), "%" PRIu64, s->upper_ino);
		json_object_set_new(j, "upper",
				    json_pack("{s:i, s:s, s:s}", "fd", PROC_AGENT_UPPER_FD, "dev",
					      dev, "ino", ino));
	}
	out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}

/* Fills cg from saved JSON, accepting only paths the backend itself would use
 * for this id (the saved file is on disk: never rmdir a path it merely names). */
static void cg_from_saved(const struct sandbox_spec *spec, const struct cgroup_ops *cgo,
			  struct proc_cgroup *cg)
{
	if (!cgo || cgo->paths(spec->id, cg) < 0)
		memset(cg, 0, sizeof(*cg));
}

/* Parses saved; verifies pid + start time. Returns a pidfd or -ESRCH/-EINVAL. */
static int saved_pidfd(const char *saved, pid_t *pid_out, uint64_t *start_out, bool *idm)
{
	json_error_t je;
	json_t *j = saved ? json_loads(saved, 0, &je) : NULL;
	const char *st = NULL, *im = "none";
	int pid = 0, pfd;
	uint64_t want;

	if (!j)
		return -EINVAL;
	if (json_unpack(j, "{s:i, s:s, s?s}", "pid", &pid, "start_time", &st, "idmap", &im) < 0 ||
	    pid <= 1) {
		json_decref(j);
		return -EINVAL;
	}
	want = strtoull(st, NULL, 10);
	*idm = !strcmp(im, "idmapped");
	json_decref(j);
	pfd = proc_pidfd_verified(pid, want);
	if (pfd < 0)
		return pfd;
	*pid_out = pid;
	*start_out = want;
	return pfd;
}

/* Reads the tmpfs root's identity from saved ("upper": {"fd", "dev", "ino"}); leaves s
 * untouched when it is absent (a sandbox made by an isolad without it) or malformed. */
static void saved_upper(const char *saved, struct tier_sandbox *s)
{
	json_error_t je;
	json_t *j = saved ? json_loads(saved, 0, &je) : NULL;
	const char *dev = NULL, *ino = NULL;
	int fdno = -1;

	if (j &&
	    json_unpack(j, "{s:{s:i, s:s, s:s}}", "upper", "fd", &fdno, "dev", &dev, "ino", &ino) ==
		    0 &&
	    fdno == PROC_AGENT_UPPER_FD) {
		s->upper_dev = strtoull(dev, NULL, 10);
		s->upper_ino = strtoull(ino, NULL, 10);
	}
	json_decref(j);
}

/*
 * After an isolad restart: takes the writable tmpfs root back from the agent, which keeps
 * it open at PROC_AGENT_UPPER_FD (src/agent/setup.c). pidfd_getfd() works on the pidfd that
 * reattach verified, so no path is resolved at all, inside the sandbox or in /proc. Where
 * the kernel refuses it (ENOSYS before 5.6, EPERM under a Yama ptrace_scope of 3) or the
 * test hook $ISOLA_TEST_NO_PIDFD_GETFD is set, /proc/<pid>/fd/N is opened instead (a magic
 * link of the host's procfs, never a path inside the sandbox) and the pidfd is checked to be
 * still alive after the open, so a recycled pid cannot answer.
 *
 * The agent is code of the sandbox, so what comes back is checked before isolad ever walks
 * it: a tmpfs directory, owned by the sandbox's uid range, and the very inode (st_dev,
 * st_ino) isolad made at create. A tmpfs keeps its anonymous st_dev while any fd holds it,
 * and nothing inside may mount, so no other directory passes. The fd or -errno (-ENOENT:
 * no identity recorded; -EPERM: the fd is not the sandbox's tmpfs root).
 */
static int reattach_upper(const struct tier_sandbox *s)
{
	cleanup_fd int fd = -1;
	struct statfs sf;
	struct stat st;

	if (!s->upper_dev && !s->upper_ino)
		return -ENOENT;
	if (!getenv("ISOLA_TEST_NO_PIDFD_GETFD"))
		fd = (int)syscall(SYS_pidfd_getfd, s->pidfd, PROC_AGENT_UPPER_FD, 0);
	else
		errno = ENOSYS;
	if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
		struct pollfd pf = {.fd = s->pidfd, .events = POLLIN};
		char p[64];

		snprintf(p, sizeof(p), "/proc/%d/fd/%d", (int)s->pid, PROC_AGENT_UPPER_FD);
		fd = open(p, O_PATH | O_CLOEXEC);
		if (fd >= 0 && poll(&pf, 1, 0) != 0)
			return -ESRCH;
	}
	if (fd < 0)
		return -errno;
	if (fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0)
		return -errno;
	if ((sf.f_type != EXT4_SUPER_MAGIC && sf.f_type != TMPFS_MAGIC) || !S_ISDIR(st.st_mode) ||
	    st.st_uid < s->uid_base || st.st_uid - s->uid_base >= 65536 ||
	    (uint64_t)st.st_dev != s->upper_dev || (uint64_t)st.st_ino != s->upper_ino)
		return -EPERM;
	return steal_fd(&fd);
}

static int process_reattach(const struct sandbox_spec *spec, const char *saved,
			    struct tier_sandbox **out, struct isola_err **err)
{
	struct tier_sandbox *s = sandbox_new(spec);
	bool idm = false;
	int pfd;

	if (!s)
		return isola_err_sys(err, ENOMEM, "internal", "reattach `%s`", spec->id);
	pfd = saved_pidfd(saved, &s->pid, &s->start_time, &idm);
	if (pfd < 0) {
		free(s);
		return isola_err_set(err, -pfd, pfd == -ESRCH ? "not_found" : "invalid",
				     "sandbox `%s`: %s", spec->id,
				     pfd == -ESRCH ? "its process is gone" : "bad saved state");
	}
	s->pidfd = pfd;
	s->idmap = idm ? PROC_IDMAP_ON : PROC_IDMAP_NONE;
	s->cgo = proc_cgroup_detect(NULL);
	cg_from_saved(spec, s->cgo, &s->cg);
	/* Paused before the restart: a snapshot must leave it frozen, not thaw it. */
	s->paused = s->cg.n && s->cgo && s->cgo->is_frozen && s->cgo->is_frozen(&s->cg);
	saved_upper(saved, s);
	s->upper_fd = reattach_upper(s);
	if (s->upper_fd < 0) {
		/* The sandbox runs on; only snapshot (hibernate, fork) and disk stats need it. */
		log_warn("sandbox `%s`: writable layer not recovered after restart (%s): "
			 "snapshot is unavailable",
			 spec->id, strerror(-s->upper_fd));
		s->upper_fd = -1;
	}
	*out = s;
	return 0;
}

static int process_exit_fd(struct tier_sandbox *s)
{
	return s->pidfd;
}

static int process_stats(struct tier_sandbox *s, struct tier_stats *out, struct isola_err **err)
{
	struct statfs sf;

	memset(out, 0, sizeof(*out));
	if (s->cg.n && s->cgo)
		s->cgo->stats(&s->cg, out, err);
	/* The writable tmpfs, measured through its root fd (isolad's mount fd, or the agent's
	 * after a reattach): no path inside the sandbox is resolved. */
	if (s->upper_fd >= 0 && fstatfs(s->upper_fd, &sf) == 0)
		out->disk_bytes = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
	return 0;
}

static int process_destroy(struct tier_sandbox *s, struct isola_err **err)
{
	int r;

	if (!s)
		return 0;
	r = teardown(s, err);
	if (r < 0)
		return r; /* keep s: destroy may be called again */
	free(s);
	return 0;
}

/*
 * Destroy only (core records `destroying` first): the overlay's unmount when the sandbox's
 * last process dies writes everything the sandbox wrote back to its layer (overlayfs syncs
 * its upper filesystem), a copy through the loop device into an image freed right after.
 * A layer with enough of it unwritten is shut down first so that sync writes nothing
 * (proc_disk_discard). Never for a hibernate: isolad killed between a shutdown and the
 * kill would leave a live sandbox on a dead layer, which a restart re-attached as running
 * while it dropped the hibernation image that held its files (the fault harness, hibernate
 * killed after 62 ms); a destroy's row says `destroying`, so a restart finishes it.
 */
static void process_discard(struct tier_sandbox *s)
{
	if (s)
		proc_disk_discard(s->upper_fd);
}

static int process_cleanup(const struct sandbox_spec *spec, const char *saved,
			   struct isola_err **err)
{
	struct tier_sandbox *s = sandbox_new(spec);
	bool idm;
	int r;

	if (!s)
		return isola_err_sys(err, ENOMEM, "internal", "cleanup `%s`", spec->id);
	if (!id_is_valid(spec->id)) {
		free(s);
		return isola_err_set(err, EINVAL, "invalid", "sandbox id `%.40s`", spec->id);
	}
	if (saved) {
		int pfd = saved_pidfd(saved, &s->pid, &s->start_time, &idm);

		if (pfd >= 0)
			s->pidfd = pfd;
	}
	/* A PID 1 cloned by an isolad killed before it moved into the cgroups: found by the
	 * record it was born holding, never by a name. */
	if (spawnguard_kill_orphans(spec->dir, KILL_TIMEOUT_MS) > 0)
		log_warn("sandbox `%s`: killed a process cloned before isolad's restart", spec->id);
	s->cgo = proc_cgroup_detect(NULL);
	cg_from_saved(spec, s->cgo, &s->cg);
	/* Without a pid, kill by cgroup: whatever is in isola/<id> belongs to it. */
	if (s->cg.n && s->cgo && !proc_cgroup_is_empty(&s->cg))
		s->cgo->kill_all(&s->cg);
	r = teardown(s, err);
	free(s);
	return r;
}

static void process_release(struct tier_sandbox *s)
{
	if (!s)
		return;
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->upper_fd >= 0)
		close(s->upper_fd);
	free(s);
}

/* ---- persistence (docs/process-tier.md "Persistence") ---- */

static int freeze(struct tier_sandbox *s, bool on, struct isola_err **err)
{
	if (!s->cg.n || !s->cgo || !s->cgo->freeze)
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "sandbox `%s`: no cgroup freezer to pause it with", s->id);
	return s->cgo->freeze(&s->cg, on, FREEZE_TIMEOUT_MS, err);
}

static int process_pause(struct tier_sandbox *s, struct isola_err **err)
{
	int r = freeze(s, true, err);

	if (r < 0)
		return isola_err_wrap(err, "pause sandbox `%s`", s->id);
	s->paused = true;
	return 0;
}

static int process_resume(struct tier_sandbox *s, struct isola_err **err)
{
	int r = freeze(s, false, err);

	if (r < 0)
		return isola_err_wrap(err, "resume sandbox `%s`", s->id);
	s->paused = false;
	return 0;
}

/* Creates dir/name (new, 0600, opened O_RDWR). fd or -errno with *err. */
static int open_new(int dfd, const char *dir, const char *name, struct isola_err **err)
{
	int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return isola_err_sys(err, errno, errno == ENOSPC ? "no_space" : "internal",
				     "create `%s/%s`", dir, name);
	return fd;
}

static int process_snapshot(struct tier_sandbox *s, const char *dir, enum tier_persistence *level,
			    uint64_t *paused_us, struct isola_err **err)
{
	static const char tmpname[] = ".layer.tar.tmp";
	bool was_paused = s->paused;
	cleanup_fd int dfd = -1;
	cleanup_fd int tmp = -1;
	cleanup_fd int out = -1;
	cleanup_fd int upper = -1;
	struct timespec t0, t1;
	char path[1024];
	int r, t;

	if (paused_us)
		*paused_us = 0;
	if (s->upper_fd < 0)
		return isola_err_set(
			err, ENOTSUP, "unavailable",
			"snapshot sandbox `%s`: its writable layer was not recovered after "
			"an isolad restart (see isolad's log)",
			s->id);
	snprintf(path, sizeof(path), "%s/%s", dir, PROC_LAYER_ARCHIVE);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return isola_err_sys(err, errno, "internal", "open `%s`", dir);
	/* The plain archive goes to an unlinked temp file: nothing of it outlives a failure. */
	tmp = open_new(dfd, dir, tmpname, err);
	if (tmp < 0)
		return tmp;
	unlinkat(dfd, tmpname, 0);
	/* The tmpfs root holds lower/upper/work/root; only isolad and setup ever saw it. */
	upper = openat(s->upper_fd, PROC_LAYER_UPPER,
		       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (upper < 0)
		return isola_err_sys(err, errno, "internal",
				     "snapshot sandbox `%s`: open its upper dir", s->id);
	/* Frozen while copying: one consistent view, and nothing in the sandbox races the
	 * walk. Only the plain copy happens frozen; compression runs after the thaw. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!was_paused) {
		r = freeze(s, true, err);
		if (r < 0)
			return isola_err_wrap(err, "snapshot sandbox `%s`", s->id);
	}
	r = proc_layer_write(upper, s->uid_base, tmp, path, NULL, err);
	if (!was_paused) {
		t = freeze(s, false, r < 0 ? NULL : err);
		if (r == 0)
			r = t;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (paused_us && !was_paused)
		*paused_us = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000 +
					(t1.tv_nsec - t0.tv_nsec) / 1000);
	if (r == 0) {
		out = open_new(dfd, dir, PROC_LAYER_ARCHIVE, err);
		r = out < 0 ? out : proc_layer_compress(tmp, out, path, err);
	}
	if (r < 0)
		return isola_err_wrap(err, "snapshot sandbox `%s`", s->id);
	if (fsync(out) < 0 || fsync(dfd) < 0)
		return isola_err_sys(err, errno,
				     errno == ENOSPC || errno == EDQUOT ? "no_space" : "internal",
				     "fsync `%s`", path);
	*level = TIER_PERSIST_FILES;
	return 0;
}

static int process_restore(const struct sandbox_spec *spec, const char *snapdir,
			   struct tier_sandbox **out, struct isola_err **err)
{
	char path[1024];
	cleanup_fd int fd = -1;

	if (snprintf(path, sizeof(path), "%s/%s", snapdir, PROC_LAYER_ARCHIVE) >= (int)sizeof(path))
		return isola_err_set(err, ENAMETOOLONG, "invalid",
				     "snapshot dir `%.200s`: too long", snapdir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, errno == ENOENT ? "invalid" : "internal",
				     "restore sandbox `%s`: open `%s`", spec->id, path);
	return create_sandbox(spec, fd, path, out, err);
}

static int process_netns_fd(struct tier_sandbox *s, struct isola_err **err)
{
	return proc_open_netns(s->pid, s->pidfd, err);
}

const struct tier_ops tier_process_ops = {
	.name = "process",
	.netns_join = true,
	.create = process_create,
	.agent_connect = process_agent_connect,
	.save = process_save,
	.reattach = process_reattach,
	.exit_fd = process_exit_fd,
	.stats = process_stats,
	.destroy = process_destroy,
	.discard = process_discard,
	.cleanup = process_cleanup,
	.release = process_release,
	.pause = process_pause,
	.resume = process_resume,
	.snapshot = process_snapshot,
	.restore = process_restore,
	.snapshot_level = TIER_PERSIST_FILES,
	.restore_needs_snapshot = false,
	.netns_fd = process_netns_fd,
};
