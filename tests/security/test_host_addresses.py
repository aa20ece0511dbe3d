# SPDX-License-Identifier: Apache-2.0
"""Every address of the host is always denied, however many the host has.

The always-denied check once held the host's addresses in a list of 256 from getifaddrs: on a
host with more (many sandboxes, many interfaces), a later IPv4 address and every global IPv6
one were reachable from a sandbox whose policy allowed the name or everything. Now the kernel's
route lookup answers per decision (src/isolad/net/hostaddr.c).

The test needs a host with 1,000 IPv4 and 1,000 IPv6 addresses without touching the real host:
a network namespace of its own holds them (on a veth pair inside it), and an isolad runs in
that namespace (nsenter), so its proxy dials from there. Sinks listen on some of those
addresses (the 900th among them) and log every connection; the verdict is read only there.
A positive control reaches a host address of the same namespace that the operator opened
(`--egress-open`), by IPv4 and by an AAAA name, so the silence at the other sinks means
something.
"""

import os
import subprocess
import sys
import tempfile
import time

import pytest

import netlab
from netlab import run_client

N = 1000
DNS = "198.19.0.53"  # the namespace's DNS server (isolad's upstream)
OPEN4, OPEN6 = "198.19.0.1", "2001:db8:ff::1"  # host addresses in ranges the operator opens
OPENS = "198.19.0.0/24,2001:db8:ff::/64"
ELSEWHERE = "203.0.113.9"  # where the sandbox dials for a name (the proxy ignores it then)


def nth(i, v6):
    """The i-th (1-based) host address: 198.18.0.0/22 or 2001:db8:1::/64 (as the unit test)."""
    return f"2001:db8:1::{i:x}" if v6 else f"198.18.{i >> 8}.{i & 255}"


SINKS = [nth(i, v6) for i in (1, 257, 900, N) for v6 in (False, True)]
ZONE = {"host900.test": nth(900, False), "host900v6.test": nth(900, True),
        "open.test": OPEN4, "open6.test": OPEN6}


class ManyAddressLab(netlab.Lab):
    """A network namespace with 2,000 addresses, netlab's DNS server and sinks (same log)."""

    def _up(self):
        sh = netlab.sh
        sh("ip", "netns", "add", self.ns)
        lines = ["link set lo up", "link add hd0 type veth peer name hd1", "link set hd0 up",
                 "link set hd1 up", f"addr add {DNS}/32 dev hd0", f"addr add {OPEN4}/32 dev hd0",
                 f"addr add {OPEN6}/128 dev hd0 nodad"]
        for i in range(1, N + 1):
            lines += [f"addr add {nth(i, False)}/32 dev hd0",
                      f"addr add {nth(i, True)}/128 dev hd0 nodad"]
        with tempfile.NamedTemporaryFile("w", prefix="hostaddr-", suffix=".batch") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            sh("ip", "-n", self.ns, "-batch", f.name)
        got = sh("ip", "-n", self.ns, "-o", "addr", "show", "dev", "hd0").stdout
        assert got.count(" inet ") >= N and got.count(" inet6 ") >= N, "addresses missing"
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, "-c", netlab.SERVER, self.log,
             repr(ZONE), DNS, ",".join(SINKS + [OPEN4, OPEN6])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while "READY" not in self.text():
            assert time.time() < deadline, "the namespace's servers did not start"
            time.sleep(0.05)
        time.sleep(0.5)  # the sink threads bind right after READY

    def close(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        netlab.sh("ip", "netns", "del", self.ns, check=False)  # takes hd0/hd1 with it
        try:
            os.unlink(self.log)
        except OSError:
            pass

    def arrivals(self, since, addr):
        """Connections that reached a sink on addr (any port) after `since`."""
        return [e for e in self.connections(since) if e[1].rsplit(":", 1)[0] == addr]


@pytest.fixture(scope="module")
def mlab():
    lab = ManyAddressLab()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def nsd(mlab):
    """An isolad inside the namespace: its proxy dials from there."""
    d = netlab.root.Isolad(extra_args=["--dns-upstream", f"{DNS}:53", "--egress-open", OPENS],
                           wrap=["nsenter", f"--net=/run/netns/{mlab.ns}"])
    yield d
    problems = netlab.stop_isolad(d)
    assert not problems, problems


@pytest.fixture
def sbx(nsd):
    """sbx(policy) -> (client, id) of a new sandbox, deleted after the test."""
    c = nsd.client(timeout=60)
    made = []

    def make(policy):
        made.append(c.create_sandbox(network=policy)["id"])
        return c, made[-1]

    yield make
    for sid in made:
        c.delete_sandbox(sid)


def test_host_addresses_past_256_unreachable_under_allow_all(mlab, sbx):
    c, sid = sbx({"default": "allow"})
    m = mlab.mark()
    ctl = run_client(c, sid, "tcp", OPEN4, 8080)
    assert len(mlab.arrivals(m, OPEN4)) == 1, ("control: an opened host address is reached",
                                               ctl, mlab.events(m))
    m = mlab.mark()
    hints = {}
    for i in (1, 257, 900, N):
        a = nth(i, False)
        hints[a] = [run_client(c, sid, "tcp", a, 8080),
                    run_client(c, sid, "http", "host900.test", a, 80)]
    time.sleep(0.5)
    arrived = [e for a in SINKS for e in mlab.arrivals(m, a)]
    assert arrived == [], f"host addresses reached from a sandbox: {arrived} (sandbox: {hints})"


def test_host_addresses_past_256_unreachable_through_allowed_names(mlab, sbx):
    """An allowed name whose A or AAAA record is a host address (the 900th of each) is never
    dialled; a CIDR rule covering every host address opens none of them either."""
    c, sid = sbx({"allow": list(ZONE) + ["198.18.0.0/22"]})
    m = mlab.mark()
    ctl = [run_client(c, sid, "http", "open.test", ELSEWHERE, 80),
           run_client(c, sid, "http", "open6.test", ELSEWHERE, 80)]
    assert [len(mlab.arrivals(m, a)) for a in (OPEN4, OPEN6)] == [1, 1], \
        ("control: opened host addresses are reached by name, v4 and v6", ctl, mlab.events(m))
    m = mlab.mark()
    hints = [run_client(c, sid, "http", "host900.test", ELSEWHERE, 80),
             run_client(c, sid, "http", "host900v6.test", ELSEWHERE, 80),
             run_client(c, sid, "tls", "host900v6.test", ELSEWHERE, 443),
             run_client(c, sid, "tcp", nth(900, False), 8080)]
    time.sleep(0.5)
    arrived = [e for a in SINKS for e in mlab.arrivals(m, a)]
    assert arrived == [], f"host addresses reached by name: {arrived} (sandbox: {hints})"
    # The proxy looked both names up (the upstream saw them): the denial came after the lookup.
    assert {"host900.test", "host900v6.test"} <= {q[0] for q in mlab.queries(m)}, \
        mlab.queries(m)
