#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# mkimage: writes OCI-layout and docker-archive tarballs, good and hostile, for test_images.
"""Usage: mkimage.py CASE OUT.tar HOSTDIR

HOSTDIR is an absolute host directory the hostile cases try to reach (it holds a file
`victim`). Standard library only.
"""
import gzip
import hashlib
import io
import json
import platform
import shutil
import subprocess
import sys
import tarfile

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def layer(entries, compress=False):
    """entries: (kind, name, ...) tuples; returns the layer tar bytes (gzip if compress)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            kind, name = e[0], e[1]
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            data = None
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, e[2] if len(e) > 2 else 0o755
            elif kind == "file":
                data = e[2]
                ti.size = len(data)
                ti.mode = e[3] if len(e) > 3 else 0o644
                ti.uid = ti.gid = e[4] if len(e) > 4 else 0
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, e[2]
            elif kind == "hard":
                ti.type, ti.linkname = tarfile.LNKTYPE, e[2]
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor, ti.mode = tarfile.CHRTYPE, 1, 3, 0o666
            elif kind == "fifo":
                ti.type, ti.mode = tarfile.FIFOTYPE, 0o600
            else:
                raise ValueError(kind)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    if compress == "zstd" and shutil.which("zstd"):
        return subprocess.run(["zstd", "-q", "-c"], input=raw, check=True,
                              stdout=subprocess.PIPE).stdout, raw
    return (gzip.compress(raw, mtime=0) if compress else raw), raw


def sha(b):
    return hashlib.sha256(b).hexdigest()


def config(layers, cfg):
    return json.dumps({
        "architecture": ARCH, "os": "linux", "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(raw) for _, raw in layers]},
    }).encode()


def add(t, name, data):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mtime = len(data), 1700000000
    t.addfile(ti, io.BytesIO(data))


def write_oci(out, layers, cfg, corrupt_layer=None):
    blobs = {}

    def blob(data, media):
        blobs[sha(data)] = data
        return {"mediaType": media, "digest": "sha256:" + sha(data), "size": len(data)}

    descs = []
    for i, (data, raw) in enumerate(layers):
        media = "application/vnd.oci.image.layer.v1.tar"
        if data[:2] == b"\x1f\x8b":
            media += "+gzip"
        elif data[:4] == b"\x28\xb5\x2f\xfd":
            media += "+zstd"
        descs.append(blob(data, media))
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(config(layers, cfg), "application/vnd.oci.image.config.v1+json"),
        "layers": descs,
    }).encode()
    index = {"schemaVersion": 2, "manifests": [
        dict(blob(manifest, "application/vnd.oci.image.manifest.v1+json"),
             platform={"os": "linux", "architecture": ARCH}),
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + "0" * 64, "size": 2,
         "platform": {"os": "windows", "architecture": "arm"}},
    ]}
    if corrupt_layer is not None:
        d = descs[corrupt_layer]["digest"][7:]
        b = bytearray(blobs[d])
        b[len(b) // 2] ^= 0xFF
        blobs[d] = bytes(b)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        add(t, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add(t, "index.json", json.dumps(index).encode())
        for d, data in blobs.items():
            add(t, "blobs/sha256/" + d, data)


def write_docker(out, layers, cfg):
    c = config(layers, cfg)
    names = []
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        for i, (data, raw) in enumerate(layers):
            d = "%064x" % (i + 1)
            names.append(d + "/layer.tar")
            add(t, d + "/layer.tar", data)
        # An alias the way older `docker save` writes repeated layers.
        ti = tarfile.TarInfo("alias/layer.tar")
        ti.type, ti.linkname = tarfile.SYMTYPE, "../" + names[-1]
        t.addfile(ti)
        names[-1] = "alias/layer.tar"
        add(t, sha(c) + ".json", c)
        add(t, "manifest.json", json.dumps(
            [{"Config": sha(c) + ".json", "RepoTags": ["t:latest"], "Layers": names}]).encode())


def good_layers(docker=False):
    l1 = layer([
        ("dir", "etc"), ("file", "etc/hello", b"v1\n"), ("file", "etc/gone", b"x"),
        ("dir", "opq"), ("file", "opq/old1", b"x"), ("dir", "opq/sub"),
        ("file", "opq/sub/old2", b"x"), ("dir", "usr/bin"),
        ("file", "usr/bin/tool", b"#!/bin/sh\n", 0o4755),
        ("file", "data/a", b"linked"), ("hard", "data/b", "data/a"),
        ("sym", "link", "etc/hello"), ("dir", "usr/lib"),
    ], compress=True)
    l2 = layer([
        ("file", "etc/hello", b"v2\n"), ("file", "etc/.wh.gone", b""),
        ("file", "opq/new", b"n"), ("file", "opq/.wh..wh..opq", b""),
        ("sym", "abs", "/etc/hello"),
    ])
    l3 = layer([
        ("dir", "home/user", 0o700), ("file", "home/user/f", b"mine", 0o600, 1000),
        ("file", "./usr/bin//x", b"dot"),
    ], compress="gzip" if docker else "zstd")  # zstd when the zstd tool exists, else gzip
    return [l1, l2, l3]


def main():
    case, out, host = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/")
    cfg = {"Env": ["PATH=/usr/bin:/bin", "FOO=bar=baz"], "WorkingDir": "/srv", "User": "1000:1000"}
    base = layer([("dir", "etc"), ("file", "etc/base", b"b")])
    hostile = {
        "dotdot": [("file", "../../../../../../../../../../.." + host + "/escape-dotdot", b"x")],
        "abs": [("file", host + "/abs", b"x")],
        "symfile": [("sym", "a", host), ("file", "a/pwned", b"x")],
        "whsym": [("file", "keep", b"k"), ("sym", "b", host), ("file", "b/.wh.victim", b"")],
        "hardsym": [("sym", "c", host), ("hard", "hl", "c/victim")],
        "harddotdot": [("hard", "hl", "../../../../../../../.." + host + "/victim")],
        "device": [("chr", "dev/evil"), ("fifo", "run/fifo"), ("file", "ok", b"ok")],
        "big": [("file", "big", b"\0" * (2 << 20))],
        "inroot": [("dir", "usr/lib"), ("sym", "lib", "usr/lib"), ("file", "lib/libx.so", b"x")],
    }
    if case == "oci-good":
        write_oci(out, good_layers(), cfg)
    elif case == "docker-good":
        write_docker(out, good_layers(docker=True), {"Env": ["PATH=/bin"]})
    elif case == "digest":
        write_oci(out, good_layers(), cfg, corrupt_layer=1)
    elif case == "truncated":
        write_oci(out, good_layers(), cfg)
        with open(out, "r+b") as f:
            f.truncate(f.seek(0, 2) * 2 // 3)
    elif case == "badgz":
        data, raw = layer([("file", "f", bytes(range(256)) * 512)], compress=True)
        write_oci(out, [base, (data[: len(data) // 2], raw)], cfg)
    elif case in hostile:
        write_oci(out, [base, layer(hostile[case], compress=case == "big")], cfg)
    else:
        sys.exit("unknown case " + case)


if __name__ == "__main__":
    main()
