/* SPDX-License-Identifier: Apache-2.0 */
/* attach: an interactive session (-i/-t) with a sandbox process over isolad's WebSocket. */
#ifndef ISOLA_CLI_ATTACH_H
#define ISOLA_CLI_ATTACH_H

#include <stdbool.h>

#include "client.h"

/*
 * Connects to GET /v1/sandboxes/{id}/processes/{pid}/ws and relays until the process exits:
 * stdin (when interactive) to binary frames, EOF as {"type":"close_stdin"}, binary frames
 * to stdout, and the {"type":"exit"} text frame to the returned status (cli_exit_status()).
 * With tty and a terminal on stdin, the terminal is put in raw mode and restored on every
 * exit path, and SIGWINCH sends {"type":"resize","cols","rows"}. Errors are printed;
 * returns 125 when isola failed.
 */
int cli_attach(const struct client_conf *conf, const char *id, long pid, bool interactive,
	       bool tty);

#endif
