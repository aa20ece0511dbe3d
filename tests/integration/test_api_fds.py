# SPDX-License-Identifier: Apache-2.0
"""The API answers every connection whatever its fd number (src/isolad/api/server.c
daemon_start): with 1,500 idle connections held open in isolad (so every new one gets an fd
far past FD_SETSIZE = 1024), 200 concurrent requests through the Python SDK and 50 concurrent
`isola ls` through the CLI are all answered.
libmicrohttpd's select() mode closed each connection whose fd was >= 1024 and its old limit
of 512 connections refused the rest."""

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tenancy_util import ROOT_CONFTEST

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

import isola  # noqa: E402

IDLE = 1500
CONCURRENT = 200


@pytest.fixture(scope="module")
def own_isolad():
    """An isolad of this module's own: 1,700 connections would crowd the session's."""
    d = ROOT_CONFTEST.Isolad(extra_args=["--idle-timeout", "900"])  # held conns stay
    yield d
    if d.alive():
        d.stop()
    assert not d.new_sanitizer_reports()


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_1500_held_fds_and_200_concurrent_requests(own_isolad):
    d = own_isolad
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE + CONCURRENT + 200
    assert hard >= need, f"the test needs RLIMIT_NOFILE >= {need} (hard limit {hard})"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    # The start's health-check connection goes away first: the lowest of a few samples.
    base = fd_count(d.pid)
    for _ in range(10):
        time.sleep(0.1)
        base = min(base, fd_count(d.pid))
    held = []
    try:
        for _ in range(IDLE):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.socket)
            held.append(s)
        # Every idle connection accepted and kept: isolad holds >= 1,500 more fds.
        deadline = time.monotonic() + 120
        while fd_count(d.pid) < base + IDLE and time.monotonic() < deadline:
            time.sleep(0.2)
        now = fd_count(d.pid)
        assert now >= base + IDLE, (f"isolad holds {now} fds ({base} before): it dropped "
                                    f"idle connections instead of keeping {IDLE}")
        results = [None] * CONCURRENT
        go = threading.Barrier(CONCURRENT)

        def one(i):
            c = isola.Client(socket_path=d.socket, timeout=120)
            try:
                go.wait(60)
                if i % 2:
                    c.health()
                else:
                    assert isinstance(c.list_sandboxes(), list)
                results[i] = "ok"
            except Exception as e:  # noqa: BLE001 - counted below
                results[i] = f"{type(e).__name__}: {e}"

        threads = [threading.Thread(target=one, args=(i,)) for i in range(CONCURRENT)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        failed = [(i, r) for i, r in enumerate(results) if r != "ok"]
        assert not failed, (f"{len(failed)} of {CONCURRENT} requests failed with {IDLE} "
                            f"connections held: {failed[:5]}")
        # 50 concurrent `isola ls` through the real CLI (46 of 50 failed before).
        procs = [subprocess.Popen([str(ROOT_CONFTEST.CLI), "--socket", d.socket, "--json",
                                   "ls"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL) for _ in range(50)]
        bad = []
        for p in procs:
            out, err = p.communicate(timeout=180)
            if p.returncode != 0:
                bad.append((p.returncode, err.decode(errors="replace")[:200]))
        assert not bad, f"{len(bad)} of 50 concurrent `isola ls` failed: {bad[:3]}"
        # The held connections are still served too (the oldest ones and the newest ones).
        for s in (held[0], held[-1]):
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            s.settimeout(30)
            assert s.recv(64).startswith(b"HTTP/1.1 200"), "a held connection was dropped"
    finally:
        for s in held:
            s.close()
    assert d.alive()
