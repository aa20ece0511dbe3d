/* SPDX-License-Identifier: Apache-2.0 */
/* net: the process tier's netns_fd — the sandbox's network namespace, for its veth (docs/network.md). */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PIDFD_GET_NET_NAMESPACE
#define PIDFD_GET_NET_NAMESPACE _IO(0xFF, 4) /* PIDFS_IOCTL_MAGIC; Linux 6.11 */
#endif

int proc_open_netns(pid_t pid, int pidfd, struct isola_err **err)
{
	char path[64];
	int fd;

	if (pid <= 0 || pidfd < 0)
		return isola_err_set(err, ESRCH, "conflict", "sandbox has no running init");
	/* A pidfd names the process itself, so a recycled pid cannot hand us another
	 * namespace. */
	fd = ioctl(pidfd, PIDFD_GET_NET_NAMESPACE, 0);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "open `%s`", path);
	/* Older kernels: the pid could have been recycled between open and now; the pidfd
	 * cannot, so a live pidfd after the open proves the namespace is the sandbox's. */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
		close(fd);
		return isola_err_set(err, ESRCH, "conflict", "sandbox init exited");
	}
	return fd;
}
