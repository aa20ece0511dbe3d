# SPDX-License-Identifier: Apache-2.0
"""Authentication: the unix socket is root-only (0600); TCP needs the bearer token except for
/v1/health; nothing happens on a refused request."""

import os
import stat

import pytest

import isola_client as ic


def test_unix_socket_is_0600_root(isolad):
    st = os.stat(isolad.socket)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == 0


def test_token_file_is_private(isolad):
    p = os.path.join(isolad.state_dir, "api.token")
    st = os.stat(p)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == 0
    assert len(isolad.token) >= 32


def test_health_is_open_on_tcp(isolad):
    r = isolad.tcp_client().request("GET", "/v1/health")
    assert r.status == 200, r


@pytest.mark.parametrize("header", [
    None, "Bearer wrong-token", "Bearer ", "Basic dXNlcjpwYXNz", "bearer", "Token {t}",
    "Bearer {t}x", "Bearer {t_short}", "Bearer  {t} extra",
])
def test_tcp_without_the_right_token_is_401(isolad, header):
    t = isolad.token
    headers = {}
    if header is not None:
        headers["Authorization"] = header.format(t=t, t_short=t[:-1])
    c = isolad.tcp_client()
    for method, path in [("GET", "/v1/sandboxes"), ("GET", "/v1/doctor"),
                         ("GET", "/v1/templates"), ("GET", "/v1/sandboxes/whatever")]:
        r = c.request(method, path, headers=headers)
        assert r.status == 401, (header, path, r)
        assert r.error_code == "unauthorized", r
        assert t not in r.text, "the error must not echo the token"


def test_tcp_refused_create_does_nothing(isolad, api):
    before = [s["id"] for s in api.list_sandboxes()]
    r = isolad.tcp_client(token="nope").request("POST", "/v1/sandboxes", json={})
    assert r.status == 401, r
    assert [s["id"] for s in api.list_sandboxes()] == before


def test_tcp_with_token(isolad):
    c = isolad.tcp_client(token=isolad.token)
    r = c.request("GET", "/v1/sandboxes")
    assert r.status == 200, r
    sb = c.create_sandbox()
    try:
        assert c.exec(sb["id"], cmd=["echo", "tcp"])["stdout"] == "tcp\n"
        # Streams and WebSockets over TCP need the token too.
        with c.stream("POST", f"/v1/sandboxes/{sb['id']}/exec", json={"cmd": ["echo", "s"]},
                      kind="ndjson") as s:
            assert s.status == 200
            assert ic.collect(s.read_all())["stdout"] == b"s\n"
        pid = c.start_process(sb["id"], cmd=["cat"])["pid"]
        with pytest.raises(ic.WebSocketError) as e:
            ic.WebSocket.connect(isolad.tcp_client(), f"/v1/sandboxes/{sb['id']}/processes/"
                                 f"{pid}/ws")
        assert getattr(e.value, "status", None) == 401
        with ic.WebSocket.connect(c, f"/v1/sandboxes/{sb['id']}/processes/{pid}/ws") as ws:
            ws.send_binary(b"over tcp\n")
            pty = ic.PtySession(ws)
            pty.wait_output(rb"over tcp\n")
    finally:
        assert c.delete_sandbox(sb["id"]).status == 204


def test_tcp_listener_is_loopback_only(isolad):
    # We asked for 127.0.0.1; the daemon must not have bound the wildcard address.
    port_hex = f"{isolad.port:04X}"
    with open("/proc/net/tcp") as f:
        rows = [ln.split() for ln in f.read().splitlines()[1:]]
    listening = [r[1] for r in rows if r[1].endswith(":" + port_hex) and r[3] == "0A"]
    assert listening == ["0100007F:" + port_hex], listening


def test_unix_socket_refuses_other_users(isolad):
    """An unprivileged host user cannot connect to the control socket (judged by trying)."""
    import subprocess
    import sys
    code = ("import socket,sys\n"
            "s=socket.socket(socket.AF_UNIX)\n"
            "try:\n s.connect(sys.argv[1]); print('CONNECTED')\n"
            "except PermissionError: print('EACCES')\n")
    # The state dir is 0700, which alone would refuse; link the socket inode into a
    # world-traversable dir so the socket's own mode is what is tested.
    import tempfile
    d = tempfile.mkdtemp(prefix="isola-sockprobe-", dir=os.path.dirname(isolad.state_dir))
    try:
        os.chmod(d, 0o755)
        link = os.path.join(d, "s")
        os.link(isolad.socket, link)
        cp = subprocess.run([sys.executable, "-c", code, link], user=65534, group=65534,
                            extra_groups=[], capture_output=True, timeout=20)
        assert cp.stdout.strip() == b"EACCES", (cp.stdout, cp.stderr)
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)
