/* SPDX-License-Identifier: Apache-2.0 */
/* hostaddr: is a destination the host itself? The kernel's route lookup, asked per decision. */
#include "hostaddr.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdalign.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/util.h"

/*
 * Why not a list of the host's addresses: the old list (getifaddrs, capped at 256) let a sandbox
 * reach every host address past the 256th, every global IPv6 one on a busy host among them, and
 * a list also misses `ip route add local PREFIX dev lo` (a whole prefix delivered locally) and
 * addresses added between two refreshes. The route lookup is the same one connect() makes.
 */
int net_hostaddr_lookup(const struct net_addr *a)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[RTA_SPACE(16)];
	} req;
	alignas(struct nlmsghdr) char buf[4096];
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	bool v4 = net_addr_is_v4(a);
	size_t alen = v4 ? 4 : 16;
	struct rtattr *rta;
	struct nlmsghdr *nh;
	int n;
	cleanup_fd int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.rt.rtm_family = v4 ? AF_INET : AF_INET6;
	req.rt.rtm_dst_len = (unsigned char)(alen * 8);
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(NLMSG_LENGTH(sizeof(req.rt))));
	rta->rta_type = RTA_DST;
	rta->rta_len = RTA_LENGTH(alen);
	memcpy(RTA_DATA(rta), v4 ? a->b + 12 : a->b, alen);
	req.nh.nlmsg_len = NLMSG_ALIGN(NLMSG_LENGTH(sizeof(req.rt))) + RTA_ALIGN(rta->rta_len);
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	/* rtnetlink handles the request inside sendto: the reply is queued already. Never wait
	 * for one (the proxy's loop thread calls this); none there fails closed. */
	n = (int)recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN ? -EIO : -errno;
	for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
		if (nh->nlmsg_seq != req.nh.nlmsg_seq)
			continue;
		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EIO;
			/* No route (v4 and v6), an `unreachable` or a `prohibit` route: nothing
			 * can be delivered there, to the host or elsewhere. Any other error
			 * (blackhole's EINVAL included) fails closed. */
			if (e->error == -ENETUNREACH || e->error == -EHOSTUNREACH ||
			    e->error == -EACCES)
				return 0;
			return e->error < 0 ? e->error : -EIO;
		}
		if (nh->nlmsg_type == RTM_NEWROUTE) {
			const struct rtmsg *r = NLMSG_DATA(nh);

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*r)))
				return -EIO;
			return r->rtm_type == RTN_LOCAL || r->rtm_type == RTN_BROADCAST ||
			       r->rtm_type == RTN_ANYCAST || r->rtm_type == RTN_MULTICAST;
		}
	}
	return -EIO;
}
