/* SPDX-License-Identifier: Apache-2.0 */
/* dockerfile: the Dockerfile parser of `template build` (docs/templates.md "Build"). */
#ifndef ISOLA_DOCKERFILE_H
#define ISOLA_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"

#define DF_MAX_BYTES (1u << 20) /* cap on a Dockerfile's size */
#define DF_MAX_STEPS 1000	/* cap on instructions */
#define DF_MAX_WORDS 4096	/* cap on words of one instruction */
#define DF_MAX_TEXT  (1u << 20) /* cap on one substituted string */

enum df_op {
	DF_FROM,
	DF_RUN,
	DF_COPY,
	DF_ADD,
	DF_ENV,
	DF_ARG,
	DF_WORKDIR,
	DF_USER,
	DF_LABEL,
	DF_EXPOSE,
	DF_CMD,
	DF_ENTRYPOINT,
};

/* One instruction. All strings owned by the step. */
struct df_step {
	enum df_op op; /* what it is */
	unsigned line; /* 1-based line of its keyword */
	char *args;    /* argument text after the keyword and flags, continuations joined;
			 * RUN <<EOF: the script (heredoc body) */
	char **argv;   /* exec form (a JSON array of strings), NULL-terminated; NULL = shell form */
	size_t argc;   /* entries of argv */
	char *chown;   /* COPY/ADD --chown=VALUE, else NULL */
	char *heredoc; /* RUN CMD <<EOF: the whole shell text, heredoc included; else NULL */
};

/* A parsed Dockerfile: exactly one FROM, first after optional ARGs. */
struct dockerfile {
	struct df_step *steps; /* in order (owned) */
	size_t n;	       /* entries of steps */
	char escape;	       /* escape character (`# escape=` directive): '\\' or '`' */
};

/*
 * Parses text (len bytes, UNTRUSTED: a client's upload; need not be NUL-terminated) into *out
 * (caller releases it with dockerfile_fini, also after a failure). Refuses, naming the
 * instruction and its line, anything `template build` does not do: HEALTHCHECK, ONBUILD,
 * STOPSIGNAL, SHELL, VOLUME, MAINTAINER, multi-stage builds (`FROM ... AS`, a second FROM,
 * COPY --from), an unknown instruction, unknown flags, an instruction before FROM other than
 * ARG, a missing FROM. -EINVAL (`invalid`) or -EFBIG (`too_large`) with *err; -ENOMEM.
 */
int dockerfile_parse(const char *text, size_t len, struct dockerfile *out, struct isola_err **err);

/* Releases what d owns; safe on a zeroed struct. */
void dockerfile_fini(struct dockerfile *d);

/* The keyword of op ("RUN"). */
const char *dockerfile_op_name(enum df_op op);

/* Looks a variable up: its value (borrowed) or NULL when unset. */
typedef const char *(*df_lookup_fn)(void *ud, const char *name);

/*
 * Docker's variable substitution on in: `$VAR`, `${VAR}`, `${VAR:-word}`, `${VAR:+word}`;
 * an unset variable is empty; the escape character before `$` keeps it literal (the escape is
 * dropped). *out is a new string (caller frees). -EINVAL (`invalid`) for a bad `${`,
 * -EFBIG past DF_MAX_TEXT.
 */
int dockerfile_subst(const char *in, char escape, df_lookup_fn fn, void *ud, char **out,
		     struct isola_err **err);

/*
 * Splits in into words at unquoted whitespace; "..." and '...' group, the escape character
 * quotes the next character (outside single quotes). *words is a NULL-terminated array of
 * new strings (free with dockerfile_words_free), *n its length. -EINVAL for an unterminated
 * quote, -EFBIG past DF_MAX_WORDS.
 */
int dockerfile_words(const char *in, char escape, char ***words, size_t *n, struct isola_err **err);

/* Frees what dockerfile_words made; NULL is fine. */
void dockerfile_words_free(char **words);

#endif
