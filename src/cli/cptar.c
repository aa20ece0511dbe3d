/* SPDX-License-Identifier: Apache-2.0 */
/* cptar: tar streams for `isola cp` uploads — archiving a local tree with libarchive. */
#include "cptar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

static int write_entry_data(struct archive *disk, struct archive *out)
{
	char buf[65536];
	la_ssize_t n;

	while ((n = archive_read_data(disk, buf, sizeof(buf))) > 0)
		if (archive_write_data(out, buf, (size_t)n) < 0)
			return ARCHIVE_FATAL;
	return n < 0 ? ARCHIVE_FATAL : ARCHIVE_OK;
}

int cptar_create(const char *src, const char *name, int fd, struct isola_err **err)
{
	struct archive *disk = archive_read_disk_new(), *out = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	char root[PATH_MAX];
	size_t rootlen;
	int r, ret = 0;

	if (!disk || !out || !e) {
		ret = isola_err_set(err, ENOMEM, NULL, "out of memory");
		goto out;
	}
	rootlen = strlen(src);
	while (rootlen > 1 && src[rootlen - 1] == '/')
		rootlen--;
	if (rootlen >= sizeof(root)) {
		ret = isola_err_set(err, ENAMETOOLONG, "invalid", "`%s`: path too long", src);
		goto out;
	}
	memcpy(root, src, rootlen);
	root[rootlen] = '\0';
	archive_read_disk_set_symlink_physical(disk);
	archive_read_disk_set_standard_lookup(disk);
	archive_write_set_format_pax_restricted(out);
	archive_write_set_bytes_in_last_block(out, 1);
	if (archive_write_open_fd(out, fd) != ARCHIVE_OK ||
	    archive_read_disk_open(disk, root) != ARCHIVE_OK) {
		ret = isola_err_set(err, EIO, NULL, "archive `%s`: %s", src,
				    archive_error_string(disk));
		goto out;
	}
	for (;;) {
		char path[PATH_MAX];
		const char *p;

		archive_entry_clear(e);
		r = archive_read_next_header2(disk, e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			ret = isola_err_set(err, EIO, NULL, "archive `%s`: %s", src,
					    archive_error_string(disk));
			goto out;
		}
		archive_read_disk_descend(disk);
		p = archive_entry_pathname(e);
		if (strncmp(p, root, rootlen) || (p[rootlen] && p[rootlen] != '/'))
			continue; /* not below src: cannot happen with a physical walk */
		if (snprintf(path, sizeof(path), "%s%s", name, p + rootlen) >= (int)sizeof(path)) {
			ret = isola_err_set(err, ENAMETOOLONG, "invalid", "`%s`: path too long", p);
			goto out;
		}
		archive_entry_copy_pathname(e, path);
		r = archive_write_header(out, e);
		if (r >= ARCHIVE_WARN && archive_entry_filetype(e) == AE_IFREG &&
		    archive_entry_size(e) > 0)
			r = write_entry_data(disk, out);
		if (r < ARCHIVE_WARN) {
			ret = isola_err_set(err, EIO, NULL, "archive `%s`: %s", p,
					    archive_error_string(out));
			goto out;
		}
	}
	if (archive_write_close(out) != ARCHIVE_OK)
		ret = isola_err_set(err, EIO, NULL, "archive `%s`: %s", src,
				    archive_error_string(out));
out:
	archive_entry_free(e);
	if (disk)
		archive_read_free(disk);
	if (out)
		archive_write_free(out);
	return ret;
}
