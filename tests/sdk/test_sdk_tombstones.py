# SPDX-License-Identifier: Apache-2.0
"""The Python SDK's names and tombstones (issue 15): create with a name, get by name, wait for
the end, list ended sandboxes, prune, and the typed 410 / 409 errors."""

import pytest

import isola


def test_name_and_get_by_name(client):
    sb = client.create_sandbox(name="py-named", labels={"suite": "sdk"})
    try:
        assert sb.info.name == "py-named"
        got = client.get_sandbox("py-named")
        assert got.id == sb.id and got.info.name == "py-named"
        assert client.sandbox("py-named").exec("echo hi", timeout=20).stdout == "hi\n"
        with pytest.raises(isola.NameTakenError) as ei:
            client.create_sandbox(name="py-named")
        assert ei.value.status == 409 and sb.id in ei.value.message
        assert isinstance(ei.value, isola.ConflictError)
    finally:
        sb.delete()


def test_wait_list_all_and_prune(client):
    sb = client.create_sandbox(ttl=2, name="py-ttl", labels={"suite": "sdk", "case": "tomb"})
    t = sb.wait(timeout=120)
    assert (t.state, t.end_reason, t.detail, t.name) == ("ended", "expired", "ttl 2s", "py-ttl")
    with pytest.raises(isola.SandboxEndedError) as ei:
        client.get_sandbox("py-ttl")
    e = ei.value
    assert e.status == 410 and e.end_reason == "expired" and e.ended_at == t.ended_at
    assert "(ttl 2s) and was destroyed" in e.message
    assert [s.id for s in client.list_sandboxes(labels={"case": "tomb"})] == []
    ended = client.list_sandboxes(labels={"case": "tomb"}, all=True)
    assert [(s.id, s.info.state) for s in ended] == [(sb.id, "ended")]
    assert sb.id in client.prune(states=["ended"])
    with pytest.raises(isola.NotFoundError) as ei:
        client.get_sandbox(sb.id)
    assert ei.value.status == 404


def test_wait_timeout_on_a_running_sandbox(client, sb):
    with pytest.raises(isola.TimeoutError):
        sb.wait(timeout=0.5)
