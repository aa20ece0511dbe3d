/* SPDX-License-Identifier: Apache-2.0 */
/* changes: the core's change bus — a sequence number bumped at every sandbox change, and a wait for it. */
#ifndef ISOLA_CHANGES_H
#define ISOLA_CHANGES_H

#include <pthread.h>
#include <stdint.h>

/*
 * One broadcast for any number of waiters: notify() bumps `seq` and wakes everyone; a waiter
 * remembers the last seq it acted on and waits until seq differs. Notifications coalesce (a
 * waiter that was busy sees one bump for several changes and rescans once), so the bus holds
 * no queue and allocates nothing, whatever the number of waiters or events. The mutex is a
 * leaf: nothing else is locked while it is held, so notify() may be called under any lock.
 */
struct change_bus {
	pthread_mutex_t lock; /* protects seq */
	pthread_cond_t cond;  /* broadcast at each notify (CLOCK_MONOTONIC) */
	uint64_t seq;	      /* changes so far */
};

void change_bus_init(struct change_bus *b);
void change_bus_fini(struct change_bus *b);
/* Records one change and wakes every waiter. */
void change_bus_notify(struct change_bus *b);
/* The current sequence number (what a new waiter starts from). */
uint64_t change_bus_seq(struct change_bus *b);
/*
 * Waits up to timeout_ms for the sequence number to differ from *seen. Returns 1 and stores
 * the new number in *seen when it did (at once if it already differs), 0 on timeout.
 */
int change_bus_wait(struct change_bus *b, uint64_t *seen, unsigned timeout_ms);

#endif
