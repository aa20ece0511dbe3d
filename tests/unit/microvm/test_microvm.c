/* SPDX-License-Identifier: Apache-2.0 */
/* test_microvm: the microvm tier's pure logic (argv, accelerator, console ring, sync token,
 * guest limits and counters). */
#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tap.h"
#include "guest.h"
#include "isolad/tiers/microvm/microvm-internal.h"

/* guestserial.c is linked for guest_sync_find only (guestlimits.c for the guest's pure
 * helpers); the event loop symbols it references are stubbed here. */
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
	ok(!argv_has(argv, "isola.pids="), "argv: no pids limit, no isola.pids");
	ok(argv_has(argv, "name=org.isola.counters") &&
		   argv_has(argv, "/vm/counters.sock,server=on") && argv_has(argv, "max_ports=3"),
	   "argv: counters virtio-serial port on its own server socket");
	ok(!argv_has(argv, "isola.disk="), "argv: no disk allowance, no isola.disk");
	c.pids = 32;
	c.disk_bytes = 128ull << 20;
	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == 0 && argv_has(argv, " isola.pids=32") &&
		   argv_has(argv, " isola.disk=134217728"),
	   "argv: pids limit and disk allowance go to the guest on the kernel command line");
	ok(argv_has(argv, " isola.caps=0 "),
	   "argv: a mask of no capabilities still goes to the guest");
	c.caps = 0xa00405fbull;
	ok(mvm_build_argv(&c, argv, buf, sizeof(buf)) == 0 &&
		   argv_has(argv, " isola.caps=a00405fb "),
	   "argv: the guest root's capabilities go on the kernel command line (hex mask)");
	c.caps = 0;
	c.pids = 0;
	c.disk_bytes = 0;
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

static void test_guest_limits(void)
{
	const char vm[] = "nr_free_pages 100\noom_killer 9\noom_kill 7\npgfault 3\n";
	const char big[] = "oom_kill 99999999999999999999999\n";
	uint64_t pids = 1, v = 0;
	char nonce[17], reply[160];
	const char ask[] =
		"xx\nISOLA-COUNTERS? 0123456789abcdef\n\nISOLA-COUNTERS? 00000000000000ff\n";
	int off;

	ok(guest_num_parse("32", GUEST_PIDS_MAX, &pids) == 0 && pids == 32, "num: 32 parsed");
	ok(guest_num_parse("", GUEST_PIDS_MAX, &pids) == 0 && pids == 0, "num: empty is no limit");
	ok(guest_num_parse("3x", GUEST_PIDS_MAX, &pids) < 0 &&
		   guest_num_parse("-1", GUEST_PIDS_MAX, &pids) < 0 &&
		   guest_num_parse("4194305", GUEST_PIDS_MAX, &pids) < 0 &&
		   guest_num_parse("99999999999999999999999", GUEST_DISK_MAX, &pids) < 0,
	   "num: junk, negative and oversized values refused");
	ok(guest_num_parse("134217728", GUEST_DISK_MAX, &pids) == 0 && pids == 134217728,
	   "num: a disk allowance in bytes");
	ok(guest_vmstat_get(vm, "oom_kill", &v) == 0 && v == 7,
	   "vmstat: oom_kill found (not the oom_killer line)");
	ok(guest_vmstat_get(vm, "nope", &v) == -ENOENT, "vmstat: missing key");
	ok(guest_vmstat_get(big, "oom_kill", &v) == -ERANGE, "vmstat: overflow refused");
	off = guest_token_find(ask, sizeof(ask) - 1, "\nISOLA-COUNTERS? ", 16, nonce);
	ok(off > 0 && !strcmp(nonce, "0123456789abcdef"), "counters: request token found");
	off += guest_token_find(ask + off, sizeof(ask) - 1 - (size_t)off, "\nISOLA-COUNTERS? ", 16,
				nonce);
	ok(!strcmp(nonce, "00000000000000ff") && (size_t)off == sizeof(ask) - 1,
	   "counters: second request found after the first");
	/* This machine's /proc/vmstat: the guest formats what the host parses. */
	ok(guest_counters_reply("0123456789abcdef", reply, sizeof(reply)) > 0 &&
		   !strncmp(reply, "\nISOLA-COUNTERS 0123456789abcdef oom_kill=", 42),
	   "counters: reply formatted from /proc/vmstat");
	{
		struct mvm_guest_counters gc;

		ok(mvm_counters_parse(reply, strlen(reply), "0123456789abcdef", &gc) ==
			   (int)strlen(reply),
		   "counters: the host parses the guest's reply");
	}
}

static void test_counters_parse(void)
{
	struct mvm_guest_counters gc;
	const char *n = "0123456789abcdef";
	char buf[600];

	snprintf(buf, sizeof(buf),
		 "stale\nISOLA-COUNTERS ffffffffffffffff oom_kill=1\n"
		 "\nISOLA-COUNTERS %s pids=4 oom_kill=3 x_y=0\nmore",
		 n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == (int)(strlen(buf) - 4) &&
		   gc.oom_kill == 3,
	   "parse: our nonce's answer, stale answer and unknown keys skipped");
	ok(mvm_counters_parse(buf, strlen(buf) - 10, n, &gc) == 0, "parse: partial answer waits");
	ok(mvm_counters_parse(buf, strlen(buf), "1111111111111111", &gc) == 0,
	   "parse: another nonce is not an answer");
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s pids=4\n", n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == -EPROTO, "parse: oom_kill required");
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s oom_kill=18446744073709551616\n", n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == -EPROTO, "parse: overflow refused");
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s oom_kill=18446744073709551615\n", n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) > 0 && gc.oom_kill == UINT64_MAX,
	   "parse: the largest value");
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s oom_kill=-1\n", n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == -EPROTO, "parse: negative refused");
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s OOM=1 oom_kill=1\n", n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == -EPROTO, "parse: bad key refused");
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s oom_kill=1  \n", n);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == -EPROTO, "parse: empty token refused");
	memset(buf, 0, sizeof(buf));
	snprintf(buf, sizeof(buf), "\nISOLA-COUNTERS %s oom_kill=1", n);
	memset(buf + strlen(buf), '0', 300);
	ok(mvm_counters_parse(buf, strlen(buf), n, &gc) == -EPROTO,
	   "parse: an endless line is refused, not waited for");
}

/* A boot failure's message always says why: QEMU's end, its stderr, the console's last
 * lines, or that there was nothing. */
static void test_boot_failure_explain(void)
{
	struct isola_err *e = NULL;
	char console[4096] = "";

	for (int i = 1; i <= 30; i++)
		snprintf(console + strlen(console), sizeof(console) - strlen(console),
			 "[ %d.0] line %d\n", i, i);
	isola_err_set(&e, ECHILD, "internal", "QEMU exited during boot");
	mvm_boot_failure_explain(&e, "exited with status 1",
				 "qemu: -drive: Could not open `disk.qcow2`\n", console, 3);
	ok(strstr(e->message,
		  "QEMU exited during boot; QEMU exited with status 1; QEMU stderr "
		  "(last lines): qemu: -drive: Could not open `disk.qcow2`; console "
		  "(last lines): [ 28.0] line 28 | [ 29.0] line 29 | [ 30.0] line 30") != NULL,
	   "boot failure names QEMU's exit, its stderr and the console's last lines: %s",
	   e->message);
	isola_err_free(e);
	e = NULL;
	isola_err_set(&e, ECHILD, "internal", "QEMU exited during boot");
	mvm_boot_failure_explain(&e, "", "", NULL, 10);
	ok(!strcmp(e->message, "QEMU exited during boot; QEMU stderr (last lines): (nothing); "
			       "console (last lines): (nothing)"),
	   "with nothing to show it says so: %s", e->message);
	isola_err_free(e);
	e = NULL;
	isola_err_set(&e, ECHILD, "internal", "x");
	mvm_boot_failure_explain(&e, NULL, "a\x1b[31mb\r\n", "\n\n", 10);
	ok(strstr(e->message, "a?[31mb;") && strstr(e->message, "console (last lines): (nothing)"),
	   "control bytes are replaced, blank output counts as nothing: %s", e->message);
	isola_err_free(e);
	mvm_boot_failure_explain(NULL, "x", "y", "z", 1); /* no error: nothing to do */
}

int main(void)
{
	test_boot_failure_explain();
	test_argv();
	test_accel();
	test_ring();
	test_sync();
	test_guest_limits();
	test_counters_parse();
	return tap_done();
}
