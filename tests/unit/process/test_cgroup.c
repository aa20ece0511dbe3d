/* SPDX-License-Identifier: Apache-2.0 */
/* test_cgroup: cgroup v1/v2 layout parsing, path and value formatting (pure logic). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolad/tiers/process/process-internal.h"
#include "../tap.h"

static const char hybrid[] =
	"30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
	"34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	"36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
	"38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
	"39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
	"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char combined[] =
	"31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
	"34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";

static const char unified[] =
	"25 21 0:22 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

static void put(const char *dir, const char *name, const char *body)
{
	char p[600];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f) {
		fputs(body, f);
		fclose(f);
	}
}

/* The v2 backend reads its counters from one directory: run it on a fake one, so the OOM
 * report (memory.events oom_kill) is tested on hosts whose controllers are on v1. The v1
 * backend is exercised live by tests/security/test_limits.py on such hosts. */
static void v2_stats_from_files(void)
{
	char dir[] = "/tmp/isola-cgv2-XXXXXX";
	struct proc_cgroup cg = {.version = 2, .n = 1};
	struct tier_stats st;

	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(cg.path[0], sizeof(cg.path[0]), "%s", dir);
	put(dir, "memory.current", "1048576\n");
	put(dir, "memory.peak", "67108864\n");
	put(dir, "pids.current", "12\n");
	put(dir, "memory.events", "low 0\nhigh 0\nmax 41\noom 3\noom_kill 3\noom_group_kill 0\n");
	put(dir, "cpu.stat",
	    "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
	    "nr_periods 30\nnr_throttled 12\nthrottled_usec 800000\n");
	memset(&st, 0, sizeof(st));
	ok(cgroup_v2_ops.stats(&cg, &st, NULL) == 0, "v2 stats from a cgroup directory");
	ok(st.oom_kills == 3, "v2: oom_kill from memory.events (%llu)",
	   (unsigned long long)st.oom_kills);
	ok(st.memory_bytes == 1048576 && st.memory_peak_bytes == 67108864,
	   "v2: memory.current and memory.peak");
	ok(st.cpu_usec == 2500000 && st.pids == 12, "v2: cpu.stat usage_usec and pids.current");
	for (const char *const *n =
		     (const char *const[]){"memory.current", "memory.peak", "pids.current",
					   "memory.events", "cpu.stat", NULL};
	     *n; n++) {
		char p[600];

		snprintf(p, sizeof(p), "%s/%s", dir, *n);
		unlink(p);
	}
	rmdir(dir);
}

int main(void)
{
	struct proc_cg_host h;
	char buf[600];
	uint64_t v = 0;

	proc_cg_parse_mountinfo(hybrid, &h);
	ok(!strcmp(h.v2, "/sys/fs/cgroup/unified"), "hybrid: cgroup2 mount found (%s)", h.v2);
	ok(!strcmp(h.v1[PROC_CG_MEMORY], "/sys/fs/cgroup/memory"), "hybrid: v1 memory mount");
	ok(!strcmp(h.v1[PROC_CG_PIDS], "/sys/fs/cgroup/pids"), "hybrid: v1 pids mount");
	ok(!strcmp(h.v1[PROC_CG_CPUACCT], "/sys/fs/cgroup/cpuacct"), "hybrid: v1 cpuacct mount");
	ok(!strcmp(h.v1[PROC_CG_FREEZER], "/sys/fs/cgroup/freezer"), "hybrid: v1 freezer mount");
	ok(h.v1[PROC_CG_CPU][0] && strcmp(h.v1[PROC_CG_CPU], h.v1[PROC_CG_CPUACCT]),
	   "hybrid: cpu and cpuacct are separate hierarchies");

	proc_cg_parse_mountinfo(combined, &h);
	ok(!strcmp(h.v1[PROC_CG_CPU], "/sys/fs/cgroup/cpu,cpuacct") &&
		   !strcmp(h.v1[PROC_CG_CPU], h.v1[PROC_CG_CPUACCT]),
	   "combined cpu,cpuacct hierarchy maps both controllers to one mount");
	ok(!h.v2[0] && !h.v1[PROC_CG_PIDS][0], "absent controllers stay empty");

	proc_cg_parse_mountinfo(unified, &h);
	ok(!strcmp(h.v2, "/sys/fs/cgroup") && !h.v1[PROC_CG_MEMORY][0], "pure v2 layout");

	ok(proc_cg_format_path(buf, sizeof(buf), "/sys/fs/cgroup/memory", "abc-1") == 0 &&
		   !strcmp(buf, "/sys/fs/cgroup/memory/isola/abc-1"),
	   "v1 path is <mnt>/isola/<id> (%s)", buf);
	ok(proc_cg_format_path(buf, 20, "/sys/fs/cgroup/memory", "abc-1") == -ENAMETOOLONG,
	   "path overflow is refused, not truncated");

	proc_cg_format_cpu_max(buf, sizeof(buf), 0);
	ok(!strcmp(buf, "max 100000"), "v2 cpu.max unlimited: %s", buf);
	proc_cg_format_cpu_max(buf, sizeof(buf), 1500);
	ok(!strcmp(buf, "150000 100000"), "v2 cpu.max 1.5 cores: %s", buf);
	proc_cg_format_cfs_quota(buf, sizeof(buf), 0);
	ok(!strcmp(buf, "-1"), "v1 cfs_quota unlimited: %s", buf);
	proc_cg_format_cfs_quota(buf, sizeof(buf), 250);
	ok(!strcmp(buf, "25000"), "v1 cfs_quota 250 millicores: %s", buf);
	proc_cg_format_limit(buf, sizeof(buf), 0, 2);
	ok(!strcmp(buf, "max"), "v2 unlimited is max");
	proc_cg_format_limit(buf, sizeof(buf), 0, 1);
	ok(!strcmp(buf, "-1"), "v1 unlimited is -1");
	proc_cg_format_limit(buf, sizeof(buf), 268435456, 1);
	ok(!strcmp(buf, "268435456"), "limit in bytes");

	ok(proc_cg_parse_keyed("low 0\nhigh 0\nmax 3\noom 2\noom_kill 7\n", "oom_kill", &v) == 0 &&
		   v == 7,
	   "v2 memory.events oom_kill = 7");
	ok(proc_cg_parse_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n", "oom_kill", &v) ==
			   0 &&
		   v == 4,
	   "v1 memory.oom_control: oom_kill not confused with oom_kill_disable");
	ok(proc_cg_parse_keyed("usage_usec 12\n", "oom_kill", &v) == -ENOENT, "missing key");
	ok(proc_cg_parse_keyed("oom_kill x\n", "oom_kill", &v) == -EINVAL, "garbage value");
	v2_stats_from_files();
	return tap_done();
}
