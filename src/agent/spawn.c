/* SPDX-License-Identifier: Apache-2.0 */
/* spawn: fork + the exec child's hygiene and privilege drop, then execve. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/caps.h"
#include "common/util.h"

extern char **environ;

uint64_t agent_root_caps;		     /* none until a sandbox's boot says (main.c) */
struct agent_spec_filter agent_spec_seccomp; /* none unless setup's plan carries one */

/* What the child reports through the cloexec pipe when a step fails. */
struct spawn_fail {
	int step; /* index into step_names */
	int err;  /* errno */
};

enum {
	STEP_SETSID,
	STEP_TTY,
	STEP_STDIO,
	STEP_CAPS,
	STEP_SECUREBITS,
	STEP_RLIMIT,
	STEP_OOM,
	STEP_SETGROUPS,
	STEP_SETGID,
	STEP_SETUID,
	STEP_CAPSET,
	STEP_NNP,
	STEP_CHDIR,
	STEP_SECCOMP,
	STEP_EXEC,
};

static const char *const step_names[] = {
	"setsid",     "controlling tty", "stdio",	  "drop bounding set",
	"securebits", "setrlimit",	 "oom_score_adj", "setgroups",
	"setgid",     "setuid",		 "capset",	  "no_new_privs",
	"chdir",      "seccomp",	 "execve",
};

static __attribute__((noreturn)) void child_fail(int fd, int step, int err)
{
	struct spawn_fail f = {.step = step, .err = err};

	if (write(fd, &f, sizeof(f)) < 0) {
		/* nothing left to tell anyone */
	}
	_exit(127);
}

/* The command's narrowing fields (narrow.c checked that none widens), while still uid 0:
 * /proc/self/oom_score_adj of this non-dumpable process is root's. */
static void apply_narrow(const struct spawn_narrow *n, int efd)
{
	char buf[16];
	int fd, len;

	if (!n)
		return;
	if (n->umask >= 0)
		umask((mode_t)n->umask);
	for (unsigned i = 0; i < n->n_rlimits; i++) {
		struct rlimit rl = {.rlim_cur = (rlim_t)n->rlimits[i].soft,
				    .rlim_max = (rlim_t)n->rlimits[i].hard};

		if (setrlimit(n->rlimits[i].resource, &rl) < 0)
			child_fail(efd, STEP_RLIMIT, errno);
	}
	if (!n->set_oom)
		return;
	len = snprintf(buf, sizeof(buf), "%d\n", n->oom_score_adj);
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, (size_t)len) != len)
		child_fail(efd, STEP_OOM, errno ? errno : EIO);
	close(fd);
}

/* A privileged step may fail only when the agent itself runs unprivileged (standalone test
 * mode) and the user asked for is the agent's own uid: then there is nothing to drop to. */
static bool may_skip(const struct agent_user *u, int err)
{
	return err == EPERM && geteuid() != 0 && u->uid == geteuid();
}

/*
 * The spec's own filter (docs/oci.md "The spec's seccomp profile"), stacked on isola's: the
 * kernel runs both and the stricter verdict wins, so it can only narrow. Last step before
 * execve, as runc does, so the profile need not allow what the steps above call; no_new_privs
 * is set already, which an unprivileged filter requires.
 */
static void install_spec_filter(int efd)
{
	struct sock_fprog prog = {.len = agent_spec_seccomp.len,
				  .filter = agent_spec_seccomp.insns};

	if (!agent_spec_seccomp.insns)
		return;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, agent_spec_seccomp.flags, &prog) < 0)
		child_fail(efd, STEP_SECCOMP, errno);
}

static __attribute__((noreturn)) void child(const struct spawn_req *r, int efd)
{
	const struct agent_user *u = r->user;
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {{0}};
	sigset_t all;
	int i, fd;

	/* the report pipe goes high so dup2 onto 0-2 cannot clobber it */
	fd = fcntl(efd, F_DUPFD_CLOEXEC, 100);
	if (fd >= 0)
		efd = fd;

	/* signals: default dispositions, nothing blocked (the agent blocks SIGCHLD) */
	for (i = 1; i < _NSIG; i++)
		signal(i, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);

	/* own session and process group: signals and timeouts hit the whole group */
	if (setsid() < 0)
		child_fail(efd, STEP_SETSID, errno);
	if (r->pty_slave) {
		fd = open(r->pty_slave, O_RDWR);
		if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0)
			child_fail(efd, STEP_TTY, errno);
		for (i = 0; i < 3; i++)
			if (dup2(fd, i) < 0)
				child_fail(efd, STEP_STDIO, errno);
		if (fd > 2)
			close(fd);
	} else {
		for (i = 0; i < 3; i++)
			if (dup2(r->stdio[i], i) < 0)
				child_fail(efd, STEP_STDIO, errno);
	}
	/* fd hygiene: nothing of the agent's (the isolad stream, other processes' pipes)
	 * may leak into user code */
	if (efd > 3)
		syscall(SYS_close_range, 3, efd - 1, 0);
	syscall(SYS_close_range, efd + 1, ~0U, 0);

	/* capabilities: the bounding set goes first (needs CAP_SETPCAP, still effective) and
	 * becomes the sandbox's set for every process, as in Docker: uid 0 gains exactly that
	 * at execve (file capabilities of uid 0 are "all", clipped by the bounding set), any
	 * other uid gains nothing, and no setuid or file-capability binary can go beyond it
	 * (no_new_privs below forbids even that, and the layers are nosuid). */
	for (i = 0; i <= 63; i++) {
		if (agent_root_caps & (1ull << i))
			continue;
		if (prctl(PR_CAPBSET_DROP, i, 0, 0, 0) < 0 && errno != EINVAL &&
		    !may_skip(u, errno))
			child_fail(efd, STEP_CAPS, errno);
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	/* The kernel's default uid rules (no securebits), as under Docker: root keeps its
	 * capabilities across execve, and a switch from uid 0 to another uid (setuid below, or
	 * runuser/su inside) clears permitted and effective. Root may set securebits for its
	 * own processes later (it holds SETPCAP); none of them adds anything beyond the
	 * bounding set, and a non-root execve gains nothing whatever they say. */
	if (prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) < 0 && !may_skip(u, errno))
		child_fail(efd, STEP_SECUREBITS, errno);
	apply_narrow(r->narrow, efd);
	if (setgroups((size_t)u->ngroups, u->groups) < 0 && !may_skip(u, errno))
		child_fail(efd, STEP_SETGROUPS, errno);
	if (setresgid(u->gid, u->gid, u->gid) < 0 && !may_skip(u, errno))
		child_fail(efd, STEP_SETGID, errno);
	if (setresuid(u->uid, u->uid, u->uid) < 0 && !may_skip(u, errno))
		child_fail(efd, STEP_SETUID, errno);
	/* root: permitted and effective = the sandbox's set (what execve will give it anyway,
	 * so no_new_privs sees no gain); everyone else: every set empty. Inheritable stays
	 * empty, so no file's inheritable bits add anything. */
	if (u->uid == 0) {
		data[0].permitted = data[0].effective = (uint32_t)agent_root_caps;
		data[1].permitted = data[1].effective = (uint32_t)(agent_root_caps >> 32);
	}
	if (syscall(SYS_capset, &hdr, data) < 0 && !may_skip(u, errno))
		child_fail(efd, STEP_CAPSET, errno);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(efd, STEP_NNP, errno);
	if (chdir(r->cwd) < 0)
		child_fail(efd, STEP_CHDIR, errno);
	install_spec_filter(efd);
	environ = (char **)r->envp; /* execvp searches the child's PATH, not ours */
	execvp(r->argv[0], r->argv);
	child_fail(efd, STEP_EXEC, errno);
}

int spawn_process(const struct spawn_req *r, pid_t *pid, const char **what)
{
	struct spawn_fail f;
	int p[2];
	ssize_t n;
	pid_t c;

	*what = "fork";
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	c = fork();
	if (c < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (c == 0) {
		close(p[0]);
		child(r, p[1]);
	}
	close(p[1]);
	do
		n = read(p[0], &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == 0) {
		*pid = c;
		return 0; /* execve closed the pipe: running */
	}
	waitpid(c, NULL, 0);
	if (n != sizeof(f) || f.step < 0 || f.step >= (int)ARRAY_SIZE(step_names) || f.err <= 0) {
		*what = "spawn";
		return -EIO;
	}
	*what = step_names[f.step];
	return -f.err;
}
