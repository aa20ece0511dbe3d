/* SPDX-License-Identifier: Apache-2.0 */
/* test_denials: the per-sandbox ring of recent egress denials (bounded, newest first, text-safe). */
#include <stdio.h>
#include <string.h>

#include "isolad/net/denials.h"
#include "../tap.h"

static const char *str(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));

	return v ? v : "(null)";
}

int main(void)
{
	static struct net_denials d;
	char host[600], name[32];
	json_t *j, *recent;

	net_denials_init(&d);
	j = net_denials_to_json(&d);
	ok(j && json_integer_value(json_object_get(j, "total")) == 0 &&
		   json_array_size(json_object_get(j, "recent")) == 0,
	   "an empty ring: total 0, no entries");
	json_decref(j);

	net_denials_add(&d, 1000.5, "blocked.example", "203.0.113.7", 443, "deny_rule");
	net_denials_add(&d, 1001.0, NULL, "127.0.0.1", 8080, "always_denied");
	j = net_denials_to_json(&d);
	recent = json_object_get(j, "recent");
	ok(json_array_size(recent) == 2 &&
		   !strcmp(str(json_array_get(recent, 0), "address"), "127.0.0.1") &&
		   !strcmp(str(json_array_get(recent, 0), "host"), "") &&
		   json_integer_value(json_object_get(json_array_get(recent, 0), "port")) == 8080 &&
		   !strcmp(str(json_array_get(recent, 0), "reason"), "always_denied"),
	   "newest first; a denial without a name has host \"\"");
	ok(!strcmp(str(json_array_get(recent, 1), "host"), "blocked.example") &&
		   json_real_value(json_object_get(json_array_get(recent, 1), "time")) == 1000.5,
	   "the older denial keeps its host and time");
	json_decref(j);

	/* Hostile names: markup stays as bytes (the client shows text), control and non-ASCII
	 * bytes become '?', an over-long name is cut: the JSON is always valid. */
	net_denials_add(&d, 1002, "<img src=x onerror=alert(1)>", "198.51.100.1", 80, "bad_name");
	net_denials_add(&d, 1003, "a\xff\x01\nb\xc3\xa9", "198.51.100.1", 80, "bad_name");
	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	net_denials_add(&d, 1004, host, "198.51.100.1", 80, "bad_name");
	j = net_denials_to_json(&d);
	recent = json_object_get(j, "recent");
	ok(strlen(str(json_array_get(recent, 0), "host")) == NET_DENIAL_HOST_MAX,
	   "a 599-byte name is cut to %d bytes", NET_DENIAL_HOST_MAX);
	ok(!strcmp(str(json_array_get(recent, 1), "host"), "a???b??"),
	   "control and non-ASCII bytes become '?': %s", str(json_array_get(recent, 1), "host"));
	ok(!strcmp(str(json_array_get(recent, 2), "host"), "<img src=x onerror=alert(1)>"),
	   "markup is kept as text");
	json_decref(j);

	/* Bounded: after many more, only the newest NET_DENIALS_MAX remain, in order. */
	for (int i = 0; i < 3 * NET_DENIALS_MAX + 5; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		net_denials_add(&d, 2000 + i, name, "192.0.2.1", (unsigned)(1000 + i),
				"deny_default");
	}
	j = net_denials_to_json(&d);
	recent = json_object_get(j, "recent");
	snprintf(name, sizeof(name), "n%d.test", 3 * NET_DENIALS_MAX + 4);
	ok(json_array_size(recent) == NET_DENIALS_MAX &&
		   json_integer_value(json_object_get(j, "total")) == 5 + 3 * NET_DENIALS_MAX + 5 &&
		   !strcmp(str(json_array_get(recent, 0), "host"), name),
	   "bounded to %d, newest first, total counts every denial", NET_DENIALS_MAX);
	snprintf(name, sizeof(name), "n%d.test", 2 * NET_DENIALS_MAX + 5);
	ok(!strcmp(str(json_array_get(recent, NET_DENIALS_MAX - 1), "host"), name),
	   "the oldest kept is the %dth newest", NET_DENIALS_MAX);
	json_decref(j);
	net_denials_fini(&d);
	return tap_done();
}
