/* SPDX-License-Identifier: Apache-2.0 */
/* control: E2B's control plane — create, connect, kill, timeout, pause, info, list, metrics. */
#include "e2b-internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../common/log.h"
#include "../core/core.h"
#include "../images/images.h"
#include "../expose/expose.h"
#include "../net/net.h"

#define LIST_DEFAULT_LIMIT 100
#define LIST_MAX_LIMIT	   100
#define RETRY_AFTER_S	   "5"

enum MHD_Result e2b_ctl_error(struct api_req *r, unsigned status, const char *fmt, ...)
{
	char *msg = NULL;
	enum MHD_Result ret;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	ret = api_respond_json(
		r, status,
		json_pack("{s:i, s:s}", "code", (int)status, "message", msg ? msg : "error"));
	free(msg);
	return ret;
}

/* e2b_ctl_err with the Retry-After core computed (seconds, 0 = the default). */
static enum MHD_Result ctl_err_retry(struct api_req *r, const struct isola_err *e,
				     double retry_after_s)
{
	const char *code = e ? e->code : "internal";
	const char *msg = e && e->message ? e->message : "error";
	unsigned status;

	if (!code)
		code = "internal";
	/* Limits are what E2B reports as its concurrency/rate limit: 429 + Retry-After, which
	 * its SDK surfaces as RateLimitError. A full host is 503 (ServiceBusyError), also with
	 * Retry-After. */
	if (!strcmp(code, "rate_limited") || !strcmp(code, "quota_exceeded"))
		status = 429;
	else if (!strcmp(code, "unavailable"))
		status = 503;
	else
		return e2b_ctl_error(r, api_status_for_code(code), "%s", msg);
	{
		struct MHD_Response *resp = api_json_response(
			json_pack("{s:i, s:s}", "code", (int)status, "message", msg));

		if (!resp)
			return MHD_NO;
		if (retry_after_s > 0) {
			char ra[24];

			snprintf(ra, sizeof(ra), "%.0f", ceil(retry_after_s));
			MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
		} else {
			MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
		}
		return api_respond_response(r, status, resp);
	}
}

enum MHD_Result e2b_ctl_err(struct api_req *r, const struct isola_err *e)
{
	return ctl_err_retry(r, e, 0);
}

int e2b_ctl_body(struct api_req *r, json_t **out)
{
	struct e2b_req *er = e2b_req_of(r);
	cleanup_err struct isola_err *err = NULL;

	if (er->too_large) {
		e2b_ctl_error(r, 413, "request body is larger than %u bytes", E2B_MAX_BODY);
		return -1;
	}
	if (e2b_json_parse(er->body.data, er->body.len, out, &err) < 0) {
		e2b_ctl_error(r, 400, "%s", err->message);
		return -1;
	}
	return 0;
}

/* --- sandbox objects ----------------------------------------------------------------------- */

/* E2B's template ids: `base` is isola's default template (the host view). */
static const char *template_to_e2b(const char *name)
{
	return !name || !*name || !strcmp(name, "host") ? "base" : name;
}

/* Is there an isola template of this name (any tenant's: visibility is checked at create)? */
static bool template_exists(const char *name)
{
	struct template_info t;

	memset(&t, 0, sizeof(t));
	if (images_get(name, &t, NULL) < 0)
		return false;
	template_info_fini(&t);
	return true;
}

/* E2B knows `running` and `paused`: a hibernated isola sandbox is paused to E2B (memory or
 * not, its connect resumes it); other states (error, ...) are shown as they are. */
static const char *state_to_e2b(const char *state)
{
	if (!state)
		return "error";
	if (!strcmp(state, "paused") || !strcmp(state, "hibernated"))
		return "paused";
	return state;
}

json_t *e2b_sandbox_obj(struct api_req *r, const json_t *sj, bool detail)
{
	const char *id = json_string_value(json_object_get(sj, "id"));
	const char *tmpl = json_string_value(json_object_get(sj, "template"));
	const char *state = json_string_value(json_object_get(sj, "state"));
	double created = json_real_value(json_object_get(sj, "created_at"));
	json_t *exp = json_object_get(sj, "expires_at");
	double cpu = json_number_value(json_object_get(sj, "cpu"));
	char token[E2B_TOKEN_MAX], started[40], end[40], domain[160];
	json_t *o;

	e2b_envd_token(r, id, token, sizeof(token));
	/* getHost(port) is `<port>-<id>.<domain>`: the exposure listener's routing domain and
	 * port, which it serves by Host header (null when the listener is off). */
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s?}", "templateID", template_to_e2b(tmpl),
		      "sandboxID", id, "clientID", E2B_CLIENT_ID, "alias", tmpl ? tmpl : "",
		      "envdVersion", E2B_ENVD_VERSION, "envdAccessToken", token, "domain",
		      expose_host_suffix(domain, sizeof(domain)) == 0 ? domain : NULL);
	if (o && !json_object_get(o, "domain"))
		json_object_set_new(o, "domain", json_null());
	if (!o || !detail)
		return o;
	e2b_rfc3339(created, started, sizeof(started));
	if (json_is_number(exp))
		e2b_rfc3339(json_number_value(exp), end, sizeof(end));
	else
		snprintf(end, sizeof(end), "9999-12-31T23:59:59Z"); /* no TTL: never ends */
	json_object_set_new(o, "startedAt", json_string(started));
	json_object_set_new(o, "endAt", json_string(end));
	json_object_set_new(o, "cpuCount", json_integer((json_int_t)ceil(cpu > 0 ? cpu : 1)));
	json_object_set_new(
		o, "memoryMB",
		json_integer(json_integer_value(json_object_get(sj, "memory")) / (1024 * 1024)));
	json_object_set_new(
		o, "diskSizeMB",
		json_integer(json_integer_value(json_object_get(sj, "disk")) / (1024 * 1024)));
	json_object_set(o, "metadata", json_object_get(sj, "labels"));
	json_object_set_new(o, "state", json_string(state_to_e2b(state)));
	return o;
}

int e2b_ctl_sandbox(struct api_req *r, struct sandbox **s, json_t **sj)
{
	cleanup_err struct isola_err *err = NULL;

	if (core_sandbox_get_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"), s,
				 &err) < 0) {
		e2b_ctl_err(r, err);
		return -1;
	}
	*sj = sandbox_to_json(*s);
	if (!*sj) {
		sandbox_unref(*s);
		e2b_ctl_error(r, 500, "out of memory");
		return -1;
	}
	return 0;
}

/* --- create ---------------------------------------------------------------------------------- */

void e2b_ctl_expose_all(struct sandbox *s)
{
	cleanup_err struct isola_err *err = NULL;

	/* E2B's sandboxes answer on every port at <port>-<id>.<domain> (its default public
	 * traffic); isola's exposure listener does the same for a sandbox made through the E2B
	 * API. Off when isolad runs without --expose-listen. */
	if (expose_listen_addr() && expose_port_all_public(s, &err) < 0)
		log_warn("e2b: sandbox `%s`: expose its ports: %s", sandbox_id(s),
			 err ? err->message : "error");
}

bool e2b_is_snapshot(struct api_req *r, const char *name)
{
	cleanup_err struct isola_err *err = NULL;
	json_t *snap = NULL;
	bool found = core_snapshot_get_for(r->srv->core, api_tenant(r), name, &snap, &err) == 0;

	json_decref(snap);
	return found;
}

enum MHD_Result e2b_ctl_create(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	struct sandbox_request req = {0};
	const char *tmpl = NULL;
	json_t *policy = NULL;
	uint64_t timeout = E2B_DEFAULT_TTL_S;
	bool internet = false, auto_pause = false, pause_memory = true, auto_resume = false;
	double retry_after = 0;
	struct sandbox *s = NULL;
	json_t *b = NULL, *sj, *out;
	enum MHD_Result ret;

	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	/* UNTRUSTED: the client's body. Unknown members are ignored (E2B adds fields often);
	 * those isola cannot honour are refused rather than silently dropped. */
	if (e2b_jstr(b, "templateID", NULL, 255, &tmpl, &err) < 0 ||
	    e2b_juint(b, "timeout", NULL, UINT32_MAX, &timeout, &err) < 0 ||
	    api_json_str_map(b, "metadata", false, &req.labels, &err) < 0 ||
	    api_json_str_map(b, "envVars", true, &req.env, &err) < 0 ||
	    e2b_jbool(b, "allow_internet_access", "allowInternetAccess", &internet, &err) < 0 ||
	    e2b_jbool(b, "autoPause", NULL, &auto_pause, &err) < 0 ||
	    e2b_jbool(b, "autoPauseMemory", NULL, &pause_memory, &err) < 0 ||
	    e2b_jbool(e2b_jget(b, "autoResume", NULL), "enabled", NULL, &auto_resume, &err) < 0) {
		ret = e2b_ctl_error(r, 400, "%s", err->message);
		goto out;
	}
	/* autoPause: the timeout pauses (memory kept) or, without memory, hibernates (files
	 * kept) instead of killing; connect resumes, and so does any request with autoResume
	 * (lifecycle.c: what policy paused resumes by default; E2B's default is not to). */
	if (auto_pause) {
		req.on_timeout = pause_memory ? "pause" : "hibernate";
		req.auto_resume = auto_resume ? 1 : -1;
	}
	if (e2b_network_policy(e2b_jget(b, "allow_internet_access", "allowInternetAccess"),
			       e2b_jget(b, "network", NULL), &policy, &err) < 0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	/* `code-interpreter-v1` (@e2b/code-interpreter's default): a template of that name when
	 * the operator made one (isola template import code-interpreter-v1 ...), else the default
	 * template, whose python3 runs the interpreter (docs/code-interpreter.md). */
	if (tmpl && !strcmp(tmpl, E2B_CODE_TEMPLATE) && !template_exists(tmpl) &&
	    !e2b_is_snapshot(r, tmpl)) {
		tmpl = NULL;
		/* A Python context with matplotlib loaded is ~100 MiB: the 256 MiB default held
		 * the default context and one more, and a third died of OOM (ContextDied). */
		req.memory_bytes = E2B_CODE_MEMORY;
	}
	if (tmpl && *tmpl && strcmp(tmpl, "base") != 0) {
		if (!api_valid_template_name(tmpl) || strlen(tmpl) >= sizeof(req.template_name)) {
			ret = e2b_ctl_error(r, 400, "invalid templateID `%.64s`", tmpl);
			goto out;
		}
		/* A snapshot of the tenant's is a template to E2B (Sandbox.create(snapshotId)):
		 * a name that names one restores it, any other names an isola template. */
		if (e2b_is_snapshot(r, tmpl))
			req.snapshot = tmpl;
		else
			snprintf(req.template_name, sizeof(req.template_name), "%s", tmpl);
	}
	req.ttl_s = timeout ? (uint32_t)timeout : E2B_DEFAULT_TTL_S;
	req.tenant = api_tenant(r);
	req.retry_after_s = &retry_after;
	if (core_sandbox_create(r->srv->core, &req, &s, &err) < 0) {
		ret = ctl_err_retry(r, err, retry_after);
		goto out;
	}
	/* The policy is in place before the client hears of the sandbox (no user code yet). */
	if (policy && net_sandbox_set_policy(sandbox_id(s), policy, &err) < 0) {
		core_sandbox_destroy(r->srv->core, sandbox_id(s), NULL);
		sandbox_unref(s);
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	e2b_ctl_expose_all(s);
	api_req_keepalive(r);
	sj = sandbox_to_json(s);
	out = sj ? e2b_sandbox_obj(r, sj, false) : NULL;
	/* Report the template id as the client named it. */
	if (out && tmpl && *tmpl)
		json_object_set_new(out, "templateID", json_string(tmpl));
	json_decref(sj);
	sandbox_unref(s);
	ret = api_respond_json(r, 201, out);
out:
	json_decref(policy);
	json_decref(b);
	return ret;
}

/* --- info, kill, timeout, pause, connect ---------------------------------------------------- */

enum MHD_Result e2b_ctl_get(struct api_req *r)
{
	struct sandbox *s;
	json_t *sj;
	enum MHD_Result ret;

	if (e2b_ctl_sandbox(r, &s, &sj) < 0)
		return MHD_YES;
	ret = api_respond_json(r, 200, e2b_sandbox_obj(r, sj, true));
	json_decref(sj);
	sandbox_unref(s);
	return ret;
}

enum MHD_Result e2b_ctl_kill(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;

	if (core_sandbox_destroy_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"),
				     &err) < 0)
		return e2b_ctl_err(r, err);
	api_req_keepalive(r);
	return api_respond_empty(r, 204);
}

static enum MHD_Result set_ttl(struct api_req *r, const char *camel)
{
	cleanup_err struct isola_err *err = NULL;
	uint64_t secs = UINT64_MAX;
	json_t *b = NULL;
	int rc;

	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	rc = e2b_juint(b, camel, NULL, UINT32_MAX, &secs, &err);
	json_decref(b);
	if (rc < 0)
		return e2b_ctl_error(r, 400, "%s", err->message);
	if (secs == UINT64_MAX)
		return e2b_ctl_error(r, 400, "missing field `%s`", camel);
	if (core_sandbox_set_ttl_for(r->srv->core, api_tenant(r), api_match_get(&r->match, "id"),
				     (uint32_t)secs, &err) < 0)
		return e2b_ctl_err(r, err);
	return api_respond_empty(r, 204);
}

enum MHD_Result e2b_ctl_timeout(struct api_req *r)
{
	return set_ttl(r, "timeout");
}

enum MHD_Result e2b_ctl_refresh(struct api_req *r)
{
	struct e2b_req *er = e2b_req_of(r);

	/* Older SDKs: {duration} seconds; an empty body keeps the sandbox alive as it is. */
	if (!er->too_large && er->body.len == 0) {
		struct sandbox *s;
		json_t *sj;

		if (e2b_ctl_sandbox(r, &s, &sj) < 0)
			return MHD_YES;
		json_decref(sj);
		sandbox_unref(s);
		return api_respond_empty(r, 204);
	}
	return set_ttl(r, "duration");
}

enum MHD_Result e2b_ctl_pause(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	bool memory = true;
	struct sandbox *s;
	const char *state;
	json_t *b = NULL, *sj;
	enum MHD_Result ret;
	int rc;

	/* {memory: false} (the SDK's keepMemory) keeps only the files: hibernate. */
	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	rc = e2b_jbool(b, "memory", NULL, &memory, &err);
	json_decref(b);
	if (rc < 0)
		return e2b_ctl_error(r, 400, "%s", err->message);
	if (e2b_ctl_sandbox(r, &s, &sj) < 0)
		return MHD_YES;
	state = json_string_value(json_object_get(sj, "state"));
	/* E2B answers 409 for a sandbox that is not running (its SDK: "already paused"). The
	 * pause keeps memory and processes (core's pause: the tier's freezer / stopped vCPUs);
	 * a user's pause stays until connect or resume (docs/persistence.md). */
	if (state && strcmp(state, "running") != 0)
		ret = e2b_ctl_error(r, 409, "sandbox `%s` is %s, not running", sandbox_id(s),
				    state);
	else if ((memory ? core_sandbox_pause_for : core_sandbox_hibernate_for)(
			 r->srv->core, api_tenant(r), sandbox_id(s), &err) < 0)
		ret = e2b_ctl_err(r, err);
	else
		ret = api_respond_empty(r, 204);
	json_decref(sj);
	sandbox_unref(s);
	return ret;
}

/*
 * Resumes a paused or hibernated sandbox for resume and connect, then gives it `timeout`
 * seconds (0 = E2B's default) from now, as E2B does; responds `status` with the sandbox.
 */
static enum MHD_Result ctl_wake(struct api_req *r, struct sandbox *s, uint64_t timeout,
				unsigned status)
{
	cleanup_err struct isola_err *err = NULL;
	enum MHD_Result ret;
	json_t *sj;

	if (core_sandbox_resume_for(r->srv->core, api_tenant(r), sandbox_id(s), &err) < 0 ||
	    core_sandbox_set_ttl_for(r->srv->core, api_tenant(r), sandbox_id(s),
				     timeout ? (uint32_t)timeout : E2B_DEFAULT_TTL_S, &err) < 0)
		return e2b_ctl_err(r, err);
	api_req_keepalive(r);
	sj = sandbox_to_json(s);
	ret = api_respond_json(r, status, sj ? e2b_sandbox_obj(r, sj, false) : NULL);
	json_decref(sj);
	return ret;
}

/* True for the states a resume starts from. */
static bool ctl_is_stopped(const char *state)
{
	return state && (!strcmp(state, "paused") || !strcmp(state, "hibernated"));
}

enum MHD_Result e2b_ctl_resume(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	uint64_t timeout = 0;
	struct sandbox *s;
	const char *state;
	json_t *b = NULL, *sj;
	enum MHD_Result ret;

	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	if (e2b_juint(b, "timeout", NULL, UINT32_MAX, &timeout, &err) < 0) {
		json_decref(b);
		return e2b_ctl_error(r, 400, "%s", err->message);
	}
	json_decref(b);
	if (e2b_ctl_sandbox(r, &s, &sj) < 0)
		return MHD_YES;
	state = json_string_value(json_object_get(sj, "state"));
	if (ctl_is_stopped(state))
		ret = ctl_wake(r, s, timeout, 201);
	else
		ret = e2b_ctl_error(r, 409, "sandbox `%s` is %s, not paused", sandbox_id(s),
				    state ? state : "unknown");
	json_decref(sj);
	sandbox_unref(s);
	return ret;
}

enum MHD_Result e2b_ctl_connect(struct api_req *r)
{
	cleanup_err struct isola_err *err = NULL;
	uint64_t timeout = 0;
	struct sandbox *s;
	const char *state;
	json_t *b = NULL, *sj, *exp;
	enum MHD_Result ret;

	if (e2b_ctl_body(r, &b) < 0)
		return MHD_YES;
	if (e2b_juint(b, "timeout", NULL, UINT32_MAX, &timeout, &err) < 0) {
		json_decref(b);
		return e2b_ctl_error(r, 400, "%s", err->message);
	}
	json_decref(b);
	if (e2b_ctl_sandbox(r, &s, &sj) < 0)
		return MHD_YES;
	state = json_string_value(json_object_get(sj, "state"));
	/* Connecting to a paused sandbox resumes it (E2B's semantics: 201). */
	if (ctl_is_stopped(state)) {
		ret = ctl_wake(r, s, timeout, 201);
		goto out;
	}
	if (!state || strcmp(state, "running") != 0) {
		ret = e2b_ctl_error(r, 409, "sandbox `%s` is %s and cannot be resumed%s%s",
				    sandbox_id(s), state ? state : "unknown",
				    json_is_string(json_object_get(sj, "error")) ? ": " : "",
				    json_is_string(json_object_get(sj, "error"))
					    ? json_string_value(json_object_get(sj, "error"))
					    : "");
		goto out;
	}
	/* A running sandbox: connect only ever extends its timeout (E2B's semantics). */
	exp = json_object_get(sj, "expires_at");
	if (timeout && json_is_number(exp) &&
	    json_number_value(exp) < util_wall_time() + (double)timeout &&
	    core_sandbox_set_ttl_for(r->srv->core, api_tenant(r), sandbox_id(s), (uint32_t)timeout,
				     &err) < 0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	ret = api_respond_json(r, 200, e2b_sandbox_obj(r, sj, false));
out:
	json_decref(sj);
	sandbox_unref(s);
	return ret;
}

/* --- list ------------------------------------------------------------------------------------ */

/* Percent-decodes s[0..n) into out (NUL-terminated); `plus` turns '+' into ' '. */
static int pct_decode(const char *s, size_t n, bool plus, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n)
				return -EINVAL;
			h = util_hexval(s[i + 1]);
			l = util_hexval(s[i + 2]);
			if (h < 0 || l < 0)
				return -EINVAL;
			c = (char)(h << 4 | l);
			i += 2;
		} else if (c == '+' && plus) {
			c = ' ';
		}
		if (c == '\0' || o + 1 >= cap)
			return -EINVAL;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/*
 * E2B's `metadata` query: `k1=v1&k2=v2` (already URL-decoded once by MHD), each key and
 * value percent-encoded again by the SDK. UNTRUSTED: bounded per pair and in count.
 */
static int parse_metadata(const char *q, json_t *filter)
{
	const char *p = q;

	while (p && *p) {
		const char *amp = strchr(p, '&');
		size_t len = amp ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		char k[256], v[1024], k2[256], v2[1024];

		if (!eq || eq == p || json_object_size(filter) >= 64)
			return -EINVAL;
		if (pct_decode(p, (size_t)(eq - p), true, k, sizeof(k)) < 0 ||
		    pct_decode(eq + 1, len - (size_t)(eq - p) - 1, true, v, sizeof(v)) < 0 ||
		    pct_decode(k, strlen(k), false, k2, sizeof(k2)) < 0 ||
		    pct_decode(v, strlen(v), false, v2, sizeof(v2)) < 0)
			return -EINVAL;
		json_object_set_new(filter, k2, json_string(v2));
		p = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* Sort key of a listed sandbox: creation time (µs) then id. */
struct list_item {
	long long created_us; /* created_at in microseconds */
	const char *id;	      /* borrowed from the list */
	json_t *j;	      /* borrowed */
};

static int item_cmp(const void *a, const void *b)
{
	const struct list_item *x = a, *y = b;

	if (x->created_us != y->created_us)
		return x->created_us < y->created_us ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Newest first (E2B's default order). */
static int item_cmp_desc(const void *a, const void *b)
{
	return item_cmp(b, a);
}

/* nextToken: hex of "<created_us>.<id>" — opaque to clients, stable across kills. */
static void token_make(const struct list_item *it, char *out, size_t n)
{
	char raw[64];
	size_t l = (size_t)snprintf(raw, sizeof(raw), "%lld.%s", it->created_us, it->id);

	for (size_t i = 0; i < l && 2 * i + 2 < n; i++)
		snprintf(out + 2 * i, 3, "%02x", (unsigned char)raw[i]);
}

static int token_parse(const char *t, long long *created_us, char *id, size_t idn)
{
	char raw[64];
	size_t l = strlen(t);
	char *dot, *end;

	/* UNTRUSTED: the client's nextToken. */
	if (l == 0 || l % 2 || l / 2 >= sizeof(raw))
		return -EINVAL;
	for (size_t i = 0; i < l / 2; i++) {
		int h = util_hexval(t[2 * i]), lo = util_hexval(t[2 * i + 1]);

		if (h < 0 || lo < 0)
			return -EINVAL;
		raw[i] = (char)(h << 4 | lo);
	}
	raw[l / 2] = '\0';
	dot = strchr(raw, '.');
	if (!dot || strlen(dot + 1) >= idn)
		return -EINVAL;
	*dot = '\0';
	*created_us = strtoll(raw, &end, 10);
	if (*end || end == raw)
		return -EINVAL;
	snprintf(id, idn, "%s", dot + 1);
	return api_valid_sandbox_id(id) ? 0 : -EINVAL;
}

static bool state_wanted(const char *states, const char *state)
{
	const char *p = states;
	size_t n;

	state = state_to_e2b(state);
	n = strlen(state);
	if (!states || !*states) /* E2B's default: running and paused */
		return !strcmp(state, "running") || !strcmp(state, "paused");
	while (p && *p) {
		size_t l = strcspn(p, ",");

		if (l == n && !strncmp(p, state, n))
			return true;
		p += l;
		if (*p == ',')
			p++;
	}
	return false;
}

/* The filters and order of a list request (E2B's GET /v2/sandboxes query). */
struct list_query {
	const char *states;   /* comma-separated E2B states, NULL = running,paused */
	const char *tmpl;     /* template id or alias, NULL = any */
	double after, before; /* startedAfter / startedBefore (unix s), 0 = unbounded */
	bool asc;	      /* order=asc; E2B's default is desc, newest first */
};

/* Parses order, startedAfter, startedBefore and template. Responds 400 and returns -1. */
static int list_query_parse(struct api_req *r, struct list_query *q)
{
	const char *o = api_query(r, "order"), *a = api_query(r, "startedAfter");
	const char *b = api_query(r, "startedBefore");

	*q = (struct list_query){.states = api_query(r, "state"), .tmpl = api_query(r, "template")};
	if (o && strcmp(o, "asc") && strcmp(o, "desc")) {
		e2b_ctl_error(r, 400, "query `order` must be asc or desc, not `%.32s`", o);
		return -1;
	}
	q->asc = o && !strcmp(o, "asc");
	if ((a && e2b_parse_rfc3339(a, &q->after) < 0) ||
	    (b && e2b_parse_rfc3339(b, &q->before) < 0)) {
		e2b_ctl_error(r, 400, "query `%s` must be an RFC 3339 time",
			      a && e2b_parse_rfc3339(a, &q->after) < 0 ? "startedAfter"
								       : "startedBefore");
		return -1;
	}
	if (q->tmpl && !*q->tmpl)
		q->tmpl = NULL;
	return 0;
}

/* True when sandbox sj passes q's state, template and start-time filters. */
static bool list_wanted(const struct list_query *q, const json_t *sj)
{
	const char *st = json_string_value(json_object_get(sj, "state"));
	const char *tmpl = json_string_value(json_object_get(sj, "template"));
	/* at the precision of the startedAt the client saw (milliseconds, truncated) */
	double created = floor(json_number_value(json_object_get(sj, "created_at")) * 1e3) / 1e3;

	if (!st || !state_wanted(q->states, st))
		return false;
	if (q->tmpl && strcmp(q->tmpl, template_to_e2b(tmpl)) && (!tmpl || strcmp(q->tmpl, tmpl)))
		return false;
	return !(q->after > 0 && created < q->after) && !(q->before > 0 && created > q->before);
}

static enum MHD_Result list_common(struct api_req *r, bool paginate)
{
	cleanup_err struct isola_err *err = NULL;
	const char *mq = api_query(r, "metadata"), *lq = api_query(r, "limit");
	const char *tq = api_query(r, "nextToken");
	struct list_query q;
	uint64_t limit = LIST_DEFAULT_LIMIT;
	long long after_us = 0;
	char after_id[40] = "", next[160] = "";
	json_t *filter = json_object(), *list = NULL, *out = NULL, *sj;
	struct list_item *items = NULL;
	size_t n = 0, i, start = 0, emitted = 0;
	enum MHD_Result ret;

	if (!filter)
		return MHD_NO;
	if (list_query_parse(r, &q) < 0) {
		ret = MHD_YES;
		goto out;
	}
	if (mq && parse_metadata(mq, filter) < 0) {
		ret = e2b_ctl_error(r, 400, "query `metadata` must be key=value pairs joined by &");
		goto out;
	}
	if (paginate && lq && (api_parse_u64(lq, LIST_MAX_LIMIT, &limit) < 0 || limit == 0)) {
		ret = e2b_ctl_error(r, 400, "query `limit` must be 1-%d", LIST_MAX_LIMIT);
		goto out;
	}
	if (paginate && tq && *tq && token_parse(tq, &after_us, after_id, sizeof(after_id)) < 0) {
		ret = e2b_ctl_error(r, 400, "invalid nextToken");
		goto out;
	}
	if (core_sandbox_list_for(r->srv->core, api_tenant(r),
				  json_object_size(filter) ? filter : NULL, &list, &err) < 0) {
		ret = e2b_ctl_err(r, err);
		goto out;
	}
	items = calloc(json_array_size(list) + 1, sizeof(*items));
	out = json_array();
	if (!items || !out) {
		ret = MHD_NO;
		goto out;
	}
	json_array_foreach(list, i, sj)
	{
		if (!list_wanted(&q, sj))
			continue;
		items[n].created_us =
			(long long)(json_number_value(json_object_get(sj, "created_at")) * 1e6);
		items[n].id = json_string_value(json_object_get(sj, "id"));
		items[n].j = sj;
		if (items[n].id)
			n++;
	}
	qsort(items, n, sizeof(*items), q.asc ? item_cmp : item_cmp_desc);
	if (after_id[0]) {
		struct list_item key = {.created_us = after_us, .id = after_id};

		/* the page after the token's item, in the order asked for */
		while (start < n && (q.asc ? item_cmp : item_cmp_desc)(&items[start], &key) <= 0)
			start++;
	}
	for (i = start; i < n && (!paginate || emitted < limit); i++, emitted++)
		json_array_append_new(out, e2b_sandbox_obj(r, items[i].j, true));
	if (paginate && i < n && emitted > 0)
		token_make(&items[i - 1], next, sizeof(next));
	ret = e2b_ctl_page(r, out, next);
out:
	free(items);
	json_decref(out);
	json_decref(list);
	json_decref(filter);
	return ret;
}

enum MHD_Result e2b_ctl_page(struct api_req *r, json_t *items, const char *next)
{
	struct MHD_Response *resp = api_json_response(json_incref(items));

	if (!resp)
		return MHD_NO;
	if (next && next[0])
		MHD_add_response_header(resp, "X-Next-Token", next);
	return api_respond_response(r, 200, resp);
}

enum MHD_Result e2b_ctl_list(struct api_req *r)
{
	return list_common(r, true);
}

enum MHD_Result e2b_ctl_list_v1(struct api_req *r)
{
	return list_common(r, false);
}
