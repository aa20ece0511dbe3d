/* SPDX-License-Identifier: Apache-2.0 */
/* proc: the process table — exec, output rings and subscribers, stdin, exits, timeouts. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/proto.h"

#define DEFAULT_RETENTION (1u << 20)
#define MIN_RETENTION	  4096
#define MAX_RETENTION	  (64u << 20)
#define KEEP_FINISHED	  256	      /* exited processes kept for ps/attach/wait */
#define FINISHED_BUDGET	  (16u << 20) /* ring bytes kept across all exited processes */
#define LINGER_MS	  100	      /* after exit, drain pipes that descendants hold */
#define MAX_ARGV	  4096
#define MAX_ENV		  1024
#define DEFAULT_PATH	  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct proc;

/* One output stream (stdout or, without a tty, stderr). */
struct stream {
	struct watch w;	  /* our read end; first member (callbacks cast back) */
	struct ring ring; /* retained tail */
	bool eof;	  /* read end closed */
	struct proc *p;	  /* owner */
};

/* Bytes queued for a process's stdin, in arrival order. */
struct stdin_chunk {
	struct stdin_chunk *next; /* queue link */
	uint32_t chan_id;	  /* credit goes back to this channel (if still open) */
	size_t len, off;	  /* data length, bytes already written */
	bool close;		  /* marker: close stdin here */
	bool notify;		  /* marker: the `stdin` op on chan_id is complete */
	uint8_t data[];		  /* payload */
};

struct proc {
	struct proc *next, *prev;	    /* table links, newest first */
	pid_t pid;			    /* also the process group id (setsid) */
	json_t *argv;			    /* for ps, owned */
	char *tag;			    /* caller's tag, owned, may be NULL */
	bool tty;			    /* stdout is a pty master; no stderr */
	int master;			    /* pty master (== out[0].w.fd) or -1 */
	struct stream out[2];		    /* stdout, stderr */
	struct watch in;		    /* stdin write end, fd -1 when closed */
	struct stdin_chunk *inq, *inq_tail; /* pending stdin */
	bool exited;			    /* reaped */
	bool finished;			    /* reaped and both streams at EOF */
	bool timed_out;			    /* killed by timeout_ms */
	int64_t oom_base;		    /* isolad's OOM-kill count at start, echoed; -1 none */
	int status;			    /* wait status */
	uint64_t start_ms, exit_ms;	    /* monotonic */
	uint64_t deadline_ms;		    /* timeout, 0 = none */
	double started_at;		    /* wall clock */
	struct chan *fg;		    /* foreground exec channel: applies backpressure */
};

static struct proc *procs;
static size_t nprocs;

static void proc_pump(struct proc *p);
static void update_watches(struct proc *p);

size_t proc_count(void)
{
	return nprocs;
}

static struct proc *proc_find(pid_t pid)
{
	struct proc *p;

	for (p = procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* ---- output ---- */

/* How far the process may run ahead of its foreground consumer. */
static size_t fg_threshold(const struct stream *s)
{
	return s->ring.cap < PROTO_WINDOW ? s->ring.cap : PROTO_WINDOW;
}

/* Bytes the stream may read now: a foreground process stops while its channel has not
 * taken what we hold; a background one never blocks (its ring overwrites). */
static size_t stream_budget(const struct stream *s, int idx)
{
	const struct proc *p = s->p;
	uint64_t pending;

	if (s->eof)
		return 0;
	if (!p->fg)
		return 64 * 1024;
	pending = s->ring.total - p->fg->cur[idx];
	if (pending >= fg_threshold(s))
		return 0;
	pending = fg_threshold(s) - pending;
	return pending < 64 * 1024 ? (size_t)pending : 64 * 1024;
}

static void stream_close(struct stream *s)
{
	if (s->eof)
		return;
	watch_set(&s->w, 0);
	if (s->w.fd >= 0 && s->w.fd != s->p->master)
		close(s->w.fd);
	s->w.fd = -1;
	s->eof = true;
}

/* Reads once; returns bytes read, 0 at EOF (stream closed), -EAGAIN. */
static ssize_t stream_read(struct stream *s, int idx)
{
	uint8_t buf[64 * 1024];
	size_t budget = stream_budget(s, idx);
	ssize_t n;

	if (budget == 0)
		return -EAGAIN;
	n = read(s->w.fd, buf, budget);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	if (n <= 0) { /* EOF, or EIO from a pty whose slave side is gone */
		stream_close(s);
		return 0;
	}
	if (ring_write(&s->ring, buf, (size_t)n) < 0)
		return n; /* out of memory: the bytes are lost, readers see a gap */
	return n;
}

static void stream_cb(struct watch *w, uint32_t events)
{
	struct stream *s = (struct stream *)w;
	struct proc *p = s->p;

	stream_read(s, s == &p->out[0] ? 0 : 1);
	proc_pump(p);
}

static void update_watches(struct proc *p)
{
	int i;

	for (i = 0; i < 2; i++)
		if (!p->out[i].eof)
			watch_set(&p->out[i].w, stream_budget(&p->out[i], i) ? EPOLLIN : 0);
	if (p->in.fd >= 0)
		watch_set(&p->in, p->inq ? EPOLLOUT : 0);
}

static json_t *exit_json(const struct proc *p)
{
	int code = 0, sig = 0;

	if (WIFEXITED(p->status))
		code = WEXITSTATUS(p->status);
	else if (WIFSIGNALED(p->status))
		sig = WTERMSIG(p->status), code = 128 + sig;
	json_t *j = json_pack("{s:i,s:i,s:i,s:b,s:I}", "pid", (int)p->pid, "exit_code", code,
			      "signal", sig, "timed_out", p->timed_out, "duration_ms",
			      (json_int_t)(p->exit_ms - p->start_ms));

	/* isolad compares it with the sandbox's OOM-kill counter to report oom_killed on
	 * every path that sees this EXIT (exec, attach, wait, ws). */
	if (j && p->oom_base >= 0)
		json_object_set_new(j, "oom_base", json_integer((json_int_t)p->oom_base));
	return j;
}

/* Sends what the subscriber's credit allows; ends it with EXIT once all is delivered. */
static void sub_pump(struct chan *ch)
{
	static const char *const names[] = {"stdout", "stderr"};
	struct proc *p = ch->proc;
	uint8_t buf[PROTO_MAX_PAYLOAD];
	int i;

	if (!p)
		return;
	for (i = 0; ch->streams && i < 2; i++) {
		struct ring *r = &p->out[i].ring;
		size_t room;

		while (ch->cur[i] < r->total && (room = chan_room(ch)) > 0) {
			uint64_t oldest = ring_oldest(r);
			size_t n;

			if (ch->cur[i] < oldest) { /* sent only when data can follow: bounded */
				chan_send_json(ch, PROTO_DROPPED,
					       json_pack("{s:s,s:I}", "stream", names[i], "bytes",
							 (json_int_t)(oldest - ch->cur[i])));
				ch->cur[i] = oldest;
				continue;
			}
			n = ring_read(r, ch->cur[i], buf, room);
			if (n == 0)
				break;
			chan_send_data(ch, i == 0 ? PROTO_STDOUT : PROTO_STDERR, buf, n);
			ch->cur[i] += n;
		}
	}
	if (p->fg == ch)
		update_watches(p); /* the consumer caught up: the pipe may flow again */
	if (!p->finished || !ch->waits)
		return;
	if (ch->streams && (ch->cur[0] < p->out[0].ring.total || ch->cur[1] < p->out[1].ring.total))
		return;
	chan_finish(ch, PROTO_EXIT, exit_json(p));
}

static void pump_sub_of(struct chan *ch, void *arg)
{
	if (ch->proc == arg)
		sub_pump(ch);
}

/* ---- stdin ---- */

static void grant_to(uint32_t id, size_t n)
{
	struct chan *ch = chan_find(id);

	if (ch)
		chan_grant(ch, n);
}

static void notify_stdin_done(uint32_t id)
{
	struct chan *ch = chan_find(id);

	if (ch)
		chan_finish(ch, PROTO_RESULT,
			    json_pack("{s:I}", "bytes", (json_int_t)ch->stdin_bytes));
}

static void stdin_close(struct proc *p)
{
	if (p->in.fd < 0)
		return;
	watch_set(&p->in, 0);
	close(p->in.fd);
	p->in.fd = -1;
}

/* Drops every queued chunk (stdin closed or the process gone), settling credit and
 * notifications so no channel waits forever. */
static void stdin_flush(struct proc *p)
{
	while (p->inq) {
		struct stdin_chunk *c = p->inq;

		p->inq = c->next;
		if (c->len)
			grant_to(c->chan_id, c->len);
		if (c->notify)
			notify_stdin_done(c->chan_id);
		free(c);
	}
	p->inq_tail = NULL;
}

static void stdin_cb(struct watch *w, uint32_t events)
{
	struct proc *p = (struct proc *)((char *)w - offsetof(struct proc, in));

	while (p->inq && p->in.fd >= 0) {
		struct stdin_chunk *c = p->inq;

		if (c->close) {
			if (p->tty) {
				uint8_t eot = 4; /* ^D: a pty has no half-close */

				if (write(p->in.fd, &eot, 1) < 0 && errno == EAGAIN)
					break;
			} else {
				stdin_close(p);
			}
		} else if (c->off < c->len) {
			ssize_t n = write(p->in.fd, c->data + c->off, c->len - c->off);

			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (n < 0) { /* EPIPE: the process closed its stdin */
				stdin_close(p);
				break;
			}
			c->off += (size_t)n;
			if (c->off < c->len)
				continue;
			grant_to(c->chan_id, c->len);
		}
		p->inq = c->next;
		if (!p->inq)
			p->inq_tail = NULL;
		if (c->notify)
			notify_stdin_done(c->chan_id);
		free(c);
	}
	if (p->in.fd < 0)
		stdin_flush(p);
	update_watches(p);
}

static int stdin_push(struct proc *p, struct chan *ch, const uint8_t *buf, size_t len, bool close,
		      bool notify)
{
	struct stdin_chunk *c;

	if (p->in.fd < 0 || p->finished) {
		if (len)
			chan_grant(ch, len); /* nobody reads: discard, keep the peer flowing */
		if (notify)
			notify_stdin_done(ch->id);
		return 0;
	}
	c = malloc(sizeof(*c) + len);
	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	c->chan_id = ch->id;
	c->len = len;
	c->close = close;
	c->notify = notify;
	memcpy(c->data, buf, len);
	if (p->inq_tail)
		p->inq_tail->next = c;
	else
		p->inq = c;
	p->inq_tail = c;
	stdin_cb(&p->in, EPOLLOUT);
	return 0;
}

/* ---- lifecycle ---- */

static void proc_free(struct proc *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		stream_close(&p->out[i]);
		ring_fini(&p->out[i].ring);
	}
	if (p->master >= 0)
		close(p->master);
	stdin_close(p);
	stdin_flush(p);
	json_decref(p->argv);
	free(p->tag);
	if (p->prev)
		p->prev->next = p->next;
	else
		procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	nprocs--;
	free(p);
}

static void proc_pump(struct proc *p)
{
	if (!p->finished && p->exited && p->out[0].eof && p->out[1].eof) {
		p->finished = true;
		stdin_close(p);
		stdin_flush(p);
	}
	chan_foreach(pump_sub_of, p);
	update_watches(p);
}

void proc_detach_chan(struct chan *ch)
{
	struct proc *p = ch->proc;

	if (!p)
		return;
	ch->proc = NULL;
	if (p->fg == ch) {
		p->fg = NULL; /* now a background process: never blocked again */
		update_watches(p);
	}
}

void proc_reap(void)
{
	int status;
	pid_t pid;

	/* PID 1 reaps everything, including orphans it never started */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct proc *p = proc_find(pid);

		if (!p || p->exited)
			continue;
		p->exited = true;
		p->status = status;
		p->exit_ms = util_now_ms();
		proc_pump(p);
	}
}

void proc_kill_all(void)
{
	struct proc *p;

	for (p = procs; p; p = p->next)
		if (!p->exited)
			kill(-p->pid, SIGKILL);
}

static void has_sub(struct chan *ch, void *arg)
{
	struct proc **pp = arg;

	if (*pp && ch->proc == *pp)
		*pp = NULL;
}

static bool proc_has_chan(struct proc *p)
{
	struct proc *q = p;

	chan_foreach(has_sub, &q);
	return q == NULL;
}

/* Keeps at most KEEP_FINISHED exited processes and FINISHED_BUDGET bytes of their rings.
 * Only called from proc_tick(), between event batches, so no watch of a freed process is
 * still pending in epoll results. */
static void proc_gc(void)
{
	size_t kept = 0, bytes = 0;
	struct proc *p, *next;

	for (p = procs; p; p = next) { /* newest first */
		next = p->next;
		if (!p->finished || proc_has_chan(p))
			continue;
		if (++kept > KEEP_FINISHED) {
			proc_free(p);
			continue;
		}
		bytes += p->out[0].ring.alloc + p->out[1].ring.alloc;
		if (bytes > FINISHED_BUDGET) {
			ring_release(&p->out[0].ring);
			ring_release(&p->out[1].ring);
		}
	}
}

int proc_tick(void)
{
	uint64_t now = util_now_ms(), next = UINT64_MAX;
	struct proc *p;
	int i;

	for (p = procs; p; p = p->next) {
		if (!p->exited && p->deadline_ms) {
			if (now >= p->deadline_ms) {
				p->timed_out = true;
				p->deadline_ms = 0;
				kill(-p->pid, SIGKILL);
				kill(p->pid, SIGKILL);
			} else if (p->deadline_ms < next) {
				next = p->deadline_ms;
			}
		}
		if (p->exited && !p->finished) {
			/* descendants may hold the pipes open forever: once the process is gone
			 * and a pipe is momentarily empty, call it finished */
			if (now >= p->exit_ms + LINGER_MS) {
				for (i = 0; i < 2; i++) {
					struct stream *s = &p->out[i];

					if (!s->eof && stream_budget(s, i) &&
					    stream_read(s, i) == -EAGAIN)
						stream_close(s);
				}
				proc_pump(p);
			}
			if (!p->finished && now + 50 < next)
				next = now + 50;
		}
	}
	proc_gc();
	if (next == UINT64_MAX)
		return -1;
	return next > now ? (int)(next - now) : 0;
}

/* ---- channel ops for subscribers ---- */

static int sub_data(struct chan *ch, const uint8_t *buf, size_t len)
{
	if (!ch->takes_stdin || ch->stdin_eof)
		return -EPROTO;
	if (!ch->proc) {
		chan_grant(ch, len);
		return 0;
	}
	ch->stdin_bytes += len;
	return stdin_push(ch->proc, ch, buf, len, false, false) < 0 ? -ENOMEM : 0;
}

/* EOF on an exec/attach channel closes stdin; on a `stdin` op channel it completes the
 * op (closing stdin only if the request said `close`) once the bytes are written. */
static int sub_eof(struct chan *ch)
{
	bool is_stdin_op = !ch->waits;
	bool close = is_stdin_op ? ch->state != NULL : true;

	if (!ch->takes_stdin || ch->stdin_eof)
		return -EPROTO;
	ch->stdin_eof = true;
	if (!ch->proc) {
		if (is_stdin_op)
			chan_finish(ch, PROTO_RESULT, json_pack("{s:I}", "bytes", (json_int_t)0));
		return 0;
	}
	return stdin_push(ch->proc, ch, NULL, 0, close, is_stdin_op) < 0 ? -ENOMEM : 0;
}

static int sub_control(struct chan *ch, json_t *j)
{
	struct proc *p = ch->proc;
	json_t *v;

	if (!p)
		return 0;
	/* UNTRUSTED: CONTROL payload, validated field by field; bad values are ignored */
	v = json_object_get(j, "signal");
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 65 &&
	    !p->exited)
		kill(-p->pid, (int)json_integer_value(v));
	v = json_object_get(j, "resize");
	if (json_is_object(v) && p->master >= 0) {
		json_int_t c = json_integer_value(json_object_get(v, "cols"));
		json_int_t r = json_integer_value(json_object_get(v, "rows"));

		if (c > 0 && c < 65536 && r > 0 && r < 65536)
			pty_resize(p->master, (unsigned)c, (unsigned)r);
	}
	if (json_is_true(json_object_get(j, "close_stdin")) && ch->takes_stdin && !ch->stdin_eof) {
		ch->stdin_eof = true;
		return stdin_push(p, ch, NULL, 0, true, false) < 0 ? -ENOMEM : 0;
	}
	return 0;
}

static const struct chan_ops sub_ops = {
	.data = sub_data,
	.eof = sub_eof,
	.control = sub_control,
	.pump = sub_pump,
};

/* ---- exec ---- */

/* Builds the child's environment: defaults, then the request's overrides. */
static char **build_env(struct chan *ch, json_t *env, bool tty)
{
	const struct agent_user *u = &ch->user;
	size_t n = 0, cap = json_object_size(env) + 8;
	char **envp = calloc(cap, sizeof(char *));
	const char *key;
	json_t *val;
	size_t i;

	if (!envp)
		return NULL;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		if (asprintf(&envp[n], __VA_ARGS__) < 0)                                           \
			goto oom;                                                                  \
		n++;                                                                               \
	} while (0)
	json_object_foreach(env, key, val)
	{
		PUT("%s=%s", key, json_string_value(val));
	}
	static const char *const defaults[] = {"PATH", "HOME", "USER", "LANG", "TERM"};
	for (i = 0; i < ARRAY_SIZE(defaults); i++) {
		if (json_object_get(env, defaults[i]))
			continue;
		if (i == 0)
			PUT("PATH=" DEFAULT_PATH);
		else if (i == 1)
			PUT("HOME=%s", u->home);
		else if (i == 2)
			PUT("USER=%s", u->name);
		else if (i == 3)
			PUT("LANG=C.UTF-8");
		else if (tty)
			PUT("TERM=xterm");
	}
#undef PUT
	return envp;
oom:
	for (i = 0; i < n; i++)
		free(envp[i]);
	free(envp);
	return NULL;
}

static void free_strv(char **v)
{
	size_t i;

	for (i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Validates argv and env; -1 after sending ERROR. */
static int check_argv_env(struct chan *ch, json_t *argv, json_t *env)
{
	const char *key;
	json_t *v;
	size_t i;

	if (!json_is_array(argv) || json_array_size(argv) < 1 || json_array_size(argv) > MAX_ARGV)
		return chan_fail(ch, EINVAL, "field `argv` must be a non-empty array"), -1;
	json_array_foreach(argv, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return chan_fail(ch, EINVAL, "field `argv` must hold strings"), -1;
	}
	if (!json_string_length(json_array_get(argv, 0)))
		return chan_fail(ch, EINVAL, "field `argv`: empty program name"), -1;
	if (env && !json_is_null(env)) {
		if (!json_is_object(env) || json_object_size(env) > MAX_ENV)
			return chan_fail(ch, EINVAL, "field `env` must be an object"), -1;
		json_object_foreach(env, key, v)
		{
			if (!*key || strchr(key, '=') || !json_is_string(v) ||
			    strlen(json_string_value(v)) != json_string_length(v))
				return chan_fail(ch, EINVAL, "field `env`: bad entry"), -1;
		}
	}
	return 0;
}

static struct proc *proc_new(size_t retention)
{
	struct proc *p = calloc(1, sizeof(*p));
	int i;

	if (!p)
		return NULL;
	p->master = -1;
	for (i = 0; i < 2; i++) {
		watch_init(&p->out[i].w, -1, stream_cb);
		ring_init(&p->out[i].ring, retention);
		p->out[i].p = p;
	}
	watch_init(&p->in, -1, stdin_cb);
	return p;
}

int op_exec(struct chan *ch, json_t *req)
{
	json_t *argv = json_object_get(req, "argv"), *env = json_object_get(req, "env");
	int64_t cols, rows, timeout, retention, oom_base;
	bool tty, want_stdin, background;
	const char *tag, *what;
	char cwd[AGENT_MAX_PATH + 1], slave[128];
	char **cargv = NULL, **envp = NULL;
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, master = -1;
	struct spawn_req sr = {0};
	struct spawn_narrow narrow;
	struct agent_user user;
	struct proc *p = NULL;
	size_t i;
	int r;

	if (check_argv_env(ch, argv, env) < 0 || ident_from_req(ch, req) < 0 ||
	    req_bool(ch, req, "tty", false, &tty) < 0 ||
	    req_bool(ch, req, "stdin", false, &want_stdin) < 0 ||
	    req_bool(ch, req, "background", false, &background) < 0 ||
	    req_int(ch, req, "cols", 80, 1, 65535, &cols) < 0 ||
	    req_int(ch, req, "rows", 24, 1, 65535, &rows) < 0 ||
	    req_int(ch, req, "timeout_ms", 0, 0, INT32_MAX, &timeout) < 0 ||
	    req_int(ch, req, "retention", DEFAULT_RETENTION, MIN_RETENTION, MAX_RETENTION,
		    &retention) < 0 ||
	    req_str(ch, req, "tag", 256, &tag) < 0 ||
	    req_int(ch, req, "oom_base", -1, -1, INT64_MAX, &oom_base) < 0)
		return 0;
	user = ch->user;
	if (narrow_from_req(ch, req, &user, &narrow) < 0)
		return 0;
	if (json_object_get(req, "cwd")) {
		if (req_path(ch, req, "cwd", cwd) < 0)
			return 0;
	} else {
		snprintf(cwd, sizeof(cwd), "%s", ch->user.home);
	}
	if (!json_is_object(env))
		env = NULL;
	cargv = calloc(json_array_size(argv) + 1, sizeof(char *));
	envp = build_env(ch, env, tty);
	p = proc_new((size_t)retention);
	if (!cargv || !envp || !p) {
		r = -ENOMEM;
		what = "allocate";
		goto fail;
	}
	for (i = 0; i < json_array_size(argv); i++)
		cargv[i] = (char *)json_string_value(json_array_get(argv, i));
	what = "pipe";
	if (tty) {
		what = "openpt";
		r = pty_open(&master, slave, sizeof(slave), (unsigned)cols, (unsigned)rows);
		if (r < 0)
			goto fail;
		sr.pty_slave = slave;
	} else {
		int devnull = -1;

		if (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0)
			goto fail_errno;
		if (want_stdin) {
			if (pipe2(pin, O_CLOEXEC) < 0)
				goto fail_errno;
		} else {
			devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (devnull < 0)
				goto fail_errno;
			pin[0] = devnull;
		}
		sr.stdio[0] = pin[0];
		sr.stdio[1] = pout[1];
		sr.stdio[2] = perr[1];
	}
	sr.argv = cargv;
	sr.envp = envp;
	sr.cwd = cwd;
	sr.user = &user;
	sr.narrow = &narrow;
	r = spawn_process(&sr, &p->pid, &what);
	if (r < 0)
		goto fail;
	/* parent side */
	if (tty) {
		p->tty = true;
		p->master = master;
		p->out[0].w.fd = master;
		p->out[1].eof = true;
		p->in.fd = want_stdin ? fcntl(master, F_DUPFD_CLOEXEC, 3) : -1;
		master = -1;
	} else {
		close(pin[0]);
		close(pout[1]);
		close(perr[1]);
		p->out[0].w.fd = pout[0];
		p->out[1].w.fd = perr[0];
		p->in.fd = pin[1];
		util_set_nonblock(pout[0], true);
		util_set_nonblock(perr[0], true);
	}
	if (p->in.fd >= 0)
		util_set_nonblock(p->in.fd, true);
	p->argv = json_incref(argv);
	p->tag = tag ? strdup(tag) : NULL;
	p->oom_base = oom_base;
	p->start_ms = util_now_ms();
	p->started_at = util_wall_time();
	p->deadline_ms = timeout ? p->start_ms + (uint64_t)timeout : 0;
	p->next = procs;
	if (procs)
		procs->prev = p;
	procs = p;
	nprocs++;
	free(cargv);
	free_strv(envp);
	if (background) {
		chan_finish(ch, PROTO_RESULT, json_pack("{s:i}", "pid", (int)p->pid));
	} else {
		chan_send_json(ch, PROTO_RESULT, json_pack("{s:i}", "pid", (int)p->pid));
		ch->ops = &sub_ops;
		ch->proc = p;
		ch->streams = true;
		ch->waits = true;
		ch->takes_stdin = want_stdin;
		p->fg = ch;
	}
	proc_pump(p);
	return 0;

fail_errno:
	r = -errno;
fail:
	for (i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	if (master >= 0)
		close(master);
	if (p) {
		ring_fini(&p->out[0].ring);
		ring_fini(&p->out[1].ring);
		free(p);
	}
	free(cargv);
	free_strv(envp);
	if (!strcmp(what, "chdir"))
		chan_fail(ch, -r, "exec `%s`: working directory `%s`: %s",
			  json_string_value(json_array_get(argv, 0)), cwd, strerror(-r));
	else
		chan_fail(ch, -r, "exec `%s`: %s: %s", json_string_value(json_array_get(argv, 0)),
			  what, strerror(-r));
	return 0;
}

/* ---- ops on existing processes ---- */

/* Looks up the request's pid; -1 after sending ERROR. */
static struct proc *req_proc(struct chan *ch, json_t *req)
{
	struct proc *p;
	int64_t pid;

	if (req_int(ch, req, "pid", 0, 1, INT32_MAX, &pid) < 0)
		return NULL;
	p = proc_find((pid_t)pid);
	if (!p)
		chan_fail(ch, ESRCH, "process %lld not found", (long long)pid);
	return p;
}

int op_attach(struct chan *ch, json_t *req)
{
	struct proc *p = req_proc(ch, req);
	bool in;

	if (!p || req_bool(ch, req, "stdin", false, &in) < 0)
		return 0;
	chan_send_json(ch, PROTO_RESULT, json_pack("{s:i}", "pid", (int)p->pid));
	ch->ops = &sub_ops;
	ch->proc = p;
	ch->streams = true;
	ch->waits = true;
	ch->takes_stdin = in;
	sub_pump(ch);
	return 0;
}

int op_wait(struct chan *ch, json_t *req)
{
	struct proc *p = req_proc(ch, req);

	if (!p)
		return 0;
	ch->ops = &sub_ops;
	ch->proc = p;
	ch->waits = true;
	sub_pump(ch);
	return 0;
}

int op_stdin(struct chan *ch, json_t *req)
{
	struct proc *p = req_proc(ch, req);
	bool close;

	if (!p || req_bool(ch, req, "close", false, &close) < 0)
		return 0;
	ch->ops = &sub_ops;
	ch->proc = p;
	ch->takes_stdin = true;
	ch->state = close ? (void *)1 : NULL; /* read by sub_eof; no release needed */
	return 0;
}

int op_signal(struct chan *ch, json_t *req)
{
	struct proc *p = req_proc(ch, req);
	int64_t sig;

	if (!p || req_int(ch, req, "signal", 0, 1, 64, &sig) < 0)
		return 0;
	if (p->exited) {
		chan_fail(ch, ESRCH, "process %d has exited", (int)p->pid);
		return 0;
	}
	if (kill(-p->pid, (int)sig) < 0 && kill(p->pid, (int)sig) < 0) {
		chan_fail(ch, errno, "kill %d: %s", (int)p->pid, strerror(errno));
		return 0;
	}
	chan_finish(ch, PROTO_RESULT, json_object());
	return 0;
}

int op_resize(struct chan *ch, json_t *req)
{
	struct proc *p = req_proc(ch, req);
	int64_t cols, rows;
	int r;

	if (!p || req_int(ch, req, "cols", 80, 1, 65535, &cols) < 0 ||
	    req_int(ch, req, "rows", 24, 1, 65535, &rows) < 0)
		return 0;
	if (p->master < 0) {
		chan_fail(ch, EINVAL, "process %d has no tty", (int)p->pid);
		return 0;
	}
	r = pty_resize(p->master, (unsigned)cols, (unsigned)rows);
	if (r < 0)
		chan_fail(ch, -r, "resize: %s", strerror(-r));
	else
		chan_finish(ch, PROTO_RESULT, json_object());
	return 0;
}

int op_ps(struct chan *ch, json_t *req)
{
	json_t *list = json_array();
	size_t used = 64;
	bool truncated = false;
	struct proc *p;

	for (p = procs; p && list; p = p->next) {
		int code = 0, sig = 0;
		json_t *e;
		char *s;

		if (p->exited && WIFEXITED(p->status))
			code = WEXITSTATUS(p->status);
		else if (p->exited && WIFSIGNALED(p->status))
			sig = WTERMSIG(p->status), code = 128 + sig;
		e = json_pack("{s:i,s:O,s:b,s:b,s:o,s:i,s:f,s:s?}", "pid", (int)p->pid, "argv",
			      p->argv, "tty", p->tty, "running", !p->exited, "exit_code",
			      p->exited ? json_integer(code) : json_null(), "signal", sig,
			      "started_at", p->started_at, "tag", p->tag);
		s = e ? json_dumps(e, JSON_COMPACT) : NULL;
		/* the reply must fit one JSON frame */
		if (!s || used + strlen(s) + 1 > PROTO_MAX_JSON - 64) {
			truncated = true;
			free(s);
			json_decref(e);
			break;
		}
		used += strlen(s) + 1;
		free(s);
		json_array_append_new(list, e);
	}
	chan_finish(ch, PROTO_RESULT,
		    json_pack("{s:o,s:b}", "processes", list ? list : json_array(), "truncated",
			      truncated));
	return 0;
}
