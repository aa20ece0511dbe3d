/* SPDX-License-Identifier: Apache-2.0 */
/* dial: a connected stream socket to isolad, over its unix socket or plain-http TCP. */
#ifndef ISOLA_CLI_DIAL_H
#define ISOLA_CLI_DIAL_H

#include <stddef.h>

#include "../common/err.h"

/* Connects to the unix socket at path. The fd (close-on-exec) or -errno with *err
 * (`unavailable` naming the path). */
int dial_unix(const char *path, struct isola_err **err);

/* Connects to the host and port of url ("http://HOST[:PORT][/prefix]"); host gets HOST
 * (for the Host header). The fd or -errno with *err: `usage` for a URL that is not plain
 * http, `unavailable` when the name does not resolve or nothing answers. */
int dial_tcp(const char *url, char *host, size_t hostlen, struct isola_err **err);

#endif
