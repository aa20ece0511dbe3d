/* SPDX-License-Identifier: Apache-2.0 */
/* main: the isola CLI entry point — global flags, the command table, dispatch. */
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

static const struct cli_cmd commands[] = {
	{"run", cmd_run, "[OPTIONS] [--] CMD [ARG...]",
	 "create a sandbox, run a command in it, destroy it"},
	{"create", cmd_create, "[OPTIONS]", "create a sandbox and print its id"},
	{"ls", cmd_ls, "[--label K=V]...", "list sandboxes"},
	{"inspect", cmd_inspect, "ID", "show a sandbox"},
	{"rm", cmd_rm, "ID...", "destroy sandboxes"},
	{"exec", cmd_exec, "[-i] [-t] [-d] [OPTIONS] ID [--] CMD [ARG...]",
	 "run a command in a sandbox"},
	{"ps", cmd_ps, "ID", "list processes in a sandbox"},
	{"logs", cmd_logs, "[-f] ID PID", "print a process's output"},
	{"kill", cmd_kill, "ID PID [SIGNAL]", "signal a process (default TERM)"},
	{"cp", cmd_cp, "SRC DST", "copy files between a sandbox (ID:PATH) and the host"},
	{"fs", cmd_fs, "ls|stat|cat|write|mkdir|rm|mv ...", "file operations in a sandbox"},
	{"template", cmd_template, "import|ls|rm ...", "manage templates"},
	{"doctor", cmd_doctor, "", "check what this host supports"},
	{"console", cmd_console, "ID", "print a microvm sandbox's serial console (last 256 KiB)"},
	{"expose", cmd_expose, "ID PORT [--public]", "expose a sandbox port; print URL and token"},
	{"ports", cmd_ports, "ID", "list a sandbox's exposed ports and their counters"},
	{"unexpose", cmd_unexpose, "ID PORT", "stop exposing a port"},
	{"network", cmd_network, "get|set ID ...", "show or replace a sandbox's egress policy"},
	{"pool", cmd_pool, "ls|set ...", "warm pools of ready sandboxes (operator)"},
	{"pause", cmd_pause, "ID...", "stop every process of sandboxes, keeping their memory"},
	{"resume", cmd_resume, "ID...", "resume paused or hibernated sandboxes"},
	{"hibernate", cmd_hibernate, "ID...", "save sandboxes to disk and release their resources"},
	{"fork", cmd_fork, "ID [--count N]", "make N new sandboxes from a sandbox's current state"},
	{"snapshot", cmd_snapshot, "create|ls|delete ...", "named snapshots of sandboxes"},
	{"bench", cmd_bench, "[-n N] [-c K] [--no-peers]",
	 "time the create-write-exec-destroy loop beside bwrap and runc"},
	{"mcp", cmd_mcp, "[--allow-host-path DIR]... [--keep]", "serve sandbox tools over the Model Context Protocol (stdio)"},
	{"token", cmd_token, "create|ls|revoke ...", "manage API tokens (admin)"},
	{"tenant", cmd_tenant, "create|ls|rm ...", "manage tenants and quotas (operator)"},
	{"audit", cmd_audit, "verify|export ...", "check and export the audit trail (operator)"},
	{"compliance", cmd_compliance, "report", "print the compliance posture (operator)"},
	{"version", cmd_version, "", "print the CLI version"},
	{"help", cmd_help, "[COMMAND]", "show help"},
};

static void usage(FILE *f)
{
	fputs("usage: isola [--socket PATH | --url URL [--token TOKEN]] [--json] COMMAND ...\n\n"
	      "Global options (before the command):\n"
	      "  --socket PATH   isolad unix socket (env ISOLA_SOCKET, default " DEFAULT_SOCKET
	      ")\n"
	      "  --url URL       isolad over TCP, http://HOST:PORT (env ISOLA_URL)\n"
	      "  --token TOKEN   bearer token for --url (env ISOLA_TOKEN)\n"
	      "  --json          machine-readable output\n\n"
	      "Commands:\n",
	      f);
	cli_print_table_usage(f, NULL, commands, ARRAY_SIZE(commands));
}

void cli_print_table_usage(FILE *f, const char *group, const struct cli_cmd *table, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char head[160];

		snprintf(head, sizeof(head), "%s%s%s %s", group ? group : "", group ? " " : "",
			 table[i].name, table[i].usage);
		fprintf(f, "  %-52s %s\n", head, table[i].summary);
	}
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

	fputs("isola: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	print_cmd_usage(stderr, cli);
	return CLI_EXIT_USAGE;
}

int cli_help(struct cli *cli)
{
	print_cmd_usage(stdout, cli);
	if (cli->cmd)
		printf("\n%s; see docs/cli.md.\n", cli->cmd->summary);
	return CLI_EXIT_OK;
}

int cli_fail(struct isola_err *err, int status)
{
	fprintf(stderr, "isola: %s\n", err && err->message ? err->message : "unknown error");
	if (err && !strcmp(err->code, CLI_ERR_USAGE))
		return CLI_EXIT_USAGE;
	return status;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	/* Without a table getopt_long reads `--help` as the short option '-' (reported as
	 * "unknown option `--`"): every command takes --help, and names a wrong long option. */
	static const struct option help_only[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char opts[64];

	snprintf(opts, sizeof(opts), "+:%s", shortopts);
	opterr = 0;
	return getopt_long(argc, argv, opts, longopts ? longopts : help_only, NULL);
}

int cli_bad_opt(struct cli *cli, int argc, char **argv, int c)
{
	cleanup_err struct isola_err *err = NULL;

	if (c == 'h')
		return cli_help(cli);
	cli_opt_error(argv, c, &err);
	return cli_usage_err(cli, "%s", err->message);
}

struct client *cli_client(struct cli *cli)
{
	cleanup_err struct isola_err *err = NULL;

	if (!cli->client && client_new(&cli->conf, &cli->client, &err) < 0) {
		cli_fail(err, CLI_EXIT_FAIL);
		return NULL;
	}
	return cli->client;
}

int cli_dispatch(struct cli *cli, const struct cli_cmd *table, size_t n, int argc, char **argv)
{
	if (argc < 1) {
		fprintf(stderr, "isola: missing command\n");
		if (cli->group)
			cli_print_table_usage(stderr, cli->group, table, n);
		else
			usage(stderr);
		return CLI_EXIT_USAGE;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(argv[0], table[i].name))
			continue;
		cli->cmd = &table[i];
		optind = 0;
		return table[i].fn(cli, argc, argv);
	}
	fprintf(stderr, "isola: unknown command `%s%s%s`\n", cli->group ? cli->group : "",
		cli->group ? " " : "", argv[0]);
	if (cli->group)
		cli_print_table_usage(stderr, cli->group, table, n);
	else
		fputs("Run `isola help` for the list of commands.\n", stderr);
	return CLI_EXIT_USAGE;
}

int cli_dispatch_group(struct cli *cli, const char *group, const struct cli_cmd *table, size_t n,
		       int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		cli_print_table_usage(stdout, group, table, n);
		return CLI_EXIT_OK;
	}
	cli->group = group;
	return cli_dispatch(cli, table, n, argc - 1, argv + 1);
}

static int cmd_version(struct cli *cli, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[1]);
	if (cli->json) {
		json_t *v = json_pack("{s:s}", "version", ISOLA_VERSION);

		out_json(stdout, v);
		json_decref(v);
	} else {
		printf("isola %s\n", ISOLA_VERSION);
	}
	return CLI_EXIT_OK;
}

static int cmd_help(struct cli *cli, int argc, char **argv)
{
	if (argc > 1) {
		for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
			if (strcmp(argv[1], commands[i].name))
				continue;
			cli->cmd = &commands[i];
			return cli_help(cli);
		}
		return cli_usage_err(cli, "unknown command `%s`", argv[1]);
	}
	usage(stdout);
	return CLI_EXIT_OK;
}

enum { OPT_SOCKET = 256, OPT_URL, OPT_TOKEN, OPT_JSON, OPT_VERSION };

static const struct option global_opts[] = {
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"url", required_argument, NULL, OPT_URL},
	{"token", required_argument, NULL, OPT_TOKEN},
	{"json", no_argument, NULL, OPT_JSON},
	{"version", no_argument, NULL, OPT_VERSION},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
	struct cli cli = {0};
	const char *env;
	int c, r;

	/* A closed pipe or socket is an error to report, never a silent kill. */
	signal(SIGPIPE, SIG_IGN);
	cli.conf.socket = (env = getenv("ISOLA_SOCKET")) && *env ? env : DEFAULT_SOCKET;
	cli.conf.url = (env = getenv("ISOLA_URL")) && *env ? env : NULL;
	cli.conf.token = (env = getenv("ISOLA_TOKEN")) && *env ? env : NULL;
	while ((c = cli_getopt(argc, argv, "h", global_opts)) != -1) {
		switch (c) {
		case OPT_SOCKET:
			cli.conf.socket = optarg;
			cli.conf.url = NULL; /* an explicit socket wins over ISOLA_URL */
			break;
		case OPT_URL:
			cli.conf.url = optarg;
			break;
		case OPT_TOKEN:
			cli.conf.token = optarg;
			break;
		case OPT_JSON:
			cli.json = true;
			break;
		case OPT_VERSION:
			return cmd_version(&cli, 1, argv);
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		default: {
			cleanup_err struct isola_err *err = NULL;

			cli_opt_error(argv, c, &err);
			fprintf(stderr, "isola: %s\n", err->message);
			usage(stderr);
			return CLI_EXIT_USAGE;
		}
		}
	}
	if (cli.conf.url && strncmp(cli.conf.url, "http://", 7) &&
	    strncmp(cli.conf.url, "https://", 8)) {
		fprintf(stderr, "isola: --url `%s`: expected http://HOST:PORT\n", cli.conf.url);
		return CLI_EXIT_USAGE;
	}
	r = cli_dispatch(&cli, commands, ARRAY_SIZE(commands), argc - optind, argv + optind);
	client_free(cli.client);
	fflush(stdout);
	return r;
}
