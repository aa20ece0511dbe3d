/* SPDX-License-Identifier: Apache-2.0 */
/* ahead: keeps N things made ahead of their use (ahead.h). */
#include "ahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"

struct ahead {
	char what[48];	      /* for the log: "network slot", "writable layer" */
	unsigned n;	      /* how many to keep ready */
	ahead_make_fn make;   /* makes one */
	ahead_drop_fn drop;   /* frees one never taken */
	void *ud;	      /* for make and drop */
	pthread_mutex_t lock; /* protects ready, n_ready, stop */
	pthread_cond_t cond;  /* signals the filler: one taken, or stop */
	void **ready;	      /* n entries; the first n_ready are ready (LIFO) */
	unsigned n_ready;     /* entries of ready in use */
	bool stop;	      /* ahead_stop: the filler ends */
	pthread_t filler;     /* the filler thread */
};

static void *filler_main(void *arg)
{
	struct ahead *a = arg;
	struct isola_err *last = NULL;

	util_thread_name(a->what);
	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct isola_err *e = NULL;
		struct timespec ts;
		void *thing = NULL;
		int r;

		while (!a->stop && a->n_ready >= a->n)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->stop)
			break;
		pthread_mutex_unlock(&a->lock);
		r = a->make(a->ud, &thing, &e);
		pthread_mutex_lock(&a->lock);
		if (r == 0) {
			a->ready[a->n_ready++] = thing;
			continue;
		}
		/* Logged once per distinct failure, not once a second. */
		if (!last || !e || strcmp(last->message, e->message) != 0)
			log_warn("cannot make a %s ahead: %s", a->what,
				 e ? e->message : strerror(-r));
		isola_err_free(last);
		last = e;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (!a->stop)
			pthread_cond_timedwait(&a->cond, &a->lock, &ts);
	}
	pthread_mutex_unlock(&a->lock);
	isola_err_free(last);
	return NULL;
}

struct ahead *ahead_start(const char *what, unsigned n, ahead_make_fn make, ahead_drop_fn drop,
			  void *ud)
{
	struct ahead *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	snprintf(a->what, sizeof(a->what), "%s", what);
	a->n = n;
	a->make = make;
	a->drop = drop;
	a->ud = ud;
	a->ready = calloc(n ? n : 1, sizeof(*a->ready));
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	if (a->ready && (n == 0 || pthread_create(&a->filler, NULL, filler_main, a) == 0)) {
		if (n == 0)
			a->stop = true; /* no filler to join */
		return a;
	}
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->ready);
	free(a);
	return NULL;
}

void *ahead_take(struct ahead *a)
{
	void *thing = NULL;

	if (!a)
		return NULL;
	pthread_mutex_lock(&a->lock);
	if (a->n_ready) {
		thing = a->ready[--a->n_ready];
		pthread_cond_signal(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return thing;
}

unsigned ahead_ready(struct ahead *a)
{
	unsigned v;

	if (!a)
		return 0;
	pthread_mutex_lock(&a->lock);
	v = a->n_ready;
	pthread_mutex_unlock(&a->lock);
	return v;
}

void ahead_stop(struct ahead *a)
{
	bool had_filler;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	had_filler = !a->stop;
	a->stop = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	if (had_filler)
		pthread_join(a->filler, NULL);
	/* Ready things serve no one: dropped now, not left to the next start. */
	while (a->n_ready)
		a->drop(a->ud, a->ready[--a->n_ready]);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->ready);
	free(a);
}
