/* SPDX-License-Identifier: Apache-2.0 */
/* bench_egress: `isola bench --egress URL` — a download through the egress proxy against the
 * same download straight from the host. */
#include "bench_egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "bench.h"
#include "parse.h"

/*
 * Both sides run the same downloader, curl, with the same options, so the comparison is of
 * the paths, not of two clients: on the host it is forked by the CLI; in the sandbox it is
 * run by the exec API (the host template binds the host's /usr, so it is the same binary).
 * The sandbox's path is its veth, the nftables redirect and isolad's proxy (Host read, the
 * name resolved by isolad's resolver, the address checked), then the upstream connection.
 * Rounds alternate direct and proxied so that load which comes and goes moves both alike.
 */

/* curl's report of one download: what -w prints, nothing else on stdout. */
#define EGRESS_WRITE_OUT "%{size_download} %{time_total}\n"
#define EGRESS_MAX_ARGS	 16

static volatile sig_atomic_t egress_signal; /* set by a SIGINT, SIGTERM or SIGHUP */

static void on_egress_signal(int sig)
{
	egress_signal = sig;
}

int bench_egress_parse(const char *url, const char *resolve, struct bench_egress_target *t,
		       char *why, size_t why_len)
{
	static const char scheme[] = "http://";
	const char *host, *end, *p;
	size_t n;
	unsigned char addr[16];

	memset(t, 0, sizeof(*t));
	if (!url || !*url) {
		snprintf(why, why_len, "--egress needs a URL: http://NAME[:PORT]/PATH");
		return -EINVAL;
	}
	if (strncasecmp(url, scheme, sizeof(scheme) - 1) != 0) {
		snprintf(why, why_len,
			 "--egress `%s`: only plain http:// URLs (both sides must move the same "
			 "bytes, with no certificate of a lab name to check): "
			 "http://NAME[:PORT]/PATH",
			 url);
		return -EINVAL;
	}
	host = url + sizeof(scheme) - 1;
	end = host + strcspn(host, ":/?#");
	n = (size_t)(end - host);
	if (n == 0 || n >= sizeof(t->name) || host[0] == '-' || host[0] == '.') {
		snprintf(why, why_len, "--egress `%s`: %s", url,
			 n == 0 ? "no host name" : "not a host name");
		return -EINVAL;
	}
	for (p = host; p < end; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.')) {
			snprintf(why, why_len,
				 "--egress `%s`: not a host name (letters, digits, `-` and `.` "
				 "only)",
				 url);
			return -EINVAL;
		}
	memcpy(t->name, host, n);
	t->name[n] = '\0';
	t->port = 80;
	if (*end == ':') {
		char *e;
		unsigned long port;

		errno = 0;
		port = strtoul(end + 1, &e, 10);
		if (e == end + 1 || errno || port < 1 || port > 65535 || (*e && *e != '/')) {
			snprintf(why, why_len, "--egress `%s`: the port must be 1-65535", url);
			return -EINVAL;
		}
		t->port = (unsigned)port;
		end = e;
	}
	if (*end && *end != '/') {
		snprintf(why, why_len, "--egress `%s`: the path must start with `/`", url);
		return -EINVAL;
	}
	if (resolve && inet_pton(AF_INET, resolve, addr) != 1 &&
	    inet_pton(AF_INET6, resolve, addr) != 1) {
		snprintf(why, why_len, "--egress-resolve `%s`: not an IPv4 or IPv6 address",
			 resolve);
		return -EINVAL;
	}
	t->url = url;
	t->resolve = resolve;
	return 0;
}

/* The curl command line of one download into argv (NULL-terminated); with the host's
 * --resolve when direct (resolve_arg holds its text). */
static void curl_argv(const struct bench_egress_target *t, bool direct, char *resolve_arg,
		      size_t resolve_len, const char *argv[EGRESS_MAX_ARGS])
{
	size_t i = 0;

	argv[i++] = "curl";
	argv[i++] = "-q"; /* no ~/.curlrc: the same options on both sides */
	argv[i++] = "-sS";
	argv[i++] = "--fail"; /* an HTTP error is a failed download, not a small one */
	argv[i++] = "--noproxy";
	argv[i++] = "*"; /* never an http_proxy of the environment */
	argv[i++] = "-o";
	argv[i++] = "/dev/null";
	argv[i++] = "-w";
	argv[i++] = EGRESS_WRITE_OUT;
	if (direct && t->resolve) {
		snprintf(resolve_arg, resolve_len,
			 strchr(t->resolve, ':') ? "%s:%u:[%s]" : "%s:%u:%s", t->name, t->port,
			 t->resolve);
		argv[i++] = "--resolve";
		argv[i++] = resolve_arg;
	}
	argv[i++] = t->url;
	argv[i] = NULL;
}

/* One download's result. */
struct egress_dl {
	long long bytes; /* size_download */
	double seconds;	 /* time_total */
};

/* Judges what curl said (exit status, its -w line, its stderr) for side; 0 or -errno. */
static int egress_result(const char *side, const struct bench_egress_target *t, int exit_code,
			 const char *out, const char *errtext, struct egress_dl *dl,
			 struct isola_err **err)
{
	char msg[512];
	size_t n;

	snprintf(msg, sizeof(msg), "%s", errtext ? errtext : "");
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	if (exit_code != 0)
		return isola_err_set(err, EIO, "unavailable",
				     "bench --egress: %s of %s failed (curl exit %d): %s", side,
				     t->url, exit_code, n ? msg : "(no message)");
	if (!out || sscanf(out, "%lld %lf", &dl->bytes, &dl->seconds) != 2 || dl->bytes < 0 ||
	    dl->seconds < 0)
		return isola_err_set(err, EPROTO, "internal",
				     "bench --egress: %s of %s: curl printed `%s`, not its size "
				     "and time",
				     side, t->url, out ? out : "");
	if (dl->bytes == 0)
		return isola_err_set(err, EIO, "unavailable",
				     "bench --egress: %s of %s got 0 bytes", side, t->url);
	if (dl->seconds <= 0)
		dl->seconds = 1e-6; /* below curl's resolution */
	return 0;
}

/* The whole of a memfd as a string (caller frees), or NULL. */
static char *memfd_text(int fd)
{
	off_t size = lseek(fd, 0, SEEK_END);
	char *s;

	if (size < 0 || size > 1 << 20 || !(s = malloc((size_t)size + 1)))
		return NULL;
	if (pread(fd, s, (size_t)size, 0) != size) {
		free(s);
		return NULL;
	}
	s[size] = '\0';
	return s;
}

/* The host's direct download: curl forked here, its output in memfds. */
static int download_direct(const struct bench_egress_target *t, struct egress_dl *dl,
			   struct isola_err **err)
{
	static const char side[] = "the host's direct download";
	const char *argv[EGRESS_MAX_ARGS];
	char resolve_arg[400];
	cleanup_free char *out = NULL, *errtext = NULL;
	cleanup_fd int ofd = memfd_create("isola-bench-out", MFD_CLOEXEC);
	cleanup_fd int efd = memfd_create("isola-bench-err", MFD_CLOEXEC);
	int status;
	pid_t pid;

	curl_argv(t, true, resolve_arg, sizeof(resolve_arg), argv);
	if (ofd < 0 || efd < 0)
		return isola_err_sys(err, errno, NULL, "bench --egress: memfd");
	pid = fork();
	if (pid < 0)
		return isola_err_sys(err, errno, NULL, "bench --egress: fork");
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, 0) < 0 || dup2(ofd, 1) < 0 || dup2(efd, 2) < 0)
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "cannot run curl: %s", strerror(errno));
		_exit(127);
	}
	/* An interrupt (no SA_RESTART) ends the download; the wait goes on until it exits. */
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return isola_err_sys(err, errno, NULL, "bench --egress: wait for curl");
		kill(pid, SIGTERM);
	}
	if (egress_signal)
		return isola_err_set(err, EINTR, "cancelled", "bench --egress: interrupted");
	out = memfd_text(ofd);
	errtext = memfd_text(efd);
	return egress_result(side, t,
			     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out,
			     errtext, dl, err);
}

/* The sandbox's download through the proxy: the same curl run by the exec API. */
static int download_proxied(struct client *cl, const char *exec_path,
			    const struct bench_egress_target *t, struct egress_dl *dl,
			    struct isola_err **err)
{
	static const char side[] = "the sandbox's download through the proxy";
	const char *argv[EGRESS_MAX_ARGS];
	json_t *cmd = json_array(), *body, *res = NULL;
	int r;

	curl_argv(t, false, NULL, 0, argv);
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	body = json_pack("{s:o}", "cmd", cmd);
	if (!body)
		return isola_err_set(err, ENOMEM, NULL, "bench --egress: out of memory");
	client_set_cancel_flag(&egress_signal);
	r = client_json(cl, "POST", exec_path, body, &res, err);
	client_set_cancel_flag(NULL);
	json_decref(body);
	if (r < 0)
		return egress_signal
			       ? r
			       : isola_err_wrap(err, "bench --egress: %s of %s", side, t->url);
	r = egress_result(side, t, (int)json_integer_value(json_object_get(res, "exit_code")),
			  json_string_value(json_object_get(res, "stdout")),
			  json_string_value(json_object_get(res, "stderr")), dl, err);
	json_decref(res);
	return r;
}

/* The report of the rounds (both sides' seconds per round) and isolad's CPU (< 0: none). */
static json_t *egress_report(const struct bench_egress_target *t, int rounds, long long bytes,
			     double *direct, double *proxied, double isolad_cpu_s)
{
	json_t *jd = json_array(), *jp = json_array(), *rep;
	double lo = 0, hi = 0, d50, p50;

	for (int i = 0; i < rounds; i++) {
		double ratio = direct[i] / proxied[i]; /* throughput: the same bytes each */

		json_array_append_new(jd, json_real(direct[i]));
		json_array_append_new(jp, json_real(proxied[i]));
		lo = i == 0 || ratio < lo ? ratio : lo;
		hi = i == 0 || ratio > hi ? ratio : hi;
	}
	d50 = bench_median(direct, (size_t)rounds);
	p50 = bench_median(proxied, (size_t)rounds);
	rep = json_pack("{s:s, s:s, s:i, s:I, s:{s:f, s:f, s:o}, s:{s:f, s:f, s:o}, s:f, s:f, s:f}",
			"url", t->url, "name", t->name, "rounds", rounds, "bytes",
			(json_int_t)bytes, "direct", "seconds_p50", d50, "mbps_p50",
			(double)bytes / d50 / 1e6, "seconds", jd, "proxied", "seconds_p50", p50,
			"mbps_p50", (double)bytes / p50 / 1e6, "seconds", jp,
			"ratio_proxied_to_direct", d50 / p50, "ratio_per_round_min", lo,
			"ratio_per_round_max", hi);
	if (rep && isolad_cpu_s >= 0)
		json_object_set_new(rep, "isolad_cpu_s_per_gb",
				    json_real(isolad_cpu_s / ((double)bytes * rounds / 1e9)));
	return rep;
}

int bench_egress(struct cli *cli, struct client *cl, const struct bench_egress_target *t,
		 int rounds, json_t **report, struct isola_err **err)
{
	struct sigaction sa = {.sa_handler = on_egress_signal}, old[3];
	static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
	cleanup_free double *direct = calloc((size_t)rounds, sizeof(double));
	cleanup_free double *proxied = calloc((size_t)rounds, sizeof(double));
	cleanup_free char *exec_path = NULL, *del = NULL;
	/* isolad's CPU is readable only when it runs here, reached by its unix socket */
	long isolad = cli->conf.url ? 0 : bench_daemon_pid(cli->conf.socket);
	double cpu = isolad > 0 ? 0 : -1;
	json_t *body, *sb = NULL;
	long long bytes = 0;
	const char *id;
	int r;

	if (!direct || !proxied)
		return isola_err_sys(err, ENOMEM, NULL, "bench --egress");
	/* From the create on, an interrupt must still destroy the sandbox: the handlers are in
	 * place before its id exists, without SA_RESTART, and the create itself is never
	 * cancelled so that its id cannot be lost. */
	egress_signal = 0;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	body = json_pack("{s:{s:[s]}}", "network", "allow", t->name);
	r = client_json(cl, "POST", "/v1/sandboxes", body, &sb, err);
	json_decref(body);
	id = r < 0 ? NULL : json_string_value(json_object_get(sb, "id"));
	if (!id) {
		for (int i = 0; i < 3; i++)
			sigaction(sigs[i], &old[i], NULL);
		json_decref(sb);
		if (r < 0)
			return isola_err_wrap(err, "bench --egress: create a sandbox allowing `%s`",
					      t->name);
		return isola_err_set(err, EPROTO, "internal", "create: reply has no id");
	}
	exec_path = cli_pathf("/v1/sandboxes/%s/exec", id);
	del = cli_pathf("/v1/sandboxes/%s", id);
	for (int i = 0; i < rounds && r == 0; i++) {
		struct egress_dl d = {0}, p = {0};
		double c0, c1;

		if (egress_signal)
			break;
		r = download_direct(t, &d, err);
		if (r < 0)
			break;
		c0 = isolad > 0 ? bench_process_cpu_s(isolad) : -1;
		r = download_proxied(cl, exec_path, t, &p, err);
		if (r < 0)
			break;
		c1 = c0 >= 0 ? bench_process_cpu_s(isolad) : -1;
		if (c1 >= c0 && c0 >= 0 && cpu >= 0)
			cpu += c1 - c0;
		else
			cpu = -1; /* isolad went away or /proc is not readable: not measured */
		if (!bytes)
			bytes = d.bytes;
		if (p.bytes != d.bytes)
			r = isola_err_set(
				err, EIO, "unavailable",
				"bench --egress: the sandbox's download through the proxy "
				"of %s got %lld bytes, the host's direct one %lld (round %d)",
				t->url, p.bytes, d.bytes, i + 1);
		else if (d.bytes != bytes)
			r = isola_err_set(
				err, EIO, "unavailable",
				"bench --egress: the host's direct download of %s got %lld "
				"bytes in round %d, %lld in round 1: not the same file",
				t->url, d.bytes, i + 1, bytes);
		direct[i] = d.seconds;
		proxied[i] = p.seconds;
	}
	if (r == 0 && egress_signal)
		r = isola_err_set(err, EINTR, "cancelled", "bench --egress: interrupted");
	/* The sandbox goes whatever happened; a failure to destroy it is said. */
	if (client_json(cl, "DELETE", del, NULL, NULL, r < 0 ? NULL : err) < 0 && r == 0)
		r = isola_err_wrap(err, "bench --egress: destroy sandbox %s", id);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	json_decref(sb);
	if (r < 0)
		return r;
	*report = egress_report(t, rounds, bytes, direct, proxied, cpu);
	return *report ? 0 : isola_err_set(err, ENOMEM, NULL, "bench --egress: out of memory");
}

void bench_egress_print(const json_t *j)
{
	const json_t *d = json_object_get(j, "direct"), *p = json_object_get(j, "proxied");
	const json_t *cpu = json_object_get(j, "isolad_cpu_s_per_gb");

#define NUM(o, k) json_number_value(json_object_get(o, k))
	printf("egress proxy: %s, %lld interleaved rounds, %lld bytes per download\n",
	       json_string_value(json_object_get(j, "url")),
	       (long long)json_integer_value(json_object_get(j, "rounds")),
	       (long long)json_integer_value(json_object_get(j, "bytes")));
	printf("  direct (host):               median %.3f s, %.1f MB/s\n", NUM(d, "seconds_p50"),
	       NUM(d, "mbps_p50"));
	printf("  through the proxy (sandbox): median %.3f s, %.1f MB/s\n", NUM(p, "seconds_p50"),
	       NUM(p, "mbps_p50"));
	printf("  proxied / direct throughput: %.2fx (per round %.2f-%.2f; target >= 0.8)\n",
	       NUM(j, "ratio_proxied_to_direct"), NUM(j, "ratio_per_round_min"),
	       NUM(j, "ratio_per_round_max"));
	if (cpu)
		printf("  isolad's CPU per GB proxied: %.2f s\n", json_number_value(cpu));
	else
		printf("  isolad's CPU per GB proxied: not measured (isolad is not on this host's "
		       "unix socket)\n");
#undef NUM
}
