/* SPDX-License-Identifier: Apache-2.0 */
/* agenttar: turns an agent's entry stream (tar_get, fs_diff) into a tar with libarchive. */
#include "agenttar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../common/log.h"
#include "../../proto/proto.h"

static int64_t jint(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* Writes one tar header from an agent ENTRY. UNTRUSTED: the agent's JSON. */
static int entry(struct agent_tar *t, const json_t *j)
{
	json_t *nv = json_object_get(j, "name");
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *target = json_string_value(json_object_get(j, "target"));
	struct archive_entry *e;
	int r;

	if (!json_is_string(nv))
		nv = json_object_get(j, "path");
	/* The data frames that follow are counted against this size even if the entry is
	 * skipped. */
	t->remaining = type && !strcmp(type, "file") && jint(j, "size") > 0
			       ? (uint64_t)jint(j, "size")
			       : 0;
	snprintf(t->entry, sizeof(t->entry), "%s",
		 json_is_string(nv) ? json_string_value(nv) : "?");
	/* Counted before any data arrives: a stream that announces too much stops here. */
	if (t->max_bytes && t->remaining > t->max_bytes - t->total)
		return -EFBIG;
	t->total += t->remaining;
	t->skipping = true;
	if (!json_is_string(nv) || !type ||
	    !t->name_ok(json_string_value(nv), json_string_length(nv))) {
		/* A reader would extract this name: a hostile sandbox must not steer it outside
		 * the destination. */
		log_warn("archive: skipping unsafe entry name from the sandbox");
		t->skipped++;
		return 0;
	}
	e = archive_entry_new();
	if (!e)
		return -ENOMEM;
	archive_entry_set_pathname(e, json_string_value(nv));
	archive_entry_set_perm(e, (mode_t)(jint(j, "mode") & t->perm_mask));
	archive_entry_set_mtime(e, jint(j, "mtime"), 0);
	archive_entry_set_uid(e, jint(j, "uid") > 0 ? jint(j, "uid") : 0);
	archive_entry_set_gid(e, jint(j, "gid") > 0 ? jint(j, "gid") : 0);
	if (!strcmp(type, "file")) {
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_size(e, (la_int64_t)t->remaining);
	} else if (!strcmp(type, "dir")) {
		archive_entry_set_filetype(e, AE_IFDIR);
	} else if (!strcmp(type, "symlink") && target) {
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_set_symlink(e, target);
	} else {
		archive_entry_free(e);
		t->skipped++;
		return 0;
	}
	r = archive_write_header(t->a, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return -EIO;
	t->skipping = false;
	return 0;
}

int agent_tar_frame(struct agent_tar *t, const struct agent_msg *m, struct isola_err **err)
{
	int r;

	switch (m->type) {
	case PROTO_ENTRY:
		if (t->remaining)
			return isola_err_set(err, EPROTO, "internal",
					     "agent sent the next entry %llu bytes before the end "
					     "of `%s`",
					     (unsigned long long)t->remaining, t->entry);
		r = entry(t, m->json);
		if (r == -EFBIG)
			return isola_err_set(err, EFBIG, "too_large",
					     "`%s` takes the stream past its cap of %llu bytes",
					     t->entry, (unsigned long long)t->max_bytes);
		if (r < 0)
			return isola_err_set(err, EIO, "internal", "tar writer: %s",
					     archive_error_string(t->a));
		return 0;
	case PROTO_STDOUT:
		if (m->len > t->remaining)
			return isola_err_set(err, EPROTO, "internal",
					     "agent sent %zu bytes past the size of `%s`", m->len,
					     t->entry);
		t->remaining -= m->len;
		if (!t->skipping && archive_write_data(t->a, m->data, m->len) < 0)
			return isola_err_set(err, EIO, "internal", "tar writer: %s",
					     archive_error_string(t->a));
		return 0;
	case PROTO_EOF:
		if (t->remaining)
			return isola_err_set(err, EPROTO, "internal",
					     "agent ended %llu bytes short of `%s`",
					     (unsigned long long)t->remaining, t->entry);
		t->finished = true;
		if (archive_write_close(t->a) != ARCHIVE_OK)
			return isola_err_set(err, EIO, "internal", "tar writer: %s",
					     archive_error_string(t->a));
		return 0;
	case PROTO_ERROR:
		agent_error_to_err(m->json, err);
		return isola_err_wrap(err, "after `%s`", t->entry);
	default:
		return isola_err_set(err, EPROTO, "internal",
				     "unexpected frame type %u from the agent", m->type);
	}
}
