/* SPDX-License-Identifier: Apache-2.0 */
/* hooks: the spec's host hooks and the engine-programmed network namespace (hooks.h). */
#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOOK_OUTPUT_KEPT 1024 /* bytes of a failed hook's output quoted in the error */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* NULL-terminated copy of a JSON array of strings (the strings stay json's); first: argv[0]
 * when the array is empty (a hook without args runs as its path). */
static char **str_vec(const json_t *a, const char *first)
{
	size_t n = json_array_size(a), i;
	char **v = calloc(n + 2, sizeof(*v));

	if (!v)
		return NULL;
	for (i = 0; i < n; i++)
		v[i] = (char *)json_string_value(json_array_get(a, i));
	if (n == 0 && first)
		v[0] = (char *)first;
	return v;
}

/* The hook's process: state on fd 0 (a pipe), stdout and stderr to the capture pipe. */
static void hook_child(const char *path, char **argv, char **envp, int in, int out)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Above 2 first (a pipe may have got fd 0-2 if ours were closed); dup2 clears CLOEXEC. */
	in = fcntl(in, F_DUPFD, 3);
	out = fcntl(out, F_DUPFD, 3);
	if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(127);
	syscall(SYS_close_range, 3, ~0U, 0);
	execve(path, argv, envp);
	dprintf(2, "exec: %s", strerror(errno));
	_exit(127);
}

/* Appends up to what kept still holds of buf[0..k). */
static void keep(char *kept, size_t *klen, const char *buf, size_t k)
{
	size_t c = k < HOOK_OUTPUT_KEPT - *klen ? k : HOOK_OUTPUT_KEPT - *klen;

	memcpy(kept + *klen, buf, c);
	*klen += c;
}

/*
 * Feeds state to the hook, keeps the start of its output in kept, and waits for it until
 * deadline_ms (0: none). Returns its wait status, or -ETIMEDOUT once it was killed for it.
 * A hook that leaves a child holding its output does not hold us: its own exit (its pidfd
 * turning readable) ends the wait.
 */
static int hook_wait(pid_t pid, int in, int out, const char *state, char *kept, size_t *klen,
		     long long deadline_ms)
{
	size_t slen = strlen(state), sent = 0;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), st;

	fcntl(in, F_SETFL, O_NONBLOCK);
	fcntl(out, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd pf[3] = {{.fd = out, .events = POLLIN},
				       {.fd = in, .events = POLLOUT},
				       {.fd = pidfd, .events = POLLIN}};
		long long left = deadline_ms ? deadline_ms - now_ms() : -1;
		char buf[4096];
		ssize_t k = -1;

		if (in >= 0 && sent == slen) {
			close(in);
			in = -1;
		}
		pf[1].fd = in; /* poll skips a negative fd */
		/* Without a pidfd (an old kernel), look at the hook every 20 ms. */
		if (pidfd < 0 && (left < 0 || left > 20))
			left = 20;
		poll(pf, 3, left < 0 ? -1 : (int)(left > 0 ? left : 0));
		if (in >= 0 && (pf[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			k = write(in, state + sent, slen - sent);
			if (k > 0)
				sent += (size_t)k;
			else if (k < 0 && errno != EAGAIN && errno != EINTR)
				sent = slen; /* the hook closed its stdin: it does not want it */
		}
		while (out >= 0 && (k = read(out, buf, sizeof(buf))) > 0)
			keep(kept, klen, buf, (size_t)k);
		if (out >= 0 && (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))) {
			close(out);
			out = -1;
		}
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (deadline_ms && now_ms() >= deadline_ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			st = -ETIMEDOUT;
			break;
		}
	}
	/* What it wrote right before it exited. */
	if (out >= 0) {
		char buf[4096];
		ssize_t k;

		while ((k = read(out, buf, sizeof(buf))) > 0)
			keep(kept, klen, buf, (size_t)k);
		close(out);
	}
	if (in >= 0)
		close(in);
	if (pidfd >= 0)
		close(pidfd);
	while (*klen && (kept[*klen - 1] == '\n' || kept[*klen - 1] == ' '))
		(*klen)--;
	kept[*klen] = '\0';
	return st;
}

static int hook_run_one(const json_t *h, const char *kind, size_t i, const char *state,
			struct isola_err **err)
{
	const char *path = json_string_value(json_object_get(h, "path"));
	long long timeout = json_integer_value(json_object_get(h, "timeout"));
	char **argv = str_vec(json_object_get(h, "args"), path);
	char **envp = str_vec(json_object_get(h, "env"), NULL);
	char kept[HOOK_OUTPUT_KEPT + 1];
	size_t klen = 0;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, st, r = 0;
	pid_t pid;

	if (!argv || !envp || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		r = isola_err_sys(err, errno ? errno : ENOMEM, NULL, "hook `%s[%zu]` `%s`", kind, i,
				  path);
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = isola_err_sys(err, errno, NULL, "hook `%s[%zu]` `%s`: fork", kind, i, path);
		goto out;
	}
	if (pid == 0)
		hook_child(path, argv, envp, in[0], out[1]);
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	st = hook_wait(pid, in[1], out[0], state, kept, &klen,
		       timeout > 0 ? now_ms() + timeout * 1000 : 0);
	in[1] = out[0] = -1;
	/* Its output is the engine's (UNTRUSTED only as far as the hook is): quoted, capped. */
	if (st == -ETIMEDOUT)
		r = isola_err_set(err, ETIMEDOUT, "hook_failed",
				  "hook `%s[%zu]` `%s` timed out after %lld s (killed)%s%.1024s",
				  kind, i, path, timeout, klen ? ": " : "", kept);
	else if (WIFSIGNALED(st))
		r = isola_err_set(err, ECHILD, "hook_failed",
				  "hook `%s[%zu]` `%s` was killed by signal %d%s%.1024s", kind, i,
				  path, WTERMSIG(st), klen ? ": " : "", kept);
	else if (WEXITSTATUS(st) != 0)
		r = isola_err_set(err, ECHILD, "hook_failed",
				  "hook `%s[%zu]` `%s` exited with status %d%s%.1024s", kind, i,
				  path, WEXITSTATUS(st), klen ? ": " : "", kept);
out:
	for (int k = 0; k < 2; k++) {
		if (in[k] >= 0)
			close(in[k]);
		if (out[k] >= 0)
			close(out[k]);
	}
	free(argv);
	free(envp);
	return r;
}

int hooks_run(const json_t *hooks, const char *kind, const json_t *state,
	      void (*on_fail)(const char *msg), struct isola_err **err)
{
	const json_t *list = json_object_get(hooks, kind), *h;
	char *text;
	size_t i;
	int r = 0;

	if (!json_array_size(list))
		return 0;
	text = json_dumps(state, JSON_COMPACT);
	if (!text)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	json_array_foreach(list, i, h)
	{
		struct isola_err *e = NULL;

		r = hook_run_one(h, kind, i, text, on_fail ? &e : err);
		if (r < 0 && on_fail) {
			on_fail(e && e->message ? e->message : kind);
			r = 0;
		}
		isola_err_free(e);
		if (r < 0)
			break;
	}
	free(text);
	return r;
}

/* In a child already in the new namespace: loopback up and the sysctls. Returns 0 or errno. */
static int netns_setup(const json_t *sysctl)
{
	struct ifreq ifr = {0};
	const char *k;
	json_t *v;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) < 0)) {
		int e = errno;

		close(s);
		return e;
	}
	close(s);
	/* /proc/sys/net is the reader's network namespace: ours, the new one. */
	json_object_foreach((json_t *)sysctl, k, v)
	{
		char path[256];
		int fd;

		snprintf(path, sizeof(path), "/proc/sys/%s", k);
		for (char *c = path + 10; *c; c++)
			if (*c == '.')
				*c = '/';
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || dprintf(fd, "%s\n", json_string_value(v)) < 0) {
			int e = errno;

			if (fd >= 0)
				close(fd);
			return e;
		}
		close(fd);
	}
	return 0;
}

int hooks_netns_make(const char *dir, const json_t *sysctl, char *path, size_t n,
		     struct isola_err **err)
{
	int fd, st;
	pid_t pid;

	if ((size_t)snprintf(path, n, "%s/netns", dir) >= n)
		return isola_err_set(err, ENAMETOOLONG, "invalid", "`%s/netns` is too long", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return isola_err_sys(err, errno, NULL, "create `%s`", path);
	close(fd);
	/* A child makes the namespace, so ours (the engine's) is never left. */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		unlink(path);
		return isola_err_sys(err, errno, NULL, "fork to make a network namespace");
	}
	if (pid == 0) {
		int e = unshare(CLONE_NEWNET) < 0 ? errno : netns_setup(sysctl);

		if (!e && mount("/proc/self/ns/net", path, NULL, MS_BIND, NULL) < 0)
			e = errno;
		_exit(e & 0xff);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		int e = WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : EIO;

		hooks_netns_remove(dir);
		return isola_err_sys(err, e, NULL,
				     "make an empty network namespace at `%s` for the engine's "
				     "hooks",
				     path);
	}
	return 0;
}

void hooks_netns_remove(const char *dir)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/netns", dir);
	umount2(path, MNT_DETACH);
	unlink(path);
}
