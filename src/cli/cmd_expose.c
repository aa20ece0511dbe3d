/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_expose: isola expose / ports / unexpose — a sandbox's exposed ports (docs/network.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "cli.h"
#include "output.h"
#include "parse.h"

/* Parses PORT (1-65535); 0 when invalid. */
static int parse_port_arg(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s < '1' || *s > '9' || *end || v > 65535)
		return 0;
	return (int)v;
}

const struct cli_opt cli_expose_opts[] = {
	{"public", 'p', NULL, "no token needed to reach the port", 0},
	{NULL, 0, NULL, NULL, 0},
};

int cmd_expose(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *body, *out = NULL;
	struct client *c;
	const char *ops[2];
	bool pub = false;
	int opt, port, r, nops = 0;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt != 'p')
			return cli_bad_opt(cli, argc, argv, opt);
		pub = true;
	}
	/* `isola expose ID PORT --public` too: options stop at the first operand otherwise */
	for (int i = optind; i < argc; i++) {
		if (strcmp(argv[i], "--public") == 0) {
			pub = true;
			continue;
		}
		if (nops == 2)
			return cli_usage_err(cli, "too many arguments");
		ops[nops++] = argv[i];
	}
	if (nops != 2)
		return cli_usage_err(cli, "expected ID and PORT");
	port = parse_port_arg(ops[1]);
	if (!port)
		return cli_usage_err(cli, "PORT `%s` is not 1-65535", ops[1]);
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/ports", ops[0]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	body = json_pack("{s:i,s:b}", "port", port, "public", pub);
	r = client_json(c, "POST", path, body, &out, &err);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json) {
		out_json(stdout, out);
	} else {
		const char *tok = json_string_value(json_object_get(out, "token"));

		printf("%s\n", json_string_value(json_object_get(out, "url")));
		printf("path url: %s\n", json_string_value(json_object_get(out, "path_url")));
		if (tok)
			printf("token:    %s  (header X-Isola-Access-Token, or ?isola_token=)\n",
			       tok);
		else
			printf("public:   no token needed\n");
	}
	json_decref(out);
	return CLI_EXIT_OK;
}

static void print_ports(const json_t *ports)
{
	static const char *const headers[] = {"PORT", "ACCESS", "ACTIVE", "TOTAL",
					      "IN",   "OUT",	"URL"};
	struct table *t = table_new(headers, ARRAY_SIZE(headers));
	const json_t *e;
	size_t i;

	json_array_foreach(ports, i, e)
	{
		json_t *cn = json_object_get(e, "connections");
		char port[8], act[16], tot[24], in[32], outb[32];
		const char *row[7] = {port,
				      json_is_true(json_object_get(e, "public")) ? "public"
										 : "token",
				      act,
				      tot,
				      in,
				      outb,
				      json_string_value(json_object_get(e, "url"))};

		snprintf(port, sizeof(port), "%d",
			 (int)json_integer_value(json_object_get(e, "port")));
		snprintf(act, sizeof(act), "%d",
			 (int)json_integer_value(json_object_get(cn, "active")));
		snprintf(tot, sizeof(tot), "%lld",
			 (long long)json_integer_value(json_object_get(cn, "total")));
		out_fmt_size((uint64_t)json_integer_value(json_object_get(cn, "bytes_in")), in,
			     sizeof(in));
		out_fmt_size((uint64_t)json_integer_value(json_object_get(cn, "bytes_out")), outb,
			     sizeof(outb));
		if (t)
			table_add(t, row);
	}
	if (t) {
		table_print(t, stdout);
		table_free(t);
	}
}

int cmd_ports(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/sandboxes/%s/ports",
					     .id = true,
					     .list = "ports",
					     .print = print_ports};

	return cli_show(cli, argc, argv, &show);
}

int cmd_unexpose(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct client *c;
	int opt, port;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 2)
		return cli_usage_err(cli, argc - optind < 2 ? "expected ID and PORT"
							    : "too many arguments");
	port = parse_port_arg(argv[optind + 1]);
	if (!port)
		return cli_usage_err(cli, "PORT `%s` is not 1-65535", argv[optind + 1]);
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/ports/%d", argv[optind], port);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	if (client_json(c, "DELETE", path, NULL, NULL, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json) {
		json_t *o = json_pack("{s:s,s:i}", "id", argv[optind], "unexposed", port);

		out_json(stdout, o);
		json_decref(o);
	}
	return CLI_EXIT_OK;
}
