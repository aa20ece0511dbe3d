/* SPDX-License-Identifier: Apache-2.0 */
/* metrics: E2B's GET /sandboxes/{id}/metrics?start=&end= from the sandbox's kept history. */
#include "e2b-internal.h"

#include <math.h>
#include <stdlib.h>

#include "../../common/util.h"
#include "../core/core.h"

/* CPU use between two samples as E2B's cpuUsedPct: 0-100 of the sandbox's CPUs. */
static double cpu_pct(uint64_t from_usec, double from_t, uint64_t to_usec, double to_t, double cpus)
{
	double pct;

	if (to_t - from_t <= 0 || cpus <= 0 || to_usec < from_usec)
		return 0;
	pct = (double)(to_usec - from_usec) / 1e6 / (to_t - from_t) / cpus * 100.0;
	return pct > 100 ? 100 : pct;
}

/* One E2B metric object (new reference). */
static json_t *metric(const struct sandbox_sample *x, double pct, double cpus, const json_t *sj)
{
	char ts[40];

	e2b_rfc3339(x->at, ts, sizeof(ts));
	return json_pack("{s:s, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I}", "timestamp", ts,
			 "timestampUnix", (json_int_t)x->at, "cpuCount", (int)cpus, "cpuUsedPct",
			 pct, "memUsed", (json_int_t)x->memory_bytes, "memTotal",
			 json_integer_value(json_object_get(sj, "memory")), "memCache",
			 (json_int_t)0, "diskUsed", (json_int_t)x->disk_bytes, "diskTotal",
			 json_integer_value(json_object_get(sj, "disk")));
}

/* Reads the optional unix-seconds query `key` into *out. Responds 400 and returns -1. */
static int query_time(struct api_req *r, const char *key, double *out, bool *given)
{
	const char *v = api_query(r, key);
	uint64_t t;

	*given = v && *v;
	if (!*given)
		return 0;
	/* UNTRUSTED: a query value; bounded to year 9999. */
	if (api_parse_u64(v, 253402300799ull, &t) < 0) {
		e2b_ctl_error(r, 400, "query `%s` must be unix seconds, not `%.32s`", key, v);
		return -1;
	}
	*out = (double)t;
	return 0;
}

enum MHD_Result e2b_ctl_metrics(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox_sample *v = NULL;
	struct tier_stats st;
	struct sandbox *s;
	double now = util_wall_time(), start = 0, end = 0, cpus, created;
	bool has_start, has_end, with_prev;
	json_t *out = NULL, *sj;
	size_t n, i;
	enum MHD_Result ret;

	if (query_time(r, "start", &start, &has_start) < 0 ||
	    query_time(r, "end", &end, &has_end) < 0)
		return MHD_YES;
	if (!has_end)
		end = now + 1;
	else
		end += 0.999999; /* whole seconds: `end` includes its own second */
	if (e2b_ctl_sandbox(r, &s, &sj) < 0)
		return MHD_YES;
	cpus = ceil(json_number_value(json_object_get(sj, "cpu")));
	if (cpus < 1)
		cpus = 1;
	created = json_number_value(json_object_get(sj, "created_at"));
	v = calloc(SANDBOX_HISTORY_LEN + 2, sizeof(*v));
	out = json_array();
	if (!v || !out) {
		ret = MHD_NO;
		goto out;
	}
	n = sandbox_history(s, start, end, v, SANDBOX_HISTORY_LEN + 1, &with_prev);
	/* Without `end`, the samples end with one taken now (E2B's newest data is current). */
	if (!has_end && now >= start && sandbox_stats(s, &st, &err) == 0)
		v[n++] = (struct sandbox_sample){.at = now,
						 .cpu_usec = st.cpu_usec,
						 .memory_bytes = st.memory_bytes,
						 .disk_bytes = st.disk_bytes};
	for (i = with_prev ? 1 : 0; i < n; i++) {
		/* CPU since the previous sample; the first one since creation */
		double pct = i > 0 ? cpu_pct(v[i - 1].cpu_usec, v[i - 1].at, v[i].cpu_usec, v[i].at,
					     cpus)
				   : cpu_pct(0, created, v[i].cpu_usec, v[i].at, cpus);

		json_array_append_new(out, metric(&v[i], pct, cpus, sj));
	}
	ret = api_respond_json(r, 200, json_incref(out));
out:
	free(v);
	json_decref(out);
	json_decref(sj);
	sandbox_unref(s);
	return ret;
}
