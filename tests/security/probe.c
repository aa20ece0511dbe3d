/* SPDX-License-Identifier: Apache-2.0 */
/* probe: a static binary run inside a sandbox that attempts escapes and reports; the host judges. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/*
 * Output: one JSON object per line.
 *   {"probe":"status","line":"NoNewPrivs:\t1"}   selected /proc/self/status lines
 *   {"probe":"syscall","name":"mount","ret":-1,"errno":1}
 *   {"probe":"fd","fd":3,"target":"..."}        every open fd beyond 0-2
 * Every denied-syscall attempt passes invalid pointers (address 1) where the call takes
 * one, so a call that the filter let through fails with EFAULT/EBADF/EINVAL instead of
 * the filter's EPERM/ENOSYS — the host tells the two apart.
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
	static const char *keys[] = {"Uid:",	"Gid:",	   "NoNewPrivs:", "Seccomp:", "CapInh:",
				     "CapPrm:", "CapEff:", "CapBnd:",	  "CapAmb:"};
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
	int s;

	errno = 0;
	s = socket(AF_PACKET, SOCK_RAW, 0);
	report("socket_af_packet", s, errno);
	errno = 0;
	s = socket(AF_VSOCK, SOCK_STREAM, 0);
	report("socket_af_vsock", s, errno);
}

static void syscalls(void)
{
	TRY("mount", SYS_mount, BAD, BAD, BAD, 0, BAD);
	TRY("umount2", SYS_umount2, BAD, 0);
	TRY("pivot_root", SYS_pivot_root, BAD, BAD);
	TRY("unshare_user", SYS_unshare, CLONE_NEWUSER);
	TRY("unshare_ns", SYS_unshare, CLONE_NEWNS);
	TRY("setns", SYS_setns, -1, 0);
	/* CLONE_THREAD without CLONE_VM is invalid: if the filter let it through, the kernel
	 * answers EINVAL and no child is made. */
	TRY("clone_newuser", SYS_clone, CLONE_NEWUSER | CLONE_THREAD, 0, BAD, BAD, 0);
	TRY("clone3", SYS_clone3, BAD, 0);
	TRY("io_uring_setup", SYS_io_uring_setup, 1, BAD);
	TRY("userfaultfd", SYS_userfaultfd, 0);
	TRY("bpf", SYS_bpf, 0, BAD, 0);
	TRY("perf_event_open", SYS_perf_event_open, BAD, 0, -1, -1, 0);
	TRY("keyctl", SYS_keyctl, 0, 0, 0, 0, 0);
	TRY("add_key", SYS_add_key, BAD, BAD, BAD, 0, 0);
	TRY("request_key", SYS_request_key, BAD, BAD, BAD, 0);
	TRY("ptrace", SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0);
	TRY("process_vm_readv", SYS_process_vm_readv, 1, BAD, 1, BAD, 1, 0);
	TRY("kexec_load", SYS_kexec_load, 0, 0, BAD, 0);
	TRY("init_module", SYS_init_module, BAD, 0, BAD);
	TRY("finit_module", SYS_finit_module, -1, BAD, 0);
	TRY("delete_module", SYS_delete_module, BAD, 0);
	TRY("open_by_handle_at", SYS_open_by_handle_at, -1, BAD, 0);
	TRY("acct", SYS_acct, BAD);
	TRY("swapon", SYS_swapon, BAD, 0);
	TRY("reboot", SYS_reboot, 0, 0, 0, BAD);
	TRY("settimeofday", SYS_settimeofday, BAD, BAD);
	TRY("clock_settime", SYS_clock_settime, 0, BAD);
	TRY("fsopen", SYS_fsopen, BAD, 0);
	TRY("open_tree", SYS_open_tree, -1, BAD, 0);
	TRY("move_mount", SYS_move_mount, -1, BAD, -1, BAD, 0);
	/* TIOCSTI with high bits set: must be compared on 32 bits (CVE-2019-10063). */
	TRY("ioctl_tiocsti_high", SYS_ioctl, 0, 0x100000000ul | TIOCSTI, BAD);
	TRY("ioctl_tiocsti", SYS_ioctl, 0, TIOCSTI, BAD);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	status_lines();
	fds();
	sockets();
	syscalls();
	return 0;
}
