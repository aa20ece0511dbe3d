# SPDX-License-Identifier: Apache-2.0
"""Templates over the API: list, import (docker-archive and OCI layout built here with the
tarfile module) with NDJSON progress, run a static binary from the image, layer whiteouts,
image config (env, workdir), removal rules."""

import uuid

import pytest

import imagebuild
import isola_client as ic


@pytest.fixture(scope="module")
def hello(tmp_path_factory):
    return imagebuild.build_hello(tmp_path_factory.mktemp("hello"))


def import_template(api, name, body, timeout=120):
    """POST /v1/templates?name=NAME; returns (status, events or error Response)."""
    s = api.stream("POST", "/v1/templates", body=body, query={"name": name},
                   headers={"Content-Type": "application/x-tar"}, kind="ndjson", timeout=timeout)
    with s:
        if s.status != 200:
            return s.status, s.body_if_error()
        return s.status, s.read_all(timeout=timeout)


def templates(api):
    return ic.item_list(api.get_json("/v1/templates"), "templates")


def test_host_template_listed(api):
    host = [t for t in templates(api) if t["name"] == "host"]
    assert len(host) == 1, templates(api)
    assert host[0]["source"] == "host"


@pytest.mark.parametrize("fmt", ["docker-archive", "oci"])
def test_import_run_remove(api, make_sandbox, hello, fmt):
    name = f"it-{fmt}-{uuid.uuid4().hex[:6]}"
    body = imagebuild.docker_archive(hello) if fmt == "docker-archive" else \
        imagebuild.oci_layout(hello)
    status, events = import_template(api, name, body)
    assert status == 200, events
    types = [e.get("type") for e in events]
    assert types[-1] == "done", events
    assert not [e for e in events if e.get("type") == "error"], events
    assert "progress" in types or len(types) >= 1
    tpl = events[-1]["template"]
    assert tpl["name"] == name and tpl["source"] == fmt, tpl
    assert name in [t["name"] for t in templates(api)]
    try:
        sb = make_sandbox(template=name)
        assert sb["template"] == name
        sid = sb["id"]
        res = api.exec(sid, cmd=["/hello"])
        assert res["exit_code"] == 0 and res["stdout"] == "hello from template\n", res
        assert api.exec(sid, cmd=["/hello", "exit", "9"])["exit_code"] == 9
        # PATH from the image config finds bin/hello; Env and WorkingDir apply.
        assert api.exec(sid, cmd=["hello", "env", "GREETING"])["stdout"] == "from-image\n"
        assert api.exec(sid, cmd=["/hello", "cwd"])["stdout"] == "/work\n"
        # The second layer's whiteout removed /etc/old and added /etc/new.
        assert api.exec(sid, cmd=["/hello", "exists", "/etc/old"])["stdout"] == "no\n"
        assert api.read_file(sid, "/etc/new") == b"added by layer 2\n"
        assert api.request("GET", f"/v1/sandboxes/{sid}/files",
                           query={"path": "/etc/old"}).status == 404
        # No host files leak into an image sandbox.
        assert api.exec(sid, cmd=["/hello", "exists", "/usr/bin/python3"])["stdout"] == "no\n"
        # Writes go to the sandbox's layer, not the template.
        api.write_file(sid, "/etc/new", b"changed")
        sb2 = make_sandbox(template=name)
        assert api.read_file(sb2["id"], "/etc/new") == b"added by layer 2\n"
        # In use: removal refused.
        r = api.request("DELETE", f"/v1/templates/{name}")
        assert r.status == 409, r
        assert r.error_code == "conflict"
        # The image's /etc/passwd names `user`.
        assert api.exec(sid, cmd=["/hello", "id"], user="user")["stdout"] == "1000\n"
        for x in (sid, sb2["id"]):
            assert api.delete_sandbox(x).status == 204
    finally:
        r = api.request("DELETE", f"/v1/templates/{name}")
    assert r.status == 204, r
    assert name not in [t["name"] for t in templates(api)]
    r = api.request("POST", "/v1/sandboxes", json={"template": name})
    assert r.status == 404, r


def test_import_errors(api, hello):
    good = imagebuild.docker_archive(hello)
    for bad_name in ("", "../x", "a/b", "x" * 64, ".", ".."):
        status, err = import_template(api, bad_name, good)
        assert status == 400, (bad_name, err)
    name = f"it-dup-{uuid.uuid4().hex[:6]}"
    status, events = import_template(api, name, good)
    assert status == 200 and events[-1]["type"] == "done", events
    try:
        status, res = import_template(api, name, good)
        if status == 200:
            assert res[-1]["type"] == "error" and res[-1].get("code") == "conflict", res
        else:
            assert status == 409, res
    finally:
        assert api.request("DELETE", f"/v1/templates/{name}").status == 204
    before = sorted(t["name"] for t in templates(api))
    status, res = import_template(api, f"it-garbage-{uuid.uuid4().hex[:6]}", b"not a tar" * 1000)
    if status == 200:
        assert res[-1]["type"] == "error", res
        assert res[-1].get("message"), res
    else:
        assert status == 400, res
    assert sorted(t["name"] for t in templates(api)) == before, "a failed import left a template"


def test_host_template_cannot_be_removed(api):
    r = api.request("DELETE", "/v1/templates/host")
    assert r.status in (403, 409), r
    assert "host" in [t["name"] for t in templates(api)]


def test_remove_unknown_template(api):
    r = api.request("DELETE", "/v1/templates/no-such-template")
    assert r.status == 404, r
    assert r.error_code == "not_found"
