/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_cpextract: libFuzzer target for `isola cp`'s download extraction (cli/cpextract.c). */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cpextract.h"
#include "common/err.h"
#include "common/util.h"

/*
 * Each input is the archive a hostile daemon sends; it is extracted into box/dst (an existing
 * directory holding a canary) and committed when the extraction succeeds. Afterwards the box
 * must hold exactly dst/canary with its bytes and outside/canary with its bytes, plus
 * whatever the archive put under dst/<top> (removed here): anything else — a changed canary,
 * a new name beside dst or in outside, a temporary directory left — is an escape or a leak
 * and aborts.
 */

#define CANARY "canary bytes\n"

static char box[] = "/tmp/isola-fuzz-cpextract-XXXXXX";
static char dst[128], outside[128];

static void check_canary(const char *dir)
{
	char p[256], b[64] = "";
	int fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/canary", dir);
	fd = open(p, O_RDONLY | O_NOFOLLOW);
	n = fd < 0 ? -1 : read(fd, b, sizeof(b) - 1);
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)strlen(CANARY) || memcmp(b, CANARY, (size_t)n))
		abort(); /* written through a link, or replaced */
}

static void plant(const char *dir)
{
	char p[256];
	int fd;

	mkdir(dir, 0755);
	snprintf(p, sizeof(p), "%s/canary", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || util_write_all(fd, CANARY, strlen(CANARY)) < 0)
		abort();
	close(fd);
}

/* libFuzzer ends a timed run with exit(): the scratch box goes with it (an abort keeps it
 * for the post-mortem). */
static void remove_box(void)
{
	util_rm_rf(box);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!mkdtemp(box))
		abort();
	atexit(remove_box);
	snprintf(dst, sizeof(dst), "%s/dst", box);
	snprintf(outside, sizeof(outside), "%s/outside", box);
	plant(dst);
	plant(outside);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct isola_err *err = NULL;
	struct cptar_out *x = NULL;
	int fd = memfd_create("in", MFD_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd < 0 || util_write_all(fd, data, size) < 0)
		abort();
	lseek(fd, 0, SEEK_SET);
	if (cptar_out_new(dst, true, &x, &err) == 0 && cptar_extract(x, fd, &err) == 0)
		cptar_commit(x, &err);
	cptar_out_free(x);
	isola_err_free(err);
	close(fd);
	check_canary(dst);
	check_canary(outside);
	/* Only dst and outside in the box, only the canary in outside; dst's extra entries
	 * came from the archive (one top entry) and are removed for the next run. */
	d = opendir(box);
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "dst") && strcmp(de->d_name, "outside"))
			abort();
	closedir(d);
	d = opendir(outside);
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "canary"))
			abort();
	closedir(d);
	d = opendir(dst);
	while (d && (de = readdir(d))) {
		if (!strncmp(de->d_name, ".isola-cp-", 10))
			abort(); /* temporary directory leaked */
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "canary"))
			util_rm_rf_at(dirfd(d), de->d_name);
	}
	closedir(d);
	return 0;
}
