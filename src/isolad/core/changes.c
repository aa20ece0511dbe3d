/* SPDX-License-Identifier: Apache-2.0 */
/* changes: the core's change bus (changes.h); GET /v1/events waits on it. */
#include "changes.h"

#include <time.h>

#include "core-internal.h"
#include "../../common/util.h"

void change_bus_init(struct change_bus *b)
{
	pthread_condattr_t a;

	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &a);
	pthread_condattr_destroy(&a);
	b->seq = 0;
}

void change_bus_fini(struct change_bus *b)
{
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
}

void change_bus_notify(struct change_bus *b)
{
	pthread_mutex_lock(&b->lock);
	b->seq++;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

uint64_t change_bus_seq(struct change_bus *b)
{
	uint64_t s;

	pthread_mutex_lock(&b->lock);
	s = b->seq;
	pthread_mutex_unlock(&b->lock);
	return s;
}

int change_bus_wait(struct change_bus *b, uint64_t *seen, unsigned timeout_ms)
{
	struct timespec ts;
	int changed;

	util_deadline_ts(CLOCK_MONOTONIC, timeout_ms, &ts);
	pthread_mutex_lock(&b->lock);
	while (b->seq == *seen && pthread_cond_timedwait(&b->cond, &b->lock, &ts) == 0)
		;
	changed = b->seq != *seen;
	*seen = b->seq;
	pthread_mutex_unlock(&b->lock);
	return changed;
}

/* The core's bus (core.h, core-internal.h). */

void core_changed(struct core *c)
{
	change_bus_notify(&c->changes);
}

uint64_t core_changes_seq(struct core *c)
{
	return change_bus_seq(&c->changes);
}

int core_changes_wait(struct core *c, uint64_t *seen, unsigned timeout_ms)
{
	return change_bus_wait(&c->changes, seen, timeout_ms);
}
