#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test: README command 2 — install, build (normal + ASan/UBSan), run every test, print one summary.
set -uo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "test: run as root (the tests start isolad)"; exit 1; }
scripts/deps.sh || exit 1
scripts/build.sh --asan || { echo "0 passed, 1 failed"; exit 1; }

mkdir -p build/test-results

# show FILE RC N: the last N lines of a node suite's output; after a failure also node's
# "failing tests" section (the assertion and its stack), which CI's log would not show otherwise.
show() {
	if [ "$2" != 0 ]; then
		sed -n '/failing tests:/,$p' "$1" | head -n 120
	fi
	tail -n "$3" "$1"
}
PY=/usr/bin/python3
export ISOLA_BUILD=$PWD/build
export ISOLA_AGENT=$PWD/build/src/agent/isola-agent

echo "==> unit tests (TAP)"
meson test -C build --print-errorlogs --num-processes 2 >build/test-results/unit.txt 2>&1
tail -n 12 build/test-results/unit.txt
echo "==> unit tests under ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C build-asan --print-errorlogs --num-processes 2 >build/test-results/unit-asan.txt 2>&1
tail -n 12 build/test-results/unit-asan.txt

echo "==> guest kernel for the microvm tier (apt-get download linux-image-cloud-amd64)"
scripts/kernel.sh >build/test-results/kernel.txt 2>&1 || { tail -n 20 build/test-results/kernel.txt; }

# The behaviour tests of tests/integration run on both tiers (pytest.mark.tiers, see
# tests/conftest.py); the microvm half boots its VMs under TCG here. The ASan+UBSan isolad's
# session keeps the tiers-marked tests on the process tier (ISOLA_TIERS=process): a guest
# under TCG costs the same against either isolad, and the isolad code only the microvm tier
# runs (boot, jail, console, reattach, the qcow2 overlay) stays covered under ASan by
# test_microvm.py, which always runs.
#
# The two sessions run at the same time: a pytest session mostly waits (measured 2026-12-02:
# test_exec.py used 6.8 s of CPU in 30 s), and one after the other they took 40 of the
# run's 61 minutes. They stay apart by construction: each isolad has its own state dir, port
# and nftables table, and the ASan session's isolads own another host uid range
# (ISOLA_TEST_UID_BASE → isolad --uid-base). Tests that judge host-wide state (every isola
# cgroup or agent on the host, the host's routing rules: pytest.mark.host_exclusive) are left
# out of both and run afterwards with nothing else running.
PYTESTS=(tests/integration tests/security tests/sdk)
R=build/test-results
ASAN_ENV=(ISOLA_BUILD=$PWD/build-asan ISOLA_SANITIZED=1 ISOLA_TIERS=process ISOLA_TEST_UID_BASE=269484032)
# pytest_run NAME [VAR=VALUE ...] -- PYTEST-ARGS: one session, output in $R/NAME.txt,
# JUnit in $R/NAME.xml.
pytest_run() {
	local name=$1 envs=()
	shift
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" $PY -m pytest -q -rfE -p no:cacheprovider --junitxml="$R/$name.xml" "$@" \
		"${PYTESTS[@]}" >"$R/$name.txt" 2>&1
}
# pytest_show NAME RC: a failed session's failures (pytest's own report without its last
# line, bounded), then its summary line (once).
pytest_show() {
	if [ "$2" != 0 ]; then
		sed -n '/^=* FAILURES =*$\|^=* ERRORS =*$/,$p' "$R/$1.txt" | head -n -1 | head -n 600
	fi
	tail -n 1 "$R/$1.txt"
}
echo "==> integration and security tests (pytest, real isolad): two sessions at once —"
echo "    the normal build on both tiers, and the ASan+UBSan build (process tier + test_microvm.py)"
pytest_run pytest -- -m "not host_exclusive" &
pid_normal=$!
pytest_run pytest-asan "${ASAN_ENV[@]}" -- -m "not host_exclusive" &
pid_asan=$!
wait $pid_normal
rc_normal=$?
wait $pid_asan
rc_asan=$?
echo "--> normal build:"
pytest_show pytest $rc_normal
echo "--> ASan+UBSan build:"
pytest_show pytest-asan $rc_asan
echo "==> tests that judge host-wide state (pytest.mark.host_exclusive), alone: normal, then ASan"
pytest_run pytest-excl -- -m host_exclusive
pytest_show pytest-excl $?
pytest_run pytest-asan-excl "${ASAN_ENV[@]}" -- -m host_exclusive
pytest_show pytest-asan-excl $?

# The fuzz targets (CPU-bound, one process at a time) run beside the node suites (which
# mostly wait on isolad), each suite with its own isolad.
echo "==> fuzz targets (libFuzzer + ASan/UBSan, ${ISOLA_FUZZ_SECONDS:-30}s each) started beside the node suites"
scripts/fuzz.sh "${ISOLA_FUZZ_SECONDS:-30}" >$R/fuzz.txt 2>&1 &
pid_fuzz=$!

echo "==> E2B compatibility (unmodified e2b npm SDK against isolad)"
tests/e2b/run.sh build/test-results/e2b.xml >build/test-results/e2b.txt 2>&1
show build/test-results/e2b.txt $? 12
ISOLA_BUILD=$PWD/build-asan E2B_SKIP_NPM_CI=1 tests/e2b/run.sh build/test-results/e2b-asan.xml \
	>build/test-results/e2b-asan.txt 2>&1
show build/test-results/e2b-asan.txt $? 12

echo "==> TypeScript SDK (node:test, real isolad)"
tests/sdk-js/run.sh build/test-results/sdk-js.xml >build/test-results/sdk-js.txt 2>&1
show build/test-results/sdk-js.txt $? 8
echo "==> MCP server (official MCP SDK client, real isolad)"
tests/mcp/run.sh build/test-results/mcp.xml >build/test-results/mcp.txt 2>&1
show build/test-results/mcp.txt $? 8
echo "==> web console (Debian's chromium headless, playwright-core, real isolad)"
tests/console/run.sh build/test-results/console.xml >build/test-results/console.txt 2>&1
show build/test-results/console.txt $? 10

echo "==> fuzz targets (libFuzzer + ASan/UBSan, ${ISOLA_FUZZ_SECONDS:-30}s each)"
wait $pid_fuzz
cat $R/fuzz.txt

$PY scripts/summarize.py build/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
	$R/pytest.xml $R/pytest-asan.xml $R/pytest-excl.xml $R/pytest-asan-excl.xml \
	build/test-results/e2b.xml build/test-results/e2b-asan.xml build/test-results/sdk-js.xml \
	build/test-results/mcp.xml build/test-results/console.xml build/test-results/fuzz.xml
