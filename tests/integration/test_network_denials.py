# SPDX-License-Identifier: Apache-2.0
"""A sandbox's recent egress denials (src/isolad/net/denials.c) in GET /v1/sandboxes/{id}/network:
what the proxy refused, newest first, with the name the sandbox sent as text, per sandbox and
tenant-scoped like the rest of the route."""

from netlab import WEB, OTHER, run_client, net_info
from netlab import lab, nd, c, mk  # noqa: F401 (the module's fixtures)
import tenancy_util

HOSTILE = "<img src=x onerror=alert(1)>"


def test_recent_denials_name_address_port_reason(c, mk, lab):
    sid = mk(network={"allow": ["allowed.test"]})
    assert net_info(c, sid)["denials"] == {"total": 0, "recent": []}
    hints = [run_client(c, sid, "http", "other.test", OTHER, 80),  # a name the policy does not allow
             run_client(c, sid, "tls", HOSTILE, WEB, 443),  # a name that is no host name
             run_client(c, sid, "http", "allowed.test", "allowed.test", 80)]  # allowed: not listed
    d = net_info(c, sid)["denials"]
    assert d["total"] == 2, (d, hints)
    newest, oldest = d["recent"]
    assert (newest["host"], newest["address"], newest["port"], newest["reason"]) == \
        (HOSTILE, WEB, 443, "bad_name"), d
    assert (oldest["host"], oldest["address"], oldest["port"], oldest["reason"]) == \
        ("other.test", OTHER, 80, "deny_default"), d
    assert newest["time"] >= oldest["time"] > 0, d
    # Another sandbox's list is its own.
    other = mk(network={"allow": ["allowed.test"]})
    assert net_info(c, other)["denials"]["total"] == 0


def test_denials_ring_is_bounded(c, mk, lab):
    sid = mk()
    # 40 refused connections from one sandbox process (default deny): the ring keeps 32.
    c.exec(sid, cmd=["python3", "-c",
                     "import socket\n"
                     "for i in range(40):\n"
                     "    try:\n"
                     f"        s = socket.create_connection(('{OTHER}', 1000 + i), timeout=5)\n"
                     "        s.sendall(b'x'); s.recv(1); s.close()\n"
                     "    except OSError:\n"
                     "        pass\n"], timeout=120)
    d = net_info(c, sid)["denials"]
    assert d["total"] == 40, d
    assert [x["port"] for x in d["recent"]] == list(range(1039, 1007, -1)), d


def test_denials_are_tenant_scoped(nd, c, mk, lab):
    sid = mk()
    run_client(c, sid, "http", "other.test", OTHER, 80)
    assert net_info(c, sid)["denials"]["total"] == 1
    t = tenancy_util.Tenant(nd)
    try:
        r = t.client.request("GET", f"/v1/sandboxes/{sid}/network")
        assert r.status == 404, r
    finally:
        t.cleanup()
