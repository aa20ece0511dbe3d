/* SPDX-License-Identifier: Apache-2.0 */
/* probe: a static binary run inside a sandbox that attempts escapes and reports; the host judges. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/*
 * Usage: isola-probe [all|status|cgroup|nofile]
 * Output: one JSON object per line.
 *   {"probe":"status","line":"NoNewPrivs:\t1"}   selected /proc/self/status lines
 *   {"probe":"session","pid":N,"sid":N,"pgid":N,"tty_nr":N,"dev_tty_errno":N}
 *   {"probe":"syscall","name":"mount","ret":-1,"errno":1}
 *   {"probe":"fd","fd":3,"target":"..."}        every open fd beyond 0-2
 *   {"probe":"abi","name":"x32","ret":-1,"errno":1,"signal":0}
 *
 * Every denied-syscall attempt is made so that a call the filter let through would fail
 * differently from the filter's EPERM (ENOSYS for clone3): invalid pointers (EFAULT), bad
 * fds (EBADF), or flag combinations the kernel rejects before any permission check
 * (EINVAL). A few calls check a capability before anything else (kexec, modules, acct,
 * swap, reboot, iopl): for those EPERM is ambiguous here, and
 * tests/unit/process/test_seccomp_bpf.c proves the filter's own verdict.
 */

#define BAD ((uintptr_t)1)

static void report(const char *name, long ret, int err)
{
	printf("{\"probe\":\"syscall\",\"name\":\"%s\",\"ret\":%ld,\"errno\":%d}\n", name, ret,
	       ret < 0 ? err : 0);
}

#define TRY(name, ...)                                                                             \
	do {                                                                                       \
		errno = 0;                                                                         \
		long _r = syscall(__VA_ARGS__);                                                    \
		report(name, _r, errno);                                                           \
	} while (0)

static void status_lines(void)
{
	static const char *keys[] = {
		"Uid:",	   "Gid:",    "Groups:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:",
		"CapInh:", "CapPrm:", "CapEff:", "CapBnd:",	"CapAmb:"};
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			if (strncmp(line, keys[i], strlen(keys[i])))
				continue;
			for (char *p = line; *p; p++)
				if (*p == '\t')
					*p = ' ';
			printf("{\"probe\":\"status\",\"line\":\"%s\"}\n", line);
		}
	}
	fclose(f);
}

/* The session and controlling terminal: nothing may reach isolad's terminal. */
static void session(void)
{
	char buf[1024];
	long tty_nr = -1;
	int fd, e = 0;
	FILE *f = fopen("/proc/self/stat", "r");

	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			char *p = strrchr(buf, ')');

			/* fields after comm: state ppid pgrp session tty_nr */
			if (p && sscanf(p + 2, "%*c %*d %*d %*d %ld", &tty_nr) != 1)
				tty_nr = -1;
		}
		fclose(f);
	}
	errno = 0;
	fd = open("/dev/tty", O_RDWR | O_NOCTTY);
	if (fd < 0)
		e = errno;
	else
		close(fd);
	printf("{\"probe\":\"session\",\"pid\":%d,\"sid\":%d,\"pgid\":%d,\"tty_nr\":%ld,"
	       "\"dev_tty_errno\":%d}\n",
	       (int)getpid(), (int)getsid(0), (int)getpgrp(), tty_nr, fd < 0 ? e : 0);
}

static void fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[300], target[512];
		int fd = atoi(de->d_name);
		ssize_t n;

		if (de->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		printf("{\"probe\":\"fd\",\"fd\":%d,\"target\":\"%s\"}\n", fd, target);
	}
	closedir(d);
}

static void sockets(void)
{
	/* SOCK_MAX+1 as the type: the kernel answers EINVAL before it looks at the family
	 * (or at CAP_NET_RAW), so only the filter can answer EPERM. */
	static const struct {
		const char *name;
		int domain, proto;
	} s[] = {
		{"socket_af_packet", AF_PACKET, 0},
		{"socket_af_vsock", AF_VSOCK, 0},
		{"socket_af_netlink_audit", AF_NETLINK, 9},
		{"socket_af_netlink_netfilter", AF_NETLINK, 12},
		{"socket_af_alg", AF_ALG, 0},
		{"socket_af_key", AF_KEY, 0},
	};

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		TRY(s[i].name, SYS_socket, s[i].domain, 11, s[i].proto);
}

static void syscalls(void)
{
	static const struct {
		const char *name;
		unsigned long flag;
	} ns[] = {
		{"user", CLONE_NEWUSER},     {"ns", CLONE_NEWNS},     {"net", CLONE_NEWNET},
		{"pid", CLONE_NEWPID},	     {"ipc", CLONE_NEWIPC},   {"uts", CLONE_NEWUTS},
		{"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
	};
	char name[64];

	/* Namespaces. unshare(flag | CLONE_PARENT): CLONE_PARENT is not an unshare flag, so
	 * a call that ran gets EINVAL. clone(flag | CLONE_THREAD) without CLONE_SIGHAND:
	 * EINVAL, and no child is made. */
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		snprintf(name, sizeof(name), "unshare_%s", ns[i].name);
		TRY(name, SYS_unshare, ns[i].flag | CLONE_PARENT);
		if (ns[i].flag == CLONE_NEWTIME)
			continue; /* 0x80 is inside clone()'s exit-signal byte */
		snprintf(name, sizeof(name), "clone_new%s", ns[i].name);
		TRY(name, SYS_clone, ns[i].flag | CLONE_THREAD, 0, BAD, BAD, 0);
	}
	TRY("setns", SYS_setns, -1, 0);
	TRY("clone3", SYS_clone3, BAD, 0);

	/* Every mount API. */
	TRY("mount", SYS_mount, BAD, BAD, BAD, 0, BAD);
	TRY("umount2", SYS_umount2, BAD, 0);
	TRY("pivot_root", SYS_pivot_root, BAD, BAD);
	TRY("chroot", SYS_chroot, BAD);
	TRY("fsopen", SYS_fsopen, BAD, 0);
	TRY("fsconfig", SYS_fsconfig, -1, 0, BAD, BAD, 0);
	TRY("fsmount", SYS_fsmount, -1, 0, 0);
	TRY("fspick", SYS_fspick, -1, BAD, 0);
	TRY("open_tree", SYS_open_tree, -1, BAD, 0);
	TRY("move_mount", SYS_move_mount, -1, BAD, -1, BAD, 0);
	TRY("mount_setattr", SYS_mount_setattr, -1, BAD, 0, BAD, 32);

	/* io_uring, userfaultfd (UFFD_USER_MODE_ONLY | an unknown flag: EINVAL if it ran). */
	TRY("io_uring_setup", SYS_io_uring_setup, 1, BAD);
	TRY("io_uring_enter", SYS_io_uring_enter, -1, 0, 0, 0, BAD, 0);
	TRY("io_uring_register", SYS_io_uring_register, -1, 0, BAD, 0);
	TRY("userfaultfd", SYS_userfaultfd, 1 | 0x100);

	/* bpf, perf, keys. */
	TRY("bpf", SYS_bpf, 0, BAD, 8);
	TRY("perf_event_open", SYS_perf_event_open, BAD, 0, -1, -1, 0);
	TRY("keyctl", SYS_keyctl, 0, 0, 0, 0, 0);
	TRY("add_key", SYS_add_key, BAD, BAD, BAD, 0, 0);
	TRY("request_key", SYS_request_key, BAD, BAD, BAD, 0);

	/* Other processes' memory (own pid or none: ESRCH/EFAULT if it ran). */
	TRY("ptrace", SYS_ptrace, 12 /* PTRACE_GETREGS */, 0x7ffffff0, 0, BAD);
	TRY("process_vm_readv", SYS_process_vm_readv, getpid(), BAD, 1, BAD, 1, 0);
	TRY("process_vm_writev", SYS_process_vm_writev, getpid(), BAD, 1, BAD, 1, 0);
	TRY("pidfd_getfd", SYS_pidfd_getfd, -1, 0, 0);
	TRY("kcmp", SYS_kcmp, getpid(), getpid(), 99, 0, 0);

	/* kexec, modules, handles, host-wide state. */
	TRY("kexec_load", SYS_kexec_load, 0, 0, BAD, 0);
	TRY("kexec_file_load", SYS_kexec_file_load, -1, -1, 0, BAD, 0);
	TRY("init_module", SYS_init_module, BAD, 0, BAD);
	TRY("finit_module", SYS_finit_module, -1, BAD, 0);
	TRY("delete_module", SYS_delete_module, BAD, 0);
	TRY("open_by_handle_at", SYS_open_by_handle_at, -1, BAD, 0);
	TRY("name_to_handle_at", SYS_name_to_handle_at, -1, BAD, BAD, BAD, 0);
	TRY("acct", SYS_acct, BAD);
	TRY("swapon", SYS_swapon, BAD, 0);
	TRY("swapoff", SYS_swapoff, BAD);
	TRY("reboot", SYS_reboot, 0, 0, 0, BAD);
	TRY("settimeofday", SYS_settimeofday, BAD, BAD);
	TRY("clock_settime", SYS_clock_settime, 0, BAD);
	TRY("clock_adjtime", SYS_clock_adjtime, 0, BAD);
	TRY("adjtimex", SYS_adjtimex, BAD);
	TRY("iopl", SYS_iopl, 3);
	TRY("ioperm", SYS_ioperm, 0, 1, 1);
	TRY("sethostname", SYS_sethostname, BAD, 1);

	/* Terminal injection: TIOCSTI and TIOCLINUX, also with high bits set, because the
	 * kernel truncates cmd to 32 bits (CVE-2019-10063). fd 0 is /dev/null: a call that
	 * ran gets ENOTTY. */
	TRY("ioctl_tiocsti", SYS_ioctl, 0, TIOCSTI, BAD);
	TRY("ioctl_tiocsti_high", SYS_ioctl, 0, 0x100000000ul | TIOCSTI, BAD);
	TRY("ioctl_tioclinux", SYS_ioctl, 0, TIOCLINUX, BAD);
	TRY("ioctl_tioclinux_high", SYS_ioctl, 0, 0xffffffff00000000ul | TIOCLINUX, BAD);
}

/* Foreign ABIs, each in a child so that a kill would be seen (and not end the probe). */
static void abi(const char *name, int which)
{
	int pfd[2], st = 0;
	long res[2] = {0, 0};
	pid_t pid;

	if (pipe(pfd) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		long r;

		signal(SIGSEGV, SIG_DFL);
		errno = 0;
		if (which == 0) {
			r = syscall(0x40000000 | 39); /* x32 getpid */
			res[0] = r;
			res[1] = r < 0 ? errno : 0;
		} else {
			__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); /* getpid */
			res[0] = r < 0 ? -1 : r;
			res[1] = r < 0 ? -r : 0;
		}
		if (write(pfd[1], res, sizeof(res)) != sizeof(res))
			_exit(2);
		_exit(0);
	}
	close(pfd[1]);
	if (pid < 0 || read(pfd[0], res, sizeof(res)) != sizeof(res))
		res[0] = -9999;
	close(pfd[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	printf("{\"probe\":\"abi\",\"name\":\"%s\",\"ret\":%ld,\"errno\":%ld,\"signal\":%d}\n",
	       name, res[0], res[1], WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Reports whether path can be opened for writing, and the errno if not. */
static void try_write(const char *name, const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	long r = fd;
	int e = errno;

	if (fd >= 0) {
		r = write(fd, data, strlen(data));
		e = errno;
		close(fd);
	}
	report(name, r < 0 ? -1 : r, e);
}

/*
 * CVE-2022-0492: mount a cgroup v1 hierarchy, set notify_on_release on a child and write
 * a host command into release_agent. Every step, each way it can be tried from here: a
 * mount with the old and the new API, after an unshare, and the files that would already
 * exist if any cgroupfs were visible. Plus the other classic host hooks under /proc/sys.
 */
static void cgroup_escape(void)
{
	static const char *const ctrls[] = {"rdma", "memory", "pids", "none,name=x"};
	DIR *d;
	struct dirent *de;
	char path[512], name[96];
	long r;

	mkdir("/tmp/cgrp", 0755);
	for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
		errno = 0;
		r = mount("cgroup", "/tmp/cgrp", "cgroup", 0, ctrls[i]);

		snprintf(name, sizeof(name), "mount_cgroup_%zu", i);
		report(name, r, errno);
	}
	errno = 0;
	r = mount("cgroup2", "/tmp/cgrp", "cgroup2", 0, NULL);
	report("mount_cgroup2", r, errno);
	TRY("fsopen_cgroup", SYS_fsopen, "cgroup", 0);
	TRY("fsopen_proc", SYS_fsopen, "proc", 0);
	mkdir("/tmp/procx", 0755);
	errno = 0;
	r = mount("proc", "/tmp/procx", "proc", 0, NULL);
	report("mount_proc", r, errno);
	TRY("unshare_userns_cgroupns", SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP);
	/* If a hierarchy were mounted after all: */
	mkdir("/tmp/cgrp/x", 0755);
	try_write("write_notify_on_release", "/tmp/cgrp/x/notify_on_release", "1");
	try_write("write_release_agent", "/tmp/cgrp/release_agent", "/isola-pwn");
	/* Whatever /sys/fs/cgroup shows. */
	d = opendir("/sys/fs/cgroup");
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/release_agent", de->d_name);
		try_write("write_sys_release_agent", path, "/isola-pwn");
	}
	if (d)
		closedir(d);
	try_write("write_sys_release_agent_root", "/sys/fs/cgroup/release_agent", "/isola-pwn");
	try_write("write_core_pattern", "/proc/sys/kernel/core_pattern", "|/isola-pwn");
	try_write("write_modprobe", "/proc/sys/kernel/modprobe", "/isola-pwn");
	try_write("write_uevent_helper", "/sys/kernel/uevent_helper", "/isola-pwn");
	try_write("write_sysrq_trigger", "/proc/sysrq-trigger", "h");
}

/* RLIMIT_NOFILE as seen by an exec'd process, and what happens at the limit. */
static void nofile(void)
{
	struct rlimit rl, up;
	int n = 0, e = 0, up_errno = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	up.rlim_cur = up.rlim_max = rl.rlim_max + 1;
	if (setrlimit(RLIMIT_NOFILE, &up) < 0)
		up_errno = errno;
	for (;;) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd < 0) {
			e = errno;
			break;
		}
		n++;
	}
	printf("{\"probe\":\"nofile\",\"soft\":%llu,\"hard\":%llu,\"raise_errno\":%d,"
	       "\"opened\":%d,\"errno\":%d}\n",
	       (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, up_errno, n, e);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "all";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "status")) {
		status_lines();
		session();
	} else if (!strcmp(mode, "cgroup")) {
		cgroup_escape();
	} else if (!strcmp(mode, "nofile")) {
		nofile();
	} else if (!strcmp(mode, "all")) {
		status_lines();
		session();
		fds();
		sockets();
		syscalls();
		abi("x32", 0);
		abi("i386", 1);
	} else {
		fprintf(stderr, "usage: isola-probe [all|status|cgroup|nofile]\n");
		return 2;
	}
	return 0;
}
