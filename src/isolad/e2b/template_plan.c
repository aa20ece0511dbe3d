/* SPDX-License-Identifier: Apache-2.0 */
/* template_plan: the SDK's template steps as a Dockerfile for isola's builder, the tenant's
 * file store of copy() uploads, and the build context made of both. */
#include "e2b-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/extract.h"
#include "../../common/imageref.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "../core/core.h"
#include "../images/images.h"

#define TPL_STEPS_MAX	 500	/* steps of one template */
#define TPL_DEFAULT_BASE "host" /* `base` and `e2bdev/base`: isola's default template */

/* --- the file store ---------------------------------------------------------------------- */

int e2b_tpl_store_dir(struct api_server *srv, const char *tenant, bool create, char *out, size_t n)
{
	unsigned char h[32];
	char hx[65], top[PATH_MAX];
	int r;

	crypto_hash_sha256(h, (const unsigned char *)tenant, strlen(tenant));
	sodium_bin2hex(hx, sizeof(hx), h, 16);
	if (snprintf(top, sizeof(top), "%s/e2b-files", srv->spool_dir) >= (int)sizeof(top) ||
	    snprintf(out, n, "%s/%s", top, hx) >= (int)n)
		return -ENAMETOOLONG;
	if (!create)
		return 0;
	r = util_mkdir_p(out, 0700);
	return r < 0 ? r : 0;
}

void e2b_tenant_removed(struct api_server *srv, const char *tenant)
{
	char dir[PATH_MAX];
	int r;

	if (e2b_tpl_store_dir(srv, tenant, false, dir, sizeof(dir)) < 0)
		return;
	r = util_rm_rf(dir);
	if (r < 0 && r != -ENOENT)
		log_warn("tenant %s removed, but its E2B uploads in `%s` were not: %s", tenant, dir,
			 strerror(-r));
}

bool e2b_tpl_file_present(struct api_server *srv, const char *tenant, const char *hash)
{
	char dir[PATH_MAX], p[PATH_MAX + 80];
	struct stat st;

	if (e2b_tpl_store_dir(srv, tenant, false, dir, sizeof(dir)) < 0)
		return false;
	snprintf(p, sizeof(p), "%s/%s", dir, hash);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* --- steps -> Dockerfile ------------------------------------------------------------------- */

static int plan_fail(struct e2b_tpl_plan *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int plan_fail(struct e2b_tpl_plan *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Appends one Dockerfile line for E2B step `step` (NULL: FROM, not a builder step). */
static int plan_line(struct e2b_tpl_plan *p, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int plan_line(struct e2b_tpl_plan *p, const char *step, const char *fmt, ...)
{
	char *line = NULL, *n;
	va_list ap;
	int l;

	va_start(ap, fmt);
	l = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (l < 0 || p->len + (size_t)l + 2 > (1u << 20)) {
		free(line);
		return plan_fail(p, "the template is too large (its Dockerfile passes 1 MiB)");
	}
	n = realloc(p->df, p->len + (size_t)l + 2);
	if (!n) {
		free(line);
		return plan_fail(p, "out of memory");
	}
	p->df = n;
	memcpy(p->df + p->len, line, (size_t)l);
	p->len += (size_t)l;
	p->df[p->len++] = '\n';
	p->df[p->len] = '\0';
	free(line);
	if (step)
		json_array_append_new(p->stepmap, json_string(step));
	return 0;
}

/* A JSON array of strings, one line (exec form): newlines and quotes escaped by jansson. */
static char *exec_form(const char *a, const char *b, const char *c)
{
	json_t *arr = c ? json_pack("[s, s, s]", a, b, c) : json_pack("[s, s]", a, b);
	char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;

	json_decref(arr);
	return s;
}

/* A user name or uid[:gid] the builder can record: [A-Za-z0-9._:-], 1..31. */
static bool user_ok(const char *u)
{
	size_t n = strlen(u);

	if (n == 0 || n > 31 || u[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((u[i] >= 'a' && u[i] <= 'z') || (u[i] >= 'A' && u[i] <= 'Z') ||
		      (u[i] >= '0' && u[i] <= '9') || strchr("._:-", u[i])))
			return false;
	return true;
}

/* The args of a step: an array of strings, at most max. */
static int step_args(struct e2b_tpl_plan *p, size_t k, const char *type, json_t *st,
		     const char **out, size_t min, size_t max)
{
	json_t *a = json_object_get(st, "args"), *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) < min || json_array_size(a) > max)
		return plan_fail(p, "step %zu (%s): `args` must be an array of %zu to %zu strings",
				 k + 1, type, min, max);
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v))
			return plan_fail(p, "step %zu (%s): args[%zu] must be a string", k + 1,
					 type, i);
		if (strlen(json_string_value(v)) != json_string_length(v))
			return plan_fail(p, "step %zu (%s): args[%zu] contains a NUL byte", k + 1,
					 type, i);
		out[i] = json_string_value(v);
	}
	for (; i < max; i++)
		out[i] = "";
	return 0;
}

static int plan_run(struct e2b_tpl_plan *p, size_t k, const char *sn, json_t *st)
{
	const char *a[2];
	char *ef;
	int r = step_args(p, k, "RUN", st, a, 1, 2);

	if (r < 0)
		return r;
	if (a[1][0] && !user_ok(a[1]))
		return plan_fail(p, "step %zu (RUN): invalid user `%.64s`", k + 1, a[1]);
	/* runCmd(cmd, {user}): that user for this step only. */
	if (a[1][0] && (r = plan_line(p, sn, "USER %s", a[1])) < 0)
		return r;
	ef = exec_form("/bin/sh", "-c", a[0]);
	r = ef ? plan_line(p, sn, "RUN %s", ef) : plan_fail(p, "out of memory");
	free(ef);
	if (r == 0 && a[1][0])
		r = plan_line(p, sn, "USER %s", p->user);
	return r;
}

static int plan_copy(struct e2b_tpl_plan *p, size_t k, const char *sn, json_t *st)
{
	const char *a[4], *hash = json_string_value(json_object_get(st, "filesHash"));
	char src[PATH_MAX], *ef;
	size_t n;
	int r = step_args(p, k, "COPY", st, a, 2, 4);

	if (r < 0)
		return r;
	if (!hash || !e2b_tpl_valid_hash(hash))
		return plan_fail(p, "step %zu (COPY): `filesHash` must be 64 lowercase hex", k + 1);
	if (!e2b_tpl_file_present(p->r->srv, api_tenant(p->r), hash))
		return plan_fail(p, "step %zu (COPY %.200s): its files (%s) were not uploaded",
				 k + 1, a[0], hash);
	if (a[3][0])
		return plan_fail(p,
				 "step %zu (COPY %.200s): `mode` is not supported by isola's "
				 "template builder: set it in a runCmd (chmod) after the copy",
				 k + 1, a[0]);
	if (a[2][0] && !user_ok(a[2]))
		return plan_fail(p, "step %zu (COPY): invalid user `%.64s`", k + 1, a[2]);
	/* UNTRUSTED paths: no `$` (the builder would substitute it) and no newline. */
	if (strpbrk(a[0], "$\n\r") || strpbrk(a[1], "$\n\r") || !a[0][0] || !a[1][0])
		return plan_fail(p,
				 "step %zu (COPY): source and destination must be non-empty and "
				 "contain no `$` or newline",
				 k + 1);
	/* The SDK's `dir/` and `./x` name what the tar holds as `dir` and `x`. */
	snprintf(src, sizeof(src), "%s", a[0]);
	while (!strncmp(src, "./", 2) && src[2])
		memmove(src, src + 2, strlen(src + 2) + 1);
	n = strlen(src);
	while (n > 1 && src[n - 1] == '/')
		src[--n] = '\0';
	ef = exec_form(src, a[1], NULL);
	if (!ef)
		return plan_fail(p, "out of memory");
	r = a[2][0] ? plan_line(p, sn, "COPY --chown=%s %s", a[2], ef)
		    : plan_line(p, sn, "COPY %s", ef);
	free(ef);
	/* The verification at build time needs the step as the SDK hashed it. */
	json_array_append_new(p->copies, json_pack("{s:s, s:s, s:s, s:s}", "hash", hash, "src",
						   a[0], "dest", a[1], "step", sn));
	return r;
}

static bool env_name_ok(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static int plan_env(struct e2b_tpl_plan *p, size_t k, const char *sn, json_t *st)
{
	json_t *a = json_object_get(st, "args"), *kv, *vv;
	char *line = NULL;
	size_t len = 0, i;
	FILE *f;
	int r = 0;

	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) % 2)
		return plan_fail(p, "step %zu (ENV): `args` must be name, value pairs", k + 1);
	f = open_memstream(&line, &len);
	if (!f)
		return plan_fail(p, "out of memory");
	fputs("ENV", f);
	for (i = 0; i < json_array_size(a) && r == 0; i += 2) {
		const char *name, *v;

		kv = json_array_get(a, i);
		vv = json_array_get(a, i + 1);
		name = json_string_value(kv);
		v = json_string_value(vv);
		if (!name || !v || !env_name_ok(name) || strlen(name) > 255)
			r = plan_fail(p, "step %zu (ENV): invalid variable name `%.64s`", k + 1,
				      name ? name : "");
		else if (strlen(v) != json_string_length(vv) || strpbrk(v, "\n\r"))
			r = plan_fail(p, "step %zu (ENV %s): the value contains a newline or NUL",
				      k + 1, name);
		if (r < 0)
			break;
		/* Quoted; `\`, `"` and `$` escaped: the value is taken literally. */
		fprintf(f, " %s=\"", name);
		for (; *v; v++) {
			if (*v == '\\' || *v == '"' || *v == '$')
				fputc('\\', f);
			fputc(*v, f);
		}
		fputc('"', f);
	}
	fclose(f);
	if (r == 0)
		r = line ? plan_line(p, sn, "%s", line) : plan_fail(p, "out of memory");
	free(line);
	return r;
}

static int plan_path_step(struct e2b_tpl_plan *p, size_t k, const char *sn, json_t *st,
			  const char *type)
{
	const char *a[1];
	int r = step_args(p, k, type, st, a, 1, 1);

	if (r < 0)
		return r;
	if (!strcmp(type, "USER")) {
		if (!user_ok(a[0]))
			return plan_fail(p, "step %zu (USER): invalid user `%.64s`", k + 1, a[0]);
		snprintf(p->user, sizeof(p->user), "%s", a[0]);
		return plan_line(p, sn, "USER %s", a[0]);
	}
	if (!a[0][0] || strlen(a[0]) > 200 || strpbrk(a[0], "$\\\n\r\"'"))
		return plan_fail(p,
				 "step %zu (WORKDIR): the path must be 1-200 bytes without `$`, "
				 "`\\`, quotes or newlines",
				 k + 1);
	return plan_line(p, sn, "WORKDIR %s", a[0]);
}

/* The base as an isola template name into out. Refusals name the reason. */
static int plan_base(struct e2b_tpl_plan *p, json_t *body, char *out, size_t n)
{
	const char *img = json_string_value(json_object_get(body, "fromImage"));
	const char *tpl = json_string_value(json_object_get(body, "fromTemplate"));
	const char *name = tpl ? tpl : img;
	struct imageref ir;

	if (json_object_get(body, "fromImageRegistry") &&
	    !json_is_null(json_object_get(body, "fromImageRegistry")))
		return plan_fail(p, "fromImage with registry credentials is not supported: "
				    "the operator pulls images (isola template pull)");
	if (!name)
		return plan_fail(p, "`fromImage` or `fromTemplate` is required");
	/* The SDK's default base (Template() without from*) and E2B's `base` template are
	 * isola's default template. */
	if (!strcmp(name, "base") || !strcmp(name, "e2bdev/base") ||
	    !strcmp(name, "e2bdev/base:latest"))
		name = TPL_DEFAULT_BASE;
	if (api_valid_template_name(name) &&
	    core_template_visible(p->r->srv->core, api_tenant(p->r), name)) {
		struct template_info t;

		memset(&t, 0, sizeof(t));
		if (images_get(name, &t, NULL) == 0) {
			snprintf(p->user, sizeof(p->user), "%s",
				 t.default_user[0] ? t.default_user : "root");
			template_info_fini(&t);
			snprintf(out, n, "%s", name);
			return 0;
		}
	}
	if (tpl)
		return plan_fail(p, "fromTemplate `%.200s`: no such template", tpl);
	/* An image reference: isolad dials the registry from the host, outside every egress
	 * policy and able to reach loopback, so only the operator's builds pull (as only the
	 * operator may POST /v1/templates/pull); a tenant's would be a request forgery into
	 * the host's network. */
	if (imageref_parse(img, &ir) < 0 || strlen(img) >= sizeof(p->pull_ref))
		return plan_fail(p,
				 "fromImage `%.200s`: neither an isola template nor an image "
				 "reference ([registry/]repository[:tag][@sha256:hex])",
				 img);
	if (!api_is_operator(p->r))
		return plan_fail(p,
				 "fromImage `%.200s`: no isola template of that name, and a "
				 "tenant's build does not pull: the operator pulls it (isola "
				 "template pull %.200s NAME), then build fromTemplate(NAME)",
				 img, img);
	images_ref_template_name(img, out, n);
	snprintf(p->user, sizeof(p->user), "root");
	if (core_template_visible(p->r->srv->core, api_tenant(p->r), out)) {
		struct template_info t;

		/* Pulled by an earlier build: used as it is (a moved tag is not re-pulled). */
		memset(&t, 0, sizeof(t));
		if (images_get(out, &t, NULL) == 0) {
			snprintf(p->user, sizeof(p->user), "%s",
				 t.default_user[0] ? t.default_user : "root");
			template_info_fini(&t);
			return 0;
		}
	}
	snprintf(p->pull_ref, sizeof(p->pull_ref), "%s", img);
	return 0;
}

int e2b_tpl_plan_make(struct e2b_tpl_plan *p, json_t *body)
{
	json_t *steps = json_object_get(body, "steps"), *st;
	const char *start = json_string_value(json_object_get(body, "startCmd"));
	const char *ready = json_string_value(json_object_get(body, "readyCmd"));
	char base[64], sn[24];
	size_t k;
	int r;

	if (steps && !json_is_array(steps))
		return plan_fail(p, "`steps` must be an array");
	if (json_array_size(steps) > TPL_STEPS_MAX)
		return plan_fail(p, "at most %d steps", TPL_STEPS_MAX);
	if (ready && *ready)
		return plan_fail(p, "readyCmd is not supported: isola records no readiness check "
				    "on a template (wait for readiness after Sandbox.create)");
	r = plan_base(p, body, base, sizeof(base));
	if (r == 0)
		r = plan_line(p, NULL, "FROM %s", base);
	json_array_foreach(steps, k, st)
	{
		const char *type = json_string_value(json_object_get(st, "type"));

		if (r < 0)
			break;
		snprintf(sn, sizeof(sn), "%zu", k + 1); /* stackTraces[0] is the base */
		if (!json_is_object(st) || !type)
			r = plan_fail(p, "step %zu: an object with a string `type` is required",
				      k + 1);
		else if (!strcmp(type, "RUN"))
			r = plan_run(p, k, sn, st);
		else if (!strcmp(type, "COPY"))
			r = plan_copy(p, k, sn, st);
		else if (!strcmp(type, "ENV"))
			r = plan_env(p, k, sn, st);
		else if (!strcmp(type, "WORKDIR") || !strcmp(type, "USER"))
			r = plan_path_step(p, k, sn, st, type);
		else
			r = plan_fail(p,
				      "step %zu: step type `%.32s` is not supported by isola's "
				      "template builder (RUN, COPY, ENV, WORKDIR and USER are)",
				      k + 1, type);
	}
	if (r == 0 && start && *start) {
		char *ef = exec_form("/bin/sh", "-c", start);

		r = ef ? plan_line(p, "finalize", "CMD %s", ef) : plan_fail(p, "out of memory");
		free(ef);
	}
	return r;
}

void e2b_tpl_plan_fini(struct e2b_tpl_plan *p)
{
	free(p->df);
	json_decref(p->copies);
	json_decref(p->stepmap);
	p->df = NULL;
	p->copies = p->stepmap = NULL;
}

/* --- the build context ------------------------------------------------------------------- */

/*
 * Recomputes the SDK's filesHash (calculateFilesHash: sha256 of "COPY <src> <dest>", then per
 * file in path order its relative path, st_mode and st_size in decimal, and its content or
 * symlink target) over the upload at path. The hash covers a directory's st_size on the
 * client, which a tar does not carry: an upload with a directory entry cannot be checked.
 * 1 when it matches, 0 when it cannot be checked, -1 when it does not match or cannot be read.
 * UNTRUSTED archive (checked at upload).
 */
static int verify_hash(const char *path, const char *src, const char *dest, const char *want)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	crypto_hash_sha256_state h;
	char prev[PATH_MAX] = "", num[32], *buf = malloc(1 << 16);
	unsigned char d[32];
	char got[65];
	int r = 1, hr;

	if (!a || !buf) {
		archive_read_free(a);
		free(buf);
		return -1;
	}
	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const unsigned char *)"COPY ", 5);
	crypto_hash_sha256_update(&h, (const unsigned char *)src, strlen(src));
	crypto_hash_sha256_update(&h, (const unsigned char *)" ", 1);
	crypto_hash_sha256_update(&h, (const unsigned char *)dest, strlen(dest));
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK)
		r = -1;
	while (r == 1 && (hr = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		mode_t type = archive_entry_filetype(e);
		const char *target = archive_entry_symlink(e);
		uint64_t size = type == AE_IFLNK ? (target ? strlen(target) : 0)
						 : (uint64_t)archive_entry_size(e);

		/* The SDK hashes in path order and tars in that order: anything else (or a
		 * directory) is an archive this check does not understand. */
		if (type == AE_IFDIR || !name || strlen(name) >= sizeof(prev) ||
		    strcmp(prev, name) >= 0 || (type != AE_IFREG && type != AE_IFLNK)) {
			r = 0;
			break;
		}
		snprintf(prev, sizeof(prev), "%s", name);
		crypto_hash_sha256_update(&h, (const unsigned char *)name, strlen(name));
		snprintf(num, sizeof(num), "%u", (unsigned)archive_entry_mode(e));
		crypto_hash_sha256_update(&h, (const unsigned char *)num, strlen(num));
		snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
		crypto_hash_sha256_update(&h, (const unsigned char *)num, strlen(num));
		if (type == AE_IFLNK) {
			if (target)
				crypto_hash_sha256_update(&h, (const unsigned char *)target,
							  strlen(target));
			continue;
		}
		for (;;) {
			la_ssize_t n = archive_read_data(a, buf, 1 << 16);

			if (n == 0)
				break;
			if (n < 0) {
				r = -1;
				break;
			}
			crypto_hash_sha256_update(&h, (const unsigned char *)buf, (size_t)n);
		}
	}
	if (r == 1 && hr != ARCHIVE_EOF)
		r = -1;
	archive_read_free(a);
	free(buf);
	if (r != 1)
		return r;
	crypto_hash_sha256_final(&h, d);
	sodium_bin2hex(got, sizeof(got), d, sizeof(d));
	return sodium_memcmp(got, want, 64) == 0 ? 1 : -1;
}

/* Appends the entries of the upload at p to w, skipping paths in seen (and adding the rest). */
static int context_add(struct archive *w, const char *p, json_t *seen, char *buf, char *why,
		       size_t n)
{
	struct archive *a = archive_read_new();
	struct archive_entry *in;
	char norm[PATH_MAX];
	int r = 0, hr;

	if (!a)
		return snprintf(why, n, "out of memory"), -ENOMEM;
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, p, 1 << 16) != ARCHIVE_OK) {
		snprintf(why, n, "%s", archive_error_string(a));
		archive_read_free(a);
		return -EIO;
	}
	/* UNTRUSTED entries (checked at upload; the builder checks them again). */
	while (r == 0 && (hr = archive_read_next_header(a, &in)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(in);

		if (!name || extract_norm_path(name, norm, sizeof(norm)) < 0 ||
		    !strcmp(norm, "Dockerfile") || json_object_get(seen, norm))
			continue;
		json_object_set_new(seen, norm, json_true());
		if (archive_write_header(w, in) != ARCHIVE_OK) {
			snprintf(why, n, "%s", archive_error_string(w));
			r = -EIO;
			break;
		}
		for (;;) {
			la_ssize_t got = archive_read_data(a, buf, 1 << 16);

			if (got == 0)
				break;
			if (got < 0 || archive_write_data(w, buf, (size_t)got) < 0) {
				snprintf(why, n, "%s", archive_error_string(got < 0 ? a : w));
				r = -EIO;
				break;
			}
		}
	}
	if (r == 0 && hr != ARCHIVE_EOF) {
		snprintf(why, n, "%s", archive_error_string(a));
		r = -EIO;
	}
	archive_read_free(a);
	return r;
}

int e2b_tpl_context(const char *store, const char *dockerfile, const json_t *copies,
		    const char *path, char *why, size_t n, char *step, size_t sn)
{
	struct archive *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	json_t *seen = json_object(), *c;
	char *buf = malloc(1 << 16);
	size_t i;
	int r = 0;

	step[0] = '\0';
	if (!w || !e || !seen || !buf) {
		snprintf(why, n, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	archive_write_set_format_pax_restricted(w);
	archive_entry_set_pathname(e, "Dockerfile");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)strlen(dockerfile));
	if (archive_write_open_filename(w, path) != ARCHIVE_OK ||
	    archive_write_header(w, e) != ARCHIVE_OK ||
	    archive_write_data(w, dockerfile, strlen(dockerfile)) < 0) {
		snprintf(why, n, "build context: %s", archive_error_string(w));
		r = -EIO;
		goto out;
	}
	json_array_foreach(copies, i, c)
	{
		const char *hash = json_string_value(json_object_get(c, "hash"));
		const char *src = json_string_value(json_object_get(c, "src"));
		char p[PATH_MAX + 80], m[300];
		int v;

		snprintf(p, sizeof(p), "%s/%s", store, hash);
		/* In use: the store's expiry (e2b_tpl_store_prune) goes by modification time. */
		utimensat(AT_FDCWD, p, NULL, 0);
		v = verify_hash(p, src, json_string_value(json_object_get(c, "dest")), hash);
		if (v < 0) {
			snprintf(why, n,
				 "COPY %.200s: the uploaded files do not match their hash %.64s "
				 "(changed during the upload?)",
				 src, hash);
			snprintf(step, sn, "%s", json_string_value(json_object_get(c, "step")));
			r = -EINVAL;
			break;
		}
		r = context_add(w, p, seen, buf, m, sizeof(m));
		if (r < 0) {
			snprintf(why, n, "COPY %.200s: files %.64s: %s", src, hash, m);
			snprintf(step, sn, "%s", json_string_value(json_object_get(c, "step")));
			break;
		}
	}
	if (r == 0 && archive_write_close(w) != ARCHIVE_OK) {
		snprintf(why, n, "build context: %s", archive_error_string(w));
		r = -EIO;
	}
out:
	if (w)
		archive_write_free(w);
	archive_entry_free(e);
	json_decref(seen);
	free(buf);
	return r;
}

void e2b_tpl_store_prune(struct api_server *srv, const char *tenant)
{
	char dir[PATH_MAX];
	time_t now = time(NULL);
	struct dirent *de;
	DIR *d;

	if (e2b_tpl_store_dir(srv, tenant, false, dir, sizeof(dir)) < 0 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		struct stat st;

		/* Uploads (64 hex) and abandoned spool files (.hash.XXXXXX) past their time. */
		if (de->d_name[0] == '.' && (!de->d_name[1] || de->d_name[1] == '.'))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && now - st.st_mtime > E2B_TPL_FILES_TTL_S)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}
