/* SPDX-License-Identifier: Apache-2.0 */
/* test_access: the envd access token's shape (src/isolad/e2b/access.c): format, parse, refusals. */
#include <errno.h>
#include <string.h>

#include "isolad/e2b/e2b-internal.h"
#include "../tap.h"

#define MAC "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void round_trips(void)
{
	static const struct {
		enum tenancy_role role;
		const char *who;
		char letter;
	} cases[] = {
		{TENANCY_READONLY, "token:ab12cd34ef56", 'r'},
		{TENANCY_USER, "token:ab12cd34ef56", 'u'},
		{TENANCY_ADMIN, "e2b:api.token", 'a'},
		{TENANCY_ADMIN, "e2b:unix", 'a'},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char tok[E2B_TOKEN_MAX];
		struct e2b_access a;

		ok(e2b_access_format(MAC, cases[i].role, cases[i].who, tok, sizeof(tok)) == 0 &&
			   tok[E2B_TOKEN_HEX] == '.' && tok[E2B_TOKEN_HEX + 1] == cases[i].letter,
		   "format %s as %c: %s", cases[i].who, cases[i].letter, tok);
		ok(e2b_access_parse(tok, &a) == 0 && a.role == cases[i].role &&
			   !strcmp(a.who, cases[i].who) && !strcmp(a.mac, MAC),
		   "parse gives back role, issuer and MAC of %s", cases[i].who);
	}
}

static void refusals(void)
{
	static const char *const bad[] = {
		"",
		MAC,			    /* the old bare-MAC form */
		MAC ".",		    /* no role, no issuer */
		MAC ".r",		    /* no issuer */
		MAC ".xtoken:ab12cd34ef56", /* unknown role letter */
		MAC "-rtoken:ab12cd34ef56", /* wrong separator */
		MAC ".rtoken:AB12",	    /* upper case in the issuer */
		MAC ".rtoken:ab 12",	    /* space */
		MAC ".rtoken:ab\n12",	    /* newline (header splitting) */
		MAC ".rtoken/ab12",	    /* slash */
		"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef.rtoken:x",
		"0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef.rtoken:x",
		"0123.rtoken:ab12cd34ef56", /* short MAC */
		MAC
		".r"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* long */
	};
	struct e2b_access a;
	char tok[E2B_TOKEN_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(e2b_access_parse(bad[i], &a) == -EINVAL, "refused: `%.80s`", bad[i]);
	ok(e2b_access_parse(NULL, &a) == -EINVAL, "refused: no header");
	ok(e2b_access_format("abc", TENANCY_USER, "token:x", tok, sizeof(tok)) == -EINVAL &&
		   tok[0] == '\0',
	   "format refuses a short MAC");
	ok(e2b_access_format(MAC, TENANCY_USER, "Token X", tok, sizeof(tok)) == -EINVAL,
	   "format refuses an issuer outside [a-z0-9:._-]");
	ok(e2b_access_format(MAC, TENANCY_USER, "token:x", tok, 40) == -ENOSPC && tok[0] == '\0',
	   "format into a short buffer is -ENOSPC and leaves \"\"");
}

int main(void)
{
	round_trips();
	refusals();
	return tap_done();
}
