/* SPDX-License-Identifier: Apache-2.0 */
/* test_audit: chain, seals, tamper detection (edit, delete, reorder, rewrite, tail cut), retention,
 * failed appends stated as audit.gap records. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

/* The gaps verify reports: their count, and the `lost` of the last one (0 if none). */
static size_t gaps(struct audit *a, json_int_t *last_lost, char *reason, size_t n)
{
	json_t *rep = NULL, *g;
	size_t k = 0;

	*last_lost = 0;
	if (audit_verify(a, &rep, NULL) < 0 || !json_is_true(json_object_get(rep, "ok")))
		goto out;
	k = json_array_size(json_object_get(rep, "gaps"));
	g = json_array_get(json_object_get(rep, "gaps"), k ? k - 1 : 0);
	*last_lost = json_integer_value(json_object_get(g, "lost"));
	snprintf(reason, n, "%s", json_string_value(json_object_get(g, "reason")) ?: "");
out:
	json_decref(rep);
	return k;
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Appends fail the way a full disk fails them: RLIMIT_FSIZE lets `slack` more bytes into
 * the segment (a torn line) and then refuses (EFBIG; SIGXFSZ ignored). */
static void limit_file_size(off_t size)
{
	struct rlimit rl = {.rlim_cur = size < 0 ? RLIM_INFINITY : (rlim_t)size,
			    .rlim_max = RLIM_INFINITY};

	setrlimit(RLIMIT_FSIZE, &rl);
}

static void test_gaps(struct audit_config cfg)
{
	struct audit *a = NULL;
	char seg[700], reason[200];
	json_int_t lost;
	off_t before;
	int fails = 0;

	util_rm_rf(cfg.dir);
	cfg.segment_records = 100;
	signal(SIGXFSZ, SIG_IGN);
	ok(audit_open(&cfg, &a, NULL) == 0, "gaps: fresh trail");
	for (int i = 0; i < 8; i++)
		audit_append(a, "u", "t", "act", "", "ok", NULL);
	snprintf(seg, sizeof(seg), "%s/00000001.log", cfg.dir);
	before = file_size(seg);
	limit_file_size(before + 10);
	for (int i = 0; i < 3; i++)
		fails += audit_append(a, "u", "t", "lost", "", "ok", NULL) < 0;
	limit_file_size(-1);
	ok(fails == 3, "appends past the limit fail");
	ok(file_size(seg) == before, "a failed append is cut back: no torn line in the segment");
	ok(audit_append(a, "u", "t", "act", "", "ok", NULL) == 0, "an append succeeds again");
	ok(gaps(a, &lost, reason, sizeof(reason)) == 1 && lost == 3 &&
		   strstr(reason, "File too large"),
	   "the trail verifies and states the gap: 3 lost (%s)", reason);

	/* A gap pending when isolad stops is stated after the next start. */
	limit_file_size(file_size(seg) + 10);
	audit_append(a, "u", "t", "lost", "", "ok", NULL);
	audit_append(a, "u", "t", "lost", "", "ok", NULL);
	limit_file_size(-1);
	audit_close(a);
	a = NULL;
	ok(audit_open(&cfg, &a, NULL) == 0, "reopen with a pending gap");
	audit_append(a, "u", "t", "act", "", "ok", NULL);
	ok(gaps(a, &lost, reason, sizeof(reason)) == 2 && lost == 2,
	   "the gap pending at the stop is stated after the restart");
	audit_close(a);

	/* A torn last line (a crash mid-write) is cut at start and stated as a gap. */
	{
		FILE *f;
		char seg2[700];

		snprintf(seg2, sizeof(seg2), "%s/00000002.log", cfg.dir);
		f = fopen(seg2, "a");
		fputs("{\"seq\":99,\"time\":\"2026", f);
		fclose(f);
	}
	a = NULL;
	ok(audit_open(&cfg, &a, NULL) == 0, "reopen after a torn write");
	audit_append(a, "u", "t", "act", "", "ok", NULL);
	ok(gaps(a, &lost, reason, sizeof(reason)) == 3 && lost == 1 && strstr(reason, "cut short"),
	   "the torn record is cut off and stated: %s", reason);
	audit_close(a);
	util_rm_rf(cfg.dir);
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
	test_gaps(cfg);
	json_decref(d);
	free(orig);
	util_rm_rf(dir);
	return tap_done();
}
