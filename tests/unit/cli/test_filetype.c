/* SPDX-License-Identifier: Apache-2.0 */
/* test_filetype: what `template import` tells apart before an upload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filetype.h"
#include "../tap.h"

static enum cli_import_kind classify_bytes(const char *dir, const char *name, const void *buf,
					   size_t n, char *what, size_t wsz)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f) {
		fwrite(buf, 1, n, f);
		fclose(f);
	}
	return cli_import_classify(path, what, wsz);
}

int main(void)
{
	char dir[] = "/tmp/isola-filetype-XXXXXX", what[128], path[600], cmd[1400];
	static const unsigned char png[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2};
	static const unsigned char elf[8] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
	static const unsigned char gz[8] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0};

	if (!mkdtemp(dir))
		return 1;
	ok(!strcmp(cli_filetype_describe(png, sizeof(png)), "a PNG image"), "PNG named");
	ok(!strcmp(cli_filetype_describe(elf, sizeof(elf)), "an ELF executable"), "ELF named");
	ok(!strcmp(cli_filetype_describe((const unsigned char *)"{\"a\":1}\n", 8), "JSON or text"),
	   "JSON named");
	ok(!strcmp(cli_filetype_describe(NULL, 0), "an empty file"), "empty named");

	ok(classify_bytes(dir, "x.png", png, sizeof(png), what, sizeof(what)) ==
			   CLI_IMPORT_NOT_TAR &&
		   !strcmp(what, "a PNG image"),
	   "a PNG file is no tar (%s)", what);
	ok(classify_bytes(dir, "x.gz", gz, sizeof(gz), what, sizeof(what)) == CLI_IMPORT_NOT_TAR,
	   "broken gzip is no tar (%s)", what);
	/* a real tar, and the same compressed with gzip and zstd */
	snprintf(path, sizeof(path), "%s/in", dir);
	mkdir(path, 0755);
	snprintf(cmd, sizeof(cmd),
		 "echo hi > %s/in/f && tar -C %s/in -cf %s/r.tar . && gzip -k %s/r.tar && "
		 "zstd -q %s/r.tar -o %s/r.tar.zst",
		 dir, dir, dir, dir, dir, dir);
	if (system(cmd) == 0) {
		static const char *const names[] = {"r.tar", "r.tar.gz", "r.tar.zst"};

		for (int i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			ok(cli_import_classify(path, what, sizeof(what)) == CLI_IMPORT_TAR,
			   "%s is a tar", names[i]);
		}
	} else {
		ok(0, "make test tarballs");
	}
	snprintf(path, sizeof(path), "%s/in", dir);
	ok(cli_import_classify(path, what, sizeof(what)) == CLI_IMPORT_OTHER_DIR,
	   "a plain directory is no OCI layout");
	snprintf(cmd, sizeof(cmd), "touch %s/in/oci-layout %s/in/index.json", dir, dir);
	ok(system(cmd) == 0 && cli_import_classify(path, what, sizeof(what)) == CLI_IMPORT_OCI_DIR,
	   "oci-layout + index.json make an OCI layout directory");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return tap_done();
}
