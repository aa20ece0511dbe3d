/* SPDX-License-Identifier: Apache-2.0 */
/* cptar: tar streams for `isola cp` — safe local extraction and archiving with libarchive. */
#include "cptar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

/*
 * The archive comes from a sandbox through isolad: hostile. These flags defend against the
 * docker-cp class of escapes (CVE-2018-15664, CVE-2019-14271 style): no "..", no absolute
 * names, nothing written through a symlink planted by an earlier entry, existing files
 * replaced rather than written through, and no owner or setuid bits restored.
 */
#define CPTAR_EXTRACT_FLAGS                                                                        \
	(ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |                                  \
	 ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_SECURE_SYMLINKS |                \
	 ARCHIVE_EXTRACT_UNLINK)

static int copy_data(struct archive *in, struct archive *out)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;

	for (;;) {
		r = archive_read_data_block(in, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			return ARCHIVE_OK;
		if (r < ARCHIVE_WARN)
			return r;
		if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN)
			return ARCHIVE_FATAL;
	}
}

/* Rewrites an entry's name (and hardlink target) under dst; false if it must be refused. */
static bool map_entry(struct archive_entry *e, const char *dst, bool into_dir)
{
	char path[PATH_MAX];
	const char *link = archive_entry_hardlink(e);

	/* UNTRUSTED: names from the sandbox; cli_cp_map_entry refuses "/" and "..". */
	if (cli_cp_map_entry(archive_entry_pathname(e), dst, into_dir, path, sizeof(path)) < 0)
		return false;
	archive_entry_copy_pathname(e, path);
	if (link) {
		if (cli_cp_map_entry(link, dst, into_dir, path, sizeof(path)) < 0)
			return false;
		archive_entry_copy_hardlink(e, path);
	}
	return true;
}

int cptar_extract(int fd, const char *dst, bool into_dir, struct isola_err **err)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	int r, ret = 0;

	if (!in || !out) {
		ret = isola_err_set(err, ENOMEM, NULL, "out of memory");
		goto out;
	}
	archive_read_support_format_tar(in);
	archive_write_disk_set_options(out, CPTAR_EXTRACT_FLAGS);
	/* SECURE_NOABSOLUTEPATHS refuses the absolute names an absolute DST maps to: extract
	 * relative to / instead (the CLI exits after the copy, so its cwd is free to change). */
	if (dst[0] == '/') {
		if (chdir("/") < 0) {
			ret = isola_err_sys(err, errno, NULL, "chdir `/`");
			goto out;
		}
		while (dst[0] == '/')
			dst++;
		if (!dst[0])
			dst = ".";
	}
	if (archive_read_open_fd(in, fd, 65536) != ARCHIVE_OK) {
		ret = isola_err_set(err, EPROTO, "internal", "read archive: %s",
				    archive_error_string(in));
		goto out;
	}
	while ((r = archive_read_next_header(in, &e)) != ARCHIVE_EOF) {
		const char *name;
		mode_t type;

		if (r < ARCHIVE_WARN) {
			ret = isola_err_set(err, EPROTO, "internal", "read archive: %s",
					    archive_error_string(in));
			goto out;
		}
		name = archive_entry_pathname(e);
		type = archive_entry_filetype(e);
		if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
			fprintf(stderr, "isola: skipping `%s`: not a file, directory or symlink\n",
				name);
			continue;
		}
		if (!map_entry(e, dst, into_dir)) {
			ret = isola_err_set(err, EPERM, "forbidden",
					    "archive entry `%s` would land outside `%s`", name,
					    dst);
			goto out;
		}
		r = archive_write_header(out, e);
		if (r >= ARCHIVE_WARN && archive_entry_size(e) > 0)
			r = copy_data(in, out);
		if (r < ARCHIVE_WARN) {
			ret = isola_err_set(err, EIO, NULL, "extract `%s`: %s",
					    archive_entry_pathname(e), archive_error_string(out));
			goto out;
		}
	}
	if (archive_write_finish_entry(out) < ARCHIVE_WARN)
		ret = isola_err_set(err, EIO, NULL, "extract: %s", archive_error_string(out));
out:
	if (out) {
		archive_write_close(out);
		archive_write_free(out);
	}
	if (in)
		archive_read_free(in);
	return ret;
}

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
