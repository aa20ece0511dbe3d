/* SPDX-License-Identifier: Apache-2.0 */
/* boot: the guest kernel, the initramfs with the agent as /init, the disk overlay, the sync. */
#include "boot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../common/log.h"
#include "../../../common/util.h"

extern char **environ;

static pthread_mutex_t boot_lock = PTHREAD_MUTEX_INITIALIZER;
static char agent_path[PATH_MAX];
static char initrd_done[PATH_MAX]; /* initramfs written by this process, or "" */

void tier_microvm_set_agent_path(const char *path)
{
	pthread_mutex_lock(&boot_lock);
	snprintf(agent_path, sizeof(agent_path), "%s", path);
	pthread_mutex_unlock(&boot_lock);
}

/* Newest <root>/<version>/ holding vmlinuz and modules.cpio. */
static bool newest_kernel(const char *root, char *out, size_t len)
{
	DIR *d = opendir(root);
	struct dirent *de;
	char best[256] = "";

	if (!d)
		return false;
	while ((de = readdir(d))) {
		char p[PATH_MAX];

		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(best))
			continue;
		snprintf(p, sizeof(p), "%s/%s/vmlinuz", root, de->d_name);
		if (access(p, R_OK) < 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s/modules.cpio", root, de->d_name);
		if (access(p, R_OK) < 0)
			continue;
		if (!best[0] || strverscmp(de->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", de->d_name);
	}
	closedir(d);
	if (!best[0])
		return false;
	return snprintf(out, len, "%s/%s", root, best) < (int)len;
}

int mvm_kernel_find(const char *state_dir, char *out, size_t len, struct isola_err **err)
{
	const char *env = getenv("ISOLA_KERNEL_DIR");
	char p[PATH_MAX];

	if (env && *env && newest_kernel(env, out, len))
		return 0;
	snprintf(p, sizeof(p), "%s/kernels", state_dir);
	if (newest_kernel(p, out, len))
		return 0;
	if (newest_kernel("/var/lib/isola/kernels", out, len))
		return 0;
	return isola_err_set(err, ENOENT, "unavailable",
			     "no guest kernel: run scripts/kernel.sh (looked in $ISOLA_KERNEL_DIR, "
			     "%s/kernels and /var/lib/isola/kernels)",
			     state_dir);
}

/* One newc record. */
static int cpio_entry(int fd, const char *name, mode_t mode, const void *data, size_t len,
		      unsigned ino)
{
	char hdr[160];
	static const char zero[4] = {0};
	size_t nl = strlen(name) + 1;
	int r;

	snprintf(hdr, sizeof(hdr), "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X",
		 ino, (unsigned)mode, 0u, 0u, 1u, 0u, len, 0u, 0u, 0u, 0u, nl, 0u);
	r = util_write_all(fd, hdr, 110);
	if (!r)
		r = util_write_all(fd, name, nl);
	if (!r)
		r = util_write_all(fd, zero, (4 - (110 + nl) % 4) % 4);
	if (!r && len)
		r = util_write_all(fd, data, len);
	if (!r)
		r = util_write_all(fd, zero, (4 - len % 4) % 4);
	return r;
}

int mvm_initramfs(const char *kernel_dir, const char *state_dir, char *out, size_t len,
		  struct isola_err **err)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 8], mods[PATH_MAX + 16], agent[PATH_MAX];
	cleanup_free char *mbuf = NULL;
	cleanup_free char *abuf = NULL;
	size_t mlen = 0, alen = 0;
	cleanup_fd int fd = -1;
	int r;

	pthread_mutex_lock(&boot_lock);
	snprintf(agent, sizeof(agent), "%s", agent_path[0] ? agent_path : "");
	if (!agent[0] && getenv("ISOLA_AGENT"))
		snprintf(agent, sizeof(agent), "%s", getenv("ISOLA_AGENT"));
	snprintf(dir, sizeof(dir), "%s/microvm", state_dir);
	if (snprintf(out, len, "%s/initramfs-%s.cpio", dir, strrchr(kernel_dir, '/') + 1) >=
	    (int)len) {
		r = isola_err_set(err, ENAMETOOLONG, "internal", "initramfs path too long");
		goto out;
	}
	/* Once per isolad process: the guest always runs the agent isolad was started with. */
	if (!strcmp(initrd_done, out)) {
		r = 0;
		goto out;
	}
	r = util_mkdir_p(dir, 0755);
	snprintf(mods, sizeof(mods), "%s/modules.cpio", kernel_dir);
	if (r == 0)
		r = util_read_file(mods, 256u << 20, &mbuf, &mlen);
	if (r < 0) {
		r = isola_err_sys(err, -r, "unavailable", "read `%s`", mods);
		goto out;
	}
	r = agent[0] ? util_read_file(agent, 64u << 20, &abuf, &alen) : -ENOENT;
	if (r < 0) {
		r = isola_err_sys(err, -r, "unavailable", "read the agent `%s`",
				  agent[0] ? agent : "(unset: --agent or ISOLA_AGENT)");
		goto out;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0) {
		r = isola_err_sys(err, errno, "internal", "create `%s`", tmp);
		goto out;
	}
	r = util_write_all(fd, mbuf, mlen);
	if (!r)
		r = cpio_entry(fd, "init", S_IFREG | 0755, abuf, alen, 900001);
	if (!r)
		r = cpio_entry(fd, "TRAILER!!!", 0, NULL, 0, 0);
	if (!r && fsync(fd) < 0)
		r = -errno;
	if (!r && rename(tmp, out) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		r = isola_err_sys(err, -r, "internal", "write `%s`", out);
		goto out;
	}
	snprintf(initrd_done, sizeof(initrd_done), "%s", out);
out:
	pthread_mutex_unlock(&boot_lock);
	return r;
}

int mvm_run(char *const argv[], char *errbuf, size_t errlen)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2], status, r;
	pid_t pid;
	ssize_t n;

	errbuf[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r) {
		close(pipefd[0]);
		return -r;
	}
	n = read(pipefd[0], errbuf, errlen - 1);
	errbuf[n > 0 ? n : 0] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* ---- the disk overlay: a qcow2 v3 file written directly ---- */

#define QCOW2_CLUSTER_BITS 16
#define QCOW2_CLUSTER	   (1u << QCOW2_CLUSTER_BITS)
#define QCOW2_L2_ENTRIES   (QCOW2_CLUSTER / 8) /* 8-byte entries per L2 table */
#define QCOW2_HEADER_LEN   112		       /* v3 header up to compression_type + padding */
#define QCOW2_EXT_BACKFMT  0xE2792ACAu	       /* header extension: backing file format */

static void be32(unsigned char *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static void be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n = pwrite(fd, buf, len, off);

	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int mvm_qcow2_overlay(const char *path, const char *backing, uint64_t size, uid_t uid,
		      struct isola_err **err)
{
	/* Clusters: 0 header, 1 refcount table, 2 refcount block, 3 L1 table (one cluster
	 * holds 8192 L1 entries, i.e. 4 TiB of virtual size). The same layout as `qemu-img
	 * create -f qcow2 -u -F raw -b <backing>` for an empty image, without spawning it. */
	const uint64_t per_l1 = (uint64_t)QCOW2_CLUSTER * QCOW2_L2_ENTRIES;
	uint64_t l1_entries = (size + per_l1 - 1) / per_l1;
	size_t blen = strlen(backing), off;
	unsigned char hdr[512] = {0}, rt[8], rb[8];
	cleanup_fd int fd = -1;
	int r;

	if (size == 0 || size % 512 || l1_entries > QCOW2_L2_ENTRIES)
		return isola_err_set(err, EINVAL, "invalid", "disk overlay `%s`: bad size %llu",
				     path, (unsigned long long)size);
	if (blen == 0 || QCOW2_HEADER_LEN + 16 + 8 + blen > sizeof(hdr))
		return isola_err_set(err, ENAMETOOLONG, "internal",
				     "disk overlay `%s`: backing path too long", path);
	be32(hdr + 0, 0x514649fbu); /* "QFI\xfb" */
	be32(hdr + 4, 3);	    /* version */
	be32(hdr + 20, QCOW2_CLUSTER_BITS);
	be64(hdr + 24, size);
	be32(hdr + 36, (uint32_t)l1_entries);
	be64(hdr + 40, 3ull * QCOW2_CLUSTER); /* l1_table_offset */
	be64(hdr + 48, 1ull * QCOW2_CLUSTER); /* refcount_table_offset */
	be32(hdr + 56, 1);		      /* refcount_table_clusters */
	be32(hdr + 96, 4);		      /* refcount_order: 16-bit refcounts */
	be32(hdr + 100, QCOW2_HEADER_LEN);
	off = QCOW2_HEADER_LEN;
	be32(hdr + off, QCOW2_EXT_BACKFMT);
	be32(hdr + off + 4, 3);
	memcpy(hdr + off + 8, "raw", 3);
	off += 16; /* data padded to 8 bytes; then the end-of-extensions entry (zeros) */
	off += 8;
	be64(hdr + 8, off); /* backing_file_offset */
	be32(hdr + 16, (uint32_t)blen);
	memcpy(hdr + off, backing, blen);
	be64(rt, 2ull * QCOW2_CLUSTER); /* refcount table[0] → the refcount block */
	memset(rb, 0, sizeof(rb));
	for (int i = 0; i < 4; i++) /* clusters 0-3 are in use once */
		rb[2 * i + 1] = 1;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "create `%s`", path);
	r = pwrite_all(fd, hdr, off + blen, 0);
	if (!r)
		r = pwrite_all(fd, rt, sizeof(rt), QCOW2_CLUSTER);
	if (!r)
		r = pwrite_all(fd, rb, sizeof(rb), 2 * QCOW2_CLUSTER);
	/* The L1 table is all zeros (nothing allocated: every read goes to the backing file). */
	if (!r && ftruncate(fd, 3 * QCOW2_CLUSTER + (off_t)(l1_entries * 8)) < 0)
		r = -errno;
	if (!r && fchown(fd, uid, uid) < 0)
		r = -errno;
	if (r < 0) {
		unlink(path);
		return isola_err_sys(err, -r, "internal", "write `%s`", path);
	}
	return 0;
}

/* ---- the agent sync (see src/agent/guestserial.c) ---- */

/*
 * QEMU reads host bytes for a virtio-serial port only once its main loop notices that the
 * guest opened the port, and under TCG nothing may wake that loop for a long time: a token
 * sent before the agent opened the port sits in the socket. Connecting to the QMP socket
 * is an event the main loop handles; it then re-polls the agent socket.
 */
static void poke_qemu(const char *qmp)
{
	int fd = util_unix_connect(qmp, 0);

	if (fd >= 0)
		close(fd);
}

int mvm_agent_sync(const char *sock, const char *qmp, int pidfd, int timeout_ms,
		   struct isola_err **err)
{
	uint64_t deadline = util_now_ms() + (uint64_t)timeout_ms;
	unsigned char raw[16];
	char hex[33], token[64], ack[64], buf[4096];
	size_t ackl;
	cleanup_fd int fd = -1;

	for (;;) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};

		fd = util_unix_connect(sock, 0);
		if (fd >= 0)
			break;
		if (pidfd >= 0 && poll(&p, 1, 0) > 0)
			return isola_err_set(err, ECHILD, "internal", "QEMU exited during boot");
		if (util_now_ms() > deadline)
			return isola_err_set(err, ETIMEDOUT, "unavailable",
					     "agent socket `%s` did not appear", sock);
		poll(NULL, 0, 10);
	}
	if (util_random(raw, sizeof(raw)) < 0)
		return isola_err_set(err, EIO, "internal", "random nonce");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	snprintf(token, sizeof(token), "\nISOLA-SYNC %s\n", hex);
	snprintf(ack, sizeof(ack), "\nISOLA-ACK %s\n", hex);
	ackl = strlen(ack);
	if (util_write_all(fd, token, strlen(token)) < 0)
		return isola_err_sys(err, errno, "unavailable", "write to `%s`", sock);
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
				      {.fd = pidfd, .events = POLLIN}};
		int pr = poll(p, pidfd >= 0 ? 2 : 1, 150);
		ssize_t n;
		char *hit;

		if (util_now_ms() > deadline)
			return isola_err_set(err, ETIMEDOUT, "unavailable",
					     "the guest agent did not answer within %d ms",
					     timeout_ms);
		if (pr < 0 && errno != EINTR)
			return isola_err_sys(err, errno, "internal", "poll agent");
		if (pr > 0 && pidfd >= 0 && p[1].revents)
			return isola_err_set(err, ECHILD, "internal", "QEMU exited during boot");
		if (pr <= 0) {
			poke_qemu(qmp);
			continue;
		}
		/* UNTRUSTED: whatever the guest sent; only searched for our nonce. */
		n = recv(fd, buf, sizeof(buf) - 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0)
			return isola_err_set(err, EPIPE, "unavailable", "agent channel closed");
		if (n < 0)
			continue;
		buf[n] = '\0';
		hit = memmem(buf, (size_t)n, ack, ackl);
		if (hit) {
			size_t upto = (size_t)(hit - buf) + ackl;

			if (recv(fd, buf, upto, MSG_DONTWAIT) != (ssize_t)upto)
				return isola_err_set(err, EIO, "internal", "agent sync read");
			return steal_fd(&fd);
		}
		/* Drop what cannot be the start of the ACK; keep a possible partial one. */
		if ((size_t)n >= ackl) {
			size_t drop = (size_t)n - (ackl - 1);

			if (recv(fd, buf, drop, MSG_DONTWAIT) < 0)
				continue;
		} else {
			poll(NULL, 0, 10);
		}
	}
}
