/* SPDX-License-Identifier: Apache-2.0 */
/* bench_density: the idle cost of a sandbox on this host (`isola bench --density N`). */
#ifndef ISOLA_CLI_BENCH_DENSITY_H
#define ISOLA_CLI_BENCH_DENSITY_H

#include "cli.h"

/*
 * Creates n idle sandboxes (of tier, NULL: isolad's default) through cl, measures what they
 * cost the host (their processes' PSS, their cgroups' kernel memory, isolad's growth, the
 * host's used memory) and how fast `isola ls` answers with them alive, destroys every one it
 * made (also on failure), and sets *report (documented in docs/benchmarks.md). Needs isolad's
 * unix socket and its operator. Returns 0 or -errno with *err.
 */
int bench_density(struct cli *cli, struct client *cl, int n, const char *tier, json_t **report,
		  struct isola_err **err);

/* Prints a density report for a reader. */
void bench_density_print(const json_t *report);

#endif
