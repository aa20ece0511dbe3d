/* SPDX-License-Identifier: Apache-2.0 */
/* filetype: tells what a file given to `template import` is before it is uploaded. */
#include "filetype.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Magic numbers of what people mistake for an image tarball. */
static const struct {
	const char *magic; /* leading bytes */
	size_t len;	   /* of magic */
	const char *what;  /* for the message */
} magics[] = {
	{"\x89PNG\r\n\x1a\n", 8, "a PNG image"},
	{"\xff\xd8\xff", 3, "a JPEG image"},
	{"GIF8", 4, "a GIF image"},
	{"%PDF", 4, "a PDF document"},
	{"PK\x03\x04", 4, "a ZIP archive"},
	{"\x7f"
	 "ELF",
	 4, "an ELF executable"},
	{"\x1f\x8b", 2, "gzip data that is not a tar"},
	{"\x28\xb5\x2f\xfd", 4, "zstd data that is not a tar"},
	{"\xfd"
	 "7zXZ",
	 5, "xz data that is not a tar"},
	{"BZh", 3, "bzip2 data that is not a tar"},
	{"7z\xbc\xaf\x27\x1c", 6, "a 7-Zip archive"},
	{"QFI\xfb", 4, "a qcow2 disk image"},
	{"SQLite format 3", 15, "an SQLite database"},
	{"!<arch>\n", 8, "an ar archive (a .deb?)"},
	{"\xed\xab\xee\xdb", 4, "an RPM package"},
};

const char *cli_filetype_describe(const unsigned char *buf, size_t n)
{
	bool text = n > 0;

	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if (n >= magics[i].len && !memcmp(buf, magics[i].magic, magics[i].len))
			return magics[i].what;
	if (n == 0)
		return "an empty file";
	if (n > 1080 + 2 && buf[1080] == 0x53 && buf[1081] == 0xef)
		return "an ext2/3/4 filesystem image";
	for (size_t i = 0; i < n && text; i++)
		text = buf[i] >= 0x20 || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t' ||
		       buf[i] >= 0x80;
	if (text)
		return buf[0] == '{' || buf[0] == '[' ? "JSON or text" : "text";
	return "data of an unknown kind";
}

static bool dir_has(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

enum cli_import_kind cli_import_classify(const char *path, char *what, size_t what_size)
{
	unsigned char head[2048];
	struct archive *a;
	struct archive_entry *e;
	struct stat st;
	ssize_t n;
	int fd, h;

	if (stat(path, &st) < 0) {
		snprintf(what, what_size, "%s", strerror(errno));
		return CLI_IMPORT_NOT_TAR;
	}
	if (S_ISDIR(st.st_mode))
		return dir_has(path, "oci-layout") && dir_has(path, "index.json")
			       ? CLI_IMPORT_OCI_DIR
			       : CLI_IMPORT_OTHER_DIR;
	a = archive_read_new();
	if (!a) {
		snprintf(what, what_size, "out of memory");
		return CLI_IMPORT_NOT_TAR;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	h = archive_read_open_filename(a, path, 64 * 1024) == ARCHIVE_OK
		    ? archive_read_next_header(a, &e)
		    : ARCHIVE_FATAL;
	archive_read_free(a);
	if (h == ARCHIVE_OK || h == ARCHIVE_WARN)
		return CLI_IMPORT_TAR;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, head, sizeof(head));
	if (fd >= 0)
		close(fd);
	if (n < 0)
		snprintf(what, what_size, "%s", strerror(errno));
	else
		snprintf(what, what_size, "%s", cli_filetype_describe(head, (size_t)n));
	return CLI_IMPORT_NOT_TAR;
}
