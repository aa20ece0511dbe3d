/* SPDX-License-Identifier: Apache-2.0 */
/* registry: exposed ports of each sandbox (ports.json in its directory), tokens and counters. */
#include "expose-internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../core/core.h"

/*
 * <state>/sandboxes/<id>/ports.json, 0600, written atomically under x->lock:
 *   {"token": "<43 chars>", "ports": [{"port": N, "public": false, "created_at": T}, ...],
 *    "all_public": true}
 * `all_public` (set for sandboxes made through the E2B API, whose every port E2B serves
 * publicly) makes a port that has no exposure of its own public.
 * One access token per sandbox guards all its private ports. The file lives and dies with
 * the sandbox directory, so destroying the sandbox removes its exposures. It is isolad's
 * own file on the host, never visible inside the sandbox.
 */

static int ports_path(struct core *core, const char *id, char *out, size_t n)
{
	int len = snprintf(out, n, "%s/sandboxes/%s/ports.json", core_config(core)->state_dir, id);

	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* Loads the file; a missing one is an empty registry. *doc is a new reference. */
static int ports_load(struct core *core, const char *id, json_t **doc)
{
	char path[1024], *buf = NULL;
	size_t len = 0;
	json_t *j, *ports;
	int r;

	r = ports_path(core, id, path, sizeof(path));
	if (r < 0)
		return r;
	r = util_read_file(path, EXPOSE_MAX_FILE, &buf, &len);
	if (r == -ENOENT) {
		*doc = json_pack("{s:[]}", "ports");
		return *doc ? 0 : -ENOMEM;
	}
	if (r < 0)
		return r;
	/* isolad's own file, but checked like any input: an object with a ports array */
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	free(buf);
	ports = json_object_get(j, "ports");
	if (!json_is_object(j) || !json_is_array(ports)) {
		json_decref(j);
		return -EBADMSG;
	}
	*doc = j;
	return 0;
}

static int ports_save(struct core *core, const char *id, const json_t *doc)
{
	char path[1024], *s;
	int r;

	r = ports_path(core, id, path, sizeof(path));
	if (r < 0)
		return r;
	s = json_dumps(doc, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	r = util_write_file_atomic(path, s, strlen(s), 0600);
	free(s);
	return r;
}

static json_t *find_port(json_t *ports, int port, size_t *idx)
{
	size_t i;
	json_t *e;

	json_array_foreach(ports, i, e)
	{
		if (json_integer_value(json_object_get(e, "port")) == port) {
			if (idx)
				*idx = i;
			return e;
		}
	}
	return NULL;
}

static int new_token(char out[EXPOSE_TOKEN_LEN + 1])
{
	unsigned char raw[32];
	char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
	int r = util_random(raw, sizeof(raw));

	if (r < 0)
		return r;
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
	snprintf(out, EXPOSE_TOKEN_LEN + 1, "%s", b64);
	return 0;
}

struct xstat *expose_stat_get_locked(struct expose *x, const char *id, int port)
{
	struct xstat *st;

	for (st = x->stats; st; st = st->next)
		if (st->port == port && !strcmp(st->id, id))
			return st;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	snprintf(st->id, sizeof(st->id), "%s", id);
	st->port = port;
	st->next = x->stats;
	x->stats = st;
	return st;
}

/* Drops the counters of sandboxes that are gone (their directory was removed with them) and
 * that no connection uses, so the table does not grow with every sandbox ever exposed. */
static void prune_locked(struct expose *x)
{
	struct xstat **pp = &x->stats;

	while (*pp) {
		struct xstat *st = *pp;
		char dir[1024];
		int n = snprintf(dir, sizeof(dir), "%s/sandboxes/%s",
				 core_config(x->core)->state_dir, st->id);

		if (st->active == 0 && n > 0 && (size_t)n < sizeof(dir) && access(dir, F_OK) < 0 &&
		    errno == ENOENT) {
			*pp = st->next;
			free(st);
			continue;
		}
		pp = &st->next;
	}
}

unsigned expose_active_locked(struct expose *x, const char *id)
{
	unsigned n = 0;

	for (struct xstat *st = x->stats; st; st = st->next)
		if (!strcmp(st->id, id))
			n += st->active;
	return n;
}

void expose_cut(struct expose *x, const char *id, int port)
{
	pthread_mutex_lock(&x->lock);
	for (struct xconn *xc = x->conns; xc; xc = xc->next) {
		if (id && (strcmp(xc->id, id) != 0 || (port && xc->port != port)))
			continue;
		atomic_store(&xc->cut, true);
		shutdown(xc->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&x->lock);
}

/* The API object of one exposure, with its counters. Caller holds x->lock. */
static json_t *exposure_json(struct expose *x, const char *id, const json_t *e, const char *token)
{
	int port = (int)json_integer_value(json_object_get(e, "port"));
	bool pub = json_is_true(json_object_get(e, "public"));
	struct xstat *st = expose_stat_get_locked(x, id, port);
	char url[256], path_url[256];

	snprintf(url, sizeof(url), "http://%d-%s.%s:%d/", port, id, x->domain, x->lport);
	snprintf(path_url, sizeof(path_url), "http://%s:%d/_isola/%s/%d/", x->host, x->lport, id,
		 port);
	return json_pack("{s:i,s:b,s:s,s:s,s:s*,s:O,s:{s:i,s:I,s:I,s:I,s:I}}", "port", port,
			 "public", pub, "url", url, "path_url", path_url, "token",
			 pub ? NULL : token, "created_at", json_object_get(e, "created_at"),
			 "connections", "active", st ? (int)st->active : 0, "total",
			 (json_int_t)(st ? st->total : 0), "refused",
			 (json_int_t)(st ? st->refused : 0), "bytes_in",
			 (json_int_t)(st ? __atomic_load_n(&st->bytes_in, __ATOMIC_RELAXED) : 0),
			 "bytes_out",
			 (json_int_t)(st ? __atomic_load_n(&st->bytes_out, __ATOMIC_RELAXED) : 0));
}

static int need_listener(struct isola_err **err)
{
	if (!expose_active)
		return isola_err_set(err, ENOTSUP, "unavailable",
				     "port exposure is off: start isolad with --expose-listen "
				     "HOST:PORT");
	return 0;
}

int expose_port_add(struct core *core, struct sandbox *s, int port, bool public, json_t **out,
		    struct isola_err **err)
{
	struct expose *x = expose_active;
	const char *id = sandbox_id(s);
	char token[EXPOSE_TOKEN_LEN + 1];
	json_t *doc = NULL, *ports, *e;
	int r;

	if (need_listener(err) < 0)
		return -ENOTSUP;
	if (port < 1 || port > 65535)
		return isola_err_set(err, EINVAL, "invalid", "port %d is not 1-65535", port);
	pthread_mutex_lock(&x->lock);
	prune_locked(x);
	r = ports_load(core, id, &doc);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "sandbox `%s`: read exposed ports", id);
		goto out;
	}
	ports = json_object_get(doc, "ports");
	if (json_string_length(json_object_get(doc, "token")) != EXPOSE_TOKEN_LEN) {
		r = new_token(token);
		if (r < 0 || json_object_set_new(doc, "token", json_string(token)) < 0) {
			isola_err_sys(err, r < 0 ? -r : ENOMEM, NULL, "sandbox `%s`: new token",
				      id);
			r = r < 0 ? r : -ENOMEM;
			goto out;
		}
	}
	snprintf(token, sizeof(token), "%s", json_string_value(json_object_get(doc, "token")));
	e = find_port(ports, port, NULL);
	if (!e && json_array_size(ports) >= EXPOSE_MAX_PORTS) {
		r = isola_err_set(err, ENOSPC, "quota_exceeded",
				  "sandbox `%s` already exposes %u ports", id, EXPOSE_MAX_PORTS);
		goto out;
	}
	if (!e) {
		e = json_pack("{s:i,s:I}", "port", port, "created_at",
			      (json_int_t)util_wall_time());
		if (!e || json_array_append_new(ports, e) < 0) {
			r = isola_err_set(err, ENOMEM, NULL, "out of memory");
			goto out;
		}
	}
	json_object_set_new(e, "public", json_boolean(public));
	r = ports_save(core, id, doc);
	if (r < 0) {
		/* ENOENT: the sandbox directory went away (destroyed meanwhile) */
		if (r == -ENOENT)
			isola_err_set(err, ENOENT, "not_found", "sandbox `%s` not found", id);
		else
			isola_err_sys(err, -r, NULL, "sandbox `%s`: save exposed ports", id);
		goto out;
	}
	*out = exposure_json(x, id, e, token);
	if (!*out)
		r = isola_err_set(err, ENOMEM, NULL, "out of memory");
out:
	pthread_mutex_unlock(&x->lock);
	json_decref(doc);
	sodium_memzero(token, sizeof(token));
	return r;
}

int expose_port_list(struct core *core, struct sandbox *s, json_t **out, struct isola_err **err)
{
	struct expose *x = expose_active;
	const char *id = sandbox_id(s);
	const char *token;
	json_t *doc = NULL, *arr, *e;
	uint64_t in = 0, outb = 0;
	size_t i;
	int r;

	if (need_listener(err) < 0)
		return -ENOTSUP;
	pthread_mutex_lock(&x->lock);
	r = ports_load(core, id, &doc);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "sandbox `%s`: read exposed ports", id);
		goto out;
	}
	token = json_string_value(json_object_get(doc, "token"));
	arr = json_array();
	json_array_foreach(json_object_get(doc, "ports"), i, e)
	{
		json_array_append_new(arr, exposure_json(x, id, e, token));
	}
	for (struct xstat *st = x->stats; st; st = st->next)
		if (!strcmp(st->id, id)) {
			/* the relay threads add without the lock */
			in += __atomic_load_n(&st->bytes_in, __ATOMIC_RELAXED);
			outb += __atomic_load_n(&st->bytes_out, __ATOMIC_RELAXED);
		}
	*out = json_pack("{s:o,s:i,s:i,s:I,s:I}", "ports", arr, "max_connections",
			 (int)x->max_conns, "connections_active", (int)expose_active_locked(x, id),
			 "bytes_in", (json_int_t)in, "bytes_out", (json_int_t)outb);
	if (!*out)
		r = isola_err_set(err, ENOMEM, NULL, "out of memory");
out:
	pthread_mutex_unlock(&x->lock);
	json_decref(doc);
	return r;
}

int expose_port_remove(struct core *core, struct sandbox *s, int port, struct isola_err **err)
{
	struct expose *x = expose_active;
	const char *id = sandbox_id(s);
	json_t *doc = NULL;
	size_t idx;
	int r;

	if (need_listener(err) < 0)
		return -ENOTSUP;
	pthread_mutex_lock(&x->lock);
	r = ports_load(core, id, &doc);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "sandbox `%s`: read exposed ports", id);
		goto out;
	}
	if (!find_port(json_object_get(doc, "ports"), port, &idx)) {
		r = isola_err_set(err, ENOENT, "not_found",
				  "port %d of sandbox `%s` is not exposed", port, id);
		goto out;
	}
	json_array_remove(json_object_get(doc, "ports"), idx);
	r = ports_save(core, id, doc);
	if (r < 0)
		isola_err_sys(err, -r, NULL, "sandbox `%s`: save exposed ports", id);
out:
	pthread_mutex_unlock(&x->lock);
	json_decref(doc);
	if (r == 0)
		expose_cut(x, id, port); /* connections already through stop too */
	return r;
}

int expose_registry_lookup(struct expose *x, const char *id, int port, bool *is_public,
			   char token[EXPOSE_TOKEN_LEN + 1])
{
	json_t *doc = NULL, *e;
	const char *t;
	int r;

	pthread_mutex_lock(&x->lock);
	r = ports_load(x->core, id, &doc);
	pthread_mutex_unlock(&x->lock);
	if (r < 0)
		return -ENOENT; /* no directory, no file, unreadable: not exposed */
	e = find_port(json_object_get(doc, "ports"), port, NULL);
	t = json_string_value(json_object_get(doc, "token"));
	if (!t || strlen(t) != EXPOSE_TOKEN_LEN ||
	    (!e && !json_is_true(json_object_get(doc, "all_public")))) {
		json_decref(doc);
		return -ENOENT;
	}
	/* an exposure of the port decides; else the sandbox-wide `all_public` (E2B's) */
	*is_public = e ? json_is_true(json_object_get(e, "public")) : true;
	memcpy(token, t, EXPOSE_TOKEN_LEN + 1);
	json_decref(doc);
	return 0;
}

int expose_port_all_public(struct sandbox *s, struct isola_err **err)
{
	struct expose *x = expose_active;
	const char *id = sandbox_id(s);
	char token[EXPOSE_TOKEN_LEN + 1];
	json_t *doc = NULL;
	int r;

	if (need_listener(err) < 0)
		return -ENOTSUP;
	pthread_mutex_lock(&x->lock);
	r = ports_load(x->core, id, &doc);
	if (r == 0 && json_string_length(json_object_get(doc, "token")) != EXPOSE_TOKEN_LEN) {
		r = new_token(token);
		if (r == 0 && json_object_set_new(doc, "token", json_string(token)) < 0)
			r = -ENOMEM;
	}
	if (r == 0 && json_object_set_new(doc, "all_public", json_true()) < 0)
		r = -ENOMEM;
	if (r == 0)
		r = ports_save(x->core, id, doc);
	pthread_mutex_unlock(&x->lock);
	json_decref(doc);
	sodium_memzero(token, sizeof(token));
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "sandbox `%s`: expose every port", id);
	return 0;
}

bool expose_port_is_public(const char *id, int port)
{
	char token[EXPOSE_TOKEN_LEN + 1];
	bool is_public = false;

	if (!expose_active ||
	    expose_registry_lookup(expose_active, id, port, &is_public, token) < 0)
		is_public = false;
	sodium_memzero(token, sizeof(token));
	return is_public;
}

int expose_host_suffix(char *out, size_t n)
{
	struct expose *x = expose_active;
	int len;

	if (!x)
		return -ENOTSUP;
	len = x->lport == 80 ? snprintf(out, n, "%s", x->domain)
			     : snprintf(out, n, "%s:%d", x->domain, x->lport);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}
