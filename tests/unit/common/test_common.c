/* SPDX-License-Identifier: Apache-2.0 */
/* test_common: err and util helpers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../tap.h"
#include "common/err.h"
#include "common/rlimits.h"
#include "common/util.h"

static void test_err(void)
{
	struct isola_err *e = NULL;
	int r = isola_err_set(&e, ENOENT, NULL, "sandbox `%s` not found", "abc");

	ok(r == -ENOENT, "isola_err_set returns -errno");
	ok(e && !strcmp(e->code, "not_found"), "default code from errno");
	ok(e && !strcmp(e->message, "sandbox `abc` not found"), "message formatted");
	isola_err_set(&e, EINVAL, NULL, "second");
	ok(!strcmp(e->message, "sandbox `abc` not found"), "first error is kept");
	isola_err_wrap(&e, "create");
	ok(!strcmp(e->message, "create: sandbox `abc` not found"), "wrap prefixes context");
	isola_err_free(e);
	e = NULL;
	isola_err_sys(&e, EACCES, "forbidden", "open `%s`", "/x");
	ok(e && strstr(e->message, "open `/x`: Permission denied"), "sys appends strerror");
	isola_err_free(e);
	ok(isola_err_set(NULL, EIO, NULL, "x") == -EIO, "NULL err still returns -errno");
}

static void test_parse_duration(void)
{
	uint64_t v = 0;

	ok(util_parse_duration("90", 1000000, &v) == 0 && v == 90, "plain seconds");
	ok(util_parse_duration("90s", 1000000, &v) == 0 && v == 90, "90s");
	ok(util_parse_duration("15m", 1000000, &v) == 0 && v == 900, "15m");
	ok(util_parse_duration("24h", 1000000, &v) == 0 && v == 86400, "24h");
	ok(util_parse_duration("7d", 1000000, &v) == 0 && v == 604800, "7d");
	ok(util_parse_duration("0", 1000000, &v) == 0 && v == 0, "0");
	ok(util_parse_duration("12d", 1000000, &v) == -ERANGE, "past max refused");
	ok(util_parse_duration("-1", 1000000, &v) == -EINVAL, "negative refused");
	ok(util_parse_duration("5y", 1000000, &v) == -EINVAL, "unknown unit refused");
	ok(util_parse_duration("5hh", 1000000, &v) == -EINVAL, "trailing bytes refused");
	ok(util_parse_duration("", 1000000, &v) == -EINVAL, "empty refused");
	ok(util_parse_duration("99999999999999999999", UINT64_MAX, &v) == -ERANGE,
	   "overflow refused");
}

static void test_parse_size(void)
{
	uint64_t v = 0;

	ok(util_parse_size("512M", &v) == 0 && v == 512ull << 20, "512M");
	ok(util_parse_size("2G", &v) == 0 && v == 2ull << 30, "2G");
	ok(util_parse_size("64k", &v) == 0 && v == 64ull << 10, "64k");
	ok(util_parse_size("1GiB", &v) == 0 && v == 1ull << 30, "1GiB");
	ok(util_parse_size("1000", &v) == 0 && v == 1000, "plain bytes");
	ok(util_parse_size("-1", &v) == -EINVAL, "negative refused");
	ok(util_parse_size("12X", &v) == -EINVAL, "unknown suffix refused");
	ok(util_parse_size("", &v) == -EINVAL, "empty refused");
	ok(util_parse_size("99999999999999T", &v) == -ERANGE, "overflow refused");
}

static void test_files(void)
{
	char dir[] = "/tmp/isola-test-XXXXXX", path[256], *text = NULL;
	size_t len = 0;
	struct stat st;

	ok(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	ok(util_mkdir_p(path, 0700) == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode),
	   "mkdir_p creates nested dirs");
	snprintf(path, sizeof(path), "%s/a/f", dir);
	ok(util_write_file_atomic(path, "hello", 5, 0600) == 0, "atomic write");
	ok(util_read_file(path, 100, &text, &len) == 0 && len == 5 && !strcmp(text, "hello"),
	   "read back");
	free(text);
	ok(util_read_file(path, 2, &text, &len) == -EFBIG, "read_file enforces max");
	ok(util_write_file_replace(path, "again", 5, 0600) == 0, "replace without fsync");
	ok(util_read_file(path, 100, &text, &len) == 0 && len == 5 && !strcmp(text, "again") &&
		   stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
	   "replaced in place, mode kept");
	free(text);
	ok(util_fsync_path(path) == 0, "fsync_path of a file and its dir");
	snprintf(path, sizeof(path), "%s/a/none", dir);
	ok(util_fsync_path(path) == -ENOENT, "fsync_path of a missing file: -ENOENT");
	snprintf(path, sizeof(path), "%s/a/f", dir);
	snprintf(path, sizeof(path), "%s/a/link", dir);
	ok(symlink("/etc", path) == 0, "symlink to outside");
	ok(util_rm_rf(dir) == 0 && stat(dir, &st) < 0 && stat("/etc/passwd", &st) == 0,
	   "rm_rf removes the tree without following symlinks");
}

static void test_unix_connect(void)
{
	char dir[] = "/tmp/isola-test-XXXXXX", path[64], longp[200];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int l, fd;

	ok(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/s", dir);
	ok(util_unix_connect(path, 0) == -ENOENT, "no socket: -ENOENT");
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	ok(util_unix_connect(longp, 0) == -ENAMETOOLONG,
	   "a path longer than sun_path: -ENAMETOOLONG");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	ok(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0,
	   "listener");
	fd = util_unix_connect(path, SOCK_NONBLOCK);
	ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) && (fcntl(fd, F_GETFL) & O_NONBLOCK),
	   "connected, close-on-exec, the flags asked for");
	close(fd);
	fd = util_unix_connect(path, 0);
	ok(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK), "blocking unless asked");
	close(fd);
	close(l);
	ok(util_unix_connect(path, 0) == -ECONNREFUSED, "listener gone: -ECONNREFUSED");
	util_rm_rf(dir);
}

static void test_hostname(void)
{
	ok(util_hostname_valid("abc123def") && util_hostname_valid("Web-1.example") &&
		   util_hostname_valid("a"),
	   "hostnames: ids, mixed case, dots");
	ok(!util_hostname_valid("") && !util_hostname_valid(NULL) &&
		   !util_hostname_valid("-lead") && !util_hostname_valid(".lead") &&
		   !util_hostname_valid("a b") && !util_hostname_valid("under_score") &&
		   !util_hostname_valid("x/y"),
	   "hostnames: empty, leading - or ., space, _, / refused");
	ok(util_hostname_valid("123456789012345678901234567890123456789012345678901234567890123") &&
		   !util_hostname_valid(
			   "1234567890123456789012345678901234567890123456789012345678901234"),
	   "hostnames: 63 bytes at most");
}

/* The spec's rlimit names, with or without RLIMIT_, in any case; unknown ones refused. */
static void test_rlimits(void)
{
	ok(rlimits_parse("RLIMIT_NOFILE") == RLIMIT_NOFILE &&
		   rlimits_parse("nofile") == RLIMIT_NOFILE,
	   "RLIMIT_NOFILE and nofile");
	ok(rlimits_parse("rlimit_rttime") == RLIMIT_RTTIME && rlimits_parse("CPU") == RLIMIT_CPU,
	   "any case");
	ok(rlimits_parse("RLIMIT_BOGUS") == -ENOENT && rlimits_parse("RLIMIT_") == -ENOENT &&
		   rlimits_parse("") == -ENOENT && rlimits_parse(NULL) == -ENOENT,
	   "unknown names refused");
	ok(!strcmp(rlimits_name(RLIMIT_AS), "RLIMIT_AS") && !strcmp(rlimits_name(99), "RLIMIT_?"),
	   "names of numbers");
}

int main(void)
{
	test_rlimits();
	test_err();
	test_parse_size();
	test_parse_duration();
	test_files();
	test_unix_connect();
	test_hostname();
	return tap_done();
}
