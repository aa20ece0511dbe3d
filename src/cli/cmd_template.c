/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_template: `isola template import|ls|rm` — root filesystems sandboxes start from. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"
#include "output.h"
#include "parse.h"

/* State of an import while its reply streams. */
struct import {
	bool json;	    /* NDJSON passthrough */
	bool bar;	    /* draw progress on stderr (a terminal) */
	bool line_open;	    /* a progress line is on screen without its newline */
	uint64_t last_draw; /* ms of the last redraw, to limit flicker */
	json_t *tmpl;	    /* the template from the done event (owned) */
	char *error;	    /* message of an error event (owned) */
};

static void draw(struct import *im, const char *phase, uint64_t done, uint64_t total, bool force)
{
	char a[32], b[32], bar[31];
	uint64_t now = util_now_ms();
	int pct = total ? (int)(done * 100 / total) : 0;

	if (!im->bar || (!force && now - im->last_draw < 100))
		return;
	im->last_draw = now;
	out_fmt_size(done, a, sizeof(a));
	out_fmt_size(total, b, sizeof(b));
	for (int i = 0; i < 30; i++)
		bar[i] = total && i < pct * 30 / 100 ? '#' : '-';
	bar[30] = '\0';
	if (total)
		fprintf(stderr, "\r\033[K%-12s [%s] %3d%%  %s/%s", phase, bar, pct, a, b);
	else
		fprintf(stderr, "\r\033[K%-12s %s", phase, a);
	im->line_open = true;
}

static void end_line(struct import *im)
{
	if (im->line_open)
		fputc('\n', stderr);
	im->line_open = false;
}

static void on_upload(void *ud, uint64_t sent, uint64_t total)
{
	draw(ud, "uploading", sent, total, sent == total);
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

		draw(im, phase ? phase : "importing", done > 0 ? (uint64_t)done : 0,
		     total > 0 ? (uint64_t)total : 0, done == total);
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

static int tmpl_import(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	cleanup_fd int fd = -1;
	struct import im = {.json = cli->json, .bar = !cli->json && isatty(STDERR_FILENO)};
	struct client_req req = {.method = "POST",
				 .content_type = "application/x-tar",
				 .accept = "application/x-ndjson",
				 .on_event = on_event,
				 .ud = &im};
	struct client *c;
	struct stat st;
	int opt, r, status = CLI_EXIT_OK;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 2)
		return cli_usage_err(cli, "expected NAME and FILE.tar");
	fd = open(argv[optind + 1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
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
	r = client_do(c, &req, &err);
	end_line(&im);
	if (r < 0) {
		status = cli_fail(err, CLI_EXIT_FAIL);
	} else if (im.error || !im.tmpl) {
		if (!cli->json)
			fprintf(stderr, "isola: %s\n",
				im.error ? im.error : "import ended without a result");
		status = CLI_EXIT_FAIL;
	} else if (!cli->json) {
		const char *name = json_string_value(json_object_get(im.tmpl, "name"));

		printf("%s\n", name ? name : argv[optind]);
	}
	json_decref(im.tmpl);
	free(im.error);
	return status;
}

static void print_templates(const json_t *list)
{
	static const char *const head[] = {"NAME", "SIZE", "CREATED"};
	struct table *tab = table_new(head, ARRAY_SIZE(head));
	double now = util_wall_time();
	const json_t *t;
	size_t i;

	json_array_foreach(list, i, t)
	{
		const json_t *sz = json_object_get(t, "size_bytes") ?: json_object_get(t, "size");
		const char *name = json_string_value(json_object_get(t, "name"));
		char size[32] = "-", age[64];
		const char *row[3] = {name ? name : "", size, age};

		if (json_is_integer(sz))
			out_fmt_size((uint64_t)json_integer_value(sz), size, sizeof(size));
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

static const struct cli_cmd cli_template_cmds[] = {
	{"import", tmpl_import, "NAME FILE.tar", "import a root filesystem tarball",
	 .example = "isola template import py ./rootfs.tar"},
	{"ls", tmpl_ls, "", "list templates", .example = "isola template ls"},
	{"rm", tmpl_rm, "NAME...", "remove templates", .example = "isola template rm py"},
};
const struct cli_group cli_template_group = {"template", cli_template_cmds,
					     ARRAY_SIZE(cli_template_cmds)};
