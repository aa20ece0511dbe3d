#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz: builds the libFuzzer targets with clang (build-fuzz/) and runs each for SECONDS (default 30).
# Writes one JUnit-style result per target to build/test-results/fuzz.xml for the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}

if [ ! -d build-fuzz ]; then
	CC=clang meson setup build-fuzz -Dfuzzing=true -Dagent=false >/dev/null || exit 1
fi
ninja -C build-fuzz $(cd fuzz && ls fuzz_*.c | sed 's/\.c$//; s|^|fuzz/|') >/dev/null || exit 1

mkdir -p build/test-results
out=build/test-results/fuzz.xml
echo '<testsuite name="fuzz">' >"$out"
fail=0
for src in fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	corpus=build-fuzz/corpus/$t
	mkdir -p "$corpus"
	# Checked-in seeds (fuzz/corpus/<target>/, e.g. archives made by the real writer).
	if [ -d "fuzz/corpus/$t" ]; then cp -n "fuzz/corpus/$t"/* "$corpus"/; fi
	log=build-fuzz/$t.log
	dict=()
	if [ -f "fuzz/$t.dict" ]; then dict=(-dict="fuzz/$t.dict"); fi
	if build-fuzz/fuzz/$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 "${dict[@]}" "$corpus" >"$log" 2>&1; then
		runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
		echo "fuzz $t: ${runs:-?} runs in ${secs}s, no crash"
		echo "  <testcase classname=\"fuzz\" name=\"$t\"/>" >>"$out"
	else
		fail=1
		echo "fuzz $t: CRASH or error, see $log"
		tail -n 30 "$log"
		echo "  <testcase classname=\"fuzz\" name=\"$t\"><failure>see $log</failure></testcase>" >>"$out"
	fi
done
echo '</testsuite>' >>"$out"
exit $fail
