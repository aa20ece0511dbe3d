/* SPDX-License-Identifier: Apache-2.0 */
/* core: the sandbox manager — create, look up, list, destroy; the list of live sandboxes. */
#include "core-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "../../common/caps.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../images/images.h"
#include "../net/net.h"
#include "../tenancy/tenancy.h"
#include "agentconn.h"
#include "pool.h"
#include "specseccomp.h"

#define AGENT_CONNECT_TIMEOUT_MS 5000

void core_config_defaults(struct core_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "/var/lib/isola");
	cfg->default_cpu_millis = 1000;
	cfg->default_memory_bytes = 256ull << 20;
	cfg->default_disk_bytes = 1ull << 30;
	cfg->default_inodes = 65536;
	cfg->default_pids = 512;
	cfg->default_ttl_s = 0;
	cfg->max_ttl_s = 7 * 24 * 3600;
	cfg->tombstone_ttl_s = 24 * 3600;
	cfg->uid_base = CORE_UID_BASE_MIN;
	/* CPU is time-shared, so limits may add up past the host; memory is not: a sandbox
	 * admitted past RAM would be OOM-killed later instead of refused now. */
	cfg->cpu_overcommit = 32.0; /* CPU limits are caps, not reservations */
	cfg->memory_overcommit = 1.0;
	/* A burst past the host's room queues behind the destroys of the burst itself. */
	cfg->admission_wait_ms = 10000;
}

int core_sandbox_dir(const struct core *c, const char *id, char *out, size_t n)
{
	int len = snprintf(out, n, "%s/sandboxes/%s", c->cfg.state_dir, id);

	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

const char *core_snapshot_root(const struct core *c)
{
	return c->snapshot_root;
}

const struct tier_ops *core_tier_by_name(const char *name)
{
	if (!name || !*name || !strcmp(name, "process"))
		return &tier_process_ops;
	if (!strcmp(name, "microvm"))
		return &tier_microvm_ops;
	return NULL;
}

/* Loads the API token, or generates and stores one (0600) at first start. */
static int core_load_token(struct core *c, struct isola_err **err)
{
	char path[PATH_MAX], *text = NULL;
	unsigned char raw[32];
	int r;

	snprintf(path, sizeof(path), "%s/api.token", c->cfg.state_dir);
	if (util_read_file(path, 256, &text, NULL) == 0) {
		size_t n = strcspn(text, "\r\n");

		if (n >= 32 && n < sizeof(c->token)) {
			memcpy(c->token, text, n);
			c->token[n] = '\0';
			free(text);
			return 0;
		}
		free(text);
	}
	r = util_random(raw, sizeof(raw));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "generate API token");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(c->token + 2 * i, 3, "%02x", raw[i]);
	r = util_write_file_atomic(path, c->token, strlen(c->token), 0600);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "write API token `%s`", path);
	return 0;
}

/*
 * Takes an exclusive flock on <state>/isolad.lock, held for the core's life. Without it a
 * second isolad on the same state dir would reconcile — and clean up — the first one's
 * live sandboxes.
 */
static int core_lock_state_dir(struct core *c, struct isola_err **err)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/isolad.lock", c->cfg.state_dir);
	c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c->lock_fd < 0)
		return isola_err_sys(err, errno, NULL, "open lock `%s`", path);
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return isola_err_set(err, EBUSY, "conflict",
					     "state dir `%s` is in use by another isolad",
					     c->cfg.state_dir);
		return isola_err_sys(err, errno, NULL, "lock `%s`", path);
	}
	return 0;
}

int core_uid_base_valid(uint64_t base)
{
	return base >= CORE_UID_BASE_MIN && base % 65536u == 0 &&
	       base + CORE_UID_SPAN <= (uint64_t)UINT32_MAX; /* (uid_t)-1 is never a uid */
}

/*
 * Adopts cfg.uid_base, recorded in the store's meta table: the host uids of a state dir's
 * sandboxes (live, hibernated or orphaned by a crash) follow from it, so it changes only
 * while the state dir holds no sandbox.
 */
static int core_uid_base_adopt(struct core *c, struct isola_err **err)
{
	cleanup_free char *was = NULL;
	struct store_sandbox *rows = NULL;
	char now[16];
	size_t n = 0;
	int r;

	if (!core_uid_base_valid(c->cfg.uid_base))
		return isola_err_set(err, EINVAL, "invalid",
				     "uid base %u is not a usable range start", c->cfg.uid_base);
	snprintf(now, sizeof(now), "%u", c->cfg.uid_base);
	r = store_meta_get(c->store, "uid_base", &was, err);
	if (r < 0)
		return r;
	if (was && strcmp(was, now) != 0) {
		r = store_sandbox_list(c->store, &rows, &n, err);
		if (r < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			store_sandbox_fini(&rows[i]);
		free(rows);
		if (n > 0)
			return isola_err_set(
				err, EBUSY, "conflict",
				"state dir `%s` holds %zu sandbox(es) whose processes run "
				"as host uids from %s; start isolad with --uid-base %s, or "
				"destroy them first",
				c->cfg.state_dir, n, was, was);
	}
	c->uid_base = c->cfg.uid_base;
	return was && strcmp(was, now) == 0 ? 0 : store_meta_set(c->store, "uid_base", now, err);
}

int core_new(const struct core_config *cfg, struct core **out, struct isola_err **err)
{
	struct core *c = calloc(1, sizeof(*c));
	char path[PATH_MAX];
	int r;

	if (!c)
		return isola_err_set(err, ENOMEM, NULL, "core: out of memory");
	c->cfg = *cfg;
	c->stop_fd = -1;
	c->lock_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->snap_lock, NULL);
	pthread_mutex_init(&c->end_lock, NULL);
	pthread_cond_init(&c->end_cond, NULL);
	pthread_cond_init(&c->room_cond, NULL);
	change_bus_init(&c->changes);
	r = util_mkdir_p(cfg->state_dir, 0700);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "create state dir `%s`", cfg->state_dir);
		goto fail;
	}
	chmod(cfg->state_dir, 0700);
	r = core_lock_state_dir(c, err);
	if (r < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/sandboxes", cfg->state_dir);
	r = util_mkdir_p(path, 0700);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "create `%s`", path);
		goto fail;
	}
	r = cfg->snapshot_dir[0]
		    ? snprintf(c->snapshot_root, sizeof(c->snapshot_root), "%s", cfg->snapshot_dir)
		    : snprintf(c->snapshot_root, sizeof(c->snapshot_root), "%.500s/snapshots",
			       cfg->state_dir);
	if (r < 0 || (size_t)r >= sizeof(c->snapshot_root)) {
		r = isola_err_set(err, ENAMETOOLONG, "invalid", "snapshot dir path too long");
		goto fail;
	}
	r = util_mkdir_p(c->snapshot_root, 0700);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "create snapshot dir `%s`", c->snapshot_root);
		goto fail;
	}
	r = core_load_token(c, err);
	if (r < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/isola.db", cfg->state_dir);
	r = store_open(path, &c->store, err);
	if (r < 0)
		goto fail;
	r = core_uid_base_adopt(c, err);
	if (r < 0)
		goto fail;
	r = tenancy_new(c->store, &c->tenancy, err);
	if (r < 0)
		goto fail;
	{
		struct audit_config ac = {.segment_records = cfg->audit_segment_records,
					  .seal_interval_s = cfg->audit_seal_interval_s,
					  .retention_s = cfg->audit_retention_s};
		struct sysinfo si;

		snprintf(ac.dir, sizeof(ac.dir), "%s/audit", cfg->state_dir);
		snprintf(ac.key_path, sizeof(ac.key_path), "%s/audit.key", cfg->state_dir);
		r = audit_open(&ac, &c->audit, err);
		if (r < 0)
			goto fail;
		c->host_cpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
		if (sysinfo(&si) == 0)
			c->host_memory = (uint64_t)si.totalram * si.mem_unit;
	}
	r = images_init(cfg->state_dir, err);
	if (r < 0)
		goto fail;
	if (cfg->microvm_prebuild)
		images_microvm_prebuild("host");
	r = core_reconcile(c, err);
	if (r < 0)
		goto fail;
	core_snapshot_reconcile(c);
	core_tombstone_trim(c);
	r = core_monitor_start(c, err);
	if (r == 0)
		r = pool_start(c, err); /* warm pools; re-counts pooled sandboxes (pool.c) */
	if (r < 0)
		goto fail;
	audit_append(c->audit, "isolad", "", "isolad.start", "", "ok", NULL);
	*out = c;
	return 0;
fail:
	core_free(c);
	return r;
}

void core_free(struct core *c)
{
	if (!c)
		return;
	pool_stop(c);
	core_monitor_stop(c);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++)
		sandbox_unref(c->sandboxes[i]);
	free(c->sandboxes);
	c->sandboxes = NULL;
	c->n_sandboxes = 0;
	pthread_mutex_unlock(&c->lock);
	images_shutdown();
	if (c->audit)
		audit_append(c->audit, "isolad", "", "isolad.stop", "", "ok", NULL);
	audit_close(c->audit);
	tenancy_free(c->tenancy);
	store_close(c->store);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->snap_lock);
	pthread_mutex_destroy(&c->end_lock);
	pthread_cond_destroy(&c->end_cond);
	pthread_cond_destroy(&c->room_cond);
	change_bus_fini(&c->changes);
	free(c);
}

int core_list_add(struct core *c, struct sandbox *s, struct isola_err **err)
{
	int r = 0;

	pthread_mutex_lock(&c->lock);
	r = core_name_check_locked(c, s, err); /* the authoritative check, under the list lock */
	if (r < 0)
		goto out;
	if (c->n_sandboxes == c->cap_sandboxes) {
		size_t cap = c->cap_sandboxes ? c->cap_sandboxes * 2 : 64;
		struct sandbox **n = realloc(c->sandboxes, cap * sizeof(*n));

		if (!n) {
			r = isola_err_set(err, ENOMEM, NULL, "sandbox list: out of memory");
			goto out;
		}
		c->sandboxes = n;
		c->cap_sandboxes = cap;
	}
	sandbox_ref(s);
	c->sandboxes[c->n_sandboxes++] = s;
	core_changed(c); /* created */
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

bool core_sandbox_listed(struct core *c, const char *id)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes && !found; i++)
		found = !strcmp(c->sandboxes[i]->id, id);
	pthread_mutex_unlock(&c->lock);
	return found;
}

void core_list_remove(struct core *c, struct sandbox *s)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++) {
		if (c->sandboxes[i] != s)
			continue;
		c->sandboxes[i] = c->sandboxes[--c->n_sandboxes];
		found = true;
		break;
	}
	if (found && s->uid_slot >= 0 && s->uid_slot < CORE_MAX_SANDBOXES)
		c->slots[s->uid_slot] = 0;
	if (found)
		pthread_cond_broadcast(&c->room_cond);
	pthread_mutex_unlock(&c->lock);
	if (found) {
		core_changed(c); /* destroyed */
		sandbox_unref(s);
	}
}

/* Reserves the lowest free uid slot; -EAGAIN when the host is full. */
static int core_slot_alloc(struct core *c)
{
	int slot = -EAGAIN;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CORE_MAX_SANDBOXES; i++) {
		if (!c->slots[i]) {
			c->slots[i] = 1;
			slot = i;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return slot;
}

static void core_slot_free(struct core *c, int slot)
{
	if (slot < 0 || slot >= CORE_MAX_SANDBOXES)
		return;
	pthread_mutex_lock(&c->lock);
	c->slots[slot] = 0;
	pthread_mutex_unlock(&c->lock);
}

int core_new_id(char *out, size_t n)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char raw[16];
	int r;

	if (n < sizeof(raw) + 1)
		return -EINVAL;
	r = util_random(raw, sizeof(raw));
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(raw); i++)
		out[i] = alphabet[raw[i] % 36];
	out[sizeof(raw)] = '\0';
	return 0;
}

/* Validates label or env maps: an object of string values with sane keys. */
static int check_string_map(const json_t *m, const char *what, size_t max_entries,
			    struct isola_err **err)
{
	const char *k;
	json_t *v;

	if (!m)
		return 0;
	if (!json_is_object(m))
		return isola_err_set(err, EINVAL, "invalid", "%s must be an object of strings",
				     what);
	if (json_object_size(m) > max_entries)
		return isola_err_set(err, E2BIG, "invalid", "%s: more than %zu entries", what,
				     max_entries);
	json_object_foreach((json_t *)m, k, v)
	{
		if (!json_is_string(v))
			return isola_err_set(err, EINVAL, "invalid",
					     "%s `%s`: value must be a string", what, k);
		if (!*k || strlen(k) > 255 || strchr(k, '=') || json_string_length(v) > 32768)
			return isola_err_set(err, EINVAL, "invalid",
					     "%s `%.64s`: key must be 1-255 chars without `=`, "
					     "value at most 32 KiB",
					     what, k);
	}
	return 0;
}

/*
 * A host directory as the lower layer (isola-runc's bundle root, docs/oci.md): absolute, no
 * `..` component, at most 500 bytes, and a directory whose last component is no symlink. The
 * API lets only the operator name one. Fills t like images_get() with no env or binds.
 */
static int core_rootfs_info(const char *path, struct template_info *t, struct isola_err **err)
{
	struct stat st;
	size_t n = strlen(path);

	if (path[0] != '/' || n > 500 || strstr(path, "/../") ||
	    (n >= 3 && !strcmp(path + n - 3, "/..")))
		return isola_err_set(err, EINVAL, "invalid",
				     "rootfs `%.64s` must be an absolute path of at most 500 bytes "
				     "without `..`",
				     path);
	if (lstat(path, &st) < 0)
		return isola_err_sys(err, errno, "invalid", "rootfs `%s`", path);
	if (!S_ISDIR(st.st_mode))
		return isola_err_set(err, ENOTDIR, "invalid",
				     "rootfs `%s` is not a directory (a symlink is refused)", path);
	snprintf(t->name, sizeof(t->name), "rootfs");
	snprintf(t->rootfs, sizeof(t->rootfs), "%s", path);
	snprintf(t->workdir, sizeof(t->workdir), "/");
	return 0;
}

int core_resources_check(uint32_t cpu_millis, uint64_t memory_bytes, struct isola_err **err)
{
	if (memory_bytes && memory_bytes < (16ull << 20))
		return isola_err_set(err, EINVAL, "invalid", "memory must be at least 16M");
	if (cpu_millis > 1000u * 1024u)
		return isola_err_set(err, EINVAL, "invalid", "cpu must be at most 1024");
	return 0;
}

json_t *core_resources_json(uint32_t cpu_millis, uint64_t memory_bytes)
{
	json_t *o = json_object();

	if (o && cpu_millis)
		json_object_set_new(o, "cpu", json_real(cpu_millis / 1000.0));
	if (o && memory_bytes)
		json_object_set_new(o, "memory", json_integer((json_int_t)memory_bytes));
	return o;
}

/* The template's config.resources (a build's --cpu/--memory, an E2B template's cpuCount and
 * memoryMB): defaults for what the request leaves unset. Written by isolad's own builder, but
 * read defensively: a value out of range is ignored. */
static void template_resources(const json_t *config, uint32_t *cpu_millis, uint64_t *memory_bytes)
{
	const json_t *res = json_object_get(config, "resources");
	double cpu = json_number_value(json_object_get(res, "cpu"));
	json_int_t mem = json_integer_value(json_object_get(res, "memory"));

	*cpu_millis = cpu > 0 && cpu <= 1024 ? (uint32_t)(cpu * 1000 + 0.5) : 0;
	*memory_bytes = mem >= (16 << 20) ? (uint64_t)mem : 0;
}

/*
 * The spec's tmpfs mounts are bounded by the sandbox's memory, as /dev/shm is (their pages
 * are charged to its memory cgroup whoever writes them): no size is half the memory limit
 * (64 MiB without one), a size above the limit is refused naming it.
 */
static int core_tmpfs_sizes(struct sandbox_spec *spec, struct isola_err **err)
{
	for (unsigned i = 0; i < spec->n_mounts; i++) {
		struct tier_mount *m = &spec->mounts[i];

		if (m->kind != TIER_MOUNT_TMPFS)
			continue;
		if (!m->size)
			m->size = spec->memory_bytes ? spec->memory_bytes / 2 : 64ull << 20;
		if (spec->memory_bytes && m->size > spec->memory_bytes)
			return isola_err_set(err, EINVAL, "invalid",
					     "tmpfs `%s`: size %llu exceeds the sandbox's memory "
					     "limit (%llu bytes), which its pages count against",
					     m->path, (unsigned long long)m->size,
					     (unsigned long long)spec->memory_bytes);
	}
	return 0;
}

/* The spec's own seccomp profile (docs/oci.md): checked and compiled now (400 `invalid` naming
 * what is wrong, before anything is built), the program kept for the first build. */
static int core_prepare_seccomp(struct sandbox *s, const struct sandbox_request *req,
				struct isola_err **err)
{
	int r;

	if (!req->seccomp)
		return 0;
	r = spec_seccomp_compile(req->seccomp, &s->sc_prog.fd, &s->sc_prog.flags, err);
	if (r < 0)
		return r;
	s->seccomp = json_deep_copy(req->seccomp);
	return s->seccomp ? 0 : isola_err_set(err, ENOMEM, "internal", "seccomp: out of memory");
}

/* Fills the sandbox's spec, env and defaults from the request and the template. */
static int core_prepare(struct core *c, struct sandbox *s, const struct sandbox_request *req,
			struct isola_err **err)
{
	const char *tname = req->template_name[0] ? req->template_name : "host";
	struct template_info t;
	uint32_t tcpu;
	uint64_t tmem;
	int r;

	memset(&t, 0, sizeof(t));
	if (req->rootfs) /* isola-runc's bundle (docs/oci.md): no template behind it */
		r = core_rootfs_info(req->rootfs, &t, err);
	else
		r = images_get(tname, &t, err);
	if (r < 0)
		return r;
	snprintf(s->template_name, sizeof(s->template_name), "%s", t.name);
	snprintf(s->template_id, sizeof(s->template_id), "%s", t.id);
	snprintf(s->spec.rootfs, sizeof(s->spec.rootfs), "%s", t.rootfs);
	memcpy(s->spec.binds, t.binds, sizeof(t.binds));
	s->spec.n_binds = t.n_binds;
	/* The operator's binds go on top of the template's (core_validate checked them). */
	if (t.n_binds + req->n_binds > TIER_MAX_BINDS) {
		template_info_fini(&t);
		return isola_err_set(err, E2BIG, "invalid",
				     "binds: template `%s` has %u binds, %u more exceed isola's %d",
				     t.name, t.n_binds, req->n_binds, TIER_MAX_BINDS);
	}
	for (unsigned i = 0; i < req->n_binds; i++)
		s->spec.binds[s->spec.n_binds++] = req->binds[i];
	s->spec.n_mounts = 0;
	for (unsigned i = 0; i < req->n_mounts && i < TIER_MAX_MOUNTS; i++)
		s->spec.mounts[s->spec.n_mounts++] = req->mounts[i];
	s->spec.readonly_root = req->readonly_root;
	if (json_is_object(t.env))
		json_object_update(s->env, t.env);
	if (req->env)
		json_object_update(s->env, (json_t *)req->env);
	if (req->labels)
		json_object_update(s->labels, (json_t *)req->labels);
	snprintf(s->workdir, sizeof(s->workdir), "%s", req->workdir ? req->workdir : t.workdir);
	snprintf(s->user, sizeof(s->user), "%s",
		 req->user ? req->user : (t.default_user[0] ? t.default_user : "root"));
	template_resources(t.config, &tcpu, &tmem);
	template_info_fini(&t);

	tcpu = tcpu ? tcpu : c->cfg.default_cpu_millis;
	tmem = tmem ? tmem : c->cfg.default_memory_bytes;
	s->spec.cpu_millis = req->cpu_millis ? req->cpu_millis : tcpu;
	s->spec.memory_bytes = req->memory_bytes ? req->memory_bytes : tmem;
	s->spec.disk_bytes = req->disk_bytes ? req->disk_bytes : c->cfg.default_disk_bytes;
	s->spec.inodes = c->cfg.default_inodes;
	s->spec.pids = req->pids ? req->pids : c->cfg.default_pids;
	s->spec.nofile = 1024;
	s->spec.caps = req->caps_set ? req->caps : CAPS_DEFAULT_MASK;
	/* Limits given equal to the defaults are the defaults: pool_matches compares the result. */
	s->default_limits = s->spec.cpu_millis == tcpu && s->spec.memory_bytes == tmem &&
			    s->spec.disk_bytes == c->cfg.default_disk_bytes &&
			    s->spec.pids == c->cfg.default_pids &&
			    s->spec.caps == CAPS_DEFAULT_MASK;
	snprintf(s->spec.hostname, sizeof(s->spec.hostname), "%s",
		 req->hostname ? req->hostname : "");
	r = core_tmpfs_sizes(&s->spec, err);
	if (r < 0)
		return r;
	/* Opened and checked (nsfs, type network, not the host's) by the tier at the clone. */
	snprintf(s->spec.netns_path, sizeof(s->spec.netns_path), "%s",
		 req->netns ? req->netns : "");
	return core_prepare_seccomp(s, req, err);
}

/* True if req is for the process tier (its default): the one that honours netns, binds and
 * hostname. */
static bool req_process_tier(const struct sandbox_request *req)
{
	return !req->tier[0] || !strcmp(req->tier, "process");
}

/* True if path is absolute, at most 255 bytes, and has no `.` or `..` component. */
static bool clean_abs_path(const char *p)
{
	size_t n = strlen(p);

	if (p[0] != '/' || n > 255)
		return false;
	for (const char *c = p; (c = strchr(c, '/')); c++)
		if (!strncmp(c, "/../", 4) || !strcmp(c, "/..") || !strncmp(c, "/./", 3) ||
		    !strcmp(c, "/."))
			return false;
	return true;
}

/* True if path is `top` or below it (`/dev`, `/dev/shm`; not `/devices`). */
static bool path_under(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

/*
 * An operator's bind (docs/oci.md): the source an existing host directory or regular file
 * (no symlink as its last component, as for `rootfs`), the destination an absolute path
 * inside that is not the root and not on isola's own /proc, /sys or /dev (masked paths and
 * device nodes a bind could uncover or replace).
 */
static int check_bind(const struct tier_bind *b, unsigned i, struct isola_err **err)
{
	static const char *const specials[] = {"/proc", "/sys", "/dev"};
	struct stat st;

	if (!clean_abs_path(b->src))
		return isola_err_set(
			err, EINVAL, "invalid",
			"binds[%u]: source `%.64s` must be an absolute path of at most "
			"255 bytes without `.` or `..`",
			i, b->src);
	if (!clean_abs_path(b->dst) || !strcmp(b->dst, "/"))
		return isola_err_set(
			err, EINVAL, "invalid",
			"binds[%u]: destination `%.64s` must be an absolute path other "
			"than / of at most 255 bytes without `.` or `..`",
			i, b->dst);
	for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); k++)
		if (path_under(b->dst, specials[k]))
			return isola_err_set(err, EINVAL, "invalid",
					     "binds[%u]: destination `%s` is on isola's own %s", i,
					     b->dst, specials[k]);
	if (lstat(b->src, &st) < 0)
		return isola_err_sys(err, errno, "invalid", "binds[%u]: source `%s`", i, b->src);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return isola_err_set(err, EINVAL, "invalid",
				     "binds[%u]: source `%s` is not a directory or a regular file "
				     "(a symlink is refused)",
				     i, b->src);
	return 0;
}

/*
 * A tmpfs mount, masked or read-only path (docs/oci.md): absolute, clean, not `/`; a tmpfs
 * not on isola's own /proc, /sys or /dev (it would cover a mask or a device node, as a bind
 * would). A masked or read-only path may be anywhere: it only narrows what is seen.
 */
static int check_mount(const struct tier_mount *m, struct isola_err **err)
{
	static const char *const specials[] = {"/proc", "/sys", "/dev"};
	const char *field = m->kind == TIER_MOUNT_TMPFS	   ? "tmpfs"
			    : m->kind == TIER_MOUNT_MASKED ? "masked_paths"
							   : "readonly_paths";

	if (!clean_abs_path(m->path) || !strcmp(m->path, "/"))
		return isola_err_set(err, EINVAL, "invalid",
				     "%s: `%.64s` must be an absolute path other than / of at "
				     "most 255 bytes without `.` or `..`",
				     field, m->path);
	for (size_t k = 0;
	     m->kind == TIER_MOUNT_TMPFS && k < sizeof(specials) / sizeof(specials[0]); k++)
		if (path_under(m->path, specials[k]))
			return isola_err_set(err, EINVAL, "invalid",
					     "tmpfs: destination `%s` is on isola's own %s",
					     m->path, specials[k]);
	return 0;
}

static int core_validate(struct core *c, const struct sandbox_request *req, struct isola_err **err)
{
	int r;

	/* The spec's own filter (docs/oci.md): any principal may set it, it only narrows. */
	if (req->seccomp && !req_process_tier(req))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "seccomp: the spec's seccomp profile needs the process tier");
	if (req->readonly_root && !req_process_tier(req))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "readonly_root: needs the process tier");

	if (req->n_mounts && !req_process_tier(req))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "tmpfs, masked_paths, readonly_paths: need the process tier");
	for (unsigned i = 0; i < req->n_mounts; i++) {
		r = check_mount(&req->mounts[i], err);
		if (r < 0)
			return r;
	}

	if (req->n_binds && !req_process_tier(req))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "binds: host binds need the process tier");
	for (unsigned i = 0; i < req->n_binds; i++) {
		r = check_bind(&req->binds[i], i, err);
		if (r < 0)
			return r;
	}

	if (!core_tier_by_name(req->tier)) {
		if (!strcmp(req->tier, "microvm"))
			return isola_err_set(err, ENOSYS, "not_supported",
					     "tier `microvm` is not available in this build yet");
		return isola_err_set(err, EINVAL, "invalid",
				     "tier `%s` is unknown (known: process, microvm)", req->tier);
	}
	if (core_resources_check(req->cpu_millis, req->memory_bytes, err) < 0)
		return -EINVAL;
	if (req->disk_bytes && req->disk_bytes < (1ull << 20))
		return isola_err_set(err, EINVAL, "invalid", "disk must be at least 1M");
	if (req->ttl_s > c->cfg.max_ttl_s)
		return isola_err_set(err, EINVAL, "invalid", "ttl must be at most %u seconds",
				     c->cfg.max_ttl_s);
	if (req->workdir && (req->workdir[0] != '/' || strlen(req->workdir) > 255))
		return isola_err_set(
			err, EINVAL, "invalid",
			"workdir `%.64s` must be an absolute path of at most 255 chars",
			req->workdir);
	if (req->hostname && !util_hostname_valid(req->hostname))
		return isola_err_set(
			err, EINVAL, "invalid",
			"hostname `%.64s` must be 1-63 of [A-Za-z0-9.-] starting with a "
			"letter or digit",
			req->hostname);
	if (req->hostname && !req_process_tier(req))
		return isola_err_set(
			err, ENOTSUP, "not_supported",
			"hostname: a microvm's hostname is its id (process tier only)");
	if (req->netns && (req->netns[0] != '/' || strlen(req->netns) > 255))
		return isola_err_set(err, EINVAL, "invalid",
				     "netns `%.64s` must be an absolute path of at most 255 bytes",
				     req->netns);
	if (req->netns && !req_process_tier(req))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "netns: joining a network namespace needs the process tier "
				     "(a microvm has its own kernel's network)");
	if (req->user && (!*req->user || strlen(req->user) > 63))
		return isola_err_set(err, EINVAL, "invalid", "user must be 1-63 characters");
	if (req->name && !core_sandbox_name_valid(req->name))
		return isola_err_set(err, EINVAL, "invalid",
				     "invalid sandbox name `%.64s`: expected 1-63 of [a-z0-9_.-], "
				     "starting with a letter or digit",
				     req->name);
	r = check_string_map(req->env, "env", 1024, err);
	if (r < 0)
		return r;
	return check_string_map(req->labels, "labels", 64, err);
}

int core_persist(struct core *c, struct sandbox *s, struct isola_err **err)
{
	struct store_sandbox row;
	int r;

	memset(&row, 0, sizeof(row));
	snprintf(row.id, sizeof(row.id), "%s", s->id);
	snprintf(row.state, sizeof(row.state), "%s", sandbox_state_name(s->state));
	snprintf(row.tier, sizeof(row.tier), "%s", s->tier->name);
	snprintf(row.template, sizeof(row.template), "%s", s->template_id);
	row.uid_slot = s->uid_slot;
	row.spec = sandbox_spec_dump(s);
	row.tier_state = s->ts ? s->tier->save(s->ts) : NULL;
	row.error = s->error ? strdup(s->error) : NULL;
	row.created_at = s->created_at;
	row.expires_at = s->expires_at;
	snprintf(row.tenant, sizeof(row.tenant), "%s", s->tenant);
	r = store_sandbox_put(c->store, &row, err);
	store_sandbox_fini(&row);
	return r;
}

/* Usable RAM for sandboxes: MemTotal minus what the host keeps for itself. */
static uint64_t core_memory_capacity(const struct core *c)
{
	uint64_t reserve = c->host_memory / 20;

	if (reserve < (256ull << 20))
		reserve = 256ull << 20;
	if (c->host_memory <= reserve)
		return 0;
	return (uint64_t)((double)(c->host_memory - reserve) * c->cfg.memory_overcommit);
}

/* Sums what one tenant's sandboxes and admitted creates hold (tenant NULL: the whole host,
 * counting only sandboxes that hold resources — an errored one holds none). Lock held. */
static void core_usage_locked(struct core *c, const char *tenant, struct core_reservation *u,
			      uint32_t *count)
{
	memset(u, 0, sizeof(*u));
	*count = 0;
	for (size_t i = 0; i < c->n_sandboxes; i++) {
		struct sandbox *s = c->sandboxes[i];
		bool holds = sandbox_holds_resources(s);

		/* tenant, spec and state are read without s->lock: tenant and spec never change
		 * after the list add, and a stale state only shifts one admission. */
		if (tenant && strcmp(s->tenant, tenant))
			continue;
		if (!tenant && !holds)
			continue;
		(*count)++;
		if (!holds)
			continue;
		u->cpu_millis += s->spec.cpu_millis;
		u->memory_bytes += s->spec.memory_bytes;
		u->disk_bytes += s->spec.disk_bytes;
	}
	for (struct core_reservation *p = c->pending; p; p = p->next) {
		if (tenant && strcmp(p->tenant, tenant))
			continue;
		(*count)++;
		u->cpu_millis += p->cpu_millis;
		u->memory_bytes += p->memory_bytes;
		u->disk_bytes += p->disk_bytes;
	}
}

/* The quota check under c->lock; 0 or -EDQUOT with *err. `existing`: the sandbox is
 * already counted (a hibernated one waking up), only its resources are new. */
static int core_check_quota(struct core *c, const char *tenant, const struct tenancy_quota *q,
			    const struct core_reservation *want, bool existing,
			    struct isola_err **err)
{
	struct core_reservation u;
	char a[16], b[16], m[16];
	uint32_t count;

	core_usage_locked(c, tenant, &u, &count);
	if (!existing && q->max_sandboxes && count + 1 > q->max_sandboxes)
		return isola_err_set(err, EDQUOT, "quota_exceeded",
				     "tenant `%s` has %u of its %u sandboxes", tenant, count,
				     q->max_sandboxes);
	if (q->max_cpu_millis && u.cpu_millis + want->cpu_millis > q->max_cpu_millis)
		return isola_err_set(err, EDQUOT, "quota_exceeded",
				     "tenant `%s`: %g CPUs in use + %g requested exceeds its quota "
				     "of %g",
				     tenant, u.cpu_millis / 1000.0, want->cpu_millis / 1000.0,
				     q->max_cpu_millis / 1000.0);
	if (q->max_memory_bytes && u.memory_bytes + want->memory_bytes > q->max_memory_bytes)
		return isola_err_set(err, EDQUOT, "quota_exceeded",
				     "tenant `%s`: %s of memory in use + %s requested exceeds its "
				     "quota of %s",
				     tenant, util_fmt_size(u.memory_bytes, a, sizeof(a)),
				     util_fmt_size(want->memory_bytes, b, sizeof(b)),
				     util_fmt_size(q->max_memory_bytes, m, sizeof(m)));
	if (q->max_disk_bytes && u.disk_bytes + want->disk_bytes > q->max_disk_bytes)
		return isola_err_set(err, EDQUOT, "quota_exceeded",
				     "tenant `%s`: %s of disk in use + %s requested exceeds its "
				     "quota of %s",
				     tenant, util_fmt_size(u.disk_bytes, a, sizeof(a)),
				     util_fmt_size(want->disk_bytes, b, sizeof(b)),
				     util_fmt_size(q->max_disk_bytes, m, sizeof(m)));
	return 0;
}

/* The host capacity check under c->lock; 0 or -EAGAIN (`unavailable`, 503). */
static int core_check_capacity(struct core *c, const struct core_reservation *want,
			       struct isola_err **err)
{
	uint64_t cpu_cap = (uint64_t)(c->host_cpus * 1000.0 * c->cfg.cpu_overcommit);
	uint64_t mem_cap = core_memory_capacity(c);
	struct core_reservation u;
	char a[16], b[16], m[16];
	uint32_t count;

	core_usage_locked(c, NULL, &u, &count);
	if (cpu_cap && u.cpu_millis + want->cpu_millis > cpu_cap)
		return isola_err_set(
			err, EAGAIN, "unavailable",
			"host is at capacity: %g CPUs committed + %g requested exceeds "
			"%g",
			u.cpu_millis / 1000.0, want->cpu_millis / 1000.0, cpu_cap / 1000.0);
	if (mem_cap && u.memory_bytes + want->memory_bytes > mem_cap)
		return isola_err_set(err, EAGAIN, "unavailable",
				     "host is at capacity: %s of memory committed + %s requested "
				     "exceeds %s",
				     util_fmt_size(u.memory_bytes, a, sizeof(a)),
				     util_fmt_size(want->memory_bytes, b, sizeof(b)),
				     util_fmt_size(mem_cap, m, sizeof(m)));
	return 0;
}

/* True if want fits the host with nothing else on it: only then can waiting make room. */
static bool core_fits_empty_host(const struct core *c, const struct core_reservation *want)
{
	uint64_t cpu_cap = (uint64_t)(c->host_cpus * 1000.0 * c->cfg.cpu_overcommit);
	uint64_t mem_cap = core_memory_capacity(c);

	return (!cpu_cap || want->cpu_millis <= cpu_cap) &&
	       (!mem_cap || want->memory_bytes <= mem_cap);
}

/*
 * Waits under c->lock, until deadline_ms (monotonic), for a sandbox or a reservation to
 * leave (room_cond), at most 250 ms at a time so a missed broadcast costs little. False
 * once the deadline passed.
 */
static bool core_room_wait(struct core *c, uint64_t deadline_ms)
{
	uint64_t now = util_now_ms();
	struct timespec ts;

	if (now >= deadline_ms)
		return false;
	util_deadline_ts(CLOCK_REALTIME, deadline_ms - now < 250 ? deadline_ms - now : 250, &ts);
	pthread_cond_timedwait(&c->room_cond, &c->lock, &ts);
	return true;
}

/*
 * The host capacity check for s under c->lock. An automatic pool's fill (life.headroom)
 * needs room for itself and one more sandbox of its size, so it never takes the last room.
 */
static int core_admit_capacity(struct core *c, const struct sandbox *s,
			       const struct core_reservation *want, struct isola_err **err)
{
	struct core_reservation two = *want;

	if (!s->life.headroom)
		return core_check_capacity(c, want, err);
	two.cpu_millis *= 2;
	two.memory_bytes *= 2;
	return core_check_capacity(c, &two, err);
}

uint32_t core_creates_in_flight(struct core *c)
{
	uint32_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (struct core_reservation *p = c->pending; p; p = p->next)
		n += !p->pooled;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/*
 * Admission: the tenant's creation rate, its quotas, then the host's capacity. On success
 * *res is a reservation in c->pending (release with core_release) so concurrent creates see
 * each other: a burst cannot overshoot between the check and the list add.
 */
static int core_admit_as(struct core *c, struct sandbox *s, bool existing, double *retry_after_s,
			 struct core_reservation **res, struct isola_err **err)
{
	struct tenancy_quota q = {0};
	struct core_reservation *mine;
	uint64_t deadline;
	double retry = 0;
	int r;

	/* A warm-pool sandbox belongs to no tenant: only the host's capacity (pool.c). */
	r = s->life.pooled ? 0 : tenancy_tenant_get(c->tenancy, s->tenant, &q, NULL);
	if (r == -ENOENT)
		return isola_err_set(err, EPERM, "forbidden", "tenant `%s` does not exist",
				     s->tenant);
	if (r < 0)
		return isola_err_set(err, -r, "internal", "tenant `%s`: quota unreadable",
				     s->tenant);
	if (!existing && !s->life.pooled &&
	    tenancy_rate_take(c->tenancy, s->tenant, &q, &retry) < 0) {
		if (retry_after_s)
			*retry_after_s = retry;
		return isola_err_set(
			err, EAGAIN, "rate_limited",
			"tenant `%s` creates sandboxes faster than its limit of %g per "
			"second: retry in %.2f s",
			s->tenant, q.create_rate, retry);
	}
	mine = calloc(1, sizeof(*mine));
	if (!mine)
		return isola_err_set(err, ENOMEM, NULL, "admission: out of memory");
	snprintf(mine->tenant, sizeof(mine->tenant), "%s", s->tenant);
	mine->cpu_millis = s->spec.cpu_millis;
	mine->memory_bytes = s->spec.memory_bytes;
	mine->disk_bytes = s->spec.disk_bytes;
	mine->pooled = s->life.pooled;
	deadline = util_now_ms() + c->cfg.admission_wait_ms;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		cleanup_err struct isola_err *ce = NULL;
		int y;

		r = core_check_quota(c, s->tenant, &q, mine, existing, err);
		if (r < 0 || s->life.claiming) /* a pool claim's capacity is held by the pool */
			break;
		r = core_admit_capacity(c, s, mine, &ce);
		if (r == 0)
			break;
		/* A caller's create that does not fit makes the automatic pool yield: one idle
		 * pooled sandbox destroyed per round, until it fits or none is left, so an
		 * automatic pool never makes a real create fail (pool.c). */
		y = 0;
		if (!s->life.pooled) {
			pthread_mutex_unlock(&c->lock);
			y = pool_yield(c);
			pthread_mutex_lock(&c->lock);
		}
		/* No room now: a create that fits an empty host waits (admission_wait_ms) for
		 * the destroys of others, as a burst past the host's room queues behind the
		 * burst's own destroys instead of failing. A pool's fill never waits. */
		if (y <= 0 && !s->life.pooled && core_fits_empty_host(c, mine) &&
		    core_room_wait(c, deadline))
			continue;
		if (y <= 0) {
			if (err && !*err) {
				*err = ce;
				ce = NULL;
			}
			break;
		}
	}
	if (r == 0) {
		mine->next = c->pending;
		c->pending = mine;
		*res = mine;
	}
	pthread_mutex_unlock(&c->lock);
	if (r < 0)
		free(mine);
	return r;
}

int core_admit(struct core *c, struct sandbox *s, double *retry_after_s,
	       struct core_reservation **res, struct isola_err **err)
{
	return core_admit_as(c, s, false, retry_after_s, res, err);
}

int core_admit_wake(struct core *c, struct sandbox *s, struct core_reservation **res,
		    struct isola_err **err)
{
	return core_admit_as(c, s, true, NULL, res, err);
}

void core_release(struct core *c, struct core_reservation *res)
{
	if (!res)
		return;
	pthread_mutex_lock(&c->lock);
	for (struct core_reservation **pp = &c->pending; *pp; pp = &(*pp)->next) {
		if (*pp == res) {
			*pp = res->next;
			break;
		}
	}
	pthread_cond_broadcast(&c->room_cond);
	pthread_mutex_unlock(&c->lock);
	free(res);
}

int core_tier_build(struct sandbox *s, const char *snapdir, const char *policy_from,
		    uint64_t *t_tier, struct isola_err **err)
{
	struct net_slot *slot = NULL;
	struct tier_netns tn;
	struct tier_seccomp sc = {.fd = -1};
	int r = 0;

	/* The spec's own filter, compiled from the stored profile for each build (resume,
	 * restore, fork; a create's was compiled by core_prepare): the program is never
	 * stored, the profile is. */
	if (s->sc_prog.fd >= 0) {
		sc = s->sc_prog;
		s->sc_prog.fd = -1;
	} else if (s->seccomp) {
		r = spec_seccomp_compile(s->seccomp, &sc.fd, &sc.flags, err);
		if (r < 0)
			return isola_err_wrap(err, "sandbox `%s`", s->id);
	}
	if (sc.fd >= 0)
		s->spec.seccomp = &sc;
	/* A sandbox that joins an operator's namespace (docs/oci.md) takes no slot. */
	if (s->tier->netns_join && !s->spec.netns_path[0])
		r = net_slot_take(&slot, err);
	if (r >= 0 && slot) {
		tn = (struct tier_netns){net_slot_netns_fd(slot), net_slot_sysfs_fd(slot)};
		s->spec.netns = &tn;
	}
	if (r >= 0 && snapdir)
		r = s->tier->restore(&s->spec, snapdir, &s->ts, err);
	else if (r >= 0)
		r = s->tier->create(&s->spec, &s->ts, err);
	s->spec.netns = NULL;
	s->spec.seccomp = NULL;
	if (sc.fd >= 0)
		close(sc.fd);
	if (t_tier)
		*t_tier = util_now_ns();
	if (r < 0) {
		s->ts = NULL;
		net_slot_drop(slot);
		return r;
	}
	/* The sandbox's network (docs/network.md): veth, filter, policy; before any user code. */
	return net_sandbox_attach(s->tier, s->ts, &s->spec, policy_from, slot, err);
}

int core_sandbox_start(struct core *c, struct sandbox *s, uint32_t ttl_s, const char *snapdir,
		       struct isola_err **err)
{
	uint64_t t0 = util_now_ns(), t_tier = 0, t_net = 0, t_agent = 0;
	int r, fd;

	s->uid_slot = core_slot_alloc(c);
	if (s->uid_slot < 0)
		return isola_err_set(err, EAGAIN, "unavailable", "host is full: %d sandboxes",
				     CORE_MAX_SANDBOXES);
	s->spec.uid_base = c->uid_base + (uint32_t)s->uid_slot * 65536u;
	s->created_at = util_wall_time();
	s->last_active = s->created_at;
	{
		uint32_t ttl = ttl_s ? ttl_s : c->cfg.default_ttl_s;

		s->expires_at = ttl ? s->created_at + ttl : 0;
	}
	if (core_sandbox_dir(c, s->id, s->spec.dir, sizeof(s->spec.dir)) < 0) {
		r = isola_err_set(err, ENAMETOOLONG, "internal", "state dir path too long");
		goto fail_slot;
	}
	/* Intent first, before the directory too: a crash from here on is found and rolled
	 * back at the next start (reconcile removes a `creating` row and its directory). */
	r = core_persist(c, s, err);
	if (r < 0)
		goto fail_slot;
	if (mkdir(s->spec.dir, 0700) < 0) {
		r = isola_err_sys(err, errno, NULL, "create `%s`", s->spec.dir);
		goto fail_row;
	}
	r = core_tier_build(s, snapdir, s->forked_from, &t_tier, err);
	if (r < 0 && !s->ts)
		goto fail_dir;
	if (r < 0)
		goto fail_tier;
	t_net = util_now_ns();
	fd = s->tier->agent_connect(s->ts, err);
	if (fd < 0) {
		r = fd;
		goto fail_tier;
	}
	r = agent_conn_new(fd, AGENT_CONNECT_TIMEOUT_MS, &s->conn, err);
	if (r < 0)
		goto fail_tier;
	t_agent = util_now_ns();
	/* A restored sandbox is a clone: new hostname, machine id and RNG state before the
	 * sandbox is listed, so no user request can reach it first. */
	if (snapdir) {
		r = core_sandbox_identity(s, err);
		if (r < 0)
			goto fail_tier;
	} else if (s->life.pooled) {
		/* A pooled sandbox was created, not cloned, so it is unique already; it gets a
		 * fresh machine id and RNG seed all the same, here where no claim waits for the
		 * agent round trip (0.4-0.5 ms of a claim, docs/benchmarks.md). A tier that cannot
		 * change an identity part only costs that part's refresh (logged). */
		cleanup_err struct isola_err *e = NULL;

		if (core_sandbox_identity(s, &e) < 0)
			log_warn("pool: sandbox %s: identity: %s", s->id,
				 e ? e->message : "failed");
	}
	/* The TTL counts from when the sandbox can be used: a microvm that took longer to boot
	 * than its TTL (3.4 s under TCG on a loaded host, TTL 3 s) expired 5 ms after it was
	 * created, before its creator had heard of it. */
	if (s->expires_at > 0)
		s->expires_at = util_wall_time() + (s->expires_at - s->created_at);
	s->state = SANDBOX_RUNNING;
	r = core_persist(c, s, err);
	if (r < 0)
		goto fail_tier;
	r = core_list_add(c, s, err);
	if (r < 0)
		goto fail_tier;
	log_info("sandbox %s %s (template %s, tier %s, tenant %s)", s->id,
		 snapdir ? "restored" : "created", s->template_name, s->tier->name, s->tenant);
	log_debug("sandbox %s: start took %.2f ms: tier %.2f, network %.2f, agent %.2f, rest %.2f",
		  s->id, (util_now_ns() - t0) / 1e6, (t_tier - t0) / 1e6, (t_net - t_tier) / 1e6,
		  (t_agent - t_net) / 1e6, (util_now_ns() - t_agent) / 1e6);
	return 0;

fail_tier:
	if (s->conn) {
		agent_conn_free(s->conn);
		s->conn = NULL;
	}
	s->tier->destroy(s->ts, NULL);
	s->ts = NULL;
	net_sandbox_detach(&s->spec);
fail_dir:
	util_rm_rf(s->spec.dir);
fail_row:
	store_sandbox_delete(c->store, s->id, NULL);
fail_slot:
	core_slot_free(c, s->uid_slot);
	s->uid_slot = -1;
	return r;
}

int core_sandbox_create(struct core *c, const struct sandbox_request *req, struct sandbox **out,
			struct isola_err **err)
{
	struct core_reservation *res = NULL;
	struct sandbox *s = NULL;
	const char *tenant = req->tenant ? req->tenant : TENANCY_DEFAULT;
	bool missed = false;
	char id[40];
	int r;

	r = core_validate(c, req, err);
	if (r < 0)
		return r;
	if (req->snapshot)
		return core_sandbox_restore_named(c, req, out, err);
	if (!(req->build_step && !strncmp(req->template_name, ".build-", 7)) &&
	    !core_template_visible(c, tenant, req->template_name[0] ? req->template_name : "host"))
		return isola_err_set(err, ENOENT, "not_found",
				     "create sandbox: template `%s` not found", req->template_name);
	r = core_new_id(id, sizeof(id));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "generate sandbox id");
	s = sandbox_alloc(c, id);
	if (!s)
		return isola_err_set(err, ENOMEM, NULL, "create sandbox: out of memory");
	s->tier = core_tier_by_name(req->tier);
	snprintf(s->tenant, sizeof(s->tenant), "%s", tenant);
	snprintf(s->name, sizeof(s->name), "%s", req->name ? req->name : "");
	/* Early, so a taken name fails before anything is built (core_list_add checks again). */
	pthread_mutex_lock(&c->lock);
	r = core_name_check_locked(c, s, err);
	pthread_mutex_unlock(&c->lock);
	if (r == 0)
		r = core_prepare(c, s, req, err);
	if (r == 0)
		r = lifecycle_init(c, s, req, err);
	if (r == 0)
		r = pool_claim(c, s, req, out, &missed, err); /* 1: served from a warm pool */
	if (r == 1) {
		sandbox_unref(s);
		return 0;
	}
	if (r < 0)
		goto fail;
	r = core_admit(c, s, req->retry_after_s, &res, err);
	if (r < 0)
		goto fail;
	r = core_sandbox_start(c, s, req->ttl_s, NULL, err);
	if (r < 0)
		goto fail;
	core_release(c, res);
	if (missed)
		pool_note_miss(c, s); /* done: its refill competes with no part of it */
	*out = s;
	return 0;
fail:
	core_release(c, res);
	sandbox_unref(s);
	return isola_err_wrap(err, "create sandbox");
}

/* Ids are [a-z0-9-], 1..39 chars; anything else cannot name a sandbox. */
static bool id_is_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 39)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
			return false;
	}
	return true;
}

int core_sandbox_get(struct core *c, const char *id, struct sandbox **out, struct isola_err **err)
{
	return core_sandbox_get_for(c, NULL, id, out, err);
}

int core_sandbox_get_for(struct core *c, const char *tenant, const char *id, struct sandbox **out,
			 struct isola_err **err)
{
	struct sandbox *found = NULL;

	if (!id_is_valid(id))
		return isola_err_set(err, ENOENT, "not_found", "sandbox `%.64s` not found", id);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++) {
		/* Another tenant's sandbox is skipped, so it answers exactly like a missing id. */
		if (!strcmp(c->sandboxes[i]->id, id) &&
		    (!tenant || !strcmp(c->sandboxes[i]->tenant, tenant)) &&
		    !c->sandboxes[i]->life.pooled) { /* nobody's until claimed (pool.c) */
			found = c->sandboxes[i];
			sandbox_ref(found);
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!found)
		return isola_err_set(err, ENOENT, "not_found", "sandbox `%s` not found", id);
	*out = found;
	return 0;
}

/* True when every pair of filter is in labels. */
static bool labels_match(const json_t *labels, const json_t *filter)
{
	const char *k;
	json_t *v;

	if (!filter)
		return true;
	json_object_foreach((json_t *)filter, k, v)
	{
		json_t *have = json_object_get(labels, k);

		if (!have || !json_equal(have, v))
			return false;
	}
	return true;
}

int core_sandbox_list(struct core *c, const json_t *filter, json_t **out, struct isola_err **err)
{
	return core_sandbox_list_for(c, NULL, filter, out, err);
}

int core_sandbox_list_for(struct core *c, const char *tenant, const json_t *filter, json_t **out,
			  struct isola_err **err)
{
	struct sandbox **snap;
	json_t *arr = json_array();
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->n_sandboxes;
	snap = calloc(n ? n : 1, sizeof(*snap));
	if (!snap) {
		pthread_mutex_unlock(&c->lock);
		json_decref(arr);
		return isola_err_set(err, ENOMEM, NULL, "list sandboxes: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		snap[i] = c->sandboxes[i];
		sandbox_ref(snap[i]);
	}
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		bool match;

		pthread_mutex_lock(&snap[i]->lock);
		match = labels_match(snap[i]->labels, filter) && !snap[i]->life.pooled &&
			(!tenant || !strcmp(snap[i]->tenant, tenant));
		pthread_mutex_unlock(&snap[i]->lock);
		if (match)
			json_array_append_new(arr, sandbox_to_json(snap[i]));
		sandbox_unref(snap[i]);
	}
	free(snap);
	*out = arr;
	return 0;
}

int core_sandbox_destroy_obj(struct core *c, struct sandbox *s, struct isola_err **err)
{
	enum sandbox_state prev;
	char *prev_error = NULL;
	uint64_t t0 = util_now_ns(), t_tier, t_net, t_files;
	int r = 0;

	char hib[PATH_MAX];

	pthread_mutex_lock(&s->lock);
	prev = s->state;
	if (s->state == SANDBOX_DESTROYING) {
		pthread_mutex_unlock(&s->lock);
		return isola_err_set(err, EBUSY, "conflict",
				     "sandbox `%s` is already being destroyed", s->id);
	}
	if (s->state >= SANDBOX_PAUSING) {
		enum sandbox_state st = s->state;

		pthread_mutex_unlock(&s->lock);
		return isola_err_set(err, EBUSY, "conflict",
				     "sandbox `%s` is %s: destroy it once that ends", s->id,
				     sandbox_state_name(st));
	}
	/* Intent first, and durably: a destroy whose record cannot be written is refused with
	 * the store's reason (507 full filesystem, 503 read-only database) and the sandbox is
	 * left exactly as it was, so what the store says still matches what exists. */
	{
		cleanup_err struct isola_err *e = NULL;

		/* (A sandbox without a row has nothing to record: -ENOENT goes on.) */
		r = store_sandbox_set_state(c->store, s->id, "destroying", NULL, &e);
		if (r < 0 && r != -ENOENT) {
			pthread_mutex_unlock(&s->lock);
			if (err && !*err)
				*err = steal_ptr(&e);
			return isola_err_wrap(err,
					      "destroy sandbox `%s`: not destroyed, it is still %s",
					      s->id, sandbox_state_name(s->state));
		}
		r = 0;
	}
	/* A frozen sandbox is thawed first: a frozen task does not act on SIGKILL (v1). */
	if (s->state == SANDBOX_PAUSED && s->ts && s->tier->resume)
		s->tier->resume(s->ts, NULL);
	prev_error = s->error ? strdup(s->error) : NULL;
	s->state = SANDBOX_DESTROYING;
	core_changed(c);
	if (s->ts) {
		if (s->tier->discard)
			s->tier->discard(s->ts);
		r = s->tier->destroy(s->ts, err);
		s->ts = NULL;
	} else {
		r = s->tier->cleanup(&s->spec, NULL, err);
	}
	t_tier = util_now_ns();
	net_sandbox_detach(&s->spec);
	t_net = util_now_ns();
	pthread_mutex_unlock(&s->lock);
	if (r < 0) {
		/* Keep the record so the operator sees what could not be cleaned. */
		core_sandbox_fail(c, s, (*err) ? (*err)->message : "destroy failed");
		free(prev_error);
		return isola_err_wrap(err, "destroy sandbox `%s`", s->id);
	}
	util_rm_rf(s->spec.dir);
	if (core_hibernation_dir(c, s->id, hib, sizeof(hib)) == 0) {
		util_rm_rf(hib);
		if (strlen(hib) + sizeof(HIBERNATION_NEXT) <= sizeof(hib)) {
			strcat(hib, HIBERNATION_NEXT);
			util_rm_rf(hib);
		}
	}
	t_files = util_now_ns();
	r = store_sandbox_delete(c->store, s->id, err);
	if (r < 0) {
		/* Gone in reality, but its row still says `destroying` (which a restart finishes):
		 * not acknowledged. It stays listed as `error` so that `rm` again removes the row. */
		pthread_mutex_lock(&s->lock);
		s->state = SANDBOX_ERROR;
		free(s->error);
		s->error =
			strdup("destroyed, but its record could not be removed: destroy it again");
		pthread_mutex_unlock(&s->lock);
		core_changed(c);
		free(prev_error);
		return isola_err_wrap(err,
				      "destroy sandbox `%s`: its processes and files are gone, "
				      "but its record could not be removed",
				      s->id);
	}
	log_info("sandbox %s destroyed", s->id);
	/* The record before the removal: a lookup in between finds one or the other. */
	core_tombstone_record(c, s, prev, prev_error);
	free(prev_error);
	core_list_remove(c, s);
	core_sandbox_end_notify(c);
	if (s->origin[0])
		core_snapshot_release(c, s->origin);
	log_debug(
		"sandbox %s: destroy took %.2f ms: tier %.2f, network %.2f, files %.2f, rest %.2f",
		s->id, (util_now_ns() - t0) / 1e6, (t_tier - t0) / 1e6, (t_net - t_tier) / 1e6,
		(t_files - t_net) / 1e6, (util_now_ns() - t_files) / 1e6);
	return 0;
}

int core_sandbox_destroy(struct core *c, const char *id, struct isola_err **err)
{
	return core_sandbox_destroy_for(c, NULL, id, err);
}

int core_sandbox_destroy_for(struct core *c, const char *tenant, const char *id,
			     struct isola_err **err)
{
	struct sandbox *s;
	int r = core_sandbox_get_for(c, tenant, id, &s, err);

	if (r < 0)
		return r;
	r = core_sandbox_destroy_obj(c, s, err);
	sandbox_unref(s);
	return r;
}

void core_sandbox_fail(struct core *c, struct sandbox *s, const char *reason)
{
	char *copy = strdup(reason);

	pthread_mutex_lock(&s->lock);
	if (s->ts) {
		s->tier->destroy(s->ts, NULL);
		s->ts = NULL;
	}
	net_sandbox_detach(&s->spec);
	s->state = SANDBOX_ERROR;
	free(s->error);
	s->error = copy;
	store_sandbox_set_state(c->store, s->id, "error", reason, NULL);
	store_sandbox_set_tier_state(c->store, s->id, NULL, NULL);
	pthread_mutex_unlock(&s->lock);
	core_changed(c);
	log_warn("sandbox %s failed: %s", s->id, reason);
	core_sandbox_end_notify(c); /* an errored sandbox has ended for its waiters */
}

int core_sandbox_set_ttl(struct core *c, const char *id, uint32_t ttl_s, struct isola_err **err)
{
	return core_sandbox_set_ttl_for(c, NULL, id, ttl_s, err);
}

int core_sandbox_set_ttl_for(struct core *c, const char *tenant, const char *id, uint32_t ttl_s,
			     struct isola_err **err)
{
	struct sandbox *s;
	int r;

	if (ttl_s > c->cfg.max_ttl_s)
		return isola_err_set(err, EINVAL, "invalid", "ttl must be at most %u seconds",
				     c->cfg.max_ttl_s);
	r = core_sandbox_get_for(c, tenant, id, &s, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	s->expires_at = ttl_s ? util_wall_time() + ttl_s : 0;
	s->life.ttl_s = ttl_s; /* restarted when a policy pause ends (lifecycle.c) */
	r = store_sandbox_set_expiry(c->store, s->id, s->expires_at, err);
	pthread_mutex_unlock(&s->lock);
	core_changed(c);
	sandbox_unref(s);
	return r;
}

const char *core_api_token(struct core *c)
{
	return c->token;
}

const char *sandbox_tenant(const struct sandbox *s)
{
	return s->tenant;
}

struct tenancy *core_tenancy(struct core *c)
{
	return c->tenancy;
}

struct audit *core_audit(struct core *c)
{
	return c->audit;
}

const struct core_config *core_config(struct core *c)
{
	return &c->cfg;
}

json_t *core_tenant_usage(struct core *c, const char *tenant)
{
	struct core_reservation u;
	uint32_t count;

	pthread_mutex_lock(&c->lock);
	core_usage_locked(c, tenant, &u, &count);
	pthread_mutex_unlock(&c->lock);
	return json_pack("{s:I, s:f, s:I, s:I}", "sandboxes", (json_int_t)count, "cpu",
			 u.cpu_millis / 1000.0, "memory", (json_int_t)u.memory_bytes, "disk",
			 (json_int_t)u.disk_bytes);
}

int core_tenant_remove(struct core *c, const char *name, struct isola_err **err)
{
	struct core_reservation u;
	uint32_t count;

	/* The operator's tenant is never removable, whatever it owns: say that first. */
	if (!strcmp(name, "default"))
		return tenancy_tenant_remove(c->tenancy, name, err);
	pthread_mutex_lock(&c->lock);
	core_usage_locked(c, name, &u, &count);
	pthread_mutex_unlock(&c->lock);
	if (count)
		return isola_err_set(err, EBUSY, "conflict",
				     "tenant `%s` still owns %u sandbox%s: destroy them first",
				     name, count, count == 1 ? "" : "es");
	{
		struct store_snapshot *rows = NULL;
		size_t n = 0;

		/* Snapshots are the tenant's data too: never orphaned by a removal. */
		if (store_snapshot_list(c->store, &rows, &n, err) < 0)
			return -EIO;
		count = 0;
		for (size_t i = 0; i < n; i++) {
			if (!strcmp(rows[i].tenant, name) && !strcmp(rows[i].kind, "named"))
				count++;
			store_snapshot_fini(&rows[i]);
		}
		free(rows);
		if (count)
			return isola_err_set(
				err, EBUSY, "conflict",
				"tenant `%s` still owns %u snapshot%s: delete them first", name,
				count, count == 1 ? "" : "s");
	}
	if (tenancy_tenant_remove(c->tenancy, name, err) < 0)
		return -EIO;
	/* Its build cache goes with it: the entries are keyed by the tenant's name, and a
	 * tenant created later under that name is someone else, who must not get this one's
	 * RUN layers (what it fetched, what it was given) as cache hits. */
	{
		struct isola_err *perr = NULL;
		json_t *gone = NULL;

		if (core_build_cache_prune_for(c, name, true, 0, &gone, &perr) < 0)
			log_warn("tenant %s removed, but its build cache entries were not: %s",
				 name, perr ? perr->message : "?");
		json_decref(gone);
		isola_err_free(perr);
	}
	return 0;
}

json_t *core_capacity(struct core *c)
{
	struct core_reservation u;
	uint32_t count;

	pthread_mutex_lock(&c->lock);
	core_usage_locked(c, NULL, &u, &count);
	pthread_mutex_unlock(&c->lock);
	return json_pack("{s:I, s:f, s:f, s:I, s:I, s:I, s:f, s:f}", "cpus",
			 (json_int_t)c->host_cpus, "cpu_capacity",
			 c->host_cpus * c->cfg.cpu_overcommit, "cpu_committed",
			 u.cpu_millis / 1000.0, "memory_total", (json_int_t)c->host_memory,
			 "memory_capacity", (json_int_t)core_memory_capacity(c), "memory_committed",
			 (json_int_t)u.memory_bytes, "cpu_overcommit", c->cfg.cpu_overcommit,
			 "memory_overcommit", c->cfg.memory_overcommit);
}
