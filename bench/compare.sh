#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# compare: measures a change on a noisy host by interleaving two builds' `isola bench` runs
# (REV1, REV2, REV1, REV2, ...), each against its own private isolad, then prints one table of
# every round and the ratios. Load that comes and goes hits both builds alike; a difference
# smaller than one build's spread across its own rounds is noise (docs/benchmarks.md).
#
# Usage: bench/compare.sh [-r ROUNDS] REV1 REV2 [-- ISOLA BENCH ARGS]   (as root)
#   -r ROUNDS  rounds of (REV1, REV2) (default 2)
#   REV        any git revision; `.` is the working tree as it is (built in place); or a
#              directory holding a finished build/ (another tree's), run as it is, unbuilt
#   bench args default to `-n 30 -c 30`
# Each REV other than `.` is checked out with `git worktree add --detach` under a temp dir
# and built there (scripts/build.sh); the worktrees are removed at exit. The JSON of every run
# is kept in $ISOLA_COMPARE_OUT (default a temp dir, printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

die() { echo "compare: $*" >&2; exit 2; }
usage() { sed -n '/^# Usage:/,/^# Each/p' "$0" | sed 's/^# \{0,1\}//' | head -n 5; exit "${1:-2}"; }

rounds=2
while getopts "r:h" o; do
	case $o in
	r) rounds=$OPTARG ;;
	h) usage 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || usage
rev1=$1 rev2=$2
shift 2
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-n 30 -c 30)
case $rounds in '' | *[!0-9]* | 0) die "-r \`$rounds\`: expected a number of rounds >= 1" ;; esac
[ "$(id -u)" = 0 ] || die "run as root (isolad creates sandboxes)"

work=$(mktemp -d /tmp/isola-compare-XXXXXX)
out=${ISOLA_COMPARE_OUT:-$work/results}
mkdir -p "$out"
isolad_pid=
cleanup() {
	[ -z "$isolad_pid" ] || { kill "$isolad_pid" 2>/dev/null; wait "$isolad_pid" 2>/dev/null; }
	rm -rf "$work/tree-"* "$work/state-"* "$work/build.log"
	git -C "$REPO" worktree prune
	# Results are kept only when there are some (or ISOLA_COMPARE_OUT names a place of its own).
	ls "$work/results/"*.json >/dev/null 2>&1 || rm -rf "$work"
}
trap cleanup EXIT

# is_built REV: REV names a directory with a finished build of its own (used as it is).
is_built() { [ "$1" != . ] && [ -x "$1/build/src/isolad/isolad" ]; }

# tree REV: the directory whose build/ runs REV (a detached worktree under $work; `.`: here).
tree() {
	if [ "$1" = . ]; then
		echo "$REPO"
	elif is_built "$1"; then
		(cd "$1" && pwd)
	else
		echo "$work/tree-$(git -C "$REPO" rev-parse --short "$1")"
	fi
}

# prepare REV: checks REV out (once) and builds it.
prepare() {
	local rev=$1 dir
	is_built "$rev" && return 0
	dir=$(tree "$rev")
	if [ "$rev" != . ] && [ ! -d "$dir" ]; then
		git -C "$REPO" worktree add -q --detach "$dir" "$rev" >&2
	fi
	(cd "$dir" && scripts/build.sh >"$work/build.log" 2>&1) || { tail -n 20 "$work/build.log" >&2; die "build of \`$rev\` failed"; }
}

# run DIR LABEL: one `isola --json bench` against a fresh isolad of DIR's build.
run() {
	local dir=$1 label=$2 state sock
	state=$(mktemp -d "$work/state-XXXXXX")
	sock=$state/isolad.sock
	# No microvm image build in the background: a fresh state dir's isolad would run one
	# (mkfs over hundreds of MiB) beside the first timed loops, and a build older than
	# `isola bench`'s wait for it would time them in its shadow.
	ISOLA_MICROVM_PREBUILD=0 "$dir/build/src/isolad/isolad" --state-dir "$state" --socket "$sock" \
		--log-level warn --agent "$dir/build/src/agent/isola-agent" 2>"$state/isolad.log" &
	isolad_pid=$!
	for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
	[ -S "$sock" ] || { tail -n 20 "$state/isolad.log" >&2; die "isolad of \`$label\` did not start"; }
	# A failed loop (exit status 1) still leaves a report with its failures counted: the
	# round is kept and its failures shown; a run without a report ends the comparison.
	"$dir/build/src/cli/isola" --socket "$sock" --json bench "${args[@]}" >"$out/$label.json" ||
		python3 -c 'import json, sys; json.load(open(sys.argv[1]))["sequential"]' \
			"$out/$label.json" 2>/dev/null ||
		die "isola bench of \`$label\` failed (see $out/$label.json)"
	kill "$isolad_pid"
	wait "$isolad_pid" 2>/dev/null || true
	isolad_pid=
	rm -rf "$state"
}

for rev in "$rev1" "$rev2"; do
	[ "$rev" = . ] || is_built "$rev" || git -C "$REPO" rev-parse --verify -q "$rev^{commit}" >/dev/null ||
		die "\`$rev\` is not a revision of this repository"
done
scripts/deps.sh >/dev/null
prepare "$rev1"
prepare "$rev2"
dir1=$(tree "$rev1")
dir2=$(tree "$rev2")
name1=$(git -C "$dir1" rev-parse --short HEAD)$([ "$rev1" = . ] && ! git -C "$REPO" diff --quiet && echo +dirty || true)
name2=$(git -C "$dir2" rev-parse --short HEAD)$([ "$rev2" = . ] && ! git -C "$REPO" diff --quiet && echo +dirty || true)

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB," \
	"kernel $(uname -r); isola bench ${args[*]}; A=$rev1 ($name1) B=$rev2 ($name2)"
for r in $(seq 1 "$rounds"); do
	echo "# round $r: A (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	run "$dir1" "r$r-A"
	echo "# round $r: B (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	run "$dir2" "r$r-B"
done

# The table, and each build's spread over its own rounds next to the other's: a difference
# inside one build's spread is not a result.
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
cols = ("round", "rev", "loop p50", "burst p99", "bwrap p50", "runc p50", "loop/bwrap",
        "loop/runc", "burst/loop", "bwrap burst/bwrap", "failures")
print("%-6s %-4s %9s %10s %10s %9s %11s %10s %11s %18s %9s" % cols)
loops = {"A": [], "B": []}
for r in range(1, rounds + 1):
    for s in "AB":
        j = json.load(open(f"{out}/r{r}-{s}.json"))
        g = lambda k, f: (j.get(k) or {}).get(f, 0)
        loops[s].append(g("sequential", "p50_ms"))
        fails = sum((j.get(k) or {}).get("failures", 0) for k in ("sequential", "burst_loops"))
        print("%-6d %-4s %9.1f %10.0f %10.1f %9.1f %11.2f %10.2f %11.1f %18.1f %9d" % (
            r, s, g("sequential", "p50_ms"), g("burst_loops", "p99_ms"), g("bwrap_true", "p50_ms"),
            g("runc_true", "p50_ms"), j.get("ratio_loop_to_bwrap", 0),
            j.get("ratio_loop_to_runc", 0), j.get("ratio_burst_p99_to_seq_p50", 0),
            j.get("ratio_bwrap_burst_p99_to_bwrap_p50", 0), fails))
for s in "AB":
    v = loops[s]
    print(f"{s} loop p50: min {min(v):.1f}, median {statistics.median(v):.1f}, max {max(v):.1f} ms")
PY
echo "runs kept in $out"
