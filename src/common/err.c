/* SPDX-License-Identifier: Apache-2.0 */
/* err: construction and wrapping of struct isola_err. */
#include "err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 5, 0))) static int err_vset(struct isola_err **err, int errnum,
							  const char *code, bool sys,
							  const char *fmt, va_list ap)
{
	struct isola_err *e;
	char *msg = NULL;
	int n;

	if (errnum <= 0)
		errnum = errnum < 0 ? -errnum : EIO;
	if (!err || *err)
		return -errnum;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -errnum;
	n = vasprintf(&msg, fmt, ap);
	if (n < 0)
		msg = NULL;
	if (msg && sys) {
		char *full = NULL;

		if (asprintf(&full, "%s: %s", msg, strerror(errnum)) >= 0) {
			free(msg);
			msg = full;
		}
	}
	e->errnum = errnum;
	snprintf(e->code, sizeof(e->code), "%s", code ? code : isola_err_code_for_errno(errnum));
	e->message = msg ? msg : strdup("out of memory formatting error");
	*err = e;
	return -errnum;
}

int isola_err_set(struct isola_err **err, int errnum, const char *code, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = err_vset(err, errnum, code, false, fmt, ap);
	va_end(ap);
	return r;
}

int isola_err_sys(struct isola_err **err, int errnum, const char *code, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = err_vset(err, errnum, code, true, fmt, ap);
	va_end(ap);
	return r;
}

int isola_err_wrap(struct isola_err **err, const char *fmt, ...)
{
	char *prefix = NULL, *full = NULL;
	va_list ap;
	int r;

	if (!err || !*err)
		return -EIO;
	va_start(ap, fmt);
	r = vasprintf(&prefix, fmt, ap);
	va_end(ap);
	if (r >= 0 && asprintf(&full, "%s: %s", prefix, (*err)->message) >= 0) {
		free((*err)->message);
		(*err)->message = full;
	}
	free(prefix);
	return -(*err)->errnum;
}

void isola_err_free(struct isola_err *err)
{
	if (!err)
		return;
	free(err->message);
	free(err);
}

const char *isola_err_code_for_errno(int errnum)
{
	switch (errnum) {
	case ENOENT:
	case ESRCH:
		return "not_found";
	case EEXIST:
	case EBUSY:
	case EALREADY:
		return "conflict";
	case EINVAL:
	case ENAMETOOLONG:
	case ENOTDIR:
	case EISDIR:
	case ELOOP:
	case ENOTEMPTY:
	case EXDEV:
		return "invalid";
	case EACCES:
	case EPERM:
		return "forbidden";
	case E2BIG:
	case EFBIG:
	case EMSGSIZE:
		return "too_large";
	case ENOSPC:
	case EDQUOT:
		return "no_space";
	case ETIMEDOUT:
		return "timeout";
	case EAGAIN:
	case ENOMEM:
	case EROFS: /* the state filesystem is read-only: 503, not a client error */
		return "unavailable";
	case ENOSYS:
	case EOPNOTSUPP:
		return "not_supported";
	default:
		return "internal";
	}
}
