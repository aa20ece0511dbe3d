/* SPDX-License-Identifier: Apache-2.0 */
/* lifecycle: what a sandbox's timeout and idleness do (kill, pause, hibernate) and auto-resume. */
#include "lifecycle.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "agentconn.h"
#include "core-internal.h"

#define LIFE_SAMPLE_S	       1.0   /* idle sampling period per sandbox */
#define LIFE_IDLE_CPU_PERMILLE 50    /* below 5% of one CPU over a sample counts as quiet */
#define LIFE_RETRY_S	       60.0  /* a policy that failed is tried again this much later */
#define LIFE_WAIT_TRANSIENT_MS 60000 /* auto-resume waits this long for a resume in flight */

static const char *const policy_names[] = {"kill", "pause", "hibernate"};

const char *life_policy_name(enum life_policy p)
{
	return (unsigned)p < sizeof(policy_names) / sizeof(policy_names[0]) ? policy_names[p]
									    : NULL;
}

int life_policy_parse(const char *name, enum life_policy *out, struct isola_err **err)
{
	if (!name || !*name) {
		*out = LIFE_KILL;
		return 0;
	}
	for (size_t i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++) {
		if (!strcmp(name, policy_names[i])) {
			*out = (enum life_policy)i;
			return 0;
		}
	}
	return isola_err_set(err, EINVAL, "invalid",
			     "on_timeout `%.32s` is unknown (known: kill, pause, hibernate)", name);
}

int life_policy_check(const struct tier_ops *t, enum life_policy p, struct isola_err **err)
{
	bool ok = true;

	if (p == LIFE_PAUSE)
		ok = t->pause && t->resume;
	else if (p == LIFE_HIBERNATE)
		ok = t->snapshot && t->restore;
	if (!ok)
		return isola_err_set(err, EINVAL, "invalid",
				     "on_timeout `%s`: the %s tier cannot %s a sandbox",
				     life_policy_name(p), t->name, life_policy_name(p));
	return 0;
}

int lifecycle_init(struct core *c, struct sandbox *s, const struct sandbox_request *req,
		   struct isola_err **err)
{
	struct sandbox_life *l = &s->life;
	int r;

	memset(l, 0, sizeof(*l));
	r = life_policy_parse(req->on_timeout, &l->on_timeout, err);
	if (r == 0)
		r = life_policy_check(s->tier, l->on_timeout, err);
	if (r < 0)
		return r;
	if (req->auto_resume < LIFE_RESUME_NEVER || req->auto_resume > LIFE_RESUME_ALWAYS)
		return isola_err_set(err, EINVAL, "invalid", "auto_resume must be a boolean");
	if (req->idle_timeout_s > c->cfg.max_ttl_s)
		return isola_err_set(err, EINVAL, "invalid",
				     "idle_timeout must be at most %u seconds", c->cfg.max_ttl_s);
	l->auto_resume = req->auto_resume;
	l->idle_timeout_s = req->idle_timeout_s;
	l->ttl_s = req->ttl_s ? req->ttl_s : c->cfg.default_ttl_s;
	l->pooled = req->pooled;
	l->headroom = req->pooled && req->pool_headroom;
	if (l->pooled) {
		/* Nobody's until claimed (pool.c): no tenant, no TTL, no idle policy. */
		s->tenant[0] = '\0';
		l->ttl_s = 0;
		l->idle_timeout_s = 0;
	}
	return 0;
}

int lifecycle_restored(struct core *c, struct sandbox *s, const struct sandbox_request *req,
		       struct isola_err **err)
{
	struct sandbox_life *l = &s->life;

	if (req)
		return lifecycle_init(c, s, req, err);
	l->by_policy = false;
	l->pooled = false;
	l->taken = false;
	l->from_pool = false;
	l->idle = false;
	l->sampled_at = 0;
	l->base_pids = 0;
	l->resumes = 0;
	return 0;
}

void lifecycle_dump(const struct sandbox *s, json_t *j)
{
	const struct sandbox_life *l = &s->life;

	json_object_set_new(j, "lifecycle",
			    json_pack("{s:s, s:I, s:I, s:i, s:b, s:b, s:b}", "on_timeout",
				      life_policy_name(l->on_timeout), "ttl_s",
				      (json_int_t)l->ttl_s, "idle_timeout_s",
				      (json_int_t)l->idle_timeout_s, "auto_resume", l->auto_resume,
				      "by_policy", l->by_policy, "pooled", l->pooled, "from_pool",
				      l->from_pool));
}

void lifecycle_load(struct sandbox *s, const json_t *j)
{
	json_t *o = json_object_get(j, "lifecycle");
	struct sandbox_life *l = &s->life;
	const char *pol = NULL;
	json_int_t ttl = 0, idle = 0;
	int resume = 0, by_policy = 0, pooled = 0, from_pool = 0;

	/* UNTRUSTED only in the sense that the row may be from another version: bad -> default. */
	if (!json_is_object(o) ||
	    json_unpack(o, "{s?s, s?I, s?I, s?i, s?b, s?b, s?b}", "on_timeout", &pol, "ttl_s", &ttl,
			"idle_timeout_s", &idle, "auto_resume", &resume, "by_policy", &by_policy,
			"pooled", &pooled, "from_pool", &from_pool) < 0)
		return;
	if (life_policy_parse(pol, &l->on_timeout, NULL) < 0)
		l->on_timeout = LIFE_KILL;
	l->ttl_s = ttl > 0 && ttl <= UINT32_MAX ? (uint32_t)ttl : 0;
	l->idle_timeout_s = idle > 0 && idle <= UINT32_MAX ? (uint32_t)idle : 0;
	l->auto_resume = resume < 0 ? LIFE_RESUME_NEVER : resume > 0 ? LIFE_RESUME_ALWAYS : 0;
	l->by_policy = by_policy;
	l->pooled = pooled;
	l->from_pool = from_pool;
	if (l->pooled)
		s->tenant[0] = '\0';
}

static bool life_is_stopped(enum sandbox_state st)
{
	return st == SANDBOX_PAUSED || st == SANDBOX_HIBERNATED;
}

void lifecycle_to_json(const struct sandbox *s, json_t *j)
{
	const struct sandbox_life *l = &s->life;
	bool stopped = life_is_stopped(s->state);

	json_object_set_new(j, "on_timeout", json_string(life_policy_name(l->on_timeout)));
	json_object_set_new(j, "idle_timeout",
			    l->idle_timeout_s ? json_integer(l->idle_timeout_s) : json_null());
	json_object_set_new(j, "auto_resume",
			    l->auto_resume == LIFE_RESUME_DEFAULT
				    ? json_null()
				    : json_boolean(l->auto_resume == LIFE_RESUME_ALWAYS));
	json_object_set_new(j, "last_active", json_real(s->last_active));
	json_object_set_new(j, "idle_since",
			    l->idle || stopped ? json_real(s->last_active) : json_null());
	json_object_set_new(j, "paused_by",
			    stopped ? json_string(l->by_policy ? "policy" : "user") : json_null());
	json_object_set_new(j, "pooled", json_boolean(l->from_pool));
}

int core_sandbox_set_lifecycle_for(struct core *c, const char *tenant, const char *id,
				   const json_t *patch, json_t **out, struct isola_err **err)
{
	json_t *pol = json_object_get(patch, "on_timeout");
	json_t *idle = json_object_get(patch, "idle_timeout");
	json_t *resume = json_object_get(patch, "auto_resume");
	enum life_policy p = LIFE_KILL;
	struct sandbox *s;
	int r;

	if (pol && life_policy_parse(json_string_value(pol), &p, err) < 0)
		return -EINVAL;
	if (idle && json_integer_value(idle) > (json_int_t)c->cfg.max_ttl_s)
		return isola_err_set(err, EINVAL, "invalid",
				     "idle_timeout must be at most %u seconds", c->cfg.max_ttl_s);
	r = core_sandbox_get_for(c, tenant, id, &s, err);
	if (r < 0)
		return r;
	if (pol && (r = life_policy_check(s->tier, p, err)) < 0)
		goto out;
	pthread_mutex_lock(&s->lock);
	if (pol)
		s->life.on_timeout = p;
	if (idle)
		s->life.idle_timeout_s = (uint32_t)json_integer_value(idle);
	if (json_is_boolean(resume))
		s->life.auto_resume = json_is_true(resume) ? LIFE_RESUME_ALWAYS : LIFE_RESUME_NEVER;
	else if (resume)
		s->life.auto_resume = LIFE_RESUME_DEFAULT;
	/* A new idle timeout counts from now, not from the sandbox's last activity. */
	if (idle)
		s->last_active = util_wall_time();
	r = core_persist(c, s, err);
	pthread_mutex_unlock(&s->lock);
	if (r == 0)
		*out = sandbox_to_json(s);
out:
	sandbox_unref(s);
	return r;
}

/* Applies s's policy because of `why` ("ttl" or "idle"); the monitor thread. */
static void life_apply(struct core *c, struct sandbox *s, const char *why)
{
	cleanup_err struct isola_err *e = NULL;
	enum life_policy p;
	json_t *detail;
	int r;

	pthread_mutex_lock(&s->lock);
	p = s->life.on_timeout;
	if (p == LIFE_KILL) { /* what its tombstone says (tombstone.c) */
		bool ttl = !strcmp(why, "ttl");

		snprintf(s->end_reason, sizeof(s->end_reason), "%s", ttl ? "expired" : "idle");
		snprintf(s->end_detail, sizeof(s->end_detail), "%s %us",
			 ttl ? "ttl" : "idle_timeout",
			 ttl ? s->life.ttl_s : s->life.idle_timeout_s);
	}
	pthread_mutex_unlock(&s->lock);
	log_info("sandbox %s: %s, applying on_timeout=%s", s->id,
		 strcmp(why, "ttl") ? "idle" : "TTL expired", life_policy_name(p));
	switch (p) {
	case LIFE_PAUSE:
		r = core_sandbox_pause_obj(c, s, &e);
		break;
	case LIFE_HIBERNATE:
		r = core_sandbox_hibernate_obj(c, s, &e);
		break;
	default:
		r = core_sandbox_destroy_obj(c, s, &e);
		break;
	}
	if (p != LIFE_KILL) {
		pthread_mutex_lock(&s->lock);
		/* Paused by policy: auto-resume applies by default; the TTL restarts on resume.
		 * A failure is retried later rather than killing live work. */
		s->life.by_policy = r == 0;
		s->life.idle = false;
		s->expires_at = r == 0 ? 0 : util_wall_time() + LIFE_RETRY_S;
		store_sandbox_set_expiry(c->store, s->id, s->expires_at, NULL);
		if (r == 0)
			core_persist(c, s, NULL);
		if (r < 0)
			s->last_active = util_wall_time();
		pthread_mutex_unlock(&s->lock);
		core_changed(c); /* paused_by, expires_at */
	}
	if (r < 0)
		log_warn("sandbox %s: on_timeout=%s: %s", s->id, life_policy_name(p),
			 e ? e->message : "failed");
	detail = json_pack("{s:s, s:s}", "reason", why, "policy", life_policy_name(p));
	audit_append(c->audit, "isolad", s->tenant,
		     strcmp(why, "ttl") ? "sandbox.idle" : "sandbox.expire", s->id,
		     r < 0 ? "error" : "ok", detail);
	json_decref(detail);
}

void lifecycle_expire(struct core *c, struct sandbox *s)
{
	life_apply(c, s, "ttl");
}

/* Open agent channels of s (current and retired connections). Lock held. */
static size_t life_channels(const struct sandbox *s)
{
	size_t n = s->conn ? agent_conn_channels(s->conn) : 0;

	for (size_t i = 0; i < s->n_old_conns; i++)
		n += agent_conn_channels(s->old_conns[i]);
	return n;
}

void lifecycle_tick(struct core *c, struct sandbox *s, double now)
{
	struct sandbox_life *l = &s->life;
	struct tier_stats st;
	bool due = false;

	pthread_mutex_lock(&s->lock);
	if (s->state != SANDBOX_RUNNING || !s->ts || l->pooled)
		goto out;
	if (l->by_policy) {
		/* Resumed (automatically or by a user) after a policy stop: the TTL restarts. */
		l->by_policy = false;
		s->expires_at = l->ttl_s ? now + l->ttl_s : 0;
		s->last_active = now;
		store_sandbox_set_expiry(c->store, s->id, s->expires_at, NULL);
		core_persist(c, s, NULL);
	}
	if (!l->idle_timeout_s || (l->sampled_at > 0 && now - l->sampled_at < LIFE_SAMPLE_S))
		goto out;
	memset(&st, 0, sizeof(st));
	if (s->tier->stats(s->ts, &st, NULL) == 0) {
		double elapsed = l->sampled_at > 0 ? now - l->sampled_at : 0;
		bool busy = elapsed <= 0 || life_channels(s) > 0 ||
			    (l->base_pids && st.pids > l->base_pids) ||
			    (double)(st.cpu_usec - l->cpu_usec) >
				    elapsed * 1e6 * LIFE_IDLE_CPU_PERMILLE / 1000.0;

		if (st.pids && (!l->base_pids || st.pids < l->base_pids))
			l->base_pids = st.pids;
		l->cpu_usec = st.cpu_usec;
		l->sampled_at = now;
		if (busy)
			s->last_active = now;
		l->idle = !busy;
		due = l->idle && now - s->last_active >= l->idle_timeout_s;
	}
out:
	pthread_mutex_unlock(&s->lock);
	if (due)
		life_apply(c, s, "idle");
}

int lifecycle_auto_resume(struct sandbox *s, struct isola_err **err)
{
	cleanup_err struct isola_err *e = NULL;
	struct core *c = s->core;
	uint64_t deadline = util_now_ms() + LIFE_WAIT_TRANSIENT_MS;
	enum sandbox_state st;
	json_t *detail;
	bool allow;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		st = s->state;
		allow = s->life.auto_resume == LIFE_RESUME_ALWAYS ||
			(s->life.auto_resume == LIFE_RESUME_DEFAULT && s->life.by_policy);
		pthread_mutex_unlock(&s->lock);
		/* Another request's resume in flight: wait for it rather than fail. */
		if ((st != SANDBOX_RESUMING && st != SANDBOX_WAKING) || util_now_ms() > deadline)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	if (!life_is_stopped(st) || !allow)
		return 0;
	if (core_sandbox_resume_obj(c, s, &e) < 0) {
		/* Lost a race with another resume: fine if the sandbox runs now. */
		pthread_mutex_lock(&s->lock);
		st = s->state;
		pthread_mutex_unlock(&s->lock);
		if (st == SANDBOX_RUNNING)
			return 0;
		return isola_err_set(err, e ? e->errnum : EIO, e ? e->code : "internal",
				     "sandbox `%s`: auto-resume: %s", s->id,
				     e ? e->message : "failed");
	}
	pthread_mutex_lock(&s->lock);
	s->life.resumes++;
	s->last_active = util_wall_time();
	pthread_mutex_unlock(&s->lock);
	log_info("sandbox %s: resumed automatically", s->id);
	detail = json_pack("{s:b}", "auto", 1);
	audit_append(c->audit, "isolad", s->tenant, "sandbox.resume", s->id, "ok", detail);
	json_decref(detail);
	return 0;
}
