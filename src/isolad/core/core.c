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
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../images/images.h"
#include "agentconn.h"

#define AGENT_CONNECT_TIMEOUT_MS 5000

void core_config_defaults(struct core_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "/var/lib/isola");
	cfg->default_cpu_millis = 1000;
	cfg->default_memory_bytes = 512ull << 20;
	cfg->default_disk_bytes = 1ull << 30;
	cfg->default_inodes = 65536;
	cfg->default_pids = 512;
	cfg->default_ttl_s = 0;
	cfg->max_ttl_s = 7 * 24 * 3600;
}

int core_sandbox_dir(const struct core *c, const char *id, char *out, size_t n)
{
	int len = snprintf(out, n, "%s/sandboxes/%s", c->cfg.state_dir, id);

	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

const struct tier_ops *core_tier_by_name(const char *name)
{
	if (!name || !*name || !strcmp(name, "process"))
		return &tier_process_ops;
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
	r = core_load_token(c, err);
	if (r < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/isola.db", cfg->state_dir);
	r = store_open(path, &c->store, err);
	if (r < 0)
		goto fail;
	r = images_init(cfg->state_dir, err);
	if (r < 0)
		goto fail;
	r = core_reconcile(c, err);
	if (r < 0)
		goto fail;
	r = core_monitor_start(c, err);
	if (r < 0)
		goto fail;
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
	core_monitor_stop(c);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++)
		sandbox_unref(c->sandboxes[i]);
	free(c->sandboxes);
	c->sandboxes = NULL;
	c->n_sandboxes = 0;
	pthread_mutex_unlock(&c->lock);
	images_shutdown();
	store_close(c->store);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int core_list_add(struct core *c, struct sandbox *s, struct isola_err **err)
{
	int r = 0;

	pthread_mutex_lock(&c->lock);
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
out:
	pthread_mutex_unlock(&c->lock);
	return r;
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
	pthread_mutex_unlock(&c->lock);
	if (found)
		sandbox_unref(s);
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

/* Random 16-character id from [a-z0-9]. */
static int core_new_id(char *out, size_t n)
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

/* Fills the sandbox's spec, env and defaults from the request and the template. */
static int core_prepare(struct core *c, struct sandbox *s, const struct sandbox_request *req,
			struct isola_err **err)
{
	const char *tname = req->template_name[0] ? req->template_name : "host";
	struct template_info t;
	int r;

	memset(&t, 0, sizeof(t));
	r = images_get(tname, &t, err);
	if (r < 0)
		return r;
	snprintf(s->template_name, sizeof(s->template_name), "%s", t.name);
	snprintf(s->template_id, sizeof(s->template_id), "%s", t.id);
	snprintf(s->spec.rootfs, sizeof(s->spec.rootfs), "%s", t.rootfs);
	memcpy(s->spec.binds, t.binds, sizeof(t.binds));
	s->spec.n_binds = t.n_binds;
	if (json_is_object(t.env))
		json_object_update(s->env, t.env);
	if (req->env)
		json_object_update(s->env, (json_t *)req->env);
	if (req->labels)
		json_object_update(s->labels, (json_t *)req->labels);
	snprintf(s->workdir, sizeof(s->workdir), "%s", req->workdir ? req->workdir : t.workdir);
	snprintf(s->user, sizeof(s->user), "%s",
		 req->user ? req->user : (t.default_user[0] ? t.default_user : "root"));
	template_info_fini(&t);

	s->spec.cpu_millis = req->cpu_millis ? req->cpu_millis : c->cfg.default_cpu_millis;
	s->spec.memory_bytes = req->memory_bytes ? req->memory_bytes : c->cfg.default_memory_bytes;
	s->spec.disk_bytes = req->disk_bytes ? req->disk_bytes : c->cfg.default_disk_bytes;
	s->spec.inodes = c->cfg.default_inodes;
	s->spec.pids = req->pids ? req->pids : c->cfg.default_pids;
	s->spec.nofile = 1024;
	return 0;
}

static int core_validate(struct core *c, const struct sandbox_request *req, struct isola_err **err)
{
	int r;

	if (!core_tier_by_name(req->tier)) {
		if (!strcmp(req->tier, "microvm"))
			return isola_err_set(err, ENOSYS, "not_supported",
					     "tier `microvm` is not available in this build yet");
		return isola_err_set(err, EINVAL, "invalid",
				     "tier `%s` is unknown (known: process, microvm)", req->tier);
	}
	if (req->memory_bytes && req->memory_bytes < (16ull << 20))
		return isola_err_set(err, EINVAL, "invalid", "memory must be at least 16M");
	if (req->disk_bytes && req->disk_bytes < (1ull << 20))
		return isola_err_set(err, EINVAL, "invalid", "disk must be at least 1M");
	if (req->cpu_millis > 1000u * 1024u)
		return isola_err_set(err, EINVAL, "invalid", "cpu must be at most 1024");
	if (req->ttl_s > c->cfg.max_ttl_s)
		return isola_err_set(err, EINVAL, "invalid", "ttl must be at most %u seconds",
				     c->cfg.max_ttl_s);
	if (req->workdir && (req->workdir[0] != '/' || strlen(req->workdir) > 255))
		return isola_err_set(
			err, EINVAL, "invalid",
			"workdir `%.64s` must be an absolute path of at most 255 chars",
			req->workdir);
	if (req->user && (!*req->user || strlen(req->user) > 63))
		return isola_err_set(err, EINVAL, "invalid", "user must be 1-63 characters");
	r = check_string_map(req->env, "env", 1024, err);
	if (r < 0)
		return r;
	return check_string_map(req->labels, "labels", 64, err);
}

/* Writes the sandbox's row (state and tier state) to the store. */
static int core_persist(struct core *c, struct sandbox *s, struct isola_err **err)
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
	r = store_sandbox_put(c->store, &row, err);
	store_sandbox_fini(&row);
	return r;
}

int core_sandbox_create(struct core *c, const struct sandbox_request *req, struct sandbox **out,
			struct isola_err **err)
{
	struct sandbox *s = NULL;
	char id[40];
	int r, fd;

	r = core_validate(c, req, err);
	if (r < 0)
		return r;
	r = core_new_id(id, sizeof(id));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "generate sandbox id");
	s = sandbox_alloc(c, id);
	if (!s)
		return isola_err_set(err, ENOMEM, NULL, "create sandbox: out of memory");
	s->tier = core_tier_by_name(req->tier);
	r = core_prepare(c, s, req, err);
	if (r < 0)
		goto fail_obj;
	s->uid_slot = core_slot_alloc(c);
	if (s->uid_slot < 0) {
		r = isola_err_set(err, EAGAIN, "unavailable", "host is full: %d sandboxes",
				  CORE_MAX_SANDBOXES);
		goto fail_obj;
	}
	s->spec.uid_base = CORE_UID_BASE + (uint32_t)s->uid_slot * 65536u;
	s->created_at = util_wall_time();
	s->last_active = s->created_at;
	{
		uint32_t ttl = req->ttl_s ? req->ttl_s : c->cfg.default_ttl_s;

		s->expires_at = ttl ? s->created_at + ttl : 0;
	}
	if (core_sandbox_dir(c, id, s->spec.dir, sizeof(s->spec.dir)) < 0) {
		r = isola_err_set(err, ENAMETOOLONG, "internal", "state dir path too long");
		goto fail_slot;
	}
	if (mkdir(s->spec.dir, 0700) < 0) {
		r = isola_err_sys(err, errno, NULL, "create `%s`", s->spec.dir);
		goto fail_slot;
	}
	/* Intent first: a crash from here on is found and rolled back at the next start. */
	r = core_persist(c, s, err);
	if (r < 0)
		goto fail_dir;
	r = s->tier->create(&s->spec, &s->ts, err);
	if (r < 0)
		goto fail_row;
	fd = s->tier->agent_connect(s->ts, err);
	if (fd < 0) {
		r = fd;
		goto fail_tier;
	}
	r = agent_conn_new(fd, AGENT_CONNECT_TIMEOUT_MS, &s->conn, err);
	if (r < 0)
		goto fail_tier;
	s->state = SANDBOX_RUNNING;
	r = core_persist(c, s, err);
	if (r < 0)
		goto fail_tier;
	r = core_list_add(c, s, err);
	if (r < 0)
		goto fail_tier;
	log_info("sandbox %s created (template %s, tier %s)", id, s->template_name, s->tier->name);
	*out = s;
	return 0;

fail_tier:
	if (s->conn) {
		agent_conn_free(s->conn);
		s->conn = NULL;
	}
	s->tier->destroy(s->ts, NULL);
	s->ts = NULL;
fail_row:
	store_sandbox_delete(c->store, id, NULL);
fail_dir:
	util_rm_rf(s->spec.dir);
fail_slot:
	core_slot_free(c, s->uid_slot);
fail_obj:
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
	struct sandbox *found = NULL;

	if (!id_is_valid(id))
		return isola_err_set(err, ENOENT, "not_found", "sandbox `%.64s` not found", id);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++) {
		if (!strcmp(c->sandboxes[i]->id, id)) {
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
		match = labels_match(snap[i]->labels, filter);
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
	int r = 0;

	pthread_mutex_lock(&s->lock);
	if (s->state == SANDBOX_DESTROYING) {
		pthread_mutex_unlock(&s->lock);
		return isola_err_set(err, EBUSY, "conflict",
				     "sandbox `%s` is already being destroyed", s->id);
	}
	s->state = SANDBOX_DESTROYING;
	store_sandbox_set_state(c->store, s->id, "destroying", NULL, NULL);
	if (s->ts) {
		r = s->tier->destroy(s->ts, err);
		s->ts = NULL;
	} else {
		r = s->tier->cleanup(&s->spec, NULL, err);
	}
	pthread_mutex_unlock(&s->lock);
	if (r < 0) {
		/* Keep the record so the operator sees what could not be cleaned. */
		core_sandbox_fail(c, s, (*err) ? (*err)->message : "destroy failed");
		return isola_err_wrap(err, "destroy sandbox `%s`", s->id);
	}
	util_rm_rf(s->spec.dir);
	store_sandbox_delete(c->store, s->id, NULL);
	log_info("sandbox %s destroyed", s->id);
	core_list_remove(c, s);
	return 0;
}

int core_sandbox_destroy(struct core *c, const char *id, struct isola_err **err)
{
	struct sandbox *s;
	int r = core_sandbox_get(c, id, &s, err);

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
	s->state = SANDBOX_ERROR;
	free(s->error);
	s->error = copy;
	store_sandbox_set_state(c->store, s->id, "error", reason, NULL);
	store_sandbox_set_tier_state(c->store, s->id, NULL, NULL);
	pthread_mutex_unlock(&s->lock);
	log_warn("sandbox %s failed: %s", s->id, reason);
}

int core_sandbox_set_ttl(struct core *c, const char *id, uint32_t ttl_s, struct isola_err **err)
{
	struct sandbox *s;
	int r;

	if (ttl_s > c->cfg.max_ttl_s)
		return isola_err_set(err, EINVAL, "invalid", "ttl must be at most %u seconds",
				     c->cfg.max_ttl_s);
	r = core_sandbox_get(c, id, &s, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	s->expires_at = ttl_s ? util_wall_time() + ttl_s : 0;
	r = store_sandbox_set_expiry(c->store, s->id, s->expires_at, err);
	pthread_mutex_unlock(&s->lock);
	sandbox_unref(s);
	return r;
}

const char *core_api_token(struct core *c)
{
	return c->token;
}
