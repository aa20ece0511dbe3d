/* SPDX-License-Identifier: Apache-2.0 */
/* err: the one error contract that crosses component boundaries (STYLE.md "Errors"). */
#ifndef ISOLA_ERR_H
#define ISOLA_ERR_H

#include <stdarg.h>

/*
 * An error carried across a component boundary. Functions that can fail take
 * `struct isola_err **err` as their last argument, return a negative errno and
 * set *err (if err is non-NULL and *err is NULL) to a message naming the object.
 * The caller owns *err and releases it with isola_err_free(). `code` is a short
 * machine-readable token ("not_found", "invalid", "conflict", "too_large",
 * "unavailable", "internal", ...) that the API maps to an HTTP status in one place.
 */
struct isola_err {
	int errnum;    /* positive errno that best describes the failure */
	char code[32]; /* machine-readable class, see above */
	char *message; /* human text naming the object, heap-owned */
};

/* Sets *err (unless err is NULL or *err already set) and returns -errnum. */
int isola_err_set(struct isola_err **err, int errnum, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Like isola_err_set() but appends ": strerror(errnum)" to the message. */
int isola_err_sys(struct isola_err **err, int errnum, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefixes context to an existing *err ("create sandbox `x`: <old>"). Returns -(*err)->errnum
 * or -EIO if *err is NULL. */
int isola_err_wrap(struct isola_err **err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Frees an error; NULL is fine. */
void isola_err_free(struct isola_err *err);

/* Maps an errno to a default code token ("not_found" for ENOENT, ...). */
const char *isola_err_code_for_errno(int errnum);

static inline void isola_err_freep(struct isola_err **e)
{
	isola_err_free(*e);
}
#define cleanup_err __attribute__((cleanup(isola_err_freep)))

#endif
