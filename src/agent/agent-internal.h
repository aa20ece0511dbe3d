/* SPDX-License-Identifier: Apache-2.0 */
/* agent-internal: what the isola-agent's own files share (event loop, channels, processes). */
#ifndef ISOLA_AGENT_INTERNAL_H
#define ISOLA_AGENT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/rlimits.h"
#include "ring.h"
#include "users.h"

#define AGENT_VERSION	   "isola-agent 0.1.0"
#define AGENT_MAX_PATH	   4096		  /* longest path accepted from the peer */
#define AGENT_MAX_CHANNELS 1024		  /* open channels per connection */
#define AGENT_OUT_HIGH	   (256u * 1024u) /* outbound queue level above which data waits */
#define AGENT_OUT_MAX	   (4u << 20)	  /* outbound level above which we stop reading requests */

/* ---- event loop (server.c) ---- */

/* An fd registered with the event loop. Embedded in its owner. */
struct watch {
	int fd;					      /* watched fd, -1 if none */
	uint32_t events;			      /* current epoll mask, 0 = not registered */
	void (*cb)(struct watch *w, uint32_t events); /* called from the loop */
};

void watch_init(struct watch *w, int fd, void (*cb)(struct watch *, uint32_t));
/* Sets the epoll mask (0 removes the fd from the set). Aborts on failure: cannot happen
 * for a valid fd, and silently losing an fd would hang a channel forever. */
void watch_set(struct watch *w, uint32_t events);

/* ---- channels (server.c) ---- */

struct chan;

/* Per-op behaviour of a channel. Handlers return 0, or -EPROTO when the peer broke the
 * protocol (the connection is then dropped). Op-level failures are reported by the
 * handler itself with chan_fail(). Any member may be NULL. */
struct chan_ops {
	int (*data)(struct chan *ch, const uint8_t *buf, size_t len); /* STDIN */
	int (*eof)(struct chan *ch);				      /* EOF from isolad */
	int (*control)(struct chan *ch, json_t *j);		      /* CONTROL */
	int (*entry)(struct chan *ch, json_t *j);		      /* ENTRY (tar_put) */
	void (*pump)(struct chan *ch);	  /* send what credit now allows */
	void (*release)(struct chan *ch); /* free op state; sends nothing */
};

struct proc;

struct chan {
	struct chan *next, *prev;   /* live list or dead list */
	uint32_t id;		    /* channel id chosen by isolad */
	const struct chan_ops *ops; /* behaviour, never NULL */
	uint64_t out_credit;	    /* data bytes we may still send */
	uint64_t in_credit;	    /* data bytes isolad may still send us */
	bool ended;		    /* final frame sent or CLOSE received */
	struct agent_user user;	    /* identity the op runs as */
	void *state;		    /* op state, owned through ops->release */
	/* process subscription (exec, attach, wait, stdin) */
	struct proc *proc;    /* subscribed process or NULL */
	bool streams;	      /* wants output (exec, attach) */
	bool waits;	      /* wants EXIT (exec, attach, wait) */
	bool takes_stdin;     /* STDIN frames feed proc stdin */
	uint64_t cur[2];      /* next stdout/stderr offset to send */
	uint64_t stdin_bytes; /* bytes fed to stdin (stdin op) */
	bool stdin_eof;	      /* EOF received on this channel */
};

/* Bytes of data the channel may send now (0 when out of credit or congested). */
size_t chan_room(struct chan *ch);
/* Queues a JSON frame; j is consumed. A reply that would not fit PROTO_MAX_JSON becomes
 * an ERROR. 0 or -ENOMEM. */
int chan_send_json(struct chan *ch, uint8_t type, json_t *j);
/* Queues a data (or ENTRY raw) frame of len <= chan_room() and charges the credit. */
void chan_send_data(struct chan *ch, uint8_t type, const void *buf, size_t len);
/* Grants isolad n more bytes of STDIN credit. */
void chan_grant(struct chan *ch, size_t n);
/* Sends the final frame (type, j consumed; type 0 = none) and ends the channel. */
void chan_finish(struct chan *ch, uint8_t type, json_t *j);
/* Sends ERROR {code, errno, message} and ends the channel. errnum positive. */
void chan_fail(struct chan *ch, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Finds a live channel by id. */
struct chan *chan_find(uint32_t id);
/* Calls fn on every live channel (safe against fn ending its channel). */
void chan_foreach(void (*fn)(struct chan *ch, void *arg), void *arg);

/* Serves the listening socket forever (listen_fd -1: only the transport's connections).
 * `privileged` = PID 1 of a real sandbox. */
int server_run(int listen_fd, bool standalone);

/* A connection source other than accept() (the microvm guest's virtio-serial port,
 * guestserial.c). Hooks run on the event loop thread. */
struct server_transport {
	int (*start)(void);    /* registers its watches once the loop exists; 0 or -errno */
	void (*dropped)(void); /* the current connection was dropped (its fd is closed) */
};
/* Sets the transport before server_run (borrowed for the process's life). */
void server_set_transport(const struct server_transport *t);
/* Hands a connected stream (owned from now on) to the loop; it replaces the current
 * connection between loop iterations, and the agent sends HELLO on it. */
void server_install_conn(int fd);
/* Monotonic ms since the agent started. */
uint64_t agent_uptime_ms(void);

/* ---- ops (one file per family) ---- */

typedef int (*op_open_fn)(struct chan *ch, json_t *req);

int op_exec(struct chan *ch, json_t *req);     /* proc.c */
int op_attach(struct chan *ch, json_t *req);   /* proc.c */
int op_wait(struct chan *ch, json_t *req);     /* proc.c */
int op_ps(struct chan *ch, json_t *req);       /* proc.c */
int op_signal(struct chan *ch, json_t *req);   /* proc.c */
int op_stdin(struct chan *ch, json_t *req);    /* proc.c */
int op_resize(struct chan *ch, json_t *req);   /* proc.c */
int op_read(struct chan *ch, json_t *req);     /* files.c */
int op_write(struct chan *ch, json_t *req);    /* files.c */
int op_stat(struct chan *ch, json_t *req);     /* files.c */
int op_list(struct chan *ch, json_t *req);     /* files.c */
int op_mkdir(struct chan *ch, json_t *req);    /* files.c */
int op_rename(struct chan *ch, json_t *req);   /* files.c */
int op_remove(struct chan *ch, json_t *req);   /* files.c */
int op_tar_get(struct chan *ch, json_t *req);  /* tarops.c */
int op_tar_put(struct chan *ch, json_t *req);  /* tarops.c */
int op_fs_mark(struct chan *ch, json_t *req);  /* tarops.c (manifest: fsdiff.c) */
int op_fs_diff(struct chan *ch, json_t *req);  /* tarops.c (walk: fsdiff.c) */
int op_watch(struct chan *ch, json_t *req);    /* watch.c */
int op_tunnel(struct chan *ch, json_t *req);   /* tunnel.c */
int op_identity(struct chan *ch, json_t *req); /* identity.c */

/* ---- processes (proc.c) ---- */

/* Reaps every child (SIGCHLD); records exits of our processes. */
void proc_reap(void);
/* Timeouts and post-exit pipe draining; returns ms until the next deadline or -1. */
int proc_tick(void);
/* Called when a connection goes away: foreground processes become background. */
void proc_detach_chan(struct chan *ch);
/* Number of processes in the table (running and kept finished). */
size_t proc_count(void);
/* SIGKILLs every running process group (standalone shutdown). */
void proc_kill_all(void);

/* ---- request fields (request.c) ----
 * Each helper validates one field of an OPEN request. On a bad value it sends ERROR
 * "invalid" naming the field, ends the channel and returns -1; an absent field takes
 * the default. Strings are checked for length and embedded NUL. */
int req_bool(struct chan *ch, json_t *req, const char *key, bool def, bool *out);
int req_int(struct chan *ch, json_t *req, const char *key, int64_t def, int64_t min, int64_t max,
	    int64_t *out);
int req_str(struct chan *ch, json_t *req, const char *key, size_t maxlen, const char **out);
/* Resolves a path field (required): relative paths are taken from the user's home. */
int req_path(struct chan *ch, json_t *req, const char *key, char out[AGENT_MAX_PATH + 1]);
/* Maps errno to the protocol's error code token. */
const char *agent_errno_code(int errnum);

/* ---- spawning (spawn.c, pty.c) ---- */

/* What a command asked for that only narrows it (narrow.c; docs/process-tier.md). */
struct spawn_narrow {
	int umask;				   /* the process's umask, -1 = the agent's */
	struct rlimits_entry rlimits[RLIMITS_MAX]; /* set before execve, each lowered */
	unsigned n_rlimits;			   /* entries used */
	int oom_score_adj;			   /* written to the process when set_oom */
	bool set_oom;				   /* oom_score_adj was given */
};

/*
 * Reads req's narrowing fields (`gid`, u's primary group instead of its passwd one;
 * `additional_gids`, appended to u's groups; `umask`; `rlimits`;
 * `oom_score_adj`) into out. Refuses, with chan_fail naming the field, a malformed one and one
 * that would widen what the agent's processes hold: a hard limit above the agent's own (with
 * `rlimits_cap`: lowered to it instead), an oom_score_adj below the agent's. Returns 0, or -1 once the channel has failed.
 */
int narrow_from_req(struct chan *ch, json_t *req, struct agent_user *u, struct spawn_narrow *out);

struct spawn_req {
	char *const *argv;		   /* argv[0] is looked up in the child's PATH */
	char *const *envp;		   /* complete environment */
	const char *cwd;		   /* working directory (entered as the user) */
	const struct agent_user *user;	   /* identity to run as */
	int stdio[3];			   /* non-tty: fds for 0, 1, 2 */
	const char *pty_slave;		   /* tty: slave path, else NULL */
	const struct spawn_narrow *narrow; /* umask, rlimits, oom_score_adj; NULL: none */
};

/* Forks and execs r. Returns 0 with *pid set once execve succeeded, or -errno with
 * *what naming the failed step ("execve", "chdir", "setuid", ...). */
int spawn_process(const struct spawn_req *r, pid_t *pid, const char **what);
/* The capabilities uid 0 holds in this sandbox (mask, common/caps.h): every spawned process's
 * bounding set; root's permitted and effective sets, nobody else's. Set once at boot (setup's
 * plan, or the guest's isola.caps, default CAPS_DEFAULT_MASK) before the first spawn; 0 (none)
 * in standalone `--listen` mode, where uid 0 would be the host's root. */
extern uint64_t agent_root_caps;
/* The spec's own seccomp program (OCI `linux.seccomp`, docs/oci.md), compiled by isolad and
 * handed over in setup's plan. spawn.c installs it in every process it starts, right before
 * execve and on top of isola's filter, so the agent itself never runs under it. */
struct agent_spec_filter {
	void *insns;	    /* `struct sock_filter[len]`, owned, or NULL: no filter */
	unsigned short len; /* instructions (1..BPF_MAXINSNS) */
	unsigned int flags; /* SECCOMP_FILTER_FLAG_* bits for seccomp(2) */
};
/* Set once by setup (setup.c) before the first spawn; empty in the microvm tier and in
 * standalone `--listen` mode. */
extern struct agent_spec_filter agent_spec_seccomp;
/* Opens a pty pair: *master (non-blocking, cloexec) and the slave's path. 0 or -errno. */
int pty_open(int *master, char *slave, size_t slave_len, unsigned cols, unsigned rows);
/* Sets the window size. 0 or -errno. */
int pty_resize(int master, unsigned cols, unsigned rows);

/* ---- confined path resolution (safeopen.c) ---- */

/* Test hook: pretend openat2 is missing so the fallback walk is exercised. */
extern bool safeopen_force_fallback;
/*
 * Opens the directory `rel` beneath root_fd as an O_PATH fd, refusing absolute paths,
 * `..` components and symlinks in any component (-ELOOP); with `create`, missing
 * components are made (mode 0755). Uses openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS
 * | RESOLVE_NO_SYMLINKS), or a component walk with O_NOFOLLOW where openat2 is missing.
 * "" or "." is root_fd itself. Returns the fd or -errno.
 */
int safe_open_dir(int root_fd, const char *rel, bool create);
/* open(path, flags | O_CLOEXEC, mode) that refuses /proc magic links (-ELOOP) in any
 * component: the files API must not reach the agent's own fds, memory or root through
 * /proc/self or /proc/1 (tests/security/test_files_traversal.py). Returns fd or -errno. */
int safe_open_path(const char *path, int flags, mode_t mode);
/* Checks an archive member name: relative, no `..` component, no NUL, <= AGENT_MAX_PATH;
 * writes it normalized (no "./", no duplicate or trailing '/') into out. 0 or -EINVAL. */
int safe_rel_name(const char *name, char out[AGENT_MAX_PATH + 1]);

/* ---- identity (ident.c) ---- */

/* Switches fsuid/fsgid/groups to u for the duration of a file op. */
void ident_enter(const struct agent_user *u);
/* Back to the agent's own identity. */
void ident_leave(void);
/* Resolves the request's "user" field (name or uid; absent = the default user) into
 * ch->user from the sandbox's /etc. 0, or sends ERROR and returns -1. */
int ident_from_req(struct chan *ch, json_t *req);
/* Directory holding passwd and group ("/etc"; tests may point elsewhere). */
extern const char *ident_etc;
/* Builds a stat entry {"name","path","type","size","mode","uid","gid","mtime","target"};
 * NULL on ENOMEM. (files.c) */
json_t *entry_json(const char *name, const char *path, const struct stat *st, const char *target);

#endif
