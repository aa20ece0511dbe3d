/* SPDX-License-Identifier: Apache-2.0 */
/* test_agenttar: TAP tests for the agent-stream-to-tar writer against hostile streams. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isolad/core/agenttar.h"
#include "proto/proto.h"
#include "../tap.h"

static char out[1 << 16]; /* the tar written */
static size_t out_len;

static bool any_name(const char *n, size_t l)
{
	return l > 0 && n[0] != '/' && !strstr(n, "..");
}

static void start(struct agent_tar *t, uint64_t max)
{
	memset(t, 0, sizeof(*t));
	t->a = archive_write_new();
	archive_write_set_format_pax_restricted(t->a);
	archive_write_open_memory(t->a, out, sizeof(out), &out_len);
	t->perm_mask = 07777;
	t->name_ok = any_name;
	t->max_bytes = max;
}

/* Feeds one frame; returns agent_tar_frame's result and the error code in code. */
static int feed(struct agent_tar *t, uint8_t type, const char *json, const char *data, char *code)
{
	struct agent_msg m = {.type = type};
	struct isola_err *err = NULL;
	int r;

	if (json)
		m.json = json_loads(json, 0, NULL);
	if (data) {
		m.data = (uint8_t *)data;
		m.len = strlen(data);
	}
	r = agent_tar_frame(t, &m, &err);
	snprintf(code, 32, "%s", err ? err->code : "");
	isola_err_free(err);
	json_decref(m.json);
	return r;
}

/* The names in the written tar, '\n'-joined. */
static void names(char *list, size_t n)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	size_t at = 0;

	list[0] = '\0';
	archive_read_support_format_tar(a);
	archive_read_open_memory(a, out, out_len);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK)
		at += (size_t)snprintf(list + at, n - at, "%s:%o\n", archive_entry_pathname(e),
				       (unsigned)archive_entry_perm(e));
	archive_read_free(a);
}

int main(void)
{
	struct agent_tar t;
	char code[32], list[1024];

	start(&t, 0);
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"etc\",\"type\":\"dir\",\"mode\":493}", NULL, code) ==
		   0,
	   "a directory");
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"etc/su\",\"type\":\"file\",\"size\":3,\"mode\":3565}",
		NULL, code) == 0 &&
		   feed(&t, PROTO_STDOUT, NULL, "abc", code) == 0,
	   "a setuid file with its data");
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"../escape\",\"type\":\"file\",\"size\":2}", NULL,
		code) == 0 &&
		   feed(&t, PROTO_STDOUT, NULL, "xy", code) == 0 && t.skipped == 1,
	   "an escaping name is skipped with its data");
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"dev\",\"type\":\"other\"}", NULL, code) == 0 &&
		   t.skipped == 2,
	   "a type tar does not carry here is skipped");
	ok(feed(&t, PROTO_EOF, NULL, NULL, code) == 0 && t.finished, "EOF closes the archive");
	names(list, sizeof(list));
	ok(!strcmp(list, "etc/:755\netc/su:6755\n"),
	   "the tar holds what was kept, setuid bits "
	   "kept under mask 07777 (%s)",
	   list);
	archive_write_free(t.a);

	start(&t, 0);
	feed(&t, PROTO_ENTRY, "{\"name\":\"f\",\"type\":\"file\",\"size\":2}", NULL, code);
	ok(feed(&t, PROTO_STDOUT, NULL, "abc", code) == -EPROTO && !strcmp(code, "internal"),
	   "data past the announced size is refused");
	archive_write_free(t.a);

	start(&t, 0);
	feed(&t, PROTO_ENTRY, "{\"name\":\"f\",\"type\":\"file\",\"size\":4}", NULL, code);
	feed(&t, PROTO_STDOUT, NULL, "ab", code);
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"g\",\"type\":\"dir\"}", NULL, code) == -EPROTO,
	   "the next entry before the data is complete is refused");
	ok(feed(&t, PROTO_EOF, NULL, NULL, code) == -EPROTO && !t.finished,
	   "EOF short of the announced size is refused");
	archive_write_free(t.a);

	start(&t, 10);
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"a\",\"type\":\"file\",\"size\":6}", NULL, code) == 0,
	   "under the cap");
	feed(&t, PROTO_STDOUT, NULL, "123456", code);
	ok(feed(&t, PROTO_ENTRY, "{\"name\":\"b\",\"type\":\"file\",\"size\":5}", NULL, code) ==
			   -EFBIG &&
		   !strcmp(code, "too_large"),
	   "an entry whose declared size passes the cap is refused before its data");
	archive_write_free(t.a);

	start(&t, 0);
	ok(feed(&t, PROTO_ERROR, "{\"code\":\"no_space\",\"errno\":28,\"message\":\"full\"}", NULL,
		code) < 0 &&
		   !strcmp(code, "no_space"),
	   "an agent ERROR keeps its code");
	ok(feed(&t, 99, NULL, NULL, code) == -EPROTO, "an unknown frame type is refused");
	archive_write_free(t.a);
	return tap_done();
}
