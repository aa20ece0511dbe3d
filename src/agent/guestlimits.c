/* SPDX-License-Identifier: Apache-2.0 */
/* guestlimits: a microvm guest's own limits (a cgroup with pids.max) and the counters it reports. */
#include "agent-internal.h"
#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* Writes val to path. 0 or -errno. */
static int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = util_write_all(fd, val, strlen(val));
	close(fd);
	return r;
}

int guest_num_parse(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	*out = 0;
	if (!s || !*s)
		return 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > max)
			return -EINVAL;
	}
	*out = v;
	return 0;
}

int guest_cgroup_setup(uint32_t pids, char *why, size_t len)
{
	char val[32];
	const char *step;
	int r;

	step = "mount cgroup2 on " GUEST_CG_ROOT;
	mkdir(GUEST_CG_ROOT, 0755);
	r = mount("cgroup2", GUEST_CG_ROOT, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (r < 0 && errno != EBUSY)
		goto fail;
	/* pids only: the guest's RAM is its memory limit, and OOM kills are counted from
	 * /proc/vmstat (guest_counters_reply). */
	step = "enable the pids controller";
	r = write_str(GUEST_CG_ROOT "/cgroup.subtree_control", "+pids");
	if (r < 0)
		goto fail_r;
	step = "create " GUEST_CG;
	if (mkdir(GUEST_CG, 0755) < 0 && errno != EEXIST)
		goto fail;
	if (pids) {
		step = "write " GUEST_CG "/pids.max";
		snprintf(val, sizeof(val), "%" PRIu32, pids);
		r = write_str(GUEST_CG "/pids.max", val);
		if (r < 0)
			goto fail_r;
	}
	/* The agent itself goes in, before it serves: everything it spawns is born inside, so
	 * nothing can race the move, and the count includes the agent as on the process tier
	 * (whose agent is in the sandbox's cgroup too). Kernel threads stay in the root. */
	step = "move the agent into " GUEST_CG;
	r = write_str(GUEST_CG "/cgroup.procs", "0");
	if (r < 0)
		goto fail_r;
	return 0;
fail:
	r = -errno;
fail_r:
	snprintf(why, len, "%s", step);
	return r;
}

int guest_vmstat_get(const char *text, const char *key, uint64_t *out)
{
	size_t kl = strlen(key);

	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');

		if (!strncmp(line, key, kl) && line[kl] == ' ') {
			const char *p = line + kl + 1;
			uint64_t v = 0;

			if (*p < '0' || *p > '9')
				return -EINVAL;
			for (; *p >= '0' && *p <= '9'; p++) {
				uint64_t d = (uint64_t)(*p - '0');

				if (v > (UINT64_MAX - d) / 10)
					return -ERANGE;
				v = v * 10 + d;
			}
			*out = v;
			return 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int guest_token_find(const char *buf, size_t len, const char *prefix, size_t hexlen, char *nonce)
{
	size_t pl = strlen(prefix);

	for (size_t i = 0; i + pl + hexlen + 1 <= len; i++) {
		size_t k;

		if (memcmp(buf + i, prefix, pl) != 0)
			continue;
		for (k = 0; k < hexlen; k++) {
			char ch = buf[i + pl + k];

			if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
				break;
		}
		if (k < hexlen || buf[i + pl + hexlen] != '\n')
			continue;
		memcpy(nonce, buf + i + pl, hexlen);
		nonce[hexlen] = '\0';
		return (int)(i + pl + hexlen + 1);
	}
	return -1;
}

int guest_counters_reply(const char *nonce, char *out, size_t len)
{
	cleanup_free char *vm = NULL;
	uint64_t oom = 0;
	int r, n;

	/* oom_kill counts every OOM kill of this guest's kernel since boot (a restored clone
	 * goes on from its snapshot's count): the sandbox's processes are all there is. */
	r = util_read_file("/proc/vmstat", 1 << 16, &vm, NULL);
	if (r == 0)
		r = guest_vmstat_get(vm, "oom_kill", &oom);
	if (r < 0)
		return r;
	n = snprintf(out, len, "%s%s oom_kill=%" PRIu64 "\n", GUEST_COUNTERS_REPLY, nonce, oom);
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}
