/* SPDX-License-Identifier: Apache-2.0 */
/* test_spec: every route in server.c's table is in docs/openapi.yaml, and the other way round. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../tap.h"

#define MAX_ROUTES 128

struct route {
	char method[8];
	char path[160];
};

/* ROUTE("GET", "/v1/x", ...) lines between ROUTES-BEGIN and ROUTES-END. */
static int read_table(const char *file, struct route *out)
{
	FILE *f = fopen(file, "r");
	char line[512];
	int n = 0, in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *q1, *q2, *q3, *q4;

		if (strstr(line, "/* ROUTES-BEGIN */")) {
			in = 1;
			continue;
		}
		if (strstr(line, "/* ROUTES-END */"))
			break;
		if (!in || !strstr(line, "ROUTE") || n == MAX_ROUTES)
			continue;
		q1 = strchr(line, '"');
		q2 = q1 ? strchr(q1 + 1, '"') : NULL;
		q3 = q2 ? strchr(q2 + 1, '"') : NULL;
		q4 = q3 ? strchr(q3 + 1, '"') : NULL;
		if (!q4)
			continue;
		snprintf(out[n].method, sizeof(out[n].method), "%.*s", (int)(q2 - q1 - 1), q1 + 1);
		snprintf(out[n].path, sizeof(out[n].path), "%.*s", (int)(q4 - q3 - 1), q3 + 1);
		n++;
	}
	fclose(f);
	return n;
}

/* "  /v1/x:" path keys and "    get:" operation keys under `paths:`. */
static int read_spec(const char *file, struct route *out)
{
	FILE *f = fopen(file, "r");
	char line[512], cur[160] = "";
	int n = 0, in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		size_t len;

		line[strcspn(line, "\r\n")] = '\0';
		len = strlen(line);
		if (!strcmp(line, "paths:")) {
			in = 1;
			continue;
		}
		if (!in)
			continue;
		if (len && !isspace((unsigned char)line[0]))
			break; /* next top-level key */
		if (!strncmp(line, "  /", 3) && line[3 - 1] == '/' && line[len - 1] == ':') {
			snprintf(cur, sizeof(cur), "%.*s", (int)(len - 3), line + 2);
			continue;
		}
		if (!strncmp(line, "    ", 4) && line[4] != ' ' && n < MAX_ROUTES && cur[0]) {
			static const char *const ms[] = {"get", "post", "put", "delete", "patch"};

			for (size_t i = 0; i < 5; i++) {
				size_t ml = strlen(ms[i]);

				if (!strncmp(line + 4, ms[i], ml) && line[4 + ml] == ':') {
					for (size_t k = 0; k < ml; k++)
						out[n].method[k] = (char)toupper(ms[i][k]);
					out[n].method[ml] = '\0';
					snprintf(out[n].path, sizeof(out[n].path), "%s", cur);
					n++;
				}
			}
		}
	}
	fclose(f);
	return n;
}

static int find(const struct route *set, int n, const struct route *r)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(set[i].method, r->method) && !strcmp(set[i].path, r->path))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct route table[MAX_ROUTES], spec[MAX_ROUTES];
	int nt, ns;

	if (argc < 3) {
		printf("1..0 # SKIP usage: test_spec server.c openapi.yaml\n");
		return 0;
	}
	nt = read_table(argv[1], table);
	ns = read_spec(argv[2], spec);
	ok(nt > 20, "routing table parsed (%d routes)", nt);
	ok(ns > 20, "openapi paths parsed (%d operations)", ns);
	for (int i = 0; i < nt; i++)
		ok(find(spec, ns, &table[i]), "%s %s is in openapi.yaml", table[i].method,
		   table[i].path);
	for (int i = 0; i < ns; i++)
		ok(find(table, nt, &spec[i]), "%s %s is in the routing table", spec[i].method,
		   spec[i].path);
	return tap_done();
}
