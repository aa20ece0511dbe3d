#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# conformance: runs the OCI runtime-tools validation suite against runtimes side by side and
# prints one markdown row per test: its TAP points passed / failed / skipped per runtime.
#
# usage: tests/oci/conformance.sh RUNTIME_TOOLS_DIR RUNTIME...
#   RUNTIME_TOOLS_DIR  a checkout of github.com/opencontainers/runtime-tools where
#                      `make runtimetest validation-executables` has been run (Debian 12's Go
#                      1.19 builds commit 260e151, the last whose go.mod asks for 1.19)
#   RUNTIME            a runtime command (runc, or the path of isola-runc; isola-runc finds
#                      isolad through $ISOLA_SOCKET: start a private one first, `isolad
#                      --state-dir D --socket D/isolad.sock --listen 127.0.0.1:PORT`)
# Each test runs with a 120 s limit; its TAP output is kept in $OUT (default /tmp/oci-conformance).
# The suite leaves its bundles in $TMPDIR/ocitest*; runc's linux_rootfs_propagation (shared)
# leaves its container's proc, sys and dev mounted there on the host: unmount those before
# removing the directories (an rm -rf across a live mount reaches into it).
# Not part of scripts/test.sh: the suite's source is not in Debian's archive (docs/oci.md).
set -uo pipefail

[ $# -ge 2 ] || { sed -n 3,17p "$0"; exit 2; }
RT=$(cd "$1" && pwd) || exit 2
shift
OUT=${OUT:-/tmp/oci-conformance}
mkdir -p "$OUT"
[ -x "$RT/runtimetest" ] || { echo "conformance: no $RT/runtimetest (run make there)" >&2; exit 2; }

# tap FILE STATUS: "pass/fail/skip" of the ok/not ok points; with no point passed or failed,
# the test's exit status too (a test that wants the runtime to refuse its config prints nothing
# and exits 0 when it does; the hook tests print `1..0` and exit 0 either way, their verdict is
# the error diagnostic in the log; 124 is the time limit), after "no plan" when it printed no
# plan line either
tap() {
	awk -v rc="$2" '/^ok .*# (SKIP|skip)/ {s++; next} /^ok / {p++} /^not ok / {f++}
	     /^1\.\.[0-9]+/ {plan=1}
	     END {if (!plan && !p && !f) printf "no plan (exit %d)\n", rc
	          else if (!p && !f) printf "0/0/%d (exit %d)\n", s, rc
	          else printf "%d/%d/%d\n", p, f, s}' "$1"
}

printf '| test |'
for r in "$@"; do printf ' %s |' "$(basename "$r")"; done
printf '\n|---|'
for _ in "$@"; do printf -- '---|'; done
printf '\n'
cd "$RT" || exit 2
for t in validation/*/*.t; do
	name=$(basename "$t" .t)
	printf '| %s |' "$name"
	for r in "$@"; do
		log=$OUT/$name.$(basename "$r").tap
		RUNTIME=$r timeout 120 "$t" >"$log" 2>&1
		printf ' %s |' "$(tap "$log" $?)"
	done
	printf '\n'
done
