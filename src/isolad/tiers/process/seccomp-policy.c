/* SPDX-License-Identifier: Apache-2.0 */
/* seccomp-policy: the process tier's syscall allowlist (x86_64), one readable table. */
#include "process-internal.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/netlink.h>

/*
 * Derived from Docker's default profile (moby profiles/seccomp/default.json),
 * tightened per SECURITY.md. Every process in a sandbox runs under it, the agent
 * (PID 1) included, so the agent's needs are listed too. Anything not listed
 * gets EPERM (seccomp.c sets the default), and so does every x32 or i386 call. No
 * rule kills: a denial is always an errno the caller sees (tests/unit/process/
 * test_seccomp_bpf.c evaluates the compiled program to prove it).
 *
 * `nr` is the x86_64 number for syscalls newer than the libseccomp we build
 * against (Debian 12 ships 2.5.4, which knows kernels up to ~6.0).
 */
#define A(n)                                                                                       \
	{                                                                                          \
#n, -1, PROC_SC_ALLOW                                                              \
	}
#define AN(n, x)                                                                                   \
	{                                                                                          \
#n, x, PROC_SC_ALLOW                                                               \
	}
#define D(n)                                                                                       \
	{                                                                                          \
#n, -1, PROC_SC_EPERM                                                              \
	}
#define DN(n, x)                                                                                   \
	{                                                                                          \
#n, x, PROC_SC_EPERM                                                               \
	}

const struct proc_sc_rule proc_sc_rules[] = {
	/* Everyone: file I/O, the bread and butter of every program. */
	A(read),
	A(write),
	A(readv),
	A(writev),
	A(pread64),
	A(pwrite64),
	A(preadv),
	A(pwritev),
	A(preadv2),
	A(pwritev2),
	A(lseek),
	A(close),
	A(close_range),
	A(dup),
	A(dup2),
	A(dup3),
	A(fcntl),
	A(flock),
	A(fsync),
	A(fdatasync),
	A(sync),
	A(syncfs),
	A(sync_file_range),
	A(ftruncate),
	A(truncate),
	A(fallocate),
	A(fadvise64),
	A(readahead),
	A(sendfile),
	A(splice),
	A(tee),
	A(vmsplice),
	A(copy_file_range),

	/* Everyone: path operations (shells, compilers, package managers). */
	A(open),
	A(openat),
	A(openat2) /* agent: RESOLVE_* lookups */,
	A(creat),
	A(access),
	A(faccessat),
	A(faccessat2),
	A(stat),
	A(lstat),
	A(fstat),
	A(newfstatat),
	A(statx),
	A(statfs),
	A(fstatfs),
	A(getdents),
	A(getdents64),
	A(getcwd),
	A(chdir),
	A(fchdir),
	A(mkdir),
	A(mkdirat),
	A(rmdir),
	A(rename),
	A(renameat),
	A(renameat2),
	A(link),
	A(linkat),
	A(unlink),
	A(unlinkat),
	A(symlink),
	A(symlinkat),
	A(readlink),
	A(readlinkat),
	A(chmod),
	A(fchmod),
	A(fchmodat),
	AN(fchmodat2, 452),
	A(chown),
	A(fchown),
	A(fchownat),
	A(lchown),
	A(umask),
	A(utime),
	A(utimes),
	A(utimensat),
	A(futimesat),
	A(mknod) /* FIFOs; device nodes fail anyway in a userns */,
	A(mknodat),
	/* root's CAP_SYS_CHROOT (default set): build tools and package scripts chroot into a
	 * directory of the sandbox's own tree; the mount namespace's root (after pivot_root,
	 * the old root detached) bounds it, so ".." never leaves the sandbox. */
	A(chroot),
	A(getxattr),
	A(lgetxattr),
	A(fgetxattr),
	A(setxattr),
	A(lsetxattr),
	A(fsetxattr),
	A(listxattr),
	A(llistxattr),
	A(flistxattr),
	A(removexattr),
	A(lremovexattr),
	A(fremovexattr),
	A(inotify_init),
	A(inotify_init1),
	A(inotify_add_watch),
	A(inotify_rm_watch) /* agent file watches, dev servers */,
	A(fanotify_mark),
	AN(cachestat, 451),

	/* Everyone: memory management (libc malloc, JITs, language runtimes). */
	A(brk),
	A(mmap),
	A(munmap),
	A(mprotect),
	A(mremap),
	A(madvise),
	A(mincore),
	A(msync),
	A(mlock),
	A(mlock2),
	A(munlock),
	A(mlockall),
	A(munlockall),
	A(membarrier),
	A(memfd_create),
	A(memfd_secret),
	A(remap_file_pages),
	A(pkey_alloc),
	A(pkey_free),
	A(pkey_mprotect),
	A(get_mempolicy),
	A(set_mempolicy),
	A(mbind),
	AN(map_shadow_stack, 453) /* CET shadow stacks in glibc */,
	AN(mseal, 462),

	/* Everyone: processes and threads. clone is argument-filtered below (no CLONE_NEW*);
	 * clone3 gets ENOSYS at the end of this table. */
	A(fork),
	A(vfork),
	A(execve),
	A(execveat),
	A(exit),
	A(exit_group),
	A(wait4),
	A(waitid),
	A(kill),
	A(tkill),
	A(tgkill),
	A(getpid),
	A(getppid),
	A(gettid),
	A(getpgid),
	A(setpgid),
	A(getpgrp),
	A(getsid),
	A(setsid),
	A(set_tid_address),
	A(set_robust_list),
	A(get_robust_list),
	A(rseq),
	A(arch_prctl),
	A(prctl) /* agent: NNP, PDEATHSIG, names */,
	A(getpriority),
	A(setpriority),
	A(ioprio_get),
	A(ioprio_set),
	A(sched_yield),
	A(sched_getaffinity),
	A(sched_setaffinity),
	A(sched_getparam),
	A(sched_setparam),
	A(sched_getscheduler),
	A(sched_setscheduler),
	A(sched_getattr),
	A(sched_setattr),
	A(sched_get_priority_max),
	A(sched_get_priority_min),
	A(sched_rr_get_interval),
	A(getcpu),
	A(getrlimit),
	A(setrlimit),
	A(prlimit64),
	A(getrusage),
	A(times),
	A(sysinfo),
	A(uname),
	A(capget),

	/* Agent: drops to the sandbox user in each exec child; user code may do the same
	 * (su, sudo-less setpriv) within the sandbox's own user namespace. */
	A(capset),
	A(setuid),
	A(setgid),
	A(setreuid),
	A(setregid),
	A(setresuid),
	A(setresgid),
	A(getresuid),
	A(getresgid),
	A(setfsuid),
	A(setfsgid),
	A(setgroups),
	A(getgroups),
	A(getuid),
	A(geteuid),
	A(getgid),
	A(getegid),

	/* Agent: pidfds for children it spawned; process_mrelease frees OOM victims. */
	A(pidfd_open),
	A(pidfd_send_signal),
	A(process_mrelease),

	/* Everyone: futexes and time. */
	A(futex),
	AN(futex_waitv, 449),
	AN(futex_wake, 454),
	AN(futex_wait, 455),
	AN(futex_requeue, 456),
	A(nanosleep),
	A(clock_nanosleep),
	A(clock_gettime),
	A(clock_getres),
	A(gettimeofday),
	A(time),
	A(alarm),
	A(getitimer),
	A(setitimer),
	A(timer_create),
	A(timer_delete),
	A(timer_gettime),
	A(timer_settime),
	A(timer_getoverrun),
	A(pause),

	/* Agent event loop (epoll, signalfd, timerfd, eventfd) and everyone's poll/select. */
	A(epoll_create),
	A(epoll_create1),
	A(epoll_ctl),
	A(epoll_wait),
	A(epoll_pwait),
	A(epoll_pwait2),
	A(poll),
	A(ppoll),
	A(select),
	A(pselect6),
	A(eventfd),
	A(eventfd2),
	A(signalfd),
	A(signalfd4),
	A(timerfd_create),
	A(timerfd_settime),
	A(timerfd_gettime),

	/* Signals. */
	A(rt_sigaction),
	A(rt_sigprocmask),
	A(rt_sigreturn),
	A(rt_sigpending),
	A(rt_sigsuspend),
	A(rt_sigtimedwait),
	A(rt_sigqueueinfo),
	A(rt_tgsigqueueinfo),
	A(sigaltstack),
	A(restart_syscall),

	/* Networking inside the sandbox's own netns; socket() is argument-filtered below.
	 * Agent: accept4 on its listening socket, sendmsg/recvmsg for frames. */
	A(socketpair),
	A(bind),
	A(listen),
	A(accept),
	A(accept4),
	A(connect),
	A(shutdown),
	A(getsockname),
	A(getpeername),
	A(getsockopt),
	A(setsockopt),
	A(sendto),
	A(recvfrom),
	A(sendmsg),
	A(recvmsg),
	A(sendmmsg),
	A(recvmmsg),
	A(pipe),
	A(pipe2),

	/* Everyone: SysV IPC and POSIX mqueues (own ipc namespace). */
	A(shmget),
	A(shmat),
	A(shmdt),
	A(shmctl),
	A(semget),
	A(semop),
	A(semtimedop),
	A(semctl),
	A(msgget),
	A(msgsnd),
	A(msgrcv),
	A(msgctl),
	A(mq_open),
	A(mq_unlink),
	A(mq_timedsend),
	A(mq_timedreceive),
	A(mq_notify),
	A(mq_getsetattr),

	/* Everyone: POSIX AIO as implemented by libaio (not io_uring). */
	A(io_setup),
	A(io_destroy),
	A(io_submit),
	A(io_cancel),
	A(io_getevents),
	A(io_pgetevents),

	/* Everyone: self-sandboxing (browsers, build tools) can only narrow further. */
	A(seccomp),
	A(landlock_create_ruleset),
	A(landlock_add_rule),
	A(landlock_restrict_self),
	AN(uretprobe, 335) /* kernel-inserted uprobe trampoline return */,
	A(getrandom),

	/* ---- Refused with EPERM: SECURITY.md's list. Listed so tests can sweep them. ---- */
	/* Kernel attack surface reached through user namespaces. */
	D(unshare),
	D(setns),
	D(mount),
	D(umount2),
	D(pivot_root),
	D(fsopen),
	D(fsmount),
	D(fsconfig),
	D(fspick),
	D(open_tree),
	D(move_mount),
	D(mount_setattr),
	DN(open_tree_attr, 467),
	DN(statmount, 457),
	DN(listmount, 458),
	/* io_uring: ~60% of kCTF 2022 exploits. */
	D(io_uring_setup),
	D(io_uring_enter),
	D(io_uring_register),
	/* userfaultfd: race-widening primitive in many kernel exploits. */
	D(userfaultfd),
	/* bpf, perf, keys: large attack surface, no use in a sandbox. */
	D(bpf),
	D(perf_event_open),
	D(keyctl),
	D(add_key),
	D(request_key),
	/* Reading or writing other processes' memory. */
	D(ptrace),
	D(process_vm_readv),
	D(process_vm_writev),
	D(pidfd_getfd),
	D(kcmp),
	D(process_madvise),
	D(move_pages),
	D(migrate_pages),
	/* Host-wide state: modules, kexec, clocks, swap, accounting, reboot. */
	D(kexec_load),
	D(kexec_file_load),
	D(init_module),
	D(finit_module),
	D(delete_module),
	D(acct),
	D(swapon),
	D(swapoff),
	D(reboot),
	D(settimeofday),
	D(clock_settime),
	D(clock_adjtime),
	D(adjtimex),
	D(syslog),
	D(quotactl),
	D(quotactl_fd),
	D(vhangup),
	D(iopl),
	D(ioperm),
	D(sethostname),
	D(setdomainname),
	D(lookup_dcookie),
	D(fanotify_init),
	D(nfsservctl),
	D(uselib),
	D(ustat),
	D(sysfs),
	D(_sysctl),
	/* File handles bypass path permission checks (CVE-2014-3519 "shocker"). */
	D(open_by_handle_at),
	D(name_to_handle_at),

	/* ---- ENOSYS: libc falls back to clone(), whose flags seccomp can inspect. ---- */
	{"clone3", -1, PROC_SC_ENOSYS},
};

const size_t proc_sc_n_rules = sizeof(proc_sc_rules) / sizeof(proc_sc_rules[0]);

/* clone flags that create namespaces (Docker's mask 0x7E020000). */
#define NS_CLONE_FLAGS                                                                             \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET)

/* The ioctl cmds refused (all others allowed). */
static const uint32_t ioctl_denied[] = {TIOCSTI, TIOCLINUX};

/*
 * Allows ioctl for every cmd whose low 32 bits are not in ioctl_denied and whose
 * high 32 bits are zero. The kernel truncates cmd to 32 bits, so a plain 64-bit
 * "!= TIOCSTI" test would let TIOCSTI | 1<<32 through (CVE-2019-10063); and
 * libseccomp can neither repeat the default action as a rule nor express a masked
 * "not equal". So the allowed set [0, 2^32) minus the denied values is split into
 * aligned power-of-two blocks, each one masked-equality rule (about 60 rules).
 */
static int allow_ioctl_block(scmp_filter_ctx ctx, uint64_t lo, unsigned bits)
{
	bool hit = false;

	for (size_t i = 0; i < sizeof(ioctl_denied) / sizeof(ioctl_denied[0]); i++)
		hit |= ioctl_denied[i] >= lo && ioctl_denied[i] < lo + (1ull << bits);
	if (!hit) {
		uint64_t mask = ~((1ull << bits) - 1); /* includes the high 32 bits */

		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
					SCMP_A1(SCMP_CMP_MASKED_EQ, mask, lo));
	}
	if (bits == 0)
		return 0; /* exactly a denied value */
	int r = allow_ioctl_block(ctx, lo, bits - 1);

	return r < 0 ? r : allow_ioctl_block(ctx, lo + (1ull << (bits - 1)), bits - 1);
}

static int add_ioctl_rules(scmp_filter_ctx ctx)
{
	return allow_ioctl_block(ctx, 0, 32);
}

int proc_seccomp_add_arg_rules(void *vctx)
{
	scmp_filter_ctx ctx = vctx;
	static const int domains[] = {AF_UNIX, AF_INET, AF_INET6};
	static const unsigned long personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffffUL};
	int r;

	/* Everyone (fork, threads): clone without namespace flags. Nested namespaces are
	 * the door to most unprivileged kernel exploits (nf_tables, fsconfig). */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			     SCMP_A0(SCMP_CMP_MASKED_EQ, NS_CLONE_FLAGS, 0));
	if (r < 0)
		return r;

	/* Everyone: unix, IPv4, IPv6 sockets. Not AF_PACKET (raw frames), AF_VSOCK (host
	 * channel), AF_KEY, AF_ALG or the other rarely audited families. */
	for (size_t i = 0; i < sizeof(domains) / sizeof(domains[0]); i++) {
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)domains[i]));
		if (r < 0)
			return r;
	}
	/* ip(8), getifaddrs(): netlink, NETLINK_ROUTE only (own netns). */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
			     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE));
	if (r < 0)
		return r;
	/* The audit socket stays refused, but with the answer of a kernel built without audit:
	 * libpam (runuser, su, sudo), shadow's tools and sshd treat EPROTONOSUPPORT as "no
	 * audit here" and go on, where EPERM is fatal to them ("audit_open() failed"). A call
	 * let through would return a socket, so this errno is the filter's alone. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
			     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, NETLINK_AUDIT));
	if (r < 0)
		return r;

	/* Everyone: ioctl, except terminal input injection (TIOCSTI, TIOCLINUX). */
	r = add_ioctl_rules(ctx);
	if (r < 0)
		return r;

	/* setarch/linux32 queries and ADDR_NO_RANDOMIZE (debuggers): Docker's values. */
	for (size_t i = 0; i < sizeof(personas) / sizeof(personas[0]); i++) {
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				     SCMP_A0(SCMP_CMP_EQ, personas[i]));
		if (r < 0)
			return r;
	}
	return 0;
}
