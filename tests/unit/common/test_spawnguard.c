/* SPDX-License-Identifier: Apache-2.0 */
/* test_spawnguard: a guarded child keeps only its fds, dies with its parent until handover, and is killed by its record. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "common/spawnguard.h"

/* In a child: spawnguard_child_enter(keep), then reports on report_fd which fds in 0..63
 * are open, as a 64-byte map of '0'/'1'. */
static void report_open_fds(const int *keep, unsigned n, int report_fd)
{
	struct stat st, null;
	char map[64];

	if (spawnguard_child_enter(keep, n) < 0)
		_exit(2);
	for (int fd = 0; fd < 64; fd++)
		map[fd] = fcntl(fd, F_GETFD) >= 0 ? '1' : '0';
	/* stdio is /dev/null now: 'n' instead of '1'. */
	if (stat("/dev/null", &null) == 0)
		for (int fd = 0; fd < 3; fd++)
			if (fstat(fd, &st) == 0 && st.st_rdev == null.st_rdev &&
			    S_ISCHR(st.st_mode))
				map[fd] = 'n';
	_exit(write(report_fd, map, sizeof(map)) == sizeof(map) ? 0 : 3);
}

static void test_keeps_only_its_fds(void)
{
	int p[2], extra[6], keep[3], saved_err;
	char map[64];
	bool others_closed = true;
	pid_t pid;
	int st = 0;

	if (pipe(p) < 0)
		abort();
	/* Our stdio as a log file would be: a regular file, never /dev/null. */
	saved_err = dup(2);
	{
		int f = open("/tmp", O_TMPFILE | O_RDWR, 0600);

		if (f >= 0) {
			dup2(f, 2);
			close(f);
		}
	}
	for (int i = 0; i < 6; i++)
		extra[i] =
			open("/dev/null", O_RDONLY); /* no O_CLOEXEC: as a careless fd would be */
	/* Unsorted, with a negative entry: both must be handled. */
	keep[0] = extra[4];
	keep[1] = p[1];
	keep[2] = -1;
	pid = fork();
	if (pid == 0)
		report_open_fds(keep, 3, p[1]);
	dup2(saved_err, 2);
	close(saved_err);
	close(p[1]);
	ok(read(p[0], map, sizeof(map)) == sizeof(map), "child reported its open fds");
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child_enter succeeded (status %d)", st);
	ok(map[0] == 'n' && map[1] == 'n' && map[2] == 'n', "stdio is /dev/null");
	ok(map[extra[4]] == '1' && map[p[1]] == '1', "the kept fds stay open");
	for (int fd = 3; fd < 64; fd++)
		if (fd != extra[4] && fd != p[1] && map[fd] == '1')
			others_closed = false;
	ok(others_closed, "every other fd >= 3 is closed (parent's read end included)");
	close(p[0]);
	for (int i = 0; i < 6; i++)
		close(extra[i]);
}

/* Forks a middle process that forks a guarded grandchild (handover or not), reports the
 * grandchild's pid and exits. We are a subreaper, so the grandchild becomes our child. */
static pid_t orphan_grandchild(bool handover)
{
	int p[2];
	pid_t mid, g = -1;

	if (pipe(p) < 0)
		abort();
	mid = fork();
	if (mid == 0) {
		int q[2];
		pid_t c;

		if (pipe(q) < 0)
			_exit(1);
		c = fork();
		if (c == 0) {
			if (spawnguard_child_enter(&q[1], 1) < 0)
				_exit(1);
			if (handover)
				spawnguard_child_handover();
			/* Tell the middle one we are guarded, then wait to be killed. */
			if (write(q[1], "g", 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		close(q[1]);
		{
			char b;

			if (read(q[0], &b, 1) != 1)
				_exit(1);
		}
		if (write(p[1], &c, sizeof(c)) != sizeof(c))
			_exit(1);
		_exit(0); /* the parent (thread) dies: PDEATHSIG fires unless handed over */
	}
	close(p[1]);
	if (read(p[0], &g, sizeof(g)) != sizeof(g))
		g = -1;
	close(p[0]);
	waitpid(mid, NULL, 0);
	return g;
}

/* Waits up to 5 s for our (adopted) child pid; returns its wait status or -1. */
static int wait_child(pid_t pid, int ms)
{
	struct timespec ts = {0, 10 * 1000000};
	int st;

	for (int i = 0; i < ms / 10; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return st;
		nanosleep(&ts, NULL);
	}
	return -1;
}

static void test_dies_with_parent_until_handover(void)
{
	pid_t g;
	int st;

	g = orphan_grandchild(false);
	ok(g > 0, "guarded grandchild started");
	st = g > 0 ? wait_child(g, 5000) : -1;
	ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	   "before handover: killed with its parent (status %d)", st);

	g = orphan_grandchild(true);
	ok(g > 0, "handed-over grandchild started");
	st = g > 0 ? wait_child(g, 300) : -1;
	ok(st == -1, "after handover: survives its parent");
	if (g > 0) {
		kill(g, SIGKILL);
		waitpid(g, NULL, 0);
	}
}

static void test_kill_orphans_by_record(void)
{
	char dir[] = "/tmp/isola-spawnguard-XXXXXX", path[256];
	int rec, other, sync[2];
	pid_t holder, bystander;
	int st, n;
	char b;

	if (!mkdtemp(dir) || pipe(sync) < 0)
		abort();
	ok(spawnguard_kill_orphans(dir, 1000) == 0, "no record: nothing killed");
	rec = spawnguard_record_open(dir);
	ok(rec >= 0, "record created");
	snprintf(path, sizeof(path), "%s/%s", dir, SPAWNGUARD_RECORD);
	other = open("/dev/null", O_RDONLY | O_CLOEXEC);
	holder = fork();
	if (holder == 0) {
		close(other);
		if (write(sync[1], "h", 1) != 1)
			_exit(1);
		for (;;)
			pause(); /* holds rec */
	}
	bystander = fork();
	if (bystander == 0) {
		close(rec);
		if (write(sync[1], "b", 1) != 1)
			_exit(1);
		for (;;)
			pause(); /* holds something else */
	}
	if (read(sync[0], &b, 1) != 1 || read(sync[0], &b, 1) != 1)
		abort();
	close(rec);
	close(other);
	n = spawnguard_kill_orphans(dir, 5000);
	ok(n == 1, "one holder killed (got %d)", n);
	st = wait_child(holder, 5000);
	ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the holder died of SIGKILL");
	ok(wait_child(bystander, 100) == -1, "a process without the record is left alone");
	ok(access(path, F_OK) < 0 && errno == ENOENT, "the record is removed");
	kill(bystander, SIGKILL);
	waitpid(bystander, NULL, 0);
	rmdir(dir);
	close(sync[0]);
	close(sync[1]);
}

int main(void)
{
	/* Orphaned grandchildren come to us, so the test can wait for them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	test_keeps_only_its_fds();
	test_dies_with_parent_until_handover();
	test_kill_orphans_by_record();
	return tap_done();
}
