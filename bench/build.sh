#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build: `isola template build` of one Dockerfile (a pip install of a local wheel) cold, then
# again with every layer from the cache; prints both times. Needs a running isolad
# (ISOLA_SOCKET or the default socket) and build/src/cli/isola.
set -euo pipefail
cd "$(dirname "$0")/.."
isola=${ISOLA:-build/src/cli/isola}
sock=(${ISOLA_SOCKET:+--socket "$ISOLA_SOCKET"})
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
/usr/bin/python3 - "$ctx" <<'PY'
import sys, zipfile, pathlib
d = pathlib.Path(sys.argv[1])
with zipfile.ZipFile(d / "benchpkg-1.0-py3-none-any.whl", "w") as z:
    z.writestr("benchpkg/__init__.py", "X = 1\n")
    z.writestr("benchpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: benchpkg\nVersion: 1.0\n")
    z.writestr("benchpkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("benchpkg-1.0.dist-info/RECORD", "")
(d / "Dockerfile").write_text(
    "FROM host\nENV PYTHONPATH=/opt/py\nCOPY benchpkg-1.0-py3-none-any.whl /tmp/\n"
    "RUN python3 -m pip install -q --no-index --no-deps --target /opt/py /tmp/benchpkg-1.0-py3-none-any.whl\n"
    "WORKDIR /app\nRUN echo built > /app/stamp\nCMD [\"python3\", \"-c\", \"import benchpkg\"]\n")
PY
# A fresh label right after FROM: every later cache key is new, so the first build is cold.
sed -i "1a LABEL bench.run=$(date +%s%N)" "$ctx/Dockerfile"
name=bench-build-$$
t0=$(date +%s.%N)
"$isola" "${sock[@]}" template build "$name" "$ctx" >/dev/null 2>&1
t1=$(date +%s.%N)
"$isola" "${sock[@]}" template build "$name-2" "$ctx" >/dev/null 2>&1
t2=$(date +%s.%N)
"$isola" "${sock[@]}" template rm "$name" "$name-2" >/dev/null
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "template build: cold %.2f s, cached rebuild %.2f s\n", b - a, c - b }'
