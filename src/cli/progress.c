/* SPDX-License-Identifier: Apache-2.0 */
/* progress: the CLI's progress lines on a terminal (import, pull, the microvm image build). */
#include "progress.h"

#include <stdio.h>
#include <string.h>

#include "../common/util.h"
#include "output.h"

void progress_update(struct progress *p, const char *phase, const char *step, uint64_t done,
		     uint64_t total, bool force)
{
	uint64_t now = util_now_ms();
	struct progress_bar *b = NULL;

	if (!p->tty)
		return;
	for (unsigned i = 0; i < p->n && !b; i++)
		if (!strcmp(p->v[i].phase, phase))
			b = &p->v[i];
	if (!b) {
		if (p->n == PROGRESS_MAX_BARS) { /* the oldest line scrolls off */
			memmove(p->v, p->v + 1, (PROGRESS_MAX_BARS - 1) * sizeof(p->v[0]));
			p->n--;
		}
		b = &p->v[p->n++];
		memset(b, 0, sizeof(*b));
		snprintf(b->phase, sizeof(b->phase), "%s", phase);
		b->started = now;
		force = true;
	}
	if (step && strcmp(step, b->step)) {
		snprintf(b->step, sizeof(b->step), "%s", step);
		b->started = now; /* a new step: its own rate */
		force = true;
	}
	b->done = done;
	b->total = total;
	if (!force && now - p->last_draw < 100)
		return;
	p->last_draw = now;
	if (p->drawn)
		fprintf(stderr, "\033[%uA", p->drawn);
	for (unsigned i = 0; i < p->n; i++) {
		const struct progress_bar *l = &p->v[i];
		char a[32], t[32], rate[32], eta[32] = "", name[80];
		uint64_t ms = now - l->started;
		uint64_t bps = ms ? l->done * 1000 / ms : 0;
		int pct = l->total ? (int)(l->done * 100 / l->total) : 0;
		char line[31];

		snprintf(name, sizeof(name), "%s%s%s", l->phase, l->step[0] ? ": " : "", l->step);
		out_fmt_size(l->done, a, sizeof(a));
		out_fmt_size(l->total, t, sizeof(t));
		out_fmt_size(bps, rate, sizeof(rate));
		if (bps && l->total > l->done)
			snprintf(eta, sizeof(eta), " ETA %llus",
				 (unsigned long long)((l->total - l->done) / bps));
		for (int k = 0; k < 30; k++)
			line[k] = l->total && k < pct * 30 / 100 ? '#' : '-';
		line[30] = '\0';
		if (l->total)
			fprintf(stderr, "\r\033[K%-28s [%s] %3d%% %s/%s %s/s%s\n", name, line, pct,
				a, t, rate, eta);
		else
			fprintf(stderr, "\r\033[K%-28s %s\n", name, a);
	}
	p->drawn = p->n;
}

void progress_end(struct progress *p)
{
	p->drawn = 0; /* every line already ends with its newline */
}
