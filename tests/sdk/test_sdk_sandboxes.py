# SPDX-License-Identifier: Apache-2.0
"""Python SDK: host calls, sandbox lifecycle, errors, transports."""

import os
import time

import pytest

import isola


def test_health_and_doctor(client):
    h = client.health()
    assert h.status == "ok" and h.version
    d = client.doctor()
    assert isinstance(d, dict) and d, d


def test_create_get_list_delete(client):
    sb = client.create_sandbox(memory="256M", labels={"suite": "sdk", "case": "lifecycle"},
                               env={"FOO": "bar"})
    try:
        assert isinstance(sb.info, isola.SandboxInfo)
        assert sb.info.state == "running" and sb.info.tier == "process"
        assert sb.info.memory == 256 * 1024 * 1024
        assert sb.info.labels == {"suite": "sdk", "case": "lifecycle"}
        got = client.get_sandbox(sb.id)
        assert got.info.id == sb.id and got.info.template == sb.info.template
        ids = [s.id for s in client.list_sandboxes(labels={"case": "lifecycle"})]
        assert ids == [sb.id]
        assert client.list_sandboxes(labels={"case": "lifecycle", "suite": "other"}) == []
        assert sb.id in [s.id for s in client.list_sandboxes()]
        assert sb.exec("echo $FOO", timeout=20).stdout == "bar\n"
    finally:
        sb.delete()
    with pytest.raises(isola.SandboxEndedError) as ei:  # a NotFoundError that says why
        client.get_sandbox(sb.id)
    assert ei.value.status == 410 and ei.value.code == "sandbox_ended" and ei.value.message
    assert ei.value.end_reason == "destroyed" and ei.value.ended_at
    with pytest.raises(isola.NotFoundError) as ei:
        client.get_sandbox("nosuchsandbox000")
    assert ei.value.status == 404 and ei.value.code == "not_found" and ei.value.message
    with pytest.raises(isola.NotFoundError):
        sb.delete()


def test_context_manager_destroys(client):
    with client.create_sandbox() as sb:
        sid = sb.id
        assert sb.state == "running"
    with pytest.raises(isola.NotFoundError):
        client.get_sandbox(sid)


def test_set_timeout(sb):
    before = time.time()
    info = sb.set_timeout(600)
    assert info.expires_at is not None
    assert before + 590 <= info.expires_at <= time.time() + 610, info
    assert sb.refresh().expires_at == pytest.approx(info.expires_at, abs=1)


def test_validation_errors_are_typed(client):
    with pytest.raises(isola.InvalidError) as ei:
        client.create_sandbox(tier="bogus")
    assert ei.value.status == 400 and ei.value.code == "invalid"
    with pytest.raises(isola.NotFoundError):
        client.create_sandbox(template="no-such-template")
    with pytest.raises(isola.InvalidError) as ei:
        client.create_sandbox(memory="1M")
    assert ei.value.status == 400 and "memory" in ei.value.message


def test_unknown_sandbox_everywhere(client):
    ghost = client.sandbox("nosuchsandbox")
    for call in (lambda: ghost.exec("true", timeout=5), lambda: ghost.files.read("/x"),
                 lambda: ghost.processes.list(), lambda: ghost.set_timeout(5)):
        with pytest.raises(isola.NotFoundError):
            call()


def test_tcp_with_token(isolad):
    c = isola.Client(url=isolad.url, token=isolad.token, timeout=30)
    assert c.health().status == "ok"
    sb = c.create_sandbox()
    try:
        assert sb.exec(["echo", "over", "tcp"], timeout=20).stdout == "over tcp\n"
        with sb.pty(["/bin/sh"]) as pty:
            pty.send("echo tc$((1+1))p\n")
            pty.read_until(rb"tc2p", timeout=20)
    finally:
        sb.delete()
    bad = isola.Client(url=isolad.url, token="wrong", timeout=10)
    assert bad.health().status == "ok"  # health needs no token
    with pytest.raises(isola.UnauthorizedError) as ei:
        bad.list_sandboxes()
    assert ei.value.status == 401
    with pytest.raises(isola.UnauthorizedError):
        isola.Client(url=isolad.url, token="wrong").sandbox("x").attach(1)


def test_environment_configuration(isolad, monkeypatch):
    monkeypatch.setenv("ISOLA_SOCKET", isolad.socket)
    monkeypatch.delenv("ISOLA_URL", raising=False)
    assert isola.Client().health().status == "ok"
    monkeypatch.setenv("ISOLA_URL", isolad.url)
    monkeypatch.setenv("ISOLA_TOKEN", isolad.token)
    assert isola.Client().list_sandboxes() is not None


def test_unreachable_daemon(tmp_path):
    c = isola.Client(socket_path=str(tmp_path / "none.sock"), timeout=5)
    with pytest.raises(isola.UnavailableError) as ei:
        c.health()
    assert ei.value.status is None and ei.value.code == "unavailable"
    with pytest.raises(ValueError):
        isola.Client(url="ftp://x")
