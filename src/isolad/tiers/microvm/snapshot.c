/* SPDX-License-Identifier: Apache-2.0 */
/* snapshot: pause, resume, snapshot and restore of a microvm sandbox over QMP (docs/microvm.md). */
#include "microvm-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../common/fileclone.h"
#include "../../../common/log.h"
#include "../../../common/util.h"
#include "boot.h"

#define QMP_TIMEOUT_MS	   10000
#define MIGRATE_TIMEOUT_MS 60000 /* device state is ~100 KiB; generous for a loaded host */
#define META_MAX	   (64u << 10)
#define FDNAME_OUT	   "isola-snap"
#define FDNAME_IN	   "isola-restore"

static int qmp_open(struct tier_sandbox *s, struct mvm_qmp **q, struct isola_err **err)
{
	int r = mvm_qmp_open(s->qmp_sock, QMP_TIMEOUT_MS, q, err);

	return r < 0 ? isola_err_wrap(err, "sandbox `%s`", s->id) : 0;
}

/* QEMU's run state ("running", "paused", "postmigrate", ...) into out. */
static int run_state(struct mvm_qmp *q, char *out, size_t len, struct isola_err **err)
{
	json_t *ret = NULL;
	const char *st;
	int r = mvm_qmp_exec(q, "query-status", NULL, -1, &ret, err);

	if (r < 0)
		return r;
	st = json_string_value(json_object_get(ret, "status"));
	snprintf(out, len, "%s", st ? st : "");
	json_decref(ret);
	return st ? 0 : isola_err_set(err, EBADMSG, "internal", "query-status: no status");
}

/* States from which `cont` brings the guest back (a dead or broken guest stays dead). */
static bool state_resumable(const char *st)
{
	return !strcmp(st, "paused") || !strcmp(st, "postmigrate") || !strcmp(st, "prelaunch") ||
	       !strcmp(st, "finish-migrate") || !strcmp(st, "restore-vm");
}

int mvm_pause(struct tier_sandbox *s, struct isola_err **err)
{
	struct mvm_qmp *q = NULL;
	int r = qmp_open(s, &q, err);

	/* `stop` on a stopped VM is a no-op: idempotent as the contract asks. */
	if (r == 0)
		r = mvm_qmp_exec(q, "stop", NULL, -1, NULL, err);
	mvm_qmp_close(q);
	return r < 0 ? isola_err_wrap(err, "pause microvm `%s`", s->id) : 0;
}

/* Resumes unless running; the caller holds the session. */
static int resume_on(struct tier_sandbox *s, struct mvm_qmp *q, struct isola_err **err)
{
	char st[32];
	int r = run_state(q, st, sizeof(st), err);

	if (r < 0 || !strcmp(st, "running"))
		return r;
	if (!state_resumable(st))
		return isola_err_set(err, EIO, "internal", "microvm `%s` is `%s`, cannot resume",
				     s->id, st);
	return mvm_qmp_exec(q, "cont", NULL, -1, NULL, err);
}

int mvm_resume(struct tier_sandbox *s, struct isola_err **err)
{
	struct mvm_qmp *q = NULL;
	int r = qmp_open(s, &q, err);

	if (r == 0)
		r = resume_on(s, q, err);
	mvm_qmp_close(q);
	return r < 0 ? isola_err_wrap(err, "resume microvm `%s`", s->id) : 0;
}

static int set_ignore_shared(struct mvm_qmp *q, struct isola_err **err)
{
	json_t *a = json_pack("{s:[{s:s, s:b}]}", "capabilities", "capability", "x-ignore-shared",
			      "state", 1);
	int r = a ? mvm_qmp_exec(q, "migrate-set-capabilities", a, -1, NULL, err)
		  : isola_err_set(err, ENOMEM, "internal", "out of memory");

	json_decref(a);
	return r;
}

/* What an outgoing migration's end tells about the pause (pause_bound_us). */
struct migrate_done {
	uint64_t sent_ns;	 /* util_now_ns() before `migrate` was sent (caller sets it) */
	uint64_t last_active_ns; /* util_now_ns() before the last query not yet completed */
	uint64_t downtime_ms;	 /* QEMU's "downtime": vCPUs stopped -> completion, 0 if none */
	uint64_t total_ms;	 /* QEMU's "total-time": `migrate` received -> completion */
};

/* A positive integer member of a QMP reply, else 0. UNTRUSTED: QEMU's reply; a bound only. */
static uint64_t reply_u64(json_t *ret, const char *key)
{
	json_t *v = json_object_get(ret, key);

	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
							       : 0;
}

/* Polls query-migrate until the (outgoing or incoming) migration ends; 0 when completed.
 * done (outgoing, or NULL) gets the completion's numbers. */

static int migrate_wait(struct mvm_qmp *q, struct migrate_done *done, struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + MIGRATE_TIMEOUT_MS;

	for (;;) {
		json_t *ret = NULL;
		const char *st, *desc;
		uint64_t sent = util_now_ns();
		int r = mvm_qmp_exec(q, "query-migrate", NULL, -1, &ret, err);

		if (r < 0)
			return r;
		st = json_string_value(json_object_get(ret, "status"));
		if (st && !strcmp(st, "completed")) {
			if (done) {
				done->downtime_ms = reply_u64(ret, "downtime");
				done->total_ms = reply_u64(ret, "total-time");
			}
			json_decref(ret);
			return 0;
		}
		if (done)
			done->last_active_ns = sent;
		if (st && (!strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
			desc = json_string_value(json_object_get(ret, "error-desc"));
			r = isola_err_set(err, EIO, "internal", "device state transfer %s: %.300s",
					  st, desc ? desc : "(no reason given)");
			json_decref(ret);
			return r;
		}
		json_decref(ret);
		if (util_now_ms() > deadline)
			return isola_err_set(err, ETIMEDOUT, "internal",
					     "device state transfer did not finish in %d ms",
					     MIGRATE_TIMEOUT_MS);
		poll(NULL, 0, 1);
	}
}

/* Hands fd to QEMU under name and runs `cmd` {"uri": "fd:<name>"}. */
static int migrate_fd(struct mvm_qmp *q, const char *cmd, const char *name, int fd,
		      struct isola_err **err)
{
	char uri[64];
	json_t *a = json_pack("{s:s}", "fdname", name);
	int r;

	if (!a)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	r = mvm_qmp_exec(q, "getfd", a, fd, NULL, err);
	json_decref(a);
	if (r < 0)
		return r;
	snprintf(uri, sizeof(uri), "fd:%s", name);
	a = json_pack("{s:s}", "uri", uri);
	if (!a)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	r = mvm_qmp_exec(q, cmd, a, -1, NULL, err);
	json_decref(a);
	return r;
}

static int open_new(const char *dir, const char *name, struct isola_err **err)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? isola_err_sys(err, errno, errno == ENOSPC ? "no_space" : "internal",
				      "create `%s`", path)
		      : fd;
}

/* A reflink of in as out where the filesystem can, else a sparse copy; *how says which. */
static int clone_into(int in, int out, const char *what, const char *dir, int *how,
		      struct isola_err **err)
{
	int r = fileclone_copy(in, out);

	if (r < 0)
		return isola_err_sys(err, -r, r == -ENOSPC ? "no_space" : "internal",
				     "write %s into `%s`", what, dir);
	*how = r;
	return 0;
}

/*
 * Opens a file QEMU's uid can replace (its RAM file, its overlay in <dir>/vm) for reading.
 * A compromised QEMU could put a symlink (O_NOFOLLOW), a FIFO that would block us
 * (O_NONBLOCK, then S_ISREG) or a file of another size (want_size, when not 0) there.
 * The fd or -errno.
 */
static int open_qemu_file(const char *path, uint64_t want_size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (want_size && (uint64_t)st.st_size != want_size)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* The files a snapshot reads from QEMU and writes into dir, and how each copy was made. */
struct snap_files {
	int ram_in;   /* QEMU's guest RAM file */
	int disk_in;  /* QEMU's disk overlay */
	int state_fd; /* dir/state */
	int ram_fd;   /* dir/mem.ram */
	int disk_fd;  /* dir/disk.qcow2 */
	int ram_how;  /* enum fileclone_how of mem.ram */
	int disk_how; /* enum fileclone_how of disk.qcow2 */
};

/*
 * The frozen part of a snapshot: the device state (QEMU migration stream with
 * x-ignore-shared: guest RAM is a share=on file, so it is left out; the migration's
 * completion stops the vCPUs before saving it), then, with the vCPUs stopped, the RAM file
 * and the flushed disk overlay (the completion flushed and inactivated the images; `cont`
 * re-activates them), each a reflink where the filesystem can.
 */
/*
 * How long the vCPUs were stopped, as an upper bound from QEMU's own counts: its downtime
 * (stop -> completion, whole ms: +1) plus our side from the completion to the end of `cont`
 * (t1). The completion came after the last query that still saw the migration running, and
 * no earlier than `migrate` sent + total-time (QEMU starts that clock after our send and
 * truncates to ms). 0 when QEMU gave no downtime.
 */
static uint64_t pause_bound_us(const struct migrate_done *d, uint64_t t1)
{
	uint64_t end = d->sent_ns + d->total_ms * 1000000;

	if (d->last_active_ns > end)
		end = d->last_active_ns;
	if (!d->downtime_ms || end > t1)
		return 0;
	return (d->downtime_ms + 1) * 1000 + (t1 - end) / 1000;
}

static int freeze_copy(struct mvm_qmp *q, const char *dir, struct snap_files *f,
		       struct migrate_done *done, struct isola_err **err)
{
	uint64_t t0 = util_now_ns(), t1 = 0, t2 = 0;
	int r = migrate_fd(q, "migrate", FDNAME_OUT, f->state_fd, err);

	if (r == 0)
		r = migrate_wait(q, done, err);
	if (r == 0) {
		t1 = util_now_ns();
		r = clone_into(f->ram_in, f->ram_fd, "guest RAM", dir, &f->ram_how, err);
	}
	if (r == 0) {
		t2 = util_now_ns();
		r = clone_into(f->disk_in, f->disk_fd, "the root disk", dir, &f->disk_how, err);
	}
	if (r == 0)
		log_debug("snapshot into %s: device state %.1f ms, RAM %.1f ms, disk %.1f ms", dir,
			  (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
			  (double)(util_now_ns() - t2) / 1e6);
	return r;
}

static int write_meta(struct tier_sandbox *s, const char *dir, const struct snap_files *f,
		      struct isola_err **err)
{
	char path[PATH_MAX];
	json_t *j = json_pack("{s:i, s:i, s:I, s:s, s:s, s:s}", "version", 1, "vcpus",
			      (int)s->vcpus, "memory_mib", (json_int_t)s->memory_mib, "accel",
			      s->accel, "ram_copy", fileclone_how_name(f->ram_how), "disk_copy",
			      fileclone_how_name(f->disk_how));
	char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int r;

	json_decref(j);
	if (!txt)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	snprintf(path, sizeof(path), "%s/" MVM_SNAP_META, dir);
	r = util_write_file_atomic(path, txt, strlen(txt), 0600);
	free(txt);
	return r < 0 ? isola_err_sys(err, -r, r == -ENOSPC ? "no_space" : "internal", "write `%s`",
				     path)
		     : 0;
}

static void snap_files_close(struct snap_files *f)
{
	int *fds[] = {&f->ram_in, &f->disk_in, &f->state_fd, &f->ram_fd, &f->disk_fd};

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

/* Opens QEMU's RAM file and overlay and creates the snapshot's files (nothing stopped yet). */
static int snap_files_open(struct tier_sandbox *s, const char *dir, struct snap_files *f,
			   struct isola_err **err)
{
	char path[PATH_MAX];

	/* Guest RAM is the share=on file at /mem/ram in QEMU's root (its tmpfs, or the bind of
	 * <vmdir>/mem on a reflink filesystem: jail.c), seen from the host through QEMU's root
	 * (isolad is root; the path is fixed, never guest-chosen; /mem is a mount point QEMU
	 * cannot replace). */
	snprintf(path, sizeof(path), "/proc/%d/root" MVM_JAIL_MEM, (int)s->pid);
	f->ram_in = open_qemu_file(path, s->memory_mib << 20);
	if (f->ram_in < 0)
		return isola_err_sys(err, -f->ram_in, "internal", "open guest RAM `%s`", path);
	snprintf(path, sizeof(path), "%s/disk.qcow2", s->vmdir);
	f->disk_in = open_qemu_file(path, 0);
	if (f->disk_in < 0)
		return isola_err_sys(err, -f->disk_in, "internal", "open `%s`", path);
	if ((f->state_fd = open_new(dir, MVM_SNAP_STATE, err)) < 0 ||
	    (f->ram_fd = open_new(dir, MVM_SNAP_RAM, err)) < 0 ||
	    (f->disk_fd = open_new(dir, MVM_SNAP_DISK, err)) < 0)
		return -EIO;
	return 0;
}

int mvm_snapshot(struct tier_sandbox *s, const char *dir, enum tier_persistence *level,
		 uint64_t *paused_us, struct isola_err **err)
{
	struct snap_files f = {-1, -1, -1, -1, -1, FILECLONE_COPY, FILECLONE_COPY};
	struct migrate_done done = {0, 0, 0, 0};
	uint64_t pause_us = 0, bound_us;
	char st[32];
	struct mvm_qmp *q = NULL;
	uint64_t t0, t1, t_frozen;
	bool was_running;
	int r, r2;

	if (paused_us)
		*paused_us = 0;
	if (s->pid <= 0)
		return isola_err_set(err, ESRCH, "conflict", "microvm `%s` is not running", s->id);
	r = snap_files_open(s, dir, &f, err);
	if (r == 0)
		r = qmp_open(s, &q, err);
	if (r == 0)
		r = run_state(q, st, sizeof(st), err);
	if (r == 0)
		r = set_ignore_shared(q, err);
	if (r < 0)
		goto out;
	/* While the guest still runs: write back what it dirtied so far, so that the clone in
	 * the pause (which writes back the source's dirty pages first) has only the rest to do.
	 * A no-op for RAM on tmpfs. */
	if (fdatasync(f.ram_in) < 0 || fdatasync(f.disk_in) < 0)
		log_debug("sandbox %s: early write-back before the snapshot: %s", s->id,
			  strerror(errno));
	was_running = !strcmp(st, "running");
	/* No `stop` of our own: the migration's completion stops the vCPUs itself before it
	 * saves the device state (x-ignore-shared leaves it nothing else to send), and they stay
	 * stopped (`postmigrate`) through the clones until `cont`. That saves a QMP round trip
	 * of the pause. */
	t0 = util_now_ns();
	done.sent_ns = done.last_active_ns = t0;
	r = freeze_copy(q, dir, &f, &done, err);
	t_frozen = util_now_ns();
	/* Back to the state it was in, whatever happened (ENOSPC included). */
	r2 = was_running ? mvm_qmp_exec(q, "cont", NULL, -1, NULL, r < 0 ? NULL : err) : 0;
	t1 = util_now_ns();
	log_debug("sandbox %s: snapshot: migration and files %.1f ms (QEMU's downtime %" PRIu64
		  " ms), cont %.1f ms",
		  s->id, (double)(t_frozen - t0) / 1e6, done.downtime_ms,
		  (double)(t1 - t_frozen) / 1e6);
	if (r == 0)
		r = r2;
	/* paused_us: the tighter of migrate -> cont and QEMU's own count (pause_bound_us). */
	if (was_running) {
		pause_us = (t1 - t0) / 1000;
		bound_us = pause_bound_us(&done, t1);
		if (bound_us && bound_us < pause_us)
			pause_us = bound_us;
	}
	if (paused_us)
		*paused_us = pause_us;
	/* To disk after the guest runs again: the copies above only filled the page cache. */
	if (r == 0 && (fsync(f.state_fd) < 0 || fsync(f.ram_fd) < 0 || fsync(f.disk_fd) < 0))
		r = isola_err_sys(err, errno, errno == ENOSPC ? "no_space" : "internal",
				  "fsync the snapshot in `%s`", dir);
	if (r == 0)
		r = write_meta(s, dir, &f, err);
	if (r == 0) {
		cleanup_fd int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0 || fsync(dfd) < 0)
			r = isola_err_sys(err, errno, "internal", "fsync `%s`", dir);
	}
	if (r == 0) {
		*level = TIER_PERSIST_MEMORY;
		log_info("sandbox %s: snapshot into %s, paused at most %.1f ms, RAM: %s, disk: %s",
			 s->id, dir, (double)pause_us / 1e3, fileclone_how_name(f.ram_how),
			 fileclone_how_name(f.disk_how));
	}
out:
	mvm_qmp_close(q);
	snap_files_close(&f);
	return r < 0 ? isola_err_wrap(err, "snapshot microvm `%s`", s->id) : 0;
}

int mvm_snap_incoming(struct tier_sandbox *s, int state_fd, struct isola_err **err)
{
	struct mvm_qmp *q = NULL;
	uint64_t t0 = util_now_ms(), t1 = 0;
	int r = qmp_open(s, &q, err);

	if (r == 0) {
		t1 = util_now_ms();
		r = set_ignore_shared(q, err);
	}
	if (r == 0)
		r = migrate_fd(q, "migrate-incoming", FDNAME_IN, state_fd, err);
	if (r == 0)
		r = migrate_wait(q, NULL, err);
	if (r == 0)
		log_debug("sandbox %s: QMP up after %" PRIu64 " ms, device state loaded in %" PRIu64
			  " ms",
			  s->id, t1 - t0, util_now_ms() - t1);
	/* Without -S QEMU starts the guest itself once the state is in; make sure. */
	if (r == 0)
		r = resume_on(s, q, err);
	/* Close before the agent sync: QEMU serves one QMP client, and the sync pokes QMP. */
	mvm_qmp_close(q);
	return r < 0 ? isola_err_wrap(err, "load the snapshot's device state") : 0;
}

int mvm_snap_agent_sync(struct tier_sandbox *s, int timeout_ms, struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + (uint64_t)timeout_ms;
	int attempt_ms = 250; /* the first token is often eaten: retry soon, then back off */

	for (;;) {
		uint64_t now = util_now_ms();
		int left = now < deadline ? (int)(deadline - now) : 0;
		int fd;
		struct isola_err *e = NULL;

		fd = mvm_agent_sync(s->agent_sock, s->qmp_sock, s->pidfd,
				    left < attempt_ms ? left : attempt_ms, &e);
		if (fd >= 0)
			return fd;
		/* Only a silent agent is worth another connection; QEMU gone is final. */
		if (-fd != ETIMEDOUT || util_now_ms() >= deadline) {
			if (err && !*err)
				*err = e;
			else
				isola_err_free(e);
			return fd;
		}
		isola_err_free(e);
		log_debug("sandbox %s: agent silent after restore, reconnecting", s->id);
		attempt_ms *= 2;
	}
}

/* Opens dir/name read-only and checks its size (want, or 1..max when want is 0). */
static int open_part(const char *dir, const char *name, uint64_t want, uint64_t max,
		     struct isola_err **err)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return isola_err_sys(err, errno, "invalid", "snapshot file `%s`", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return isola_err_set(err, EINVAL, "invalid", "snapshot file `%s`: not a file",
				     path);
	}
	if ((want && (uint64_t)st.st_size != want) ||
	    (!want && (st.st_size <= 0 || (uint64_t)st.st_size > max))) {
		close(fd);
		return isola_err_set(
			err, EINVAL, "invalid",
			"snapshot file `%s` is corrupt: %" PRIu64 " bytes, expected %s%" PRIu64,
			path, (uint64_t)st.st_size, want ? "" : "1 to ", want ? want : max);
	}
	return fd;
}

/* Reads dir/vm.json. UNTRUSTED: a file on disk (core checked its digest); typed fields only. */
static int read_meta(const char *dir, unsigned *vcpus, uint64_t *mib, char *accel, size_t alen,
		     struct isola_err **err)
{
	char path[PATH_MAX];
	cleanup_free char *txt = NULL;
	json_t *j;
	json_int_t v = 0, n = 0, m = 0;
	const char *acc = NULL;
	int r;

	snprintf(path, sizeof(path), "%s/" MVM_SNAP_META, dir);
	r = util_read_file(path, META_MAX, &txt, NULL);
	if (r < 0)
		return isola_err_sys(err, -r, "invalid", "snapshot `%s`", path);
	j = json_loads(txt, JSON_REJECT_DUPLICATES, NULL);
	r = j && json_unpack(j, "{s:I, s:I, s:I, s:s}", "version", &v, "vcpus", &n, "memory_mib",
			     &m, "accel", &acc) == 0
		    ? 0
		    : -EINVAL;
	if (r == 0 && (v != 1 || n < 1 || n > 64 || m < 64 || m > (1 << 20)))
		r = -EINVAL;
	if (r == 0) {
		*vcpus = (unsigned)n;
		*mib = (uint64_t)m;
		snprintf(accel, alen, "%s", acc);
	}
	json_decref(j);
	return r < 0 ? isola_err_set(err, EINVAL, "invalid", "snapshot `%s` is corrupt", path) : 0;
}

int mvm_restore(const struct sandbox_spec *spec, const char *snapdir, struct tier_sandbox **out,
		struct isola_err **err)
{
	char accel[16], disk[PATH_MAX];
	struct mvm_restore_src src;
	struct mvm_accel acc;
	cleanup_fd int ram_fd = -1;
	cleanup_fd int state_fd = -1;
	unsigned vcpus = 0, want_vcpus;
	uint64_t mib = 0, want_mib;
	uint64_t t0 = util_now_ns();
	int r;

	r = read_meta(snapdir, &vcpus, &mib, accel, sizeof(accel), err);
	if (r < 0)
		return r;
	mvm_spec_shape(spec, &want_vcpus, &want_mib);
	/* The guest's kernel knows its CPUs and RAM: a snapshot only fits the same shape. */
	if (vcpus != want_vcpus || mib != want_mib)
		return isola_err_set(err, EINVAL, "invalid",
				     "the snapshot has %u vCPU(s) and %" PRIu64
				     " MiB of memory; the request asks for %u vCPU(s) and %" PRIu64
				     " MiB: a microvm restores only with its snapshot's cpu and "
				     "memory",
				     vcpus, mib, want_vcpus, want_mib);
	mvm_accel_host(&acc);
	if (strcmp(accel, acc.name))
		return isola_err_set(err, EINVAL, "invalid",
				     "the snapshot was taken under %s and this host runs %s", accel,
				     acc.name);
	ram_fd = open_part(snapdir, MVM_SNAP_RAM, mib << 20, 0, err);
	if (ram_fd < 0)
		return ram_fd;
	state_fd = open_part(snapdir, MVM_SNAP_STATE, 0, MVM_SNAP_STATE_MAX, err);
	if (state_fd < 0)
		return state_fd;
	snprintf(disk, sizeof(disk), "%s/" MVM_SNAP_DISK, snapdir);
	src.disk = disk;
	src.ram_fd = ram_fd;
	src.state_fd = state_fd;
	r = mvm_launch(spec, &src, out, err);
	if (r < 0)
		return isola_err_wrap(err, "restore from `%s`", snapdir);
	log_info("sandbox %s: restored from %s in %.1f ms", spec->id, snapdir,
		 (double)(util_now_ns() - t0) / 1e6);
	return 0;
}
