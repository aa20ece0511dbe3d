/* SPDX-License-Identifier: Apache-2.0 */
/* bench_peers: samples, and the peers `isola bench` times beside isola (bwrap, runc). */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/util.h"

void sample_add(struct bench_sample *s, double ms)
{
	double *n = realloc(s->ms, (s->n + 1) * sizeof(*n));

	if (!n) {
		s->fails++;
		return;
	}
	s->ms = n;
	s->ms[s->n++] = ms;
}

void sample_fail(struct bench_sample *s, const char *msg)
{
	s->fails++;
	if (!s->first_error)
		s->first_error = strdup(msg ? msg : "failed");
}

void sample_fini(struct bench_sample *s)
{
	free(s->ms);
	free(s->first_error);
}

double bench_host_cpu_ms(void)
{
	unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "re");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
		   &iowait, &irq, &softirq, &steal);
	fclose(f);
	if (n != 8 || hz <= 0)
		return -1;
	/* idle and iowait are the time nothing ran; guest time is inside user already */
	return (double)(user + nice + sys + irq + softirq + steal) * 1000.0 / (double)hz;
}

void bench_settle(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double t0 = bench_host_cpu_ms(), t1;

	if (t0 < 0 || ncpu < 1)
		return;
	for (int i = 0; i < BENCH_SETTLE_MAX_MS / BENCH_SETTLE_STEP_MS; i++) {
		usleep(BENCH_SETTLE_STEP_MS * 1000);
		t1 = bench_host_cpu_ms();
		if (t1 - t0 < BENCH_SETTLE_BUSY * (double)(BENCH_SETTLE_STEP_MS * ncpu))
			return;
		t0 = t1;
	}
}

/* Records the host CPU spent since *t0 (from bench_host_cpu_ms) on s. */
void sample_host_cpu(struct bench_sample *s, double t0)
{
	double t1 = bench_host_cpu_ms();

	if (t0 >= 0 && t1 >= t0)
		s->host_cpu_ms = t1 - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

long bench_daemon_pid(const char *socket_path)
{
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	long pid = 0;
	int fd = socket_path ? util_unix_connect(socket_path, 0) : -EINVAL;

	if (fd < 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		pid = cred.pid;
	close(fd);
	return pid;
}

double bench_process_cpu_s(long pid)
{
	cleanup_free char *buf = NULL;
	unsigned long long utime, stime;
	long hz = sysconf(_SC_CLK_TCK);
	char path[64];
	const char *p;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (hz <= 0 || util_read_file(path, 4096, &buf, &len) < 0)
		return -1;
	/* the command name (field 2) may hold spaces and parentheses: count from the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
			 &stime) != 2)
		return -1;
	return (double)(utime + stime) / (double)hz;
}

double run_peer(char *const argv[])
{
	uint64_t t0 = util_now_ns();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return (double)(util_now_ns() - t0) / 1e6;
}

bool have_program(const char *name)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/* `bwrap --unshare-all` of /bin/true with the host's /usr: the closest thing bubblewrap has to
 * isola's loop (it makes every namespace, a network one included). */
static char *const bwrap_argv[] = {"bwrap",
				   "--unshare-all",
				   "--die-with-parent",
				   "--ro-bind",
				   "/usr",
				   "/usr",
				   "--symlink",
				   "usr/bin",
				   "/bin",
				   "--symlink",
				   "usr/lib",
				   "/lib",
				   "--symlink",
				   "usr/lib64",
				   "/lib64",
				   "--proc",
				   "/proc",
				   "--dev",
				   "/dev",
				   "--tmpfs",
				   "/tmp",
				   "/bin/true",
				   NULL};

/* One bwrap cycle into s. */
static void bwrap_once(struct bench_sample *s)
{
	double ms = run_peer(bwrap_argv);

	if (ms < 0)
		sample_fail(s, "bwrap exited non-zero");
	else
		sample_add(s, ms);
}

void bench_bwrap(int n, struct bench_sample *s)
{
	double cpu0 = bench_host_cpu_ms();

	for (int i = 0; i < n; i++)
		bwrap_once(s);
	sample_host_cpu(s, cpu0);
}

/* The burst's start line: every thread waits for go, set once all were started. */
struct bwrap_start {
	pthread_mutex_t lock; /* go */
	pthread_cond_t cond;  /* go was set */
	bool go;	      /* the threads may run */
};

struct bwrap_burst_arg {
	struct bwrap_start *start; /* shared */
	struct bench_sample one;   /* this thread's single cycle */
};

static void *bwrap_burst_main(void *p)
{
	struct bwrap_burst_arg *a = p;

	pthread_mutex_lock(&a->start->lock);
	while (!a->start->go)
		pthread_cond_wait(&a->start->cond, &a->start->lock);
	pthread_mutex_unlock(&a->start->lock);
	bwrap_once(&a->one);
	return NULL;
}

void bench_bwrap_burst(int k, struct bench_sample *s)
{
	struct bwrap_start start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
	struct bwrap_burst_arg *args = k > 0 ? calloc((size_t)k, sizeof(*args)) : NULL;
	pthread_t *threads = k > 0 ? calloc((size_t)k, sizeof(*threads)) : NULL;
	int started = 0;

	if (!args || !threads) {
		sample_fail(s, "bwrap burst: out of memory");
		goto out;
	}
	for (; started < k; started++) {
		args[started].start = &start;
		if (pthread_create(&threads[started], NULL, bwrap_burst_main, &args[started]) != 0)
			break;
	}
	pthread_mutex_lock(&start.lock);
	start.go = true;
	pthread_cond_broadcast(&start.cond);
	pthread_mutex_unlock(&start.lock);
	for (int i = 0; i < started; i++) {
		pthread_join(threads[i], NULL);
		if (args[i].one.n)
			sample_add(s, args[i].one.ms[0]);
		else
			sample_fail(s, args[i].one.first_error);
		sample_fini(&args[i].one);
	}
	for (int i = started; i < k; i++)
		sample_fail(s, "bwrap burst: cannot start a thread");
out:
	free(args);
	free(threads);
}

/* Writes a runc bundle (config.json + rootfs with the host's /usr) running arg0 arg1 under dir. */
static int runc_bundle(const char *dir, const char *arg0, const char *arg1)
{
	char cmd[1024];

	snprintf(
		cmd, sizeof(cmd),
		"set -e; cd '%s'; mkdir -p rootfs/usr rootfs/proc rootfs/dev rootfs/tmp rootfs/sys;"
		" ln -sfn usr/bin rootfs/bin; ln -sfn usr/lib rootfs/lib;"
		" ln -sfn usr/lib64 rootfs/lib64; rm -f config.json; runc spec",
		dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s/config.json", dir);
	{
		json_t *c = json_load_file(cmd, 0, NULL), *proc, *mounts;
		int r;

		if (!c)
			return -1;
		proc = json_object_get(c, "process");
		json_object_set_new(proc, "terminal", json_false());
		json_object_set_new(proc, "args",
				    arg1 ? json_pack("[s,s]", arg0, arg1) : json_pack("[s]", arg0));
		json_object_set_new(c, "root",
				    json_pack("{s:s,s:b}", "path", "rootfs", "readonly", 1));
		mounts = json_object_get(c, "mounts");
		json_array_append_new(mounts, json_pack("{s:s,s:s,s:s,s:[s,s]}", "destination",
							"/usr", "type", "bind", "source", "/usr",
							"options", "rbind", "ro"));
		r = json_dump_file(c, cmd, 0);
		json_decref(c);
		return r;
	}
}

void bench_runc(int n, struct bench_sample *s)
{
	char dir[] = "/tmp/isola-bench-runc-XXXXXX", name[64];

	if (!mkdtemp(dir) || runc_bundle(dir, "/bin/true", NULL) < 0) {
		sample_fail(s, "cannot prepare a runc bundle");
		return;
	}
	for (int i = 0; i < n; i++) {
		char *argv[] = {"runc", "run", "--bundle", dir, name, NULL};
		double ms;

		snprintf(name, sizeof(name), "isola-bench-%d-%d", (int)getpid(), i);
		ms = run_peer(argv);
		if (ms < 0)
			sample_fail(s, "runc run exited non-zero");
		else
			sample_add(s, ms);
	}
	util_rm_rf(dir);
}

void bench_runc_exec(int n, struct bench_sample *s)
{
	char dir[] = "/tmp/isola-bench-runc-XXXXXX", name[64];
	char *echo[] = {"runc", "exec", name, "echo", "isola", NULL};
	char *kill[] = {"runc", "kill", name, "KILL", NULL};
	char *del[] = {"runc", "delete", "--force", name, NULL};

	snprintf(name, sizeof(name), "isola-bench-exec-%d", (int)getpid());
	if (!mkdtemp(dir) || runc_bundle(dir, "/bin/sleep", "600") < 0) {
		sample_fail(s, "cannot prepare a runc bundle");
		return;
	}
	{
		char *run[] = {"runc", "run", "--detach", "--bundle", dir, name, NULL};

		if (run_peer(run) < 0) {
			sample_fail(s, "runc run --detach exited non-zero");
			util_rm_rf(dir);
			return;
		}
	}
	for (int i = 0; i < n; i++) {
		double ms = run_peer(echo);

		if (ms < 0)
			sample_fail(s, "runc exec exited non-zero");
		else
			sample_add(s, ms);
	}
	run_peer(kill);
	run_peer(del);
	util_rm_rf(dir);
}
