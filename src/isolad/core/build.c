/* SPDX-License-Identifier: Apache-2.0 */
/* build: `template build`'s driver — plans a Dockerfile's steps, runs them in order, commits. */
#include "build-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "../net/net.h"
#include "../tiers/microvm/microvm.h"

void build_emit(struct build *bd, json_t *ev)
{
	if (ev && bd->ev)
		bd->ev(bd->ud, ev);
	else
		json_decref(ev);
}

static const char *lookup(void *ud, const char *name)
{
	struct build *bd = ud;
	const char *v = json_string_value(json_object_get(bd->env, name));

	return v ? v : json_string_value(json_object_get(bd->args, name));
}

/* ---- the plan: substitution, config and checks before any work ---- */

/* ARG, ENV, LABEL: `K=V ...` (ENV also `K value`) into bd's objects. */
static int plan_kv(struct build *bd, const struct df_step *s, const char *text,
		   struct isola_err **err)
{
	json_t *into = s->op == DF_ARG ? bd->args : s->op == DF_ENV ? bd->env : bd->labels;
	char **w = NULL;
	size_t n = 0;
	int r = dockerfile_words(text, bd->df.escape, &w, &n, err);

	if (r < 0)
		return isola_err_wrap(err, "Dockerfile line %u", s->line);
	if (s->op == DF_ENV && n >= 1 && !strchr(w[0], '=')) {
		/* Legacy `ENV K value with spaces`. */
		const char *v = text;

		while (*v == ' ' || *v == '\t')
			v++;
		v += strcspn(v, " \t");
		while (*v == ' ' || *v == '\t')
			v++;
		json_object_set_new(into, w[0], json_string(v));
		dockerfile_words_free(w);
		return 0;
	}
	for (size_t k = 0; k < n && r == 0; k++) {
		char *eq = strchr(w[k], '=');
		const json_t *given;

		if (eq)
			*eq = '\0';
		given = s->op == DF_ARG && bd->o->build_args
				? json_object_get(bd->o->build_args, w[k])
				: NULL;
		if (!w[k][0])
			r = isola_err_set(err, EINVAL, "invalid",
					  "Dockerfile line %u: %s: empty name", s->line,
					  dockerfile_op_name(s->op));
		else if (given)
			json_object_set(into, w[k], (json_t *)given);
		else if (eq)
			json_object_set_new(into, w[k], json_string(eq + 1));
		else if (s->op != DF_ARG)
			r = isola_err_set(err, EINVAL, "invalid",
					  "Dockerfile line %u: %s `%s` needs a value", s->line,
					  dockerfile_op_name(s->op), w[k]);
	}
	dockerfile_words_free(w);
	return r;
}

/* CMD / ENTRYPOINT as an array: exec form as is, shell form through /bin/sh -c. */
static json_t *plan_cmd(const struct df_step *s)
{
	json_t *a;

	if (!s->argv)
		return json_pack("[s, s, s]", "/bin/sh", "-c", s->args);
	a = json_array();
	for (size_t i = 0; a && i < s->argc; i++)
		json_array_append_new(a, json_string(s->argv[i]));
	return a;
}

/* Whether template name exists and bd's tenant may build on it. */
static bool template_usable(struct build *bd, const char *name)
{
	struct template_info t;
	bool ok;

	memset(&t, 0, sizeof(t));
	ok = images_get(name, &t, NULL) == 0 && t.name[0] != '.' &&
	     core_template_visible(bd->c, bd->tenant, name);
	template_info_fini(&t);
	return ok;
}

/* A pull's progress as the build's progress events (the CLI's bar). */
static void pull_progress(void *ud, const char *phase, uint64_t done, uint64_t total)
{
	struct build *bd = ud;
	char ph[96];

	snprintf(ph, sizeof(ph), "pull %s", phase);
	build_emit(bd, json_pack("{s:s, s:s, s:I, s:I}", "type", "progress", "phase", ph, "done",
				 (json_int_t)done, "total", (json_int_t)total));
}

/*
 * FROM of an image reference that names no template: the operator's build pulls it (once) as
 * template images_ref_template_name(ref), and a later build FROM the same reference uses that
 * template as it is (a moved tag is not pulled again: `isola template pull` does that). A
 * tenant's build never pulls (pull is the operator's): it is told to ask for one.
 */
static int from_pull(struct build *bd, const struct df_step *s, const char *ref, char *name,
		     size_t n, struct isola_err **err)
{
	struct images_pull_opts po = {.ref = ref};
	json_t *out = NULL;
	int r;

	images_ref_template_name(ref, name, n);
	if (template_usable(bd, name))
		return 0;
	if (!bd->o->pull)
		return isola_err_set(err, EPERM, "forbidden",
				     "Dockerfile line %u: FROM `%s`: no such template, and a "
				     "tenant's build does not pull: the operator pulls it (isola "
				     "template pull %s NAME), then FROM NAME",
				     s->line, ref, ref);
	build_emit(bd, json_pack("{s:s, s:s, s:s}", "type", "pull", "ref", ref, "template", name));
	r = core_template_pull_for(bd->c, bd->tenant, name, &po, pull_progress, bd, &out, err);
	json_decref(out);
	if (r < 0)
		return isola_err_wrap(err, "Dockerfile line %u: FROM `%s`: pull", s->line, ref);
	return 0;
}

static int plan_from(struct build *bd, const struct df_step *s, const char *ref,
		     struct isola_err **err)
{
	struct template_info t;
	char pulled[64];
	const char *name = ref;

	if (strpbrk(ref, "/:@") && !template_usable(bd, ref)) {
		int r = from_pull(bd, s, ref, pulled, sizeof(pulled), err);

		if (r < 0)
			return r;
		name = pulled;
	}
	snprintf(bd->base, sizeof(bd->base), "%.63s", name);
	memset(&t, 0, sizeof(t));
	if (!core_template_visible(bd->c, bd->tenant, name) || images_get(name, &t, NULL) < 0 ||
	    t.name[0] == '.') {
		template_info_fini(&t);
		return isola_err_set(err, ENOENT, "not_found",
				     "Dockerfile line %u: FROM `%s`: no such template", s->line,
				     name);
	}
	json_object_update(bd->env, t.env);
	snprintf(bd->user, sizeof(bd->user), "%s", t.default_user);
	snprintf(bd->workdir, sizeof(bd->workdir), "%s", t.workdir);
	template_info_fini(&t);
	return 0;
}

static int plan(struct build *bd, struct isola_err **err)
{
	struct dockerfile *df = &bd->df;
	int r = 0;

	bd->sub = calloc(df->n, sizeof(char *));
	bd->at = calloc(df->n, sizeof(json_t *));
	if (!bd->sub || !bd->at)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	for (size_t i = 0; i < df->n && r == 0; i++) {
		struct df_step *s = &df->steps[i];
		bool subst = s->op != DF_RUN && s->op != DF_CMD && s->op != DF_ENTRYPOINT;
		const char *t;
		json_t *env;

		if (subst) {
			r = dockerfile_subst(s->args, df->escape, lookup, bd, &bd->sub[i], err);
			if (r < 0)
				return isola_err_wrap(err, "Dockerfile line %u: %s", s->line,
						      dockerfile_op_name(s->op));
		} else if (!(bd->sub[i] = strdup(s->args))) {
			return isola_err_set(err, ENOMEM, "internal", "out of memory");
		}
		t = bd->sub[i];
		if (s->op != DF_FROM && s->op != DF_ARG)
			bd->total++;
		switch (s->op) {
		case DF_FROM:
			r = plan_from(bd, s, t, err);
			break;
		case DF_ARG:
		case DF_ENV:
		case DF_LABEL:
			r = plan_kv(bd, s, t, err);
			break;
		case DF_USER:
			snprintf(bd->user, sizeof(bd->user), "%.63s", t);
			break;
		case DF_WORKDIR:
			if (t[0] == '/' || !bd->workdir[0])
				r = snprintf(bd->workdir, sizeof(bd->workdir), "%s%s",
					     t[0] == '/' ? "" : "/", t) >= (int)sizeof(bd->workdir);
			else {
				char w[256];

				r = snprintf(w, sizeof(w), "%s/%s", bd->workdir, t) >=
				    (int)sizeof(w);
				memcpy(bd->workdir, w, sizeof(w));
			}
			if (r)
				r = isola_err_set(err, ENAMETOOLONG, "invalid",
						  "Dockerfile line %u: WORKDIR too long", s->line);
			break;
		case DF_EXPOSE: {
			char **w = NULL;
			size_t n = 0;

			r = dockerfile_words(t, df->escape, &w, &n, err);
			for (size_t k = 0; r == 0 && k < n; k++)
				json_array_append_new(bd->ports, json_string(w[k]));
			dockerfile_words_free(w);
			break;
		}
		case DF_CMD:
			json_decref(bd->cmd);
			bd->cmd = plan_cmd(s);
			break;
		case DF_ENTRYPOINT:
			json_decref(bd->entrypoint);
			bd->entrypoint = plan_cmd(s);
			/* Docker: ENTRYPOINT resets a CMD given before it. */
			json_decref(bd->cmd);
			bd->cmd = NULL;
			break;
		case DF_ADD:
			if (strstr(t, "://") || strstr(t, "git@"))
				r = isola_err_set(
					err, EINVAL, "invalid",
					"Dockerfile line %u: ADD of a URL is not supported "
					"by template build: download it in a RUN step (with "
					"--allow) or put it in the context",
					s->line);
			break;
		default:
			break;
		}
		/* What the step runs with: ARGs as environment, ENV over them. */
		env = json_deep_copy(bd->args);
		if (env)
			json_object_update(env, bd->env);
		bd->at[i] = json_pack("{s:o?, s:s, s:s}", "env", env, "user", bd->user, "workdir",
				      bd->workdir);
		if (!bd->at[i] && r == 0)
			r = isola_err_set(err, ENOMEM, "internal", "out of memory");
	}
	return r;
}

/* ---- the steps ---- */

/* WORKDIR: the directory is made (root, 0755) when the template-so-far lacks it. */
static int step_workdir(struct build *bd, size_t i, struct isola_err **err)
{
	const char *wd = json_string_value(json_object_get(bd->at[i], "workdir"));
	char tmp[PATH_MAX], rel[PATH_MAX];
	struct archive *w;
	struct archive_entry *e;
	int fd, r = 0;

	while (wd && *wd == '/')
		wd++;
	if (!wd || !*wd || images_build_has_dir(bd->b, wd) ||
	    extract_norm_path(wd, rel, sizeof(rel)) < 0)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s/.tmp-XXXXXX", bd->cache) >= (int)sizeof(tmp))
		return isola_err_set(err, ENAMETOOLONG, "internal", "cache path too long");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", tmp);
	w = archive_write_new();
	e = archive_entry_new();
	if (!w || !e) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
	} else {
		archive_write_set_format_pax_restricted(w);
		archive_entry_set_pathname(e, rel);
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, 0755);
		if (archive_write_open_fd(w, fd) != ARCHIVE_OK ||
		    archive_write_header(w, e) != ARCHIVE_OK ||
		    archive_write_close(w) != ARCHIVE_OK)
			r = isola_err_set(err, EIO, "internal", "WORKDIR layer: %s",
					  archive_error_string(w));
	}
	if (w)
		archive_write_free(w);
	archive_entry_free(e);
	close(fd);
	if (r == 0)
		r = images_build_apply(bd->b, tmp, false, "WORKDIR", err);
	unlink(tmp);
	return r;
}

static int execute(struct build *bd, const char *name, struct isola_err **err)
{
	uint64_t t0 = util_now_ms();
	int r;

	r = images_build_cache_dir(bd->cache, err);
	if (r < 0)
		return r;
	r = images_build_begin(name, bd->base, &bd->b, err);
	if (r < 0)
		return r;
	{
		struct template_info t;

		memset(&t, 0, sizeof(t));
		/* The chain starts at the tenant and the base template's id: tenants never share
		 * cache entries (a RUN with --allow could fetch what its tenant serves and plant
		 * it under a key another tenant's identical step would hit). */
		images_get(bd->base, &t, NULL);
		build_key_chain(bd, bd->tenant, t.id, NULL, 0);
		template_info_fini(&t);
	}
	for (size_t i = 0; i < bd->df.n && r == 0; i++) {
		const struct df_step *st = &bd->df.steps[i];
		char instr[300];
		bool cached = false;
		uint64_t ts = util_now_ms();

		if (st->op == DF_FROM || st->op == DF_ARG) {
			if (st->op == DF_ARG)
				build_key_chain(bd, "ARG", bd->sub[i], NULL, 0);
			continue;
		}
		bd->step++;
		snprintf(instr, sizeof(instr), "%s %.280s", dockerfile_op_name(st->op), bd->sub[i]);
		build_emit(bd, json_pack("{s:s, s:i, s:i, s:i, s:s}", "type", "step", "step",
					 (int)bd->step, "total", (int)bd->total, "line",
					 (int)st->line, "instruction", instr));
		switch (st->op) {
		case DF_RUN:
			r = build_step_run(bd, i, &cached, err);
			break;
		case DF_COPY:
		case DF_ADD:
			r = build_step_copy(bd, i, &cached, err);
			break;
		case DF_WORKDIR:
			build_key_chain(bd, "WORKDIR", bd->sub[i], NULL, 0);
			r = step_workdir(bd, i, err);
			break;
		default:
			/* Config only; chained so later layers depend on it. */
			build_key_chain(bd, dockerfile_op_name(st->op), bd->sub[i], NULL, 0);
			break;
		}
		if (r == 0 && (st->op == DF_RUN || st->op == DF_COPY || st->op == DF_ADD))
			build_emit(bd, json_pack("{s:s, s:i, s:b, s:I}", "type", "layer", "step",
						 (int)bd->step, "cached", cached, "ms",
						 (json_int_t)(util_now_ms() - ts)));
	}
	if (r < 0) {
		images_build_abort(bd->b);
		bd->b = NULL;
		return r;
	}
	log_info("template build `%s`: %u steps in %llu ms", name, bd->total,
		 (unsigned long long)(util_now_ms() - t0));
	return 0;
}

int core_template_build(struct core *c, const char *tenant, const char *name,
			const struct core_build_opts *o, core_build_event_fn ev, void *ud,
			struct template_info *out, struct isola_err **err)
{
	struct build bd = {.c = c, .tenant = tenant, .name = name, .o = o, .ev = ev, .ud = ud};
	unsigned char h[32];
	char *text = NULL, hex[65];
	size_t len = 0;
	int r;

	bd.args = json_object();
	bd.env = json_object();
	bd.labels = json_object();
	bd.ports = json_array();
	if (!bd.args || !bd.env || !bd.labels || !bd.ports) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	r = build_read_dockerfile(o->context,
				  o->dockerfile && *o->dockerfile ? o->dockerfile : "Dockerfile",
				  &text, &len, err);
	if (r < 0)
		goto out;
	/* Everything refusable is refused here, before any sandbox or layer is made. */
	r = core_resources_check(o->cpu_millis, o->memory_bytes, err);
	if (r == 0)
		r = dockerfile_parse(text, len, &bd.df, err);
	if (r == 0)
		r = plan(&bd, err);
	if (r == 0 && o->allow) {
		json_t *pol = json_pack("{s:s, s:O}", "default", "deny", "allow", o->allow);

		if (!net_current())
			r = isola_err_set(
				err, ENOTSUP, "not_supported",
				"--allow: sandbox networking is off (isolad --no-network)");
		else if (!pol || net_policy_validate(pol, err) < 0)
			r = pol ? isola_err_wrap(err, "--allow")
				: isola_err_set(err, ENOMEM, "internal", "out of memory");
		json_decref(pol);
	}
	if (r == 0 && o->tier && strcmp(o->tier, "process")) {
		if (strcmp(o->tier, "microvm"))
			r = isola_err_set(err, EINVAL, "invalid",
					  "tier `%.32s` is unknown (known: process, microvm)",
					  o->tier);
		else if (!tier_microvm_usable(c->cfg.state_dir))
			r = isola_err_set(
				err, ENOTSUP, "unavailable",
				"tier `microvm`: this host has no QEMU or no guest kernel "
				"(isola doctor says which); RUN steps cannot run in a microvm");
	}
	if (r < 0)
		goto out;
	r = execute(&bd, name, err);
	if (r < 0)
		goto out;
	{
		struct template_info t;
		json_t *config =
			json_pack("{s:O?, s:O?, s:O, s:O, s:s}", "entrypoint", bd.entrypoint, "cmd",
				  bd.cmd, "labels", bd.labels, "exposed_ports", bd.ports,
				  "build_tier", build_in_microvm(&bd) ? "microvm" : "process");

		if (config && (o->cpu_millis || o->memory_bytes))
			json_object_set_new(config, "resources",
					    core_resources_json(o->cpu_millis, o->memory_bytes));

		memset(&t, 0, sizeof(t));
		crypto_hash_sha256(h, (const unsigned char *)text, len);
		for (int i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", h[i]);
		snprintf(t.source, sizeof(t.source), "build");
		snprintf(t.origin, sizeof(t.origin), "sha256:%s", hex);
		snprintf(t.default_user, sizeof(t.default_user), "%.31s",
			 bd.user[0] ? bd.user : "root");
		snprintf(t.workdir, sizeof(t.workdir), "%s", bd.workdir);
		t.env = bd.env;
		t.config = config;
		r = images_build_commit(bd.b, &t, out, err);
		bd.b = NULL;
		json_decref(config);
	}
out:
	images_build_abort(bd.b);
	free(text);
	for (size_t i = 0; bd.sub && i < bd.df.n; i++) {
		free(bd.sub[i]);
		json_decref(bd.at[i]);
	}
	free(bd.sub);
	free(bd.at);
	dockerfile_fini(&bd.df);
	json_decref(bd.args);
	json_decref(bd.env);
	json_decref(bd.labels);
	json_decref(bd.ports);
	json_decref(bd.cmd);
	json_decref(bd.entrypoint);
	return r;
}
