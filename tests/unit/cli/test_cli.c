/* SPDX-License-Identifier: Apache-2.0 */
/* test_cli: TAP tests for the CLI's pure logic — parsing, request builders, formatting. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/output.h"
#include "cli/parse.h"
#include "common/util.h"

static int test_no;
static int failures;

static void ok(bool cond, const char *name)
{
	test_no++;
	printf("%sok %d - %s\n", cond ? "" : "not ", test_no, name);
	if (!cond)
		failures++;
}

/* Compact, key-sorted JSON of v (caller frees). */
static char *dump(const json_t *v)
{
	return v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : strdup("(null)");
}

static bool json_eq(const json_t *v, const char *want)
{
	char *got = dump(v);
	bool eq = !strcmp(got, want);

	if (!eq)
		printf("# got  %s\n# want %s\n", got, want);
	free(got);
	return eq;
}

static void test_kv(void)
{
	struct isola_err *err = NULL;
	json_t *o = json_object();

	ok(cli_parse_kv(o, "A=1", "--env", &err) == 0, "kv: A=1");
	ok(cli_parse_kv(o, "B=", "--env", &err) == 0, "kv: empty value allowed");
	ok(cli_parse_kv(o, "C=x=y", "--env", &err) == 0, "kv: value keeps later '='");
	ok(cli_parse_kv(o, "A=2", "--env", &err) == 0, "kv: later key replaces");
	ok(json_eq(o, "{\"A\":\"2\",\"B\":\"\",\"C\":\"x=y\"}"), "kv: object content");
	ok(cli_parse_kv(o, "=x", "--env", &err) == -EINVAL && err &&
		   !strcmp(err->code, CLI_ERR_USAGE) && strstr(err->message, "--env `=x`"),
	   "kv: empty key is a usage error naming the argument");
	isola_err_free(err);
	err = NULL;
	ok(cli_parse_kv(o, "noequals", "--label", &err) == -EINVAL, "kv: missing '='");
	isola_err_free(err);
	json_decref(o);
}

static void test_cp_arg(void)
{
	struct isola_err *err = NULL;
	struct cli_cp_arg a, b;

	ok(cli_parse_cp_arg("sb-1:/etc/hosts", &a, &err) == 0 && a.remote &&
		   !strcmp(a.id, "sb-1") && !strcmp(a.path, "/etc/hosts"),
	   "cp: ID:/path is remote");
	ok(cli_parse_cp_arg("abc:rel/x", &a, &err) == 0 && a.remote && !strcmp(a.path, "rel/x"),
	   "cp: ID:relative is remote");
	ok(cli_parse_cp_arg("./a:b", &a, &err) == 0 && !a.remote && !strcmp(a.path, "./a:b"),
	   "cp: ./a:b is local");
	ok(cli_parse_cp_arg("/x/y:z", &a, &err) == 0 && !a.remote, "cp: absolute is local");
	ok(cli_parse_cp_arg("file.txt", &a, &err) == 0 && !a.remote, "cp: plain name is local");
	ok(cli_parse_cp_arg("-", &a, &err) == 0 && !a.remote, "cp: - is local");
	ok(cli_parse_cp_arg("we ird:/p", &a, &err) == 0 && !a.remote, "cp: non-id prefix is local");
	ok(cli_parse_cp_arg("sb:", &a, &err) == -EINVAL, "cp: ID: without path is an error");
	isola_err_free(err);
	err = NULL;
	ok(cli_parse_cp_args("sb:/a", "./b", &a, &b, &err) == 0 && a.remote && !b.remote,
	   "cp: remote to local");
	ok(cli_parse_cp_args("a", "b", &a, &b, &err) == -EINVAL, "cp: both local refused");
	isola_err_free(err);
	err = NULL;
	ok(cli_parse_cp_args("x:/a", "y:/b", &a, &b, &err) == -EINVAL, "cp: both remote refused");
	isola_err_free(err);
}

static void test_cp_map(void)
{
	char out[256];

	ok(cli_cp_map_entry("f.txt", "/tmp/d", true, out, sizeof(out)) == 0 &&
		   !strcmp(out, "/tmp/d/f.txt"),
	   "map: into existing dir");
	ok(cli_cp_map_entry("f.txt", "/tmp/new", false, out, sizeof(out)) == 0 &&
		   !strcmp(out, "/tmp/new"),
	   "map: single file renamed to DST");
	ok(cli_cp_map_entry("dir/a/b", "out", false, out, sizeof(out)) == 0 &&
		   !strcmp(out, "out/a/b"),
	   "map: dir tree under new name");
	ok(cli_cp_map_entry("dir/", "out", false, out, sizeof(out)) == 0 && !strcmp(out, "out"),
	   "map: top dir entry with slash");
	ok(cli_cp_map_entry("./dir/x", "o", true, out, sizeof(out)) == 0 && !strcmp(out, "o/dir/x"),
	   "map: leading ./ ignored");
	ok(cli_cp_map_entry("/etc/passwd", "o", true, out, sizeof(out)) == -EINVAL,
	   "map: absolute refused");
	ok(cli_cp_map_entry("dir/../../x", "o", false, out, sizeof(out)) == -EINVAL,
	   "map: .. refused");
	ok(cli_cp_map_entry("..", "o", true, out, sizeof(out)) == -EINVAL, "map: bare .. refused");
	ok(cli_cp_map_entry("a..b/c", "o", true, out, sizeof(out)) == 0, "map: a..b is a name");
	ok(cli_cp_map_entry("", "o", true, out, sizeof(out)) == -EINVAL, "map: empty refused");
	ok(cli_cp_map_entry("x", "o", true, out, 3) == -ENAMETOOLONG, "map: overflow detected");
}

static void test_path_split(void)
{
	char d[64], n[64];

	ok(cli_path_split("/a/b/", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, "/a") &&
		   !strcmp(n, "b"),
	   "split: /a/b/");
	ok(cli_path_split("b", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, ".") &&
		   !strcmp(n, "b"),
	   "split: relative");
	ok(cli_path_split("/b", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, "/") &&
		   !strcmp(n, "b"),
	   "split: /b");
	ok(cli_path_split("/", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, "/") && !*n,
	   "split: root");
	ok(cli_path_split("a//b", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, "a") &&
		   !strcmp(n, "b"),
	   "split: double slash");
}

static int parse(enum cli_sandbox_mode mode, char **argv, struct cli_sandbox_args *a,
		 struct isola_err **err)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	return cli_parse_sandbox_args(argc, argv, mode, NULL, a, err);
}

static void test_sandbox_args(void)
{
	struct isola_err *err = NULL;
	struct cli_sandbox_args a;
	char *run1[] = {"run", "--template", "debian", "--cpu", "2",	"--memory", "512M", "--env",
			"A=1", "--timeout",  "30",     "--",	"echo", "hi",	    NULL};
	char *run2[] = {"run",	  "--cpu", "0.5",    "--disk",	"1G", "--workdir", "/w",
			"--user", "u",	   "--tier", "process", "ls", "-l",	   NULL};
	char *run3[] = {"run", "--memory", "lots", "--", "x", NULL};
	char *run4[] = {"run", "--cpu", "1", NULL};
	char *run5[] = {"run", "--ttl", "5", "--", "x", NULL};
	char *create1[] = {"create", "--ttl", "600", "--label", "team=a", "--label", "x=y", NULL};
	char *create2[] = {"create", "--timeout", "3", NULL};
	char *create3[] = {"create", "extra", NULL};
	char *create4[] = {"create", "--bogus", NULL};
	char *create5[] = {"create", "--cpu", NULL};
	char *help[] = {"create", "--help", NULL};
	char *mounts[] = {"create",
			  "--tmpfs",
			  "/run",
			  "--tmpfs",
			  "/x:ro,noexec,size=64M,mode=755,nosuid",
			  "--mask-path",
			  "/etc/a",
			  "--readonly-path",
			  "/srv",
			  NULL};
	char *badtmpfs[][4] = {{"create", "--tmpfs", "/x:size=lots", NULL},
			       {"create", "--tmpfs", "/x:mode=9", NULL},
			       {"create", "--tmpfs", "/x:suid", NULL},
			       {"create", "--tmpfs", "/x:bogus", NULL},
			       {"create", "--tmpfs", ":ro", NULL}};
	const char *badwhy[] = {"expected a size", "expected an octal mode", "always nosuid",
				"unknown option `bogus`", "expected PATH[:OPTIONS]"};

	ok(parse(CLI_SB_RUN, run1, &a, &err) == 0 && a.timeout_s == 30 && a.cmd_index == 12,
	   "run: options and command split at --");
	ok(json_eq(a.req, "{\"cpu\":2,\"env\":{\"A\":\"1\"},\"memory\":536870912,"
			  "\"template\":\"debian\"}"),
	   "run: create request body");
	json_decref(a.req);
	ok(parse(CLI_SB_RUN, run2, &a, &err) == 0 && a.cmd_index == 11,
	   "run: command without --, its own flags untouched");
	ok(json_eq(a.req, "{\"cpu\":0.5,\"disk\":1073741824,\"tier\":\"process\",\"user\":\"u\","
			  "\"workdir\":\"/w\"}"),
	   "run: fractional cpu, disk, tier, user, workdir");
	json_decref(a.req);
	ok(parse(CLI_SB_RUN, run3, &a, &err) == -EINVAL && !a.req &&
		   strstr(err->message, "--memory `lots`"),
	   "run: bad size is a usage error");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_RUN, run4, &a, &err) == -EINVAL && strstr(err->message, "missing command"),
	   "run: missing command");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_RUN, run5, &a, &err) == -EINVAL, "run: --ttl is create-only");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_CREATE, create1, &a, &err) == 0, "create: ttl and labels");
	ok(json_eq(a.req, "{\"labels\":{\"team\":\"a\",\"x\":\"y\"},\"ttl\":600}"),
	   "create: request body");
	json_decref(a.req);
	ok(parse(CLI_SB_CREATE, create2, &a, &err) == -EINVAL, "create: --timeout refused");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_CREATE, create3, &a, &err) == -EINVAL &&
		   strstr(err->message, "unexpected argument `extra`"),
	   "create: stray operand refused");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_CREATE, create4, &a, &err) == -EINVAL &&
		   strstr(err->message, "unknown option `--bogus`"),
	   "create: unknown option named");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_CREATE, create5, &a, &err) == -EINVAL &&
		   strstr(err->message, "needs a value"),
	   "create: missing option value");
	isola_err_free(err);
	err = NULL;
	ok(parse(CLI_SB_CREATE, help, &a, &err) == 0 && a.help, "create: --help");
	json_decref(a.req);
	ok(parse(CLI_SB_CREATE, mounts, &a, &err) == 0 &&
		   json_eq(a.req, "{\"masked_paths\":[\"/etc/a\"],\"readonly_paths\":[\"/srv\"],"
				  "\"tmpfs\":[{\"destination\":\"/run\"},{\"destination\":\"/x\","
				  "\"mode\":493,\"noexec\":true,\"readonly\":true,"
				  "\"size\":67108864}]}"),
	   "create: --tmpfs with options, --mask-path, --readonly-path");
	json_decref(a.req);
	for (size_t i = 0; i < ARRAY_SIZE(badtmpfs); i++) {
		ok(parse(CLI_SB_CREATE, badtmpfs[i], &a, &err) == -EINVAL && !a.req &&
			   strstr(err->message, badwhy[i]) && strstr(err->message, "--tmpfs"),
		   badwhy[i]);
		isola_err_free(err);
		err = NULL;
	}
}

static void test_signals_and_exit(void)
{
	json_t *ev;

	ok(cli_parse_signal("TERM") == SIGTERM, "signal: TERM");
	ok(cli_parse_signal("sigkill") == SIGKILL, "signal: sigkill");
	ok(cli_parse_signal("9") == 9, "signal: number");
	ok(cli_parse_signal("NOPE") == -EINVAL && cli_parse_signal("0") == -EINVAL,
	   "signal: unknown refused");
	ok(!strcmp(cli_signal_name(SIGINT), "INT"), "signal: name");
	ev = json_pack("{s:s,s:i}", "type", "exit", "exit_code", 3);
	ok(cli_exit_status(ev) == 3, "exit: code");
	json_decref(ev);
	ev = json_pack("{s:n,s:i}", "exit_code", "signal", 9);
	ok(cli_exit_status(ev) == 137, "exit: killed -> 128+sig");
	json_decref(ev);
	ev = json_pack("{s:i,s:b}", "exit_code", 0, "timed_out", 1);
	ok(cli_exit_status(ev) == 124, "exit: timed out -> 124");
	json_decref(ev);
	ev = json_pack("{s:s}", "signal", "KILL");
	ok(cli_exit_status(ev) == 137, "exit: signal by name");
	json_decref(ev);
	ok(cli_exit_status(NULL) == 125, "exit: missing -> 125");
}

static void test_pathf(void)
{
	char *p = cli_pathf("/v1/sandboxes/%s/fs/stat?path=%s&depth=%d", "sb 1", "/a b/c&d=e", 2);

	ok(p && !strcmp(p, "/v1/sandboxes/sb%201/fs/stat?path=/a%20b/c%26d%3De&depth=2"),
	   "pathf: escapes values, keeps literal text");
	free(p);
	p = cli_pathf("/x/%ld/%%", 123456789012L);
	ok(p && !strcmp(p, "/x/123456789012/%"), "pathf: %ld and %%");
	free(p);
	p = cli_pathf("/x?l=%s", "\xc3\xa9");
	ok(p && !strcmp(p, "/x?l=%C3%A9"), "pathf: UTF-8 percent-encoded");
	free(p);
}

static void test_b64(void)
{
	unsigned char out[16];
	char enc[32];

	ok(cli_b64_decode("aGVsbG8=", 8, out) == 5 && !memcmp(out, "hello", 5), "b64: decode");
	ok(cli_b64_decode("aGk=", 4, out) == 2 && !memcmp(out, "hi", 2), "b64: one pad");
	ok(cli_b64_decode("", 0, out) == 0, "b64: empty");
	ok(cli_b64_decode("aGVsbG8", 7, out) == -EINVAL, "b64: bad length");
	ok(cli_b64_decode("a=Vs", 4, out) == -EINVAL, "b64: pad in the middle");
	ok(cli_b64_decode("aG*s", 4, out) == -EINVAL, "b64: bad char");
	ok(cli_b64_encode((const unsigned char *)"hello", 5, enc) == 8 && !strcmp(enc, "aGVsbG8="),
	   "b64: encode");
}

static void test_url(void)
{
	char host[64], prefix[64];
	int port;

	ok(cli_parse_url("http://127.0.0.1:8080", host, sizeof(host), &port, prefix,
			 sizeof(prefix)) == 0 &&
		   !strcmp(host, "127.0.0.1") && port == 8080 && !*prefix,
	   "url: host and port");
	ok(cli_parse_url("http://h/api/", host, sizeof(host), &port, prefix, sizeof(prefix)) == 0 &&
		   port == 80 && !strcmp(prefix, "/api"),
	   "url: default port, prefix");
	ok(cli_parse_url("https://h", host, sizeof(host), &port, prefix, sizeof(prefix)) == -EINVAL,
	   "url: https refused for raw sockets");
	ok(cli_parse_url("http://h:99999", host, sizeof(host), &port, prefix, sizeof(prefix)) ==
		   -EINVAL,
	   "url: bad port");
}

static void test_seconds(void)
{
	long v;

	ok(cli_parse_seconds("30", &v) == 0 && v == 30, "seconds: 30");
	ok(cli_parse_seconds("-1", &v) == -EINVAL, "seconds: negative refused");
	ok(cli_parse_seconds("3s", &v) == -EINVAL, "seconds: suffix refused");
}

static void test_table(void)
{
	static const char *const head[] = {"ID", "STATE", "LABELS"};
	const char *r1[] = {"abc123", "running", "a=1"};
	const char *r2[] = {"x", "\u2713ok", NULL};
	struct table *t = table_new(head, 3);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	table_add(t, r1);
	table_add(t, r2);
	table_print(t, f);
	fclose(f);
	ok(!strcmp(buf, "ID       STATE     LABELS\n"
			"abc123   running   a=1\n"
			"x        \u2713ok       \n"),
	   "table: padded columns, UTF-8 width, last column unpadded");
	free(buf);
	table_free(t);
}

static void test_format(void)
{
	json_t *v;
	char buf[64], *s;

	out_fmt_size(512ull << 20, buf, sizeof(buf));
	ok(!strcmp(buf, "512M"), "size: 512M");
	out_fmt_size(1ull << 40, buf, sizeof(buf));
	ok(!strcmp(buf, "1.0T"), "size: 1T as 1.0T");
	out_fmt_size(1536ull << 20, buf, sizeof(buf));
	ok(!strcmp(buf, "1.5G"), "size: 1.5G");
	out_fmt_size(12, buf, sizeof(buf));
	ok(!strcmp(buf, "12B"), "size: bytes");
	v = json_integer(1000);
	out_fmt_age(v, 1000 + 7200, buf, sizeof(buf));
	ok(!strcmp(buf, "2 hours ago"), "age: epoch number");
	json_decref(v);
	v = json_string("1970-01-01T00:01:00Z");
	out_fmt_age(v, 61, buf, sizeof(buf));
	ok(!strcmp(buf, "1 second ago"), "age: RFC 3339");
	json_decref(v);
	v = json_pack("{s:s,s:s}", "z", "1", "a", "2");
	s = out_fmt_value(v);
	ok(s && !strcmp(s, "a=2,z=1"), "value: object sorted k=v");
	free(s);
	json_decref(v);
	s = out_fmt_value(NULL);
	ok(s && !strcmp(s, "-"), "value: missing is -");
	free(s);
}

/* Runs the option parser over argv (NULL-terminated) with exec's shape; returns the options
 * seen as a string ("w=/x e=A=1 ") and leaves the operands in ops. */
static void opt_run(char **argv, int free_tail, struct cli_globals *g, char *seen, size_t len,
		    char ***ops, int *nops)
{
	static const struct cli_opt t[] = {
		{"workdir", 'w', "DIR", "dir", 0},
		{"env", 'e', "KEY=VALUE", "env", 0},
		{"force", 'f', NULL, "force", 0},
		{NULL, 0, NULL, NULL, 0},
	};
	struct cli_optstate st = {.opts = t, .free_tail = free_tail, .g = g};
	int argc = 0, c;
	size_t n = 0;

	while (argv[argc])
		argc++;
	seen[0] = '\0';
	while ((c = cli_opt_next(&st, argc, argv)) != -1)
		n += (size_t)snprintf(seen + n, len - n, "%c=%s ", c < 128 ? c : '#',
				      optarg && c != 'f' ? optarg : "");
	*ops = argv + optind;
	*nops = argc - optind;
}

static bool ops_are(char **ops, int n, const char *const *want)
{
	int i;

	for (i = 0; i < n && want[i]; i++)
		if (strcmp(ops[i], want[i]))
			return false;
	return i == n && !want[i];
}

static void test_opttab(void)
{
	struct cli_globals g = {0};
	char seen[256], **ops;
	int n;
	char *a1[] = {"exec", "ID", "-w", "/x", "--", "pwd", "-l", NULL};
	char *a2[] = {"exec", "-e", "A=1", "ID", "sh", "-c", "echo", "-w", NULL};
	char *a3[] = {"rm", "a", "-f", "b", "--json", "c", NULL};
	char *a4[] = {"rm", "a", "--", "-f", NULL};
	char *a5[] = {"ls", "--socket", "/s", "-q", "--url=http://h:1", NULL};
	char *a6[] = {"ls", "--json", NULL};

	opt_run(a1, 2, &g, seen, sizeof(seen), &ops, &n);
	ok(!strcmp(seen, "w=/x ") &&
		   ops_are(ops, n, (const char *const[]){"ID", "pwd", "-l", NULL}),
	   "opttab: exec ID -w /x -- pwd -l: option after the id, tail kept");
	opt_run(a2, 2, &g, seen, sizeof(seen), &ops, &n);
	ok(!strcmp(seen, "e=A=1 ") &&
		   ops_are(ops, n, (const char *const[]){"ID", "sh", "-c", "echo", "-w", NULL}),
	   "opttab: the command's own flags are not parsed");
	opt_run(a3, 0, &g, seen, sizeof(seen), &ops, &n);
	ok(!strcmp(seen, "f= ") && g.json &&
		   ops_are(ops, n, (const char *const[]){"a", "b", "c", NULL}),
	   "opttab: options and globals between operands");
	opt_run(a4, 0, &g, seen, sizeof(seen), &ops, &n);
	ok(!*seen && ops_are(ops, n, (const char *const[]){"a", "-f", NULL}),
	   "opttab: -- ends options");
	memset(&g, 0, sizeof(g));
	opt_run(a5, 0, &g, seen, sizeof(seen), &ops, &n);
	ok(!*seen && n == 0 && g.quiet && !strcmp(g.socket, "/s") && !strcmp(g.url, "http://h:1"),
	   "opttab: global options with values are stored, not returned");
	opt_run(a6, 0, NULL, seen, sizeof(seen), &ops, &n);
	ok(!strcmp(seen, "?= "), "opttab: without globals --json is unknown");
}

int main(void)
{
	printf("1..96\n");
	test_opttab();
	test_kv();
	test_cp_arg();
	test_cp_map();
	test_path_split();
	test_sandbox_args();
	test_signals_and_exit();
	test_pathf();
	test_b64();
	test_url();
	test_seconds();
	test_table();
	test_format();
	if (test_no != 96)
		printf("# planned 96 tests, ran %d\n", test_no);
	return failures ? 1 : 0;
}
