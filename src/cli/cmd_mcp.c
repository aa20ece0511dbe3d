/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_mcp: `isola mcp` — option parsing for the MCP server in src/cli/mcp/ (docs/mcp.md). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/util.h"
#include "mcp/mcp.h"

enum { OPT_ALLOW_HOST_PATH = CLI_LONG('A'), OPT_KEEP = CLI_LONG('k') };

const struct cli_opt cli_mcp_opts[] = {
	{"allow-host-path", OPT_ALLOW_HOST_PATH, "DIR",
	 "let sandbox_upload/sandbox_download use host files under DIR (repeatable)", 0},
	{"keep", OPT_KEEP, NULL, "keep the session's default sandbox when the client disconnects",
	 0},
	{NULL, 0, NULL, NULL, 0},
};

/* Adds a realpath()ed directory to the allowed host paths. */
static int add_host_dir(struct mcp_session *s, const char *dir)
{
	char real[PATH_MAX], **v;
	struct stat st;

	if (!realpath(dir, real) || stat(real, &st) < 0) {
		fprintf(stderr, "isola: --allow-host-path `%s`: %s\n", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "isola: --allow-host-path `%s`: not a directory\n", dir);
		return -1;
	}
	v = realloc(s->host_dirs, (s->nhost_dirs + 1) * sizeof(*v));
	if (!v || !(v[s->nhost_dirs] = strdup(real))) {
		fprintf(stderr, "isola: out of memory\n");
		if (v)
			s->host_dirs = v;
		return -1;
	}
	s->host_dirs = v;
	s->nhost_dirs++;
	return 0;
}

int cmd_mcp(struct cli *cli, int argc, char **argv)
{
	struct mcp_session s = {0};
	cleanup_err struct isola_err *err = NULL;
	int opt, status = CLI_EXIT_USAGE;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == OPT_KEEP) {
			s.keep = true;
		} else if (opt == OPT_ALLOW_HOST_PATH) {
			if (add_host_dir(&s, optarg) < 0)
				goto out;
		} else {
			status = cli_bad_opt(cli, argc, argv, opt);
			goto out;
		}
	}
	if (optind < argc) {
		status = cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
		goto out;
	}
	if (mcp_session_init(&s, NULL, &cli->conf, &err) < 0) {
		status = cli_fail(err, CLI_EXIT_FAIL);
		goto out;
	}
	status = mcp_serve_stdio(&s);
	mcp_session_fini(&s);
	return status;
out:
	for (size_t i = 0; i < s.nhost_dirs; i++)
		free(s.host_dirs[i]);
	free(s.host_dirs);
	return status;
}
