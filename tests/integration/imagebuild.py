# SPDX-License-Identifier: Apache-2.0
"""Builds tiny container images for template tests with the tarfile module: a docker-archive
(`docker save` layout) and an OCI image layout tarball, around a static C program."""

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import time

HELLO_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	char buf[4096];
	if (argc > 2 && !strcmp(argv[1], "env")) {
		const char *v = getenv(argv[2]);
		printf("%s\n", v ? v : "(unset)");
	} else if (argc > 2 && !strcmp(argv[1], "exists")) {
		printf("%s\n", access(argv[2], F_OK) == 0 ? "yes" : "no");
	} else if (argc > 1 && !strcmp(argv[1], "id")) {
		printf("%u\n", (unsigned)getuid());
	} else if (argc > 1 && !strcmp(argv[1], "cwd")) {
		printf("%s\n", getcwd(buf, sizeof(buf)) ? buf : "?");
	} else if (argc > 1 && !strcmp(argv[1], "exit")) {
		return argc > 2 ? atoi(argv[2]) : 0;
	} else {
		printf("hello from template\n");
	}
	return 0;
}
"""


def build_hello(tmpdir):
    """Compiles a static hello binary; returns its bytes."""
    src = tmpdir / "hello.c"
    out = tmpdir / "hello"
    src.write_text(HELLO_C)
    cp = subprocess.run(["gcc", "-static", "-O2", "-o", str(out), str(src)],
                        capture_output=True, timeout=120)
    assert cp.returncode == 0, f"gcc -static failed: {cp.stderr.decode()}"
    return out.read_bytes()


def _add(t, name, data=None, mode=0o644, kind=tarfile.REGTYPE, linkname=""):
    ti = tarfile.TarInfo(name)
    ti.mode = mode
    ti.mtime = int(time.time())
    ti.type = kind
    ti.linkname = linkname
    if kind == tarfile.REGTYPE:
        data = data or b""
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    else:
        t.addfile(ti)


def tar_bytes(entries):
    """entries: list of (name, data|None, mode, kind)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode, kind in entries:
            _add(t, name, data, mode, kind)
    return buf.getvalue()


def base_layer(hello):
    D, F = tarfile.DIRTYPE, tarfile.REGTYPE
    return tar_bytes([
        ("bin", None, 0o755, D), ("etc", None, 0o755, D), ("tmp", None, 0o1777, D),
        ("root", None, 0o700, D), ("home", None, 0o755, D), ("work", None, 0o755, D),
        ("hello", hello, 0o755, F), ("bin/hello", hello, 0o755, F),
        ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home:/bin/sh\n",
         0o644, F),
        ("etc/group", b"root:x:0:\nuser:x:1000:\n", 0o644, F),
        ("etc/old", b"removed by the next layer\n", 0o644, F),
    ])


def second_layer():
    D, F = tarfile.DIRTYPE, tarfile.REGTYPE
    return tar_bytes([("etc", None, 0o755, D), ("etc/.wh.old", b"", 0o644, F),
                      ("etc/new", b"added by layer 2\n", 0o644, F)])


def sha(b):
    return hashlib.sha256(b).hexdigest()


def image_config(layers, env=("PATH=/bin", "GREETING=from-image"), workdir="/work"):
    return json.dumps({
        "architecture": "amd64", "os": "linux",
        "created": "2024-01-01T00:00:00Z",
        "config": {"Env": list(env), "WorkingDir": workdir, "Cmd": ["/hello"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(x) for x in layers]},
        "history": [{"created_by": "isola integration test"} for _ in layers],
    }).encode()


def docker_archive(hello, extra_layers=()):
    """A `docker save`-style tarball with two layers (and extra_layers on top)."""
    layers = [base_layer(hello), second_layer(), *extra_layers]
    cfg = image_config(layers)
    cfg_name = sha(cfg) + ".json"
    entries = []
    layer_paths = []
    for lb in layers:
        d = sha(lb)
        entries.append((d, None, 0o755, tarfile.DIRTYPE))
        entries.append((f"{d}/VERSION", b"1.0", 0o644, tarfile.REGTYPE))
        entries.append((f"{d}/layer.tar", lb, 0o644, tarfile.REGTYPE))
        layer_paths.append(f"{d}/layer.tar")
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": ["isola-test/hello:latest"],
                            "Layers": layer_paths}]).encode()
    entries += [(cfg_name, cfg, 0o644, tarfile.REGTYPE),
                ("manifest.json", manifest, 0o644, tarfile.REGTYPE),
                ("repositories", json.dumps({"isola-test/hello": {"latest": sha(layers[-1])}})
                 .encode(), 0o644, tarfile.REGTYPE)]
    return tar_bytes(entries)


def oci_layout(hello):
    """An OCI image layout tarball (as `skopeo copy ... oci-archive:` writes), gzip layers."""
    layers = [base_layer(hello), second_layer()]
    cfg = image_config(layers)
    blobs = {}
    layer_descs = []
    for lb in layers:
        gz = gzip.compress(lb, mtime=0)
        blobs[sha(gz)] = gz
        layer_descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            "digest": "sha256:" + sha(gz), "size": len(gz)})
    blobs[sha(cfg)] = cfg
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": "sha256:" + sha(cfg), "size": len(cfg)},
        "layers": layer_descs}).encode()
    blobs[sha(manifest)] = manifest
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": "sha256:" + sha(manifest), "size": len(manifest),
                       "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}).encode()
    entries = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644, tarfile.REGTYPE),
               ("index.json", index, 0o644, tarfile.REGTYPE),
               ("blobs", None, 0o755, tarfile.DIRTYPE),
               ("blobs/sha256", None, 0o755, tarfile.DIRTYPE)]
    for d, b in blobs.items():
        entries.append((f"blobs/sha256/{d}", b, 0o644, tarfile.REGTYPE))
    return tar_bytes(entries)
