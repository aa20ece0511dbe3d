/* SPDX-License-Identifier: Apache-2.0 */
/* test_build_cache: template build's cache listing and pruning (src/isolad/core/build-cache.c):
 * per-tenant views, --older-than by last use, records removed with their layers, crash debris
 * (TAP). */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "isolad/core/core.h"
#include "isolad/images/images.h"
#include "../tap.h"

static char dir[PATH_MAX];

static void put(const char *name, const char *text, double age_s)
{
	char p[PATH_MAX + 80];
	struct timespec ts[2];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	util_write_file_atomic(p, text, strlen(text), 0600);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= (time_t)age_s;
	ts[1] = ts[0];
	utimensat(AT_FDCWD, p, ts, 0);
}

static bool exists(const char *name)
{
	char p[PATH_MAX + 80];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* The keys of a list of entries, sorted, joined by spaces (first 2 hex digits each). */
static const char *keys(const json_t *list, const char *member)
{
	static char out[256];
	const json_t *e;
	size_t i;

	out[0] = '\0';
	json_array_foreach(list, i, e)
	{
		const char *k = json_string_value(member ? json_object_get(e, member) : e);

		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%.2s", i ? " " : "",
			 k ? k : "?");
	}
	return out;
}

#define K(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c /* 64 hex */

int main(void)
{
	char state[] = "/tmp/isola-test-build-cache-XXXXXX";
	struct isola_err *e = NULL;
	json_t *out = NULL;
	double day = 86400;

	if (!mkdtemp(state) || images_init(state, &e) < 0 || images_build_cache_dir(dir, &e) < 0) {
		printf("Bail out! init: %s\n", e ? e->message : "mkdtemp");
		return 1;
	}
	/* a: tenant ta, unused for 10 days; b: tenant tb, used now; c: no record (made before
	 * records), 10 days; junk that is no entry; a crashed build's debris, old and fresh. */
	put(K("aa") ".tar", "layer a", 10 * day);
	put(K("aa") ".json", "{\"tenant\":\"ta\",\"instruction\":\"COPY a /a\",\"template\":\"x\"}",
	    0);
	put(K("bb") ".tar.zst", "layer b", 0);
	put(K("bb") ".json", "{\"tenant\":\"tb\",\"instruction\":\"RUN b\",\"template\":\"y\"}", 0);
	put(K("cc") ".tar", "layer c", 10 * day);
	put("notakey.tar", "junk", 10 * day);
	put(".tmp-old", "debris", 3 * 3600);
	put(".tmp-new", "in progress", 0);
	put(K("dd") ".json", "{\"tenant\":\"ta\"}", 3 * 3600); /* its layer never arrived */
	put(K("ee") ".json", "{\"tenant\":\"ta\"}", 0);	       /* its layer is on its way */

	ok(core_build_cache_list_for(NULL, NULL, &out, &e) == 0 &&
		   !strcmp(keys(out, "key"), "aa bb cc"),
	   "the operator's view: every entry, junk left out (%s)", keys(out, "key"));
	ok(json_is_null(json_object_get(json_array_get(out, 2), "tenant")),
	   "an entry without its record has no tenant");
	ok(!strcmp(json_string_value(json_object_get(json_array_get(out, 1), "kind")), "run") &&
		   !strcmp(json_string_value(
				   json_object_get(json_array_get(out, 1), "instruction")),
			   "RUN b"),
	   "kind and instruction from the name and the record");
	json_decref(out);
	ok(core_build_cache_list_for(NULL, "ta", &out, &e) == 0 && !strcmp(keys(out, "key"), "aa"),
	   "a tenant sees only its own entries (%s)", keys(out, "key"));
	json_decref(out);

	ok(core_build_cache_prune_for(NULL, "tb", false, day, &out, &e) == 0 &&
		   json_array_size(json_object_get(out, "removed")) == 0,
	   "--older-than 1d keeps an entry used now");
	json_decref(out);
	ok(core_build_cache_prune_for(NULL, "tb", true, 0, &out, &e) == 0 &&
		   json_array_size(json_object_get(out, "removed")) == 1 &&
		   exists(K("aa") ".tar") && exists(K("cc") ".tar") &&
		   !exists(K("bb") ".tar.zst") && !exists(K("bb") ".json"),
	   "a tenant's --all removes its entry and record, nobody else's");
	json_decref(out);
	ok(exists(".tmp-old"), "a tenant's prune leaves crash debris to the operator");
	ok(core_build_cache_prune_for(NULL, NULL, false, day, &out, &e) == 0 &&
		   !strcmp(keys(json_object_get(out, "removed"), NULL), "aa cc") &&
		   json_integer_value(json_object_get(out, "freed_bytes")) > 0,
	   "the operator's --older-than 1d removes the old entries of every tenant (%s)",
	   keys(json_object_get(out, "removed"), NULL));
	json_decref(out);
	ok(!exists(K("aa") ".json") && exists("notakey.tar"), "records go with them, junk stays");
	ok(!exists(".tmp-old") && exists(".tmp-new"),
	   "debris older than a RUN may take is removed, a fresh one (a build running) kept");
	ok(!exists(K("dd") ".json") && exists(K("ee") ".json"),
	   "an old record without its layer is removed, a fresh one kept");
	ok(core_build_cache_list_for(NULL, NULL, &out, &e) == 0 && json_array_size(out) == 0,
	   "nothing left to list");
	json_decref(out);

	images_shutdown();
	util_rm_rf(state);
	return tap_done();
}
