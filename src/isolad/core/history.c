/* SPDX-License-Identifier: Apache-2.0 */
/* history: each sandbox's last hour of resource samples, a fixed ring fed by the monitor. */
#include "core-internal.h"

#include <stdlib.h>
#include <string.h>

#include "../net/net.h"

/*
 * One ring per sandbox, allocated at its first sample and freed with it: SANDBOX_HISTORY_LEN
 * samples of 48 bytes (720 x 48 = 33.75 KiB plus a header), whatever the sandbox does, so the
 * memory isolad spends on history is bounded by the number of live sandboxes. The monitor
 * thread adds a sample every SANDBOX_HISTORY_PERIOD_S while the sandbox runs (a paused or
 * hibernated sandbox has no counters to read and leaves a gap); readers copy under the
 * sandbox's lock. The history lives in memory only: an isolad restart starts it afresh.
 */
struct sandbox_history {
	struct sandbox_sample ring[SANDBOX_HISTORY_LEN]; /* oldest at `head` once full */
	unsigned head;					 /* next slot to write */
	unsigned n;					 /* samples held, <= SANDBOX_HISTORY_LEN */
};

void history_tick(struct sandbox *s, double now)
{
	struct tier_stats st;
	struct sandbox_history *h;
	uint64_t tx = 0, rx = 0;
	bool due;

	pthread_mutex_lock(&s->lock);
	due = s->state == SANDBOX_RUNNING && s->ts &&
	      now - s->hist_last >= SANDBOX_HISTORY_PERIOD_S;
	if (due)
		s->hist_last = now; /* one attempt per period, even if it fails */
	pthread_mutex_unlock(&s->lock);
	if (!due || sandbox_stats(s, &st, NULL) < 0)
		return;
	/* The veth's counters (none without networking: they stay 0). */
	net_sandbox_bytes(sandbox_id(s), &tx, &rx);
	pthread_mutex_lock(&s->lock);
	if (!s->hist)
		s->hist = calloc(1, sizeof(*s->hist));
	h = s->hist;
	if (h) {
		h->ring[h->head] = (struct sandbox_sample){.at = now,
							   .cpu_usec = st.cpu_usec,
							   .memory_bytes = st.memory_bytes,
							   .disk_bytes = st.disk_bytes,
							   .net_tx_bytes = tx,
							   .net_rx_bytes = rx};
		h->head = (h->head + 1) % SANDBOX_HISTORY_LEN;
		if (h->n < SANDBOX_HISTORY_LEN)
			h->n++;
	}
	pthread_mutex_unlock(&s->lock);
}

size_t sandbox_history(struct sandbox *s, double start, double end, struct sandbox_sample *out,
		       size_t cap, bool *with_prev)
{
	const struct sandbox_history *h;
	size_t k = 0;

	*with_prev = false;
	pthread_mutex_lock(&s->lock);
	h = s->hist;
	for (unsigned i = 0; h && i < h->n && k < cap; i++) {
		const struct sandbox_sample *x =
			&h->ring[(h->head + SANDBOX_HISTORY_LEN - h->n + i) % SANDBOX_HISTORY_LEN];

		if (x->at < start) {
			/* the newest sample before the range: the base of the first CPU delta */
			out[0] = *x;
			k = 1;
			*with_prev = true;
			continue;
		}
		if (x->at > end)
			break;
		out[k++] = *x;
	}
	pthread_mutex_unlock(&s->lock);
	return k;
}

void history_free(struct sandbox *s)
{
	free(s->hist);
	s->hist = NULL;
}
