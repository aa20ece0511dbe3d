# SPDX-License-Identifier: Apache-2.0
"""Package installs as root in a process sandbox of an imported Debian image: a local .deb
built in the sandbox with dpkg-deb, installed with `dpkg -i` and with `apt-get install ./x.deb`,
and `apt-get update && apt-get install -y cowsay` with egress allowed only to the Debian archive
host(s) the host's apt uses. apt drops to its `_apt` user (uid 42) for downloads and dpkg
chowns files to many ids: both need root's default capabilities and the sandbox's 65536-id map
(docs/process-tier.md, "Capabilities").

The image is a debootstrap minbase of the host's own release from the host's own mirror, built
once and kept in ISOLA_TEST_DEBIAN_TAR (default /var/tmp/isola-test-debian-CODENAME.tar)."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
import isola  # noqa: E402  (the SDK users use)

pytestmark = pytest.mark.tiers("process")

TEMPLATE = "caps-debian"


def apt_sources():
    """[(uri, suites)] of every enabled `deb` source of the host's apt: one-line *.list and
    deb822 *.sources files (apt reads no other names)."""
    out = []
    paths = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        paths += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    for p in paths:
        if not p.is_file():
            continue
        text = p.read_text(errors="replace")
        if p.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                f = {}
                for ln in stanza.splitlines():
                    if ln.startswith("#") or ":" not in ln or ln[0].isspace():
                        continue
                    k, v = ln.split(":", 1)
                    f[k.strip().lower()] = v.split()
                if "deb" in f.get("types", []) and f.get("enabled", ["yes"])[0] != "no":
                    out += [(u, f.get("suites", [])) for u in f.get("uris", [])]
        else:
            for ln in text.splitlines():
                m = re.match(r"\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)", ln)
                if m:
                    out.append((m.group(2), [m.group(3)]))
    return out


def codename():
    m = re.search(r"^VERSION_CODENAME=(\S+)", Path("/etc/os-release").read_text(), re.M)
    assert m, "/etc/os-release names no VERSION_CODENAME: not a Debian host"
    return m.group(1).strip('"')


def archive_hosts():
    """Each host:port of the host's Debian archive sources: the one external address these
    tests may reach."""
    hosts = set()
    for uri, _ in apt_sources():
        u = urlsplit(uri)
        if u.scheme in ("http", "https") and u.hostname:
            hosts.add(f"{u.hostname}:{u.port or (443 if u.scheme == 'https' else 80)}")
    assert hosts, "the host's apt has no http(s) source"
    return sorted(hosts)


def mirror():
    """The host's main archive: the first source serving the host's release itself."""
    name = codename()
    for uri, suites in apt_sources():
        if name in suites:
            return uri
    pytest.fail(f"no apt source of the host serves `{name}`", pytrace=False)


def pack_rootfs(root, out):
    """Writes root (a directory) as a one-layer docker-archive at out, atomically."""
    work = Path(tempfile.mkdtemp(prefix="isola-debian-pack-", dir=out.parent))
    try:
        for p in (root / "var/cache/apt/archives").glob("*.deb"):
            p.unlink()
        layer = work / "layer.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(layer), "."],
                       check=True, timeout=600)
        h = hashlib.sha256()
        with open(layer, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        cfg = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:"
                               "/bin"], "Cmd": ["/bin/bash"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + h.hexdigest()]}}).encode()
        (work / "config.json").write_bytes(cfg)
        (work / "manifest.json").write_text(json.dumps(
            [{"Config": "config.json", "RepoTags": ["isola-test/debian:minbase"],
              "Layers": ["layer/layer.tar"]}]))
        tmp = out.with_suffix(".tmp")
        with tarfile.open(tmp, "w") as t:
            t.add(work / "config.json", "config.json")
            t.add(work / "manifest.json", "manifest.json")
            t.add(layer, "layer/layer.tar")
        os.replace(tmp, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def debian_image():
    """A docker-archive of a minbase debootstrap of the host's release from the host's
    mirror (built once, then reused)."""
    name = codename()
    out = Path(os.environ.get("ISOLA_TEST_DEBIAN_TAR", f"/var/tmp/isola-test-debian-{name}.tar"))
    if out.exists():
        return out
    assert shutil.which("debootstrap"), "debootstrap is missing: run scripts/deps.sh"
    work = Path(tempfile.mkdtemp(prefix="isola-debian-", dir=out.parent))
    try:
        root = work / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", name, str(root), mirror()],
                       check=True, capture_output=True, timeout=1800)
        pack_rootfs(root, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def sdk(isolad):
    return isola.Client(socket_path=isolad.socket, timeout=600)


@pytest.fixture(scope="module")
def debian(sdk):
    sdk.import_template(TEMPLATE, debian_image(), timeout=1200)
    yield TEMPLATE
    sdk.delete_template(TEMPLATE)


def ok(sb, script, timeout=600):
    res = sb.exec(["/bin/sh", "-c", script], timeout=timeout)
    assert res.exit_code == 0, f"{script!r} -> {res.exit_code}\n{res.stdout}\n{res.stderr}"
    return res.stdout + res.stderr


BUILD_DEB = r"""set -e
rm -rf /tmp/pkg; mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/bin /tmp/pkg/var/lib/{name}
cat > /tmp/pkg/DEBIAN/control <<EOF
Package: {name}
Version: 1.0
Architecture: all
Maintainer: isola tests <tests@isola.invalid>
Description: a package built in the sandbox
EOF
printf '#!/bin/sh\necho hello from {name}\n' > /tmp/pkg/usr/bin/{name}
chmod 755 /tmp/pkg/usr/bin/{name}
# the maintainer script chowns to another user, as real packages do (dpkg runs it as root)
printf '#!/bin/sh\nset -e\nchown _apt:nogroup /var/lib/{name}\nchmod 750 /var/lib/{name}\n' \
  > /tmp/pkg/DEBIAN/postinst
chmod 755 /tmp/pkg/DEBIAN/postinst
dpkg-deb --root-owner-group --build /tmp/pkg /tmp/{name}.deb
chmod 644 /tmp/{name}.deb
"""


@pytest.mark.parametrize("how", ["dpkg", "apt"])
def test_local_deb_installs(sdk, debian, how):
    name = f"isola-hello-{how}"
    with sdk.create_sandbox(template=debian, tier="process") as sb:
        ok(sb, BUILD_DEB.replace("{name}", name))
        if how == "dpkg":
            ok(sb, f"dpkg -i /tmp/{name}.deb")
        else:
            out = ok(sb, f"cd /tmp && apt-get install -y ./{name}.deb")
            # apt reads the file as _apt (setresuid to 42, setgroups): no fallback to root
            assert "unsandboxed" not in out, out
        assert ok(sb, f"dpkg-query -W -f '${{Status}}' {name}") == "install ok installed"
        assert ok(sb, name).strip() == f"hello from {name}"
        assert ok(sb, f"stat -c '%U:%G %a' /var/lib/{name}").strip() == "_apt:nogroup 750"


def test_apt_get_update_and_install_cowsay(sdk, debian):
    hosts = archive_hosts()
    with sdk.create_sandbox(template=debian, tier="process",
                            network={"default": "deny", "allow": hosts}) as sb:
        out = ok(sb, "apt-get update && apt-get install -y --no-install-recommends cowsay",
                 timeout=900)
        # apt fetched as _apt (it says "unsandboxed" when it cannot drop to that user)
        assert "unsandboxed" not in out, out
        assert "moo" in ok(sb, "/usr/games/cowsay moo")
        assert ok(sb, "stat -c %U /var/cache/apt/archives/partial").strip() == "_apt"
