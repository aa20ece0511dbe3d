/* SPDX-License-Identifier: Apache-2.0 */
/* test_lifecycle: timeout policies, their tier checks, stored settings and the --pool flag. */
#include <errno.h>
#include <string.h>

#include "../tap.h"
#include "isolad/core/core-internal.h"
#include "isolad/core/lifecycle.h"
#include "isolad/core/pool.h"

static int noop_pause(struct tier_sandbox *s, struct isola_err **err)
{
	(void)s;
	(void)err;
	return 0;
}

static const struct tier_ops bare = {.name = "bare"};
static const struct tier_ops pausable = {
	.name = "pausable", .pause = noop_pause, .resume = noop_pause};

static void test_parse(void)
{
	struct isola_err *e = NULL;
	enum life_policy p = LIFE_HIBERNATE;

	ok(life_policy_parse(NULL, &p, NULL) == 0 && p == LIFE_KILL, "absent policy is kill");
	ok(life_policy_parse("pause", &p, NULL) == 0 && p == LIFE_PAUSE, "pause parses");
	ok(life_policy_parse("hibernate", &p, NULL) == 0 && p == LIFE_HIBERNATE,
	   "hibernate parses");
	ok(life_policy_parse("Pause", &p, &e) == -EINVAL && e && !strcmp(e->code, "invalid") &&
		   strstr(e->message, "`Pause`"),
	   "an unknown policy is invalid and named");
	isola_err_free(e);
	ok(!strcmp(life_policy_name(LIFE_HIBERNATE), "hibernate") && !life_policy_name(7), "names");
}

static void test_tier_check(void)
{
	struct isola_err *e = NULL;

	ok(life_policy_check(&bare, LIFE_KILL, NULL) == 0, "kill needs nothing of a tier");
	ok(life_policy_check(&bare, LIFE_PAUSE, &e) == -EINVAL && strstr(e->message, "bare") &&
		   strstr(e->message, "pause"),
	   "pause on a tier without pause is refused naming tier and policy");
	isola_err_free(e);
	e = NULL;
	ok(life_policy_check(&pausable, LIFE_PAUSE, NULL) == 0, "pause with pause/resume ops");
	ok(life_policy_check(&pausable, LIFE_HIBERNATE, &e) == -EINVAL &&
		   strstr(e->message, "hibernate"),
	   "hibernate needs snapshot/restore");
	isola_err_free(e);
}

static void test_init_dump_load(void)
{
	struct core c;
	struct sandbox_request req;
	struct sandbox *s, *t;
	struct isola_err *e = NULL;
	json_t *j, *api;

	memset(&c, 0, sizeof(c));
	core_config_defaults(&c.cfg);
	c.cfg.default_ttl_s = 50;
	s = sandbox_alloc(&c, "abc");
	s->tier = &pausable;
	memset(&req, 0, sizeof(req));
	req.on_timeout = "pause";
	req.idle_timeout_s = 30;
	req.auto_resume = LIFE_RESUME_ALWAYS;
	ok(lifecycle_init(&c, s, &req, NULL) == 0, "init from a request");
	ok(s->life.on_timeout == LIFE_PAUSE && s->life.idle_timeout_s == 30 &&
		   s->life.ttl_s == 50 && s->life.auto_resume == LIFE_RESUME_ALWAYS,
	   "policy, idle timeout, default TTL and auto_resume taken");
	req.idle_timeout_s = c.cfg.max_ttl_s + 1;
	ok(lifecycle_init(&c, s, &req, &e) == -EINVAL && e, "idle timeout above the cap refused");
	isola_err_free(e);
	e = NULL;
	req.idle_timeout_s = 30;
	req.on_timeout = "hibernate";
	ok(lifecycle_init(&c, s, &req, &e) == -EINVAL && strstr(e->message, "pausable"),
	   "a policy the tier cannot honour is refused at create");
	isola_err_free(e);
	req.on_timeout = "pause";
	lifecycle_init(&c, s, &req, NULL);
	s->life.by_policy = true;

	j = json_object();
	lifecycle_dump(s, j);
	t = sandbox_alloc(&c, "abc");
	lifecycle_load(t, j);
	ok(t->life.on_timeout == LIFE_PAUSE && t->life.idle_timeout_s == 30 &&
		   t->life.ttl_s == 50 && t->life.auto_resume == LIFE_RESUME_ALWAYS &&
		   t->life.by_policy && !t->life.pooled && !strcmp(t->tenant, "default"),
	   "stored settings round-trip");
	json_decref(j);

	j = json_pack("{s:{s:s, s:s}}", "lifecycle", "on_timeout", "nap", "ttl_s", "x");
	sandbox_unref(t);
	t = sandbox_alloc(&c, "abd");
	lifecycle_load(t, j);
	ok(t->life.on_timeout == LIFE_KILL && t->life.ttl_s == 0, "a malformed row loads defaults");
	json_decref(j);

	s->state = SANDBOX_PAUSED;
	api = json_object();
	lifecycle_to_json(s, api);
	ok(!strcmp(json_string_value(json_object_get(api, "on_timeout")), "pause") &&
		   json_integer_value(json_object_get(api, "idle_timeout")) == 30 &&
		   json_is_true(json_object_get(api, "auto_resume")) &&
		   !strcmp(json_string_value(json_object_get(api, "paused_by")), "policy") &&
		   json_is_number(json_object_get(api, "idle_since")) &&
		   json_is_false(json_object_get(api, "pooled")),
	   "API fields of a sandbox paused by policy");
	json_decref(api);

	memset(&req, 0, sizeof(req));
	req.pooled = true;
	req.ttl_s = 99;
	ok(lifecycle_init(&c, t, &req, NULL) == 0 && t->tenant[0] == '\0' && t->life.ttl_s == 0 &&
		   t->life.pooled,
	   "a pooled sandbox has no tenant and no TTL");
	j = json_object();
	lifecycle_dump(t, j);
	sandbox_unref(t);
	t = sandbox_alloc(&c, "abe");
	lifecycle_load(t, j);
	ok(t->life.pooled && t->tenant[0] == '\0', "pooled survives the store without a tenant");
	json_decref(j);
	sandbox_unref(t);
	sandbox_unref(s);
}

static void test_pool_flag(void)
{
	static const char *const bad[] = {"host",
					  "host:process",
					  "host:process:x",
					  "host:process:-1",
					  "host:process:257",
					  ":process:1",
					  "host:process:1:2"};
	struct core c;

	memset(&c, 0, sizeof(c));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct isola_err *e = NULL;

		ok(core_pool_set_flag(&c, bad[i], &e) == -EINVAL && e &&
			   !strcmp(e->code, "invalid"),
		   "--pool `%s` is refused", bad[i]);
		isola_err_free(e);
	}
	{
		struct isola_err *e = NULL;

		/* Well-formed: reaches core_pool_set, which needs the running pool thread. */
		ok(core_pool_set_flag(&c, "host:process:3", &e) < 0 && e &&
			   !strcmp(e->code, "unavailable"),
		   "a well-formed flag reaches the pools");
		isola_err_free(e);
	}
}

int main(void)
{
	test_parse();
	test_tier_check();
	test_init_dump_load();
	test_pool_flag();
	return tap_done();
}
