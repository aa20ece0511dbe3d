# SPDX-License-Identifier: Apache-2.0
"""Per-sandbox networking: the veth, the resolver, the policy API and its enforcement.

Every verdict is read at a sink outside the sandbox (netlab's DNS and TCP logs): what the
sandbox saw is only used in failure messages.
"""

import json
import re
import time

import pytest

import isola_client as ic
import netlab
from netlab import WEB, OTHER, run_client, net_info, set_policy
from netlab import lab, nd, c, mk  # noqa: F401 (the module's fixtures, shared with the boundary tests)

# netlab routes the metadata and private addresses to its namespace by rules every lab
# adds at the same preference: two labs at once would catch each other's traffic.
pytestmark = pytest.mark.host_exclusive


def test_sandbox_gets_a_veth_and_loopback(c, mk):
    sid = mk()
    info = net_info(c, sid)
    # A network slot's (net.c): this isolad's prefix ("i" + 4 hex + "-"), "_", 8 hex.
    assert re.fullmatch(r"i[0-9a-f]{4}-_[0-9a-f]{8}", info["interface"]), info
    assert info["policy"]["default"] == "deny", info
    routes = c.sh(sid, "cat /proc/net/route")
    gw = info["gateway"].split(".")
    gw_hex = "".join(f"{int(x):02X}" for x in reversed(gw))
    assert any(l.split()[0] == "eth0" and l.split()[1] == "00000000" and l.split()[2] == gw_hex
               for l in routes.splitlines()[1:]), routes
    # Loopback inside works: a server on 127.0.0.1 in the sandbox gets the client's bytes
    # (judged by the file the server wrote, read back through the file API).
    c.sh(sid, "python3 - <<'EOF'\n"
              "import socket, threading\n"
              "s = socket.socket(); s.bind(('127.0.0.1', 7777)); s.listen(1)\n"
              "def cl():\n"
              "    x = socket.create_connection(('127.0.0.1', 7777)); x.sendall(b'over-lo'); x.close()\n"
              "threading.Thread(target=cl).start()\n"
              "a, _ = s.accept(); open('/tmp/lo.out', 'wb').write(a.recv(100))\n"
              "EOF")
    assert c.read_file(sid, "/tmp/lo.out") == b"over-lo"
    # The host side exists, with the gateway address, and goes with the sandbox.
    ifname = info["interface"]
    assert netlab.sh("ip", "-br", "addr", "show", ifname).stdout.split()[2] == \
        info["gateway"] + "/30"
    c.delete_sandbox(sid)
    # The veth is removed behind the answer (net.c's reaper): soon, never left.
    ic.wait_for(lambda: netlab.sh("ip", "link", "show", ifname, check=False).returncode != 0,
                10, what=f"{ifname} to be removed after the destroy")


def test_no_ipv6_on_the_veth_but_loopback_keeps_it(c, mk):
    """IPv6 is not offered (nft drops it): neither end of the veth has it at all, so the
    kernel configures no link-local address, runs no duplicate address detection and sends
    no multicast reports for a sandbox; lo inside keeps ::1 (localhost servers work)."""
    sid = mk()
    info = net_info(c, sid)
    inside = c.sh(sid, "cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6; cat /proc/net/if_inet6")
    lines = inside.splitlines()
    assert lines[0] == "1", inside
    assert not [l for l in lines[1:] if l.split()[-1] == "eth0"], inside
    assert [l for l in lines[1:] if l.split()[0] == "0" * 31 + "1" and l.split()[-1] == "lo"], \
        inside
    host_if = info["interface"]
    with open(f"/proc/sys/net/ipv6/conf/{host_if}/disable_ipv6") as f:
        assert f.read().strip() == "1", host_if
    with open("/proc/net/if_inet6") as f:
        assert not [l for l in f if l.split()[-1] == host_if], host_if


def test_default_deny_reaches_nothing(c, mk, lab):
    sid = mk()
    m = lab.mark()
    hints = [run_client(c, sid, "http", "allowed.test", WEB, 80),
             run_client(c, sid, "tls", "allowed.test", WEB, 443),
             run_client(c, sid, "tcp", OTHER, 8080),
             run_client(c, sid, "dns", "allowed.test", 1),
             run_client(c, sid, "dns", "allowed.test", 1, netlab.NS_ADDR, "tcp"),
             run_client(c, sid, "resolve", "allowed.test")]
    time.sleep(0.5)
    assert lab.events(m) == [], f"the lab saw traffic from a default-deny sandbox: {hints}"
    assert hints[3]["rcode"] == 5, hints[3]  # REFUSED by isola's resolver


def test_allowlisted_domain_reachable_by_name_and_nothing_else(c, mk, lab):
    sid = mk(network={"allow": ["allowed.test"]})
    m = lab.mark()
    res = run_client(c, sid, "resolve", "allowed.test")
    assert res.get("addrs") == [WEB], res
    got = run_client(c, sid, "http", "allowed.test", "allowed.test", 80)
    assert "hello from" in got.get("body", ""), got
    tls = run_client(c, sid, "tls", "allowed.test", WEB, 443)
    conns = lab.connections(m)
    assert [x[1] for x in conns] == [f"{WEB}:80", f"{WEB}:443"], (conns, got, tls)
    assert b"Host: allowed.test" in conns[0][2]
    assert b"allowed.test" in conns[1][2]  # the ClientHello's SNI reached the server
    # The sandbox's lookup and the proxy's own (A, AAAA): never another name.
    assert {q[0] for q in lab.queries(m)} == {"allowed.test"}, lab.queries(m)

    # Nothing else: another name, the same server under another name, an IP literal,
    # another server, and names only through isola's resolver.
    m = lab.mark()
    hints = [run_client(c, sid, "http", "other.test", OTHER, 80),
             run_client(c, sid, "http", "other.test", WEB, 80),
             run_client(c, sid, "tls", "other.test", WEB, 443),
             run_client(c, sid, "http", WEB, WEB, 80),
             run_client(c, sid, "tcp", OTHER, 8080),
             run_client(c, sid, "dns", "other.test", 1),
             run_client(c, sid, "dns", "xallowed.test", 1)]
    time.sleep(0.5)
    assert lab.events(m) == [], hints
    assert hints[5]["rcode"] == 5, hints[5]


def test_wildcard_matches_subdomains_only(c, mk, lab):
    sid = mk(network={"allow": ["*.allowed.test"]})
    m = lab.mark()
    for name in ("www.allowed.test", "allowed.test", "notallowed.test", "wwwallowed.test"):
        run_client(c, sid, "dns", name, 1)
    assert lab.queries(m) == [("www.allowed.test", 1)], lab.queries(m)


def test_port_rules(c, mk, lab):
    sid = mk(network={"allow": [{"domain": "allowed.test", "ports": [80]}]})
    m = lab.mark()
    run_client(c, sid, "http", "allowed.test", WEB, 80)
    run_client(c, sid, "http", "allowed.test", WEB, 8080)
    assert [x[1] for x in lab.connections(m)] == [f"{WEB}:80"], lab.events(m)


def test_cidr_rules(c, mk, lab):
    sid = mk(network={"allow": [f"{OTHER}/32"]})
    m = lab.mark()
    run_client(c, sid, "tcp", OTHER, 8080)
    run_client(c, sid, "tcp", WEB, 8080)
    assert [x[1] for x in lab.connections(m)] == [f"{OTHER}:8080"], lab.events(m)


def test_policy_edited_live(c, mk, lab):
    sid = mk()
    m = lab.mark()
    run_client(c, sid, "http", "allowed.test", WEB, 80)
    assert lab.connections(m) == []
    out = set_policy(c, sid, {"allow": ["allowed.test"]})
    assert out["policy"]["allow"], out
    m = lab.mark()
    run_client(c, sid, "http", "allowed.test", WEB, 80)
    assert len(lab.connections(m)) == 1, lab.events(m)
    set_policy(c, sid, {"default": "deny"})
    m = lab.mark()
    run_client(c, sid, "http", "allowed.test", WEB, 80)
    time.sleep(0.3)
    assert lab.connections(m) == [], lab.events(m)


def test_invalid_policy_is_refused(c, nd):
    before = {s["id"] for s in c.list_sandboxes()}
    r = c.request("POST", "/v1/sandboxes", json={"network": {"allow": ["bad..name"]}})
    assert r.status == 400 and r.error_code == "invalid", r
    r = c.request("POST", "/v1/sandboxes", json={"network": ["allowed.test"]})
    assert r.status == 400, r
    assert {s["id"] for s in c.list_sandboxes()} == before
    sid = c.create_sandbox()["id"]
    try:
        r = c.request("PUT", f"/v1/sandboxes/{sid}/network", json={"allow": [{"cidr": "x"}]})
        assert r.status == 400, r
        assert net_info(c, sid)["policy"]["default"] == "deny"
        r = c.request("GET", "/v1/sandboxes/nosuchsandbox/network")
        assert r.status == 404, r
    finally:
        c.delete_sandbox(sid)


def test_counters(c, mk, lab):
    sid = mk(network={"allow": ["allowed.test"]})
    run_client(c, sid, "http", "allowed.test", "allowed.test", 80)
    run_client(c, sid, "http", "other.test", OTHER, 80)
    n = net_info(c, sid)["counters"]
    assert n["tx_bytes"] > 0 and n["rx_bytes"] > 0 and n["tx_packets"] > 0, n
    assert n["connections"] >= 1 and n["denied"] >= 1, n
    assert n["bytes_in"] > 0 and n["dns_queries"] >= 1, n
    st = c.get_json(f"/v1/sandboxes/{sid}/stats")
    assert st["network"]["tx_bytes"] > 0, st


def test_policy_survives_restart(nd, lab):
    c = nd.client(timeout=60)
    sid = c.create_sandbox(network={"allow": ["allowed.test"]})["id"]
    try:
        nd.restart()
        c = nd.client(timeout=60)
        assert net_info(c, sid)["policy"]["allow"], net_info(c, sid)
        m = lab.mark()
        run_client(c, sid, "http", "allowed.test", WEB, 80)
        run_client(c, sid, "http", "other.test", OTHER, 80)
        assert [x[1] for x in lab.connections(m)] == [f"{WEB}:80"], lab.events(m)
    finally:
        c.delete_sandbox(sid)


def test_cli_network_get_set(nd, lab):
    import subprocess
    cli = [str(netlab.root.CLI), "--socket", nd.socket]
    c = nd.client(timeout=60)
    sid = c.create_sandbox()["id"]
    try:
        r = subprocess.run(cli + ["network", "set", sid, "--allow", "allowed.test",
                                  "--deny", "10.0.0.0/8"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(cli + ["--json", "network", "get", sid], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["policy"]["allow"][0]["domain"] == "allowed.test", got
        m = lab.mark()
        run_client(c, sid, "http", "allowed.test", WEB, 80)
        assert len(lab.connections(m)) == 1, lab.events(m)
        r = subprocess.run(cli + ["network", "set", sid, "--allow", "bad..name"],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "bad..name" in r.stderr, r
    finally:
        c.delete_sandbox(sid)
    # create/run --allow: the policy is in place before the first command.
    r = subprocess.run(cli + ["create", "--allow", "allowed.test", "--deny", "other.test"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        pol = net_info(c, sid)["policy"]
        assert [x["domain"] for x in pol["allow"]] == ["allowed.test"], pol
        assert [x["domain"] for x in pol["deny"]] == ["other.test"], pol
    finally:
        c.delete_sandbox(sid)
    m = lab.mark()
    r = subprocess.run(cli + ["run", "--egress", "deny", "--allow", "allowed.test", "--",
                              "python3", "-c", netlab.CLIENT, "http", "allowed.test", WEB, "80"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(lab.connections(m)) == 1, (r.stdout, lab.events(m))


def test_policy_survives_hibernation(c, mk, lab):
    sid = mk(network={"allow": ["allowed.test"]})
    r = c.request("POST", f"/v1/sandboxes/{sid}/hibernate", timeout=120)
    assert r.status in (200, 204), r
    r = c.request("POST", f"/v1/sandboxes/{sid}/resume", timeout=120)
    assert r.status in (200, 204), r
    info = net_info(c, sid)
    assert info["policy"]["allow"], info
    m = lab.mark()
    run_client(c, sid, "http", "allowed.test", WEB, 80)
    run_client(c, sid, "http", "other.test", OTHER, 80)
    assert [x[1] for x in lab.connections(m)] == [f"{WEB}:80"], lab.events(m)


@pytest.mark.needs_microvm
def test_microvm_guest_behind_the_same_boundary(c, lab):
    """A microvm guest: tap in QEMU's namespace, masqueraded to its /30, then the same host
    table, resolver and proxy as a process sandbox."""
    r = c.request("POST", "/v1/sandboxes", timeout=900,
                  json={"tier": "microvm", "network": {"allow": ["allowed.test"]}})
    assert r.status == 201, r
    sid = r.json()["id"]
    try:
        info = net_info(c, sid)
        m = lab.mark()
        got = run_client(c, sid, "http", "allowed.test", "allowed.test", 80)
        assert "hello from" in got.get("body", ""), got
        hints = [run_client(c, sid, "http", "other.test", OTHER, 80),
                 run_client(c, sid, "tcp", netlab.METADATA, 80),
                 run_client(c, sid, "dns", "secret.exfil.test", 16),
                 run_client(c, sid, "udp", WEB, 80)]
        time.sleep(0.5)
        conns = lab.connections(m)
        assert [x[1] for x in conns] == [f"{WEB}:80"], (conns, hints)
        assert {q[0] for q in lab.queries(m)} == {"allowed.test"}, lab.queries(m)
        n = net_info(c, sid)["counters"]
        assert n["connections"] >= 1 and n["denied"] >= 2 and n["tx_bytes"] > 0, (info, n)
    finally:
        c.delete_sandbox(sid)


def test_fork_children_keep_the_source_policy(c, mk, lab):
    """A fork child gets its source's policy, not the operator's default: judged at the sink
    (the child reaches the allowed server by name) and by its reported policy."""
    sid = mk(network={"allow": ["allowed.test"]})
    r = c.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": 1})
    assert r.status == 201, r
    kid = r.json()["children"][0]["id"]
    try:
        assert net_info(c, kid)["policy"]["allow"] == net_info(c, sid)["policy"]["allow"]
        m = lab.mark()
        got = run_client(c, kid, "http", "allowed.test", "allowed.test", 80)
        assert "hello from" in got.get("body", ""), got
        assert [x[1] for x in lab.connections(m)] == [f"{WEB}:80"]
        m = lab.mark()
        run_client(c, kid, "http", "other.test", OTHER, 80)
        time.sleep(0.5)
        assert lab.events(m) == [], "the child is held to the source's allowlist"
    finally:
        c.delete_sandbox(kid)
