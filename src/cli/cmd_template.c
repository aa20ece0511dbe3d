/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_template: `isola template import|pull|ls|inspect|rm` — root filesystems sandboxes start from. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/imageref.h"
#include "../common/util.h"
#include "buildctx.h"
#include "cptar.h"
#include "filetype.h"
#include "output.h"
#include "parse.h"
#include "progress.h"

/* State of an import or pull while its reply streams. */
struct import {
	bool json;	   /* NDJSON passthrough */
	struct progress p; /* the lines on stderr (a terminal) */
	bool up_done;	   /* --json: the upload's last progress line is out */
	json_t *tmpl;	   /* the template from the done event (owned) */
	char *error;	   /* message of an error event (owned) */
};

static void on_upload(void *ud, uint64_t sent, uint64_t total)
{
	struct import *im = ud;

	/* --json: the upload's progress as NDJSON too, like the server's phases. */
	if (im->json && !im->up_done && (sent == total || util_now_ms() - im->p.last_draw >= 250)) {
		json_t *ev = json_pack("{s:s,s:s,s:I,s:I}", "type", "progress", "phase", "upload",
				       "done", (json_int_t)sent, "total", (json_int_t)total);

		im->p.last_draw = util_now_ms();
		im->up_done = sent == total; /* curl reports the end again, after the reply */
		if (ev)
			out_json_line(stdout, ev);
		json_decref(ev);
	}
	progress_update(&im->p, "uploading", NULL, sent, total, sent == total);
}

static int on_event(void *ud, json_t *ev, struct isola_err **err)
{
	struct import *im = ud;
	const char *type = json_string_value(json_object_get(ev, "type"));

	if (im->json)
		out_json_line(stdout, ev);
	if (!type)
		return 0;
	if (!strcmp(type, "progress")) {
		const char *phase = json_string_value(json_object_get(ev, "phase"));
		json_int_t done = json_integer_value(json_object_get(ev, "done"));
		json_int_t total = json_integer_value(json_object_get(ev, "total"));

		progress_update(&im->p, phase && *phase ? phase : "importing", NULL,
				done > 0 ? (uint64_t)done : 0, total > 0 ? (uint64_t)total : 0,
				done == total);
	} else if (!strcmp(type, "step") && !im->json) {
		fprintf(stderr, "Step %lld/%lld: %s\n",
			(long long)json_integer_value(json_object_get(ev, "step")),
			(long long)json_integer_value(json_object_get(ev, "total")),
			json_string_value(json_object_get(ev, "instruction")));
	} else if (!strcmp(type, "pull") && !im->json) {
		fprintf(stderr, "Pulling %s as template %s\n",
			json_string_value(json_object_get(ev, "ref")),
			json_string_value(json_object_get(ev, "template")));
	} else if (!strcmp(type, "output") && !im->json) {
		/* UNTRUSTED: a RUN step's output; control bytes shown as '?'. */
		const char *l = json_string_value(json_object_get(ev, "line"));

		fputs("  ", stderr);
		for (; l && *l; l++)
			fputc((unsigned char)*l < 0x20 && *l != '\t' ? '?' : *l, stderr);
		fputc('\n', stderr);
	} else if (!strcmp(type, "layer") && !im->json) {
		fprintf(stderr, " ---> %s (%lld ms)\n",
			json_is_true(json_object_get(ev, "cached")) ? "cached" : "done",
			(long long)json_integer_value(json_object_get(ev, "ms")));
	} else if (!strcmp(type, "done")) {
		json_decref(im->tmpl);
		im->tmpl = json_incref(json_object_get(ev, "template"));
	} else if (!strcmp(type, "error")) {
		const char *msg = json_string_value(json_object_get(ev, "message"));

		free(im->error);
		im->error = strdup(msg ? msg : "import failed");
	}
	return 0;
}

/* Sends an import or pull request and follows its NDJSON reply: prints `NAME [ORIGIN]` (human
 * mode) and returns the exit status. Frees what im collected. */
static int stream_result(struct cli *cli, struct client *c, struct client_req *req,
			 struct import *im, const char *what)
{
	cleanup_err struct isola_err *err = NULL;
	int status = CLI_EXIT_OK, r = client_do(c, req, &err);

	progress_end(&im->p);
	if (r < 0) {
		status = cli_fail(err, CLI_EXIT_FAIL);
	} else if (im->error || !im->tmpl) {
		if (!cli->json)
			fprintf(stderr, "isola: %s\n",
				im->error ? im->error : "no result at the end of the stream");
		status = CLI_EXIT_FAIL;
	} else if (!cli->json) {
		const char *name = json_string_value(json_object_get(im->tmpl, "name"));
		const char *origin = json_string_value(json_object_get(im->tmpl, "origin"));

		printf("%s%s%s\n", name ? name : what, origin ? " " : "", origin ? origin : "");
	}
	json_decref(im->tmpl);
	free(im->error);
	return status;
}

/*
 * Opens what `template import` uploads, refusing what the server would refuse only after the
 * upload: a tar (any compression) as is; an OCI layout directory as a tar made in a temporary
 * file; anything else named by its kind. -1 after printing why.
 */
static int open_import_source(const char *path)
{
	cleanup_err struct isola_err *err = NULL;
	char what[128] = "", tmp[] = "/tmp/isola-import-XXXXXX";
	int fd;

	switch (cli_import_classify(path, what, sizeof(what))) {
	case CLI_IMPORT_TAR:
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fprintf(stderr, "isola: `%s`: %s\n", path, strerror(errno));
		return fd;
	case CLI_IMPORT_OCI_DIR:
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "isola: create a temporary file: %s\n", strerror(errno));
			return -1;
		}
		unlink(tmp);
		if (cptar_create(path, ".", fd, &err) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
			fprintf(stderr, "isola: archive `%s`: %s\n", path,
				err ? err->message : strerror(errno));
			close(fd);
			return -1;
		}
		return fd;
	case CLI_IMPORT_OTHER_DIR:
		fprintf(stderr,
			"isola: `%s` is a directory but not an OCI layout (no oci-layout and "
			"index.json); for a root filesystem, import `tar -C %s -cf rootfs.tar .`\n",
			path, path);
		return -1;
	case CLI_IMPORT_NOT_TAR:
	default:
		fprintf(stderr,
			"isola: `%s` is %s, not a tar archive or OCI layout (import takes an OCI "
			"layout, a docker save archive or a root filesystem tarball)\n",
			path, what);
		return -1;
	}
}

static int tmpl_import(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	cleanup_fd int fd = -1;
	struct import im = {.json = cli->json, .p.tty = !cli->json && isatty(STDERR_FILENO)};
	struct client_req req = {.method = "POST",
				 .content_type = "application/x-tar",
				 .accept = "application/x-ndjson",
				 .on_event = on_event,
				 .ud = &im};
	struct client *c;
	struct stat st;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 2)
		return cli_usage_err(cli, "expected NAME and FILE.tar");
	fd = open_import_source(argv[optind + 1]);
	if (fd < 0)
		return CLI_EXIT_FAIL;
	if (fstat(fd, &st) < 0) {
		fprintf(stderr, "isola: `%s`: %s\n", argv[optind + 1], strerror(errno));
		return CLI_EXIT_FAIL;
	}
	c = cli_client(cli);
	path = cli_pathf("/v1/templates?name=%s", argv[optind]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	req.path = path;
	req.body_fd = fd;
	req.body_size = S_ISREG(st.st_mode) ? st.st_size : -1;
	req.on_upload = on_upload;
	return stream_result(cli, c, &req, &im, "import");
}

/* SOURCE as users read it: `import`, `pull REF@sha256:…`, `host`. */
static const char *source_text(const json_t *t, char *buf, size_t n)
{
	const char *src = json_string_value(json_object_get(t, "source"));
	const char *origin = json_string_value(json_object_get(t, "origin"));

	if (src && !strcmp(src, "pull") && origin)
		snprintf(buf, n, "pull %s", origin);
	else if (src &&
		 (!strcmp(src, "oci") || !strcmp(src, "docker-archive") || !strcmp(src, "rootfs")))
		snprintf(buf, n, "import (%s)", src);
	else
		snprintf(buf, n, "%s", src ? src : "-");
	return buf;
}

static void print_templates(const json_t *list)
{
	static const char *const head[] = {"NAME", "SIZE", "LAYERS", "SOURCE", "CREATED"};
	struct table *tab = table_new(head, ARRAY_SIZE(head));
	double now = util_wall_time();
	const json_t *t;
	size_t i;

	json_array_foreach(list, i, t)
	{
		const json_t *sz = json_object_get(t, "size_bytes") ?: json_object_get(t, "size");
		const json_t *img = json_object_get(t, "image_size_bytes");
		const char *name = json_string_value(json_object_get(t, "name"));
		char size[80] = "-", age[64], layers[16], src[800];
		const char *row[5] = {name ? name : "", size, layers,
				      source_text(t, src, sizeof(src)), age};

		if (json_is_integer(sz))
			out_fmt_size((uint64_t)json_integer_value(sz), size, sizeof(size));
		if (json_is_integer(img)) { /* the microvm tier's image of it, once built */
			char b[32];

			out_fmt_size((uint64_t)json_integer_value(img), b, sizeof(b));
			snprintf(size + strlen(size), sizeof(size) - strlen(size), " (vm %s)", b);
		} else if (json_is_object(json_object_get(t, "image_build"))) {
			const char *st = json_string_value(
				json_object_get(json_object_get(t, "image_build"), "state"));

			snprintf(size + strlen(size), sizeof(size) - strlen(size), " (vm %s)",
				 st ? st : "building");
		}
		snprintf(layers, sizeof(layers), "%lld",
			 (long long)json_integer_value(json_object_get(t, "layers")));
		out_fmt_age(json_object_get(t, "created_at"), now, age, sizeof(age));
		if (tab)
			table_add(tab, row);
	}
	if (tab)
		table_print(tab, stdout);
	table_free(tab);
}

static int tmpl_ls(struct cli *cli, int argc, char **argv)
{
	static const struct cli_show show = {.path = "/v1/templates",
					     .list = "templates",
					     .json_list = true,
					     .print = print_templates};

	return cli_show(cli, argc, argv, &show);
}

static int tmpl_inspect(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct client *c;
	json_t *t = NULL;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 1)
		return cli_usage_err(cli, "expected one template NAME");
	c = cli_client(cli);
	path = cli_pathf("/v1/templates/%s", argv[optind]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	if (client_json(c, "GET", path, NULL, &t, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	out_json(stdout, t); /* JSON either way, like docker inspect */
	json_decref(t);
	return CLI_EXIT_OK;
}

/* Credentials for registry from docker's config.json ($DOCKER_CONFIG or ~/.docker): the
 * `auth` of auths[registry] (base64 user:password). false when there are none. */
static bool docker_auth(const char *registry, char *user, size_t usz, char *pass, size_t psz)
{
	const char *dir = getenv("DOCKER_CONFIG"), *home = getenv("HOME");
	char path[4096], keys[4][300];
	unsigned char dec[1024];
	json_t *cfg, *auths;
	long n = -1;

	if (dir && *dir)
		snprintf(path, sizeof(path), "%s/config.json", dir);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/.docker/config.json", home);
	else
		return false;
	cfg = json_load_file(path, 0, NULL);
	auths = json_object_get(cfg, "auths");
	if (!strcmp(registry, "docker.io")) {
		snprintf(keys[0], sizeof(keys[0]), "https://index.docker.io/v1/");
		snprintf(keys[1], sizeof(keys[1]), "index.docker.io");
	} else {
		snprintf(keys[0], sizeof(keys[0]), "https://%s", registry);
		snprintf(keys[1], sizeof(keys[1]), "http://%s", registry);
	}
	snprintf(keys[2], sizeof(keys[2]), "%s", registry);
	snprintf(keys[3], sizeof(keys[3]), "https://%s/", registry);
	for (int i = 0; i < 4 && n < 0; i++) {
		json_t *a = json_object_get(json_object_get(auths, keys[i]), "auth");
		const char *b64 = json_string_value(a);

		if (b64 && json_string_length(a) / 4 * 3 < sizeof(dec))
			n = cli_b64_decode(b64, json_string_length(a), dec);
	}
	json_decref(cfg);
	if (n <= 0)
		return false;
	dec[n] = '\0';
	{
		char *colon = strchr((char *)dec, ':');

		if (!colon)
			return false;
		*colon = '\0';
		if (strlen((char *)dec) >= usz || strlen(colon + 1) >= psz)
			return false;
		memcpy(user, dec, strlen((char *)dec) + 1);
		memcpy(pass, colon + 1, strlen(colon + 1) + 1);
	}
	return true;
}

/* Reads a password from stdin (up to a newline or EOF). */
static int read_password(char *buf, size_t n)
{
	size_t o = 0;

	while (o + 1 < n) {
		ssize_t k = read(STDIN_FILENO, buf + o, n - 1 - o);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		o += (size_t)k;
	}
	buf[o] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return o ? 0 : -ENODATA;
}

enum { OPT_USERNAME = 256, OPT_PASSWORD_STDIN, OPT_CA_FILE, OPT_PLAIN_HTTP };

const struct cli_opt cli_template_pull_opts[] = {
	{"username", OPT_USERNAME, "USER", "registry user (else docker's config.json auths)", 0},
	{"password-stdin", OPT_PASSWORD_STDIN, NULL, "read the registry password from stdin", 0},
	{"ca-file", OPT_CA_FILE, "FILE", "PEM certificate(s) to trust for the registry's TLS", 0},
	{"plain-http", OPT_PLAIN_HTTP, NULL, "speak plain HTTP to the registry (no TLS)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static int tmpl_pull(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *ca = NULL;
	struct import im = {.json = cli->json, .p.tty = !cli->json && isatty(STDERR_FILENO)};
	struct client_req req = {.method = "POST",
				 .path = "/v1/templates/pull",
				 .content_type = "application/json",
				 .accept = "application/x-ndjson",
				 .body_fd = -1,
				 .on_event = on_event,
				 .ud = &im};
	char user[256] = "", pass[1024] = "";
	const char *ca_file = NULL;
	bool pw_stdin = false, plain = false;
	struct imageref ref;
	struct client *c;
	json_t *body;
	size_t len;
	int opt, status;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == OPT_USERNAME)
			snprintf(user, sizeof(user), "%s", optarg);
		else if (opt == OPT_PASSWORD_STDIN)
			pw_stdin = true;
		else if (opt == OPT_CA_FILE)
			ca_file = optarg;
		else if (opt == OPT_PLAIN_HTTP)
			plain = true;
		else
			return cli_bad_opt(cli, argc, argv, opt);
	}
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_err(cli, "expected REF and an optional NAME");
	if (imageref_parse(argv[optind], &ref) < 0)
		return cli_usage_err(
			cli,
			"`%.200s` is not an image reference "
			"([registry/]repository[:tag][@sha256:hex], lower-case repository)",
			argv[optind]);
	if (pw_stdin && !user[0])
		return cli_usage_err(cli, "--password-stdin needs --username");
	if (pw_stdin && read_password(pass, sizeof(pass)) < 0) {
		fprintf(stderr, "isola: --password-stdin: no password on stdin\n");
		return CLI_EXIT_FAIL;
	}
	if (!user[0])
		docker_auth(ref.registry, user, sizeof(user), pass, sizeof(pass));
	/* The certificate travels as text: isolad never opens a path a client names. */
	if (ca_file && util_read_file(ca_file, 1 << 20, &ca, &len) < 0) {
		fprintf(stderr, "isola: --ca-file `%s`: %s\n", ca_file, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	body = json_pack("{s:s, s:b}", "ref", argv[optind], "plain_http", plain);
	if (body && argc - optind == 2)
		json_object_set_new(body, "name", json_string(argv[optind + 1]));
	if (body && user[0]) {
		json_object_set_new(body, "username", json_string(user));
		json_object_set_new(body, "password", json_string(pass));
	}
	if (body && ca)
		json_object_set_new(body, "ca_pem", json_string(ca));
	explicit_bzero(pass, sizeof(pass));
	c = cli_client(cli);
	if (!c || !body) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	req.body = body;
	status = stream_result(cli, c, &req, &im, "pull");
	json_decref(body);
	return status;
}

enum { OPT_BUILD_ARG = 300, OPT_ALLOW, OPT_TIER, OPT_BUILD_CPU, OPT_BUILD_MEMORY };

const struct cli_opt cli_template_build_opts[] = {
	{"file", 'f', "FILE", "the Dockerfile (default CONTEXT/Dockerfile)", 0},
	{"build-arg", OPT_BUILD_ARG, "K=V", "value of an ARG (repeatable)", 0},
	{"allow", OPT_ALLOW, "DOMAIN", "egress RUN steps may reach (repeatable; default none)", 0},
	{"tier", OPT_TIER, "TIER", "tier the RUN steps run in: process (default) or microvm", 0},
	{"cpu", OPT_BUILD_CPU, "N", "CPU limit of its sandboxes when their create sets none", 0},
	{"memory", OPT_BUILD_MEMORY, "SIZE", "memory limit of its sandboxes likewise, e.g. 1G", 0},
	{NULL, 0, NULL, NULL, 0},
};

static int tmpl_build(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL, *opts_text = NULL, *dfpath = NULL;
	cleanup_fd int fd = -1;
	struct import im = {.json = cli->json, .p.tty = false};
	struct client_req req = {.method = "POST",
				 .content_type = "application/x-tar",
				 .accept = "application/x-ndjson",
				 .on_event = on_event,
				 .ud = &im};
	char tmp[] = "/tmp/isola-build-XXXXXX";
	json_t *opts = json_pack("{s:s, s:{}, s:[]}", "dockerfile", BUILDCTX_DOCKERFILE,
				 "build_args", "allow");
	const char *file = NULL;
	struct client *c;
	struct stat st;
	int opt;

	if (!opts)
		return CLI_EXIT_FAIL;
	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 'f') {
			file = optarg;
		} else if (opt == OPT_BUILD_ARG) {
			char *eq = strchr(optarg, '=');

			if (!eq || eq == optarg) {
				json_decref(opts);
				return cli_usage_err(cli, "--build-arg `%s`: expected K=V", optarg);
			}
			*eq = '\0';
			json_object_set_new(json_object_get(opts, "build_args"), optarg,
					    json_string(eq + 1));
		} else if (opt == OPT_ALLOW) {
			json_array_append_new(json_object_get(opts, "allow"), json_string(optarg));
		} else if (opt == OPT_BUILD_CPU || opt == OPT_BUILD_MEMORY) {
			if ((opt == OPT_BUILD_CPU
				     ? cli_set_cpu(opts, optarg, &err)
				     : cli_set_size(opts, "memory", optarg, &err)) < 0) {
				json_decref(opts);
				return cli_usage_err(cli, "%s", err->message);
			}
		} else if (opt == OPT_TIER) {
			/* isolad checks it (one place says which tiers exist) */
			json_object_set_new(opts, "tier", json_string(optarg));
		} else {
			json_decref(opts);
			return cli_bad_opt(cli, argc, argv, opt);
		}
	}
	if (argc - optind != 2) {
		json_decref(opts);
		return cli_usage_err(cli, "expected NAME and CONTEXT");
	}
	if (!json_array_size(json_object_get(opts, "allow")))
		json_object_del(opts, "allow");
	if (!file && asprintf(&dfpath, "%s/Dockerfile", argv[optind + 1]) < 0)
		dfpath = NULL;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		json_decref(opts);
		fprintf(stderr, "isola: create a temporary file: %s\n", strerror(errno));
		return CLI_EXIT_FAIL;
	}
	unlink(tmp);
	if (buildctx_write(argv[optind + 1], file ? file : dfpath, fd, &err) < 0 ||
	    lseek(fd, 0, SEEK_SET) < 0 || fstat(fd, &st) < 0) {
		json_decref(opts);
		fprintf(stderr, "isola: %s\n", err ? err->message : strerror(errno));
		return CLI_EXIT_FAIL;
	}
	opts_text = json_dumps(opts, JSON_COMPACT);
	json_decref(opts);
	c = cli_client(cli);
	path = opts_text ? cli_pathf("/v1/templates/build?name=%s&options=%s", argv[optind],
				     opts_text)
			 : NULL;
	if (!c || !path)
		return CLI_EXIT_FAIL;
	req.path = path;
	req.body_fd = fd;
	req.body_size = st.st_size;
	return stream_result(cli, c, &req, &im, "build");
}

static int tmpl_rm(struct cli *cli, int argc, char **argv)
{
	int opt, status = CLI_EXIT_OK;
	struct client *c;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (optind >= argc)
		return cli_usage_err(cli, "missing template NAME");
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	for (int i = optind; i < argc; i++) {
		cleanup_err struct isola_err *err = NULL;
		cleanup_free char *path = cli_pathf("/v1/templates/%s", argv[i]);

		if (path && client_json(c, "DELETE", path, NULL, NULL, &err) == 0) {
			if (!cli->json)
				printf("%s\n", argv[i]);
			continue;
		}
		fprintf(stderr, "isola: template rm %s: %s\n", argv[i],
			err ? err->message : "out of memory");
		status = CLI_EXIT_FAIL;
	}
	if (cli->json && status == CLI_EXIT_OK) {
		json_t *res = json_object();

		out_json(stdout, res);
		json_decref(res);
	}
	return status;
}

/* The build cache's entries: key (12 hex), kind, size, last used, tenant, instruction. */
static void print_cache(const json_t *list)
{
	static const char *const head[] = {"KEY",	"KIND",	  "SIZE",
					   "LAST USED", "TENANT", "INSTRUCTION"};
	struct table *tab = table_new(head, ARRAY_SIZE(head));
	double now = util_wall_time();
	const json_t *e;
	size_t i;

	json_array_foreach(list, i, e)
	{
		const char *key = json_string_value(json_object_get(e, "key"));
		const char *ins = json_string_value(json_object_get(e, "instruction"));
		const char *ten = json_string_value(json_object_get(e, "tenant"));
		const char *kind = json_string_value(json_object_get(e, "kind"));
		char k[16], size[32], age[64], in[64];
		const char *row[6] = {k, kind ? kind : "", size, age, ten ? ten : "-", in};

		snprintf(k, sizeof(k), "%.12s", key ? key : "");
		out_fmt_size((uint64_t)json_integer_value(json_object_get(e, "size_bytes")), size,
			     sizeof(size));
		out_fmt_age(json_object_get(e, "last_used_at"), now, age, sizeof(age));
		snprintf(in, sizeof(in), "%.60s", ins ? ins : "-");
		if (tab)
			table_add(tab, row);
	}
	if (tab)
		table_print(tab, stdout);
	table_free(tab);
}

enum { OPT_CACHE_ALL = 400, OPT_CACHE_OLDER };

const struct cli_opt cli_template_cache_opts[] = {
	{"all", OPT_CACHE_ALL, NULL, "prune: every entry you may see", 0},
	{"older-than", OPT_CACHE_OLDER, "DUR", "prune: entries unused for DUR (90s, 15m, 24h, 7d)",
	 0},
	{NULL, 0, NULL, NULL, 0},
};

/* template cache ls | prune (--all | --older-than DUR): GET /v1/templates/build/cache,
 * POST /v1/templates/build/cache/prune. */
static int tmpl_cache(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *body = NULL, *reply = NULL, *v;
	uint64_t older = 0;
	bool all = false, have_older = false;
	const char *what;
	struct client *c;
	size_t i;
	int opt;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == OPT_CACHE_ALL) {
			all = true;
		} else if (opt == OPT_CACHE_OLDER) {
			if (util_parse_duration(optarg, 10ull * 365 * 86400, &older) < 0)
				return cli_usage_err(cli,
						     "--older-than `%s`: expected a duration such "
						     "as 90s, 15m, 24h or 7d",
						     optarg);
			have_older = true;
		} else {
			return cli_bad_opt(cli, argc, argv, opt);
		}
	}
	if (argc - optind != 1)
		return cli_usage_err(cli, "expected ls or prune");
	what = argv[optind];
	if (!strcmp(what, "ls")) {
		if (all || have_older)
			return cli_usage_err(cli, "--all and --older-than are for prune");
		c = cli_client(cli);
		if (!c)
			return CLI_EXIT_FAIL;
		if (client_json(c, "GET", "/v1/templates/build/cache", NULL, &reply, &err) < 0)
			return cli_fail(err, CLI_EXIT_FAIL);
		if (cli->json)
			out_json(stdout, json_object_get(reply, "entries"));
		else
			print_cache(json_object_get(reply, "entries"));
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	if (strcmp(what, "prune"))
		return cli_usage_err(cli, "unknown cache action `%s`: expected ls or prune", what);
	if (all == have_older)
		return cli_usage_err(cli, "prune: give one of --all or --older-than DUR");
	body = all ? json_pack("{s:b}", "all", 1)
		   : json_pack("{s:I}", "older_than", (json_int_t)older);
	c = cli_client(cli);
	if (!c || !body ||
	    client_json(c, "POST", "/v1/templates/build/cache/prune", body, &reply, &err) < 0) {
		json_decref(body);
		return c && body ? cli_fail(err, CLI_EXIT_FAIL) : CLI_EXIT_FAIL;
	}
	json_decref(body);
	if (cli->json) {
		out_json(stdout, reply);
	} else {
		char size[32];

		json_array_foreach(json_object_get(reply, "removed"), i, v)
			printf("%s\n", json_string_value(v));
		out_fmt_size((uint64_t)json_integer_value(json_object_get(reply, "freed_bytes")),
			     size, sizeof(size));
		if (!cli->quiet)
			fprintf(stderr, "isola: pruned %zu build cache entries, %s freed\n",
				json_array_size(json_object_get(reply, "removed")), size);
	}
	json_decref(reply);
	return CLI_EXIT_OK;
}

static const struct cli_cmd cli_template_cmds[] = {
	{"import", tmpl_import, "NAME FILE.tar|OCI-DIR",
	 "import an OCI layout, a docker save archive or a root filesystem tarball",
	 .example = "isola template import py ./rootfs.tar.zst"},
	{"pull", tmpl_pull, "REF [NAME]", "pull an image from an OCI registry",
	 .opts = cli_template_pull_opts,
	 .example = "isola template pull --plain-http 127.0.0.1:5000/tools:1 tools"},
	{"build", tmpl_build, "NAME CONTEXT", "build a template from a Dockerfile",
	 .opts = cli_template_build_opts,
	 .example = "isola template build --build-arg V=1 py ./ctx"},
	{"ls", tmpl_ls, "", "list templates", .example = "isola template ls"},
	{"cache", tmpl_cache, "ls|prune", "list or prune the build cache",
	 .opts = cli_template_cache_opts, .example = "isola template cache prune --older-than 7d"},
	{"inspect", tmpl_inspect, "NAME", "show one template as JSON",
	 .example = "isola template inspect py"},
	{"rm", tmpl_rm, "NAME...", "remove templates", .example = "isola template rm py"},
};
const struct cli_group cli_template_group = {"template", cli_template_cmds,
					     ARRAY_SIZE(cli_template_cmds)};
