/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup-v2: the unified-hierarchy backend (one directory, cgroup.kill, memory.events). */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../common/util.h"

static int v2_paths(const char *id, struct proc_cgroup *cg)
{
	const struct proc_cg_host *h = proc_cg_host();

	memset(cg, 0, sizeof(*cg));
	cg->version = 2;
	if (!h->v2[0])
		return -ENOENT;
	if (proc_cg_format_path(cg->path[0], sizeof(cg->path[0]), h->v2, id) < 0)
		return -ENAMETOOLONG;
	snprintf(cg->ctrl[0], sizeof(cg->ctrl[0]), "unified");
	cg->n = 1;
	return 0;
}

/* Enables the controllers we need in dir's children (ignores ones the host lacks). */
static void enable_controllers(const char *dir)
{
	static const char *const want[] = {"+memory", "+pids", "+cpu"};

	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		proc_cg_write(dir, "cgroup.subtree_control", want[i]);
}

static int v2_create(const char *id, const struct proc_cg_limits *lim, struct proc_cgroup *cg,
		     struct isola_err **err)
{
	char parent[512], val[64];
	const char *d;
	int r;

	r = v2_paths(id, cg);
	if (r < 0)
		return isola_err_set(err, -r, "internal", "no cgroup2 path for `%s`", id);
	d = cg->path[0];
	snprintf(parent, sizeof(parent), "%s", d);
	*strrchr(parent, '/') = '\0';
	enable_controllers(proc_cg_host()->v2);
	if (mkdir(parent, 0755) < 0 && errno != EEXIST)
		return isola_err_sys(err, errno, "internal", "mkdir `%s`", parent);
	enable_controllers(parent);
	if (mkdir(d, 0755) < 0) {
		r = isola_err_sys(err, errno, errno == EEXIST ? "conflict" : "internal",
				  "mkdir `%s`", d);
		cg->n = 0; /* an existing directory is not ours to remove */
		return r;
	}
	if (lim->memory_bytes) {
		proc_cg_format_limit(val, sizeof(val), lim->memory_bytes, 2);
		r = proc_cg_write(d, "memory.max", val);
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "write `%s/memory.max`", d);
			goto err_remove;
		}
		/* No swap: memory use stays what the limit says. Absent without swap. */
		r = proc_cg_write(d, "memory.swap.max", "0");
		if (r < 0 && r != -ENOENT) {
			isola_err_sys(err, -r, "internal", "write `%s/memory.swap.max`", d);
			goto err_remove;
		}
	}
	if (lim->pids) {
		proc_cg_format_limit(val, sizeof(val), lim->pids, 2);
		r = proc_cg_write(d, "pids.max", val);
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "write `%s/pids.max`", d);
			goto err_remove;
		}
	}
	if (lim->cpu_millis) {
		proc_cg_format_cpu_max(val, sizeof(val), lim->cpu_millis);
		r = proc_cg_write(d, "cpu.max", val);
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "write `%s/cpu.max`", d);
			goto err_remove;
		}
	}
	return 0;

err_remove:
	rmdir(d);
	return r;
}

static int v2_attach(const struct proc_cgroup *cg, pid_t pid, struct isola_err **err)
{
	char val[32];
	int r;

	snprintf(val, sizeof(val), "%d", (int)pid);
	r = proc_cg_write(cg->path[0], "cgroup.procs", val);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "attach %d to `%s`", (int)pid,
				     cg->path[0]);
	return 0;
}

static int v2_stats(const struct proc_cgroup *cg, struct tier_stats *out, struct isola_err **err)
{
	const char *d = cg->path[0];
	char path[600];
	uint64_t v;

	if (proc_cg_read_u64(d, "memory.current", &v) == 0)
		out->memory_bytes = v;
	if (proc_cg_read_u64(d, "memory.peak", &v) == 0)
		out->memory_peak_bytes = v;
	if (proc_cg_read_u64(d, "pids.current", &v) == 0)
		out->pids = (uint32_t)v;
	{
		cleanup_free char *body = NULL;

		snprintf(path, sizeof(path), "%s/memory.events", d);
		if (util_read_file(path, 4096, &body, NULL) == 0 &&
		    proc_cg_parse_keyed(body, "oom_kill", &v) == 0)
			out->oom_kills = v;
	}
	{
		cleanup_free char *body = NULL;

		snprintf(path, sizeof(path), "%s/cpu.stat", d);
		if (util_read_file(path, 4096, &body, NULL) == 0 &&
		    proc_cg_parse_keyed(body, "usage_usec", &v) == 0)
			out->cpu_usec = v;
	}
	return 0;
}

static int v2_kill_all(const struct proc_cgroup *cg)
{
	/* cgroup.kill (5.14+) kills atomically, no pid-reuse race. */
	return proc_cg_write(cg->path[0], "cgroup.kill", "1");
}

/* The `frozen` value of an open cgroup.events (re-read from offset 0). 0/1 or -errno. */
static int read_frozen(int fd)
{
	char body[512];
	uint64_t v;
	ssize_t n = pread(fd, body, sizeof(body) - 1, 0);

	if (n < 0)
		return -errno;
	body[n] = '\0';
	if (proc_cg_parse_keyed(body, "frozen", &v) < 0)
		return -ENOTSUP; /* kernel before 5.2: no cgroup.freeze */
	return v ? 1 : 0;
}

static int v2_freeze(const struct proc_cgroup *cg, bool on, int timeout_ms, struct isola_err **err)
{
	const char *d = cg->path[0];
	int64_t deadline = proc_cg_now_ms() + timeout_ms;
	char path[600];
	cleanup_fd int fd = -1;
	int r;

	snprintf(path, sizeof(path), "%s/cgroup.events", d);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "open `%s`", path);
	/* A core cgroup2 file: works without any controller enabled. */
	r = proc_cg_write(d, "cgroup.freeze", on ? "1" : "0");
	if (r < 0)
		return isola_err_sys(err, -r, r == -ENOENT ? "not_supported" : "internal",
				     "write `%s/cgroup.freeze`", d);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLPRI};
		int64_t left;

		r = read_frozen(fd);
		if (r < 0)
			return isola_err_sys(err, -r, r == -ENOTSUP ? "not_supported" : "internal",
					     "read `%s`", path);
		if (r == (int)on)
			return 0;
		left = deadline - proc_cg_now_ms();
		if (left <= 0)
			break;
		/* The kernel notifies cgroup.events (POLLPRI) when `frozen` changes; the
		 * 20 ms cap only guards against a missed notification. */
		if (poll(&p, 1, left < 20 ? (int)left : 20) < 0 && errno != EINTR)
			return isola_err_sys(err, errno, "internal", "poll `%s`", path);
	}
	if (on)
		proc_cg_write(d, "cgroup.freeze", "0");
	return isola_err_set(err, ETIMEDOUT, "unavailable",
			     "cgroup `%s`: not %s after %d ms (a task is in uninterruptible sleep)",
			     d, on ? "frozen" : "thawed", timeout_ms);
}

static bool v2_is_frozen(const struct proc_cgroup *cg)
{
	uint64_t v = 0;

	return cg->n && proc_cg_read_u64(cg->path[0], "cgroup.freeze", &v) == 0 && v == 1;
}

static char *v2_describe(void)
{
	char path[300];
	char *body = NULL, *out;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", proc_cg_host()->v2);
	if (util_read_file(path, 4096, &body, NULL) < 0)
		return strdup("[]");
	out = malloc(strlen(body) * 3 + 4);
	if (!out) {
		free(body);
		return NULL;
	}
	out[n++] = '[';
	for (char *sv = NULL, *tok = strtok_r(body, " \n", &sv); tok;
	     tok = strtok_r(NULL, " \n", &sv))
		n += (size_t)sprintf(out + n, "%s\"%s\"", n > 1 ? "," : "", tok);
	out[n++] = ']';
	out[n] = '\0';
	free(body);
	return out;
}

const struct cgroup_ops cgroup_v2_ops = {
	.version = 2,
	.name = "v2",
	.create = v2_create,
	.attach = v2_attach,
	.stats = v2_stats,
	.kill_all = v2_kill_all,
	.freeze = v2_freeze,
	.is_frozen = v2_is_frozen,
	.paths = v2_paths,
	.describe = v2_describe,
};
