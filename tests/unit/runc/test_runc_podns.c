/* SPDX-License-Identifier: Apache-2.0 */
/* test_runc_podns: TAP tests for a pod's namespace paths naming an isola-runc container. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podns.h"
#include "../tap.h"

#define BASE                                                                                       \
	"{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},"                                \
	"\"process\":{\"args\":[\"sh\"],\"cwd\":\"/\"}"

static char root[64];

/* Writes ROOT/id/state.json: a container whose relay is pid with start time start. */
static void container(const char *id, long pid, long long start, const char *extra)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, id);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s/state.json", root, id);
	f = fopen(path, "w");
	fprintf(f, "{\"sandbox\":\"sb-%s\",\"relay_pid\":%ld,\"relay_start\":%lld%s}", id, pid,
		start, extra);
	fclose(f);
}

/* Maps the namespaces (a JSON array's inside) of a spec, hostname optional, and resolves
 * them against root into m; the error code ("" on success) and message go to code and msg. */
static int resolve(const char *nss, const char *hostname, struct oci_mapped *m, char *code,
		   char *msg)
{
	char text[2048];
	struct isola_err *err = NULL;
	int r;

	snprintf(text, sizeof(text), BASE "%s%s%s,\"linux\":{\"namespaces\":[%s]}}",
		 hostname ? ",\"hostname\":\"" : "", hostname ? hostname : "", hostname ? "\"" : "",
		 nss);
	code[0] = msg[0] = '\0';
	r = oci_config_map(text, strlen(text), "/b", "app", m, &err);
	if (r == 0)
		r = podns_resolve(root, m, &err);
	if (r < 0) {
		snprintf(code, 32, "%s", err ? err->code : "?");
		snprintf(msg, 512, "%s", err ? err->message : "");
		printf("# %s\n", msg);
		isola_err_free(err);
		oci_mapped_fini(m);
	}
	return r; /* m (on success): the caller's to release */
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k)) ?: "";
}

static void test_parsers(void)
{
	long pid = 0;
	const char *name = NULL;

	ok(podns_proc_path("/proc/4242/ns/ipc", &pid, &name) && pid == 4242 && !strcmp(name, "ipc"),
	   "/proc/PID/ns/NAME parsed");
	ok(!podns_proc_path("/proc/self/ns/net", &pid, &name) &&
		   !podns_proc_path("/proc/0/ns/net", &pid, &name) &&
		   !podns_proc_path("/proc/012/ns/net", &pid, &name) &&
		   !podns_proc_path("/proc/99999999/ns/net", &pid, &name) &&
		   !podns_proc_path("/proc/12/ns/", &pid, &name) &&
		   !podns_proc_path("/proc/12/ns/net/x", &pid, &name) &&
		   !podns_proc_path("/proc/12/task/12/ns/net", &pid, &name) &&
		   !podns_proc_path("/var/run/netns/cni-1", &pid, &name),
	   "other paths are not /proc/PID/ns/NAME");
	ok(podns_stat_starttime("7 (a) b) c) S 1 7 7 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 "
				"98765 1000 10") == 98765,
	   "the start time is field 22, counted from the last parenthesis");
	ok(podns_stat_starttime("7 (a) S 1 2") == -1 && podns_stat_starttime("no paren") == -1,
	   "a short or malformed stat is refused");
}

static void test_resolve(void)
{
	struct oci_mapped m;
	char code[32], msg[512], nss[1024], want[64];
	long me = (long)getpid();
	long long start;
	json_t *st = json_object();

	ok(podns_record_relay(st, getpid()) == 0 &&
		   json_integer_value(json_object_get(st, "relay_pid")) == me,
	   "a live relay's pid and start time recorded");
	start = json_integer_value(json_object_get(st, "relay_start"));
	json_decref(st);

	/* The pod's sandbox container: its relay is this process, it joined the CNI netns. */
	container("pause", me, start, ",\"netns\":\"/var/run/netns/cni-1\",\"hostname\":\"pod-a\"");
	snprintf(nss, sizeof(nss),
		 "{\"type\":\"network\",\"path\":\"/proc/%ld/ns/net\"},"
		 "{\"type\":\"ipc\",\"path\":\"/proc/%ld/ns/ipc\"},"
		 "{\"type\":\"uts\",\"path\":\"/proc/%ld/ns/uts\"},{\"type\":\"pid\"}",
		 me, me, me);
	ok(resolve(nss, NULL, &m, code, msg) == 0 &&
		   !strcmp(str(m.create, "netns"), "/var/run/netns/cni-1") &&
		   !strcmp(str(m.create, "hostname"), "pod-a"),
	   "a pod's app container: the pod's netns path and hostname, own ipc and uts");
	oci_mapped_fini(&m);
	ok(resolve(nss, "own-name", &m, code, msg) == 0 &&
		   !strcmp(str(m.create, "hostname"), "own-name"),
	   "a spec's own hostname is kept");
	oci_mapped_fini(&m);

	/* The pid names another process now (a start time that differs): no container. */
	container("pause", me, start + 1, ",\"netns\":\"/var/run/netns/cni-1\"");
	ok(resolve(nss, NULL, &m, code, msg) < 0 && !strcmp(code, "not_supported") &&
		   strstr(msg, "joining the ipc namespace at `/proc/") &&
		   strstr(msg, "no container"),
	   "a reused relay pid (another start time) matches no container: ipc refused");

	/* A pod container without a netns of its own (isola's network) and no hostname. */
	container("pause", me, start, "");
	snprintf(want, sizeof(want), "/proc/%ld/ns/net", me);
	ok(resolve(nss, NULL, &m, code, msg) == 0 && !strcmp(str(m.create, "netns"), want) &&
		   !strcmp(str(m.create, "hostname"), "sb-pause"),
	   "no recorded netns: the path as given (isolad checks it); hostname: the sandbox's id");
	oci_mapped_fini(&m);

	snprintf(nss, sizeof(nss), "{\"type\":\"pid\",\"path\":\"/proc/%ld/ns/pid\"}", me);
	ok(resolve(nss, NULL, &m, code, msg) < 0 && !strcmp(code, "not_supported") &&
		   strstr(msg, "pid namespace of container `pause`") &&
		   strstr(msg, "shareProcessNamespace"),
	   "a pod's shared pid namespace refused, naming the container");
	ok(resolve("{\"type\":\"pid\",\"path\":\"/proc/1/ns/pid\"}", NULL, &m, code, msg) < 0 &&
		   strstr(msg, "joining the pid namespace at `/proc/1/ns/pid` is refused"),
	   "the host's pid namespace refused");
	ok(resolve("{\"type\":\"ipc\",\"path\":\"/proc/1/ns/ipc\"}", NULL, &m, code, msg) < 0 &&
		   strstr(msg, "joining the ipc namespace at `/proc/1/ns/ipc`"),
	   "the host's ipc namespace refused");
	ok(resolve("{\"type\":\"uts\",\"path\":\"/var/run/utsns/x\"}", NULL, &m, code, msg) < 0 &&
		   strstr(msg, "joining the uts namespace at `/var/run/utsns/x`"),
	   "a uts namespace of no container refused");
	snprintf(nss, sizeof(nss), "{\"type\":\"ipc\",\"path\":\"/proc/%ld/ns/uts\"}", me);
	ok(resolve(nss, NULL, &m, code, msg) < 0 && strstr(msg, "joining the ipc namespace"),
	   "an ipc entry naming a uts file refused");
}

int main(void)
{
	char cmd[128];

	snprintf(root, sizeof(root), "/tmp/test-podns-XXXXXX");
	if (!mkdtemp(root))
		return 1;
	test_parsers();
	test_resolve();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", root);
	return tap_done();
}
