/* SPDX-License-Identifier: Apache-2.0 */
/*
 * restore: fills a new sandbox's writable layer from a saved archive in a process of its own
 * that joins the sandbox's cgroups first, so the pages it writes are charged to the sandbox
 * (its memory limit), not to isolad.
 *
 * The process is isolad itself run again (/proc/self/exe under the name
 * PROC_RESTORE_ARGV0): between the fork and the exec the child makes only system calls. A
 * forked child of the multithreaded isolad that went on to read the archive (libarchive,
 * malloc) could wait forever on a lock another of isolad's threads held at the fork: glibc's
 * own malloc is made safe across fork, but not every allocator is (GCC 12's AddressSanitizer
 * is not), nor every lock a library takes.
 */
#include "process-internal.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/spawnguard.h"
#include "../../../common/util.h"

/* argv: NAME TMPFS_FD LAYER_FD REPORT_FD UID_BASE WHAT */
int tier_process_restore_main(int argc, char **argv)
{
	struct isola_err *e = NULL;
	long v[4];
	int r;

	if (argc != 6) {
		fprintf(stderr, "%s: internal to isolad (restores a writable layer)\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < 4; i++) {
		char *end;

		errno = 0;
		v[i] = strtol(argv[1 + i], &end, 10);
		if (errno || *end || v[i] < 0 || (i < 3 ? v[i] > INT_MAX : v[i] > UINT32_MAX))
			return 2;
	}
	r = proc_layer_read((int)v[0], PROC_LAYER_UPPER, (uint32_t)v[3], (int)v[1], argv[5], &e);
	if (r < 0)
		dprintf((int)v[2], "%s %d %s", e ? e->code : "internal", e ? e->errnum : -r,
			e ? e->message : "restore failed");
	isola_err_free(e);
	return r < 0 ? 1 : 0;
}

/* The child between fork and exec: system calls only (see the top of this file). */
static __attribute__((noreturn)) void restore_child(const int *keep, unsigned n, int go,
						    pid_t parent, char **argv)
{
	char c;

	/* None of isolad's other fds in a process that could outlive it; dies with it. */
	if (spawnguard_child_enter(keep, n) < 0 || getppid() != parent)
		_exit(1);
	for (unsigned i = 0; i < n; i++)
		if (keep[i] != go && fcntl(keep[i], F_SETFD, 0) < 0)
			_exit(1);
	/* Run nothing before the parent has put us in the sandbox's cgroups. */
	if (read(go, &c, 1) != 1)
		_exit(1);
	execve("/proc/self/exe", argv, environ);
	_exit(127);
}

int proc_restore_layer(const struct cgroup_ops *cgo, const struct proc_cgroup *cg, int tmpfs,
		       int layer_fd, uint32_t uid_base, const char *name, struct isola_err **err)
{
	char buf[1200] = "", code[32] = "internal", fd_s[3][16], uid_s[16];
	char *argv[] = {PROC_RESTORE_ARGV0, fd_s[0], fd_s[1], fd_s[2], uid_s, (char *)name, NULL};
	cleanup_fd int rd = -1;
	cleanup_fd int go_w = -1;
	int p[2], go[2], st = 0, errnum = EIO, off = 0, r;
	size_t n = 0;
	ssize_t k;
	pid_t pid, parent = getpid();

	if (pipe2(p, O_CLOEXEC) < 0)
		return isola_err_sys(err, errno, "internal", "restore `%s`: pipe", name);
	if (pipe2(go, O_CLOEXEC) < 0) {
		r = errno;
		close(p[0]);
		close(p[1]);
		return isola_err_sys(err, r, "internal", "restore `%s`: pipe", name);
	}
	rd = p[0];
	go_w = go[1];
	snprintf(fd_s[0], sizeof(fd_s[0]), "%d", tmpfs);
	snprintf(fd_s[1], sizeof(fd_s[1]), "%d", layer_fd);
	snprintf(fd_s[2], sizeof(fd_s[2]), "%d", p[1]);
	snprintf(uid_s, sizeof(uid_s), "%u", uid_base);
	pid = fork();
	if (pid == 0) {
		const int keep[] = {tmpfs, layer_fd, p[1], go[0]};

		restore_child(keep, ARRAY_SIZE(keep), go[0], parent, argv);
	}
	r = errno;
	close(p[1]);
	close(go[0]);
	if (pid < 0)
		return isola_err_sys(err, r, "internal", "restore `%s`: fork", name);
	r = cgo->attach(cg, pid, err);
	if (r < 0 || write(go_w, "g", 1) != 1) {
		if (r == 0)
			r = isola_err_sys(err, errno, "internal", "restore `%s`: start reader",
					  name);
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		return r;
	}
	while (n < sizeof(buf) - 1 && (k = read(rd, buf + n, sizeof(buf) - 1 - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		return isola_err_set(
			err, ENOSPC, "no_space",
			"restore `%s`: killed by signal %d while filling the layer (the "
			"snapshot does not fit the new sandbox's memory limit)",
			name, WTERMSIG(st));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return isola_err_set(err, ENOEXEC, "internal",
				     "restore `%s`: cannot run isolad again (/proc/self/exe)",
				     name);
	/* Our own child's report: "<code> <errnum> <message>". */
	if (sscanf(buf, "%31s %d %n", code, &errnum, &off) < 2 || off <= 0)
		return isola_err_set(err, EIO, "internal", "restore `%s`: the layer reader failed",
				     name);
	return isola_err_set(err, errnum > 0 ? errnum : EIO, code, "%s", buf + off);
}
