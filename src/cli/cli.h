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
#include "opttab.h"

/* Exit statuses (docs/cli.md). run and exec otherwise exit with the command's own status. */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	 /* the daemon or the host refused */
	CLI_EXIT_USAGE = 2,	 /* bad command line */
	CLI_EXIT_TIMEOUT = 124,	 /* run/exec: the command hit --timeout */
	CLI_EXIT_ISOLA = 125,	 /* run/exec: isola failed, not the command */
	CLI_EXIT_NOEXEC = 126,	 /* run/exec: the command could not be started */
	CLI_EXIT_NOTFOUND = 127, /* run/exec: the command was not found */
	CLI_EXIT_KILLED = 137,	 /* run/exec: SIGKILL, e.g. out of memory (128 + 9) */
};

struct cli_cmd;

/* State of one CLI invocation; main() owns it. */
struct cli {
	struct client_conf conf;   /* where isolad is */
	bool json;		   /* --json: machine output on stdout, errors as JSON on stderr */
	bool quiet;		   /* -q: less output (ls: ids only) */
	struct cli_globals g;	   /* global options as parsed anywhere on the line */
	struct cli_optstate ost;   /* cli_nextopt()'s parser for the current command */
	struct client *client;	   /* created by cli_client(), freed by main() */
	const struct cli_cmd *cmd; /* the command being run, for usage messages */
	const char *group;	   /* "fs", "template", or NULL for top-level commands */
};

/* A command: one row of a table (kvmtool's cmd_struct). */
struct cli_cmd {
	const char *name; /* "exec" */
	int (*fn)(struct cli *cli, int argc,
		  char **argv);	       /* argv[0] is name; returns exit status */
	const char *usage;	       /* arguments after the name */
	const char *summary;	       /* one line for `isola help` */
	const struct cli_opt *opts;    /* its options (parser, --help, man, completion), or NULL */
	unsigned optmask;	       /* selects rows of opts tagged `only` */
	int free_tail;		       /* see struct cli_optstate: 1 run, 2 exec, 0 elsewhere */
	const char *example;	       /* one example line for --help and man, or NULL */
	const struct cli_group *group; /* a group's subcommands (fs, template, ...), or NULL */
};

/* A command group: `isola NAME SUBCOMMAND ...`. */
struct cli_group {
	const char *name;	    /* "fs" */
	const struct cli_cmd *cmds; /* its subcommands */
	size_t n;		    /* rows in cmds */
};

/* The command table (main.c) and the groups, exported for help, man and completion. */
extern const struct cli_cmd cli_commands[];
extern const size_t cli_ncommands;
extern const struct cli_group cli_fs_group, cli_template_group, cli_network_group, cli_pool_group,
	cli_snapshot_group, cli_token_group, cli_tenant_group, cli_audit_group,
	cli_compliance_group;

/* Applies the global options parsed so far (cli->g) to cli->json, cli->quiet and cli->conf. */
void cli_apply_globals(struct cli *cli);

/* `isola help [COMMAND [SUB]]`, --help and `isola --man [COMMAND]` (help.c). */
void cli_print_cmd_help(FILE *f, const char *group, const struct cli_cmd *cmd);
void cli_print_main_help(FILE *f);
int cli_print_man(FILE *f, const char *name);
int cmd_completion(struct cli *cli, int argc, char **argv);
int cmd_complete_hidden(struct cli *cli, int argc, char **argv);

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

/* Prints "isola: <err->message>" to stderr (with --json: {"code","message"}) and returns
 * status (2 for `usage` errors). */
int cli_fail(struct isola_err *err, int status);

/* Prints an error message as cli_fail() does, with an explicit code. */
void cli_errorf(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The option loop of every command: returns the next option of cli->cmd's table (cli_opt_next:
 * 'h' for --help, '?'/':' for mistakes), handling global options itself; -1 at the end with
 * argv[optind..] the operands. Options may follow operands up to `--` (or the command's
 * free tail: run's CMD, exec's CMD).
 */
int cli_nextopt(struct cli *cli, int argc, char **argv);

/* Option tables of the commands (next to their parsers). */
extern const struct cli_opt cli_ls_opts[], cli_rm_opts[], cli_prune_opts[], cli_exec_opts[],
	cli_stats_opts[], cli_logs_opts[], cli_expose_opts[], cli_fork_opts[], cli_bench_opts[],
	cli_mcp_opts[];
extern const struct cli_opt cli_code_opts[];

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
	/* adds what the reply lacks before it is printed (ps: oom_killed), or NULL */
	void (*complete)(struct client *c, const char *id, json_t *list);
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
int cmd_code(struct cli *cli, int argc, char **argv);	   /* cmd_code.c */
int cmd_expose(struct cli *cli, int argc, char **argv);	   /* cmd_expose.c */
int cmd_ports(struct cli *cli, int argc, char **argv);	   /* cmd_expose.c */
int cmd_unexpose(struct cli *cli, int argc, char **argv);  /* cmd_expose.c */
int cmd_pause(struct cli *cli, int argc, char **argv);	   /* cmd_persist.c */
int cmd_resume(struct cli *cli, int argc, char **argv);	   /* cmd_persist.c */
int cmd_hibernate(struct cli *cli, int argc, char **argv); /* cmd_persist.c */
int cmd_fork(struct cli *cli, int argc, char **argv);	   /* cmd_persist.c */
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_ps(struct cli *cli, int argc, char **argv);
int cmd_logs(struct cli *cli, int argc, char **argv);
int cmd_kill(struct cli *cli, int argc, char **argv);
int cmd_cp(struct cli *cli, int argc, char **argv);
int cmd_doctor(struct cli *cli, int argc, char **argv);
int cmd_console(struct cli *cli, int argc, char **argv);
int cmd_prune(struct cli *cli, int argc, char **argv); /* cmd_sandbox.c */
int cmd_wait(struct cli *cli, int argc, char **argv);  /* cmd_sandbox.c */
int cmd_stats(struct cli *cli, int argc, char **argv); /* cmd_stats.c */
int cmd_top(struct cli *cli, int argc, char **argv);   /* cmd_proc.c */

/* client_data_fn that copies a reply body to stdout (ud unused). */
int cli_stdout_write(void *ud, const void *buf, size_t len, struct isola_err **err);
int cmd_bench(struct cli *cli, int argc, char **argv);
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
	long timeout_s;	     /* the command's --timeout, for "timed out after 2s" (0: unknown) */
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

/* Runs body in sandbox id as a process attached to this terminal (exec -i/-t; run -it);
 * returns its exit status. */
int cli_exec_attached(struct cli *cli, struct client *c, const char *id, json_t *body,
		      bool interactive, bool tty);

/* Builds an exec body {cmd:[argv...], env, cwd, user, timeout} (new ref; NULL: ENOMEM). */
json_t *cli_exec_body(char **argv, int argc, const json_t *env, const char *cwd, const char *user,
		      long timeout_s);

#endif
