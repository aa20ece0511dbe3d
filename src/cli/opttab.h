/* SPDX-License-Identifier: Apache-2.0 */
/* opttab: the CLI's option tables — one row per option, read by the parser, --help, man and completion. */
#ifndef ISOLA_CLI_OPTTAB_H
#define ISOLA_CLI_OPTTAB_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

/*
 * One option of one command. A table is an array ending with a row whose name is NULL. The
 * same row builds getopt_long's tables (cli_opt_next), the `--help` text, the man page and the
 * shell completion, so the documentation cannot drift from what the parser accepts.
 */
struct cli_opt {
	const char *name; /* long name without the dashes ("env") */
	int key;	  /* short option letter ('e'), or an id >= 256 for long-only options */
	const char *arg;  /* placeholder of the value ("KEY=VALUE"), or NULL for a flag */
	const char *help; /* one line for --help and the man page */
	unsigned only;	  /* 0: always; else the row exists only when this bit is in the mask */
};

/* The key of a long-only option whose code wants a letter (tenant create --max-cpu: 'c'). */
#define CLI_LONG(c) (256 + (c))

/* Keys of the global options, accepted by every command anywhere before `--`. */
enum cli_global_key {
	CLI_G_JSON = 1000,
	CLI_G_SOCKET,
	CLI_G_URL,
	CLI_G_TOKEN,
	CLI_G_QUIET,
};

/* The global options as a table (for help, man and completion); includes -h/--help. */
extern const struct cli_opt cli_global_opts[];

/* What the global options set; a NULL string was not given. */
struct cli_globals {
	bool json;	    /* --json */
	bool quiet;	    /* -q/--quiet */
	const char *socket; /* --socket PATH (borrowed from argv) */
	const char *url;    /* --url URL */
	const char *token;  /* --token TOKEN */
};

/*
 * Parser state for one command line. Fill opts/mask/free_tail/g, zero the rest, then call
 * cli_opt_next() until it returns -1.
 */
struct cli_optstate {
	const struct cli_opt *opts; /* the command's table, or NULL (only globals and --help) */
	unsigned mask;		    /* selects rows whose `only` is set */
	int free_tail;		    /* 0: options anywhere up to `--`; N > 0: the Nth operand
				       starts a tail that is never parsed (run: 1, exec: 2) */
	struct cli_globals *g;	    /* receives global options; NULL: globals are unknown */
	/* private */
	struct option lopts[64];
	char sopts[128];
	int nops;   /* operands met so far (kept at argv[base..base+nops)) */
	int base;   /* where the first operand was met */
	bool ready; /* tables built, getopt reset */
};

/*
 * Returns the next option's key ('h' for -h/--help; '?' unknown, ':' missing value, like
 * getopt_long with "+:"), with optarg set; global options are stored in st->g and skipped.
 * At the end returns -1 with argv permuted so that argv[optind..] are the operands in order
 * followed by any tail. Operands may come before, between and after options; `--` ends the
 * options. Uses the libc getopt state (optind, optarg), so one parser runs at a time.
 */
int cli_opt_next(struct cli_optstate *st, int argc, char **argv);

/* Prints the option rows of `opts` selected by mask as aligned `  -e, --env KEY=VALUE  help`
 * lines to f (nothing for NULL). */
void cli_opt_print(FILE *f, const struct cli_opt *opts, unsigned mask);

/* Whether row o is selected by mask. */
bool cli_opt_selected(const struct cli_opt *o, unsigned mask);

#endif
