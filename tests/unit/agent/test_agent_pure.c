/* SPDX-License-Identifier: Apache-2.0 */
/* test_agent_pure: TAP tests for the agent's pure logic — output ring, passwd/group parsing. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-internal.h"
#include "agent/ring.h"
#include "agent/users.h"
#include "../tap.h"

static void test_ring(void)
{
	struct ring r;
	uint8_t buf[64], big[10000];
	size_t i, n;
	int good = 1;

	ring_init(&r, 16);
	ok(ring_oldest(&r) == 0 && r.total == 0, "empty ring");
	ring_write(&r, "abcdef", 6);
	n = ring_read(&r, 0, buf, sizeof(buf));
	ok(n == 6 && !memcmp(buf, "abcdef", 6), "read back what was written");
	ring_write(&r, "0123456789ABCDEF", 16);
	ok(r.total == 22 && ring_oldest(&r) == 6, "overwrite keeps the last cap bytes");
	n = ring_read(&r, 6, buf, sizeof(buf));
	ok(n == 16 && !memcmp(buf, "0123456789ABCDEF", 16), "wrapped read is in order");
	ok(ring_read(&r, 2, buf, sizeof(buf)) == 0, "reading overwritten offsets yields nothing");
	n = ring_read(&r, 20, buf, 1);
	ok(n == 1 && buf[0] == 'E', "partial read at an offset");
	ring_fini(&r);

	ring_init(&r, 4096 * 3);
	for (i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	for (i = 0; i < 50; i++)
		ring_write(&r, big, (i * 131) % sizeof(big));
	ok(r.alloc <= 4096 * 3, "allocation never exceeds the cap");
	{
		uint64_t o = ring_oldest(&r);
		uint8_t *out = malloc(r.total - o);

		n = ring_read(&r, o, out, r.total - o);
		ok(n == r.total - o && n == r.alloc, "full tail readable");
		free(out);
	}
	ring_release(&r);
	ring_write(&r, "xyz", 3);
	ok(ring_oldest(&r) == r.total && r.alloc == 0, "released ring only counts");
	ring_fini(&r);

	ring_init(&r, 8);
	ring_write(&r, "0123456789abcdefghij", 20);
	n = ring_read(&r, ring_oldest(&r), buf, sizeof(buf));
	good = n == 8 && !memcmp(buf, "cdefghij", 8) && r.total == 20;
	ok(good, "one write larger than the ring keeps its tail");
	ring_fini(&r);
}

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
			     "bad line without fields\n"
			     "evil:x:notanumber:0::/:/bin/sh\n"
			     "user:x:1000:1000:User,,,:/home/user:/bin/bash\n"
			     "nohome:x:1001:1001::relative/path:/bin/sh\n"
			     "toolong:x:99999999999:1::/:/bin/sh";
static const char group[] = "root:x:0:\nwheel:x:10:user,other\nstaff:x:50:other,user\n"
			    "junk\nbadgid:x:abc:user\nusers:x:100:";

static void test_users(void)
{
	struct agent_user u;

	ok(users_parse_passwd(passwd, strlen(passwd), "root", &u) == 0 && u.uid == 0 &&
		   !strcmp(u.home, "/root"),
	   "root by name");
	ok(users_parse_passwd(passwd, strlen(passwd), "1000", &u) == 0 && u.uid == 1000 &&
		   u.gid == 1000 && !strcmp(u.name, "user") && !strcmp(u.home, "/home/user"),
	   "user by numeric uid");
	ok(users_parse_passwd(passwd, strlen(passwd), "4242", &u) == 0 && u.uid == 4242 &&
		   u.gid == 0 && !strcmp(u.home, "/"),
	   "unknown numeric uid accepted with gid 0");
	ok(users_parse_passwd(passwd, strlen(passwd), "nobody", &u) == -ENOENT,
	   "unknown name is ENOENT");
	ok(users_parse_passwd(passwd, strlen(passwd), "evil", &u) == -ENOENT,
	   "malformed uid line skipped");
	ok(users_parse_passwd(passwd, strlen(passwd), "nohome", &u) == 0 && !strcmp(u.home, "/"),
	   "relative home replaced by /");
	ok(users_parse_passwd(passwd, strlen(passwd), "toolong", &u) == -ENOENT,
	   "out-of-range uid skipped");
	ok(users_parse_passwd(passwd, strlen(passwd), "a:b", &u) == -EINVAL, "colon in spec");
	ok(users_parse_passwd(passwd, strlen(passwd), "", &u) == -EINVAL, "empty spec");
	ok(users_parse_passwd(passwd, strlen(passwd), "99999999999", &u) == -ENOENT ||
		   users_parse_passwd(passwd, strlen(passwd), "99999999999", &u) == -EINVAL,
	   "uid overflow refused");
	users_parse_passwd(passwd, strlen(passwd), "user", &u);
	users_parse_groups(group, strlen(group), &u);
	ok(u.ngroups == 3 && u.groups[0] == 1000 && u.groups[1] == 10 && u.groups[2] == 50,
	   "supplementary groups from /etc/group");
	ok(users_parse_passwd("x:x:1:1::/:/bin/sh", 18, "x", &u) == 0 && u.uid == 1,
	   "last line without newline");
}

static void test_names(void)
{
	char out[AGENT_MAX_PATH + 1];
	char big[AGENT_MAX_PATH + 2];

	ok(safe_rel_name("a/b/c", out) == 0 && !strcmp(out, "a/b/c"), "plain name");
	ok(safe_rel_name("./a//b/./c/", out) == 0 && !strcmp(out, "a/b/c"), "name normalized");
	ok(safe_rel_name("..", out) < 0 && safe_rel_name("a/../b", out) < 0 &&
		   safe_rel_name("a/..", out) < 0,
	   "`..` components refused");
	ok(safe_rel_name("a/..b/c..", out) == 0, "dots inside names are fine");
	ok(safe_rel_name("/etc/passwd", out) < 0, "absolute refused");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	ok(safe_rel_name(big, out) < 0, "over-long name refused");
	ok(safe_rel_name(".", out) == 0 && out[0] == 0, "`.` is the root itself");
}

/* Runs the confinement checks with openat2 and with the forced O_NOFOLLOW walk. */
static void test_safeopen(bool fallback)
{
	char root[] = "/tmp/isola-safeopen-XXXXXX", p[256];
	const char *how = fallback ? "walk" : "openat2";
	int rfd, fd;

	safeopen_force_fallback = fallback;
	if (!mkdtemp(root))
		return;
	snprintf(p, sizeof(p), "%s/real", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/link", root);
	if (symlink("/tmp", p) < 0)
		return;
	rfd = open(root, O_PATH | O_DIRECTORY);
	fd = safe_open_dir(rfd, "real", false);
	ok(fd >= 0, "%s: plain dir opens", how);
	if (fd >= 0)
		close(fd);
	ok(safe_open_dir(rfd, "link", false) == -ELOOP, "%s: symlinked dir refused", how);
	ok(safe_open_dir(rfd, "link/x", true) == -ELOOP, "%s: create under symlink refused", how);
	ok(safe_open_dir(rfd, "../", false) == -EINVAL, "%s: .. refused", how);
	fd = safe_open_dir(rfd, "new/deep/dir", true);
	ok(fd >= 0, "%s: missing parents created", how);
	if (fd >= 0)
		close(fd);
	ok(safe_open_dir(rfd, "absent", false) == -ENOENT, "%s: missing without create", how);
	close(rfd);
	snprintf(p, sizeof(p), "rm -rf %s", root);
	if (system(p)) {
	}
	safeopen_force_fallback = false;
}

static void test_seed_plan(void)
{
	static const char has[] =
		"root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n";
	static const char taken[] =
		"root:x:0:0::/root:/bin/sh\nubuntu:x:1000:1000::/home/u:/bin/sh\n"
		"svc:x:1001:1001::/:/bin/sh";
	static const char grp_taken[] = "root:x:0:\nubuntu:x:1000:\nsvc:x:1001:\nx:x:1002:\n";
	struct users_seed s;

	ok(users_seed_plan(has, strlen(has), "", 0, &s) == 0 && !s.add_passwd && !s.add_group &&
		   s.uid == 1000,
	   "seed: `user` present: nothing to add");
	ok(users_seed_plan("", 0, "", 0, &s) == 0 && s.add_passwd && s.add_group && s.uid == 1000 &&
		   s.gid == 1000,
	   "seed: empty files: uid and gid 1000");
	ok(users_seed_plan(taken, strlen(taken), grp_taken, strlen(grp_taken), &s) == 0 &&
		   s.add_passwd && s.add_group && s.uid == 1002 && s.gid == 1003,
	   "seed: 1000 and 1001 taken: next free uid, next free gid (uid's is taken too)");
	ok(users_seed_plan(taken, strlen(taken), "user:x:777:\n", 12, &s) == 0 && s.add_passwd &&
		   !s.add_group && s.uid == 1002 && s.gid == 777,
	   "seed: an existing `user` group is reused");
	ok(users_seed_plan("userx:x:1000:1000::/:/bin/sh\n", 29, "", 0, &s) == 0 && s.add_passwd &&
		   s.uid == 1001,
	   "seed: a longer name is not `user`; its uid is taken");
}

static void test_name_of(void)
{
	static const char pw[] =
		"root:x:0:0::/root:/bin/sh\nb\x01d:x:5:5::/:/bin/sh\nuser:x:1000:1000::/:/x\n";
	char n[16];

	ok(users_name_of(pw, strlen(pw), 1000, n, sizeof(n)) == 0 && !strcmp(n, "user"),
	   "name_of: uid 1000 is user");
	ok(users_name_of(pw, strlen(pw), 0, n, sizeof(n)) == 0 && !strcmp(n, "root"),
	   "name_of: uid 0 is root");
	ok(users_name_of(pw, strlen(pw), 5, n, sizeof(n)) == -ENOENT,
	   "name_of: a name with control characters is not reported");
	ok(users_name_of(pw, strlen(pw), 4242, n, sizeof(n)) == -ENOENT, "name_of: unknown id");
	ok(users_name_of("averyveryverylongname:x:7:7::/:/x\n", 35, 7, n, sizeof(n)) == -ENOENT,
	   "name_of: a name longer than the buffer is not truncated");
}

int main(void)
{
	test_seed_plan();
	test_name_of();
	test_ring();
	test_users();
	test_names();
	test_safeopen(false);
	test_safeopen(true);
	return tap_done();
}
