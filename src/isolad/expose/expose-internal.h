/* SPDX-License-Identifier: Apache-2.0 */
/* expose-internal: what the exposure registry and listener share. */
#ifndef ISOLA_EXPOSE_INTERNAL_H
#define ISOLA_EXPOSE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "expose.h"
#include "xhttp.h"

#define EXPOSE_TOKEN_LEN 43	      /* base64url of 32 random bytes */
#define EXPOSE_MAX_FILE	 (256u << 10) /* ports.json cap */
#define EXPOSE_MAX_PORTS 128	      /* exposed ports per sandbox */
#define EXPOSE_MAX_TOTAL 1024	      /* connections (any phase) across all sandboxes */
#define EXPOSE_POLL_MS	 500	      /* wake-up period of blocking waits */
#define EXPOSE_OPEN_MS	 10000	      /* time for the agent to connect inside */

/* Counters of one exposed port (lives until expose_stop; the table is small). */
struct xstat {
	struct xstat *next;	   /* x->stats link */
	char id[XHTTP_ID_MAX + 1]; /* sandbox id */
	int port;		   /* port inside */
	unsigned active;	   /* tunnelled connections open now */
	uint64_t total;		   /* tunnelled connections ever (this isolad run) */
	uint64_t bytes_in;	   /* client -> sandbox bytes */
	uint64_t bytes_out;	   /* sandbox -> client bytes */
	uint64_t refused;	   /* connections refused by the per-sandbox limit */
};

/* One accepted client connection; owned by its thread, listed in x->conns for cuts. */
struct xconn {
	struct xconn *next;	   /* x->conns link (under x->lock) */
	struct expose *x;	   /* the listener */
	int fd;			   /* client socket, owned */
	char id[XHTTP_ID_MAX + 1]; /* target once routed, else "" */
	int port;		   /* target port once routed */
	atomic_bool cut;	   /* unexposed, sandbox gone or stopping: end the relay */
	atomic_bool done;	   /* the agent side ended: the upload thread stops sending */
	struct xstat *st;	   /* counters (borrowed from x->stats) once tunnelled */
};

struct expose {
	struct core *core;	  /* borrowed; outlives the listener */
	char domain[128];	  /* Host routing domain */
	char addr[80];		  /* bound "HOST:PORT" */
	char host[64];		  /* HOST part, for path URLs */
	int lport;		  /* bound port */
	unsigned max_conns;	  /* per sandbox */
	unsigned head_timeout_ms; /* request head deadline */
	int lfd;		  /* listening socket, owned */
	int stop_pipe[2];	  /* wakes the accept thread */
	pthread_t acceptor;	  /* accept thread */
	bool acceptor_started;	  /* must be joined */
	pthread_mutex_t lock;	  /* protects what follows */
	pthread_cond_t cond;	  /* signalled when nconns drops */
	unsigned nconns;	  /* connection threads alive */
	bool stopping;		  /* expose_stop has begun */
	struct xstat *stats;	  /* per-port counters */
	struct xconn *conns;	  /* live connections */
};

/* The running listener or NULL (set by expose_start, cleared by expose_stop). */
extern struct expose *expose_active;

/* Looks up an exposure for the listener: 0 with *is_public and token (NUL-terminated,
 * EXPOSE_TOKEN_LEN + 1 bytes) set, -ENOENT when the sandbox has no such exposed port. */
int expose_registry_lookup(struct expose *x, const char *id, int port, bool *is_public,
			   char token[EXPOSE_TOKEN_LEN + 1]);

/* Counters of (id, port), created on demand; NULL on ENOMEM. Caller holds x->lock. */
struct xstat *expose_stat_get_locked(struct expose *x, const char *id, int port);

/* Tunnelled connections open now to sandbox id. Caller holds x->lock. */
unsigned expose_active_locked(struct expose *x, const char *id);

/* Marks every live connection to (id, port) (port 0: any) as cut and shuts its socket. */
void expose_cut(struct expose *x, const char *id, int port);

/* Serves one accepted connection (listener.c); runs on its own thread. */
void *expose_conn_main(void *arg);

#endif
