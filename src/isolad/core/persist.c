/* SPDX-License-Identifier: Apache-2.0 */
/* persist: pause, resume and hibernate of one sandbox, and the identity of a restored clone. */
#include "core-internal.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../net/net.h"
#include "../snapshots/snapdir.h"
#include "agentconn.h"

#define AGENT_CONNECT_TIMEOUT_MS 5000
#define IDENTITY_TIMEOUT_MS	 10000
#define IDENTITY_SEED_BYTES	 32

int core_hibernation_dir(const struct core *c, const char *id, char *out, size_t n)
{
	int len = snprintf(out, n, "%s/hibernated/%s", c->snapshot_root, id);

	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

int core_not_supported(const struct sandbox *s, const char *op, struct isola_err **err)
{
	return isola_err_set(err, EOPNOTSUPP, "not_supported",
			     "sandbox `%s`: the %s tier does not support %s", s->id, s->tier->name,
			     op);
}

int sandbox_op_begin(struct core *c, struct sandbox *s, unsigned allowed, enum sandbox_state to,
		     const char *op, struct isola_err **err)
{
	int r = 0;

	pthread_mutex_lock(&s->lock);
	if (!(allowed & SANDBOX_BIT(s->state))) {
		r = isola_err_set(err, EBUSY, "conflict", "sandbox `%s` is %s: cannot %s it%s%s",
				  s->id, sandbox_state_name(s->state), op, s->error ? ": " : "",
				  s->error ? s->error : "");
		goto out;
	}
	/* Intent first, and durably: an operation whose record cannot be written is refused
	 * before anything changes (507 full filesystem, 503 read-only database). A snapshot of
	 * a paused sandbox leaves it paused whatever happens: the store keeps `paused` so a
	 * restart finds it paused. */
	if (!(to == SANDBOX_SNAPSHOTTING && s->state == SANDBOX_PAUSED)) {
		r = store_sandbox_set_state(c->store, s->id, sandbox_state_name(to), NULL, err);
		if (r < 0) {
			isola_err_wrap(err, "cannot %s sandbox `%s`: nothing was changed", op,
				       s->id);
			goto out;
		}
	}
	s->op_prev = s->state;
	s->state = to;
	core_changed(c);
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

int sandbox_op_end(struct core *c, struct sandbox *s, enum sandbox_state to, struct isola_err **err)
{
	int r;

	pthread_mutex_lock(&s->lock);
	s->state = to;
	r = store_sandbox_set_state(c->store, s->id, sandbox_state_name(to), NULL, err);
	pthread_mutex_unlock(&s->lock);
	core_changed(c);
	return r;
}

int core_sandbox_identity(struct sandbox *s, struct isola_err **err)
{
	unsigned char seed[IDENTITY_SEED_BYTES], mid[16];
	char seed_b64[sodium_base64_ENCODED_LEN(IDENTITY_SEED_BYTES,
						sodium_base64_VARIANT_ORIGINAL)];
	char mid_hex[33];
	json_t *req, *res = NULL;
	int r;

	r = util_random(seed, sizeof(seed));
	if (r == 0)
		r = util_random(mid, sizeof(mid));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "sandbox `%s`: identity seed", s->id);
	sodium_bin2base64(seed_b64, sizeof(seed_b64), seed, sizeof(seed),
			  sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2hex(mid_hex, sizeof(mid_hex), mid, sizeof(mid));
	sodium_memzero(seed, sizeof(seed));
	req = json_pack("{s:s, s:s, s:s, s:s}", "op", "identity", "hostname",
			tier_hostname(&s->spec), "machine_id", mid_hex, "seed", seed_b64);
	sodium_memzero(seed_b64, sizeof(seed_b64));
	if (!req)
		return isola_err_set(err, ENOMEM, NULL, "sandbox `%s`: out of memory", s->id);
	r = agent_call(s->conn, req, IDENTITY_TIMEOUT_MS, &res, err);
	json_decref(req);
	if (r < 0)
		return isola_err_wrap(err, "sandbox `%s`: set a fresh identity", s->id);
	log_info("sandbox %s: fresh identity (rng reseeded: %s)", s->id,
		 json_is_true(json_object_get(res, "reseeded")) ? "yes" : "no, host kernel RNG");
	json_decref(res);
	return 0;
}

int core_sandbox_pause_obj(struct core *c, struct sandbox *s, struct isola_err **err)
{
	int r;

	if (!s->tier->pause || !s->tier->resume)
		return core_not_supported(s, "pause", err);
	pthread_mutex_lock(&s->lock);
	if (s->state == SANDBOX_PAUSED) { /* idempotent */
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	pthread_mutex_unlock(&s->lock);
	r = sandbox_op_begin(c, s, SANDBOX_BIT(SANDBOX_RUNNING), SANDBOX_PAUSING, "pause", err);
	if (r < 0)
		return r;
	r = s->tier->pause(s->ts, err);
	if (r < 0) {
		sandbox_op_end(c, s, SANDBOX_RUNNING, NULL);
		return r;
	}
	r = sandbox_op_end(c, s, SANDBOX_PAUSED, err);
	if (r < 0) {
		/* Not recorded, so not acknowledged: a restart would find it `pausing` and thaw
		 * it, so it is thawed now and the client hears why. */
		s->tier->resume(s->ts, NULL);
		sandbox_op_end(c, s, SANDBOX_RUNNING, NULL);
		return isola_err_wrap(err, "pause sandbox `%s`: not paused", s->id);
	}
	log_info("sandbox %s paused", s->id);
	return 0;
}

/* Hibernated -> running: restore from the hibernation snapshot into the same identity. */
static int core_sandbox_wake(struct core *c, struct sandbox *s, struct isola_err **err)
{
	struct core_reservation *res = NULL;
	char hib[PATH_MAX];
	int r, fd;

	if (core_hibernation_dir(c, s->id, hib, sizeof(hib)) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "snapshot path too long");
	r = core_admit_wake(c, s, &res, err);
	if (r < 0)
		return r;
	r = sandbox_op_begin(c, s, SANDBOX_BIT(SANDBOX_HIBERNATED), SANDBOX_WAKING, "resume", err);
	if (r < 0)
		goto out;
	/* Check before touching anything: a damaged image leaves the sandbox hibernated. */
	r = snapdir_verify(hib, NULL, err);
	if (r < 0)
		goto fail_state;
	util_rm_rf(s->spec.dir);
	if (mkdir(s->spec.dir, 0700) < 0) {
		r = isola_err_sys(err, errno, NULL, "create `%s`", s->spec.dir);
		goto fail_state;
	}
	/* Its network again, with the policy it had (docs/network.md). */
	r = core_tier_build(s, hib, NULL, NULL, err);
	if (r < 0 && !s->ts)
		goto fail_state;
	fd = r < 0 ? r : s->tier->agent_connect(s->ts, err);
	r = fd < 0 ? fd : agent_conn_new(fd, AGENT_CONNECT_TIMEOUT_MS, &s->conn, err);
	/* Same hostname, but the RNG of a restored image must not repeat its past. */
	if (r == 0)
		r = core_sandbox_identity(s, err);
	if (r == 0) {
		/* Acknowledged only once recorded: a store that missed it says `waking`, which a
		 * restart turns back into `hibernated` from the image, so that is done now. */
		pthread_mutex_lock(&s->lock);
		s->state = SANDBOX_RUNNING;
		s->last_active = util_wall_time();
		r = core_persist(c, s, err);
		if (r < 0)
			s->state = SANDBOX_WAKING;
		pthread_mutex_unlock(&s->lock);
		core_changed(c);
	}
	if (r < 0) {
		if (s->conn) {
			agent_conn_free(s->conn);
			s->conn = NULL;
		}
		s->tier->destroy(s->ts, NULL);
		s->ts = NULL;
		goto fail_state;
	}
	/* A tier that keeps using the image (microvm maps its memory file) keeps it until the
	 * sandbox is destroyed or hibernated again; the others are done with it. */
	if (!s->tier->restore_needs_snapshot)
		util_rm_rf(hib);
	log_info("sandbox %s resumed from hibernation", s->id);
	r = 0;
	goto out;
fail_state:
	sandbox_op_end(c, s, SANDBOX_HIBERNATED, NULL);
	isola_err_wrap(err, "resume sandbox `%s` from hibernation", s->id);
out:
	core_release(c, res);
	return r;
}

int core_sandbox_resume_obj(struct core *c, struct sandbox *s, struct isola_err **err)
{
	enum sandbox_state st;
	int r;

	pthread_mutex_lock(&s->lock);
	st = s->state;
	pthread_mutex_unlock(&s->lock);
	if (st == SANDBOX_RUNNING) /* idempotent */
		return 0;
	if (st == SANDBOX_HIBERNATED)
		return core_sandbox_wake(c, s, err);
	if (!s->tier->resume)
		return core_not_supported(s, "resume", err);
	r = sandbox_op_begin(c, s, SANDBOX_BIT(SANDBOX_PAUSED), SANDBOX_RESUMING, "resume", err);
	if (r < 0)
		return r;
	r = s->tier->resume(s->ts, err);
	if (r < 0) {
		sandbox_op_end(c, s, SANDBOX_PAUSED, NULL);
		return r;
	}
	/* Running in memory and in reality; a store that missed this write says `resuming`,
	 * which a restart also brings back running (reconcile.c): the states agree. */
	r = sandbox_op_end(c, s, SANDBOX_RUNNING, err);
	if (r < 0)
		return isola_err_wrap(err, "resume sandbox `%s`: resumed, but not recorded", s->id);
	log_info("sandbox %s resumed", s->id);
	return 0;
}

int core_sandbox_hibernate_obj(struct core *c, struct sandbox *s, struct isola_err **err)
{
	enum tier_persistence level = TIER_PERSIST_NONE;
	char hib[PATH_MAX], next[PATH_MAX + 8], parent[PATH_MAX], tmp[PATH_MAX];
	json_t *meta;
	int r;

	if (!s->tier->snapshot || !s->tier->restore)
		return core_not_supported(s, "hibernate", err);
	if (core_hibernation_dir(c, s->id, hib, sizeof(hib)) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "snapshot path too long");
	/* The new image is sealed as <id>.new and replaces <id> only once the tier's resources
	 * are gone: the running sandbox may still use the previous image (restore_needs_snapshot),
	 * and reconcile can always tell the fresh image from the old one. */
	snprintf(next, sizeof(next), "%s" HIBERNATION_NEXT, hib);
	snprintf(parent, sizeof(parent), "%s/hibernated", c->snapshot_root);
	r = sandbox_op_begin(c, s, SANDBOX_BIT(SANDBOX_RUNNING) | SANDBOX_BIT(SANDBOX_PAUSED),
			     SANDBOX_HIBERNATING, "hibernate", err);
	if (r < 0)
		return r;
	util_rm_rf(next); /* a partial image of an earlier, interrupted hibernation */
	/* The policy the resume needs outlives a host crash, like the image. */
	r = net_sandbox_sync(s->id, err);
	if (r < 0)
		goto fail;
	r = snapdir_tmp_new(parent, s->id, tmp, sizeof(tmp), err);
	if (r < 0)
		goto fail;
	r = s->tier->snapshot(s->ts, tmp, &level, NULL, err);
	if (r < 0)
		goto fail_tmp;
	meta = json_pack("{s:s, s:s, s:s, s:i}", "kind", "hibernation", "sandbox", s->id, "tier",
			 s->tier->name, "level", (int)level);
	r = snapdir_commit(tmp, next, meta, NULL, err);
	json_decref(meta);
	if (r < 0)
		goto fail_tmp;
	/* The image is durable: now the tier's resources can go. */
	pthread_mutex_lock(&s->lock);
	sandbox_retire_conn(s);
	if (s->conn) {
		agent_conn_free(s->conn); /* out of memory: no stream can outlive it safely */
		s->conn = NULL;
	}
	if (s->op_prev == SANDBOX_PAUSED && s->tier->resume)
		s->tier->resume(s->ts, NULL); /* a frozen task does not act on SIGKILL (v1) */
	r = s->tier->destroy(s->ts, err);
	s->ts = NULL;
	util_rm_rf(hib);
	if (rename(next, hib) < 0)
		log_error("sandbox %s: hibernate: rename `%s`: %s", s->id, next, strerror(errno));
	s->state = SANDBOX_HIBERNATED;
	core_persist(c, s, NULL);
	pthread_mutex_unlock(&s->lock);
	core_changed(c);
	if (r < 0) {
		/* The image is complete; what the tier could not remove is logged, the sandbox
		 * is hibernated all the same and a resume restores it. */
		log_warn("sandbox %s: hibernate: tier destroy: %s", s->id,
			 *err ? (*err)->message : "failed");
		isola_err_free(steal_ptr(err));
	}
	log_info("sandbox %s hibernated (%s)", s->id,
		 level == TIER_PERSIST_MEMORY ? "files+memory" : "files");
	return 0;
fail_tmp:
	util_rm_rf(tmp);
fail:
	sandbox_op_end(c, s, s->op_prev, NULL);
	return isola_err_wrap(err, "hibernate sandbox `%s`", s->id);
}

/* Looks the sandbox up for tenant and runs fn on it. */
static int with_sandbox(struct core *c, const char *tenant, const char *id,
			int (*fn)(struct core *, struct sandbox *, struct isola_err **),
			struct isola_err **err)
{
	struct sandbox *s;
	int r = core_sandbox_get_for(c, tenant, id, &s, err);

	if (r < 0)
		return r;
	r = fn(c, s, err);
	if (r == 0)
		sandbox_touch(s);
	sandbox_unref(s);
	return r;
}

int core_sandbox_pause_for(struct core *c, const char *tenant, const char *id,
			   struct isola_err **err)
{
	return with_sandbox(c, tenant, id, core_sandbox_pause_obj, err);
}

int core_sandbox_resume_for(struct core *c, const char *tenant, const char *id,
			    struct isola_err **err)
{
	return with_sandbox(c, tenant, id, core_sandbox_resume_obj, err);
}

int core_sandbox_hibernate_for(struct core *c, const char *tenant, const char *id,
			       struct isola_err **err)
{
	return with_sandbox(c, tenant, id, core_sandbox_hibernate_obj, err);
}
