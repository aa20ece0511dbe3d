/* SPDX-License-Identifier: Apache-2.0 */
/* proxy: the egress proxy every sandbox TCP connection is redirected to (decide, connect, relay). */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "net.h"
#include "sni.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h */
#endif
#define IP6T_SO_ORIGINAL_DST_ 80 /* linux/netfilter_ipv6/ip6_tables.h */

#define RELAY_PIPE	 262144 /* pipe capacity asked for, per direction and connection */
#define MAX_CANDIDATES	 16	/* resolved addresses kept per name */
#define ACCEPT_BATCH	 64	/* accepts per wake-up, so a connect flood cannot starve relays */
#define MAX_EVENTS	 128
#define TIMER_PERIOD_NS	 1000000000ull /* timers are swept at least this often */
#define BUCKET_MIN_CHUNK 4096	       /* a throttled direction waits for this many tokens */
#define LOG_BURST	 200	       /* decision log lines a sandbox may cause at once... */
#define LOG_RATE	 50 /* ...and per second after that (a flood must not fill disks) */
#define ACCEPT_PAUSE_NS	 100000000ull /* out of fds: stop accepting this long */
#define DNS_PER_SANDBOX	 2	      /* lookups one sandbox may have at the workers at once */

enum conn_state {
	ST_HEAD,       /* reading the first bytes */
	ST_RESOLVING,  /* a worker resolves the name */
	ST_CONNECTING, /* non-blocking connect to cand[icand] */
	ST_RELAY,      /* both ways */
};

/* What an epoll event points at: a connection's side, or the listener / wake-up fds. */
struct tag {
	struct conn *c; /* NULL for the proxy's own fds */
	int side;	/* 0 client (sandbox), 1 upstream; for own fds: 0 listener, 1 eventfd */
};

/* One direction of a relay: bytes read from one side, not yet written to the other. */
struct dir {
	int pipe[2];	/* read end, write end: bytes read from the source, not yet written */
	size_t held;	/* bytes in the pipe */
	size_t cap;	/* the pipe's capacity */
	bool eof;	/* the source side sent FIN */
	bool shut;	/* FIN passed on (shutdown SHUT_WR) */
	bool throttled; /* waiting for the sandbox's bucket */
};

/* Per-sandbox state shared by its connections: the connection count and the token buckets.
 * Loop thread only. Kept after the last connection until its buckets would be full again, so
 * closing and reopening connections does not refill them. */
struct sbx {
	struct sbx *next;		  /* list */
	char id[64];			  /* sandbox id */
	uint32_t conns;			  /* connections of this sandbox open now */
	double tokens[2];		  /* bytes available per direction */
	uint64_t last_ns;		  /* last refill */
	double log_tokens;		  /* decision log lines available */
	uint64_t log_ns;		  /* last log refill */
	uint64_t log_dropped;		  /* decisions not logged since the last line */
	unsigned dns_inflight;		  /* jobs of this sandbox at the workers */
	struct conn *dns_wait, *dns_tail; /* connections waiting for a worker slot (FIFO) */
};

struct conn {
	struct conn *prev, *next;  /* p->conns */
	struct net_proxy *p;	   /* owner */
	enum conn_state st;	   /* see above */
	bool dead;		   /* closed; freed after the event batch and the resolver job */
	bool resolving;		   /* a resolver job points here */
	bool dns_waiting;	   /* queued in sbx->dns_wait */
	struct conn *wnext;	   /* next in sbx->dns_wait */
	int cfd, ufd;		   /* client (sandbox) and upstream sockets; -1 if none */
	uint32_t cev, uev;	   /* epoll interest registered (0 = not in the epoll set) */
	struct tag ctag, utag;	   /* epoll data */
	struct net_addr dst;	   /* original destination */
	uint16_t port;		   /* original destination port */
	char id[64];		   /* sandbox id */
	struct net_policy *policy; /* reference, judged under it for the connection's life */
	struct net_counters *counters;	      /* reference (net), released by put_counters */
	struct sbx *sbx;		      /* per-sandbox state */
	uint8_t *headbuf;		      /* NET_SNI_MAX bytes read before the decision */
	size_t headlen;			      /* bytes in headbuf */
	struct net_sni_head head;	      /* what the head said */
	const char *name;		      /* head.name or NULL (raw, literal) */
	struct net_addr cand[MAX_CANDIDATES]; /* addresses to try, in order */
	size_t ncand, icand;		      /* count, next to try */
	const char *why;		      /* reason token of the allow decision */
	uint64_t deadline_ns;		      /* head, connect deadline (0 = none) */
	uint64_t last_ns;		      /* last byte relayed (idle timeout) */
	struct dir d[2];		      /* 0: sandbox → upstream, 1: upstream → sandbox */
};

/* A name to resolve, handed to a worker and back. */
struct job {
	struct job *next; /* queue */
	struct conn *c;	  /* the connection (kept alive while resolving) */
	char name[256];	  /* to resolve */
	struct sockaddr_storage addrs[MAX_CANDIDATES]; /* result */
	size_t n;				       /* addresses in it */
	int rc;					       /* 0 or -errno */
	char error[160];			       /* resolver's message */
};

struct net_proxy {
	struct net_proxy_config cfg;  /* copy, defaults applied */
	int lfd;		      /* listening socket */
	bool own_lfd;		      /* we bound it */
	uint16_t port;		      /* its port */
	int epfd;		      /* the loop's epoll */
	int wakefd;		      /* eventfd: stop, or resolver jobs done */
	struct tag ltag, wtag;	      /* epoll data of lfd and wakefd */
	pthread_t loop;		      /* the epoll thread */
	atomic_bool stop;	      /* set by net_proxy_stop */
	struct conn *conns;	      /* every connection (loop thread) */
	struct conn *graveyard;	      /* dead, to free after the batch (loop thread) */
	uint32_t nconns;	      /* open connections */
	struct sbx *sbxs;	      /* per-sandbox state (loop thread) */
	uint64_t next_timer_ns;	      /* when the timer sweep must run next */
	uint64_t accept_paused_until; /* out of fds: the listener is out of the epoll set */
	struct sbx nobody;	      /* log bucket for peers that are no sandbox */

	pthread_mutex_t qlock;	 /* protects the two queues and wstop */
	pthread_cond_t qcond;	 /* work queued or stop */
	struct job *todo, *done; /* FIFO to workers (todo), LIFO back (done) */
	bool wstop;		 /* workers exit */
	pthread_t *workers;	 /* cfg.resolver_threads */
	unsigned nworkers;	 /* started */

	/* Proxy-wide counters (written by the loop, read by anyone). */
	atomic_uint_fast64_t accepted, allowed, connect_failed, active, bytes_out, bytes_in;
	atomic_uint_fast64_t denied[NET_PROXY_DENY_COUNT_];
};

static const char *const deny_names[NET_PROXY_DENY_COUNT_] = {
	[NET_PROXY_DENY_POLICY] = "policy",	     [NET_PROXY_DENY_ALWAYS] = "always_denied",
	[NET_PROXY_DENY_BAD_NAME] = "bad_name",	     [NET_PROXY_DENY_MALFORMED] = "malformed",
	[NET_PROXY_DENY_RESOLVE] = "resolve_failed", [NET_PROXY_DENY_LIMIT] = "limit",
	[NET_PROXY_DENY_UNKNOWN] = "unknown_peer",
};

const char *net_proxy_deny_name(enum net_proxy_deny d)
{
	return (unsigned)d < NET_PROXY_DENY_COUNT_ ? deny_names[d] : "unknown";
}

static void conn_update(struct conn *c);
static void conn_start_connect(struct conn *c);

/* ---- small helpers ------------------------------------------------------------------------ */

static void addr_str(const struct net_addr *a, char *buf, size_t len)
{
	net_addr_format(a, buf, len);
}

/* Closes with RST (SO_LINGER 0): a refused sandbox sees a reset, never a half-open connection. */
static void close_rst(int fd)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

int net_proxy_so_original_dst(void *arg, int fd, struct sockaddr_storage *out)
{
	socklen_t len = sizeof(struct sockaddr_in);

	(void)arg;
	memset(out, 0, sizeof(*out));
	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, out, &len) == 0)
		return 0;
	len = sizeof(struct sockaddr_in6);
	if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST_, out, &len) == 0)
		return 0;
	return -errno;
}

static void epoll_set(struct net_proxy *p, int fd, uint32_t *cur, uint32_t want, struct tag *t)
{
	struct epoll_event ev = {.events = want, .data.ptr = t};

	if (fd < 0 || *cur == want)
		return;
	/* An fd with no interest leaves the set: EPOLLHUP is reported whatever we ask for, and a
	 * level-triggered HUP on a connection we are not serving yet would spin the loop. */
	if (want == 0)
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);
	else if (epoll_ctl(p->epfd, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0)
		log_warn("net proxy: epoll_ctl: %s", strerror(errno));
	*cur = want;
}

static void timer_at(struct net_proxy *p, uint64_t t)
{
	if (t && t < p->next_timer_ns)
		p->next_timer_ns = t;
}

/* ---- per-sandbox state: connection counts and token buckets -------------------------------- */

static double bucket_burst(const struct net_proxy *p)
{
	double b = (double)p->cfg.rate_bytes / 8; /* 125 ms of traffic */

	return b < 2 * BUCKET_MIN_CHUNK ? 2 * BUCKET_MIN_CHUNK : b;
}

static void bucket_refill(struct net_proxy *p, struct sbx *s, uint64_t now)
{
	double burst = bucket_burst(p), add = (double)(now - s->last_ns) / 1e9 * p->cfg.rate_bytes;

	for (int k = 0; k < 2; k++)
		s->tokens[k] = s->tokens[k] + add > burst ? burst : s->tokens[k] + add;
	s->last_ns = now;
}

static struct sbx *sbx_get(struct net_proxy *p, const char *id)
{
	struct sbx *s;

	for (s = p->sbxs; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->tokens[0] = s->tokens[1] = bucket_burst(p);
	s->last_ns = s->log_ns = util_now_ns();
	s->log_tokens = LOG_BURST;
	s->next = p->sbxs;
	p->sbxs = s;
	return s;
}

/* Frees entries with no connection whose buckets have refilled (nothing is lost by forgetting). */
static void sbx_sweep(struct net_proxy *p, uint64_t now)
{
	struct sbx **pp = &p->sbxs;

	while (*pp) {
		struct sbx *s = *pp;

		if (s->conns == 0 && s->dns_inflight == 0) {
			bucket_refill(p, s, now);
			bool log_full =
				s->log_tokens + (double)(now - s->log_ns) / 1e9 * LOG_RATE >=
				LOG_BURST;

			if (log_full && !s->log_dropped &&
			    (!p->cfg.rate_bytes || (s->tokens[0] >= bucket_burst(p) &&
						    s->tokens[1] >= bucket_burst(p)))) {
				*pp = s->next;
				free(s);
				continue;
			}
		}
		pp = &s->next;
	}
}

/* ---- connection lifetime ------------------------------------------------------------------ */

static void conn_close(struct conn *c, bool rst)
{
	struct net_proxy *p = c->p;

	if (c->dead)
		return;
	epoll_set(p, c->cfd, &c->cev, 0, &c->ctag);
	epoll_set(p, c->ufd, &c->uev, 0, &c->utag);
	if (rst) {
		close_rst(c->cfd);
		close_rst(c->ufd);
	} else {
		if (c->cfd >= 0)
			close(c->cfd);
		if (c->ufd >= 0)
			close(c->ufd);
	}
	c->cfd = c->ufd = -1;
	c->dead = true;
	if (c->dns_waiting) {
		struct conn **pp = &c->sbx->dns_wait;

		while (*pp != c)
			pp = &(*pp)->wnext;
		*pp = c->wnext;
		if (c->sbx->dns_tail == c) {
			struct conn *t = c->sbx->dns_wait;

			while (t && t->wnext)
				t = t->wnext;
			c->sbx->dns_tail = t;
		}
		c->dns_waiting = false;
	}
	if (c->sbx)
		c->sbx->conns--;
	if (c->counters)
		atomic_fetch_sub(&c->counters->active, 1);
	atomic_fetch_sub(&p->active, 1);
	p->nconns--;
	/* unlink from conns, link into the graveyard */
	if (c->prev)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = NULL;
	c->next = p->graveyard;
	p->graveyard = c;
}

static void conn_free(struct conn *c)
{
	net_policy_free(c->policy);
	if (c->counters)
		c->p->cfg.put_counters(c->counters);
	free(c->headbuf);
	for (int k = 0; k < 2; k++)
		if (c->d[k].cap) {
			close(c->d[k].pipe[0]);
			close(c->d[k].pipe[1]);
		}
	free(c);
}

static void graveyard_empty(struct net_proxy *p)
{
	struct conn **pp = &p->graveyard;

	while (*pp) {
		struct conn *c = *pp;

		if (c->resolving) { /* the worker's job still points here: freed when it returns */
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		conn_free(c);
	}
}

/* ---- decisions ---------------------------------------------------------------------------- */

/* One decision log line may be written for s (token bucket); says how many were dropped. */
static bool log_allowed(struct sbx *s)
{
	uint64_t now = util_now_ns();

	s->log_tokens += (double)(now - s->log_ns) / 1e9 * LOG_RATE;
	if (s->log_tokens > LOG_BURST)
		s->log_tokens = LOG_BURST;
	s->log_ns = now;
	if (s->log_tokens < 1) {
		s->log_dropped++;
		return false;
	}
	s->log_tokens -= 1;
	if (s->log_dropped) {
		log_warn("egress: sandbox=%s: %llu decisions not logged (more than %d/s)",
			 s->id[0] ? s->id : "-", (unsigned long long)s->log_dropped, LOG_RATE);
		s->log_dropped = 0;
	}
	return true;
}

static void log_decision(struct conn *c, const struct net_addr *a, const char *verdict,
			 const char *reason)
{
	char as[INET6_ADDRSTRLEN];

	if (!log_allowed(c->sbx ? c->sbx : &c->p->nobody))
		return;
	addr_str(a ? a : &c->dst, as, sizeof(as));
	log_info("egress %s: sandbox=%s name=%s addr=%s port=%u reason=%s", verdict,
		 c->id[0] ? c->id : "-", c->head.name[0] ? c->head.name : "-", as, c->port, reason);
}

static void conn_deny(struct conn *c, enum net_proxy_deny d, const char *reason)
{
	char as[INET6_ADDRSTRLEN];

	atomic_fetch_add(&c->p->denied[d], 1);
	if (c->counters) {
		atomic_fetch_add(&c->counters->denied, 1);
		addr_str(&c->dst, as, sizeof(as));
		net_denials_add(&c->counters->denials, util_wall_time(), c->head.name, as, c->port,
				reason ? reason : net_proxy_deny_name(d));
	}
	log_decision(c, NULL, "deny", reason ? reason : net_proxy_deny_name(d));
	conn_close(c, true);
}

static enum net_proxy_deny deny_for(enum net_reason r)
{
	if (r == NET_REASON_DENY_BAD_NAME)
		return NET_PROXY_DENY_BAD_NAME;
	if (r == NET_REASON_DENY_ALWAYS)
		return NET_PROXY_DENY_ALWAYS;
	return NET_PROXY_DENY_POLICY;
}

/* Connect to the original destination, if the address path allows it. */
static void decide_addr(struct conn *c)
{
	enum net_reason r;

	if (net_addr_always_denied(&c->dst, c->p->cfg.opens)) {
		conn_deny(c, NET_PROXY_DENY_ALWAYS, "always_denied");
		return;
	}
	if (!net_policy_check_addr(c->policy, &c->dst, c->port, &r)) {
		conn_deny(c, deny_for(r), net_reason_name(r));
		return;
	}
	c->why = net_reason_name(r);
	c->cand[0] = c->dst;
	c->ncand = 1;
	c->icand = 0;
	conn_start_connect(c);
}

static void resolve_post(struct conn *c);

/* The head is in (or will never be): decide. */
static void decide(struct conn *c)
{
	struct net_addr lit;
	enum net_reason r, ra;

	c->deadline_ns = 0;
	c->name = c->head.name[0] ? c->head.name : NULL;
	/* An IP literal in SNI/Host names no name: the destination address decides. */
	if (!c->name || net_addr_parse(c->name, &lit) == 0) {
		c->name = NULL;
		decide_addr(c);
		return;
	}
	if (net_policy_check_name(c->policy, c->name, c->port, &r)) {
		if (r == NET_REASON_ALLOW_DEFAULT) {
			/* Allowed only because everything is: the name adds nothing, so the
			 * sandbox's own destination is judged like raw TCP (no lookup). */
			decide_addr(c);
			return;
		}
		c->why = net_reason_name(r);
		resolve_post(c);
		return;
	}
	/* No domain rule allows the name, but a CIDR rule allows where the sandbox dialled: that
	 * is what the rule says, whatever name the client sends. */
	if (r == NET_REASON_DENY_DEFAULT &&
	    net_policy_check_addr(c->policy, &c->dst, c->port, &ra) &&
	    ra == NET_REASON_ALLOW_RULE && !net_addr_always_denied(&c->dst, c->p->cfg.opens)) {
		c->name = NULL;
		c->why = "allow_rule_addr";
		c->cand[0] = c->dst;
		c->ncand = 1;
		c->icand = 0;
		conn_start_connect(c);
		return;
	}
	conn_deny(c, deny_for(r), net_reason_name(r));
}

/* ---- resolver workers --------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
	struct net_proxy *p = arg;
	uint64_t one = 1;

	util_thread_name("egress proxy");
	for (;;) {
		struct job *j;
		struct isola_err *err = NULL;

		pthread_mutex_lock(&p->qlock);
		while (!p->todo && !p->wstop)
			pthread_cond_wait(&p->qcond, &p->qlock);
		if (p->wstop) {
			pthread_mutex_unlock(&p->qlock);
			return NULL;
		}
		j = p->todo;
		p->todo = j->next;
		pthread_mutex_unlock(&p->qlock);

		j->n = 0;
		j->rc = p->cfg.resolve(p->cfg.arg, j->name, j->addrs, MAX_CANDIDATES, &j->n, &err);
		if (j->n > MAX_CANDIDATES)
			j->n = MAX_CANDIDATES;
		snprintf(j->error, sizeof(j->error), "%s", err && err->message ? err->message : "");
		isola_err_free(err);

		pthread_mutex_lock(&p->qlock);
		j->next = p->done;
		p->done = j;
		pthread_mutex_unlock(&p->qlock);
		if (write(p->wakefd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow in practice; the loop drains it each wake */
		}
	}
}

/* Hands c's name to the workers. */
static void job_submit(struct conn *c)
{
	struct net_proxy *p = c->p;
	struct job *j = calloc(1, sizeof(*j)), **tail;

	if (!j) {
		conn_deny(c, NET_PROXY_DENY_RESOLVE, "out of memory");
		return;
	}
	j->c = c;
	snprintf(j->name, sizeof(j->name), "%s", c->name);
	c->resolving = true;
	c->sbx->dns_inflight++;
	pthread_mutex_lock(&p->qlock);
	for (tail = &p->todo; *tail; tail = &(*tail)->next)
		;
	*tail = j;
	pthread_cond_signal(&p->qcond);
	pthread_mutex_unlock(&p->qlock);
}

/*
 * Resolves c's name on a worker. A sandbox has at most DNS_PER_SANDBOX lookups at the workers;
 * the rest wait in its own queue, so one sandbox resolving slow names (each up to the upstream's
 * timeout) delays its own connections, not everybody's.
 */
static void resolve_post(struct conn *c)
{
	struct sbx *s = c->sbx;

	c->st = ST_RESOLVING;
	conn_update(c);
	if (s->dns_inflight < DNS_PER_SANDBOX) {
		job_submit(c);
		return;
	}
	c->dns_waiting = true;
	c->wnext = NULL;
	if (s->dns_tail)
		s->dns_tail->wnext = c;
	else
		s->dns_wait = c;
	s->dns_tail = c;
}

/* A worker slot of s came free: the next waiting connection gets it. */
static void resolve_next(struct sbx *s)
{
	struct conn *c = s->dns_wait;

	if (!c || s->dns_inflight >= DNS_PER_SANDBOX)
		return;
	s->dns_wait = c->wnext;
	if (!s->dns_wait)
		s->dns_tail = NULL;
	c->dns_waiting = false;
	job_submit(c);
}

/* A name resolved: keep the addresses neither always denied nor denied by a CIDR rule. */
static void resolve_done(struct job *j)
{
	struct conn *c = j->c;
	size_t always = 0, ruled = 0;

	c->resolving = false;
	c->sbx->dns_inflight--;
	resolve_next(c->sbx);
	if (c->dead)
		return; /* the client went away meanwhile; the graveyard frees it */
	if (j->rc < 0 || j->n == 0) {
		conn_deny(c, NET_PROXY_DENY_RESOLVE, j->error[0] ? j->error : "resolve_failed");
		return;
	}
	c->ncand = 0;
	for (size_t i = 0; i < j->n; i++) {
		struct net_addr a;

		if (net_addr_from_sockaddr((struct sockaddr *)&j->addrs[i], &a, NULL) < 0)
			continue;
		if (net_addr_always_denied(&a, c->p->cfg.opens)) {
			char as[INET6_ADDRSTRLEN];

			addr_str(&a, as, sizeof(as));
			if (log_allowed(c->sbx ? c->sbx : &c->p->nobody))
				log_warn("egress: sandbox=%s name=%s resolved to always-denied %s "
					 "(skipped)",
					 c->id, c->name, as);
			always++;
		} else if (net_policy_denies_addr(c->policy, &a, c->port)) {
			ruled++;
		} else {
			c->cand[c->ncand++] = a;
		}
	}
	if (c->ncand == 0) {
		if (always)
			conn_deny(c, NET_PROXY_DENY_ALWAYS, "resolved_to_always_denied");
		else
			conn_deny(c, ruled ? NET_PROXY_DENY_POLICY : NET_PROXY_DENY_RESOLVE,
				  ruled ? "resolved_to_denied_cidr" : "no_usable_address");
		return;
	}
	c->icand = 0;
	conn_start_connect(c);
}

static void jobs_collect(struct net_proxy *p)
{
	struct job *list, *j;
	uint64_t v;

	if (read(p->wakefd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing to drain */
	}
	pthread_mutex_lock(&p->qlock);
	list = p->done;
	p->done = NULL;
	pthread_mutex_unlock(&p->qlock);
	while ((j = list)) {
		list = j->next;
		resolve_done(j);
		free(j);
	}
}

/* ---- connecting --------------------------------------------------------------------------- */

static void conn_connected(struct conn *c)
{
	int one = 1;

	/* The bytes move socket → pipe → socket with splice(2): the kernel hands pages on, no
	 * copy through isolad's memory (the policy was decided on the head, nothing after it is
	 * inspected). */
	for (int k = 0; k < 2; k++) {
		struct dir *d = &c->d[k];
		int sz;

		if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
			log_error("net proxy: relay pipe: %s", strerror(errno));
			conn_close(c, true);
			return;
		}
		(void)fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_PIPE); /* the default 64 KiB else */
		sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
		d->cap = sz > 0 ? (size_t)sz : 65536;
	}
	setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Replay what the decision read: the upstream sees the connection from its first byte.
	 * The head (≤ NET_SNI_MAX) fits an empty pipe whole. */
	if (c->headlen && write(c->d[0].pipe[1], c->headbuf, c->headlen) != (ssize_t)c->headlen) {
		log_error("net proxy: relay pipe: %s", strerror(errno));
		conn_close(c, true);
		return;
	}
	c->d[0].held = c->headlen;
	free(c->headbuf);
	c->headbuf = NULL;
	c->st = ST_RELAY;
	c->deadline_ns = 0;
	c->last_ns = util_now_ns();
	atomic_fetch_add(&c->p->allowed, 1);
	if (c->counters)
		atomic_fetch_add(&c->counters->connections, 1);
	log_decision(c, &c->cand[c->icand], "allow", c->why);
}

/* Tries cand[icand..]; every failure moves on; none left → connect_failed, RST. */
static void conn_start_connect(struct conn *c)
{
	struct net_proxy *p = c->p;

	for (; c->icand < c->ncand; c->icand++) {
		struct sockaddr_storage ss;
		socklen_t sl = net_addr_to_sockaddr(&c->cand[c->icand], c->port, &ss);
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0)
			continue;
		if (connect(fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS) {
			c->ufd = fd;
			c->st = ST_CONNECTING;
			c->deadline_ns = util_now_ns() + p->cfg.connect_timeout_ms * 1000000ull;
			timer_at(p, c->deadline_ns);
			conn_update(c);
			return;
		}
		close(fd);
	}
	atomic_fetch_add(&p->connect_failed, 1);
	log_decision(c, c->ncand ? &c->cand[c->ncand - 1] : NULL, "allow",
		     "connect_failed (no address answered)");
	conn_close(c, true);
}

static void conn_connect_event(struct conn *c)
{
	int e = 0;
	socklen_t l = sizeof(e);

	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
		e = errno;
	if (e == 0) {
		conn_connected(c);
		if (!c->dead)
			conn_update(c);
		return;
	}
	epoll_set(c->p, c->ufd, &c->uev, 0, &c->utag);
	close(c->ufd);
	c->ufd = -1;
	c->icand++;
	conn_start_connect(c);
}

/* ---- relaying ----------------------------------------------------------------------------- */

static bool dir_pending(const struct dir *d)
{
	return d->held > 0;
}

/* Writes d[k] to its destination; passes a FIN on once drained. false = connection closed. */
static bool dir_flush(struct conn *c, int k)
{
	struct dir *d = &c->d[k];
	int fd = k == 0 ? c->ufd : c->cfd;

	while (d->held > 0) {
		ssize_t n = splice(d->pipe[0], NULL, fd, NULL, d->held,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			conn_close(c, true); /* EPIPE, ECONNRESET: pass the reset on */
			return false;
		}
		d->held -= (size_t)n;
		c->last_ns = util_now_ns();
		if (k == 0) {
			atomic_fetch_add(&c->p->bytes_out, (uint64_t)n);
			if (c->counters)
				atomic_fetch_add(&c->counters->bytes_out, (uint64_t)n);
		} else {
			atomic_fetch_add(&c->p->bytes_in, (uint64_t)n);
			if (c->counters)
				atomic_fetch_add(&c->counters->bytes_in, (uint64_t)n);
		}
	}
	if (d->held == 0) {
		if (d->eof && !d->shut) {
			shutdown(fd, SHUT_WR);
			d->shut = true;
		}
	}
	return true;
}

/* How many bytes direction k may read now; 0 = throttled (a wake-up is scheduled). */
static size_t dir_allowance(struct conn *c, int k, size_t space)
{
	struct net_proxy *p = c->p;
	struct sbx *s = c->sbx;
	uint64_t now;

	if (!p->cfg.rate_bytes || !s)
		return space;
	now = util_now_ns();
	bucket_refill(p, s, now);
	if (s->tokens[k] < BUCKET_MIN_CHUNK) {
		double need = BUCKET_MIN_CHUNK - s->tokens[k];

		c->d[k].throttled = true;
		timer_at(p, now + (uint64_t)(need * 1e9 / p->cfg.rate_bytes) + 1);
		return 0;
	}
	c->d[k].throttled = false;
	return s->tokens[k] < space ? (size_t)s->tokens[k] : space;
}

/* Reads direction k's source once (at most a pipe's worth: a busy connection cannot starve
 * others), then flushes. false = connection closed. */
static bool dir_pump(struct conn *c, int k)
{
	struct dir *d = &c->d[k];
	int fd = k == 0 ? c->cfd : c->ufd;
	size_t want;
	ssize_t n;

	if (d->eof || d->held >= d->cap)
		return dir_flush(c, k);
	want = dir_allowance(c, k, d->cap - d->held);
	if (want == 0)
		return dir_flush(c, k);
	n = splice(fd, NULL, d->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n > 0) {
		d->held += (size_t)n;
		c->last_ns = util_now_ns();
		if (c->p->cfg.rate_bytes && c->sbx)
			c->sbx->tokens[k] -= (double)n;
	} else if (n == 0) {
		d->eof = true;
	} else if (errno != EAGAIN && errno != EINTR) {
		conn_close(c, true);
		return false;
	}
	return dir_flush(c, k);
}

/* Recomputes what each side waits for; closes a connection finished both ways. */
static void conn_update(struct conn *c)
{
	uint32_t cw = 0, uw = 0;

	if (c->dead)
		return;
	switch (c->st) {
	case ST_HEAD:
		cw = EPOLLIN;
		break;
	case ST_RESOLVING:
		break;
	case ST_CONNECTING:
		uw = EPOLLOUT;
		break;
	case ST_RELAY:
		if (c->d[0].shut && c->d[1].shut) {
			conn_close(c, false);
			return;
		}
		if (!c->d[0].eof && c->d[0].held < c->d[0].cap && !c->d[0].throttled)
			cw |= EPOLLIN;
		if (dir_pending(&c->d[1]))
			cw |= EPOLLOUT;
		if (!c->d[1].eof && c->d[1].held < c->d[1].cap && !c->d[1].throttled)
			uw |= EPOLLIN;
		if (dir_pending(&c->d[0]))
			uw |= EPOLLOUT;
		break;
	}
	epoll_set(c->p, c->cfd, &c->cev, cw, &c->ctag);
	epoll_set(c->p, c->ufd, &c->uev, uw, &c->utag);
}

static void conn_head_event(struct conn *c)
{
	ssize_t n = recv(c->cfd, c->headbuf + c->headlen, NET_SNI_MAX - c->headlen, 0);
	int r;

	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		conn_close(c, true);
		return;
	}
	if (n == 0) {
		c->d[0].eof = true; /* passed on as a FIN once connected */
		if (c->headlen == 0) {
			conn_close(c,
				   false); /* opened and closed without a byte: nothing to decide */
			return;
		}
	}
	c->headlen += (size_t)n;
	r = net_sni_parse(c->headbuf, c->headlen, &c->head);
	if (r == -EINVAL) {
		conn_deny(c, NET_PROXY_DENY_MALFORMED, c->head.error);
		return;
	}
	if (r == -EAGAIN && !c->d[0].eof) {
		if (n > 0 && c->headlen == (size_t)n) { /* the first bytes: the head clock starts */
			c->deadline_ns = util_now_ns() + c->p->cfg.head_timeout_ms * 1000000ull;
			timer_at(c->p, c->deadline_ns);
		}
		return;
	}
	if (r == -EAGAIN) { /* EOF before the head ended: what came is raw bytes */
		c->head.kind = NET_SNI_RAW;
		c->head.name[0] = '\0';
	}
	decide(c);
}

static void conn_event(struct conn *c, int side, uint32_t ev)
{
	if (c->dead)
		return;
	switch (c->st) {
	case ST_HEAD:
		if (side == 0)
			conn_head_event(c);
		break;
	case ST_RESOLVING:
		break;
	case ST_CONNECTING:
		if (side == 1)
			conn_connect_event(c);
		return;
	case ST_RELAY:
		if (side == 0) {
			if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !dir_pump(c, 0))
				return;
			if ((ev & EPOLLOUT) && !dir_flush(c, 1))
				return;
		} else {
			if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !dir_pump(c, 1))
				return;
			if ((ev & EPOLLOUT) && !dir_flush(c, 0))
				return;
		}
		break;
	}
	conn_update(c);
}

/* ---- accepting ---------------------------------------------------------------------------- */

static void accept_one(struct net_proxy *p, int fd)
{
	struct sockaddr_storage peer, odst;
	socklen_t pl = sizeof(peer);
	struct conn *c = calloc(1, sizeof(*c));

	atomic_fetch_add(&p->accepted, 1);
	if (!c) {
		close_rst(fd);
		return;
	}
	c->p = p;
	c->cfd = fd;
	c->ufd = -1;
	c->ctag = (struct tag){c, 0};
	c->utag = (struct tag){c, 1};
	c->next = p->conns;
	if (p->conns)
		p->conns->prev = c;
	p->conns = c;
	p->nconns++;
	atomic_fetch_add(&p->active, 1);

	if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
	    (p->cfg.original_dst ? p->cfg.original_dst(p->cfg.arg, fd, &odst)
				 : net_proxy_so_original_dst(NULL, fd, &odst)) < 0 ||
	    net_addr_from_sockaddr((struct sockaddr *)&odst, &c->dst, &c->port) < 0) {
		conn_deny(c, NET_PROXY_DENY_UNKNOWN, "no_original_destination");
		return;
	}
	if (p->cfg.lookup(p->cfg.arg, (struct sockaddr *)&peer, c->id, &c->policy, &c->counters) <
	    0) {
		struct net_addr pa;
		char ps[INET6_ADDRSTRLEN] = "?";

		if (net_addr_from_sockaddr((struct sockaddr *)&peer, &pa, NULL) == 0)
			addr_str(&pa, ps, sizeof(ps));
		c->id[0] = '\0';
		c->policy = NULL;
		c->counters = NULL;
		if (log_allowed(&p->nobody))
			log_warn("egress: connection from %s, which is no sandbox", ps);
		conn_deny(c, NET_PROXY_DENY_UNKNOWN, "unknown_peer");
		return;
	}
	if (c->counters)
		atomic_fetch_add(&c->counters->active, 1);
	if (!c->policy) /* a sandbox without a policy is denied everything */
		c->policy = net_policy_new_default(false);
	if (!c->policy) {
		conn_deny(c, NET_PROXY_DENY_LIMIT, "out of memory");
		return;
	}
	c->sbx = sbx_get(p, c->id);
	if (!c->sbx) {
		conn_deny(c, NET_PROXY_DENY_LIMIT, "out of memory");
		return;
	}
	c->sbx->conns++;
	if (p->cfg.max_conns && c->sbx->conns > p->cfg.max_conns) {
		conn_deny(c, NET_PROXY_DENY_LIMIT, "sandbox_connection_limit");
		return;
	}
	if (p->nconns > p->cfg.max_conns_total) {
		conn_deny(c, NET_PROXY_DENY_LIMIT, "proxy_connection_limit");
		return;
	}
	c->headbuf = malloc(NET_SNI_MAX);
	if (!c->headbuf) {
		conn_deny(c, NET_PROXY_DENY_LIMIT, "out of memory");
		return;
	}
	c->st = ST_HEAD;
	c->deadline_ns = util_now_ns() + p->cfg.silent_ms * 1000000ull;
	timer_at(p, c->deadline_ns);
	conn_update(c);
}

static void accept_batch(struct net_proxy *p)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* The pending connection stays queued and the listener stays
				 * readable: without a pause the loop would spin on it. */
				log_warn("egress proxy: accept: %s; pausing accepts for 100 ms",
					 strerror(errno));
				epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->lfd, NULL);
				p->accept_paused_until = util_now_ns() + ACCEPT_PAUSE_NS;
				timer_at(p, p->accept_paused_until);
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				log_warn("egress proxy: accept: %s", strerror(errno));
			}
			return;
		}
		accept_one(p, fd);
	}
}

/* ---- timers ------------------------------------------------------------------------------- */

static void timers_run(struct net_proxy *p, uint64_t now)
{
	uint64_t idle = p->cfg.idle_timeout_ms * 1000000ull;
	struct conn *c, *next;

	p->next_timer_ns = now + TIMER_PERIOD_NS;
	if (p->accept_paused_until && now >= p->accept_paused_until) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->ltag};

		p->accept_paused_until = 0;
		epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfd, &ev);
	}
	timer_at(p, p->accept_paused_until);
	for (c = p->conns; c; c = next) {
		next = c->next;
		if (c->st == ST_HEAD && c->deadline_ns && now >= c->deadline_ns) {
			/* Silent (server-first protocols) or a head that never ended: raw TCP. */
			c->head.kind = NET_SNI_RAW;
			c->head.name[0] = '\0';
			decide(c);
		} else if (c->st == ST_CONNECTING && now >= c->deadline_ns) {
			epoll_set(p, c->ufd, &c->uev, 0, &c->utag);
			close(c->ufd);
			c->ufd = -1;
			c->icand++;
			conn_start_connect(c);
		} else if (c->st == ST_RELAY && now - c->last_ns >= idle) {
			log_info("egress: sandbox=%s idle connection closed after %u ms", c->id,
				 p->cfg.idle_timeout_ms);
			conn_close(c, true);
		} else if (c->st == ST_RELAY && (c->d[0].throttled || c->d[1].throttled)) {
			c->d[0].throttled = c->d[1].throttled = false;
			if (dir_pump(c, 0) && dir_pump(c, 1))
				conn_update(c);
		}
		if (!c->dead && c->deadline_ns)
			timer_at(p, c->deadline_ns);
	}
	sbx_sweep(p, now);
}

static void *loop_main(void *arg)
{
	struct net_proxy *p = arg;
	struct epoll_event evs[MAX_EVENTS];

	util_thread_name("proxy loop");
	p->next_timer_ns = util_now_ns() + TIMER_PERIOD_NS;
	while (!atomic_load(&p->stop)) {
		uint64_t now = util_now_ns();
		int timeout =
			p->next_timer_ns <= now ? 0 : (int)((p->next_timer_ns - now) / 1000000) + 1;
		int n = epoll_wait(p->epfd, evs, MAX_EVENTS, timeout);

		if (n < 0 && errno != EINTR) {
			log_error("net proxy: epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct tag *t = evs[i].data.ptr;

			if (!t->c && t->side == 0)
				accept_batch(p);
			else if (!t->c)
				jobs_collect(p);
			else
				conn_event(t->c, t->side, evs[i].events);
		}
		now = util_now_ns();
		if (now >= p->next_timer_ns)
			timers_run(p, now);
		graveyard_empty(p);
	}
	return NULL;
}

/* ---- start / stop ------------------------------------------------------------------------- */

static void proxy_free(struct net_proxy *p)
{
	struct job *j;

	if (p->nworkers) {
		pthread_mutex_lock(&p->qlock);
		p->wstop = true;
		pthread_cond_broadcast(&p->qcond);
		pthread_mutex_unlock(&p->qlock);
		for (unsigned i = 0; i < p->nworkers; i++)
			pthread_join(p->workers[i], NULL);
	}
	free(p->workers);
	/* Jobs never run or never collected: their connections are no longer resolving. */
	for (j = p->todo; j; j = p->todo) {
		p->todo = j->next;
		j->c->resolving = false;
		free(j);
	}
	for (j = p->done; j; j = p->done) {
		p->done = j->next;
		j->c->resolving = false;
		free(j);
	}
	while (p->conns)
		conn_close(p->conns, true);
	graveyard_empty(p);
	while (p->sbxs) {
		struct sbx *s = p->sbxs;

		p->sbxs = s->next;
		free(s);
	}
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->wakefd >= 0)
		close(p->wakefd);
	if (p->own_lfd && p->lfd >= 0)
		close(p->lfd);
	pthread_mutex_destroy(&p->qlock);
	pthread_cond_destroy(&p->qcond);
	free(p);
}

static int open_listener(struct net_proxy *p, struct isola_err **err)
{
	const struct sockaddr_storage *sa = &p->cfg.listen_addr;
	socklen_t len = sa->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						  : sizeof(struct sockaddr_in);
	int one = 1;

	if (p->cfg.listen_fd >= 0) {
		p->lfd = p->cfg.listen_fd;
		p->own_lfd = false;
	} else {
		p->lfd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (p->lfd < 0)
			return isola_err_sys(err, errno, "internal", "egress proxy: socket");
		p->own_lfd = true;
		setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(p->lfd, (const struct sockaddr *)sa, len) < 0 || listen(p->lfd, 1024) < 0)
			return isola_err_sys(err, errno, "unavailable",
					     "egress proxy: bind/listen");
	}
	if (util_set_nonblock(p->lfd, true) < 0)
		return isola_err_sys(err, errno, "internal", "egress proxy: non-blocking listener");
	struct sockaddr_storage bound;
	struct net_addr a;

	len = sizeof(bound);
	if (getsockname(p->lfd, (struct sockaddr *)&bound, &len) < 0 ||
	    net_addr_from_sockaddr((struct sockaddr *)&bound, &a, &p->port) < 0)
		return isola_err_sys(err, errno ? errno : EINVAL, "invalid",
				     "egress proxy: listener is not a TCP/IP socket");
	return 0;
}

/*
 * Each proxied connection holds six fds (two sockets, two relay pipes). Raises the process's soft RLIMIT_NOFILE to the hard
 * limit (isolad is the process; its sandboxes set their own), and keeps max_conns_total within
 * what is left, so accept() does not run out of fds first.
 */
static void fit_fd_limit(struct net_proxy *p)
{
	struct rlimit rl;
	rlim_t room;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max > (1u << 20) ? (1u << 20) : rl.rlim_max;

		if (want > rl.rlim_cur) {
			struct rlimit nl = {.rlim_cur = want, .rlim_max = rl.rlim_max};

			if (setrlimit(RLIMIT_NOFILE, &nl) == 0)
				rl.rlim_cur = want;
		}
	}
	room = rl.rlim_cur > 1024 ? (rl.rlim_cur - 512) / 6 : 128;
	if (p->cfg.max_conns_total > room) {
		log_warn("egress proxy: %u connections need more fds than RLIMIT_NOFILE %llu "
			 "allows; limited to %llu",
			 p->cfg.max_conns_total, (unsigned long long)rl.rlim_cur,
			 (unsigned long long)room);
		p->cfg.max_conns_total = (uint32_t)room;
	}
}

int net_proxy_start(const struct net_proxy_config *cfg, struct net_proxy **out,
		    struct isola_err **err)
{
	struct net_proxy *p;
	struct epoll_event ev = {.events = EPOLLIN};
	int r;

	*out = NULL;
	if (!cfg->lookup || !cfg->resolve || !cfg->put_counters)
		return isola_err_set(err, EINVAL, "invalid",
				     "egress proxy: lookup, resolve and put_counters are required");
	p = calloc(1, sizeof(*p));
	if (!p)
		return isola_err_set(err, ENOMEM, "internal", "egress proxy: out of memory");
	p->cfg = *cfg;
	p->lfd = p->epfd = p->wakefd = -1;
	p->nobody.log_tokens = LOG_BURST;
	p->nobody.log_ns = util_now_ns();
	pthread_mutex_init(&p->qlock, NULL);
	pthread_cond_init(&p->qcond, NULL);
	if (!p->cfg.max_conns_total)
		p->cfg.max_conns_total = 4096;
	if (!p->cfg.head_timeout_ms)
		p->cfg.head_timeout_ms = 5000;
	if (!p->cfg.silent_ms)
		p->cfg.silent_ms = 1000;
	if (!p->cfg.connect_timeout_ms)
		p->cfg.connect_timeout_ms = 10000;
	if (!p->cfg.idle_timeout_ms)
		p->cfg.idle_timeout_ms = 600000;
	if (!p->cfg.resolver_threads)
		p->cfg.resolver_threads = 4;

	fit_fd_limit(p);
	r = open_listener(p, err);
	if (r < 0)
		goto fail;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->epfd < 0 || p->wakefd < 0) {
		r = isola_err_sys(err, errno, "internal", "egress proxy: epoll/eventfd");
		goto fail;
	}
	p->ltag = (struct tag){NULL, 0};
	p->wtag = (struct tag){NULL, 1};
	ev.data.ptr = &p->ltag;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfd, &ev) < 0) {
		r = isola_err_sys(err, errno, "internal", "egress proxy: epoll_ctl");
		goto fail;
	}
	ev.data.ptr = &p->wtag;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wakefd, &ev) < 0) {
		r = isola_err_sys(err, errno, "internal", "egress proxy: epoll_ctl");
		goto fail;
	}
	p->workers = calloc(p->cfg.resolver_threads, sizeof(*p->workers));
	if (!p->workers) {
		r = isola_err_set(err, ENOMEM, "internal", "egress proxy: out of memory");
		goto fail;
	}
	for (; p->nworkers < p->cfg.resolver_threads; p->nworkers++) {
		r = -pthread_create(&p->workers[p->nworkers], NULL, worker_main, p);
		if (r < 0) {
			isola_err_sys(err, -r, "internal", "egress proxy: resolver thread");
			goto fail;
		}
	}
	r = -pthread_create(&p->loop, NULL, loop_main, p);
	if (r < 0) {
		isola_err_sys(err, -r, "internal", "egress proxy: loop thread");
		goto fail;
	}
	log_info("egress proxy: listening on port %u, %u resolver threads, %u conns/sandbox, "
		 "%llu bytes/s",
		 p->port, p->cfg.resolver_threads, p->cfg.max_conns,
		 (unsigned long long)p->cfg.rate_bytes);
	*out = p;
	return 0;
fail:
	proxy_free(p);
	return r;
}

void net_proxy_stop(struct net_proxy *p)
{
	uint64_t one = 1;

	if (!p)
		return;
	atomic_store(&p->stop, true);
	if (write(p->wakefd, &one, sizeof(one)) < 0) {
		/* cannot fail on a fresh eventfd; the loop also wakes on its timer */
	}
	pthread_join(p->loop, NULL);
	proxy_free(p);
}

uint16_t net_proxy_port(const struct net_proxy *p)
{
	return p->port;
}

void net_proxy_get_stats(const struct net_proxy *p, struct net_proxy_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->accepted = atomic_load(&p->accepted);
	out->allowed = atomic_load(&p->allowed);
	out->connect_failed = atomic_load(&p->connect_failed);
	out->active = atomic_load(&p->active);
	out->bytes_out = atomic_load(&p->bytes_out);
	out->bytes_in = atomic_load(&p->bytes_in);
	for (int i = 0; i < NET_PROXY_DENY_COUNT_; i++)
		out->denied[i] = atomic_load(&p->denied[i]);
}
