/* SPDX-License-Identifier: Apache-2.0 */
/* test_fsdiff: TAP tests for the agent's fs_mark/fs_diff logic on a real directory tree. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/fsdiff.h"
#include "../tap.h"

static char root[] = "/tmp/isola-fsdiff-XXXXXX";

/* Runs cmd in the test root. */
static void sh(const char *cmd)
{
	char full[1024];

	snprintf(full, sizeof(full), "cd %s && %s", root, cmd);
	if (system(full) != 0)
		fprintf(stderr, "# command failed: %s\n", full);
}

/* The names a diff yields, in order, joined by '\n'; whiteouts as "name (wh)". */
static int diff_names(struct fsdiff *m, char *out, size_t n)
{
	struct fsdiff_walk *w;
	struct fsdiff_item it;
	size_t at = 0;
	int r;

	out[0] = '\0';
	r = fsdiff_walk_new(m, &w);
	if (r < 0)
		return r;
	while ((r = fsdiff_walk_next(w, &it)) > 0)
		at += (size_t)snprintf(out + at, n - at, "%s%s\n", it.name,
				       it.whiteout ? " (wh)" : "");
	fsdiff_walk_free(w);
	return r;
}

/* Position of line `name` in the list, -1 if absent. */
static int pos(const char *list, const char *name)
{
	size_t l = strlen(name);
	int i = 0;

	for (const char *p = list; *p; i++) {
		const char *nl = strchr(p, '\n');

		if ((size_t)(nl - p) == l && !strncmp(p, name, l))
			return i;
		p = nl + 1;
	}
	return -1;
}

int main(void)
{
	static char list[1 << 16];
	struct fsdiff *m = NULL;
	int r;

	if (!mkdtemp(root))
		return 1;
	sh("mkdir -p a b/sub d deep/e/f && echo k > a/keep.txt && echo g > a/gone.txt"
	   " && echo x > b/x && echo y > b/sub/y && echo c > c && echo o > d/old"
	   " && echo g > deep/e/f/g.txt && ln -s a/keep.txt link && mkfifo fifo");
	r = fsdiff_mark(root, 0, 0, &m);
	ok(r == 0 && fsdiff_count(m) == 15, "mark: 7 dirs, 7 files and a link, no fifo (%zu)",
	   fsdiff_count(m));
	ok(diff_names(m, list, sizeof(list)) == 0 && list[0] == '\0',
	   "diff: nothing changed, nothing yielded");

	/* d is replaced by a directory made while it still existed (another inode: a new
	 * directory made after the rm may reuse the freed one, which is then a changed
	 * directory whose removed entries get whiteouts; correct too, but not this case) */
	sh("echo new > a/new.txt && rm a/gone.txt && rm -r b && chmod 600 c"
	   " && mkdir d2 && echo f > d2/fresh && rm -r d && mv d2 d && echo longer > deep/e/f/g.txt"
	   " && rm fifo && mkfifo fifo2");
	ok(diff_names(m, list, sizeof(list)) == 0, "diff after changes");
	ok(pos(list, "a") >= 0 && pos(list, "a/new.txt") > pos(list, "a"),
	   "a new file and its changed parent, parent first");
	ok(pos(list, "a/keep.txt") < 0 && pos(list, "link") < 0, "unchanged entries left out");
	ok(pos(list, "a/.wh.gone.txt (wh)") >= 0, "a removed file: its whiteout");
	ok(pos(list, ".wh.b (wh)") >= 0 && pos(list, "b/.wh.x (wh)") < 0 &&
		   pos(list, "b/sub/.wh.y (wh)") < 0 && pos(list, "b/.wh.sub (wh)") < 0,
	   "a removed subtree: one whiteout at its top");
	ok(pos(list, "c") >= 0, "a metadata-only change (chmod) is a change");
	ok(pos(list, "d") >= 0 && pos(list, "d/.wh..wh..opq (wh)") == pos(list, "d") + 1 &&
		   pos(list, "d/fresh") > pos(list, "d") + 1 && pos(list, "d/.wh.old (wh)") < 0,
	   "a replaced directory: the entry, its opaque marker, then its content");
	ok(pos(list, "deep") >= 0 && pos(list, "deep/e") == pos(list, "deep") + 1 &&
		   pos(list, "deep/e/f") == pos(list, "deep") + 2 &&
		   pos(list, "deep/e/f/g.txt") == pos(list, "deep") + 3,
	   "a changed file deep down: its unchanged parents first, in order");
	ok(pos(list, "fifo2") < 0 && pos(list, ".wh.fifo (wh)") < 0,
	   "fifos are neither recorded nor yielded");
	fsdiff_free(m);

	m = NULL;
	ok(fsdiff_mark(root, 3, 0, &m) == -E2BIG && !m, "mark: refused past max_entries");
	ok(fsdiff_mark(root, 0, 4096, &m) == -E2BIG && !m, "mark: refused past max_bytes");
	ok(fsdiff_mark("/nonexistent-isola", 0, 0, &m) == -ENOENT, "mark: a missing root");
	sh("cd / && rm -rf -- \"$OLDPWD\"");
	return tap_done();
}
