/* SPDX-License-Identifier: Apache-2.0 */
/* test_runc_config: TAP tests for isola-runc's config.json mapping (honoured, mapped, refused). */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "../tap.h"

#define BASE                                                                                       \
	"{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},"                                \
	"\"process\":{\"args\":[\"sh\",\"-c\",\"echo hi\"],\"env\":[\"A=1\",\"B=x=y\"],"           \
	"\"cwd\":\"/srv\",\"user\":{\"uid\":1000,\"gid\":1000}}"

/* Maps text for container "c1" of bundle /b; returns the error code ("" on success). */
static const char *map(const char *text, struct oci_mapped *m, char *msg, size_t n)
{
	static char code[32];
	struct isola_err *err = NULL;
	int r = oci_config_map(text, strlen(text), "/b", "c1", m, &err);

	code[0] = msg[0] = '\0';
	if (r < 0) {
		snprintf(code, sizeof(code), "%s", err ? err->code : "?");
		snprintf(msg, n, "%s", err ? err->message : "");
		isola_err_free(err);
	}
	return code;
}

static bool refused(const char *text, const char *code, const char *needle)
{
	struct oci_mapped m;
	char msg[512];
	const char *got = map(text, &m, msg, sizeof(msg));
	bool good = !strcmp(got, code) && strstr(msg, needle) && !m.create && !m.process;

	if (!good)
		printf("# code %s message %s\n", got, msg);
	oci_mapped_fini(&m);
	return good;
}

static void test_mapping(void)
{
	struct oci_mapped m;
	char msg[512];
	const char *code =
		map(BASE ",\"linux\":{\"resources\":{\"memory\":{\"limit\":67108864},"
			 "\"cpu\":{\"quota\":150000,\"period\":100000},\"pids\":{\"limit\":64}},"
			 "\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"}]},"
			 "\"hooks\":{\"prestart\":[]},\"annotations\":{\"a\":\"b\"}}",
		    &m, msg, sizeof(msg));

	ok(!*code, "a full config maps (%s)", msg);
	if (*code)
		return;
	ok(!strcmp(json_string_value(json_object_get(m.create, "rootfs")), "/b/rootfs"),
	   "a relative root.path joins the bundle");
	ok(!strcmp(json_string_value(
			   json_object_get(json_object_get(m.create, "labels"), "oci.id")),
		   "c1") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(m.create, "labels"),
							     "oci.bundle")),
			   "/b"),
	   "labels oci.id and oci.bundle");
	ok(json_integer_value(json_object_get(m.create, "memory")) == 67108864 &&
		   json_real_value(json_object_get(m.create, "cpu")) == 1.5 &&
		   json_integer_value(json_object_get(m.create, "pids")) == 64,
	   "memory, cpu quota/period and pids map to the sandbox's limits");
	ok(json_array_size(json_object_get(m.process, "cmd")) == 3, "args become cmd");
	ok(!strcmp(json_string_value(json_object_get(json_object_get(m.process, "env"), "B")),
		   "x=y"),
	   "env splits at the first =");
	ok(!strcmp(json_string_value(json_object_get(m.process, "cwd")), "/srv") &&
		   !strcmp(json_string_value(json_object_get(m.create, "workdir")), "/srv"),
	   "cwd is the process's and the sandbox's");
	ok(!strcmp(json_string_value(json_object_get(m.process, "user")), "1000"),
	   "uid 1000 becomes user `1000`");
	ok(!strcmp(json_string_value(json_object_get(m.annotations, "a")), "b"),
	   "annotations kept");
	ok(!json_object_get(m.create, "netns"), "no namespace path: no `netns`");
	ok(!json_object_get(m.create, "binds") && json_array_size(m.skipped) == 0,
	   "no mounts: no binds, nothing skipped");
	oci_mapped_fini(&m);

	code = map(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"pid\"},"
			"{\"type\":\"network\",\"path\":\"/var/run/netns/cni-1\"}]}}",
		   &m, msg, sizeof(msg));
	ok(!*code && !strcmp(json_string_value(json_object_get(m.create, "netns")),
			     "/var/run/netns/cni-1"),
	   "a network namespace path becomes `netns` (%s)", msg);
	oci_mapped_fini(&m);

	code = map(BASE ",\"mounts\":["
			"{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
			"{\"destination\":\"/dev/shm\",\"type\":\"bind\",\"source\":\"/x/shm\","
			"\"options\":[\"rbind\"]},"
			"{\"destination\":\"/data\",\"type\":\"bind\",\"source\":\"/srv/d\","
			"\"options\":[\"rbind\",\"ro\"]},"
			"{\"destination\":\"/etc/hosts\",\"source\":\"hosts\","
			"\"options\":[\"bind\",\"rw\"]},"
			"{\"destination\":\"/scratch\",\"type\":\"tmpfs\",\"source\":\"tmpfs\","
			"\"options\":[\"nosuid\",\"noexec\",\"size=16m\",\"mode=755\"]},"
			"{\"destination\":\"/run\",\"type\":\"tmpfs\",\"options\":[\"ro\"]},"
			"{\"destination\":\"/dev/x\",\"type\":\"tmpfs\"},"
			"{\"destination\":\"/m\",\"type\":\"nfs\"}],"
			"\"linux\":{\"maskedPaths\":[\"/proc/kcore\",\"/secret\"],"
			"\"readonlyPaths\":[\"/proc/sys\"]}}",
		   &m, msg, sizeof(msg));
	{
		const json_t *b = json_object_get(m.create, "binds");
		const json_t *b0 = json_array_get(b, 0), *b1 = json_array_get(b, 1);

		ok(!*code && json_array_size(b) == 2 &&
			   !strcmp(json_string_value(json_object_get(b0, "source")), "/srv/d") &&
			   !strcmp(json_string_value(json_object_get(b0, "destination")),
				   "/data") &&
			   json_is_true(json_object_get(b0, "readonly")) &&
			   json_is_true(json_object_get(b0, "recursive")),
		   "an rbind,ro mount becomes a read-only recursive bind (%s)", msg);
		ok(b1 && !strcmp(json_string_value(json_object_get(b1, "source")), "/b/hosts") &&
			   json_is_false(json_object_get(b1, "readonly")) &&
			   json_is_false(json_object_get(b1, "recursive")),
		   "a bind option with no type is a bind; a relative source is the bundle's");
		ok(json_array_size(m.skipped) == 3 &&
			   strstr(json_string_value(json_array_get(m.skipped, 0)), "/dev/shm") &&
			   strstr(json_string_value(json_array_get(m.skipped, 1)), "/dev/x") &&
			   strstr(json_string_value(json_array_get(m.skipped, 2)), "type nfs"),
		   "a bind and a tmpfs on isola's /dev and an nfs mount are named as not "
		   "applied; /proc is isola's");
	}
	{
		const json_t *t = json_object_get(m.create, "tmpfs");
		const json_t *t0 = json_array_get(t, 0), *t1 = json_array_get(t, 1);
		const json_t *mp = json_object_get(m.create, "masked_paths");
		const json_t *rp = json_object_get(m.create, "readonly_paths");

		ok(json_array_size(t) == 2 &&
			   !strcmp(json_string_value(json_object_get(t0, "destination")),
				   "/scratch") &&
			   json_integer_value(json_object_get(t0, "size")) == 16 << 20 &&
			   json_integer_value(json_object_get(t0, "mode")) == 0755 &&
			   json_is_true(json_object_get(t0, "noexec")) &&
			   !json_object_get(t0, "readonly"),
		   "a tmpfs mount becomes `tmpfs` with its size, mode and noexec");
		ok(t1 && json_is_true(json_object_get(t1, "readonly")) &&
			   !json_object_get(t1, "size") && !json_object_get(t1, "noexec"),
		   "a read-only tmpfs without a size: isolad's default size");
		ok(json_array_size(mp) == 2 &&
			   !strcmp(json_string_value(json_array_get(mp, 1)), "/secret") &&
			   json_array_size(rp) == 1 &&
			   !strcmp(json_string_value(json_array_get(rp, 0)), "/proc/sys"),
		   "maskedPaths and readonlyPaths become masked_paths and readonly_paths");
	}
	oci_mapped_fini(&m);

	code = map("{\"ociVersion\":\"1.2.0\",\"root\":{\"path\":\"/abs\"},\"process\":"
		   "{\"args\":[\"x\"],\"cwd\":\"/\",\"user\":{\"uid\":0}}}",
		   &m, msg, sizeof(msg));
	ok(!*code && !strcmp(json_string_value(json_object_get(m.create, "rootfs")), "/abs") &&
		   !strcmp(json_string_value(json_object_get(m.process, "user")), "0") &&
		   !json_object_get(m.create, "memory"),
	   "absolute root.path kept, uid 0 is root, no resources no limits");
	oci_mapped_fini(&m);
}

static void test_refusals(void)
{
	ok(refused("{", "invalid", "config.json: line"), "malformed JSON");
	ok(refused("[]", "invalid", "not a JSON object"), "not an object");
	ok(refused("{\"ociVersion\":\"2.0\"}", "invalid", "`ociVersion`"), "version 2 refused");
	ok(refused(BASE ",\"hooks\":{\"createContainer\":[{\"path\":\"/x\"}]}}", "not_supported",
		   "`hooks.createContainer` is refused: it would run inside"),
	   "createContainer hooks refused");
	ok(refused(BASE ",\"hooks\":{\"startContainer\":[{\"path\":\"/x\"}]}}", "not_supported",
		   "`hooks.startContainer` is refused"),
	   "startContainer hooks refused");
	ok(refused(BASE ",\"hooks\":{\"prestart\":[{\"path\":\"x\"}]}}", "invalid",
		   "`hooks.prestart[0].path` must be an absolute path"),
	   "a relative hook path refused");
	ok(refused(BASE ",\"hooks\":{\"poststop\":[{\"path\":\"/x\",\"env\":[\"NOEQ\"]}]}}",
		   "invalid", "`hooks.poststop[0].env[0]` must be KEY=VALUE"),
	   "a hook env entry without = refused");
	ok(refused(BASE ",\"hooks\":{\"poststart\":[{\"path\":\"/x\",\"timeout\":0}]}}", "invalid",
		   "`hooks.poststart[0].timeout` must be 1-86400 seconds"),
	   "a zero hook timeout refused");
	ok(refused(BASE ",\"hooks\":{\"prestart\":[{\"path\":\"/x\",\"args\":[1]}]}}", "invalid",
		   "`hooks.prestart[0].args[0]` is not a string"),
	   "a non-string hook arg refused");
	ok(refused(BASE ",\"hooks\":{\"later\":[{\"path\":\"/x\"}]}}", "invalid",
		   "`hooks.later` is not a hook kind"),
	   "an unknown hook kind refused");
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"mount\",\"path\":\"/p\"}]}}",
		   "not_supported", "joining the mount namespace"),
	   "joining a mount namespace refused");
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"user\",\"path\":\"/p\"}]}}",
		   "not_supported", "joining the user namespace"),
	   "joining a user namespace refused");
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"ipc\",\"path\":\"rel\"}]}}",
		   "invalid", "`linux.namespaces[0].path` must be an absolute path"),
	   "a relative ipc namespace path refused");
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"network\",\"path\":\"rel\"}]}}",
		   "invalid", "`linux.namespaces[0].path` must be an absolute path"),
	   "a relative network namespace path refused");
	ok(refused(BASE ",\"mounts\":[{\"destination\":\"/d\",\"type\":\"bind\"}]}", "invalid",
		   "a bind needs a `source`"),
	   "a bind without a source refused");
	ok(refused(BASE ",\"mounts\":[{\"destination\":\"rel\",\"type\":\"bind\"}]}", "invalid",
		   "needs an absolute `destination`"),
	   "a relative mount destination refused");
	ok(refused(BASE ",\"mounts\":[{\"destination\":\"/t\",\"type\":\"tmpfs\","
			"\"options\":[\"size=12x\"]}]}",
		   "invalid", "option `size=12x` must be size=N[kmgt]"),
	   "a tmpfs size with an unknown unit refused naming it");
	ok(refused(BASE ",\"mounts\":[{\"destination\":\"/t\",\"type\":\"tmpfs\","
			"\"options\":[\"size=2048t\"]}]}",
		   "invalid", "(1 byte to 1 PiB)"),
	   "a tmpfs size past 1 PiB refused");
	ok(refused(BASE ",\"mounts\":[{\"destination\":\"/t\",\"type\":\"tmpfs\","
			"\"options\":[\"mode=99\"]}]}",
		   "invalid", "option `mode=99`"),
	   "a tmpfs mode that is not octal refused");
	ok(refused(BASE ",\"linux\":{\"maskedPaths\":[\"rel\"]}}", "invalid",
		   "`linux.maskedPaths[0]` must be an absolute path"),
	   "a relative masked path refused");
	ok(refused(BASE ",\"linux\":{\"readonlyPaths\":\"/x\"}}", "invalid",
		   "`linux.readonlyPaths` must be an array"),
	   "readonlyPaths not an array refused");
	ok(refused(BASE ",\"linux\":{\"seccomp\":[\"SCMP_ACT_ALLOW\"]}}", "invalid",
		   "`linux.seccomp` must be an object"),
	   "a seccomp that is not an object refused");
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"bogus\"}]}}", "invalid",
		   "not a known namespace"),
	   "unknown namespace refused");
	ok(refused(BASE ",\"linux\":{\"sysctl\":{\"kernel.msgmax\":\"1\"}}}", "not_supported",
		   "`linux.sysctl.kernel.msgmax` is refused"),
	   "sysctl refused");
	ok(refused(BASE ",\"linux\":{\"resources\":{\"memory\":{\"limit\":1024}}}}", "invalid",
		   "below isola's minimum"),
	   "tiny memory limit refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[],"
		   "\"cwd\":\"/\"}}",
		   "invalid", "`process.args`"),
	   "empty args refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"rel\"}}",
		   "invalid", "`process.cwd`"),
	   "relative cwd refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"env\":[\"NOEQ\"]}}",
		   "invalid", "`process.env[0]`"),
	   "env entry without = refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"process\":{\"args\":[\"x\"],\"cwd\":\"/\"}}",
		   "invalid", "`root.path`"),
	   "missing root refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"user\":{\"uid\":-1}}}",
		   "invalid", "`process.user.uid`"),
	   "negative uid refused");
}

static void test_ids_and_documents(void)
{
	json_t *spec = oci_spec_default(), *feat = oci_features();
	char *text = json_dumps(spec, 0);
	struct oci_mapped m;
	char msg[512];

	ok(oci_id_valid("abc-1.2_3+x") && !oci_id_valid("") && !oci_id_valid("..") &&
		   !oci_id_valid("a/b") && !oci_id_valid("a b"),
	   "container ids");
	ok(!*map(text, &m, msg, sizeof(msg)), "`spec`'s own config maps (%s)", msg);
	oci_mapped_fini(&m);
	ok(json_is_array(json_object_get(json_object_get(feat, "linux"), "namespaces")) &&
		   json_array_size(json_object_get(feat, "hooks")) == 4 &&
		   !strcmp(json_string_value(json_array_get(json_object_get(feat, "hooks"), 1)),
			   "createRuntime"),
	   "features: namespaces listed, the host hooks");
	ok(json_array_size(json_object_get(feat, "mountOptions")) == 4 &&
		   !strcmp(json_string_value(
				   json_array_get(json_object_get(feat, "mountOptions"), 1)),
			   "rbind") &&
		   json_object_get(json_object_get(feat, "annotations"),
				   "io.isola.namespaces.path"),
	   "features: the bind options read, namespace paths and mounts described");
	ok(json_is_true(json_object_get(json_object_get(json_object_get(feat, "linux"), "seccomp"),
					"enabled")),
	   "features: seccomp enabled (the spec's profile is applied)");
	free(text);
	json_decref(spec);
	json_decref(feat);
}

static void test_terminal_and_exec_process(void)
{
	struct isola_err *err = NULL;
	struct oci_mapped m;
	char msg[512];
	const char *p = "{\"terminal\":true,\"args\":[\"ls\",\"-l\"],\"env\":[\"X=1\"],"
			"\"cwd\":\"/tmp\",\"user\":{\"uid\":1000}}";
	json_t *body = NULL;

	ok(!*map("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		 "[\"x\"],\"cwd\":\"/\",\"terminal\":true}}",
		 &m, msg, sizeof(msg)) &&
		   json_is_true(json_object_get(m.process, "tty")),
	   "process.terminal maps to a tty process (%s)", msg);
	oci_mapped_fini(&m);
	ok(oci_process_map(p, strlen(p), &body, &err) == 0 &&
		   json_is_true(json_object_get(body, "tty")) &&
		   json_array_size(json_object_get(body, "cmd")) == 2 &&
		   !strcmp(json_string_value(json_object_get(body, "cwd")), "/tmp") &&
		   !strcmp(json_string_value(json_object_get(body, "user")), "1000") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(body, "env"), "X")),
			   "1"),
	   "exec process.json maps args, env, cwd, user and terminal");
	json_decref(body);
	body = NULL;
	p = "{\"args\":[],\"cwd\":\"/\"}";
	ok(oci_process_map(p, strlen(p), &body, &err) < 0 && !body && err &&
		   strstr(err->message, "`process.args`"),
	   "exec process.json without args refused");
	isola_err_free(err);
	err = NULL;
	ok(!*map("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		 "[\"x\"],\"cwd\":\"/\"},\"linux\":{\"sysctl\":{\"net.ipv4.ping_group_range\":"
		 "\"0 1\"}}}",
		 &m, msg, sizeof(msg)),
	   "a net.* sysctl is accepted (%s)", msg);
	oci_mapped_fini(&m);
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\"},\"linux\":{\"sysctl\":{\"kernel.shmmax\":\"1\"}}}",
		   "not_supported", "`linux.sysctl.kernel.shmmax` is refused"),
	   "a non-net sysctl is refused");
}

/* Hooks are kept for isola-runc to run; a new network namespace with prestart/createRuntime
 * hooks is the engine's to program (engine_netns), with the two Docker sysctls kept for it. */
static void test_hooks(void)
{
	struct oci_mapped m;
	char msg[512];
	const json_t *h;
	const char *code =
		map(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"network\"}],"
			 "\"sysctl\":{\"net.ipv4.ip_unprivileged_port_start\":\"0\","
			 "\"net.ipv4.tcp_syncookies\":\"1\"}},"
			 "\"hooks\":{\"prestart\":[{\"path\":\"/h\",\"args\":[\"h\",\"x\"],"
			 "\"env\":[\"K=V\"],\"timeout\":5}],\"poststop\":[{\"path\":\"/p\"}],"
			 "\"createContainer\":[]}}",
		    &m, msg, sizeof(msg));

	ok(!*code, "a config with hooks maps (%s)", msg);
	if (*code)
		return;
	h = json_array_get(json_object_get(m.hooks, "prestart"), 0);
	ok(!strcmp(json_string_value(json_object_get(h, "path")), "/h") &&
		   json_array_size(json_object_get(h, "args")) == 2 &&
		   json_integer_value(json_object_get(h, "timeout")) == 5 &&
		   !strcmp(json_string_value(json_array_get(json_object_get(h, "env"), 0)), "K=V"),
	   "prestart hook kept with path, args, env and timeout");
	h = json_array_get(json_object_get(m.hooks, "poststop"), 0);
	ok(json_integer_value(json_object_get(h, "timeout")) == 0 &&
		   json_array_size(json_object_get(h, "args")) == 0 &&
		   !json_object_get(m.hooks, "createContainer"),
	   "poststop without timeout or args; an empty createContainer list dropped");
	ok(m.engine_netns && !json_object_get(m.create, "netns"),
	   "a new network namespace with a prestart hook is the engine's to program");
	ok(json_object_size(m.net_sysctl) == 1 &&
		   json_object_get(m.net_sysctl, "net.ipv4.ip_unprivileged_port_start"),
	   "of the net.* sysctls, Docker's kept for the namespace");
	oci_mapped_fini(&m);

	map(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"network\",\"path\":\"/n\"}]},"
		 "\"hooks\":{\"prestart\":[{\"path\":\"/h\"}]}}",
	    &m, msg, sizeof(msg));
	ok(m.create && !m.engine_netns, "a network namespace path is joined, not made");
	oci_mapped_fini(&m);
	map(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"network\"}]},"
		 "\"hooks\":{\"poststart\":[{\"path\":\"/h\"}]}}",
	    &m, msg, sizeof(msg));
	ok(m.create && !m.engine_netns, "without prestart/createRuntime, isola's own network");
	oci_mapped_fini(&m);
	map(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"pid\"}]},"
		 "\"hooks\":{\"createRuntime\":[{\"path\":\"/h\"}]}}",
	    &m, msg, sizeof(msg));
	ok(m.create && !m.engine_netns && json_object_get(m.hooks, "createRuntime"),
	   "no network namespace asked for: isola's own network");
	oci_mapped_fini(&m);
}

static void test_network_annotation(void)
{
	struct oci_mapped m;
	char msg[512];
	const json_t *net, *allow;
	const char *code = map(BASE ",\"annotations\":{\"isola.network.allow\":"
				    "\" pypi.org, *.npmjs.org ,,10.0.0.0/8\"}}",
			       &m, msg, sizeof(msg));

	net = json_object_get(m.create, "network");
	allow = json_object_get(net, "allow");
	ok(!*code && !strcmp(json_string_value(json_object_get(net, "default")), "deny") &&
		   json_array_size(allow) == 3 &&
		   !strcmp(json_string_value(json_array_get(allow, 0)), "pypi.org") &&
		   !strcmp(json_string_value(json_array_get(allow, 1)), "*.npmjs.org") &&
		   !strcmp(json_string_value(json_array_get(allow, 2)), "10.0.0.0/8"),
	   "isola.network.allow: default deny, its rules trimmed, empty ones dropped (%s)", msg);
	oci_mapped_fini(&m);
	code = map(BASE ",\"annotations\":{\"isola.network.allow\":\"\"}}", &m, msg, sizeof(msg));
	net = json_object_get(m.create, "network");
	ok(!*code && json_array_size(json_object_get(net, "allow")) == 0 &&
		   !strcmp(json_string_value(json_object_get(net, "default")), "deny"),
	   "an empty isola.network.allow allows nothing");
	oci_mapped_fini(&m);
	map(BASE "}", &m, msg, sizeof(msg));
	ok(m.create && !json_object_get(m.create, "network"),
	   "without the annotation: the daemon's default policy");
	oci_mapped_fini(&m);
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"network\",\"path\":\"/n\"}]},"
			"\"annotations\":{\"isola.network.allow\":\"a.com\"}}",
		   "not_supported", "network namespace of the engine's"),
	   "the annotation on a joined network namespace is refused");
	ok(refused(BASE ",\"linux\":{\"namespaces\":[{\"type\":\"network\"}]},"
			"\"hooks\":{\"prestart\":[{\"path\":\"/h\"}]},"
			"\"annotations\":{\"isola.network.allow\":\"a.com\"}}",
		   "not_supported", "isola.network.allow"),
	   "the annotation on a network the engine's hooks program is refused");
}

/* linux.seccomp goes to isolad as `seccomp`, unchanged (isolad checks and compiles it). */
static void test_seccomp(void)
{
	struct oci_mapped m;
	char msg[512];
	const char *code = map(BASE ",\"linux\":{\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ERRNO\","
				    "\"syscalls\":[{\"names\":[\"read\"],\"action\":"
				    "\"SCMP_ACT_ALLOW\"}]}}}",
			       &m, msg, sizeof(msg));
	const json_t *sc = json_object_get(m.create, "seccomp");

	ok(!*code && sc &&
		   !strcmp(json_string_value(json_object_get(sc, "defaultAction")),
			   "SCMP_ACT_ERRNO") &&
		   json_array_size(json_object_get(sc, "syscalls")) == 1,
	   "linux.seccomp becomes the create field `seccomp` (%s)", msg);
	oci_mapped_fini(&m);
	code = map(BASE "}", &m, msg, sizeof(msg));
	ok(!*code && !json_object_get(m.create, "seccomp"), "no linux.seccomp: no `seccomp`");
	oci_mapped_fini(&m);
}

/* root.readonly, process.user.additionalGids/umask, process.rlimits and oomScoreAdj: mapped to
 * readonly_root and the process request's narrowing fields (isolad checks their ranges), for
 * config.json and process.json alike; a malformed shape refused naming the field. */
static void test_narrowing(void)
{
	static const char *const proc_json =
		"{\"args\":[\"x\"],\"cwd\":\"/"
		"\",\"user\":{\"uid\":0,\"gid\":9,\"additionalGids\":[5],"
		"\"umask\":18},\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":1,\"hard\":2}],"
		"\"oomScoreAdj\":100}";
	struct isola_err *err = NULL;
	struct oci_mapped m;
	json_t *body = NULL;
	char msg[512], text[1024];
	const json_t *rl;

	snprintf(text, sizeof(text),
		 "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\",\"readonly\":true},"
		 "\"process\":%s}",
		 proc_json);
	ok(!*map(text, &m, msg, sizeof(msg)), "a config with narrowing fields maps (%s)", msg);
	rl = json_array_get(json_object_get(m.process, "rlimits"), 0);
	ok(json_is_true(json_object_get(m.create, "readonly_root")),
	   "root.readonly becomes readonly_root");
	ok(json_integer_value(json_array_get(json_object_get(m.process, "additional_gids"), 0)) ==
			   5 &&
		   json_integer_value(json_object_get(m.process, "umask")) == 18 &&
		   json_integer_value(json_object_get(m.process, "gid")) == 9 &&
		   json_integer_value(json_object_get(m.process, "oom_score_adj")) == 100,
	   "gid, additionalGids, umask and oomScoreAdj become the process's fields");
	ok(rl && !strcmp(json_string_value(json_object_get(rl, "type")), "RLIMIT_NOFILE") &&
		   json_integer_value(json_object_get(rl, "soft")) == 1 &&
		   json_integer_value(json_object_get(rl, "hard")) == 2 &&
		   json_is_true(json_object_get(m.process, "rlimits_cap")),
	   "rlimits become the process's rlimits, capped at isola's");
	oci_mapped_fini(&m);
	ok(!*map(BASE "}", &m, msg, sizeof(msg)) && !json_object_get(m.create, "readonly_root") &&
		   !json_object_get(m.process, "rlimits") && !json_object_get(m.process, "umask"),
	   "without them: none set");
	oci_mapped_fini(&m);
	ok(oci_process_map(proc_json, strlen(proc_json), &body, &err) == 0 &&
		   json_integer_value(json_object_get(body, "oom_score_adj")) == 100 &&
		   json_array_size(json_object_get(body, "rlimits")) == 1,
	   "process.json's narrowing fields are mapped too");
	json_decref(body);
	isola_err_free(err);
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"rlimits\":{}}}",
		   "invalid", "`process.rlimits` must be an array"),
	   "rlimits not an array refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_CPU\"}]}}",
		   "invalid", "`process.rlimits[0]` needs a `type`"),
	   "an rlimit without limits refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_TEST\",\"soft\":1,"
		   "\"hard\":1}]}}",
		   "invalid", "`process.rlimits[0]`: `RLIMIT_TEST` is not a resource limit"),
	   "an rlimit type Linux does not have refused at create (runtime-tools' "
	   "process_rlimits_fail)");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"user\":{\"uid\":0,\"umask\":\"022\"}}}",
		   "invalid", "`process.user.umask` must be an integer"),
	   "a string umask refused");
	ok(refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
		   "[\"x\"],\"cwd\":\"/\",\"user\":{\"uid\":0,\"additionalGids\":7}}}",
		   "invalid", "`process.user.additionalGids` must be an array"),
	   "additionalGids not an array refused");
}

int main(void)
{
	test_seccomp();
	test_terminal_and_exec_process();
	test_mapping();
	test_narrowing();
	test_refusals();
	test_hooks();
	test_network_annotation();
	test_ids_and_documents();
	return tap_done();
}
