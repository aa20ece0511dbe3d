/* SPDX-License-Identifier: Apache-2.0 */
/* progress: the CLI's progress lines on a terminal (import, pull, the microvm image build). */
#ifndef ISOLA_CLI_PROGRESS_H
#define ISOLA_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#define PROGRESS_MAX_BARS 24 /* lines kept on screen (a pull: manifest, config, layers, import) */

/* One progress line: a phase ("unpack", "download sha256:…", "layer 2/5", "microvm image"). */
struct progress_bar {
	char phase[48];	  /* its name */
	char step[24];	  /* what it does now, shown after the name ("" = none) */
	uint64_t done;	  /* bytes (or items) so far */
	uint64_t total;	  /* in all, 0 = unknown */
	uint64_t started; /* ms when first seen, for the rate and ETA */
};

/* Lines drawn on stderr; zero-initialise, set `tty` when stderr is a terminal. */
struct progress {
	bool tty;				  /* draw at all */
	unsigned drawn;				  /* lines on screen (the cursor is below them) */
	uint64_t last_draw;			  /* ms of the last redraw, to limit flicker */
	struct progress_bar v[PROGRESS_MAX_BARS]; /* one line per phase, in the order first seen */
	unsigned n;				  /* used entries of v */
};

/*
 * Sets phase's line (a new one the first time a phase is seen) to done/total with `step`
 * (NULL = keep) and redraws every line on stderr (name, bar, percent, bytes, rate and ETA) if
 * 100 ms passed since the last redraw, or `force`. Nothing when !p->tty.
 */
void progress_update(struct progress *p, const char *phase, const char *step, uint64_t done,
		     uint64_t total, bool force);

/* Leaves the lines on screen; later output goes below them. */
void progress_end(struct progress *p);

#endif
