#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# quickstart: README command 1 — deps, build, install (scripts/install.sh), start isolad, run a
# first sandbox step by step with the installed `isola`.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "quickstart: run as root (isolad makes namespaces and cgroups)"; exit 1; }
echo "==> installing dependencies (apt)"
scripts/deps.sh
echo "==> building"
scripts/build.sh

echo "==> installing into /usr/local (scripts/install.sh) and starting isolad"
scripts/install.sh --start

export ISOLA_SOCKET=${ISOLA_SOCKET:-/run/isola/isolad.sock}
ISOLA=/usr/local/bin/isola

echo "==> isola doctor"
$ISOLA doctor
echo "==> create a sandbox from the default template (host)"
ID=$($ISOLA create --label quickstart=1)
echo "    sandbox $ID"
echo "==> run python3 -c 'print(6*7)' inside"
$ISOLA exec "$ID" -- python3 -c 'print(6*7)'
echo "==> write a file and read it back"
echo "hello from the host" | $ISOLA fs write "$ID" /root/hello.txt
$ISOLA fs cat "$ID" /root/hello.txt
echo "==> destroy the sandbox"
$ISOLA rm "$ID"
echo "==> done: isolad keeps running (socket $ISOLA_SOCKET); try: isola run -- uname -a"
echo "    (non-root users: sudo usermod -aG isola USER; remove everything: scripts/install.sh --uninstall)"
