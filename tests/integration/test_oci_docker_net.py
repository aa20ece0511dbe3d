# SPDX-License-Identifier: Apache-2.0
"""Docker's own networks with isola-runc (docs/oci.md, "Hooks" and "Engines"): a private
dockerd runs inside a network namespace this test makes (`ip netns add`, then dockerd under
`nsenter --net`), with Docker's default networking on: the default bridge, iptables and
docker-proxy all live in that namespace and the host's network is untouched. Docker's bridge and
user-defined networks program the container's namespace from libnetwork's prestart hook, which
isola-runc runs on an empty network namespace of its own that the sandbox joins."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_oci_docker import IMAGE, Dockerd, import_image, poll  # noqa: E402
from test_oci_runtime import RUNC, sandboxes  # noqa: E402

# A tiny TCP server for the image: answers every connection with its token line.
SERVER_C = r'''
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0), c;

	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 16) < 0) {
		perror("tcpserve");
		return 1;
	}
	printf("listening on %s\n", argv[1]);
	fflush(stdout);
	while ((c = accept(s, NULL, NULL)) >= 0) {
		dprintf(c, "%s\n", argv[2]);
		close(c);
	}
	return 1;
}
'''

# A client run inside the namespace: the first line the server at host:port sends.
CLIENT_PY = r'''
import socket, sys, time
end = time.monotonic() + 60
while True:
    try:
        with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as s:
            print(s.makefile().readline().strip())
            break
    except OSError:
        if time.monotonic() > end:
            raise
        time.sleep(0.2)
'''

# In the container: bash's /dev/tcp, retried while the server starts.
FETCH = ("for i in $(echo {1..300}); do (exec 3<>/dev/tcp/{host}/{port} && read -r l <&3 && "
         "echo $l) 2>/dev/null && exit 0; sleep 0.2; done; exit 7")


@pytest.fixture(scope="module")
def netdocker(isolad, tmp_path_factory):
    """(dockerd, netns name): dockerd with its default bridge, in a namespace of ours."""
    name = f"isola-dk{os.getpid()}"
    work = tmp_path_factory.mktemp("oci-docker-net")
    server = work / "tcpserve"
    subprocess.run(["cc", "-O2", "-o", str(server), "-x", "c", "-"], input=SERVER_C,
                   text=True, check=True)
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        d = Dockerd(isolad, RUNC, netns=name)
        try:
            import_image(d, tmp_path_factory, extra=[server])
            yield d, name
        finally:
            d.stop()
    finally:
        # Whatever dockerd left in our namespace (docker-proxy after a crash), by pid.
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "delete", name], check=False)


def in_netns(name, *cmd, **kw):
    return subprocess.run(["nsenter", f"--net=/run/netns/{name}"] + list(cmd),
                          capture_output=True, text=True, timeout=120, **kw)


def test_default_bridge(netdocker, isolad):
    """The container has an eth0 with the bridge's address and reaches a server on the
    namespace's side of the bridge; its sandbox joined the namespace isola-runc made."""
    d, ns = netdocker
    token = secrets.token_hex(8)
    cid = d("run", "-d", "--runtime", "isola", IMAGE, "sleep", "1000").stdout.strip()
    srv = None
    try:
        ip, gw = d("inspect", "-f", "{{.NetworkSettings.IPAddress}} {{.NetworkSettings.Gateway}}",
                   cid).stdout.split()
        assert ip != gw, ip
        sb = sandboxes(isolad, **{"oci.id": cid})[0]
        assert sb["network"]["mode"] == "joined", sb
        assert sb["network"]["path"].endswith(f"/{cid}/netns"), sb
        srv = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "python3", "-c",
                                "import socket, sys\n"
                                "s = socket.create_server((sys.argv[1], 0))\n"
                                "print(s.getsockname()[1], flush=True)\n"
                                "while True:\n"
                                "    c, _ = s.accept(); c.sendall(sys.argv[2].encode() + b'\\n');"
                                " c.close()\n", gw, token],
                               stdout=subprocess.PIPE, text=True)
        port = int(srv.stdout.readline())
        cp = d("exec", cid, "bash", "-c",
               "grep -c 'eth0:' /proc/net/dev; grep -c ' " + ip + "$' /proc/net/fib_trie; " +
               FETCH.replace("{host}", gw).replace("{port}", str(port)))
        assert cp.stdout.split() == ["1", "2", token], (cp.stdout, cp.stderr)
    finally:
        d("rm", "-f", cid, check=False)
        if srv:
            srv.kill()
            srv.wait()
    poll(lambda: sandboxes(isolad, **{"oci.id": cid}) == [], "sandbox left after rm")


def test_publish_port(netdocker):
    """`-p HOSTPORT:80`: a server in the container answers on the namespace's 127.0.0.1."""
    d, ns = netdocker
    token = secrets.token_hex(8)
    d("run", "-d", "--runtime", "isola", "--name", "pub1", "-p", "18080:80", IMAGE,
      "tcpserve", "80", token)
    try:
        cp = in_netns(ns, "python3", "-c", CLIENT_PY, "127.0.0.1", "18080")
        assert cp.returncode == 0 and cp.stdout == token + "\n", (cp.stdout, cp.stderr,
                                                                 d("logs", "pub1").stderr)
    finally:
        d("rm", "-f", "pub1", check=False)


def test_user_defined_network_resolves_names(netdocker, isolad):
    """`docker network create`: one container reaches another by its name (Docker's embedded
    DNS at 127.0.0.11 in the container's namespace)."""
    d, _ = netdocker
    net, token = f"isolanet{os.getpid()}", secrets.token_hex(8)
    d("network", "create", net)
    try:
        d("run", "-d", "--runtime", "isola", "--network", net, "--name", "udsrv", IMAGE,
          "tcpserve", "8080", token)
        cp = d("run", "--rm", "--runtime", "isola", "--network", net, IMAGE, "bash", "-c",
               FETCH.replace("{host}", "udsrv").replace("{port}", "8080"), check=False)
        assert cp.returncode == 0 and cp.stdout == token + "\n", (cp.stdout, cp.stderr)
    finally:
        d("rm", "-f", "udsrv", check=False)
        d("network", "rm", net, check=False)

