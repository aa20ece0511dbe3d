/* SPDX-License-Identifier: Apache-2.0 */
/* microvm: the microvm tier's lifecycle — a jailed QEMU microvm per sandbox (tier_microvm_ops). */
#include "microvm-internal.h"
#include "boot.h"
#include "microvm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/log.h"
#include "../../../common/spawnguard.h"
#include "../../../common/util.h"
#include "../../images/ext4.h"
#include "../../net/net.h"

#define KILL_TIMEOUT_MS	    5000
#define BOOT_TIMEOUT_TCG_MS 60000 /* TCG on a busy 2-core CI box boots in ~3 s; be generous */
#define BOOT_TIMEOUT_KVM_MS 20000
#define RECONNECT_MS	    10000
#define QEMU_BIN	    "/usr/bin/qemu-system-x86_64"
#define ERR_MAX		    4096

static bool id_is_valid(const char *id)
{
	size_t n = strnlen(id, 40);

	if (n == 0 || n >= 40)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') ||
		      id[i] == '-'))
			return false;
	return true;
}

/* <state> from <state>/sandboxes/<id>. */
static void state_dir_of(const char *dir, char *out, size_t len)
{
	const char *p = strstr(dir, "/sandboxes/");

	if (p)
		snprintf(out, len, "%.*s", (int)(p - dir), dir);
	else
		snprintf(out, len, "/var/lib/isola");
}

void mvm_spec_shape(const struct sandbox_spec *spec, unsigned *vcpus, uint64_t *memory_mib)
{
	uint64_t mem = spec->memory_bytes ? spec->memory_bytes : 512ull << 20;
	unsigned n = spec->cpu_millis ? (spec->cpu_millis + 999) / 1000 : 1;

	*vcpus = n > 64 ? 64 : n;
	*memory_mib = mem >> 20;
}

static struct tier_sandbox *vm_new(const struct sandbox_spec *spec)
{
	struct tier_sandbox *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->id, sizeof(s->id), "%s", spec->id);
	snprintf(s->dir, sizeof(s->dir), "%s", spec->dir);
	snprintf(s->vmdir, sizeof(s->vmdir), "%s/vm", spec->dir);
	snprintf(s->agent_sock, sizeof(s->agent_sock), "%s/agent.sock", s->vmdir);
	snprintf(s->qmp_sock, sizeof(s->qmp_sock), "%s/qmp.sock", s->vmdir);
	s->pidfd = -1;
	s->first_fd = -1;
	s->cnt_fd = -1;
	mvm_spec_shape(spec, &s->vcpus, &s->memory_mib);
	return s;
}

/* Kills QEMU and reaps it if it is our child. */
static void kill_qemu(struct tier_sandbox *s)
{
	proc_pidfd_kill(&s->pidfd, KILL_TIMEOUT_MS);
	s->pid = 0;
}

/* Removes everything the tier made; idempotent. */
static int teardown(struct tier_sandbox *s, struct isola_err **err)
{
	static const char *const files[] = {"agent.sock", "qmp.sock", "console.sock",
					    MVM_COUNTERS_SOCK, "disk.qcow2"};
	char path[800];
	int r = 0;

	if (s->first_fd >= 0) {
		close(s->first_fd);
		s->first_fd = -1;
	}
	mvm_counters_fini(s);
	kill_qemu(s);
	if (s->con) {
		mvm_console_stop(s->con);
		s->con = NULL;
	}
	if (s->cg.n && s->cgo) {
		if (!proc_cgroup_is_empty(&s->cg))
			s->cgo->kill_all(&s->cg);
		r = proc_cgroup_remove(&s->cg, KILL_TIMEOUT_MS, err);
		if (r == 0)
			s->cg.n = 0;
	}
	/* The guest RAM tmpfs and the jail root lived in QEMU's mount namespace: gone with it.
	 * The console log stays until core removes the sandbox dir (it explains an error). */
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", s->vmdir, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/jail", s->dir);
	rmdir(path);
	return r;
}

static void vm_free(struct tier_sandbox *s)
{
	free(s->error);
	free(s);
}

/* The host TSC rate in kHz from /proc/cpuinfo ("cpu MHz" of the first CPU), 0 if unknown. */
static unsigned host_tsc_khz(void)
{
	cleanup_free char *ci = NULL;
	const char *p;

	if (util_read_file("/proc/cpuinfo", 8u << 20, &ci, NULL) < 0 ||
	    !(p = strstr(ci, "cpu MHz")))
		return 0;
	p = strchr(p, ':');
	return p ? (unsigned)(strtod(p + 1, NULL) * 1000.0) : 0;
}

/* How QEMU ended, if it already did and isolad can tell: its exit status when it is isolad's
 * child ("exited with status 1"; WNOWAIT leaves the zombie for kill_qemu), and whether the
 * sandbox's cgroup killed it for memory, which leaves no stderr. "" when nothing is known. */
static void qemu_exit_reason(struct tier_sandbox *s, char *out, size_t n)
{
	struct tier_stats st = {0};
	siginfo_t si = {0};
	int len = 0;

	out[0] = '\0';
	if (s->pidfd >= 0 &&
	    waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
		if (si.si_code == CLD_EXITED)
			len = snprintf(out, n, "exited with status %d", si.si_status);
		else
			len = snprintf(out, n, "was killed by signal %d (%s)", si.si_status,
				       strsignal(si.si_status));
	}
	if (len < 0 || (size_t)len >= n)
		return;
	if (s->cg.n && s->cgo && s->cgo->stats(&s->cg, &st, NULL) == 0 && st.oom_kills)
		snprintf(out + len, n - (size_t)len,
			 "%swas OOM-killed in the sandbox's cgroup (%llu kill(s): the memory limit "
			 "is too small for QEMU and the guest)",
			 len ? " and " : "", (unsigned long long)st.oom_kills);
}

/* Last lines of QEMU's own stderr (startup errors). */
static void qemu_log_tail(const char *vmdir, char *out, size_t len)
{
	char path[700];
	cleanup_free char *body = NULL;
	size_t n = 0;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/qemu.log", vmdir);
	if (util_read_file(path, 1 << 20, &body, &n) < 0 || n == 0)
		return;
	snprintf(out, len, "%s", n > len - 1 ? body + n - (len - 1) : body);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\n')
			*p = '?';
}

static int make_overlay(struct tier_sandbox *s, const char *base, uint64_t disk_bytes, uint32_t uid,
			struct isola_err **err)
{
	char path[700];
	struct stat st;

	if (stat(base, &st) < 0)
		return isola_err_sys(err, errno, "internal", "stat `%s`", base);
	snprintf(path, sizeof(path), "%s/disk.qcow2", s->vmdir);
	unlink(path); /* a leftover of an earlier attempt */
	/* Virtual size = template image + the sandbox's disk allowance. The agent grows the
	 * ext4 only until the allowance is free (isola.disk=), so the guest gets ENOSPC near
	 * the limit; the image's own free space (images/ext4.c builds it tight) pays for the
	 * new block groups' metadata, and the host file is capped at the virtual size.
	 * Written directly (boot.c): spawning qemu-img cost 60-100 ms of every create. */
	return mvm_qcow2_overlay(path, MVM_JAIL_BASE,
				 (((uint64_t)st.st_size + disk_bytes) + (1u << 20) - 1) &
					 ~((uint64_t)(1u << 20) - 1),
				 uid, err);
}

/* The restored VM's own overlay: a copy of the snapshot's (same backing: the template). */
static int copy_overlay(struct tier_sandbox *s, const char *src, uint32_t uid,
			struct isola_err **err)
{
	char path[700];
	cleanup_fd int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	cleanup_fd int out = -1;
	int r;

	if (in < 0)
		return isola_err_sys(err, errno, "invalid", "snapshot disk `%s`", src);
	snprintf(path, sizeof(path), "%s/disk.qcow2", s->vmdir);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (out < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", path);
	r = mvm_copy_sparse(in, out);
	if (r < 0)
		return isola_err_sys(err, -r, r == -ENOSPC ? "no_space" : "internal",
				     "copy `%s` to `%s`", src, path);
	if (fchown(out, uid, uid) < 0)
		return isola_err_sys(err, errno, "internal", "chown `%s`", path);
	return 0;
}

int mvm_launch(const struct sandbox_spec *spec, const struct mvm_restore_src *from,
	       struct tier_sandbox **out, struct isola_err **err)
{
	char state[512], kdir[PATH_MAX], kernel[PATH_MAX + 16], initrd[PATH_MAX], base[PATH_MAX];
	char jail_root[600], log_path[700], con_sock[700], argbuf[8192], qlog[1024];
	char *argv[MVM_ARGV_MAX];
	struct mvm_accel acc;
	struct mvm_vm_config vc;
	struct mvm_jail j;
	struct proc_cg_limits lim;
	cleanup_fd int log_fd = -1;
	cleanup_fd int record = -1;
	int go[2] = {-1, -1};
	struct tier_sandbox *s;
	uint64_t mem = spec->memory_bytes ? spec->memory_bytes : 512ull << 20;
	int r, fd;

	if (!id_is_valid(spec->id) || spec->uid_base == 0 || spec->uid_base > UINT32_MAX - 65536)
		return isola_err_set(err, EINVAL, "invalid", "sandbox `%.40s`: bad id or uid_base",
				     spec->id);
	/* Debian's cloud kernel reserves ~47 MiB of guest RAM: at 64M it panics out of memory
	 * before init, so refuse cleanly instead of failing the boot after seconds. */
	if (mem < (128ull << 20))
		return isola_err_set(err, EINVAL, "invalid",
				     "memory: microvm sandboxes need at least 128M (the guest "
				     "kernel keeps ~50M)");
	if (access(QEMU_BIN, X_OK) < 0)
		return isola_err_set(err, ENOENT, "unavailable",
				     "%s is missing: install qemu-system-x86", QEMU_BIN);
	s = vm_new(spec);
	if (!s)
		return isola_err_sys(err, ENOMEM, "internal", "sandbox `%s`", spec->id);
	mvm_accel_host(&acc);
	snprintf(s->accel, sizeof(s->accel), "%s", acc.name);
	state_dir_of(spec->dir, state, sizeof(state));
	r = mvm_kernel_find(state, kdir, sizeof(kdir), err);
	if (r == 0)
		r = mvm_initramfs(kdir, state, initrd, sizeof(initrd), err);
	if (r == 0)
		r = images_ext4_get(spec->rootfs, spec->binds, spec->n_binds, base, sizeof(base),
				    err);
	if (r < 0)
		goto fail_free;
	snprintf(kernel, sizeof(kernel), "%s/vmlinuz", kdir);
	snprintf(jail_root, sizeof(jail_root), "%s/jail", spec->dir);
	if ((mkdir(s->vmdir, 0700) < 0 && errno != EEXIST) ||
	    chown(s->vmdir, spec->uid_base, spec->uid_base) < 0 ||
	    (mkdir(jail_root, 0700) < 0 && errno != EEXIST)) {
		r = isola_err_sys(err, errno, "internal", "create `%s`", s->vmdir);
		goto fail_teardown;
	}
	if (from)
		r = copy_overlay(s, from->disk, spec->uid_base, err);
	else
		r = make_overlay(s, base, spec->disk_bytes, spec->uid_base, err);
	if (r < 0)
		goto fail_teardown;
	snprintf(log_path, sizeof(log_path), "%s/qemu.log", s->vmdir);
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log_fd < 0) {
		r = isola_err_sys(err, errno, "internal", "open `%s`", log_path);
		goto fail_teardown;
	}
	memset(&vc, 0, sizeof(vc));
	vc.qemu = QEMU_BIN;
	vc.id = spec->id;
	vc.accel = acc.name;
	mvm_spec_shape(spec, &vc.vcpus, &vc.memory_mib);
	s->vcpus = vc.vcpus;
	s->memory_mib = vc.memory_mib;
	vc.tsc_khz = strcmp(acc.name, "tcg") ? 0 : host_tsc_khz();
	vc.incoming = from != NULL;
	vc.net_addr = net_current() ? NET_GUEST_ADDR : NULL; /* a NIC only with a network */
	vc.pids = spec->pids;
	vc.disk_bytes = spec->disk_bytes;
	vc.caps = spec->caps;
	r = mvm_build_argv(&vc, argv, argbuf, sizeof(argbuf));
	if (r < 0) {
		r = isola_err_set(err, -r, "invalid", "sandbox `%s`: QEMU command line: %s",
				  spec->id, strerror(-r));
		goto fail_teardown;
	}
	/* $ISOLA_MICROVM_DEBUG: full kernel messages on the console (boot debugging). */
	for (unsigned i = 0; getenv("ISOLA_MICROVM_DEBUG") && argv[i]; i++) {
		char *q = strstr(argv[i], " quiet ");

		if (q && !strncmp(argv[i], "console=", 8))
			memcpy(q, "       ", 7);
	}
	s->cgo = proc_cgroup_detect(err);
	if (!s->cgo) {
		r = -ENOTSUP;
		goto fail_teardown;
	}
	/* QEMU's cgroup: guest RAM (shmem in /mem) + QEMU itself + the TCG cache. */
	lim.memory_bytes = mem + MVM_OVERHEAD_BYTES + ((uint64_t)MVM_TB_MIB << 20);
	lim.pids = 512; /* vCPU, I/O and RCU threads; QEMU cannot fork (spawn=deny) */
	/* vCPUs plus one CPU for QEMU's main loop and I/O threads: a quota of exactly the
	 * vCPUs starves the emulated timers under TCG, and the guest's TSC calibration
	 * fails ("Unable to calibrate against PIT") and boot hangs. */
	lim.cpu_millis = spec->cpu_millis ? spec->cpu_millis + 1000 : 0;
	r = s->cgo->create(spec->id, &lim, &s->cg, err);
	if (r < 0)
		goto fail_teardown;
	if (pipe2(go, O_CLOEXEC) < 0) {
		r = isola_err_sys(err, errno, "internal", "pipe");
		goto fail_teardown;
	}
	memset(&j, 0, sizeof(j));
	j.root = jail_root;
	j.vmdir = s->vmdir;
	j.kernel = kernel;
	j.initrd = initrd;
	j.base = base;
	j.kvm = !strcmp(acc.name, "kvm");
	j.uid = spec->uid_base;
	j.mem_bytes = mem;
	j.argv = argv;
	j.log_fd = log_fd;
	j.tap = vc.net_addr != NULL;
	j.ram_fd = from ? from->ram_fd : -1;
	/* Made before the clone, held by the child until it is in the cgroup: a restart finds
	 * an orphan by it (src/common/spawnguard.h). */
	record = spawnguard_record_open(spec->dir);
	if (record < 0) {
		r = isola_err_sys(err, -record, "internal", "sandbox `%s`: create `%s/%s`",
				  spec->id, spec->dir, SPAWNGUARD_RECORD);
		goto fail_teardown;
	}
	j.record_fd = record;
	s->pid = mvm_jail_spawn(&j, go[0], &s->pidfd);
	close(go[0]);
	go[0] = -1;
	if (s->pid < 0) {
		r = isola_err_sys(err, -s->pid, "internal", "sandbox `%s`: clone3 QEMU", spec->id);
		s->pid = 0;
		goto fail_teardown;
	}
	s->child = true;
	/* In the cgroup before it runs anything: nothing escapes the limits or a kill. */
	r = s->cgo->attach(&s->cg, s->pid, err);
	if (r < 0)
		goto fail_teardown;
	/* The tap QEMU attaches to, in its namespace, before it runs (docs/network.md). */
	if (vc.net_addr) {
		cleanup_fd int nsfd = proc_open_netns(s->pid, s->pidfd, err);

		r = nsfd < 0 ? nsfd : net_microvm_prepare(nsfd, j.uid, err);
		if (r < 0)
			goto fail_teardown;
	}
	if (write(go[1], "g", 1) != 1) {
		r = isola_err_sys(err, errno, "internal", "release QEMU");
		goto fail_teardown;
	}
	close(go[1]);
	go[1] = -1;
	spawnguard_record_remove(spec->dir);
	if (proc_read_start_time(s->pid, &s->start_time) < 0) {
		r = isola_err_set(err, ECHILD, "internal", "QEMU exited at once");
		goto fail_teardown;
	}
	snprintf(con_sock, sizeof(con_sock), "%s/console.sock", s->vmdir);
	s->con = mvm_console_start(con_sock, s->vmdir);
	log_info("sandbox %s: QEMU pid %d (%s: %s)", spec->id, (int)s->pid, acc.name, acc.reason);
	if (from) {
		r = mvm_snap_incoming(s, from->state_fd, err);
		if (r == 0)
			fd = mvm_snap_agent_sync(
				s, j.kvm ? BOOT_TIMEOUT_KVM_MS : BOOT_TIMEOUT_TCG_MS, err);
		else
			fd = r;
	} else {
		fd = mvm_agent_sync(s->agent_sock, s->qmp_sock, s->pidfd,
				    j.kvm ? BOOT_TIMEOUT_KVM_MS : BOOT_TIMEOUT_TCG_MS, err);
	}
	if (fd < 0) {
		r = fd;
		goto fail_teardown;
	}
	s->first_fd = fd;
	*out = s;
	return 0;

fail_teardown:
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	if (s->pid > 0) {
		cleanup_free char *tail = NULL;
		char why[256];

		qemu_exit_reason(s, why, sizeof(why));
		kill_qemu(s);
		mvm_console_drain(s->con, 500);
		tail = s->con ? mvm_console_tail(s->con, 4096, NULL) : NULL;
		if (!tail || !*tail) {
			free(tail);
			tail = mvm_console_tail_files(s->vmdir, 4096, NULL);
		}
		qemu_log_tail(s->vmdir, qlog, sizeof(qlog));
		mvm_boot_failure_explain(err, why, qlog, tail, 12);
		isola_err_wrap(err, "microvm `%s`", spec->id);
	}
	teardown(s, NULL);
	spawnguard_record_remove(spec->dir);
fail_free:
	vm_free(s);
	return r;
}

static int microvm_create(const struct sandbox_spec *spec, struct tier_sandbox **out,
			  struct isola_err **err)
{
	return mvm_launch(spec, NULL, out, err);
}

static int microvm_agent_connect(struct tier_sandbox *s, struct isola_err **err)
{
	if (s->first_fd >= 0)
		return steal_fd(&s->first_fd);
	/* Retrying: after a restore, or a resume of a VM paused while isolad restarted, the
	 * agent may still hold an older stream that swallows the first sync token. */
	return mvm_snap_agent_sync(s, RECONNECT_MS, err);
}

static char *microvm_save(struct tier_sandbox *s)
{
	char st[32];
	json_t *j;
	char *out;

	snprintf(st, sizeof(st), "%" PRIu64, s->start_time);
	j = json_pack("{s:i, s:i, s:s, s:s}", "version", 1, "pid", (int)s->pid, "start_time", st,
		      "accel", s->accel);
	if (!j)
		return NULL;
	out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}

/* Parses saved state; verifies pid + start time. Returns a pidfd or -ESRCH/-EINVAL. */
static int saved_pidfd(const char *saved, pid_t *pid_out, uint64_t *start_out, char *accel)
{
	json_t *j = saved ? json_loads(saved, 0, NULL) : NULL;
	const char *st = NULL, *acc = "tcg";
	int pid = 0, pfd;
	uint64_t want;

	if (!j)
		return -EINVAL;
	if (json_unpack(j, "{s:i, s:s, s?s}", "pid", &pid, "start_time", &st, "accel", &acc) < 0 ||
	    pid <= 1) {
		json_decref(j);
		return -EINVAL;
	}
	want = strtoull(st, NULL, 10);
	snprintf(accel, 8, "%s", acc);
	json_decref(j);
	pfd = proc_pidfd_verified(pid, want);
	if (pfd < 0)
		return pfd;
	*pid_out = pid;
	*start_out = want;
	return pfd;
}

static int microvm_reattach(const struct sandbox_spec *spec, const char *saved,
			    struct tier_sandbox **out, struct isola_err **err)
{
	struct tier_sandbox *s = vm_new(spec);
	char con_sock[700];
	int pfd;

	if (!s)
		return isola_err_sys(err, ENOMEM, "internal", "reattach `%s`", spec->id);
	pfd = saved_pidfd(saved, &s->pid, &s->start_time, s->accel);
	if (pfd < 0) {
		vm_free(s);
		return isola_err_set(err, -pfd, pfd == -ESRCH ? "not_found" : "invalid",
				     "sandbox `%s`: %s", spec->id,
				     pfd == -ESRCH ? "its QEMU is gone" : "bad saved state");
	}
	s->pidfd = pfd;
	s->cgo = proc_cgroup_detect(NULL);
	if (!s->cgo || s->cgo->paths(spec->id, &s->cg) < 0)
		memset(&s->cg, 0, sizeof(s->cg));
	snprintf(con_sock, sizeof(con_sock), "%s/console.sock", s->vmdir);
	s->con = mvm_console_start(con_sock, s->vmdir);
	*out = s;
	return 0;
}

static int microvm_exit_fd(struct tier_sandbox *s)
{
	return s->pidfd;
}

/* QEMU's host cgroup, plus the OOM kills only the guest kernel sees (counters.c): api/exec.c
 * judges a command's oom_killed from this counter. */
static int microvm_stats(struct tier_sandbox *s, struct tier_stats *out, struct isola_err **err)
{
	struct mvm_guest_counters gc;

	memset(out, 0, sizeof(*out));
	if (s->cg.n && s->cgo)
		s->cgo->stats(&s->cg, out, err);
	/* UNTRUSTED: the guest's own count. A lying guest can only misreport its own commands'
	 * oom_killed; the counter never goes back (a silent guest keeps the last value). */
	if (s->pid > 0 && mvm_counters_query(s, &gc) == 0 && gc.oom_kill > s->guest_oom)
		s->guest_oom = gc.oom_kill;
	out->oom_kills += s->guest_oom;
	return 0;
}

static int microvm_destroy(struct tier_sandbox *s, struct isola_err **err)
{
	int r;

	if (!s)
		return 0;
	r = teardown(s, err);
	if (r < 0)
		return r;
	vm_free(s);
	return 0;
}

/*
 * Safety net for cleanup without a handle: SIGKILLs every QEMU on the host whose command
 * line names this sandbox (`-name isola-<id>`), wherever it is — in or out of its cgroup.
 * Reads only the host's /proc (never a path inside a sandbox). Returns how many it killed.
 */
static int kill_qemu_by_name(const char *id)
{
	char want[64], path[64];
	struct dirent *de;
	int killed = 0;
	DIR *d;

	snprintf(want, sizeof(want), "isola-%s", id);
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		cleanup_free char *cmd = NULL;
		size_t len = 0;
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		if (util_read_file(path, 64 * 1024, &cmd, &len) < 0)
			continue;
		/* argv is NUL-separated: look for "-name" followed by exactly our name. */
		for (size_t off = 0; off < len;) {
			const char *arg = cmd + off;
			size_t n = strlen(arg);

			if (!strcmp(arg, "-name") && off + n + 1 < len &&
			    !strcmp(arg + n + 1, want)) {
				if (kill(pid, SIGKILL) == 0)
					killed++;
				break;
			}
			off += n + 1;
		}
	}
	closedir(d);
	return killed;
}

static int microvm_cleanup(const struct sandbox_spec *spec, const char *saved,
			   struct isola_err **err)
{
	struct tier_sandbox *s;
	int r;

	if (!id_is_valid(spec->id))
		return isola_err_set(err, EINVAL, "invalid", "sandbox id `%.40s`", spec->id);
	s = vm_new(spec);
	if (!s)
		return isola_err_sys(err, ENOMEM, "internal", "cleanup `%s`", spec->id);
	if (saved) {
		int pfd = saved_pidfd(saved, &s->pid, &s->start_time, s->accel);

		if (pfd >= 0)
			s->pidfd = pfd;
	}
	/* A QEMU jail cloned by an isolad killed before it joined the cgroup: found by the
	 * record it was born holding. */
	if (spawnguard_kill_orphans(spec->dir, KILL_TIMEOUT_MS) > 0)
		log_warn("sandbox %s: killed a jail cloned before isolad's restart", spec->id);
	s->cgo = proc_cgroup_detect(NULL);
	if (!s->cgo || s->cgo->paths(spec->id, &s->cg) < 0)
		memset(&s->cg, 0, sizeof(s->cg));
	/* No saved pid (isolad died mid-create): whatever is in isola/<id> is its QEMU. */
	if (s->cg.n && s->cgo && !proc_cgroup_is_empty(&s->cg))
		s->cgo->kill_all(&s->cg);
	if (kill_qemu_by_name(spec->id) > 0)
		log_warn("sandbox %s: killed a QEMU that was outside its cgroup", spec->id);
	r = teardown(s, err);
	vm_free(s);
	return r;
}

static void microvm_release(struct tier_sandbox *s)
{
	if (!s)
		return;
	if (s->con)
		mvm_console_stop(s->con);
	if (s->first_fd >= 0)
		close(s->first_fd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	mvm_counters_fini(s);
	vm_free(s);
}

static char *microvm_console(struct tier_sandbox *s, size_t max, size_t *len)
{
	if (s->con)
		return mvm_console_tail(s->con, max, len);
	return mvm_console_tail_files(s->vmdir, max, len);
}

static const char *microvm_last_error(struct tier_sandbox *s)
{
	cleanup_free char *tail = NULL;
	char how[128] = "QEMU exited";
	size_t n = 0;
	siginfo_t si;

	if (s->error)
		return s->error;
	memset(&si, 0, sizeof(si));
	if (s->pidfd >= 0 && s->child &&
	    waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
		if (si.si_code == CLD_EXITED)
			snprintf(how, sizeof(how), "QEMU exited with status %d", si.si_status);
		else
			snprintf(how, sizeof(how), "QEMU was killed by signal %d", si.si_status);
	}
	mvm_console_drain(s->con, 1000);
	tail = s->con ? mvm_console_tail(s->con, 16384, &n)
		      : mvm_console_tail_files(s->vmdir, 16384, &n);
	if (tail && strstr(tail, "Kernel panic"))
		snprintf(how, sizeof(how), "guest kernel panicked (QEMU exited)");
	if (tail && n > 1500) { /* the reason carries the last ~1500 bytes, from a line start */
		char *cut = tail + n - 1500, *nl = strchr(cut, '\n');

		memmove(tail, nl ? nl + 1 : cut, strlen(nl ? nl + 1 : cut) + 1);
	}
	if (asprintf(&s->error, "%s; last console lines:\n%s", how, tail ? tail : "") < 0)
		s->error = NULL;
	return s->error ? s->error : "QEMU exited";
}

static int microvm_netns_fd(struct tier_sandbox *s, struct isola_err **err)
{
	return proc_open_netns(s->pid, s->pidfd, err); /* QEMU's: the veth's peer goes there */
}

const struct tier_ops tier_microvm_ops = {
	.name = "microvm",
	.create = microvm_create,
	.agent_connect = microvm_agent_connect,
	.save = microvm_save,
	.reattach = microvm_reattach,
	.exit_fd = microvm_exit_fd,
	.stats = microvm_stats,
	.destroy = microvm_destroy,
	.cleanup = microvm_cleanup,
	.release = microvm_release,
	.console = microvm_console,
	.last_error = microvm_last_error,
	.netns_fd = microvm_netns_fd,
	.pause = mvm_pause,
	.resume = mvm_resume,
	.snapshot = mvm_snapshot,
	.restore = mvm_restore,
	.snapshot_level = TIER_PERSIST_MEMORY,
	.restore_needs_snapshot = false, /* a restore copies what it needs (docs/microvm.md) */
};

bool tier_microvm_usable(const char *state_dir)
{
	char kdir[PATH_MAX];
	cleanup_err struct isola_err *e = NULL;

	return access(QEMU_BIN, X_OK) == 0 &&
	       mvm_kernel_find(state_dir, kdir, sizeof(kdir), &e) == 0;
}

char *tier_microvm_doctor(void)
{
	struct mvm_accel acc;
	char kdir[PATH_MAX] = "";
	cleanup_err struct isola_err *e = NULL;
	json_t *j;
	char *out;

	mvm_accel_host(&acc);
	mvm_kernel_find("/var/lib/isola", kdir, sizeof(kdir), &e);
	j = json_pack("{s:s, s:s, s:b, s:s, s:b}", "accelerator", acc.name, "accelerator_reason",
		      acc.reason, "qemu", access(QEMU_BIN, X_OK) == 0, "kernel",
		      kdir[0] ? kdir : "missing: run scripts/kernel.sh", "qemu_img",
		      access("/usr/bin/qemu-img", X_OK) == 0);
	if (!j)
		return NULL;
	out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}
