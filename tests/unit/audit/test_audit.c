/* SPDX-License-Identifier: Apache-2.0 */
/* test_audit: chain, seals, tamper detection (edit, delete, reorder, rewrite, tail cut), retention. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common/util.h"
#include "isolad/audit/audit.h"

static char dir[64];

static bool verify_ok(struct audit *a, const char *expect_problem)
{
	json_t *rep = NULL, *p;
	bool ok, found = expect_problem == NULL;
	size_t i;

	if (audit_verify(a, &rep, NULL) < 0)
		return false;
	ok = json_is_true(json_object_get(rep, "ok"));
	json_array_foreach(json_object_get(rep, "problems"), i, p)
	{
		const char *msg = json_string_value(json_object_get(p, "problem"));

		if (expect_problem && msg && strstr(msg, expect_problem))
			found = true;
	}
	if (!found) {
		char *s = json_dumps(rep, 0);

		printf("# report: %s\n", s);
		free(s);
	}
	json_decref(rep);
	return expect_problem ? (!ok && found) : ok;
}

static char *slurp(const char *path)
{
	char *t = NULL;

	util_read_file(path, 1 << 20, &t, NULL);
	return t;
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

/* Returns a copy of text with lines i and j swapped (0-based). */
static char *swap_lines(const char *text, int i, int j)
{
	char *lines[64], *copy = strdup(text), *save = NULL, *out;
	int n = 0;
	size_t len = strlen(text) + 2;

	for (char *l = strtok_r(copy, "\n", &save); l && n < 64; l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	out = calloc(1, len);
	for (int k = 0; k < n; k++) {
		strcat(out, lines[k == i ? j : k == j ? i : k]);
		strcat(out, "\n");
	}
	free(copy);
	return out;
}

int main(void)
{
	struct audit_config cfg = {.segment_records = 5};
	struct audit *a = NULL;
	char seg1[700], seg3[700], *orig, *t;
	json_t *d = json_pack("{s:[s,s], s:i}", "argv", "echo", "hi", "exit_code", 0);

	snprintf(dir, sizeof(dir), "/tmp/isola-audit-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(cfg.dir, sizeof(cfg.dir), "%s/audit", dir);
	snprintf(cfg.key_path, sizeof(cfg.key_path), "%s/audit.key", dir);
	ok(audit_open(&cfg, &a, NULL) == 0, "open creates dir and key");
	for (int i = 0; i < 12; i++)
		audit_append(a, "token:x", "acme", "POST /v1/sandboxes", "sb1", "ok",
			     i == 3 ? d : NULL);
	ok(verify_ok(a, NULL), "12 records over 3 segments verify");
	snprintf(seg1, sizeof(seg1), "%s/00000001.log", cfg.dir);
	snprintf(seg3, sizeof(seg3), "%s/00000003.log", cfg.dir);
	ok(access(seg1, F_OK) == 0 && access(seg3, F_OK) == 0, "segments 1 and 3 exist");

	orig = slurp(seg1);
	/* Edited: change the target of record 2. */
	t = strdup(orig);
	*strstr(strstr(t, "\"seq\":2"), "sb1") = 'X';
	spit(seg1, t);
	free(t);
	ok(verify_ok(a, "was edited"), "an edited record is detected");
	/* Deleted: drop record 3. */
	{
		char *l3 = strstr(orig, "{\"seq\":3"), *l4 = strstr(orig, "{\"seq\":4");

		t = calloc(1, strlen(orig) + 1);
		memcpy(t, orig, (size_t)(l3 - orig));
		strcat(t, l4);
		spit(seg1, t);
		free(t);
		ok(verify_ok(a, "deleted"), "a deleted record is detected");
	}
	/* Reordered: swap records 2 and 3. */
	t = swap_lines(orig, 1, 2);
	spit(seg1, t);
	free(t);
	ok(verify_ok(a, "reordered"), "reordered records are detected");
	spit(seg1, orig);
	ok(verify_ok(a, NULL), "restored segment verifies");

	/* Rewritten without the key: drop the last record of a sealed segment; the chain
	 * inside stays consistent, only the seal can tell. */
	{
		char *last = strstr(orig, "{\"seq\":5");

		t = strndup(orig, (size_t)(last - orig));
		spit(seg1, t);
		free(t);
		ok(verify_ok(a, "no longer matches its seal"),
		   "a cut sealed segment is detected by its seal");
		spit(seg1, orig);
	}
	/* The active segment's tail cut: only the in-memory head can tell. */
	{
		char *s3 = slurp(seg3), *last = strrchr(s3, '{');

		*last = '\0';
		spit(seg3, s3);
		ok(verify_ok(a, "ends at record"),
		   "records cut from the active segment are detected");
		free(s3);
	}
	audit_close(a);
	a = NULL;
	ok(audit_open(&cfg, &a, NULL) == 0, "reopen after tampering");
	ok(!verify_ok(a, NULL), "still reported after a restart");
	audit_close(a);
	util_rm_rf(cfg.dir);

	/* Retention: whole sealed segments only. */
	ok(audit_open(&cfg, &a, NULL) == 0, "fresh trail");
	for (int i = 0; i < 12; i++)
		audit_append(a, "u", "t", "act", "", "ok", NULL);
	sleep(2);
	audit_append(a, "u", "t", "act", "", "ok", NULL); /* record 13: active segment 3 */
	{
		json_t *out = NULL;

		ok(audit_prune(a, 1, &out, NULL) == 0 &&
			   json_array_size(json_object_get(out, "removed")) == 2,
		   "retention removes the two old sealed segments");
		json_decref(out);
	}
	ok(access(seg1, F_OK) < 0 && access(seg3, F_OK) == 0,
	   "segment 1 gone, active segment kept");
	ok(verify_ok(a, NULL), "the trail verifies from the new anchor");
	audit_close(a);
	ok(audit_open(&cfg, &a, NULL) == 0 && verify_ok(a, NULL), "and after a restart");
	{
		char ap[700];

		snprintf(ap, sizeof(ap), "%s/anchor.json", cfg.dir);
		t = slurp(ap);
		t[strlen(t) / 2] ^= 1;
		spit(ap, t);
		free(t);
		ok(verify_ok(a, "anchor.json is not authentic"), "an edited anchor is detected");
	}
	audit_close(a);
	json_decref(d);
	free(orig);
	util_rm_rf(dir);
	return tap_done();
}
