/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: what this host offers the process tier, and what isola does about each finding. */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/util.h"

static json_t *check(bool ok, const char *detail, const char *action)
{
	return json_pack("{s:b, s:s, s:s}", "ok", ok, "detail", detail, "isola", action);
}

static long read_long(const char *path)
{
	cleanup_free char *b = NULL;

	if (util_read_file(path, 256, &b, NULL) < 0)
		return -1;
	return strtol(b, NULL, 10);
}

static bool openat2_works(void)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Mounts overlay inside a throwaway user+mount namespace (the setup stage's path). */
static bool overlay_in_userns_works(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		char base[] = "/tmp/isola-doctor-XXXXXX";

		int fd;

		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			_exit(1);
		/* Map our (root) uid and gid so files can be created in the tmpfs. */
		fd = open("/proc/self/uid_map", O_WRONLY);
		if (fd < 0 || write(fd, "0 0 1", 5) != 5)
			_exit(1);
		close(fd);
		fd = open("/proc/self/setgroups", O_WRONLY);
		if (fd < 0 || write(fd, "deny", 4) != 4)
			_exit(1);
		close(fd);
		fd = open("/proc/self/gid_map", O_WRONLY);
		if (fd < 0 || write(fd, "0 0 1", 5) != 5)
			_exit(1);
		close(fd);
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(2);
		/* A private tmpfs: nothing is created on the host's /tmp. */
		if (mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") < 0)
			_exit(3);
		if (!mkdtemp(base) || chdir(base) < 0)
			_exit(4);
		if (mkdir("l", 0755) || mkdir("u", 0755) || mkdir("w", 0755) || mkdir("m", 0755))
			_exit(5);
		_exit(mount("overlay", "m", "overlay", 0, "lowerdir=l,upperdir=u,workdir=w") ? 6
											     : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* /dev/kvm: present? hardware virt flags? PVM (paravirtualised nested KVM)? */
static json_t *kvm_check(void)
{
	cleanup_free char *cpu = NULL;
	cleanup_free char *mods = NULL;
	bool dev = access("/dev/kvm", F_OK) == 0;
	bool hw = false, pvm = false, hyp = false;
	const char *kind, *act;

	if (util_read_file("/proc/cpuinfo", 4 << 20, &cpu, NULL) == 0) {
		hw = strstr(cpu, " vmx") || strstr(cpu, " svm");
		hyp = strstr(cpu, " hypervisor") != NULL;
	}
	if (util_read_file("/proc/modules", 1 << 20, &mods, NULL) == 0)
		pvm = strstr(mods, "kvm_pvm") != NULL;
	pvm |= access("/sys/module/kvm_pvm", F_OK) == 0;
	if (dev && pvm) {
		kind = "pvm";
		act = "pvm (nested, unusable for stock guests) -> microvm tier will use TCG";
	} else if (dev && hw) {
		kind = "hardware";
		act = "microvm tier uses KVM";
	} else if (dev) {
		kind = "unknown";
		act = "/dev/kvm without vmx/svm flags (paravirtual or nested): microvm tier will "
		      "use TCG";
	} else {
		kind = "absent";
		act = "no /dev/kvm: microvm tier will use TCG (slow, still isolated)";
	}
	return json_pack("{s:b, s:s, s:b, s:b, s:s}", "present", dev, "kind", kind,
			 "cpu_virt_flags", hw, "under_hypervisor", hyp, "isola", act);
}

char *tier_process_doctor(void)
{
	struct isola_err *err = NULL;
	const struct cgroup_ops *cgo = proc_cgroup_detect(&err);
	long maxns = read_long("/proc/sys/user/max_user_namespaces");
	long unpriv = read_long("/proc/sys/kernel/unprivileged_userns_clone");
	bool idm = proc_mount_idmap_probe();
	bool ovl = overlay_in_userns_works();
	bool sc = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
	bool o2 = openat2_works();
	char detail[256], disk_why[128];
	bool disk = proc_disk_available(disk_why, sizeof(disk_why));
	json_t *j, *cg;
	char *ctrls = cgo ? cgo->describe() : NULL, *out;
	int fd;

	/* Does the compiled policy build here? (Catches a libseccomp too old for it.) */
	fd = proc_seccomp_compile_memfd(NULL);
	if (fd >= 0)
		close(fd);
	cg = json_pack("{s:b, s:s, s:o, s:s, s:s}", "ok", cgo != NULL, "version",
		       cgo ? cgo->name : "none", "controllers",
		       ctrls ? json_loads(ctrls, 0, NULL) : json_array(), "v2_mount",
		       proc_cg_host()->v2, "isola",
		       cgo ? (cgo->version == 2 ? "limits via memory.max, pids.max, cpu.max; "
						  "kill via cgroup.kill"
						: "limits via v1 memory, pids, cpu; pause via v1 "
						  "freezer; kill via freeze + SIGKILL")
			   : "process tier unavailable: no memory/pids controllers");
	free(ctrls);
	snprintf(detail, sizeof(detail), "max_user_namespaces=%ld%s", maxns,
		 unpriv == 0 ? " (unprivileged_userns_clone=0: fine, isolad is root)" : "");
	j = json_pack(
		"{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "tier", "process", "cgroup", cg,
		"user_namespaces",
		check(maxns > 0, detail,
		      maxns > 0 ? "one user namespace per sandbox, host uids uid_base..+65535"
				: "process tier unavailable: raise user.max_user_namespaces"),
		"idmapped_mounts",
		check(idm,
		      idm ? "open_tree + mount_setattr(MOUNT_ATTR_IDMAP) works" : "probe failed",
		      idm ? "template shown owned by root inside (mode: idmapped)"
			  : "fallback: template files show as nobody inside (mode: none)"),
		"overlay_in_userns",
		check(ovl, ovl ? "overlayfs mounts inside a user namespace" : "probe failed",
		      ovl ? "template lower + writable upper via overlayfs"
			  : "process tier create will fail: needs overlayfs in a userns (5.11+)"),
		"seccomp",
		check(sc && fd >= 0, fd >= 0 ? "policy compiles to BPF" : "policy does not compile",
		      "allowlist filter installed in every sandbox"),
		"openat2",
		check(o2, o2 ? "RESOLVE_IN_ROOT available" : "not available",
		      o2 ? "paths inside templates resolved with openat2"
			 : "fallback: O_NOFOLLOW component walk"),
		"writable_layer_on_disk",
		check(disk, disk_why,
		      disk ? "writable layer: an ext4 image per sandbox under the state dir"
			   : "fallback: writable layer on tmpfs (memory, counts against the "
			     "memory limit)"),
		"kvm", kvm_check());
	isola_err_free(err);
	if (!j)
		return NULL;
	out = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	return out;
}
