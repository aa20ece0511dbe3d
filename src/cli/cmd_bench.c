/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_bench: `isola bench` — the agent's complete loop, sequential and in a burst, beside peers. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "bench.h"
#include "bench_density.h"
#include "bench_egress.h"
#include "output.h"
#include "parse.h"

/*
 * One loop is what an agent does per task: create a sandbox, prepare the workspace
 * (write a file), run a command that reads it, collect the output, destroy. Peers run
 * the closest equivalent they have: `bwrap --unshare-all ... /bin/true` and `runc run`
 * of a bundle with the host's /usr, each a full start-to-exit cycle.
 */

struct burst_arg {
	const struct client_conf *conf; /* daemon location */
	double ms;			/* latency of this loop */
	char *error;			/* failure message, owned, or NULL */
	pthread_barrier_t *start;	/* released together */
};

static const char task_file[] = "print(6*7)\n";

#define BENCH_ALL_DENSITY   100 /* --all's idle sandboxes without --density */
#define BENCH_EGRESS_ROUNDS 5	/* --egress rounds: the mode's default, and --all's */

/* Where one loop's time went, request by request (ms; a step not reached stays 0). */
enum loop_step { STEP_CREATE, STEP_WRITE, STEP_EXEC, STEP_DESTROY, STEP_N };

static const char *const step_key[STEP_N] = {"loop_create", "loop_write", "loop_exec",
					     "loop_destroy"};
static const char *const step_row[STEP_N] = {"  of which create", "  of which file write",
					     "  of which exec", "  of which destroy"};

/* Milliseconds since *t, which moves to now. */
static double lap(uint64_t *t)
{
	uint64_t now = util_now_ns();
	double ms = (double)(now - *t) / 1e6;

	*t = now;
	return ms;
}

/* Creates a sandbox with the defaults: *sb is the reply (caller frees), *id borrowed from it. */
static int bench_create(struct client *cl, json_t **sb, const char **id, struct isola_err **err)
{
	json_t *body = json_object();
	int r = client_json(cl, "POST", "/v1/sandboxes", body, sb, err);

	json_decref(body);
	if (r < 0)
		return r;
	*id = json_string_value(json_object_get(*sb, "id"));
	if (!*id) {
		json_decref(*sb);
		*sb = NULL;
		return isola_err_set(err, EPROTO, "internal", "create: reply has no id");
	}
	return 0;
}

/* Runs one complete loop on client cl; returns 0 and its latency in *ms, or -errno.
 * steps (or NULL) gets each request's share. */
static int bench_loop(struct client *cl, double *ms, double *steps, struct isola_err **err)
{
	uint64_t t0 = util_now_ns(), t = t0;
	double step[STEP_N] = {0};
	json_t *sb = NULL, *body = NULL, *res = NULL;
	cleanup_free char *path = NULL;
	const char *id, *out;
	char tmpl[] = "/tmp/isola-bench-XXXXXX";
	struct client_req put;
	int r, fd = -1;

	r = bench_create(cl, &sb, &id, err);
	if (r < 0)
		return r;
	step[STEP_CREATE] = lap(&t);

	fd = mkstemp(tmpl);
	if (fd < 0 || util_write_all(fd, task_file, sizeof(task_file) - 1) < 0 ||
	    lseek(fd, 0, SEEK_SET) < 0) {
		r = isola_err_sys(err, errno, NULL, "bench: temp file");
		goto destroy;
	}
	unlink(tmpl);
	path = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, "/root/task.py");
	memset(&put, 0, sizeof(put));
	put.method = "PUT";
	put.path = path;
	put.body_fd = fd;
	put.body_size = sizeof(task_file) - 1;
	r = client_do(cl, &put, err);
	if (r < 0)
		goto destroy;
	step[STEP_WRITE] = lap(&t);

	free(path);
	path = cli_pathf("/v1/sandboxes/%s/exec", id);
	body = json_pack("{s:[s,s]}", "cmd", "cat", "/root/task.py");
	r = client_json(cl, "POST", path, body, &res, err);
	json_decref(body);
	if (r < 0)
		goto destroy;
	out = json_string_value(json_object_get(res, "stdout"));
	if (!out || strcmp(out, task_file) ||
	    json_integer_value(json_object_get(res, "exit_code")) != 0) {
		r = isola_err_set(err, EPROTO, "internal", "exec: unexpected output `%s`",
				  out ? out : "(none)");
		goto destroy;
	}
	step[STEP_EXEC] = lap(&t);
destroy:
	if (fd >= 0)
		close(fd);
	json_decref(res);
	free(path);
	path = cli_pathf("/v1/sandboxes/%s", id);
	if (client_json(cl, "DELETE", path, NULL, NULL, r < 0 ? NULL : err) < 0 && r == 0)
		r = -EIO;
	step[STEP_DESTROY] = lap(&t);
	json_decref(sb);
	if (r == 0) {
		*ms = (double)(t - t0) / 1e6;
		if (steps)
			memcpy(steps, step, sizeof(step));
	}
	return r;
}

/* What one running sandbox answers, n times each (issue 18's exec and file figures). */
struct ops_samples {
	struct bench_sample exec;  /* POST .../exec of `echo isola`, output collected */
	struct bench_sample write; /* PUT .../files of 4 KiB */
	struct bench_sample read;  /* GET .../files of the same 4 KiB */
	struct bench_sample host;  /* the host's own fork+exec+wait of `echo isola` */
};

static int count_bytes(void *ud, const void *buf, size_t len, struct isola_err **err)
{
	(void)buf;
	(void)err;
	*(size_t *)ud += len;
	return 0;
}

/* Times one operation into s; err's message is kept as the first failure. */
static void ops_time(struct bench_sample *s, uint64_t t0, int r, struct isola_err **err)
{
	if (r < 0)
		sample_fail(s, *err ? (*err)->message : NULL);
	else
		sample_add(s, (double)(util_now_ns() - t0) / 1e6);
	isola_err_free(*err);
	*err = NULL;
}

/*
 * Creates one sandbox and times n of each operation on it, interleaved (exec, write, read,
 * host fork+exec), so load that comes and goes falls on all four alike. Fails only when the
 * sandbox cannot be made; each operation's failures are counted in its sample.
 */
static int bench_ops(struct client *cl, int n, struct ops_samples *o, struct isola_err **err)
{
	char *echo[] = {"echo", "isola", NULL};
	char tmpl[] = "/tmp/isola-bench-XXXXXX", block[4096];
	cleanup_free char *exec_path = NULL, *file_path = NULL, *del = NULL;
	cleanup_err struct isola_err *e = NULL;
	json_t *sb = NULL, *body, *res;
	const char *id;
	int r, fd;

	r = bench_create(cl, &sb, &id, err);
	if (r < 0)
		return r;
	exec_path = cli_pathf("/v1/sandboxes/%s/exec", id);
	file_path = cli_pathf("/v1/sandboxes/%s/files?path=%s", id, "/tmp/bench-4k");
	del = cli_pathf("/v1/sandboxes/%s", id);
	memset(block, 'x', sizeof(block));
	fd = mkstemp(tmpl);
	if (fd < 0 || util_write_all(fd, block, sizeof(block)) < 0) {
		r = isola_err_sys(err, errno, NULL, "bench: temp file");
		goto out;
	}
	unlink(tmpl);
	body = json_pack("{s:[s,s]}", "cmd", "echo", "isola");
	for (int i = 0; i < n; i++) {
		struct client_req put = {.method = "PUT",
					 .path = file_path,
					 .body_fd = fd,
					 .body_size = sizeof(block)};
		struct client_req get = {
			.method = "GET", .path = file_path, .body_fd = -1, .on_data = count_bytes};
		const char *out;
		size_t got = 0;
		uint64_t t0 = util_now_ns();
		double ms;

		res = NULL;
		r = client_json(cl, "POST", exec_path, body, &res, &e);
		out = json_string_value(json_object_get(res, "stdout"));
		if (r == 0 && (!out || strcmp(out, "isola\n") != 0))
			r = isola_err_set(&e, EPROTO, "internal", "exec: unexpected output `%s`",
					  out ? out : "(none)");
		json_decref(res);
		ops_time(&o->exec, t0, r, &e);

		t0 = util_now_ns();
		r = lseek(fd, 0, SEEK_SET) < 0 ? isola_err_sys(&e, errno, NULL, "bench: rewind")
					       : client_do(cl, &put, &e);
		ops_time(&o->write, t0, r, &e);

		get.ud = &got;
		t0 = util_now_ns();
		r = client_do(cl, &get, &e);
		if (r == 0 && got != sizeof(block))
			r = isola_err_set(&e, EPROTO, "internal", "read back %zu of %zu bytes", got,
					  sizeof(block));
		ops_time(&o->read, t0, r, &e);

		ms = run_peer(echo);
		if (ms < 0)
			sample_fail(&o->host, "echo exited non-zero");
		else
			sample_add(&o->host, ms);
	}
	json_decref(body);
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	if (client_json(cl, "DELETE", del, NULL, NULL, r < 0 ? NULL : err) < 0 && r == 0)
		r = -EIO;
	json_decref(sb);
	return r;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted sample; 0 when empty. */
static double pct(const struct bench_sample *s, double p)
{
	size_t rank;

	if (!s->n)
		return 0;
	rank = (size_t)(p / 100.0 * (double)s->n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > s->n)
		rank = s->n;
	return s->ms[rank - 1];
}

static void *burst_main(void *p)
{
	struct burst_arg *a = p;
	cleanup_err struct isola_err *err = NULL;
	struct client *cl = NULL;

	if (client_new(a->conf, &cl, &err) < 0) {
		a->error = strdup(err->message);
		pthread_barrier_wait(a->start);
		return NULL;
	}
	pthread_barrier_wait(a->start);
	if (bench_loop(cl, &a->ms, NULL, &err) < 0)
		a->error = strdup(err ? err->message : "failed");
	client_free(cl);
	return NULL;
}

static json_t *sample_json(struct bench_sample *s)
{
	json_t *j;

	qsort(s->ms, s->n, sizeof(*s->ms), cmp_double);
	j = json_pack("{s:I, s:I, s:f, s:f, s:f, s:s?}", "runs", (json_int_t)(s->n + s->fails),
		      "failures", (json_int_t)s->fails, "p50_ms", pct(s, 50), "p90_ms", pct(s, 90),
		      "p99_ms", pct(s, 99), "first_error", s->first_error);
	if (j && s->host_cpu_ms > 0 && s->n + s->fails > 0)
		json_object_set_new(j, "host_cpu_ms_per_run",
				    json_real(s->host_cpu_ms / (double)(s->n + s->fails)));
	return j;
}

/* a's host CPU per run / b's; 0 when either was not measured. */
static double cpu_ratio(const json_t *a, const json_t *b)
{
	double x = json_real_value(json_object_get(a, "host_cpu_ms_per_run"));
	double y = json_real_value(json_object_get(b, "host_cpu_ms_per_run"));

	return x > 0 && y > 0 ? x / y : 0;
}

/*
 * Waits (at most 10 minutes) while isolad builds a template's microvm image in the background
 * (once per template, right after its first start): that build runs mkfs over hundreds of MiB
 * and would take the CPU the timed runs measure. A failed listing waits for nothing.
 */
static void wait_image_builds(struct client *cl, bool quiet)
{
	bool said = false;

	for (int i = 0; i < 1200; i++) {
		cleanup_err struct isola_err *err = NULL;
		const char *building = NULL;
		json_t *res = NULL, *t;
		size_t k;

		if (client_json(cl, "GET", "/v1/templates", NULL, &res, &err) < 0)
			return;
		json_array_foreach(json_object_get(res, "templates"), k, t)
		{
			const char *st = json_string_value(
				json_object_get(json_object_get(t, "image_build"), "state"));

			if (!building && st && !strcmp(st, "building"))
				building = json_string_value(json_object_get(t, "name"));
		}
		if (building && !said && !quiet)
			fprintf(stderr,
				"isola bench: waiting for isolad's background build of template "
				"`%s`'s microvm image (once per template) so that it does not "
				"compete with the timed runs\n",
				building);
		said = said || building;
		json_decref(res);
		if (!building)
			return;
		usleep(500 * 1000);
	}
}

static void print_row(const char *name, const json_t *j)
{
	printf("%-26s %6lld %6lld %10.2f %10.2f %10.2f\n", name,
	       (long long)json_integer_value(json_object_get(j, "runs")),
	       (long long)json_integer_value(json_object_get(j, "failures")),
	       json_real_value(json_object_get(j, "p50_ms")),
	       json_real_value(json_object_get(j, "p90_ms")),
	       json_real_value(json_object_get(j, "p99_ms")));
	if (json_string_value(json_object_get(j, "first_error")))
		printf("  first failure: %s\n",
		       json_string_value(json_object_get(j, "first_error")));
}

/* a's p99 / b's p50 (a burst against its sequential runs); 0 when b has none. */
static double p99_to_p50(const json_t *a, const json_t *b)
{
	double x = json_real_value(json_object_get(a, "p99_ms"));
	double y = json_real_value(json_object_get(b, "p50_ms"));

	return y > 0 ? x / y : 0;
}

static double ratio(const json_t *a, const json_t *b)
{
	double x = json_real_value(json_object_get(a, "p50_ms"));
	double y = json_real_value(json_object_get(b, "p50_ms"));

	return y > 0 ? x / y : 0;
}

const struct cli_opt cli_bench_opts[] = {
	{"iterations", 'n', "N",
	 "create-write-exec-destroy loops in sequence (default 30); with --egress, rounds "
	 "(default 5)",
	 0},
	{"burst", 'c', "K", "sandboxes created at once for the burst test (default 50, 0: none)",
	 0},
	{"no-peers", CLI_LONG('P'), NULL, "do not time bwrap and runc beside isola", 0},
	{"density", CLI_LONG('D'), "N",
	 "instead (with --all: after the loops): keep N idle sandboxes alive at once and report "
	 "what each costs the host",
	 0},
	{"tier", CLI_LONG('T'), "TIER", "the tier of the --density sandboxes (default: isolad's)",
	 0},
	{"egress", CLI_LONG('E'), "URL",
	 "instead (with --all: after the loops, 5 rounds): download URL (http://NAME[:PORT]/PATH) "
	 "from this host and through the egress proxy of a sandbox allowing NAME, -n rounds, and "
	 "compare",
	 0},
	{"egress-resolve", CLI_LONG('R'), "IP",
	 "the address of --egress's NAME for this host's download only (the sandbox asks isolad's "
	 "resolver)",
	 0},
	{"all", CLI_LONG('A'), NULL,
	 "every figure in one run: the loops, then --density (default 100) and, given --egress, "
	 "the egress comparison",
	 0},
	{NULL, 0, NULL, NULL, 0},
};

/* With --all, after the loops: the density and (given a URL) egress reports under their own
 * keys of the one report; a part that fails is reported under its key as {"error": ...}, and
 * the run fails. */
static bool bench_all_parts(struct cli *cli, struct client *cl, json_t *report, int density,
			    const char *tier, const struct bench_egress_target *egress)
{
	cleanup_err struct isola_err *derr = NULL;
	cleanup_err struct isola_err *eerr = NULL;
	json_t *j = NULL;
	bool ok = true;

	if (!cli->conf.url)
		bench_settle();
	if (bench_density(cli, cl, density, tier, &j, &derr) < 0) {
		j = json_pack("{s:s}", "error", derr ? derr->message : "failed");
		ok = false;
	}
	json_object_set_new(report, "density", j);
	if (!egress)
		return ok;
	j = NULL;
	if (bench_egress(cli, cl, egress, BENCH_EGRESS_ROUNDS, &j, &eerr) < 0) {
		j = json_pack("{s:s}", "error", eerr ? eerr->message : "failed");
		ok = false;
	}
	json_object_set_new(report, "egress", j);
	return ok;
}

/* Prints one --all part: its report, or what stopped it. */
static void bench_all_print(const json_t *report, const char *key, void (*print)(const json_t *))
{
	const json_t *j = json_object_get(report, key);

	if (!j)
		return;
	printf("\n");
	if (json_object_get(j, "error"))
		printf("%s: failed: %s\n", key, json_string_value(json_object_get(j, "error")));
	else
		print(j);
}

/* `--egress`: its own mode, one report. */
static int bench_mode_egress(struct cli *cli, const struct bench_egress_target *t, int rounds)
{
	cleanup_err struct isola_err *err = NULL;
	struct client *cl = cli_client(cli);
	json_t *j = NULL;

	if (!cl)
		return CLI_EXIT_FAIL;
	if (bench_egress(cli, cl, t, rounds, &j, &err) < 0)
		return cli_fail(err, CLI_EXIT_FAIL);
	if (cli->json)
		out_json(stdout, j);
	else
		bench_egress_print(j);
	json_decref(j);
	return CLI_EXIT_OK;
}

int cmd_bench(struct cli *cli, int argc, char **argv)
{
	struct bench_sample seq = {0}, burst = {0}, bw = {0}, bwb = {0}, rc = {0}, rx = {0},
			    steps[STEP_N] = {0};
	struct ops_samples ops = {0};
	struct burst_arg *args = NULL;
	pthread_t *threads = NULL;
	pthread_barrier_t start;
	int n = 30, k = 50, density = 0, opt, status = CLI_EXIT_OK;
	const char *tier = NULL, *egress = NULL, *egress_resolve = NULL;
	bool peers = true, n_set = false, all = false;
	struct bench_egress_target et;
	struct client *cl;
	json_t *report, *jseq, *jburst;
	double cpu0;

	while ((opt = cli_nextopt(cli, argc, argv)) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			if (n < 1 || n > 100000)
				return cli_usage_err(cli, "--iterations must be 1..100000");
			n_set = true;
			break;
		case 'c':
			k = atoi(optarg);
			if (k < 0 || k > 1000)
				return cli_usage_err(cli, "--burst must be 0..1000");
			break;
		case CLI_LONG('P'):
			peers = false;
			break;
		case CLI_LONG('D'):
			density = atoi(optarg);
			if (density < 1 || density > 10000)
				return cli_usage_err(cli, "--density must be 1..10000");
			break;
		case CLI_LONG('T'):
			tier = optarg;
			break;
		case CLI_LONG('E'):
			egress = optarg;
			break;
		case CLI_LONG('R'):
			egress_resolve = optarg;
			break;
		case CLI_LONG('A'):
			all = true;
			break;
		default:
			return cli_bad_opt(cli, argc, argv, opt);
		}
	}
	if (optind < argc)
		return cli_usage_err(cli, "unexpected argument `%s`", argv[optind]);
	if (tier && !density && !all)
		return cli_usage_err(cli, "--tier goes with --density or --all");
	if (egress_resolve && !egress)
		return cli_usage_err(cli, "--egress-resolve goes with --egress");
	if (egress && density && !all)
		return cli_usage_err(cli, "--egress and --density are two modes: choose one, or "
					  "give --all for both after the loops");
	if (egress) {
		char why[512];

		if (bench_egress_parse(egress, egress_resolve, &et, why, sizeof(why)) < 0)
			return cli_usage_err(cli, "%s", why);
		if (!all)
			return bench_mode_egress(cli, &et, n_set ? n : BENCH_EGRESS_ROUNDS);
	}
	if (all && !density)
		density = BENCH_ALL_DENSITY;
	cl = cli_client(cli);
	if (!cl)
		return CLI_EXIT_FAIL;
	if (density && !all) {
		cleanup_err struct isola_err *err = NULL;
		json_t *j = NULL;

		if (bench_density(cli, cl, density, tier, &j, &err) < 0)
			return cli_fail(err, CLI_EXIT_FAIL);
		if (cli->json)
			out_json(stdout, j);
		else
			bench_density_print(j);
		json_decref(j);
		return CLI_EXIT_OK;
	}

	wait_image_builds(cl, cli->quiet || cli->json);
	/* One untimed loop warms the daemon (agent memfd, template, caches). */
	{
		cleanup_err struct isola_err *err = NULL;
		double ms;

		if (bench_loop(cl, &ms, NULL, &err) < 0)
			return cli_fail(err, CLI_EXIT_FAIL);
	}
	/* isolad's work behind the warm loop (its pool's first fill) ends before the timing
	 * starts; the host is only this machine when isolad is on it (a unix socket). */
	if (!cli->conf.url)
		bench_settle();
	cpu0 = cli->conf.url ? -1 : bench_host_cpu_ms();
	for (int i = 0; i < n; i++) {
		cleanup_err struct isola_err *err = NULL;
		double ms, step[STEP_N];

		if (bench_loop(cl, &ms, step, &err) < 0) {
			sample_fail(&seq, err ? err->message : NULL);
		} else {
			sample_add(&seq, ms);
			for (int j = 0; j < STEP_N; j++)
				sample_add(&steps[j], step[j]);
		}
	}
	sample_host_cpu(&seq, cpu0);
	{
		cleanup_err struct isola_err *err = NULL;

		if (bench_ops(cl, n, &ops, &err) < 0)
			sample_fail(&ops.exec, err ? err->message : NULL);
	}
	if (k > 0) {
		if (!cli->conf.url)
			bench_settle();
		args = calloc((size_t)k, sizeof(*args));
		threads = calloc((size_t)k, sizeof(*threads));
		if (!args || !threads)
			return CLI_EXIT_FAIL;
		pthread_barrier_init(&start, NULL, (unsigned)k);
		for (int i = 0; i < k; i++) {
			args[i].conf = &cli->conf;
			args[i].start = &start;
			pthread_create(&threads[i], NULL, burst_main, &args[i]);
		}
		for (int i = 0; i < k; i++) {
			pthread_join(threads[i], NULL);
			if (args[i].error)
				sample_fail(&burst, args[i].error);
			else
				sample_add(&burst, args[i].ms);
			free(args[i].error);
		}
		pthread_barrier_destroy(&start);
		free(args);
		free(threads);
	}
	if (peers) {
		/* The peers are timed on a host as quiet as isola's loop had: not beside the
		 * refills and teardowns isolad runs behind the burst. */
		bench_settle();
		if (have_program("bwrap")) {
			bench_bwrap(n, &bw);
			if (k > 0)
				bench_bwrap_burst(k, &bwb);
		} else {
			sample_fail(&bw, "bwrap not installed");
			sample_fail(&bwb, "bwrap not installed");
		}
		if (have_program("runc")) {
			bench_runc(n, &rc);
			bench_runc_exec(n, &rx);
		} else {
			sample_fail(&rc, "runc not installed");
			sample_fail(&rx, "runc not installed");
		}
	}

	jseq = sample_json(&seq);
	jburst = sample_json(&burst);
	report = json_pack("{s:i, s:i, s:o, s:o}", "iterations", n, "burst", k, "sequential", jseq,
			   "burst_loops", jburst);
	for (int i = 0; i < STEP_N; i++)
		json_object_set_new(report, step_key[i], sample_json(&steps[i]));
	if (peers) {
		json_t *jbw = sample_json(&bw), *jrc = sample_json(&rc);

		json_object_set_new(report, "bwrap_true", jbw);
		json_object_set_new(report, "runc_true", jrc);
		json_object_set_new(report, "ratio_loop_to_bwrap", json_real(ratio(jseq, jbw)));
		json_object_set_new(report, "ratio_loop_to_runc", json_real(ratio(jseq, jrc)));
		if (cpu_ratio(jseq, jbw) > 0)
			json_object_set_new(report, "ratio_loop_cpu_to_bwrap_cpu",
					    json_real(cpu_ratio(jseq, jbw)));
		json_object_set_new(report, "runc_exec_echo", sample_json(&rx));
		if (k > 0) {
			json_t *jbwb = sample_json(&bwb);

			json_object_set_new(report, "bwrap_burst", jbwb);
			json_object_set_new(report, "ratio_bwrap_burst_p99_to_bwrap_p50",
					    json_real(p99_to_p50(jbwb, jbw)));
		}
	}
	{
		json_t *jexec = sample_json(&ops.exec), *jhost = sample_json(&ops.host);

		json_object_set_new(report, "exec_echo", jexec);
		json_object_set_new(report, "host_fork_exec_echo", jhost);
		json_object_set_new(report, "file_write_4k", sample_json(&ops.write));
		json_object_set_new(report, "file_read_4k", sample_json(&ops.read));
		json_object_set_new(report, "ratio_exec_to_host_fork_exec",
				    json_real(ratio(jexec, jhost)));
		if (peers)
			json_object_set_new(
				report, "ratio_exec_to_runc_exec",
				json_real(ratio(jexec, json_object_get(report, "runc_exec_echo"))));
	}
	json_object_set_new(report, "ratio_burst_p99_to_seq_p50",
			    json_real(p99_to_p50(jburst, jseq)));
	if (all && !bench_all_parts(cli, cl, report, density, tier, egress ? &et : NULL))
		status = CLI_EXIT_FAIL;
	if (cli->json) {
		out_json(stdout, report);
	} else {
		printf("%-26s %6s %6s %10s %10s %10s\n", "", "runs", "fails", "p50 ms", "p90 ms",
		       "p99 ms");
		print_row("isola loop (sequential)", jseq);
		for (int i = 0; i < STEP_N; i++)
			print_row(step_row[i], json_object_get(report, step_key[i]));
		if (k > 0)
			print_row("isola loop (burst)", jburst);
		print_row("exec `echo` (running)", json_object_get(report, "exec_echo"));
		print_row("host fork+exec `echo`", json_object_get(report, "host_fork_exec_echo"));
		print_row("file write 4 KiB", json_object_get(report, "file_write_4k"));
		print_row("file read 4 KiB", json_object_get(report, "file_read_4k"));
		if (peers) {
			print_row("bwrap /bin/true", json_object_get(report, "bwrap_true"));
			if (k > 0)
				print_row("bwrap /bin/true (burst)",
					  json_object_get(report, "bwrap_burst"));
			print_row("runc run /bin/true", json_object_get(report, "runc_true"));
			print_row("runc exec `echo`", json_object_get(report, "runc_exec_echo"));
			printf("loop p50 / bwrap p50: %.2f (target <= 1)\n",
			       json_real_value(json_object_get(report, "ratio_loop_to_bwrap")));
			printf("loop p50 / runc p50:  %.2f (target <= 0.2)\n",
			       json_real_value(json_object_get(report, "ratio_loop_to_runc")));
			if (json_object_get(report, "ratio_loop_cpu_to_bwrap_cpu"))
				printf("host CPU per loop: isola %.2f ms, bwrap %.2f ms (%.2fx; "
				       "every "
				       "process and kernel thread, %ld CPUs)\n",
				       json_real_value(
					       json_object_get(jseq, "host_cpu_ms_per_run")),
				       json_real_value(json_object_get(
					       json_object_get(report, "bwrap_true"),
					       "host_cpu_ms_per_run")),
				       json_real_value(json_object_get(
					       report, "ratio_loop_cpu_to_bwrap_cpu")),
				       sysconf(_SC_NPROCESSORS_ONLN));
		}
		printf("exec p50 / host fork+exec p50: %.2f (target <= 3)\n",
		       json_real_value(json_object_get(report, "ratio_exec_to_host_fork_exec")));
		if (peers)
			printf("exec p50 / runc exec p50: %.2f (target <= 0.3)\n",
			       json_real_value(json_object_get(report, "ratio_exec_to_runc_exec")));
		if (k > 0)
			printf("burst p99 / loop p50: %.2f (target <= 10)\n",
			       json_real_value(
				       json_object_get(report, "ratio_burst_p99_to_seq_p50")));
		if (k > 0 && peers)
			printf("bwrap burst p99 / bwrap p50: %.2f (the same ratio for bwrap "
			       "alone)\n",
			       json_real_value(json_object_get(
				       report, "ratio_bwrap_burst_p99_to_bwrap_p50")));
		bench_all_print(report, "density", bench_density_print);
		bench_all_print(report, "egress", bench_egress_print);
	}
	if (seq.fails || burst.fails || ops.exec.fails || ops.write.fails || ops.read.fails)
		status = CLI_EXIT_FAIL;
	json_decref(report);
	sample_fini(&seq);
	sample_fini(&burst);
	sample_fini(&bw);
	sample_fini(&bwb);
	sample_fini(&rc);
	sample_fini(&rx);
	sample_fini(&ops.exec);
	sample_fini(&ops.write);
	sample_fini(&ops.read);
	sample_fini(&ops.host);
	for (int i = 0; i < STEP_N; i++)
		sample_fini(&steps[i]);
	return status;
}
