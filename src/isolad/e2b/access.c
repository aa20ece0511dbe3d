/* SPDX-License-Identifier: Apache-2.0 */
/* access: the envd access token's shape "<64 hex MAC>.<role letter><issuer>" (pure, fuzzed). */
#include "e2b-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

char e2b_access_role_char(enum tenancy_role role)
{
	return role == TENANCY_ADMIN ? 'a' : role == TENANCY_USER ? 'u' : 'r';
}

bool e2b_access_who_ok(const char *who)
{
	size_t n = strnlen(who, E2B_WHO_MAX);

	if (n == 0 || n >= E2B_WHO_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((who[i] >= 'a' && who[i] <= 'z') || (who[i] >= '0' && who[i] <= '9') ||
		      who[i] == ':' || who[i] == '.' || who[i] == '_' || who[i] == '-'))
			return false;
	return true;
}

int e2b_access_parse(const char *tok, struct e2b_access *out)
{
	size_t n;

	/* UNTRUSTED: the X-Access-Token header. Only its shape is checked here; the MAC is
	 * compared by the caller (auth.c), in constant time. */
	if (!tok)
		return -EINVAL;
	n = strnlen(tok, E2B_TOKEN_MAX);
	if (n >= E2B_TOKEN_MAX || n < E2B_TOKEN_HEX + 3 || tok[E2B_TOKEN_HEX] != '.')
		return -EINVAL;
	for (size_t i = 0; i < E2B_TOKEN_HEX; i++)
		if (!((tok[i] >= '0' && tok[i] <= '9') || (tok[i] >= 'a' && tok[i] <= 'f')))
			return -EINVAL;
	switch (tok[E2B_TOKEN_HEX + 1]) {
	case 'a':
		out->role = TENANCY_ADMIN;
		break;
	case 'u':
		out->role = TENANCY_USER;
		break;
	case 'r':
		out->role = TENANCY_READONLY;
		break;
	default:
		return -EINVAL;
	}
	if (!e2b_access_who_ok(tok + E2B_TOKEN_HEX + 2))
		return -EINVAL;
	memcpy(out->mac, tok, E2B_TOKEN_HEX);
	out->mac[E2B_TOKEN_HEX] = '\0';
	snprintf(out->who, sizeof(out->who), "%s", tok + E2B_TOKEN_HEX + 2);
	return 0;
}

int e2b_access_format(const char *mac, enum tenancy_role role, const char *who, char *out, size_t n)
{
	if (n)
		out[0] = '\0';
	if (strlen(mac) != E2B_TOKEN_HEX || !e2b_access_who_ok(who))
		return -EINVAL;
	if ((size_t)snprintf(out, n, "%s.%c%s", mac, e2b_access_role_char(role), who) >= n) {
		out[0] = '\0';
		return -ENOSPC;
	}
	return 0;
}
