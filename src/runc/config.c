/* SPDX-License-Identifier: Apache-2.0 */
/* config: maps an OCI bundle's config.json onto isolad's create and process requests. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rlimits.h"

#define OCI_MAX_ARGS 256
#define OCI_MAX_ENV  1024
#define OCI_MAX_STR  32768

/* The namespaces every isola sandbox has anyway (process tier, docs/process-tier.md). */
static const char *const known_ns[] = {"pid",  "network", "mount", "ipc", "uts",
				       "user", "cgroup",  "time",  NULL};

bool oci_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > 128 || !strcmp(id, ".") || !strcmp(id, ".."))
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("_.+-", *c)))
			return false;
	return true;
}

void oci_mapped_fini(struct oci_mapped *m)
{
	json_decref(m->create);
	json_decref(m->process);
	json_decref(m->annotations);
	json_decref(m->skipped);
	json_decref(m->hooks);
	json_decref(m->net_sysctl);
	json_decref(m->ns_paths);
	memset(m, 0, sizeof(*m));
}

/* A string no longer than OCI_MAX_STR, or NULL. */
static const char *str_of(const json_t *v)
{
	const char *s = json_string_value(v);

	return s && json_string_length(v) <= OCI_MAX_STR && strlen(s) == json_string_length(v)
		       ? s
		       : NULL;
}

static int map_args(const json_t *proc, json_t *body, struct isola_err **err)
{
	const json_t *args = json_object_get(proc, "args"), *v;
	json_t *cmd;
	size_t i;

	if (!json_is_array(args) || json_array_size(args) == 0 ||
	    json_array_size(args) > OCI_MAX_ARGS)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `process.args` must be an array of 1-%d strings",
				     OCI_MAX_ARGS);
	cmd = json_array();
	json_array_foreach(args, i, v)
	{
		if (!str_of(v)) {
			json_decref(cmd);
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `process.args[%zu]` is not a string", i);
		}
		json_array_append(cmd, (json_t *)v);
	}
	json_object_set_new(body, "cmd", cmd);
	return 0;
}

static int map_env(const json_t *proc, json_t *body, struct isola_err **err)
{
	const json_t *env = json_object_get(proc, "env"), *v;
	json_t *map;
	size_t i;

	if (!env || json_is_null(env))
		return 0;
	if (!json_is_array(env) || json_array_size(env) > OCI_MAX_ENV)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `process.env` must be an array of at most %d "
				     "strings",
				     OCI_MAX_ENV);
	map = json_object();
	json_array_foreach(env, i, v)
	{
		const char *s = str_of(v), *eq = s ? strchr(s, '=') : NULL;
		char key[256];

		if (!eq || eq == s || (size_t)(eq - s) >= sizeof(key)) {
			json_decref(map);
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `process.env[%zu]` must be KEY=VALUE "
					     "with a key of 1-255 bytes",
					     i);
		}
		memcpy(key, s, (size_t)(eq - s));
		key[eq - s] = '\0';
		json_object_set_new(map, key, json_string(eq + 1));
	}
	json_object_set_new(body, "env", map);
	return 0;
}

/* cwd and user: the process's and the sandbox's defaults (isola exec into the container). */
static int map_cwd_user(const json_t *proc, json_t *create, json_t *body, struct isola_err **err)
{
	const json_t *cwdv = json_object_get(proc, "cwd");
	const json_t *user = json_object_get(proc, "user"), *uid;
	const char *cwd = str_of(cwdv);
	char name[24];

	if (!cwd || cwd[0] != '/' || strlen(cwd) > 255)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `process.cwd` must be an absolute path of at "
				     "most 255 bytes");
	json_object_set_new(body, "cwd", json_string(cwd));
	json_object_set_new(create, "workdir", json_string(cwd));
	if (!user || json_is_null(user))
		return 0;
	uid = json_object_get(user, "uid");
	if (!json_is_object(user) ||
	    (uid && (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
		     json_integer_value(uid) > 0xfffffffe)))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `process.user.uid` must be an integer "
				     "0-4294967294");
	if (json_object_get(user, "username"))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "config.json: `process.user.username` is for Windows");
	/* Numeric, as the spec gives it: the agent looks the uid up in the container's
	 * /etc/passwd (name, home, groups) and runs an id it does not find as itself, as runc
	 * does, so an image without /etc/passwd (FROM scratch) runs as uid 0. */
	snprintf(name, sizeof(name), "%lld", uid ? (long long)json_integer_value(uid) : 0LL);
	json_object_set_new(body, "user", json_string(name));
	json_object_set_new(create, "user", json_string(name));
	return 0;
}

/*
 * Copies the spec field v (at `where` in config.json) into body as `key` when it is set: an
 * integer (is_array false) or an array; null or absent copies nothing. 0, or -EINVAL with
 * *err naming the field.
 */
static int copy_typed(const json_t *v, bool is_array, const char *where, json_t *body,
		      const char *key, struct isola_err **err)
{
	if (!v || json_is_null(v))
		return 0;
	if (is_array ? !json_is_array(v) : !json_is_integer(v))
		return isola_err_set(err, EINVAL, "invalid", "config.json: `%s` must be %s", where,
				     is_array ? "an array of gids" : "an integer");
	json_object_set(body, key, (json_t *)v);
	return 0;
}

/*
 * The process's narrowing fields: `user.additionalGids`, `user.umask`, `rlimits` and
 * `oomScoreAdj` become the process request's additional_gids, umask, rlimits and
 * oom_score_adj; with them `user.gid` becomes `gid` (the primary group, neutral). Only their shape is checked here; isolad checks the ranges (gids 0-65535,
 * rlimit types, soft <= hard) and the sandbox's agent refuses what would widen (an
 * oom_score_adj below the sandbox's), naming the field, and lowers a hard limit above isola's
 * to isola's (`rlimits_cap`; docs/oci.md). A negative oomScoreAdj is not sent: engines set
 * one routinely (Kubernetes: -998 for a pod's pause container, -997 for a Guaranteed pod),
 * and it would only widen, so the container keeps the sandbox's score, as a rlimit above
 * isola's is lowered instead of refused.
 */
static int map_narrowing(const json_t *proc, json_t *body, struct isola_err **err)
{
	const json_t *user = json_object_get(proc, "user");
	const json_t *rl = json_object_get(proc, "rlimits");
	const json_t *oom = json_object_get(proc, "oomScoreAdj");
	const json_t *e;
	json_t *out;
	size_t i;

	/* The primary group as given (runc's), not the uid's passwd one. */
	if (copy_typed(json_object_get(user, "gid"), false, "process.user.gid", body, "gid", err) <
		    0 ||
	    copy_typed(json_object_get(user, "additionalGids"), true, "process.user.additionalGids",
		       body, "additional_gids", err) < 0 ||
	    copy_typed(json_object_get(user, "umask"), false, "process.user.umask", body, "umask",
		       err) < 0)
		return -EINVAL;
	/* A negative score is left out (above). */
	if (json_is_integer(oom) && json_integer_value(oom) < 0)
		oom = NULL;
	if (copy_typed(oom, false, "process.oomScoreAdj", body, "oom_score_adj", err) < 0)
		return -EINVAL;
	if (!rl || json_is_null(rl))
		return 0;
	if (!json_is_array(rl))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `process.rlimits` must be an array");
	out = json_array();
	json_array_foreach(rl, i, e)
	{
		const json_t *type = json_object_get(e, "type");

		if (!str_of(type) || !json_is_integer(json_object_get(e, "soft")) ||
		    !json_is_integer(json_object_get(e, "hard"))) {
			json_decref(out);
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `process.rlimits[%zu]` needs a `type` "
					     "string and integer `soft` and `hard`",
					     i);
		}
		/* At create, as runc refuses it, not at start when isolad would. */
		if (rlimits_parse(str_of(type)) < 0) {
			json_decref(out);
			return isola_err_set(
				err, EINVAL, "invalid",
				"config.json: `process.rlimits[%zu]`: `%s` is not a "
				"resource limit Linux has (RLIMIT_NOFILE, RLIMIT_CORE...)",
				i, str_of(type));
		}
		json_array_append_new(out, json_pack("{s:O, s:O, s:O}", "type", type, "soft",
						     json_object_get(e, "soft"), "hard",
						     json_object_get(e, "hard")));
	}
	json_object_set_new(body, "rlimits", out);
	/* Engines write their own defaults here, not the user's intent (Podman: its process's
	 * RLIMIT_NOFILE, 1048576): one above isola's is lowered to isola's, not refused. */
	json_object_set_new(body, "rlimits_cap", json_true());
	return 0;
}

/* A non-negative integer field of obj, or -1 when absent/null; -2 when malformed. */
static long long uint_field(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return -1;
	if (!json_is_integer(v))
		return -2;
	return json_integer_value(v) < 0 ? -1 : json_integer_value(v);
}

static int map_resources(const json_t *linux_, json_t *create, struct isola_err **err)
{
	const json_t *res = json_object_get(linux_, "resources");
	long long mem, quota, period, pids;

	if (!res || json_is_null(res))
		return 0;
	if (!json_is_object(res))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `linux.resources` must be an object");
	mem = uint_field(json_object_get(res, "memory"), "limit");
	quota = uint_field(json_object_get(res, "cpu"), "quota");
	period = uint_field(json_object_get(res, "cpu"), "period");
	pids = uint_field(json_object_get(res, "pids"), "limit");
	if (mem == -2 || quota == -2 || period == -2 || pids == -2)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `linux.resources` memory.limit, cpu.quota, "
				     "cpu.period and pids.limit must be integers");
	if (mem > 0) {
		if (mem < (16ll << 20))
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `linux.resources.memory.limit` %lld is "
					     "below isola's minimum of 16 MiB",
					     mem);
		json_object_set_new(create, "memory", json_integer(mem));
	}
	if (quota > 0) {
		double cpus = (double)quota / (double)(period > 0 ? period : 100000);

		if (cpus < 0.001)
			cpus = 0.001;
		if (cpus > 1024)
			cpus = 1024;
		json_object_set_new(create, "cpu", json_real(cpus));
	}
	if (pids > 0)
		json_object_set_new(create, "pids",
				    json_integer(pids > 0x7fffffff ? 0x7fffffff : pids));
	return 0;
}

/* linux.namespaces: isola makes every namespace itself, except that the network one may be
 * joined by path (a CNI-made pod netns, Docker's and Podman's networks): `netns` of the
 * create request, which isolad opens and checks (docs/oci.md). ipc, uts and pid paths (the
 * CRI's and Docker's `container:` modes name another container's) are kept in ns_paths for
 * podns_resolve, which maps those of a pod's container and refuses the rest. */
static int map_namespaces(const json_t *linux_, struct oci_mapped *out, struct isola_err **err)
{
	const json_t *nss = json_object_get(linux_, "namespaces"), *ns;
	size_t i;

	if (!nss || json_is_null(nss))
		return 0;
	if (!json_is_array(nss))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `linux.namespaces` must be an array");
	json_array_foreach(nss, i, ns)
	{
		const char *type = str_of(json_object_get(ns, "type"));
		const char *path = str_of(json_object_get(ns, "path"));
		bool known = false;

		for (size_t k = 0; type && known_ns[k]; k++)
			known = known || !strcmp(type, known_ns[k]);
		if (!known)
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `linux.namespaces[%zu].type` is not a "
					     "known namespace",
					     i);
		if (!path || !*path)
			continue;
		if (path[0] != '/' || strlen(path) > 255)
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `linux.namespaces[%zu].path` "
					     "must be an absolute path of at most 255 bytes",
					     i);
		if (!strcmp(type, "network")) {
			json_object_set_new(out->create, "netns", json_string(path));
			continue;
		}
		if (!strcmp(type, "ipc") || !strcmp(type, "uts") || !strcmp(type, "pid")) {
			if (!out->ns_paths)
				out->ns_paths = json_object();
			if (!out->ns_paths ||
			    json_object_set_new(out->ns_paths, type, json_string(path)) < 0)
				return isola_err_set(err, ENOMEM, "internal", "out of memory");
			continue;
		}
		/* Joining any other namespace by path would put the container into another's. */
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "config.json: `linux.namespaces[%zu]`: joining the %s "
				     "namespace at a path is refused (isola makes its own)",
				     i, type);
	}
	return 0;
}

#define OCI_MAX_MOUNTS 64

/* The kernel filesystems isola's setup mounts itself, where runc's default spec puts them. */
static const char *const own_mounts[][2] = {
	{"/proc", "proc"},
	{"/dev", "tmpfs"},
	{"/dev/pts", "devpts"},
	{"/dev/shm", "tmpfs"},
	{"/dev/mqueue", "mqueue"},
	{"/sys", "sysfs"},
	{"/sys/fs/cgroup", "cgroup"},
	{"/sys/fs/cgroup", "cgroup2"},
};

/* True if path is top or below it. */
static bool under(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

/* One bind's options: ro/rw, bind/rbind; the rest (nosuid, nodev, propagation...) is
 * isola's own choice (always nosuid, nodev, private). */
static void bind_options(const json_t *opts, bool *bind, bool *ro, bool *rec)
{
	const json_t *o;
	size_t i;

	json_array_foreach(opts, i, o)
	{
		const char *s = json_string_value(o);

		if (!s)
			continue;
		if (!strcmp(s, "bind") || !strcmp(s, "rbind")) {
			*bind = true;
			*rec = !strcmp(s, "rbind");
		} else if (!strcmp(s, "ro")) {
			*ro = true;
		} else if (!strcmp(s, "rw")) {
			*ro = false;
		}
	}
}

/*
 * A tmpfs mount's options (docker --tmpfs, --mount type=tmpfs): `size=N[kmgt]` and
 * `mode=OCTAL` kept, `noexec`/`exec` and `ro`/`rw` honoured, the rest isola's own (always
 * nosuid, nodev). Returns the create request's `tmpfs` entry, or NULL with *err set.
 */
static json_t *tmpfs_entry(const json_t *opts, const char *dst, size_t i, struct isola_err **err)
{
	json_t *e = json_pack("{s:s}", "destination", dst);
	const json_t *o;
	size_t k;

	json_array_foreach(opts, k, o)
	{
		const char *s = str_of(o), *units = "kmgt", *u;
		char *end = NULL;
		unsigned long long v;

		if (!s)
			continue;
		if (!strcmp(s, "noexec") || !strcmp(s, "exec")) {
			json_object_set_new(e, "noexec", json_boolean(s[0] == 'n'));
		} else if (!strcmp(s, "ro") || !strcmp(s, "rw")) {
			json_object_set_new(e, "readonly", json_boolean(s[1] == 'o'));
		} else if (!strncmp(s, "size=", 5)) {
			errno = 0;
			v = strtoull(s + 5, &end, 10);
			u = *end ? strchr(units, tolower((unsigned char)*end)) : NULL;
			if (u && !end[1]) {
				unsigned shift = 10 * (unsigned)(u - units + 1);

				v = v > ((1ull << 50) >> shift) ? ~0ull : v << shift;
				end++;
			}
			if (errno || end == s + 5 || *end || v == 0 || v > (1ull << 50))
				goto bad;
			json_object_set_new(e, "size", json_integer((json_int_t)v));
		} else if (!strncmp(s, "mode=", 5)) {
			errno = 0;
			v = strtoull(s + 5, &end, 8);
			if (errno || end == s + 5 || *end || v > 07777)
				goto bad;
			json_object_set_new(e, "mode", json_integer((json_int_t)v));
		}
		continue;
	bad:
		json_decref(e);
		isola_err_set(err, EINVAL, "invalid",
			      "config.json: `mounts[%zu]` (tmpfs `%.255s`): option `%.64s` must be "
			      "size=N[kmgt] (1 byte to 1 PiB) or mode=OCTAL (at most 07777)",
			      i, dst, s);
		return NULL;
	}
	return e;
}

/*
 * mounts: binds (type `bind`, or options bind/rbind: docker -v, podman -v, Kubernetes
 * volumes, an engine's /etc/hosts) become the create request's `binds`, read-only with `ro`,
 * recursive unless `bind`; a relative source is the bundle's, as runc has it. isola's own
 * kernel filesystems (/proc, /dev, /sys and below) stay isola's: a bind there is not applied
 * (named in out->skipped), nor is any other filesystem (a tmpfs elsewhere, say).
 */
static int map_mounts(const json_t *spec, const char *bundle, struct oci_mapped *out,
		      struct isola_err **err)
{
	const json_t *mounts = json_object_get(spec, "mounts"), *mt;
	json_t *binds = json_array(), *tmpfs = json_array();
	size_t i;

	out->skipped = json_array();
	/* Kept only when used; released with out->create on a failure. */
	json_object_set_new(out->create, "binds", binds);
	json_object_set_new(out->create, "tmpfs", tmpfs);
	if (!mounts || json_is_null(mounts))
		goto out;
	if (!json_is_array(mounts) || json_array_size(mounts) > OCI_MAX_MOUNTS)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `mounts` must be an array of at most %d objects",
				     OCI_MAX_MOUNTS);
	json_array_foreach(mounts, i, mt)
	{
		const char *dst = str_of(json_object_get(mt, "destination"));
		const char *type = str_of(json_object_get(mt, "type"));
		const char *src = str_of(json_object_get(mt, "source"));
		const json_t *opts = json_object_get(mt, "options");
		bool bind = type && !strcmp(type, "bind"), ro = false, rec = true, own = false;
		char full[1024], why[512];

		if (!dst || dst[0] != '/' || strlen(dst) > 255 || (opts && !json_is_array(opts)))
			return isola_err_set(
				err, EINVAL, "invalid",
				"config.json: `mounts[%zu]` needs an absolute "
				"`destination` of at most 255 bytes and `options` as an "
				"array",
				i);
		bind_options(opts, &bind, &ro, &rec);
		for (size_t k = 0; !bind && type && k < sizeof(own_mounts) / sizeof(own_mounts[0]);
		     k++)
			own = own ||
			      (!strcmp(dst, own_mounts[k][0]) && !strcmp(type, own_mounts[k][1]));
		if (own)
			continue;
		if (bind && !(under(dst, "/proc") || under(dst, "/sys") || under(dst, "/dev"))) {
			int n;

			if (!src || !*src)
				return isola_err_set(err, EINVAL, "invalid",
						     "config.json: `mounts[%zu]`: a bind needs a "
						     "`source`",
						     i);
			n = src[0] == '/' ? snprintf(full, sizeof(full), "%s", src)
					  : snprintf(full, sizeof(full), "%s/%s", bundle, src);
			if (n < 0 || n > 255)
				return isola_err_set(err, ENAMETOOLONG, "invalid",
						     "config.json: `mounts[%zu].source` is longer "
						     "than 255 bytes",
						     i);
			json_array_append_new(binds, json_pack("{s:s, s:s, s:b, s:b}", "source",
							       full, "destination", dst, "readonly",
							       ro, "recursive", rec));
			continue;
		}
		if (!bind && type && !strcmp(type, "tmpfs") &&
		    !(under(dst, "/proc") || under(dst, "/sys") || under(dst, "/dev"))) {
			json_t *e = tmpfs_entry(opts, dst, i, err);

			if (!e)
				return -EINVAL;
			json_array_append_new(tmpfs, e);
			continue;
		}
		if (bind)
			snprintf(why, sizeof(why),
				 "mount `%.255s` (bind) not applied: isola keeps its own /proc, "
				 "/sys "
				 "and /dev",
				 dst);
		else
			snprintf(why, sizeof(why),
				 "mount `%.255s` (type %.32s) not applied: isola mounts only its "
				 "own kernel filesystems, binds and tmpfs mounts outside /proc, "
				 "/sys and /dev",
				 dst, type ? type : "none");
		json_array_append_new(out->skipped, json_string(why));
	}
out:
	if (!json_array_size(binds))
		json_object_del(out->create, "binds");
	if (!json_array_size(tmpfs))
		json_object_del(out->create, "tmpfs");
	return 0;
}

#define OCI_MAX_PATHS 64 /* isolad's cap on tmpfs, masked and read-only paths together */

/* linux.maskedPaths / linux.readonlyPaths: absolute paths of at most 255 bytes, copied to the
 * create request's `field` (isolad checks them further: no `.`/`..`, not `/`). Any principal
 * may ask: they only narrow what the container sees. */
static int map_paths(const json_t *linux_, const char *key, const char *field, json_t *create,
		     struct isola_err **err)
{
	const json_t *list = json_object_get(linux_, key), *v;
	json_t *out;
	size_t i;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > OCI_MAX_PATHS)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `linux.%s` must be an array of at most %d paths",
				     key, OCI_MAX_PATHS);
	json_array_foreach(list, i, v)
	{
		const char *p = str_of(v);

		if (!p || p[0] != '/' || strlen(p) > 255)
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `linux.%s[%zu]` must be an absolute "
					     "path of at most 255 bytes",
					     key, i);
	}
	if (!json_array_size(list))
		return 0;
	out = json_deep_copy(list);
	if (!out)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	json_object_set_new(create, field, out);
	return 0;
}

#define OCI_MAX_HOOKS 32

/* The hook kinds isola-runc runs on the host (runtime-spec config.md, POSIX-platform Hooks). */
static const char *const host_hooks[] = {"prestart", "createRuntime", "poststart", "poststop",
					 NULL};

/* One hook {path, args, env, timeout}, checked and copied into list. */
static int map_hook(const json_t *h, const char *kind, size_t i, json_t *list,
		    struct isola_err **err)
{
	const json_t *args = json_object_get(h, "args"), *env = json_object_get(h, "env");
	const json_t *timeout = json_object_get(h, "timeout"), *v;
	const char *path = str_of(json_object_get(h, "path"));
	json_t *out;
	size_t k;

	if (!json_is_object(h) || !path || path[0] != '/' || strlen(path) >= 4096)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `hooks.%s[%zu].path` must be an absolute path",
				     kind, i);
	if (args && !json_is_null(args) &&
	    (!json_is_array(args) || json_array_size(args) > OCI_MAX_ARGS))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `hooks.%s[%zu].args` must be an array of at "
				     "most %d strings",
				     kind, i, OCI_MAX_ARGS);
	json_array_foreach(args, k, v) if (!str_of(v)) return isola_err_set(
		err, EINVAL, "invalid", "config.json: `hooks.%s[%zu].args[%zu]` is not a string",
		kind, i, k);
	if (env && !json_is_null(env) &&
	    (!json_is_array(env) || json_array_size(env) > OCI_MAX_ENV))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `hooks.%s[%zu].env` must be an array of at most "
				     "%d strings",
				     kind, i, OCI_MAX_ENV);
	json_array_foreach(env, k, v)
	{
		const char *s = str_of(v);

		if (!s || !strchr(s, '=') || s[0] == '=')
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `hooks.%s[%zu].env[%zu]` must be "
					     "KEY=VALUE",
					     kind, i, k);
	}
	if (timeout && !json_is_null(timeout) &&
	    (!json_is_integer(timeout) || json_integer_value(timeout) <= 0 ||
	     json_integer_value(timeout) > 86400))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `hooks.%s[%zu].timeout` must be 1-86400 seconds",
				     kind, i);
	out = json_pack("{s:s, s:o, s:o, s:I}", "path", path, "args",
			json_is_array(args) ? json_deep_copy(args) : json_array(), "env",
			json_is_array(env) ? json_deep_copy(env) : json_array(), "timeout",
			(json_int_t)(json_is_integer(timeout) ? json_integer_value(timeout) : 0));
	if (!out)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	json_array_append_new(list, out);
	return 0;
}

/*
 * hooks: prestart, createRuntime, poststart and poststop run on the host by isola-runc (with
 * the privileges of whoever runs it: the engine that wrote config.json). createContainer and
 * startContainer would run inside the container's namespaces: refused. out->hooks gets the
 * checked hooks by kind (NULL when there are none).
 */
static int map_hooks(const json_t *spec, struct oci_mapped *out, struct isola_err **err)
{
	const json_t *hooks = json_object_get(spec, "hooks"), *list, *h;
	const char *name;
	size_t i;
	int r;

	if (!hooks || json_is_null(hooks))
		return 0;
	if (!json_is_object(hooks))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `hooks` must be an object");
	json_object_foreach((json_t *)hooks, name, list)
	{
		bool host = false;
		json_t *mine;

		for (size_t k = 0; host_hooks[k]; k++)
			host = host || !strcmp(name, host_hooks[k]);
		if (json_is_null(list) || (json_is_array(list) && json_array_size(list) == 0))
			continue;
		if (!strcmp(name, "createContainer") || !strcmp(name, "startContainer"))
			return isola_err_set(err, ENOTSUP, "not_supported",
					     "config.json: `hooks.%s` is refused: it would run "
					     "inside the container's namespaces, which isola-runc "
					     "does not enter (docs/oci.md)",
					     name);
		if (!host)
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `hooks.%.32s` is not a hook kind", name);
		if (!json_is_array(list) || json_array_size(list) > OCI_MAX_HOOKS)
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `hooks.%s` must be an array of at most "
					     "%d hooks",
					     name, OCI_MAX_HOOKS);
		if (!out->hooks)
			out->hooks = json_object();
		mine = json_array();
		json_object_set_new(out->hooks, name, mine);
		json_array_foreach(list, i,
				   h) if ((r = map_hook(h, name, i, mine, err)) < 0) return r;
	}
	return 0;
}

/*
 * True when the spec asks for a new network namespace (a `network` entry without a path) and
 * has prestart or createRuntime hooks: the engine programs that namespace itself from a hook
 * (Docker's libnetwork-setkey), so it gets an empty one of isola-runc's, not isola's network.
 */
static bool engine_programs_netns(const json_t *linux_, const json_t *create, const json_t *hooks)
{
	const json_t *ns;
	bool want = false;
	size_t i;

	if (json_object_get(create, "netns"))
		return false;
	json_array_foreach(json_object_get(linux_, "namespaces"), i, ns) want =
		want || !strcmp(str_of(json_object_get(ns, "type")) ?: "", "network");
	return want && (json_array_size(json_object_get(hooks, "prestart")) ||
			json_array_size(json_object_get(hooks, "createRuntime")));
}

/* hostname: the sandbox's (isolad checks the characters: [A-Za-z0-9.-], 1-63). */
static int map_hostname(const json_t *spec, json_t *create, struct isola_err **err)
{
	const json_t *v = json_object_get(spec, "hostname");
	const char *h = str_of(v);

	if (!v || json_is_null(v) || (h && !*h))
		return 0;
	if (!h || strlen(h) > 63)
		return isola_err_set(
			err, EINVAL, "invalid",
			"config.json: `hostname` must be a string of at most 63 bytes");
	json_object_set_new(create, "hostname", json_string(h));
	return 0;
}

static int map_annotations(const json_t *spec, struct oci_mapped *out, struct isola_err **err)
{
	const json_t *ann = json_object_get(spec, "annotations"), *v;
	const char *k;

	out->annotations = json_object();
	if (!ann || json_is_null(ann))
		return 0;
	if (!json_is_object(ann) || json_object_size(ann) > 1024)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `annotations` must be an object of at most "
				     "1024 strings");
	json_object_foreach((json_t *)ann, k, v)
	{
		if (!str_of(v))
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `annotations.%.64s` is not a string", k);
		json_object_set(out->annotations, k, (json_t *)v);
	}
	return 0;
}

/*
 * The annotation `isola.network.allow` ("rule,rule,..." as in a network policy: names,
 * *.suffixes, addresses, CIDRs, name:port) becomes the create's egress policy: default deny,
 * those rules allowed; "" allows nothing. Without it the daemon's default policy applies.
 * isolad checks each rule. On a network the engine brings (a namespace path, or one its
 * hooks program) isola's policy does not apply, so the annotation is refused there.
 */
#define OCI_NET_ANNOTATION "isola.network.allow"
#define OCI_NET_RULES_MAX  256
static int map_network_policy(const json_t *spec, json_t *create, bool engine_netns,
			      struct isola_err **err)
{
	const char *v =
		str_of(json_object_get(json_object_get(spec, "annotations"), OCI_NET_ANNOTATION));
	json_t *allow;

	if (!v)
		return 0;
	if (engine_netns || json_object_get(create, "netns"))
		return isola_err_set(err, ENOTSUP, "not_supported",
				     "config.json: annotation `" OCI_NET_ANNOTATION
				     "` needs isola's "
				     "own network, and the container joins a network namespace "
				     "of the engine's (isola's egress policy does not apply "
				     "there)");
	allow = json_array();
	for (const char *p = v; *p;) {
		size_t n = strcspn(p, ","), b = 0, e = n;

		while (b < e && (p[b] == ' ' || p[b] == '\t'))
			b++;
		while (e > b && (p[e - 1] == ' ' || p[e - 1] == '\t'))
			e--;
		if (e > b && (e - b > 253 || json_array_size(allow) >= OCI_NET_RULES_MAX)) {
			json_decref(allow);
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: annotation `" OCI_NET_ANNOTATION
					     "`: at most %d rules of at most 253 bytes each",
					     OCI_NET_RULES_MAX);
		}
		if (e > b)
			json_array_append_new(allow, json_stringn(p + b, e - b));
		p += n + (p[n] == ',');
	}
	json_object_set_new(create, "network",
			    json_pack("{s:s, s:o}", "default", "deny", "allow", allow));
	return 0;
}

static int map_root(const json_t *spec, const char *bundle, json_t *create, struct isola_err **err)
{
	const char *path = str_of(json_object_get(json_object_get(spec, "root"), "path"));
	char full[1024];
	int n;

	if (!path || !*path)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `root.path` must be a non-empty string");
	if (path[0] == '/')
		n = snprintf(full, sizeof(full), "%s", path);
	else
		n = snprintf(full, sizeof(full), "%s/%s", bundle, path);
	if (n < 0 || (size_t)n >= sizeof(full) - 1 || n > 500)
		return isola_err_set(err, ENAMETOOLONG, "invalid",
				     "config.json: `root.path` is longer than 500 bytes with the "
				     "bundle");
	json_object_set_new(create, "rootfs", json_string(full));
	/* root.readonly (docker run --read-only): the sandbox's root mount read-only. */
	if (json_is_true(json_object_get(json_object_get(spec, "root"), "readonly")))
		json_object_set_new(create, "readonly_root", json_true());
	return 0;
}

/* linux.seccomp: the spec's own profile goes to isolad as the create field `seccomp`, which
 * checks and compiles it and stacks it on isola's filter for the container's processes
 * (docs/oci.md "The spec's seccomp profile"). */
static int map_seccomp(const json_t *linux_, json_t *create, struct isola_err **err)
{
	json_t *sc = json_object_get(linux_, "seccomp");

	if (!sc || json_is_null(sc))
		return 0;
	if (!json_is_object(sc))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `linux.seccomp` must be an object");
	json_object_set_new(create, "seccomp", json_deep_copy(sc));
	return 0;
}

static int map_spec(const json_t *spec, const char *bundle, const char *id, struct oci_mapped *out,
		    struct isola_err **err)
{
	const json_t *proc = json_object_get(spec, "process");
	const json_t *linux_ = json_object_get(spec, "linux");
	const json_t *sysctl = json_object_get(linux_, "sysctl");
	const char *ver = str_of(json_object_get(spec, "ociVersion"));
	int r;

	if (!json_is_object(spec))
		return isola_err_set(err, EINVAL, "invalid", "config.json: not a JSON object");
	if (!ver || strncmp(ver, "1.", 2) != 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `ociVersion` must be a 1.x version");
	if (!json_is_object(proc))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `process` must be an object");
	if (linux_ && !json_is_object(linux_))
		return isola_err_set(err, EINVAL, "invalid",
				     "config.json: `linux` must be an object");
	if (sysctl && !json_is_null(sysctl)) {
		const char *k;
		json_t *v;

		if (!json_is_object(sysctl))
			return isola_err_set(err, EINVAL, "invalid",
					     "config.json: `linux.sysctl` must be an object");
		/* net.* is per network namespace (Docker asks for ip_unprivileged_port_start and
		 * ping_group_range): accepted; those two are applied to a network namespace
		 * isola-runc makes (engine_netns), the rest not. Anything else reaches the host. */
		json_object_foreach((json_t *)sysctl, k, v)
		{
			if (strncmp(k, "net.", 4) != 0)
				return isola_err_set(err, ENOTSUP, "not_supported",
						     "config.json: `linux.sysctl.%.64s` is refused "
						     "(only net.* is accepted)",
						     k);
			if (!str_of(v) || strlen(str_of(v)) > 64 || strchr(str_of(v), '\n'))
				return isola_err_set(err, EINVAL, "invalid",
						     "config.json: `linux.sysctl.%.64s` must be a "
						     "string of at most 64 bytes on one line",
						     k);
			if (!strcmp(k, "net.ipv4.ip_unprivileged_port_start") ||
			    !strcmp(k, "net.ipv4.ping_group_range")) {
				if (!out->net_sysctl)
					out->net_sysctl = json_object();
				json_object_set(out->net_sysctl, k, v);
			}
		}
	}
	out->create = json_pack("{s:s, s:{s:s, s:s}}", "tier", "process", "labels", "oci.id", id,
				"oci.bundle", bundle);
	out->process = json_pack("{s:s, s:b}", "tag", "oci", "tty",
				 json_is_true(json_object_get(proc, "terminal")));
	if (!out->create || !out->process)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	r = map_root(spec, bundle, out->create, err);
	if (r == 0)
		r = map_args(proc, out->process, err);
	if (r == 0)
		r = map_env(proc, out->process, err);
	if (r == 0)
		r = map_cwd_user(proc, out->create, out->process, err);
	if (r == 0)
		r = map_narrowing(proc, out->process, err);
	if (r == 0)
		r = map_resources(linux_, out->create, err);
	if (r == 0)
		r = map_namespaces(linux_, out, err);
	if (r == 0)
		r = map_hooks(spec, out, err);
	if (r == 0)
		out->engine_netns = engine_programs_netns(linux_, out->create, out->hooks);
	if (r == 0)
		r = map_hostname(spec, out->create, err);
	if (r == 0)
		r = map_mounts(spec, bundle, out, err);
	if (r == 0)
		r = map_paths(linux_, "maskedPaths", "masked_paths", out->create, err);
	if (r == 0)
		r = map_paths(linux_, "readonlyPaths", "readonly_paths", out->create, err);
	if (r == 0)
		r = map_seccomp(linux_, out->create, err);
	if (r == 0)
		r = map_annotations(spec, out, err);
	if (r == 0)
		r = map_network_policy(spec, out->create, out->engine_netns, err);
	return r;
}

int oci_config_map(const char *text, size_t len, const char *bundle, const char *id,
		   struct oci_mapped *out, struct isola_err **err)
{
	json_error_t je;
	json_t *spec;
	int r;

	memset(out, 0, sizeof(*out));
	if (len > OCI_CONFIG_MAX)
		return isola_err_set(err, EFBIG, "invalid", "config.json: larger than %u bytes",
				     OCI_CONFIG_MAX);
	/* UNTRUSTED: the bundle's config.json; every field is checked in map_spec. */
	spec = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!spec)
		return isola_err_set(err, EINVAL, "invalid", "config.json: line %d: %s", je.line,
				     je.text);
	r = map_spec(spec, bundle, id, out, err);
	json_decref(spec);
	if (r < 0)
		oci_mapped_fini(out);
	return r;
}

int oci_process_map(const char *text, size_t len, json_t **out, struct isola_err **err)
{
	json_error_t je;
	json_t *proc, *scratch = json_object();
	int r;

	*out = NULL;
	if (len > OCI_CONFIG_MAX)
		return isola_err_set(err, EFBIG, "invalid", "process.json: larger than %u bytes",
				     OCI_CONFIG_MAX);
	/* UNTRUSTED: the engine's process.json, checked field by field like config.json's. */
	proc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!proc) {
		json_decref(scratch);
		return isola_err_set(err, EINVAL, "invalid", "process.json: line %d: %s", je.line,
				     je.text);
	}
	*out = json_pack("{s:s, s:b}", "tag", "oci-exec", "tty",
			 json_is_true(json_object_get(proc, "terminal")));
	r = json_is_object(proc)
		    ? 0
		    : isola_err_set(err, EINVAL, "invalid", "process.json: not a JSON object");
	if (r == 0)
		r = map_args(proc, *out, err);
	if (r == 0)
		r = map_env(proc, *out, err);
	if (r == 0)
		r = map_cwd_user(proc, scratch, *out, err);
	if (r == 0)
		r = map_narrowing(proc, *out, err);
	json_decref(proc);
	json_decref(scratch);
	if (r < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return r;
}

json_t *oci_spec_default(void)
{
	return json_pack(
		"{s:s, s:{s:b, s:{s:i, s:i}, s:[s], s:[s, s], s:s, s:b}, s:{s:s, s:b}, s:s,"
		" s:{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]}}",
		"ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", 0, "gid", 0, "args",
		"sh", "env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"TERM=xterm", "cwd", "/", "noNewPrivileges", 1, "root", "path", "rootfs",
		"readonly", 0, "hostname", "isola", "linux", "namespaces", "type", "pid", "type",
		"network", "type", "ipc", "type", "uts", "type", "mount");
}

json_t *oci_features(void)
{
	/* Hooks run on the host (createContainer, startContainer refused); of mount options, what a bind's mapping reads (others are isola's own:
	 * nosuid, nodev, private). The annotations say what else this slice does (docs/oci.md):
	 * a network namespace path is joined, a pod's ipc and uts mapped (podns.h), other
 * namespace paths refused, binds under /proc,
	 * /sys and /dev and other filesystems not applied. */
	json_t *f = json_pack(
		"{s:s, s:s, s:[s, s, s, s], s:[s, s, s, s], s:{s:[s, s, s, s, s, s, s],"
		" s:{s:b, s:b, s:b}}, s:{s:s, s:s, s:s}}",
		"ociVersionMin", "1.0.0", "ociVersionMax", "1.2.0", "hooks", "prestart",
		"createRuntime", "poststart", "poststop", "mountOptions", "bind", "rbind", "ro",
		"rw", "linux", "namespaces", "cgroup", "ipc", "mount", "network", "pid", "user",
		"uts", "cgroup", "v1", 1, "v2", 1, "systemd", 0, "annotations", "io.isola.runtime",
		"isola-runc: process-tier sandboxes of isolad", "io.isola.namespaces.path",
		"network joined (the operator's isolad checks it); ipc and uts of a pod's "
		"container: its own with the pod's hostname; others refused",
		"io.isola.mounts",
		"binds and tmpfs honoured except under /proc, /sys, /dev; "
		"other filesystems are isola's own or not applied; maskedPaths and readonlyPaths "
		"honoured on top of isola's own");

	/* The spec's profile (docs/oci.md "The spec's seccomp profile"): what isolad compiles. */
	json_object_set_new(
		json_object_get(f, "linux"), "seccomp",
		json_pack("{s:b, s:[s, s, s, s, s, s, s, s], s:[s, s, s, s, s, s, s], s:[s, s, s],"
			  " s:[s, s, s], s:[s, s, s]}",
			  "enabled", 1, "actions", "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO",
			  "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD",
			  "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP", "operators",
			  "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
			  "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE", "archs", "SCMP_ARCH_X86_64",
			  "SCMP_ARCH_X86", "SCMP_ARCH_X32", "knownFlags",
			  "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
			  "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "supportedFlags",
			  "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
			  "SECCOMP_FILTER_FLAG_SPEC_ALLOW"));
	return f;
}
