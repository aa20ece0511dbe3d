/* SPDX-License-Identifier: Apache-2.0 */
/* rlimits: the names of the resource limits a process start may lower (RLIMIT_NOFILE...). */
#include "rlimits.h"

#include <errno.h>
#include <stddef.h>
#include <strings.h>
#include <sys/resource.h>

/* Indexed by RLIMIT_* number: the spec's names. */
static const char *const names[] = {
	[RLIMIT_CPU] = "RLIMIT_CPU",	       [RLIMIT_FSIZE] = "RLIMIT_FSIZE",
	[RLIMIT_DATA] = "RLIMIT_DATA",	       [RLIMIT_STACK] = "RLIMIT_STACK",
	[RLIMIT_CORE] = "RLIMIT_CORE",	       [RLIMIT_RSS] = "RLIMIT_RSS",
	[RLIMIT_NPROC] = "RLIMIT_NPROC",       [RLIMIT_NOFILE] = "RLIMIT_NOFILE",
	[RLIMIT_MEMLOCK] = "RLIMIT_MEMLOCK",   [RLIMIT_AS] = "RLIMIT_AS",
	[RLIMIT_LOCKS] = "RLIMIT_LOCKS",       [RLIMIT_SIGPENDING] = "RLIMIT_SIGPENDING",
	[RLIMIT_MSGQUEUE] = "RLIMIT_MSGQUEUE", [RLIMIT_NICE] = "RLIMIT_NICE",
	[RLIMIT_RTPRIO] = "RLIMIT_RTPRIO",     [RLIMIT_RTTIME] = "RLIMIT_RTTIME",
};

int rlimits_parse(const char *name)
{
	if (!name)
		return -ENOENT;
	if (!strncasecmp(name, "RLIMIT_", 7))
		name += 7;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i] && !strcasecmp(name, names[i] + 7))
			return (int)i;
	return -ENOENT;
}

const char *rlimits_name(int resource)
{
	if (resource < 0 || (size_t)resource >= sizeof(names) / sizeof(names[0]) ||
	    !names[resource])
		return "RLIMIT_?";
	return names[resource];
}
