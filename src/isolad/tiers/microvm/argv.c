/* SPDX-License-Identifier: Apache-2.0 */
/* argv: the QEMU microvm command line — one place, pure, unit-tested. */
#include "microvm-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct argv_b {
	char **argv; /* output */
	size_t n;    /* used entries */
	char *buf;   /* string storage */
	size_t len;  /* storage size */
	size_t off;  /* used storage */
	bool full;   /* ran out of argv or buf */
};

static __attribute__((format(printf, 2, 3))) void add(struct argv_b *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->full || b->n + 1 >= MVM_ARGV_MAX) {
		b->full = true;
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(b->buf + b->off, b->len - b->off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->len - b->off) {
		b->full = true;
		return;
	}
	b->argv[b->n++] = b->buf + b->off;
	b->argv[b->n] = NULL;
	b->off += (size_t)n + 1;
}

static bool id_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > 39)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') ||
		      id[i] == '-'))
			return false;
	return true;
}

int mvm_build_argv(const struct mvm_vm_config *c, char **argv, char *buf, size_t len)
{
	struct argv_b b = {.argv = argv, .buf = buf, .len = len};
	char tsc[32], pids[32], disk[40];
	bool kvm;

	if (!c->qemu || c->qemu[0] != '/' || !id_ok(c->id) || !c->accel || c->vcpus < 1 ||
	    c->vcpus > 64 || c->memory_mib < 64 || c->memory_mib > (1u << 20))
		return -EINVAL;
	kvm = !strcmp(c->accel, "kvm");
	if (!kvm && strcmp(c->accel, "tcg"))
		return -EINVAL;
	argv[0] = NULL;
	add(&b, "%s", c->qemu);
	add(&b, "-name");
	add(&b, "isola-%s", c->id);
	/* Guest RAM is a shared file mapping on the jail's tmpfs: snapshots copy the file and
	 * migrate only device state (x-ignore-shared skips share=on RAM; docs/microvm.md). */
	add(&b, "-object");
	add(&b,
	    "memory-backend-file,id=ram,size=%" PRIu64 "M,mem-path=" MVM_JAIL_MEM
	    ",share=on,prealloc=off",
	    c->memory_mib);
	add(&b, "-M");
	add(&b, "microvm,acpi=on,x-option-roms=off,isa-serial=on,rtc=on,memory-backend=ram");
	add(&b, "-m");
	add(&b, "%" PRIu64 "M", c->memory_mib);
	add(&b, "-smp");
	add(&b, "%u", c->vcpus);
	add(&b, "-accel");
	if (kvm)
		add(&b, "kvm");
	else
		add(&b, "tcg,thread=multi,tb-size=%u", MVM_TB_MIB);
	add(&b, "-cpu");
	add(&b, "%s", kvm ? "host" : "max");
	/* Nothing implicit: no default devices, config files, display, monitor or reboot. */
	add(&b, "-nodefaults");
	add(&b, "-no-user-config");
	add(&b, "-display");
	add(&b, "none");
	add(&b, "-no-reboot");
	/* QEMU's own seccomp filter, on top of the jail (SECURITY.md). */
	add(&b, "-sandbox");
	add(&b, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	add(&b, "-kernel");
	add(&b, MVM_JAIL_KERNEL);
	add(&b, "-initrd");
	add(&b, MVM_JAIL_INITRD);
	/* panic=-1 + -no-reboot: a guest panic ends QEMU, and the monitor sees it. microvm has
	 * no reset device, so the guest must reboot by triple fault (reboot=t): with the
	 * kernel's default methods a panicked guest spun forever at 100% CPU instead. */
	add(&b, "-append");
	/* Under TCG with QEMU's seccomp filter the guest's PIT-based TSC calibration fails
	 * and boot hangs ("Unable to calibrate against PIT"); TCG's TSC is the host's, so
	 * tell the guest its rate. */
	snprintf(tsc, sizeof(tsc), c->tsc_khz ? " tsc_early_khz=%u" : "", c->tsc_khz);
	/* isola.pids: the guest agent's own cgroup limit (src/agent/guestlimits.c); QEMU's
	 * host cgroup limits only QEMU's threads. */
	snprintf(pids, sizeof(pids), c->pids ? " isola.pids=%" PRIu32 : "", c->pids);
	/* isola.disk: the guest grows its root only until this much is free (guestinit.c). */
	snprintf(disk, sizeof(disk), c->disk_bytes ? " isola.disk=%" PRIu64 : "", c->disk_bytes);
	/* isola.caps: what uid 0 in the guest holds for sandbox processes (the guest agent's
	 * spawn.c, as in the process tier); always present, a mask of 0 is meaningful. */
	add(&b,
	    "console=ttyS0 quiet panic=-1 oops=panic reboot=t isola.hostname=%s isola.caps=%" PRIx64
	    "%s%s%s%s%s",
	    c->id, c->caps, tsc, pids, disk, c->net_addr ? " isola.net=" : "",
	    c->net_addr ? c->net_addr : "");
	/* The NIC: the persistent tap isolad made in QEMU's namespace (docs/network.md). */
	if (c->net_addr) {
		add(&b, "-netdev");
		add(&b, "tap,id=net0,fd=%d", MVM_TAP_FD);
		add(&b, "-device");
		add(&b, "virtio-net-device,netdev=net0");
	}
	/* Serial console to a socket isolad drains into a bounded log. */
	add(&b, "-chardev");
	add(&b, "socket,id=con,path=" MVM_JAIL_VM "/console.sock,server=on,wait=off");
	add(&b, "-serial");
	add(&b, "chardev:con");
	/* QMP for isolad only: a 0600 socket in the sandbox dir (umask 077); no guest device
	 * reaches it. */
	add(&b, "-chardev");
	add(&b, "socket,id=qmp,path=" MVM_JAIL_VM "/qmp.sock,server=on,wait=off");
	add(&b, "-mon");
	add(&b, "chardev=qmp,mode=control");
	/* Root disk: the sandbox's qcow2 overlay over the template's read-only ext4. */
	add(&b, "-blockdev");
	add(&b, "driver=file,node-name=base-file,filename=" MVM_JAIL_BASE ",read-only=on");
	add(&b, "-blockdev");
	add(&b, "driver=raw,node-name=base,file=base-file,read-only=on");
	add(&b, "-blockdev");
	add(&b, "driver=file,node-name=disk-file,filename=" MVM_JAIL_VM "/disk.qcow2");
	add(&b, "-blockdev");
	add(&b, "driver=qcow2,node-name=disk,file=disk-file,backing=base");
	add(&b, "-device");
	add(&b, "virtio-blk-device,drive=disk");
	/* Agent channel: a virtio-serial port to a socket isolad (re)connects to. */
	add(&b, "-device");
	add(&b, "virtio-serial-device,max_ports=3");
	add(&b, "-chardev");
	add(&b, "socket,id=agent,path=" MVM_JAIL_VM "/agent.sock,server=on,wait=off");
	add(&b, "-device");
	add(&b, "virtserialport,chardev=agent,name=" MVM_PORT_NAME);
	/* Guest counters (OOM kills) the host cgroup cannot see, asked by counters.c. */
	add(&b, "-chardev");
	add(&b, "socket,id=counters,path=" MVM_JAIL_VM "/" MVM_COUNTERS_SOCK ",server=on,wait=off");
	add(&b, "-device");
	add(&b, "virtserialport,chardev=counters,name=" MVM_COUNTERS_PORT);
	/* Entropy for the guest's getrandom() from early boot. */
	add(&b, "-object");
	add(&b, "rng-random,id=rng,filename=/dev/urandom");
	add(&b, "-device");
	add(&b, "virtio-rng-device,rng=rng");
	/* Restore: devices come from the snapshot's stream (RAM is already in /mem/ram, which
	 * the stream skips: x-ignore-shared), fed through QMP once QEMU runs. */
	if (c->incoming) {
		add(&b, "-incoming");
		add(&b, "defer");
	}
	return b.full ? -ENOSPC : 0;
}
