#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pool-split: splits a sustained create-write-exec-destroy loop into the loop on a sandbox that
# is ready and the refill that makes the next one (docs/benchmarks.md). Each round measures,
# against fresh private isolads of build/:
#   fill     host CPU per pooled sandbox made: a static pool of POOL filled from empty, the
#            host's busy time over the fill (/proc/stat) less an idle baseline as long, / POOL
#   ready    `isola bench -n ITER -c 0 --no-peers` once that pool is full: every create is a
#            claim, and a static pool holds its refills back while creates keep coming (up to
#            3 s), so the loop runs with no sandbox being made beside it
#   default  `isola bench -n ITER -c 0` against an isolad with its defaults (the automatic pool
#            refills one sandbox per claim beside the loop), with bwrap and runc timed after it
# Usage: bench/pool-split.sh [-r ROUNDS] [-n ITER] [-p POOL]   (as root, after scripts/build.sh)
#   -r ROUNDS  rounds (default 2)
#   -n ITER    loops per bench (default 30)
#   -p POOL    the static pool's size (default 40; more than ITER)
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "pool-split: $*" >&2; exit 2; }
rounds=2 iter=30 pool=40
while getopts "r:n:p:h" o; do
	case $o in
	r) rounds=$OPTARG ;;
	n) iter=$OPTARG ;;
	p) pool=$OPTARG ;;
	*) sed -n '/^# Usage:/,/^#   -p/p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
for v in "$rounds" "$iter" "$pool"; do
	case $v in '' | *[!0-9]* | 0) die "\`$v\`: expected a number >= 1" ;; esac
done
[ "$pool" -gt "$iter" ] || die "-p $pool: the pool must hold more than the $iter loops"
[ "$(id -u)" = 0 ] || die "run as root (isolad creates sandboxes)"
[ -x build/src/isolad/isolad ] || die "no build/ here: run scripts/build.sh first"

cli=build/src/cli/isola
state= sock= pid=
stop_isolad() {
	[ -n "$pid" ] || return 0
	# A static pool's sandboxes outlive isolad by design: empty it first, and wait until
	# isolad lists none, so that nothing is left behind when the state dir goes.
	"$cli" --socket "$sock" pool set host process 0 >/dev/null 2>&1 || true
	for _ in $(seq 1 200); do
		[ "$("$cli" --socket "$sock" --json ls 2>/dev/null | grep -c '"id"')" = 0 ] && break
		sleep 0.1
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$state"
	pid=
}
trap stop_isolad EXIT
start_isolad() { # ARGS...
	state=$(mktemp -d /tmp/isola-poolsplit-XXXXXX)
	sock=$state/isolad.sock
	ISOLA_MICROVM_PREBUILD=0 build/src/isolad/isolad --state-dir "$state" --socket "$sock" \
		--log-level warn "$@" 2>"$state/isolad.log" &
	pid=$!
	for _ in $(seq 1 200); do [ -S "$sock" ] && return 0; sleep 0.05; done
	die "isolad did not start: $(tail -3 "$state/isolad.log")"
}
busy_ms() { awk '/^cpu /{print ($2 + $3 + $4 + $7 + $8) * 1000 / '"$(getconf CLK_TCK)"'}' /proc/stat; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
pool_full() { # 0 when the pool holds POOL ready and makes none
	"$cli" --socket "$sock" --json pool ls | tr -d ' ,' |
		awk -F: -v n="$pool" '/"creating"/{c=$2} /"ready"/{r=$2} END{exit !(c == 0 && r >= n)}'
}
field() { # JSON KEY.SUB from stdin
	python3 -c 'import json, sys
d = json.load(sys.stdin)
for path in sys.argv[1:]:
    v = d
    for k in path.split("."):
        v = v.get(k, {}) if isinstance(v, dict) else {}
    print("%.2f" % v if isinstance(v, (int, float)) else "-", end=" ")' "$@"
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, kernel $(uname -r)," \
	"load $(cut -d' ' -f1-3 /proc/loadavg); loops $iter, pool $pool"
printf '%-5s %-9s %-9s %-42s %-42s %-14s\n' round "fill CPU" "" "ready: loop p50 (create write exec destroy) CPU" \
	"default: loop p50 (create write exec destroy) CPU" "bwrap p50 CPU"
for r in $(seq 1 "$rounds"); do
	start_isolad --pool-auto 0
	sleep 2
	b0=$(busy_ms) t0=$(now_ms)
	sleep 2
	base=$(awk -v a="$b0" -v b="$(busy_ms)" -v t="$(($(now_ms) - t0))" 'BEGIN{print (b - a) / t}')
	b0=$(busy_ms) t0=$(now_ms)
	"$cli" --socket "$sock" pool set host process "$pool" >/dev/null
	for _ in $(seq 1 600); do pool_full && break; sleep 0.1; done
	pool_full || die "the pool did not fill to $pool in 60 s"
	sleep 1 # the layers and network slots made ahead behind the last fills
	fill=$(awk -v a="$b0" -v b="$(busy_ms)" -v t="$(($(now_ms) - t0))" -v base="$base" -v n="$pool" \
		'BEGIN{printf "%.1f", (b - a - base * t) / n}')
	sleep 1
	ready=$("$cli" --socket "$sock" --json bench -n "$iter" -c 0 --no-peers |
		field sequential.p50_ms loop_create.p50_ms loop_write.p50_ms loop_exec.p50_ms \
			loop_destroy.p50_ms sequential.host_cpu_ms_per_run)
	stop_isolad

	start_isolad
	def=$("$cli" --socket "$sock" --json bench -n "$iter" -c 0 |
		field sequential.p50_ms loop_create.p50_ms loop_write.p50_ms loop_exec.p50_ms \
			loop_destroy.p50_ms sequential.host_cpu_ms_per_run bwrap_true.p50_ms \
			bwrap_true.host_cpu_ms_per_run)
	stop_isolad
	read -r d1 d2 d3 d4 d5 d6 bw bwc <<<"$def"
	printf '%-5s %-9s %-9s %-42s %-42s %-14s\n' "$r" "$fill ms" "" "$ready" \
		"$d1 $d2 $d3 $d4 $d5 $d6" "$bw $bwc"
	awk -v a="${ready%% *}" -v b="$d1" -v w="$bw" \
		'BEGIN{if (w > 0) printf "      ready/bwrap %.2f, default/bwrap %.2f\n", a / w, b / w}'
done
