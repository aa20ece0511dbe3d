/* SPDX-License-Identifier: Apache-2.0 */
/* isola-runc: an OCI runtime with runc's command line over isolad's process tier (docs/oci.md). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../cli/client.h"
#include "../cli/parse.h"
#include "../common/util.h"
#include "config.h"

#define DEFAULT_ROOT   "/run/isola-runc"
#define DEFAULT_SOCKET "/run/isola/isolad.sock"

/* Global options (runc's) and the isolad connection. One per process. */
struct runc {
	const char *root;	 /* --root: per-container state dirs */
	const char *log;	 /* --log FILE, or NULL */
	bool log_json;		 /* --log-format json */
	struct client_conf conf; /* isolad: $ISOLA_SOCKET (operator) or $ISOLA_URL + token */
	struct client *cl;	 /* made on first use */
};

/* A container's state file, ROOT/ID/state.json: a cache of what isolad holds (label oci.id). */
struct container {
	char id[129];	    /* OCI container id */
	char dir[PATH_MAX]; /* ROOT/ID */
	json_t *st;	    /* {"sandbox","bundle","created","pid","process","killed"}, owned */
};

static struct runc g;

/* Reports an error on stderr and, with --log, in the log file (json: what runc writes). */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "isola-runc: %s\n", msg);
	if (!g.log || !(f = fopen(g.log, "ae")))
		return;
	if (g.log_json) {
		json_t *j = json_pack("{s:s, s:s, s:I}", "level", "error", "msg", msg, "time",
				      (json_int_t)time(NULL));
		char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

		fprintf(f, "%s\n", s ? s : "{}");
		free(s);
		json_decref(j);
	} else {
		fprintf(f, "level=error msg=\"%s\"\n", msg);
	}
	fclose(f);
}

static int fail_err(struct isola_err *err)
{
	report("%s", err && err->message ? err->message : "unknown error");
	isola_err_free(err);
	return 1;
}

static struct client *cl(struct isola_err **err)
{
	if (!g.cl && client_new(&g.conf, &g.cl, err) < 0)
		return NULL;
	return g.cl;
}

/* Writes text to path crash-safely (temp name, fsync, rename; mode 0600). */
static int write_file_atomic(const char *path, const char *text, struct isola_err **err)
{
	int r = util_write_file_atomic(path, text, strlen(text), 0600);

	return r < 0 ? isola_err_sys(err, -r, NULL, "write `%s`", path) : 0;
}

static int container_save(struct container *c, struct isola_err **err)
{
	char path[PATH_MAX + 16];
	char *text = json_dumps(c->st, JSON_COMPACT | JSON_SORT_KEYS);
	int r;

	if (!text)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	snprintf(path, sizeof(path), "%s/state.json", c->dir);
	r = write_file_atomic(path, text, err);
	free(text);
	return r;
}

static int container_init(struct container *c, const char *id, struct isola_err **err)
{
	memset(c, 0, sizeof(*c));
	if (!oci_id_valid(id))
		return isola_err_set(err, EINVAL, "invalid",
				     "container id `%.64s` is invalid: expected 1-128 of "
				     "[A-Za-z0-9_.+-]",
				     id ? id : "");
	snprintf(c->id, sizeof(c->id), "%s", id);
	if ((size_t)snprintf(c->dir, sizeof(c->dir), "%s/%s", g.root, id) >= sizeof(c->dir))
		return isola_err_set(err, ENAMETOOLONG, "invalid", "--root `%s` is too long",
				     g.root);
	return 0;
}

/* Loads ROOT/ID/state.json. -ENOENT "container `ID` does not exist". */
static int container_load(struct container *c, const char *id, struct isola_err **err)
{
	char path[PATH_MAX + 16];
	json_error_t je;
	int r = container_init(c, id, err);

	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/state.json", c->dir);
	c->st = json_load_file(path, 0, &je);
	if (!c->st && access(path, F_OK) < 0)
		return isola_err_set(err, ENOENT, "not_found", "container `%s` does not exist", id);
	if (!json_is_object(c->st) || !json_string_value(json_object_get(c->st, "sandbox")))
		return isola_err_set(err, EINVAL, "internal", "container `%s`: malformed `%s`", id,
				     path);
	return 0;
}

static const char *sandbox_of(const struct container *c)
{
	return json_string_value(json_object_get(c->st, "sandbox"));
}

/* True when err says the sandbox no longer exists (never existed, or ended: a tombstone). */
static bool sandbox_gone(const struct isola_err *e)
{
	return e && (!strcmp(e->code, "not_found") || !strcmp(e->code, "sandbox_ended"));
}

/* The OCI status of c from isolad (docs/oci.md); *host_pid gets the init's host pid. */
static const char *container_status(struct container *c, long *host_pid, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s", sandbox_of(c));
	cleanup_err struct isola_err *e = NULL;
	json_t *sb = NULL, *proc = NULL;
	long pid = (long)json_integer_value(json_object_get(c->st, "pid"));
	const char *status;
	struct client *h = cl(err);

	*host_pid = 0;
	if (!h)
		return NULL;
	if (client_json(h, "GET", path, NULL, &sb, &e) < 0) {
		if (e && sandbox_gone(e))
			return "stopped"; /* destroyed behind our back, or killed before start */
		*err = e;
		e = NULL;
		return NULL;
	}
	status = json_string_value(json_object_get(sb, "state"));
	if (!status || strcmp(status, "running") != 0) {
		/* paused/hibernated: not in this slice's vocabulary; error or ended: stopped. */
		status = status && !strcmp(status, "paused") ? "paused" : "stopped";
	} else if (json_is_true(json_object_get(c->st, "killed"))) {
		status = "stopped";
	} else if (pid <= 0) {
		status = "created";
		*host_pid = (long)json_integer_value(json_object_get(sb, "host_pid"));
	} else {
		cleanup_free char *pp =
			cli_pathf("/v1/sandboxes/%s/processes/%ld", sandbox_of(c), pid);

		status = "stopped";
		if (client_json(h, "GET", pp, NULL, &proc, NULL) == 0 &&
		    json_is_true(json_object_get(proc, "running"))) {
			status = "running";
			*host_pid = (long)json_integer_value(json_object_get(sb, "host_pid"));
		}
		json_decref(proc);
	}
	json_decref(sb);
	return status;
}

static int destroy_sandbox(const char *sandbox, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s", sandbox);
	cleanup_err struct isola_err *e = NULL;
	struct client *h = cl(err);

	if (!h)
		return -EIO;
	if (client_json(h, "DELETE", path, NULL, NULL, &e) < 0 && !sandbox_gone(e)) {
		*err = e;
		e = NULL;
		return -EIO;
	}
	return 0;
}

/* Reads BUNDLE/config.json (at most OCI_CONFIG_MAX bytes) and maps it. */
static int load_bundle(const char *bundle, const char *id, char *abs, struct oci_mapped *m,
		       struct isola_err **err)
{
	char path[PATH_MAX + 16], root[PATH_MAX];
	cleanup_free char *text = NULL;
	size_t len = 0;
	int r;

	if (!realpath(bundle, abs))
		return isola_err_sys(err, errno, "invalid", "bundle `%s`", bundle);
	snprintf(path, sizeof(path), "%s/config.json", abs);
	r = util_read_file(path, OCI_CONFIG_MAX, &text, &len);
	if (r < 0)
		return isola_err_sys(err, -r, "invalid", "read `%s`", path);
	r = oci_config_map(text, len, abs, id, m, err);
	if (r < 0)
		return r;
	/* The host side resolves root.path (symlinks included: the bundle is the engine's). */
	if (!realpath(json_string_value(json_object_get(m->create, "rootfs")), root)) {
		r = isola_err_sys(err, errno, "invalid", "bundle `%s`: root.path `%s`", abs,
				  json_string_value(json_object_get(m->create, "rootfs")));
		oci_mapped_fini(m);
		return r;
	}
	json_object_set_new(m->create, "rootfs", json_string(root));
	return 0;
}

/* Options of create/run. */
struct create_opts {
	const char *bundle;   /* --bundle/-b, default "." */
	const char *pid_file; /* --pid-file, or NULL */
	bool detach;	      /* run --detach */
	bool keep;	      /* run --keep */
};

static int write_pid_file(const char *path, long pid, struct isola_err **err)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", pid);
	return write_file_atomic(path, buf, err);
}

static int do_create(const char *id, const struct create_opts *o, struct container *c,
		     struct isola_err **err)
{
	char bundle[PATH_MAX], created[40];
	struct oci_mapped m;
	json_t *sb = NULL;
	struct client *h;
	long host_pid;
	int r;

	r = container_init(c, id, err);
	if (r < 0)
		return r;
	r = util_mkdir_p(g.root, 0700);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "create --root `%s`", g.root);
	if (mkdir(c->dir, 0700) < 0)
		return errno == EEXIST ? isola_err_set(err, EEXIST, "conflict",
						       "container `%s` already exists", id)
				       : isola_err_sys(err, errno, NULL, "create `%s`", c->dir);
	r = load_bundle(o->bundle, id, bundle, &m, err);
	if (r < 0 || !(h = cl(err))) {
		rmdir(c->dir);
		return r < 0 ? r : -EIO;
	}
	r = client_json(h, "POST", "/v1/sandboxes", m.create, &sb, err);
	if (r < 0) {
		oci_mapped_fini(&m);
		rmdir(c->dir);
		return isola_err_wrap(err, "create container `%s`", id);
	}
	{
		time_t now = time(NULL);
		struct tm tm;

		strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	}
	c->st = json_pack("{s:O, s:s, s:s, s:i, s:O, s:O}", "sandbox", json_object_get(sb, "id"),
			  "bundle", bundle, "created", created, "pid", 0, "process", m.process,
			  "annotations", m.annotations);
	json_decref(sb);
	oci_mapped_fini(&m);
	r = c->st ? container_save(c, err) : isola_err_set(err, ENOMEM, NULL, "out of memory");
	if (r == 0 && o->pid_file) {
		const char *st = container_status(c, &host_pid, err);

		r = !st ? -EIO : write_pid_file(o->pid_file, host_pid, err);
	}
	if (r < 0) {
		destroy_sandbox(json_string_value(json_object_get(c->st, "sandbox")), NULL);
		util_rm_rf(c->dir);
	}
	return r;
}

static int follow(struct container *c, struct isola_err **err);

/* ROOT/ID/exec.fifo: the relay blocks opening it for writing until start or delete opens it. */
static void fifo_path(const struct container *c, char *buf, size_t n)
{
	snprintf(buf, n, "%s/exec.fifo", c->dir);
}

/* Wakes the relay of c (start, kill before start, delete); it rereads the state file. */
static void relay_release(const struct container *c)
{
	char path[PATH_MAX + 16];
	int fd;

	fifo_path(c, path, sizeof(path));
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
}

/*
 * `create` returns at once, but the container's output must reach the stdio the caller gave
 * it (an engine's fifos), as runc's init keeps them. A detached relay process keeps our
 * stdout/stderr, waits on exec.fifo for `start`, then follows the process's output into them
 * and exits when it ends (or at once when the container was killed or deleted unstarted).
 * Stdin is not forwarded (docs/oci.md).
 */
static int relay_spawn(const struct container *c, struct isola_err **err)
{
	char path[PATH_MAX + 16];
	struct container rc;
	pid_t pid;
	int fd, st;

	fifo_path(c, path, sizeof(path));
	if (mkfifo(path, 0600) < 0)
		return isola_err_sys(err, errno, NULL, "mkfifo `%s`", path);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return isola_err_sys(err, errno, NULL, "fork the output relay");
	if (pid > 0)
		return 0;
	/* The relay: a session of its own, no client shared with the parent. */
	setsid();
	g.cl = NULL;
	fd = open(path, O_WRONLY | O_CLOEXEC); /* blocks until start/kill/delete */
	if (fd >= 0)
		close(fd);
	st = 0;
	if (container_load(&rc, c->id, NULL) == 0 &&
	    json_integer_value(json_object_get(rc.st, "pid")) > 0 &&
	    !json_is_true(json_object_get(rc.st, "killed")))
		st = follow(&rc, NULL);
	/* The process's status (128+N for a signal): a subreaper above us (an engine's shim)
	 * learns it from the relay's exit. */
	_exit(st < 0 ? 255 : st);
}

static int do_start(struct container *c, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/processes", sandbox_of(c));
	long host_pid;
	const char *st = container_status(c, &host_pid, err);
	json_t *proc = NULL;
	struct client *h = cl(err);
	int r;

	if (!st || !h)
		return -EIO;
	if (strcmp(st, "created") != 0)
		return isola_err_set(err, EINVAL, "conflict",
				     "container `%s` is %s: only a created container starts", c->id,
				     st);
	if (client_json(h, "POST", path, json_object_get(c->st, "process"), &proc, err) < 0)
		return isola_err_wrap(err, "start container `%s`", c->id);
	json_object_set(c->st, "pid", json_object_get(proc, "pid"));
	json_decref(proc);
	r = container_save(c, err);
	relay_release(c);
	return r;
}

/* Writes one stdout/stderr event of the container's output to our fd 1 or 2. */
static int on_output(void *ud, json_t *ev, struct isola_err **err)
{
	const char *type = json_string_value(json_object_get(ev, "type"));
	const json_t *data = json_object_get(ev, "data");
	const char *s = json_string_value(data);
	cleanup_free unsigned char *buf = NULL;
	long len;

	if (!type || !s || (strcmp(type, "stdout") && strcmp(type, "stderr")))
		return 0;
	buf = malloc(json_string_length(data) / 4 * 3 + 4);
	if (!buf)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	/* UNTRUSTED: the container's output; only copied to our stdout/stderr. */
	len = cli_b64_decode(s, json_string_length(data), buf);
	if (len < 0)
		return isola_err_set(err, EPROTO, "internal", "output event with malformed base64");
	if (util_write_all(!strcmp(type, "stdout") ? 1 : 2, buf, (size_t)len) < 0 && errno != EPIPE)
		return isola_err_sys(err, errno, NULL, "write output");
	return 0;
}

/* Follows the started process's output to ours and returns its exit status (shell style). */
static int follow(struct container *c, struct isola_err **err)
{
	long pid = (long)json_integer_value(json_object_get(c->st, "pid"));
	cleanup_free char *out =
		cli_pathf("/v1/sandboxes/%s/processes/%ld/output?follow=true", sandbox_of(c), pid);
	cleanup_free char *wait =
		cli_pathf("/v1/sandboxes/%s/processes/%ld/wait", sandbox_of(c), pid);
	struct client_req rq = {.method = "GET",
				.path = out,
				.body_fd = -1,
				.accept = "application/x-ndjson",
				.on_event = on_output};
	json_t *ex = NULL;
	struct client *h = cl(err);
	int status;

	if (!h || client_do(h, &rq, err) < 0 || client_json(h, "POST", wait, NULL, &ex, err) < 0)
		return -EIO;
	if (json_integer_value(json_object_get(ex, "signal")) > 0)
		status = 128 + (int)json_integer_value(json_object_get(ex, "signal"));
	else
		status = (int)json_integer_value(json_object_get(ex, "exit_code"));
	json_decref(ex);
	return status;
}

static int do_delete(struct container *c, bool force, struct isola_err **err)
{
	long host_pid;
	const char *st = container_status(c, &host_pid, err);

	if (!st)
		return -EIO;
	if (!force && (!strcmp(st, "running") || !strcmp(st, "paused")))
		return isola_err_set(err, EBUSY, "conflict",
				     "container `%s` is %s: stop it first or use --force", c->id,
				     st);
	if (destroy_sandbox(sandbox_of(c), err) < 0)
		return isola_err_wrap(err, "delete container `%s`", c->id);
	json_object_set_new(c->st, "killed", json_true());
	container_save(c, NULL);
	relay_release(c);
	util_rm_rf(c->dir);
	return 0;
}

/* SIGNAL as a name (TERM, SIGKILL) or a number. */
static int parse_signal(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} tab[] = {{"HUP", SIGHUP},   {"INT", SIGINT},	  {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
		   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},  {"TERM", SIGTERM}, {"STOP", SIGSTOP},
		   {"CONT", SIGCONT}, {"WINCH", SIGWINCH}};
	char *end;
	long n;

	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcasecmp(s, tab[i].name))
			return tab[i].sig;
	n = strtol(s, &end, 10);
	return *s && !*end && n > 0 && n < 65 ? (int)n : -1;
}

static int do_kill(struct container *c, int sig, struct isola_err **err)
{
	long host_pid, pid = (long)json_integer_value(json_object_get(c->st, "pid"));
	const char *st = container_status(c, &host_pid, err);
	cleanup_free char *path = NULL;
	json_t *body;
	int r;

	if (!st)
		return -EIO;
	if (!strcmp(st, "stopped"))
		return isola_err_set(err, ESRCH, "conflict", "container `%s` is not running",
				     c->id);
	if (!strcmp(st, "created")) {
		/* Nothing of the container's runs yet: it stops, and its sandbox goes. */
		json_object_set_new(c->st, "killed", json_true());
		r = container_save(c, err);
		relay_release(c);
		return r < 0 ? r : destroy_sandbox(sandbox_of(c), err);
	}
	path = cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", sandbox_of(c), pid);
	body = json_pack("{s:i}", "signal", sig);
	r = client_json(cl(err), "POST", path, body, NULL, err);
	json_decref(body);
	return r < 0 ? isola_err_wrap(err, "kill container `%s`", c->id) : 0;
}

static int print_state(struct container *c, struct isola_err **err)
{
	long host_pid;
	const char *st = container_status(c, &host_pid, err);
	json_t *j;
	char *s;

	if (!st)
		return -EIO;
	j = json_pack("{s:s, s:s, s:s, s:I, s:O, s:O, s:O}", "ociVersion", "1.2.0", "id", c->id,
		      "status", st, "pid", (json_int_t)host_pid, "bundle",
		      json_object_get(c->st, "bundle"), "created",
		      json_object_get(c->st, "created"), "annotations",
		      json_object_get(c->st, "annotations") ?: json_object());
	if (j)
		json_object_set(j, "sandbox", json_object_get(c->st, "sandbox"));
	s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	if (!s)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	printf("%s\n", s);
	free(s);
	return 0;
}

static int do_spec(const char *bundle, struct isola_err **err)
{
	char path[PATH_MAX + 16];
	json_t *j = oci_spec_default();
	int r;

	snprintf(path, sizeof(path), "%s/config.json", bundle);
	if (access(path, F_OK) == 0) {
		json_decref(j);
		return isola_err_set(err, EEXIST, "conflict", "`%s` already exists", path);
	}
	r = j && json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0
		    ? 0
		    : isola_err_sys(err, errno ? errno : EIO, NULL, "write `%s`", path);
	json_decref(j);
	return r;
}

static void usage(FILE *f)
{
	fputs("usage: isola-runc [GLOBAL OPTIONS] COMMAND [OPTIONS] [ID]\n"
	      "OCI runtime over isolad's process tier (docs/oci.md).\n\n"
	      "commands:\n"
	      "  create [--bundle DIR] [--pid-file FILE] ID   create a container (not started)\n"
	      "  start ID                                     run the container's process\n"
	      "  run [--bundle DIR] [--pid-file F] [-d] ID    create, start, follow, delete\n"
	      "  state ID                                     print the OCI state JSON\n"
	      "  kill [--all] ID [SIGNAL]                     signal the process (TERM)\n"
	      "  delete [--force] ID                          remove the container\n"
	      "  spec [--bundle DIR]                          write a config.json\n"
	      "  features                                     print the features JSON\n\n"
	      "global options: --root DIR (" DEFAULT_ROOT "), --log FILE, --log-format text|json,\n"
	      "  --debug (ignored), --systemd-cgroup (refused). isolad: $ISOLA_SOCKET "
	      "(" DEFAULT_SOCKET ") or $ISOLA_URL with $ISOLA_TOKEN (an operator token).\n",
	      f);
}

/* Value of option argv[*i] (`--opt V` or `--opt=V`); NULL when it is not `name`. */
static const char *opt_val(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n) != 0)
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] != '\0' || *i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* Runs one command; argv[0] is the command name. Returns the exit status. */
static int run_command(int argc, char **argv)
{
	struct create_opts o = {.bundle = "."};
	struct isola_err *err = NULL;
	struct container c = {0};
	const char *cmd = argv[0], *id = NULL, *extra = NULL, *v;
	bool force = false;
	int r = 0, i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if ((v = opt_val(argc, argv, &i, "--bundle")) ||
		    (v = opt_val(argc, argv, &i, "-b")))
			o.bundle = v;
		else if ((v = opt_val(argc, argv, &i, "--pid-file")))
			o.pid_file = v;
		else if ((v = opt_val(argc, argv, &i, "--console-socket")))
			return report("--console-socket: terminals are not supported yet "
				      "(docs/oci.md)"),
			       1;
		else if ((v = opt_val(argc, argv, &i, "--preserve-fds")) ||
			 (v = opt_val(argc, argv, &i, "--criu")))
			continue; /* no fds cross into an isolad sandbox */
		else if (!strcmp(a, "--force") || !strcmp(a, "-f"))
			force = true;
		else if (!strcmp(a, "--detach") || !strcmp(a, "-d"))
			o.detach = true;
		else if (!strcmp(a, "--keep"))
			o.keep = true;
		else if (!strcmp(a, "--all") || !strcmp(a, "-a") || !strcmp(a, "--no-pivot") ||
			 !strcmp(a, "--no-new-keyring") || !strcmp(a, "--rootless"))
			continue; /* irrelevant to isola's sandboxes: accepted */
		else if (a[0] == '-' && a[1])
			return report("%s: unknown option `%s`", cmd, a), 1;
		else if (!id)
			id = a;
		else if (!extra)
			extra = a;
		else
			return report("%s: unexpected argument `%s`", cmd, a), 1;
	}
	if (!strcmp(cmd, "features")) {
		json_t *f = oci_features();

		json_dumpf(f, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(f);
		return 0;
	}
	if (!strcmp(cmd, "spec"))
		return do_spec(o.bundle, &err) < 0 ? fail_err(err) : 0;
	if (!strcmp(cmd, "exec") || !strcmp(cmd, "ps") || !strcmp(cmd, "pause") ||
	    !strcmp(cmd, "resume") || !strcmp(cmd, "events") || !strcmp(cmd, "update") ||
	    !strcmp(cmd, "checkpoint") || !strcmp(cmd, "restore") || !strcmp(cmd, "list"))
		return report("`%s` is not supported yet (docs/oci.md)", cmd), 1;
	if (strcmp(cmd, "create") && strcmp(cmd, "run") && strcmp(cmd, "start") &&
	    strcmp(cmd, "state") && strcmp(cmd, "delete") && strcmp(cmd, "kill"))
		return report("unknown command `%s` (isola-runc --help)", cmd), 1;
	if (!id)
		return report("%s: missing container ID", cmd), 1;
	if (!strcmp(cmd, "create") || !strcmp(cmd, "run")) {
		r = do_create(id, &o, &c, &err);
		if (r == 0 && (!strcmp(cmd, "create") || o.detach) && relay_spawn(&c, &err) < 0) {
			destroy_sandbox(sandbox_of(&c), NULL);
			util_rm_rf(c.dir);
			r = -EIO;
		}
		if (r == 0 && !strcmp(cmd, "run")) {
			r = do_start(&c, &err);
			if (r == 0 && !o.detach) {
				r = follow(&c, &err);
				if (r >= 0 && !o.keep && do_delete(&c, true, &err) < 0)
					r = -EIO;
			}
		}
	} else if (container_load(&c, id, &err) < 0) {
		r = -ENOENT;
	} else if (!strcmp(cmd, "start")) {
		r = do_start(&c, &err);
	} else if (!strcmp(cmd, "state")) {
		r = print_state(&c, &err);
	} else if (!strcmp(cmd, "delete")) {
		r = do_delete(&c, force, &err);
	} else { /* kill */
		int sig = parse_signal(extra ? extra : "TERM");

		r = sig < 0 ? isola_err_set(&err, EINVAL, "invalid", "unknown signal `%s`", extra)
			    : do_kill(&c, sig, &err);
	}
	json_decref(c.st);
	if (r < 0)
		return fail_err(err);
	return r; /* run: the process's status */
}

int main(int argc, char **argv)
{
	const char *env, *v;
	int i, r;

	g.root = DEFAULT_ROOT;
	g.conf.socket = (env = getenv("ISOLA_SOCKET")) && *env ? env : DEFAULT_SOCKET;
	g.conf.url = (env = getenv("ISOLA_URL")) && *env ? env : NULL;
	g.conf.token = (env = getenv("ISOLA_TOKEN")) && *env ? env : NULL;
	signal(SIGPIPE, SIG_IGN);
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if ((v = opt_val(argc, argv, &i, "--root"))) {
			g.root = v;
		} else if ((v = opt_val(argc, argv, &i, "--log"))) {
			g.log = v;
		} else if ((v = opt_val(argc, argv, &i, "--log-format"))) {
			if (strcmp(v, "json") && strcmp(v, "text"))
				return report("--log-format `%s`: expected text or json", v), 1;
			g.log_json = !strcmp(v, "json");
		} else if (!strncmp(argv[i], "--systemd-cgroup", 16)) {
			return report("--systemd-cgroup is not supported: isolad manages its own "
				      "cgroups (isola/<id>); run the engine with cgroupfs"),
			       1;
		} else if (!strcmp(argv[i], "--debug") || !strcmp(argv[i], "--rootless") ||
			   !strncmp(argv[i], "--rootless=", 11)) {
			continue; /* accepted and ignored */
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-v")) {
			printf("isola-runc version " ISOLA_VERSION "\nspec: 1.2.0\n");
			return 0;
		} else {
			return report("unknown global option `%s`", argv[i]), 1;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 1;
	}
	r = run_command(argc - i, argv + i);
	client_free(g.cl);
	return r;
}
