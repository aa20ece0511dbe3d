/* SPDX-License-Identifier: Apache-2.0 */
/* test_agent_e2e: drives a real `isola-agent --listen` through isolad's agentconn (TAP). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "isolad/core/agentconn.h"
#include "proto/proto.h"
#include "../tap.h"

static char dir[] = "/tmp/isola-agent-e2e-XXXXXX";
static char sock[100];
static pid_t agent_pid;

static int dial(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, i;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	for (i = 0; i < 200; i++) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	return -1;
}

static struct agent_conn *connect_agent(void)
{
	struct agent_conn *c = NULL;
	struct isola_err *err = NULL;
	int fd = dial();

	if (fd < 0 || agent_conn_new(fd, 5000, &c, &err) < 0) {
		printf("# connect: %s\n", err ? err->message : "dial failed");
		isola_err_free(err);
		return NULL;
	}
	return c;
}

/* Collected output of one foreground exec. */
struct run {
	char out[1 << 16], err[1 << 16];
	size_t nout, nerr;
	json_t *exit;  /* EXIT payload, owned */
	json_t *error; /* ERROR payload, owned */
};

static int run(struct agent_conn *c, json_t *req, const char *in, struct run *r)
{
	struct agent_chan *ch;
	struct agent_msg m;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (agent_chan_open(c, req, &ch, NULL) < 0)
		return -1;
	if (in) {
		agent_chan_send_data(ch, in, strlen(in), NULL);
		agent_chan_send_eof(ch, NULL);
	}
	while (agent_chan_recv(ch, &m, 10000, NULL) == 0) {
		if (m.type == PROTO_STDOUT && r->nout + m.len < sizeof(r->out)) {
			memcpy(r->out + r->nout, m.data, m.len);
			r->nout += m.len;
		} else if (m.type == PROTO_STDERR && r->nerr + m.len < sizeof(r->err)) {
			memcpy(r->err + r->nerr, m.data, m.len);
			r->nerr += m.len;
		} else if (m.type == PROTO_EXIT || m.type == PROTO_ERROR) {
			if (m.type == PROTO_EXIT)
				r->exit = json_incref(m.json);
			else
				r->error = json_incref(m.json);
			agent_msg_fini(&m);
			rc = 0;
			break;
		}
		agent_msg_fini(&m);
	}
	agent_chan_close(ch);
	json_decref(req);
	return rc;
}

static void run_fini(struct run *r)
{
	json_decref(r->exit);
	json_decref(r->error);
}

static long exit_field(struct run *r, const char *k)
{
	json_t *v = json_object_get(r->exit, k);

	return json_is_boolean(v) ? json_is_true(v) : (long)json_integer_value(v);
}

static long agent_rss_kb(void)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)agent_pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = atol(line + 6);
	fclose(f);
	return kb;
}

static const char *err_code(struct run *r)
{
	return json_string_value(json_object_get(r->error, "code"));
}

static void test_exec(struct agent_conn *c)
{
	struct run r;

	run(c, json_pack("{s:s,s:[s,s]}", "op", "exec", "argv", "echo", "hi"), NULL, &r);
	ok(r.exit && r.nout == 3 && !memcmp(r.out, "hi\n", 3) && exit_field(&r, "exit_code") == 0,
	   "exec echo: stdout and exit 0");
	run_fini(&r);
	run(c, json_pack("{s:s,s:[s,s,s]}", "op", "exec", "argv", "sh", "-c", "exit 3"), NULL, &r);
	ok(r.exit && exit_field(&r, "exit_code") == 3, "exit code 3 reported");
	run_fini(&r);
	run(c, json_pack("{s:s,s:[s,s,s]}", "op", "exec", "argv", "sh", "-c", "echo oops >&2"),
	    NULL, &r);
	ok(r.nerr == 5 && !memcmp(r.err, "oops\n", 5) && r.nout == 0, "stderr kept apart");
	run_fini(&r);
	run(c, json_pack("{s:s,s:[s],s:b}", "op", "exec", "argv", "cat", "stdin", 1), "hello", &r);
	ok(r.exit && r.nout == 5 && !memcmp(r.out, "hello", 5), "stdin reaches the process");
	run_fini(&r);
	run(c,
	    json_pack("{s:s,s:[s,s],s:i}", "op", "exec", "argv", "sleep", "20", "timeout_ms", 300),
	    NULL, &r);
	ok(r.exit && exit_field(&r, "timed_out") == 1 && exit_field(&r, "signal") == 9,
	   "timeout kills with SIGKILL and says timed_out");
	run_fini(&r);
	run(c, json_pack("{s:s,s:[s]}", "op", "exec", "argv", "/nonexistent/prog"), NULL, &r);
	ok(r.error && err_code(&r) && !strcmp(err_code(&r), "not_found"),
	   "missing program is ERROR not_found");
	run_fini(&r);
	run(c,
	    json_pack("{s:s,s:[s,s,s],s:{s:s},s:s}", "op", "exec", "argv", "sh", "-c",
		      "echo $FOO:$LANG:$PWD", "env", "FOO", "bar", "cwd", "/tmp"),
	    NULL, &r);
	ok(r.nout > 0 && !strncmp(r.out, "bar:C.UTF-8:/tmp\n", r.nout), "env, default LANG, cwd");
	run_fini(&r);
	run(c,
	    json_pack("{s:s,s:[s,s,s],s:b}", "op", "exec", "argv", "sh", "-c",
		      "tty >/dev/null && echo istty", "tty", 1),
	    NULL, &r);
	ok(r.nout >= 5 && strstr(r.out, "istty"), "tty exec gets a terminal");
	run_fini(&r);
	run(c,
	    json_pack("{s:s,s:[s,s,s]}", "op", "exec", "argv", "sh", "-c",
		      "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t ' ' '"),
	    NULL, &r);
	r.out[r.nout] = 0;
	ok(strstr(r.out, "CapEff: 0000000000000000") && strstr(r.out, "NoNewPrivs: 1"),
	   "exec child has no capabilities and no_new_privs");
	run_fini(&r);
}

static void test_background(struct agent_conn *c)
{
	struct agent_chan *ch;
	struct agent_msg m;
	json_t *res = NULL;
	int pid = 0, got_dropped = 0, first_dropped = 0, n = 0;
	long dropped = 0, data = 0, code = -1;

	agent_call(c,
		   json_pack("{s:s,s:[s,s,s],s:b,s:i,s:s}", "op", "exec", "argv", "sh", "-c",
			     "head -c 3000000 /dev/zero; echo END", "background", 1, "retention",
			     65536, "tag", "bg"),
		   5000, &res, NULL);
	pid = (int)json_integer_value(json_object_get(res, "pid"));
	json_decref(res);
	ok(pid > 0, "background exec returns a pid");
	res = NULL;
	agent_call(c, json_pack("{s:s,s:i}", "op", "wait", "pid", pid), 10000, &res, NULL);
	/* wait answers with EXIT, which agent_call reports as an unexpected end: use a chan */
	json_decref(res);
	agent_chan_open(c, json_pack("{s:s,s:i}", "op", "wait", "pid", pid), &ch, NULL);
	ok(agent_chan_recv(ch, &m, 10000, NULL) == 0 && m.type == PROTO_EXIT, "wait delivers EXIT");
	agent_msg_fini(&m);
	agent_chan_close(ch);
	agent_chan_open(c, json_pack("{s:s,s:i}", "op", "attach", "pid", pid), &ch, NULL);
	while (agent_chan_recv(ch, &m, 10000, NULL) == 0) {
		n++;
		if (m.type == PROTO_DROPPED) {
			got_dropped++;
			first_dropped = n == 2;
			dropped += (long)json_integer_value(json_object_get(m.json, "bytes"));
		} else if (m.type == PROTO_STDOUT) {
			data += (long)m.len;
		} else if (m.type == PROTO_EXIT) {
			code = (long)json_integer_value(json_object_get(m.json, "exit_code"));
			agent_msg_fini(&m);
			break;
		}
		agent_msg_fini(&m);
	}
	agent_chan_close(ch);
	ok(got_dropped == 1 && first_dropped, "late attach gets DROPPED right after RESULT");
	ok(dropped + data == 3000004 && data == 65536, "dropped %ld + replayed %ld == total",
	   dropped, data);
	ok(code == 0, "attach ends with EXIT");
}

static void test_flood(struct agent_conn *c)
{
	struct agent_chan *ch;
	struct agent_msg m;
	json_t *res = NULL;
	long long total = 0;
	long rss, rss2;
	int rc;

	agent_chan_open(c,
			json_pack("{s:s,s:[s,s,s,s]}", "op", "exec", "argv", "head", "-c",
				  "50000000", "/dev/zero"),
			&ch, NULL);
	sleep(2); /* consumer reads nothing for a while */
	rss = agent_rss_kb();
	rc = agent_call(c, json_pack("{s:s}", "op", "info"), 3000, &res, NULL);
	ok(rc == 0 && json_integer_value(json_object_get(res, "processes")) > 0,
	   "another channel works while a flood is stalled");
	json_decref(res);
	while (agent_chan_recv(ch, &m, 20000, NULL) == 0) {
		if (m.type == PROTO_STDOUT)
			total += (long long)m.len;
		if (m.type == PROTO_EXIT) {
			agent_msg_fini(&m);
			break;
		}
		agent_msg_fini(&m);
	}
	agent_chan_close(ch);
	rss2 = agent_rss_kb();
	ok(total == 50000000, "50 MB flood delivered intact with backpressure (%lld)", total);
	ok(rss > 0 && rss < 32 * 1024 && rss2 < 32 * 1024, "agent VmRSS bounded: %ld kB, %ld kB",
	   rss, rss2);
}

static int call_ok(struct agent_conn *c, json_t *req, json_t **res, char *code, size_t clen)
{
	struct isola_err *err = NULL;
	int r = agent_call(c, req, 5000, res, &err);

	json_decref(req);
	if (code)
		snprintf(code, clen, "%s", err ? err->code : "");
	isola_err_free(err);
	return r;
}

/* Runs a write op (req stolen) with body data; its RESULT in *res (NULL on anything else). */
static void write_op(struct agent_conn *c, json_t *req, const char *data, json_t **res)
{
	struct agent_chan *ch = NULL;
	struct agent_msg m = {0};

	*res = NULL;
	if (agent_chan_open(c, req, &ch, NULL) == 0) {
		agent_chan_send_data(ch, data, strlen(data), NULL);
		agent_chan_send_eof(ch, NULL);
		if (agent_chan_recv(ch, &m, 5000, NULL) == 0 && m.type == PROTO_RESULT)
			*res = steal_ptr(&m.json);
		agent_msg_fini(&m);
		agent_chan_close(ch);
	}
	json_decref(req);
}

static bool has_str(const json_t *o, const char *k, const char *v)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s && !strcmp(s, v);
}

static long long int_of(const json_t *o, const char *k)
{
	return json_is_integer(json_object_get(o, k)) ? json_integer_value(json_object_get(o, k))
						      : -1;
}

/* The write op's RESULT is the written file's entry (what stat answers), for a replace, with
 * metadata and in append mode; isolad's agent_write_entry turns an older agent's
 * {path,size} into the same entry with a stat call. */
static void test_write_entry(struct agent_conn *c)
{
	char p[512], q[512];
	json_t *res = NULL, *st = NULL, *old, *req;
	struct stat hs;

	snprintf(p, sizeof(p), "%s/w.txt", dir);
	write_op(c, json_pack("{s:s,s:s,s:i}", "op", "write", "path", p, "mode", 0640),
		 "eleven byte", &res);
	ok(res && lstat(p, &hs) == 0, "write answers RESULT");
	ok(has_str(res, "type", "file") && has_str(res, "name", "w.txt") &&
		   has_str(res, "path", p) && int_of(res, "size") == 11 &&
		   int_of(res, "mode") == 0640 && int_of(res, "uid") == (long long)hs.st_uid &&
		   int_of(res, "gid") == (long long)hs.st_gid &&
		   int_of(res, "mtime") == (long long)hs.st_mtim.tv_sec,
	   "write RESULT is the entry: type, name, path, size, mode, uid, gid, mtime");
	ok(call_ok(c, json_pack("{s:s,s:s}", "op", "stat", "path", p), &st, NULL, 0) == 0 &&
		   json_equal(res, st),
	   "write RESULT equals stat's answer");
	json_decref(st);
	json_decref(res);
	write_op(c, json_pack("{s:s,s:s,s:b}", "op", "write", "path", p, "append", 1), " and more",
		 &res);
	ok(has_str(res, "type", "file") && int_of(res, "size") == 20 && int_of(res, "mode") == 0640,
	   "append RESULT is the entry of the whole file (size 20, mode kept)");
	json_decref(res);
	snprintf(q, sizeof(q), "%s/meta.txt", dir);
	write_op(c,
		 json_pack("{s:s,s:s,s:{s:s}}", "op", "write", "path", q, "metadata", "owner",
			   "agent"),
		 "m", &res);
	ok(has_str(json_object_get(res, "metadata"), "owner", "agent") &&
		   has_str(res, "type", "file"),
	   "write RESULT carries the metadata it stored");
	json_decref(res);

	/* An older agent's RESULT: agent_write_entry asks for the entry. */
	req = json_pack("{s:s,s:s,s:i}", "op", "write", "path", p, "mode", 0644);
	res = json_pack("{s:s,s:i}", "path", p, "size", 20);
	agent_write_entry(c, req, 5000, &res);
	ok(has_str(res, "type", "file") && has_str(res, "name", "w.txt") &&
		   int_of(res, "size") == 20 && int_of(res, "mode") == 0640,
	   "agent_write_entry: {path,size} becomes the entry through stat");
	json_decref(res);
	/* The stat runs as the write's user: uid 65534 cannot search the 0700 test directory,
	 * so its stat fails and {path,size} stays (as root, the same stat answered above). */
	if (geteuid() == 0) {
		json_t *as = json_pack("{s:s,s:s,s:i}", "op", "write", "path", p, "user", 65534);

		res = old = json_pack("{s:s,s:i}", "path", p, "size", 20);
		agent_write_entry(c, as, 5000, &res);
		ok(res == old && !json_object_get(res, "type"),
		   "agent_write_entry: the stat runs as the write's user");
		json_decref(res);
		json_decref(as);
	} else {
		ok(1, "# SKIP the user switch needs root");
	}
	/* An entry is kept as it is (no stat: a stat would answer other fields). */
	res = old = json_pack("{s:s,s:s,s:i}", "type", "file", "path", p, "size", 1);
	agent_write_entry(c, req, 5000, &res);
	ok(res == old && int_of(res, "size") == 1, "agent_write_entry keeps an entry");
	json_decref(res);
	json_decref(req);
	/* The stat fails (the file is gone): the write's own answer stays. */
	req = json_pack("{s:s,s:s}", "op", "write", "path", q);
	unlink(q);
	res = old = json_pack("{s:s,s:i}", "path", q, "size", 1);
	agent_write_entry(c, req, 5000, &res);
	ok(res == old && !json_object_get(res, "type"),
	   "agent_write_entry: a failed stat leaves {path,size}");
	json_decref(res);
	json_decref(req);
}

/* write's `parents` (the HELLO's "write_parents"): the missing directories above the file are
 * made first, as the request's user, mode 0755; without it a missing parent fails the write. */
static void test_write_parents(struct agent_conn *c)
{
	char p[512], d[512];
	json_t *res = NULL;
	struct stat st;

	ok(agent_conn_has(c, PROTO_FEATURE_WRITE_PARENTS), "HELLO lists write_parents");
	ok(!agent_conn_has(c, "no_such_feature"), "agent_conn_has: an unlisted feature is absent");
	snprintf(p, sizeof(p), "%s/wp/a/b/f.txt", dir);
	write_op(c, json_pack("{s:s,s:s,s:b}", "op", "write", "path", p, "parents", 0), "x", &res);
	ok(!res && lstat(p, &st) < 0 && errno == ENOENT,
	   "write without parents: a missing parent fails it, nothing is made");
	json_decref(res);
	write_op(c, json_pack("{s:s,s:s,s:b}", "op", "write", "path", p, "parents", 1), "body",
		 &res);
	snprintf(d, sizeof(d), "%s/wp/a/b", dir);
	ok(has_str(res, "type", "file") && int_of(res, "size") == 4 && lstat(d, &st) == 0 &&
		   S_ISDIR(st.st_mode) && (st.st_mode & 07777) == (0755 & ~022u),
	   "write with parents makes wp/a/b (0755 less the umask) and the file");
	json_decref(res);
	/* Existing parents are fine; a parent that is a file is reported by the write. */
	write_op(c, json_pack("{s:s,s:s,s:b}", "op", "write", "path", p, "parents", 1), "again",
		 &res);
	ok(int_of(res, "size") == 5, "write with parents over existing directories");
	json_decref(res);
	snprintf(d, sizeof(d), "%s/wp/a/b/f.txt/g.txt", dir);
	write_op(c, json_pack("{s:s,s:s,s:b}", "op", "write", "path", d, "parents", 1), "y", &res);
	ok(!res, "write with parents under a file fails");
	json_decref(res);
}

static void test_files(struct agent_conn *c)
{
	char p[512], q[512], code[32];
	struct agent_chan *ch;
	struct agent_msg m;
	json_t *res = NULL;
	char buf[64] = "";
	size_t got = 0;

	snprintf(p, sizeof(p), "%s/d/e", dir);
	ok(call_ok(c, json_pack("{s:s,s:s,s:b}", "op", "mkdir", "path", p, "parents", 1), &res,
		   NULL, 0) == 0 &&
		   !strcmp(json_string_value(json_object_get(res, "type")), "dir"),
	   "mkdir parents");
	json_decref(res);
	snprintf(p, sizeof(p), "%s/d/e/f.txt", dir);
	agent_chan_open(c, json_pack("{s:s,s:s,s:i}", "op", "write", "path", p, "mode", 0600), &ch,
			NULL);
	agent_chan_send_data(ch, "file body", 9, NULL);
	agent_chan_send_eof(ch, NULL);
	ok(agent_chan_recv(ch, &m, 5000, NULL) == 0 && m.type == PROTO_RESULT &&
		   json_integer_value(json_object_get(m.json, "size")) == 9,
	   "write reports size");
	agent_msg_fini(&m);
	agent_chan_close(ch);
	agent_chan_open(c, json_pack("{s:s,s:s,s:i}", "op", "read", "path", p, "offset", 5), &ch,
			NULL);
	while (agent_chan_recv(ch, &m, 5000, NULL) == 0) {
		int t = m.type;

		if (t == PROTO_STDOUT && got + m.len < sizeof(buf)) {
			memcpy(buf + got, m.data, m.len);
			got += m.len;
		}
		agent_msg_fini(&m);
		if (t == PROTO_EOF || t == PROTO_ERROR)
			break;
	}
	agent_chan_close(ch);
	ok(got == 4 && !memcmp(buf, "body", 4), "read with offset");
	ok(call_ok(c, json_pack("{s:s,s:s}", "op", "stat", "path", p), &res, NULL, 0) == 0 &&
		   json_integer_value(json_object_get(res, "mode")) == 0600 &&
		   json_integer_value(json_object_get(res, "size")) == 9,
	   "stat: size and mode");
	json_decref(res);
	snprintf(q, sizeof(q), "%s/d", dir);
	ok(call_ok(c, json_pack("{s:s,s:s,s:i}", "op", "list", "path", q, "depth", 2), &res, NULL,
		   0) == 0 &&
		   json_array_size(json_object_get(res, "entries")) == 2,
	   "list depth 2 sees dir and file");
	json_decref(res);
	snprintf(q, sizeof(q), "%s/d/g.txt", dir);
	ok(call_ok(c, json_pack("{s:s,s:s,s:s}", "op", "rename", "from", p, "to", q), &res, NULL,
		   0) == 0,
	   "rename");
	json_decref(res);
	ok(call_ok(c, json_pack("{s:s,s:s}", "op", "stat", "path", p), &res, code, sizeof(code)) <
			   0 &&
		   !strcmp(code, "not_found"),
	   "old name is gone (not_found)");
	snprintf(p, sizeof(p), "%s/d", dir);
	ok(call_ok(c, json_pack("{s:s,s:s}", "op", "remove", "path", p), &res, code, sizeof(code)) <
		   0,
	   "remove non-empty dir without recursive fails");
	ok(call_ok(c, json_pack("{s:s,s:s,s:b}", "op", "remove", "path", p, "recursive", 1), &res,
		   NULL, 0) == 0 &&
		   access(p, F_OK) < 0,
	   "remove recursive");
	json_decref(res);
	ok(call_ok(c, json_pack("{s:s,s:s}", "op", "stat", "path", "rel\\u0000x"), &res, code,
		   sizeof(code)) < 0,
	   "path with NUL refused");
}

/* Sends one tar_put with the given entries (JSON array; files get their "data"). */
static int tar_put(struct agent_conn *c, const char *dest, json_t *entries, char *code, size_t clen)
{
	struct agent_chan *ch;
	struct agent_msg m;
	size_t i;
	json_t *e;
	int r = -1;

	agent_chan_open(c, json_pack("{s:s,s:s}", "op", "tar_put", "path", dest), &ch, NULL);
	json_array_foreach(entries, i, e)
	{
		const char *data = json_string_value(json_object_get(e, "data"));
		json_t *h = json_deep_copy(e);

		json_object_del(h, "data");
		agent_chan_send_json(ch, PROTO_ENTRY, h, NULL);
		json_decref(h);
		if (data)
			agent_chan_send_data(ch, data, strlen(data), NULL);
	}
	agent_chan_send_eof(ch, NULL);
	if (agent_chan_recv(ch, &m, 5000, NULL) == 0) {
		r = m.type == PROTO_RESULT ? 0 : -1;
		snprintf(code, clen, "%s",
			 m.type == PROTO_ERROR ? json_string_value(json_object_get(m.json, "code"))
					       : "");
		agent_msg_fini(&m);
	}
	agent_chan_close(ch);
	json_decref(entries);
	return r;
}

static void test_tar(struct agent_conn *c)
{
	char dest[512], p[600], code[32] = "";
	struct agent_chan *ch;
	struct agent_msg m;
	int entries = 0, files = 0;
	long bytes = 0;

	snprintf(dest, sizeof(dest), "%s/dest", dir);
	mkdir(dest, 0755);
	ok(tar_put(c, dest,
		   json_pack("[{s:s,s:s,s:i},{s:s,s:s,s:i,s:i,s:s}]", "name", "sub", "type", "dir",
			     "mode", 0755, "name", "sub/a.txt", "type", "file", "size", 5, "mode",
			     04755, "data", "hello"),
		   code, sizeof(code)) == 0,
	   "tar_put extracts a dir and a file");
	snprintf(p, sizeof(p), "%s/sub/a.txt", dest);
	{
		struct stat st;

		ok(stat(p, &st) == 0 && st.st_size == 5 && !(st.st_mode & 06000),
		   "file extracted, setuid stripped");
	}
	ok(tar_put(c, dest,
		   json_pack("[{s:s,s:s,s:i,s:s}]", "name", "../escape", "type", "file", "size", 1,
			     "data", "x"),
		   code, sizeof(code)) < 0 &&
		   !strcmp(code, "forbidden"),
	   "tar_put refuses ../ names");
	snprintf(p, sizeof(p), "%s/escape", dir);
	ok(access(p, F_OK) < 0, "nothing written outside");
	ok(tar_put(c, dest,
		   json_pack("[{s:s,s:s,s:i,s:s}]", "name", "/etc/evil", "type", "file", "size", 1,
			     "data", "x"),
		   code, sizeof(code)) < 0 &&
		   !strcmp(code, "forbidden"),
	   "tar_put refuses absolute names");
	ok(tar_put(c, dest,
		   json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:i,s:s}]", "name", "link", "type", "symlink",
			     "target", dir, "name", "link/pwned", "type", "file", "size", 1, "data",
			     "x"),
		   code, sizeof(code)) < 0 &&
		   !strcmp(code, "forbidden"),
	   "tar_put refuses a file under a symlink it planted");
	snprintf(p, sizeof(p), "%s/pwned", dir);
	ok(access(p, F_OK) < 0, "symlink escape wrote nothing");
	ok(tar_put(c, dest,
		   json_pack("[{s:s,s:s,s:s}]", "name", "hl", "type", "hardlink", "target",
			     "../../etc/passwd"),
		   code, sizeof(code)) < 0,
	   "tar_put refuses hardlinks outside the destination");
	ok(tar_put(c, dest, json_pack("[{s:s,s:s}]", "name", "dev", "type", "chardev"), code,
		   sizeof(code)) < 0,
	   "tar_put refuses device nodes");
	snprintf(p, sizeof(p), "%s/sub", dest);
	agent_chan_open(c, json_pack("{s:s,s:s}", "op", "tar_get", "path", p), &ch, NULL);
	while (agent_chan_recv(ch, &m, 5000, NULL) == 0) {
		int t = m.type;

		if (t == PROTO_ENTRY) {
			entries++;
			files +=
				!strcmp(json_string_value(json_object_get(m.json, "type")), "file");
		} else if (t == PROTO_STDOUT) {
			bytes += (long)m.len;
		}
		agent_msg_fini(&m);
		if (t == PROTO_EOF || t == PROTO_ERROR)
			break;
	}
	agent_chan_close(ch);
	ok(entries == 2 && files == 1 && bytes == 5,
	   "tar_get of a directory: %d entries, %ld bytes", entries, bytes);
}

static void test_violation(struct agent_conn **cp)
{
	uint8_t hdr[PROTO_HEADER_SIZE] = {0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 2, 0, 0, 0};
	char hello[] = "{\"version\":1}";
	struct proto_header h = {.len = sizeof(hello) - 1, .channel = 0, .type = PROTO_HELLO};
	uint8_t hh[PROTO_HEADER_SIZE], buf[4096];
	json_t *res = NULL;
	int pid, fd, alive = 0;
	ssize_t n;
	size_t i;

	agent_call(*cp,
		   json_pack("{s:s,s:[s,s],s:b}", "op", "exec", "argv", "sleep", "30", "background",
			     1),
		   5000, &res, NULL);
	pid = (int)json_integer_value(json_object_get(res, "pid"));
	json_decref(res);
	agent_conn_free(*cp);
	*cp = NULL;
	fd = dial();
	proto_header_encode(&h, hh);
	util_write_all(fd, hh, sizeof(hh));
	util_write_all(fd, hello, sizeof(hello) - 1);
	util_write_all(fd, hdr, sizeof(hdr)); /* 4 GiB OPEN: oversized */
	for (i = 0; i < 100 && (n = read(fd, buf, sizeof(buf))) > 0; i++)
		;
	ok(n == 0, "oversized frame: agent closes the connection");
	close(fd);
	*cp = connect_agent();
	ok(*cp != NULL, "reconnect after violation");
	if (!*cp)
		return;
	agent_call(*cp, json_pack("{s:s}", "op", "ps"), 5000, &res, NULL);
	{
		json_t *e;

		json_array_foreach(json_object_get(res, "processes"), i,
				   e) if (json_integer_value(json_object_get(e, "pid")) == pid &&
					  json_is_true(json_object_get(e, "running"))) alive = 1;
	}
	json_decref(res);
	ok(alive, "background process survived the violation and shows in ps");
	ok(call_ok(*cp, json_pack("{s:s,s:i,s:i}", "op", "signal", "pid", pid, "signal", 9), &res,
		   NULL, 0) == 0,
	   "signal op kills it");
	json_decref(res);
}

int main(int argc, char **argv)
{
	const char *exe = argc > 1 ? argv[1] : getenv("ISOLA_AGENT");
	struct agent_conn *c;

	signal(SIGPIPE, SIG_IGN);
	if (!exe || !mkdtemp(dir)) {
		printf("1..0 # SKIP no agent binary\n");
		return 0;
	}
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	agent_pid = fork();
	if (agent_pid == 0) {
		execl(exe, exe, "--listen", sock, (char *)NULL);
		_exit(127);
	}
	c = connect_agent();
	if (!ok(c != NULL, "connect and HELLO"))
		goto out;
	ok(json_integer_value(json_object_get(agent_conn_hello(c), "version")) == 1,
	   "agent speaks version 1");
	test_exec(c);
	test_background(c);
	test_flood(c);
	test_files(c);
	test_write_entry(c);
	test_write_parents(c);
	test_tar(c);
	test_violation(&c);
	agent_conn_free(c);
out:
	kill(agent_pid, SIGTERM);
	waitpid(agent_pid, NULL, 0);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd)) {
		}
	}
	return tap_done();
}
