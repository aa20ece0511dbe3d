/* SPDX-License-Identifier: Apache-2.0 */
/* isola-agent: PID 1 of every sandbox — argument parsing and early boot, then the server. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/caps.h"
#include "common/util.h"

#include "guest.h"

#if __has_include("setup.h")
#include "setup.h"
#endif

static void usage(void)
{
	fprintf(stderr,
		"usage: isola-agent --setup | --listen PATH | --serial PATH | --guest-init\n");
	exit(2);
}

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "isola-agent: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Binds a unix stream socket at path (standalone mode, tests). */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		die(path);
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die(path);
	chmod(path, 0600);
	if (listen(fd, 4) < 0)
		die("listen");
	return fd;
}

/* fds 0-2 must be open so nothing we open later lands there and leaks into children. */
static void ensure_std_fds(void)
{
	int fd;

	while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
		fcntl(fd, F_SETFD, 0);
	if (fd > 2)
		close(fd);
}

/*
 * As PID 1, the kernel already shields us from signals sent inside the namespace that we
 * have no handler for; ignoring them explicitly also covers the standalone mode and
 * keeps a write to a closed stream (SIGPIPE) from killing us.
 */
static void ignore_signals(bool standalone)
{
	static const int sigs[] = {SIGPIPE, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
				   SIGTSTP, SIGTTIN, SIGTTOU, SIGTERM, SIGINT};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sigs); i++) {
		if (standalone && (sigs[i] == SIGTERM || sigs[i] == SIGINT))
			continue; /* standalone: handled through the signalfd as "shut down" */
		signal(sigs[i], SIG_IGN);
	}
}

int main(int argc, char **argv)
{
	bool standalone;
	int fd, r;

	/* As the microvm guest's /init the kernel passes no flag: PID 1 named /init. */
	if ((getpid() == 1 && argc >= 1 && !strcmp(argv[0], "/init")) ||
	    (argc == 2 && !strcmp(argv[1], "--guest-init"))) {
		char port[300], cport[300];

		ignore_signals(false);
		guest_init(port, cport, sizeof(port));
		ensure_std_fds();
		r = guest_serial_run(port, cport[0] ? cport : NULL);
		fprintf(stderr, "isola-agent: serial %s: %s\n", port, strerror(-r));
		return 1;
	}
	if (argc < 2)
		usage();
	ensure_std_fds();
	if (!strcmp(argv[1], "--serial") && argc == 3) {
		/* a virtio-serial port in a guest whose init is something else */
		ignore_signals(true);
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		agent_root_caps = CAPS_DEFAULT_MASK; /* a guest's root, as with /init */
		r = guest_serial_run(argv[2], NULL);
		fprintf(stderr, "isola-agent: serial %s: %s\n", argv[2], strerror(-r));
		return 1;
	}
	if (!strcmp(argv[1], "--setup") && argc == 2) {
#ifdef ISOLA_AGENT_HAVE_SETUP
		standalone = false;
		ignore_signals(standalone);
		agent_root_caps = CAPS_DEFAULT_MASK; /* unless the plan says otherwise */
		fd = agent_setup_run(3, &agent_root_caps);
#else
		fprintf(stderr, "isola-agent: built without the setup stage\n");
		return 1;
#endif
	} else if (!strcmp(argv[1], "--listen") && argc == 3) {
		standalone = true;
		ignore_signals(standalone);
		/* agent_root_caps stays 0: no sandbox user namespace here, so uid 0 would be
		 * the host's root. Orphans of our children come to us, as they would to PID 1. */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		fd = listen_unix(argv[2]);
	} else {
		usage();
	}
	r = server_run(fd, standalone);
	fprintf(stderr, "isola-agent: event loop: %s\n", strerror(-r));
	return 1;
}
