/* SPDX-License-Identifier: Apache-2.0 */
/* net: the sandbox's network namespace — its own (netns_fd, for the veth; docs/network.md) or
 * one the operator names for it to join (docs/oci.md). */
#include "process-internal.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../../common/util.h"

static bool allow_host_netns;

void tier_process_set_allow_host_netns(bool on)
{
	allow_host_netns = on;
}

/* True if fd is the same namespace as the file at path (a namespace is its nsfs inode). */
static bool same_ns(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int proc_open_join_netns(const char *path, struct isola_err **err)
{
	cleanup_fd int pfd = -1;
	cleanup_fd int fd = -1;
	struct statfs sfs;
	struct stat st;
	char self[64];
	int type;

	if (path[0] != '/')
		return isola_err_set(err, EINVAL, "invalid",
				     "network namespace `%.255s` must be an absolute path", path);
	/* O_PATH first: a device or a fifo at the path is never opened (no side effect, no
	 * blocking open); only an nsfs file is opened for real below. */
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return isola_err_sys(err, errno, "invalid", "network namespace `%.255s`", path);
	if (fstatfs(pfd, &sfs) < 0 || fstat(pfd, &st) < 0)
		return isola_err_sys(err, errno, "invalid", "network namespace `%.255s`", path);
	if (sfs.f_type != NSFS_MAGIC || !S_ISREG(st.st_mode))
		return isola_err_set(err, EINVAL, "invalid",
				     "network namespace `%.255s` is not a namespace file (nsfs), "
				     "e.g. /var/run/netns/NAME or /proc/PID/ns/net",
				     path);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return isola_err_sys(err, errno, "invalid", "network namespace `%.255s`", path);
	/* The type from the kernel, on the descriptor we will join: a name says nothing
	 * (/proc/PID/ns/net can be bind-mounted anywhere under any name, and so can an ipc
	 * namespace under `net`). */
	type = ioctl(fd, NS_GET_NSTYPE);
	if (type < 0)
		return isola_err_sys(err, errno, "invalid",
				     "network namespace `%.255s`: NS_GET_NSTYPE", path);
	if (type != CLONE_NEWNET)
		return isola_err_set(err, EINVAL, "invalid",
				     "`%.255s` is a namespace but not a network namespace", path);
	/* The host's own network (the one of PID 1, or isolad's) gives the sandbox the host's
	 * interfaces, its loopback services (isolad's TCP API included) and no isola egress
	 * policy: only with isolad --allow-host-netns (Docker's `--network host`). */
	if (!allow_host_netns &&
	    (same_ns(fd, "/proc/1/ns/net") || same_ns(fd, "/proc/thread-self/ns/net")))
		return isola_err_set(err, EPERM, "forbidden",
				     "network namespace `%.255s` is the host's: joining it needs "
				     "isolad --allow-host-netns",
				     path);
	return steal_fd(&fd);
}

#ifndef PIDFD_GET_NET_NAMESPACE
#define PIDFD_GET_NET_NAMESPACE _IO(0xFF, 4) /* PIDFS_IOCTL_MAGIC; Linux 6.11 */
#endif

int proc_open_netns(pid_t pid, int pidfd, struct isola_err **err)
{
	/* A pidfd names the process itself, so a recycled pid cannot hand us another
	 * namespace (on older kernels a live pidfd after the open proves it). */
	int fd = proc_open_ns(pid, pidfd, "net", PIDFD_GET_NET_NAMESPACE);

	if (fd == -ESRCH)
		return isola_err_set(err, ESRCH, "conflict",
				     pid <= 0 || pidfd < 0 ? "sandbox has no running init"
							   : "sandbox init exited");
	if (fd < 0)
		return isola_err_sys(err, -fd, "internal", "open /proc/%d/ns/net", (int)pid);
	return fd;
}
