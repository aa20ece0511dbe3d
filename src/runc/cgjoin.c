/* SPDX-License-Identifier: Apache-2.0 */
/* cgjoin: puts an engine-facing relay into its sandbox's cgroups (docs/oci.md, "Stats"). */
#include "cgjoin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

/* True when every comma-separated item of ctrls is one of the comma-separated opts. */
static bool has_all(const char *opts, const char *ctrls)
{
	const char *c = ctrls;

	while (*c) {
		size_t cl = strcspn(c, ",");
		bool found = false;

		for (const char *o = opts; *o && !found;) {
			size_t ol = strcspn(o, ",");

			found = ol == cl && !strncmp(o, c, cl);
			o += ol + (o[ol] == ',');
		}
		if (!found)
			return false;
		c += cl + (c[cl] == ',');
	}
	return true;
}

int oci_cg_mount_of(const char *mountinfo, const char *ctrls, char *out, size_t n)
{
	for (const char *line = mountinfo, *eol; line && *line; line = eol ? eol + 1 : NULL) {
		size_t len;
		char buf[4096], *tok[64], *save = NULL, *t;
		int nt = 0, dash = -1;

		eol = strchr(line, '\n');
		len = eol ? (size_t)(eol - line) : strlen(line);
		if (len >= sizeof(buf))
			continue;
		memcpy(buf, line, len);
		buf[len] = '\0';
		/* id parent maj:min root mountpoint options [optional...] - fstype source super */
		for (t = strtok_r(buf, " ", &save); t && nt < 64; t = strtok_r(NULL, " ", &save)) {
			if (dash < 0 && nt >= 6 && !strcmp(t, "-"))
				dash = nt;
			tok[nt++] = t;
		}
		if (dash < 0 || nt < dash + 4)
			continue;
		/* The hierarchy's root, at a path without escapes (\040 for a space). */
		if (strcmp(tok[3], "/") != 0 || strchr(tok[4], '\\'))
			continue;
		if (*ctrls ? strcmp(tok[dash + 1], "cgroup") != 0 || !has_all(tok[dash + 3], ctrls)
			   : strcmp(tok[dash + 1], "cgroup2") != 0)
			continue;
		if ((size_t)snprintf(out, n, "%s", tok[4]) >= n)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

bool oci_cg_is_sandbox(const char *path, const char *sandbox)
{
	const char *last = strrchr(path, '/');

	if (path[0] != '/' || !*sandbox || !last || strcmp(last + 1, sandbox) != 0)
		return false;
	for (const char *p = path; *p; p += strcspn(p, "/")) {
		p++;
		if ((p[0] == '.' && (p[1] == '/' || !p[1])) ||
		    (p[0] == '.' && p[1] == '.' && (p[2] == '/' || !p[2])))
			return false;
	}
	return true;
}

/* Writes pid into DIR/cgroup.procs (no symlink followed at the last component). */
static int join_one(const char *mnt, const char *path, pid_t pid, struct isola_err **err)
{
	char file[PATH_MAX], val[32];
	int fd, r = 0;

	if ((size_t)snprintf(file, sizeof(file), "%s%s/cgroup.procs", mnt, path) >= sizeof(file))
		return isola_err_set(err, ENAMETOOLONG, NULL, "cgroup `%s%s`: path too long", mnt,
				     path);
	snprintf(val, sizeof(val), "%d", (int)pid);
	fd = open(file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || util_write_all(fd, val, strlen(val)) < 0)
		r = isola_err_sys(err, errno, NULL, "move %d into `%s`", (int)pid, file);
	if (fd >= 0)
		close(fd);
	return r;
}

int oci_cgroup_join(pid_t init, const char *sandbox, pid_t pid, struct isola_err **err)
{
	cleanup_free char *cgroups = NULL;
	cleanup_free char *mountinfo = NULL;
	char path[64];
	int joined = 0, r;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)init);
	r = util_read_file(path, 64 << 10, &cgroups, NULL);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "read `%s`", path);
	r = util_read_file("/proc/self/mountinfo", 4 << 20, &mountinfo, NULL);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "read `/proc/self/mountinfo`");
	/* hierarchy-id:controllers:path, one line per hierarchy (cgroups(7)). */
	for (char *line = cgroups, *next; line && *line; line = next) {
		char *c1, *c2, mnt[PATH_MAX];

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		c1 = strchr(line, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (!oci_cg_is_sandbox(c2 + 1, sandbox))
			continue;
		r = oci_cg_mount_of(mountinfo, c1 + 1, mnt, sizeof(mnt));
		if (r < 0)
			return isola_err_sys(err, -r, NULL,
					     "cgroup `%s` of hierarchy `%s`: no mount of it found",
					     c2 + 1, *(c1 + 1) ? c1 + 1 : "cgroup2");
		r = join_one(mnt, c2 + 1, pid, err);
		if (r < 0)
			return r;
		joined++;
	}
	return joined;
}
