/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_runc_config: libFuzzer target for isola-runc's config.json and process.json mapping
 * (src/runc/config.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runc/config.h"

/* A success's binds: each an absolute destination and a source of at most 255 bytes. */
static int binds_ok(const json_t *binds)
{
	const json_t *b;
	size_t i;

	if (!binds)
		return 1;
	if (!json_is_array(binds))
		return 0;
	json_array_foreach(binds, i, b)
	{
		const char *src = json_string_value(json_object_get(b, "source"));
		const char *dst = json_string_value(json_object_get(b, "destination"));

		if (!src || !dst || dst[0] != '/' || strlen(src) > 255 || strlen(dst) > 255)
			return 0;
	}
	return 1;
}

/* True if path is top or below it. */
static int under(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

/* A success's tmpfs mounts: an absolute destination of at most 255 bytes outside /proc,
 * /sys and /dev, a size in 1..1 PiB and a mode <= 07777 when given; its masked and read-only
 * paths: absolute strings of at most 255 bytes. */
static int tmpfs_and_paths_ok(const json_t *create)
{
	const json_t *t = json_object_get(create, "tmpfs"), *e;
	const char *keys[] = {"masked_paths", "readonly_paths"};
	size_t i;

	if (t && !json_is_array(t))
		return 0;
	json_array_foreach(t, i, e)
	{
		const char *dst = json_string_value(json_object_get(e, "destination"));
		const json_t *size = json_object_get(e, "size"), *mode = json_object_get(e, "mode");

		if (!dst || dst[0] != '/' || strlen(dst) > 255 || under(dst, "/proc") ||
		    under(dst, "/sys") || under(dst, "/dev") ||
		    (size &&
		     (json_integer_value(size) < 1 || json_integer_value(size) > (1ll << 50))) ||
		    (mode && (json_integer_value(mode) < 0 || json_integer_value(mode) > 07777)))
			return 0;
	}
	for (size_t k = 0; k < 2; k++) {
		const json_t *l = json_object_get(create, keys[k]);

		if (l && (!json_is_array(l) || !json_array_size(l)))
			return 0;
		json_array_foreach(l, i, e)
		{
			const char *p = json_string_value(e);

			if (!p || p[0] != '/' || strlen(p) > 255)
				return 0;
		}
	}
	return 1;
}

/* A success's hooks: only the kinds run on the host, each hook an absolute path, arrays of
 * args and env, and a timeout number. */
static int hooks_ok(const json_t *hooks)
{
	const json_t *list, *h;
	const char *kind;
	size_t i;

	json_object_foreach((json_t *)hooks, kind, list)
	{
		if (strcmp(kind, "prestart") && strcmp(kind, "createRuntime") &&
		    strcmp(kind, "poststart") && strcmp(kind, "poststop"))
			return 0;
		json_array_foreach(list, i, h)
		{
			const char *path = json_string_value(json_object_get(h, "path"));

			if (!path || path[0] != '/' || !json_is_array(json_object_get(h, "args")) ||
			    !json_is_array(json_object_get(h, "env")) ||
			    !json_is_integer(json_object_get(h, "timeout")))
				return 0;
		}
	}
	return 1;
}

/* Any input maps or fails with an error; a success always carries a create body with a
 * rootfs string and labels, and a process body with a non-empty cmd; its binds, netns and
 * hooks, tmpfs mounts, masked and read-only paths are well-formed (a namespace of our own only without a netns path), and what it
 * skipped is listed. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct isola_err *err = NULL;
	struct oci_mapped m;

	if (oci_config_map((const char *)data, size, "/bundle", "fuzz", &m, &err) == 0) {
		if (!json_is_string(json_object_get(m.create, "rootfs")) ||
		    !json_is_object(json_object_get(m.create, "labels")) ||
		    json_array_size(json_object_get(m.process, "cmd")) == 0 ||
		    !json_is_object(m.annotations) || !json_is_array(m.skipped) ||
		    !binds_ok(json_object_get(m.create, "binds")) ||
		    !tmpfs_and_paths_ok(m.create) ||
		    (json_object_get(m.create, "netns") &&
		     json_string_value(json_object_get(m.create, "netns"))[0] != '/') ||
		    !hooks_ok(m.hooks) || (m.engine_netns && json_object_get(m.create, "netns")))
			abort();
		oci_mapped_fini(&m);
	} else if (!err || !err->message || m.create || m.process) {
		abort();
	}
	isola_err_free(err);
	err = NULL;
	/* The same input as exec's process.json: a body with a non-empty cmd, or an error. */
	{
		json_t *body = NULL;

		if (oci_process_map((const char *)data, size, &body, &err) == 0) {
			if (json_array_size(json_object_get(body, "cmd")) == 0)
				abort();
			json_decref(body);
		} else if (!err || !err->message || body) {
			abort();
		}
		isola_err_free(err);
	}
	return 0;
}
