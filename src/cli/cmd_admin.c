/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_admin: `isola token|tenant|audit|compliance` — the operator's commands (docs/compliance.md). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

/* Runs one JSON request; prints the error and returns NULL on failure. */
static json_t *call(struct cli *cli, const char *method, const char *path, const json_t *body,
		    int *status)
{
	cleanup_err struct isola_err *err = NULL;
	struct client *c = cli_client(cli);
	json_t *out = NULL;

	*status = CLI_EXIT_FAIL;
	if (!c)
		return NULL;
	if (client_json(c, method, path, body, &out, &err) < 0) {
		*status = cli_fail(err, CLI_EXIT_FAIL);
		return NULL;
	}
	*status = CLI_EXIT_OK;
	return out ? out : json_object();
}

static const char *jstr(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));

	return v ? v : "";
}

/* ---- token ---- */

static int token_create(struct cli *cli, int argc, char **argv)
{
	json_t *body = json_object(), *out;
	int opt, status;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 't' || opt == 'r' || opt == 'n') {
			json_object_set_new(body,
					    opt == 't'	 ? "tenant"
					    : opt == 'r' ? "role"
							 : "name",
					    json_string(optarg));
			continue;
		}
		json_decref(body);
		return cli_bad_opt(cli, argc, argv, opt);
	}
	if (optind < argc) {
		json_decref(body);
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	}
	out = call(cli, "POST", "/v1/tokens", body, &status);
	json_decref(body);
	if (!out)
		return status;
	if (cli->json) {
		out_json(stdout, out);
	} else {
		/* The secret is printed once; isolad keeps only its hash. */
		printf("%s\n", jstr(out, "token"));
		fprintf(stderr,
			"token %s for tenant %s (role %s): store it now, it is not shown "
			"again\n",
			jstr(out, "id"), jstr(out, "tenant"), jstr(out, "role"));
	}
	json_decref(out);
	return CLI_EXIT_OK;
}

static int token_ls(struct cli *cli, int argc, char **argv)
{
	static const char *const head[] = {"ID",      "TENANT",	   "ROLE",  "NAME",
					   "CREATED", "LAST USED", "STATUS"};
	cleanup_free char *path = NULL;
	const char *tenant = NULL;
	json_t *out, *t, *list;
	double now = util_wall_time();
	struct table *tab;
	int opt, status;
	size_t i;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 't') {
			tenant = optarg;
			continue;
		}
		return cli_bad_opt(cli, argc, argv, opt);
	}
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	path = tenant ? cli_pathf("/v1/tokens?tenant=%s", tenant) : strdup("/v1/tokens");
	out = path ? call(cli, "GET", path, NULL, &status) : NULL;
	if (!out)
		return path ? status : CLI_EXIT_FAIL;
	list = json_object_get(out, "tokens");
	if (cli->json) {
		out_json(stdout, list);
		json_decref(out);
		return CLI_EXIT_OK;
	}
	tab = table_new(head, ARRAY_SIZE(head));
	json_array_foreach(list, i, t)
	{
		char created[64], used[64];
		const char *row[7] = {jstr(t, "id"),
				      jstr(t, "tenant"),
				      jstr(t, "role"),
				      jstr(t, "name"),
				      created,
				      used,
				      json_is_true(json_object_get(t, "active")) ? "active"
										 : "revoked"};

		out_fmt_age(json_object_get(t, "created_at"), now, created, sizeof(created));
		if (json_is_number(json_object_get(t, "last_used")))
			out_fmt_age(json_object_get(t, "last_used"), now, used, sizeof(used));
		else
			snprintf(used, sizeof(used), "never");
		if (tab)
			table_add(tab, row);
	}
	if (tab)
		table_print(tab, stdout);
	table_free(tab);
	json_decref(out);
	return CLI_EXIT_OK;
}

/* DELETE /v1/<what>/<name> for each operand. */
static int remove_each(struct cli *cli, int argc, char **argv, const char *what)
{
	int opt, status = CLI_EXIT_OK;
	struct client *c;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind >= argc)
		return cli_usage_err(cli, "missing operand");
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	for (int i = optind; i < argc; i++) {
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = cli_pathf("/v1/%s/%s", what, argv[i]);

		if (path && client_json(c, "DELETE", path, NULL, NULL, &err) == 0) {
			if (!cli->json)
				printf("%s\n", argv[i]);
			continue;
		}
		fprintf(stderr, "isola: %s: %s\n", argv[i], err ? err->message : "out of memory");
		status = CLI_EXIT_FAIL;
	}
	return status;
}

static int token_revoke(struct cli *cli, int argc, char **argv)
{
	return remove_each(cli, argc, argv, "tokens");
}

static const struct cli_opt token_create_opts[] = {
	{"tenant", 't', "TENANT", "tenant the token acts for", 0},
	{"role", 'r', "ROLE", "admin, user or read-only", 0},
	{"name", 'n', "NAME", "a name to recognise the token by", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_opt token_ls_opts[] = {
	{"tenant", 't', "TENANT", "only this tenant's tokens", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_cmd cli_token_cmds[] = {
	{"create", token_create, "[OPTIONS]", "create an API token (printed once)",
	 .opts = token_create_opts, .example = "isola token create --tenant acme --role user"},
	{"ls", token_ls, "[--tenant TENANT]", "list tokens (never their secrets)",
	 .opts = token_ls_opts, .example = "isola token ls --tenant acme"},
	{"revoke", token_revoke, "ID...", "revoke tokens", .example = "isola token revoke tok_1"},
};
const struct cli_group cli_token_group = {"token", cli_token_cmds, ARRAY_SIZE(cli_token_cmds)};

/* ---- tenant ---- */

static int tenant_create(struct cli *cli, int argc, char **argv)
{
	json_t *body = json_object(), *out;
	int opt, status;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		char *end = NULL;
		double v;

		switch (opt) {
		case CLI_LONG('m'):
		case CLI_LONG('d'):
			json_object_set_new(body, opt == CLI_LONG('m') ? "max_memory" : "max_disk",
					    json_string(optarg));
			continue;
		case CLI_LONG('s'):
		case CLI_LONG('c'):
		case CLI_LONG('r'):
		case CLI_LONG('b'):
			v = strtod(optarg, &end);
			if (!*optarg || *end || v < 0) {
				json_decref(body);
				return cli_usage_err(cli, "`%s` is not a non-negative number",
						     optarg);
			}
			json_object_set_new(body,
					    opt == CLI_LONG('s')   ? "max_sandboxes"
					    : opt == CLI_LONG('c') ? "max_cpu"
					    : opt == CLI_LONG('r') ? "create_rate"
								   : "create_burst",
					    opt == CLI_LONG('s') || opt == CLI_LONG('b')
						    ? json_integer((json_int_t)v)
						    : json_real(v));
			continue;
		}
		json_decref(body);
		return cli_bad_opt(cli, argc, argv, opt);
	}
	if (argc - optind != 1) {
		json_decref(body);
		return cli_usage_err(cli, "expected one tenant NAME");
	}
	json_object_set_new(body, "name", json_string(argv[optind]));
	out = call(cli, "POST", "/v1/tenants", body, &status);
	json_decref(body);
	if (!out)
		return status;
	if (cli->json)
		out_json(stdout, out);
	else
		printf("%s\n", jstr(out, "name"));
	json_decref(out);
	return CLI_EXIT_OK;
}

/* "unlimited" for 0, else the value. */
static void fmt_limit(const json_t *q, const char *k, bool bytes, char *out, size_t n)
{
	double v = json_number_value(json_object_get(q, k));

	if (v <= 0)
		snprintf(out, n, "-");
	else if (bytes)
		out_fmt_size((uint64_t)v, out, n);
	else
		snprintf(out, n, "%g", v);
}

static void print_tenants(const json_t *list)
{
	static const char *const head[] = {"NAME",   "SANDBOXES", "MAX",   "CPU",
					   "MEMORY", "DISK",	  "RATE/S"};
	struct table *tab = table_new(head, ARRAY_SIZE(head));
	const json_t *t;
	size_t i;

	json_array_foreach(list, i, t)
	{
		const json_t *q = json_object_get(t, "quota");
		char n[32], mx[32], cpu[32], mem[32], disk[32], rate[32];
		const char *row[7] = {jstr(t, "name"), n, mx, cpu, mem, disk, rate};

		snprintf(n, sizeof(n), "%lld",
			 (long long)json_integer_value(
				 json_object_get(json_object_get(t, "usage"), "sandboxes")));
		fmt_limit(q, "max_sandboxes", false, mx, sizeof(mx));
		fmt_limit(q, "max_cpu", false, cpu, sizeof(cpu));
		fmt_limit(q, "max_memory", true, mem, sizeof(mem));
		fmt_limit(q, "max_disk", true, disk, sizeof(disk));
		fmt_limit(q, "create_rate", false, rate, sizeof(rate));
		if (tab)
			table_add(tab, row);
	}
	if (tab)
		table_print(tab, stdout);
	table_free(tab);
}

static int tenant_ls(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/tenants",
					     .list = "tenants",
					     .json_list = true,
					     .print = print_tenants};

	return cli_show(cli, argc, argv, &show);
}

static int tenant_rm(struct cli *cli, int argc, char **argv)
{
	return remove_each(cli, argc, argv, "tenants");
}

static const struct cli_opt tenant_create_opts[] = {
	{"max-sandboxes", CLI_LONG('s'), "N", "most live sandboxes (0: unlimited)", 0},
	{"max-cpu", CLI_LONG('c'), "N", "most CPUs over all sandboxes", 0},
	{"max-memory", CLI_LONG('m'), "SIZE", "most memory over all sandboxes", 0},
	{"max-disk", CLI_LONG('d'), "SIZE", "most disk over all sandboxes", 0},
	{"rate", CLI_LONG('r'), "PER_S", "API requests per second", 0},
	{"burst", CLI_LONG('b'), "N", "API request burst", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_cmd cli_tenant_cmds[] = {
	{"create", tenant_create, "[OPTIONS] NAME",
	 "create a tenant with quotas (0 or absent = unlimited)", .opts = tenant_create_opts,
	 .example = "isola tenant create --max-sandboxes 10 --max-memory 8G acme"},
	{"ls", tenant_ls, "", "list tenants, their quotas and usage", .example = "isola tenant ls"},
	{"rm", tenant_rm, "NAME...", "remove tenants that own no sandbox (revokes their tokens)",
	 .example = "isola tenant rm acme"},
};
const struct cli_group cli_tenant_group = {"tenant", cli_tenant_cmds, ARRAY_SIZE(cli_tenant_cmds)};

/* ---- audit ---- */

static int audit_verify_cmd(struct cli *cli, int argc, char **argv)
{
	json_t *out, *p;
	int opt, status;
	bool ok;
	size_t i;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	out = call(cli, "GET", "/v1/audit/verify", NULL, &status);
	if (!out)
		return status;
	ok = json_is_true(json_object_get(out, "ok"));
	if (cli->json) {
		out_json(stdout, out);
	} else {
		printf("audit trail %s: records %lld-%lld in %lld segments (%lld sealed)\n",
		       ok ? "intact" : "TAMPERED",
		       (long long)json_integer_value(json_object_get(out, "first_seq")),
		       (long long)json_integer_value(json_object_get(out, "last_seq")),
		       (long long)json_integer_value(json_object_get(out, "segments")),
		       (long long)json_integer_value(json_object_get(out, "sealed")));
		json_array_foreach(json_object_get(out, "problems"), i, p)
			printf("  segment %lld, record %lld: %s\n",
			       (long long)json_integer_value(json_object_get(p, "segment")),
			       (long long)json_integer_value(json_object_get(p, "seq")),
			       jstr(p, "problem"));
		/* Stated losses: part of an intact chain, but an operator must see them. */
		json_array_foreach(json_object_get(out, "gaps"), i, p)
			printf("  gap at record %lld: %lld record(s) lost between %s and %s (%s)\n",
			       (long long)json_integer_value(json_object_get(p, "seq")),
			       (long long)json_integer_value(json_object_get(p, "lost")),
			       jstr(p, "from"), jstr(p, "to"), jstr(p, "reason"));
	}
	json_decref(out);
	return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* --since: unix seconds, RFC 3339, or an age like 90s, 15m, 2h, 7d. */
static int since_arg(const char *s, char *out, size_t n)
{
	char *end;
	double v = strtod(s, &end);

	if (end != s && v >= 0 && end[0] && !end[1] && strchr("smhd", end[0])) {
		double mul = end[0] == 's' ? 1 : end[0] == 'm' ? 60 : end[0] == 'h' ? 3600 : 86400;

		snprintf(out, n, "%.3f", util_wall_time() - v * mul);
		return 0;
	}
	if (strlen(s) >= n)
		return -EINVAL;
	snprintf(out, n, "%s", s); /* isolad validates the absolute forms */
	return 0;
}

static int write_out(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	if (fwrite(buf, 1, len, stdout) != len)
		return isola_err_sys(err, errno, NULL, "write to stdout");
	return 0;
}

static int audit_export_cmd(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct client_req req = {.method = "GET", .body_fd = -1, .on_data = write_out};
	char since[64] = "";
	struct client *c;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 's') {
			if (since_arg(optarg, since, sizeof(since)) < 0)
				return cli_usage_err(cli, "--since `%s` is not a time", optarg);
			continue;
		}
		return cli_bad_opt(cli, argc, argv, opt);
	}
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	c = cli_client(cli);
	path = since[0] ? cli_pathf("/v1/audit/export?since=%s", since)
			: strdup("/v1/audit/export");
	if (!c || !path)
		return CLI_EXIT_FAIL;
	req.path = path;
	if (client_do(c, &req, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static const struct cli_opt audit_export_opts[] = {
	{"since", 's', "TIME", "from TIME: unix seconds, RFC 3339, or 15m/2h/7d ago", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_cmd cli_audit_cmds[] = {
	{"verify", audit_verify_cmd, "", "check the hash chain and seals (exit 1 if tampered)",
	 .example = "isola audit verify"},
	{"export", audit_export_cmd, "[--since TIME]", "write records as JSON lines",
	 .opts = audit_export_opts, .example = "isola audit export --since 2h"},
};
const struct cli_group cli_audit_group = {"audit", cli_audit_cmds, ARRAY_SIZE(cli_audit_cmds)};

/* ---- compliance ---- */

static void kv(const char *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kv(const char *k, const char *fmt, ...)
{
	va_list ap;

	printf("  %-22s ", k);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void print_compliance(const json_t *r)
{
	json_t *tiers, *audit, *ret, *data, *adm, *t;
	const char *k;
	json_t *v;
	char a[32], b[32];
	size_t i;

	tiers = json_object_get(r, "tiers");
	audit = json_object_get(r, "audit");
	ret = json_object_get(r, "retention");
	data = json_object_get(r, "data_locations");
	adm = json_object_get(r, "admission");
	printf("isola compliance report (isolad %s)\n\nIsolation\n", jstr(r, "version"));
	kv("default tier", "%s", jstr(tiers, "default"));
	out_fmt_size((uint64_t)json_integer_value(json_object_get(tiers, "default_memory")), a,
		     sizeof(a));
	out_fmt_size((uint64_t)json_integer_value(json_object_get(tiers, "default_disk")), b,
		     sizeof(b));
	kv("sandbox defaults", "cpu %g, memory %s, disk %s, pids %lld",
	   json_number_value(json_object_get(tiers, "default_cpu")), a, b,
	   (long long)json_integer_value(json_object_get(tiers, "default_pids")));
	kv("admission", "%g of %g CPUs committed; memory %lld of %lld bytes",
	   json_number_value(json_object_get(adm, "cpu_committed")),
	   json_number_value(json_object_get(adm, "cpu_capacity")),
	   (long long)json_integer_value(json_object_get(adm, "memory_committed")),
	   (long long)json_integer_value(json_object_get(adm, "memory_capacity")));
	printf("\nNetwork and data locality\n");
	kv("egress default", "%s (%s)", jstr(json_object_get(r, "egress"), "default"),
	   jstr(json_object_get(r, "egress"), "detail"));
	kv("outbound connections", "%s", jstr(r, "outbound_connections"));
	printf("\nEncryption at rest\n");
	json_object_foreach(json_object_get(r, "encryption_at_rest"), k, v)
		kv(k, "%s", json_string_value(v) ? json_string_value(v) : "");
	printf("\nAudit trail\n");
	kv("chain", "%s",
	   json_is_true(json_object_get(audit, "chain_ok")) ? "intact (verified now)" : "TAMPERED");
	kv("records", "%lld in %lld segments (%lld sealed)",
	   (long long)json_integer_value(json_object_get(audit, "records")),
	   (long long)json_integer_value(
		   json_object_get(json_object_get(audit, "verify"), "segments")),
	   (long long)json_integer_value(
		   json_object_get(json_object_get(audit, "verify"), "sealed")));
	kv("sealing", "%s", jstr(audit, "sealing"));
	printf("\nRetention\n");
	json_object_foreach(ret, k, v)
	{
		if (json_is_string(v))
			kv(k, "%s", json_string_value(v));
		else
			kv(k, "%lld s%s", (long long)json_integer_value(v),
			   json_integer_value(v) ? "" : " (keep forever / none)");
	}
	printf("\nTokens (never their secrets)\n");
	json_array_foreach(json_object_get(r, "tokens"), i, t)
	{
		char created[64], used[64];

		out_fmt_age(json_object_get(t, "created_at"), util_wall_time(), created,
			    sizeof(created));
		if (json_is_number(json_object_get(t, "last_used")))
			out_fmt_age(json_object_get(t, "last_used"), util_wall_time(), used,
				    sizeof(used));
		else
			snprintf(used, sizeof(used), "never");
		printf("  %-14s tenant %-16s %-9s created %s, last used %s%s\n", jstr(t, "id"),
		       jstr(t, "tenant"), jstr(t, "role"), created, used,
		       json_is_true(json_object_get(t, "active")) ? "" : " (revoked)");
	}
	if (!json_array_size(json_object_get(r, "tokens")))
		printf("  (none besides the legacy api.token and the unix socket)\n");
	printf("\nWhere data lives\n");
	json_object_foreach(data, k, v)
		kv(k, "%s", json_string_value(v) ? json_string_value(v) : "");
}

static int compliance_report(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/compliance", .print = print_compliance};

	return cli_show(cli, argc, argv, &show);
}

static const struct cli_cmd cli_compliance_cmds[] = {
	{"report", compliance_report, "", "print this installation's compliance posture",
	 .example = "isola compliance report --json"},
};
const struct cli_group cli_compliance_group = {"compliance", cli_compliance_cmds,
					       ARRAY_SIZE(cli_compliance_cmds)};
