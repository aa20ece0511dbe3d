/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox: one sandbox object — references, its API shape, its agent connection, exec defaults. */
#include "core-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/caps.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "agentconn.h"

#define AGENT_CONNECT_TIMEOUT_MS 5000

struct sandbox *sandbox_alloc(struct core *c, const char *id)
{
	struct sandbox *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	s->core = c;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->spec.id, sizeof(s->spec.id), "%s", id);
	s->state = SANDBOX_CREATING;
	s->uid_slot = -1;
	s->sc_prog.fd = -1;
	s->env = json_object();
	s->labels = json_object();
	snprintf(s->user, sizeof(s->user), "root");
	snprintf(s->tenant, sizeof(s->tenant), "default");
	return s;
}

void sandbox_ref(struct sandbox *s)
{
	atomic_fetch_add(&s->refs, 1);
}

void sandbox_unref(struct sandbox *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	if (s->conn)
		agent_conn_free(s->conn);
	for (size_t i = 0; i < s->n_old_conns; i++)
		agent_conn_free(s->old_conns[i]);
	free(s->old_conns);
	if (s->ts && s->tier)
		s->tier->release(s->ts);
	json_decref(s->env);
	json_decref(s->labels);
	json_decref(s->seccomp);
	if (s->sc_prog.fd >= 0)
		close(s->sc_prog.fd);
	free(s->error);
	history_free(s);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

const char *sandbox_id(const struct sandbox *s)
{
	return s->id;
}

const char *sandbox_joined_netns(const struct sandbox *s)
{
	return s->spec.netns_path[0] ? s->spec.netns_path : NULL;
}

const char *sandbox_state_name(enum sandbox_state st)
{
	switch (st) {
	case SANDBOX_CREATING:
		return "creating";
	case SANDBOX_RUNNING:
		return "running";
	case SANDBOX_ERROR:
		return "error";
	case SANDBOX_DESTROYING:
		return "destroying";
	case SANDBOX_PAUSED:
		return "paused";
	case SANDBOX_HIBERNATED:
		return "hibernated";
	case SANDBOX_PAUSING:
		return "pausing";
	case SANDBOX_RESUMING:
		return "resuming";
	case SANDBOX_SNAPSHOTTING:
		return "snapshotting";
	case SANDBOX_HIBERNATING:
		return "hibernating";
	case SANDBOX_WAKING:
		return "waking";
	}
	return "unknown";
}

bool sandbox_holds_resources(const struct sandbox *s)
{
	return s->state != SANDBOX_ERROR && s->state != SANDBOX_HIBERNATED;
}

static const char *level_name(enum tier_persistence l)
{
	switch (l) {
	case TIER_PERSIST_NONE:
		break;
	case TIER_PERSIST_FILES:
		return "files";
	case TIER_PERSIST_MEMORY:
		return "files+memory";
	}
	return "none";
}

json_t *core_persistence_json(const struct tier_ops *t)
{
	enum tier_persistence snap = TIER_PERSIST_NONE, pause = TIER_PERSIST_NONE;

	/* Never more than the tier delivers: an operation counts only when its ops exist. */
	if (t->snapshot && t->restore)
		snap = t->snapshot_level ? t->snapshot_level : TIER_PERSIST_FILES;
	if (t->pause && t->resume)
		pause = TIER_PERSIST_MEMORY; /* nothing leaves memory while paused */
	return json_pack("{s:s, s:s, s:s, s:s, s:s}", "stop", "none", "pause", level_name(pause),
			 "hibernate", level_name(snap), "snapshot", level_name(snap), "fork",
			 level_name(snap));
}

/* ["CAP_CHOWN", ...]: the names of a capability mask, in number order. */
static json_t *caps_json(uint64_t mask)
{
	json_t *a = json_array();

	for (int c = 0; c < CAPS_MAX && a; c++)
		if ((mask & (1ull << c)) && caps_name(c))
			json_array_append_new(a, json_string(caps_name(c)));
	return a;
}

long sandbox_host_pid(struct sandbox *s)
{
	char *saved = NULL;
	json_t *j;
	long pid = 0;

	pthread_mutex_lock(&s->lock);
	if (s->ts && s->tier && s->tier->save)
		saved = s->tier->save(s->ts);
	pthread_mutex_unlock(&s->lock);
	j = saved ? json_loads(saved, 0, NULL) : NULL;
	if (json_is_integer(json_object_get(j, "pid")))
		pid = (long)json_integer_value(json_object_get(j, "pid"));
	json_decref(j);
	free(saved);
	return pid > 0 ? pid : 0;
}

json_t *sandbox_to_json(struct sandbox *s)
{
	json_t *j;

	pthread_mutex_lock(&s->lock);
	j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:I, s:I, s:I, s:O, s:O, s:s, s:s, s:f}",
		      "id", s->id, "state", sandbox_state_name(s->state), "tier",
		      s->tier ? s->tier->name : "process", "template", s->template_name,
		      "template_id", s->template_id, "cpu", s->spec.cpu_millis / 1000.0, "memory",
		      (json_int_t)s->spec.memory_bytes, "disk", (json_int_t)s->spec.disk_bytes,
		      "pids", (json_int_t)s->spec.pids, "labels", s->labels, "env", s->env,
		      "workdir", s->workdir, "user", s->user, "created_at", s->created_at);
	if (j) {
		json_object_set_new(j, "expires_at",
				    s->expires_at > 0 ? json_real(s->expires_at) : json_null());
		json_object_set_new(j, "error", s->error ? json_string(s->error) : json_null());
		json_object_set_new(j, "tenant", json_string(s->tenant));
		json_object_set_new(j, "name", s->name[0] ? json_string(s->name) : json_null());
		/* The other limits the tier enforces, so a client can tell EMFILE and ENOSPC
		 * (inodes) apart from faults (tests/security/test_limits.py). */
		json_object_set_new(j, "nofile", json_integer((json_int_t)s->spec.nofile));
		json_object_set_new(j, "hostname", json_string(tier_hostname(&s->spec)));
		json_object_set_new(j, "readonly_root", json_boolean(s->spec.readonly_root));
		json_object_set_new(j, "inodes", json_integer((json_int_t)s->spec.inodes));
		/* What the sandbox's root holds (every process's bounding set). */
		json_object_set_new(j, "capabilities", caps_json(s->spec.caps));
		/* What each operation keeps on this tier (docs/persistence.md). */
		json_object_set_new(j, "persistence",
				    core_persistence_json(s->tier ? s->tier : &tier_process_ops));
		json_object_set_new(j, "forked_from",
				    s->forked_from[0] ? json_string(s->forked_from) : json_null());
		json_object_set_new(j, "snapshot",
				    s->origin_name[0] ? json_string(s->origin_name) : json_null());
		/* Whose network the sandbox is on: its own (isola's, docs/network.md) or a
		 * namespace the operator's engine made (docs/oci.md: no isola egress policy). */
		json_object_set_new(j, "network",
				    s->spec.netns_path[0]
					    ? json_pack("{s:s, s:s}", "mode", "joined", "path",
							s->spec.netns_path)
					    : json_pack("{s:s}", "mode", "own"));
		lifecycle_to_json(s, j); /* on_timeout, idle, auto_resume, pooled (lifecycle.c) */
	}
	pthread_mutex_unlock(&s->lock);
	return j;
}

/* The spec's tmpfs, masked and read-only paths as stored (a new reference). */
static json_t *sandbox_mounts_dump(const struct sandbox_spec *spec)
{
	json_t *a = json_array();

	for (unsigned i = 0; i < spec->n_mounts; i++) {
		const struct tier_mount *m = &spec->mounts[i];

		json_array_append_new(a, json_pack("{s:s, s:i, s:I, s:i, s:b, s:b}", "path",
						   m->path, "kind", (int)m->kind, "size",
						   (json_int_t)m->size, "mode", (int)m->mode,
						   "noexec", m->noexec, "readonly", m->readonly));
	}
	return a;
}

/* Loads what sandbox_mounts_dump stored. A stored row is isolad's own, but an entry of an
 * unknown kind or with a bad path is refused (a hand-edited row), never applied halfway. */
static int sandbox_mounts_load(struct sandbox *s, const json_t *a, struct isola_err **err)
{
	const json_t *v;
	size_t i;

	s->spec.n_mounts = 0;
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > TIER_MAX_MOUNTS)
		goto bad;
	json_array_foreach(a, i, v)
	{
		struct tier_mount *m = &s->spec.mounts[s->spec.n_mounts];
		const char *path = NULL;
		json_int_t size = 0;
		int kind = 0, mode = 0, noexec = 0, ro = 0;

		if (json_unpack((json_t *)v, "{s:s, s:i, s?I, s?i, s?b, s?b}", "path", &path,
				"kind", &kind, "size", &size, "mode", &mode, "noexec", &noexec,
				"readonly", &ro) < 0 ||
		    path[0] != '/' || strlen(path) >= sizeof(m->path) || kind < TIER_MOUNT_TMPFS ||
		    kind > TIER_MOUNT_READONLY || size < 0 || mode < 0 || mode > 07777)
			goto bad;
		memset(m, 0, sizeof(*m));
		snprintf(m->path, sizeof(m->path), "%s", path);
		m->kind = (enum tier_mount_kind)kind;
		m->size = (uint64_t)size;
		m->mode = (uint32_t)mode;
		m->noexec = noexec;
		m->readonly = ro;
		s->spec.n_mounts++;
	}
	return 0;
bad:
	s->spec.n_mounts = 0;
	return isola_err_set(err, EINVAL, "internal", "sandbox `%s`: malformed stored mounts",
			     s->id);
}

char *sandbox_spec_dump(struct sandbox *s)
{
	json_t *j = json_pack(
		"{s:s, s:i, s:I, s:I, s:I, s:i, s:i, s:O, s:O, s:s, s:s, s:s}", "template_name",
		s->template_name, "cpu_millis", (int)s->spec.cpu_millis, "memory_bytes",
		(json_int_t)s->spec.memory_bytes, "disk_bytes", (json_int_t)s->spec.disk_bytes,
		"inodes", (json_int_t)s->spec.inodes, "pids", (int)s->spec.pids, "nofile",
		(int)s->spec.nofile, "env", s->env, "labels", s->labels, "workdir", s->workdir,
		"user", s->user, "rootfs", s->spec.rootfs);
	json_t *binds = json_array();
	char *out;

	for (unsigned i = 0; i < s->spec.n_binds; i++)
		json_array_append_new(binds,
				      json_pack("{s:s, s:s, s:b, s:b}", "src", s->spec.binds[i].src,
						"dst", s->spec.binds[i].dst, "writable",
						s->spec.binds[i].writable, "single",
						s->spec.binds[i].single));
	json_object_set_new(j, "binds", binds);
	json_object_set_new(j, "mounts", sandbox_mounts_dump(&s->spec));
	if (s->seccomp)
		json_object_set(j, "seccomp", s->seccomp);
	json_object_set_new(j, "readonly_root", json_boolean(s->spec.readonly_root));
	json_object_set_new(j, "origin", json_string(s->origin));
	json_object_set_new(j, "caps", json_integer((json_int_t)s->spec.caps));
	json_object_set_new(j, "origin_name", json_string(s->origin_name));
	json_object_set_new(j, "forked_from", json_string(s->forked_from));
	json_object_set_new(j, "name", json_string(s->name));
	json_object_set_new(j, "netns_path", json_string(s->spec.netns_path));
	json_object_set_new(j, "hostname", json_string(s->spec.hostname));
	lifecycle_dump(s, j);
	out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}

int sandbox_spec_load(struct sandbox *s, const char *text, struct isola_err **err)
{
	json_t *j = json_loads(text ? text : "", 0, NULL), *binds = NULL, *env = NULL,
	       *labels = NULL;
	const char *tname = "", *workdir = "", *user = "root", *rootfs = "", *origin = "",
		   *origin_name = "", *forked_from = "", *name = "", *netns = "", *hostname = "";
	json_int_t mem = 0, disk = 0, inodes = 0, caps = (json_int_t)CAPS_DEFAULT_MASK;
	int cpu = 0, pids = 0, nofile = 0;
	size_t i;
	json_t *b;

	if (!j ||
	    json_unpack(j, "{s?s, s?i, s?I, s?I, s?I, s?i, s?i, s?o, s?o, s?s, s?s, s?s, s?o}",
			"template_name", &tname, "cpu_millis", &cpu, "memory_bytes", &mem,
			"disk_bytes", &disk, "inodes", &inodes, "pids", &pids, "nofile", &nofile,
			"env", &env, "labels", &labels, "workdir", &workdir, "user", &user,
			"rootfs", &rootfs, "binds", &binds) < 0) {
		json_decref(j);
		return isola_err_set(err, EINVAL, "internal", "sandbox `%s`: malformed stored spec",
				     s->id);
	}
	/* Persistence links (absent in rows from before snapshots). */
	json_unpack(j, "{s?s, s?s, s?s, s?s, s?s, s?s}", "origin", &origin, "origin_name",
		    &origin_name, "forked_from", &forked_from, "name", &name, "netns_path", &netns,
		    "hostname", &hostname);
	snprintf(s->spec.hostname, sizeof(s->spec.hostname), "%s", hostname);
	s->spec.readonly_root = json_is_true(json_object_get(j, "readonly_root"));
	snprintf(s->spec.netns_path, sizeof(s->spec.netns_path), "%s", netns);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->origin, sizeof(s->origin), "%s", origin);
	snprintf(s->origin_name, sizeof(s->origin_name), "%s", origin_name);
	snprintf(s->forked_from, sizeof(s->forked_from), "%s", forked_from);
	lifecycle_load(s, j);
	/* Rows from before capabilities had none stored: they get the default set. A stored
	 * mask is isolad's own, but a never-listed bit is still refused (a hand-edited row). */
	json_unpack(j, "{s?I}", "caps", &caps);
	if (caps < 0 || !caps_mask_allowed((uint64_t)caps)) {
		json_decref(j);
		return isola_err_set(
			err, EINVAL, "internal",
			"sandbox `%s`: stored capabilities %#llx include a refused one", s->id,
			(unsigned long long)caps);
	}
	s->spec.caps = (uint64_t)caps;
	snprintf(s->template_name, sizeof(s->template_name), "%s", tname);
	snprintf(s->workdir, sizeof(s->workdir), "%s", workdir);
	snprintf(s->user, sizeof(s->user), "%s", user);
	snprintf(s->spec.rootfs, sizeof(s->spec.rootfs), "%s", rootfs);
	s->spec.cpu_millis = (uint32_t)cpu;
	s->spec.memory_bytes = (uint64_t)mem;
	s->spec.disk_bytes = (uint64_t)disk;
	s->spec.inodes = (uint64_t)inodes;
	s->spec.pids = (uint32_t)pids;
	s->spec.nofile = (uint32_t)nofile;
	if (json_is_object(env))
		json_object_update(s->env, env);
	if (json_is_object(labels))
		json_object_update(s->labels, labels);
	s->spec.n_binds = 0;
	json_array_foreach(binds, i, b)
	{
		const char *src = json_string_value(json_object_get(b, "src"));
		const char *dst = json_string_value(json_object_get(b, "dst"));

		if (!src || !dst || s->spec.n_binds >= TIER_MAX_BINDS)
			continue;
		snprintf(s->spec.binds[s->spec.n_binds].src, sizeof(s->spec.binds[0].src), "%s",
			 src);
		snprintf(s->spec.binds[s->spec.n_binds].dst, sizeof(s->spec.binds[0].dst), "%s",
			 dst);
		s->spec.binds[s->spec.n_binds].writable =
			json_is_true(json_object_get(b, "writable"));
		s->spec.binds[s->spec.n_binds].single = json_is_true(json_object_get(b, "single"));
		s->spec.n_binds++;
	}
	if (sandbox_mounts_load(s, json_object_get(j, "mounts"), err) < 0) {
		json_decref(j);
		return -EINVAL;
	}
	/* Checked again as it is compiled at the next create or resume (core_tier_build). */
	json_decref(s->seccomp);
	s->seccomp = json_incref(json_object_get(j, "seccomp"));
	json_decref(j);
	return 0;
}

int sandbox_agent(struct sandbox *s, struct agent_conn **out, struct isola_err **err)
{
	int r = 0, fd;

	/* A paused or hibernated sandbox resumes here when its rule allows (lifecycle.c). */
	r = lifecycle_auto_resume(s, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	/* A snapshot in flight pauses the sandbox at most briefly: its agent stays usable. */
	if ((s->state != SANDBOX_RUNNING &&
	     !(s->state == SANDBOX_SNAPSHOTTING && s->op_prev == SANDBOX_RUNNING)) ||
	    !s->ts) {
		r = isola_err_set(err, EBUSY, "conflict", "sandbox `%s` is %s, not running%s%s",
				  s->id, sandbox_state_name(s->state), s->error ? ": " : "",
				  s->error ? s->error : "");
		goto out;
	}
	if (s->conn && agent_conn_is_alive(s->conn)) {
		*out = s->conn;
		goto out;
	}
	/* The previous connection died (agent restarted its accept loop, or isolad
	 * re-attached): keep it until its channels are closed, then dial again. */
	if (s->conn) {
		sandbox_retire_conn(s);
		if (s->conn) {
			r = isola_err_set(err, ENOMEM, NULL, "sandbox `%s`: out of memory", s->id);
			goto out;
		}
	}
	fd = s->tier->agent_connect(s->ts, err);
	if (fd < 0) {
		r = isola_err_wrap(err, "sandbox `%s`: connect to agent", s->id);
		goto out;
	}
	r = agent_conn_new(fd, AGENT_CONNECT_TIMEOUT_MS, &s->conn, err);
	if (r < 0) {
		isola_err_wrap(err, "sandbox `%s`: agent handshake", s->id);
		goto out;
	}
	*out = s->conn;
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

void sandbox_retire_conn(struct sandbox *s)
{
	struct agent_conn **n;

	if (!s->conn)
		return;
	n = realloc(s->old_conns, (s->n_old_conns + 1) * sizeof(*s->old_conns));
	if (!n)
		return; /* keeps s->conn: the caller sees it still set */
	s->old_conns = n;
	s->old_conns[s->n_old_conns++] = s->conn;
	s->conn = NULL;
}

void sandbox_apply_exec_defaults(struct sandbox *s, json_t *req)
{
	json_t *env = json_object(), *renv = json_object_get(req, "env");

	pthread_mutex_lock(&s->lock);
	json_object_update(env, s->env);
	if (json_is_object(renv))
		json_object_update(env, renv);
	json_object_set_new(req, "env", env);
	if (!json_is_string(json_object_get(req, "cwd")) && s->workdir[0])
		json_object_set_new(req, "cwd", json_string(s->workdir));
	if (!json_is_string(json_object_get(req, "user")) && s->user[0])
		json_object_set_new(req, "user", json_string(s->user));
	pthread_mutex_unlock(&s->lock);
}

void sandbox_apply_file_defaults(struct sandbox *s, json_t *req)
{
	pthread_mutex_lock(&s->lock);
	if (!json_is_string(json_object_get(req, "user")) && s->user[0])
		json_object_set_new(req, "user", json_string(s->user));
	pthread_mutex_unlock(&s->lock);
}

int sandbox_console(struct sandbox *s, size_t max, char **out, size_t *len, struct isola_err **err)
{
	int r = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->tier->console) {
		r = isola_err_set(err, EOPNOTSUPP, "not_supported",
				  "sandbox `%s`: the %s tier has no console", s->id, s->tier->name);
	} else if (!s->ts) {
		r = isola_err_set(err, EBUSY, "conflict",
				  "sandbox `%s` is %s: its console is gone%s", s->id,
				  sandbox_state_name(s->state),
				  s->error ? " (its last lines are in its error)" : "");
	} else {
		*out = s->tier->console(s->ts, max, len);
		if (!*out)
			r = isola_err_set(err, EIO, NULL, "sandbox `%s`: read console", s->id);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

int sandbox_stats(struct sandbox *s, struct tier_stats *out, struct isola_err **err)
{
	int r;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->lock);
	if (!s->ts)
		r = isola_err_set(err, EBUSY, "conflict", "sandbox `%s` is %s", s->id,
				  sandbox_state_name(s->state));
	else
		r = s->tier->stats(s->ts, out, err);
	pthread_mutex_unlock(&s->lock);
	return r;
}

void sandbox_touch(struct sandbox *s)
{
	pthread_mutex_lock(&s->lock);
	s->last_active = util_wall_time();
	pthread_mutex_unlock(&s->lock);
}
