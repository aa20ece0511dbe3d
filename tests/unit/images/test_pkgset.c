/* SPDX-License-Identifier: Apache-2.0 */
/* test_pkgset: TAP tests of the dpkg status parser and the Depends closure (images/pkgset.c). */
#include "isolad/images/pkgset.h"

#include <string.h>

#include "../tap.h"

static bool marked(const struct pkgset *p, const char *name)
{
	for (size_t i = 0; i < pkgset_count(p); i++)
		if (!strcmp(pkgset_name(p, i), name))
			return pkgset_is_marked(p, i);
	return false;
}

static bool present(const struct pkgset *p, const char *name)
{
	for (size_t i = 0; i < pkgset_count(p); i++)
		if (!strcmp(pkgset_name(p, i), name))
			return true;
	return false;
}

static const char status[] =
	"Package: app\nStatus: install ok installed\nArchitecture: amd64\n"
	"Depends: liba (>= 1.0), libb:any | libc, mail-transport-agent\n"
	"Pre-Depends: pre\nDescription: an app\n with a continuation line\n Depends: fake\n\n"
	"Package: liba\nStatus: install ok installed\nArchitecture: amd64\nDepends: liba-dep\n\n"
	"Package: liba-dep\nStatus: install ok installed\nArchitecture: amd64\n\n"
	"Package: libb\nStatus: deinstall ok config-files\nArchitecture: amd64\n\n"
	"Package: libc\nStatus: install ok installed\nArchitecture: all\n\n"
	"Package: postfix\nStatus: install ok installed\nArchitecture: amd64\n"
	"Provides: mail-transport-agent, default-mta (= 1)\n\n"
	"Package: pre\nStatus: hold ok installed\nArchitecture: amd64\n\n"
	"Package: core\nEssential: yes\nStatus: install ok installed\nArchitecture: amd64\n\n"
	"Package: unrelated\nStatus: install ok installed\nArchitecture: amd64\n\n"
	"Package: fake\nStatus: install ok installed\nArchitecture: amd64\n\n"
	"Package: noarch\nStatus: install ok installed"; /* no final newline, no Architecture */

int main(void)
{
	const char *roots[] = {"app", "not-installed"};
	struct pkgset *p = NULL;
	size_t n;

	ok(pkgset_parse(status, sizeof(status) - 1, &p) == 0, "parse");
	ok(pkgset_count(p) == 10, "installed packages kept, config-files dropped (%zu)",
	   pkgset_count(p));
	ok(!present(p, "libb"), "deinstalled libb is not in the set");
	ok(present(p, "noarch"), "last stanza without a newline is kept");
	n = pkgset_close(p, roots, 2, false);
	ok(marked(p, "app") && marked(p, "liba") && marked(p, "liba-dep"),
	   "Depends transitively, version constraints ignored");
	ok(marked(p, "libc"), "alternative: first installed (libb is not) taken");
	ok(marked(p, "postfix"), "virtual package resolved to its installed provider");
	ok(marked(p, "pre"), "Pre-Depends followed (hold ok installed counts)");
	ok(!marked(p, "fake"), "a Depends: in a continuation line is not a field");
	ok(!marked(p, "core") && !marked(p, "unrelated"), "nothing else without Essential");
	ok(n == 6, "six marked (%zu)", n);
	n = pkgset_close(p, roots, 0, true);
	ok(marked(p, "core") && n == 7, "Essential packages added on request (%zu)", n);
	pkgset_free(p);

	ok(pkgset_parse("", 0, &p) == 0 && pkgset_count(p) == 0 &&
		   pkgset_close(p, roots, 2, true) == 0,
	   "empty status: empty set");
	pkgset_free(p);
	return tap_done();
}
