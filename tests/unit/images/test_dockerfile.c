/* SPDX-License-Identifier: Apache-2.0 */
/* test_dockerfile: the Dockerfile parser of template build (forms, directives, refusals). */
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "isolad/images/dockerfile.h"

static struct isola_err *e;

static int parse(const char *text, struct dockerfile *d)
{
	isola_err_free(e);
	e = NULL;
	dockerfile_fini(d);
	return dockerfile_parse(text, strlen(text), d, &e);
}

/* Refused, with a message containing want. */
static void refused(const char *text, const char *want)
{
	struct dockerfile d = {0};
	int r = parse(text, &d);

	ok(r < 0 && e && strstr(e->message, want), "refused `%.30s...`: %s", text,
	   e ? e->message : "(accepted)");
	dockerfile_fini(&d);
}

static const char *vars(void *ud, const char *name)
{
	(void)ud;
	if (!strcmp(name, "A"))
		return "one";
	if (!strcmp(name, "EMPTY"))
		return "";
	return NULL;
}

int main(void)
{
	struct dockerfile d = {0};
	char *s = NULL, **w = NULL;
	size_t n = 0;

	ok(parse("# syntax=docker/dockerfile:1\n# escape=`\nARG V=1\nFROM host\n"
		 "RUN echo a `\n  # a comment inside\n  && echo b\n"
		 "RUN [\"/bin/echo\", \"x y\"]\nCOPY --chown=1000:1000 a b /dst/\n"
		 "env K=v\nWORKDIR /w\nUSER user\nLABEL a=b\nEXPOSE 80\nCMD [\"python3\"]\n"
		 "ENTRYPOINT run me\n",
		 &d) == 0 &&
		   d.n == 12,
	   "a full Dockerfile parses (%zu steps) %s", d.n, e ? e->message : "");
	ok(d.escape == '`', "escape directive");
	ok(d.n > 2 && d.steps[0].op == DF_ARG && d.steps[1].op == DF_FROM &&
		   !strcmp(d.steps[1].args, "host"),
	   "ARG before FROM, FROM host");
	ok(d.n > 2 && !strcmp(d.steps[2].args, "echo a   && echo b") && d.steps[2].line == 5,
	   "continuation joined, comment skipped: `%s`", d.n > 2 ? d.steps[2].args : "");
	ok(d.n > 3 && d.steps[3].argc == 2 && !strcmp(d.steps[3].argv[1], "x y"), "exec form");
	ok(d.n > 4 && d.steps[4].chown && !strcmp(d.steps[4].chown, "1000:1000") &&
		   !strcmp(d.steps[4].args, "a b /dst/"),
	   "COPY --chown");
	ok(d.n > 5 && d.steps[5].op == DF_ENV, "keywords are case-insensitive");
	ok(d.n > 11 && d.steps[10].argc == 1 && !d.steps[11].argv &&
		   !strcmp(d.steps[11].args, "run me"),
	   "CMD exec form, ENTRYPOINT shell form");

	ok(parse("FROM host\nRUN <<EOF\necho one\necho two\nEOF\nRUN true\n", &d) == 0 &&
		   d.n == 3 && !strcmp(d.steps[1].args, "echo one\necho two\n") &&
		   d.steps[2].line == 6,
	   "RUN <<EOF: the body is the script");
	ok(parse("FROM host\nRUN python3 - <<'PY'\nprint(1)\nPY\n", &d) == 0 && d.n == 2 &&
		   d.steps[1].heredoc && strstr(d.steps[1].heredoc, "print(1)\nPY"),
	   "RUN cmd <<'PY': the shell reads the heredoc");
	ok(parse("FROM host\r\nRUN true\r\n", &d) == 0 && d.n == 2 &&
		   !strcmp(d.steps[1].args, "true"),
	   "CRLF lines");

	refused("FROM host\nHEALTHCHECK CMD true\n", "line 2: HEALTHCHECK");
	refused("FROM host\nRUN true\nONBUILD RUN x\n", "line 3: ONBUILD");
	refused("FROM host\nSTOPSIGNAL 9\n", "STOPSIGNAL");
	refused("FROM host\nSHELL [\"bash\"]\n", "SHELL");
	refused("FROM host\nVOLUME /data\n", "VOLUME");
	refused("FROM host AS build\n", "multi-stage");
	refused("FROM host\nRUN true\nFROM host\n", "line 3: FROM: multi-stage");
	refused("FROM host\nCOPY --from=b /x /y\n", "multi-stage");
	refused("FROM host\nRUN --mount=type=cache true\n", "flag `--mount`");
	refused("RUN true\n", "line 1: RUN before FROM");
	refused("ARG x\n", "no FROM");
	refused("FROM host\nFOO bar\n", "line 2: `FOO`: unknown instruction");
	refused("FROM host\nCOPY onlyone\n", "source and a destination");
	refused("FROM host\nRUN <<EOF\necho\n", "never terminated");
	refused("FROM host\nWORKDIR\n", "WORKDIR needs arguments");
	refused("# escape=x\nFROM host\n", "escape");
	isola_err_free(e);
	e = NULL;
	dockerfile_fini(&d);
	ok(dockerfile_parse("FROM host\nRUN a\0b\n", 17, &d, &e) < 0 && strstr(e->message, "NUL"),
	   "a NUL byte is refused");

	ok(dockerfile_subst("a $A ${A} ${B:-def} ${A:+alt} ${B:+no}${EMPTY:-e} \\$A", '\\', vars,
			    NULL, &s, &e) == 0 &&
		   !strcmp(s, "a one one def alt e $A"),
	   "substitution: `%s`", s ? s : "");
	free(s);
	s = NULL;
	ok(dockerfile_subst("${A", '\\', vars, NULL, &s, &e) < 0 && !s, "unterminated ${ refused");
	ok(dockerfile_words("K=\"v 1\" 'x y' a\\ b", '\\', &w, &n, &e) == 0 && n == 3 &&
		   !strcmp(w[0], "K=v 1") && !strcmp(w[1], "x y") && !strcmp(w[2], "a b"),
	   "words with quotes and escapes");
	dockerfile_words_free(w);
	w = NULL;
	ok(dockerfile_words("\"open", '\\', &w, &n, &e) < 0, "unterminated quote refused");
	dockerfile_fini(&d);
	isola_err_free(e);
	return tap_done();
}
