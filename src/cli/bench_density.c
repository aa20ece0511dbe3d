/* SPDX-License-Identifier: Apache-2.0 */
/* bench_density: `isola bench --density N` — what an idle sandbox costs the host. */
#include "bench_density.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "bench.h"
#include "parse.h"

/*
 * N sandboxes are created and left idle; then, for each, the processes of its cgroup tree
 * (found from its host pid, which isolad tells the operator only) are measured by PSS, so
 * text shared between sandboxes is counted once across them, and its cgroup's kernel memory
 * (page tables, slab, sockets, the namespaces' objects charged to it) is read. isolad's own
 * PSS growth is spread over the N. The host's used memory (MemTotal - MemAvailable) before and
 * after is reported too: it holds everything, including what no cgroup is charged for (a
 * network namespace's devices, nftables state), and everything else the host did meanwhile.
 * The bench runs where isolad runs, as its operator: it reads /proc and /sys/fs/cgroup.
 */

struct density {
	double pss_kib;	    /* PSS of the sandboxes' processes, summed */
	double kernel_kib;  /* kernel memory of their cgroups, summed */
	long procs;	    /* processes counted */
	long measured;	    /* sandboxes measured */
	double *create_ms;  /* per create */
	double ls_empty_ms; /* GET /v1/sandboxes p50 before the creates */
	double ls_full_ms;  /* the same with the N alive */
};

static long long pss_kib(long pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", pid);
	return util_file_key(path, "Pss:");
}

static long long host_used_kib(void)
{
	long long total = util_file_key("/proc/meminfo", "MemTotal:");
	long long avail = util_file_key("/proc/meminfo", "MemAvailable:");

	return total < 0 || avail < 0 ? -1 : total - avail;
}

/* The memory cgroup directory of pid: the v1 memory hierarchy's when it has one, else the
 * unified hierarchy's. Returns 0 or -errno. */
static int memory_cgroup(long pid, char *dir, size_t size)
{
	char path[64], line[4096], v2[4096] = "";
	FILE *f;
	bool unified_only = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;

	snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2;

		if (nl)
			*nl = '\0';
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (!strcmp(c1 + 1, "memory") || strstr(c1 + 1, "memory,") ||
		    strstr(c1 + 1, ",memory")) {
			snprintf(dir, size, "/sys/fs/cgroup/memory%s", c2 + 1);
			fclose(f);
			return 0;
		}
		if (!strcmp(line, "0") && c1[1] == '\0')
			snprintf(v2, sizeof(v2), "%s", c2 + 1);
	}
	fclose(f);
	if (!v2[0])
		return -ENOENT;
	snprintf(dir, size, "%s%s", unified_only ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified", v2);
	return 0;
}

/* Kernel memory charged to the cgroup dir in KiB (v1 kmem counter or v2 memory.stat), or -1. */
static long long cgroup_kernel_kib(const char *dir)
{
	char path[4200];
	long long v;

	snprintf(path, sizeof(path), "%s/memory.kmem.usage_in_bytes", dir);
	v = util_file_key(path, "");
	if (v >= 0)
		return v / 1024;
	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	v = util_file_key(path, "kernel ");
	return v >= 0 ? v / 1024 : -1;
}

/* Adds the PSS of every process in the cgroup tree at dir to d. */
static void cgroup_tree_pss(const char *dir, struct density *d, int depth)
{
	char path[4200], line[32];
	FILE *f;
	DIR *dh;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		long long pss = pss_kib(strtol(line, NULL, 10));

		if (pss >= 0) {
			d->pss_kib += (double)pss;
			d->procs++;
		}
	}
	if (f)
		fclose(f);
	if (depth > 8 || !(dh = opendir(dir)))
		return;
	while ((e = readdir(dh))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		cgroup_tree_pss(path, d, depth + 1);
	}
	closedir(dh);
}

/* p50 of 11 `GET /v1/sandboxes` round trips in ms, or -1. */
static double ls_p50(struct client *cl, struct isola_err **err)
{
	double ms[11];

	for (size_t i = 0; i < 11; i++) {
		uint64_t t0 = util_now_ns();
		json_t *out = NULL;

		if (client_json(cl, "GET", "/v1/sandboxes", NULL, &out, err) < 0)
			return -1;
		json_decref(out);
		ms[i] = (double)(util_now_ns() - t0) / 1e6;
	}
	return bench_median(ms, 11);
}

/* Measures sandbox id's processes and cgroup into d. */
static int measure_one(struct client *cl, const char *id, struct density *d, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s", id);
	char dir[4096];
	json_t *sb = NULL;
	long pid;
	long long kern;
	int r;

	r = client_json(cl, "GET", path, NULL, &sb, err);
	if (r < 0)
		return r;
	pid = (long)json_integer_value(json_object_get(sb, "host_pid"));
	json_decref(sb);
	if (pid <= 0)
		return isola_err_set(err, EPERM, "forbidden",
				     "bench --density: isolad gave no host pid for sandbox %s (it "
				     "tells only its operator; run as root or the isola group)",
				     id);
	r = memory_cgroup(pid, dir, sizeof(dir));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "bench --density: the cgroup of pid %ld", pid);
	cgroup_tree_pss(dir, d, 0);
	kern = cgroup_kernel_kib(dir);
	if (kern > 0)
		d->kernel_kib += (double)kern;
	d->measured++;
	return 0;
}

int bench_density(struct cli *cli, struct client *cl, int n, const char *tier, json_t **report,
		  struct isola_err **err)
{
	struct density d = {0};
	char **ids = calloc((size_t)n, sizeof(*ids));
	long isolad = bench_daemon_pid(cli->conf.socket);
	long long isolad0, isolad1, used0, used1;
	int made = 0, r = 0;

	d.create_ms = calloc((size_t)n, sizeof(*d.create_ms));
	if (!ids || !d.create_ms) {
		free(ids);
		free(d.create_ms);
		return isola_err_sys(err, ENOMEM, NULL, "bench --density");
	}
	if (cli->conf.url || isolad <= 0) {
		r = isola_err_set(err, EINVAL, "invalid_argument",
				  "bench --density measures the host isolad runs on: it needs "
				  "isolad's unix socket (--socket), not a URL");
		goto out;
	}
	isolad0 = pss_kib(isolad);
	used0 = host_used_kib();
	d.ls_empty_ms = ls_p50(cl, err);
	if (d.ls_empty_ms < 0) {
		r = -EIO;
		goto out;
	}
	for (; made < n; made++) {
		/* An idle sandbox needs little: a tenth of a CPU and 32 MiB keep N=500 inside the
		 * host's admission (isolad --cpu-overcommit/--memory-overcommit) on a 2-CPU, 24 GiB
		 * host; the limits do not change what an idle sandbox uses. A microvm's guest
		 * kernel needs 128 MiB. */
		json_t *body = json_pack("{s:f, s:s}", "cpu", 0.1, "memory",
					 tier && strcmp(tier, "process") ? "128M" : "32M"),
		       *sb = NULL;
		uint64_t t0 = util_now_ns();
		const char *id;

		if (tier)
			json_object_set_new(body, "tier", json_string(tier));
		r = client_json(cl, "POST", "/v1/sandboxes", body, &sb, err);
		json_decref(body);
		if (r < 0)
			goto out;
		d.create_ms[made] = (double)(util_now_ns() - t0) / 1e6;
		id = json_string_value(json_object_get(sb, "id"));
		ids[made] = id ? strdup(id) : NULL;
		json_decref(sb);
		if (!ids[made]) {
			r = isola_err_set(err, EPROTO, "internal", "create: reply has no id");
			goto out;
		}
	}
	sleep(2); /* idle: let the agents' start-up allocations settle */
	for (int i = 0; i < n; i++) {
		r = measure_one(cl, ids[i], &d, err);
		if (r < 0)
			goto out;
	}
	isolad1 = pss_kib(isolad);
	used1 = host_used_kib();
	d.ls_full_ms = ls_p50(cl, err);
	if (d.ls_full_ms < 0) {
		r = -EIO;
		goto out;
	}
	{
		double pss = d.pss_kib / n, kern = d.kernel_kib / n;
		double growth = isolad0 >= 0 && isolad1 >= 0 ? (double)(isolad1 - isolad0) / n : 0;
		/* isolad shrinking meanwhile (memory it returned, its pool's own sandboxes
		 * gone) does not make a sandbox cheaper: only growth is charged to them. */
		double charged = growth > 0 ? growth : 0;

		*report =
			json_pack("{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "tier",
				  tier ? tier : "default", "sandboxes", n, "create_ms_p50",
				  bench_median(d.create_ms, (size_t)n), "processes_per_sandbox",
				  (double)d.procs / n, "processes_pss_kib", pss,
				  "cgroup_kernel_kib", kern, "isolad_growth_kib", growth,
				  "overhead_kib", pss + kern + charged, "host_used_delta_kib",
				  used0 >= 0 && used1 >= 0 ? (double)(used1 - used0) / n : 0,
				  "ls_ms_p50", d.ls_full_ms, "ls_empty_ms_p50", d.ls_empty_ms);
	}
out:
	for (int i = 0; i < n; i++) { /* every one made, also after a failure */
		cleanup_free char *path = NULL;

		if (!ids[i])
			continue;
		path = cli_pathf("/v1/sandboxes/%s", ids[i]);
		client_json(cl, "DELETE", path, NULL, NULL, NULL);
		free(ids[i]);
	}
	free(ids);
	free(d.create_ms);
	return r;
}

void bench_density_print(const json_t *j)
{
	double v;

#define NUM(k) json_number_value(json_object_get(j, k))
	printf("idle sandboxes (tier %s): %lld alive at once, create p50 %.1f ms\n",
	       json_string_value(json_object_get(j, "tier")),
	       (long long)json_integer_value(json_object_get(j, "sandboxes")),
	       NUM("create_ms_p50"));
	printf("  per sandbox: %.1f processes, PSS %.0f KiB; cgroup kernel memory %.0f KiB; isolad "
	       "growth %.0f KiB\n",
	       NUM("processes_per_sandbox"), NUM("processes_pss_kib"), NUM("cgroup_kernel_kib"),
	       NUM("isolad_growth_kib"));
	v = NUM("overhead_kib");
	printf("  cost of an idle sandbox: %.0f KiB (target <= 1024 KiB)\n", v);
	printf("  host memory in use grew by %.0f KiB per sandbox (everything on the host, "
	       "noisy)\n",
	       NUM("host_used_delta_kib"));
	printf("  isola ls: p50 %.1f ms with them alive, %.1f ms before (target <= 50 ms)\n",
	       NUM("ls_ms_p50"), NUM("ls_empty_ms_p50"));
#undef NUM
}
