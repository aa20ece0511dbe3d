/* SPDX-License-Identifier: Apache-2.0 */
/* bench_egress: the egress proxy's throughput against a direct download (`isola bench --egress`). */
#ifndef ISOLA_CLI_BENCH_EGRESS_H
#define ISOLA_CLI_BENCH_EGRESS_H

#include <stddef.h>

#include "cli.h"

/* What `--egress URL [--egress-resolve IP]` names. */
struct bench_egress_target {
	const char *url;     /* "http://NAME[:PORT]/PATH" as given (borrowed from argv) */
	char name[254];	     /* NAME: the host the sandbox's policy allows */
	unsigned port;	     /* PORT, 80 when absent */
	const char *resolve; /* --egress-resolve's address for the host's curl only, or NULL */
};

/*
 * Checks url (plain http with a host name, an optional port 1-65535 and an optional path)
 * and resolve (NULL, or an IPv4 or IPv6 address) and fills t. Returns 0, or -EINVAL with a
 * message naming the flag and the reason in why (at most why_len bytes, NUL-terminated).
 */
int bench_egress_parse(const char *url, const char *resolve, struct bench_egress_target *t,
		       char *why, size_t why_len);

/*
 * Creates one sandbox (isolad's default template and tier) whose network policy allows
 * t->name, then runs `rounds` interleaved rounds: `curl` on this host downloads t->url
 * directly, then the same `curl` command in the sandbox downloads it through isolad's egress
 * proxy (the exec API). Every download must succeed and all must count the same number of
 * bytes, more than 0, else the failure names the side. isolad's CPU time over the proxied
 * downloads is read from /proc when isolad is reached over its unix socket on this host.
 * SIGINT, SIGTERM and SIGHUP stop the rounds. The sandbox is destroyed at the end, on failure
 * or interruption too. Sets *report (keys in docs/benchmarks.md; caller frees). Returns 0 or
 * -errno with *err. Call from the CLI's main thread (it installs signal handlers).
 */
int bench_egress(struct cli *cli, struct client *cl, const struct bench_egress_target *t,
		 int rounds, json_t **report, struct isola_err **err);

/* Prints an egress report for a reader. */
void bench_egress_print(const json_t *report);

#endif
