/* SPDX-License-Identifier: Apache-2.0 */
/* isola-runc: an OCI runtime with runc's command line over isolad's process tier (docs/oci.md). */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../cli/client.h"
#include "../cli/parse.h"
#include "../common/util.h"
#include "cgjoin.h"
#include "config.h"
#include "hooks.h"
#include "podns.h"

#define DEFAULT_ROOT   "/run/isola-runc"
#define DEFAULT_SOCKET "/run/isola/isolad.sock"

/* Global options (runc's) and the isolad connection. One per process. */
struct runc {
	const char *root;	 /* --root: per-container state dirs */
	const char *log;	 /* --log FILE, or NULL */
	bool log_json;		 /* --log-format json */
	struct client_conf conf; /* isolad: $ISOLA_SOCKET (operator) or $ISOLA_URL + token */
	bool conf_given;	 /* conf came from --isola-socket or the environment */
	struct client *cl;	 /* made on first use */
};

/* A container's state file, ROOT/ID/state.json: a cache of what isolad holds (label oci.id). */
struct container {
	char id[129];	    /* OCI container id */
	char dir[PATH_MAX]; /* ROOT/ID */
	json_t *st;	    /* {"sandbox","bundle","created","pid","process","killed"}, owned */
};

static struct runc g;

/* Writes msg at level ("error", "warning") to the --log file (json: what runc writes). */
static void log_line(const char *level, const char *msg)
{
	FILE *f;

	if (!g.log || !(f = fopen(g.log, "ae")))
		return;
	if (g.log_json) {
		/* runc's (logrus) shape: an engine parses time as RFC 3339. */
		char ts[40];
		time_t now = time(NULL);
		struct tm tm;
		json_t *j;

		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
		j = json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", ts);
		char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

		fprintf(f, "%s\n", s ? s : "{}");
		free(s);
		json_decref(j);
	} else {
		fprintf(f, "level=%s msg=\"%s\"\n", level, msg);
	}
	fclose(f);
}

/* Reports an error on stderr and, with --log, in the log file. */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "isola-runc: %s\n", msg);
	log_line("error", msg);
}

/* A warning (what the spec asked and isola does not do): to the --log file when there is
 * one, else on stderr. Engines always pass --log, and create's stderr is the container's. */
static void warn(const char *msg)
{
	if (g.log)
		log_line("warning", msg);
	else
		fprintf(stderr, "isola-runc: warning: %s\n", msg);
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
/*
 * An engine may call a container's later commands without the socket it gave `create`:
 * Podman's conmon runs `podman container cleanup`, whose `delete` gets neither
 * `--runtime-flag isola-socket` nor the environment, so its sandbox was never destroyed.
 * Unless this call names isolad itself (--isola-socket, $ISOLA_SOCKET, $ISOLA_URL), it talks
 * to the isolad recorded at create (state.json: root's own 0700 directory). The token is
 * never recorded: a URL still needs $ISOLA_TOKEN.
 */
static void isolad_of(const struct container *c)
{
	const char *sock = json_string_value(json_object_get(c->st, "isolad_socket"));
	const char *url = json_string_value(json_object_get(c->st, "isolad_url"));

	if (g.conf_given || (!sock && !url))
		return;
	if (g.cl) {
		client_free(g.cl);
		g.cl = NULL;
	}
	if (url)
		g.conf.url = url;
	else
		g.conf.socket = sock;
	g.conf_given = true; /* c->st outlives every use: its strings stay valid */
}

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
	isolad_of(c);
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
		/* paused: its processes are frozen, its init is still there; hibernated, error or
		 * ended: stopped. */
		status = status && !strcmp(status, "paused") ? "paused" : "stopped";
		if (!strcmp(status, "paused"))
			*host_pid = (long)json_integer_value(json_object_get(sb, "host_pid"));
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
	/* A pod's namespace paths naming one of our containers (the CRI's app containers). */
	r = podns_resolve(g.root, m, err);
	if (r < 0) {
		oci_mapped_fini(m);
		return r;
	}
	for (size_t i = 0; i < json_array_size(m->skipped); i++)
		warn(json_string_value(json_array_get(m->skipped, i)));
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
	const char *console;  /* --console-socket, or NULL */
	bool detach;	      /* run --detach */
	bool keep;	      /* run --keep */
	int tty;	      /* out: the terminal's slave side when process.terminal, else -1 */
};

static int write_pid_file(const char *path, long pid, struct isola_err **err)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", pid);
	return write_file_atomic(path, buf, err);
}

/*
 * A terminal for a tty process: a new pty whose master goes to the engine over --console-socket
 * (SCM_RIGHTS, the pts name as data, as runc does); the slave stays with us (raw: the sandbox's
 * own pty does the line discipline) and becomes the relay's stdin/stdout. Returns the slave.
 */
static int console_setup(const char *sock_path, struct isola_err **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char name[64], cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov;
	struct msghdr mh = {0};
	struct cmsghdr *cm;
	struct termios t;
	int m = -1, sl = -1, sk = -1, r = 0;

	if (strlen(sock_path) >= sizeof(sa.sun_path))
		return isola_err_set(err, ENAMETOOLONG, "invalid",
				     "--console-socket `%s` is too long", sock_path);
	strcpy(sa.sun_path, sock_path);
	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0 ||
	    (sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		r = isola_err_sys(err, errno, NULL, "open a terminal for --console-socket");
		goto out;
	}
	if (tcgetattr(sl, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(sl, TCSANOW, &t);
	}
	sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sk < 0 || connect(sk, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = isola_err_sys(err, errno, NULL, "connect --console-socket `%s`", sock_path);
		goto out;
	}
	iov.iov_base = name;
	iov.iov_len = strlen(name);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &m, sizeof(int));
	if (sendmsg(sk, &mh, 0) < 0)
		r = isola_err_sys(err, errno, NULL, "send the terminal to --console-socket `%s`",
				  sock_path);
out:
	if (m >= 0)
		close(m);
	if (sk >= 0)
		close(sk);
	if (r < 0 && sl >= 0)
		close(sl);
	return r < 0 ? r : sl;
}

/* Makes fd (a terminal's slave) our stdin, stdout and stderr, and our controlling terminal. */
static void take_terminal(int fd)
{
	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	ioctl(0, TIOCSCTTY, 0);
}

/* The OCI state of c (runtime-spec runtime.md) with status st and host pid (0: none). */
static json_t *oci_state(struct container *c, const char *st, long host_pid)
{
	json_t *ann = json_object_get(c->st, "annotations");

	return json_pack("{s:s, s:s, s:s, s:I, s:O, s:O, s:o}", "ociVersion", "1.2.0", "id", c->id,
			 "status", st, "pid", (json_int_t)host_pid, "bundle",
			 json_object_get(c->st, "bundle"), "created",
			 json_object_get(c->st, "created"), "annotations",
			 ann ? json_incref(ann) : json_object());
}

/* Runs c's hooks of kind with its state (status, pid) on their stdin (hooks.h). */
static int container_hooks(struct container *c, const char *kind, const char *status, long pid,
			   void (*on_fail)(const char *msg), struct isola_err **err)
{
	json_t *state;
	int r;

	if (!json_array_size(json_object_get(json_object_get(c->st, "hooks"), kind)))
		return 0;
	state = oci_state(c, status, pid);
	if (!state)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = hooks_run(json_object_get(c->st, "hooks"), kind, state, on_fail, err);
	json_decref(state);
	return r;
}

/* poststart, poststop: each failure is a warning and the remaining hooks run (the spec's
 * words; runc 1.1 fails its create on a failing poststart hook instead). */
static void warn_hooks(struct container *c, const char *kind, const char *status, long pid)
{
	struct isola_err *e = NULL;

	if (container_hooks(c, kind, status, pid, warn, &e) < 0)
		warn(e && e->message ? e->message : kind);
	isola_err_free(e);
}

/* prestart, then createRuntime, once the sandbox (the container's namespaces) exists and before
 * create returns; a failure fails create (runc's order). */
static int create_hooks(struct container *c, struct isola_err **err)
{
	long host_pid;
	const char *st;
	int r;

	if (!json_object_size(json_object_get(c->st, "hooks")))
		return 0;
	st = container_status(c, &host_pid, err);
	if (!st)
		return -EIO;
	r = container_hooks(c, "prestart", "created", host_pid, NULL, err);
	if (r == 0)
		r = container_hooks(c, "createRuntime", "created", host_pid, NULL, err);
	return r < 0 ? isola_err_wrap(err, "create container `%s`", c->id) : 0;
}

/* A new network namespace that the engine's prestart/createRuntime hooks program (Docker's
 * bridge and user-defined networks): an empty one of ours at ROOT/ID/netns, joined by the
 * sandbox as its `netns`. */
static int engine_netns(struct container *c, struct oci_mapped *m, struct isola_err **err)
{
	char path[PATH_MAX];
	int r;

	if (!m->engine_netns)
		return 0;
	r = hooks_netns_make(c->dir, m->net_sysctl, path, sizeof(path), err);
	if (r == 0)
		json_object_set_new(m->create, "netns", json_string(path));
	return r;
}

static int do_create(const char *id, struct create_opts *o, struct container *c,
		     struct isola_err **err)
{
	char bundle[PATH_MAX], created[40];
	struct oci_mapped m;
	json_t *sb = NULL;
	struct client *h;
	int r;

	o->tty = -1;
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
		if (r == 0)
			oci_mapped_fini(&m);
		rmdir(c->dir);
		return r < 0 ? r : -EIO;
	}
	r = engine_netns(c, &m, err);
	if (r == 0)
		r = client_json(h, "POST", "/v1/sandboxes", m.create, &sb, err);
	if (r < 0) {
		oci_mapped_fini(&m);
		hooks_netns_remove(c->dir);
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
	if (c->st && m.hooks)
		json_object_set(c->st, "hooks", m.hooks);
	if (c->st)
		podns_record(c->st, m.create); /* what the pod's later containers take */
	/* The isolad that holds the container, for the engine's later calls (isolad_of). */
	if (c->st)
		json_object_set_new(c->st, g.conf.url ? "isolad_url" : "isolad_socket",
				    json_string(g.conf.url ? g.conf.url : g.conf.socket));
	oci_mapped_fini(&m);
	r = c->st ? container_save(c, err) : isola_err_set(err, ENOMEM, NULL, "out of memory");
	o->tty = -1;
	if (r == 0 && json_is_true(json_object_get(json_object_get(c->st, "process"), "tty"))) {
		if (!o->console)
			r = isola_err_set(err, EINVAL, "invalid",
					  "config.json: `process.terminal` needs --console-socket");
		else if ((o->tty = console_setup(o->console, err)) < 0)
			r = o->tty;
	}
	if (r == 0)
		r = create_hooks(c, err);
	if (r < 0) {
		if (o->tty >= 0)
			close(o->tty);
		o->tty = -1;
		destroy_sandbox(json_string_value(json_object_get(c->st, "sandbox")), NULL);
		hooks_netns_remove(c->dir);
		util_rm_rf(c->dir);
	}
	return r;
}

static int relay_io(const char *sandbox, long pid, bool tty, struct isola_err **err);
static const char *opt_val(int argc, char **argv, int *i, const char *name);

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
 * stdio, waits on exec.fifo for `start`, then forwards our stdin to the process and follows
 * its output into our stdout/stderr, and exits with the process's status (at once when the
 * container was killed or deleted unstarted). It is the pid `--pid-file` gets: an engine's
 * shim (a subreaper) waits on it. tty >= 0: the terminal's slave side (console_setup).
 * Returns the relay's pid.
 */
static void on_alarm(int sig)
{
	(void)sig;
}

/*
 * The relay's network namespace becomes the container's (its sandbox init's), so an engine that
 * joins `/proc/<the pid-file's pid>/ns/net` (Docker's `--network container:X`) joins X's
 * network, not the host's. Only over a unix socket: a path reaches isolad from any network
 * namespace, a TCP URL would not. Best effort: the relay works the same either way.
 */
static void relay_enter_netns(struct container *c)
{
	cleanup_err struct isola_err *e = NULL;
	cleanup_fd int pfd = -1;
	cleanup_fd int nfd = -1;
	long host_pid = 0;
	char path[64];

	if (g.conf.url || !container_status(c, &host_pid, &e) || host_pid <= 0)
		return;
	pfd = (int)syscall(SYS_pidfd_open, (pid_t)host_pid, 0);
	snprintf(path, sizeof(path), "/proc/%ld/ns/net", host_pid);
	nfd = pfd < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	/* Alive after the open: the pid was not recycled, the namespace is the init's. */
	if (nfd < 0 || syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) < 0 ||
	    setns(nfd, CLONE_NEWNET) < 0)
		warn("the relay stays in the host's network namespace (Docker's --network "
		     "container: on this container would be refused)");
}

/*
 * Stats: containerd's runc shim (so Docker's stats and the CRI's too) loads the cgroups of the pid
 * it was given from /proc/PID/cgroup once `create` returns, and that pid is the relay (Podman
 * reads `state`'s pid, the sandbox's init, instead). So before `create` returns, the relay
 * joins its sandbox's cgroups in every hierarchy the sandbox uses, as runc's init is in its
 * container's. First it is made what a cgroup OOM never kills (oom_score_adj -1000: the
 * container's own processes are the OOM killer's choice; where CAP_SYS_RESOURCE is withheld,
 * the score it inherited from the shim); it stays a host process the
 * sandbox's processes cannot see or signal (another pid namespace, another uid). Not with
 * $ISOLA_URL (isolad may be on another host). A failure is a warning: the relay works on, and
 * the engine's stats show the engine's cgroup.
 */
static void relay_join_cgroups(const struct container *c, pid_t relay)
{
	cleanup_err struct isola_err *e = NULL;
	struct container self = *c;
	long host_pid = 0;
	char path[64], msg[1024];
	int fd, r;

	if (g.conf.url)
		return;
	if (!container_status(&self, &host_pid, &e) || host_pid <= 0) {
		snprintf(msg, sizeof(msg),
			 "the relay stays in the engine's cgroups (its stats are not the "
			 "container's): container `%s` has no init: %s",
			 c->id, e && e->message ? e->message : "not created");
		warn(msg);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)relay);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	r = fd < 0 || util_write_all(fd, "-1000", 5) < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	/* Without CAP_SYS_RESOURCE (a container host that withholds it) no score can be lowered:
	 * the relay keeps the one it inherited from the engine's shim (docs/oci.md, "Stats"). */
	if (r == -EACCES || r == -EPERM)
		r = 0;
	if (r == 0)
		r = oci_cgroup_join((pid_t)host_pid, sandbox_of(&self), relay, &e);
	if (r < 0) {
		snprintf(msg, sizeof(msg),
			 "the relay stays in the engine's cgroups (its stats are not the "
			 "container's): %s",
			 e && e->message ? e->message : strerror(-r));
		warn(msg);
	}
}

/*
 * The forked relay's start: a session of its own, the terminal (if any) as its stdio, no
 * client shared with the parent, and nothing of its caller's but stdio: it lives as long as
 * its process, and a runtime inherits what its caller left open (containerd's shim leaves its
 * listening socket at fd 3; a pipe end kept open holds its reader's EOF). The log is opened
 * per line, by name.
 */
static void relay_detach(int tty)
{
	setsid();
	take_terminal(tty);
	syscall(SYS_close_range, 3, ~0U, 0);
	g.cl = NULL;
}

static pid_t relay_spawn(const struct container *c, int tty, struct isola_err **err)
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
	if (pid > 0) {
		relay_join_cgroups(c, pid);
		return pid;
	}
	relay_detach(tty);
	{
		struct container self = *c;

		relay_enter_netns(&self);
	}
	/* Blocks until start/kill/delete opens the fifo; a 1 s timer interrupts the open to see
	 * whether the state dir is gone (removed by hand, or the engine gave up on the container
	 * without a delete), so a relay never waits forever. */
	{
		struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART: open gets EINTR */
		struct itimerval it = {{1, 0}, {1, 0}};

		sigaction(SIGALRM, &sa, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
		while ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 && errno == EINTR &&
		       access(path, F_OK) == 0)
			;
		memset(&it, 0, sizeof(it));
		setitimer(ITIMER_REAL, &it, NULL);
	}
	if (fd >= 0)
		close(fd);
	st = 0;
	if (container_load(&rc, c->id, NULL) == 0 &&
	    json_integer_value(json_object_get(rc.st, "pid")) > 0 &&
	    !json_is_true(json_object_get(rc.st, "killed")))
		st = relay_io(sandbox_of(&rc),
			      (long)json_integer_value(json_object_get(rc.st, "pid")), tty >= 0,
			      NULL);
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
	if (r == 0)
		warn_hooks(c, "poststart", "running", host_pid);
	return r;
}

/* Where one follow of a process's output stands; survives re-follows after isolad restarts. */
struct out_state {
	long long seen[2]; /* bytes of stdout/stderr already written to our fd 1/2 */
	long long pos[2];  /* offset of the next byte of this follow's replay */
	bool exited;	   /* an exit event came: status is final */
	int status;	   /* shell style: 128+N for signal N */
};

/* Writes one stdout/stderr event of the container's output to our fd 1 or 2, skipping what an
 * earlier follow already wrote (a re-follow replays the retained tail from its start). */
static int on_output(void *ud, json_t *ev, struct isola_err **err)
{
	struct out_state *os = ud;
	const char *type = json_string_value(json_object_get(ev, "type"));
	const json_t *data = json_object_get(ev, "data");
	const char *s = json_string_value(data);
	cleanup_free unsigned char *buf = NULL;
	long len, skip;
	int k;

	if (type && !strcmp(type, "exit")) {
		long sig = (long)json_integer_value(json_object_get(ev, "signal"));

		os->exited = true;
		os->status = sig > 0 ? 128 + (int)sig
				     : (int)json_integer_value(json_object_get(ev, "exit_code"));
		return 0;
	}
	if (type && !strcmp(type, "dropped")) {
		k = !strcmp(json_string_value(json_object_get(ev, "stream")) ?: "", "stderr");
		os->pos[k] += (long long)json_integer_value(json_object_get(ev, "bytes"));
		return 0;
	}
	if (!type || !s || (strcmp(type, "stdout") && strcmp(type, "stderr")))
		return 0;
	k = !strcmp(type, "stderr");
	buf = malloc(json_string_length(data) / 4 * 3 + 4);
	if (!buf)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	/* UNTRUSTED: the container's output; only copied to our stdout/stderr. */
	len = cli_b64_decode(s, json_string_length(data), buf);
	if (len < 0)
		return isola_err_set(err, EPROTO, "internal", "output event with malformed base64");
	skip = os->seen[k] > os->pos[k] ? (long)(os->seen[k] - os->pos[k]) : 0;
	os->pos[k] += len;
	if (skip >= len)
		return 0;
	if (util_write_all(k ? 2 : 1, buf + skip, (size_t)(len - skip)) < 0 && errno != EPIPE)
		return isola_err_sys(err, errno, NULL, "write output");
	os->seen[k] = os->pos[k];
	return 0;
}

/*
 * Follows process pid's output to our stdout/stderr and returns its exit status (shell
 * style: 128+N for signal N). A follow that ends without the exit event (isolad restarted, the
 * connection broke) is taken up again once isolad answers, without writing anything twice:
 * an engine's container outlives an isolad restart. Gives up when the sandbox or the process
 * is gone, or after 10 minutes without an answer.
 */
static int follow(const char *sandbox, long pid, struct isola_err **err)
{
	cleanup_free char *out =
		cli_pathf("/v1/sandboxes/%s/processes/%ld/output?follow=true", sandbox, pid);
	struct out_state os = {0};
	struct client_req rq = {.method = "GET",
				.path = out,
				.body_fd = -1,
				.accept = "application/x-ndjson",
				.on_event = on_output,
				.ud = &os};
	struct client *h = cl(err);
	struct timespec last_ok, now;

	if (!h)
		return -EIO;
	clock_gettime(CLOCK_MONOTONIC, &last_ok);
	for (;;) {
		struct isola_err *e = NULL;
		struct timespec pause = {0, 200000000};
		int r;

		os.pos[0] = os.pos[1] = 0;
		r = client_do(h, &rq, &e);
		if (os.exited) {
			isola_err_free(e);
			return os.status;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (r == 0)
			last_ok = now;
		if (r < 0 && (sandbox_gone(e) || !strcmp(e->code, "not_found") ||
			      now.tv_sec - last_ok.tv_sec > 600)) {
			if (err)
				*err = e;
			else
				isola_err_free(e);
			return -EIO;
		}
		isola_err_free(e);
		nanosleep(&pause, NULL);
	}
}

/* POSTs len bytes of buf as a raw body to path (the process's stdin). */
static int post_bytes(struct client *h, const char *path, const char *buf, size_t len)
{
	struct client_req rq = {.method = "POST", .path = path, .body_fd = -1};
	int p[2], r;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* len <= 16 KiB fits a pipe's buffer: written whole before the request reads it. */
	if (util_write_all(p[1], buf, len) < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	close(p[1]);
	rq.body_fd = p[0];
	rq.body_size = (int64_t)len;
	r = client_do(h, &rq, NULL);
	close(p[0]);
	return r;
}

/*
 * Forwards our stdin to process pid until EOF, then closes the process's stdin (a /dev/null
 * stdin closes it at once, as runc's container sees /dev/null). With a tty, our stdin is the
 * terminal's slave: its size is followed too (checked on every wakeup, at least 4 times a
 * second) and EOF/EIO (the engine closed the master) ends the forwarding. Never returns.
 */
static void stdin_forward(const char *sandbox, long pid, bool tty)
{
	cleanup_free char *in = cli_pathf("/v1/sandboxes/%s/processes/%ld/stdin", sandbox, pid);
	cleanup_free char *close_in =
		cli_pathf("/v1/sandboxes/%s/processes/%ld/close-stdin", sandbox, pid);
	cleanup_free char *resize =
		cli_pathf("/v1/sandboxes/%s/processes/%ld/resize", sandbox, pid);
	struct winsize last = {0}, ws;
	char buf[16384];
	struct client *h;

	g.cl = NULL;
	if (!(h = cl(NULL)))
		_exit(1);
	for (;;) {
		struct pollfd pf = {.fd = 0, .events = POLLIN};
		int n = poll(&pf, 1, tty ? 250 : -1);
		ssize_t k;

		if (tty && ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row &&
		    (ws.ws_col != last.ws_col || ws.ws_row != last.ws_row)) {
			json_t *b = json_pack("{s:i, s:i}", "cols", ws.ws_col, "rows", ws.ws_row);

			client_json(h, "POST", resize, b, NULL, NULL);
			json_decref(b);
			last = ws;
		}
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		k = read(0, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || post_bytes(h, in, buf, (size_t)k) < 0)
			break;
	}
	if (!tty)
		client_json(h, "POST", close_in, NULL, NULL, NULL);
	_exit(0);
}

/*
 * No stdin forwarder (its fork failed: the relay is in the sandbox's cgroups, so a pids limit
 * the container already reached counts it too): the process's stdin is closed, as a
 * /dev/null stdin would be, rather than left open with nobody to write or close it.
 */
static void stdin_unforwarded(const char *sandbox, long pid)
{
	cleanup_free char *close_in =
		cli_pathf("/v1/sandboxes/%s/processes/%ld/close-stdin", sandbox, pid);
	char msg[128];

	snprintf(msg, sizeof(msg),
		 "stdin is not forwarded (fork: %s): the process's stdin is closed",
		 strerror(errno));
	warn(msg);
	client_json(cl(NULL), "POST", close_in, NULL, NULL, NULL);
}

/* Our stdio <-> process pid: stdin forwarded by a child, output followed here. Returns the
 * process's exit status (shell style) or -errno. */
static int relay_io(const char *sandbox, long pid, bool tty, struct isola_err **err)
{
	pid_t fw;
	int st;

	fflush(NULL);
	fw = fork();
	if (fw == 0)
		stdin_forward(sandbox, pid, tty);
	if (fw < 0)
		stdin_unforwarded(sandbox, pid);
	st = follow(sandbox, pid, err);
	if (fw > 0) {
		kill(fw, SIGKILL);
		waitpid(fw, NULL, 0);
	}
	return st;
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
	warn_hooks(c, "poststop", "stopped", 0);
	hooks_netns_remove(c->dir);
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
	/* runc's words: containerd's shim takes an error holding "container not running" for
	 * a process that already finished (checkKillError); anything else fails the CRI's
	 * kill-all of a stopped container, and its StopPodSandbox never ends. */
	if (!strcmp(st, "stopped"))
		return isola_err_set(err, ESRCH, "conflict",
				     "kill container `%s`: container not running (it has stopped)",
				     c->id);
	if (!strcmp(st, "created")) {
		/* Nothing of the container's runs yet: it stops, and its sandbox goes. The sandbox
		 * first: its end kills the relay in its cgroups (137 for the engine, always); only
		 * a relay outside them (it could not join) is woken to exit by itself. */
		json_object_set_new(c->st, "killed", json_true());
		r = container_save(c, err);
		if (r == 0)
			r = destroy_sandbox(sandbox_of(c), err);
		relay_release(c);
		return r;
	}
	path = cli_pathf("/v1/sandboxes/%s/processes/%ld/signal", sandbox_of(c), pid);
	body = json_pack("{s:i}", "signal", sig);
	r = client_json(cl(err), "POST", path, body, NULL, err);
	json_decref(body);
	return r < 0 ? isola_err_wrap(err, "kill container `%s`", c->id) : 0;
}

/*
 * A container whose process has ended while its relay still writes the process's output to
 * create's stdout/stderr: `state` says running (with the sandbox init's host pid) until the
 * relay exits, as runc's says running until its init has exited, so an engine or a test that
 * reads the output once the container is stopped reads all of it. Returns the host pid, or 0.
 */
static long output_pending(struct container *c)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s", sandbox_of(c));
	json_t *sb = NULL;
	long host_pid = 0;

	if (json_is_true(json_object_get(c->st, "killed")) ||
	    json_integer_value(json_object_get(c->st, "pid")) <= 0 || !podns_relay_running(c->st) ||
	    client_json(cl(NULL), "GET", path, NULL, &sb, NULL) < 0)
		return 0;
	if (!strcmp(json_string_value(json_object_get(sb, "state")) ?: "", "running"))
		host_pid = (long)json_integer_value(json_object_get(sb, "host_pid"));
	json_decref(sb);
	return host_pid;
}

static int print_state(struct container *c, struct isola_err **err)
{
	long host_pid;
	const char *st = container_status(c, &host_pid, err);
	json_t *j;
	char *s;

	if (!st)
		return -EIO;
	if (!strcmp(st, "stopped") && (host_pid = output_pending(c)) > 0)
		st = "running";
	j = oci_state(c, st, host_pid);
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

/* Options of exec. */
struct exec_opts {
	const char *process;  /* --process FILE (a runtime-spec process object), or NULL */
	const char *pid_file; /* --pid-file */
	const char *console;  /* --console-socket */
	const char *cwd;      /* --cwd */
	const char *user;     /* --user UID[:GID] */
	json_t *env;	      /* --env K=V..., owned array */
	bool tty, detach;
	char **argv; /* the command after the id (args form) */
	int argc;
};

/* The body of POST .../processes for exec: process.json, or the container's process with
 * the command, env, cwd and user of the command line. */
static json_t *exec_body(struct container *c, const struct exec_opts *o, struct isola_err **err)
{
	json_t *body = NULL, *cmd, *env, *v;
	size_t i;

	if (o->process) {
		cleanup_free char *text = NULL;
		size_t len = 0;
		int r = util_read_file(o->process, OCI_CONFIG_MAX, &text, &len);

		if (r < 0)
			return isola_err_sys(err, -r, "invalid", "read --process `%s`", o->process),
			       NULL;
		if (oci_process_map(text, len, &body, err) < 0) {
			isola_err_wrap(err, "exec: --process `%s`", o->process);
			return NULL;
		}
		if (o->tty)
			json_object_set_new(body, "tty", json_true());
		return body;
	}
	if (o->argc == 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "exec: give a command after the container id, or --process"),
		       NULL;
	body = json_deep_copy(json_object_get(c->st, "process"));
	if (!body)
		body = json_object();
	cmd = json_array();
	for (int k = 0; k < o->argc; k++)
		json_array_append_new(cmd, json_string(o->argv[k]));
	json_object_set_new(body, "cmd", cmd);
	json_object_set_new(body, "tag", json_string("oci-exec"));
	json_object_set_new(body, "tty", json_boolean(o->tty));
	if (!json_is_object(json_object_get(body, "env")))
		json_object_set_new(body, "env", json_object());
	env = json_object_get(body, "env");
	json_array_foreach(o->env, i, v)
	{
		const char *kv = json_string_value(v), *eq = strchr(kv, '=');
		char key[256];

		if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key)) {
			json_decref(body);
			return isola_err_set(err, EINVAL, "invalid",
					     "exec: --env `%.64s` must be KEY=VALUE", kv),
			       NULL;
		}
		memcpy(key, kv, (size_t)(eq - kv));
		key[eq - kv] = '\0';
		json_object_set_new(env, key, json_string(eq + 1));
	}
	if (o->cwd) {
		if (o->cwd[0] != '/') {
			json_decref(body);
			return isola_err_set(err, EINVAL, "invalid",
					     "exec: --cwd `%s` must be an absolute path", o->cwd),
			       NULL;
		}
		json_object_set_new(body, "cwd", json_string(o->cwd));
	}
	if (o->user) {
		char name[24], *end;
		unsigned long uid = strtoul(o->user, &end, 10);

		if (end == o->user || (*end && *end != ':') || uid > 0xfffffffeul) {
			json_decref(body);
			return isola_err_set(err, EINVAL, "invalid",
					     "exec: --user `%s` must be UID[:GID] (numeric)",
					     o->user),
			       NULL;
		}
		snprintf(name, sizeof(name), "%lu", uid);
		json_object_set_new(body, "user", json_string(name));
	}
	return body;
}

/* runc exec: a new process in the container. Detached: a relay (its pid in --pid-file) keeps
 * our stdio for it; else we relay and exit with its status. */
static int do_exec(struct container *c, const struct exec_opts *o, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/processes", sandbox_of(c));
	long host_pid, pid;
	const char *st = container_status(c, &host_pid, err);
	json_t *body, *proc = NULL;
	int tty = -1, r;
	pid_t relay;

	if (!st)
		return -EIO;
	if (strcmp(st, "running") && strcmp(st, "created"))
		return isola_err_set(err, EINVAL, "conflict",
				     "container `%s` is %s: exec needs a running container", c->id,
				     st);
	if (!(body = exec_body(c, o, err)))
		return -EINVAL;
	if (json_is_true(json_object_get(body, "tty"))) {
		if (!o->console) {
			json_decref(body);
			return isola_err_set(err, EINVAL, "invalid",
					     "exec: a terminal (-t or process.terminal) needs "
					     "--console-socket");
		}
		tty = console_setup(o->console, err);
		if (tty < 0) {
			json_decref(body);
			return tty;
		}
	}
	r = client_json(cl(err), "POST", path, body, &proc, err);
	json_decref(body);
	if (r < 0) {
		if (tty >= 0)
			close(tty);
		return isola_err_wrap(err, "exec in container `%s`", c->id);
	}
	pid = (long)json_integer_value(json_object_get(proc, "pid"));
	json_decref(proc);
	if (!o->detach) {
		if (o->pid_file && write_pid_file(o->pid_file, (long)getpid(), err) < 0)
			return -EIO;
		take_terminal(tty);
		return relay_io(sandbox_of(c), pid, tty >= 0, err);
	}
	fflush(NULL);
	relay = fork();
	if (relay < 0)
		return isola_err_sys(err, errno, NULL, "fork the exec relay");
	if (relay == 0) {
		relay_detach(tty);
		r = relay_io(sandbox_of(c), pid, tty >= 0, NULL);
		_exit(r < 0 ? 255 : r);
	}
	if (tty >= 0)
		close(tty);
	return o->pid_file ? write_pid_file(o->pid_file, (long)relay, err) : 0;
}

/* The host pids of the container: every process in the pid namespace of its init. */
static json_t *container_pids(struct container *c, struct isola_err **err)
{
	char want[64], got[64], path[64];
	long host_pid;
	const char *st = container_status(c, &host_pid, err);
	json_t *pids;
	struct dirent *de;
	DIR *d;
	ssize_t n;

	if (!st)
		return NULL;
	pids = json_array();
	if (host_pid <= 0)
		return pids; /* stopped: nothing runs */
	snprintf(path, sizeof(path), "/proc/%ld/ns/pid", host_pid);
	n = readlink(path, want, sizeof(want) - 1);
	if (n <= 0 || !(d = opendir("/proc"))) {
		json_decref(pids);
		return isola_err_sys(err, errno, NULL, "read `%s`", path), NULL;
	}
	want[n] = '\0';
	while ((de = readdir(d))) {
		char *end;
		long p = strtol(de->d_name, &end, 10);

		if (*end || p <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/ns/pid", p);
		n = readlink(path, got, sizeof(got) - 1);
		if (n > 0 && (got[n] = '\0', !strcmp(got, want)))
			json_array_append_new(pids, json_integer(p));
	}
	closedir(d);
	return pids;
}

static int do_ps(struct container *c, const char *format, int argc, char **argv,
		 struct isola_err **err)
{
	json_t *pids = container_pids(c, err), *v;
	size_t i;
	int r = 0;

	if (!pids)
		return -EIO;
	if (!strcmp(format, "json")) {
		char *s = json_dumps(pids, JSON_COMPACT);

		printf("%s\n", s ? s : "[]");
		free(s);
	} else {
		/* table: ps's own output (ps ARGS, default -ef), the header and our pids' rows. */
		char cmdline[4096] = "ps", line[4096];
		size_t off = 2;
		int pidcol = -1;
		FILE *f;

		for (int k = 0; k < argc; k++) {
			if (strchr(argv[k], '\'')) {
				json_decref(pids);
				return isola_err_set(err, EINVAL, "invalid",
						     "ps: argument `%.64s` holds a quote", argv[k]);
			}
			off += (size_t)snprintf(cmdline + off, sizeof(cmdline) - off, " '%s'",
						argv[k]);
			if (off >= sizeof(cmdline)) {
				json_decref(pids);
				return isola_err_set(err, E2BIG, "invalid",
						     "ps: arguments too long");
			}
		}
		if (argc == 0)
			snprintf(cmdline, sizeof(cmdline), "ps -ef");
		f = popen(cmdline, "re");
		if (!f) {
			json_decref(pids);
			return isola_err_sys(err, errno, NULL, "run `%s`", cmdline);
		}
		/* The first line with a PID column is the header (kept); on every later line
		 * that column's value decides whether the row is the container's. */
		while (fgets(line, sizeof(line), f)) {
			char copy[4096], *tok, *save = NULL;
			bool header = false, ours = false;
			int col = 0;

			snprintf(copy, sizeof(copy), "%s", line);
			for (tok = strtok_r(copy, " \t\n", &save); tok;
			     tok = strtok_r(NULL, " \t\n", &save), col++) {
				if (pidcol < 0 && !strcmp(tok, "PID")) {
					pidcol = col;
					header = true;
					break;
				}
				if (col == pidcol) {
					long p = strtol(tok, NULL, 10);

					json_array_foreach(pids, i, v) ours =
						ours || json_integer_value(v) == p;
					break;
				}
			}
			if (header || ours)
				fputs(line, stdout);
		}
		if (pclose(f) != 0 || pidcol < 0)
			r = isola_err_set(err, EINVAL, "invalid",
					  "ps: `%s` failed or printed no PID column", cmdline);
	}
	json_decref(pids);
	return r;
}

static int do_pause(struct container *c, bool pause, struct isola_err **err)
{
	cleanup_free char *path =
		cli_pathf("/v1/sandboxes/%s/%s", sandbox_of(c), pause ? "pause" : "resume");
	long host_pid;
	const char *st = container_status(c, &host_pid, err);

	if (!st)
		return -EIO;
	if (pause ? strcmp(st, "running") && strcmp(st, "created") : strcmp(st, "paused") != 0)
		return isola_err_set(err, EINVAL, "conflict", "container `%s` is %s: cannot %s it",
				     c->id, st, pause ? "pause" : "resume");
	if (client_json(cl(err), "POST", path, NULL, NULL, err) < 0)
		return isola_err_wrap(err, "%s container `%s`", pause ? "pause" : "resume", c->id);
	return 0;
}

/* One stats event in runc's format ({"type":"stats","id","data":{cpu,memory,pids,...}}). */
static int print_stats(struct container *c, struct isola_err **err)
{
	cleanup_free char *path = cli_pathf("/v1/sandboxes/%s/stats", sandbox_of(c));
	json_t *st = NULL, *ev;
	char *s;

	if (client_json(cl(err), "GET", path, NULL, &st, err) < 0)
		return isola_err_wrap(err, "stats of container `%s`", c->id);
	ev = json_pack(
		"{s:s, s:s, s:{s:{s:{s:I, s:[], s:I, s:I}, s:{}}, s:{s:I, s:{s:I, s:I, s:I, s:I},"
		" s:{}, s:{}, s:{}, s:{}}, s:{s:I, s:I}, s:{}, s:{}}}",
		"type", "stats", "id", c->id, "data", "cpu", "usage", "total",
		(json_int_t)(json_number_value(json_object_get(st, "cpu_seconds")) * 1e9), "percpu",
		"kernel", (json_int_t)0, "user", (json_int_t)0, "throttling", "memory", "cache",
		(json_int_t)0, "usage", "usage",
		(json_int_t)json_integer_value(json_object_get(st, "memory_bytes")), "max",
		(json_int_t)json_integer_value(json_object_get(st, "memory_peak_bytes")), "limit",
		(json_int_t)json_integer_value(json_object_get(st, "memory_limit_bytes")),
		"failcnt", (json_int_t)json_integer_value(json_object_get(st, "oom_kills")), "swap",
		"kernel", "kernelTCP", "raw", "pids", "current",
		(json_int_t)json_integer_value(json_object_get(st, "pids")), "limit", (json_int_t)0,
		"blkio", "hugetlb");
	json_decref(st);
	s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	json_decref(ev);
	if (!s)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	return 0;
}

/* DURATION as Go writes it: 5s, 500ms, 1m, 1.5s. Returns milliseconds or -1. */
static long parse_interval(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v <= 0)
		return -1;
	if (!strcmp(end, "ms"))
		return (long)v;
	if (!strcmp(end, "s") || !*end)
		return (long)(v * 1000);
	if (!strcmp(end, "m"))
		return (long)(v * 60000);
	return -1;
}

/* runc events: --stats prints one stats event; otherwise one every interval until the
 * container stops (then exits 0). */
static int do_events(struct container *c, bool stats, long interval_ms, struct isola_err **err)
{
	for (;;) {
		long host_pid;
		const char *st = container_status(c, &host_pid, err);
		struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000};

		if (!st)
			return -EIO;
		if (!strcmp(st, "stopped"))
			return stats ? isola_err_set(err, ESRCH, "conflict",
						     "container `%s` is not running", c->id)
				     : 0;
		if (print_stats(c, err) < 0)
			return -EIO;
		if (stats)
			return 0;
		nanosleep(&ts, NULL);
	}
}

/* exec/ps/events: options, then the id, then (exec, ps) everything else verbatim. */
static int run_container_command(int argc, char **argv)
{
	const char *cmd = argv[0], *id = NULL, *v, *format = "table";
	struct exec_opts xo = {.env = json_array()};
	struct isola_err *err = NULL;
	struct container c = {0};
	bool stats = false;
	long interval = 5000;
	int r, i;

	for (i = 1; i < argc && !id; i++) {
		const char *a = argv[i];

		if (a[0] != '-' || !a[1]) {
			id = a;
		} else if ((v = opt_val(argc, argv, &i, "--process")) ||
			   (v = opt_val(argc, argv, &i, "-p"))) {
			xo.process = v;
		} else if ((v = opt_val(argc, argv, &i, "--pid-file"))) {
			xo.pid_file = v;
		} else if ((v = opt_val(argc, argv, &i, "--console-socket"))) {
			xo.console = v;
		} else if ((v = opt_val(argc, argv, &i, "--cwd"))) {
			xo.cwd = v;
		} else if ((v = opt_val(argc, argv, &i, "--user")) ||
			   (v = opt_val(argc, argv, &i, "-u"))) {
			xo.user = v;
		} else if ((v = opt_val(argc, argv, &i, "--env")) ||
			   (v = opt_val(argc, argv, &i, "-e"))) {
			json_array_append_new(xo.env, json_string(v));
		} else if ((v = opt_val(argc, argv, &i, "--format")) ||
			   (v = opt_val(argc, argv, &i, "-f"))) {
			format = v;
		} else if ((v = opt_val(argc, argv, &i, "--interval"))) {
			interval = parse_interval(v);
			if (interval < 0) {
				json_decref(xo.env);
				return report("%s: --interval `%s`: expected a duration like 5s",
					      cmd, v),
				       1;
			}
		} else if ((v = opt_val(argc, argv, &i, "--preserve-fds")) ||
			   (v = opt_val(argc, argv, &i, "--apparmor")) ||
			   (v = opt_val(argc, argv, &i, "--process-label")) ||
			   (v = opt_val(argc, argv, &i, "--cap")) ||
			   (v = opt_val(argc, argv, &i, "-c")) ||
			   (v = opt_val(argc, argv, &i, "--cgroup"))) {
			continue; /* isola's own profile, caps and cgroup apply (docs/oci.md) */
		} else if (!strcmp(a, "--tty") || !strcmp(a, "-t")) {
			xo.tty = true;
		} else if (!strcmp(a, "--detach") || !strcmp(a, "-d")) {
			xo.detach = true;
		} else if (!strcmp(a, "--stats")) {
			stats = true;
		} else if (!strcmp(a, "--no-new-privs") || !strcmp(a, "--ignore-paused")) {
			continue; /* no_new_privs is always on */
		} else {
			json_decref(xo.env);
			return report("%s: unknown option `%s`", cmd, a), 1;
		}
	}
	if (!id) {
		json_decref(xo.env);
		return report("%s: missing container ID", cmd), 1;
	}
	xo.argv = argv + i;
	xo.argc = argc - i;
	if (strcmp(format, "json") && strcmp(format, "table")) {
		json_decref(xo.env);
		return report("ps: --format `%s`: expected table or json", format), 1;
	}
	if (strcmp(cmd, "exec") && strcmp(cmd, "ps") && xo.argc > 0) {
		json_decref(xo.env);
		return report("%s: unexpected argument `%s`", cmd, xo.argv[0]), 1;
	}
	if (container_load(&c, id, &err) < 0)
		r = -ENOENT;
	else if (!strcmp(cmd, "exec"))
		r = do_exec(&c, &xo, &err);
	else if (!strcmp(cmd, "ps"))
		r = do_ps(&c, format, xo.argc, xo.argv, &err);
	else
		r = do_events(&c, stats, interval, &err);
	json_decref(xo.env);
	json_decref(c.st);
	if (r < 0)
		return fail_err(err);
	return r; /* exec: the process's status */
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
	      "  exec [-t] [-d] [--process F | ID CMD...]     run a process in the container\n"
	      "  ps [--format table|json] ID [PS ARGS]        the container's host pids\n"
	      "  pause ID / resume ID                         freeze / thaw the container\n"
	      "  events [--stats] [--interval 5s] ID          resource stats (runc's JSON)\n"
	      "  spec [--bundle DIR]                          write a config.json\n"
	      "  features                                     print the features JSON\n\n"
	      "global options: --root DIR (" DEFAULT_ROOT "), --log FILE, --log-format text|json,\n"
	      "  --isola-socket PATH (isolad's socket; overrides $ISOLA_SOCKET and $ISOLA_URL),\n"
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

	if (!strcmp(cmd, "exec") || !strcmp(cmd, "ps") || !strcmp(cmd, "events"))
		return run_container_command(argc, argv);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if ((v = opt_val(argc, argv, &i, "--bundle")) ||
		    (v = opt_val(argc, argv, &i, "-b")))
			o.bundle = v;
		else if ((v = opt_val(argc, argv, &i, "--pid-file")))
			o.pid_file = v;
		else if ((v = opt_val(argc, argv, &i, "--console-socket")))
			o.console = v;
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
	if (!strcmp(cmd, "update") || !strcmp(cmd, "checkpoint") || !strcmp(cmd, "restore") ||
	    !strcmp(cmd, "list"))
		return report("`%s` is not supported yet (docs/oci.md)", cmd), 1;
	if (strcmp(cmd, "create") && strcmp(cmd, "run") && strcmp(cmd, "start") &&
	    strcmp(cmd, "state") && strcmp(cmd, "delete") && strcmp(cmd, "kill") &&
	    strcmp(cmd, "pause") && strcmp(cmd, "resume"))
		return report("unknown command `%s` (isola-runc --help)", cmd), 1;
	if (!id)
		return report("%s: missing container ID", cmd), 1;
	if (!strcmp(cmd, "create") || !strcmp(cmd, "run")) {
		bool relay = !strcmp(cmd, "create") || o.detach;
		pid_t rp = 0;

		r = do_create(id, &o, &c, &err);
		/* --pid-file: the pid an engine's shim waits on (the relay; run: ourselves). */
		if (r == 0 && relay && (rp = relay_spawn(&c, o.tty, &err)) < 0)
			r = -EIO;
		/* The relay is the pid the engine names this container by (a pod's later
		 * containers get its /proc/PID/ns paths): podns.h. */
		if (r == 0 && relay && podns_record_relay(c.st, rp) < 0)
			r = isola_err_set(&err, ESRCH, NULL,
					  "the output relay (pid %d) exited at once", (int)rp);
		if (r == 0 && relay && container_save(&c, &err) < 0)
			r = -EIO;
		if (r == 0 && o.pid_file &&
		    write_pid_file(o.pid_file, relay ? (long)rp : (long)getpid(), &err) < 0)
			r = -EIO;
		if (r < 0 && c.st) {
			json_object_set_new(c.st, "killed", json_true());
			container_save(&c, NULL);
			relay_release(&c);
			destroy_sandbox(sandbox_of(&c), NULL);
			hooks_netns_remove(c.dir);
			util_rm_rf(c.dir);
		}
		if (relay && o.tty >= 0)
			close(o.tty);
		if (r == 0 && !strcmp(cmd, "run")) {
			r = do_start(&c, &err);
			if (r == 0 && !o.detach) {
				long pid = (long)json_integer_value(json_object_get(c.st, "pid"));

				take_terminal(o.tty);
				r = relay_io(sandbox_of(&c), pid, o.tty >= 0, &err);
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
	} else if (!strcmp(cmd, "pause") || !strcmp(cmd, "resume")) {
		r = do_pause(&c, !strcmp(cmd, "pause"), &err);
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
	g.conf_given = env && *env;
	g.conf.url = (env = getenv("ISOLA_URL")) && *env ? env : NULL;
	g.conf_given = g.conf_given || g.conf.url;
	g.conf.token = (env = getenv("ISOLA_TOKEN")) && *env ? env : NULL;
	signal(SIGPIPE, SIG_IGN);
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if ((v = opt_val(argc, argv, &i, "--root"))) {
			g.root = v;
		} else if ((v = opt_val(argc, argv, &i, "--isola-socket"))) {
			/* isolad's socket for engines that pass no environment (Podman's conmon):
			 * `podman --runtime-flag isola-socket=PATH`. */
			g.conf.socket = v;
			g.conf.url = NULL;
			g.conf_given = true;
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
