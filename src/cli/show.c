/* SPDX-License-Identifier: Apache-2.0 */
/* show: the read commands' one shape — operands, one GET, the reply as --json or a human view. */
#include "cli.h"

#include "../common/util.h"
#include "output.h"
#include "parse.h"

int cli_show(struct cli *cli, int argc, char **argv, const struct cli_show *s)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *reply = NULL, *list;
	struct client *c;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (s->id && argc - optind != 1)
		return cli_usage_err(cli,
				     argc - optind ? "too many arguments" : "missing sandbox ID");
	if (!s->id && optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	c = cli_client(cli);
	path = s->id ? cli_pathf(s->path, argv[optind]) : cli_pathf(s->path);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	if (client_json(c, "GET", path, NULL, &reply, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	list = !s->list || json_is_array(reply) ? reply : json_object_get(reply, s->list);
	if (s->complete && s->id)
		s->complete(c, argv[optind], list);
	if (!cli->json)
		s->print(list);
	else if (s->json_list && json_is_array(list))
		out_json(stdout, list);
	else
		out_json(stdout, reply);
	json_decref(reply);
	return CLI_EXIT_OK;
}
