/* SPDX-License-Identifier: Apache-2.0 */
/* test_caps: capability names, classes and the never-list of common/caps.c against the kernel's numbers. */
#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <string.h>

#include "common/caps.h"
#include "../tap.h"

int main(void)
{
	static const int never[] = {CAP_SYS_ADMIN,     CAP_NET_ADMIN,	    CAP_NET_RAW,
				    CAP_SYS_PTRACE,    CAP_SYS_MODULE,	    CAP_SYS_RAWIO,
				    CAP_BPF,	       CAP_PERFMON,	    CAP_DAC_READ_SEARCH,
				    CAP_SYS_BOOT,      CAP_SYS_TIME,	    CAP_MKNOD,
				    CAP_SYSLOG,	       CAP_MAC_ADMIN,	    CAP_MAC_OVERRIDE,
				    CAP_AUDIT_CONTROL, CAP_LINUX_IMMUTABLE, CAP_CHECKPOINT_RESTORE};
	static const int dflt[] = {CAP_CHOWN,	   CAP_DAC_OVERRIDE, CAP_FOWNER,
				   CAP_FSETID,	   CAP_KILL,	     CAP_SETGID,
				   CAP_SETUID,	   CAP_SETPCAP,	     CAP_NET_BIND_SERVICE,
				   CAP_SYS_CHROOT, CAP_AUDIT_WRITE,  CAP_SETFCAP};
	uint64_t mask = 0;
	int bad = 0;

	ok(caps_parse("chown") == CAP_CHOWN && caps_parse("CAP_CHOWN") == CAP_CHOWN &&
		   caps_parse("cap_Net_Bind_Service") == CAP_NET_BIND_SERVICE,
	   "names parse with or without CAP_, in any case");
	ok(caps_parse("CAP_") == -ENOENT && caps_parse("") == -ENOENT &&
		   caps_parse("chownx") == -ENOENT && caps_parse("ALL") == -ENOENT &&
		   caps_parse(NULL) == -ENOENT,
	   "unknown names, the bare prefix, ALL and NULL are -ENOENT");
	ok(!strcmp(caps_name(CAP_SYS_ADMIN), "CAP_SYS_ADMIN") && caps_name(-1) == NULL &&
		   caps_name(63) == NULL,
	   "caps_name gives the CAP_ name, NULL outside the table");
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (!caps_name(c) || caps_parse(caps_name(c)) != c)
			bad++;
	ok(bad == 0, "every capability up to CAP_LAST_CAP (%d) has a name that parses back",
	   CAP_LAST_CAP);
	for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
		mask |= 1ull << dflt[i];
	ok(mask == CAPS_DEFAULT_MASK, "CAPS_DEFAULT_MASK is the documented twelve (%#llx)",
	   (unsigned long long)CAPS_DEFAULT_MASK);
	bad = 0;
	for (int c = 0; c < CAPS_MAX; c++)
		if ((caps_class_of(c) == CAPS_DEFAULT) != !!(CAPS_DEFAULT_MASK & (1ull << c)))
			bad++;
	ok(bad == 0, "the default class is exactly the default mask");
	bad = 0;
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (caps_class_of(never[i]) != CAPS_NEVER || caps_mask_allowed(1ull << never[i]) ||
		    !strcmp(caps_never_reason(never[i]), "not known to this build"))
			bad++;
	ok(bad == 0, "the never-list is refused by caps_mask_allowed, each with its reason");
	ok(caps_class_of(CAPS_MAX - 1) == CAPS_NEVER && !caps_mask_allowed(1ull << 63) &&
		   caps_class_of(-1) == CAPS_NEVER,
	   "numbers without a name are never granted");
	ok(caps_mask_allowed(CAPS_DEFAULT_MASK | 1ull << CAP_SYS_NICE) && caps_mask_allowed(0),
	   "default plus opt-in, and nothing, are allowed");
	return tap_done();
}
