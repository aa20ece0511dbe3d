/* SPDX-License-Identifier: Apache-2.0 */
/* test_freeze: the cgroup freezer ops (v1 freezer.state, v2 cgroup.freeze) on a real spinning child. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "isolad/tiers/process/process-internal.h"
#include "../tap.h"

static volatile uint64_t *counter; /* shared with the child, which only increments it */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* True if the child's counter moves within 100 ms. */
static bool running(void)
{
	uint64_t a = *counter;

	sleep_ms(100);
	return *counter != a;
}

static pid_t spinner(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			(*counter)++;
	}
	return pid;
}

static void run(const struct cgroup_ops *ops, const char *id)
{
	struct proc_cg_limits lim = {0, 0, 0};
	struct isola_err *err = NULL;
	struct proc_cgroup cg;
	pid_t pid;
	int r;

	r = ops->create(id, &lim, &cg, &err);
	if (!ok(r == 0, "%s: make cgroup isola/%s%s%s", ops->name, id, err ? ": " : "",
		err ? err->message : "")) {
		isola_err_free(err);
		return;
	}
	pid = spinner();
	r = ops->attach(&cg, pid, &err);
	ok(r == 0 && running(), "%s: a spinning child in it runs", ops->name);
	r = ops->freeze(&cg, true, 5000, &err);
	ok(r == 0 && !running(), "%s: freeze returns once it is frozen: the child stops%s%s",
	   ops->name, err ? ": " : "", err ? err->message : "");
	ok(ops->freeze(&cg, true, 5000, &err) == 0 && !running(), "%s: freeze again is a no-op",
	   ops->name);
	r = ops->freeze(&cg, false, 5000, &err);
	ok(r == 0 && running(), "%s: thaw: the child runs again", ops->name);
	ok(ops->freeze(&cg, false, 5000, &err) == 0 && running(),
	   "%s: thaw of a running group is fine", ops->name);
	/* Frozen, then killed the way destroy does it: thaw first, then kill. */
	ops->freeze(&cg, true, 5000, NULL);
	ops->freeze(&cg, false, 5000, NULL);
	ops->kill_all(&cg);
	waitpid(pid, NULL, 0);
	r = proc_cgroup_remove(&cg, 5000, &err);
	ok(r == 0, "%s: removed after kill%s%s", ops->name, err ? ": " : "",
	   err ? err->message : "");
	isola_err_free(err);
}

int main(void)
{
	const struct proc_cg_host *h = proc_cg_host();
	char id[40];

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (cgroups)\n");
		return 0;
	}
	counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counter == MAP_FAILED)
		return 1;
	/* v2: on a hybrid host the cgroup2 mount has no controllers, but cgroup.freeze is a
	 * core file: the v2 path runs here too. */
	snprintf(id, sizeof(id), "test-freeze-v2-%d", (int)getpid());
	if (h->v2[0])
		run(&cgroup_v2_ops, id);
	else
		ok(1, "# SKIP no cgroup2 mount");
	snprintf(id, sizeof(id), "test-freeze-v1-%d", (int)getpid());
	if (h->v1[PROC_CG_FREEZER][0])
		run(&cgroup_v1_ops, id);
	else
		ok(1, "# SKIP no v1 freezer");
	return tap_done();
}
