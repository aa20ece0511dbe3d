/* SPDX-License-Identifier: Apache-2.0 */
/* main: the isola CLI entry point — global flags, the command table, dispatch, error output. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

#define DEFAULT_SOCKET "/run/isola/isolad.sock"

static int cmd_version(struct cli *cli, int argc, char **argv);
static int cmd_help(struct cli *cli, int argc, char **argv);

#define RUN_MASK    (1u << CLI_SB_RUN)
#define CREATE_MASK (1u << CLI_SB_CREATE)

/* The invocation, for error output (JSON or text) from helpers that have no cli at hand. */
static const struct cli *current;

/* --json appears on the line (before any `--`): errors met before the parser reaches it, such
 * as an unknown option in front of it, are JSON too. */
static bool json_errors;

const struct cli_cmd cli_commands[] = {
	{"run", cmd_run, "[OPTIONS] [--] CMD [ARG...]",
	 "create a sandbox, run a command in it, destroy it", .opts = cli_sandbox_opts,
	 .optmask = RUN_MASK, .free_tail = 1,
	 .example = "isola run --memory 512M -e A=1 -- python3 -c 'print(1)'"},
	{"create", cmd_create, "[OPTIONS]",
	 "create a sandbox and print its id (it lives until rm, --ttl or prune)",
	 .opts = cli_sandbox_opts, .optmask = CREATE_MASK,
	 .example = "isola create --name web --ttl 3600 --label team=a"},
	{"ls", cmd_ls, "[OPTIONS]", "list sandboxes", .opts = cli_ls_opts,
	 .example = "isola ls -a --filter label=team=a"},
	{"inspect", cmd_inspect, "ID", "show a sandbox", .example = "isola inspect web"},
	{"rm", cmd_rm, "[-f] ID...", "destroy sandboxes (running ones too)", .opts = cli_rm_opts,
	 .example = "isola rm -f web"},
	{"prune", cmd_prune, "[OPTIONS]", "remove records of ended and errored sandboxes",
	 .opts = cli_prune_opts, .example = "isola prune --older-than 3600"},
	{"wait", cmd_wait, "ID...", "wait until sandboxes end; print how they ended",
	 .example = "isola wait web"},
	{"exec", cmd_exec, "[OPTIONS] ID [--] CMD [ARG...]", "run a command in a sandbox",
	 .opts = cli_exec_opts, .free_tail = 2, .example = "isola exec web -w /tmp -- ls -l"},
	{"code", cmd_code, "[OPTIONS] ID FILE|-",
	 "run code in a sandbox's code interpreter (stateful contexts, rich results)",
	 .opts = cli_code_opts, .example = "isola code web --out plots analysis.py"},
	{"ps", cmd_ps, "ID", "list processes in a sandbox", .example = "isola ps web"},
	{"top", cmd_top, "ID", "show the processes running in a sandbox",
	 .example = "isola top web"},
	{"stats", cmd_stats, "[OPTIONS] [ID...]",
	 "live CPU, memory, disk and network use per sandbox", .opts = cli_stats_opts,
	 .example = "isola stats --no-stream"},
	{"logs", cmd_logs, "[-f] ID PID", "print a process's output", .opts = cli_logs_opts,
	 .example = "isola logs -f web 42"},
	{"kill", cmd_kill, "ID PID [SIGNAL]", "signal a process (default TERM)",
	 .example = "isola kill web 42 KILL"},
	{"cp", cmd_cp, "SRC DST", "copy files between a sandbox (ID:PATH) and the host",
	 .example = "isola cp ./src web:/work"},
	{"fs", NULL, "SUBCOMMAND ...", "file operations in a sandbox", .group = &cli_fs_group,
	 .example = "isola fs ls -l web /work"},
	{"template", NULL, "SUBCOMMAND ...", "manage templates", .group = &cli_template_group,
	 .example = "isola template ls"},
	{"doctor", cmd_doctor, "", "check what this host supports", .example = "isola doctor"},
	{"console", cmd_console, "ID", "print a microvm sandbox's serial console (last 256 KiB)",
	 .example = "isola console web"},
	{"expose", cmd_expose, "[--public] ID PORT", "expose a sandbox port; print URL and token",
	 .opts = cli_expose_opts, .example = "isola expose web 8000"},
	{"ports", cmd_ports, "ID", "list a sandbox's exposed ports and their counters",
	 .example = "isola ports web"},
	{"unexpose", cmd_unexpose, "ID PORT", "stop exposing a port",
	 .example = "isola unexpose web 8000"},
	{"network", NULL, "SUBCOMMAND ...", "show or replace a sandbox's egress policy",
	 .group = &cli_network_group, .example = "isola network set web --allow pypi.org"},
	{"pool", NULL, "SUBCOMMAND ...", "warm pools of ready sandboxes (operator)",
	 .group = &cli_pool_group, .example = "isola pool set debian process 4"},
	{"pause", cmd_pause, "ID...", "stop every process of sandboxes, keeping their memory",
	 .example = "isola pause web"},
	{"resume", cmd_resume, "ID...", "resume paused or hibernated sandboxes",
	 .example = "isola resume web"},
	{"hibernate", cmd_hibernate, "ID...", "save sandboxes to disk and release their resources",
	 .example = "isola hibernate web"},
	{"fork", cmd_fork, "[--count N] ID", "make N new sandboxes from a sandbox's current state",
	 .opts = cli_fork_opts, .example = "isola fork --count 3 web"},
	{"snapshot", NULL, "SUBCOMMAND ...", "named snapshots of sandboxes",
	 .group = &cli_snapshot_group, .example = "isola snapshot create web base"},
	{"bench", cmd_bench, "[OPTIONS]",
	 "time the create-write-exec-destroy loop beside bwrap and runc", .opts = cli_bench_opts,
	 .example = "isola bench -n 30 -c 50"},
	{"mcp", cmd_mcp, "[--allow-host-path DIR]... [--keep]",
	 "serve sandbox tools over the Model Context Protocol (stdio)", .opts = cli_mcp_opts,
	 .example = "isola mcp --allow-host-path ~/project"},
	{"token", NULL, "SUBCOMMAND ...", "manage API tokens (admin)", .group = &cli_token_group,
	 .example = "isola token create --tenant acme --role user"},
	{"tenant", NULL, "SUBCOMMAND ...", "manage tenants and quotas (operator)",
	 .group = &cli_tenant_group, .example = "isola tenant create --max-sandboxes 10 acme"},
	{"audit", NULL, "SUBCOMMAND ...", "check and export the audit trail (operator)",
	 .group = &cli_audit_group, .example = "isola audit export --since 2h"},
	{"compliance", NULL, "SUBCOMMAND ...", "print the compliance posture (operator)",
	 .group = &cli_compliance_group, .example = "isola compliance report"},
	{"completion", cmd_completion, "bash|zsh|fish", "print a shell completion script",
	 .example = "source <(isola completion bash)"},
	{"version", cmd_version, "", "print the CLI version", .example = "isola version --json"},
	{"help", cmd_help, "[COMMAND [SUBCOMMAND]]", "show help", .example = "isola help exec"},
};
const size_t cli_ncommands = ARRAY_SIZE(cli_commands);

/* Not listed: what the completion scripts call for names from the daemon. */
static const struct cli_cmd hidden_complete = {"__complete", cmd_complete_hidden,
					       "sandboxes|templates|snapshots", "", .opts = NULL};

/* Prints one error line: JSON {"code","message"} with --json, else "isola: message". */
static void print_error(const char *code, const char *fmt, va_list ap)
{
	char *msg = NULL;

	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	if (json_errors || (current && current->json)) {
		json_t *e = json_pack("{s:s,s:s}", "code", code ? code : "internal", "message",
				      msg ? msg : "out of memory");

		out_json_line(stderr, e);
		json_decref(e);
	} else {
		bool c = out_color(stderr);

		fprintf(stderr, "%sisola:%s %s\n", c ? "\033[1;31m" : "", c ? "\033[0m" : "",
			msg ? msg : "out of memory");
	}
	free(msg);
}

void cli_errorf(const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_error(code, fmt, ap);
	va_end(ap);
}

static void print_cmd_usage(FILE *f, struct cli *cli)
{
	if (!cli->cmd)
		return;
	fprintf(f, "usage: isola %s%s%s %s\n", cli->group ? cli->group : "", cli->group ? " " : "",
		cli->cmd->name, cli->cmd->usage);
}

int cli_usage_err(struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_error(CLI_ERR_USAGE, fmt, ap);
	va_end(ap);
	if (!cli->json && !json_errors) {
		print_cmd_usage(stderr, cli);
		if (cli->cmd)
			fprintf(stderr, "Run `isola help %s%s%s` for its options.\n",
				cli->group ? cli->group : "", cli->group ? " " : "",
				cli->cmd->name);
	}
	return CLI_EXIT_USAGE;
}

int cli_help(struct cli *cli)
{
	if (cli->cmd)
		cli_print_cmd_help(stdout, cli->group, cli->cmd);
	return CLI_EXIT_OK;
}

int cli_fail(struct isola_err *err, int status)
{
	cli_errorf(err ? err->code : NULL, "%s",
		   err && err->message ? err->message : "unknown error");
	if (err && !strcmp(err->code, CLI_ERR_USAGE))
		return CLI_EXIT_USAGE;
	return status;
}

void cli_apply_globals(struct cli *cli)
{
	cli->json = cli->g.json;
	cli->quiet = cli->g.quiet;
	if (cli->g.socket) {
		cli->conf.socket = cli->g.socket;
		cli->conf.url = NULL; /* an explicit socket wins over ISOLA_URL */
	}
	if (cli->g.url)
		cli->conf.url = cli->g.url;
	if (cli->g.token)
		cli->conf.token = cli->g.token;
}

int cli_nextopt(struct cli *cli, int argc, char **argv)
{
	int c;

	if (!cli->ost.ready)
		cli->ost = (struct cli_optstate){
			.opts = cli->cmd ? cli->cmd->opts : NULL,
			.mask = cli->cmd ? cli->cmd->optmask : 0,
			.free_tail = cli->cmd ? cli->cmd->free_tail : 0,
			.g = &cli->g,
		};
	c = cli_opt_next(&cli->ost, argc, argv);
	cli_apply_globals(cli);
	return c;
}

int cli_bad_opt(struct cli *cli, int argc, char **argv, int c)
{
	cleanup_err struct isola_err *err = NULL;

	(void)argc;
	if (c == 'h')
		return cli_help(cli);
	cli_opt_error(argv, c, &err);
	return cli_usage_err(cli, "%s", err->message);
}

struct client *cli_client(struct cli *cli)
{
	cleanup_err struct isola_err *err = NULL;

	if (cli->conf.url && strncmp(cli->conf.url, "http://", 7) &&
	    strncmp(cli->conf.url, "https://", 8)) {
		cli_errorf(CLI_ERR_USAGE, "--url `%s`: expected http://HOST:PORT", cli->conf.url);
		return NULL;
	}
	if (!cli->client && client_new(&cli->conf, &cli->client, &err) < 0) {
		cli_fail(err, CLI_EXIT_FAIL);
		return NULL;
	}
	return cli->client;
}

static void print_group_usage(FILE *f, const char *group, const struct cli_cmd *t, size_t n)
{
	fprintf(f, "usage: isola %s SUBCOMMAND [OPTIONS] ...\n\nSubcommands:\n", group);
	cli_print_table_usage(f, group, t, n);
	fprintf(f, "\nRun `isola help %s SUBCOMMAND` for a subcommand's options.\n", group);
}

int cli_dispatch(struct cli *cli, const struct cli_cmd *table, size_t n, int argc, char **argv)
{
	if (argc < 1) {
		cli_errorf(CLI_ERR_USAGE, "missing command");
		if (cli->json || json_errors)
			return CLI_EXIT_USAGE;
		if (cli->group)
			print_group_usage(stderr, cli->group, table, n);
		else
			cli_print_main_help(stderr);
		return CLI_EXIT_USAGE;
	}
	for (size_t i = 0; i < n + (cli->group ? 0 : 1); i++) {
		const struct cli_cmd *cmd = i < n ? &table[i] : &hidden_complete;

		if (strcmp(argv[0], cmd->name))
			continue;
		if (cmd->group)
			return cli_dispatch_group(cli, cmd->group->name, cmd->group->cmds,
						  cmd->group->n, argc, argv);
		cli->cmd = cmd;
		cli->ost.ready = false;
		/* Options are parsed anywhere up to `--` here, so -h anywhere asks for help; the
		 * commands with a free tail (run, exec) leave theirs to their own parser. */
		for (int a = 1; !cmd->free_tail && a < argc && strcmp(argv[a], "--"); a++)
			if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help"))
				return cli_help(cli);
		return cmd->fn(cli, argc, argv);
	}
	cli_errorf(CLI_ERR_USAGE, "unknown command `%s%s%s`", cli->group ? cli->group : "",
		   cli->group ? " " : "", argv[0]);
	if (cli->json || json_errors)
		return CLI_EXIT_USAGE;
	if (cli->group)
		print_group_usage(stderr, cli->group, table, n);
	else
		fputs("Run `isola help` for the list of commands.\n", stderr);
	return CLI_EXIT_USAGE;
}

int cli_dispatch_group(struct cli *cli, const char *group, const struct cli_cmd *table, size_t n,
		       int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		print_group_usage(stdout, group, table, n);
		return CLI_EXIT_OK;
	}
	cli->group = group;
	return cli_dispatch(cli, table, n, argc - 1, argv + 1);
}

static int cmd_version(struct cli *cli, int argc, char **argv)
{
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	if (cli->json) {
		json_t *v = json_pack("{s:s}", "version", ISOLA_VERSION);

		out_json(stdout, v);
		json_decref(v);
	} else {
		printf("isola %s\n", ISOLA_VERSION);
	}
	return CLI_EXIT_OK;
}

/* The row of `name` in the command table, or NULL. */
static const struct cli_cmd *find_cmd(const struct cli_cmd *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return &t[i];
	return NULL;
}

static int cmd_help(struct cli *cli, int argc, char **argv)
{
	const struct cli_cmd *cmd, *sub;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind >= argc) {
		cli_print_main_help(stdout);
		return CLI_EXIT_OK;
	}
	cmd = find_cmd(cli_commands, cli_ncommands, argv[optind]);
	if (!cmd)
		return cli_usage_err(cli, "unknown command `%s`", argv[optind]);
	if (!cmd->group) {
		cli_print_cmd_help(stdout, NULL, cmd);
		return CLI_EXIT_OK;
	}
	if (optind + 1 >= argc) {
		print_group_usage(stdout, cmd->name, cmd->group->cmds, cmd->group->n);
		return CLI_EXIT_OK;
	}
	sub = find_cmd(cmd->group->cmds, cmd->group->n, argv[optind + 1]);
	if (!sub)
		return cli_usage_err(cli, "unknown command `%s %s`", cmd->name, argv[optind + 1]);
	cli_print_cmd_help(stdout, cmd->name, sub);
	return CLI_EXIT_OK;
}

enum { OPT_VERSION = 256, OPT_MAN };

/* Options of `isola` itself, before the command (the globals are added by the parser). */
static const struct cli_opt main_opts[] = {
	{"version", OPT_VERSION, NULL, "print the CLI version", 0},
	{"man", OPT_MAN, NULL, "print the man page of isola or of the COMMAND that follows (roff)",
	 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_cmd main_cmd = {
	"isola", NULL, "[OPTIONS] COMMAND ...", "", .opts = main_opts, .free_tail = 1};

int main(int argc, char **argv)
{
	struct cli cli = {0};
	const char *env;
	bool man = false;
	int c, r;

	/* A closed pipe or socket is an error to report, never a silent kill. */
	signal(SIGPIPE, SIG_IGN);
	current = &cli;
	cli.conf.socket = (env = getenv("ISOLA_SOCKET")) && *env ? env : DEFAULT_SOCKET;
	cli.conf.url = (env = getenv("ISOLA_URL")) && *env ? env : NULL;
	cli.conf.token = (env = getenv("ISOLA_TOKEN")) && *env ? env : NULL;
	cli.cmd = &main_cmd;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		json_errors |= !strcmp(argv[i], "--json");
	while ((c = cli_nextopt(&cli, argc, argv)) != -1) {
		switch (c) {
		case OPT_VERSION:
			printf(cli.json ? "{\n  \"version\": \"%s\"\n}\n" : "isola %s\n",
			       ISOLA_VERSION);
			return CLI_EXIT_OK;
		case OPT_MAN:
			man = true;
			break;
		case 'h':
			cli_print_main_help(stdout);
			return CLI_EXIT_OK;
		default: {
			cleanup_err struct isola_err *err = NULL;

			cli_opt_error(argv, c, &err);
			cli_errorf(CLI_ERR_USAGE, "%s", err->message);
			if (!json_errors)
				cli_print_main_help(stderr);
			return CLI_EXIT_USAGE;
		}
		}
	}
	cli.cmd = NULL;
	if (man) {
		char name[128];

		snprintf(name, sizeof(name), "%s%s%s", optind < argc ? argv[optind] : "",
			 optind + 1 < argc ? " " : "", optind + 1 < argc ? argv[optind + 1] : "");
		return cli_print_man(stdout, name);
	}
	r = cli_dispatch(&cli, cli_commands, cli_ncommands, argc - optind, argv + optind);
	client_free(cli.client);
	fflush(stdout);
	return r;
}
