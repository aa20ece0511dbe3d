/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e: as root, creates real sandboxes through tier_process_ops and judges them from the host. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "isolad/tiers/process/process-internal.h"
#include "isolad/tiers/process/process.h"
#include "../tap.h"

static char base[] = "/tmp/isola-e2e-XXXXXX";

static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	if (fd < 0 || write(fd, s, strlen(s)) < 0)
		abort();
	close(fd);
}

/* A template like the host template: /usr comes from a bind, the rest are links. */
static void make_rootfs(const char *dir, bool hostile)
{
	char p[512];

	mkdir(dir, 0755);
	snprintf(p, sizeof(p), "%s/etc", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc/passwd", dir);
	write_file(p, "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
	snprintf(p, sizeof(p), "%s/etc/group", dir);
	write_file(p, "root:x:0:\nuser:x:1000:\n");
	/* A template dir the persistence test replaces (an opaque dir in the upper layer). */
	snprintf(p, sizeof(p), "%s/srv", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/srv/lowerfile", dir);
	write_file(p, "lower\n");
	static const char *const links[][2] = {{"bin", "usr/bin"},
					       {"lib", "usr/lib"},
					       {"lib64", "usr/lib64"},
					       {"sbin", "usr/sbin"}};
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, links[i][0]);
		if (symlink(links[i][1], p) < 0)
			abort();
	}
	if (hostile) {
		/* A template whose /dev points at a host directory (runc CVE-2023-27561 class). */
		snprintf(p, sizeof(p), "%s/dev", dir);
		if (symlink("/tmp", p) < 0)
			abort();
	}
}

static void fill_spec(struct sandbox_spec *sp, const char *id, const char *rootfs, uint32_t ub)
{
	memset(sp, 0, sizeof(*sp));
	snprintf(sp->id, sizeof(sp->id), "%s", id);
	snprintf(sp->dir, sizeof(sp->dir), "%s/state-%s", base, id);
	mkdir(sp->dir, 0700);
	snprintf(sp->rootfs, sizeof(sp->rootfs), "%s", rootfs);
	snprintf(sp->binds[0].src, sizeof(sp->binds[0].src), "/usr");
	snprintf(sp->binds[0].dst, sizeof(sp->binds[0].dst), "/usr");
	sp->n_binds = 1;
	sp->uid_base = ub;
	sp->cpu_millis = 500;
	sp->memory_bytes = 256ull << 20;
	sp->disk_bytes = 8ull << 20;
	sp->inodes = 1000;
	sp->pids = 128;
	sp->nofile = 4096;
}

/* Sends cmd over a new agent connection; returns the reply (heap) or NULL. */
static char *ask(struct tier_sandbox *s, const char *cmd)
{
	struct isola_err *err = NULL;
	int fd = tier_process_ops.agent_connect(s, &err);
	char *buf;
	size_t n = 0;
	ssize_t r;

	if (fd < 0) {
		printf("# connect: %s\n", err->message);
		isola_err_free(err);
		return NULL;
	}
	buf = calloc(1, 8192);
	if (write(fd, cmd, strlen(cmd)) < 0)
		abort();
	while ((r = read(fd, buf + n, 8191 - n)) > 0)
		n += (size_t)r;
	close(fd);
	return buf;
}

/* Value of "key=" or "key:\t" line in body, or "" (static buffer). */
static const char *val(const char *body, const char *key)
{
	static char out[128];
	size_t kl = strlen(key);

	out[0] = '\0';
	for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, kl) && (p[kl] == '=' || p[kl] == ':')) {
			const char *v = p + kl + 1;

			while (*v == '\t' || *v == ' ')
				v++;
			snprintf(out, sizeof(out), "%.*s", (int)strcspn(v, "\n"), v);
			break;
		}
	return out;
}

static bool file_has(const char *path, const char *needle)
{
	cleanup_free char *b = NULL;

	return util_read_file(path, 1 << 20, &b, NULL) == 0 && strstr(b, needle);
}

static bool nothing_left(const struct sandbox_spec *sp, pid_t pid)
{
	struct proc_cgroup cg;
	const struct cgroup_ops *cgo = proc_cgroup_detect(NULL);
	char sock[600];
	bool ok = true;

	/* This test is the sandboxes' parent: reap the zombie isolad's real parent
	 * (or init after a restart) would reap. */
	for (int i = 0; pid > 0 && i < 1000 && waitpid(pid, NULL, WNOHANG) == 0; i++)
		usleep(1000);
	if (pid > 0 && kill(pid, 0) == 0) {
		printf("# process %d still alive\n", (int)pid);
		ok = false;
	}
	cgo->paths(sp->id, &cg);
	for (unsigned i = 0; i < cg.n; i++)
		if (access(cg.path[i], F_OK) == 0) {
			printf("# cgroup %s left\n", cg.path[i]);
			ok = false;
		}
	snprintf(sock, sizeof(sock), "%s/agent.sock", sp->dir);
	if (access(sock, F_OK) == 0) {
		printf("# %s left\n", sock);
		ok = false;
	}
	if (file_has("/proc/self/mountinfo", sp->dir) || file_has("/proc/self/mountinfo", base)) {
		printf("# a mount from %s is left\n", sp->dir);
		ok = false;
	}
	return ok;
}

static void hostile(const char *rootfs, bool no_openat2)
{
	struct sandbox_spec sp;
	struct tier_sandbox *s = NULL;
	struct isola_err *err = NULL;
	int r;

	tier_process_set_force_no_openat2(no_openat2);
	fill_spec(&sp, no_openat2 ? "e2e-hostile-walk" : "e2e-hostile", rootfs, 3100000000u);
	r = tier_process_ops.create(&sp, &s, &err);
	ok(r < 0 && err && strstr(err->message, "symlink") && !strcmp(err->code, "invalid"),
	   "hostile template (/dev -> /tmp) refused%s: %s", no_openat2 ? " (fallback walk)" : "",
	   err ? err->message : "created!");
	if (r == 0)
		tier_process_ops.destroy(s, NULL);
	ok(nothing_left(&sp, 0), "failed create leaves nothing behind");
	isola_err_free(err);
	tier_process_set_force_no_openat2(false);
}

/* A masked path through a template's symlink (`/bin` -> usr/bin): resolved inside the root
 * with openat2 (the missing file is skipped and the sandbox starts), refused naming it by the
 * fallback walk, which follows no symlink at all. */
static void masked_through_symlink(const char *rootfs, bool no_openat2)
{
	struct sandbox_spec sp;
	struct tier_sandbox *s = NULL;
	struct isola_err *err = NULL;
	int r;

	tier_process_set_force_no_openat2(no_openat2);
	fill_spec(&sp, no_openat2 ? "e2e-mask-walk" : "e2e-mask", rootfs, 3200000000u);
	snprintf(sp.mounts[0].path, sizeof(sp.mounts[0].path), "/lib/isola-no-such-file");
	sp.mounts[0].kind = TIER_MOUNT_MASKED;
	sp.n_mounts = 1;
	r = tier_process_ops.create(&sp, &s, &err);
	if (no_openat2)
		ok(r < 0 && err &&
			   strstr(err->message, "`lib` is a symlink (refused without openat2)"),
		   "masked path through a symlink refused by the fallback walk: %s",
		   err ? err->message : "created!");
	else
		ok(r == 0,
		   "masked path through a symlink resolved in the root, missing: skipped %s",
		   err ? err->message : "");
	if (r == 0)
		tier_process_ops.destroy(s, NULL);
	ok(nothing_left(&sp, 0), "masked path sandbox leaves nothing behind");
	isola_err_free(err);
	tier_process_set_force_no_openat2(false);
}

/* Sends cmd and waits up to ms for the first reply byte: false when none came (frozen). */
static bool answers_within(struct tier_sandbox *s, const char *cmd, int ms)
{
	int fd = tier_process_ops.agent_connect(s, NULL);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	bool r;

	if (fd < 0 || write(fd, cmd, strlen(cmd)) < 0)
		return false;
	r = poll(&p, 1, ms) == 1;
	close(fd);
	return r;
}

/* The error, printed and freed; "" when none. */
static const char *msg(struct isola_err **err)
{
	static char buf[512];

	snprintf(buf, sizeof(buf), "%s", *err ? (*err)->message : "");
	isola_err_free(*err);
	*err = NULL;
	return buf;
}

/* pause/resume/snapshot/restore through tier_process_ops, judged from inside the restored
 * sandbox (the stub's `check`) and from the host (/proc/<pid>/root, cgroups, mounts). */
static void persistence(const char *rootfs)
{
	struct tier_sandbox *s = NULL, *s2 = NULL;
	struct isola_err *err = NULL;
	enum tier_persistence level = TIER_PERSIST_NONE;
	struct sandbox_spec sp, sp2;
	char snap[600], path[700], cmd[1500];
	uint64_t paused_us = 0;
	char *reply, *saved;
	struct stat st;
	pid_t pid;
	int r;

	fill_spec(&sp, "e2e-persist", rootfs, 3000000000u);
	r = tier_process_ops.create(&sp, &s, &err);
	if (!ok(r == 0, "persist: create %s", msg(&err)))
		return;
	reply = ask(s, "mk");
	ok(reply && !strcmp(val(reply, "mk"), "0"),
	   "persist: files, whiteout, opaque dir made (%s)", reply ? val(reply, "mk") : "");
	free(reply);

	ok(tier_process_ops.pause(s, &err) == 0, "pause %s", msg(&err));
	ok(!answers_within(s, "info", 300), "paused: the agent does not answer");
	ok(tier_process_ops.pause(s, &err) == 0, "pause again: no-op %s", msg(&err));
	snprintf(snap, sizeof(snap), "%s/snap-paused", base);
	mkdir(snap, 0700);
	r = tier_process_ops.snapshot(s, snap, &level, &paused_us, &err);
	ok(r == 0 && level == TIER_PERSIST_FILES && paused_us == 0,
	   "snapshot of a paused sandbox: files level, no extra pause %s", msg(&err));
	ok(!answers_within(s, "info", 300), "still paused after that snapshot");
	ok(tier_process_ops.resume(s, &err) == 0 && answers_within(s, "info", 2000),
	   "resume: the agent answers again %s", msg(&err));
	ok(tier_process_ops.resume(s, &err) == 0, "resume of a running sandbox is fine %s",
	   msg(&err));

	snprintf(snap, sizeof(snap), "%s/snap", base);
	mkdir(snap, 0700);
	r = tier_process_ops.snapshot(s, snap, &level, &paused_us, &err);
	snprintf(path, sizeof(path), "%s/layer.tar.zst", snap);
	ok(r == 0 && level == TIER_PERSIST_FILES && stat(path, &st) == 0 &&
		   (st.st_mode & 0777) == 0600,
	   "snapshot of a running sandbox: %s, 0600, paused %" PRIu64 " us %s", path, paused_us,
	   msg(&err));
	ok(answers_within(s, "info", 2000), "running again after the snapshot");
	saved = tier_process_ops.save(s);
	pid = (pid_t)strtol(strstr(saved, "\"pid\":") + 6, NULL, 10);
	free(saved);
	ok(tier_process_ops.destroy(s, &err) == 0 && nothing_left(&sp, pid), "source destroyed %s",
	   msg(&err));

	/* A new identity and uid range: the snapshot stays valid without its source. */
	fill_spec(&sp2, "e2e-restored", rootfs, 3000000000u + 5 * 65536u);
	r = tier_process_ops.restore(&sp2, snap, &s2, &err);
	if (ok(r == 0, "restore into a new sandbox %s", msg(&err))) {
		reply = ask(s2, "check");
		ok(reply && !strcmp(val(reply, "hello"), "persisted") &&
			   !strcmp(val(reply, "hello_meta"), "1000:1000:640") &&
			   !strcmp(val(reply, "secret_meta"), "0:0:600"),
		   "inside: content, owners and modes as they were (hello %s)",
		   reply ? val(reply, "hello_meta") : "");
		ok(reply && !strcmp(val(reply, "etc_group"), "0") &&
			   !strcmp(val(reply, "etc_passwd"), "1"),
		   "inside: the deleted template file stays deleted (whiteout)");
		ok(reply && !strcmp(val(reply, "srv_lowerfile"), "0") &&
			   !strcmp(val(reply, "srv_new"), "1"),
		   "inside: the replaced template dir hides the template's files (opaque)");
		ok(reply && !strcmp(val(reply, "shadow"), "/etc/shadow") &&
			   !strcmp(val(reply, "fifo"), "1"),
		   "inside: the symlink and the FIFO are back");
		free(reply);
		saved = tier_process_ops.save(s2);
		pid = (pid_t)strtol(strstr(saved, "\"pid\":") + 6, NULL, 10);
		free(saved);
		snprintf(path, sizeof(path), "/proc/%d/root/data/hello", (int)pid);
		ok(stat(path, &st) == 0 && st.st_uid == sp2.uid_base + 1000,
		   "host: the file belongs to the new range (%u)", st.st_uid);
		ok(tier_process_ops.pause(s2, &err) == 0 &&
			   tier_process_ops.destroy(s2, &err) == 0 && nothing_left(&sp2, pid),
		   "destroy of a paused sandbox leaves nothing %s", msg(&err));
	}

	/* A corrupt snapshot and one that does not fit: create fails, nothing left. */
	snprintf(path, sizeof(path), "%s/snap-cut", base);
	mkdir(path, 0700);
	snprintf(cmd, sizeof(cmd), "head -c 300 %s/layer.tar.zst > %s/layer.tar.zst", snap, path);
	if (system(cmd) != 0)
		abort();
	fill_spec(&sp2, "e2e-corrupt", rootfs, 3000000000u + 6 * 65536u);
	r = tier_process_ops.restore(&sp2, path, &s2, &err);
	ok(r < 0 && err && !strcmp(err->code, "invalid") && strstr(err->message, path) &&
		   nothing_left(&sp2, 0),
	   "restore of a truncated snapshot: invalid, named, nothing left: %s",
	   err ? err->message : "(restored)");
	msg(&err);

	fill_spec(&sp, "e2e-big", rootfs, 3000000000u + 7 * 65536u);
	sp.disk_bytes = 128ull << 20;
	sp.inodes = 10000;
	r = tier_process_ops.create(&sp, &s, &err);
	if (ok(r == 0, "persist: create with a 128 MiB disk %s", msg(&err))) {
		reply = ask(s, "big");
		ok(reply && !strcmp(val(reply, "big"), "0"), "50 MB written inside");
		free(reply);
		snprintf(snap, sizeof(snap), "%s/snap-big", base);
		mkdir(snap, 0700);
		/* Reported, not asserted: the freeze covers the walk, not the compression. */
		for (int i = 0; i < 4; i++) {
			char p[700];

			snprintf(p, sizeof(p), "%s/layer.tar.zst", snap);
			unlink(p);
			proc_layer_set_compression(i < 2 ? 1 : 0);
			r = tier_process_ops.snapshot(s, snap, &level, &paused_us, &err);
			ok(r == 0, "snapshot of ~50 MB (zstd level %d): paused %" PRIu64 " us %s",
			   i < 2 ? 1 : 0, paused_us, msg(&err));
		}
		proc_layer_set_compression(1);
		fill_spec(&sp2, "e2e-nofit", rootfs, 3000000000u + 8 * 65536u);
		r = tier_process_ops.restore(&sp2, snap, &s2, &err);
		ok(r < 0 && err && !strcmp(err->code, "no_space") && nothing_left(&sp2, 0),
		   "restore of 50 MB into an 8 MiB disk: no_space, nothing left: %s",
		   err ? err->message : "(restored)");
		msg(&err);
		/* The page cache the restore fills is charged to the new sandbox's memory cgroup
		 * (the reader runs in it), not to isolad. */
		fill_spec(&sp2, "e2e-charged", rootfs, 3000000000u + 9 * 65536u);
		sp2.disk_bytes = 128ull << 20;
		sp2.inodes = 10000;
		r = tier_process_ops.restore(&sp2, snap, &s2, &err);
		if (ok(r == 0, "restore of 50 MB %s", msg(&err))) {
			struct tier_stats ts;

			tier_process_ops.stats(s2, &ts, NULL);
			ok(ts.memory_bytes >= (45ull << 20) && ts.disk_bytes >= (45ull << 20),
			   "restored files count against the sandbox: memory %" PRIu64
			   ", disk %" PRIu64,
			   ts.memory_bytes, ts.disk_bytes);
			tier_process_ops.destroy(s2, NULL);
		}
		fill_spec(&sp2, "e2e-nomem", rootfs, 3000000000u + 10 * 65536u);
		sp2.disk_bytes = 128ull << 20;
		sp2.inodes = 10000;
		sp2.memory_bytes = 24ull << 20;
		/* The layer is disk, not memory (issue 12): 50 MB of files restore into a sandbox
		 * whose memory limit is 24 MiB, the page cache they pass through is reclaimed. */
		r = tier_process_ops.restore(&sp2, snap, &s2, &err);
		if (ok(r == 0, "restore of 50 MB under a 24 MiB memory limit: %s", msg(&err))) {
			struct tier_stats ts;

			tier_process_ops.stats(s2, &ts, NULL);
			ok(ts.disk_bytes >= (45ull << 20) && ts.memory_bytes <= (24ull << 20),
			   "the files are on disk, not in memory: disk %" PRIu64
			   ", memory %" PRIu64,
			   ts.disk_bytes, ts.memory_bytes);
			tier_process_ops.destroy(s2, NULL);
		}
		tier_process_ops.destroy(s, NULL);
	}
}

int main(int argc, char **argv)
{
	char rootfs[256], hostile_rootfs[256], path[600], want[64];
	struct sandbox_spec sp;
	struct tier_sandbox *s = NULL, *s2 = NULL;
	struct isola_err *err = NULL;
	struct tier_stats st;
	const struct cgroup_ops *cgo;
	struct proc_cgroup cg;
	char *reply, *saved, *doc;
	uint64_t t0, lim = 0;
	pid_t pid;
	int r;

	/* A restore runs this binary again as isolad would run itself (restore.c). */
	if (argc > 0 && !strcmp(argv[0], PROC_RESTORE_ARGV0))
		return tier_process_restore_main(argc, argv);

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	if (!getenv("ISOLA_AGENT")) {
		printf("1..0 # SKIP ISOLA_AGENT not set\n");
		return 0;
	}
	if (!mkdtemp(base))
		abort();
	chmod(base, 0755);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", base);
	snprintf(hostile_rootfs, sizeof(hostile_rootfs), "%s/hostile", base);
	make_rootfs(rootfs, false);
	make_rootfs(hostile_rootfs, true);

	doc = tier_process_doctor();
	ok(doc && strstr(doc, "\"cgroup\""), "doctor returns JSON");
	if (doc)
		printf("# doctor: %s\n",
		       strstr(doc, "\"idmapped_mounts\"") ? "has idmap probe" : "?");
	free(doc);

	fill_spec(&sp, "e2e-main", rootfs, 3000000000u);
	t0 = util_now_ns();
	r = tier_process_ops.create(&sp, &s, &err);
	if (!ok(r == 0, "create (%.2f ms) %s", (double)(util_now_ns() - t0) / 1e6,
		err ? err->message : "")) {
		isola_err_free(err);
		return tap_done();
	}
	saved = tier_process_ops.save(s);
	ok(saved && strstr(saved, "\"start_time\""), "save: %s", saved ? saved : "NULL");
	pid = (pid_t)strtol(strstr(saved, "\"pid\":") + 6, NULL, 10);

	/* From the host, without entering the sandbox. */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	ok(file_has(path, "NoNewPrivs:\t1"), "PID 1 has NoNewPrivs 1");
	ok(file_has(path, "Seccomp:\t2"), "PID 1 has Seccomp 2 (filter)");
	snprintf(want, sizeof(want), "Uid:\t%u\t%u\t%u", sp.uid_base, sp.uid_base, sp.uid_base);
	ok(file_has(path, want), "PID 1 runs as host uid %u", sp.uid_base);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	ok(file_has(path, "3000000000") && file_has(path, "65536"), "uid_map 0 -> uid_base, 65536");
	cgo = proc_cgroup_detect(NULL);
	cgo->paths(sp.id, &cg);
	if (cgo->version == 1) {
		snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", cg.path[0]);
		proc_cg_read_u64(cg.path[0], "memory.limit_in_bytes", &lim);
	} else {
		proc_cg_read_u64(cg.path[0], "memory.max", &lim);
	}
	ok(lim == sp.memory_bytes, "cgroup %s memory limit = %" PRIu64, cgo->name, lim);
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	ok(file_has(path, " / / ") && file_has(path, "overlay"), "root is an overlay");
	ok(file_has(path, " /usr ro,"), "/usr bind is read-only");
	ok(file_has(path, " /sys ro,"), "/sys is read-only");
	if (getenv("E2E_DUMP")) {
		char *mi = NULL;

		util_read_file(path, 1 << 20, &mi, NULL);
		printf("%s", mi);
		free(mi);
	}
	ok(file_has(path, " /proc/keys ") && file_has(path, " /proc/timer_list ") &&
		   file_has(path, " /proc/sys ro,") &&
		   (access("/proc/sysrq-trigger", F_OK) < 0 ||
		    file_has(path, " /proc/sysrq-trigger ro,")),
	   "/proc/keys, /proc/timer_list masked; /proc/sys (and sysrq-trigger) read-only");
	ok(file_has(path, " /dev/pts ") && file_has(path, " /dev/shm "), "/dev/pts and /dev/shm");
	ok(!file_has(path, sp.dir), "the state dir is not visible inside");
	ok(tier_process_ops.stats(s, &st, NULL) == 0 && st.pids >= 1 && st.memory_bytes > 0,
	   "stats: pids %u, memory %" PRIu64 ", cpu %" PRIu64 " us, disk %" PRIu64, st.pids,
	   st.memory_bytes, st.cpu_usec, st.disk_bytes);

	/* From inside, as the stub agent reports it. */
	reply = ask(s, "info");
	ok(reply && !strcmp(val(reply, "hostname"), sp.id), "hostname is the sandbox id (%s)",
	   reply ? val(reply, "hostname") : "");
	ok(reply && !strcmp(val(reply, "pid"), "1") && !strcmp(val(reply, "uid"), "0"),
	   "agent is PID 1, uid 0 inside");
	ok(reply && !strcmp(val(reply, "usr_bin_owner"), "0") &&
		   !strcmp(val(reply, "etc_passwd_owner"), "0"),
	   "template files owned by root inside (idmapped: usr %s, etc %s)",
	   reply ? val(reply, "usr_bin_owner") : "", reply ? val(reply, "etc_passwd_owner") : "");
	ok(reply && !strcmp(val(reply, "mount_errno"), "1"), "mount inside -> EPERM");
	ok(reply && !strcmp(val(reply, "usr_write_errno"), "30"), "write to /usr -> EROFS");
	ok(reply && !strcmp(val(reply, "sys_write_errno"), "30") &&
		   strcmp(val(reply, "proc_sys_write_errno"), "0"),
	   "/sys and /proc/sys not writable (%s, %s)", reply ? val(reply, "sys_write_errno") : "",
	   reply ? val(reply, "proc_sys_write_errno") : "");
	ok(reply && !strcmp(val(reply, "keys_bytes"), "0") &&
		   !strcmp(val(reply, "interrupts_bytes"), "0") &&
		   !strcmp(val(reply, "acpi_entries"), "0") &&
		   (!strcmp(val(reply, "kcore_size"), "0") ||
		    !strcmp(val(reply, "kcore_size"), "-1")),
	   "/proc/keys, /proc/interrupts read empty, /proc/acpi empty, /proc/kcore empty or "
	   "absent");
	ok(reply && !strcmp(val(reply, "dev_null_ok"), "1") && !strcmp(val(reply, "ptmx_ok"), "1"),
	   "/dev/null and /dev/pts/ptmx usable");
	ok(reply && !strcmp(val(reply, "root_write_ok"), "1"), "root filesystem is writable");
	ok(reply && !strcmp(val(reply, "old_root_visible"), "0"), "staging area not visible");
	ok(reply && !strcmp(val(reply, "CapBnd"), "00000000000001eb"),
	   "bounding set is the agent's seven capabilities (%s)",
	   reply ? val(reply, "CapBnd") : "");
	free(reply);
	reply = ask(s, "fill");
	ok(reply && !strcmp(val(reply, "fill_errno"), "28") &&
		   strtoull(val(reply, "fill_bytes"), NULL, 10) <= sp.disk_bytes,
	   "writable layer full at %s bytes -> ENOSPC", reply ? val(reply, "fill_bytes") : "");
	free(reply);

	/* Restart: lose the handle, reattach from the saved state, then destroy. */
	tier_process_ops.release(s);
	r = tier_process_ops.reattach(&sp, saved, &s2, &err);
	ok(r == 0 && tier_process_ops.exit_fd(s2) >= 0, "reattach from saved state");
	{
		struct pollfd pf = {.fd = r == 0 ? tier_process_ops.exit_fd(s2) : -1,
				    .events = POLLIN};

		ok(poll(&pf, 1, 0) == 0, "exit_fd not readable while running");
	}
	if (r == 0) {
		/* The agent's fd of the writable tmpfs (fd 3) came back: the layer can be
		 * snapshot; a saved identity that does not match is refused. */
		char sd[] = "/tmp/isola-e2e-reattach-XXXXXX";
		enum tier_persistence lv = TIER_PERSIST_NONE;
		char *bad = strdup(saved), *ino = bad ? strstr(bad, "\"ino\":\"") : NULL;
		struct tier_sandbox *s3 = NULL;
		bool good;

		good = mkdtemp(sd) && tier_process_ops.snapshot(s2, sd, &lv, NULL, &err) == 0 &&
		       lv == TIER_PERSIST_FILES;
		ok(good, "snapshot after reattach %s", msg(&err));
		util_rm_rf(sd);
		snprintf(sd, sizeof(sd), "/tmp/isola-e2e-reattach-XXXXXX");
		if (ino)
			ino[7] = ino[7] == '9' ? '1' : '9'; /* another inode number */
		good = ino && tier_process_ops.reattach(&sp, bad, &s3, NULL) == 0 && mkdtemp(sd) &&
		       tier_process_ops.snapshot(s3, sd, &lv, NULL, &err) < 0 && err &&
		       !strcmp(err->code, "unavailable");
		ok(good, "a mismatching saved identity: snapshot unavailable (%s)", msg(&err));
		util_rm_rf(sd);
		if (s3)
			tier_process_ops.release(s3);
		free(bad);
	}
	t0 = util_now_ns();
	r = tier_process_ops.destroy(s2, &err);
	ok(r == 0, "destroy (%.2f ms) %s", (double)(util_now_ns() - t0) / 1e6,
	   err ? err->message : "");
	ok(nothing_left(&sp, pid), "after destroy: no process, cgroup, socket or mount left");
	r = tier_process_ops.reattach(&sp, saved, &s2, NULL);
	ok(r == -ESRCH, "reattach after destroy -> ESRCH (%d)", r);
	free(saved);

	/* cleanup() with only the saved state, and with nothing saved (kill by cgroup). */
	fill_spec(&sp, "e2e-lost", rootfs, 3000000000u);
	r = tier_process_ops.create(&sp, &s, NULL);
	saved = r == 0 ? tier_process_ops.save(s) : NULL;
	pid = saved ? (pid_t)strtol(strstr(saved, "\"pid\":") + 6, NULL, 10) : 0;
	if (r == 0)
		tier_process_ops.release(s);
	ok(r == 0 && tier_process_ops.cleanup(&sp, NULL, NULL) == 0 && nothing_left(&sp, pid),
	   "cleanup without saved state kills by cgroup and removes everything");
	free(saved);

	hostile(hostile_rootfs, false);
	hostile(hostile_rootfs, true);
	masked_through_symlink(rootfs, false);
	masked_through_symlink(rootfs, true);

	persistence(rootfs);

	/* The fallback resolver also builds a normal sandbox. */
	tier_process_set_force_no_openat2(true);
	fill_spec(&sp, "e2e-walk", rootfs, 3000000000u);
	r = tier_process_ops.create(&sp, &s, &err);
	ok(r == 0, "create with the O_NOFOLLOW fallback walk %s", err ? err->message : "");
	if (r == 0)
		tier_process_ops.destroy(s, NULL);
	tier_process_set_force_no_openat2(false);

	/* Timing, reported not asserted. */
	for (int i = 0; i < 5; i++) {
		uint64_t c0, c1, c2;
		char id[32];

		snprintf(id, sizeof(id), "e2e-t%d", i);
		fill_spec(&sp, id, rootfs, 3000000000u + (uint32_t)i * 65536u);
		c0 = util_now_ns();
		r = tier_process_ops.create(&sp, &s, NULL);
		c1 = util_now_ns();
		if (r == 0)
			tier_process_ops.destroy(s, NULL);
		c2 = util_now_ns();
		printf("# timing %s: create %.2f ms, destroy %.2f ms\n", id,
		       (double)(c1 - c0) / 1e6, (double)(c2 - c1) / 1e6);
	}
	isola_err_free(err);
	util_rm_rf(base);
	return tap_done();
}
