/* SPDX-License-Identifier: Apache-2.0 */
/* test_changes: the core's change bus (src/isolad/core/changes.c): wait, coalescing, wake-up (TAP). */
#include <pthread.h>
#include <stdint.h>

#include "isolad/core/changes.h"
#include "../tap.h"

#define WAITERS 4

struct waiter {
	struct change_bus *bus;
	uint64_t seen;
	int woke;
};

/* Waits "forever" (an hour) from the sequence number it was given. */
static void *wait_thread(void *p)
{
	struct waiter *w = p;

	w->woke = change_bus_wait(w->bus, &w->seen, 3600 * 1000);
	return NULL;
}

int main(void)
{
	struct change_bus b;
	struct waiter w[WAITERS];
	pthread_t th[WAITERS];
	uint64_t seen;

	change_bus_init(&b);
	seen = change_bus_seq(&b);
	ok(seen == 0, "a new bus starts at 0");
	ok(change_bus_wait(&b, &seen, 0) == 0 && seen == 0, "nothing changed: the wait times out");
	change_bus_notify(&b);
	ok(change_bus_wait(&b, &seen, 0) == 1 && seen == 1,
	   "a change before the wait is seen at once, and *seen moves on");
	ok(change_bus_wait(&b, &seen, 0) == 0, "the same change is not seen twice");
	change_bus_notify(&b);
	change_bus_notify(&b);
	change_bus_notify(&b);
	ok(change_bus_wait(&b, &seen, 0) == 1 && seen == 4, "changes coalesce into one wake-up");
	ok(change_bus_wait(&b, &seen, 0) == 0, "...and leave nothing queued");

	/* Every waiter wakes on one notify (a broadcast): the test would hang otherwise. */
	for (int i = 0; i < WAITERS; i++) {
		w[i] = (struct waiter){.bus = &b, .seen = seen};
		pthread_create(&th[i], NULL, wait_thread, &w[i]);
	}
	change_bus_notify(&b);
	for (int i = 0; i < WAITERS; i++)
		pthread_join(th[i], NULL);
	int all = 1;
	for (int i = 0; i < WAITERS; i++)
		all &= w[i].woke == 1 && w[i].seen == 5;
	ok(all, "one notify wakes all %d waiters", WAITERS);
	change_bus_fini(&b);
	return tap_done();
}
