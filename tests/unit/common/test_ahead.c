/* SPDX-License-Identifier: Apache-2.0 */
/* test_ahead: common/ahead.c keeps N things ready, makes one behind each take, retries after a failure, drops the rest at stop. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/ahead.h"
#include "../tap.h"

struct counts {
	atomic_int made;    /* things made */
	atomic_int dropped; /* things dropped by ahead_stop */
	atomic_int fail;    /* makes still to fail */
	atomic_int failed;  /* makes that failed */
};

static int make(void *ud, void **out, struct isola_err **err)
{
	struct counts *c = ud;
	int *t;

	if (atomic_load(&c->fail) > 0) {
		atomic_fetch_sub(&c->fail, 1);
		atomic_fetch_add(&c->failed, 1);
		return isola_err_set(err, EIO, "internal", "thing: refused");
	}
	t = malloc(sizeof(*t));
	if (!t)
		return isola_err_set(err, ENOMEM, "internal", "thing: out of memory");
	*t = atomic_fetch_add(&c->made, 1);
	*out = t;
	return 0;
}

static void drop(void *ud, void *thing)
{
	struct counts *c = ud;

	atomic_fetch_add(&c->dropped, 1);
	free(thing);
}

/* Waits up to 10 s for ahead_ready(a) == n. */
static bool ready_is(struct ahead *a, unsigned n)
{
	struct timespec ts = {0, 10 * 1000000};

	for (int i = 0; i < 1000; i++) {
		if (ahead_ready(a) == n)
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

int main(void)
{
	struct counts c = {0}, z = {0}, f = {0};
	struct ahead *a;
	int *t1, *t2;

	a = ahead_start("thing", 3, make, drop, &c);
	ok(a && ready_is(a, 3) && atomic_load(&c.made) == 3, "the filler makes 3 ready");
	t1 = ahead_take(a);
	t2 = ahead_take(a);
	ok(t1 && t2 && t1 != t2 && *t1 != *t2, "two takes get two different things");
	ok(ready_is(a, 3) && atomic_load(&c.made) == 5, "one made behind each take, no more");
	ahead_stop(a);
	ok(atomic_load(&c.dropped) == 3, "stop drops the 3 never taken (dropped %d)",
	   atomic_load(&c.dropped));
	free(t1);
	free(t2);

	a = ahead_start("thing", 0, make, drop, &z);
	ok(a && ahead_take(a) == NULL && ahead_ready(a) == 0 && atomic_load(&z.made) == 0,
	   "n = 0: nothing made, every take finds none");
	ahead_stop(a);
	ok(ahead_take(NULL) == NULL && ahead_ready(NULL) == 0, "a NULL pool: none");
	ahead_stop(NULL);

	atomic_store(&f.fail, 1);
	a = ahead_start("thing", 1, make, drop, &f);
	ok(a && ready_is(a, 1) && atomic_load(&f.failed) == 1 && atomic_load(&f.made) == 1,
	   "after a failure the filler tries again and fills");
	ahead_stop(a);
	ok(atomic_load(&f.dropped) == 1, "and stop drops it");
	return tap_done();
}
