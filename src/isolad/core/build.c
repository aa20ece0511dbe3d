/* SPDX-License-Identifier: Apache-2.0 */
/* build: `template build` — runs a Dockerfile's steps (RUN in process-tier sandboxes) with a layer cache. */
#include "core-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
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
#include "../images/dockerfile.h"
#include "../images/images.h"
#include "../net/net.h"
#include "agentconn.h"

#define BUILD_RUN_MS   (3600 * 1000) /* one RUN step at most */
#define BUILD_TAIL     4096	     /* output kept for a failing RUN's error */
#define BUILD_LINE_MAX 4096	     /* an output line longer than this is split */

/* The state a build carries from step to step. */
struct build {
	struct core *c;			 /* owner (borrowed) */
	const char *tenant;		 /* whose sandboxes run the RUN steps */
	const struct core_build_opts *o; /* the request (borrowed) */
	core_build_event_fn ev;		 /* progress (may be NULL) */
	void *ud;			 /* for ev */
	struct dockerfile df;		 /* parsed */
	char **sub;			 /* per step: arguments after substitution (owned) */
	json_t **at;		  /* per step: {env (ENV and ARG), user, workdir} it runs with */
	json_t *args;		  /* ARG values {K:V} */
	json_t *env;		  /* ENV so far {K:V} (template's included) */
	json_t *labels;		  /* LABEL {K:V} */
	json_t *ports;		  /* EXPOSE [..] */
	json_t *cmd, *entrypoint; /* CMD / ENTRYPOINT (arrays) or NULL */
	char user[64];		  /* USER so far */
	char workdir[256];	  /* WORKDIR so far */
	char base[64];		  /* FROM */
	struct images_build *b;	  /* the template-so-far */
	char cache[PATH_MAX];	  /* templates/.build-cache */
	unsigned char key[32];	  /* cache key of the chain so far */
	unsigned step, total;	  /* current step (1-based) and steps after FROM */
	char tail[BUILD_TAIL];	  /* last output of the running RUN */
};

static void emit(struct build *bd, json_t *ev)
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

/* Chains the cache key: key = sha256(key, parts...). */
static void key_chain(struct build *bd, const char *a, const char *b, const unsigned char *extra,
		      size_t n)
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, bd->key, sizeof(bd->key));
	crypto_hash_sha256_update(&st, (const unsigned char *)a, strlen(a) + 1);
	crypto_hash_sha256_update(&st, (const unsigned char *)b, strlen(b) + 1);
	if (extra)
		crypto_hash_sha256_update(&st, extra, n);
	crypto_hash_sha256_final(&st, bd->key);
}

static void key_hex(const struct build *bd, char out[65])
{
	static const char d[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = d[bd->key[i] >> 4];
		out[2 * i + 1] = d[bd->key[i] & 15];
	}
	out[64] = '\0';
}

/* ---- reading the context ---- */

/* Opens the context tar for reading (plain; the CLI sends it uncompressed). */
static struct archive *ctx_open(const char *path, struct isola_err **err)
{
	struct archive *a = archive_read_new();

	if (!a) {
		isola_err_set(err, ENOMEM, "internal", "out of memory");
		return NULL;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		isola_err_set(err, EINVAL, "invalid", "build context: %s", archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* Reads the Dockerfile (path inside the context) into *out (NUL-terminated). */
static int read_dockerfile(const char *ctx, const char *name, char **out, size_t *len,
			   struct isola_err **err)
{
	struct archive *a = ctx_open(ctx, err);
	struct archive_entry *e;
	char want[PATH_MAX], got[PATH_MAX];
	int r = -ENOENT;

	if (!a)
		return -EINVAL;
	if (extract_norm_path(name, want, sizeof(want)) < 0) {
		archive_read_free(a);
		return isola_err_set(err, EINVAL, "invalid", "Dockerfile path `%.200s`", name);
	}
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);
		la_int64_t size = archive_entry_size(e);

		if (!p || extract_norm_path(p, got, sizeof(got)) < 0 || strcmp(got, want) ||
		    archive_entry_filetype(e) != AE_IFREG)
			continue;
		if (size < 0 || size > DF_MAX_BYTES) {
			r = isola_err_set(err, EFBIG, "too_large",
					  "Dockerfile: larger than %u bytes", DF_MAX_BYTES);
			break;
		}
		*out = malloc((size_t)size + 1);
		if (!*out) {
			r = isola_err_set(err, ENOMEM, "internal", "out of memory");
			break;
		}
		if (archive_read_data(a, *out, (size_t)size) != size) {
			free(*out);
			*out = NULL;
			r = isola_err_set(err, EINVAL, "invalid", "Dockerfile: truncated");
			break;
		}
		(*out)[size] = '\0';
		*len = (size_t)size;
		r = 0;
		break;
	}
	archive_read_free(a);
	if (r == -ENOENT)
		return isola_err_set(err, ENOENT, "invalid", "build context has no `%s`", want);
	return r;
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

static int plan_from(struct build *bd, const struct df_step *s, const char *name,
		     struct isola_err **err)
{
	struct template_info t;

	snprintf(bd->base, sizeof(bd->base), "%.63s", name);
	memset(&t, 0, sizeof(t));
	if (!core_template_visible(bd->c, bd->tenant, name) || images_get(name, &t, NULL) < 0 ||
	    t.name[0] == '.') {
		template_info_fini(&t);
		if (strpbrk(name, "/:@"))
			return isola_err_set(
				err, ENOENT, "not_found",
				"Dockerfile line %u: FROM `%s`: no such template; pull "
				"it first: isola template pull %s",
				s->line, name, name);
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

/* ---- COPY / ADD: a layer made from the context ---- */

/* Where a context entry goes: NULL when it does not match src. */
static bool copy_target(const char *name, const char *src, bool dest_dir, const char *dest,
			bool *is_root, char *out, size_t n)
{
	char prefix[PATH_MAX];
	size_t len = strlen(name);

	if (!strcmp(src, ".")) {
		*is_root = false;
		return snprintf(out, n, "%s/%s", dest, name) < (int)n;
	}
	/* The shortest prefix of name (at a component boundary) that src matches. */
	for (size_t i = 1; i <= len; i++) {
		if (i < len && name[i] != '/')
			continue;
		if (i >= sizeof(prefix))
			return false;
		memcpy(prefix, name, i);
		prefix[i] = '\0';
		if (fnmatch(src, prefix, FNM_PATHNAME) == 0) {
			const char *rest = name + i + (i < len ? 1 : 0);
			const char *base = strrchr(prefix, '/') ? strrchr(prefix, '/') + 1 : prefix;

			*is_root = !*rest;
			if (*rest)
				return snprintf(out, n, "%s/%s", dest, rest) < (int)n;
			if (dest_dir)
				return snprintf(out, n, "%s/%s", dest, base) < (int)n;
			return snprintf(out, n, "%s", dest) < (int)n;
		}
	}
	return false;
}

/* Sizes and ids of a COPY --chown: numeric `uid[:gid]`, or root. */
static int parse_chown(const char *s, unsigned line, uid_t *uid, gid_t *gid, struct isola_err **err)
{
	char *end;
	unsigned long u, g;

	*uid = 0;
	*gid = 0;
	if (!s)
		return 0;
	if (!strcmp(s, "root") || !strcmp(s, "root:root"))
		return 0;
	u = strtoul(s, &end, 10);
	g = u;
	if (end != s && *end == ':')
		g = strtoul(end + 1, &end, 10);
	if (end == s || *end || u > 65535 || g > 65535)
		return isola_err_set(
			err, EINVAL, "invalid",
			"Dockerfile line %u: --chown=`%s`: use numeric uid[:gid] (0-65535)", line,
			s);
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

static void digest_entry(crypto_hash_sha256_state *h, struct archive_entry *e)
{
	char meta[128];
	const char *l = archive_entry_symlink(e);

	crypto_hash_sha256_update(h, (const unsigned char *)archive_entry_pathname(e),
				  strlen(archive_entry_pathname(e)) + 1);
	snprintf(meta, sizeof(meta), "%o %lld %lld %lld", (unsigned)archive_entry_mode(e),
		 (long long)archive_entry_uid(e), (long long)archive_entry_gid(e),
		 (long long)archive_entry_size(e));
	crypto_hash_sha256_update(h, (const unsigned char *)meta, strlen(meta) + 1);
	if (l)
		crypto_hash_sha256_update(h, (const unsigned char *)l, strlen(l) + 1);
}

/* Copies one entry's data from a to w, hashing it. */
static int copy_data(struct archive *a, struct archive *w, crypto_hash_sha256_state *h, char *buf)
{
	for (;;) {
		la_ssize_t n = archive_read_data(a, buf, 1 << 16);

		if (n == 0)
			return 0;
		if (n < 0 || archive_write_data(w, buf, (size_t)n) != n)
			return -EIO;
		crypto_hash_sha256_update(h, (const unsigned char *)buf, (size_t)n);
	}
}

struct inner {
	struct archive *outer; /* the context, positioned at the tar file's data */
	char buf[1 << 16];     /* read buffer */
};

static la_ssize_t inner_read(struct archive *a, void *ud, const void **buf)
{
	struct inner *in = ud;

	(void)a;
	*buf = in->buf;
	return archive_read_data(in->outer, in->buf, sizeof(in->buf));
}

/* ADD of a local archive: its entries go below dest. 1 when it was one, 0 when not. */
static int add_archive(struct archive *ctx, struct archive *w, const char *name, const char *dest,
		       uid_t uid, gid_t gid, crypto_hash_sha256_state *h, char *buf)
{
	static const char *const ext[] = {".tar",     ".tar.gz",  ".tgz", ".tar.xz",
					  ".tar.zst", ".tar.bz2", NULL};
	struct inner *in;
	struct archive *a;
	struct archive_entry *e;
	size_t n = strlen(name);
	int r = 0;
	bool is = false;

	for (int i = 0; ext[i]; i++)
		if (n > strlen(ext[i]) && !strcmp(name + n - strlen(ext[i]), ext[i]))
			is = true;
	if (!is)
		return 0;
	in = malloc(sizeof(*in));
	a = archive_read_new();
	if (!in || !a) {
		free(in);
		if (a)
			archive_read_free(a);
		return -ENOMEM;
	}
	in->outer = ctx;
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	if (archive_read_open(a, in, NULL, inner_read, NULL) != ARCHIVE_OK)
		r = -EINVAL;
	while (r == 0) {
		char t[PATH_MAX], norm[PATH_MAX];
		int q = archive_read_next_header(a, &e);

		if (q == ARCHIVE_EOF)
			break;
		if (q < ARCHIVE_WARN) {
			r = -EINVAL;
			break;
		}
		/* UNTRUSTED: the archive's names; normalised here, applied confined later. */
		if (!archive_entry_pathname(e) ||
		    extract_norm_path(archive_entry_pathname(e), norm, sizeof(norm)) < 0 ||
		    archive_entry_hardlink(e) ||
		    snprintf(t, sizeof(t), "%s/%s", dest, norm) >= (int)sizeof(t))
			continue;
		archive_entry_copy_pathname(e, t);
		archive_entry_set_uid(e, uid);
		archive_entry_set_gid(e, gid);
		digest_entry(h, e);
		if (archive_write_header(w, e) != ARCHIVE_OK)
			r = -EIO;
		else if (archive_entry_filetype(e) == AE_IFREG)
			r = copy_data(a, w, h, buf);
	}
	archive_read_free(a);
	free(in);
	return r < 0 ? r : 1;
}

/* Writes the layer of COPY/ADD step i to out_fd; h gets the digest of what it holds. */
static int copy_layer(struct build *bd, size_t i, int out_fd, unsigned char h[32],
		      struct isola_err **err)
{
	const struct df_step *s = &bd->df.steps[i];
	const char *workdir = json_string_value(json_object_get(bd->at[i], "workdir"));
	char **w = NULL, dest[PATH_MAX], *buf = malloc(1 << 16);
	struct archive *ctx = NULL, *wr = archive_write_new();
	struct archive_entry *e;
	crypto_hash_sha256_state hs;
	size_t n = 0, matched = 0;
	uid_t uid;
	gid_t gid;
	bool dest_dir;
	int r;

	crypto_hash_sha256_init(&hs);
	if (!buf || !wr) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	r = parse_chown(s->chown, s->line, &uid, &gid, err);
	if (r < 0)
		goto out;
	if (s->argv) {
		w = calloc(s->argc + 1, sizeof(char *));
		for (size_t k = 0; w && k < s->argc; k++)
			w[k] = strdup(s->argv[k]);
		n = s->argc;
	} else {
		r = dockerfile_words(bd->sub[i], bd->df.escape, &w, &n, err);
		if (r < 0)
			goto out;
	}
	if (!w || n < 2) {
		r = isola_err_set(err, EINVAL, "invalid",
				  "Dockerfile line %u: %s needs a source "
				  "and a destination",
				  s->line, dockerfile_op_name(s->op));
		goto out;
	}
	dest_dir = n > 2 || w[n - 1][strlen(w[n - 1]) - 1] == '/' || strpbrk(w[0], "*?[");
	/* dest: absolute, or relative to WORKDIR; stored without the leading '/'. */
	{
		char full[PATH_MAX];

		const char *f = full;

		snprintf(full, sizeof(full), "%s%s%s", w[n - 1][0] == '/' ? "" : workdir,
			 w[n - 1][0] == '/' ? "" : "/", w[n - 1]);
		while (*f == '/')
			f++;
		if (!*f || extract_norm_path(f, dest, sizeof(dest)) == -ENOENT)
			snprintf(dest, sizeof(dest), ".");
		else if (extract_norm_path(f, dest, sizeof(dest)) < 0) {
			r = isola_err_set(err, EINVAL, "invalid",
					  "Dockerfile line %u: bad "
					  "destination `%s`",
					  s->line, w[n - 1]);
			goto out;
		}
	}
	for (size_t k = 0; k + 1 < n; k++) {
		char norm[PATH_MAX];

		if (extract_norm_path(w[k], norm, sizeof(norm)) == -ENOENT)
			snprintf(norm, sizeof(norm), ".");
		else if (extract_norm_path(w[k], norm, sizeof(norm)) < 0) {
			r = isola_err_set(err, EINVAL, "invalid",
					  "Dockerfile line %u: source `%s` is outside the context",
					  s->line, w[k]);
			goto out;
		}
		free(w[k]);
		w[k] = strdup(norm);
	}
	archive_write_set_format_pax_restricted(wr);
	if (archive_write_open_fd(wr, out_fd) != ARCHIVE_OK) {
		r = isola_err_set(err, EIO, "internal", "layer: %s", archive_error_string(wr));
		goto out;
	}
	ctx = ctx_open(bd->o->context, err);
	if (!ctx) {
		r = -EINVAL;
		goto out;
	}
	while (r == 0 && archive_read_next_header(ctx, &e) == ARCHIVE_OK) {
		char name[PATH_MAX], t[PATH_MAX];
		bool is_root = false;
		size_t k;

		/* UNTRUSTED: the client's context; names normalised, hard links refused. */
		if (!archive_entry_pathname(e) ||
		    extract_norm_path(archive_entry_pathname(e), name, sizeof(name)) < 0 ||
		    !strcmp(name, ".isola-dockerfile"))
			continue;
		for (k = 0; k + 1 < n; k++)
			if (copy_target(name, w[k], dest_dir, dest, &is_root, t, sizeof(t)))
				break;
		if (k + 1 == n)
			continue;
		matched++;
		if (is_root && archive_entry_filetype(e) == AE_IFDIR)
			continue; /* a directory's contents are copied, not itself */
		if (archive_entry_hardlink(e)) {
			r = isola_err_set(err, EINVAL, "invalid",
					  "build context: `%s`: hard links are not supported",
					  name);
			break;
		}
		if (s->op == DF_ADD && is_root && archive_entry_filetype(e) == AE_IFREG) {
			char d[PATH_MAX];
			int q;

			snprintf(d, sizeof(d), "%s", dest_dir || !dest[0] ? dest : dest);
			q = add_archive(ctx, wr, name, d, uid, gid, &hs, buf);
			if (q < 0) {
				r = isola_err_set(err, EINVAL, "invalid",
						  "Dockerfile line %u: ADD `%s`: not a readable "
						  "archive",
						  s->line, name);
				break;
			}
			if (q == 1)
				continue;
		}
		archive_entry_copy_pathname(e, t);
		archive_entry_set_uid(e, uid);
		archive_entry_set_gid(e, gid);
		archive_entry_set_uname(e, NULL);
		archive_entry_set_gname(e, NULL);
		digest_entry(&hs, e);
		if (archive_write_header(wr, e) != ARCHIVE_OK ||
		    (archive_entry_filetype(e) == AE_IFREG && copy_data(ctx, wr, &hs, buf) < 0))
			r = isola_err_set(err, EIO, "internal", "layer `%s`: %s", t,
					  archive_error_string(wr));
	}
	if (r == 0 && !matched)
		r = isola_err_set(err, ENOENT, "invalid",
				  "Dockerfile line %u: %s: `%s` not found in the build context "
				  "(or excluded by .dockerignore)",
				  s->line, dockerfile_op_name(s->op), w[0]);
	if (r == 0 && archive_write_close(wr) != ARCHIVE_OK)
		r = isola_err_set(err, EIO, "internal", "layer: %s", archive_error_string(wr));
out:
	crypto_hash_sha256_final(&hs, h);
	if (ctx)
		archive_read_free(ctx);
	if (wr)
		archive_write_free(wr);
	dockerfile_words_free(w);
	free(buf);
	return r;
}

/* ---- RUN: a process-tier sandbox from the template-so-far ---- */

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
		emit(bd, json_pack("{s:s, s:i, s:s%}", "type", "output", "step", (int)bd->step,
				   "line", line, *ll));
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

/* Runs RUN step i in a sandbox; on success its writable layer is at layer (a file path). */
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
	snprintf(req.tier, sizeof(req.tier), "process");
	req.env = json_object_get(at, "env");
	req.user = json_string_value(json_object_get(at, "user"));
	req.workdir = json_string_value(json_object_get(at, "workdir"));
	if (req.workdir && !req.workdir[0])
		req.workdir = NULL;
	if (req.user && !req.user[0])
		req.user = NULL;
	req.tenant = bd->tenant;
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
	r = s->tier->snapshot(s->ts, layer_dir, &level, NULL, err);
	if (r < 0)
		isola_err_wrap(err, "RUN (step %u): its writable layer", bd->step);
out:
	core_sandbox_destroy(bd->c, sandbox_id(s), NULL);
	sandbox_unref(s);
	if (r < 0 && code > 0)
		emit(bd, json_pack("{s:s, s:i, s:i}", "type", "run_failed", "step", (int)bd->step,
				   "exit_code", code));
	return r;
}

/* ---- the steps ---- */

/* Applies the cached layer `<cache>/<key><suffix>` if present: 1, else 0; or -errno. */
static int from_cache(struct build *bd, const char *suffix, bool upper, char *path, size_t n,
		      struct isola_err **err)
{
	char hex[65];

	key_hex(bd, hex);
	if (snprintf(path, n, "%s/%s%s", bd->cache, hex, suffix) >= (int)n)
		return isola_err_set(err, ENAMETOOLONG, "internal", "cache path too long");
	if (access(path, F_OK) < 0)
		return 0;
	return images_build_apply(bd->b, path, upper, "cached", err) < 0 ? -EIO : 1;
}

static int step_copy(struct build *bd, size_t i, bool *cached, struct isola_err **err)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	unsigned char h[32];
	int fd, r;

	if (snprintf(tmp, sizeof(tmp), "%s/.tmp-XXXXXX", bd->cache) >= (int)sizeof(tmp))
		return isola_err_set(err, ENAMETOOLONG, "internal", "cache path too long");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", tmp);
	r = copy_layer(bd, i, fd, h, err);
	close(fd);
	if (r == 0) {
		key_chain(bd, dockerfile_op_name(bd->df.steps[i].op), bd->sub[i], h, sizeof(h));
		r = from_cache(bd, ".tar", false, path, sizeof(path), err);
		*cached = r == 1;
		if (r == 0 && rename(tmp, path) < 0)
			r = isola_err_sys(err, errno, "internal", "rename `%s`", tmp);
		else if (r == 0)
			tmp[0] = '\0';
		if (r == 0)
			r = images_build_apply(bd->b, path, false, "COPY", err);
	}
	if (tmp[0])
		unlink(tmp);
	return r < 0 ? r : 0;
}

static int step_run(struct build *bd, size_t i, bool *cached, struct isola_err **err)
{
	char *state = json_dumps(bd->at[i], JSON_SORT_KEYS | JSON_COMPACT);
	const struct df_step *st = &bd->df.steps[i];
	char dir[PATH_MAX], path[PATH_MAX], from[PATH_MAX + 32];
	json_t *argv = NULL;
	char *av = NULL;
	int r;

	if (st->argv) {
		argv = json_array();
		for (size_t k = 0; argv && k < st->argc; k++)
			json_array_append_new(argv, json_string(st->argv[k]));
		av = json_dumps(argv, JSON_COMPACT);
		json_decref(argv);
	}
	/* The key: the chain, the command as written (heredoc included), what it runs with and
	 * the egress it had. */
	{
		char *allow = bd->o->allow ? json_dumps(bd->o->allow, JSON_COMPACT) : NULL;

		key_chain(bd,
			  av		? av
			  : st->heredoc ? st->heredoc
					: bd->sub[i],
			  state ? state : "", (const unsigned char *)(allow ? allow : ""),
			  allow ? strlen(allow) : 0);
		free(allow);
	}
	free(av);
	free(state);
	r = from_cache(bd, ".tar.zst", true, path, sizeof(path), err);
	*cached = r == 1;
	if (r != 0)
		return r < 0 ? r : 0;
	if (snprintf(dir, sizeof(dir), "%s/.run-XXXXXX", bd->cache) >= (int)sizeof(dir) ||
	    !mkdtemp(dir))
		return isola_err_sys(err, errno, "internal", "mkdtemp in `%s`", bd->cache);
	r = run_step(bd, i, dir, err);
	snprintf(from, sizeof(from), "%s/layer.tar.zst", dir);
	if (r == 0 && rename(from, path) < 0)
		r = isola_err_sys(err, errno, "internal", "rename `%s`", from);
	util_rm_rf(dir);
	if (r == 0)
		r = images_build_apply(bd->b, path, true, "RUN", err);
	return r;
}

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
		key_chain(bd, bd->tenant, t.id, NULL, 0);
		template_info_fini(&t);
	}
	for (size_t i = 0; i < bd->df.n && r == 0; i++) {
		const struct df_step *st = &bd->df.steps[i];
		char instr[300];
		bool cached = false;
		uint64_t ts = util_now_ms();

		if (st->op == DF_FROM || st->op == DF_ARG) {
			if (st->op == DF_ARG)
				key_chain(bd, "ARG", bd->sub[i], NULL, 0);
			continue;
		}
		bd->step++;
		snprintf(instr, sizeof(instr), "%s %.280s", dockerfile_op_name(st->op), bd->sub[i]);
		emit(bd, json_pack("{s:s, s:i, s:i, s:i, s:s}", "type", "step", "step",
				   (int)bd->step, "total", (int)bd->total, "line", (int)st->line,
				   "instruction", instr));
		switch (st->op) {
		case DF_RUN:
			r = step_run(bd, i, &cached, err);
			break;
		case DF_COPY:
		case DF_ADD:
			r = step_copy(bd, i, &cached, err);
			break;
		case DF_WORKDIR:
			key_chain(bd, "WORKDIR", bd->sub[i], NULL, 0);
			r = step_workdir(bd, i, err);
			break;
		default:
			/* Config only; chained so later layers depend on it. */
			key_chain(bd, dockerfile_op_name(st->op), bd->sub[i], NULL, 0);
			break;
		}
		if (r == 0 && (st->op == DF_RUN || st->op == DF_COPY || st->op == DF_ADD))
			emit(bd, json_pack("{s:s, s:i, s:b, s:I}", "type", "layer", "step",
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
	struct build bd = {.c = c, .tenant = tenant, .o = o, .ev = ev, .ud = ud};
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
	r = read_dockerfile(o->context,
			    o->dockerfile && *o->dockerfile ? o->dockerfile : "Dockerfile", &text,
			    &len, err);
	if (r < 0)
		goto out;
	/* Everything refusable is refused here, before any sandbox or layer is made. */
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
	if (r < 0)
		goto out;
	r = execute(&bd, name, err);
	if (r < 0)
		goto out;
	{
		struct template_info t;
		json_t *config =
			json_pack("{s:O?, s:O?, s:O, s:O}", "entrypoint", bd.entrypoint, "cmd",
				  bd.cmd, "labels", bd.labels, "exposed_ports", bd.ports);

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
