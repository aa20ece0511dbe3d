/* SPDX-License-Identifier: Apache-2.0 */
/* seccomp: compiles seccomp-policy.c with libseccomp into a sealed memfd of classic BPF. */
#include "process-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../../common/util.h"

static void ctx_releasep(scmp_filter_ctx *c)
{
	if (*c)
		seccomp_release(*c);
}

static uint32_t action_of(enum proc_sc_action a)
{
	switch (a) {
	case PROC_SC_ALLOW:
		return SCMP_ACT_ALLOW;
	case PROC_SC_ENOSYS:
		return SCMP_ACT_ERRNO(ENOSYS);
	case PROC_SC_EPERM:
	default:
		return SCMP_ACT_ERRNO(EPERM);
	}
}

int proc_seccomp_compile_memfd(struct isola_err **err)
{
	__attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = NULL;
	cleanup_fd int fd = -1;
	int r;

	/* Default: EPERM for anything unlisted (a clean error, never a half-run call). */
	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return isola_err_set(err, ENOMEM, "internal", "seccomp_init failed");
	/* Only the native x86_64 ABI: i386 (int 0x80) and x32 (nr | 0x40000000) calls
	 * would bypass per-number rules written for x86_64, so every one of them is
	 * refused with EPERM. EPERM, not a kill: a denial is an answer the caller can
	 * handle, and no process in the sandbox (the agent least of all) dies because
	 * some library probed an ABI. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "seccomp: set bad-arch action");
	/* A binary tree over the syscall numbers, not a list: when the agent installs it (once
	 * per sandbox start, src/agent/setup.c) the kernel runs the program for every number of
	 * both ABIs (its action cache, built under the sighand lock with interrupts off), and
	 * again for each call that cache cannot answer. As a list a number ran 258 instructions
	 * on average and the install took ~350 us; as a tree 17 and ~100 us
	 * (docs/benchmarks.md). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "seccomp: ask for a tree");
	/* The agent is single-threaded when it installs the filter: no TSYNC needed. */
	for (size_t i = 0; i < proc_sc_n_rules; i++) {
		const struct proc_sc_rule *rule = &proc_sc_rules[i];
		int nr = seccomp_syscall_resolve_name(rule->name);

		/* EPERM rows document the refusal; the default action already gives it
		 * (libseccomp rejects a rule that repeats the default). */
		if (rule->action == PROC_SC_EPERM)
			continue;
		if (nr == __NR_SCMP_ERROR)
			nr = rule->nr;
		if (nr < 0)
			continue; /* unknown to libseccomp and no number: default EPERM */
		r = seccomp_rule_add(ctx, action_of(rule->action), nr, 0);
		if (r < 0)
			return isola_err_sys(err, -r, "internal", "seccomp: rule for `%s`",
					     rule->name);
	}
	r = proc_seccomp_add_arg_rules(ctx);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "seccomp: argument rules");

	fd = memfd_create("isola-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "memfd_create for seccomp");
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "seccomp_export_bpf");
	/* Sealed: every sandbox reads the same program, nobody can change it. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
		return isola_err_sys(err, errno, "internal", "seal seccomp memfd");
	return steal_fd(&fd);
}
