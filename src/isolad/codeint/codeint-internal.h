/* SPDX-License-Identifier: Apache-2.0 */
/* codeint-internal: the embedded service files and the pure HTTP response reader. */
#ifndef ISOLA_CODEINT_INTERNAL_H
#define ISOLA_CODEINT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/httpresp.h"
#include "codeint.h"

/* One embedded file of share/interp (generated codeint_files.c, NULL-name terminated). */
struct codeint_file {
	const char *name;	   /* file name, no directory */
	const unsigned char *data; /* its bytes */
	size_t len;		   /* their count */
};
extern const struct codeint_file codeint_files[];

/* codeint_call_open without the start on demand: -ECONNREFUSED (no err) when nothing
 * listens on CODEINT_PORT. */
int codeint_call_raw(struct sandbox *s, const char *method, const char *path, const void *body,
		     size_t len, struct codeint_call **out, struct isola_err **err);

#endif
