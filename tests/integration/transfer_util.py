# SPDX-License-Identifier: Apache-2.0
"""transfer_util: big trees for the directory transfer tests (CLI here, the SDKs in tests/sdk
and tests/sdk-js): made inside a sandbox, checksummed on both sides."""
import json
import subprocess
import sys
import tempfile

# Runs inside the sandbox (python3 of the host template): writes {relpath: sha256} of the tree
# argv[1] as JSON to argv[2] (a file: exec output is capped, the manifest of 20,000 files is not
# small).
MANIFEST_PY = r"""
import hashlib, json, os, sys
root = sys.argv[1]
out = {}
for d, dirs, files in os.walk(root):
    for n in files:
        p = os.path.join(d, n)
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        out[os.path.relpath(p, root)] = h.hexdigest()
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""

# Runs inside the sandbox: argv[1] dir, argv[2] count, argv[3] size — count random files of
# size bytes spread over subdirectories of 1,000.
MAKE_MANY_PY = r"""
import os, sys
root, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    d = os.path.join(root, "d%03d" % (i // 1000))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(size))
"""


def local_manifest(root):
    """The same manifest of a local tree (the same script, run here)."""
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run([sys.executable, "-c", MANIFEST_PY, str(root), out.name], check=True)
        return json.load(out)


def make_local_tree(root, count, size):
    """The same kind of tree, made locally."""
    subprocess.run([sys.executable, "-c", MAKE_MANY_PY, str(root), str(count), str(size)],
                   check=True)
