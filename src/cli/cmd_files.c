/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_files: `isola cp` and `isola fs ...` — files in a sandbox, resolved by its agent. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../common/util.h"
#include "cpextract.h"
#include "cptar.h"
#include "output.h"
#include "parse.h"

/* A transfer running on a helper thread while the main thread produces or consumes its tar. */
struct pump {
	struct client *c;      /* download: the client (used only by the thread) */
	struct client_req req; /* download: the request */
	const char *src;       /* upload: local path to archive */
	const char *name;      /* upload: top entry name */
	int fd;		       /* the thread's end of the pipe, closed by the thread */
	struct isola_err *err; /* the thread's error (owned) */
	int ret;	       /* the thread's result */
};

static int pipe_write(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	struct pump *p = ud;

	if (util_write_all(p->fd, buf, len) < 0)
		return isola_err_sys(err, errno, NULL, "extract archive");
	return 0;
}

static void *download_thread(void *arg)
{
	struct pump *p = arg;

	p->ret = client_do(p->c, &p->req, &p->err);
	close(p->fd);
	return NULL;
}

static void *archive_thread(void *arg)
{
	struct pump *p = arg;

	p->ret = cptar_create(p->src, p->name, p->fd, &p->err);
	close(p->fd);
	return NULL;
}

/* GET .../fs/stat; *entry is NULL (and 0 returned) when the path does not exist. */
static int remote_stat(struct client *c, const char *id, const char *path, json_t **entry,
		       struct isola_err **err)
{
	cleanup_free char *url = cli_pathf("/v1/sandboxes/%s/fs/stat?path=%s", id, path);
	struct isola_err *e = NULL;
	int r;

	*entry = NULL;
	if (!url)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = client_json(c, "GET", url, NULL, entry, &e);
	if (r < 0 && !strcmp(e->code, "not_found")) {
		isola_err_free(e);
		return 0;
	}
	if (r < 0 && err && !*err)
		*err = e;
	else
		isola_err_free(e);
	return r;
}

static bool entry_is_dir(const json_t *e)
{
	const char *t = json_string_value(json_object_get(e, "type"));

	return t && !strcmp(t, "dir");
}

/* sandbox -> local: stream GET .../archive into cptar_extract(), then cptar_commit(). */
static int cp_from(struct client *c, const struct cli_cp_arg *s, const char *dst,
		   struct isola_err **err)
{
	cleanup_free char *url = cli_pathf("/v1/sandboxes/%s/archive?path=%s", s->id, s->path);
	char dir[PATH_MAX], name[NAME_MAX + 1];
	struct pump p = {.c = c};
	struct cptar_out *x = NULL;
	json_t *entry = NULL;
	bool into_dir = false;
	pthread_t th;
	struct stat st;
	int fds[2], r;

	p.req = (struct client_req){.method = "GET",
				    .path = url,
				    .body_fd = -1,
				    .accept = "application/x-tar",
				    .on_data = pipe_write,
				    .ud = &p};
	if (!strcmp(dst, "-")) {
		p.fd = STDOUT_FILENO;
		return client_do(c, &p.req, err);
	}
	r = remote_stat(c, s->id, s->path, &entry, err);
	if (r < 0)
		return r;
	if (!entry)
		return isola_err_set(err, ENOENT, "not_found", "`%s:%s`: no such file or directory",
				     s->id, s->path);
	if (stat(dst, &st) == 0) {
		into_dir = S_ISDIR(st.st_mode);
		if (!into_dir && entry_is_dir(entry))
			r = isola_err_set(err, ENOTDIR, "invalid",
					  "cannot copy directory `%s` onto file `%s`", s->path,
					  dst);
	} else if (cli_path_split(dst, dir, sizeof(dir), name, sizeof(name)) < 0 ||
		   stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		r = isola_err_set(err, ENOENT, "not_found", "`%s`: parent directory does not exist",
				  dst);
	}
	json_decref(entry);
	if (r < 0)
		return r;
	r = cptar_out_new(dst, into_dir, &x, err);
	if (r < 0)
		return r;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		cptar_out_free(x);
		return isola_err_sys(err, errno, NULL, "pipe");
	}
	p.fd = fds[1];
	if (pthread_create(&th, NULL, download_thread, &p)) {
		close(fds[0]);
		close(fds[1]);
		cptar_out_free(x);
		return isola_err_set(err, EAGAIN, NULL, "cannot start a thread");
	}
	r = cptar_extract(x, fds[0], err);
	close(fds[0]); /* unblocks the thread if extraction stopped early */
	pthread_join(th, NULL);
	if (p.ret < 0) {
		/* The daemon's error (a reply broken off) explains a truncated archive better
		 * than the tar reader: a tar cut at an entry boundary even looks complete. */
		if (err) {
			isola_err_free(*err);
			*err = steal_ptr(&p.err);
		}
		r = p.ret;
	}
	/* Only a complete archive over a complete transfer goes into place; otherwise the
	 * temporary directory is removed and DST is as it was. */
	if (r == 0)
		r = cptar_commit(x, err);
	cptar_out_free(x);
	isola_err_free(p.err);
	return r;
}

/* local -> sandbox: PUT .../archive?path=DIR with a tar built on a thread. */
static int cp_to(struct client *c, const char *src, const struct cli_cp_arg *d,
		 struct isola_err **err)
{
	char dir[PATH_MAX], name[NAME_MAX + 1], lname[NAME_MAX + 1], ldir[PATH_MAX];
	cleanup_free char *url = NULL;
	struct client_req req = {.method = "PUT", .content_type = "application/x-tar"};
	struct pump p = {.src = src};
	json_t *entry = NULL;
	struct stat st;
	pthread_t th;
	int fds[2], r;

	if (!strcmp(src, "-")) {
		/* docker cp semantics: a tar on stdin is extracted into DST. */
		url = cli_pathf("/v1/sandboxes/%s/archive?path=%s", d->id, d->path);
		req.path = url;
		req.body_fd = STDIN_FILENO;
		req.body_size = -1;
		return client_do(c, &req, err);
	}
	if (lstat(src, &st) < 0)
		return isola_err_sys(err, errno, NULL, "`%s`", src);
	if (cli_path_split(src, ldir, sizeof(ldir), lname, sizeof(lname)) < 0 ||
	    !strcmp(lname, ".") || !strcmp(lname, "..") || !*lname)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "`%s`: name a file or directory",
				     src);
	r = remote_stat(c, d->id, d->path, &entry, err);
	if (r < 0)
		return r;
	if (entry && entry_is_dir(entry)) {
		snprintf(dir, sizeof(dir), "%s", d->path);
		snprintf(name, sizeof(name), "%s", lname);
	} else if (entry && S_ISDIR(st.st_mode)) {
		r = isola_err_set(err, ENOTDIR, "invalid",
				  "cannot copy directory `%s` onto file `%s`", src, d->path);
	} else if (cli_path_split(d->path, dir, sizeof(dir), name, sizeof(name)) < 0 || !*name) {
		r = isola_err_set(err, EINVAL, CLI_ERR_USAGE, "`%s`: bad destination", d->path);
	}
	json_decref(entry);
	if (r < 0)
		return r;
	url = cli_pathf("/v1/sandboxes/%s/archive?path=%s", d->id, dir);
	if (!url || pipe2(fds, O_CLOEXEC) < 0)
		return isola_err_sys(err, url ? errno : ENOMEM, NULL, "pipe");
	p.name = name;
	p.fd = fds[1];
	if (pthread_create(&th, NULL, archive_thread, &p)) {
		close(fds[0]);
		close(fds[1]);
		return isola_err_set(err, EAGAIN, NULL, "cannot start a thread");
	}
	req.path = url;
	req.body_fd = fds[0];
	req.body_size = -1;
	r = client_do(c, &req, err);
	close(fds[0]); /* unblocks the archiver if the upload stopped early */
	pthread_join(th, NULL);
	if (r == 0 && p.ret < 0) {
		r = p.ret;
		if (err && !*err)
			*err = steal_ptr(&p.err);
	}
	isola_err_free(p.err);
	return r;
}

int cmd_cp(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	struct cli_cp_arg s, d;
	struct client *c;
	int opt, r;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1)
		return cli_bad_opt(cli, argc, argv, opt);
	if (argc - optind != 2)
		return cli_usage_err(cli, "expected SRC and DST");
	if (cli_parse_cp_args(argv[optind], argv[optind + 1], &s, &d, &err) < 0)
		return cli_usage_err(cli, "%s", err->message);
	c = cli_client(cli);
	if (!c)
		return CLI_EXIT_FAIL;
	signal(SIGPIPE, SIG_IGN); /* a closed pipe between the threads is an error, not a kill */
	r = s.remote ? cp_from(c, &s, d.path, &err) : cp_to(c, s.path, &d, &err);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	return CLI_EXIT_OK;
}

/* ---- isola fs ---- */

/* "drwxr-xr-x" from a mode and type. */
static void fmt_mode(const json_t *e, char *buf)
{
	const char *type = json_string_value(json_object_get(e, "type"));
	long m = (long)json_integer_value(json_object_get(e, "mode"));
	static const char rwx[] = "rwxrwxrwx";

	buf[0] = !type			    ? '?'
		 : !strcmp(type, "dir")	    ? 'd'
		 : !strcmp(type, "symlink") ? 'l'
		 : !strcmp(type, "file")    ? '-'
					    : '?';
	for (int i = 0; i < 9; i++)
		buf[i + 1] = m & (1 << (8 - i)) ? rwx[i] : '-';
	buf[10] = '\0';
}

static void fmt_mtime(const json_t *e, char *buf, size_t len)
{
	const json_t *v = json_object_get(e, "mtime");
	time_t t = (time_t)json_number_value(v);
	struct tm tm;

	if (json_is_string(v)) {
		snprintf(buf, len, "%s", json_string_value(v));
		return;
	}
	if (!json_is_number(v) || !localtime_r(&t, &tm) ||
	    !strftime(buf, len, "%Y-%m-%d %H:%M", &tm))
		snprintf(buf, len, "-");
}

static void print_entries(const json_t *list, bool lng, bool full_path)
{
	static const char *const head[] = {"MODE", "SIZE", "MODIFIED", "NAME"};
	struct table *t = lng ? table_new(head, ARRAY_SIZE(head)) : NULL;
	size_t i;
	json_t *e;

	json_array_foreach(list, i, e)
	{
		const char *name =
			json_string_value(json_object_get(e, full_path ? "path" : "name"));
		const char *target = json_string_value(json_object_get(e, "target"));
		char mode[11], size[32], mtime[64], shown[PATH_MAX + 8];
		const char *row[4] = {mode, size, mtime, shown};

		if (!name)
			name = json_string_value(json_object_get(e, "name"));
		if (!t) {
			printf("%s\n", name ? name : "");
			continue;
		}
		fmt_mode(e, mode);
		out_fmt_size((uint64_t)json_integer_value(json_object_get(e, "size")), size,
			     sizeof(size));
		fmt_mtime(e, mtime, sizeof(mtime));
		snprintf(shown, sizeof(shown), "%s%s%s", name ? name : "", target ? " -> " : "",
			 target ? target : "");
		table_add(t, row);
	}
	if (t)
		table_print(t, stdout);
	table_free(t);
}

static void print_entry(const json_t *e)
{
	static const char *const keys[] = {"path", "name", "type",  "size",  "mode",
					   "uid",  "gid",  "mtime", "target"};

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		const json_t *v = json_object_get(e, keys[i]);
		cleanup_free char *s = NULL;
		char buf[64];

		if (!v || json_is_null(v))
			continue;
		if (!strcmp(keys[i], "mode") && json_is_integer(v)) {
			printf("mode: %04llo\n", (unsigned long long)json_integer_value(v) & 07777);
			continue;
		}
		if (!strcmp(keys[i], "mtime")) {
			fmt_mtime(e, buf, sizeof(buf));
			printf("mtime: %s\n", buf);
			continue;
		}
		s = out_fmt_value(v);
		printf("%s: %s\n", keys[i], s ? s : "");
	}
}

/* Runs one fs request and prints its reply: as JSON, or with `human` (may be NULL). */
static int fs_request(struct cli *cli, const char *method, char *path, json_t *body,
		      void (*human)(const json_t *))
{
	cleanup_err struct isola_err *err = NULL;
	struct client *c = cli_client(cli);
	json_t *reply = NULL;
	int r;

	if (!c || !path) {
		free(path);
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	r = client_json(c, method, path, body, &reply, &err);
	free(path);
	json_decref(body);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (!reply)
		reply = json_object();
	if (cli->json)
		out_json(stdout, reply);
	else if (human)
		human(reply);
	json_decref(reply);
	return CLI_EXIT_OK;
}

static const struct cli_opt fs_ls_opts[] = {
	{"long", 'l', NULL, "long listing: mode, size, modified time", 0},
	{"depth", 'd', "N", "descend N levels (1..16, default 1)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_opt fs_mkdir_opts[] = {
	{"parents", 'p', NULL, "make parent directories as needed", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cli_opt fs_rm_opts[] = {
	{"recursive", 'r', NULL, "remove directories and their contents", 0},
	{NULL, 0, NULL, NULL, 0},
};

static int fs_ls(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *reply = NULL, *list;
	struct client *c;
	bool lng = false;
	long depth = 1;
	char *path;
	int opt, r;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 'l') {
			lng = true;
		} else if (opt == 'd') {
			if (cli_parse_seconds(optarg, &depth) < 0 || depth < 1 || depth > 16)
				return cli_usage_err(cli, "--depth `%s`: expected 1..16", optarg);
		} else {
			return cli_bad_opt(cli, argc, argv, opt);
		}
	}
	if (argc - optind != 2)
		return cli_usage_err(cli, "expected ID and PATH");
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/fs/list?path=%s&depth=%ld", argv[optind],
			 argv[optind + 1], depth);
	if (!c || !path) {
		free(path);
		return CLI_EXIT_FAIL;
	}
	r = client_json(c, "GET", path, NULL, &reply, &err);
	free(path);
	if (r < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	list = json_is_array(reply) ? reply : json_object_get(reply, "entries");
	if (cli->json)
		out_json(stdout, reply);
	else
		print_entries(list, lng, depth > 1);
	json_decref(reply);
	return CLI_EXIT_OK;
}

/* Parses "[-FLAG] ID ARG..." for the small fs commands: nargs operands after the options. */
static int fs_operands(struct cli *cli, int argc, char **argv, const char *flags, int nargs,
		       bool *flag)
{
	int opt;

	*flag = false;
	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		if (opt == 'h' || opt == '?' || opt == ':')
			return cli_bad_opt(cli, argc, argv, opt) ?: -2;
		*flag = true;
	}
	if (argc - optind != nargs)
		return cli_usage_err(cli, "expected %d arguments", nargs);
	return -1;
}

static int fs_stat(struct cli *cli, int argc, char **argv)
{
	bool f;
	int r = fs_operands(cli, argc, argv, "h", 2, &f);

	if (r != -1)
		return r == -2 ? 0 : r;
	return fs_request(
		cli, "GET",
		cli_pathf("/v1/sandboxes/%s/fs/stat?path=%s", argv[optind], argv[optind + 1]), NULL,
		print_entry);
}

static int fs_mkdir(struct cli *cli, int argc, char **argv)
{
	bool parents;
	int r = fs_operands(cli, argc, argv, "ph", 2, &parents);

	if (r != -1)
		return r == -2 ? 0 : r;
	return fs_request(cli, "POST", cli_pathf("/v1/sandboxes/%s/fs/mkdir", argv[optind]),
			  json_pack("{s:s,s:b}", "path", argv[optind + 1], "parents", parents),
			  NULL);
}

static int fs_rm(struct cli *cli, int argc, char **argv)
{
	bool recursive;
	int r = fs_operands(cli, argc, argv, "rh", 2, &recursive);

	if (r != -1)
		return r == -2 ? 0 : r;
	return fs_request(cli, "POST", cli_pathf("/v1/sandboxes/%s/fs/remove", argv[optind]),
			  json_pack("{s:s,s:b}", "path", argv[optind + 1], "recursive", recursive),
			  NULL);
}

static int fs_mv(struct cli *cli, int argc, char **argv)
{
	bool f;
	int r = fs_operands(cli, argc, argv, "h", 3, &f);

	if (r != -1)
		return r == -2 ? 0 : r;
	return fs_request(cli, "POST", cli_pathf("/v1/sandboxes/%s/fs/rename", argv[optind]),
			  json_pack("{s:s,s:s}", "from", argv[optind + 1], "to", argv[optind + 2]),
			  NULL);
}

int cli_stdout_write(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	if (util_write_all(STDOUT_FILENO, buf, len) < 0)
		return isola_err_sys(err, errno, NULL, "write stdout");
	return 0;
}

static int fs_cat(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct client_req req = {.method = "GET", .body_fd = -1, .on_data = cli_stdout_write};
	struct client *c;
	bool f;
	int r = fs_operands(cli, argc, argv, "h", 2, &f);

	if (r != -1)
		return r == -2 ? 0 : r;
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/files?path=%s", argv[optind], argv[optind + 1]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	req.path = path;
	if (client_do(c, &req, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	return CLI_EXIT_OK;
}

static int fs_write(struct cli *cli, int argc, char **argv)
{
	cleanup_err struct isola_err *err = NULL;
	cleanup_free char *path = NULL;
	struct client_req req = {.method = "PUT", .body_fd = STDIN_FILENO, .body_size = -1};
	json_t *reply = NULL;
	struct client *c;
	struct stat st;
	bool f;
	int r = fs_operands(cli, argc, argv, "h", 2, &f);

	if (r != -1)
		return r == -2 ? 0 : r;
	c = cli_client(cli);
	path = cli_pathf("/v1/sandboxes/%s/files?path=%s", argv[optind], argv[optind + 1]);
	if (!c || !path)
		return CLI_EXIT_FAIL;
	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode))
		req.body_size = st.st_size - lseek(STDIN_FILENO, 0, SEEK_CUR);
	req.path = path;
	req.out = &reply;
	if (client_do(c, &req, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json) {
		if (!reply)
			reply = json_object();
		out_json(stdout, reply);
	}
	json_decref(reply);
	return CLI_EXIT_OK;
}

static const struct cli_cmd cli_fs_cmds[] = {
	{"ls", fs_ls, "[-l] [--depth N] ID PATH", "list a directory", .opts = fs_ls_opts,
	 .example = "isola fs ls -l web /work"},
	{"stat", fs_stat, "ID PATH", "show a file's metadata",
	 .example = "isola fs stat web /etc/hosts"},
	{"cat", fs_cat, "ID PATH", "print a file", .example = "isola fs cat web /etc/hosts"},
	{"write", fs_write, "ID PATH < DATA", "write stdin to a file (atomically)",
	 .example = "echo hi | isola fs write web /tmp/a"},
	{"mkdir", fs_mkdir, "[-p] ID PATH", "make a directory", .opts = fs_mkdir_opts,
	 .example = "isola fs mkdir -p web /work/a/b"},
	{"rm", fs_rm, "[-r] ID PATH", "remove a file or directory", .opts = fs_rm_opts,
	 .example = "isola fs rm -r web /work/a"},
	{"mv", fs_mv, "ID FROM TO", "rename", .example = "isola fs mv web /tmp/a /tmp/b"},
};
const struct cli_group cli_fs_group = {"fs", cli_fs_cmds, ARRAY_SIZE(cli_fs_cmds)};
