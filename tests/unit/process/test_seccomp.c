/* SPDX-License-Identifier: Apache-2.0 */
/* test_seccomp: the process-tier policy compiles and denies what SECURITY.md says it must. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolad/tiers/process/process-internal.h"
#include "../tap.h"

static struct sock_fprog prog;

/* Loads the BPF from the memfd exactly as the setup stage does. */
static int load_prog(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % 8)
		return -1;
	prog.filter = malloc((size_t)st.st_size);
	if (pread(fd, prog.filter, (size_t)st.st_size, 0) != st.st_size)
		return -1;
	prog.len = (unsigned short)(st.st_size / 8);
	return 0;
}

enum probe {
	P_MOUNT,
	P_UNSHARE,
	P_IO_URING,
	P_CLONE3,
	P_CLONE_NEWUSER,
	P_TIOCSTI_HIGH,
	P_TIOCSTI,
	P_AF_PACKET,
	P_AF_VSOCK,
	P_NETLINK_AUDIT,
	P_BPF,
	P_KEYCTL,
	P_PTRACE,
	P_OPEN_TREE,
	P_USERFAULTFD,
	P_PERF,
	P_FORK,
	P_SOCKET_INET,
	P_NETLINK_ROUTE,
	P_IOCTL_FIONREAD,
	P_GETPID,
	P_X32,
	P_I386,
	P_SETNS,
	P_PERSONALITY_BAD,
	P_PERSONALITY_OK,
};

/* Runs one call; returns -errno or the (non-negative) result. */
static long probe(enum probe p)
{
	long r;
	struct clone_args ca;
	int fd;

	errno = 0;
	switch (p) {
	case P_MOUNT:
		r = mount("none", "/tmp", "tmpfs", 0, NULL);
		break;
	case P_UNSHARE:
		r = unshare(CLONE_NEWUSER);
		break;
	case P_IO_URING:
		r = syscall(__NR_io_uring_setup, 1, NULL);
		break;
	case P_CLONE3:
		memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		r = syscall(__NR_clone3, &ca, sizeof(ca));
		if (r == 0)
			_exit(0);
		break;
	case P_CLONE_NEWUSER:
		r = syscall(__NR_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		break;
	case P_TIOCSTI_HIGH:
		r = syscall(__NR_ioctl, 0, (unsigned long)TIOCSTI | (1ul << 32), "x");
		break;
	case P_TIOCSTI:
		r = ioctl(0, TIOCSTI, "x");
		break;
	case P_AF_PACKET:
		r = socket(AF_PACKET, SOCK_RAW, 0);
		break;
	case P_AF_VSOCK:
		r = socket(AF_VSOCK, SOCK_STREAM, 0);
		break;
	case P_NETLINK_AUDIT:
		r = socket(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */);
		break;
	case P_BPF:
		r = syscall(__NR_bpf, 0, NULL, 0);
		break;
	case P_KEYCTL:
		r = syscall(__NR_keyctl, 0, 0, 0, 0, 0);
		break;
	case P_PTRACE:
		r = syscall(__NR_ptrace, 0, 0, 0, 0);
		break;
	case P_OPEN_TREE:
		r = syscall(__NR_open_tree, AT_FDCWD, "/", 1);
		break;
	case P_USERFAULTFD:
		r = syscall(__NR_userfaultfd, 0);
		break;
	case P_PERF:
		r = syscall(__NR_perf_event_open, NULL, 0, -1, -1, 0);
		break;
	case P_FORK:
		r = fork();
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid((pid_t)r, NULL, 0);
		break;
	case P_SOCKET_INET:
	case P_NETLINK_ROUTE:
		fd = p == P_SOCKET_INET ? socket(AF_INET, SOCK_STREAM, 0)
					: socket(AF_NETLINK, SOCK_RAW, 0);
		r = fd;
		if (fd >= 0)
			close(fd);
		break;
	case P_IOCTL_FIONREAD: {
		int fds[2], n;

		if (pipe(fds) < 0)
			return -errno;
		r = ioctl(fds[0], FIONREAD, &n);
		close(fds[0]);
		close(fds[1]);
		break;
	}
	case P_GETPID:
		r = syscall(__NR_getpid);
		break;
	case P_X32:
		r = syscall(0x40000000 | 39 /* x32 getpid */);
		break;
	case P_I386: {
		/* int 0x80 with eax = 20 (i386 getpid). */
		long ret;

		__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
		r = ret;
		if (r < 0) {
			errno = (int)-r;
			r = -1;
		}
		break;
	}
	case P_SETNS:
		r = syscall(__NR_setns, 0, 0);
		break;
	case P_PERSONALITY_BAD:
		r = syscall(__NR_personality, 0x0200000 /* READ_IMPLIES_EXEC */);
		break;
	case P_PERSONALITY_OK:
		r = syscall(__NR_personality, 0xffffffffUL);
		break;
	default:
		r = -1;
		errno = EINVAL;
	}
	return r < 0 ? -errno : r;
}

struct outcome {
	bool signaled; /* killed by a signal */
	int sig;       /* which */
	long ret;      /* probe result if not signaled */
};

/* Runs probe p in a forked child under the filter. */
static struct outcome run(enum probe p)
{
	int pfd[2];
	struct outcome o = {0};
	pid_t pid;
	int st;

	if (pipe(pfd) < 0)
		abort();
	pid = fork();
	if (pid == 0) {
		long r;

		close(pfd[0]);
		/* Die by the signal itself, not through a sanitizer's SEGV report. */
		signal(SIGSEGV, SIG_DFL);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			_exit(99);
		r = probe(p);
		if (write(pfd[1], &r, sizeof(r)) != sizeof(r))
			_exit(98);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &o.ret, sizeof(o.ret)) != sizeof(o.ret))
		o.ret = -9999;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st)) {
		o.signaled = true;
		o.sig = WTERMSIG(st);
	}
	return o;
}

int main(void)
{
	struct isola_err *err = NULL;
	int fd = proc_seccomp_compile_memfd(&err);
	struct outcome o;
	bool dup = false, seals;

	if (!ok(fd >= 0, "policy compiles to BPF (%s)", err ? err->message : "ok"))
		return tap_done();
	ok(load_prog(fd) == 0 && prog.len > 50, "BPF program has %u instructions", prog.len);
	seals = fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE;
	ok(seals, "BPF memfd is sealed against writes");
	for (size_t i = 0; i < proc_sc_n_rules; i++)
		for (size_t k = i + 1; k < proc_sc_n_rules; k++)
			if (!strcmp(proc_sc_rules[i].name, proc_sc_rules[k].name)) {
				dup = true;
				printf("# duplicate rule %s\n", proc_sc_rules[i].name);
			}
	ok(!dup, "no syscall is listed twice (%zu rules)", proc_sc_n_rules);

	/* Refused. */
	o = run(P_MOUNT);
	ok(o.ret == -EPERM, "mount -> EPERM (%ld)", o.ret);
	o = run(P_UNSHARE);
	ok(o.ret == -EPERM, "unshare(CLONE_NEWUSER) -> EPERM (%ld)", o.ret);
	o = run(P_SETNS);
	ok(o.ret == -EPERM, "setns -> EPERM (%ld)", o.ret);
	o = run(P_IO_URING);
	ok(o.ret == -EPERM, "io_uring_setup -> EPERM (%ld)", o.ret);
	o = run(P_CLONE3);
	ok(o.ret == -ENOSYS, "clone3 -> ENOSYS so libc falls back (%ld)", o.ret);
	o = run(P_CLONE_NEWUSER);
	ok(o.ret == -EPERM, "clone(CLONE_NEWUSER) -> EPERM (%ld)", o.ret);
	o = run(P_TIOCSTI);
	ok(o.ret == -EPERM, "ioctl TIOCSTI -> EPERM (%ld)", o.ret);
	o = run(P_TIOCSTI_HIGH);
	ok(o.ret == -EPERM, "ioctl TIOCSTI with high bits set -> EPERM (%ld)", o.ret);
	o = run(P_AF_PACKET);
	ok(o.ret == -EPERM, "socket(AF_PACKET) -> EPERM (%ld)", o.ret);
	o = run(P_AF_VSOCK);
	ok(o.ret == -EPERM, "socket(AF_VSOCK) -> EPERM (%ld)", o.ret);
	o = run(P_NETLINK_AUDIT);
	ok(o.ret == -EPROTONOSUPPORT,
	   "socket(AF_NETLINK, NETLINK_AUDIT) -> EPROTONOSUPPORT, as without audit (%ld)", o.ret);
	o = run(P_BPF);
	ok(o.ret == -EPERM, "bpf -> EPERM (%ld)", o.ret);
	o = run(P_KEYCTL);
	ok(o.ret == -EPERM, "keyctl -> EPERM (%ld)", o.ret);
	o = run(P_PTRACE);
	ok(o.ret == -EPERM, "ptrace -> EPERM (%ld)", o.ret);
	o = run(P_OPEN_TREE);
	ok(o.ret == -EPERM, "open_tree -> EPERM (%ld)", o.ret);
	o = run(P_USERFAULTFD);
	ok(o.ret == -EPERM, "userfaultfd -> EPERM (%ld)", o.ret);
	o = run(P_PERF);
	ok(o.ret == -EPERM, "perf_event_open -> EPERM (%ld)", o.ret);
	o = run(P_PERSONALITY_BAD);
	ok(o.ret == -EPERM, "personality(READ_IMPLIES_EXEC) -> EPERM (%ld)", o.ret);
	o = run(P_X32);
	ok(!o.signaled && o.ret == -EPERM,
	   "x32 syscall -> EPERM, the caller lives (%ld, signal %d)", o.ret, o.sig);
	{
		/* Without the filter: does this kernel run i386 calls at all (ia32_emulation)? */
		struct sock_fprog saved = prog;
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

		prog.len = 1;
		prog.filter = &allow;
		o = run(P_I386);
		prog = saved;
		if (o.signaled) {
			printf("# kernel refuses int 0x80 by itself (signal %d): no ia32 "
			       "emulation\n",
			       o.sig);
			o = run(P_I386);
			ok(o.signaled, "i386 int 0x80 never runs (signal %d)", o.sig);
		} else {
			o = run(P_I386);
			ok(!o.signaled && o.ret == -EPERM,
			   "i386 int 0x80 -> EPERM (%ld, signal %d)", o.ret, o.sig);
		}
	}

	/* Allowed: the filter's refusals above are not just "everything fails". */
	o = run(P_GETPID);
	ok(!o.signaled && o.ret > 0, "getpid works (%ld)", o.ret);
	o = run(P_FORK);
	ok(!o.signaled && o.ret > 0, "fork (clone without CLONE_NEW*) works (%ld)", o.ret);
	o = run(P_SOCKET_INET);
	ok(!o.signaled && o.ret >= 0, "socket(AF_INET) works (%ld)", o.ret);
	o = run(P_NETLINK_ROUTE);
	ok(!o.signaled && o.ret >= 0, "socket(AF_NETLINK, NETLINK_ROUTE) works (%ld)", o.ret);
	o = run(P_IOCTL_FIONREAD);
	ok(!o.signaled && o.ret == 0, "ioctl FIONREAD works (%ld)", o.ret);
	o = run(P_PERSONALITY_OK);
	ok(!o.signaled && o.ret >= 0, "personality query works (%ld)", o.ret);
	isola_err_free(err);
	return tap_done();
}
