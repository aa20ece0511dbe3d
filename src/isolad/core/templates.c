/* SPDX-License-Identifier: Apache-2.0 */
/* templates: the core's rules around images/ (no removal while in use) and the doctor report. */
#include "core-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../images/images.h"

int core_template_list(struct core *c, json_t **out, struct isola_err **err)
{
	return images_list(out, err);
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
	*out = json_pack("{s:s, s:s, s:s, s:I, s:f}", "id", t.id, "name", t.name, "source",
			 t.source, "size_bytes", (json_int_t)t.size_bytes, "created_at",
			 t.created_at);
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
	json_object_set_new(j, "state_dir", json_string(c->cfg.state_dir));
	return j;
}
