/* SPDX-License-Identifier: Apache-2.0 */
/* microvm: microvm-tier knobs isolad sets at startup (the tier itself is tier_microvm_ops). */
#ifndef ISOLA_TIER_MICROVM_H
#define ISOLA_TIER_MICROVM_H

#include <stdbool.h>

/*
 * Sets the host path of the static isola-agent that becomes the guest's /init (appended to
 * the kernel's module initramfs once per isolad process). Without a call, $ISOLA_AGENT.
 * `path` is copied. Call before the first create. Any thread.
 */
void tier_microvm_set_agent_path(const char *path);

/*
 * Overrides the accelerator choice for every microvm sandbox: "kvm", "tcg", or "auto" (detect:
 * KVM only with real hardware virtualisation, TCG otherwise). -EINVAL for anything else.
 * Call at startup, before the first create ($ISOLA_MICROVM_ACCEL is the fallback).
 */
int tier_microvm_set_accel(const char *mode);

/* Whether QEMU and a guest kernel (mvm_kernel_find) are there: microvm creates can work. */
bool tier_microvm_usable(const char *state_dir);

/* Host report for `isola doctor`: accelerator and why, QEMU, kernel (heap JSON string). */
char *tier_microvm_doctor(void);

#endif
