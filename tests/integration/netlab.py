# SPDX-License-Identifier: Apache-2.0
"""netlab: a small "internet" for the network tests, judged at its sinks.

A network namespace joined to the host by a veth carries, on benchmarking addresses
(198.18.0.0/15, two /24s the host does not use), a DNS server that answers a fixed zone and logs every query, and TCP sinks
that log every connection (and answer HTTP). Forbidden destinations (cloud metadata, private
ranges) get sinks in the same namespace, so a leak would be seen there, never on a real network.
Host-side sinks (every host address, TCP and UDP) run in the test process.

Tests look only at these logs: a blocked connection that looks successful from inside
(E2B's lesson) still shows up as nothing at the sink.
"""

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import importlib.util
import ipaddress
import re
from pathlib import Path

import pytest

# tests/conftest.py's Isolad under a name of its own (both conftest files are "conftest").
_spec = importlib.util.spec_from_file_location(
    "isola_tests_conftest_net", Path(__file__).resolve().parents[1] / "conftest.py")
root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root)



def _used_networks():
    """Every IPv4 network this host already has an address in or a route to (any table, the
    default route aside): the lab must not shadow any of them."""
    used = []
    for line in subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True,
                               text=True).stdout.splitlines():
        m = re.search(r"\binet (\S+)", line)
        if m:
            used.append(ipaddress.ip_interface(m.group(1)).network)
    for line in subprocess.run(["ip", "-4", "route", "show", "table", "all"],
                               capture_output=True, text=True).stdout.splitlines():
        words = line.split()
        if words and words[0] in ("local", "broadcast", "unicast", "blackhole", "unreachable",
                                  "prohibit", "throw", "multicast", "anycast"):
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            net = ipaddress.ip_network(words[0], strict=False)
        except ValueError:
            continue
        if net.prefixlen >= 8:
            used.append(net)
    return used


def _free_subnets(n):
    """n /24s for the lab that overlap nothing the host has: benchmarking space (198.18.0.0/15)
    first, then the documentation nets TEST-NET-2 and -3. A CI host may itself live on one of
    these ranges (seen: a route to 198.18.1.0/24 already there), so nothing is hard-coded."""
    used = _used_networks()
    candidates = list(ipaddress.ip_network("198.18.0.0/15").subnets(new_prefix=24))
    candidates += [ipaddress.ip_network("198.51.100.0/24"), ipaddress.ip_network("203.0.113.0/24")]
    free = [c for c in candidates if not any(c.overlaps(u) for u in used)]
    if len(free) < n:
        raise RuntimeError(f"netlab: no {n} free /24s in 198.18.0.0/15 or TEST-NET-2/3; host "
                           f"networks: {sorted(set(map(str, used)))}")
    return free[:n]


_LINK_NET, _SERVER_NET = _free_subnets(2)
NS_ADDR = str(_LINK_NET[2])  # the lab's end of the veth: its DNS server
HOST_ADDR = str(_LINK_NET[1])  # the host's end (a host address: always denied)
WEB = str(_SERVER_NET[10])  # allowed.test, *.allowed.test
OTHER = str(_SERVER_NET[20])  # other.test (never allowed by name)
METADATA = "169.254.169.254"
PRIVATE = ["10.99.0.1", "192.168.99.1"]
SINK_PORTS = [80, 443, 853, 8080]
RULE_PREF = "5000"  # the lab's routing rules, ahead of main (32766)

ZONE = {
    "allowed.test": WEB,
    "www.allowed.test": WEB,
    "other.test": OTHER,
    "rebind.allowed.test": METADATA,  # an allowed name answered with the metadata address
    "loop.allowed.test": "127.0.0.1",
    "priv.allowed.test": PRIVATE[0],
}

SERVER = r'''
import socket, struct, sys, threading, time
log = open(sys.argv[1], "a", buffering=1)
zone = eval(sys.argv[2])
lock = threading.Lock()
def note(line):
    with lock:
        log.write(line + "\n")

def qname(msg):
    i, labels = 12, []
    while msg[i]:
        n = msg[i]; labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace")); i += n + 1
    return ".".join(labels).lower(), i + 1

def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[3], 53))
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            name, end = qname(msg)
            qtype = struct.unpack(">H", msg[end:end + 2])[0]
        except Exception:
            continue
        note(f"Q {name} {qtype} {peer[0]}")
        q = msg[12:end + 4]
        ans, rcode = b"", 3
        if qtype == 16:  # TXT for any name: an exfiltration channel if it were reached
            txt = b"secret-txt"
            ans, rcode = b"\xc0\x0c" + struct.pack(">HHIH", 16, 1, 60, len(txt) + 1) + bytes([len(txt)]) + txt, 0
        elif name in zone:
            rcode = 0
            fam, rtype = (socket.AF_INET6, 28) if ":" in zone[name] else (socket.AF_INET, 1)
            if qtype == rtype:  # A for a v4 address, AAAA for a v6 one
                raw = socket.inet_pton(fam, zone[name])
                ans = b"\xc0\x0c" + struct.pack(">HHIH", rtype, 1, 60, len(raw)) + raw
        hdr = msg[:2] + struct.pack(">HHHHH", 0x8180 | rcode, 1, 1 if ans else 0, 0, 0)
        s.sendto(hdr + q + ans, peer)

def sink(addr, port):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(64)
    while True:
        c, peer = s.accept()
        threading.Thread(target=serve, args=(c, addr, port, peer), daemon=True).start()

def serve(c, addr, port, peer):
    c.settimeout(5)
    try:
        head = c.recv(4096)
    except OSError:
        head = b""
    note(f"C {addr}:{port} {peer[0]} {head[:200].hex()}")
    if head.startswith(b"GET /big"):
        n = int(head.split(b" ")[1][5:] or b"0")
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n)
        chunk = b"x" * 65536
        while n > 0:
            k = min(n, len(chunk)); c.sendall(chunk[:k]); n -= k
    elif head.startswith(b"GET") or head.startswith(b"HEAD"):
        body = f"hello from {addr}:{port}\n".encode()
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    c.close()

threading.Thread(target=dns, daemon=True).start()
for a in sys.argv[4].split(","):
    for p in (80, 443, 853, 8080):
        threading.Thread(target=sink, args=(a, p), daemon=True).start()
note("READY")
while True:
    time.sleep(3600)
'''


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


class HostSink:
    """TCP and UDP listeners on every host address (0.0.0.0:port) in the test process."""

    def __init__(self):
        self.events = []
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("0.0.0.0", 0))
        self.port = self.tcp.getsockname()[1]
        self.tcp.listen(64)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", self.port))
        self.stop = False
        for f in (self._tcp, self._udp):
            threading.Thread(target=f, daemon=True).start()

    def _tcp(self):
        while not self.stop:
            try:
                c, peer = self.tcp.accept()
            except OSError:
                return
            self.events.append(("tcp", peer[0]))
            c.close()

    def _udp(self):
        while not self.stop:
            try:
                _, peer = self.udp.recvfrom(4096)
            except OSError:
                return
            self.events.append(("udp", peer[0]))

    def close(self):
        self.stop = True
        self.tcp.close()
        self.udp.close()


class Lab:
    def __init__(self):
        tag = secrets.token_hex(3)
        self.ns = f"isnl-{tag}"
        self.host_if = f"inl{tag}"
        self.peer_if = f"inp{tag}"
        self.log = tempfile.NamedTemporaryFile(prefix="netlab-", suffix=".log", delete=False).name
        self.routes = [str(_SERVER_NET), f"{METADATA}/32"] + [f"{p}/32" for p in PRIVATE]
        # The lab's routes live in a table of their own, chosen by rules ahead of main: they
        # never collide with the host's routes (a cloud host's own route to the metadata
        # address) and tearing the lab down never deletes one of the host's.
        self.table = str(0x10000 + int(tag, 16))
        self.proc = None
        try:
            self._up()
        except Exception:
            self.close()
            raise

    def _up(self):
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if,
           "netns", self.ns)
        sh("ip", "addr", "add", f"{HOST_ADDR}/24", "dev", self.host_if)
        sh("ip", "link", "set", self.host_if, "up")
        sh("ip", "-n", self.ns, "addr", "add", f"{NS_ADDR}/24", "dev", self.peer_if)
        sh("ip", "-n", self.ns, "link", "set", self.peer_if, "up")
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        servers = [WEB, OTHER, METADATA] + PRIVATE
        for a in servers:
            sh("ip", "-n", self.ns, "addr", "add", f"{a}/32", "dev", "lo")
        # The forbidden destinations lead into the lab, never to a real network: a leak is
        # caught by a sink here.
        for r in self.routes:
            sh("ip", "route", "add", r, "via", NS_ADDR, "dev", self.host_if, "onlink",
               "table", self.table)
            sh("ip", "rule", "add", "to", r, "lookup", self.table, "pref", RULE_PREF)
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, "-c", SERVER, self.log, repr(ZONE),
             NS_ADDR, ",".join(servers)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while "READY" not in self.text():
            assert time.time() < deadline, "netlab servers did not start"
            time.sleep(0.05)
        time.sleep(0.2)  # the sink threads bind right after READY

    def text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def mark(self):
        """A position in the log: events() after it."""
        return len(self.text())

    def events(self, since=0):
        out = []
        for line in self.text()[since:].splitlines():
            parts = line.split(" ")
            if parts[0] == "Q":
                out.append(("dns", parts[1], int(parts[2])))
            elif parts[0] == "C":
                out.append(("tcp", parts[1], bytes.fromhex(parts[3]) if len(parts) > 3 else b""))
        return out

    def connections(self, since=0, dest=None):
        return [e for e in self.events(since) if e[0] == "tcp" and
                (dest is None or e[1].split(":")[0] == dest or e[1] == dest)]

    def queries(self, since=0):
        return [(e[1], e[2]) for e in self.events(since) if e[0] == "dns"]

    def close(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        for r in self.routes:
            sh("ip", "rule", "del", "to", r, "lookup", self.table, "pref", RULE_PREF, check=False)
        sh("ip", "route", "flush", "table", self.table, check=False)
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.ns, check=False)
        try:
            os.unlink(self.log)
        except OSError:
            pass


# ---- clients run inside a sandbox (python3 from the host template) ----

CLIENT = r'''
import socket, ssl, struct, sys, json
op = sys.argv[1]
def out(**kw):
    print(json.dumps(kw)); sys.stdout.flush()
try:
    if op == "http":  # http HOST [IP] [PORT]
        host = sys.argv[2]; ip = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else host
        port = int(sys.argv[4]) if len(sys.argv) > 4 else 80
        s = socket.create_connection((ip, port), timeout=5)
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b: break
            data += b
        out(ok=True, body=data.decode("latin1"))
    elif op == "tls":  # tls SNI IP [PORT]: a ClientHello with that SNI
        ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
        s = socket.create_connection((sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 443), timeout=5)
        try:
            ctx.wrap_socket(s, server_hostname=sys.argv[2])
            out(ok=True)
        except (ssl.SSLError, OSError) as e:
            out(ok=False, err=str(e))
    elif op == "tcp":  # tcp IP PORT [PAYLOAD]
        s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=3)
        s.sendall((sys.argv[4] if len(sys.argv) > 4 else "ping\r\n\r\n").encode())
        s.settimeout(3)
        try:
            d = s.recv(100)
        except OSError:
            d = b""
        out(ok=True, data=d.decode("latin1"))
    elif op == "udp":  # udp IP PORT
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"ping", (sys.argv[2], int(sys.argv[3])))
        out(ok=True)
    elif op == "dns":  # dns NAME TYPE [SERVER] [tcp]
        name, qtype = sys.argv[2], int(sys.argv[3])
        server = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else "192.0.2.53"
        q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
        for label in name.split("."):
            q += bytes([len(label)]) + label.encode()
        q += b"\x00" + struct.pack(">HH", qtype, 1)
        if len(sys.argv) > 5 and sys.argv[5] == "tcp":
            s = socket.create_connection((server, 53), timeout=5)
            s.sendall(struct.pack(">H", len(q)) + q)
            n = struct.unpack(">H", s.recv(2))[0]; r = b""
            while len(r) < n: r += s.recv(n - len(r))
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
            s.sendto(q, (server, 53)); r = s.recv(4096)
        rcode = r[3] & 15; an = struct.unpack(">H", r[6:8])[0]
        addrs = []
        i = 12
        while r[i]: i += r[i] + 1
        i += 5
        for _ in range(an):
            if r[i] & 0xc0 == 0xc0: i += 2
            else:
                while r[i]: i += r[i] + 1
                i += 1
            t, _, _, ln = struct.unpack(">HHIH", r[i:i + 10]); i += 10
            if t == 1: addrs.append(socket.inet_ntoa(r[i:i + 4]))
            i += ln
        out(ok=True, rcode=rcode, answers=an, addrs=addrs)
    elif op == "resolve":  # resolve NAME: through the sandbox's libc and /etc/resolv.conf
        out(ok=True, addrs=sorted({a[4][0] for a in socket.getaddrinfo(sys.argv[2], 80, socket.AF_INET)}))
except Exception as e:
    out(ok=False, err=f"{type(e).__name__}: {e}")
'''


def run_client(client, sid, *args, timeout=30):
    """Runs one CLIENT op inside the sandbox and returns its JSON line (what the sandbox saw:
    never the verdict of a test, only a hint for its messages)."""
    import json
    res = client.exec(sid, cmd=["python3", "-c", CLIENT, *[str(a) for a in args]],
                      timeout=timeout)
    line = (res.get("stdout") or "").strip().splitlines()
    return json.loads(line[-1]) if line else {"ok": False, "err": res}


def net_info(client, sid):
    return client.get_json(f"/v1/sandboxes/{sid}/network")


def set_policy(client, sid, policy):
    r = client.request("PUT", f"/v1/sandboxes/{sid}/network", json=policy)
    assert r.status == 200, f"PUT network {policy}: {r}"
    return r.json()


def start_isolad(*extra):
    """An isolad of its own whose resolver forwards to the lab."""
    return root.Isolad(extra_args=["--dns-upstream", f"{NS_ADDR}:53", *extra])


def stop_isolad(d):
    """Discards it; returns problems (it died, did not exit cleanly, ...) as strings."""
    return d.discard_problems(expect_running=True)


# ---- fixtures: imported by the test modules that use the lab (pytest registers them there) ----

@pytest.fixture(scope="module")
def lab():
    """The lab, one per test module."""
    lab = Lab()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def nd(lab):
    """An isolad resolving through the lab; it must stop cleanly."""
    d = start_isolad()
    yield d
    problems = stop_isolad(d)
    assert not problems, problems


@pytest.fixture
def c(nd):
    return nd.client(timeout=60)


@pytest.fixture
def mk(c):
    """mk(network=None, **fields) -> id of a new sandbox, deleted after the test."""
    made = []

    def make(network=None, **kw):
        fields = dict(kw)
        if network is not None:
            fields["network"] = network
        sb = c.create_sandbox(**fields)
        made.append(sb["id"])
        return sb["id"]

    yield make
    for sid in made:
        c.delete_sandbox(sid)
