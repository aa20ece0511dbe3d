/* SPDX-License-Identifier: Apache-2.0 */
/* monitor: one thread that notices dead sandboxes and expired TTLs and samples metrics. */
#include "core-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"

#define MONITOR_TICK_MS 250

/* Snapshot of the list with a reference on each element; caller unrefs and frees. */
static struct sandbox **monitor_snapshot(struct core *c, size_t *n)
{
	struct sandbox **snap;

	pthread_mutex_lock(&c->lock);
	*n = c->n_sandboxes;
	snap = calloc(*n ? *n : 1, sizeof(*snap));
	if (snap) {
		for (size_t i = 0; i < *n; i++) {
			snap[i] = c->sandboxes[i];
			sandbox_ref(snap[i]);
		}
	} else {
		*n = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return snap;
}

/*
 * The reason given when a sandbox's init died and its cgroup had counted OOM kills: the
 * kernel does not say which process a kill took, so the text says what is known ("sandbox
 * init exited unexpectedly after 2 OOM kills (memory limit 256M)") and the tombstone's
 * end_reason is `oom`; NULL without OOM kills. Caller holds s->lock; the cgroup is still
 * there (the tier destroys it later).
 */
static char *oom_reason(struct sandbox *s)
{
	struct tier_stats st = {0};
	char lim[32], *why = NULL;

	if (!s->tier->stats || s->tier->stats(s->ts, &st, NULL) < 0 || st.oom_kills == 0)
		return NULL;
	if (s->spec.memory_bytes)
		util_fmt_size(s->spec.memory_bytes, lim, sizeof(lim));
	else
		snprintf(lim, sizeof(lim), "none");
	snprintf(s->end_reason, sizeof(s->end_reason), "oom");
	snprintf(s->end_detail, sizeof(s->end_detail), "limit %s", lim);
	if (asprintf(&why,
		     "sandbox init exited unexpectedly after %llu OOM kill%s (memory limit %s)",
		     (unsigned long long)st.oom_kills, st.oom_kills == 1 ? "" : "s", lim) < 0)
		why = NULL;
	return why;
}

/* Checks one sandbox: init exited? TTL passed? */
static void monitor_check(struct core *c, struct sandbox *s, double now)
{
	bool dead = false, expired = false;
	char *why = NULL; /* the tier's reason (microvm: panic + console lines), owned */

	pthread_mutex_lock(&s->lock);
	if (s->state == SANDBOX_RUNNING && s->ts) {
		struct pollfd p = {.fd = s->tier->exit_fd(s->ts), .events = POLLIN};

		dead = p.fd >= 0 && poll(&p, 1, 0) > 0;
		expired = s->expires_at > 0 && now >= s->expires_at;
		if (dead && s->tier->last_error && s->tier->last_error(s->ts))
			why = strdup(s->tier->last_error(s->ts));
		else if (dead)
			why = oom_reason(s);
	}
	pthread_mutex_unlock(&s->lock);
	if (dead) {
		core_sandbox_fail(c, s, why ? why : "sandbox init exited unexpectedly");
		free(why);
		audit_append(c->audit, "isolad", s->tenant, "sandbox.fail", s->id,
			     "sandbox init exited unexpectedly", NULL);
	} else if (expired) {
		lifecycle_expire(c, s); /* on_timeout: kill, pause or hibernate (lifecycle.c) */
	} else {
		lifecycle_tick(c, s, now); /* idle detection */
		history_tick(s, now);	   /* the metrics history (history.c) */
	}
}

static void *monitor_main(void *arg)
{
	struct core *c = arg;
	double trimmed = util_wall_time();

	util_thread_name("monitor");
	for (;;) {
		struct pollfd p = {.fd = c->stop_fd, .events = POLLIN};
		struct sandbox **snap;
		size_t n;
		double now;

		if (poll(&p, 1, MONITOR_TICK_MS) > 0)
			break;
		now = util_wall_time();
		snap = monitor_snapshot(c, &n);
		for (size_t i = 0; i < n; i++) {
			monitor_check(c, snap[i], now);
			sandbox_unref(snap[i]);
		}
		free(snap);
		if (now - trimmed >= 60) { /* tombstones past their TTL (tombstone.c) */
			core_tombstone_trim(c);
			trimmed = now;
		}
	}
	return NULL;
}

int core_monitor_start(struct core *c, struct isola_err **err)
{
	int r;

	c->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (c->stop_fd < 0)
		return isola_err_sys(err, errno, NULL, "monitor eventfd");
	r = pthread_create(&c->monitor, NULL, monitor_main, c);
	if (r)
		return isola_err_sys(err, r, NULL, "start monitor thread");
	c->monitor_running = 1;
	return 0;
}

void core_monitor_stop(struct core *c)
{
	uint64_t one = 1;

	if (c->monitor_running) {
		if (write(c->stop_fd, &one, sizeof(one)) < 0)
			log_warn("monitor: wake failed");
		pthread_join(c->monitor, NULL);
		c->monitor_running = 0;
	}
	if (c->stop_fd >= 0)
		close(c->stop_fd);
	c->stop_fd = -1;
}
