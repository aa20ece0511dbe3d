/* SPDX-License-Identifier: Apache-2.0 */
/* rlimits: the names of the resource limits a process start may lower (RLIMIT_NOFILE...). */
#ifndef ISOLA_RLIMITS_H
#define ISOLA_RLIMITS_H

#include <stdint.h>

#define RLIMITS_MAX 16 /* distinct resources a request may name (Linux has 16) */

/* A process start's `rlimits` entry (docs/process-tier.md, "Process limits"): a resource lowered
 * (never raised past what the sandbox's processes hold, the agent checks) for one process. */
struct rlimits_entry {
	int resource;  /* RLIMIT_* number */
	uint64_t soft; /* soft limit, <= hard */
	uint64_t hard; /* hard limit */
};

/* Parses a limit's name: `RLIMIT_NOFILE` as the OCI spec spells it, or `nofile`, in any case.
 * Returns the RLIMIT_* number, or -ENOENT for a name Linux does not have. */
int rlimits_parse(const char *name);

/* The spec's name of resource (`RLIMIT_NOFILE`), or "RLIMIT_?" for an unknown number. */
const char *rlimits_name(int resource);

#endif
