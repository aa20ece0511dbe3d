/* SPDX-License-Identifier: Apache-2.0 */
/* test_keystore: round trip, tamper/truncation/foreign-key detection, crypto-shredding. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "isolad/keystore/keystore.h"
#include "common/util.h"

static char dir[64];

static int mkfile(const char *name, const void *data, size_t n, char *path)
{
	int fd;

	snprintf(path, 256, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (n)
		util_write_all(fd, data, n);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* Encrypts data under id into "enc", returns its fd positioned at 0. */
static int encrypt(struct keystore *ks, const char *id, const void *data, size_t n, int *rc)
{
	char p1[256], p2[256];
	int in = mkfile("plain", data, n, p1), out = mkfile("enc", NULL, 0, p2);

	*rc = keystore_encrypt_fd(ks, id, in, out, NULL);
	close(in);
	lseek(out, 0, SEEK_SET);
	return out;
}

/* Decrypts fd into "dec"; returns rc, *got the bytes. */
static int decrypt(struct keystore *ks, const char *id, int fd, char **got, size_t *glen)
{
	char p[256];
	int out = mkfile("dec", NULL, 0, p), rc;

	lseek(fd, 0, SEEK_SET);
	rc = keystore_decrypt_fd(ks, id, fd, out, NULL);
	close(out);
	*got = NULL;
	util_read_file(p, 64 << 20, got, glen);
	return rc;
}

int main(void)
{
	struct keystore *ks = NULL;
	size_t big_n = 3 * 65536 + 123, glen = 0;
	unsigned char *big = malloc(big_n);
	char *got = NULL, path[256];
	struct stat st;
	int fd, rc;

	snprintf(dir, sizeof(dir), "/tmp/isola-ks-XXXXXX");
	if (!mkdtemp(dir) || !big)
		return 1;
	for (size_t i = 0; i < big_n; i++)
		big[i] = (unsigned char)(i * 7 + 3);
	ok(keystore_open(dir, &ks, NULL) == 0, "open");
	ok(!keystore_valid_id("../x") && !keystore_valid_id(".hidden") && !keystore_valid_id(""),
	   "ids with traversal, leading dot or empty are refused");
	ok(keystore_create(ks, "../escape", NULL) == -EINVAL, "create refuses a traversal id");
	ok(keystore_create(ks, "snap-1", NULL) == 0, "create a key");
	ok(keystore_create(ks, "snap-1", NULL) == -EEXIST,
	   "a second key for the same object fails");
	snprintf(path, sizeof(path), "%s/snap-1.key", dir);
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 32,
	   "key file is 32 bytes, mode 0600");

	fd = encrypt(ks, "snap-1", big, big_n, &rc);
	ok(rc == 0, "encrypt a multi-chunk file");
	ok(fstat(fd, &st) == 0 && (size_t)st.st_size > big_n,
	   "ciphertext is larger (header + tags)");
	{
		unsigned char head[256];

		ok(pread(fd, head, sizeof(head), 9 + 24) == sizeof(head) &&
			   memmem(head, sizeof(head), big, 16) == NULL,
		   "no plaintext at the start of the ciphertext");
	}
	ok(decrypt(ks, "snap-1", fd, &got, &glen) == 0 && glen == big_n &&
		   memcmp(got, big, big_n) == 0,
	   "round trip is exact");
	free(got);

	/* One flipped byte in the middle. */
	{
		unsigned char b;

		pread(fd, &b, 1, 70000);
		b ^= 0x40;
		pwrite(fd, &b, 1, 70000);
		ok(decrypt(ks, "snap-1", fd, &got, &glen) == -EBADMSG,
		   "a flipped byte is detected");
		free(got);
		b ^= 0x40;
		pwrite(fd, &b, 1, 70000);
		ok(decrypt(ks, "snap-1", fd, &got, &glen) == 0, "restored file decrypts again");
		free(got);
	}
	/* Truncated at a chunk boundary: the FINAL tag is missing. */
	fstat(fd, &st);
	{
		off_t full = st.st_size;

		ftruncate(fd, 9 + 24 + (65536 + 17) * 2);
		ok(decrypt(ks, "snap-1", fd, &got, &glen) == -EBADMSG,
		   "truncation at a chunk boundary is detected");
		free(got);
		(void)full;
	}
	close(fd);

	/* Empty input still gets a FINAL chunk. */
	fd = encrypt(ks, "snap-1", "", 0, &rc);
	ok(rc == 0 && decrypt(ks, "snap-1", fd, &got, &glen) == 0 && glen == 0,
	   "empty file round trip");
	free(got);

	/* Another object's key cannot read it. */
	ok(keystore_create(ks, "snap-2", NULL) == 0, "second object key");
	ok(decrypt(ks, "snap-2", fd, &got, &glen) == -EBADMSG,
	   "ciphertext under another object's key is refused");
	free(got);
	close(fd);

	/* Crypto-shredding. */
	fd = encrypt(ks, "snap-1", big, 1000, &rc);
	ok(keystore_has(ks, "snap-1"), "key present before destroy");
	ok(keystore_destroy(ks, "snap-1", NULL) == 0, "destroy the key");
	ok(!keystore_has(ks, "snap-1") && access(path, F_OK) < 0, "key file is gone");
	ok(decrypt(ks, "snap-1", fd, &got, &glen) == -ENOENT,
	   "ciphertext is unreadable once the key is destroyed");
	free(got);
	ok(keystore_destroy(ks, "snap-1", NULL) == -ENOENT, "destroying twice is not_found");
	ok(keystore_create(ks, "snap-1", NULL) == 0 &&
		   decrypt(ks, "snap-1", fd, &got, &glen) == -EBADMSG,
	   "a new key under the same id does not read the old ciphertext");
	free(got);
	close(fd);

	keystore_close(ks);
	free(big);
	util_rm_rf(dir);
	return tap_done();
}
