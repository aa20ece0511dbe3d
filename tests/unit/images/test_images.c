/* SPDX-License-Identifier: Apache-2.0 */
/* test_images: TAP tests of the template store, the host view and hostile image imports. */
#include "isolad/images/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/extract.h"
#include "common/util.h"

static int n_test, n_fail;
static char state[256], hostdir[256], work[256];

static bool ok(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++n_test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		n_fail++;
	return cond;
}

static void diag_err(struct isola_err *e)
{
	if (e)
		printf("# error %s (%d): %s\n", e->code, e->errnum, e->message);
}

/* Runs mkimage.py for a case; returns the tarball path (static buffer). */
static const char *mkimage(const char *kase)
{
	static char out[PATH_MAX];
	char cmd[PATH_MAX * 3];
	const char *py = getenv("PYTHON3"), *script = getenv("MKIMAGE");

	snprintf(out, sizeof(out), "%s/%s.tar", work, kase);
	snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s' '%s' '%s'", py ? py : "python3",
		 script ? script : "mkimage.py", kase, out, hostdir);
	if (system(cmd) != 0) {
		printf("# mkimage %s failed\n", kase);
		return NULL;
	}
	return out;
}

static char *path_in(const struct template_info *t, const char *rel)
{
	static char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", t->rootfs, rel);
	return p;
}

static bool file_is(const char *path, const char *want)
{
	char *buf = NULL;
	size_t len;
	bool same;

	if (util_read_file(path, 1 << 20, &buf, &len) < 0)
		return false;
	same = len == strlen(want) && !memcmp(buf, want, len);
	free(buf);
	return same;
}

static bool missing(const char *path)
{
	struct stat st;

	return lstat(path, &st) < 0 && errno == ENOENT;
}

/* Names in a directory, sorted and joined, for before/after comparisons. */
static void listing(const char *dir, char *out, size_t sz)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	size_t o = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (o < sz)
			o += (size_t)snprintf(out + o, sz - o, "%s,", names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

/* The host dir the hostile images aim at must hold exactly `victim`, intact, unlinked. */
static bool host_untouched(void)
{
	char l[4096], v[PATH_MAX];
	struct stat st;

	listing(hostdir, l, sizeof(l));
	snprintf(v, sizeof(v), "%s/victim", hostdir);
	if (strcmp(l, ".,..,victim,") || stat(v, &st) < 0 || st.st_nlink != 1) {
		printf("# host dir now holds: %s\n", l);
		return false;
	}
	return file_is(v, "host data\n");
}

static void check_host(void)
{
	struct template_info t = {0};
	struct isola_err *e = NULL;
	char target[PATH_MAX], hosttarget[PATH_MAX];
	struct stat st;
	ssize_t n;
	bool ssl = false;

	if (!ok(images_get("host", &t, &e) == 0, "host template exists"))
		return diag_err(e);
	ok(!strcmp(t.id, "host") && !strcmp(t.source, "host") && !strcmp(t.default_user, "root") &&
		   !strcmp(t.workdir, ""),
	   "host template fields");
	ok(t.n_binds >= 1 && !strcmp(t.binds[0].src, "/usr") && !strcmp(t.binds[0].dst, "/usr"),
	   "host binds /usr first");
	for (unsigned i = 0; i < t.n_binds; i++)
		ssl |= !strcmp(t.binds[i].src, "/etc/ssl/certs");
	ok(ssl == (stat("/etc/ssl/certs", &st) == 0), "host binds /etc/ssl/certs when present");
	ok(file_is(path_in(&t, "etc/passwd"),
		   "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n"
		   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
	   "host etc/passwd");
	ok(missing(path_in(&t, "etc/shadow")) && missing(path_in(&t, "etc/ssl/private")),
	   "host secrets stay out");
	n = readlink(path_in(&t, "bin"), target, sizeof(target) - 1);
	if (n >= 0)
		target[n] = '\0';
	n = readlink("/bin", hosttarget, sizeof(hosttarget) - 1);
	if (n >= 0) {
		hosttarget[n] = '\0';
		ok(!strcmp(target, hosttarget), "host bin mirrors the host's /bin -> %s",
		   hosttarget);
	} else {
		ok(stat(path_in(&t, "bin"), &st) == 0 && S_ISDIR(st.st_mode), "host bin is a dir");
	}
	ok(stat(path_in(&t, "tmp"), &st) == 0 && (st.st_mode & 07777) == 01777, "host tmp 1777");
	ok(stat(path_in(&t, "root"), &st) == 0 && (st.st_mode & 07777) == 0700, "host root 0700");
	ok(stat(path_in(&t, "home/user"), &st) == 0 && st.st_uid == 1000 && st.st_gid == 1000,
	   "host home/user owned by 1000");
	ok(stat(path_in(&t, "usr"), &st) == 0 && S_ISDIR(st.st_mode), "host usr mount point");
	ok(access("/etc/ld.so.cache", F_OK) < 0 || lstat(path_in(&t, "etc/ld.so.cache"), &st) == 0,
	   "host ld.so.cache copied");
	ok(access("/etc/alternatives/cc", F_OK) < 0 ||
		   (lstat(path_in(&t, "etc/alternatives/cc"), &st) == 0 && S_ISLNK(st.st_mode)),
	   "host alternatives copied as symlinks");
	ok(json_is_string(json_object_get(t.env, "PATH")), "host env has PATH");
	template_info_fini(&t);
}

/* Runs a command chrooted into the host template with its binds, as a tier would. */
static void check_host_runs(void)
{
	struct template_info t = {0};
	struct isola_err *e = NULL;
	int status;
	pid_t pid;

	if (images_get("host", &t, &e) < 0)
		return diag_err(e);
	pid = fork();
	if (pid == 0) {
		char dst[PATH_MAX * 2];

		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(77);
		for (unsigned i = 0; i < t.n_binds; i++) {
			snprintf(dst, sizeof(dst), "%s%s", t.rootfs, t.binds[i].dst);
			if (mount(t.binds[i].src, dst, NULL, MS_BIND | MS_REC, NULL) < 0 ||
			    mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
				_exit(78);
		}
		if (chroot(t.rootfs) < 0 || chdir("/") < 0)
			_exit(79);
		if (access("/usr/bin/python3", X_OK) < 0)
			_exit(77);
		/* No /dev here: nothing may redirect to /dev/null, or it lands in the rootfs. */
		execl("/usr/bin/python3", "python3", "-c",
		      "import ssl, json, subprocess; subprocess.run(['/bin/true'], check=True)",
		      (char *)NULL);
		_exit(80);
	}
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		printf("ok %d - host template runs python3 # SKIP no mount namespace or no "
		       "python3\n",
		       ++n_test);
	else
		ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "host template runs python3 (status %d)", status);
	template_info_fini(&t);
}

static char last_phase[32];
static unsigned n_progress;

static void on_progress(void *ud, const char *phase, uint64_t done, uint64_t total)
{
	(void)ud;
	(void)done;
	(void)total;
	snprintf(last_phase, sizeof(last_phase), "%s", phase);
	if (!strncmp(phase, "layer ", 6))
		n_progress++;
}

/* Checks the tree of the good image (both formats). */
static void check_good(const char *what, const struct template_info *t)
{
	struct stat a, b;
	char target[PATH_MAX];
	ssize_t n;

	ok(file_is(path_in(t, "etc/hello"), "v2\n"), "%s: later layer overrides a file", what);
	ok(missing(path_in(t, "etc/gone")) && missing(path_in(t, "etc/.wh.gone")),
	   "%s: whiteout deletes and leaves no marker", what);
	ok(missing(path_in(t, "opq/old1")) && missing(path_in(t, "opq/sub")) &&
		   file_is(path_in(t, "opq/new"), "n") && missing(path_in(t, "opq/.wh..wh..opq")),
	   "%s: opaque dir hides lower entries, keeps its own", what);
	n = readlink(path_in(t, "link"), target, sizeof(target) - 1);
	ok(n == 9 && !memcmp(target, "etc/hello", 9), "%s: relative symlink kept", what);
	n = readlink(path_in(t, "abs"), target, sizeof(target) - 1);
	ok(n == 10 && !memcmp(target, "/etc/hello", 10), "%s: absolute symlink kept verbatim",
	   what);
	ok(stat(path_in(t, "data/a"), &a) == 0 && stat(path_in(t, "data/b"), &b) == 0 &&
		   a.st_ino == b.st_ino && a.st_nlink == 2,
	   "%s: hard link shares the inode", what);
	ok(stat(path_in(t, "usr/bin/tool"), &a) == 0 && (a.st_mode & 07777) == 04755 &&
		   a.st_uid == 0,
	   "%s: setuid mode kept", what);
	ok(stat(path_in(t, "home/user/f"), &a) == 0 && a.st_uid == 1000 &&
		   (a.st_mode & 0777) == 0600 && stat(path_in(t, "home/user"), &b) == 0 &&
		   (b.st_mode & 0777) == 0700,
	   "%s: owner and modes kept", what);
	ok(file_is(path_in(t, "usr/bin/x"), "dot"), "%s: ./ and // in names normalised", what);
	ok(stat(path_in(t, "etc/hello"), &a) == 0 && a.st_mtime == 1700000000, "%s: mtime kept",
	   what);
	ok(stat(t->rootfs, &a) == 0 && (a.st_mode & 07777) == 0755, "%s: rootfs 0755", what);
}

static void check_imports(void)
{
	struct template_info t = {0};
	struct isola_err *e = NULL;
	const char *tar;
	int r;

	tar = mkimage("oci-good");
	r = tar ? images_import("py", tar, on_progress, NULL, &t, &e) : -1;
	if (!ok(r == 0, "import OCI layout"))
		diag_err(e);
	isola_err_free(e);
	e = NULL;
	if (r == 0) {
		check_good("oci", &t);
		ok(!strcmp(t.source, "oci") && t.layers == 3 && strlen(t.id) == 64 &&
			   !strcmp(t.workdir, "/srv") && !strcmp(t.default_user, "1000:1000") &&
			   t.size_bytes > 0,
		   "oci: template fields");
		ok(!strcmp(json_string_value(json_object_get(t.env, "FOO")) ?: "", "bar=baz") &&
			   !strcmp(json_string_value(json_object_get(t.env, "PATH")) ?: "",
				   "/usr/bin:/bin"),
		   "oci: Env parsed");
		ok(n_progress >= 6 && !strcmp(last_phase, "commit"), "oci: progress reported");
		template_info_fini(&t);
	}
	r = tar ? images_import("py", tar, NULL, NULL, NULL, &e) : -1;
	ok(r == -EEXIST && e && !strcmp(e->code, "conflict") && strstr(e->message, "`py`"),
	   "import under an existing name: conflict");
	isola_err_free(e);
	e = NULL;
	r = tar ? images_import("../x", tar, NULL, NULL, NULL, &e) : -1;
	ok(r == -EINVAL && e && !strcmp(e->code, "invalid"), "import under a bad name: invalid");
	isola_err_free(e);
	e = NULL;

	tar = mkimage("docker-good");
	r = tar ? images_import("dk", tar, NULL, NULL, &t, &e) : -1;
	if (!ok(r == 0, "import docker-archive"))
		diag_err(e);
	isola_err_free(e);
	e = NULL;
	if (r == 0) {
		check_good("docker", &t);
		ok(!strcmp(t.source, "docker-archive") && t.layers == 3 && !strcmp(t.workdir, "") &&
			   !strcmp(t.default_user, "root"),
		   "docker: template fields and defaults");
		template_info_fini(&t);
	}
}

/* A hostile import: must fail with a message containing want (or succeed if want is NULL),
 * leave templates/ as it was, and leave the host dir alone. */
static void hostile(const char *kase, const char *want, const char *label)
{
	char before[8192], after[8192], tdir[PATH_MAX + 16];
	struct isola_err *e = NULL;
	struct template_info t = {0};
	const char *tar = mkimage(kase);
	int r;

	snprintf(tdir, sizeof(tdir), "%s/templates", state);
	listing(tdir, before, sizeof(before));
	r = tar ? images_import("hostile", tar, NULL, NULL, &t, &e) : 0;
	listing(tdir, after, sizeof(after));
	if (want) {
		ok(r < 0 && e && strstr(e->message, want) && strstr(e->message, "`hostile`") &&
			   !strcmp(before, after) && host_untouched(),
		   "%s: %s refused, nothing left behind", kase, label);
	} else {
		ok(r == 0 && host_untouched(), "%s: %s neutralised", kase, label);
		if (r == 0) {
			if (!strcmp(kase, "device"))
				ok(t.skipped_entries == 1 && missing(path_in(&t, "dev/evil")) &&
					   file_is(path_in(&t, "ok"), "ok"),
				   "device: node skipped and counted, rest imported");
			if (!strcmp(kase, "inroot"))
				ok(file_is(path_in(&t, "usr/lib/libx.so"), "x"),
				   "inroot: in-root symlinked parent followed inside the rootfs");
			template_info_fini(&t);
			images_remove("hostile", NULL);
		}
	}
	diag_err(e);
	isola_err_free(e);
}

static void check_hostile(const char *mode)
{
	printf("# hostile layers, %s resolution\n", mode);
	hostile("dotdot", "path escapes the rootfs", "../ traversal");
	hostile("abs", "path escapes the rootfs", "absolute path");
	hostile("symfile", "parent directory", "file through a symlink to the host");
	hostile("whsym", NULL, "whiteout under a symlink to the host");
	hostile("hardsym", "hard link target not in the rootfs", "hard link through a symlink");
	hostile("harddotdot", "hard link target escapes", "hard link with ../");
	hostile("digest", "digest mismatch", "corrupted layer blob");
	hostile("truncated", "tarball", "truncated tarball");
	hostile("badgz", "layer sha256:", "truncated gzip layer");
	hostile("device", NULL, "device node");
	images_set_limits(1 << 20, 0);
	hostile("big", "size cap", "layer past the size cap");
	images_set_limits(64ull << 30, 0);
}

static void check_store(void)
{
	struct template_info t = {0};
	struct isola_err *e = NULL;
	char dir[PATH_MAX + 80], id[65];
	json_t *list = NULL, *it;
	size_t i;
	bool host = false, py = false;
	int r;

	r = images_list(&list, &e);
	json_array_foreach(list, i, it)
	{
		host |= !strcmp(json_string_value(json_object_get(it, "name")), "host");
		py |= !strcmp(json_string_value(json_object_get(it, "name")), "py") &&
		      json_integer_value(json_object_get(it, "layers")) == 3;
	}
	ok(r == 0 && host && py && json_array_size(list) == 3, "list shows host, py and dk");
	json_decref(list);

	r = images_get("nope", &t, &e);
	ok(r == -ENOENT && e && !strcmp(e->code, "not_found") &&
		   strstr(e->message, "template `nope` not found"),
	   "get of a missing template: not_found naming it");
	isola_err_free(e);
	e = NULL;
	r = images_remove("host", &e);
	ok(r == -EPERM && e && !strcmp(e->code, "forbidden"), "host cannot be removed");
	isola_err_free(e);
	e = NULL;

	if (images_get("py", &t, &e) < 0)
		return diag_err(e);
	snprintf(id, sizeof(id), "%s", t.id);
	template_info_fini(&t);
	ok(images_get(id, &t, NULL) == 0 && !strcmp(t.name, "py"), "get by id");
	template_info_fini(&t);
	ok(images_remove(id, NULL) == 0, "remove by id");
	snprintf(dir, sizeof(dir), "%s/templates/%s", state, id);
	ok(missing(dir) && images_get("py", &t, NULL) == -ENOENT, "removed template is gone");
}

static void check_reinit(void)
{
	char junk[PATH_MAX + 100], host_rootfs[PATH_MAX + 32];
	struct isola_err *e = NULL;
	struct template_info t = {0};
	struct stat before, after;
	int r;

	snprintf(host_rootfs, sizeof(host_rootfs), "%s/templates/host/rootfs", state);
	stat(host_rootfs, &before);
	images_shutdown();
	/* What a crash mid-import or mid-remove leaves. */
	snprintf(junk, sizeof(junk), "%s/templates/.tmp-crashed/rootfs/etc", state);
	util_mkdir_p(junk, 0755);
	snprintf(junk, sizeof(junk), "%s/templates/%064x/rootfs", state, 7);
	util_mkdir_p(junk, 0755);
	snprintf(junk, sizeof(junk), "%s/templates/.rm-old", state);
	util_mkdir_p(junk, 0755);
	r = images_init(state, &e);
	if (!ok(r == 0, "re-init"))
		diag_err(e);
	snprintf(host_rootfs, sizeof(host_rootfs), "%s/templates/host/rootfs", state);
	stat(host_rootfs, &after);
	ok(before.st_ino == after.st_ino, "re-init keeps an unchanged host template");
	snprintf(junk, sizeof(junk), "%s/templates/%064x", state, 7);
	ok(missing(junk), "re-init removes a template dir without manifest");
	snprintf(junk, sizeof(junk), "%s/templates/.tmp-crashed", state);
	ok(missing(junk), "re-init removes .tmp-* leftovers");
	snprintf(junk, sizeof(junk), "%s/templates/.rm-old", state);
	ok(missing(junk), "re-init removes .rm-* leftovers");
	r = images_get("dk", &t, NULL);
	ok(r == 0 && !strcmp(t.source, "docker-archive") && t.layers == 3 &&
		   json_object_size(t.env) == 1,
	   "re-init reloads imported templates from manifests");
	template_info_fini(&t);
	ok(images_init(state, NULL) == -EALREADY, "double init refused");
}

int main(void)
{
	struct isola_err *e = NULL;
	char victim[PATH_MAX + 16];
	int fd;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (ownership of image files)\n");
		return 0;
	}
	snprintf(state, sizeof(state), "/tmp/isola-images-XXXXXX");
	snprintf(hostdir, sizeof(hostdir), "/tmp/isola-victim-XXXXXX");
	snprintf(work, sizeof(work), "/tmp/isola-work-XXXXXX");
	if (!mkdtemp(state) || !mkdtemp(hostdir) || !mkdtemp(work)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	snprintf(victim, sizeof(victim), "%s/victim", hostdir);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0 || write(fd, "host data\n", 10) != 10) {
		printf("Bail out! victim\n");
		return 1;
	}
	close(fd);

	if (!ok(images_init(state, &e) == 0, "init")) {
		diag_err(e);
		printf("Bail out! init failed\n");
		return 1;
	}
	check_host();
	check_host_runs();
	check_imports();
	check_hostile("openat2");
	hostile("inroot", NULL, "symlinked parent inside the rootfs");
	extract_test_force_fallback(true);
	check_hostile("O_NOFOLLOW fallback");
	hostile("inroot", "parent directory", "symlinked parent (fallback refuses)");
	extract_test_force_fallback(false);
	check_store();
	check_reinit();
	images_shutdown();

	util_rm_rf(state);
	util_rm_rf(hostdir);
	util_rm_rf(work);
	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
