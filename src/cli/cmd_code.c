/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_code: isola code — run code in a sandbox's code interpreter, print its output, save its images. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"
#include "client.h"
#include "output.h"
#include "mcp/text.h"
#include "parse.h"

#define CODE_MAX (1u << 20) /* bytes of code, the API's JSON body cap */

enum { OPT_OUT = 'o', OPT_LANG = 'l', OPT_CTX = 'c', OPT_TIMEOUT = 't', OPT_ENV = 'e' };

const struct cli_opt cli_code_opts[] = {
	{"lang", OPT_LANG, "LANG", "python (default), js, ts, bash, or an alias", 0},
	{"context", OPT_CTX, "CTX", "run in this context (an id from the API or SDK)", 0},
	{"out", OPT_OUT, "DIR", "save image results (png, svg, jpeg) into DIR", 0},
	{"env", OPT_ENV, "KEY=VALUE", "set an environment variable for this run (repeatable)", 0},
	{"timeout", OPT_TIMEOUT, "SECONDS", "stop waiting after this long", 0},
	{NULL, 0, NULL, NULL, 0},
};

struct code_run {
	bool json;	 /* --json: print the events */
	const char *out; /* --out DIR, or NULL */
	unsigned images; /* images saved so far */
	bool failed;	 /* an error event came */
};

/* Saves one image result field (base64 for png/jpeg, text for svg) as DIR/result-N.EXT. */
static int save_image(struct code_run *cr, const char *ext, const char *data, bool b64,
		      struct isola_err **err)
{
	cleanup_free unsigned char *buf = NULL;
	cleanup_free char *clean = NULL;
	char path[4096];
	size_t n = strlen(data);
	long len = (long)n;
	int fd, r = 0;

	if (b64) {
		size_t k = 0;

		/* Jupyter wraps base64 at 76 columns: the line breaks go first */
		clean = malloc(n + 1);
		buf = malloc(n / 4 * 3 + 3);
		if (!buf || !clean)
			return isola_err_set(err, ENOMEM, NULL, "out of memory");
		for (size_t i = 0; i < n; i++)
			if (data[i] != '\n' && data[i] != '\r' && data[i] != ' ')
				clean[k++] = data[i];
		/* UNTRUSTED: a result from the sandbox; only decoded and written to our file */
		len = cli_b64_decode(clean, k, buf);
		if (len < 0)
			return isola_err_set(err, EPROTO, "internal",
					     "%s result with malformed base64", ext);
	}
	snprintf(path, sizeof(path), "%s/result-%u.%s", cr->out, ++cr->images, ext);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return isola_err_sys(err, errno, NULL, "open `%s`", path);
	if (util_write_all(fd, b64 ? (const void *)buf : (const void *)data, (size_t)len) < 0)
		r = isola_err_sys(err, errno, NULL, "write `%s`", path);
	close(fd);
	if (r == 0)
		printf("%s\n", path);
	return r;
}

static const struct {
	const char *field; /* result field */
	const char *ext;   /* file extension */
	bool b64;	   /* base64 in the event */
} image_fields[] = {{"png", "png", true}, {"jpeg", "jpg", true}, {"svg", "svg", false}};

static int on_result(struct code_run *cr, const json_t *ev, struct isola_err **err)
{
	const char *text = json_string_value(json_object_get(ev, "text"));
	bool image = false;

	for (size_t i = 0; i < ARRAY_SIZE(image_fields); i++) {
		const char *d = json_string_value(json_object_get(ev, image_fields[i].field));

		if (!d)
			continue;
		image = true;
		if (cr->out && save_image(cr, image_fields[i].ext, d, image_fields[i].b64, err) < 0)
			return -EIO;
		if (!cr->out)
			printf("[%s image: --out DIR saves it]\n", image_fields[i].field);
	}
	/* A figure's text is its repr ("<Figure size ...>"): the image stands for it. */
	if (text && !image)
		printf("%s\n", text);
	else if (!text && !image && json_is_string(json_object_get(ev, "html")))
		printf("%s\n", json_string_value(json_object_get(ev, "html")));
	return 0;
}

static int on_event(void *ud, json_t *ev, struct isola_err **err)
{
	struct code_run *cr = ud;
	const char *type = json_string_value(json_object_get(ev, "type"));

	if (!type)
		return 0;
	if (!strcmp(type, "error"))
		cr->failed = true;
	if (cr->json) {
		/* NDJSON: one compact event per line, as the API sent it */
		if (json_dumpf(ev, stdout, JSON_COMPACT) == 0)
			fputc('\n', stdout);
		fflush(stdout);
		return 0;
	}
	/* UNTRUSTED: the sandbox's output, copied to our stdout/stderr as it is */
	if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
		const char *t = json_string_value(json_object_get(ev, "text"));

		if (t) {
			FILE *f = type[3] == 'o' ? stdout : stderr;

			fputs(t, f);
			fflush(f);
		}
	} else if (!strcmp(type, "result")) {
		return on_result(cr, ev, err);
	} else if (!strcmp(type, "error")) {
		const char *tb = json_string_value(json_object_get(ev, "traceback"));

		fflush(stdout);
		if (tb && *tb && !isatty(STDERR_FILENO)) {
			/* IPython colours its tracebacks: plain text when not on a terminal */
			char *plain = strdup(tb);

			if (plain)
				mcp_strip_ansi(plain);
			fprintf(stderr, "%s\n", plain ? plain : tb);
			free(plain);
		} else if (tb && *tb)
			fprintf(stderr, "%s\n", tb);
		else
			fprintf(stderr, "%s: %s\n",
				json_string_value(json_object_get(ev, "name")) ?: "Error",
				json_string_value(json_object_get(ev, "value")) ?: "");
	}
	return 0;
}

/* Reads FILE or stdin (`-`) into a NUL-terminated buffer. */
static int read_code(const char *file, char **out, struct isola_err **err)
{
	int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	size_t n = 0, cap = 64 * 1024;
	char *b;

	if (fd < 0)
		return isola_err_sys(err, errno, "usage", "open `%s`", file);
	b = malloc(cap + 1);
	while (b) {
		ssize_t k;

		if (n == cap) {
			char *nb = cap >= CODE_MAX ? NULL : realloc(b, cap * 2 + 1);

			if (!nb) {
				free(b);
				b = NULL;
				if (cap >= CODE_MAX) {
					if (fd != STDIN_FILENO)
						close(fd);
					return isola_err_set(err, EFBIG, "usage",
							     "`%s`: code larger than %u bytes",
							     file, CODE_MAX);
				}
				break;
			}
			b = nb;
			cap *= 2;
		}
		k = read(fd, b + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;

			free(b);
			if (fd != STDIN_FILENO)
				close(fd);
			return isola_err_sys(err, e, NULL, "read `%s`", file);
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (!b)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	b[n] = '\0';
	*out = b;
	return 0;
}

int cmd_code(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL, *code = NULL;
	struct code_run cr = {.json = cli->json};
	const char *lang = NULL, *ctx = NULL;
	json_t *body, *env = json_object();
	struct client *c;
	long timeout = 0;
	struct stat st;
	int opt, r;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		switch (opt) {
		case OPT_LANG:
			lang = optarg;
			break;
		case OPT_CTX:
			ctx = optarg;
			break;
		case OPT_OUT:
			cr.out = optarg;
			break;
		case OPT_ENV:
			if (cli_parse_kv(env, optarg, "--env", &err) < 0) {
				json_decref(env);
				return cli_fail(err, CLI_EXIT_USAGE);
			}
			break;
		case OPT_TIMEOUT:
			if (cli_parse_seconds(optarg, &timeout) < 0 || timeout <= 0) {
				json_decref(env);
				return cli_usage_err(
					cli, "--timeout `%s` is not a number of seconds", optarg);
			}
			break;
		default:
			json_decref(env);
			return cli_bad_opt(cli, argc, argv, opt);
		}
	}
	if (argc - optind != 2) {
		json_decref(env);
		return cli_usage_err(cli, argc - optind < 2
						  ? "expected ID and FILE (or - for stdin)"
						  : "too many arguments");
	}
	if (cr.out && (stat(cr.out, &st) < 0 || !S_ISDIR(st.st_mode))) {
		json_decref(env);
		return cli_usage_err(cli, "--out `%s` is not a directory", cr.out);
	}
	if (read_code(argv[optind + 1], &code, &err) < 0) {
		json_decref(env);
		return cli_fail(err, CLI_EXIT_USAGE);
	}
	body = json_pack("{s:s}", "code", code);
	if (lang)
		json_object_set_new(body, "language", json_string(lang));
	if (ctx)
		json_object_set_new(body, "context", json_string(ctx));
	if (json_object_size(env))
		json_object_set(body, "env", env);
	json_decref(env);
	if (timeout)
		json_object_set_new(body, "timeout", json_integer(timeout));
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/code/execute", argv[optind]);
	if (!c || !path || !body) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	{
		struct client_req req = {
			.method = "POST",
			.path = path,
			.body = body,
			.body_fd = -1,
			.accept = "application/x-ndjson",
			.on_event = on_event,
			.ud = &cr,
		};

		r = client_do(c, &req, &err);
	}
	json_decref(body);
	fflush(stdout);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	return cr.failed ? CLI_EXIT_FAIL : 0;
}
