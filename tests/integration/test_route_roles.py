# SPDX-License-Identifier: Apache-2.0
"""Every route of the native /v1 API, the E2B control plane and E2B envd against every role
(issue 12, section 1): the operator, a tenant admin, a user, a read-only token and a revoked
token, judged by status code and, where a route writes or executes, by its effect in the
sandbox. The route lists are read from the routing tables in the source, so a route added
without an entry here fails the test. Also: the envd access token dies with its issuing
token (revoke) and with its sandbox, and envd calls are audited as that token."""

import http.client
import json
import re
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST, Tenant

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("operator", "admin", "user", "read-only", "revoked")
FAKE = "nosuchsandbox000"  # a valid id that names nothing: destructive routes aim here

# Who may call a route: "public" anyone (even a revoked token), "read" every live token,
# "write" user and up, "admin" a tenant admin (its own tenant) or the operator, "operator"
# only the admin of `default`.
ALLOWED = {
    "public": set(ROLES),
    "read": {"operator", "admin", "user", "read-only"},
    "write": {"operator", "admin", "user"},
    "admin": {"operator", "admin"},
    "operator": {"operator"},
    # the template file upload: only its URL's one-build token, no key of any role
    "token": set(),
}

# The native API: route -> (class, how to call it). In the path, {id} is the caller's own
# sandbox, {fake} a sandbox id that exists nowhere, {role} the role's name, {tenant} its
# tenant. Effects are shell tests run in the caller's sandbox afterwards: true exactly when
# the call was allowed.
NATIVE = {
    "GET /v1/health": ("public", "GET", "/v1/health", None, None),
    "GET /v1/doctor": ("read", "GET", "/v1/doctor", None, None),
    "POST /v1/sandboxes": ("write", "POST", "/v1/sandboxes", {"ttl": 120, "labels": {"rr": "{role}"}}, None),
    "GET /v1/sandboxes": ("read", "GET", "/v1/sandboxes", None, None),
    "GET /v1/sandboxes/{id}": ("read", "GET", "/v1/sandboxes/{id}", None, None),
    "DELETE /v1/sandboxes/{id}": ("write", "DELETE", "/v1/sandboxes/{fake}", None, None),
    "GET /v1/sandboxes/{id}/console": ("read", "GET", "/v1/sandboxes/{id}/console", None, None),
    # A wait on a sandbox that exists nowhere answers at once (404); a read-only token may wait.
    "GET /v1/sandboxes/{id}/wait": ("read", "GET", "/v1/sandboxes/{fake}/wait", None, None),
    # Older than 30 years: removes nothing, whoever may call it.
    "POST /v1/sandboxes/prune": ("write", "POST", "/v1/sandboxes/prune",
                                 {"states": ["ended"], "older_than": 1e9}, None),
    "POST /v1/sandboxes/{id}/timeout": ("write", "POST", "/v1/sandboxes/{fake}/timeout", {"ttl": 600}, None),
    "POST /v1/sandboxes/{id}/exec": ("write", "POST", "/v1/sandboxes/{id}/exec",
                                     {"cmd": ["touch", "/tmp/n-exec-{role}"]}, "test -e /tmp/n-exec-{role}"),
    "POST /v1/sandboxes/{id}/processes": ("write", "POST", "/v1/sandboxes/{id}/processes",
                                          {"cmd": ["touch", "/tmp/n-proc-{role}"]}, "test -e /tmp/n-proc-{role}"),
    "GET /v1/sandboxes/{id}/processes": ("read", "GET", "/v1/sandboxes/{id}/processes", None, None),
    "GET /v1/sandboxes/{id}/processes/{pid}": ("read", "GET", "/v1/sandboxes/{id}/processes/999999", None, None),
    "GET /v1/sandboxes/{id}/processes/{pid}/output": ("read", "GET", "/v1/sandboxes/{id}/processes/999999/output", None, None),
    "POST /v1/sandboxes/{id}/processes/{pid}/stdin": ("write", "POST", "/v1/sandboxes/{id}/processes/999999/stdin", b"x", None),
    "POST /v1/sandboxes/{id}/processes/{pid}/close-stdin": ("write", "POST", "/v1/sandboxes/{id}/processes/999999/close-stdin", None, None),
    "POST /v1/sandboxes/{id}/processes/{pid}/signal": ("write", "POST", "/v1/sandboxes/{id}/processes/999999/signal", {"signal": "TERM"}, None),
    "POST /v1/sandboxes/{id}/processes/{pid}/resize": ("write", "POST", "/v1/sandboxes/{id}/processes/999999/resize", {"cols": 80, "rows": 24}, None),
    "POST /v1/sandboxes/{id}/processes/{pid}/wait": ("write", "POST", "/v1/sandboxes/{id}/processes/999999/wait", None, None),
    # A WebSocket attach writes stdin: not a read, although it is a GET.
    "GET /v1/sandboxes/{id}/processes/{pid}/ws": ("write", "GET", "/v1/sandboxes/{id}/processes/999999/ws", None, None),
    "GET /v1/sandboxes/{id}/files": ("read", "GET", "/v1/sandboxes/{id}/files?path=/etc/hostname", None, None),
    "PUT /v1/sandboxes/{id}/files": ("write", "PUT", "/v1/sandboxes/{id}/files?path=/tmp/n-put-{role}", b"data",
                                     "test -e /tmp/n-put-{role}"),
    "GET /v1/sandboxes/{id}/fs/list": ("read", "GET", "/v1/sandboxes/{id}/fs/list?path=/tmp", None, None),
    "GET /v1/sandboxes/{id}/fs/stat": ("read", "GET", "/v1/sandboxes/{id}/fs/stat?path=/tmp", None, None),
    "POST /v1/sandboxes/{id}/fs/mkdir": ("write", "POST", "/v1/sandboxes/{id}/fs/mkdir", {"path": "/tmp/n-mkdir-{role}"},
                                         "test -d /tmp/n-mkdir-{role}"),
    "POST /v1/sandboxes/{id}/fs/rename": ("write", "POST", "/v1/sandboxes/{id}/fs/rename",
                                          {"from": "/tmp/n-src-{role}", "to": "/tmp/n-dst-{role}"},
                                          "test -e /tmp/n-dst-{role}"),
    "POST /v1/sandboxes/{id}/fs/remove": ("write", "POST", "/v1/sandboxes/{id}/fs/remove", {"path": "/tmp/n-keep-{role}"},
                                          "! test -e /tmp/n-keep-{role}"),
    "GET /v1/sandboxes/{id}/archive": ("read", "GET", "/v1/sandboxes/{id}/archive?path=/etc/hostname", None, None),
    "PUT /v1/sandboxes/{id}/archive": ("write", "PUT", "/v1/sandboxes/{id}/archive?path=/tmp", "tar:n-tar-{role}",
                                       "test -e /tmp/n-tar-{role}"),
    "GET /v1/templates": ("read", "GET", "/v1/templates", None, None),
    "POST /v1/templates": ("write", "POST", "/v1/templates?name=rr-{role}", b"not a tar", None),
    "POST /v1/templates/build": ("write", "POST", "/v1/templates/build?name=rr-b-{role}", b"not a tar", None),
    "GET /v1/templates/build/cache": ("read", "GET", "/v1/templates/build/cache", None, None),
    # Unused for 30 years: removes nothing, whoever may call it.
    "POST /v1/templates/build/cache/prune": ("write", "POST", "/v1/templates/build/cache/prune",
                                             {"older_than": 1e9}, None),
    "DELETE /v1/templates/{name}": ("write", "DELETE", "/v1/templates/no-such-template", None, None),
    "GET /v1/templates/{name}": ("read", "GET", "/v1/templates/no-such-template", None, None),
    # isolad dials from the host (loopback included): the operator's alone. Nothing listens
    # on port 9: the operator's pull ends in an error event, everyone else is refused.
    "POST /v1/templates/pull": ("operator", "POST", "/v1/templates/pull",
                                {"ref": "127.0.0.1:9/rr/x:1", "name": "rr-pull-{role}"}, None),
    "GET /v1/sandboxes/{id}/stats": ("read", "GET", "/v1/sandboxes/{id}/stats", None, None),
    "GET /v1/sandboxes/{id}/metrics": ("read", "GET", "/v1/sandboxes/{id}/metrics", None, None),
    "GET /metrics": ("read", "GET", "/metrics", None, None),
    # MCP over HTTP: any live token may open a session (its tools act with that token's role,
    # tests/mcp/http.test.mjs); a DELETE without a session id is a 400, not a denial.
    "POST /mcp": ("read", "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, None),
    "DELETE /mcp": ("read", "DELETE", "/mcp", None, None),
    "GET /v1/whoami": ("read", "GET", "/v1/whoami", None, None),
    # Server-sent events that last: "SSE" reads the first chunk only (judge()).
    "GET /v1/events": ("read", "SSE", "/v1/events", None, None),
    "POST /v1/tokens": ("admin", "POST", "/v1/tokens", {"role": "read-only", "name": "rr"}, None),
    "GET /v1/tokens": ("admin", "GET", "/v1/tokens", None, None),
    "DELETE /v1/tokens/{token}": ("admin", "DELETE", "/v1/tokens/nosuchtoken0", None, None),
    "POST /v1/tenants": ("operator", "POST", "/v1/tenants", {"name": "rr-{uniq}"}, None),
    "GET /v1/tenants": ("operator", "GET", "/v1/tenants", None, None),
    "GET /v1/tenants/{tenant}": ("read", "GET", "/v1/tenants/{tenant}", None, None),
    "PUT /v1/tenants/{tenant}": ("operator", "PUT", "/v1/tenants/no-such-tenant", {"max_sandboxes": 5}, None),
    "DELETE /v1/tenants/{tenant}": ("operator", "DELETE", "/v1/tenants/no-such-tenant", None, None),
    "GET /v1/audit/verify": ("operator", "GET", "/v1/audit/verify", None, None),
    "GET /v1/audit/export": ("operator", "GET", "/v1/audit/export?since=9999999999", None, None),
    "POST /v1/audit/seal": ("operator", "POST", "/v1/audit/seal", None, None),
    "POST /v1/audit/prune": ("operator", "POST", "/v1/audit/prune", {"max_age": 10 ** 9}, None),
    "GET /v1/compliance": ("operator", "GET", "/v1/compliance", None, None),
    "PUT /v1/sandboxes/{id}/lifecycle": ("write", "PUT", "/v1/sandboxes/{fake}/lifecycle", {}, None),
    "GET /v1/pools": ("operator", "GET", "/v1/pools", None, None),
    "PUT /v1/pools/{template}/{tier}": ("operator", "PUT", "/v1/pools/no-such-template/process", {"size": 0}, None),
    "POST /v1/sandboxes/{id}/code/execute": ("write", "POST", "/v1/sandboxes/{id}/code/execute",
                                             {"code": "open('/tmp/n-code-{role}', 'w').close()"},
                                             "test -e /tmp/n-code-{role}"),
    "GET /v1/sandboxes/{id}/code/contexts": ("read", "GET", "/v1/sandboxes/{id}/code/contexts", None, None),
    "POST /v1/sandboxes/{id}/code/contexts": ("write", "POST", "/v1/sandboxes/{fake}/code/contexts", {}, None),
    "POST /v1/sandboxes/{id}/code/contexts/{ctx}/restart": ("write", "POST", "/v1/sandboxes/{fake}/code/contexts/nosuch/restart", None, None),
    "DELETE /v1/sandboxes/{id}/code/contexts/{ctx}": ("write", "DELETE", "/v1/sandboxes/{fake}/code/contexts/nosuch", None, None),
    "POST /v1/sandboxes/{id}/ports": ("write", "POST", "/v1/sandboxes/{fake}/ports", {"port": 8080}, None),
    "GET /v1/sandboxes/{id}/ports": ("read", "GET", "/v1/sandboxes/{id}/ports", None, None),
    "DELETE /v1/sandboxes/{id}/ports/{port}": ("write", "DELETE", "/v1/sandboxes/{fake}/ports/8080", None, None),
    "GET /v1/sandboxes/{id}/network": ("read", "GET", "/v1/sandboxes/{id}/network", None, None),
    "PUT /v1/sandboxes/{id}/network": ("write", "PUT", "/v1/sandboxes/{fake}/network", {"default": "deny"}, None),
    "POST /v1/sandboxes/{id}/pause": ("write", "POST", "/v1/sandboxes/{fake}/pause", None, None),
    "POST /v1/sandboxes/{id}/resume": ("write", "POST", "/v1/sandboxes/{fake}/resume", None, None),
    "POST /v1/sandboxes/{id}/hibernate": ("write", "POST", "/v1/sandboxes/{fake}/hibernate", None, None),
    "POST /v1/sandboxes/{id}/fork": ("write", "POST", "/v1/sandboxes/{fake}/fork", {}, None),
    "POST /v1/snapshots": ("write", "POST", "/v1/snapshots", {"sandbox": FAKE, "name": "rr-{uniq}"}, None),
    "GET /v1/snapshots": ("read", "GET", "/v1/snapshots", None, None),
    "GET /v1/snapshots/{name}": ("read", "GET", "/v1/snapshots/no-such-snapshot", None, None),
    "DELETE /v1/snapshots/{name}": ("write", "DELETE", "/v1/snapshots/no-such-snapshot", None, None),
}

# The E2B control plane, called with X-API-KEY.
CONTROL = {
    "POST /sandboxes": ("write", "POST", "/sandboxes", {"templateID": "base", "timeout": 120, "metadata": {"rr": "{role}"}}, None),
    "POST /v2/sandboxes": ("write", "POST", "/v2/sandboxes", {"templateID": "base", "timeout": 120, "metadata": {"rr": "{role}"}}, None),
    "GET /sandboxes": ("read", "GET", "/sandboxes", None, None),
    "GET /v2/sandboxes": ("read", "GET", "/v2/sandboxes", None, None),
    "GET /sandboxes/{id}": ("read", "GET", "/sandboxes/{id}", None, None),
    "DELETE /sandboxes/{id}": ("write", "DELETE", "/sandboxes/{fake}", None, None),
    "POST /sandboxes/{id}/timeout": ("write", "POST", "/sandboxes/{id}/timeout", {"timeout": 900}, None),
    "POST /sandboxes/{id}/refreshes": ("write", "POST", "/sandboxes/{id}/refreshes", {"duration": 900}, None),
    "POST /sandboxes/{id}/pause": ("write", "POST", "/sandboxes/{fake}/pause", {}, None),
    "POST /sandboxes/{id}/resume": ("write", "POST", "/sandboxes/{fake}/resume", {}, None),
    "POST /sandboxes/{id}/connect": ("write", "POST", "/sandboxes/{id}/connect", {"timeout": 900}, None),
    "POST /v2/sandboxes/{id}/connect": ("write", "POST", "/v2/sandboxes/{id}/connect", {"timeout": 900}, None),
    "GET /sandboxes/{id}/metrics": ("read", "GET", "/sandboxes/{id}/metrics", None, None),
    "PUT /sandboxes/{id}/network": ("write", "PUT", "/sandboxes/{fake}/network", {}, None),
    "POST /sandboxes/{id}/snapshots": ("write", "POST", "/sandboxes/{fake}/snapshots", {}, None),
    "POST /sandboxes/{id}/fork": ("write", "POST", "/sandboxes/{fake}/fork", {}, None),
    "GET /snapshots": ("read", "GET", "/snapshots", None, None),
    "DELETE /templates/{id}": ("write", "DELETE", "/templates/no-such-snapshot", None, None),
    # the template builder: a request makes a waiting build record (no template)
    "POST /v3/templates": ("write", "POST", "/v3/templates", {"name": "rr-{role}-tpl"}, None),
    "GET /templates/{tid}/files/{hash}": ("write", "GET", "/templates/rr-{role}-tpl/files/" + "a" * 64, None, None),
    "PUT /templates/{tid}/files/{hash}": ("token", "PUT", "/templates/rr-{role}-tpl/files/" + "a" * 64, b"x", None),
    "POST /v2/templates/{tid}/builds/{bid}": ("write", "POST", "/v2/templates/rr-{role}-tpl/builds/" + "0" * 32, {"fromTemplate": "base", "steps": []}, None),
    "GET /templates/{tid}/builds/{bid}/status": ("read", "GET", "/templates/rr-{role}-tpl/builds/" + "0" * 32 + "/status", None, None),
    "GET /templates/aliases/{alias}": ("read", "GET", "/templates/aliases/base", None, None),
}

# envd, called with the envdAccessToken the role got from GET /sandboxes/{id}. Bodies are
# Connect JSON messages; `stream` ones travel in one envelope.
PID = {"process": {"pid": 999999}}
ENVD = {
    "GET /health": ("read", "GET", "/health", None, None),
    "GET /files": ("read", "GET", "/files?path=/etc/hostname", None, None),
    "POST /files": ("write", "POST", "/files?path=/tmp/e-put-{role}", b"data", "test -e /tmp/e-put-{role}"),
    "POST /process.Process/Start": ("write", "STREAM", "/process.Process/Start",
                                    {"process": {"cmd": "/bin/sh", "args": ["-c", "touch /tmp/e-start-{role}"]}},
                                    "test -e /tmp/e-start-{role}"),
    "POST /process.Process/Connect": ("read", "STREAM", "/process.Process/Connect", PID, None),
    "POST /process.Process/List": ("read", "POST", "/process.Process/List", {}, None),
    "POST /process.Process/SendInput": ("write", "POST", "/process.Process/SendInput",
                                        dict(PID, input={"stdin": "eA=="}), None),
    "POST /process.Process/CloseStdin": ("write", "POST", "/process.Process/CloseStdin", PID, None),
    "POST /process.Process/SendSignal": ("write", "POST", "/process.Process/SendSignal",
                                         dict(PID, signal="SIGNAL_SIGTERM"), None),
    "POST /process.Process/Update": ("write", "POST", "/process.Process/Update",
                                     dict(PID, pty={"size": {"cols": 80, "rows": 24}}), None),
    "POST /process.Process/StreamInput": ("write", "STREAM", "/process.Process/StreamInput", PID, None),
    "POST /filesystem.Filesystem/Stat": ("read", "POST", "/filesystem.Filesystem/Stat", {"path": "/tmp"}, None),
    "POST /filesystem.Filesystem/MakeDir": ("write", "POST", "/filesystem.Filesystem/MakeDir",
                                            {"path": "/tmp/e-mkdir-{role}"}, "test -d /tmp/e-mkdir-{role}"),
    "POST /filesystem.Filesystem/Move": ("write", "POST", "/filesystem.Filesystem/Move",
                                         {"source": "/tmp/e-src-{role}", "destination": "/tmp/e-dst-{role}"},
                                         "test -e /tmp/e-dst-{role}"),
    "POST /filesystem.Filesystem/ListDir": ("read", "POST", "/filesystem.Filesystem/ListDir", {"path": "/tmp"}, None),
    "POST /filesystem.Filesystem/Remove": ("write", "POST", "/filesystem.Filesystem/Remove",
                                           {"path": "/tmp/e-keep-{role}"}, "! test -e /tmp/e-keep-{role}"),
    "POST /filesystem.Filesystem/WatchDir": ("read", "STREAM", "/filesystem.Filesystem/WatchDir", {"path": "/tmp"}, None),
    "POST /filesystem.Filesystem/CreateWatcher": ("write", "POST", "/filesystem.Filesystem/CreateWatcher",
                                                  {"path": "/tmp"}, None),
    "POST /filesystem.Filesystem/GetWatcherEvents": ("read", "POST", "/filesystem.Filesystem/GetWatcherEvents",
                                                     {"watcherId": "0" * 32}, None),
    "POST /filesystem.Filesystem/RemoveWatcher": ("write", "POST", "/filesystem.Filesystem/RemoveWatcher",
                                                  {"watcherId": "0" * 32}, None),
}

# The code interpreter's port (E2b-Sandbox-Port: 49999), called with the role's envd access
# token as @e2b/code-interpreter sends it on /execute.
CODE = {
    "GET /health": ("read", "GET", "/health", None, None),
    "POST /execute": ("write", "POST", "/execute", {"code": "open('/tmp/c-exec-{role}', 'w').close()"},
                      "test -e /tmp/c-exec-{role}"),
    "GET /contexts": ("read", "GET", "/contexts", None, None),
    "POST /contexts": ("write", "POST", "/contexts", {"language": "python"}, None),
    "POST /contexts/{ctx}/restart": ("write", "POST", "/contexts/nosuch/restart", None, None),
    "DELETE /contexts/{ctx}": ("write", "DELETE", "/contexts/nosuch", None, None),
}

# What a sandbox needs before the effects above can be judged (sources of moves, victims of
# removes).
SETUP = ("touch /tmp/n-src-{role} /tmp/n-keep-{role} /tmp/e-src-{role} /tmp/e-keep-{role}")


def table_routes(path, begin, end):
    """The routes of a routing table in the C source, as "METHOD /pattern"."""
    text = (ROOT / path).read_text()
    body = text[text.index(begin):text.index(end)]
    routes = re.findall(r'"(GET|POST|PUT|DELETE)", "(/[^"]*)"', body)
    routes += [("POST", p) for p in re.findall(r'RPC\("(/[^"]*)"', body)]
    return {f"{m} {p}" for m, p in routes}


def test_every_route_has_a_table_entry():
    native = table_routes("src/isolad/api/server.c", "/* ROUTES-BEGIN */", "/* ROUTES-END */")
    e2b = table_routes("src/isolad/e2b/envd.c", "E2B-ROUTES-BEGIN", "E2B-ROUTES-END")
    assert len(native) > 50 and len(e2b) > 30, (native, e2b)
    assert native == set(NATIVE), ("native routes without an entry", native - set(NATIVE),
                                   "entries without a route", set(NATIVE) - native)
    assert e2b == set(CONTROL) | set(ENVD) | set(CODE), (
        "E2B routes without an entry", e2b - set(CONTROL) - set(ENVD) - set(CODE),
        "entries without a route", set(CONTROL) | set(ENVD) | set(CODE) - e2b)


def tar_with(name):
    """A one-file tar archive holding `name`."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.size = 2
        tf.addfile(info, io.BytesIO(b"ok"))
    return buf.getvalue()


def envelope(msg):
    data = json.dumps(msg).encode()
    return struct.pack(">BI", 0, len(data)) + data


class Http:
    """Raw HTTP on isolad's TCP listener (the E2B SDKs' wire; headers as given)."""

    def __init__(self, isolad):
        self.addr = isolad.tcp

    def call(self, method, path, headers, body=None, stream=False):
        conn = http.client.HTTPConnection(*self.addr, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            # A streaming response that was allowed may go on forever (WatchDir, Connect):
            # its status and first bytes are the verdict; closing the connection ends it.
            data = resp.read1(65536) if stream and resp.status == 200 else resp.read()
            return resp.status, data
        finally:
            conn.close()


@pytest.fixture(scope="module")
def world(isolad):
    """A tenant with an admin, a user, a read-only and a revoked token; a sandbox of that
    tenant and one of `default` (the operator's); each role's key, envd access token and
    subject sandbox."""
    op = isolad.client(timeout=60)
    t = Tenant(isolad, role="admin")
    keys = {"operator": isolad.token, "admin": t.token, "user": t.new_token("user"),
            "read-only": t.new_token("read-only"), "revoked": t.new_token("user")}
    revoked_id = t.tokens[-1]["id"]
    h = Http(isolad)
    made = []

    def e2b_create(key):
        st, data = h.call("POST", "/sandboxes", {"X-API-KEY": key, "Content-Type": "application/json"},
                          json.dumps({"templateID": "base", "timeout": 1800}))
        assert st == 201, data
        made.append((key, json.loads(data)["sandboxID"]))
        return json.loads(data)["sandboxID"]

    sb_default = e2b_create(isolad.token)
    sb_tenant = e2b_create(keys["user"])
    subject = {r: (sb_default if r == "operator" else sb_tenant) for r in ROLES}
    envd = {}
    for role in ROLES:
        st, data = h.call("GET", f"/sandboxes/{subject[role]}", {"X-API-KEY": keys[role]})
        assert st == 200, (role, data)
        envd[role] = json.loads(data)["envdAccessToken"]
    # Revoked after it got its envd token: both must stop working at once.
    assert op.request("DELETE", f"/v1/tokens/{revoked_id}").status == 204
    for role in ROLES:
        r = (op if role == "operator" else t.tcp(keys["admin"])).exec(
            # as `user`: envd calls act as E2B's default user, who may move and remove
            # only its own files in the sticky /tmp
            subject[role], cmd=["/bin/sh", "-c", SETUP.format(role=role)], user="user")
        assert r.get("exit_code") == 0, r
    w = dict(t=t, keys=keys, envd=envd, subject=subject, h=h, op=op, revoked_id=revoked_id,
             admin=t.tcp(keys["admin"]))
    yield w
    for key, sid in made:
        h.call("DELETE", f"/sandboxes/{sid}", {"X-API-KEY": key})
    for sb in ic.sandbox_list(w["admin"].get_json("/v1/sandboxes")):
        w["admin"].delete_sandbox(sb["id"])
    for sb in op.list_sandboxes():
        if sb.get("labels", {}).get("rr"):
            op.delete_sandbox(sb["id"])
    t.cleanup()


def effect(w, role, check):
    """Runs `check` (a shell test) in the role's sandbox as its owner: True when it holds."""
    c = w["op"] if role == "operator" else w["admin"]
    r = c.exec(w["subject"][role], cmd=["/bin/sh", "-c", check.format(role=role)])
    return r.get("exit_code") == 0


def fill(s, w, role):
    tenant = "default" if role == "operator" else w["t"].name
    return (s.replace("{id}", w["subject"][role]).replace("{fake}", FAKE)
            .replace("{role}", role).replace("{tenant}", tenant)
            .replace("{uniq}", uuid.uuid4().hex[:8]))


def body_of(body, w, role):
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str) and body.startswith("tar:"):
        return tar_with(fill(body[4:], w, role))
    return json.loads(fill(json.dumps(body), w, role))


def judge(table, kind, w):
    """Calls every route of `table` as every role; returns the list of wrong verdicts."""
    wrong, checks = [], []
    for route, (cls, method, path, body, check) in table.items():
        for role in ROLES:
            path_r = fill(path, w, role)
            b = body_of(body, w, role)
            headers = {}
            verb, stream = method, False
            if kind == "native":
                headers["Authorization"] = f"Bearer {w['keys'][role]}"
            elif kind == "control":
                headers["X-API-KEY"] = w["keys"][role]
            else:
                headers.update({"E2b-Sandbox-Id": w["subject"][role],
                                "E2b-Sandbox-Port": "49999" if kind == "code" else "49983",
                                "X-Access-Token": w["envd"][role]})
            if verb == "SSE":
                verb, stream = "GET", True
            elif verb == "STREAM":
                verb, stream = "POST", True
                headers.update({"Content-Type": "application/connect+json",
                                "Connect-Protocol-Version": "1"})
                b = envelope(b)
            elif route == "POST /files":
                headers["Content-Type"] = "application/octet-stream"
            elif isinstance(b, dict):
                headers["Content-Type"] = "application/json"
                b = json.dumps(b).encode()
            elif isinstance(b, bytes):
                headers["Content-Type"] = "application/octet-stream"
            if b is not None:
                headers["Content-Length"] = str(len(b))
            status, data = w["h"].call(verb, path_r, headers, b, stream=stream)
            allowed = role in ALLOWED[cls]
            denied = status in (401, 403)
            if allowed == denied:
                wrong.append(f"{route} as {role}: {status} {data[:160]!r} "
                             f"(expected {'allowed' if allowed else 'denied'})")
                continue
            if denied and role == "revoked" and status != 401:
                wrong.append(f"{route} as revoked: {status}, expected 401")
            if check:
                checks.append((route, role, status, check, allowed))
            if allowed and kind == "envd" and route.endswith("/CreateWatcher") and status == 200:
                wid = json.loads(data)["watcherId"]
                del headers["Content-Length"]
                w["h"].call("POST", "/filesystem.Filesystem/RemoveWatcher", headers,
                            json.dumps({"watcherId": wid}).encode())
    # Effects last: commands started in the background may take a moment. Allowed ones are
    # awaited; denied ones are judged after that, so they had at least as long to show up.
    deadline = time.monotonic() + 60
    for route, role, status, check, allowed in sorted(checks, key=lambda c: not c[4]):
        seen = effect(w, role, check)
        while allowed and not seen and time.monotonic() < deadline:
            time.sleep(0.2)
            seen = effect(w, role, check)
        if seen != allowed:
            wrong.append(f"{route} as {role}: status {status} but the effect "
                         f"`{fill(check, w, role)}` is {seen}")
    return wrong


def test_native_routes_by_role(world):
    wrong = judge(NATIVE, "native", world)
    assert not wrong, "\n".join(wrong)


def test_e2b_control_routes_by_role(world):
    wrong = judge(CONTROL, "control", world)
    assert not wrong, "\n".join(wrong)


def test_envd_routes_by_role(world):
    wrong = judge(ENVD, "envd", world)
    assert not wrong, "\n".join(wrong)


def test_code_interpreter_routes_by_role(world):
    wrong = judge(CODE, "code", world)
    assert not wrong, "\n".join(wrong)


def test_read_only_never_gets_a_write_capability(world):
    """What a read-only token is handed (its envd access token) differs from a writer's and
    opens reads only; no listing hands out a private port's token."""
    w = world
    assert w["envd"]["read-only"] != w["envd"]["user"]
    st, data = w["h"].call("GET", "/v2/sandboxes", {"X-API-KEY": w["keys"]["read-only"]})
    assert st == 200
    listed = json.loads(data)
    assert w["subject"]["read-only"] in [sb["sandboxID"] for sb in listed]
    for sb in listed:
        tok = sb.get("envdAccessToken")
        assert tok is None or tok[64:66] == ".r", sb
    # A tampered role letter (r -> u) breaks the MAC.
    tok = w["envd"]["read-only"]
    forged = tok[:65] + "u" + tok[66:]
    st, _ = w["h"].call("POST", "/filesystem.Filesystem/MakeDir",
                        {"E2b-Sandbox-Id": w["subject"]["user"], "X-Access-Token": forged,
                         "Content-Type": "application/json"},
                        json.dumps({"path": "/tmp/forged"}).encode())
    assert st == 401
    assert not effect(w, "user", "test -e /tmp/forged")


def envd_call(w, sid, token, path="/filesystem.Filesystem/Stat", msg=None):
    return w["h"].call("POST", path, {"E2b-Sandbox-Id": sid, "X-Access-Token": token,
                                      "Content-Type": "application/json"},
                       json.dumps(msg or {"path": "/tmp"}).encode())


def test_envd_token_dies_with_its_token_and_sandbox(isolad, world):
    w = world
    t = w["t"]
    key = t.new_token("user")
    tid = t.tokens[-1]["id"]
    st, data = w["h"].call("POST", "/sandboxes", {"X-API-KEY": key, "Content-Type": "application/json"},
                           json.dumps({"templateID": "base", "timeout": 300}))
    assert st == 201, data
    sid, tok = json.loads(data)["sandboxID"], json.loads(data)["envdAccessToken"]
    try:
        assert envd_call(w, sid, tok)[0] == 200
        # Another sandbox does not take it.
        assert envd_call(w, w["subject"]["user"], tok)[0] == 401
        assert w["op"].request("DELETE", f"/v1/tokens/{tid}").status == 204
        st, data = envd_call(w, sid, tok, "/filesystem.Filesystem/MakeDir", {"path": "/tmp/after-revoke"})
        assert st == 401 and json.loads(data)["code"] == "unauthenticated", data
        assert not effect(dict(w, subject={"admin": sid}), "admin", "test -e /tmp/after-revoke")
    finally:
        assert w["admin"].delete_sandbox(sid).status == 204
    # The sandbox is gone: its token opens nothing (E2B's "sandbox was killed" answer).
    key2 = t.new_token("user")
    st, data = w["h"].call("POST", "/sandboxes", {"X-API-KEY": key2, "Content-Type": "application/json"},
                           json.dumps({"templateID": "base", "timeout": 300}))
    sid2, tok2 = json.loads(data)["sandboxID"], json.loads(data)["envdAccessToken"]
    assert envd_call(w, sid2, tok2)[0] == 200
    assert w["admin"].delete_sandbox(sid2).status == 204
    st, data = envd_call(w, sid2, tok2)
    assert st == 502 and json.loads(data)["code"] == "unavailable", (st, data)


def test_envd_calls_are_audited_as_the_issuing_token(isolad, world):
    w = world
    sid = w["subject"]["user"]
    user_id = w["t"].tokens[1]["id"]
    t0 = time.time()
    time.sleep(0.01)
    assert envd_call(w, sid, w["envd"]["user"])[0] == 200
    st, _ = envd_call(w, sid, w["envd"]["read-only"], "/filesystem.Filesystem/MakeDir", {"path": "/tmp/ro"})
    assert st == 403
    cp = subprocess.run([str(ROOT_CONFTEST.CLI), "--socket", isolad.socket, "audit",
                         "export", "--since", str(t0)], stdout=subprocess.PIPE, timeout=60)
    recs = [json.loads(line) for line in cp.stdout.decode().splitlines()]
    stat = [r for r in recs if r["action"] == "POST /filesystem.Filesystem/Stat"]
    assert stat, recs
    assert stat[-1]["who"] == f"token:{user_id}" and stat[-1]["tenant"] == w["t"].name, stat
    assert stat[-1]["target"] == sid and stat[-1]["outcome"] == "ok", stat
    ro_id = w["t"].tokens[2]["id"]
    mk = [r for r in recs if r["action"] == "POST /filesystem.Filesystem/MakeDir"]
    assert mk and mk[-1]["who"] == f"token:{ro_id}" and mk[-1]["outcome"] == "denied", mk
    assert mk[-1]["target"] == sid and mk[-1]["tenant"] == w["t"].name, mk


def test_read_only_listing_of_ports_hides_the_access_token():
    """A private port's access token opens whatever listens there (a shell, a notebook): a
    read-only token sees the exposure, never the token."""
    from expose_util import Exposer
    x = Exposer()
    try:
        t = Tenant(x.d, role="user")
        ro = t.tcp(t.new_token("read-only"))
        sid = t.client.create_sandbox()["id"]
        r = t.client.request("POST", f"/v1/sandboxes/{sid}/ports", json={"port": 8000})
        assert r.status == 201 and len(r.json()["token"]) == 43, r
        mine = t.client.get_json(f"/v1/sandboxes/{sid}/ports")["ports"]
        assert mine[0]["token"] == r.json()["token"], mine
        seen = ro.get_json(f"/v1/sandboxes/{sid}/ports")["ports"]
        assert [p["port"] for p in seen] == [8000], seen
        assert "token" not in seen[0] and r.json()["token"] not in json.dumps(seen), seen
        t.cleanup()
    finally:
        problems = x.close()
    assert not problems, problems
