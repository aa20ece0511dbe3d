# SPDX-License-Identifier: Apache-2.0
"""The Python SDK's persistence, lifecycle, pool, network and exposure calls against a real
isolad: every result is judged by what the sandbox holds (files, processes), not by the
SDK's own reply alone."""

import importlib.util
import json
import socket
import time
import uuid
from pathlib import Path

import pytest

import isola

# tests/conftest.py's Isolad under a module name of its own (`conftest` here is tests/sdk's).
_spec = importlib.util.spec_from_file_location(
    "isola_tests_conftest_sdk", Path(__file__).resolve().parents[1] / "conftest.py")
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)
Isolad = _root.Isolad


def _name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_pause_resume_keeps_processes_and_files(sb):
    sb.files.write("/tmp/kept.txt", b"before pause")
    p = sb.processes.start(["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done"])
    time.sleep(0.3)
    info = sb.pause()
    assert info.state == "paused" and info.persistence["pause"] in ("files+memory",), info
    n1 = None
    with pytest.raises(isola.ConflictError):
        sb.files.read("/tmp/n")  # a paused sandbox's agent is stopped too; explicit pauses stay
    info = sb.resume()
    assert info.state == "running"
    n1 = int(sb.files.read("/tmp/n"))
    time.sleep(0.3)
    n2 = int(sb.files.read("/tmp/n"))
    assert n2 > n1, "the counting process runs again after resume"
    assert [x.pid for x in sb.processes.list() if x.pid == p.pid], "same process, not a new one"
    assert sb.files.read("/tmp/kept.txt") == b"before pause"


def test_hibernate_then_resume_keeps_files(sb):
    sb.files.write("/home/kept.txt", b"hibernated")
    info = sb.hibernate()
    assert info.state == "hibernated" and info.persistence["hibernate"] in ("files", "files+memory")
    assert sb.resume().state == "running"
    assert sb.files.read("/home/kept.txt") == b"hibernated"


def test_snapshot_seeds_sandboxes_and_outlives_its_source(client):
    name = _name("sdk-snap")
    src = client.create_sandbox(labels={"suite": "sdk"})
    made = []
    try:
        src.files.write("/home/data.txt", b"from the snapshot")
        snap = src.snapshot(name)
        assert snap.name == name and snap.size > 0 and snap.level in ("files", "files+memory")
        src.delete()
        assert client.get_snapshot(name).id == snap.id
        assert name in [s.name for s in client.list_snapshots()]
        for _ in range(2):
            sb = client.create_sandbox(snapshot=name, labels={"suite": "sdk"})
            made.append(sb)
            assert sb.files.read("/home/data.txt") == b"from the snapshot"
        made[0].files.write("/home/data.txt", b"changed")
        assert made[1].files.read("/home/data.txt") == b"from the snapshot"
    finally:
        for sb in made:
            sb.delete()
        try:
            src.delete()
        except isola.NotFoundError:
            pass
    client.delete_snapshot(name)
    with pytest.raises(isola.NotFoundError):
        client.get_snapshot(name)
    with pytest.raises(isola.NotFoundError):
        client.create_sandbox(snapshot=name)


def test_fork_children_have_the_files_and_their_own_identity(sb):
    sb.files.write("/tmp/state.txt", b"parent")
    kids = sb.fork(count=2)
    try:
        assert len(kids) == 2 and isinstance(sb.last_fork["paused_us"], int)
        ids = {k.id for k in kids}
        assert len(ids) == 2 and sb.id not in ids
        hosts = set()
        for k in kids:
            assert k.files.read("/tmp/state.txt") == b"parent"
            hosts.add(k.exec(["hostname"]).stdout.strip())
        assert len(hosts) == 2, hosts
        kids[0].files.write("/tmp/state.txt", b"child0")
        assert kids[1].files.read("/tmp/state.txt") == b"parent"
        assert sb.files.read("/tmp/state.txt") == b"parent"
    finally:
        for k in kids:
            k.delete()


def test_lifecycle_is_set_and_reported(sb):
    info = sb.set_lifecycle(on_timeout="hibernate", idle_timeout=600)
    assert info.raw.get("on_timeout") == "hibernate", info.raw
    assert info.raw.get("idle_timeout") == 600, info.raw
    with pytest.raises(isola.InvalidError):
        sb.set_lifecycle(on_timeout="explode")


def test_network_policy_round_trip(sb):
    policy = {"default": "deny", "allow": [{"domain": "*.example.org", "ports": [443]}]}
    sb.set_network(policy)
    got = sb.network()
    rules = json.dumps(got.get("policy", got))
    assert "*.example.org" in rules, got
    with pytest.raises(isola.InvalidError):
        sb.set_network({"allow": [{"cidr": "not-a-cidr"}]})


def test_pools_are_listed(client):
    pools = client.list_pools()
    assert isinstance(pools, list)


@pytest.fixture(scope="module")
def exposing():
    """An isolad of its own with an exposure listener on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = Isolad(extra_args=["--expose-listen", f"127.0.0.1:{port}"])
    yield d, port
    d.discard()


def test_expose_reaches_a_server_inside(exposing):
    d, port = exposing
    c = isola.Client(socket_path=d.socket, timeout=30)
    with c.create_sandbox(labels={"suite": "sdk"}) as sb:
        sb.files.mkdir("/tmp/www")
        sb.files.write("/tmp/www/index.html", b"hello through the tunnel")
        sb.processes.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                            "--directory", "/tmp/www"])
        e = sb.expose(8000)
        assert e.port == 8000 and e.token and not e.public
        assert [x.port for x in sb.ports()] == [8000]
        deadline = time.time() + 20
        body = b""
        while time.time() < deadline:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                host = e.url.split("//", 1)[1].split("/", 1)[0]
                s.sendall(f"GET /index.html HTTP/1.1\r\nHost: {host}\r\n"
                          f"X-Isola-Access-Token: {e.token}\r\nConnection: close\r\n\r\n".encode())
                body = b""
                while chunk := s.recv(65536):
                    body += chunk
            if b" 200 " in body.split(b"\r\n", 1)[0]:
                break
            time.sleep(0.2)
        assert body.endswith(b"hello through the tunnel"), body[:300]
        sb.unexpose(8000)
        assert sb.ports() == []
