/* SPDX-License-Identifier: Apache-2.0 */
/* test_runc_cgjoin: TAP tests for finding and joining a sandbox's cgroups (src/runc/cgjoin.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgjoin.h"
#include "../tap.h"

/* A hybrid host's mountinfo (v1 controllers, cgroup2 without controllers) and a bind mount of a
 * hierarchy's subdirectory that must never be taken for the hierarchy. */
static const char HYBRID[] =
	"22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
	"25 22 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755\n"
	"26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 "
	"cgroup2 rw,nsdelegate\n"
	"27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid shared:6 - cgroup cgroup "
	"rw,xattr,name=systemd\n"
	"30 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup "
	"rw,cpu,cpuacct\n"
	"31 25 0:29 /isola /mnt/memory-bind rw shared:10 - cgroup cgroup rw,memory\n"
	"32 25 0:29 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory\n"
	"33 25 0:30 / /sys/fs/cgroup/pids rw,nosuid shared:12 - cgroup cgroup rw,pids\n"
	"34 25 0:31 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid shared:13 - cgroup cgroup "
	"rw,net_cls,net_prio\n"
	"35 25 0:32 / /sp\\040ace rw shared:14 - cgroup cgroup rw,freezer\n";

static void test_mount_of(void)
{
	char out[64];

	ok(oci_cg_mount_of(HYBRID, "memory", out, sizeof(out)) == 0 &&
		   !strcmp(out, "/sys/fs/cgroup/memory"),
	   "memory: the hierarchy's root mount, not a bind of a subdirectory (%s)", out);
	ok(oci_cg_mount_of(HYBRID, "cpu,cpuacct", out, sizeof(out)) == 0 &&
		   !strcmp(out, "/sys/fs/cgroup/cpu,cpuacct"),
	   "cpu,cpuacct: every controller of the field in the super options");
	ok(oci_cg_mount_of(HYBRID, "cpuacct", out, sizeof(out)) == 0 &&
		   !strcmp(out, "/sys/fs/cgroup/cpu,cpuacct"),
	   "one controller of a shared hierarchy");
	ok(oci_cg_mount_of(HYBRID, "", out, sizeof(out)) == 0 &&
		   !strcmp(out, "/sys/fs/cgroup/unified"),
	   "the empty controllers field is the cgroup2 mount");
	ok(oci_cg_mount_of(HYBRID, "name=systemd", out, sizeof(out)) == 0 &&
		   !strcmp(out, "/sys/fs/cgroup/systemd"),
	   "a named hierarchy");
	ok(oci_cg_mount_of(HYBRID, "net", out, sizeof(out)) == -ENOENT,
	   "a prefix of a controller is not the controller");
	ok(oci_cg_mount_of(HYBRID, "freezer", out, sizeof(out)) == -ENOENT,
	   "a mount point with an escape is not used");
	ok(oci_cg_mount_of(HYBRID, "blkio", out, sizeof(out)) == -ENOENT,
	   "a controller without a mount");
	ok(oci_cg_mount_of(HYBRID, "pids", out, 8) == -ENAMETOOLONG, "a mount point too long");
	ok(oci_cg_mount_of("garbage\n\n- - -\n1 2 3\n", "memory", out, sizeof(out)) == -ENOENT,
	   "malformed lines are skipped");
}

static void test_is_sandbox(void)
{
	ok(oci_cg_is_sandbox("/isola/sb-1a2b", "sb-1a2b"), "isola/<id> is the sandbox's");
	ok(!oci_cg_is_sandbox("/isola/sb-1a2b", "sb-1a2"), "another id is not");
	ok(!oci_cg_is_sandbox("/isola/xsb-1a2b", "sb-1a2b"),
	   "a suffix of the last component is not");
	ok(!oci_cg_is_sandbox("/system.slice/containerd.service", "sb-1a2b"),
	   "the engine's cgroup is not");
	ok(!oci_cg_is_sandbox("/", "sb-1a2b") && !oci_cg_is_sandbox("/x", ""),
	   "the root, and an empty id");
	ok(!oci_cg_is_sandbox("/../sb-1a2b", "sb-1a2b") && !oci_cg_is_sandbox("/a/./sb-1", "sb-1"),
	   "`.` and `..` components are refused");
	ok(!oci_cg_is_sandbox("isola/sb-1", "sb-1"), "a relative path is refused");
}

static void test_join(void)
{
	struct isola_err *err = NULL;
	int r;

	/* Our own cgroups are nobody's sandbox: nothing is joined, nothing is written. */
	r = oci_cgroup_join(getpid(), "no-such-sandbox-id", getpid(), &err);
	ok(r == 0 && !err, "a process in no sandbox cgroup: nothing joined (%d)", r);
	isola_err_free(err);
	err = NULL;
	r = oci_cgroup_join(0x3fffffff, "sb-1", getpid(), &err);
	ok(r < 0 && err && strstr(err->message, "/proc/1073741823/cgroup"),
	   "a missing init names the file it could not read (%s)", err ? err->message : "");
	isola_err_free(err);
}

int main(void)
{
	test_mount_of();
	test_is_sandbox();
	test_join();
	return tap_done();
}
