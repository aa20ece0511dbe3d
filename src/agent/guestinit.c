/* SPDX-License-Identifier: Apache-2.0 */
/* guestinit: early boot of a microvm guest — modules, root disk, switch_root, then the agent. */
#include "agent-internal.h"
#include "guest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <linux/fs.h>
#include <net/if.h>
#include <net/route.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/caps.h"
#include "common/util.h"

#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif

#define WAIT_DEVICE_MS 10000	  /* for /dev/vda and the serial port to appear */
#define WAIT_CPORT_MS  500	  /* for the counters port, once the agent's is there */
#define GROW_ROUNDS    4	  /* online resizes to reach the disk allowance */
#define GROW_SLOP      (1u << 20) /* available bytes may fall this short of the allowance */

/* die() is allowed here (STYLE.md: the agent's early boot): PID 1 exiting panics the
 * guest, QEMU exits (-no-reboot), and isolad reports the console's last lines. */
static __attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "isola-agent: guest init: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(errno));
	exit(1);
}

static void mount_or_die(const char *src, const char *dst, const char *type, unsigned long fl,
			 const char *data)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, fl, data) < 0 && errno != EBUSY)
		die("mount %s on %s", type ? type : src, dst);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Loads every module named in GUEST_MODULE_ORDER, in order, with finit_module. */
static void load_modules(void)
{
	cleanup_free char *order = NULL;
	char *save = NULL;

	if (util_read_file(GUEST_MODULE_ORDER, 1 << 16, &order, NULL) < 0)
		return; /* a kernel with virtio built in needs none */
	for (char *name = strtok_r(order, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
		char path[512];
		int fd;

		if (!*name || strchr(name, '/'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", GUEST_MODULE_DIR, name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("open module %s", path);
		if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
			die("load module %s", name);
		close(fd);
		unlink(path); /* the initramfs stays in RAM: give the pages back */
	}
	unlink(GUEST_MODULE_ORDER);
}

/* Finds the /dev node of the virtio-serial port named want. */
static bool find_port(const char *want, char *out, size_t len)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *de;
	bool found = false;

	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char path[300];
		cleanup_free char *name = NULL;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
		if (util_read_file(path, 256, &name, NULL) < 0)
			continue;
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, want) == 0) {
			snprintf(out, len, "/dev/%s", de->d_name);
			found = access(out, F_OK) == 0;
		}
	}
	closedir(d);
	return found;
}

/* The value of `key=` on the kernel command line, or "" (out has len bytes). */
static void cmdline_get(const char *key, char *out, size_t len)
{
	cleanup_free char *cmd = NULL;
	size_t kl = strlen(key);
	char *save = NULL;

	out[0] = '\0';
	if (util_read_file("/proc/cmdline", 4096, &cmd, NULL) < 0)
		return;
	for (char *t = strtok_r(cmd, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
		if (strncmp(t, key, kl) == 0 && t[kl] == '=')
			snprintf(out, len, "%s", t + kl + 1);
}

/* The block count in dev's ext4 superblock, 0 if unreadable. The superblock lives in the
 * device's page cache, which the mounted filesystem updates, so it is current. */
static uint64_t ext4_blocks(const char *dev)
{
	unsigned char sb[1024];
	uint64_t lo, hi = 0;
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pread(fd, sb, sizeof(sb), 1024) : -1;

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(sb) || sb[0x38] != 0x53 || sb[0x39] != 0xef)
		return 0;
	lo = (uint64_t)sb[4] | (uint64_t)sb[5] << 8 | (uint64_t)sb[6] << 16 | (uint64_t)sb[7] << 24;
	if (sb[0x60] & 0x80) /* INCOMPAT_64BIT: s_blocks_count_hi */
		hi = (uint64_t)sb[0x150] | (uint64_t)sb[0x151] << 8 | (uint64_t)sb[0x152] << 16 |
		     (uint64_t)sb[0x153] << 24;
	return hi << 32 | lo;
}

/*
 * Grows the mounted ext4 at dir online (EXT4_IOC_RESIZE_FS) until what it has available is
 * `want` bytes (`isola.disk=`, the sandbox's allowance), never past its block device (the
 * qcow2 overlay: template image + allowance + room for the new groups' metadata). Without
 * `want`, fills the device. The template image is built tight (images/ext4.c), so its own
 * free space is small; each round adds what is still missing, because new block groups
 * bring their own bitmaps and inode tables.
 */
static void grow_root(const char *dev, const char *dir, uint64_t want)
{
	struct statfs sf;
	uint64_t bytes = 0, dev_blocks, total, target;
	int bfd, dfd;

	bfd = open(dev, O_RDONLY | O_CLOEXEC);
	if (bfd < 0 || ioctl(bfd, BLKGETSIZE64, &bytes) < 0 || statfs(dir, &sf) < 0 ||
	    sf.f_bsize <= 0) {
		if (bfd >= 0)
			close(bfd);
		return;
	}
	close(bfd);
	dev_blocks = bytes / (uint64_t)sf.f_bsize;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	for (int round = 0; round < GROW_ROUNDS; round++) {
		uint64_t avail;

		total = ext4_blocks(dev);
		if (!total || statfs(dir, &sf) < 0)
			break;
		avail = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize;
		if (!want)
			target = dev_blocks;
		else if (avail + GROW_SLOP >= want)
			break;
		else
			target = total +
				 (want - avail + (uint64_t)sf.f_bsize - 1) / (uint64_t)sf.f_bsize;
		if (target > dev_blocks)
			target = dev_blocks;
		if (target <= total)
			break;
		if (ioctl(dfd, EXT4_IOC_RESIZE_FS, &target) < 0) {
			fprintf(stderr, "isola-agent: guest init: grow root to %llu blocks: %s\n",
				(unsigned long long)target, strerror(errno));
			break;
		}
		if (!want)
			break;
	}
	close(dfd);
}

static void lo_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

/* Sets an IPv4 address-type ioctl (SIOCSIFADDR, SIOCSIFNETMASK) on ifr. */
static int set_in(int s, struct ifreq *ifr, unsigned long req, struct in_addr a)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr->ifr_addr;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr = a;
	return ioctl(s, req, ifr);
}

/* eth0 from `isola.net=ADDR` (docs/network.md): ADDR/30 up, default route via ADDR-1, the
 * tap's end in QEMU's namespace, which masquerades to the sandbox's address. Without the
 * key the VM has no NIC. The guest's root can change all of this: the host enforces. */
static void eth0_up(void)
{
	char val[32];
	struct in_addr a, mask, gw;
	struct rtentry rt;
	struct ifreq ifr;
	uint64_t deadline = util_now_ms() + WAIT_DEVICE_MS;
	int s;

	cmdline_get("isola.net", val, sizeof(val));
	if (!val[0] || inet_pton(AF_INET, val, &a) != 1)
		return;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
	while (ioctl(s, SIOCGIFINDEX, &ifr) < 0 && util_now_ms() < deadline)
		sleep_ms(5); /* virtio_net probes asynchronously */
	mask.s_addr = htonl(0xfffffffcu);
	gw.s_addr = htonl(ntohl(a.s_addr) - 1);
	if (set_in(s, &ifr, SIOCSIFADDR, a) < 0 || set_in(s, &ifr, SIOCSIFNETMASK, mask) < 0 ||
	    ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	memset(&rt, 0, sizeof(rt));
	((struct sockaddr_in *)&rt.rt_dst)->sin_family = AF_INET;
	((struct sockaddr_in *)&rt.rt_genmask)->sin_family = AF_INET;
	((struct sockaddr_in *)&rt.rt_gateway)->sin_family = AF_INET;
	((struct sockaddr_in *)&rt.rt_gateway)->sin_addr = gw;
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	if (ioctl(s, SIOCADDRT, &rt) < 0)
		goto fail;
	close(s);
	return;
fail:
	fprintf(stderr, "isola-agent: guest init: eth0: %s\n", strerror(errno));
	close(s);
}

/*
 * Starts reading what nearly every first command needs (the loader, libc, sh, the user
 * databases) into the guest's page cache. readahead() only queues the reads: they complete
 * in QEMU's I/O thread while init finishes and the host syncs, instead of stalling the
 * first exec (under TCG a cold first `echo` cost ~0.3 s more than a warm one).
 */
static void prefetch(void)
{
	static const char *const files[] = {
		"/etc/ld.so.cache",
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/bin/sh",
		"/etc/passwd",
		"/etc/group",
	};

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			readahead(fd, 0, 8u << 20);
			close(fd);
		}
	}
}

/* Writes a /proc/sys value. 0, or -1 with errno. */
static int sysctl_set(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -1;
	r = util_write_all(fd, val, strlen(val));
	close(fd);
	if (r < 0)
		errno = -r;
	return r < 0 ? -1 : 0;
}

/* Puts the agent (and so every process it spawns) into the guest cgroup, with
 * `isola.pids=` as its pids.max. Dies when the limit cannot be set: a sandbox must not run
 * without a limit it was promised. */
static void limits_apply(void)
{
	char val[32], why[96];
	uint64_t pids;
	int r;

	cmdline_get("isola.pids", val, sizeof(val));
	if (guest_num_parse(val, GUEST_PIDS_MAX, &pids) < 0) {
		errno = EINVAL;
		die("isola.pids=%s", val);
	}
	r = guest_cgroup_setup((uint32_t)pids, why, sizeof(why));
	if (r < 0) {
		errno = -r;
		die("pids limit %" PRIu64 ": %s", pids, why);
	}
}

/* E2B's default user where the image lacks it (agent/userseed.c); a failure is logged and
 * the guest still boots (requests naming `user` then fail with "no such user"). */
static void seed_default_user(void)
{
	struct users_seed us;
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = root >= 0 ? users_seed_default(root, &us) : -errno;

	if (r < 0)
		fprintf(stderr, "isola-agent: guest init: add user `user`: %s\n", strerror(-r));
	if (root >= 0)
		close(root);
}

/* isola.caps=HEX: the capabilities uid-0 processes hold (spawn.c). The guest agent is the
 * VM's real root, so the set only bounds what sandbox processes get; absent (an older isolad)
 * keeps the default set, a malformed or never-listed value stops boot. */
static void caps_apply(void)
{
	char val[32], *end = NULL;
	unsigned long long mask;

	cmdline_get("isola.caps", val, sizeof(val));
	agent_root_caps = CAPS_DEFAULT_MASK;
	if (!val[0])
		return;
	errno = 0;
	mask = strtoull(val, &end, 16);
	if (errno || !end || *end || !caps_mask_allowed(mask)) {
		errno = EINVAL;
		die("isola.caps=%s", val);
	}
	agent_root_caps = mask;
}

int guest_init(char *port, char *cport, size_t len)
{
	char host[80], val[32];
	uint64_t disk;
	struct stat st;
	uint64_t deadline, cport_deadline = 0;
	int fd;

	mount_or_die("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	/* The initramfs has no /dev/console, so the kernel gave us no fds 0-2: take the
	 * console now, so our messages reach the host's console log. */
	fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd >= 0) {
		for (int i = 0; i < 3; i++)
			if (fd != i)
				dup2(fd, i);
		if (fd > 2)
			close(fd);
	}
	mount_or_die("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_or_die("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	load_modules();

	deadline = util_now_ms() + WAIT_DEVICE_MS;
	cport[0] = '\0';
	for (;;) {
		bool base = stat("/dev/vda", &st) == 0 && find_port(GUEST_PORT_NAME, port, len);

		/* The counters port comes with the agent's; a VM without one (another host)
		 * is served without counters after a short grace. */
		if (base && !cport_deadline)
			cport_deadline = util_now_ms() + WAIT_CPORT_MS;
		if (base && (find_port(GUEST_COUNTERS_PORT, cport, len) ||
			     util_now_ms() > cport_deadline)) {
			if (!cport[0] || access(cport, F_OK) < 0)
				cport[0] = '\0';
			break;
		}
		if (util_now_ms() > deadline)
			die("no root disk /dev/vda or no port `%s` after %d ms", GUEST_PORT_NAME,
			    WAIT_DEVICE_MS);
		sleep_ms(5);
	}
	mount_or_die("/dev/vda", "/newroot", "ext4", MS_NOATIME, NULL);
	cmdline_get("isola.disk", val, sizeof(val));
	if (guest_num_parse(val, GUEST_DISK_MAX, &disk) < 0) {
		errno = EINVAL;
		die("isola.disk=%s", val);
	}
	grow_root("/dev/vda", "/newroot", disk);
	for (const char *const *d = (const char *const[]){"dev", "proc", "sys", NULL}; *d; d++) {
		char src[16], dst[32];

		snprintf(src, sizeof(src), "/%s", *d);
		snprintf(dst, sizeof(dst), "/newroot/%s", *d);
		mkdir(dst, 0755);
		if (mount(src, dst, NULL, MS_MOVE, NULL) < 0)
			die("move %s", src);
	}
	/* switch_root: the initramfs (rootfs) cannot be pivoted away, so move the new root
	 * over / and chroot into it. The agent's own pages stay as long as it runs. */
	unlink("/init");
	if (chdir("/newroot") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0)
		die("switch to the root disk");
	prefetch();
	seed_default_user();
	mount_or_die("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		     "newinstance,ptmxmode=0666,mode=0620,gid=5");
	mount_or_die("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	/* /dev/mqueue, as in the process tier (src/agent/setup.c) and runc's default spec; a
	 * kernel without POSIX message queues still boots. */
	mkdir("/dev/mqueue", 0755);
	if (mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		fprintf(stderr, "isola-agent: guest init: mount mqueue: %s\n", strerror(errno));
	mount_or_die("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	limits_apply();
	caps_apply();
	symlink("/proc/self/fd", "/dev/fd");
	symlink("/proc/self/fd/0", "/dev/stdin");
	symlink("/proc/self/fd/1", "/dev/stdout");
	symlink("/proc/self/fd/2", "/dev/stderr");
	/* Same as a process-tier sandbox on a large host: a big allocation succeeds and the
	 * OOM killer ends the command when it touches more than the memory limit. The guest's
	 * default heuristic refuses any allocation larger than its RAM (no swap), so Python
	 * raised MemoryError here where the process tier reports oom_killed. */
	if (sysctl_set("/proc/sys/vm/overcommit_memory", "1") < 0)
		fprintf(stderr, "isola-agent: guest init: vm.overcommit_memory: %s\n",
			strerror(errno));
	cmdline_get("isola.hostname", host, sizeof(host));
	if (!util_hostname_valid(host))
		snprintf(host, sizeof(host), "isola");
	sethostname(host, strlen(host));
	lo_up();
	eth0_up();
	return 0;
}
