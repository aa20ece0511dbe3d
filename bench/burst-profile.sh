#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# burst-profile: where a burst's CPU goes. Runs ROUNDS bursts of K loops (`isola bench -n 1 -c K
# --no-peers`) against a private isolad of build/ under `perf record -a -g`, then prints the CPU
# per loop (ms) by who spent it (isolad's threads, the agent and its command, the CLI, kernel
# threads) and by what (clone, copy-on-write faults, exec, process exit, netlink, cgroups,
# mounts, the writable layer, the ext4 shutdown's console message, user space). Everything the
# other processes on the host did is counted apart, so a busy host still gives isola's share.
#
# Usage: bench/burst-profile.sh [-r ROUNDS] [-c K] [-u UID_BASE]   (as root; perf installed)
#   -r ROUNDS    bursts to record (default 4)
#   -c K         loops per burst (default 50)
#   -u UID_BASE  isolad --uid-base (default isolad's)
# The recording is kept in $ISOLA_PROFILE_OUT (default a temp dir, printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "burst-profile: $*" >&2; exit 2; }
rounds=4 k=50 uid=()
while getopts "r:c:u:h" o; do
	case $o in
	r) rounds=$OPTARG ;;
	c) k=$OPTARG ;;
	u) uid=(--uid-base "$OPTARG") ;;
	*) sed -n '/^# Usage:/,/^# The recording/p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
case $rounds in '' | *[!0-9]* | 0) die "-r \`$rounds\`: expected a number of rounds >= 1" ;; esac
case $k in '' | *[!0-9]* | 0) die "-c \`$k\`: expected a burst size >= 1" ;; esac
[ "$(id -u)" = 0 ] || die "run as root (isolad creates sandboxes)"
command -v perf >/dev/null || die "perf is not installed"
[ -x build/src/isolad/isolad ] || die "no build/ here: run scripts/build.sh first"

out=${ISOLA_PROFILE_OUT:-$(mktemp -d /tmp/isola-profile-XXXXXX)}
mkdir -p "$out"
state=$(mktemp -d /tmp/isola-profile-state-XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	rm -rf "$state"
}
trap cleanup EXIT

ISOLA_MICROVM_PREBUILD=0 build/src/isolad/isolad --state-dir "$state" --socket "$state/s" --log-level warn \
	--agent build/src/agent/isola-agent "${uid[@]}" 2>"$out/isolad.log" &
pid=$!
for _ in $(seq 1 200); do [ -S "$state/s" ] && break; sleep 0.05; done
[ -S "$state/s" ] || die "isolad did not start (see $out/isolad.log)"
cli=(build/src/cli/isola --socket "$state/s")
"${cli[@]}" bench -n 5 -c 0 --no-peers >/dev/null # warm: agent memfd, template, slots
load=$(cut -d' ' -f1 /proc/loadavg)
perf record -q -F 499 -a -g -o "$out/perf.data" -- bash -c "
	for i in \$(seq 1 $rounds); do
		${cli[*]} --json bench -n 1 -c $k --no-peers >$out/burst-\$i.json || true
		sleep 2
	done" 2>/dev/null
perf script -i "$out/perf.data" -F comm,pid,tid,ip,sym 2>/dev/null >"$out/perf.txt"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, kernel $(uname -r), load $load, isolad pid $pid;" \
	"$rounds bursts of $k loops (+ 1 sequential loop each)"
python3 - "$out" "$pid" "$rounds" "$k" <<'PY'
import collections, glob, json, re, sys
out, ipid, rounds, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
loops = rounds * (k + 1)
period = 1000.0 / 499  # ms per sample per CPU
for f in sorted(glob.glob(f"{out}/burst-*.json")):
    try:
        j = json.load(open(f))
        b = j["burst_loops"]
        print(f"# {f.rsplit('/', 1)[1]}: burst p50 {b['p50_ms']:.0f} p99 {b['p99_ms']:.0f} ms,"
              f" {b['failures']} failures")
    except (OSError, ValueError, KeyError):
        print(f"# {f}: no result")
# What: the first match in a sample's stack, in this order.
what = [("ext4 shutdown message on the console", ["ext4_force_shutdown"]),
        ("copy-on-write faults", ["do_wp_page"]),
        ("clone: copy of the parent's memory", ["dup_mmap"]),
        ("clone: the rest", ["copy_process", "kernel_clone"]),
        ("exec", ["bprm_execve", "do_execveat_common"]),
        ("process exit", ["do_exit", "do_group_exit"]),
        ("network namespace cleanup", ["cleanup_net"]),
        ("netlink", ["netlink_sendmsg", "rtnetlink_rcv", "rtnl_"]),
        ("cgroups", ["cgroup"]),
        ("mounts", ["path_mount", "do_move_mount", "fsmount", "fsconfig", "cleanup_mnt",
                    "umount", "open_tree", "mount_setattr", "pivot_root"]),
        ("writable layer (ext4, loop, block)", ["ext4", "loop_", "blk_", "jbd2", "lo_rw"]),
        ("other page faults", ["exc_page_fault"]),
        ("other syscalls", ["entry_SYSCALL"])]
tab, who_n = collections.Counter(), collections.Counter()

def who(comm, tgid, tid):
    if tgid == ipid:
        return "isolad"
    if comm.startswith("memfd:isola") or comm in ("isola-agent", "cat"):
        return "agent and its command"
    if comm == "isola":
        return "CLI (isola bench)"
    if comm.startswith(("kworker", "ksoftirqd", "kthreadd", "rcu")):
        return "kernel threads (all of the host's)"
    if comm == "MHD-connection" and tid == tgid:  # single-threaded: a clone not yet exec'd
        return "sandbox PID 1 before its exec"
    return None if comm == "swapper" else "not isola"

def flush(comm, pid, stack):
    if comm is None:
        return
    w = who(comm, *pid.split("/"))
    if w is None:
        return
    who_n[w] += 1
    if w == "not isola":
        return
    c = "user space"
    for name, keys in what:
        if any(key in fr for fr in stack for key in keys):
            c = name
            break
    tab[(w, c)] += 1

comm = pid = None
stack = []
for line in open(f"{out}/perf.txt", errors="replace"):
    if not line.strip():
        flush(comm, pid, stack)
        comm, stack = None, []
        continue
    m = re.match(r"^(\S.*?)\s+(\d+/\d+)\s*$", line.rstrip())
    if m and not line[0].isspace():
        comm, pid, stack = m.group(1).strip(), m.group(2), []
        continue
    stack.append(line.strip().split(" ", 1)[-1])
flush(comm, pid, stack)
ms = lambda n: n * period / loops
print(f"\n{'who':40s} {'ms per loop':>12s}")
for w, n in who_n.most_common():
    print(f"{w:40s} {ms(n):12.2f}")
print(f"\n{'who':40s} {'what':38s} {'ms per loop':>12s}")
for (w, c), n in sorted(tab.items(), key=lambda x: -x[1]):
    if ms(n) >= 0.05:
        print(f"{w:40s} {c:38s} {ms(n):12.2f}")
PY
echo "recording kept in $out"
