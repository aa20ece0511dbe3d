#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# quickstart: README command 1 — install, build, start isolad, run a first sandbox step by step.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "quickstart: run as root (isolad makes namespaces and cgroups)"; exit 1; }
echo "==> installing dependencies (apt)"
scripts/deps.sh
echo "==> building"
scripts/build.sh

export ISOLA_SOCKET=${ISOLA_SOCKET:-/run/isola/isolad.sock}
ISOLA=build/src/cli/isola
if ! $ISOLA --socket "$ISOLA_SOCKET" version >/dev/null 2>&1 ||
	! curl -s --unix-socket "$ISOLA_SOCKET" http://x/v1/health >/dev/null 2>&1; then
	echo "==> starting isolad (state /var/lib/isola, socket $ISOLA_SOCKET, log /var/log/isolad.log)"
	mkdir -p /run/isola
	nohup build/src/isolad/isolad --state-dir /var/lib/isola --socket "$ISOLA_SOCKET" \
		>>/var/log/isolad.log 2>&1 &
	for _ in $(seq 1 100); do
		[ -S "$ISOLA_SOCKET" ] && break
		sleep 0.05
	done
fi

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
echo "==> done: isolad keeps running (socket $ISOLA_SOCKET); try: $ISOLA run -- uname -a"
