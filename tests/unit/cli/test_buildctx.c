/* SPDX-License-Identifier: Apache-2.0 */
/* test_buildctx: .dockerignore matching of `template build`'s context (patterns, **, ! exceptions). */
#include "../tap.h"
#include "buildctx.h"

int main(void)
{
	char *pats[] = {"secret.txt", "**/*.log",	 "build", "!build/keep.me",
			"docs/*.md",  "!docs/README.md", NULL};

	ok(buildctx_match("*.txt", "a.txt") && !buildctx_match("*.txt", "d/a.txt"),
	   "* stays within one component");
	ok(buildctx_match("**/*.log", "a.log") && buildctx_match("**/*.log", "x/y/a.log"),
	   "** matches zero or more directories");
	ok(buildctx_match("a/**", "a/b/c") && !buildctx_match("a/**/z", "a/b/c"), "** at the end");
	ok(buildctx_match("fil?", "file") && !buildctx_match("fil?", "fil/"), "? is one character");
	ok(buildctx_excluded(pats, "secret.txt") && !buildctx_excluded(pats, "sub/secret.txt"),
	   "a plain name matches at the top only");
	ok(buildctx_excluded(pats, "n/m/x.log"), "**/*.log deep");
	ok(buildctx_excluded(pats, "build/out.o"), "a directory pattern excludes what is below it");
	ok(!buildctx_excluded(pats, "build/keep.me"), "! re-includes (later lines win)");
	ok(buildctx_excluded(pats, "docs/a.md") && !buildctx_excluded(pats, "docs/README.md"),
	   "exception after a glob");
	ok(!buildctx_excluded(pats, "src/main.c"), "the rest is kept");
	return tap_done();
}
