/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_users: libFuzzer target for the agent's passwd/group readers (a hostile template's /etc). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/users.h"

/* The input is passwd text, a NUL, then group text (both exact-size copies, so reads past
 * the end are caught): the lookups, the name lookups and the default-user plan run on it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t plen = nul ? (size_t)(nul - data) : size;
	size_t glen = nul ? size - plen - 1 : 0;
	char *pw = malloc(plen ? plen : 1), *gr = malloc(glen ? glen : 1), name[64];
	struct agent_user u;
	struct users_seed s;

	if (!pw || !gr)
		abort();
	memcpy(pw, data, plen);
	if (glen)
		memcpy(gr, nul + 1, glen);
	if (users_parse_passwd(pw, plen, "user", &u) == 0) {
		users_parse_groups(gr, glen, &u);
		if (u.ngroups < 1 || u.ngroups > USERS_MAX_GROUPS ||
		    !memchr(u.name, 0, sizeof(u.name)))
			abort();
	}
	users_parse_passwd(pw, plen, "1000", &u);
	if (users_name_of(pw, plen, 1000, name, sizeof(name)) == 0 && strlen(name) >= sizeof(name))
		abort();
	users_name_of(gr, glen, 0, name, sizeof(name));
	if (users_seed_plan(pw, plen, gr, glen, &s) == 0 && s.add_passwd && s.uid < 1000)
		abort();
	free(pw);
	free(gr);
	return 0;
}
