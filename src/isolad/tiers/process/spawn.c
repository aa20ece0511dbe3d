/* SPDX-License-Identifier: Apache-2.0 */
/* spawn: the sealed agent memfd, the clone of a sandbox's PID 1, and its uid/gid maps. */
#include "process-internal.h"
#include "process.h"

#include <errno.h>
#include <sys/wait.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../../common/log.h"
#include "../../../common/spawnguard.h"
#include "../../../common/util.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFS_IOCTL_MAGIC	 0xFF
#define PIDFD_GET_USER_NAMESPACE _IO(PIDFS_IOCTL_MAGIC, 9)
#endif

static pthread_mutex_t memfd_lock = PTHREAD_MUTEX_INITIALIZER;
static char agent_path[4096];  /* set by tier_process_set_agent_path, under memfd_lock */
static int agent_memfd = -1;   /* sealed copy of the agent, made once, under memfd_lock */
static int seccomp_memfd = -1; /* sealed BPF program, made once, under memfd_lock */

void tier_process_set_agent_path(const char *path)
{
	pthread_mutex_lock(&memfd_lock);
	if (agent_memfd < 0)
		snprintf(agent_path, sizeof(agent_path), "%s", path);
	pthread_mutex_unlock(&memfd_lock);
}

/* Copies the agent binary into a sealed memfd. CVE-2019-5736: a sandbox that could
 * reach the executable isolad runs (e.g. via /proc/<pid>/exe) could overwrite it
 * on the host; a sealed anonymous copy can be neither written nor replaced. */
static int make_agent_memfd(const char *path, struct isola_err **err)
{
	cleanup_fd int src = -1;
	cleanup_fd int fd = -1;
	struct stat st;
	off_t off = 0;

	src = open(path, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		return isola_err_sys(err, errno, "unavailable", "open agent `%s`", path);
	if (fstat(src, &st) < 0)
		return isola_err_sys(err, errno, "internal", "stat agent `%s`", path);
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (256 << 20))
		return isola_err_set(err, EINVAL, "invalid", "agent `%s` is not a plausible binary",
				     path);
	fd = memfd_create("isola-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* kernels before 6.3 do not know MFD_EXEC */
		fd = memfd_create("isola-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "memfd_create for agent");
	while (off < st.st_size) {
		ssize_t n = sendfile(fd, src, &off, (size_t)(st.st_size - off));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return isola_err_sys(err, n < 0 ? errno : EIO, "internal",
					     "copy agent `%s`", path);
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
		return isola_err_sys(err, errno, "internal", "seal agent memfd");
	return steal_fd(&fd);
}

int proc_agent_memfd(struct isola_err **err)
{
	int r = 0;

	pthread_mutex_lock(&memfd_lock);
	if (agent_memfd < 0) {
		const char *p = agent_path[0] ? agent_path : getenv("ISOLA_AGENT");

		if (!p || !*p)
			r = isola_err_set(err, ENOENT, "unavailable",
					  "no agent binary: call tier_process_set_agent_path() or "
					  "set ISOLA_AGENT");
		else
			r = make_agent_memfd(p, err);
		if (r >= 0)
			agent_memfd = r;
	}
	if (agent_memfd >= 0) {
		r = fcntl(agent_memfd, F_DUPFD_CLOEXEC, 3);
		if (r < 0)
			r = isola_err_sys(err, errno, "internal", "dup agent memfd");
	}
	pthread_mutex_unlock(&memfd_lock);
	return r;
}

int proc_seccomp_memfd(struct isola_err **err)
{
	int r = 0;

	pthread_mutex_lock(&memfd_lock);
	if (seccomp_memfd < 0) {
		r = proc_seccomp_compile_memfd(err);
		if (r >= 0)
			seccomp_memfd = r;
	}
	if (seccomp_memfd >= 0) {
		r = fcntl(seccomp_memfd, F_DUPFD_CLOEXEC, 3);
		if (r < 0)
			r = isola_err_sys(err, errno, "internal", "dup seccomp memfd");
	}
	pthread_mutex_unlock(&memfd_lock);
	return r;
}

/*
 * The child of clone3. isolad is multithreaded, so only async-signal-safe calls
 * (raw syscalls) happen here: no malloc, no locks, no stdio.
 */
static __attribute__((noreturn)) void child_exec(int setup_fd, int agent_fd, int devnull_fd,
						 int record_fd)
{
	const int keep[] = {setup_fd, agent_fd, devnull_fd, record_fd};
	static char *const argv[] = {"isola-agent", "--setup", NULL};
	static char *const envp[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	sigset_t all;
	char go;

	/* First act: none of isolad's fds (state-dir lock, API sockets, store, other sandboxes'
	 * setup sockets) stays in a process that may outlive it, and our own copy of the other
	 * end of setup_fd is gone, so isolad's death is EOF on the read below. */
	if (spawnguard_child_enter(keep, ARRAY_SIZE(keep)) < 0)
		_exit(124);
	/* Wait until isolad wrote our uid/gid maps, then become the namespace's root
	 * (host uid_base) before exec: execve as an unmapped uid would drop every
	 * capability in the new user namespace, and setup needs them to mount. Raw
	 * syscalls: glibc's setresuid would try to signal isolad's other threads. */
	if (read(setup_fd, &go, 1) != 1 || go != 'm')
		_exit(125);
	/* Handed over: isolad put us in the sandbox's cgroups, where a restart's kill reaches
	 * us; the record goes, and so does PDEATHSIG (the cloning thread is an API connection
	 * thread that ends with its connection). */
	spawnguard_child_handover();
	close(record_fd);
	/* A session of our own, without a controlling terminal: isolad's terminal (when it
	 * runs in one) must be unreachable through /dev/tty, and job-control signals sent to
	 * isolad's session must not reach the sandbox (nor the reverse). */
	if (syscall(SYS_setsid) < 0)
		_exit(125);
	if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0 ||
	    syscall(SYS_setgroups, 0, NULL) < 0)
		_exit(125);
	/* Move our three fds above 10 first so the dup2s below cannot clobber them. */
	setup_fd = fcntl(setup_fd, F_DUPFD, 10);
	agent_fd = fcntl(agent_fd, F_DUPFD_CLOEXEC, 10);
	devnull_fd = fcntl(devnull_fd, F_DUPFD, 10);
	if (setup_fd < 0 || agent_fd < 0 || devnull_fd < 0)
		_exit(126);
	/* stdio is /dev/null: isolad's own stdio (a journal socket, a terminal) must not
	 * leak into the sandbox (CVE-2024-21626 class). Setup reports on fd 3. */
	if (dup2(devnull_fd, 0) < 0 || dup2(devnull_fd, 1) < 0 || dup2(devnull_fd, 2) < 0 ||
	    dup2(setup_fd, 3) < 0 || dup2(agent_fd, 4) < 0)
		_exit(126);
	if (fcntl(4, F_SETFD, FD_CLOEXEC) < 0)
		_exit(126);
	/* Every other fd isolad holds (other sandboxes' sockets, the store) is closed. */
	if (syscall(SYS_close_range, 5U, ~0U, 0U) < 0)
		_exit(126);
	/* Clean signal state: isolad ignores SIGPIPE and blocks signals in threads. */
	for (int s = 1; s < 32; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

/* Enters (enter: netns_fd) or leaves (back to *own) a network namespace for the calling
 * thread only; network namespaces are per thread, so isolad's other threads never move. */
static int thread_netns_enter(int netns_fd, int *own)
{
	*own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*own < 0)
		return -errno;
	if (setns(netns_fd, CLONE_NEWNET) < 0) {
		int e = errno;

		close(*own);
		*own = -1;
		return -e;
	}
	return 0;
}

static void thread_netns_leave(int *own)
{
	/* A thread left in a sandbox's network would open isolad's later sockets there (an
	 * API thread's upstream connections, say): no way to carry on. */
	if (setns(*own, CLONE_NEWNET) < 0) {
		log_error("return to isolad's network namespace: %s; aborting", strerror(errno));
		abort();
	}
	close(*own);
	*own = -1;
}

/* The namespaces of a sandbox's PID 1, all owned by the new user namespace. The cgroup
 * namespace is unshared by setup after isolad moved it into its cgroup, so the sandbox's
 * cgroup root is its own cgroup (CLONE_INTO_CGROUP needs v2). A given network namespace (a
 * joined one or a network slot) stays owned by its creator's user namespace, so nothing
 * inside holds CAP_NET_ADMIN over it. */
static unsigned long spawn_flags(int netns_fd)
{
	return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
	       CLONE_PIDFD | (netns_fd >= 0 ? 0 : CLONE_NEWNET);
}

#ifdef __SANITIZE_ADDRESS__
/* AddressSanitizer does not know a stack made here (it warns, and may report falsely, on
 * the child's noreturn calls): the sanitized build copies isolad's memory as fork does. */
#define SPAWN_SHARES_MEMORY 0
#else
#define SPAWN_SHARES_MEMORY 1
#endif

/* The child's own stack when it shares isolad's memory until its exec: the arguments sit at
 * its low end, written before the clone (the child reads them, never the parent's stack). */
#define SPAWN_STACK_SIZE (64u << 10)

struct spawn_child {
	int setup_fd, agent_fd, devnull_fd, record_fd;
};

static int spawn_child_main(void *arg)
{
	const struct spawn_child *c = arg;

	child_exec(c->setup_fd, c->agent_fd, c->devnull_fd, c->record_fd);
}

/* clone(CLONE_VM) on a stack of its own: no copy of isolad's page tables (a fork of a large
 * multithreaded daemon costs milliseconds in copies and copy-on-write faults). The child
 * makes only system calls until its exec (child_exec), so sharing the memory is safe; the
 * stack must outlive it until then (proc_spawn_stack_free). */
static long spawn_shared(const struct spawn_child *c, unsigned long flags, int *pfd, void **stack)
{
	void *st = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	long pid;

	if (st == MAP_FAILED)
		return -errno;
	memcpy(st, c, sizeof(*c));
	pid = clone(spawn_child_main, (char *)st + SPAWN_STACK_SIZE,
		    (int)(flags | CLONE_VM | SIGCHLD), st, pfd);
	if (pid < 0) {
		int e = errno;

		munmap(st, SPAWN_STACK_SIZE);
		return -e;
	}
	*stack = st;
	return pid;
}

void proc_spawn_stack_free(void **stack)
{
	if (*stack)
		munmap(*stack, SPAWN_STACK_SIZE);
	*stack = NULL;
}

pid_t proc_spawn(int setup_fd, int agent_fd, int devnull_fd, int record_fd, int netns_fd,
		 int *pidfd, void **stack)
{
	const struct spawn_child c = {setup_fd, agent_fd, devnull_fd, record_fd};
	struct clone_args args;
	int pfd = -1, own = -1, r;
	long pid;

	*stack = NULL;
	/* The way back is opened per clone: an fd of the host's namespace kept open would be
	 * one more isolad fd to keep from every child (the spawn-guard leak check). */
	if (netns_fd >= 0) {
		r = thread_netns_enter(netns_fd, &own);
		if (r < 0)
			return r;
	}
	if (SPAWN_SHARES_MEMORY) {
		pid = spawn_shared(&c, spawn_flags(netns_fd), &pfd, stack);
		r = pid < 0 ? (int)pid : 0;
	} else {
		memset(&args, 0, sizeof(args));
		args.flags = spawn_flags(netns_fd);
		args.pidfd = (uint64_t)(uintptr_t)&pfd;
		args.exit_signal = SIGCHLD;
		pid = syscall(SYS_clone3, &args, sizeof(args));
		if (pid == 0)
			spawn_child_main((void *)&c);
		r = pid < 0 ? -errno : 0;
	}
	if (own >= 0)
		thread_netns_leave(&own);
	if (r < 0)
		return r;
	*pidfd = pfd;
	return (pid_t)pid;
}

static int write_map(pid_t pid, const char *which, uint32_t base)
{
	char path[64], map[64];
	cleanup_fd int fd = -1;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	n = snprintf(map, sizeof(map), "0 %u 65536\n", base);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, map, (size_t)n) != n)
		return -errno;
	return 0;
}

int proc_write_idmaps(pid_t pid, uint32_t base)
{
	/* isolad holds CAP_SETGID in the parent namespace, so setgroups stays allowed
	 * inside (the agent calls setgroups when it drops to the sandbox user). */
	int r = write_map(pid, "uid_map", base);

	return r < 0 ? r : write_map(pid, "gid_map", base);
}

int proc_read_start_time(pid_t pid, uint64_t *out)
{
	char path[64];
	cleanup_free char *body = NULL;
	char *p;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = util_read_file(path, 4096, &body, NULL);
	if (r < 0)
		return r;
	/* comm may contain spaces and ')': fields start after the last ')'. */
	p = strrchr(body, ')');
	if (!p)
		return -EINVAL;
	p++;
	/* p is at the space before field 3; stop at the space before field 22 (starttime). */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	*out = strtoull(p + 1, NULL, 10);
	return 0;
}

int proc_pidfd_verified(pid_t pid, uint64_t start_time)
{
	struct pollfd pf;
	uint64_t now;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd < 0)
		return -ESRCH;
	/* After pidfd_open: the pidfd pins the process, so a match is not a recycled pid. */
	if (proc_read_start_time(pid, &now) < 0 || now != start_time) {
		close(pfd);
		return -ESRCH;
	}
	/* A pidfd polls readable once its process has exited: a zombie nobody reaped (its
	 * parent isolad died) is as gone as a reaped one. */
	pf = (struct pollfd){.fd = pfd, .events = POLLIN};
	if (poll(&pf, 1, 0) > 0) {
		close(pfd);
		return -ESRCH;
	}
	return pfd;
}

bool proc_pidfd_kill(int *pidfd, int timeout_ms)
{
	struct pollfd p = {.fd = *pidfd, .events = POLLIN};
	siginfo_t si;
	int n;

	if (*pidfd < 0)
		return true;
	syscall(SYS_pidfd_send_signal, *pidfd, SIGKILL, NULL, 0);
	/* The pidfd polls readable once the process has exited, whoever its parent is. */
	while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	while (waitid(P_PIDFD, (id_t)*pidfd, &si, WEXITED | WNOHANG) < 0 && errno == EINTR)
		;
	close(*pidfd);
	*pidfd = -1;
	return n > 0;
}

int proc_open_ns(pid_t pid, int pidfd, const char *name, unsigned long req)
{
	char path[64];
	int fd;

	if (pid <= 0 || pidfd < 0)
		return -ESRCH;
	fd = ioctl(pidfd, req, 0);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* The pid could have been recycled between open and now; the pidfd cannot. */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

int proc_open_userns(pid_t pid, int pidfd)
{
	return proc_open_ns(pid, pidfd, "user", PIDFD_GET_USER_NAMESPACE);
}
