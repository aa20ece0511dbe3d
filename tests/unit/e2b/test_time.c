/* SPDX-License-Identifier: Apache-2.0 */
/* test_time: RFC 3339 times of the E2B adapter (src/isolad/e2b/connect.c): format, parse, refusals. */
#include <errno.h>
#include <string.h>

#include "isolad/e2b/e2b-internal.h"
#include "../tap.h"

static void parses(void)
{
	static const struct {
		const char *text;
		double want;
	} cases[] = {
		{"2026-12-01T22:00:00Z", 1796162400.0},
		{"2026-12-01T22:00:00.250Z", 1796162400.25},
		{"2026-12-01T23:30:00+01:30", 1796162400.0},
		{"2026-12-01T20:00:00-02:00", 1796162400.0},
		{"1970-01-01T00:00:00z", 0.0},
	};
	double v;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(e2b_parse_rfc3339(cases[i].text, &v) == 0 && v == cases[i].want, "parses `%s`",
		   cases[i].text);
}

static void round_trip(void)
{
	char buf[40];
	double v = 0;

	e2b_rfc3339(1796162400.125, buf, sizeof(buf));
	ok(!strcmp(buf, "2026-12-01T22:00:00.125Z"), "formats with milliseconds: %s", buf);
	ok(e2b_parse_rfc3339(buf, &v) == 0 && v == 1796162400.125, "what it formats parses back");
}

static void refusals(void)
{
	static const char *const bad[] = {
		"",
		"2026-12-01",
		"2026-12-01T22:00:00",	    /* no zone */
		"2026-12-01T22:00:00.Z",    /* empty fraction */
		"2026-13-01T22:00:00Z",	    /* month */
		"2026-12-01T24:00:00Z",	    /* hour */
		"2026-12-01T22:00:00+1:00", /* short offset */
		"2026-12-01T22:00:00Zjunk", /* trailing */
		"20261201T220000Z",	    /* basic format */
		"1796162400",		    /* unix seconds */
	};
	double v;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(e2b_parse_rfc3339(bad[i], &v) == -EINVAL, "refused: `%s`", bad[i]);
	ok(e2b_parse_rfc3339(NULL, &v) == -EINVAL, "refused: NULL");
}

int main(void)
{
	parses();
	round_trip();
	refusals();
	return tap_done();
}
