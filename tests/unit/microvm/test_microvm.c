/* SPDX-License-Identifier: Apache-2.0 */
/* test_microvm: the microvm tier's pure logic (argv, accelerator, console ring, sync token). */
#include <errno.h>
#include <string.h>
#include <stdlib.h>

#include "../tap.h"
#include "guest.h"
#include "isolad/tiers/microvm/microvm-internal.h"

/* guestserial.c is linked for guest_sync_find only; the event loop symbols it references
 * are stubbed here. */
void watch_init(void *w, int fd, void *cb)
{
	(void)w;
	(void)fd;
	(void)cb;
}
void watch_set(void *w, unsigned ev)
{
	(void)w;
	(void)ev;
}
void server_set_transport(const void *t)
{
	(void)t;
}
void server_install_conn(int fd)
{
	(void)fd;
}
int server_run(int fd, _Bool s)
{
	(void)fd;
	(void)s;
	return -1;
}

static int argv_has(char **argv, const char *s)
{
	for (int i = 0; argv[i]; i++)
		if (strstr(argv[i], s))
			return 1;
	return 0;
}

/* The value after option opt equals val. */
static int argv_opt(char **argv, const char *opt, const char *val)
{
	for (int i = 0; argv[i] && argv[i + 1]; i++)
		if (!strcmp(argv[i], opt))
			return !strcmp(argv[i + 1], val);
	return 0;
}

static void test_argv(void)
{
	char *argv[MVM_ARGV_MAX], buf[8192], small[64];
	struct mvm_vm_config c = {.qemu = "/usr/bin/qemu-system-x86_64",
				  .id = "abc123",
				  .accel = "tcg",
				  .vcpus = 2,
				  .memory_mib = 512,
				  .tsc_khz = 2000000};

	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == 0, "argv: tcg config builds");
	ok(argv_has(argv, "tcg,thread=multi,tb-size="), "argv: multi-threaded TCG, bounded cache");
	ok(argv_opt(argv, "-cpu", "max"), "argv: -cpu max under TCG");
	ok(argv_has(argv,
		    "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"),
	   "argv: QEMU seccomp sandbox with every deny");
	ok(argv_has(argv, "memory-backend-file,id=ram,size=512M,mem-path=/mem/ram,share=on"),
	   "argv: guest RAM is a shared memory-backend-file");
	ok(argv_has(argv, "isola.hostname=abc123") && argv_has(argv, "tsc_early_khz=2000000"),
	   "argv: hostname and TSC rate on the command line");
	ok(argv_has(argv, "name=org.isola.agent") && argv_has(argv, "/vm/agent.sock,server=on"),
	   "argv: agent virtio-serial port on a server socket");
	ok(argv_has(argv, "/vm/qmp.sock") && !argv_has(argv, "-monitor"),
	   "argv: QMP only on the host socket");
	ok(argv_has(argv, "-no-reboot") && argv_has(argv, "panic=-1") && argv_has(argv, "reboot=t"),
	   "argv: panic ends QEMU (triple-fault reboot: microvm has no reset device)");
	ok(argv_has(argv, "backing=base"), "argv: overlay on the read-only template image");
	c.accel = "kvm";
	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == 0 && argv_opt(argv, "-cpu", "host") &&
		   argv_opt(argv, "-accel", "kvm"),
	   "argv: -cpu host under KVM");
	c.id = "../etc";
	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == -EINVAL, "argv: hostile id refused");
	c.id = "abc";
	c.vcpus = 0;
	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == -EINVAL, "argv: 0 vCPUs refused");
	c.vcpus = 1;
	c.accel = "xen";
	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == -EINVAL, "argv: unknown accel refused");
	c.accel = "tcg";
	ok(mvm_build_argv(&c, argv, small, sizeof(small)) == -ENOSPC, "argv: small buffer -ENOSPC");
}

static void test_accel(void)
{
	struct mvm_accel a;
	const char *vmx = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr vmx sse2\n";
	const char *novmx = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr sse2 vmxnet\n";

	mvm_accel_decide(vmx, "kvm_intel 1 0 - Live\nkvm 2 1 kvm_intel\n", true, NULL, &a);
	ok(!strcmp(a.name, "kvm"), "accel: vmx + kvm_intel + /dev/kvm -> kvm");
	mvm_accel_decide(vmx, "kvm_pvm\nkvm\nkvm_intel\n", true, NULL, &a);
	ok(!strcmp(a.name, "tcg") && strstr(a.reason, "PVM"), "accel: kvm_pvm loaded -> tcg");
	mvm_accel_decide(novmx, "kvm\nkvm_intel\n", true, NULL, &a);
	ok(!strcmp(a.name, "tcg") && strstr(a.reason, "vmx"),
	   "accel: no vmx flag (vmxnet is not vmx) -> tcg");
	mvm_accel_decide(vmx, "kvm\n", true, NULL, &a);
	ok(!strcmp(a.name, "tcg"), "accel: no kvm_intel/kvm_amd -> tcg");
	mvm_accel_decide(vmx, "kvm_amd\n", false, NULL, &a);
	ok(!strcmp(a.name, "tcg") && strstr(a.reason, "/dev/kvm"), "accel: /dev/kvm unusable");
	mvm_accel_decide(novmx, "", false, "kvm", &a);
	ok(!strcmp(a.name, "kvm") && strstr(a.reason, "forced"), "accel: override wins");
	mvm_accel_decide(NULL, NULL, false, "bogus", &a);
	ok(!strcmp(a.name, "tcg"), "accel: bad override ignored, nothing known -> tcg");
}

static void test_ring(void)
{
	struct mvm_ring r;
	size_t n;
	char *t;

	ok(mvm_ring_init(&r, 16) == 0, "ring: init");
	mvm_ring_push(&r, "hello\n", 6);
	t = mvm_ring_tail(&r, 100, &n);
	ok(n == 6 && !strcmp(t, "hello\n"), "ring: short content intact");
	free(t);
	mvm_ring_push(&r, "line two\nline three\n", 20);
	t = mvm_ring_tail(&r, 100, &n);
	ok(r.len == 16 && n <= 16, "ring: bounded at capacity");
	ok(!strcmp(t, "line three\n"), "ring: tail starts at a line boundary (`%s`)", t);
	free(t);
	{
		char big[1000];

		memset(big, 'x', sizeof(big));
		big[999] = 'E';
		mvm_ring_push(&r, big, sizeof(big));
		t = mvm_ring_tail(&r, 4, &n);
		ok(n == 4 && t[3] == 'E', "ring: huge write keeps the last bytes");
		free(t);
	}
	mvm_ring_fini(&r);
}

static void test_sync(void)
{
	char nonce[33];
	const char good[] = "junk\x01\x02\nISOLA-SYNC 0123456789abcdef0123456789abcdef\nrest";
	const char bad1[] = "\nISOLA-SYNC 0123456789ABCDEF0123456789abcdef\n";
	const char bad2[] = "\nISOLA-SYNC 0123456789abcdef0123456789abcde\n";
	int off = guest_sync_find(good, sizeof(good) - 1, nonce);

	ok(off > 0 && !strcmp(good + off, "rest") &&
		   !strcmp(nonce, "0123456789abcdef0123456789abcdef"),
	   "sync: token found after garbage, offset past it");
	ok(guest_sync_find(bad1, sizeof(bad1) - 1, nonce) < 0, "sync: uppercase hex refused");
	ok(guest_sync_find(bad2, sizeof(bad2) - 1, nonce) < 0, "sync: short token refused");
	ok(guest_sync_find(good, 20, nonce) < 0, "sync: partial token not matched");
}

int main(void)
{
	test_argv();
	test_accel();
	test_ring();
	test_sync();
	return tap_done();
}
