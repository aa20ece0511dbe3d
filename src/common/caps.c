/* SPDX-License-Identifier: Apache-2.0 */
/* caps: the capability table behind caps.h (names, classes, why the never-list is refused). */
#include "caps.h"

#include <errno.h>
#include <strings.h>

struct cap_info {
	const char *name;    /* "CAP_CHOWN"...; NULL = no capability here */
	enum caps_class cls; /* default, opt-in or never */
	const char *why;     /* never: what it would reach; others: NULL */
};

/* Indexed by capability number. Why each class: docs/process-tier.md "Capabilities". */
static const struct cap_info table[] = {
	[0] = {"CAP_CHOWN", CAPS_DEFAULT, NULL},
	[1] = {"CAP_DAC_OVERRIDE", CAPS_DEFAULT, NULL},
	[2] = {"CAP_DAC_READ_SEARCH", CAPS_NEVER,
	       "open_by_handle_at reaches files outside the root"},
	[3] = {"CAP_FOWNER", CAPS_DEFAULT, NULL},
	[4] = {"CAP_FSETID", CAPS_DEFAULT, NULL},
	[5] = {"CAP_KILL", CAPS_DEFAULT, NULL},
	[6] = {"CAP_SETGID", CAPS_DEFAULT, NULL},
	[7] = {"CAP_SETUID", CAPS_DEFAULT, NULL},
	[8] = {"CAP_SETPCAP", CAPS_DEFAULT, NULL},
	[9] = {"CAP_LINUX_IMMUTABLE", CAPS_NEVER, "immutable files isolad could not remove"},
	[10] = {"CAP_NET_BIND_SERVICE", CAPS_DEFAULT, NULL},
	[11] = {"CAP_NET_BROADCAST", CAPS_OPT_IN, NULL},
	[12] = {"CAP_NET_ADMIN", CAPS_NEVER,
		"it reconfigures the sandbox's network and its policy"},
	[13] = {"CAP_NET_RAW", CAPS_NEVER,
		"raw and packet sockets bypass the egress policy's model"},
	[14] = {"CAP_IPC_LOCK", CAPS_OPT_IN, NULL},
	[15] = {"CAP_IPC_OWNER", CAPS_OPT_IN, NULL},
	[16] = {"CAP_SYS_MODULE", CAPS_NEVER, "kernel modules"},
	[17] = {"CAP_SYS_RAWIO", CAPS_NEVER, "raw I/O ports and devices"},
	[18] = {"CAP_SYS_CHROOT", CAPS_DEFAULT, NULL},
	[19] = {"CAP_SYS_PTRACE", CAPS_NEVER, "other processes' memory, the agent's included"},
	[20] = {"CAP_SYS_PACCT", CAPS_NEVER, "host process accounting"},
	[21] = {"CAP_SYS_ADMIN", CAPS_NEVER, "mounts, namespaces and most of the kernel"},
	[22] = {"CAP_SYS_BOOT", CAPS_NEVER, "reboot() kills the sandbox's init"},
	[23] = {"CAP_SYS_NICE", CAPS_OPT_IN, NULL},
	[24] = {"CAP_SYS_RESOURCE", CAPS_OPT_IN, NULL},
	[25] = {"CAP_SYS_TIME", CAPS_NEVER, "the host's clock"},
	[26] = {"CAP_SYS_TTY_CONFIG", CAPS_NEVER, "terminal configuration and vhangup"},
	[27] = {"CAP_MKNOD", CAPS_NEVER, "device nodes"},
	[28] = {"CAP_LEASE", CAPS_OPT_IN, NULL},
	[29] = {"CAP_AUDIT_WRITE", CAPS_DEFAULT, NULL},
	[30] = {"CAP_AUDIT_CONTROL", CAPS_NEVER, "the host's audit rules"},
	[31] = {"CAP_SETFCAP", CAPS_DEFAULT, NULL},
	[32] = {"CAP_MAC_OVERRIDE", CAPS_NEVER, "the host's LSM policy"},
	[33] = {"CAP_MAC_ADMIN", CAPS_NEVER, "the host's LSM policy"},
	[34] = {"CAP_SYSLOG", CAPS_NEVER, "the kernel log and kernel addresses"},
	[35] = {"CAP_WAKE_ALARM", CAPS_NEVER, "the host's power management"},
	[36] = {"CAP_BLOCK_SUSPEND", CAPS_NEVER, "the host's power management"},
	[37] = {"CAP_AUDIT_READ", CAPS_NEVER, "the host's audit log"},
	[38] = {"CAP_PERFMON", CAPS_NEVER, "perf events: kernel attack surface"},
	[39] = {"CAP_BPF", CAPS_NEVER, "bpf programs: kernel attack surface"},
	[40] = {"CAP_CHECKPOINT_RESTORE", CAPS_NEVER, "pid choice and other processes' mappings"},
};

#define NCAPS ((int)(sizeof(table) / sizeof(table[0])))

int caps_parse(const char *name)
{
	if (!name)
		return -ENOENT;
	if (!strncasecmp(name, "CAP_", 4))
		name += 4;
	for (int c = 0; c < NCAPS; c++)
		if (table[c].name && !strcasecmp(name, table[c].name + 4))
			return c;
	return -ENOENT;
}

const char *caps_name(int cap)
{
	if (cap < 0 || cap >= NCAPS)
		return NULL;
	return table[cap].name;
}

enum caps_class caps_class_of(int cap)
{
	if (cap < 0 || cap >= NCAPS || !table[cap].name)
		return CAPS_NEVER;
	return table[cap].cls;
}

const char *caps_never_reason(int cap)
{
	if (cap < 0 || cap >= NCAPS || !table[cap].why)
		return "not known to this build";
	return table[cap].why;
}

bool caps_mask_allowed(uint64_t mask)
{
	for (int c = 0; c < CAPS_MAX; c++)
		if ((mask & (1ull << c)) && caps_class_of(c) == CAPS_NEVER)
			return false;
	return true;
}
