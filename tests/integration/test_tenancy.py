# SPDX-License-Identifier: Apache-2.0
"""Tenants and tokens (issue 8): tokens hashed at rest, each tenant sees only its own sandboxes
and templates (another tenant's answers exactly like a missing id), roles enforced, revocation,
the legacy api.token and the unix socket as the admin of `default`, and the CLI."""

import glob
import json
import os
import uuid

import pytest

import imagebuild
import isola_client as ic
from tenancy_util import Tenant


@pytest.fixture
def tenants(isolad):
    made = []

    def make(role="user", **quota):
        t = Tenant(isolad, role=role, **quota)
        made.append(t)
        return t

    yield make
    for t in made:
        t.cleanup()


def db_bytes(isolad):
    data = b""
    for p in glob.glob(os.path.join(isolad.state_dir, "isola.db*")):
        with open(p, "rb") as f:
            data += f.read()
    return data


def test_tokens_are_hashed_at_rest(isolad, tenants):
    t = tenants()
    secret = t.token
    assert secret.startswith("isola_") and len(secret) > 40
    raw = db_bytes(isolad)
    assert raw, "no database file found"
    secret_part = secret.split("_", 2)[2]
    assert secret.encode() not in raw and secret_part.encode() not in raw, \
        "the token's secret is stored in the database"
    # ...and the id is there (the inventory needs it), so the grep above looked at the right file.
    assert t.tokens[0]["id"].encode() in raw
    # The token works, so what is stored is enough to check it.
    assert t.client.get_json("/v1/whoami") == {"who": f"token:{t.tokens[0]['id']}",
                                               "tenant": t.name, "role": "user"}


def test_another_tenants_sandbox_is_indistinguishable_from_missing(isolad, tenants):
    a, b = tenants(), tenants()
    sb = a.client.create_sandbox()
    sid = sb["id"]
    assert sb["tenant"] == a.name
    missing = "zz" + uuid.uuid4().hex[:14]
    for method, path, body in (("GET", "/v1/sandboxes/{}", None),
                               ("DELETE", "/v1/sandboxes/{}", None),
                               ("POST", "/v1/sandboxes/{}/exec", {"cmd": ["true"]}),
                               ("GET", "/v1/sandboxes/{}/stats", None),
                               ("GET", "/v1/sandboxes/{}/files", None),
                               ("POST", "/v1/sandboxes/{}/timeout", {"ttl": 60})):
        q = {"path": "/etc/hostname"} if path.endswith("files") else None
        theirs = b.client.request(method, path.format(sid), json=body, query=q)
        absent = b.client.request(method, path.format(missing), json=body, query=q)
        assert theirs.status == absent.status == 404, (method, path, theirs, absent)
        assert theirs.error_code == absent.error_code
        assert theirs.error_message.replace(sid, "X") == absent.error_message.replace(missing, "X")
    # Not in B's list, nor in the operator's `default` view; still alive for A.
    assert sid not in [s["id"] for s in b.client.list_sandboxes()]
    assert sid not in [s["id"] for s in isolad.client().list_sandboxes()]
    assert isolad.client().request("GET", f"/v1/sandboxes/{sid}").status == 404
    assert a.client.get_json(f"/v1/sandboxes/{sid}")["state"] == "running"
    assert a.client.exec(sid, cmd=["true"])["exit_code"] == 0
    assert a.client.delete_sandbox(sid).status == 204


def test_templates_are_per_tenant(isolad, tenants, tmp_path):
    a, b = tenants(), tenants()
    name = f"tt-{uuid.uuid4().hex[:6]}"
    body = imagebuild.docker_archive(imagebuild.build_hello(tmp_path))
    s = a.client.stream("POST", "/v1/templates", body=body, query={"name": name},
                        headers={"Content-Type": "application/x-tar"}, kind="ndjson",
                        timeout=120)
    with s:
        assert s.status == 200
        events = s.read_all(timeout=120)
    assert events[-1]["type"] == "done", events
    try:
        names_a = [t["name"] for t in ic.item_list(a.client.get_json("/v1/templates"), "templates")]
        names_b = [t["name"] for t in ic.item_list(b.client.get_json("/v1/templates"), "templates")]
        names_d = [t["name"] for t in ic.item_list(isolad.client().get_json("/v1/templates"),
                                                   "templates")]
        assert name in names_a and "host" in names_a
        assert name not in names_b and "host" in names_b
        assert name not in names_d, "the operator's default tenant sees another tenant's template"
        # Using or removing it from B is the same 404 as a template that does not exist.
        r1 = b.client.request("POST", "/v1/sandboxes", json={"template": name})
        r2 = b.client.request("POST", "/v1/sandboxes", json={"template": name + "-nope"})
        assert r1.status == r2.status == 404, (r1, r2)
        assert r1.error_message.replace(name, "X") == r2.error_message.replace(name + "-nope", "X")
        assert b.client.request("DELETE", f"/v1/templates/{name}").status == 404
        sb = a.client.create_sandbox(template=name)
        assert a.client.exec(sb["id"], cmd=["/hello"])["exit_code"] == 0
        a.client.delete_sandbox(sb["id"])
    finally:
        assert a.client.request("DELETE", f"/v1/templates/{name}").status in (204, 404)


def test_read_only_role_may_only_read(isolad, tenants):
    t = tenants()
    sb = t.client.create_sandbox()
    ro = t.tcp(t.new_token("read-only"))
    assert ro.get_json("/v1/whoami")["role"] == "read-only"
    assert ro.get_json(f"/v1/sandboxes/{sb['id']}")["id"] == sb["id"]
    assert sb["id"] in [s["id"] for s in ro.list_sandboxes()]
    for method, path, body in (("POST", "/v1/sandboxes", {}),
                               ("DELETE", f"/v1/sandboxes/{sb['id']}", None),
                               ("POST", f"/v1/sandboxes/{sb['id']}/exec", {"cmd": ["true"]}),
                               ("POST", f"/v1/sandboxes/{sb['id']}/processes", {"cmd": ["true"]}),
                               ("POST", "/v1/tokens", {"role": "admin"})):
        r = ro.request(method, path, json=body)
        assert r.status == 403 and r.error_code == "forbidden", (method, path, r)
    assert len(t.client.list_sandboxes()) == 1, "a refused create made a sandbox"


def test_doctor_keeps_host_paths_for_the_operator(isolad, tenants):
    """Any token may ask what the host supports; only the operator sees the host's paths."""
    op = isolad.client().get_json("/v1/doctor")
    assert op["state_dir"] == isolad.state_dir, op
    t = tenants(role="admin")
    for role in ("admin", "read-only"):
        doc = t.tcp(t.new_token(role)).get_json("/v1/doctor")
        assert "state_dir" not in doc and "kernel" not in doc.get("microvm", {}), (role, doc)
        assert doc["tier"] == op["tier"] and doc["cgroup"] == op["cgroup"], (role, doc)
        assert isolad.state_dir not in json.dumps(doc), (role, doc)


def test_user_role_is_not_admin(isolad, tenants):
    t = tenants()
    for method, path, body in (("POST", "/v1/tokens", {"role": "admin"}),
                               ("GET", "/v1/tokens", None),
                               ("POST", "/v1/tenants", {"name": "x-evil"}),
                               ("GET", "/v1/tenants", None),
                               ("GET", "/v1/audit/verify", None),
                               ("GET", "/v1/audit/export", None),
                               ("GET", "/v1/compliance", None)):
        r = t.client.request(method, path, json=body)
        assert r.status == 403, (method, path, r)


def test_tenant_admin_is_scoped_to_its_tenant(isolad, tenants):
    a, b = tenants(role="admin"), tenants()
    # Its own tenant: fine, and the token works.
    r = a.client.request("POST", "/v1/tokens", json={"role": "read-only", "name": "ro"})
    assert r.status == 201 and r.json()["tenant"] == a.name, r
    assert a.tcp(r.json()["token"]).get_json("/v1/whoami")["tenant"] == a.name
    # Another tenant: refused; its tokens are invisible; revoking one is 404.
    r = a.client.request("POST", "/v1/tokens", json={"tenant": b.name, "role": "admin"})
    assert r.status == 403, r
    listed = a.client.get_json("/v1/tokens")["tokens"]
    assert listed and {t["tenant"] for t in listed} == {a.name}
    assert all("token" not in t for t in listed), "the inventory leaks secrets"
    r = a.client.request("DELETE", f"/v1/tokens/{b.tokens[0]['id']}")
    assert r.status == 404, r
    assert b.client.get_json("/v1/whoami")["tenant"] == b.name
    # Tenants and the audit trail belong to the operator.
    assert a.client.request("GET", "/v1/tenants").status == 403
    assert a.client.request("GET", f"/v1/tenants/{a.name}").status == 200
    assert a.client.request("GET", f"/v1/tenants/{b.name}").status == 404
    assert a.client.request("GET", "/v1/audit/verify").status == 403


def test_revoked_token_is_refused(isolad, tenants):
    t = tenants()
    tok = t.new_token("user")
    c = t.tcp(tok)
    assert c.request("GET", "/v1/sandboxes").status == 200
    tid = t.tokens[-1]["id"]
    assert isolad.client().request("DELETE", f"/v1/tokens/{tid}").status == 204
    r = c.request("GET", "/v1/sandboxes")
    assert r.status == 401 and r.error_code == "unauthorized", r
    inv = {x["id"]: x for x in isolad.client().get_json("/v1/tokens")["tokens"]}
    assert inv[tid]["active"] is False and inv[tid]["revoked_at"]
    assert inv[tid]["last_used"], "last_used was not recorded"


def test_legacy_token_and_unix_socket_are_default_admin(isolad):
    who = isolad.tcp_client(token=isolad.token).get_json("/v1/whoami")
    assert who == {"who": "api.token", "tenant": "default", "role": "admin"}
    who = isolad.client().get_json("/v1/whoami")
    assert who["tenant"] == "default" and who["role"] == "admin"
    assert who["who"] == f"unix:uid={os.getuid()}"


def test_tenant_with_sandboxes_cannot_be_removed(isolad, tenants):
    t = tenants()
    sb = t.client.create_sandbox()
    r = t.admin.request("DELETE", f"/v1/tenants/{t.name}")
    assert r.status == 409 and r.error_code == "conflict", r
    t.client.delete_sandbox(sb["id"])
    assert t.admin.request("DELETE", f"/v1/tenants/{t.name}").status == 204
    assert t.client.request("GET", "/v1/sandboxes").status == 401, "tokens outlived the tenant"
    assert isolad.client().request("DELETE", "/v1/tenants/default").status == 403


def test_cli_tenant_and_token_lifecycle(isolad, cli):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    cp = cli("tenant", "create", "--max-sandboxes", "3", "--max-memory", "2G", "--rate", "5",
             name)
    assert cp.returncode == 0 and cp.stdout.decode().strip() == name, cp
    cp = cli("token", "create", "--tenant", name, "--role", "read-only", "--name", "ci")
    assert cp.returncode == 0, cp
    secret = cp.stdout.decode().strip()
    assert secret.startswith("isola_"), cp
    assert isolad.tcp_client(token=secret).get_json("/v1/whoami")["role"] == "read-only"
    ls = cli("token", "ls", "--tenant", name)
    assert ls.returncode == 0 and "read-only" in ls.stdout.decode()
    assert secret not in ls.stdout.decode() and secret.split("_", 2)[2] not in ls.stdout.decode()
    tid = secret.split("_")[1]
    assert tid in ls.stdout.decode()
    listed = json.loads(cli("token", "ls", "--tenant", name, json=True).stdout)
    assert [t["id"] for t in listed] == [tid]
    tl = cli("tenant", "ls")
    row = [ln for ln in tl.stdout.decode().splitlines() if ln.startswith(name)]
    assert tl.returncode == 0 and len(row) == 1 and "2" in row[0] and "G" in row[0], tl.stdout
    assert cli("token", "revoke", tid).returncode == 0
    assert isolad.tcp_client(token=secret).request("GET", "/v1/whoami").status == 401
    assert cli("token", "revoke", tid).returncode == 1
    assert cli("tenant", "rm", name).returncode == 0
    assert name not in cli("tenant", "ls").stdout.decode()
    bad = cli("tenant", "create", "Bad_Name")
    assert bad.returncode == 1 and b"invalid tenant name" in bad.stderr, bad
