/* SPDX-License-Identifier: Apache-2.0 */
/* net: the sandbox network manager — attach/detach, policies, peer lookup, counters. */
#include "net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../../common/ahead.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "dns.h"
#include "net-internal.h"
#include "proxy.h"

#define NET_DIR "network" /* <state>/network/<id>.json: block, interface, policy */

/* One attached sandbox. Reference-counted: the list holds one, each proxied connection one. */
struct net_sandbox {
	struct net_counters c;	     /* first: net_counters_put finds the entry from it */
	atomic_int refs;	     /* references */
	char id[40];		     /* sandbox id */
	char ifname[NET_IFNAME_MAX]; /* host side of the veth */
	uint32_t block;		     /* /30 base, host order */
	struct net_policy *policy;   /* current policy (one reference), under net.lock */
	struct net_sandbox *next;    /* list under net.lock */
};

/* A network slot made ahead (docs/network.md): a network namespace of isolad's own with lo
 * up, the veth `ifname`/eth0, its /30's addresses and default route; a sandbox joins it. */
struct net_slot {
	int netns_fd;		     /* the namespace (isolad's reference) */
	int sysfs_fd;		     /* a detached read-only sysfs of it, for the sandbox's /sys */
	char ifname[NET_IFNAME_MAX]; /* host side of the veth: prefix, '_', 8 hex */
	uint32_t block;		     /* /30 base, host order */
};

/* A destroyed sandbox's host-side network, removed behind the destroy's answer. */
struct net_reap {
	char id[40];		     /* sandbox id (names its record) */
	char ifname[NET_IFNAME_MAX]; /* host side of its veth */
	struct net_reap *next;	     /* queue under net.lock */
};

struct net {
	struct net_config cfg;	      /* copied */
	char table[32];		      /* nftables table name */
	char ifprefix[8];	      /* "i<4 hex>-": names of this isolad's host interfaces */
	uint32_t pool_base;	      /* host order */
	unsigned pool_prefix;	      /* pool prefix length */
	struct net_opens opens;	      /* --egress-open */
	pthread_mutex_t lock;	      /* protects list and every entry's policy */
	struct net_sandbox *list;     /* attached sandboxes */
	struct net_dns *dns;	      /* the resolver */
	struct net_proxy *proxy;      /* the egress proxy (proxy.c) */
	int proxy_fd;		      /* listening TCP socket for the proxy */
	_Atomic uint64_t dns_queries; /* resolver totals (/metrics) */
	_Atomic uint64_t dns_refused; /* of which refused */
	uint16_t proxy_port;	      /* its port */
	pthread_cond_t reap_cond;     /* signals the reaper: work queued, or stop */
	struct net_reap *reap_head;   /* FIFO of teardowns to finish, under lock */
	struct net_reap **reap_tail;  /* its last next pointer */
	bool reap_stop;		      /* net_stop: drain the queue, then end */
	bool reaper_on;		      /* reaper thread started */
	pthread_t reaper;	      /* the reaper thread */
	char reaping[40];	      /* id whose teardown the reaper runs now, "" if none */
	pthread_cond_t reaped_cond;   /* a teardown finished (net_sandbox_attach waits) */
	struct ahead *slots;	      /* slots made ahead (NULL: each create makes its own) */
	_Atomic uint32_t slot_seq;    /* names slots; random at start */
};

static struct net *net_cur; /* set once by net_start, cleared by net_stop (main thread) */

void net_config_defaults(struct net_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->pool, sizeof(cfg->pool), "10.200.0.0/16");
	cfg->max_connections = 256;
	cfg->slots = 4;
}

static int parse_pool(const char *s, uint32_t *base, unsigned *prefix)
{
	char buf[64], *slash, *end;
	struct in_addr a;
	unsigned long p;

	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	p = strtoul(slash + 1, &end, 10);
	if (*end || slash[1] == '\0' || p < 8 || p > 28 || inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	*prefix = (unsigned)p;
	*base = ntohl(a.s_addr) & (~0u << (32 - p));
	return 0;
}

static int parse_port(const char *arg, uint16_t *out)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (!*arg || *end || v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

int net_config_option(struct net_config *cfg, enum net_option which, const char *arg)
{
	uint64_t v = 0;
	uint32_t base;
	unsigned prefix;
	char *end;

	switch (which) {
	case NET_OPT_NONE:
		cfg->disabled = true;
		return 0;
	case NET_OPT_DEFAULT:
		if (strcmp(arg, "deny") != 0 && strcmp(arg, "allow") != 0)
			break;
		cfg->default_allow = !strcmp(arg, "allow");
		return 0;
	case NET_OPT_OPEN:
		if (strlen(arg) >= sizeof(cfg->opens))
			break;
		snprintf(cfg->opens, sizeof(cfg->opens), "%s", arg);
		return 0;
	case NET_OPT_POOL:
		if (strlen(arg) >= sizeof(cfg->pool) || parse_pool(arg, &base, &prefix) < 0)
			break;
		snprintf(cfg->pool, sizeof(cfg->pool), "%s", arg);
		return 0;
	case NET_OPT_UPSTREAM:
		if (strlen(arg) >= sizeof(cfg->dns_upstream))
			break;
		snprintf(cfg->dns_upstream, sizeof(cfg->dns_upstream), "%s", arg);
		return 0;
	case NET_OPT_DNS_PORT:
		if (parse_port(arg, &cfg->dns_port) < 0)
			break;
		return 0;
	case NET_OPT_PROXY_PORT:
		if (parse_port(arg, &cfg->proxy_port) < 0)
			break;
		return 0;
	case NET_OPT_RATE:
		if (util_parse_size(arg, &v) < 0)
			break;
		cfg->rate_bytes = v;
		return 0;
	case NET_OPT_SLOTS:
		v = strtoul(arg, &end, 10);
		if (!*arg || *end || v > NET_SLOTS_MAX)
			break;
		cfg->slots = (unsigned)v;
		return 0;
	case NET_OPT_MAX_CONNS:
		v = strtoul(arg, &end, 10);
		if (!*arg || *end || v > 1000000)
			break;
		cfg->max_connections = (uint32_t)v;
		return 0;
	}
	fprintf(stderr, "isolad: `%s` is not a valid value for that network option\n",
		arg ? arg : "");
	return -1;
}

struct net *net_current(void)
{
	return net_cur;
}

int net_proxy_listen_fd(struct net *n)
{
	return n->proxy_fd;
}

struct net_dns *net_resolver(struct net *n)
{
	return n->dns;
}

const struct net_opens *net_opens(struct net *n)
{
	return &n->opens;
}

const struct net_config *net_config(struct net *n)
{
	return &n->cfg;
}

static void entry_put(struct net_sandbox *e)
{
	if (e && atomic_fetch_sub(&e->refs, 1) == 1) {
		net_policy_free(e->policy);
		net_denials_fini(&e->c.denials);
		free(e);
	}
}

void net_counters_put(struct net_counters *c)
{
	entry_put((struct net_sandbox *)c);
}

/* FNV-1a of the state dir: one table and one interface prefix per isolad, stable across its
 * restarts, so isolads with different state dirs on one host never judge each other's. */
static void table_name(struct net *n, const char *state_dir)
{
	uint32_t h = 2166136261u;

	for (const char *p = state_dir; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	snprintf(n->table, sizeof(n->table), "isola_%08x", h);
	snprintf(n->ifprefix, sizeof(n->ifprefix), "i%04x-", h >> 16);
}

static int listen_tcp(uint16_t port, uint16_t *bound, struct isola_err **err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t len = sizeof(sa);
	cleanup_fd int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "proxy socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return isola_err_sys(err, errno, "unavailable", "bind proxy port %u", port);
	if (listen(fd, 512) < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return isola_err_sys(err, errno, "internal", "listen on proxy port");
	*bound = ntohs(sa.sin_port);
	return steal_fd(&fd);
}

static void reattach_all(struct net *n);

static int dns_lookup_cb(void *ud, const struct sockaddr *peer, char *id,
			 struct net_policy **policy)
{
	return net_lookup_peer(ud, peer, id, policy, NULL);
}

static struct net_sandbox *find_id_locked(struct net *n, const char *id)
{
	for (struct net_sandbox *e = n->list; e; e = e->next)
		if (!strcmp(e->id, id))
			return e;
	return NULL;
}

static void dns_count_cb(void *ud, const char *id, bool refused)
{
	struct net *n = ud;
	struct net_sandbox *e;

	atomic_fetch_add(&n->dns_queries, 1);
	if (refused)
		atomic_fetch_add(&n->dns_refused, 1);
	pthread_mutex_lock(&n->lock);
	e = find_id_locked(n, id);
	if (e) {
		atomic_fetch_add(&e->c.dns_queries, 1);
		if (refused)
			atomic_fetch_add(&e->c.dns_refused, 1);
	}
	pthread_mutex_unlock(&n->lock);
}

static int proxy_lookup_cb(void *arg, const struct sockaddr *peer, char *id,
			   struct net_policy **policy, struct net_counters **counters)
{
	return net_lookup_peer(arg, peer, id, policy, counters);
}

static int proxy_resolve_cb(void *arg, const char *name, struct sockaddr_storage *out, size_t max,
			    size_t *n, struct isola_err **err)
{
	return net_dns_resolve(((struct net *)arg)->dns, name, out, max, n, err);
}

/* The proxy accepts on our listening socket; it resolves through our upstream and finds
 * sandboxes, policies and counters through net_lookup_peer. */
static int start_proxy(struct net *n, struct isola_err **err)
{
	struct net_proxy_config pc = {
		.listen_fd = n->proxy_fd,
		.opens = &n->opens,
		.lookup = proxy_lookup_cb,
		.put_counters = net_counters_put,
		.resolve = proxy_resolve_cb,
		.arg = n,
		.max_conns = n->cfg.max_connections,
		.rate_bytes = n->cfg.rate_bytes,
	};

	return net_proxy_start(&pc, &n->proxy, err);
}

/* Outside the sandbox dir, which a resume from hibernation builds anew: the policy outlives
 * the sandbox's resources until the sandbox is destroyed. */
static int file_path(const struct net *n, const char *id, char *out, size_t len)
{
	return snprintf(out, len, "%s/" NET_DIR "/%s.json", n->cfg.state_dir, id) >= (int)len
		       ? -ENAMETOOLONG
		       : 0;
}

/* Removes a detached sandbox's veth, then its record: the record goes last, so a crash in
 * between leaves it for net_forget_unknown() at the next start, which removes both. */
static void reap_one(struct net *n, const char *id, const char *ifname)
{
	char path[600];
	uint64_t t0 = util_now_ns();
	int r = net_link_delete(ifname);

	if (r < 0)
		log_warn("sandbox %s: delete `%s`: %s", id, ifname, strerror(-r));
	if (file_path(n, id, path, sizeof(path)) == 0 && unlink(path) < 0 && errno != ENOENT)
		log_warn("sandbox %s: remove `%s`: %s", id, path, strerror(errno));
	log_debug("sandbox %s: network teardown took %.2f ms", id, (util_now_ns() - t0) / 1e6);
}

/*
 * The reaper: finishes detaches behind the destroys' answers, in order. Deleting a veth is
 * the slow part of a network's teardown (the kernel waits for RCU grace periods under its
 * rtnl lock); the sandbox is already unreachable when the job is queued (its processes are
 * dead and net_lookup_peer no longer finds it). Ends once net_stop() asked and the queue is
 * empty, so a stop never leaves a queued veth behind.
 */
static void *reaper_main(void *arg)
{
	struct net *n = arg;
	struct net_reap *j;

	util_thread_name("net reaper");
	pthread_mutex_lock(&n->lock);
	for (;;) {
		while (!n->reap_head && !n->reap_stop)
			pthread_cond_wait(&n->reap_cond, &n->lock);
		j = n->reap_head;
		if (!j)
			break; /* stop asked, nothing left */
		n->reap_head = j->next;
		if (!n->reap_head)
			n->reap_tail = &n->reap_head;
		snprintf(n->reaping, sizeof(n->reaping), "%s", j->id);
		pthread_mutex_unlock(&n->lock);
		reap_one(n, j->id, j->ifname);
		free(j);
		pthread_mutex_lock(&n->lock);
		n->reaping[0] = '\0';
		pthread_cond_broadcast(&n->reaped_cond);
	}
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

/* true while id's teardown is queued or running; net.lock held. */
static bool reap_pending_locked(struct net *n, const char *id)
{
	if (!strcmp(n->reaping, id))
		return true;
	for (struct net_reap *j = n->reap_head; j; j = j->next)
		if (!strcmp(j->id, id))
			return true;
	return false;
}

/* Phase ends of link_make, for the debug log. */
struct link_times {
	uint64_t link, lock, pick, gw, inside; /* util_now_ns() after each phase */
};

/*
 * Gives namespace nsfd its network: the veth ifname/eth0 (filtered from the instant it
 * exists: the table matches this isolad's name prefix), a free /30 (picked under the
 * host-wide lock with the gateway address, so no other create takes the same), lo and eth0
 * up with the address and the default route inside. The veth is made outside the lock, so a
 * burst's creates make theirs in parallel. On failure the veth is deleted.
 */
static int link_make(struct net *n, const char *ifname, int nsfd, uint32_t *block,
		     struct link_times *t, struct isola_err **err)
{
	int lock, r = net_link_create(ifname, nsfd, err);

	t->link = util_now_ns();
	if (r < 0)
		return r;
	lock = net_link_lock(err);
	if (lock < 0) {
		net_link_delete(ifname);
		return lock;
	}
	t->lock = util_now_ns();
	r = net_link_pick_block(n->pool_base, n->pool_prefix, block, err);
	t->pick = util_now_ns();
	if (r == 0)
		r = net_link_set_gateway(ifname, *block, err);
	net_link_unlock(lock);
	t->gw = util_now_ns();
	if (r == 0)
		r = net_link_configure_inside(nsfd, *block, err);
	t->inside = util_now_ns();
	if (r < 0)
		net_link_delete(ifname);
	return r;
}

static void slot_free(struct net_slot *s)
{
	if (!s)
		return;
	if (s->netns_fd >= 0)
		close(s->netns_fd);
	if (s->sysfs_fd >= 0)
		close(s->sysfs_fd);
	free(s);
}

/* Makes one slot (the filler's work, or a create's when none is ready). Its name is new:
 * '_' is in no sandbox id, and a name that exists (a previous isolad's dying slot) is
 * skipped, never taken over. */
static int slot_make(struct net *n, struct net_slot **out, struct isola_err **err)
{
	struct net_slot *s = calloc(1, sizeof(*s));
	struct link_times t;
	uint64_t t0 = util_now_ns();
	int r;

	if (!s)
		return isola_err_set(err, ENOMEM, "internal", "network slot: out of memory");
	s->netns_fd = s->sysfs_fd = -1;
	do
		snprintf(s->ifname, sizeof(s->ifname), "%.6s_%08x", n->ifprefix,
			 atomic_fetch_add(&n->slot_seq, 1));
	while (net_link_exists(s->ifname));
	r = net_link_new_netns(&s->netns_fd, &s->sysfs_fd, err);
	if (r == 0)
		r = link_make(n, s->ifname, s->netns_fd, &s->block, &t, err);
	if (r < 0) {
		slot_free(s);
		return isola_err_wrap(err, "network slot");
	}
	log_debug("network: slot %s made in %.2f ms", s->ifname, (util_now_ns() - t0) / 1e6);
	*out = s;
	return 0;
}

/* Deletes a slot's veth (and so its eth0) and drops isolad's references to it. */
static void slot_delete(struct net_slot *s)
{
	int r;

	if (!s)
		return;
	r = net_link_delete(s->ifname);
	if (r < 0)
		log_warn("network: delete slot `%s`: %s", s->ifname, strerror(-r));
	slot_free(s);
}

/* The filler's make and drop (ahead.h): slot_make and slot_delete for the pool. */
static int slot_make_ahead(void *ud, void **out, struct isola_err **err)
{
	return slot_make(ud, (struct net_slot **)out, err);
}

static void slot_drop_ahead(void *ud, void *s)
{
	(void)ud;
	slot_delete(s);
}

int net_slot_take(struct net_slot **out, struct isola_err **err)
{
	struct net *n = net_cur;
	struct net_slot *s;

	*out = NULL;
	if (!n)
		return 0;
	s = ahead_take(n->slots);
	if (!s && slot_make(n, &s, err) < 0)
		return isola_err_wrap(err, "sandbox network");
	*out = s;
	return 0;
}

int net_slot_netns_fd(const struct net_slot *s)
{
	return s->netns_fd;
}

int net_slot_sysfs_fd(const struct net_slot *s)
{
	return s->sysfs_fd;
}

void net_slot_drop(struct net_slot *s)
{
	slot_delete(s);
}

unsigned net_slots_ready(void)
{
	struct net *n = net_cur;

	return n ? ahead_ready(n->slots) : 0;
}

static bool listed_ifname_locked(struct net *n, const char *ifname)
{
	for (struct net_sandbox *e = n->list; e; e = e->next)
		if (!strcmp(e->ifname, ifname))
			return true;
	return false;
}

static void sweep_one(const char *name, void *ud)
{
	struct net *n = ud;
	bool listed;

	if (name[6] != '_')
		return; /* a sandbox-named veth: its record decides (net_forget_unknown) */
	pthread_mutex_lock(&n->lock);
	listed = listed_ifname_locked(n, name);
	pthread_mutex_unlock(&n->lock);
	if (listed)
		return;
	log_info("network: slot `%s` of a previous isolad is removed", name);
	net_link_delete(name);
}

int net_start(const struct net_config *cfg, struct net **out, struct isola_err **err)
{
	struct net *n = calloc(1, sizeof(*n));
	char path[600];
	int r;

	if (!n)
		return isola_err_set(err, ENOMEM, "internal", "network: out of memory");
	n->cfg = *cfg;
	n->proxy_fd = -1;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->reap_cond, NULL);
	pthread_cond_init(&n->reaped_cond, NULL);
	n->reap_tail = &n->reap_head;
	{
		uint32_t seed = 0;

		/* Names differ from a previous isolad's slots that may still be dying. */
		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
			seed = (uint32_t)util_now_ns();
		atomic_init(&n->slot_seq, seed);
	}
	table_name(n, cfg->state_dir);
	if (parse_pool(cfg->pool, &n->pool_base, &n->pool_prefix) < 0) {
		r = isola_err_set(err, EINVAL, "invalid",
				  "address pool `%s` is not an IPv4 CIDR of /8 to /28", cfg->pool);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/" NET_DIR, cfg->state_dir);
	r = util_mkdir_p(path, 0700);
	if (r < 0) {
		r = isola_err_sys(err, -r, "internal", "create `%s`", path);
		goto fail;
	}
	r = net_opens_parse(cfg->opens, &n->opens, err);
	if (r < 0)
		goto fail;
	r = net_dns_new(cfg->dns_upstream, &n->opens, &n->dns, err);
	if (r < 0)
		goto fail;
	r = net_dns_serve(n->dns, cfg->dns_port, dns_lookup_cb, dns_count_cb, n, err);
	if (r < 0)
		goto fail;
	r = listen_tcp(cfg->proxy_port, &n->proxy_port, err);
	if (r < 0)
		goto fail;
	n->proxy_fd = r;
	r = start_proxy(n, err);
	if (r < 0)
		goto fail;
	r = net_nft_install(n->table, n->ifprefix, net_dns_port(n->dns), n->proxy_port, err);
	if (r < 0)
		goto fail;
	reattach_all(n);
	/* Slots a previous isolad left: their namespaces died with it, their veths go now. */
	net_link_each(n->ifprefix, sweep_one, n);
	/* Without the thread, detaches finish inline (slower destroys, same result). */
	n->reaper_on = pthread_create(&n->reaper, NULL, reaper_main, n) == 0;
	/* Without it, every create makes its slot itself. */
	if (cfg->slots > 0)
		n->slots = ahead_start("network slot", cfg->slots, slot_make_ahead, slot_drop_ahead,
				       n);
	log_info("network: table inet %s, pool %s, resolver port %u, proxy port %u, egress default "
		 "%s, %u slots ahead",
		 n->table, cfg->pool, net_dns_port(n->dns), n->proxy_port,
		 cfg->default_allow ? "allow" : "deny", cfg->slots);
	net_cur = n;
	*out = n;
	return 0;
fail:
	net_proxy_stop(n->proxy);
	net_dns_free(n->dns);
	if (n->proxy_fd >= 0)
		close(n->proxy_fd);
	net_opens_fini(&n->opens);
	pthread_cond_destroy(&n->reap_cond);
	pthread_cond_destroy(&n->reaped_cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
	return isola_err_wrap(err, "start sandbox network");
}

void net_stop(struct net *n)
{
	struct net_sandbox *e, *next;

	if (!n)
		return;
	net_cur = NULL;
	/* Ready slots serve no sandbox: deleted now, not left to the next start. */
	ahead_stop(n->slots);
	n->slots = NULL;
	/* Every detach queued so far is finished before isolad goes: nothing is left behind
	 * by a destroy that answered just before the stop. */
	if (n->reaper_on) {
		pthread_mutex_lock(&n->lock);
		n->reap_stop = true;
		pthread_cond_signal(&n->reap_cond);
		pthread_mutex_unlock(&n->lock);
		pthread_join(n->reaper, NULL);
	}
	net_proxy_stop(n->proxy);
	net_dns_free(n->dns);
	if (n->proxy_fd >= 0)
		close(n->proxy_fd);
	/* Sandboxes keep running while isolad is down: their interfaces stay in the table and
	 * its rules keep dropping their traffic. With none left, the table goes. */
	if (!n->list)
		net_nft_remove(n->table, NULL);
	for (e = n->list; e; e = next) {
		next = e->next;
		entry_put(e);
	}
	net_opens_fini(&n->opens);
	pthread_cond_destroy(&n->reap_cond);
	pthread_cond_destroy(&n->reaped_cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

/* Host interface name: this isolad's prefix and the id's first 9 characters (ids are random
 * [a-z0-9]: 36^9 names per isolad), 15 bytes in all. */
static void ifname_for(const struct net *n, const char *id, char *out)
{
	snprintf(out, NET_IFNAME_MAX, "%.6s%.9s", n->ifprefix, id);
}

/* Writes <state>/network/<id>.json (atomic): what reattach needs and the policy. Durable
 * (fsynced) for a policy change; at attach only atomic: a crash of isolad keeps it (the page
 * cache), a crash of the host takes the sandbox's network with it, and a hibernation makes it
 * durable first (net_sandbox_sync). */
static int save_entry(const struct net *n, const struct net_sandbox *e, const struct net_policy *p,
		      bool durable, struct isola_err **err)
{
	char path[600];
	json_t *pol = net_policy_to_json(p);
	json_t *j = pol ? json_pack("{s:s, s:I, s:o}", "interface", e->ifname, "block",
				    (json_int_t)e->block, "policy", pol)
			: NULL;
	cleanup_free char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int r;

	json_decref(j);
	if (!text)
		return isola_err_set(err, ENOMEM, "internal", "network policy: out of memory");
	if (file_path(n, e->id, path, sizeof(path)) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "network file path too long");
	r = durable ? util_write_file_atomic(path, text, strlen(text), 0600)
		    : util_write_file_replace(path, text, strlen(text), 0600);
	return r < 0 ? isola_err_sys(err, -r, "internal", "write `%s`", path) : 0;
}

static struct net_sandbox *entry_new(const struct net *n, const struct sandbox_spec *spec)
{
	struct net_sandbox *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	atomic_init(&e->refs, 1);
	net_denials_init(&e->c.denials);
	snprintf(e->id, sizeof(e->id), "%s", spec->id);
	ifname_for(n, spec->id, e->ifname);
	return e;
}

/* Adds e, dropping any entry with its id (a hibernated sandbox resumed) or its block (a sandbox
 * that died without a detach: its block was free again, so the entry is stale). */
static void list_add(struct net *n, struct net_sandbox *e)
{
	struct net_sandbox **pp = &n->list, *stale = NULL;

	pthread_mutex_lock(&n->lock);
	while (*pp) {
		struct net_sandbox *x = *pp;

		if (!strcmp(x->id, e->id) || x->block == e->block) {
			*pp = x->next;
			x->next = stale;
			stale = x;
		} else {
			pp = &x->next;
		}
	}
	e->next = n->list;
	n->list = e;
	pthread_mutex_unlock(&n->lock);
	while (stale) {
		struct net_sandbox *x = stale;

		stale = x->next;
		entry_put(x);
	}
}

/* Reads <state>/network/<id>.json: block and ifname (each may be NULL; ifname keeps its
 * value when the record names no interface of this isolad) and policy (may be NULL).
 * -ENOENT without the file. */
static int load_entry(struct net *n, const char *id, uint32_t *block, char *ifname,
		      struct net_policy **policy, struct isola_err **err)
{
	cleanup_free char *text = NULL;
	char path[600];
	json_int_t b = -1;
	json_t *j;
	int r;

	if (file_path(n, id, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	r = util_read_file(path, 1 << 20, &text, NULL);
	if (r < 0)
		return r;
	j = json_loads(text, 0, NULL);
	if (!j || json_unpack(j, "{s:I}", "block", &b) < 0 || b < 0 || b > (json_int_t)UINT32_MAX) {
		json_decref(j);
		return isola_err_set(err, EINVAL, "internal", "`%s` is malformed", path);
	}
	if (ifname) {
		const char *v = json_string_value(json_object_get(j, "interface"));

		if (v && strlen(v) < NET_IFNAME_MAX && !strncmp(v, n->ifprefix, 6))
			snprintf(ifname, NET_IFNAME_MAX, "%s", v);
	}
	r = policy ? net_policy_parse_default(json_object_get(j, "policy"), n->cfg.default_allow,
					      policy, err)
		   : 0;
	json_decref(j);
	if (r == 0 && block)
		*block = (uint32_t)b;
	return r;
}

/* What net_sandbox_attach does with the sandbox's own namespace when it has no slot (a
 * tier that cannot join one): the veth and addresses made now. */
static int attach_own_ns(struct net *n, const struct tier_ops *t, struct tier_sandbox *ts,
			 struct net_sandbox *e, struct isola_err **err)
{
	cleanup_fd int nsfd = t->netns_fd(ts, err);
	struct link_times lt = {0};
	uint64_t t0 = util_now_ns();
	int r;

	if (nsfd < 0)
		return nsfd;
	r = link_make(n, e->ifname, nsfd, &e->block, &lt, err);
	if (r == 0)
		log_debug("sandbox %s: network took %.2f ms: veth %.2f, lock wait %.2f, pick "
			  "%.2f, gateway %.2f, inside %.2f",
			  e->id, (lt.inside - t0) / 1e6, (lt.link - t0) / 1e6,
			  (lt.lock - lt.link) / 1e6, (lt.pick - lt.lock) / 1e6,
			  (lt.gw - lt.pick) / 1e6, (lt.inside - lt.gw) / 1e6);
	return r;
}

int net_sandbox_attach(const struct tier_ops *t, struct tier_sandbox *ts,
		       const struct sandbox_spec *spec, const char *policy_from,
		       struct net_slot *slot, struct isola_err **err)
{
	struct net *n = net_cur;
	struct net_sandbox *e;
	uint64_t t0 = util_now_ns();
	int r;

	/* A joined namespace (docs/oci.md) is the engine's network: no veth, no slot, no
	 * policy. */
	if (!n || (!slot && !t->netns_fd) || spec->netns_path[0]) {
		net_slot_drop(slot);
		return 0;
	}
	/* The same id again (a resume after hibernation) while its last teardown is still
	 * behind a destroy's answer: that teardown removes the record by name, so it must
	 * finish before this one writes it again. */
	pthread_mutex_lock(&n->lock);
	while (reap_pending_locked(n, spec->id))
		pthread_cond_wait(&n->reaped_cond, &n->lock);
	pthread_mutex_unlock(&n->lock);
	e = entry_new(n, spec);
	if (!e) {
		net_slot_drop(slot);
		return isola_err_set(err, ENOMEM, "internal", "network: out of memory");
	}
	/* A sandbox resumed from hibernation keeps its policy; a fork child gets its source's
	 * (a copy must never get out where the original could not); a new one the default. */
	if (load_entry(n, spec->id, NULL, NULL, &e->policy, NULL) < 0 &&
	    (!policy_from || !*policy_from ||
	     load_entry(n, policy_from, NULL, NULL, &e->policy, NULL) < 0))
		e->policy = net_policy_new_default(n->cfg.default_allow);
	if (!e->policy) {
		r = isola_err_set(err, ENOMEM, "internal", "network: out of memory");
		goto fail;
	}
	if (slot) {
		snprintf(e->ifname, sizeof(e->ifname), "%s", slot->ifname);
		e->block = slot->block;
		/* Slots open low ports (their namespace is not the sandbox's user namespace's);
		 * a sandbox whose root lacks CAP_NET_BIND_SERVICE gets them closed again. */
		r = spec->caps & (1ull << CAP_NET_BIND_SERVICE)
			    ? 0
			    : net_link_set_low_ports(slot->netns_fd, false, err);
	} else {
		r = attach_own_ns(n, t, ts, e, err);
	}
	if (r == 0)
		r = save_entry(n, e, e->policy, false, err);
	if (r < 0)
		goto fail;
	list_add(n, e);
	slot_free(slot); /* the sandbox's processes hold the namespace now */
	log_debug("sandbox %s: network attach took %.2f ms (%s)", spec->id,
		  (util_now_ns() - t0) / 1e6, slot ? "slot" : "own namespace");
	log_info("sandbox %s: network %s block %u.%u.%u.%u/30", spec->id, e->ifname, e->block >> 24,
		 (e->block >> 16) & 255, (e->block >> 8) & 255, e->block & 255);
	return 0;
fail:
	if (slot)
		slot_delete(slot);
	else
		net_link_delete(e->ifname);
	entry_put(e);
	return isola_err_wrap(err, "sandbox network");
}

/* Calls fn with the id of every <state>/network/<id>.json. */
static void for_each_record(struct net *n, void (*fn)(struct net *n, const char *id, void *ud),
			    void *ud)
{
	char base[600];
	DIR *dir;
	struct dirent *de;

	snprintf(base, sizeof(base), "%s/" NET_DIR, n->cfg.state_dir);
	dir = opendir(base);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char id[sizeof(((struct sandbox_spec *)0)->id)];
		size_t len = strlen(de->d_name);

		/* A record whose atomic write a crash cut short (util_write_file_atomic's temp
		 * name): never read, removed. Only the isolad holding the state dir writes here. */
		if (de->d_name[0] != '.' && strstr(de->d_name, ".json.tmp.")) {
			if (unlinkat(dirfd(dir), de->d_name, 0) == 0)
				log_info("network: removed `%s/%s`, a write cut short", base,
					 de->d_name);
			continue;
		}
		if (de->d_name[0] == '.' || len <= 5 || len - 5 >= sizeof(id) ||
		    strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(len - 5), de->d_name);
		fn(n, id, ud);
	}
	closedir(dir);
}

static void reattach_one(struct net *n, const char *id, void *ud)
{
	cleanup_err struct isola_err *e2 = NULL;
	struct sandbox_spec spec = {0};
	struct net_sandbox *e;

	(void)ud;
	snprintf(spec.id, sizeof(spec.id), "%s", id);
	e = entry_new(n, &spec);
	if (!e)
		return;
	if (load_entry(n, spec.id, &e->block, e->ifname, &e->policy, &e2) < 0) {
		if (e2)
			log_warn("sandbox %s: %s; its network is not re-attached", spec.id,
				 e2->message);
		entry_put(e);
		return;
	}
	if (!net_link_exists(e->ifname)) {
		entry_put(e); /* gone with its sandbox, or hibernated */
		return;
	}
	list_add(n, e);
	log_info("sandbox %s: network %s re-attached", spec.id, e->ifname);
}

/*
 * At start, before core reconciles: takes back every sandbox whose host interface still exists
 * (it outlived the previous isolad) from <state>/network/<id>.json. The files of sandboxes
 * whose interface is gone stay (a hibernated sandbox keeps its policy) until it is destroyed,
 * or until net_forget_unknown() finds no sandbox of that id.
 */
static void reattach_all(struct net *n)
{
	for_each_record(n, reattach_one, NULL);
}

struct forget_ctx {
	bool (*known)(void *ud, const char *id); /* the caller's question */
	void *ud;				 /* its argument */
};

static void forget_one(struct net *n, const char *id, void *ud)
{
	struct forget_ctx *f = ud;
	struct sandbox_spec spec = {0};

	(void)n;
	if (f->known(f->ud, id))
		return;
	snprintf(spec.id, sizeof(spec.id), "%s", id);
	log_info("sandbox %s: no such sandbox; its network record and interface are removed", id);
	net_sandbox_detach(&spec);
}

void net_forget_unknown(bool (*known)(void *ud, const char *id), void *ud)
{
	struct forget_ctx f = {.known = known, .ud = ud};

	if (net_cur)
		for_each_record(net_cur, forget_one, &f);
}

void net_sandbox_detach(const struct sandbox_spec *spec)
{
	struct net *n = net_cur;
	struct net_sandbox **pp, *e = NULL;
	struct net_reap *j;
	char ifname[NET_IFNAME_MAX];
	bool queued = false;

	if (!n || spec->netns_path[0]) /* joined: nothing of ours to remove */
		return;
	/* Its interface: a slot's name is in its record (and its entry); an older
	 * sandbox's, or a microvm's, is made of its id. */
	ifname_for(n, spec->id, ifname);
	load_entry(n, spec->id, NULL, ifname, NULL, NULL);
	j = calloc(1, sizeof(*j));
	/* Unreachable from here on: the proxy and the resolver no longer find it. */
	pthread_mutex_lock(&n->lock);
	for (pp = &n->list; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->id, spec->id)) {
			e = *pp;
			*pp = e->next;
			snprintf(ifname, sizeof(ifname), "%s", e->ifname);
			break;
		}
	}
	if (j) {
		snprintf(j->id, sizeof(j->id), "%s", spec->id);
		snprintf(j->ifname, sizeof(j->ifname), "%s", ifname);
	}
	if (j && n->reaper_on && !n->reap_stop) {
		*n->reap_tail = j;
		n->reap_tail = &j->next;
		pthread_cond_signal(&n->reap_cond);
		queued = true;
	}
	pthread_mutex_unlock(&n->lock);
	if (!queued) { /* no reaper, stopping, or out of memory: finished here */
		reap_one(n, spec->id, ifname);
		free(j);
	}
	entry_put(e);
}

int net_sandbox_sync(const char *id, struct isola_err **err)
{
	struct net *n = net_cur;
	char path[600];
	int r;

	if (!n || file_path(n, id, path, sizeof(path)) < 0)
		return 0;
	r = util_fsync_path(path);
	if (r < 0 && r != -ENOENT)
		return isola_err_sys(err, -r, "internal", "sync `%s`", path);
	return 0;
}

int net_metrics(struct net_proxy_stats *proxy, uint64_t *dns_queries, uint64_t *dns_refused)
{
	struct net *n = net_cur;

	if (!n || !n->proxy)
		return -ENOENT;
	net_proxy_get_stats(n->proxy, proxy);
	*dns_queries = atomic_load(&n->dns_queries);
	*dns_refused = atomic_load(&n->dns_refused);
	return 0;
}

int net_microvm_prepare(int netns_fd, uint32_t uid, struct isola_err **err)
{
	struct in_addr gw;

	if (!net_cur)
		return 0;
	inet_pton(AF_INET, NET_GUEST_GW, &gw);
	return net_link_tap_prepare(netns_fd, uid, ntohl(gw.s_addr), err);
}

int net_policy_validate(const json_t *policy, struct isola_err **err)
{
	struct net *n = net_cur;
	struct net_policy *p = NULL;
	int r = net_policy_parse_default(policy, n ? n->cfg.default_allow : false, &p, err);

	net_policy_free(p);
	return r;
}

/* Finds an attached sandbox and takes a reference. */
static int entry_get(struct net *n, const char *id, struct net_sandbox **out,
		     struct isola_err **err)
{
	if (!n)
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "sandbox networking is off (isolad --no-network)");
	pthread_mutex_lock(&n->lock);
	*out = find_id_locked(n, id);
	if (*out)
		atomic_fetch_add(&(*out)->refs, 1);
	pthread_mutex_unlock(&n->lock);
	if (!*out)
		return isola_err_set(err, ENOENT, "not_found", "sandbox `%s` has no network", id);
	return 0;
}

int net_sandbox_set_policy(const char *id, const json_t *policy, struct isola_err **err)
{
	struct net *n = net_cur;
	struct net_sandbox *e = NULL;
	struct net_policy *p = NULL, *old;
	int r = entry_get(n, id, &e, err);

	if (r < 0)
		return r;
	r = net_policy_parse_default(policy, n->cfg.default_allow, &p, err);
	/* Durable before it is used: a restart never falls back to an older policy. */
	if (r == 0)
		r = save_entry(n, e, p, true, err);
	if (r == 0) {
		pthread_mutex_lock(&n->lock);
		old = e->policy;
		e->policy = p;
		p = old;
		pthread_mutex_unlock(&n->lock);
		log_info("sandbox %s: egress policy replaced", id);
	}
	net_policy_free(p);
	entry_put(e);
	return r;
}

static void format_v4(uint32_t host_order, char *buf, size_t n)
{
	snprintf(buf, n, "%u.%u.%u.%u", host_order >> 24, (host_order >> 16) & 255,
		 (host_order >> 8) & 255, host_order & 255);
}

int net_sandbox_bytes(const char *id, uint64_t *tx, uint64_t *rx)
{
	struct net_link_counters lc = {0};
	char ifname[NET_IFNAME_MAX];
	struct net *n = net_cur;
	struct net_sandbox *e;

	if (!n)
		return -ENOENT;
	pthread_mutex_lock(&n->lock);
	e = find_id_locked(n, id);
	if (e)
		snprintf(ifname, sizeof(ifname), "%s", e->ifname);
	pthread_mutex_unlock(&n->lock);
	if (!e || net_link_counters(ifname, &lc) < 0)
		return -ENOENT;
	*tx = lc.tx_bytes;
	*rx = lc.rx_bytes;
	return 0;
}

int net_sandbox_info(const char *id, json_t **out, struct isola_err **err)
{
	struct net *n = net_cur;
	struct net_sandbox *e = NULL;
	struct net_link_counters lc = {0};
	char addr[16], gw[16];
	json_t *pol;
	int r = entry_get(n, id, &e, err);

	if (r < 0)
		return r;
	net_link_counters(e->ifname, &lc);
	pthread_mutex_lock(&n->lock);
	pol = net_policy_to_json(e->policy);
	pthread_mutex_unlock(&n->lock);
	format_v4(e->block + 2, addr, sizeof(addr));
	format_v4(e->block + 1, gw, sizeof(gw));
	*out = json_pack(
		"{s:o?, s:o?, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
		"s:I}}",
		"policy", pol, "denials", net_denials_to_json(&e->c.denials), "interface",
		e->ifname, "address", addr, "gateway", gw, "counters", "tx_bytes",
		(json_int_t)lc.tx_bytes, "tx_packets", (json_int_t)lc.tx_packets, "rx_bytes",
		(json_int_t)lc.rx_bytes, "rx_packets", (json_int_t)lc.rx_packets, "connections",
		(json_int_t)atomic_load(&e->c.connections), "active",
		(json_int_t)atomic_load(&e->c.active), "denied",
		(json_int_t)atomic_load(&e->c.denied), "bytes_out",
		(json_int_t)atomic_load(&e->c.bytes_out), "bytes_in",
		(json_int_t)atomic_load(&e->c.bytes_in), "dns_queries",
		(json_int_t)atomic_load(&e->c.dns_queries), "dns_refused",
		(json_int_t)atomic_load(&e->c.dns_refused));
	entry_put(e);
	if (!*out)
		return isola_err_set(err, ENOMEM, "internal", "network info: out of memory");
	return 0;
}

int net_lookup_peer(struct net *n, const struct sockaddr *peer, char *id,
		    struct net_policy **policy, struct net_counters **counters)
{
	uint32_t v, block;
	int r = -ENOENT;

	if (peer->sa_family == AF_INET) {
		v = ntohl(((const struct sockaddr_in *)peer)->sin_addr.s_addr);
	} else if (peer->sa_family == AF_INET6 &&
		   IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)peer)->sin6_addr)) {
		memcpy(&v, ((const struct sockaddr_in6 *)peer)->sin6_addr.s6_addr + 12, 4);
		v = ntohl(v);
	} else {
		return -ENOENT;
	}
	/* The firewall drops spoofed sources, so the /30 names exactly one sandbox. */
	block = v & ~3u;
	pthread_mutex_lock(&n->lock);
	for (struct net_sandbox *e = n->list; e; e = e->next) {
		if (e->block != block)
			continue;
		snprintf(id, 40, "%s", e->id);
		*policy = net_policy_ref(e->policy);
		if (counters) {
			atomic_fetch_add(&e->refs, 1);
			*counters = &e->c;
		}
		r = 0;
		break;
	}
	pthread_mutex_unlock(&n->lock);
	return r;
}
