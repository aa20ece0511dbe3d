/* SPDX-License-Identifier: Apache-2.0 */
/* build-run: `template build`'s RUN steps, each in a sandbox of the build's tier from the
 * template-so-far: the process tier's writable layer, or the microvm guest's fs_diff. */
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
#include "../../proto/proto.h"
#include "../net/net.h"
#include "agentconn.h"
#include "agenttar.h"

/* ---- RUN: a sandbox of the build's tier from the template-so-far ---- */

bool build_in_microvm(const struct build *bd)
{
	return bd->o->tier && !strcmp(bd->o->tier, "microvm");
}

/* Sends RUN output to the client as lines; keeps the tail for a failure's message. */
static void run_output(struct build *bd, const char *data, size_t len, char *line, size_t *ll)
{
	size_t tl = strlen(bd->tail);

	/* tail: the last BUILD_TAIL - 1 bytes */
	if (len >= sizeof(bd->tail) - 1) {
		memcpy(bd->tail, data + len - (sizeof(bd->tail) - 1), sizeof(bd->tail) - 1);
		bd->tail[sizeof(bd->tail) - 1] = '\0';
	} else {
		if (tl + len >= sizeof(bd->tail)) {
			size_t drop = tl + len - (sizeof(bd->tail) - 1);

			memmove(bd->tail, bd->tail + drop, tl - drop + 1);
			tl -= drop;
		}
		memcpy(bd->tail + tl, data, len);
		bd->tail[tl + len] = '\0';
	}
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n' && *ll < BUILD_LINE_MAX) {
			line[(*ll)++] = data[i];
			continue;
		}
		/* UNTRUSTED: bytes of the sandbox's program; sent as a JSON string (jansson
		 * escapes; invalid UTF-8 is replaced by the nocheck constructor's caller). */
		build_emit(bd, json_pack("{s:s, s:i, s:s%}", "type", "output", "step",
					 (int)bd->step, "line", line, *ll));
		*ll = 0;
		if (data[i] != '\n')
			line[(*ll)++] = data[i];
	}
}

static int run_exec(struct build *bd, struct sandbox *s, json_t *argv, int *code,
		    struct isola_err **err)
{
	struct agent_conn *conn = NULL;
	struct agent_chan *ch = NULL;
	char *line = malloc(BUILD_LINE_MAX + 1);
	size_t ll = 0;
	json_t *req;
	int r;

	bd->tail[0] = '\0';
	if (!line)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	req = json_pack("{s:s, s:O, s:b, s:b, s:I}", "op", "exec", "argv", argv, "stdin", 0,
			"background", 0, "timeout_ms", (json_int_t)BUILD_RUN_MS);
	r = req ? sandbox_agent(s, &conn, err)
		: isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (r == 0) {
		sandbox_apply_exec_defaults(s, req);
		r = agent_chan_open(conn, req, &ch, err);
	}
	json_decref(req);
	while (r == 0) {
		struct agent_msg m = {0};

		r = agent_chan_recv(ch, &m, BUILD_RUN_MS, err);
		if (r < 0)
			break;
		if (m.type == PROTO_STDOUT || m.type == PROTO_STDERR) {
			run_output(bd, (const char *)m.data, m.len, line, &ll);
		} else if (m.type == PROTO_EXIT) {
			/* UNTRUSTED: the agent's numbers, only reported */
			json_int_t sig = json_integer_value(json_object_get(m.json, "signal"));

			*code = sig > 0 ? 128 + (int)sig
					: (int)json_integer_value(
						  json_object_get(m.json, "exit_code"));
			agent_msg_fini(&m);
			break;
		} else if (m.type == PROTO_ERROR) {
			r = agent_error_to_err(m.json, err);
		}
		agent_msg_fini(&m);
	}
	if (ll)
		run_output(bd, "\n", 1, line, &ll);
	agent_chan_close(ch);
	free(line);
	return r;
}

/* fs_mark in the guest, as root (uid 0: the walk must see every file the RUN may change). */
static int vm_mark(struct sandbox *s, struct isola_err **err)
{
	struct agent_conn *conn = NULL;
	struct agent_chan *ch = NULL;
	struct agent_msg m = {0};
	json_t *req = json_pack("{s:s, s:i}", "op", "fs_mark", "user", 0);
	int r;

	r = req ? sandbox_agent(s, &conn, err)
		: isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (r == 0)
		r = agent_chan_open(conn, req, &ch, err);
	json_decref(req);
	if (r == 0)
		r = agent_chan_recv(ch, &m, BUILD_RUN_MS, err);
	if (r == 0 && m.type == PROTO_ERROR)
		r = agent_error_to_err(m.json, err);
	else if (r == 0 && m.type != PROTO_RESULT)
		r = isola_err_set(err, EPROTO, "internal", "fs_mark: unexpected frame %u", m.type);
	agent_msg_fini(&m);
	agent_chan_close(ch);
	return r < 0 ? isola_err_wrap(err, "fs_mark") : 0;
}

/* A member name of the guest's diff a layer may carry: relative, no `..` (the applier checks
 * again and confines every path to the rootfs). */
static bool diff_name_ok(const char *n, size_t l)
{
	char norm[PATH_MAX];

	return l < sizeof(norm) && strlen(n) == l && extract_norm_path(n, norm, sizeof(norm)) == 0;
}

/* fs_diff in the guest into the tar file `path` (an OCI-style layer with whiteouts).
 * UNTRUSTED: written by code that ran in the guest; agent_tar_frame holds every size to its
 * entry, diff_name_ok refuses escaping names, and images_layer_apply confines the rest. */
static int vm_diff(struct build *bd, struct sandbox *s, const char *path, struct isola_err **err)
{
	/* no larger than the build may still unpack: the applier would refuse more anyway */
	struct agent_tar t = {.perm_mask = 07777,
			      .name_ok = diff_name_ok,
			      .max_bytes = images_build_room(bd->b) ? images_build_room(bd->b) : 1};
	struct agent_conn *conn = NULL;
	struct agent_chan *ch = NULL;
	json_t *req = json_pack("{s:s, s:i}", "op", "fs_diff", "user", 0);
	cleanup_fd int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r;

	if (fd < 0) {
		json_decref(req);
		return isola_err_sys(err, errno, "internal", "create `%s`", path);
	}
	t.a = archive_write_new();
	if (!req || !t.a || archive_write_set_format_pax_restricted(t.a) != ARCHIVE_OK ||
	    archive_write_open_fd(t.a, fd) != ARCHIVE_OK)
		r = isola_err_set(err, ENOMEM, "internal", "set up the layer's tar writer");
	else
		r = sandbox_agent(s, &conn, err);
	if (r == 0)
		r = agent_chan_open(conn, req, &ch, err);
	json_decref(req);
	while (r == 0 && !t.finished) {
		struct agent_msg m = {0};

		r = agent_chan_recv(ch, &m, BUILD_RUN_MS, err);
		if (r == 0)
			r = agent_tar_frame(&t, &m, err);
		agent_msg_fini(&m);
	}
	agent_chan_close(ch);
	if (t.a)
		archive_write_free(t.a);
	if (r == 0 && t.skipped)
		log_warn("RUN in microvm: %llu entries of the guest's changes left out (unsafe "
			 "name or type)",
			 (unsigned long long)t.skipped);
	return r < 0 ? isola_err_wrap(err, "fs_diff") : 0;
}

/* Runs RUN step i in a sandbox; on success its layer is in layer_dir: layer.tar.zst (the
 * process tier's writable layer) or layer.tar (the microvm guest's changes, OCI-style). */
static int run_step(struct build *bd, size_t i, const char *layer_dir, struct isola_err **err)
{
	const struct df_step *st = &bd->df.steps[i];
	const json_t *at = bd->at[i];
	struct sandbox_request req;
	struct sandbox *s = NULL;
	json_t *argv, *labels, *pol;
	enum tier_persistence level;
	int code = -1, r;

	memset(&req, 0, sizeof(req));
	snprintf(req.template_name, sizeof(req.template_name), "%s",
		 images_build_info(bd->b)->name);
	snprintf(req.tier, sizeof(req.tier), "%s", build_in_microvm(bd) ? "microvm" : "process");
	req.env = json_object_get(at, "env");
	req.user = json_string_value(json_object_get(at, "user"));
	req.workdir = json_string_value(json_object_get(at, "workdir"));
	if (req.workdir && !req.workdir[0])
		req.workdir = NULL;
	if (req.user && !req.user[0])
		req.user = NULL;
	req.tenant = bd->tenant;
	req.build_step = true;
	req.ttl_s = BUILD_RUN_MS / 1000 + 600;
	labels = json_pack("{s:s}", "isola.build", images_build_info(bd->b)->name);
	req.labels = labels;
	r = core_sandbox_create(bd->c, &req, &s, err);
	json_decref(labels);
	if (r < 0)
		return isola_err_wrap(err, "RUN (step %u, line %u): create sandbox", bd->step,
				      st->line);
	/* Egress: default deny, the domains of --allow open. */
	if (net_current()) {
		pol = json_pack("{s:s, s:o}", "default", "deny", "allow",
				bd->o->allow ? json_deep_copy(bd->o->allow) : json_array());
		r = pol ? net_sandbox_set_policy(sandbox_id(s), pol, err)
			: isola_err_set(err, ENOMEM, "internal", "out of memory");
		json_decref(pol);
		if (r < 0)
			goto out;
	}
	/* The guest's root is a plain ext4 (no overlay upper to read): record it first. */
	if (build_in_microvm(bd) && (r = vm_mark(s, err)) < 0) {
		isola_err_wrap(err, "RUN (step %u) in the microvm", bd->step);
		goto out;
	}
	if (st->argv) {
		argv = json_array();
		for (size_t k = 0; argv && k < st->argc; k++)
			json_array_append_new(argv, json_string(st->argv[k]));
	} else {
		argv = json_pack("[s, s, s]", "/bin/sh", "-c",
				 st->heredoc ? st->heredoc : bd->sub[i]);
	}
	r = argv ? run_exec(bd, s, argv, &code, err)
		 : isola_err_set(err, ENOMEM, "internal", "out of memory");
	json_decref(argv);
	if (r < 0)
		goto out;
	if (code != 0) {
		r = isola_err_set(err, EIO, "build_failed",
				  "step %u/%u (line %u) `RUN %.200s` failed with exit code %d; "
				  "output tail:\n%s",
				  bd->step, bd->total, st->line, bd->sub[i], code, bd->tail);
		goto out;
	}
	if (build_in_microvm(bd)) {
		char path[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/layer.tar", layer_dir);
		r = vm_diff(bd, s, path, err);
	} else {
		r = s->tier->snapshot(s->ts, layer_dir, &level, NULL, err);
	}
	if (r < 0)
		isola_err_wrap(err, "RUN (step %u): its writable layer", bd->step);
out:
	core_sandbox_destroy(bd->c, sandbox_id(s), NULL);
	sandbox_unref(s);
	if (r < 0 && code > 0)
		build_emit(bd, json_pack("{s:s, s:i, s:i}", "type", "run_failed", "step",
					 (int)bd->step, "exit_code", code));
	return r;
}

int build_step_run(struct build *bd, size_t i, bool *cached, struct isola_err **err)
{
	char *state = json_dumps(bd->at[i], JSON_SORT_KEYS | JSON_COMPACT);
	const struct df_step *st = &bd->df.steps[i];
	char dir[PATH_MAX], path[PATH_MAX], from[PATH_MAX + 32];
	json_t *argv = NULL;
	char *av = NULL;
	bool upper;
	int r;

	if (st->argv) {
		argv = json_array();
		for (size_t k = 0; argv && k < st->argc; k++)
			json_array_append_new(argv, json_string(st->argv[k]));
		av = json_dumps(argv, JSON_COMPACT);
		json_decref(argv);
	}
	/* The key: the chain, the command as written (heredoc included), what it runs with, the
	 * egress it had and the tier (a process-tier and a microvm RUN never share an entry: their
	 * layers differ in format, and a command may behave differently on another kernel). */
	{
		char *allow = bd->o->allow ? json_dumps(bd->o->allow, JSON_COMPACT) : NULL;

		if (build_in_microvm(bd))
			build_key_chain(bd, "tier", "microvm", NULL, 0);

		build_key_chain(bd,
				av	      ? av
				: st->heredoc ? st->heredoc
					      : bd->sub[i],
				state ? state : "", (const unsigned char *)(allow ? allow : ""),
				allow ? strlen(allow) : 0);
		free(allow);
	}
	free(av);
	free(state);
	/* The process tier's layer is its overlay upper (zstd, `upper` format); the guest's is an
	 * OCI-style tar like COPY's. */
	upper = !build_in_microvm(bd);
	r = build_from_cache(bd, upper ? ".tar.zst" : ".tar", upper, path, sizeof(path), err);
	*cached = r == 1;
	if (r != 0)
		return r < 0 ? r : 0;
	if (snprintf(dir, sizeof(dir), "%s/.run-XXXXXX", bd->cache) >= (int)sizeof(dir) ||
	    !mkdtemp(dir))
		return isola_err_sys(err, errno, "internal", "mkdtemp in `%s`", bd->cache);
	r = run_step(bd, i, dir, err);
	snprintf(from, sizeof(from), "%s/%s", dir, upper ? "layer.tar.zst" : "layer.tar");
	if (r == 0) {
		bool stored;

		r = build_cache_store(bd, from, path, i, upper, &stored, err);
	}
	util_rm_rf(dir);
	return r;
}
