#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run: the E2B compatibility suite — a real isolad on a private state dir and TCP port, the
# unmodified `e2b` npm SDK (installed from package-lock.json by `npm ci`), `node --test`.
#
# Usage: tests/e2b/run.sh [JUNIT_XML]        (run as root: isolad creates sandboxes)
# Environment:
#   ISOLA_BUILD       build tree with src/isolad/isolad (default <repo>/build)
#   ISOLA_AGENT       static agent (default <repo>/build/src/agent/isola-agent)
#   E2B_SKIP_NPM_CI=1 reuse tests/e2b/node_modules as it is
#   ISOLA_KEEP_STATE=1 keep the state directory (and isolad's log) afterwards
#   E2B_TESTS         test files to run (default every *.test.mjs here, one concern per file)
#   ISOLA_TEST_UID_BASE  isolad's --uid-base (keeps parallel runs' host uids apart)
# Exit status: node's (0 = every test passed); 1 when isolad would not start or a sanitizer
# report appeared in its log.
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="${ISOLA_BUILD:-$REPO/build}"
AGENT="${ISOLA_AGENT:-$REPO/build/src/agent/isola-agent}"
ISOLAD="$BUILD/src/isolad/isolad"
JUNIT="${1:-$REPO/build/test-results/e2b.xml}"
case "$JUNIT" in /*) ;; *) JUNIT="$PWD/$JUNIT" ;; esac # the script cds below

for f in "$ISOLAD" "$AGENT"; do
	[ -x "$f" ] || { echo "e2b: \`$f\` is missing: build first (ninja -C build)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "e2b: node is not installed (scripts/deps.sh)" >&2; exit 1; }

cd "$HERE" || exit 1
if [ "${E2B_SKIP_NPM_CI:-0}" != 1 ]; then
	npm ci --no-audit --no-fund --loglevel=error >/dev/null || { echo "e2b: npm ci failed" >&2; exit 1; }
fi

STATE="$(mktemp -d /tmp/isola-e2b-XXXXXX)"
chmod 700 "$STATE"
PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
LOG="$STATE/isolad.log"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
	setsid "$ISOLAD" --state-dir "$STATE" --socket "$STATE/isolad.sock" \
	--listen "127.0.0.1:$PORT" --expose-listen 127.0.0.1:0 \
	--agent "$AGENT" --log-level info ${ISOLA_TEST_UID_BASE:+--uid-base "$ISOLA_TEST_UID_BASE"} \
	>"$LOG" 2>&1 </dev/null &
PID=$!

URL="http://127.0.0.1:$PORT"
stop_isolad() {
	local tok
	if kill -0 "$PID" 2>/dev/null; then
		# Nothing a failed test left may outlive the run: destroy every sandbox, then stop.
		tok="$(cat "$STATE/api.token" 2>/dev/null)"
		URL="$URL" TOK="$tok" node -e '
			const h = { Authorization: `Bearer ${process.env.TOK}` }
			const u = process.env.URL
			fetch(`${u}/v1/sandboxes`, { headers: h }).then((r) => r.json()).then((j) =>
				Promise.all((j.sandboxes || []).map((s) =>
					fetch(`${u}/v1/sandboxes/${s.id}`, { method: "DELETE", headers: h }))))
				.catch(() => {})' || true
		kill -TERM "$PID" 2>/dev/null
		for _ in $(seq 1 200); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$PID" 2>/dev/null
	fi
	wait "$PID" 2>/dev/null
}
cleanup() {
	stop_isolad
	if [ "${ISOLA_KEEP_STATE:-0}" = 1 ]; then
		echo "e2b: state kept in $STATE"
	else
		rm -rf "$STATE"
	fi
}
trap cleanup EXIT

ready=0
for _ in $(seq 1 300); do
	kill -0 "$PID" 2>/dev/null || break
	if node -e "fetch('$URL/v1/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"; then
		ready=1
		break
	fi
	sleep 0.1
done
if [ "$ready" != 1 ]; then
	echo "e2b: isolad did not become ready; its log:" >&2
	tail -n 50 "$LOG" >&2
	exit 1
fi

mkdir -p "$(dirname "$JUNIT")"
E2B_API_URL="$URL" E2B_SANDBOX_URL="$URL" E2B_API_KEY="$(cat "$STATE/api.token")" \
	node --test --test-concurrency=1 \
	--test-reporter=spec --test-reporter-destination=stdout \
	--test-reporter=junit --test-reporter-destination="$JUNIT" \
	${E2B_TESTS:-*.test.mjs}
rc=$?

# Stopped first: LeakSanitizer reports when isolad exits.
stop_isolad
if grep -qE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer" "$LOG"; then
	echo "e2b: sanitizer report in isolad's log:" >&2
	grep -A 40 -E "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer" "$LOG" | head -80 >&2
	rc=1
fi
if [ "$rc" != 0 ]; then
	echo "e2b: isolad log (last 40 lines):" >&2
	tail -n 40 "$LOG" >&2
fi
exit "$rc"
