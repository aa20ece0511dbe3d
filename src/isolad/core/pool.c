/* SPDX-License-Identifier: Apache-2.0 */
/* pool: warm pools — a thread keeps N ready sandboxes per (template, tier); creates claim them. */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../images/images.h"
#include "core-internal.h"

#define POOL_BACKOFF_MIN_MS 1000u
#define POOL_BACKOFF_MAX_MS 60000u
#define POOL_IDLE_WAIT_MS   1000 /* the thread looks again at least this often */
#define POOL_QUIET_MS	    300	 /* no refill until creates paused this long ... */
#define POOL_MAX_DEFER_MS   3000 /* ... unless they have kept coming this long */
#define POOL_META_KEY	    "pools"
#define POOL_AUTO_SLOTS	    3600 /* per-second create counts kept: the longest window */
#define POOL_AUTO_WINDOW_S  300	 /* default window of the automatic pool's rate */
#define POOL_AUTO_ENV	    "ISOLA_POOL_AUTO_WINDOW_S"
#define POOL_AUTO_TEMPLATE  "host" /* the automatic pool's template (tier: process) */
/* The automatic pool's memory budget: its idle sandboxes together cost at most
 * 1/POOL_AUTO_MEM_SHARE of the host's MemAvailable, each counted as POOL_AUTO_IDLE_COST
 * (measured: 642 KiB attributable, 814 KiB of host memory per idle sandbox, rounded up;
 * docs/benchmarks.md). */
#define POOL_AUTO_IDLE_COST (1ull << 20)
#define POOL_AUTO_MEM_SHARE 64

/* One (template, tier) pool. Under pool_set.lock. */
struct pool {
	char template_name[64]; /* as configured ("host" for the default) */
	char tier[16];		/* "process" | "microvm" */
	uint32_t size;		/* wanted ready sandboxes (an automatic pool's current target) */
	uint32_t auto_max;	/* > 0: an automatic pool, its target capped at this */
	bool by_default;	/* automatic by isolad's default: not stored (pool_save skips it) */
	bool capped;		/* automatic: the last fill found no room for one more */
	uint64_t deferrals;	/* automatic: passes that held a fill back for a burst */
	uint32_t creating;	/* creates in flight (0 or 1: one thread) */
	uint64_t claims;	/* creates served from the pool */
	uint64_t misses;	/* creates for this pair that found no ready sandbox */
	uint64_t failures;	/* failed fills */
	uint32_t backoff_ms;	/* current backoff, 0 after a success */
	uint64_t retry_at_ms;	/* monotonic ms before which no fill is tried */
	char last_error[256];	/* why the last fill failed, "" = none */
};

struct pool_set {
	pthread_mutex_t lock;		    /* everything below */
	pthread_cond_t wake;		    /* work may be there, or stop */
	pthread_cond_t filled;		    /* a fill ended (pool_yield waits for it) */
	uint32_t yielding;		    /* creates waiting in pool_yield: no fill starts */
	pthread_t thread;		    /* the pool thread */
	bool running;			    /* thread started */
	bool stop;			    /* thread should exit */
	uint64_t busy_since_ms;		    /* first create of the current run (monotonic) */
	uint64_t busy_until_ms;		    /* last create + POOL_QUIET_MS */
	uint64_t burst_since_ms;	    /* automatic pools: first burst create of the run */
	uint64_t burst_until_ms;	    /* ... last burst create + POOL_QUIET_MS */
	uint32_t auto_window_s;		    /* the automatic pool's rate window */
	uint32_t mem_cap;		    /* the memory budget in sandboxes (pool_mem_cap) */
	bool auto_off;			    /* stored: no automatic pool on host/process */
	uint64_t rate_sec[POOL_AUTO_SLOTS]; /* monotonic second of each count below */
	uint32_t rate_n[POOL_AUTO_SLOTS];   /* creates for the automatic pool in that second */
	struct pool pools[POOL_MAX_POOLS];  /* configured pools */
	size_t n;			    /* used entries */
};

/* What the pool thread should do next for one pool. */
struct pool_scan {
	uint32_t ready;		/* pooled and running with the current template */
	struct sandbox *victim; /* a surplus, stale or dead pooled sandbox (reference) or NULL */
};

static const char *pool_tier_name(const char *tier)
{
	return tier && *tier ? tier : "process";
}

static const char *pool_template_name(const char *t)
{
	return t && *t ? t : "host";
}

/* The pool for (template, tier) or NULL. Lock held. */
static struct pool *pool_find(struct pool_set *ps, const char *tmpl, const char *tier)
{
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->pools[i].template_name, tmpl) && !strcmp(ps->pools[i].tier, tier))
			return &ps->pools[i];
	return NULL;
}

/* True when pooled sandbox p belongs to pool `pl`. c->lock held. */
static bool pool_owns(const struct pool *pl, const struct sandbox *p)
{
	return p->life.pooled && !strcmp(p->template_name, pl->template_name) &&
	       !strcmp(p->tier->name, pl->tier);
}

/* Counts a pool's ready sandboxes and picks one to destroy: dead ones first, then ones of an
 * older template image, then the surplus. */
static void pool_scan(struct core *c, const struct pool *pl, const char *template_id,
		      struct pool_scan *out)
{
	struct sandbox *stale = NULL, *spare = NULL;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++) {
		struct sandbox *p = c->sandboxes[i];

		if (!pool_owns(pl, p) || p->life.taken)
			continue;
		if (p->state == SANDBOX_ERROR) {
			if (!out->victim)
				out->victim = p;
		} else if (p->state != SANDBOX_RUNNING) {
			continue; /* being destroyed */
		} else if (template_id && strcmp(p->template_id, template_id)) {
			stale = p;
		} else {
			out->ready++;
			spare = p;
		}
	}
	if (!out->victim)
		out->victim = stale ? stale : out->ready > pl->size ? spare : NULL;
	if (out->victim) {
		out->victim->life.taken = true;
		sandbox_ref(out->victim);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Pooled sandboxes whose pool no longer exists: destroyed one per pass (reference). */
static struct sandbox *pool_orphan(struct core *c, struct pool_set *ps)
{
	struct sandbox *found = NULL;

	pthread_mutex_lock(&ps->lock);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes && !found; i++) {
		struct sandbox *p = c->sandboxes[i];

		if (p->life.pooled && !p->life.taken &&
		    (p->state == SANDBOX_RUNNING || p->state == SANDBOX_ERROR) &&
		    !pool_find(ps, p->template_name, p->tier->name)) {
			p->life.taken = true;
			found = p;
			sandbox_ref(p);
		}
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&ps->lock);
	return found;
}

static void pool_destroy_one(struct core *c, struct sandbox *p, const char *why)
{
	cleanup_err struct isola_err *e = NULL;

	log_info("pool: destroying pooled sandbox %s (%s)", p->id, why);
	if (core_sandbox_destroy_obj(c, p, &e) < 0)
		log_warn("pool: destroy %s: %s", p->id, e ? e->message : "failed");
	sandbox_unref(p);
}

/* Creates one pooled sandbox for pl (copied: the thread runs it without the lock). */
static int pool_fill_one(struct core *c, const struct pool *pl, struct isola_err **err)
{
	struct sandbox_request req;
	struct sandbox *s = NULL;
	int r;

	memset(&req, 0, sizeof(req));
	snprintf(req.template_name, sizeof(req.template_name), "%s", pl->template_name);
	snprintf(req.tier, sizeof(req.tier), "%s", pl->tier);
	req.pooled = true;
	req.pool_headroom = pl->auto_max > 0;
	r = core_sandbox_create(c, &req, &s, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	if (s->expires_at > 0) { /* a daemon-wide default TTL does not apply while pooled */
		s->expires_at = 0;
		store_sandbox_set_expiry(c->store, s->id, 0, NULL);
	}
	pthread_mutex_unlock(&s->lock);
	log_info("pool %s/%s: sandbox %s ready", pl->template_name, pl->tier, s->id);
	sandbox_unref(s);
	return 0;
}

/* An automatic pool's fill refused for host capacity (it leaves the last room free): the
 * pool stays short and looks again in POOL_BACKOFF_MIN_MS. ps->lock held. */
static bool pool_auto_capped(struct pool *pl, const struct isola_err *e)
{
	if (!pl->auto_max || !e || strcmp(e->code, "unavailable"))
		return false;
	pl->capped = true;
	pl->retry_at_ms = util_now_ms() + POOL_BACKOFF_MIN_MS;
	return true;
}

/* Records a create (claim or miss) for refill deferral. ps->lock held. */
static void pool_note_create(struct pool_set *ps)
{
	uint64_t now = util_now_ms();

	if (now > ps->busy_until_ms)
		ps->busy_since_ms = now;
	ps->busy_until_ms = now + POOL_QUIET_MS;
}

/*
 * Records a create for the automatic pool: its per-second count (the target's rate) and,
 * when other callers' creates are in flight beside it (`others`), a burst. ps->lock held.
 */
static void pool_auto_note(struct pool_set *ps, uint32_t others)
{
	uint64_t now = util_now_ms(), sec = now / 1000;
	size_t slot = sec % POOL_AUTO_SLOTS;

	if (ps->rate_sec[slot] != sec) {
		ps->rate_sec[slot] = sec;
		ps->rate_n[slot] = 0;
	}
	ps->rate_n[slot]++;
	if (!others)
		return;
	if (now > ps->burst_until_ms)
		ps->burst_since_ms = now;
	ps->burst_until_ms = now + POOL_QUIET_MS;
}

/*
 * The automatic pool's memory budget in sandboxes: 1/POOL_AUTO_MEM_SHARE of the host's
 * MemAvailable over POOL_AUTO_IDLE_COST each (a host with 2 GiB available: 32). It shrinks
 * as the host's memory fills, whoever fills it, so the pool gives memory back before a real
 * workload runs short. UINT32_MAX when /proc/meminfo cannot be read. Any thread.
 */
static uint32_t pool_mem_cap(void)
{
	long long kib = util_file_key("/proc/meminfo", "MemAvailable:");
	uint64_t n;

	if (kib < 0)
		return UINT32_MAX;
	n = (uint64_t)kib * 1024 / POOL_AUTO_MEM_SHARE / POOL_AUTO_IDLE_COST;
	return n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
}

/*
 * The automatic pool's target: the most creates seen in one second within the last window,
 * capped at auto_max and at the memory budget (ps->mem_cap). The peak second is what a
 * burst needs ready; a window with no create gives 0, so an idle isolad holds nothing.
 * ps->lock held.
 */
static uint32_t pool_auto_target(const struct pool_set *ps, const struct pool *pl, uint64_t now)
{
	uint64_t sec = now / 1000;
	uint32_t peak = 0;

	for (size_t i = 0; i < POOL_AUTO_SLOTS; i++)
		if (ps->rate_n[i] > peak && ps->rate_sec[i] <= sec &&
		    sec - ps->rate_sec[i] < ps->auto_window_s)
			peak = ps->rate_n[i];
	if (peak > pl->auto_max)
		peak = pl->auto_max;
	return peak < ps->mem_cap ? peak : ps->mem_cap;
}

/*
 * Whether fills should wait (creates are arriving: a refill's clone and mounts would compete
 * with them for the CPU, which is what a burst is short of); *wait_ms = how long. A static
 * pool waits while creates keep coming; an automatic pool only while a burst is in flight
 * (two or more callers' creates, or one beside another within POOL_QUIET_MS), so a single
 * stream of creates sees its pool refilled between them.
 */
static bool pool_deferred(struct core *c, struct pool_set *ps, const struct pool *copy,
			  uint64_t now, uint64_t *wait_ms)
{
	uint32_t in_flight = copy->auto_max ? core_creates_in_flight(c) : 0;
	struct pool *pl;
	bool defer;

	pthread_mutex_lock(&ps->lock);
	if (!copy->auto_max) {
		defer = now < ps->busy_until_ms && now - ps->busy_since_ms < POOL_MAX_DEFER_MS;
		if (defer)
			*wait_ms = ps->busy_until_ms - now;
		pthread_mutex_unlock(&ps->lock);
		return defer;
	}
	defer = in_flight >= 2 || ps->yielding ||
		(now < ps->burst_until_ms && now - ps->burst_since_ms < POOL_MAX_DEFER_MS);
	if (defer) {
		*wait_ms = now < ps->burst_until_ms ? ps->burst_until_ms - now : POOL_QUIET_MS;
		if ((pl = pool_find(ps, copy->template_name, copy->tier)))
			pl->deferrals++;
	}
	pthread_mutex_unlock(&ps->lock);
	return defer;
}

/* One unit of work, if any; returns true when it did something, else *wait_ms says when to
 * look again. Runs without ps->lock. */
static bool pool_work(struct core *c, struct pool_set *ps, uint64_t *wait_ms)
{
	struct sandbox *orphan = pool_orphan(c, ps);
	uint64_t now = util_now_ms();
	uint32_t mem_cap = pool_mem_cap();

	pthread_mutex_lock(&ps->lock);
	ps->mem_cap = mem_cap;
	pthread_mutex_unlock(&ps->lock);
	if (orphan) {
		pool_destroy_one(c, orphan, "no pool for it");
		return true;
	}
	for (size_t i = 0;; i++) {
		struct template_info t;
		struct pool_scan sc;
		struct pool copy;
		bool fresh;
		int r;

		pthread_mutex_lock(&ps->lock);
		if (i >= ps->n || ps->stop) {
			pthread_mutex_unlock(&ps->lock);
			return false;
		}
		if (ps->pools[i].auto_max)
			ps->pools[i].size = pool_auto_target(ps, &ps->pools[i], now);
		copy = ps->pools[i];
		pthread_mutex_unlock(&ps->lock);

		memset(&t, 0, sizeof(t));
		fresh = images_get(copy.template_name, &t, NULL) == 0;
		pool_scan(c, &copy, fresh ? t.id : NULL, &sc);
		template_info_fini(&t);
		if (sc.victim) {
			pool_destroy_one(c, sc.victim, "dead, stale or surplus");
			return true;
		}
		if (sc.ready >= copy.size || now < copy.retry_at_ms ||
		    pool_deferred(c, ps, &copy, now, wait_ms))
			continue;
		{
			cleanup_err struct isola_err *e = NULL;
			struct pool *pl;

			pthread_mutex_lock(&ps->lock);
			if ((pl = pool_find(ps, copy.template_name, copy.tier)))
				pl->creating++;
			pthread_mutex_unlock(&ps->lock);
			r = pool_fill_one(c, &copy, &e);
			pthread_mutex_lock(&ps->lock);
			if ((pl = pool_find(ps, copy.template_name, copy.tier))) {
				pl->creating--;
				pl->capped = false;
				pthread_cond_broadcast(&ps->filled);
				if (r < 0 && pool_auto_capped(pl, e)) {
					r = 0; /* not a failure: the pool yields the room */
				} else if (r < 0) {
					pl->failures++;
					pl->backoff_ms = pl->backoff_ms ? pl->backoff_ms * 2
									: POOL_BACKOFF_MIN_MS;
					if (pl->backoff_ms > POOL_BACKOFF_MAX_MS)
						pl->backoff_ms = POOL_BACKOFF_MAX_MS;
					pl->retry_at_ms = util_now_ms() + pl->backoff_ms;
					snprintf(pl->last_error, sizeof(pl->last_error), "%s",
						 e ? e->message : "create failed");
				} else {
					pl->backoff_ms = 0;
					pl->last_error[0] = '\0';
				}
			}
			pthread_mutex_unlock(&ps->lock);
			if (r < 0)
				log_warn("pool %s/%s: fill failed: %s", copy.template_name,
					 copy.tier, e ? e->message : "create failed");
		}
		return true;
	}
}

static void *pool_main(void *arg)
{
	struct core *c = arg;
	struct pool_set *ps = c->pools;

	util_thread_name("warm pool");
	for (;;) {
		uint64_t wait_ms = POOL_IDLE_WAIT_MS;
		bool did;

		pthread_mutex_lock(&ps->lock);
		if (ps->stop) {
			pthread_mutex_unlock(&ps->lock);
			break;
		}
		pthread_mutex_unlock(&ps->lock);
		did = pool_work(c, ps, &wait_ms);
		pthread_mutex_lock(&ps->lock);
		if (!did && !ps->stop) {
			struct timespec ts;

			util_deadline_ts(CLOCK_REALTIME, wait_ms, &ts);
			pthread_cond_timedwait(&ps->wake, &ps->lock, &ts);
		}
		pthread_mutex_unlock(&ps->lock);
	}
	return NULL;
}

/* Writes the sizes to the store as {"template/tier": size}, an automatic pool as
 * {"host/process": {"auto_max": MAX}}. Lock held. */
static int pool_save(struct core *c, struct pool_set *ps, struct isola_err **err)
{
	json_t *j = json_object();
	char key[96], *text, *stored = NULL;
	int r;

	for (size_t i = 0; i < ps->n; i++) {
		if (ps->pools[i].by_default)
			continue; /* isolad's default is not a setting: a later default applies */
		snprintf(key, sizeof(key), "%s/%s", ps->pools[i].template_name, ps->pools[i].tier);
		json_object_set_new(
			j, key,
			ps->pools[i].auto_max
				? json_pack("{s:I}", "auto_max", (json_int_t)ps->pools[i].auto_max)
				: json_integer(ps->pools[i].size));
	}
	/* Turned off (auto_max or size 0 on the pair): the default does not come back. */
	if (ps->auto_off && !pool_find(ps, POOL_AUTO_TEMPLATE, "process"))
		json_object_set_new(j, POOL_AUTO_TEMPLATE "/process",
				    json_pack("{s:i}", "auto_max", 0));
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (!text)
		return isola_err_set(err, ENOMEM, NULL, "pools: out of memory");
	/* Unchanged (the same flags at every start): nothing to write, so an isolad starting
	 * on a full or read-only state filesystem is not refused for it. */
	if (store_meta_get(c->store, POOL_META_KEY, &stored, NULL) == 0 && stored &&
	    !strcmp(stored, text))
		r = 0;
	else
		r = store_meta_set(c->store, POOL_META_KEY, text, err);
	free(stored);
	free(text);
	return r;
}

/* A new, empty pool entry for (tmpl, tier) under ps->lock, or NULL with *err when full. */
static struct pool *pool_add_locked(struct pool_set *ps, const char *tmpl, const char *tier,
				    struct isola_err **err)
{
	struct pool *pl;

	if (ps->n >= POOL_MAX_POOLS) {
		isola_err_set(err, ENOSPC, "invalid", "at most %d pools", POOL_MAX_POOLS);
		return NULL;
	}
	pl = &ps->pools[ps->n++];
	memset(pl, 0, sizeof(*pl));
	snprintf(pl->template_name, sizeof(pl->template_name), "%s", tmpl);
	snprintf(pl->tier, sizeof(pl->tier), "%s", tier);
	return pl;
}

/* Makes (tmpl, process) the automatic pool with cap max under ps->lock; 0 removes an
 * automatic pool (its sandboxes become orphans) and records that the default pool is off,
 * a fixed one of that pair is replaced. */
static int pool_auto_set_locked(struct pool_set *ps, const char *tmpl, uint32_t max,
				struct isola_err **err)
{
	struct pool *pl = pool_find(ps, tmpl, "process");

	if (!strcmp(tmpl, POOL_AUTO_TEMPLATE))
		ps->auto_off = !max;
	if (!max) {
		if (pl && pl->auto_max)
			*pl = ps->pools[--ps->n];
		return 0;
	}
	if (!pl && !(pl = pool_add_locked(ps, tmpl, "process", err)))
		return -ENOSPC;
	pl->auto_max = max;
	pl->by_default = false;
	pl->retry_at_ms = 0;
	pl->backoff_ms = 0;
	return 0;
}

/* Sets a pool's size under ps->lock (adds or removes the entry). */
static int pool_set_locked(struct pool_set *ps, const char *tmpl, const char *tier, uint32_t size,
			   struct isola_err **err)
{
	struct pool *pl = pool_find(ps, tmpl, tier);

	/* Size 0 on the automatic pool's pair turns its default off too; a size replaces it. */
	if (!strcmp(tmpl, POOL_AUTO_TEMPLATE) && !strcmp(tier, "process"))
		ps->auto_off = !size;
	if (!pl && !size)
		return 0;
	if (!pl && !(pl = pool_add_locked(ps, tmpl, tier, err)))
		return -ENOSPC;
	if (!size) {
		*pl = ps->pools[--ps->n];
		return 0;
	}
	pl->size = size;
	pl->auto_max = 0; /* a fixed size replaces an automatic pool */
	pl->by_default = false;
	pl->retry_at_ms = 0; /* an operator's change retries a failing pool at once */
	pl->backoff_ms = 0;
	return 0;
}

int core_pool_set(struct core *c, const char *template_name, const char *tier, uint32_t size,
		  struct isola_err **err)
{
	struct pool_set *ps = c->pools;
	const char *tn = pool_template_name(template_name), *tr = pool_tier_name(tier);
	struct template_info t;
	int r;

	if (!ps)
		return isola_err_set(err, ENOSYS, "unavailable", "pools are not running");
	if (size > POOL_MAX_SIZE)
		return isola_err_set(err, EINVAL, "invalid", "pool size must be at most %d",
				     POOL_MAX_SIZE);
	if (!core_tier_by_name(tr) || (strcmp(tr, "process") && strcmp(tr, "microvm")))
		return isola_err_set(err, EINVAL, "invalid",
				     "tier `%.16s` is unknown (known: process, microvm)", tr);
	memset(&t, 0, sizeof(t));
	if (size) {
		r = images_get(tn, &t, err);
		if (r < 0)
			return isola_err_wrap(err, "pool %s/%s", tn, tr);
		/* Pools are keyed by the template's name as images report it. */
		tn = t.name;
	}
	pthread_mutex_lock(&ps->lock);
	r = pool_set_locked(ps, tn, tr, size, err);
	if (r == 0)
		r = pool_save(c, ps, err);
	pthread_cond_signal(&ps->wake);
	pthread_mutex_unlock(&ps->lock);
	if (r == 0)
		log_info("pool %s/%s: size %u", tn, tr, size);
	template_info_fini(&t);
	return r;
}

int core_pool_set_flag(struct core *c, const char *flag, struct isola_err **err)
{
	char tmpl[64], tier[16], rest[16], *end = NULL;
	unsigned long n;

	/* UNTRUSTED only as operator input: TEMPLATE:TIER:N with bounded fields. */
	if (sscanf(flag, "%63[^:]:%15[^:]:%15s", tmpl, tier, rest) != 3 ||
	    (n = strtoul(rest, &end, 10), *end) || n > POOL_MAX_SIZE)
		return isola_err_set(err, EINVAL, "invalid",
				     "--pool `%.64s`: expected TEMPLATE:TIER:N with N <= %d", flag,
				     POOL_MAX_SIZE);
	return core_pool_set(c, tmpl, tier, (uint32_t)n, err);
}

/* The automatic pool's fields of a GET /v1/pools entry (a fixed pool: auto_max 0 and its
 * size as target). ps->lock held. */
static void pool_auto_list(const struct pool_set *ps, const struct pool *pl, json_t *o)
{
	json_object_set_new(o, "auto_max", json_integer(pl->auto_max));
	json_object_set_new(
		o, "target",
		json_integer(pl->auto_max ? pool_auto_target(ps, pl, util_now_ms()) : pl->size));
	json_object_set_new(o, "deferrals", json_integer((json_int_t)pl->deferrals));
	json_object_set_new(o, "capped", json_boolean(pl->capped));
	json_object_set_new(o, "default", json_boolean(pl->by_default));
	if (pl->auto_max)
		json_object_set_new(o, "memory_cap", json_integer(ps->mem_cap));
}

/* core_pool_auto, or with by_default isolad's default (applied only where the store has
 * no setting for the pair, and not stored). */
static int pool_auto_apply(struct core *c, uint32_t max, bool by_default, struct isola_err **err)
{
	struct pool_set *ps = c->pools;
	struct template_info t;
	struct pool *pl;
	int r;

	if (!ps)
		return isola_err_set(err, ENOSYS, "unavailable", "pools are not running");
	if (max > POOL_MAX_SIZE)
		return isola_err_set(err, EINVAL, "invalid",
				     "automatic pool: auto_max %u exceeds %d sandboxes", max,
				     POOL_MAX_SIZE);
	memset(&t, 0, sizeof(t));
	r = images_get(POOL_AUTO_TEMPLATE, &t, err);
	if (r < 0)
		return isola_err_wrap(err, "automatic pool");
	pthread_mutex_lock(&ps->lock);
	if (by_default && (ps->auto_off || pool_find(ps, t.name, "process"))) {
		pthread_mutex_unlock(&ps->lock);
		log_info("pool %s/process: %s (stored), not the default automatic pool", t.name,
			 ps->auto_off ? "none" : "as configured");
		template_info_fini(&t);
		return 0;
	}
	r = pool_auto_set_locked(ps, t.name, max, err);
	if (r == 0 && by_default && (pl = pool_find(ps, t.name, "process")))
		pl->by_default = true;
	else if (r == 0)
		r = pool_save(c, ps, err);
	pthread_cond_signal(&ps->wake);
	pthread_mutex_unlock(&ps->lock);
	if (r == 0 && max)
		log_info("pool %s/process: automatic%s, at most %u (window %u s, memory budget "
			 "1/%d of MemAvailable at %llu KiB each)",
			 t.name, by_default ? " by default" : "", max, ps->auto_window_s,
			 POOL_AUTO_MEM_SHARE, POOL_AUTO_IDLE_COST >> 10);
	else if (r == 0)
		log_info("pool %s/process: no automatic pool", t.name);
	template_info_fini(&t);
	return r;
}

int core_pool_auto(struct core *c, uint32_t max, struct isola_err **err)
{
	return pool_auto_apply(c, max, false, err);
}

int core_pool_auto_default(struct core *c, uint32_t max, struct isola_err **err)
{
	return pool_auto_apply(c, max, true, err);
}

/* Whether an automatic pool has a fill in flight. ps->lock held. */
static bool pool_auto_filling(const struct pool_set *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->pools[i].auto_max && ps->pools[i].creating)
			return true;
	return false;
}

/* Waits (ps->lock held) until no automatic pool's fill is in flight, at most
 * POOL_BACKOFF_MAX_MS: 1 when one was and ended (the caller retries), else 0. */
static int pool_yield_wait(struct pool_set *ps)
{
	struct timespec ts;

	if (!pool_auto_filling(ps))
		return 0;
	ps->yielding++;
	util_deadline_ts(CLOCK_REALTIME, POOL_BACKOFF_MAX_MS, &ts);
	while (pool_auto_filling(ps) && !ps->stop)
		if (pthread_cond_timedwait(&ps->filled, &ps->lock, &ts) == ETIMEDOUT)
			break;
	ps->yielding--;
	pthread_cond_signal(&ps->wake);
	return !pool_auto_filling(ps);
}

int pool_yield(struct core *c)
{
	struct pool_set *ps = c->pools;
	struct sandbox *found = NULL;

	if (!ps)
		return 0;
	pthread_mutex_lock(&ps->lock);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes && !found; i++) {
		struct sandbox *p = c->sandboxes[i];
		struct pool *pl;

		if (p->life.pooled && !p->life.taken && p->state == SANDBOX_RUNNING &&
		    (pl = pool_find(ps, p->template_name, p->tier->name)) && pl->auto_max) {
			p->life.taken = true;
			found = p;
			sandbox_ref(p);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!found) {
		/* A fill in flight holds room too (admitted, not yet ready): wait for it to end,
		 * holding new fills back, and the caller looks again. */
		int r = pool_yield_wait(ps);

		pthread_mutex_unlock(&ps->lock);
		return r;
	}
	pthread_mutex_unlock(&ps->lock);
	pool_destroy_one(c, found, "a create needs its room");
	return 1;
}

json_t *core_pool_list(struct core *c)
{
	struct pool_set *ps = c->pools;
	json_t *arr = json_array();

	if (!ps)
		return arr;
	pthread_mutex_lock(&ps->lock);
	for (size_t i = 0; i < ps->n; i++) {
		struct pool *pl = &ps->pools[i];
		uint32_t ready = 0;
		json_t *o;

		pthread_mutex_lock(&c->lock);
		for (size_t k = 0; k < c->n_sandboxes; k++)
			if (pool_owns(pl, c->sandboxes[k]) && !c->sandboxes[k]->life.taken &&
			    c->sandboxes[k]->state == SANDBOX_RUNNING)
				ready++;
		pthread_mutex_unlock(&c->lock);
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s?}", "template",
			      pl->template_name, "tier", pl->tier, "size", (json_int_t)pl->size,
			      "ready", (json_int_t)ready, "creating", (json_int_t)pl->creating,
			      "claims", (json_int_t)pl->claims, "misses", (json_int_t)pl->misses,
			      "failures", (json_int_t)pl->failures, "last_error",
			      pl->last_error[0] ? pl->last_error : NULL);
		pool_auto_list(ps, pl, o);
		json_array_append_new(arr, o);
	}
	pthread_mutex_unlock(&ps->lock);
	return arr;
}

/* Same template image, tier and limits: what makes a pooled sandbox serve a request. */
static bool pool_matches(const struct sandbox *p, const struct sandbox *want)
{
	return p->tier == want->tier && !strcmp(p->template_id, want->template_id) &&
	       p->spec.cpu_millis == want->spec.cpu_millis &&
	       p->spec.memory_bytes == want->spec.memory_bytes &&
	       p->spec.disk_bytes == want->spec.disk_bytes && p->spec.pids == want->spec.pids &&
	       p->spec.inodes == want->spec.inodes && p->spec.nofile == want->spec.nofile &&
	       p->spec.caps == want->spec.caps;
}

/* Takes a ready pooled sandbox matching s (reference, marked taken) or NULL. */
static struct sandbox *pool_take(struct core *c, const struct sandbox *s)
{
	struct sandbox *found = NULL;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes && !found; i++) {
		struct sandbox *p = c->sandboxes[i];

		if (p->life.pooled && !p->life.taken && p->state == SANDBOX_RUNNING &&
		    pool_matches(p, s)) {
			p->life.taken = true;
			found = p;
			sandbox_ref(p);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

static void pool_untake(struct core *c, struct sandbox *p)
{
	pthread_mutex_lock(&c->lock);
	p->life.taken = false;
	pthread_mutex_unlock(&c->lock);
	sandbox_unref(p);
}

/* Moves s's tenant and settings into the pooled p, which becomes an ordinary sandbox. */
static int pool_hand_over(struct core *c, struct sandbox *p, struct sandbox *s,
			  struct isola_err **err)
{
	double now = util_wall_time();
	json_t *tmp;
	int r;

	/* Lock order: the core's, then the sandbox's (as the list walkers). */
	pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&p->lock);
	snprintf(p->tenant, sizeof(p->tenant), "%s", s->tenant);
	snprintf(p->name, sizeof(p->name), "%s", s->name); /* checked by the create */
	p->life.pooled = false;
	p->life.taken = false;
	pthread_mutex_unlock(&c->lock);
	tmp = p->env, p->env = s->env, s->env = tmp;
	tmp = p->labels, p->labels = s->labels, s->labels = tmp;
	snprintf(p->workdir, sizeof(p->workdir), "%s", s->workdir);
	snprintf(p->user, sizeof(p->user), "%s", s->user);
	p->life.on_timeout = s->life.on_timeout;
	p->life.ttl_s = s->life.ttl_s;
	p->life.idle_timeout_s = s->life.idle_timeout_s;
	p->life.auto_resume = s->life.auto_resume;
	p->life.from_pool = true;
	p->created_at = now;
	p->last_active = now;
	p->expires_at = p->life.ttl_s ? now + p->life.ttl_s : 0;
	r = core_persist(c, p, err);
	pthread_mutex_unlock(&p->lock);
	return r;
}

/*
 * Counts a claim or a miss for s's pool, notes the create for deferral and the automatic
 * target, and wakes the pool thread to refill. Called once the create is done (claimed, or
 * created cold and running): a burst's first create, noted on arrival, woke the pool thread
 * before the burst's other creates were admitted, and its refill then raced them.
 */
static void pool_claim_note(struct core *c, const struct sandbox *s, bool claimed)
{
	struct pool_set *ps = c->pools;
	uint32_t others = core_creates_in_flight(c); /* s's own is not (or no longer) there */
	struct pool *pl;

	pthread_mutex_lock(&ps->lock);
	if ((pl = pool_find(ps, s->template_name, s->tier->name))) {
		if (claimed)
			pl->claims++;
		else
			pl->misses++;
		if (pl->auto_max)
			pool_auto_note(ps, others);
	}
	pool_note_create(ps);
	pthread_cond_signal(&ps->wake);
	pthread_mutex_unlock(&ps->lock);
}

void pool_note_miss(struct core *c, const struct sandbox *s)
{
	pool_claim_note(c, s, false);
}

int pool_claim(struct core *c, struct sandbox *s, const struct sandbox_request *req,
	       struct sandbox **out, bool *missed, struct isola_err **err)
{
	struct pool_set *ps = c->pools;
	struct core_reservation *res = NULL;
	cleanup_err struct isola_err *e = NULL;
	struct agent_conn *conn;
	struct sandbox *p;
	struct pool *pl;
	int r;

	/* rootfs: no template; netns, binds, tmpfs/masked/read-only paths, a read-only root,
	 * hostname, seccomp: a warm sandbox has its own network, mounts, name and filters
	 * already. */
	if (!ps || req->pooled || req->snapshot || req->rootfs || req->netns || req->n_binds ||
	    req->n_mounts || req->readonly_root || req->hostname || req->seccomp)
		return 0;
	pthread_mutex_lock(&ps->lock);
	pl = pool_find(ps, s->template_name, s->tier->name);
	pthread_mutex_unlock(&ps->lock);
	if (!pl)
		return 0;
	p = pool_take(c, s);
	if (!p) {
		/* Other limits than a fill's: no pooled sandbox could have served it, so it
		 * neither counts nor raises an automatic pool's target. */
		*missed = s->default_limits;
		return 0;
	}
	/* The tenant's rate and quota as for any create; the host's capacity is already held
	 * by the pooled sandbox, so it is not counted twice. */
	s->life.claiming = true;
	r = core_admit(c, s, req->retry_after_s, &res, err);
	s->life.claiming = false;
	if (r < 0) {
		pool_untake(c, p);
		return r;
	}
	/* Its fresh identity came with the fill (core_sandbox_start). */
	if (sandbox_agent(p, &conn, &e) < 0) {
		/* Dead since the pool thread last looked (or lost across a restart). */
		log_warn("pool: sandbox %s: %s", p->id, e ? e->message : "agent unreachable");
		core_release(c, res);
		pool_destroy_one(c, p, "agent unreachable");
		*missed = true;
		return 0;
	}
	r = pool_hand_over(c, p, s, err);
	core_release(c, res);
	if (r < 0) {
		pool_destroy_one(c, p, "store failed");
		return r;
	}
	pool_claim_note(c, s, true);
	log_info("sandbox %s claimed from pool %s/%s by tenant %s", p->id, s->template_name,
		 s->tier->name, p->tenant);
	core_changed(c); /* now the tenant's: created, as its list sees it */
	*out = p;
	return 1;
}

/* The automatic pool's window from ISOLA_POOL_AUTO_WINDOW_S (seconds, 1..3600; tests
 * shorten it), else POOL_AUTO_WINDOW_S. */
static uint32_t pool_auto_window(void)
{
	const char *v = getenv(POOL_AUTO_ENV);
	char *end = NULL;
	unsigned long n;

	if (!v || !*v)
		return POOL_AUTO_WINDOW_S;
	n = strtoul(v, &end, 10);
	if (*end || n < 1 || n > POOL_AUTO_SLOTS) {
		log_warn("%s=`%.32s`: expected seconds in 1..%d, using %d", POOL_AUTO_ENV, v,
			 POOL_AUTO_SLOTS, POOL_AUTO_WINDOW_S);
		return POOL_AUTO_WINDOW_S;
	}
	return (uint32_t)n;
}

int pool_start(struct core *c, struct isola_err **err)
{
	struct pool_set *ps = calloc(1, sizeof(*ps));
	char *text = NULL;
	json_t *j;
	int r;

	if (!ps)
		return isola_err_set(err, ENOMEM, NULL, "pools: out of memory");
	pthread_mutex_init(&ps->lock, NULL);
	pthread_cond_init(&ps->wake, NULL);
	pthread_cond_init(&ps->filled, NULL);
	ps->auto_window_s = pool_auto_window();
	ps->mem_cap = pool_mem_cap();
	if (store_meta_get(c->store, POOL_META_KEY, &text, NULL) == 0 && text &&
	    (j = json_loads(text, 0, NULL))) {
		const char *key;
		json_t *v;

		json_object_foreach(j, key, v)
		{
			char tmpl[64], tier[16];
			const char *slash = strchr(key, '/');
			/* {"auto_max": N}: the automatic pool; an integer: a fixed size */
			json_int_t am = json_integer_value(json_object_get(v, "auto_max"));

			if (!slash || (size_t)(slash - key) >= sizeof(tmpl) ||
			    (!json_is_integer(v) && !json_is_object(v)))
				continue;
			snprintf(tmpl, sizeof(tmpl), "%.*s", (int)(slash - key), key);
			snprintf(tier, sizeof(tier), "%s", slash + 1);
			if (!strcmp(tier, "process") && am > 0 && am <= POOL_MAX_SIZE)
				pool_auto_set_locked(ps, tmpl, (uint32_t)am, NULL);
			else if (!strcmp(tier, "process") && json_is_object(v) && am == 0)
				pool_auto_set_locked(ps, tmpl, 0, NULL); /* turned off */
			else if (json_integer_value(v) > 0 &&
				 json_integer_value(v) <= POOL_MAX_SIZE)
				pool_set_locked(ps, tmpl, tier, (uint32_t)json_integer_value(v),
						NULL);
		}
		json_decref(j);
	}
	free(text);
	c->pools = ps;
	r = pthread_create(&ps->thread, NULL, pool_main, c);
	if (r) {
		c->pools = NULL;
		pthread_cond_destroy(&ps->filled);
		pthread_cond_destroy(&ps->wake);
		pthread_mutex_destroy(&ps->lock);
		free(ps);
		return isola_err_sys(err, r, NULL, "start pool thread");
	}
	ps->running = true;
	return 0;
}

void pool_stop(struct core *c)
{
	struct pool_set *ps = c->pools;

	if (!ps)
		return;
	pthread_mutex_lock(&ps->lock);
	ps->stop = true;
	pthread_cond_signal(&ps->wake);
	pthread_mutex_unlock(&ps->lock);
	if (ps->running)
		pthread_join(ps->thread, NULL);
	/* The automatic pool's idle sandboxes go with isolad (no fill is in flight now): a
	 * restart starts its rate from nothing and would destroy them as surplus anyway, and a
	 * stopped isolad (an uninstall, an operator's stop) then leaves only sandboxes someone
	 * created. A fixed pool's stay, re-attached at the next start. */
	while (pool_yield(c) > 0)
		;
	c->pools = NULL;
	pthread_cond_destroy(&ps->wake);
	pthread_cond_destroy(&ps->filled);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}
