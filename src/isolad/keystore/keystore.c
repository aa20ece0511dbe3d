/* SPDX-License-Identifier: Apache-2.0 */
/* keystore: per-object keys and encryption at rest (libsodium secretstream); delete = shred. */
#include "keystore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"

#define KS_MAGIC   "ISOLAENC"
#define KS_VERSION 1
#define KS_CHUNK   65536
#define KS_ABYTES  crypto_secretstream_xchacha20poly1305_ABYTES

struct keystore {
	char dir[PATH_MAX - 80]; /* key directory */
};

bool keystore_valid_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > 64 || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		      (id[i] >= '0' && id[i] <= '9') || id[i] == '.' || id[i] == '_' ||
		      id[i] == '-'))
			return false;
	return true;
}

int keystore_open(const char *dir, struct keystore **out, struct isola_err **err)
{
	struct keystore *ks;
	int r;

	if (sodium_init() < 0)
		return isola_err_set(err, EIO, "internal", "libsodium failed to initialise");
	ks = calloc(1, sizeof(*ks));
	if (!ks)
		return isola_err_set(err, ENOMEM, "internal", "keystore: out of memory");
	if (strlen(dir) >= sizeof(ks->dir)) {
		free(ks);
		return isola_err_set(err, ENAMETOOLONG, "invalid", "keystore dir `%s` is too long",
				     dir);
	}
	snprintf(ks->dir, sizeof(ks->dir), "%s", dir);
	r = util_mkdir_p(dir, 0700);
	if (r < 0) {
		free(ks);
		return isola_err_sys(err, -r, NULL, "create keystore dir `%s`", dir);
	}
	chmod(dir, 0700);
	*out = ks;
	return 0;
}

void keystore_close(struct keystore *ks)
{
	free(ks);
}

static int key_path(struct keystore *ks, const char *id, char *out, size_t n,
		    struct isola_err **err)
{
	if (!keystore_valid_id(id))
		return isola_err_set(err, EINVAL, "invalid", "invalid keystore object id `%.64s`",
				     id ? id : "");
	snprintf(out, n, "%s/%s.key", ks->dir, id);
	return 0;
}

int keystore_create(struct keystore *ks, const char *id, struct isola_err **err)
{
	unsigned char key[crypto_secretstream_xchacha20poly1305_KEYBYTES];
	char path[PATH_MAX];
	cleanup_fd int fd = -1;
	int r;

	r = key_path(ks, id, path, sizeof(path), err);
	if (r < 0)
		return r;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errno == EEXIST ? isola_err_set(err, EEXIST, "exists",
						       "object `%s` already has a key", id)
				       : isola_err_sys(err, errno, NULL, "create key `%s`", path);
	crypto_secretstream_xchacha20poly1305_keygen(key);
	r = util_write_all(fd, key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	if (r < 0 || fsync(fd) < 0) {
		r = r < 0 ? -r : errno;
		unlink(path);
		return isola_err_sys(err, r, NULL, "write key `%s`", path);
	}
	return 0;
}

bool keystore_has(struct keystore *ks, const char *id)
{
	char path[PATH_MAX];

	return key_path(ks, id, path, sizeof(path), NULL) == 0 && access(path, F_OK) == 0;
}

static int key_load(struct keystore *ks, const char *id, unsigned char *key, struct isola_err **err)
{
	char path[PATH_MAX];
	cleanup_fd int fd = -1;
	struct stat st;
	int r = key_path(ks, id, path, sizeof(path), err);

	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? isola_err_set(err, ENOENT, "not_found",
						       "object `%s` has no key (destroyed?)", id)
				       : isola_err_sys(err, errno, NULL, "open key `%s`", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size != crypto_secretstream_xchacha20poly1305_KEYBYTES ||
	    util_read_exact(fd, key, crypto_secretstream_xchacha20poly1305_KEYBYTES) < 0)
		return isola_err_set(err, EINVAL, "internal", "key `%s` is damaged", path);
	return 0;
}

int keystore_destroy(struct keystore *ks, const char *id, struct isola_err **err)
{
	unsigned char zero[crypto_secretstream_xchacha20poly1305_KEYBYTES] = {0};
	char path[PATH_MAX];
	cleanup_fd int fd = -1;
	int r = key_path(ks, id, path, sizeof(path), err);

	if (r < 0)
		return r;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? isola_err_set(err, ENOENT, "not_found",
						       "object `%s` has no key", id)
				       : isola_err_sys(err, errno, NULL, "open key `%s`", path);
	/* Overwrite in place before unlinking: best effort against the old blocks lingering
	 * (copy-on-write filesystems and SSDs may still keep them; docs/compliance.md). */
	if (util_write_all(fd, zero, sizeof(zero)) < 0 || fsync(fd) < 0)
		return isola_err_sys(err, errno, NULL, "overwrite key `%s`", path);
	if (unlink(path) < 0)
		return isola_err_sys(err, errno, NULL, "remove key `%s`", path);
	return 0;
}

/* Reads up to n bytes (short only at EOF). */
static ssize_t read_full(int fd, unsigned char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int keystore_encrypt_fd(struct keystore *ks, const char *id, int in_fd, int out_fd,
			struct isola_err **err)
{
	unsigned char key[crypto_secretstream_xchacha20poly1305_KEYBYTES];
	unsigned char hdr[8 + 1 + crypto_secretstream_xchacha20poly1305_HEADERBYTES];
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char *in = NULL, *out = NULL;
	ssize_t n;
	int r = key_load(ks, id, key, err);

	if (r < 0)
		return r;
	in = malloc(KS_CHUNK);
	out = malloc(KS_CHUNK + KS_ABYTES);
	if (!in || !out) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	memcpy(hdr, KS_MAGIC, 8);
	hdr[8] = KS_VERSION;
	crypto_secretstream_xchacha20poly1305_init_push(&st, hdr + 9, key);
	if ((r = util_write_all(out_fd, hdr, sizeof(hdr))) < 0) {
		r = isola_err_sys(err, -r, NULL, "encrypt `%s`: write", id);
		goto out;
	}
	/* Read one chunk ahead so the last one is known and carries TAG_FINAL. */
	n = read_full(in_fd, in, KS_CHUNK);
	for (;;) {
		unsigned char *next = NULL;
		ssize_t nn = 0;
		unsigned char tag;
		unsigned long long clen;

		if (n < 0) {
			r = isola_err_sys(err, (int)-n, NULL, "encrypt `%s`: read", id);
			goto out;
		}
		if (n == KS_CHUNK) {
			next = malloc(KS_CHUNK);
			if (!next) {
				r = isola_err_set(err, ENOMEM, "internal", "out of memory");
				goto out;
			}
			nn = read_full(in_fd, next, KS_CHUNK);
		}
		tag = (next && nn > 0) ? 0 : crypto_secretstream_xchacha20poly1305_TAG_FINAL;
		crypto_secretstream_xchacha20poly1305_push(&st, out, &clen, in, (size_t)n, NULL, 0,
							   tag);
		r = util_write_all(out_fd, out, (size_t)clen);
		if (r < 0) {
			free(next);
			r = isola_err_sys(err, -r, NULL, "encrypt `%s`: write", id);
			goto out;
		}
		if (tag == crypto_secretstream_xchacha20poly1305_TAG_FINAL) {
			free(next);
			break;
		}
		free(in);
		in = next;
		n = nn;
	}
	r = 0;
out:
	sodium_memzero(key, sizeof(key));
	sodium_memzero(&st, sizeof(st));
	free(in);
	free(out);
	return r;
}

int keystore_decrypt_fd(struct keystore *ks, const char *id, int in_fd, int out_fd,
			struct isola_err **err)
{
	unsigned char key[crypto_secretstream_xchacha20poly1305_KEYBYTES];
	unsigned char hdr[8 + 1 + crypto_secretstream_xchacha20poly1305_HEADERBYTES];
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char *in = NULL, *out = NULL;
	bool final = false;
	int r = key_load(ks, id, key, err);

	if (r < 0)
		return r;
	in = malloc(KS_CHUNK + KS_ABYTES);
	out = malloc(KS_CHUNK);
	if (!in || !out) {
		r = isola_err_set(err, ENOMEM, "internal", "out of memory");
		goto out;
	}
	/* UNTRUSTED: a file on disk; every chunk is authenticated before it is written. */
	if (read_full(in_fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr) ||
	    memcmp(hdr, KS_MAGIC, 8) || hdr[8] != KS_VERSION ||
	    crypto_secretstream_xchacha20poly1305_init_pull(&st, hdr + 9, key) != 0) {
		r = isola_err_set(err, EBADMSG, "invalid", "`%s`: not an isola encrypted file", id);
		goto out;
	}
	while (!final) {
		ssize_t n = read_full(in_fd, in, KS_CHUNK + KS_ABYTES);
		unsigned long long mlen;
		unsigned char tag;

		if (n < 0) {
			r = isola_err_sys(err, (int)-n, NULL, "decrypt `%s`: read", id);
			goto out;
		}
		if (n < (ssize_t)KS_ABYTES ||
		    crypto_secretstream_xchacha20poly1305_pull(&st, out, &mlen, &tag, in, (size_t)n,
							       NULL, 0) != 0) {
			r = isola_err_set(err, EBADMSG, "invalid",
					  "`%s`: damaged, truncated or encrypted under another key",
					  id);
			goto out;
		}
		final = tag == crypto_secretstream_xchacha20poly1305_TAG_FINAL;
		if (!final && n < (ssize_t)(KS_CHUNK + KS_ABYTES)) {
			r = isola_err_set(err, EBADMSG, "invalid", "`%s`: truncated", id);
			goto out;
		}
		r = util_write_all(out_fd, out, (size_t)mlen);
		if (r < 0) {
			r = isola_err_sys(err, -r, NULL, "decrypt `%s`: write", id);
			goto out;
		}
	}
	{
		unsigned char extra;

		if (read_full(in_fd, &extra, 1) != 0) {
			r = isola_err_set(err, EBADMSG, "invalid",
					  "`%s`: data after the final chunk", id);
			goto out;
		}
	}
	r = 0;
out:
	sodium_memzero(key, sizeof(key));
	sodium_memzero(&st, sizeof(st));
	free(in);
	free(out);
	return r;
}
