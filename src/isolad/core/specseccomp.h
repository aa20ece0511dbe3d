/* SPDX-License-Identifier: Apache-2.0 */
/* specseccomp: a container's own seccomp profile (OCI `linux.seccomp`) checked and compiled. */
#ifndef ISOLA_SPECSECCOMP_H
#define ISOLA_SPECSECCOMP_H

#include <jansson.h>
#include <stdint.h>

#include "../../common/err.h"

/* Bounds on one profile (docs/oci.md "The spec's seccomp profile"). */
#define SPEC_SECCOMP_MAX_RULES 1024 /* entries of `syscalls` */
#define SPEC_SECCOMP_MAX_NAMES 4096 /* syscall names over all entries */
#define SPEC_SECCOMP_MAX_INSNS 4096 /* BPF instructions of the compiled program (the kernel's) */

/*
 * Checks profile, an OCI runtime-spec `linux.seccomp` object (defaultAction, defaultErrnoRet,
 * architectures, flags, syscalls[{names, action, errnoRet, args[{index, value, valueTwo,
 * op}]}]), and compiles it with libseccomp into classic BPF for the host's native ABI (calls
 * of other ABIs get EPERM, as from isola's own filter).
 *
 * With memfd non-NULL, *memfd gets a sealed memfd holding the program (`struct
 * sock_filter[]`, caller owns it) and *flags the SECCOMP_FILTER_FLAG_* bits to install it
 * with. memfd NULL only checks (and compiles, so a program over the size bound is refused).
 *
 * Unknown syscall names are skipped, as runc does (a profile names syscalls of newer kernels);
 * an unknown action, operator, architecture or flag, SCMP_ACT_NOTIFY (isola runs no
 * listener), a field the spec does not define, or a profile past the bounds above is refused
 * with -EINVAL and *err (code `invalid`) naming it. UNTRUSTED: profile is a client's JSON.
 * Any thread.
 */
int spec_seccomp_compile(const json_t *profile, int *memfd, uint32_t *flags,
			 struct isola_err **err);

#endif
