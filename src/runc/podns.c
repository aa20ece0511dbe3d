/* SPDX-License-Identifier: Apache-2.0 */
/* podns: a pod's namespace paths that name a container isola-runc runs, mapped (docs/oci.md). */
#include "podns.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

#define PODNS_PID_MAX (1L << 22) /* the kernel's PID_MAX_LIMIT on 64-bit */

bool podns_proc_path(const char *path, long *pid, const char **name)
{
	const char *p = path;
	long v = 0;

	if (strncmp(p, "/proc/", 6) != 0)
		return false;
	p += 6;
	if (*p < '1' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > PODNS_PID_MAX)
			return false;
	}
	if (strncmp(p, "/ns/", 4) != 0 || !p[4] || strchr(p + 4, '/'))
		return false;
	*pid = v;
	*name = p + 4;
	return true;
}

long long podns_stat_starttime(const char *text)
{
	/* `PID (COMM) STATE ...`: COMM may hold spaces and parentheses, so fields are counted
	 * from the last `)`; the start time is field 22, the 20th after it. */
	const char *p = strrchr(text, ')');
	long long v = -1;

	if (!p)
		return -1;
	p++;
	for (int field = 3; field <= 22; field++) {
		char *end;

		while (*p == ' ')
			p++;
		if (!*p)
			return -1;
		if (field == 22) {
			errno = 0;
			v = strtoll(p, &end, 10);
			if (errno || end == p || (*end && *end != ' ' && *end != '\n') || v < 0)
				return -1;
			return v;
		}
		p += strcspn(p, " ");
	}
	return -1;
}

/* The start time of host process pid, or -1 (gone, unreadable, or, with !zombies, a zombie:
 * it has exited and waits to be reaped). */
static long long starttime_of_live(long pid, bool zombies)
{
	cleanup_free char *text = NULL;
	const char *state;
	char path[64];
	size_t len = 0;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (util_read_file(path, 4096, &text, &len) < 0)
		return -1;
	state = strrchr(text, ')');
	if (!zombies && (!state || state[1] != ' ' || state[2] == 'Z' || state[2] == 'X'))
		return -1;
	return podns_stat_starttime(text);
}

static long long starttime_of(long pid)
{
	return starttime_of_live(pid, true);
}

bool podns_relay_running(const json_t *st)
{
	long pid = (long)json_integer_value(json_object_get(st, "relay_pid"));
	long long start = pid > 0 ? starttime_of_live(pid, false) : -1;

	return start >= 0 && start == json_integer_value(json_object_get(st, "relay_start"));
}

int podns_record_relay(json_t *st, pid_t relay)
{
	long long start = starttime_of(relay);

	if (start < 0)
		return -ESRCH;
	json_object_set_new(st, "relay_pid", json_integer(relay));
	json_object_set_new(st, "relay_start", json_integer(start));
	return 0;
}

void podns_record(json_t *st, const json_t *create)
{
	const json_t *v;

	if ((v = json_object_get(create, "netns")))
		json_object_set(st, "netns", (json_t *)v);
	if ((v = json_object_get(create, "hostname")))
		json_object_set(st, "hostname", (json_t *)v);
}

/*
 * The state (new reference) of the container under root whose relay is host process pid, its
 * id copied into id (129 bytes), or NULL. The state files are ours (root's 0700 directory);
 * the pid must still have the start time recorded with it, so a relay that exited and a
 * process that got its pid since match nothing.
 */
static json_t *relay_owner(const char *root, long pid, char *id)
{
	long long start = starttime_of(pid);
	json_t *found = NULL;
	struct dirent *de;
	DIR *d;

	if (start < 0 || !(d = opendir(root)))
		return NULL;
	while (!found && (de = readdir(d))) {
		char path[PATH_MAX];
		json_t *st;

		if (!oci_id_valid(de->d_name) /* at most 128 bytes */ ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s/state.json", root, de->d_name) >=
			    sizeof(path))
			continue;
		st = json_load_file(path, 0, NULL);
		if (json_integer_value(json_object_get(st, "relay_pid")) == pid &&
		    json_integer_value(json_object_get(st, "relay_start")) == start &&
		    json_string_value(json_object_get(st, "sandbox"))) {
			memcpy(id, de->d_name, strlen(de->d_name) + 1);
			found = st;
		} else {
			json_decref(st);
		}
	}
	closedir(d);
	return found;
}

/* The container (state, new ref; id) whose relay path names for a namespace of kind (the
 * /proc/PID/ns/ name: net, ipc, uts, pid), or NULL. */
static json_t *pod_container(const char *root, const char *path, const char *kind, char *id)
{
	const char *name;
	long pid;

	if (!path || !podns_proc_path(path, &pid, &name) || strcmp(name, kind) != 0)
		return NULL;
	return relay_owner(root, pid, id);
}

/* network: the pod's namespace (what the referenced container joined), else as given. */
static void map_network(const char *root, struct oci_mapped *m)
{
	const char *path = json_string_value(json_object_get(m->create, "netns"));
	char id[129];
	json_t *st = pod_container(root, path, "net", id);
	const json_t *netns = json_object_get(st, "netns");

	if (json_string_value(netns))
		json_object_set(m->create, "netns", (json_t *)netns);
	json_decref(st);
}

/* ipc, uts: the pod's container gets its own; uts takes the pod's hostname. */
static int map_own(const char *root, struct oci_mapped *m, const char *type, struct isola_err **err)
{
	const char *path = json_string_value(json_object_get(m->ns_paths, type));
	char id[129];
	json_t *st;

	if (!path)
		return 0;
	st = pod_container(root, path, type, id);
	if (!st)
		return isola_err_set(
			err, ENOTSUP, "not_supported",
			"config.json: `linux.namespaces`: joining the %s namespace at "
			"`%s` is refused: it names no container of isola-runc's --root, "
			"and isola makes its own",
			type, path);
	if (!strcmp(type, "uts") && !json_object_get(m->create, "hostname")) {
		/* isolad names a sandbox without a hostname after its id (docs/oci.md). */
		const json_t *h = json_object_get(st, "hostname");

		json_object_set(m->create, "hostname",
				h ? (json_t *)h : json_object_get(st, "sandbox"));
	}
	json_decref(st);
	return 0;
}

int podns_resolve(const char *root, struct oci_mapped *m, struct isola_err **err)
{
	const char *pid = json_string_value(json_object_get(m->ns_paths, "pid"));
	int r;

	map_network(root, m);
	if (pid) {
		char id[129];
		json_t *st = pod_container(root, pid, "pid", id);

		json_decref(st);
		/* A shared pid namespace would let one container see, signal and trace another's
		 * processes; isola gives each sandbox its own (and its agent is PID 1 there). */
		if (st)
			return isola_err_set(
				err, ENOTSUP, "not_supported",
				"config.json: `linux.namespaces`: joining the pid "
				"namespace of container `%s` (`%s`: a pod's "
				"shareProcessNamespace, or --pid container:) is refused: "
				"each isola container has its own",
				id, pid);
		return isola_err_set(
			err, ENOTSUP, "not_supported",
			"config.json: `linux.namespaces`: joining the pid namespace at "
			"`%s` is refused (isola makes its own)",
			pid);
	}
	r = map_own(root, m, "ipc", err);
	if (r == 0)
		r = map_own(root, m, "uts", err);
	return r;
}
