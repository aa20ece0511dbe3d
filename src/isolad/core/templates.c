/* SPDX-License-Identifier: Apache-2.0 */
/* templates: the core's rules around images/ (no removal while in use) and the doctor report. */
#include "core-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../images/images.h"
#include "../tiers/microvm/microvm.h"
#include "../tenancy/tenancy.h"

/* The owner of a template by its name: the built-in `host` is everyone's (""), templates
 * without an owner row predate tenancy and belong to `default`. */
static void template_owner(struct core *c, const char *name, char *out, size_t n)
{
	if (!strcmp(name, "host")) {
		out[0] = '\0';
		return;
	}
	if (store_template_owner_get(c->store, name, out, n, NULL) < 0 || !out[0])
		snprintf(out, n, "%s", TENANCY_DEFAULT);
}

bool core_template_visible(struct core *c, const char *tenant, const char *name)
{
	struct template_info t;
	char owner[64];

	if (!tenant)
		return true;
	memset(&t, 0, sizeof(t));
	/* By name or id: resolve to the name the owner row is keyed by. Missing: let the
	 * caller's own lookup report it. */
	if (images_get(name, &t, NULL) < 0)
		return true;
	template_owner(c, t.name, owner, sizeof(owner));
	template_info_fini(&t);
	return !owner[0] || !strcmp(owner, tenant);
}

int core_template_list(struct core *c, json_t **out, struct isola_err **err)
{
	return images_list(out, err);
}

int core_template_list_for(struct core *c, const char *tenant, json_t **out, struct isola_err **err)
{
	json_t *all, *mine, *t;
	size_t i;
	int r = images_list(&all, err);

	if (r < 0 || !tenant) {
		if (r == 0)
			*out = all;
		return r;
	}
	mine = json_array();
	json_array_foreach(all, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		char owner[64];

		if (!name)
			continue;
		template_owner(c, name, owner, sizeof(owner));
		if (!owner[0] || !strcmp(owner, tenant))
			json_array_append(mine, t);
	}
	json_decref(all);
	*out = mine;
	return 0;
}

int core_template_remove_for(struct core *c, const char *tenant, const char *name,
			     struct isola_err **err)
{
	int r;

	/* Another tenant's template is reported exactly as a missing one. */
	if (!core_template_visible(c, tenant, name))
		return isola_err_set(err, ENOENT, "not_found", "template `%s` not found", name);
	r = core_template_remove(c, name, err);
	if (r == 0)
		store_template_owner_delete(c->store, name, NULL);
	return r;
}

/* What makes a template from a name: an import of a tarball or a pull. */
struct make {
	const char *tar_path;		     /* import: the spooled tarball */
	const struct images_pull_opts *pull; /* pull: the request */
	const struct core_build_opts *build; /* build: the request */
	core_build_event_fn ev;		     /* build: its events */
	core_progress_fn cb;		     /* progress */
	void *ud;			     /* cb's (or ev's) argument */
};

/* Records tenant as the owner of `name`, makes the template, drops the owner on failure. */
static int make_owned(struct core *c, const char *tenant, const char *name, const struct make *m,
		      json_t **out, struct isola_err **err)
{
	struct template_info t;
	char owner[64];
	int r;

	/* Names are one namespace across tenants: a taken name is `exists` whoever owns it
	 * (docs/compliance.md says so). Checked before the owner row is written so an import
	 * attempt never takes over another tenant's template. */
	memset(&t, 0, sizeof(t));
	if (images_get(name, &t, NULL) == 0) {
		template_info_fini(&t);
		return isola_err_set(err, EEXIST, "conflict", "template `%s` already exists", name);
	}
	if (store_template_owner_get(c->store, name, owner, sizeof(owner), err) < 0)
		return -EIO;
	if (owner[0])
		return isola_err_set(err, EEXIST, "conflict", "template `%s` is being imported",
				     name);
	/* The owner first: the template never exists, even briefly, without one. */
	if (store_template_owner_set(c->store, name, tenant ? tenant : TENANCY_DEFAULT, err) < 0)
		return -EIO;
	if (m->build) {
		r = core_template_build(c, tenant ? tenant : TENANCY_DEFAULT, name, m->build, m->ev,
					m->ud, &t, err);
		if (r == 0) {
			*out = images_info_json(&t, false);
			template_info_fini(&t);
		}
	} else if (m->pull) {
		r = images_pull(name, m->pull, m->cb, m->ud, &t, err);
		if (r == 0) {
			*out = images_info_json(&t, false);
			template_info_fini(&t);
		}
	} else {
		r = core_template_import(c, name, m->tar_path, m->cb, m->ud, out, err);
	}
	if (r < 0)
		store_template_owner_delete(c->store, name, NULL);
	return r;
}

int core_template_import_for(struct core *c, const char *tenant, const char *name,
			     const char *tar_path, core_progress_fn cb, void *ud, json_t **out,
			     struct isola_err **err)
{
	struct make m = {.tar_path = tar_path, .cb = cb, .ud = ud};

	return make_owned(c, tenant, name, &m, out, err);
}

int core_template_pull_for(struct core *c, const char *tenant, const char *name,
			   const struct images_pull_opts *o, core_progress_fn cb, void *ud,
			   json_t **out, struct isola_err **err)
{
	struct make m = {.pull = o, .cb = cb, .ud = ud};

	return make_owned(c, tenant, name, &m, out, err);
}

int core_template_build_for(struct core *c, const char *tenant, const char *name,
			    const struct core_build_opts *o, core_build_event_fn ev, void *ud,
			    json_t **out, struct isola_err **err)
{
	struct make m = {.build = o, .ev = ev, .ud = ud};

	return make_owned(c, tenant, name, &m, out, err);
}

int core_template_get_for(struct core *c, const char *tenant, const char *name, json_t **out,
			  struct isola_err **err)
{
	struct template_info t;
	int r;

	if (!core_template_visible(c, tenant, name))
		return isola_err_set(err, ENOENT, "not_found", "template `%s` not found", name);
	memset(&t, 0, sizeof(t));
	r = images_get(name, &t, err);
	if (r < 0)
		return r;
	*out = images_info_json(&t, true);
	template_info_fini(&t);
	return *out ? 0 : isola_err_set(err, ENOMEM, "internal", "out of memory");
}

int core_template_remove(struct core *c, const char *name, struct isola_err **err)
{
	struct template_info t;
	size_t users = 0;
	int r;

	memset(&t, 0, sizeof(t));
	r = images_get(name, &t, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_sandboxes; i++)
		if (!strcmp(c->sandboxes[i]->template_id, t.id))
			users++;
	pthread_mutex_unlock(&c->lock);
	if (users) {
		r = isola_err_set(err, EBUSY, "conflict", "template `%s` is used by %zu sandbox%s",
				  t.name, users, users == 1 ? "" : "es");
		template_info_fini(&t);
		return r;
	}
	/* A snapshot restores onto its template's image (process tier: the lower layer). */
	{
		struct store_snapshot *rows = NULL;
		size_t n = 0;

		if (store_snapshot_list(c->store, &rows, &n, NULL) == 0) {
			for (size_t i = 0; i < n; i++) {
				if (!strcmp(rows[i].template, t.id))
					users++;
				store_snapshot_fini(&rows[i]);
			}
			free(rows);
		}
	}
	if (users) {
		r = isola_err_set(err, EBUSY, "conflict",
				  "template `%s` is used by %zu snapshot%s: delete %s first",
				  t.name, users, users == 1 ? "" : "s", users == 1 ? "it" : "them");
		template_info_fini(&t);
		return r;
	}
	template_info_fini(&t);
	return images_remove(name, err);
}

/* images_progress_fn and core_progress_fn have the same shape: pass it through. */
int core_template_import(struct core *c, const char *name, const char *tar_path,
			 core_progress_fn cb, void *ud, json_t **out, struct isola_err **err)
{
	struct template_info t;
	int r;

	memset(&t, 0, sizeof(t));
	r = images_import(name, tar_path, cb, ud, &t, err);
	if (r < 0)
		return r;
	*out = images_info_json(&t, false);
	template_info_fini(&t);
	return 0;
}

json_t *core_doctor(struct core *c)
{
	char *text = tier_process_doctor();
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;

	free(text);
	if (!j)
		j = json_object();
	text = tier_microvm_doctor();
	if (text) {
		json_t *vm = json_loads(text, 0, NULL);

		if (vm)
			json_object_set_new(j, "microvm", vm);
		free(text);
	}
	json_object_set_new(j, "state_dir", json_string(c->cfg.state_dir));
	return j;
}
