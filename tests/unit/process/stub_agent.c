/* SPDX-License-Identifier: Apache-2.0 */
/* stub_agent: the real setup stage plus a tiny line server that reports what PID 1 sees inside. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-internal.h"
#include "setup.h"
#include "common/caps.h"

/* Where setup keeps the spec's seccomp program for spawn.c (the real agent's); the stub
 * starts no processes. */
struct agent_spec_filter agent_spec_seccomp;

/* Bytes readable from path, or -errno. */
static long bytes_of(const char *path)
{
	char buf[4096];
	long total = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		total += n;
	close(fd);
	return total;
}

/* Entries in a directory (without . and ..), or -errno. */
static int entries_of(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* Appends "key=value\n" lines describing the sandbox from the inside. */
static void info(FILE *out)
{
	char host[128] = "", line[256];
	struct stat st;
	FILE *f;
	int fd;

	gethostname(host, sizeof(host));
	fprintf(out, "pid=%d\nuid=%d\nhostname=%s\n", (int)getpid(), (int)getuid(), host);
	fprintf(out, "usr_bin_owner=%d\n", stat("/usr/bin", &st) == 0 ? (int)st.st_uid : -1);
	fprintf(out, "etc_passwd_owner=%d\n", stat("/etc/passwd", &st) == 0 ? (int)st.st_uid : -1);
	fprintf(out, "mount_errno=%d\n", mount("none", "/mnt", "tmpfs", 0, NULL) < 0 ? errno : 0);
	fd = open("/usr/isola-write-test", O_CREAT | O_WRONLY, 0644);
	fprintf(out, "usr_write_errno=%d\n", fd < 0 ? errno : 0);
	fd = open("/proc/sys/kernel/hostname", O_WRONLY);
	fprintf(out, "proc_sys_write_errno=%d\n", fd < 0 ? errno : 0);
	fprintf(out, "kcore_size=%lld\n",
		stat("/proc/kcore", &st) == 0 ? (long long)st.st_size : -1);
	fprintf(out, "keys_bytes=%ld\n", bytes_of("/proc/keys"));
	fprintf(out, "interrupts_bytes=%ld\n", bytes_of("/proc/interrupts"));
	fprintf(out, "acpi_entries=%d\n", entries_of("/proc/acpi"));
	fd = open("/sys/kernel/isola-x", O_CREAT | O_WRONLY, 0644);
	fprintf(out, "sys_write_errno=%d\n", fd < 0 ? errno : 0);
	fprintf(out, "dev_null_ok=%d\n", access("/dev/null", W_OK) == 0);
	fprintf(out, "ptmx_ok=%d\n", access("/dev/pts/ptmx", F_OK) == 0);
	fprintf(out, "root_write_ok=%d\n", mkdir("/isola-rw-test", 0755) == 0);
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapEff:", 7) || !strncmp(line, "CapBnd:", 7) ||
		    !strncmp(line, "NoNewPrivs:", 11) || !strncmp(line, "Seccomp:", 8))
			fprintf(out, "%s", line);
	if (f)
		fclose(f);
	fprintf(out, "old_root_visible=%d\n", access("/tmp/lower", F_OK) == 0);
}

/* Writes /fill until an error: the writable layer's quota. */
static void fill(FILE *out)
{
	static char buf[65536];
	long long total = 0;
	int fd = open("/fill", O_CREAT | O_WRONLY | O_TRUNC, 0644), e = 0;

	if (fd < 0) {
		fprintf(out, "fill_errno=%d\n", errno);
		return;
	}
	for (;;) {
		ssize_t n = write(fd, buf, sizeof(buf));

		if (n <= 0) {
			e = errno;
			break;
		}
		total += n;
	}
	close(fd);
	unlink("/fill");
	fprintf(out, "fill_errno=%d\nfill_bytes=%lld\n", e, total);
}

/* Leaves in the writable layer what a snapshot must carry: a file owned by a user, a 0600
 * file, a whiteout (a template file deleted), an opaque dir (a template dir replaced), a
 * symlink to /etc/shadow, a FIFO. */
static void mk(FILE *out)
{
	int fd, e = 0;

	e |= mkdir("/data", 0755);
	fd = open("/data/hello", O_CREAT | O_WRONLY | O_TRUNC, 0640);
	e |= fd < 0 || write(fd, "persisted\n", 10) != 10 || fchown(fd, 1000, 1000);
	close(fd);
	fd = open("/data/secret", O_CREAT | O_WRONLY | O_TRUNC, 0600);
	e |= fd < 0 || write(fd, "s3cret", 6) != 6;
	close(fd);
	e |= unlink("/etc/group");
	e |= unlink("/srv/lowerfile") || rmdir("/srv") || mkdir("/srv", 0750);
	fd = open("/srv/new", O_CREAT | O_WRONLY | O_TRUNC, 0644);
	e |= fd < 0 || write(fd, "new", 3) != 3;
	close(fd);
	e |= symlink("/etc/shadow", "/data/shadow");
	e |= mkfifo("/data/fifo", 0620);
	fprintf(out, "mk=%d\n", e ? errno : 0);
}

/* Reports what check expects after a restore. */
static void check(FILE *out)
{
	char buf[64] = "";
	struct stat st;
	ssize_t n;
	int fd = open("/data/hello", O_RDONLY);

	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	fprintf(out, "hello=%.*s\n", n > 0 ? (int)n - 1 : 0, buf);
	if (fd >= 0)
		close(fd);
	if (stat("/data/hello", &st) == 0)
		fprintf(out, "hello_meta=%u:%u:%o\n", st.st_uid, st.st_gid, st.st_mode & 07777);
	if (stat("/data/secret", &st) == 0)
		fprintf(out, "secret_meta=%u:%u:%o\n", st.st_uid, st.st_gid, st.st_mode & 07777);
	fprintf(out, "etc_group=%d\n", access("/etc/group", F_OK) == 0);
	fprintf(out, "etc_passwd=%d\n", access("/etc/passwd", F_OK) == 0);
	fprintf(out, "srv_lowerfile=%d\n", access("/srv/lowerfile", F_OK) == 0);
	fprintf(out, "srv_new=%d\n", access("/srv/new", F_OK) == 0);
	n = readlink("/data/shadow", buf, sizeof(buf) - 1);
	fprintf(out, "shadow=%.*s\n", n > 0 ? (int)n : 0, buf);
	fprintf(out, "fifo=%d\n", lstat("/data/fifo", &st) == 0 && S_ISFIFO(st.st_mode));
}

/* ~50 MB in 100 KiB files, half incompressible, half text (the paused_us measurement). */
static void big(FILE *out)
{
	static char b[100 << 10];
	int rnd = open("/dev/urandom", O_RDONLY), e = 0;

	e |= mkdir("/big", 0755);
	for (int i = 0; i < 500; i++) {
		char name[32];
		int fd;

		if (i % 2)
			e |= read(rnd, b, sizeof(b)) != (ssize_t)sizeof(b);
		else
			for (size_t o = 0; o < sizeof(b); o += 64)
				snprintf(b + o, 64, "int f%d(int x) { return x * %zu; }\n", i, o);
		snprintf(name, sizeof(name), "/big/f%03d", i);
		fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		e |= fd < 0 || write(fd, b, sizeof(b)) != (ssize_t)sizeof(b);
		close(fd);
	}
	close(rnd);
	fprintf(out, "big=%d\n", e ? errno : 0);
}

int main(int argc, char **argv)
{
	uint64_t root_caps = CAPS_DEFAULT_MASK;
	int lfd;

	if (argc != 2 || strcmp(argv[1], "--setup"))
		return 2;
	lfd = agent_setup_run(3, &root_caps);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		char cmd[64] = "";
		ssize_t n;
		FILE *out;

		if (c < 0)
			continue;
		n = read(c, cmd, sizeof(cmd) - 1);
		out = fdopen(c, "w");
		if (!out)
			continue;
		if (n > 0 && !strncmp(cmd, "info", 4))
			info(out);
		else if (n > 0 && !strncmp(cmd, "fill", 4))
			fill(out);
		else if (n > 0 && !strncmp(cmd, "mk", 2))
			mk(out);
		else if (n > 0 && !strncmp(cmd, "check", 5))
			check(out);
		else if (n > 0 && !strncmp(cmd, "big", 3))
			big(out);
		fclose(out);
	}
}
