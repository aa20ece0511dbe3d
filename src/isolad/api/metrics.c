/* SPDX-License-Identifier: Apache-2.0 */
/* metrics: GET /metrics (Prometheus text format 0.0.4) and GET /v1/sandboxes/{id}/stats. */
#include "api-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../core/core.h"
#include "../core/pool.h"
#include "../tiers/process/process.h"

/* Upper bounds (seconds) of the create-latency histogram buckets; +Inf is implied. */
static const double create_buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/* Error codes counted by name; anything else counts as "other". Mirrors errors.c. */
static const char *const error_codes[] = {
	"invalid",
	"not_dir",
	"is_dir",
	"unauthorized",
	"forbidden",
	"quota_exceeded",
	"not_found",
	"method_not_allowed",
	"conflict",
	"exists",
	"busy",
	"too_large",
	"range_not_satisfiable",
	"rate_limited",
	"internal",
	"not_supported",
	"unavailable",
	"timeout",
	"no_space",
	"other",
};
#define N_CODES	  (sizeof(error_codes) / sizeof(error_codes[0]))
#define N_BUCKETS (sizeof(create_buckets) / sizeof(create_buckets[0]))

/* Streamed responses (headers already sent) that isolad broke off, by stream. */
static const char *const stream_kinds[] = {"archive", "file", "other"};
#define N_STREAMS (sizeof(stream_kinds) / sizeof(stream_kinds[0]))

/* Admission refusals by the code core answered with. */
static const char *const refusal_codes[] = {"rate_limited", "quota_exceeded", "unavailable"};

static struct {
	pthread_mutex_t lock;	  /* protects everything below */
	uint64_t errors[N_CODES]; /* error responses by code */
	uint64_t requests;	  /* API requests completed */
	uint64_t create_buckets
		[N_BUCKETS];   /* creates at or under each bound (cumulative at render) */
	uint64_t create_count; /* successful creates */
	double create_sum;     /* their total seconds */
	uint64_t refusals[3];  /* by refusal_codes */
	uint64_t commands[2];  /* exec, process */
	uint64_t stream_aborts[N_STREAMS]; /* by stream_kinds */
} m = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Counts one error response by code; m.lock held. */
static void count_error_locked(const char *code)
{
	size_t i;

	for (i = 0; i < N_CODES - 1; i++)
		if (!strcmp(error_codes[i], code))
			break;
	m.errors[i]++;
}

void api_metrics_request(const struct api_req *r)
{
	pthread_mutex_lock(&m.lock);
	m.requests++;
	if (r->err_code[0])
		count_error_locked(r->err_code);
	pthread_mutex_unlock(&m.lock);
}

void api_metrics_stream_abort(const char *kind, const char *code)
{
	size_t i;

	for (i = 0; i < N_STREAMS - 1; i++)
		if (!strcmp(stream_kinds[i], kind))
			break;
	pthread_mutex_lock(&m.lock);
	m.stream_aborts[i]++;
	/* The status line said 200, so api_metrics_request() counts no error: count it here. */
	count_error_locked(code);
	pthread_mutex_unlock(&m.lock);
}

void api_metrics_create(double seconds, const char *err_code)
{
	pthread_mutex_lock(&m.lock);
	if (err_code) {
		for (size_t i = 0; i < ARRAY_SIZE(refusal_codes); i++)
			if (!strcmp(refusal_codes[i], err_code))
				m.refusals[i]++;
	} else {
		m.create_count++;
		m.create_sum += seconds;
		for (size_t i = 0; i < N_BUCKETS; i++)
			if (seconds <= create_buckets[i]) {
				m.create_buckets[i]++;
				break;
			}
	}
	pthread_mutex_unlock(&m.lock);
}

int api_stream_abort(struct api_stream *st, const char *kind, const char *code, const char *fmt,
		     ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("api: %s stream broken off after %llu bytes: %s", kind,
		 (unsigned long long)api_stream_sent(st), msg);
	api_metrics_stream_abort(kind, code);
	return -1;
}

void api_metrics_exec(const char *kind)
{
	pthread_mutex_lock(&m.lock);
	m.commands[strcmp(kind, "exec") ? 1 : 0]++;
	pthread_mutex_unlock(&m.lock);
}

/* Appends printf output to b (errors leave the buffer short; the scrape then fails). */
static void put(struct api_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct api_buf *b, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		api_buf_append(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void head(struct api_buf *b, const char *name, const char *type, const char *help)
{
	put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Sandboxes by state and tier, from the core's list (every tenant). */
static void render_sandboxes(struct api_server *srv, struct api_buf *b)
{
	static const char *const states[] = {"creating", "running", "error", "destroying"};
	static const char *const tiers[] = {"process", "microvm"};
	unsigned counts[4][2] = {{0}};
	json_t *list = NULL, *sb;
	size_t i;

	if (core_sandbox_list(srv->core, NULL, &list, NULL) == 0) {
		json_array_foreach(list, i, sb)
		{
			const char *st = json_string_value(json_object_get(sb, "state"));
			const char *ti = json_string_value(json_object_get(sb, "tier"));

			for (size_t a = 0; a < 4; a++)
				for (size_t t = 0; t < 2; t++)
					if (st && ti && !strcmp(st, states[a]) &&
					    !strcmp(ti, tiers[t]))
						counts[a][t]++;
		}
		json_decref(list);
	}
	head(b, "isola_sandboxes", "gauge", "Sandboxes by state and tier (all tenants).");
	for (size_t a = 0; a < 4; a++)
		for (size_t t = 0; t < 2; t++)
			put(b, "isola_sandboxes{state=\"%s\",tier=\"%s\"} %u\n", states[a],
			    tiers[t], counts[a][t]);
}

/* Ready sandboxes of every warm pool (fixed and automatic), summed. */
static void render_pools(struct api_server *srv, struct api_buf *b)
{
	json_t *pools = core_pool_list(srv->core), *p;
	json_int_t ready = 0;
	size_t i;

	json_array_foreach(pools, i, p) ready += json_integer_value(json_object_get(p, "ready"));
	json_decref(pools);
	head(b, "isola_pool_sandboxes", "gauge",
	     "Warm sandboxes ready in pools (fixed and automatic), not yet claimed.");
	put(b, "isola_pool_sandboxes %lld\n", (long long)ready);
}

static void render_host(struct api_server *srv, struct api_buf *b)
{
	json_t *cap = core_capacity(srv->core), *st = audit_status(core_audit(srv->core));

	head(b, "isola_host_cpu_committed", "gauge", "CPUs promised to running sandboxes.");
	put(b, "isola_host_cpu_committed %g\n",
	    json_number_value(json_object_get(cap, "cpu_committed")));
	head(b, "isola_host_cpu_capacity", "gauge",
	     "CPUs admission may promise (CPUs x overcommit).");
	put(b, "isola_host_cpu_capacity %g\n",
	    json_number_value(json_object_get(cap, "cpu_capacity")));
	head(b, "isola_host_memory_committed_bytes", "gauge",
	     "Memory limits of running sandboxes, summed.");
	put(b, "isola_host_memory_committed_bytes %lld\n",
	    (long long)json_integer_value(json_object_get(cap, "memory_committed")));
	head(b, "isola_host_memory_capacity_bytes", "gauge", "Memory admission may promise.");
	put(b, "isola_host_memory_capacity_bytes %lld\n",
	    (long long)json_integer_value(json_object_get(cap, "memory_capacity")));
	head(b, "isola_audit_records", "gauge", "Sequence number of the newest audit record.");
	put(b, "isola_audit_records %lld\n",
	    (long long)json_integer_value(json_object_get(st, "records")));
	head(b, "isola_audit_append_errors_total", "counter",
	     "Audit records that could not be written since isolad started.");
	put(b, "isola_audit_append_errors_total %lld\n",
	    (long long)json_integer_value(json_object_get(st, "append_errors")));
	json_decref(cap);
	json_decref(st);
}

/* The process tier's writable layers made ahead (isolad --layer-slots). */
static void render_layer_slots(struct api_buf *b)
{
	uint64_t taken, made_inline, dropped, kept;

	tier_process_layer_slots_counts(&taken, &made_inline);
	head(b, "isola_layer_slots_ready", "gauge",
	     "Writable layers made ahead and not yet taken (isolad --layer-slots).");
	put(b, "isola_layer_slots_ready %u\n", tier_process_layer_slots_ready());
	head(b, "isola_layer_slots_creates_total", "counter",
	     "Process-tier creates of a default-size writable layer: taken from the layers made "
	     "ahead (ready) or made on the spot (none ready, or --layer-slots 0).");
	put(b, "isola_layer_slots_creates_total{from=\"ready\"} %llu\n", (unsigned long long)taken);
	put(b, "isola_layer_slots_creates_total{from=\"inline\"} %llu\n",
	    (unsigned long long)made_inline);
	tier_process_layer_release_counts(&dropped, &kept);
	head(b, "isola_layer_releases_total", "counter",
	     "Destroyed process-tier writable layers: shut down first, dropping what the sandbox "
	     "wrote and the image did not hold yet (8 MiB or more), or unmounted as they were.");
	put(b, "isola_layer_releases_total{writes=\"dropped\"} %llu\n",
	    (unsigned long long)dropped);
	put(b, "isola_layer_releases_total{writes=\"kept\"} %llu\n", (unsigned long long)kept);
}

enum MHD_Result api_metrics(struct api_req *r)
{
	struct api_buf b = {0};
	struct MHD_Response *resp;
	uint64_t cum = 0;

	render_sandboxes(r->srv, &b);
	pthread_mutex_lock(&m.lock);
	head(&b, "isola_sandbox_create_seconds", "histogram",
	     "Time to create a sandbox (cold create, admitted requests that succeeded).");
	for (size_t i = 0; i < N_BUCKETS; i++) {
		cum += m.create_buckets[i];
		put(&b, "isola_sandbox_create_seconds_bucket{le=\"%g\"} %llu\n", create_buckets[i],
		    (unsigned long long)cum);
	}
	put(&b, "isola_sandbox_create_seconds_bucket{le=\"+Inf\"} %llu\n",
	    (unsigned long long)m.create_count);
	put(&b, "isola_sandbox_create_seconds_sum %.6f\n", m.create_sum);
	put(&b, "isola_sandbox_create_seconds_count %llu\n", (unsigned long long)m.create_count);
	head(&b, "isola_admission_refusals_total", "counter",
	     "Sandbox creations refused: rate limit, tenant quota, host capacity.");
	for (size_t i = 0; i < ARRAY_SIZE(refusal_codes); i++)
		put(&b, "isola_admission_refusals_total{reason=\"%s\"} %llu\n", refusal_codes[i],
		    (unsigned long long)m.refusals[i]);
	head(&b, "isola_commands_total", "counter",
	     "Commands started in sandboxes (exec: foreground, process: background).");
	put(&b, "isola_commands_total{kind=\"exec\"} %llu\n", (unsigned long long)m.commands[0]);
	put(&b, "isola_commands_total{kind=\"process\"} %llu\n", (unsigned long long)m.commands[1]);
	head(&b, "isola_api_requests_total", "counter", "API requests completed.");
	put(&b, "isola_api_requests_total %llu\n", (unsigned long long)m.requests);
	head(&b, "isola_api_errors_total", "counter", "API error responses by error code.");
	for (size_t i = 0; i < N_CODES; i++)
		put(&b, "isola_api_errors_total{code=\"%s\"} %llu\n", error_codes[i],
		    (unsigned long long)m.errors[i]);
	head(&b, "isola_api_stream_aborts_total", "counter",
	     "Streamed responses isolad broke off after the headers (agent lost or failed, "
	     "encoder error), by stream; each is also an isola_api_errors_total.");
	for (size_t i = 0; i < N_STREAMS; i++)
		put(&b, "isola_api_stream_aborts_total{stream=\"%s\"} %llu\n", stream_kinds[i],
		    (unsigned long long)m.stream_aborts[i]);
	pthread_mutex_unlock(&m.lock);
	head(&b, "isola_events_scans_total", "counter",
	     "Sandbox list scans made by GET /v1/events streams (each after a change-bus "
	     "notification, or once per keep-alive period when nothing changed).");
	put(&b, "isola_events_scans_total %llu\n", (unsigned long long)api_events_scans());
	render_pools(r->srv, &b);
	render_host(r->srv, &b);
	api_network_metrics(&b);
	render_layer_slots(&b);
	resp = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		api_buf_fini(&b);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	return api_respond_response(r, 200, resp);
}

enum MHD_Result api_sandbox_stats(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct tier_stats st;
	struct sandbox *s;
	json_t *sb, *j;

	if (api_sandbox_agent(r, &s, NULL, &err) < 0)
		return api_respond_err(r, err);
	if (sandbox_stats(s, &st, &err) < 0) {
		sandbox_unref(s);
		return api_respond_err(r, err);
	}
	sb = sandbox_to_json(s);
	j = json_pack("{s:s, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:O, s:o*}", "id",
		      sandbox_id(s), "time", util_wall_time(), "cpu_seconds", st.cpu_usec / 1e6,
		      "memory_bytes", (json_int_t)st.memory_bytes, "memory_peak_bytes",
		      (json_int_t)st.memory_peak_bytes, "memory_limit_bytes",
		      json_integer_value(json_object_get(sb, "memory")), "disk_bytes",
		      (json_int_t)st.disk_bytes, "disk_limit_bytes",
		      json_integer_value(json_object_get(sb, "disk")), "pids", (json_int_t)st.pids,
		      "oom_kills", (json_int_t)st.oom_kills, "cpu_limit",
		      json_object_get(sb, "cpu"), "network", api_network_counters(sandbox_id(s)));
	json_decref(sb);
	sandbox_unref(s);
	return api_respond_json(r, 200, j);
}

/* The optional unix-time query `key` (decimal seconds) into *out; -EINVAL when malformed. */
static int query_unix(struct api_req *r, const char *key, double *out)
{
	const char *v = api_query(r, key);
	char *end;
	double t;

	if (!v)
		return 0;
	/* UNTRUSTED: a query value; finite, 0..year 9999 */
	t = strtod(v, &end);
	if (!*v || *end || !(t >= 0 && t < 253402300800.0))
		return -EINVAL;
	*out = t;
	return 0;
}

enum MHD_Result api_sandbox_metrics(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox_sample *v;
	struct sandbox *s;
	double start = 0, end = 253402300800.0;
	bool with_prev;
	json_t *arr;
	size_t n;

	if (query_unix(r, "start", &start) < 0 || query_unix(r, "end", &end) < 0)
		return api_respond_error(r, "invalid",
					 "query `start` and `end` must be unix seconds");
	if (core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), &s,
				 &err) < 0)
		return api_respond_err(r, err);
	v = calloc(SANDBOX_HISTORY_LEN, sizeof(*v));
	arr = json_array();
	n = v ? sandbox_history(s, start, end, v, SANDBOX_HISTORY_LEN, &with_prev) : 0;
	for (size_t i = with_prev ? 1 : 0; arr && i < n; i++)
		json_array_append_new(arr,
				      json_pack("{s:f, s:f, s:I, s:I, s:I, s:I}", "time", v[i].at,
						"cpu_seconds", v[i].cpu_usec / 1e6, "memory_bytes",
						(json_int_t)v[i].memory_bytes, "disk_bytes",
						(json_int_t)v[i].disk_bytes, "net_tx_bytes",
						(json_int_t)v[i].net_tx_bytes, "net_rx_bytes",
						(json_int_t)v[i].net_rx_bytes));
	free(v);
	sandbox_unref(s);
	return api_respond_json(r, 200,
				arr ? json_pack("{s:i, s:i, s:o}", "period_s",
						SANDBOX_HISTORY_PERIOD_S, "max_samples",
						SANDBOX_HISTORY_LEN, "samples", arr)
				    : NULL);
}
