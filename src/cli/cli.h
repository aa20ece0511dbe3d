/* SPDX-License-Identifier: Apache-2.0 */
/* cli: what the isola command files share — global options, the command table, exit codes. */
#ifndef ISOLA_CLI_H
#define ISOLA_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "../common/err.h"
#include "client.h"

/* Exit statuses (docs/cli.md). run and exec otherwise exit with the command's own status. */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	/* the daemon or the host refused */
	CLI_EXIT_USAGE = 2,	/* bad command line */
	CLI_EXIT_TIMEOUT = 124, /* run/exec: the command hit --timeout */
	CLI_EXIT_ISOLA = 125,	/* run/exec: isola failed, not the command */
};

struct cli_cmd;

/* State of one CLI invocation; main() owns it. */
struct cli {
	struct client_conf conf;   /* where isolad is */
	bool json;		   /* --json: machine output on stdout */
	struct client *client;	   /* created by cli_client(), freed by main() */
	const struct cli_cmd *cmd; /* the command being run, for usage messages */
	const char *group;	   /* "fs", "template", or NULL for top-level commands */
};

/* A command: one row of a table (kvmtool's cmd_struct). */
struct cli_cmd {
	const char *name; /* "exec" */
	int (*fn)(struct cli *cli, int argc,
		  char **argv); /* argv[0] is name; returns exit status */
	const char *usage;	/* arguments after the name */
	const char *summary;	/* one line for `isola help` */
};

/* The client for cli->conf, created on first use. Prints the error and returns NULL on failure. */
struct client *cli_client(struct cli *cli);

/* Runs argv[0] from table (n rows); unknown or missing names are usage errors. Sets cli->cmd. */
int cli_dispatch(struct cli *cli, const struct cli_cmd *table, size_t n, int argc, char **argv);

/* Runs `isola <group> SUBCOMMAND ...` (argv[0] is the group) from table (n rows); -h/--help
 * right after the group prints the table's usage to stdout. Sets cli->group. */
int cli_dispatch_group(struct cli *cli, const char *group, const struct cli_cmd *table, size_t n,
		       int argc, char **argv);

/* Prints the usage of a command table under `isola <group>` to f. */
void cli_print_table_usage(FILE *f, const char *group, const struct cli_cmd *table, size_t n);

/* Prints "isola: <message>" and the current command's usage to stderr; returns 2. */
int cli_usage_err(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints the current command's usage and summary to stdout; returns 0 (for -h/--help). */
int cli_help(struct cli *cli);

/* Prints "isola: <err->message>" to stderr and returns status (2 for `usage` errors). */
int cli_fail(struct isola_err *err, int status);

/*
 * The standard getopt loop prologue for commands: resets getopt and returns the next option
 * like getopt_long(argc, argv, "+:" shortopts, longopts). Commands stop at the first operand.
 * A NULL longopts still knows --help (returned as 'h').
 */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* Handles a getopt result no command option matched: -h/--help prints help (returns 0),
 * anything else is a usage error (returns 2). */
int cli_bad_opt(struct cli *cli, int argc, char **argv, int c);

/* A read command: one GET, then the reply as --json or a human view (show.c). */
struct cli_show {
	const char *path; /* request path; with `id`, a cli_pathf() format whose %s is the ID */
	bool id;	  /* one operand, a sandbox ID; else no operand */
	const char *list; /* member of the reply holding the list (a reply that is an array is
			     the list itself); NULL: the whole reply */
	bool json_list;	  /* --json prints the list (the whole reply when it is no array) */
	void (*print)(const json_t *v); /* the human view of the list, or of the whole reply */
};

/*
 * Runs a read command: -h/--help, the operands s asks for (a usage error otherwise: "missing
 * sandbox ID", "too many arguments", "unexpected argument `X`"), GET s->path, then --json
 * output or s->print. Returns the exit status; a failed request prints its error (1).
 */
int cli_show(struct cli *cli, int argc, char **argv, const struct cli_show *s);

/* Command groups, one file each. */
int cmd_run(struct cli *cli, int argc, char **argv);
int cmd_create(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_inspect(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
int cmd_expose(struct cli *cli, int argc, char **argv);	   /* cmd_expose.c */
int cmd_ports(struct cli *cli, int argc, char **argv);	   /* cmd_expose.c */
int cmd_unexpose(struct cli *cli, int argc, char **argv);  /* cmd_expose.c */
int cmd_network(struct cli *cli, int argc, char **argv);   /* cmd_network.c */
int cmd_pool(struct cli *cli, int argc, char **argv);	   /* cmd_pool.c */
int cmd_pause(struct cli *cli, int argc, char **argv);	   /* cmd_persist.c */
int cmd_resume(struct cli *cli, int argc, char **argv);	   /* cmd_persist.c */
int cmd_hibernate(struct cli *cli, int argc, char **argv); /* cmd_persist.c */
int cmd_fork(struct cli *cli, int argc, char **argv);	   /* cmd_persist.c */
int cmd_snapshot(struct cli *cli, int argc, char **argv);  /* cmd_persist.c */
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_ps(struct cli *cli, int argc, char **argv);
int cmd_logs(struct cli *cli, int argc, char **argv);
int cmd_kill(struct cli *cli, int argc, char **argv);
int cmd_cp(struct cli *cli, int argc, char **argv);
int cmd_fs(struct cli *cli, int argc, char **argv);
int cmd_template(struct cli *cli, int argc, char **argv);
int cmd_doctor(struct cli *cli, int argc, char **argv);
int cmd_console(struct cli *cli, int argc, char **argv);

/* client_data_fn that copies a reply body to stdout (ud unused). */
int cli_stdout_write(void *ud, const void *buf, size_t len, struct isola_err **err);
int cmd_bench(struct cli *cli, int argc, char **argv);
int cmd_token(struct cli *cli, int argc, char **argv);
int cmd_tenant(struct cli *cli, int argc, char **argv);
int cmd_audit(struct cli *cli, int argc, char **argv);
int cmd_compliance(struct cli *cli, int argc, char **argv);
int cmd_mcp(struct cli *cli, int argc, char **argv);

/* Output of a running command as the exec event stream delivers it (cmd_exec.c). */
struct cli_stream {
	bool json;	     /* pass events through as NDJSON instead of writing the output */
	json_t *exit;	     /* the exit event once seen (owned) */
	char *error;	     /* message of an error event (owned) */
	bool started;	     /* a start event was seen */
	long pid;	     /* from the start event, or 0 */
	struct client *c;    /* asks the memory limit for an OOM report (borrowed), or NULL */
	const char *sandbox; /* the sandbox's id (borrowed), or NULL */
};

/* Human output for an exit event whose oom_killed is true: "killed: out of memory (limit
 * 256M)" on stderr, the limit read from the sandbox (GET /v1/sandboxes/{id}) when c and id
 * are given and the read works. Prints nothing for any other exit. */
void cli_report_oom(struct client *c, const char *id, const json_t *exit);

/* client_event_fn for exec/run/logs streams; ud is a struct cli_stream. Writes stdout/stderr
 * data to fds 1/2 as it arrives. */
int cli_stream_event(void *ud, json_t *ev, struct isola_err **err);

/* Exit status after a stream ended (the exit event's status; 125 on error or no exit). Prints
 * the error event's message. Frees the stream's owned fields. */
int cli_stream_finish(struct cli_stream *s);

/* Builds an exec body {cmd:[argv...], env, cwd, user, timeout} (new ref; NULL: ENOMEM). */
json_t *cli_exec_body(char **argv, int argc, const json_t *env, const char *cwd, const char *user,
		      long timeout_s);

#endif
