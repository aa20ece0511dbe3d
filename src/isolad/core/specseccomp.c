/* SPDX-License-Identifier: Apache-2.0 */
/* specseccomp: checks a spec's `linux.seccomp` profile and compiles it to BPF with libseccomp. */
#include "specseccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/err.h"
#include "../../common/util.h"

static void ctx_releasep(scmp_filter_ctx *c)
{
	if (*c)
		seccomp_release(*c);
}

/* Refuses any member of obj not in fields, naming it and where it was. */
static int only_fields(const json_t *obj, const char *const *fields, const char *where,
		       struct isola_err **err)
{
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)obj, key, v)
	{
		size_t i = 0;

		while (fields[i] && strcmp(fields[i], key))
			i++;
		if (!fields[i])
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: %s: unknown field `%.64s`", where, key);
	}
	return 0;
}

/* *out = the non-negative integer at obj.key, or def when absent. */
static int get_u64(const json_t *obj, const char *key, uint64_t max, uint64_t def, uint64_t *out,
		   const char *where, struct isola_err **err)
{
	const json_t *v = json_object_get(obj, key);

	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: %s: `%s` must be an integer from 0 to %llu", where,
				     key, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/*
 * The libseccomp action named by name, with errno_ret (absent: EPERM) for ERRNO and TRACE.
 * TRACE without a tracer makes the call fail with ENOSYS (the kernel's rule); with one (a
 * ptracer inside the sandbox) the tracer sees errno_ret as the event's message, as in runc.
 */
static int parse_action(const json_t *obj, const char *key, const char *errno_key,
			const char *where, uint32_t *out, struct isola_err **err)
{
	static const struct {
		const char *name;
		uint32_t action;
		bool takes_errno;
	} actions[] = {
		{"SCMP_ACT_KILL", SCMP_ACT_KILL_THREAD, false},
		{"SCMP_ACT_KILL_THREAD", SCMP_ACT_KILL_THREAD, false},
		{"SCMP_ACT_KILL_PROCESS", SCMP_ACT_KILL_PROCESS, false},
		{"SCMP_ACT_TRAP", SCMP_ACT_TRAP, false},
		{"SCMP_ACT_ERRNO", SCMP_ACT_ERRNO(0), true},
		{"SCMP_ACT_TRACE", SCMP_ACT_TRACE(0), true},
		{"SCMP_ACT_ALLOW", SCMP_ACT_ALLOW, false},
		{"SCMP_ACT_LOG", SCMP_ACT_LOG, false},
	};
	const char *name = json_string_value(json_object_get(obj, key));
	bool has_errno =
		json_object_get(obj, errno_key) && !json_is_null(json_object_get(obj, errno_key));
	uint64_t e;

	if (!name)
		return isola_err_set(err, EINVAL, "invalid", "seccomp: %s: `%s` must be a string",
				     where, key);
	if (!strcmp(name, "SCMP_ACT_NOTIFY"))
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: %s: action SCMP_ACT_NOTIFY is not supported (isola "
				     "runs no seccomp listener)",
				     where);
	for (size_t i = 0; i < ARRAY_SIZE(actions); i++) {
		if (strcmp(name, actions[i].name))
			continue;
		if (has_errno && !actions[i].takes_errno)
			return isola_err_set(
				err, EINVAL, "invalid",
				"seccomp: %s: `%s` is only allowed with SCMP_ACT_ERRNO "
				"or SCMP_ACT_TRACE, not %s",
				where, errno_key, name);
		if (get_u64(obj, errno_key, 4095, EPERM, &e, where, err) < 0)
			return -EINVAL;
		*out = actions[i].takes_errno ? actions[i].action | (uint32_t)e : actions[i].action;
		return 0;
	}
	return isola_err_set(err, EINVAL, "invalid", "seccomp: %s: unknown action `%.64s`", where,
			     name);
}

/* The profile's `flags` as SECCOMP_FILTER_FLAG_* bits for seccomp(2). */
static int parse_flags(const json_t *profile, uint32_t *out, struct isola_err **err)
{
	const json_t *list = json_object_get(profile, "flags"), *v;
	size_t i;

	*out = 0;
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > 8)
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: `flags` must be an array of at most 8 names");
	json_array_foreach(list, i, v)
	{
		const char *f = json_string_value(v);

		if (!f)
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: flags[%zu] must be a string", i);
		/* TSYNC: the filter goes on in the single-threaded child right before execve,
		 * so there are no other threads to synchronise; accepted, nothing to do. */
		if (!strcmp(f, "SECCOMP_FILTER_FLAG_TSYNC"))
			continue;
		if (!strcmp(f, "SECCOMP_FILTER_FLAG_LOG"))
			*out |= SECCOMP_FILTER_FLAG_LOG;
		else if (!strcmp(f, "SECCOMP_FILTER_FLAG_SPEC_ALLOW"))
			*out |= SECCOMP_FILTER_FLAG_SPEC_ALLOW;
		else
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: flag `%.64s` is not supported (known: "
					     "SECCOMP_FILTER_FLAG_TSYNC, SECCOMP_FILTER_FLAG_LOG, "
					     "SECCOMP_FILTER_FLAG_SPEC_ALLOW)",
					     f);
	}
	return 0;
}

/*
 * Checks the listed architectures: one libseccomp does not know is refused naming it. The
 * rules are compiled for the native ABI only. Every call of another ABI (x86's int 0x80 and
 * x32 on an x86_64 host) is refused with EPERM by isola's own filter whatever the profile
 * says, and this one gives them the same EPERM (SCMP_FLTATR_ACT_BADARCH): compiling the rules
 * for x86 and x32 as well made Docker's default profile cost 23 ms instead of 1.6 ms, for
 * calls that can never pass.
 */
static int check_arches(const json_t *profile, struct isola_err **err)
{
	const json_t *list = json_object_get(profile, "architectures"), *v;
	size_t i;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > 32)
		return isola_err_set(
			err, EINVAL, "invalid",
			"seccomp: `architectures` must be an array of at most 32 names");
	json_array_foreach(list, i, v)
	{
		const char *a = json_string_value(v);
		char lower[32];
		size_t k;

		if (a && !strncmp(a, "SCMP_ARCH_", 10) && strlen(a + 10) < sizeof(lower)) {
			for (k = 0; a[10 + k]; k++)
				lower[k] =
					(char)(a[10 + k] >= 'A' && a[10 + k] <= 'Z' ? a[10 + k] + 32
										    : a[10 + k]);
			lower[k] = '\0';
			if (seccomp_arch_resolve_name(lower))
				continue;
		}
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: architectures[%zu]: unknown architecture `%.64s`", i,
				     a ? a : "(not a string)");
	}
	return 0;
}

/* The conditions of one `syscalls` entry; *n of them, *unique: no index repeats. */
static int parse_args(const json_t *entry, const char *where, struct scmp_arg_cmp *conds,
		      unsigned *n, bool *unique, struct isola_err **err)
{
	static const char *const fields[] = {"index", "value", "valueTwo", "op", NULL};
	static const struct {
		const char *name;
		enum scmp_compare op;
	} ops[] = {
		{"SCMP_CMP_NE", SCMP_CMP_NE},
		{"SCMP_CMP_LT", SCMP_CMP_LT},
		{"SCMP_CMP_LE", SCMP_CMP_LE},
		{"SCMP_CMP_EQ", SCMP_CMP_EQ},
		{"SCMP_CMP_GE", SCMP_CMP_GE},
		{"SCMP_CMP_GT", SCMP_CMP_GT},
		{"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
	};
	const json_t *list = json_object_get(entry, "args"), *v;
	unsigned seen = 0;
	size_t i;

	*n = 0;
	*unique = true;
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > 6)
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: %s: `args` must be an array of at most 6 objects",
				     where);
	json_array_foreach(list, i, v)
	{
		uint64_t index, value, two;
		const char *op = json_string_value(json_object_get(v, "op"));
		size_t k;

		if (!json_is_object(v))
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: %s: args[%zu] must be an object", where, i);
		if (only_fields(v, fields, where, err) < 0 ||
		    get_u64(v, "index", 5, 0, &index, where, err) < 0 ||
		    get_u64(v, "value", INT64_MAX, 0, &value, where, err) < 0 ||
		    get_u64(v, "valueTwo", INT64_MAX, 0, &two, where, err) < 0)
			return -EINVAL;
		for (k = 0; op && k < ARRAY_SIZE(ops); k++)
			if (!strcmp(op, ops[k].name))
				break;
		if (!op || k == ARRAY_SIZE(ops))
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: %s: args[%zu]: unknown operator `%.64s`",
					     where, i, op ? op : "(missing)");
		if (ops[k].op != SCMP_CMP_MASKED_EQ && two)
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: %s: args[%zu]: `valueTwo` is only used by "
					     "SCMP_CMP_MASKED_EQ",
					     where, i);
		/* MASKED_EQ: (arg & value) == valueTwo, libseccomp's (mask, datum). */
		conds[*n] = (struct scmp_arg_cmp){(unsigned)index, ops[k].op, value, two};
		if (seen & (1u << index))
			*unique = false;
		seen |= 1u << index;
		(*n)++;
	}
	return 0;
}

/*
 * Adds one `syscalls` entry. Several conditions on distinct arguments must all hold (one
 * rule); conditions repeating an argument are alternatives (a rule each), as runc reads them.
 * A rule whose action is the default is dropped (libseccomp refuses it; it changes nothing).
 */
static int add_entry(scmp_filter_ctx ctx, const json_t *entry, size_t idx, uint32_t def,
		     unsigned *names, struct isola_err **err)
{
	static const char *const fields[] = {"names", "action", "errnoRet", "args", NULL};
	const json_t *list = json_object_get(entry, "names"), *v;
	struct scmp_arg_cmp conds[6];
	unsigned n;
	bool unique;
	uint32_t act;
	char where[32];
	size_t i;

	snprintf(where, sizeof(where), "syscalls[%zu]", idx);
	if (!json_is_object(entry))
		return isola_err_set(err, EINVAL, "invalid", "seccomp: %s must be an object",
				     where);
	if (only_fields(entry, fields, where, err) < 0 ||
	    parse_action(entry, "action", "errnoRet", where, &act, err) < 0 ||
	    parse_args(entry, where, conds, &n, &unique, err) < 0)
		return -EINVAL;
	if (!json_is_array(list) || json_array_size(list) == 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: %s: `names` must be a non-empty array", where);
	*names += (unsigned)json_array_size(list);
	if (*names > SPEC_SECCOMP_MAX_NAMES)
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: more than %d syscall names in all",
				     SPEC_SECCOMP_MAX_NAMES);
	json_array_foreach(list, i, v)
	{
		const char *name = json_string_value(v);
		int nr, r = 0;

		if (!name || strlen(name) > 64)
			return isola_err_set(err, EINVAL, "invalid",
					     "seccomp: %s: names[%zu] must be a string of at most "
					     "64 bytes",
					     where, i);
		nr = seccomp_syscall_resolve_name(name);
		/* Unknown here (a newer kernel's or another ABI's call): skipped, as runc does. */
		if (nr == __NR_SCMP_ERROR || act == def)
			continue;
		if (unique)
			r = seccomp_rule_add_array(ctx, act, nr, n, conds);
		for (unsigned k = 0; !unique && k < n && r >= 0; k++)
			r = seccomp_rule_add_array(ctx, act, nr, 1, &conds[k]);
		if (r < 0)
			return isola_err_sys(err, -r, "invalid", "seccomp: %s: rule for `%s`",
					     where, name);
	}
	return 0;
}

int spec_seccomp_compile(const json_t *profile, int *memfd, uint32_t *flags, struct isola_err **err)
{
	static const char *const fields[] = {
		"defaultAction", "defaultErrnoRet",  "architectures", "flags",
		"listenerPath",	 "listenerMetadata", "syscalls",      NULL};
	__attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = NULL;
	cleanup_fd int fd = -1;
	const json_t *list, *v;
	unsigned names = 0;
	uint32_t def, fl;
	struct stat st;
	size_t i;
	int r;

	if (!json_is_object(profile))
		return isola_err_set(err, EINVAL, "invalid", "seccomp: must be an object");
	if (only_fields(profile, fields, "profile", err) < 0 ||
	    parse_action(profile, "defaultAction", "defaultErrnoRet", "profile", &def, err) < 0 ||
	    parse_flags(profile, &fl, err) < 0 || check_arches(profile, err) < 0)
		return -EINVAL;
	v = json_object_get(profile, "listenerPath");
	if ((v && !json_is_null(v) && (!json_is_string(v) || json_string_length(v))) ||
	    (json_object_get(profile, "listenerMetadata") &&
	     json_string_length(json_object_get(profile, "listenerMetadata"))))
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: `listenerPath` is not supported (isola runs no "
				     "seccomp listener)");
	list = json_object_get(profile, "syscalls");
	if (list && !json_is_null(list) &&
	    (!json_is_array(list) || json_array_size(list) > SPEC_SECCOMP_MAX_RULES))
		return isola_err_set(err, EINVAL, "invalid",
				     "seccomp: `syscalls` must be an array of at most %d entries",
				     SPEC_SECCOMP_MAX_RULES);
	ctx = seccomp_init(def);
	if (!ctx)
		return isola_err_set(err, ENOMEM, "internal", "seccomp_init failed");
	/* Another ABI's call gets EPERM, what isola's own filter gives it already
	 * (tiers/process/seccomp.c; check_arches says why the rules are native only). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "seccomp: set bad-arch action");
	/* A binary tree of syscall numbers: Docker's default profile lists ~370 names. */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	json_array_foreach(list, i, v)
	{
		r = add_entry(ctx, v, i, def, &names, err);
		if (r < 0)
			return r;
	}

	fd = memfd_create("isola-spec-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return isola_err_sys(err, errno, "internal", "memfd_create for seccomp");
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return isola_err_sys(err, -r, "internal", "seccomp_export_bpf");
	if (fstat(fd, &st) < 0)
		return isola_err_sys(err, errno, "internal", "stat seccomp program");
	if (st.st_size / 8 > SPEC_SECCOMP_MAX_INSNS)
		return isola_err_set(err, E2BIG, "invalid",
				     "seccomp: the profile compiles to %lld BPF instructions, more "
				     "than the kernel's %d",
				     (long long)(st.st_size / 8), SPEC_SECCOMP_MAX_INSNS);
	if (!memfd)
		return 0;
	/* Sealed: the agent reads the program it is handed, nobody changes it meanwhile. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
		return isola_err_sys(err, errno, "internal", "seal seccomp memfd");
	*flags = fl;
	*memfd = steal_fd(&fd);
	return 0;
}
