/* SPDX-License-Identifier: Apache-2.0 */
/* pty: pseudo-terminal pairs for `exec` with tty=true. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int pty_resize(int master, unsigned cols, unsigned rows)
{
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

	if (ioctl(master, TIOCSWINSZ, &ws) < 0)
		return -errno;
	return 0;
}

int pty_open(int *master, char *slave, size_t slave_len, unsigned cols, unsigned rows)
{
	int fd, r;

	/* O_NOCTTY: the agent itself must never acquire a controlling terminal */
	fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (grantpt(fd) < 0 || unlockpt(fd) < 0 || (r = ptsname_r(fd, slave, slave_len)) != 0) {
		r = -errno;
		close(fd);
		return r;
	}
	pty_resize(fd, cols, rows);
	*master = fd;
	return 0;
}
