# SPDX-License-Identifier: Apache-2.0
"""isolad binds its listeners' TCP ports before anything of its own takes a kernel-picked port.

The DNS resolver and the egress proxy bind port 0. CI once saw a restart fail with "listen on
`127.0.0.1:P`: Address already in use": the resolver, started first, had been given P in the
moment the old isolad let it go. This test makes that certain instead of rare: isolad runs in
a network namespace of its own (nsenter) whose ephemeral range is two ports, P-1 and P, with
the API on P and the resolver on a fixed port. Linux's bind(0) for TCP tries the range's odd
offsets first (inet_csk_find_open_port leaves the even ones to connect()), i.e. P, so before
the fix the proxy took P at every start; now isolad holds P first and the proxy gets P-1.
"""

import subprocess
import uuid

import pytest

import netlab

PORT = 40001  # the API's; the namespace's ephemeral range is 40000-40001
DNS_PORT = 40100
OTHER_PORT = 40200  # the API's when the exposure listener holds PORT


@pytest.fixture
def netns():
    ns = f"isola-lo-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        f"net.ipv4.ip_local_port_range={PORT - 1} {PORT}"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def curl(netns, url, token=None):
    """HTTP status of a GET from inside the namespace, from a fixed source port (the two
    ephemeral ones are both taken)."""
    auth = ["-H", f"Authorization: Bearer {token}"] if token else []
    got = subprocess.run(["ip", "netns", "exec", netns, "curl", "-sS", "--local-port",
                          "41000-41100", "-o", "/dev/null", "-w", "%{http_code}"] + auth + [url],
                         capture_output=True, text=True, timeout=30)
    return got.stdout, got.stderr


@pytest.mark.parametrize("holder", ["api", "expose"])
def test_listen_ports_not_taken_by_own_ephemeral_ports(netns, holder):
    """The API's TCP port (or the exposure listener's) is P; four starts, the last after
    kill -9, each must get it, and the proxy the other port."""
    args = ["--dns-port", DNS_PORT]
    if holder == "expose":
        args += ["--expose-listen", f"127.0.0.1:{PORT}"]
    d = netlab.root.Isolad(port=PORT if holder == "api" else OTHER_PORT, extra_args=args,
                           wrap=["nsenter", f"--net=/run/netns/{netns}"])
    try:
        for i in range(4):
            if i:
                d.restart(kill9=(i == 3))
            if holder == "api":  # start() waited for the unix socket; TCP must answer too
                code, why = curl(netns, f"http://127.0.0.1:{PORT}/v1/health", d.token)
                assert code == "200", (i, code, why)
            else:  # no such sandbox: the listener itself answers
                code, why = curl(netns, f"http://127.0.0.1:{PORT}/")
                assert code.startswith("4"), (i, code, why)
            log = d.log_text()
            assert log.count(f"proxy: listening on port {PORT - 1},") == i + 1, log[-2000:]
    finally:
        problems = netlab.stop_isolad(d)
    assert not problems, problems
