/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_network: isola network get|set — a sandbox's egress policy and counters (docs/network.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "cli.h"
#include "output.h"
#include "parse.h"

/* Prints one rule list ("allow", "deny") of a policy as "  allow  example.com:443". */
static void print_rules(const json_t *pol, const char *which)
{
	const json_t *rule;
	size_t i;

	json_array_foreach(json_object_get(pol, which), i, rule)
	{
		cleanup_free char *ports = out_fmt_value(json_object_get(rule, "ports"));
		const char *what = json_string_value(json_object_get(rule, "domain"));

		if (!what)
			what = json_string_value(json_object_get(rule, "cidr"));
		printf("  %-5s  %s%s%s\n", which, what ? what : "?",
		       json_object_get(rule, "ports") ? "  ports " : "",
		       json_object_get(rule, "ports") && ports ? ports : "");
	}
}

static void print_info(const json_t *info)
{
	const json_t *pol = json_object_get(info, "policy");
	const json_t *c = json_object_get(info, "counters");
	char in[32], out[32];

	printf("interface  %s\n", json_string_value(json_object_get(info, "interface")));
	printf("address    %s (gateway %s)\n", json_string_value(json_object_get(info, "address")),
	       json_string_value(json_object_get(info, "gateway")));
	printf("default    %s\n", json_string_value(json_object_get(pol, "default")));
	print_rules(pol, "allow");
	print_rules(pol, "deny");
	out_fmt_size((uint64_t)json_integer_value(json_object_get(c, "tx_bytes")), out,
		     sizeof(out));
	out_fmt_size((uint64_t)json_integer_value(json_object_get(c, "rx_bytes")), in, sizeof(in));
	printf("traffic    %s out, %s in\n", out, in);
	printf("proxy      %lld connections, %lld denied\n",
	       (long long)json_integer_value(json_object_get(c, "connections")),
	       (long long)json_integer_value(json_object_get(c, "denied")));
	printf("dns        %lld queries, %lld refused\n",
	       (long long)json_integer_value(json_object_get(c, "dns_queries")),
	       (long long)json_integer_value(json_object_get(c, "dns_refused")));
}

static int network_get(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *out = NULL;
	struct client *c;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 1)
		return cli_usage_err(cli, "expected ID");
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/network", argv[optind]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	if (client_json(c, "GET", path, NULL, &out, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json)
		out_json(stdout, out);
	else
		print_info(out);
	json_decref(out);
	return CLI_EXIT_OK;
}

/* Reads a policy object from a file ("-" = stdin). */
static json_t *load_policy(const char *file, struct isola_err **err)
{
	json_error_t je;
	json_t *j = !strcmp(file, "-") ? json_loadf(stdin, 0, &je) : json_load_file(file, 0, &je);

	if (!j || !json_is_object(j)) {
		isola_err_set(err, EINVAL, "usage", "`%s` is not a JSON policy object%s%s", file,
			      j ? "" : ": ", j ? "" : je.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

static int network_set(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	json_t *pol = json_object(), *allow = json_array(), *deny = json_array(), *out = NULL;
	const char *def = NULL, *file = NULL;
	const char *id = NULL;
	struct client *c;
	int opt, r = CLI_EXIT_USAGE;

	/* `set ID --allow ...` as documented: the id first, options after it. */
	if (argc > 1 && argv[1][0] != '-') {
		id = argv[1];
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == CLI_LONG('d'))
			def = optarg;
		else if (opt == CLI_LONG('a'))
			json_array_append_new(allow, json_string(optarg));
		else if (opt == CLI_LONG('D'))
			json_array_append_new(deny, json_string(optarg));
		else if (opt == CLI_LONG('j'))
			file = optarg;
		else {
			r = cli_bad_opt(cli, argc, argv, opt);
			goto out;
		}
	}
	if (!id && argc - optind == 1)
		id = argv[optind++];
	if (!id || argc != optind) {
		r = cli_usage_err(cli, "expected ID");
		goto out;
	}
	if (def && strcmp(def, "allow") != 0 && strcmp(def, "deny") != 0) {
		r = cli_usage_err(cli, "--default `%s` is not allow or deny", def);
		goto out;
	}
	/* The whole policy is replaced: rules given here, or a file, never a merge. */
	if (file) {
		json_decref(pol);
		pol = load_policy(file, &err);
		if (!pol) {
			r = cli_fail(err, CLI_EXIT_USAGE);
			goto out;
		}
	} else {
		if (def)
			json_object_set_new(pol, "default", json_string(def));
		json_object_set(pol, "allow", allow);
		json_object_set(pol, "deny", deny);
	}
	r = CLI_EXIT_FAIL;
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/network", id);
	if (!c || !path)
		goto out;
	if (client_json(c, "PUT", path, pol, &out, &err) < 0) {
		r = cli_fail(err, CLI_EXIT_FAIL);
		goto out;
	}
	if (cli->json)
		out_json(stdout, out);
	else
		print_info(out);
	r = CLI_EXIT_OK;
out:
	json_decref(out);
	json_decref(pol);
	json_decref(allow);
	json_decref(deny);
	return r;
}

static const struct cli_opt network_set_opts[] = {
	{"default", CLI_LONG('d'), "POLICY", "what is not matched: allow or deny", 0},
	{"allow", CLI_LONG('a'), "RULE", "allow example.com, *.example.com or a CIDR, with :PORT",
	 0},
	{"deny", CLI_LONG('D'), "RULE", "deny a destination (same forms)", 0},
	{"json", CLI_LONG('j'), "FILE", "read the whole policy from FILE (- for stdin)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_cmd cli_network_cmds[] = {
	{"get", network_get, "ID", "show a sandbox's egress policy, addresses and counters",
	 .example = "isola network get web"},
	{"set", network_set, "ID [OPTIONS]", "replace a sandbox's egress policy",
	 .opts = network_set_opts,
	 .example = "isola network set web --default deny --allow pypi.org"},
};
const struct cli_group cli_network_group = {"network", cli_network_cmds,
					    ARRAY_SIZE(cli_network_cmds)};
