/* SPDX-License-Identifier: Apache-2.0 */
/* accel: KVM or TCG — decided from CPU flags and loaded modules, never from "/dev/kvm opens". */
#include "microvm-internal.h"
#include "microvm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../common/util.h"

/* True when word appears in text as a whole token (spaces, tabs, newlines, ':' delimit). */
static bool has_word(const char *text, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = text; p && (p = strstr(p, word)); p += wl) {
		bool start = p == text || strchr(" \t\n:", p[-1]);
		bool end = p[wl] == '\0' || strchr(" \t\n", p[wl]);

		if (start && end)
			return true;
	}
	return false;
}

/* True when a /proc/modules line (or a bare name line) starts with name. */
static bool has_module(const char *modules, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = modules; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, nl) && (p[nl] == ' ' || p[nl] == '\n' || p[nl] == '\0'))
			return true;
	return false;
}

void mvm_accel_decide(const char *cpuinfo, const char *modules, bool kvm_dev, const char *override,
		      struct mvm_accel *out)
{
	bool vmx = cpuinfo && (has_word(cpuinfo, "vmx") || has_word(cpuinfo, "svm"));
	bool kmod = modules && (has_module(modules, "kvm_intel") || has_module(modules, "kvm_amd"));
	bool pvm = modules && (has_module(modules, "kvm_pvm") || has_module(modules, "kvm-pvm"));

	memset(out, 0, sizeof(*out));
	if (override && (!strcmp(override, "kvm") || !strcmp(override, "tcg"))) {
		snprintf(out->name, sizeof(out->name), "%s", override);
		snprintf(out->reason, sizeof(out->reason), "forced by configuration (--accel %s)",
			 override);
		return;
	}
	snprintf(out->name, sizeof(out->name), "tcg");
	if (pvm)
		snprintf(out->reason, sizeof(out->reason),
			 "kvm_pvm is loaded: /dev/kvm is PVM nested virtualisation, under which a "
			 "stock guest kernel hangs; using TCG (multi-threaded)");
	else if (!vmx)
		snprintf(out->reason, sizeof(out->reason),
			 "the CPU shows no vmx/svm flag (no hardware virtualisation); using TCG "
			 "(multi-threaded)");
	else if (!kmod)
		snprintf(out->reason, sizeof(out->reason),
			 "neither kvm_intel nor kvm_amd is loaded; using TCG (multi-threaded)");
	else if (!kvm_dev)
		snprintf(out->reason, sizeof(out->reason),
			 "/dev/kvm cannot be opened read-write; using TCG (multi-threaded)");
	else {
		snprintf(out->name, sizeof(out->name), "kvm");
		snprintf(out->reason, sizeof(out->reason),
			 "hardware virtualisation (vmx/svm) with kvm_intel/kvm_amd and a usable "
			 "/dev/kvm");
	}
}

/* /proc/modules misses built-in modules; /sys/module lists both. */
static char *module_names(void)
{
	DIR *d = opendir("/sys/module");
	struct dirent *de;
	size_t len = 0, cap = 4096;
	char *out = malloc(cap);

	if (!out) {
		if (d)
			closedir(d);
		return NULL;
	}
	out[0] = '\0';
	while (d && (de = readdir(d))) {
		size_t nl = strlen(de->d_name);

		if (de->d_name[0] == '.')
			continue;
		if (len + nl + 2 > cap) {
			char *n = realloc(out, cap * 2);

			if (!n)
				break;
			out = n;
			cap *= 2;
		}
		memcpy(out + len, de->d_name, nl);
		len += nl;
		out[len++] = '\n';
		out[len] = '\0';
	}
	if (d)
		closedir(d);
	return out;
}

/* Set once at startup (isolad --accel) before any thread creates a VM; then read-only. */
static char accel_override[8];

int tier_microvm_set_accel(const char *mode)
{
	if (!strcmp(mode, "auto")) {
		accel_override[0] = '\0';
		return 0;
	}
	if (strcmp(mode, "kvm") && strcmp(mode, "tcg"))
		return -EINVAL;
	snprintf(accel_override, sizeof(accel_override), "%s", mode);
	return 0;
}

void mvm_accel_host(struct mvm_accel *out)
{
	cleanup_free char *cpuinfo = NULL;
	cleanup_free char *mods = module_names();
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	util_read_file("/proc/cpuinfo", 8u << 20, &cpuinfo, NULL);
	mvm_accel_decide(cpuinfo, mods, fd >= 0,
			 accel_override[0] ? accel_override : getenv("ISOLA_MICROVM_ACCEL"), out);
}
