/* SPDX-License-Identifier: Apache-2.0 */
/* host: builds the `host` template, a minimal root that shows the host's /usr read-only. */
#include "images-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"

#define HOST_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char etc_passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
				 "user:x:1000:1000::/home/user:/bin/bash\n"
				 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\ntty:x:5:\nusers:x:100:user\nuser:x:1000:\n"
				"nogroup:x:65534:\n";
static const char etc_resolv[] = "nameserver 192.0.2.53\noptions timeout:2 attempts:2\n";
static const char etc_hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
static const char etc_nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
				   "networks: files\nprotocols: files\nservices: files\n";
static const char etc_profile[] = "# isola host template\n"
				  "export PATH=" HOST_PATH "\n"
				  "if [ \"$(id -u)\" -eq 0 ]; then PS1='# '; else PS1='$ '; fi\n";

/* Directories of the root: path, mode, owner. The tier mounts /dev, /proc, /sys, /run, /tmp. */
static const struct {
	const char *path;
	mode_t mode;
	uid_t uid;
} host_dirs[] = {
	{"usr", 0755, 0},
	{"etc", 0755, 0},
	{"etc/ssl", 0755, 0},
	{"etc/alternatives", 0755, 0},
	{"etc/ld.so.conf.d", 0755, 0},
	{"root", 0700, 0},
	{"home", 0755, 0},
	{"home/user", 0755, 1000},
	{"tmp", 01777, 0},
	{"dev", 0755, 0},
	{"proc", 0555, 0},
	{"sys", 0555, 0},
	{"run", 0755, 0},
	{"var", 0755, 0},
	{"var/tmp", 01777, 0},
	{"opt", 0755, 0},
	{"mnt", 0755, 0},
};

/* Host files copied (not bound) into the root when present: small, and a copy keeps the
 * rest of the host's /etc (shadow, ssh keys, ...) out of every sandbox. */
static const char *const host_copies[] = {
	"etc/os-release",
	"etc/ld.so.cache",
	"etc/ld.so.conf",
	"etc/ssl/openssl.cnf",
	"etc/services",
	"etc/protocols",
	"etc/shells",
	/* Debian's matplotlib reads its defaults here (python3-matplotlib: "Could not find
	 * matplotlibrc file" without it). */
	"etc/matplotlibrc",
};

static const char *const host_libdirs[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

static int mkd(int rfd, const char *path, mode_t mode, uid_t uid)
{
	if (mkdirat(rfd, path, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* Explicit chmod: mkdir's mode is filtered by the daemon's umask. */
	if (fchmodat(rfd, path, mode, 0) < 0 || fchownat(rfd, path, uid, uid, AT_SYMLINK_NOFOLLOW))
		return -errno;
	return 0;
}

static int put(int rfd, const char *path, const void *buf, size_t len)
{
	cleanup_fd int fd =
		openat(rfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0644) < 0)
		return -errno;
	return util_write_all(fd, buf, len);
}

static int copy_host(int rfd, const char *path)
{
	char src[PATH_MAX];
	cleanup_free char *buf = NULL;
	size_t len;
	int r;

	snprintf(src, sizeof(src), "/%s", path);
	r = util_read_file(src, 64u << 20, &buf, &len);
	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : put(rfd, path, buf, len);
}

/* Copies the regular files (ld.so.conf.d) or the symlinks (alternatives) of a host dir. */
static int copy_host_dir(int rfd, const char *path, bool links)
{
	char src[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	snprintf(src, sizeof(src), "/%s", path);
	d = opendir(src);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (r == 0 && (de = readdir(d))) {
		char dst[PATH_MAX], target[PATH_MAX];
		struct stat st;
		ssize_t n;

		if (de->d_name[0] == '.' ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		snprintf(dst, sizeof(dst), "%s/%s", path, de->d_name);
		if (links && S_ISLNK(st.st_mode)) {
			n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
			if (n < 0)
				continue;
			target[n] = '\0';
			if (symlinkat(target, rfd, dst) < 0)
				r = -errno;
		} else if (!links && S_ISREG(st.st_mode)) {
			r = copy_host(rfd, dst);
		}
	}
	closedir(d);
	return r;
}

static int add_bind(struct template_info *t, const char *path)
{
	if (t->n_binds >= TIER_MAX_BINDS)
		return -E2BIG;
	snprintf(t->binds[t->n_binds].src, sizeof(t->binds[0].src), "%s", path);
	snprintf(t->binds[t->n_binds].dst, sizeof(t->binds[0].dst), "%s", path);
	t->n_binds++;
	return 0;
}

static int populate(int rfd, struct template_info *t)
{
	struct stat st;
	int r = 0;

	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(host_dirs); i++)
		r = mkd(rfd, host_dirs[i].path, host_dirs[i].mode, host_dirs[i].uid);
	if (r == 0)
		r = add_bind(t, "/usr");
	/* Merged-/usr hosts have bin, lib... as symlinks into /usr: mirror them. A real
	 * directory is shown with a read-only bind instead. */
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(host_libdirs); i++) {
		const char *name = host_libdirs[i];
		char src[64], target[PATH_MAX];
		ssize_t n;

		snprintf(src, sizeof(src), "/%s", name);
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(src, target, sizeof(target) - 1);
			if (n < 0)
				return -errno;
			target[n] = '\0';
			if (symlinkat(target, rfd, name) < 0)
				r = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			r = mkd(rfd, name, 0755, 0);
			if (r == 0)
				r = add_bind(t, src);
		}
	}
	/* CA certificates only: /etc/ssl/private stays on the host. */
	if (r == 0 && stat("/etc/ssl/certs", &st) == 0 && S_ISDIR(st.st_mode)) {
		r = mkd(rfd, "etc/ssl/certs", 0755, 0);
		if (r == 0)
			r = add_bind(t, "/etc/ssl/certs");
	}
	if (r == 0)
		r = put(rfd, "etc/passwd", etc_passwd, sizeof(etc_passwd) - 1);
	if (r == 0)
		r = put(rfd, "etc/group", etc_group, sizeof(etc_group) - 1);
	if (r == 0)
		r = put(rfd, "etc/hosts", etc_hosts, sizeof(etc_hosts) - 1);
	if (r == 0)
		r = put(rfd, "etc/nsswitch.conf", etc_nsswitch, sizeof(etc_nsswitch) - 1);
	/* Any address will do: every DNS packet a sandbox sends is redirected to isola's resolver
	 * (docs/network.md). 192.0.2.53 (TEST-NET-1) routes through eth0, and never leaves the host. */
	if (r == 0)
		r = put(rfd, "etc/resolv.conf", etc_resolv, sizeof(etc_resolv) - 1);
	if (r == 0)
		r = put(rfd, "etc/hostname", "isola\n", 6);
	if (r == 0)
		r = put(rfd, "etc/profile", etc_profile, sizeof(etc_profile) - 1);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(host_copies); i++)
		r = copy_host(rfd, host_copies[i]);
	if (r == 0)
		r = copy_host_dir(rfd, "etc/ld.so.conf.d", false);
	/* Debian's python3, cc, editor... resolve through /etc/alternatives. */
	if (r == 0)
		r = copy_host_dir(rfd, "etc/alternatives", true);
	if (r == 0 && symlinkat("/usr/share/zoneinfo/Etc/UTC", rfd, "etc/localtime") < 0)
		r = -errno;
	if (r == 0 && (fchmodat(rfd, ".", 0755, 0) < 0 || fchownat(rfd, "", 0, 0, AT_EMPTY_PATH)))
		r = -errno;
	return r;
}

static int no_dots(const struct dirent *de)
{
	return strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
}

/* Hashes names, types, modes, owners, link targets and contents of a tree in a stable order. */
static int tree_hash(crypto_hash_sha256_state *h, int dfd)
{
	struct dirent **names = NULL;
	int n, r = 0;

	n = scandirat(dfd, ".", &names, no_dots, alphasort);
	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char buf[PATH_MAX];
		struct stat st;
		ssize_t len;

		if (r < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = r < 0 ? r : -errno;
			continue;
		}
		len = snprintf(buf, sizeof(buf), "%s\n%o %u %u %lld\n", name, (unsigned)st.st_mode,
			       (unsigned)st.st_uid, (unsigned)st.st_gid, (long long)st.st_size);
		crypto_hash_sha256_update(h, (const unsigned char *)buf, (size_t)len);
		if (S_ISLNK(st.st_mode)) {
			len = readlinkat(dfd, name, buf, sizeof(buf));
			if (len > 0)
				crypto_hash_sha256_update(h, (const unsigned char *)buf,
							  (size_t)len);
		} else if (S_ISREG(st.st_mode)) {
			cleanup_fd int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

			while (fd >= 0 && (len = read(fd, buf, sizeof(buf))) > 0)
				crypto_hash_sha256_update(h, (const unsigned char *)buf,
							  (size_t)len);
		} else if (S_ISDIR(st.st_mode)) {
			cleanup_fd int cfd =
				openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			r = cfd < 0 ? -errno : tree_hash(h, cfd);
			crypto_hash_sha256_update(h, (const unsigned char *)"..\n", 3);
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

static int tree_digest(const char *path, unsigned char out[crypto_hash_sha256_BYTES])
{
	cleanup_fd int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	crypto_hash_sha256_state h;
	int r;

	if (fd < 0)
		return -errno;
	crypto_hash_sha256_init(&h);
	r = tree_hash(&h, fd);
	crypto_hash_sha256_final(&h, out);
	return r;
}

/* Whether tdir/host holds exactly the tree just built in tmp, with a manifest. */
static bool host_is_unchanged(const char *tdir, const char *tmp)
{
	unsigned char a[crypto_hash_sha256_BYTES], b[crypto_hash_sha256_BYTES];
	char path[PATH_MAX];
	struct stat st;

	if (images_path(path, "%s/host/%s", tdir, IMAGES_MANIFEST) < 0 || stat(path, &st) < 0)
		return false;
	if (images_path(path, "%s/host/rootfs", tdir) < 0 || tree_digest(path, a) < 0)
		return false;
	if (images_path(path, "%s/rootfs", tmp) < 0 || tree_digest(path, b) < 0)
		return false;
	return !memcmp(a, b, sizeof(a));
}

int images_host_build(const char *tdir, struct isola_err **err)
{
	struct template_info t = {
		.id = "host",
		.name = "host",
		.source = "host",
		.default_user = "root",
		.workdir = "", /* each user starts in their home */
	};
	char tmp[PATH_MAX], path[PATH_MAX], final[PATH_MAX];
	cleanup_fd int rfd = -1;
	cleanup_fd int dfd = -1;
	int r;

	if (images_path(tmp, "%s/.tmp-host-XXXXXX", tdir) < 0 ||
	    images_path(final, "%s/host", tdir) < 0)
		return isola_err_set(err, ENAMETOOLONG, "invalid", "`%s`: path too long", tdir);
	if (!mkdtemp(tmp))
		return isola_err_sys(err, errno, NULL, "host template: mkdtemp in `%s`", tdir);
	if (images_path(path, "%s/rootfs", tmp) < 0 || mkdir(path, 0755) < 0 ||
	    (rfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = isola_err_sys(err, errno, NULL, "host template: create `%s`", path);
		goto fail;
	}
	r = populate(rfd, &t);
	if (r < 0) {
		r = isola_err_sys(err, -r, NULL, "host template: populate `%s`", path);
		goto fail;
	}
	if (host_is_unchanged(tdir, tmp)) {
		/* Same view as before: keep the old one, which sandboxes may still use. */
		util_rm_rf(tmp);
		return 0;
	}
	t.env = json_pack("{s:s,s:s}", "PATH", HOST_PATH, "LANG", "C.UTF-8");
	t.size_bytes = images_du(rfd);
	t.created_at = util_wall_time();
	r = t.env ? images_manifest_write(tmp, &t) : -ENOMEM;
	template_info_fini(&t);
	if (r == 0 && syncfs(rfd) < 0)
		r = -errno;
	if (r < 0) {
		r = isola_err_sys(err, -r, NULL, "host template: write `%s/%s`", tmp,
				  IMAGES_MANIFEST);
		goto fail;
	}
	/* Atomic swap: a reader sees the old view or the new, never a mix. */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) < 0) {
		if (errno != ENOENT || rename(tmp, final) < 0) {
			r = isola_err_sys(err, errno, NULL, "host template: rename to `%s`", final);
			goto fail;
		}
	}
	dfd = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		fsync(dfd);
	util_rm_rf(tmp); /* the old view, after an exchange */
	return 0;
fail:
	util_rm_rf(tmp);
	return r;
}
