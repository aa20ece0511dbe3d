/* SPDX-License-Identifier: Apache-2.0 */
/* caps: the capability policy of a sandbox's root (default set, opt-in set, never-list, names). */
#ifndef ISOLA_CAPS_H
#define ISOLA_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A sandbox's root (uid 0 of its user namespace) holds a set of capabilities, kept as a
 * bit mask (bit N = capability N of <linux/capability.h>). Every process's bounding set is
 * that mask; uid 0 gains it at execve by the kernel's rules, every other uid holds none
 * (docs/process-tier.md, "Capabilities"). Each capability is in exactly one class:
 *
 *   default  held unless the sandbox was created with cap_drop naming it (or ALL);
 *   opt-in   held only when cap_add names it; acts on nothing outside the sandbox's
 *            own namespaces (or is checked by the kernel in the initial namespace only);
 *   never    refused by cap_add: it would widen the boundary (mounts, other processes'
 *            memory, kernel modules, raw devices and sockets, clocks, the kernel log,
 *            audit and LSM policy, reboot of the pid namespace, ...).
 */
enum caps_class {
	CAPS_DEFAULT, /* in the default set */
	CAPS_OPT_IN,  /* cap_add may grant it */
	CAPS_NEVER,   /* cap_add is refused */
};

/* CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE,
 * SYS_CHROOT, AUDIT_WRITE, SETFCAP. */
#define CAPS_DEFAULT_MASK                                                                          \
	((1ull << 0) | (1ull << 1) | (1ull << 3) | (1ull << 4) | (1ull << 5) | (1ull << 6) |       \
	 (1ull << 7) | (1ull << 8) | (1ull << 10) | (1ull << 18) | (1ull << 29) | (1ull << 31))

#define CAPS_MAX 64 /* capability numbers are 0..63 in a mask */

/* Parses a capability name: case-insensitive, with or without the CAP_ prefix ("chown",
 * "CAP_CHOWN", "Net_Bind_Service"). Returns its number, or -ENOENT for a name this build does
 * not know. Never reads past the NUL. */
int caps_parse(const char *name);

/* "CAP_CHOWN" for 0, ...; NULL for a number with no name. */
const char *caps_name(int cap);

/* The class of a capability number; anything unnamed is CAPS_NEVER. */
enum caps_class caps_class_of(int cap);

/* Why a never-listed capability is refused (one short clause), for error messages. */
const char *caps_never_reason(int cap);

/* true when every bit of mask is a capability cap_add may grant (default or opt-in). */
bool caps_mask_allowed(uint64_t mask);

#endif
