/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup: detection of the host's cgroup layout and helpers shared by the v1 and v2 backends. */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../../common/util.h"

const char *const proc_cg_ctrl_names[PROC_CG_NCTRL] = {"memory", "pids", "cpu", "cpuacct",
						       "freezer"};

int proc_cg_format_path(char *buf, size_t len, const char *mnt, const char *id)
{
	int n = snprintf(buf, len, "%s/" PROC_CG_PARENT "/%s", mnt, id);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

void proc_cg_format_cpu_max(char *buf, size_t len, uint32_t cpu_millis)
{
	if (cpu_millis == 0)
		snprintf(buf, len, "max 100000");
	else
		snprintf(buf, len, "%" PRIu64 " 100000", (uint64_t)cpu_millis * 100);
}

void proc_cg_format_cfs_quota(char *buf, size_t len, uint32_t cpu_millis)
{
	if (cpu_millis == 0)
		snprintf(buf, len, "-1");
	else
		snprintf(buf, len, "%" PRIu64, (uint64_t)cpu_millis * 100);
}

void proc_cg_format_limit(char *buf, size_t len, uint64_t v, int version)
{
	if (v == 0)
		snprintf(buf, len, "%s", version == 2 ? "max" : "-1");
	else
		snprintf(buf, len, "%" PRIu64, v);
}

int proc_cg_parse_keyed(const char *body, const char *key, uint64_t *out)
{
	size_t kl = strlen(key);

	for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(p + kl + 1, &end, 10);
			if (errno || end == p + kl + 1)
				return -EINVAL;
			*out = v;
			return 0;
		}
	}
	return -ENOENT;
}

int64_t proc_cg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int proc_cg_write(const char *dir, const char *file, const char *s)
{
	char path[600];
	cleanup_fd int fd = -1;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		return -errno;
	return 0;
}

int proc_cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char path[600];
	cleanup_free char *body = NULL;
	char *end;
	int r;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	r = util_read_file(path, 4096, &body, NULL);
	if (r < 0)
		return r;
	if (strncmp(body, "max", 3) == 0) {
		*out = UINT64_MAX;
		return 0;
	}
	errno = 0;
	*out = strtoull(body, &end, 10);
	return errno || end == body ? -EINVAL : 0;
}

/* mountinfo line: id parent maj:min root mountpoint opts [tags] - fstype source superopts */
int proc_cg_parse_mountinfo(const char *body, struct proc_cg_host *h)
{
	const char *line = body;

	memset(h, 0, sizeof(*h));
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		char buf[1024], mnt[256], fstype[64], super[512];
		char *sep;

		if (ll < sizeof(buf)) {
			memcpy(buf, line, ll);
			buf[ll] = '\0';
			sep = strstr(buf, " - ");
			if (sep && sscanf(buf, "%*s %*s %*s %*s %255s", mnt) == 1 &&
			    sscanf(sep + 3, "%63s %*s %511s", fstype, super) == 2) {
				if (!strcmp(fstype, "cgroup2") && !h->v2[0])
					snprintf(h->v2, sizeof(h->v2), "%s", mnt);
				else if (!strcmp(fstype, "cgroup"))
					for (int c = 0; c < PROC_CG_NCTRL; c++) {
						char *tok, *save = NULL, opts[512];

						snprintf(opts, sizeof(opts), "%s", super);
						for (tok = strtok_r(opts, ",", &save); tok;
						     tok = strtok_r(NULL, ",", &save))
							if (!strcmp(tok, proc_cg_ctrl_names[c]) &&
							    !h->v1[c][0])
								snprintf(h->v1[c], sizeof(h->v1[c]),
									 "%s", mnt);
					}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

static struct proc_cg_host host_layout;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_parse(void)
{
	cleanup_free char *body = NULL;

	if (util_read_file("/proc/self/mountinfo", 1 << 20, &body, NULL) == 0)
		proc_cg_parse_mountinfo(body, &host_layout);
}

const struct proc_cg_host *proc_cg_host(void)
{
	pthread_once(&host_once, host_parse);
	return &host_layout;
}

static bool v2_has_controllers(const char *mnt)
{
	char path[2048];
	cleanup_free char *body = NULL;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
	if (util_read_file(path, 4096, &body, NULL) < 0)
		return false;
	return strstr(body, "memory") && strstr(body, "pids");
}

const struct cgroup_ops *proc_cgroup_detect(struct isola_err **err)
{
	const struct proc_cg_host *h = proc_cg_host();

	/* Pure v2 (or a hybrid whose unified tree already got the controllers). */
	if (h->v2[0] && v2_has_controllers(h->v2))
		return &cgroup_v2_ops;
	/* Hybrid/legacy: memory and pids on v1 are the minimum we limit with. */
	if (h->v1[PROC_CG_MEMORY][0] && h->v1[PROC_CG_PIDS][0])
		return &cgroup_v1_ops;
	isola_err_set(
		err, ENOTSUP, "unavailable",
		"no usable cgroup hierarchy: need cgroup v2 with memory+pids or v1 memory and "
		"pids controllers");
	return NULL;
}

bool proc_cgroup_is_empty(const struct proc_cgroup *cg)
{
	for (unsigned i = 0; i < cg->n; i++) {
		char path[600];
		cleanup_free char *body = NULL;

		snprintf(path, sizeof(path), "%s/cgroup.procs", cg->path[i]);
		if (util_read_file(path, 1 << 20, &body, NULL) < 0)
			continue; /* gone already */
		if (body[0])
			return false;
	}
	return true;
}

int proc_cgroup_remove(const struct proc_cgroup *cg, int timeout_ms, struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + (uint64_t)timeout_ms;
	struct timespec ts = {0, 1000000};

	while (!proc_cgroup_is_empty(cg)) {
		if (util_now_ms() > deadline)
			return isola_err_set(err, EBUSY, "busy", "cgroup `%s` still has processes",
					     cg->path[0]);
		nanosleep(&ts, NULL);
	}
	for (unsigned i = 0; i < cg->n; i++) {
		/* A cgroup whose last task just exited can report EBUSY for a moment. */
		for (;;) {
			if (rmdir(cg->path[i]) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY || util_now_ms() > deadline)
				return isola_err_sys(err, errno, "internal", "rmdir `%s`",
						     cg->path[i]);
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
