/* SPDX-License-Identifier: Apache-2.0 */
/* test_stream: NDJSON/SSE event encoding, base64 and UTF-8 sanitising of process output. */
#include "isolad/api/api-internal.h"

#include <string.h>

#include "../tap.h"

static size_t count(const char *s, size_t n, char c)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += s[i] == c;
	return k;
}

int main(void)
{
	struct isola_err *err = NULL;
	struct api_buf b = {0};
	enum api_fmt fmt;
	json_t *ev, *s;
	bool valid;

	ok(api_pick_format(NULL, NULL, &fmt, &err) == 0 && fmt == API_FMT_JSON, "default json");
	ok(api_pick_format(NULL, "application/x-ndjson", &fmt, &err) == 0 && fmt == API_FMT_NDJSON,
	   "Accept ndjson");
	ok(api_pick_format(NULL, "text/event-stream", &fmt, &err) == 0 && fmt == API_FMT_SSE,
	   "Accept sse");
	ok(api_pick_format("sse", "application/x-ndjson", &fmt, &err) == 0 && fmt == API_FMT_SSE,
	   "query wins over Accept");
	ok(api_pick_format("xml", NULL, &fmt, &err) < 0, "bad stream value refused");
	isola_err_free(err);

	/* Hostile output: newlines, CR, NUL, quotes and a fake SSE frame must stay in one line. */
	ev = json_pack("{s:s, s:s%}", "type", "stdout", "data",
		       "a\n\r\"b\"\0event: exit\ndata: {}\n\n", (size_t)30);
	ok(api_event_format(API_FMT_NDJSON, ev, &b) == 0, "ndjson formatted");
	ok(count(b.data, b.len, '\n') == 1 && b.data[b.len - 1] == '\n', "ndjson is one line");
	ok(memchr(b.data, '\r', b.len) == NULL && memchr(b.data, '\0', b.len) == NULL,
	   "no raw CR or NUL in ndjson");
	{
		json_t *back = json_loadb(b.data, b.len - 1, JSON_ALLOW_NUL, NULL);

		ok(back && json_string_length(json_object_get(back, "data")) == 30,
		   "ndjson round-trips the bytes");
		json_decref(back);
	}
	api_buf_fini(&b);
	ok(api_event_format(API_FMT_SSE, ev, &b) == 0, "sse formatted");
	ok(b.len > 20 && !strncmp(b.data, "event: stdout\ndata: {", 21),
	   "sse event and data lines");
	ok(count(b.data, b.len, '\n') == 3 && !memcmp(b.data + b.len - 2, "\n\n", 2),
	   "sse: exactly one event");
	api_buf_fini(&b);
	json_decref(ev);

	s = api_b64_json("hello", 5);
	ok(s && !strcmp(json_string_value(s), "aGVsbG8="), "base64");
	json_decref(s);
	s = api_b64_json("", 0);
	ok(s && !strcmp(json_string_value(s), ""), "base64 of nothing");
	json_decref(s);

	s = api_utf8_json("h\xc3\xa9llo", 6, &valid);
	ok(s && valid && !strcmp(json_string_value(s), "h\xc3\xa9llo"), "valid UTF-8 kept");
	json_decref(s);
	s = api_utf8_json("a\xff"
			  "b",
			  3, &valid);
	ok(s && !valid &&
		   !strcmp(json_string_value(s), "a\xef\xbf\xbd"
						 "b"),
	   "0xff replaced");
	json_decref(s);
	s = api_utf8_json("\xc0\xaf", 2, &valid);
	ok(s && !valid && json_string_length(s) == 6, "overlong replaced byte by byte");
	json_decref(s);
	s = api_utf8_json("\xed\xa0\x80", 3, &valid);
	ok(s && !valid, "surrogate replaced");
	json_decref(s);
	s = api_utf8_json("\xe2\x82", 2, &valid);
	ok(s && !valid && json_string_length(s) == 6, "truncated sequence replaced");
	json_decref(s);
	s = api_utf8_json("\xf0\x9f\x98\x80", 4, &valid);
	ok(s && valid, "4-byte sequence kept");
	json_decref(s);

	ok(api_buf_append(&b, "x", 1) == 0 && b.len == 1, "buf append");
	api_buf_fini(&b);
	return tap_done();
}
