# SPDX-License-Identifier: Apache-2.0
"""Allowed calls still work: the seccomp allowlist, the empty capability sets and the masked
filesystem must not break what agents run. Python (threads, multiprocessing over /dev/shm,
subprocess, asyncio + loopback sockets, sqlite), node (child_process, worker_threads, http
on loopback), gcc (compile + run a program using fork, threads, mmap, pipes, epoll,
timerfd, eventfd, inotify, POSIX mqueues) and git (init, add, commit, log, branch)."""

import shutil

import pytest

PY = r"""
import asyncio, multiprocessing as mp, os, sqlite3, subprocess, tempfile, threading

def sq(x):
    return x * x

async def echo():
    async def handle(r, w):
        w.write(await r.read(5)); await w.drain(); w.close()
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"hello"); await w.drain()
    data = await r.read(5)
    srv.close()
    return data

if __name__ == "__main__":
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    with mp.Pool(2) as p:
        assert p.map(sq, range(5)) == [0, 1, 4, 9, 16]
    q = mp.Queue(); q.put(7); assert q.get(timeout=10) == 7
    assert subprocess.run(["true"]).returncode == 0
    assert asyncio.run(echo()) == b"hello"
    db = sqlite3.connect(os.path.join(tempfile.mkdtemp(), "x.db"))
    db.execute("create table t(x)"); db.execute("insert into t values (42)")
    assert db.execute("select x from t").fetchone() == (42,)
    print("python ok")
"""

NODE = r"""
const cp = require('child_process'), http = require('http');
const { Worker } = require('worker_threads');
const fs = require('fs'), os = require('os'), path = require('path');
const d = fs.mkdtempSync(path.join(os.tmpdir(), 'n'));
fs.writeFileSync(path.join(d, 'f'), 'x'.repeat(100000));
if (cp.execFileSync('sh', ['-c', 'echo 21']).toString().trim() !== '21') throw 'exec';
new Worker('require("worker_threads").parentPort.postMessage(6*7)', { eval: true })
  .on('message', (m) => {
    if (m !== 42) throw 'worker';
    const srv = http.createServer((q, r) => r.end('pong')).listen(0, '127.0.0.1', () => {
      http.get({ host: '127.0.0.1', port: srv.address().port }, (r) => {
        let b = ''; r.on('data', (c) => b += c);
        r.on('end', () => { srv.close(); if (b !== 'pong') throw 'http'; console.log('node ok'); });
      });
    });
  });
"""

C = r"""
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

static void *th(void *a) { return (char *)a + 1; }

int main(void)
{
	pthread_t t; void *r; int p[2], st; char c;
	struct itimerspec its = {.it_value = {0, 1000000}};
	int ep = epoll_create1(0), tf = timerfd_create(CLOCK_MONOTONIC, 0), ef = eventfd(0, 0);
	struct epoll_event ev = {.events = EPOLLIN}, out;
	char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mqd_t q = mq_open("/isola", O_CREAT | O_RDWR, 0600, NULL);

	if (pthread_create(&t, NULL, th, (void *)1) || pthread_join(t, &r) || r != (void *)2) return 1;
	if (pipe(p) || fork() == 0) _exit(write(p[1], "k", 1) == 1 ? 0 : 1);
	if (read(p[0], &c, 1) != 1 || c != 'k' || wait(&st) < 0 || st) return 2;
	if (m == MAP_FAILED || (memset(m, 1, 1 << 20), m[4095] != 1)) return 3;
	if (ep < 0 || tf < 0 || ef < 0 || timerfd_settime(tf, 0, &its, NULL)) return 4;
	ev.data.fd = tf;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, tf, &ev) || epoll_wait(ep, &out, 1, 5000) != 1) return 5;
	if (inotify_init1(0) < 0) return 6;
	if (q == (mqd_t)-1 || mq_send(q, "m", 1, 0) || mq_unlink("/isola")) return 7;
	printf("c ok\n");
	return 0;
}
"""


def test_python(api, sandbox):
    api.write_file(sandbox["id"], "/tmp/t.py", PY.encode())
    res = api.exec(sandbox["id"], cmd=["python3", "/tmp/t.py"], timeout=120)
    assert res["exit_code"] == 0 and res["stdout"] == "python ok\n", res


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed on this host")
def test_node(api, sandbox):
    api.write_file(sandbox["id"], "/tmp/t.js", NODE.encode())
    res = api.exec(sandbox["id"], cmd=["node", "/tmp/t.js"], timeout=120)
    assert res["exit_code"] == 0 and res["stdout"] == "node ok\n", res


@pytest.mark.skipif(not shutil.which("gcc"), reason="gcc is not installed on this host")
def test_gcc_compile_and_run(api, sandbox):
    sid = sandbox["id"]
    api.write_file(sid, "/tmp/t.c", C.encode())
    res = api.exec(sid, cmd=["gcc", "-O1", "-pthread", "-o", "/tmp/t", "/tmp/t.c", "-lrt"],
                   timeout=120)
    assert res["exit_code"] == 0, res
    res = api.exec(sid, cmd=["/tmp/t"], timeout=60)
    assert res["exit_code"] == 0 and res["stdout"] == "c ok\n", res
    # As an unprivileged user too.
    res = api.exec(sid, cmd=["/tmp/t"], user="user", cwd="/tmp", timeout=60)
    assert res["exit_code"] == 0, res


@pytest.mark.skipif(not shutil.which("git"), reason="git is not installed on this host")
def test_git(api, sandbox):
    out = api.sh(sandbox["id"],
                 "set -e; mkdir -p /tmp/repo && cd /tmp/repo && git init -q -b main . && "
                 "git config user.email a@b.c && git config user.name agent && "
                 "echo hi > f && git add f && git commit -q -m first && "
                 "git checkout -q -b feature && echo more >> f && git commit -qam second && "
                 "git log --format=%s | tr '\\n' ' '; git status --porcelain | wc -l",
                 timeout=120)
    assert out.split() == ["second", "first", "0"], out
