#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# isolad.sh: sourced by the node suites (tests/sdk-js, tests/mcp) — starts a private isolad on a
# temp state dir like tests/conftest.py does, and stops it (bounded) on exit.
# Sets ISOLA_TEST_SOCKET, ISOLA_TEST_URL, ISOLA_TEST_TOKEN, ISOLA_TEST_STATE. ISOLAD_EXTRA_ARGS (words)
# are added to isolad's command line.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${ISOLA_BUILD:-$REPO/build}
ISOLAD_BIN=$BUILD/src/isolad/isolad
AGENT_BIN=${ISOLA_AGENT:-$REPO/build/src/agent/isola-agent}
export ISOLA_CLI_BIN=${ISOLA_CLI_BIN:-$BUILD/src/cli/isola}

isolad_start() {
	local b
	for b in "$ISOLAD_BIN" "$AGENT_BIN" "$ISOLA_CLI_BIN"; do
		[ -x "$b" ] || { echo "isolad.sh: \`$b\` is missing: build first (ninja -C build)" >&2; return 1; }
	done
	ISOLA_TEST_STATE=$(mktemp -d /tmp/isola-node-XXXXXX)
	chmod 700 "$ISOLA_TEST_STATE"
	ISOLA_TEST_SOCKET=$ISOLA_TEST_STATE/isolad.sock
	local port
	port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	ISOLA_TEST_URL=http://127.0.0.1:$port
	setsid "$ISOLAD_BIN" --state-dir "$ISOLA_TEST_STATE" --socket "$ISOLA_TEST_SOCKET" \
		--listen "127.0.0.1:$port" --agent "$AGENT_BIN" ${ISOLAD_EXTRA_ARGS:-} >"$ISOLA_TEST_STATE/isolad.log" 2>&1 </dev/null &
	ISOLAD_PID=$!
	trap isolad_stop EXIT
	local i
	for i in $(seq 1 300); do # 30 s
		if ! kill -0 "$ISOLAD_PID" 2>/dev/null; then
			echo "isolad.sh: isolad exited during start:" >&2
			tail -n 50 "$ISOLA_TEST_STATE/isolad.log" >&2
			return 1
		fi
		if curl -sf --max-time 2 --unix-socket "$ISOLA_TEST_SOCKET" http://localhost/v1/health >/dev/null 2>&1; then
			ISOLA_TEST_TOKEN=$(cat "$ISOLA_TEST_STATE/api.token")
			export ISOLA_TEST_SOCKET ISOLA_TEST_URL ISOLA_TEST_TOKEN ISOLA_TEST_STATE
			return 0
		fi
		sleep 0.1
	done
	echo "isolad.sh: isolad did not answer /v1/health within 30 s" >&2
	tail -n 50 "$ISOLA_TEST_STATE/isolad.log" >&2
	return 1
}

isolad_stop() {
	[ -n "${ISOLAD_PID:-}" ] || return 0
	if kill -0 "$ISOLAD_PID" 2>/dev/null; then
		# Destroy what the tests left, then SIGTERM; SIGKILL after 20 s.
		local ids id
		ids=$(curl -s --max-time 10 --unix-socket "$ISOLA_TEST_SOCKET" http://localhost/v1/sandboxes |
			/usr/bin/python3 -c 'import json,sys; [print(s["id"]) for s in json.load(sys.stdin).get("sandboxes",[])]' 2>/dev/null)
		for id in $ids; do
			curl -s --max-time 30 -X DELETE --unix-socket "$ISOLA_TEST_SOCKET" "http://localhost/v1/sandboxes/$id" >/dev/null
		done
		kill -TERM "$ISOLAD_PID" 2>/dev/null
		local i
		for i in $(seq 1 200); do
			kill -0 "$ISOLAD_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$ISOLAD_PID" 2>/dev/null; then
			echo "isolad.sh: isolad ignored SIGTERM for 20 s; killing it" >&2
			kill -KILL "$ISOLAD_PID" 2>/dev/null
		fi
	fi
	wait "$ISOLAD_PID" 2>/dev/null
	ISOLAD_PID=
	if grep -q "$ISOLA_TEST_STATE" /proc/self/mountinfo; then
		echo "isolad.sh: mounts still reference $ISOLA_TEST_STATE; state kept" >&2
	elif [ -z "${ISOLA_KEEP_STATE:-}" ]; then
		rm -rf "$ISOLA_TEST_STATE"
	fi
}

# npm ci in a directory; any failure is fatal for the suite (no silent skip).
npm_ci() {
	(cd "$1" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) || {
		echo "isolad.sh: npm ci in $1 failed" >&2
		return 1
	}
}
