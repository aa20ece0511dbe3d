/* SPDX-License-Identifier: Apache-2.0 */
/* link: a sandbox's veth, its /30 from the pool and the inside configuration, over netlink. */
#include "net-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"

#define NET_LOCK_DIR  "/run/isola"
#define NET_LOCK_PATH "/run/isola/net.lock"

static void sockp(struct nl_sock **sk)
{
	if (*sk)
		nl_socket_free(*sk);
}
#define cleanup_sock __attribute__((cleanup(sockp)))

static void linkp(struct rtnl_link **l)
{
	if (*l)
		rtnl_link_put(*l);
}
#define cleanup_link __attribute__((cleanup(linkp)))

static void nladdrp(struct nl_addr **a)
{
	if (*a)
		nl_addr_put(*a);
}
#define cleanup_nladdr __attribute__((cleanup(nladdrp)))

/* libnl errors are positive NLE_* codes; map the ones that matter to errno. */
static int nl_errno(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_EXIST:
		return EEXIST;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV:
		return ENODEV;
	case NLE_PERM:
		return EPERM;
	case NLE_NOMEM:
		return ENOMEM;
	case NLE_INVAL:
		return EINVAL;
	default:
		return EIO;
	}
}

static int nl_fail(struct isola_err **err, int nle, const char *what, const char *obj)
{
	int e = nl_errno(nle);

	return isola_err_set(err, e, e == EEXIST ? "conflict" : "internal", "%s `%s`: %s", what,
			     obj, nl_geterror(nle));
}

static int open_route_sock(struct nl_sock **out, struct isola_err **err)
{
	struct nl_sock *sk = nl_socket_alloc();
	int r;

	if (!sk)
		return isola_err_set(err, ENOMEM, "internal", "netlink socket: out of memory");
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		nl_socket_free(sk);
		return nl_fail(err, r, "connect", "netlink route");
	}
	*out = sk;
	return 0;
}

/* "a.b.c.d/len" for a host-order address. */
static int make_addr(uint32_t host_order, unsigned prefix, struct nl_addr **out)
{
	uint32_t be = htonl(host_order);
	struct nl_addr *a = nl_addr_build(AF_INET, &be, sizeof(be));

	if (!a)
		return -NLE_NOMEM;
	nl_addr_set_prefixlen(a, (int)prefix);
	*out = a;
	return 0;
}

int net_link_lock(struct isola_err **err)
{
	int fd = util_mkdir_p(NET_LOCK_DIR, 0755);

	if (fd < 0)
		return isola_err_sys(err, -fd, "internal", "create `%s`", NET_LOCK_DIR);
	fd = open(NET_LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "open `%s`", NET_LOCK_PATH);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int e = errno;

			close(fd);
			return isola_err_sys(err, e, "internal", "lock `%s`", NET_LOCK_PATH);
		}
	}
	return fd;
}

void net_link_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

struct pick_ctx {
	uint32_t pool;	  /* pool base, host order */
	uint32_t mask;	  /* pool mask, host order */
	uint8_t *used;	  /* one byte per /30 of the pool */
	uint32_t nblocks; /* entries of used */
};

static void pick_one(struct nl_object *obj, void *arg)
{
	struct pick_ctx *p = arg;
	struct rtnl_addr *a = (struct rtnl_addr *)obj;
	struct nl_addr *local = rtnl_addr_get_local(a);
	uint32_t be, v;

	if (rtnl_addr_get_family(a) != AF_INET || !local || nl_addr_get_len(local) != sizeof(be))
		return;
	memcpy(&be, nl_addr_get_binary_addr(local), sizeof(be));
	v = ntohl(be);
	if ((v & p->mask) == p->pool && (v - p->pool) / 4 < p->nblocks)
		p->used[(v - p->pool) / 4] = 1;
}

int net_link_pick_block(uint32_t pool_base, unsigned pool_prefix, uint32_t *block,
			struct isola_err **err)
{
	cleanup_sock struct nl_sock *sk = NULL;
	struct nl_cache *cache = NULL;
	struct pick_ctx p;
	int r;

	if (pool_prefix < 8 || pool_prefix > 28)
		return isola_err_set(err, EINVAL, "invalid", "address pool prefix /%u is not 8-28",
				     pool_prefix);
	p.mask = ~0u << (32 - pool_prefix);
	p.pool = pool_base & p.mask;
	p.nblocks = 1u << (30 - pool_prefix);
	p.used = calloc(p.nblocks, 1);
	if (!p.used)
		return isola_err_set(err, ENOMEM, "internal", "address pool: out of memory");
	r = open_route_sock(&sk, err);
	if (r < 0)
		goto out;
	r = rtnl_addr_alloc_cache(sk, &cache);
	if (r < 0) {
		r = nl_fail(err, r, "list", "host addresses");
		goto out;
	}
	nl_cache_foreach(cache, pick_one, &p);
	nl_cache_free(cache);
	r = -ENOSPC;
	for (uint32_t i = 0; i < p.nblocks && r < 0; i++) {
		if (!p.used[i]) {
			*block = p.pool + i * 4;
			r = 0;
		}
	}
	if (r < 0)
		isola_err_set(err, ENOSPC, "unavailable", "address pool is full (%u blocks)",
			      p.nblocks);
out:
	free(p.used);
	return r;
}

static int link_get(struct nl_sock *sk, const char *name, struct rtnl_link **out,
		    struct isola_err **err)
{
	int r = rtnl_link_get_kernel(sk, 0, name, out);

	return r < 0 ? nl_fail(err, r, "find interface", name) : 0;
}

static int link_up(struct nl_sock *sk, struct rtnl_link *l, const char *name,
		   struct isola_err **err)
{
	cleanup_link struct rtnl_link *chg = rtnl_link_alloc();
	int r;

	if (!chg)
		return isola_err_set(err, ENOMEM, "internal", "interface `%s`: out of memory",
				     name);
	rtnl_link_set_flags(chg, IFF_UP);
	r = rtnl_link_change(sk, l, chg, 0);
	return r < 0 ? nl_fail(err, r, "bring up", name) : 0;
}

static int addr_add(struct nl_sock *sk, int ifindex, uint32_t host_order, const char *name,
		    struct isola_err **err)
{
	cleanup_nladdr struct nl_addr *local = NULL;
	struct rtnl_addr *a = rtnl_addr_alloc();
	int r;

	if (!a)
		return isola_err_set(err, ENOMEM, "internal", "interface `%s`: out of memory",
				     name);
	r = make_addr(host_order, 30, &local);
	if (r == 0) {
		rtnl_addr_set_ifindex(a, ifindex);
		r = rtnl_addr_set_local(a, local);
	}
	if (r == 0)
		r = rtnl_addr_add(sk, a, 0);
	rtnl_addr_put(a);
	return r < 0 ? nl_fail(err, r, "add address to", name) : 0;
}

/* Writes one of the calling thread's namespace's sysctls (/proc/sys/net follows the thread). */
static int write_sysctl(const char *path, const char *value)
{
	cleanup_fd int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t len = (ssize_t)strlen(value);

	if (fd < 0)
		return -errno;
	return write(fd, value, (size_t)len) == len ? 0 : -errno;
}

/* net.ipv6.conf.<name>.disable_ipv6 = 1 in the calling thread's namespace. 0 or -errno. */
static int ipv6_off(const char *name)
{
	char path[96];

	if ((size_t)snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", name) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	return write_sysctl(path, "1");
}

int net_link_create(const char *host_if, int netns_fd, struct isola_err **err)
{
	cleanup_sock struct nl_sock *sk = NULL;
	cleanup_link struct rtnl_link *veth = NULL;
	cleanup_link struct rtnl_link *peer = NULL;
	int r;

	r = open_route_sock(&sk, err);
	if (r < 0)
		return r;
	veth = rtnl_link_veth_alloc();
	if (!veth)
		return isola_err_set(err, ENOMEM, "internal", "veth `%s`: out of memory", host_if);
	rtnl_link_set_name(veth, host_if);
	peer = rtnl_link_veth_get_peer(veth); /* a new reference */
	rtnl_link_set_name(peer, "eth0");
	rtnl_link_set_ns_fd(peer, netns_fd);
	/* The peer is created in the sandbox's namespace directly: it never exists on the host. */
	r = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	if (r < 0 && nl_errno(r) == EEXIST) {
		/* The name is this isolad's and this sandbox's alone: what holds it is the
		 * sandbox's previous incarnation (hibernated and now woken) whose namespace the
		 * kernel has not finished tearing down, which frees the veth only later. */
		net_link_delete(host_if);
		r = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	}
	if (r < 0)
		return nl_fail(err, r, "create veth", host_if);
	/* The host side carries no IPv6 either (set before it is up, so no address is ever
	 * configured on it); a kernel without IPv6 has no such file. */
	r = ipv6_off(host_if);
	if (r < 0 && r != -ENOENT) {
		net_link_delete(host_if);
		return isola_err_sys(err, -r, "internal", "veth `%s`: disable IPv6", host_if);
	}
	return 0;
}

int net_link_set_gateway(const char *host_if, uint32_t block, struct isola_err **err)
{
	cleanup_sock struct nl_sock *sk = NULL;
	cleanup_link struct rtnl_link *host = NULL;
	int r;

	r = open_route_sock(&sk, err);
	if (r == 0)
		r = link_get(sk, host_if, &host, err);
	if (r == 0)
		r = addr_add(sk, rtnl_link_get_ifindex(host), block + 1, host_if, err);
	if (r == 0)
		r = link_up(sk, host, host_if, err);
	return r;
}

/* Runs fn(arg) in a short-lived thread and hands its error over (the jobs' common tail). */
static int run_job(void *(*fn)(void *), void *arg, int *jr, struct isola_err **jerr,
		   const char *what, struct isola_err **err)
{
	pthread_t t;
	int r = pthread_create(&t, NULL, fn, arg);

	if (r != 0)
		return isola_err_sys(err, r, "internal", "start %s thread", what);
	pthread_join(t, NULL);
	if (*jr < 0) {
		if (err && !*err) {
			*err = *jerr;
			*jerr = NULL;
		}
		isola_err_free(*jerr);
		*jerr = NULL;
	}
	return *jr;
}

struct inside_job {
	int netns_fd;	       /* borrowed */
	uint32_t block;	       /* host order */
	struct isola_err *err; /* out */
	int r;		       /* out */
};

static int configure_inside(struct inside_job *j)
{
	cleanup_sock struct nl_sock *sk = NULL;
	cleanup_link struct rtnl_link *lo = NULL;
	cleanup_link struct rtnl_link *eth = NULL;
	cleanup_nladdr struct nl_addr *dst = NULL;
	cleanup_nladdr struct nl_addr *gw = NULL;
	struct rtnl_route *rt = NULL;
	struct rtnl_nexthop *nh;
	int r;

	/* setns(CLONE_NEWNET) changes only this thread's namespace; the socket opened after it
	 * belongs to the sandbox's namespace. */
	if (setns(j->netns_fd, CLONE_NEWNET) < 0)
		return isola_err_sys(&j->err, errno, "internal", "enter sandbox network namespace");
	r = open_route_sock(&sk, &j->err);
	if (r == 0)
		r = link_get(sk, "lo", &lo, &j->err);
	if (r == 0)
		r = link_up(sk, lo, "lo", &j->err);
	if (r == 0)
		r = link_get(sk, "eth0", &eth, &j->err);
	if (r == 0)
		r = addr_add(sk, rtnl_link_get_ifindex(eth), j->block + 2, "eth0", &j->err);
	if (r == 0)
		r = link_up(sk, eth, "eth0", &j->err);
	if (r < 0)
		return r;
	rt = rtnl_route_alloc();
	nh = rtnl_route_nh_alloc();
	if (!rt || !nh || make_addr(0, 0, &dst) < 0 || make_addr(j->block + 1, 32, &gw) < 0) {
		if (nh)
			rtnl_route_nh_free(nh);
		r = isola_err_set(&j->err, ENOMEM, "internal", "default route: out of memory");
		goto out;
	}
	rtnl_route_set_family(rt, AF_INET);
	rtnl_route_set_dst(rt, dst);
	rtnl_route_nh_set_ifindex(nh, rtnl_link_get_ifindex(eth));
	rtnl_route_nh_set_gateway(nh, gw);
	rtnl_route_add_nexthop(rt, nh); /* rt owns nh now */
	r = rtnl_route_add(sk, rt, NLM_F_CREATE);
	if (r < 0)
		r = nl_fail(&j->err, r, "add default route in", "sandbox");
out:
	if (rt)
		rtnl_route_put(rt);
	return r;
}

static void *inside_thread(void *arg)
{
	struct inside_job *j = arg;

	j->r = configure_inside(j);
	return NULL; /* the thread ends here, and its namespace with it */
}

int net_link_configure_inside(int netns_fd, uint32_t block, struct isola_err **err)
{
	struct inside_job j = {.netns_fd = netns_fd, .block = block};

	return run_job(inside_thread, &j, &j.r, &j.err, "network setup", err);
}

struct netns_job {
	int netns_fd;	       /* out: the new namespace */
	int sysfs_fd;	       /* out: a detached read-only sysfs of it */
	struct isola_err *err; /* out */
	int r;		       /* out */
};

/* A sysfs of the calling thread's network namespace, as a detached mount: a sandbox whose
 * user namespace does not own that network namespace may not mount one itself. */
static int sysfs_mount(struct isola_err **err)
{
	cleanup_fd int fs = fsopen("sysfs", FSOPEN_CLOEXEC);
	int m;

	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", "sysfs", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return isola_err_sys(err, errno, "internal", "sysfs for a network slot");
	m = fsmount(fs, FSMOUNT_CLOEXEC,
		    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	return m < 0 ? isola_err_sys(err, errno, "internal", "mount sysfs for a network slot") : m;
}

static int make_netns(struct netns_job *j)
{
	int r;

	/* unshare(CLONE_NEWNET) changes only this thread, which ends with the job. */
	if (unshare(CLONE_NEWNET) < 0)
		return isola_err_sys(&j->err, errno, "internal", "new network namespace");
	j->netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (j->netns_fd < 0)
		return isola_err_sys(&j->err, errno, "internal", "open a new network namespace");
	/* The namespace belongs to isolad's user namespace, not the sandbox's: the sandbox's
	 * root binds ports below 1024 only because of this (net_link_set_low_ports). */
	r = write_sysctl("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
	if (r < 0)
		return isola_err_sys(&j->err, -r, "internal", "ip_unprivileged_port_start");
	/* IPv6 is not offered (nft.c drops it): eth0, made here later, gets none at all, so the
	 * kernel spends nothing on its link-local address, duplicate address detection and
	 * multicast reports. lo exists already and keeps ::1 (`default` applies to interfaces
	 * made from now on). A kernel without IPv6 has no such file. */
	r = write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	if (r < 0 && r != -ENOENT)
		return isola_err_sys(&j->err, -r, "internal",
				     "disable IPv6 on a slot's interfaces");
	j->sysfs_fd = sysfs_mount(&j->err);
	return j->sysfs_fd < 0 ? j->sysfs_fd : 0;
}

static void *netns_thread(void *arg)
{
	struct netns_job *j = arg;

	j->r = make_netns(j);
	return NULL; /* the thread ends here: the namespace lives on in netns_fd */
}

int net_link_new_netns(int *netns_fd, int *sysfs_fd, struct isola_err **err)
{
	struct netns_job j = {.netns_fd = -1, .sysfs_fd = -1};
	int r = run_job(netns_thread, &j, &j.r, &j.err, "network namespace", err);

	if (r < 0) {
		if (j.netns_fd >= 0)
			close(j.netns_fd);
		if (j.sysfs_fd >= 0)
			close(j.sysfs_fd);
		return r;
	}
	*netns_fd = j.netns_fd;
	*sysfs_fd = j.sysfs_fd;
	return 0;
}

struct port_job {
	int netns_fd;	       /* borrowed */
	const char *value;     /* ip_unprivileged_port_start */
	struct isola_err *err; /* out */
	int r;		       /* out */
};

static void *port_thread(void *arg)
{
	struct port_job *j = arg;
	int r;

	if (setns(j->netns_fd, CLONE_NEWNET) < 0) {
		j->r = isola_err_sys(&j->err, errno, "internal", "enter a network slot");
		return NULL;
	}
	r = write_sysctl("/proc/sys/net/ipv4/ip_unprivileged_port_start", j->value);
	j->r = r < 0 ? isola_err_sys(&j->err, -r, "internal", "ip_unprivileged_port_start") : 0;
	return NULL;
}

int net_link_set_low_ports(int netns_fd, bool open, struct isola_err **err)
{
	struct port_job j = {.netns_fd = netns_fd, .value = open ? "0" : "1024"};

	return run_job(port_thread, &j, &j.r, &j.err, "network slot", err);
}

struct tap_job {
	int netns_fd;	       /* borrowed */
	uint32_t uid;	       /* tap owner (QEMU's uid and gid) */
	uint32_t gw;	       /* tap address, host order */
	struct isola_err *err; /* out */
	int r;		       /* out */
};

static int make_tap(struct tap_job *j)
{
	cleanup_fd int fd = -1;
	cleanup_sock struct nl_sock *sk = NULL;
	cleanup_link struct rtnl_link *tap = NULL;
	struct ifreq ifr = {0};
	cleanup_fd int fwd = -1;
	int r;

	if (setns(j->netns_fd, CLONE_NEWNET) < 0)
		return isola_err_sys(&j->err, errno, "internal", "enter QEMU's network namespace");
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(&j->err, errno, "unavailable", "open `/dev/net/tun`");
	/* Persistent and owned by QEMU's uid: QEMU attaches to it without any privilege, and
	 * nobody else can (a tap is reached only from its own namespace anyway). */
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "tap0");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETOWNER, (unsigned long)j->uid) < 0 ||
	    ioctl(fd, TUNSETGROUP, (unsigned long)j->uid) < 0 || ioctl(fd, TUNSETPERSIST, 1) < 0)
		return isola_err_sys(&j->err, errno, "internal", "create tap `tap0`");
	r = open_route_sock(&sk, &j->err);
	if (r == 0)
		r = link_get(sk, "tap0", &tap, &j->err);
	if (r == 0)
		r = addr_add(sk, rtnl_link_get_ifindex(tap), j->gw, "tap0", &j->err);
	if (r == 0)
		r = link_up(sk, tap, "tap0", &j->err);
	if (r < 0)
		return r;
	/* Forwarding in QEMU's namespace only (the host forwards nothing for sandboxes). */
	fwd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	if (fwd < 0 || write(fwd, "1", 1) != 1)
		return isola_err_sys(&j->err, errno, "internal", "enable forwarding for the VM");
	return net_nft_guest_nat(&j->err);
}

static void *tap_thread(void *arg)
{
	struct tap_job *j = arg;

	j->r = make_tap(j);
	return NULL;
}

int net_link_tap_prepare(int netns_fd, uint32_t uid, uint32_t gw_addr, struct isola_err **err)
{
	struct tap_job j = {.netns_fd = netns_fd, .uid = uid, .gw = gw_addr};

	return run_job(tap_thread, &j, &j.r, &j.err, "VM network setup", err);
}

int net_link_delete(const char *host_if)
{
	cleanup_sock struct nl_sock *sk = NULL;
	cleanup_link struct rtnl_link *l = NULL;
	int r;

	if (open_route_sock(&sk, NULL) < 0)
		return -EIO;
	l = rtnl_link_alloc();
	if (!l)
		return -ENOMEM;
	rtnl_link_set_name(l, host_if);
	r = rtnl_link_delete(sk, l);
	if (r < 0 && nl_errno(r) != ENODEV)
		return -nl_errno(r);
	return 0;
}

bool net_link_exists(const char *host_if)
{
	return if_nametoindex(host_if) != 0;
}

static int read_stat(const char *host_if, const char *name, uint64_t *out)
{
	char path[128];
	cleanup_free char *body = NULL;
	int r;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", host_if, name);
	r = util_read_file(path, 64, &body, NULL);
	if (r < 0)
		return r;
	*out = strtoull(body, NULL, 10);
	return 0;
}

int net_link_counters(const char *host_if, struct net_link_counters *out)
{
	int r;

	/* The host side receives what the sandbox sends. */
	r = read_stat(host_if, "rx_bytes", &out->tx_bytes);
	if (r == 0)
		r = read_stat(host_if, "rx_packets", &out->tx_packets);
	if (r == 0)
		r = read_stat(host_if, "tx_bytes", &out->rx_bytes);
	if (r == 0)
		r = read_stat(host_if, "tx_packets", &out->rx_packets);
	return r;
}

void net_link_each(const char *prefix, void (*fn)(const char *name, void *ud), void *ud)
{
	struct if_nameindex *all = if_nameindex();

	if (!all)
		return;
	for (struct if_nameindex *i = all; i->if_index; i++)
		if (!strncmp(i->if_name, prefix, strlen(prefix)))
			fn(i->if_name, ud);
	if_freenameindex(all);
}
