/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup-v1: the legacy/hybrid backend (one directory per controller hierarchy). */
#include "process-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../../common/util.h"

/* Directories for id: one per distinct hierarchy (cpu and cpuacct may share one). */
static int v1_paths(const char *id, struct proc_cgroup *cg)
{
	const struct proc_cg_host *h = proc_cg_host();

	memset(cg, 0, sizeof(*cg));
	cg->version = 1;
	for (int c = 0; c < PROC_CG_NCTRL; c++) {
		bool dup = false;
		char p[512];

		if (!h->v1[c][0])
			continue;
		if (proc_cg_format_path(p, sizeof(p), h->v1[c], id) < 0)
			return -ENAMETOOLONG;
		for (unsigned i = 0; i < cg->n; i++)
			dup |= !strcmp(cg->path[i], p);
		if (dup || cg->n == PROC_CG_MAX_PATHS)
			continue;
		snprintf(cg->path[cg->n], sizeof(cg->path[0]), "%s", p);
		snprintf(cg->ctrl[cg->n], sizeof(cg->ctrl[0]), "%s", proc_cg_ctrl_names[c]);
		cg->n++;
	}
	return 0;
}

/* Directory of controller c in cg, or NULL. */
static const char *v1_dir(const struct proc_cgroup *cg, enum proc_cg_ctrl c)
{
	const struct proc_cg_host *h = proc_cg_host();
	size_t ml = strlen(h->v1[c]);

	if (!ml)
		return NULL;
	for (unsigned i = 0; i < cg->n; i++)
		if (!strncmp(cg->path[i], h->v1[c], ml) && cg->path[i][ml] == '/')
			return cg->path[i];
	return NULL;
}

static int v1_create(const char *id, const struct proc_cg_limits *lim, struct proc_cgroup *cg,
		     struct isola_err **err)
{
	char val[64];
	const char *d;
	int r;

	r = v1_paths(id, cg);
	if (r < 0)
		return isola_err_set(err, -r, "internal", "cgroup path for `%s` too long", id);
	for (unsigned i = 0; i < cg->n; i++) {
		char parent[512];

		snprintf(parent, sizeof(parent), "%s", cg->path[i]);
		*strrchr(parent, '/') = '\0';
		if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
			r = isola_err_sys(err, errno, "internal", "mkdir `%s`", parent);
			goto err_remove;
		}
		/* EEXIST: a leftover from a crash with the same id; reuse only if empty. */
		if (mkdir(cg->path[i], 0755) < 0 && errno != EEXIST) {
			r = isola_err_sys(err, errno, "internal", "mkdir `%s`", cg->path[i]);
			goto err_remove;
		}
	}
	if (!proc_cgroup_is_empty(cg)) {
		r = isola_err_set(err, EEXIST, "conflict", "cgroup `%s` exists and is in use",
				  cg->path[0]);
		cg->n = 0; /* not ours: never remove */
		return r;
	}
	d = v1_dir(cg, PROC_CG_MEMORY);
	if (d && lim->memory_bytes) {
		proc_cg_format_limit(val, sizeof(val), lim->memory_bytes, 1);
		r = proc_cg_write(d, "memory.limit_in_bytes", val);
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "write `%s/memory.limit_in_bytes`", d);
			goto err_remove;
		}
		/* memsw = mem: no swap beyond the limit. Absent when swap accounting is off. */
		r = proc_cg_write(d, "memory.memsw.limit_in_bytes", val);
		if (r < 0 && r != -ENOENT) {
			isola_err_sys(err, -r, "internal", "write `%s/memory.memsw.limit_in_bytes`",
				      d);
			goto err_remove;
		}
		proc_cg_write(d, "memory.swappiness", "0");
	}
	d = v1_dir(cg, PROC_CG_PIDS);
	if (d && lim->pids) {
		proc_cg_format_limit(val, sizeof(val), lim->pids, 1);
		r = proc_cg_write(d, "pids.max", val);
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "write `%s/pids.max`", d);
			goto err_remove;
		}
	}
	d = v1_dir(cg, PROC_CG_CPU);
	if (d && lim->cpu_millis) {
		r = proc_cg_write(d, "cpu.cfs_period_us", "100000");
		if (r == 0) {
			proc_cg_format_cfs_quota(val, sizeof(val), lim->cpu_millis);
			r = proc_cg_write(d, "cpu.cfs_quota_us", val);
		}
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "write `%s/cpu.cfs_quota_us`", d);
			goto err_remove;
		}
	}
	return 0;

err_remove:
	for (unsigned i = cg->n; i-- > 0;)
		rmdir(cg->path[i]);
	return r;
}

static int v1_attach(const struct proc_cgroup *cg, pid_t pid, struct isola_err **err)
{
	char val[32];

	snprintf(val, sizeof(val), "%d", (int)pid);
	for (unsigned i = 0; i < cg->n; i++) {
		int r = proc_cg_write(cg->path[i], "cgroup.procs", val);

		if (r < 0)
			return isola_err_sys(err, -r, "internal", "attach %d to `%s`", (int)pid,
					     cg->path[i]);
	}
	return 0;
}

static int v1_stats(const struct proc_cgroup *cg, struct tier_stats *out, struct isola_err **err)
{
	const char *d;
	uint64_t v;

	if ((d = v1_dir(cg, PROC_CG_MEMORY))) {
		char path[600];
		cleanup_free char *body = NULL;

		if (proc_cg_read_u64(d, "memory.usage_in_bytes", &v) == 0)
			out->memory_bytes = v;
		if (proc_cg_read_u64(d, "memory.max_usage_in_bytes", &v) == 0)
			out->memory_peak_bytes = v;
		snprintf(path, sizeof(path), "%s/memory.oom_control", d);
		if (util_read_file(path, 4096, &body, NULL) == 0 &&
		    proc_cg_parse_keyed(body, "oom_kill", &v) == 0)
			out->oom_kills = v;
	}
	if ((d = v1_dir(cg, PROC_CG_CPUACCT)) && proc_cg_read_u64(d, "cpuacct.usage", &v) == 0)
		out->cpu_usec = v / 1000; /* ns */
	if ((d = v1_dir(cg, PROC_CG_PIDS)) && proc_cg_read_u64(d, "pids.current", &v) == 0)
		out->pids = (uint32_t)v;
	return 0;
}

/* Signals every pid listed in dir/cgroup.procs. Returns how many were listed. */
static int kill_listed(const char *dir)
{
	char path[600];
	cleanup_free char *body = NULL;
	int n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (util_read_file(path, 4 << 20, &body, NULL) < 0)
		return 0;
	for (char *p = body; *p;) {
		char *end;
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		p = end;
		while (*p == '\n')
			p++;
	}
	return n;
}

static int v1_kill_all(const struct proc_cgroup *cg)
{
	const char *fz = v1_dir(cg, PROC_CG_FREEZER);
	const char *pd = v1_dir(cg, PROC_CG_PIDS);
	struct timespec ts = {0, 1000000};

	/* Freeze first: a frozen task cannot exit, so a pid read from cgroup.procs
	 * cannot be recycled by an unrelated host process before we signal it. */
	if (fz)
		proc_cg_write(fz, "freezer.state", "FROZEN");
	for (int round = 0; round < 100; round++) {
		if (kill_listed(pd ? pd : cg->path[0]) == 0)
			break;
		if (fz) {
			proc_cg_write(fz, "freezer.state", "THAWED"); /* SIGKILL lands on thaw */
			nanosleep(&ts, NULL);
			proc_cg_write(fz, "freezer.state", "FROZEN");
		} else {
			nanosleep(&ts, NULL);
		}
	}
	if (fz)
		proc_cg_write(fz, "freezer.state", "THAWED");
	return 0;
}

/* Reads freezer.state into buf (trailing newline stripped). 0 or -errno. */
static int read_state(const char *dir, char *buf, size_t len)
{
	char path[600];
	cleanup_free char *body = NULL;
	int r;

	snprintf(path, sizeof(path), "%s/freezer.state", dir);
	r = util_read_file(path, 64, &body, NULL);
	if (r < 0)
		return r;
	body[strcspn(body, "\n")] = '\0';
	snprintf(buf, len, "%s", body);
	return 0;
}

static int v1_freeze(const struct proc_cgroup *cg, bool on, int timeout_ms, struct isola_err **err)
{
	const char *fz = v1_dir(cg, PROC_CG_FREEZER);
	const char *want = on ? "FROZEN" : "THAWED";
	int64_t deadline = proc_cg_now_ms() + timeout_ms;
	struct timespec ts = {0, 1000000};
	char state[32] = "";
	int r;

	if (!fz)
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "cgroup `%s`: this host has no v1 freezer hierarchy",
				     cg->n ? cg->path[0] : "?");
	r = proc_cg_write(fz, "freezer.state", want);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "write `%s/freezer.state`", fz);
	/* FROZEN is reached once every task stopped; the kernel reports FREEZING meanwhile
	 * (self_freezing is set at once, so the state file is the one to poll). The v1 freezer
	 * signals the tasks only when FROZEN is written: one that was being forked then is
	 * missed and the group stays FREEZING. So FROZEN is written again on every poll, and
	 * every 50th poll the group is thawed and frozen anew (as runc does). */
	for (unsigned polls = 1;; polls++) {
		r = read_state(fz, state, sizeof(state));
		if (r < 0)
			return isola_err_sys(err, -r, "internal", "read `%s/freezer.state`", fz);
		if (!strcmp(state, want))
			return 0;
		if (proc_cg_now_ms() >= deadline)
			break;
		nanosleep(&ts, NULL);
		if (ts.tv_nsec < 8000000)
			ts.tv_nsec *= 2;
		if (on && polls % 50 == 0)
			proc_cg_write(fz, "freezer.state", "THAWED");
		if (on)
			proc_cg_write(fz, "freezer.state", "FROZEN");
	}
	/* FREEZING that does not end: a task sleeps uninterruptibly (NFS, FUSE, a stuck
	 * device). Leave the sandbox running rather than half frozen. */
	if (on)
		proc_cg_write(fz, "freezer.state", "THAWED");
	return isola_err_set(err, ETIMEDOUT, "unavailable",
			     "cgroup `%s`: not %s after %d ms (state %s: a task is in "
			     "uninterruptible sleep)",
			     fz, want, timeout_ms, state);
}

static bool v1_is_frozen(const struct proc_cgroup *cg)
{
	const char *fz = v1_dir(cg, PROC_CG_FREEZER);
	char state[32];

	return fz && read_state(fz, state, sizeof(state)) == 0 && strcmp(state, "THAWED") != 0;
}

static char *v1_describe(void)
{
	const struct proc_cg_host *h = proc_cg_host();
	char buf[256] = "[";
	size_t off = 1;

	for (int c = 0; c < PROC_CG_NCTRL; c++)
		if (h->v1[c][0])
			off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s\"%s\"",
						off > 1 ? "," : "", proc_cg_ctrl_names[c]);
	snprintf(buf + off, sizeof(buf) - off, "]");
	return strdup(buf);
}

const struct cgroup_ops cgroup_v1_ops = {
	.version = 1,
	.name = "v1",
	.create = v1_create,
	.attach = v1_attach,
	.stats = v1_stats,
	.kill_all = v1_kill_all,
	.freeze = v1_freeze,
	.is_frozen = v1_is_frozen,
	.paths = v1_paths,
	.describe = v1_describe,
};
