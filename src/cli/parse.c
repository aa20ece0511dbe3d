/* SPDX-License-Identifier: Apache-2.0 */
/* parse: the CLI's pure logic — argument forms, request builders, codecs — kept I/O-free for tests. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

int cli_parse_kv(json_t *obj, const char *arg, const char *what, struct isola_err **err)
{
	const char *eq = strchr(arg, '=');
	char *key;
	int r;

	if (!eq || eq == arg)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "%s `%s`: expected KEY=VALUE",
				     what, arg);
	key = strndup(arg, (size_t)(eq - arg));
	if (!key)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	r = json_object_set_new(obj, key, json_string(eq + 1));
	free(key);
	if (r < 0)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "%s `%s`: not valid UTF-8", what,
				     arg);
	return 0;
}

static bool is_id_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

int cli_parse_cp_arg(const char *arg, struct cli_cp_arg *out, struct isola_err **err)
{
	const char *colon = strchr(arg, ':');
	const char *slash = strchr(arg, '/');
	size_t n;

	memset(out, 0, sizeof(*out));
	out->path = arg;
	if (!*arg)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "empty path");
	if (!colon || colon == arg || (slash && slash < colon))
		return 0;
	for (const char *p = arg; p < colon; p++)
		if (!is_id_char(*p))
			return 0;
	n = (size_t)(colon - arg);
	if (n >= sizeof(out->id))
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "`%s`: sandbox id too long", arg);
	if (!colon[1])
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "`%s`: missing path after `:`",
				     arg);
	memcpy(out->id, arg, n);
	out->id[n] = '\0';
	out->remote = true;
	out->path = colon + 1;
	return 0;
}

int cli_parse_cp_args(const char *src, const char *dst, struct cli_cp_arg *s, struct cli_cp_arg *d,
		      struct isola_err **err)
{
	int r;

	r = cli_parse_cp_arg(src, s, err);
	if (r < 0)
		return r;
	r = cli_parse_cp_arg(dst, d, err);
	if (r < 0)
		return r;
	if (s->remote == d->remote)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
				     s->remote ? "copying between sandboxes is not supported"
					       : "one of SRC and DST must be ID:PATH");
	return 0;
}

int cli_cp_map_entry(const char *name, const char *dst, bool into_dir, char *out, size_t outlen)
{
	const char *rest;
	int n;

	while (name[0] == '.' && name[1] == '/')
		name += 2;
	/* A hostile daemon (or a sandbox feeding it) must not make us write outside DST. */
	if (!*name || *name == '/')
		return -EINVAL;
	for (const char *p = name; *p;) {
		size_t len = strcspn(p, "/");

		if (len == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		p += len;
		while (*p == '/')
			p++;
	}
	if (into_dir) {
		n = snprintf(out, outlen, "%s/%s", dst, name);
	} else {
		rest = strchr(name, '/');
		while (rest && *rest == '/')
			rest++;
		if (!rest || !*rest)
			n = snprintf(out, outlen, "%s", dst);
		else
			n = snprintf(out, outlen, "%s/%s", dst, rest);
	}
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	/* Strip a trailing slash ("dir/" entries) so the path names the directory itself. */
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

int cli_path_split(const char *path, char *dir, size_t dirlen, char *name, size_t namelen)
{
	size_t n = strlen(path), d;
	const char *slash;

	while (n > 1 && path[n - 1] == '/')
		n--;
	slash = memrchr(path, '/', n);
	if (!slash) {
		if (n >= namelen || dirlen < 2)
			return -ENAMETOOLONG;
		snprintf(dir, dirlen, ".");
		snprintf(name, namelen, "%.*s", (int)n, path);
		return 0;
	}
	d = (size_t)(slash - path);
	if (n - d - 1 >= namelen || d + 2 > dirlen)
		return -ENAMETOOLONG;
	snprintf(name, namelen, "%.*s", (int)(n - d - 1), slash + 1);
	while (d > 1 && path[d - 1] == '/')
		d--;
	snprintf(dir, dirlen, "%.*s", d ? (int)d : 1, path);
	return 0;
}

int cli_parse_seconds(const char *s, long *out)
{
	char *end;
	long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v > 366L * 24 * 3600)
		return -EINVAL;
	*out = v;
	return 0;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{"HUP", SIGHUP},       {"INT", SIGINT},	  {"QUIT", SIGQUIT},   {"ILL", SIGILL},
	{"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
	{"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
	{"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
	{"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
	{"TTOU", SIGTTOU},     {"URG", SIGURG},	  {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
	{"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"SYS", SIGSYS},
};

int cli_parse_signal(const char *s)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	if (isdigit((unsigned char)*s)) {
		errno = 0;
		v = strtol(s, &end, 10);
		if (errno || *end || v < 1 || v > 64)
			return -EINVAL;
		return (int)v;
	}
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
		if (!strcasecmp(s, signals[i].name))
			return signals[i].sig;
	return -EINVAL;
}

const char *cli_signal_name(int sig)
{
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
		if (signals[i].sig == sig)
			return signals[i].name;
	return NULL;
}

int cli_exit_status(const json_t *ev)
{
	const json_t *code, *sig;

	if (!json_is_object(ev))
		return 125;
	if (json_is_true(json_object_get(ev, "timed_out")))
		return 124;
	sig = json_object_get(ev, "signal");
	if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128)
		return 128 + (int)json_integer_value(sig);
	if (json_is_string(sig)) {
		int s = cli_parse_signal(json_string_value(sig));

		if (s > 0)
			return 128 + s;
	}
	code = json_object_get(ev, "exit_code");
	if (json_is_integer(code) && json_integer_value(code) >= 0 &&
	    json_integer_value(code) <= 255)
		return (int)json_integer_value(code);
	return 125;
}

/* A growable string for cli_pathf(). */
struct sbuf {
	char *p;    /* heap buffer, NUL-terminated, or NULL after a failure */
	size_t len; /* bytes used, without the NUL */
	size_t cap; /* bytes allocated */
};

static void sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (!b->p)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *np = realloc(b->p, cap);

		if (!np) {
			free(b->p);
			b->p = NULL;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sbuf_add_escaped(struct sbuf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char enc[3] = {'%', hex[c >> 4], hex[c & 15]};

		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
			sbuf_add(b, (const char *)s, 1);
		else
			sbuf_add(b, enc, 3);
	}
}

char *cli_pathf(const char *fmt, ...)
{
	struct sbuf b = {.p = malloc(64), .cap = 64};
	char num[32];
	va_list ap;

	if (!b.p)
		return NULL;
	b.p[0] = '\0';
	va_start(ap, fmt);
	for (const char *f = fmt; *f; f++) {
		if (*f != '%') {
			sbuf_add(&b, f, 1);
			continue;
		}
		f++;
		if (*f == 's') {
			sbuf_add_escaped(&b, va_arg(ap, const char *));
		} else if (*f == 'd') {
			snprintf(num, sizeof(num), "%d", va_arg(ap, int));
			sbuf_add(&b, num, strlen(num));
		} else if (f[0] == 'l' && f[1] == 'd') {
			f++;
			snprintf(num, sizeof(num), "%ld", va_arg(ap, long));
			sbuf_add(&b, num, strlen(num));
		} else if (*f == '%') {
			sbuf_add(&b, "%", 1);
		} else {
			free(b.p);
			b.p = NULL;
			break;
		}
	}
	va_end(ap);
	return b.p;
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64val(char c)
{
	const char *p = c ? strchr(b64chars, c) : NULL;

	return p ? (int)(p - b64chars) : -1;
}

long cli_b64_decode(const char *in, size_t len, unsigned char *out)
{
	size_t o = 0;

	/* UNTRUSTED: daemon-supplied text; every quantum is checked before it is written. */
	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		bool last = i + 4 == len;

		for (int k = 0; k < 4; k++) {
			v[k] = in[i + k] == '=' && last && k >= 2 ? -2 : b64val(in[i + k]);
			if (v[k] == -1)
				return -EINVAL;
		}
		if (v[2] == -2 && v[3] != -2)
			return -EINVAL;
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (v[2] != -2)
			out[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		if (v[3] != -2 && v[2] != -2)
			out[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
	}
	return (long)o;
}

size_t cli_b64_encode(const unsigned char *in, size_t len, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[o++] = b64chars[v >> 18 & 63];
		out[o++] = b64chars[v >> 12 & 63];
		out[o++] = i + 1 < len ? b64chars[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? b64chars[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

int cli_parse_url(const char *url, char *host, size_t hostlen, int *port, char *prefix,
		  size_t prefixlen)
{
	const char *h, *end, *colon, *slash;
	size_t n;

	if (strncmp(url, "http://", 7))
		return -EINVAL;
	h = url + 7;
	slash = strchr(h, '/');
	end = slash ? slash : h + strlen(h);
	colon = memchr(h, ':', (size_t)(end - h));
	*port = 80;
	if (colon) {
		char *pe;
		long p = strtol(colon + 1, &pe, 10);

		if (pe != end || p < 1 || p > 65535)
			return -EINVAL;
		*port = (int)p;
	}
	n = (size_t)((colon ? colon : end) - h);
	if (n == 0)
		return -EINVAL;
	if (n >= hostlen)
		return -ENAMETOOLONG;
	memcpy(host, h, n);
	host[n] = '\0';
	n = strlen(end);
	while (n > 0 && end[n - 1] == '/')
		n--;
	if (n >= prefixlen)
		return -ENAMETOOLONG;
	memcpy(prefix, end, n);
	prefix[n] = '\0';
	return 0;
}

int cli_set_size(json_t *req, const char *key, const char *arg, struct isola_err **err)
{
	uint64_t v;

	if (util_parse_size(arg, &v) < 0 || v == 0 || v > (uint64_t)INT64_MAX)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
				     "--%s `%s`: expected a size like 512M, 2G or bytes", key, arg);
	json_object_set_new(req, key, json_integer((json_int_t)v));
	return 0;
}

/* Sets a seconds field of the create request; the error names the flag. */
static int set_seconds(json_t *req, const char *key, const char *flag, const char *arg,
		       struct isola_err **err)
{
	long v;

	if (cli_parse_seconds(arg, &v) < 0)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "%s `%s`: expected seconds", flag,
				     arg);
	json_object_set_new(req, key, json_integer(v));
	return 0;
}

/* One option of --tmpfs into the entry m; the error names it. */
static int tmpfs_opt(json_t *m, const char *o, const char *arg, struct isola_err **err)
{
	uint64_t v;
	char *end;

	if (!strcmp(o, "ro") || !strcmp(o, "rw"))
		return json_object_set_new(m, "readonly", json_boolean(!strcmp(o, "ro")));
	if (!strcmp(o, "noexec") || !strcmp(o, "exec"))
		return json_object_set_new(m, "noexec", json_boolean(!strcmp(o, "noexec")));
	if (!strcmp(o, "nosuid") || !strcmp(o, "nodev"))
		return 0; /* always so in a sandbox */
	if (!strncmp(o, "size=", 5)) {
		if (util_parse_size(o + 5, &v) < 0 || v == 0 || v > (uint64_t)INT64_MAX)
			return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
					     "--tmpfs `%s`: `%s`: expected a size like 64M", arg,
					     o);
		return json_object_set_new(m, "size", json_integer((json_int_t)v));
	}
	if (!strncmp(o, "mode=", 5)) {
		errno = 0;
		v = strtoull(o + 5, &end, 8);
		if (errno || end == o + 5 || *end || v > 07777)
			return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
					     "--tmpfs `%s`: `%s`: expected an octal mode like 1777",
					     arg, o);
		return json_object_set_new(m, "mode", json_integer((json_int_t)v));
	}
	if (!strcmp(o, "suid") || !strcmp(o, "dev"))
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
				     "--tmpfs `%s`: `%s` is not allowed: a sandbox's mounts are "
				     "always nosuid and nodev",
				     arg, o);
	return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
			     "--tmpfs `%s`: unknown option `%s` (ro, rw, noexec, exec, size=SIZE, "
			     "mode=OCTAL)",
			     arg, o);
}

int cli_add_tmpfs(json_t *req, const char *arg, struct isola_err **err)
{
	const char *colon = strchr(arg, ':');
	json_t *list = json_object_get(req, "tmpfs"), *m;
	char *opts, *o, *save = NULL;
	int r = 0;

	if (!*arg || colon == arg)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
				     "--tmpfs `%s`: expected PATH[:OPTIONS]", arg);
	m = json_pack("{s:s%}", "destination", arg, colon ? (size_t)(colon - arg) : strlen(arg));
	if (!m)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	opts = colon ? strdup(colon + 1) : NULL;
	if (colon && !opts) {
		json_decref(m);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	for (o = opts ? strtok_r(opts, ",", &save) : NULL; o && r == 0;
	     o = strtok_r(NULL, ",", &save))
		r = tmpfs_opt(m, o, arg, err);
	free(opts);
	if (r < 0) {
		json_decref(m);
		return -EINVAL;
	}
	if (!list) {
		list = json_array();
		json_object_set_new(req, "tmpfs", list);
	}
	return json_array_append_new(list, m);
}

int cli_set_cpu(json_t *req, const char *arg, struct isola_err **err)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v > 0) || v > 1024)
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
				     "--cpu `%s`: expected a positive number of CPUs", arg);
	if (v == floor(v))
		json_object_set_new(req, "cpu", json_integer((json_int_t)v));
	else
		json_object_set_new(req, "cpu", json_real(v));
	return 0;
}

/* Adds `value` to the object req[key] (created on first use) as KEY=VALUE. */
static int add_kv(json_t *req, const char *key, const char *arg, const char *what,
		  struct isola_err **err)
{
	json_t *obj = json_object_get(req, key);

	if (!obj) {
		obj = json_object();
		json_object_set_new(req, key, obj);
	}
	return cli_parse_kv(obj, arg, what, err);
}

enum {
	OPT_TEMPLATE = 256,
	OPT_TIER,
	OPT_CPU,
	OPT_MEMORY,
	OPT_DISK,
	OPT_ENV_FILE,
	OPT_TIMEOUT,
	OPT_TTL,
	OPT_LABEL,
	OPT_FROM_SNAPSHOT,
	OPT_ALLOW,	  /* --allow RULE: network.allow (docs/network.md) */
	OPT_DENY,	  /* --deny RULE: network.deny */
	OPT_EGRESS,	  /* --egress allow|deny: network.default */
	OPT_ON_TIMEOUT,	  /* --on-timeout kill|pause|hibernate (docs/persistence.md) */
	OPT_IDLE_TIMEOUT, /* --idle-timeout S */
	OPT_AUTO_RESUME,  /* --auto-resume / --no-auto-resume */
	OPT_NO_AUTO_RESUME,
	OPT_CAP_ADD,	   /* --cap-add CAP: cap_add[] (docs/process-tier.md, "Capabilities") */
	OPT_CAP_DROP,	   /* --cap-drop CAP|ALL: cap_drop[] */
	OPT_TMPFS,	   /* --tmpfs PATH[:OPTS]: tmpfs[] (docs/oci.md) */
	OPT_MASK_PATH,	   /* --mask-path PATH: masked_paths[] */
	OPT_READONLY_PATH, /* --readonly-path PATH: readonly_paths[] */
	OPT_NAME,
	OPT_RM,
	OPT_READ_ONLY, /* --read-only: readonly_root (docs/process-tier.md, "Read-only root") */
};

#define RUN    (1u << CLI_SB_RUN)
#define CREATE (1u << CLI_SB_CREATE)

const struct cli_opt cli_sandbox_opts[] = {
	{"name", OPT_NAME, "NAME", "name the sandbox (unique per tenant; usable wherever an id is)",
	 0},
	{"template", OPT_TEMPLATE, "TEMPLATE", "template to start from (default: the daemon's)", 0},
	{"tier", OPT_TIER, "TIER", "isolation tier: process or microvm", 0},
	{"cpu", OPT_CPU, "N", "CPU limit, e.g. 0.5 or 2", 0},
	{"memory", OPT_MEMORY, "SIZE", "memory limit, e.g. 512M or 2G", 0},
	{"disk", OPT_DISK, "SIZE", "disk quota, e.g. 1G", 0},
	{"env", 'e', "KEY=VALUE", "set an environment variable (repeatable)", 0},
	{"env-file", OPT_ENV_FILE, "FILE", "read KEY=VALUE lines from FILE (# comments)", 0},
	{"workdir", 'w', "DIR", "working directory", 0},
	{"user", 'u', "USER", "user to run as", 0},
	{"interactive", 'i', NULL, "keep stdin attached", RUN},
	{"tty", 't', NULL, "allocate a terminal", RUN},
	{"rm", OPT_RM, NULL, "accepted for docker habits: run always destroys the sandbox", RUN},
	{"timeout", OPT_TIMEOUT, "SECONDS", "kill the command after SECONDS (exit 124)", RUN},
	{"ttl", OPT_TTL, "SECONDS", "destroy the sandbox after SECONDS", CREATE},
	{"label", 'l', "KEY=VALUE", "attach a label (repeatable)", CREATE},
	{"from-snapshot", OPT_FROM_SNAPSHOT, "SNAPSHOT", "start from a named snapshot", 0},
	{"allow", OPT_ALLOW, "RULE", "allow egress to RULE (docs/network.md)", 0},
	{"deny", OPT_DENY, "RULE", "deny egress to RULE", 0},
	{"egress", OPT_EGRESS, "POLICY", "default egress policy: allow or deny", 0},
	{"on-timeout", OPT_ON_TIMEOUT, "ACTION", "at the ttl: kill, pause or hibernate", CREATE},
	{"idle-timeout", OPT_IDLE_TIMEOUT, "SECONDS", "apply --on-timeout after SECONDS idle",
	 CREATE},
	{"auto-resume", OPT_AUTO_RESUME, NULL, "resume a paused sandbox on the next request",
	 CREATE},
	{"no-auto-resume", OPT_NO_AUTO_RESUME, NULL, "do not resume on requests", CREATE},
	{"cap-add", OPT_CAP_ADD, "CAP", "give root this capability too (docs/process-tier.md)", 0},
	{"cap-drop", OPT_CAP_DROP, "CAP", "take CAP (or ALL) from root's default set", 0},
	{"tmpfs", OPT_TMPFS, "PATH[:OPTS]",
	 "mount a tmpfs at PATH; OPTS: ro, rw, noexec, exec, size=SIZE, mode=OCTAL (repeatable)",
	 0},
	{"mask-path", OPT_MASK_PATH, "PATH", "hide PATH from the sandbox's processes (repeatable)",
	 0},
	{"readonly-path", OPT_READONLY_PATH, "PATH", "make PATH read-only inside (repeatable)", 0},
	{"read-only", OPT_READ_ONLY, NULL, "make the root filesystem read-only (/dev/shm stays)",
	 0},
	{NULL, 0, NULL, NULL, 0},
};

/* Appends a string to the request's list `key`; isolad parses and judges it (an unknown
 * capability, a bad path come back as 400 naming it). */
static int add_str(json_t *req, const char *key, const char *name)
{
	json_t *arr = json_object_get(req, key);

	if (!arr) {
		arr = json_array();
		json_object_set_new(req, key, arr);
	}
	return json_array_append_new(arr, json_string(name));
}

int cli_parse_env_file(json_t *env, const char *path, struct isola_err **err)
{
	char line[8192];
	FILE *f = fopen(path, "re");
	int n = 0, r = 0;

	if (!f)
		return isola_err_sys(err, errno, CLI_ERR_USAGE, "--env-file `%s`", path);
	while (r == 0 && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		char *p = line, what[64];

		n++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#')
			continue;
		snprintf(what, sizeof(what), "--env-file line %d", n);
		r = cli_parse_kv(env, p, what, err);
	}
	fclose(f);
	return r;
}

/* Adds one egress rule to list `key` of the request's `network` policy (key NULL: the default). */
static int add_net(json_t *req, const char *key, const char *val, struct isola_err **err)
{
	json_t *net = json_object_get(req, "network"), *arr;

	if (!net) {
		net = json_object();
		json_object_set_new(req, "network", net);
	}
	if (!key) {
		if (strcmp(val, "allow") != 0 && strcmp(val, "deny") != 0)
			return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
					     "--egress `%s`: expected allow or deny", val);
		return json_object_set_new(net, "default", json_string(val));
	}
	arr = json_object_get(net, key);
	if (!arr) {
		arr = json_array();
		json_object_set_new(net, key, arr);
	}
	return json_array_append_new(arr, json_string(val));
}

static int sandbox_opt(char *const argv[], int c, enum cli_sandbox_mode mode,
		       struct cli_sandbox_args *out, struct isola_err **err)
{
	json_t *req = out->req;
	long v;

	switch (c) {
	case OPT_TEMPLATE:
		json_object_set_new(req, "template", json_string(optarg));
		return 0;
	case OPT_TIER:
		json_object_set_new(req, "tier", json_string(optarg));
		return 0;
	case OPT_FROM_SNAPSHOT:
		json_object_set_new(req, "snapshot", json_string(optarg));
		return 0;
	case OPT_ALLOW:
		return add_net(req, "allow", optarg, err);
	case OPT_DENY:
		return add_net(req, "deny", optarg, err);
	case OPT_EGRESS:
		return add_net(req, NULL, optarg, err);
	case OPT_CPU:
		return cli_set_cpu(req, optarg, err);
	case OPT_MEMORY:
		return cli_set_size(req, "memory", optarg, err);
	case OPT_DISK:
		return cli_set_size(req, "disk", optarg, err);
	case 'e':
		return add_kv(req, "env", optarg, "--env", err);
	case OPT_ENV_FILE:
		if (!json_object_get(req, "env"))
			json_object_set_new(req, "env", json_object());
		return cli_parse_env_file(json_object_get(req, "env"), optarg, err);
	case OPT_NAME:
		json_object_set_new(req, "name", json_string(optarg));
		return 0;
	case 'i':
		out->interactive = true;
		return 0;
	case 't':
		out->tty = true;
		return 0;
	case OPT_RM:
		return 0;
	case 'w':
		json_object_set_new(req, "workdir", json_string(optarg));
		return 0;
	case OPT_CAP_ADD:
		return add_str(req, "cap_add", optarg);
	case OPT_CAP_DROP:
		return add_str(req, "cap_drop", optarg);
	case OPT_TMPFS:
		return cli_add_tmpfs(req, optarg, err);
	case OPT_MASK_PATH:
		return add_str(req, "masked_paths", optarg);
	case OPT_READONLY_PATH:
		return add_str(req, "readonly_paths", optarg);
	case OPT_READ_ONLY:
		json_object_set_new(req, "readonly_root", json_true());
		return 0;
	case 'u':
		json_object_set_new(req, "user", json_string(optarg));
		return 0;
	case OPT_TIMEOUT:
		if (mode != CLI_SB_RUN)
			return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
					     "--timeout applies to run and exec; use --ttl");
		if (cli_parse_seconds(optarg, &v) < 0)
			return isola_err_set(err, EINVAL, CLI_ERR_USAGE,
					     "--timeout `%s`: expected seconds", optarg);
		out->timeout_s = v;
		return 0;
	case OPT_TTL:
		if (mode != CLI_SB_CREATE)
			break;
		return set_seconds(req, "ttl", "--ttl", optarg, err);
	case 'l':
		if (mode != CLI_SB_CREATE)
			break;
		return add_kv(req, "labels", optarg, "--label", err);
	case OPT_ON_TIMEOUT: /* isolad names what it refuses (tier, policy) */
		if (mode != CLI_SB_CREATE)
			break;
		json_object_set_new(req, "on_timeout", json_string(optarg));
		return 0;
	case OPT_IDLE_TIMEOUT:
		if (mode != CLI_SB_CREATE)
			break;
		return set_seconds(req, "idle_timeout", "--idle-timeout", optarg, err);
	case OPT_AUTO_RESUME:
	case OPT_NO_AUTO_RESUME:
		if (mode != CLI_SB_CREATE)
			break;
		json_object_set_new(req, "auto_resume", json_boolean(c == OPT_AUTO_RESUME));
		return 0;
	case 'h':
		out->help = true;
		return 0;
	default:
		break;
	}
	return cli_opt_error(argv, c, err);
}

int cli_opt_error(char *const argv[], int c, struct isola_err **err)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "option `%s` needs a value", arg);
	if (optopt > 0 && optopt < 128 && isprint(optopt))
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "unknown option `-%c`", optopt);
	return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "unknown option `%s`", arg);
}

int cli_parse_sandbox_args(int argc, char **argv, enum cli_sandbox_mode mode, struct cli_globals *g,
			   struct cli_sandbox_args *out, struct isola_err **err)
{
	struct cli_optstate st = {.opts = cli_sandbox_opts,
				  .mask = 1u << mode,
				  .free_tail = mode == CLI_SB_RUN ? 1 : 0,
				  .g = g};
	int c, r;

	memset(out, 0, sizeof(*out));
	out->req = json_object();
	if (!out->req)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	while ((c = cli_opt_next(&st, argc, argv)) != -1) {
		if (c == '?' && mode == CLI_SB_CREATE && optind > 0 &&
		    !strncmp(argv[optind - 1], "--timeout", 9))
			c = OPT_TIMEOUT; /* say what to use instead */
		r = sandbox_opt(argv, c, mode, out, err);
		if (r < 0) {
			json_decref(out->req);
			out->req = NULL;
			return r;
		}
	}
	out->cmd_index = optind;
	if (out->help)
		return 0;
	if (mode == CLI_SB_CREATE && optind < argc) {
		json_decref(out->req);
		out->req = NULL;
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "unexpected argument `%s`",
				     argv[optind]);
	}
	if (mode == CLI_SB_RUN && optind >= argc) {
		json_decref(out->req);
		out->req = NULL;
		return isola_err_set(err, EINVAL, CLI_ERR_USAGE, "missing command to run");
	}
	return 0;
}
