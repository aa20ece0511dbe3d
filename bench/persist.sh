#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# persist: persistence benchmarks on a private isolad — pooled vs cold create, resume from a
# snapshot and from hibernation vs cold, fork of 10, and the 50-create burst with a warm pool.
# --microvm-persist: only microvm cold create vs restore from a snapshot (-> first output) and
# the source's pause in a fork, with the state dir on --fs ext4 (default: /tmp), xfs (a fresh
# XFS with reflink=1 on a loop device: copy-on-write snapshots) or both (one run after the other).
# Usage: bench/persist.sh [-n N] [--microvm] [--no-burst] [--microvm-persist] [--fs ext4|xfs|both]
#        (run as root; prints a JSON report per run)
# Environment: ISOLA_BUILD (default build), ISOLA_AGENT (default $ISOLA_BUILD/src/agent/isola-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "persist: run as root" >&2; exit 1; }
BUILD="${ISOLA_BUILD:-build}"
AGENT="${ISOLA_AGENT:-$BUILD/src/agent/isola-agent}"
N=20
MICROVM=0
BURST=1
MVM_PERSIST=0
FS=ext4
args=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N="$2"; shift 2 ;;
	--microvm) MICROVM=1; shift ;;
	--no-burst) BURST=0; shift ;;
	--microvm-persist) MVM_PERSIST=1; shift ;;
	--fs) FS="$2"; shift 2 ;;
	*) echo "usage: bench/persist.sh [-n N] [--microvm] [--no-burst] [--microvm-persist]" \
		"[--fs ext4|xfs|both]" >&2; exit 2 ;;
	esac
done
if [ "$FS" = both ]; then
	# The same measurements on each filesystem, one isolad after the other.
	rest=()
	for ((i = 0; i < ${#args[@]}; i++)); do
		if [ "${args[i]}" = --fs ]; then i=$((i + 1)); else rest+=("${args[i]}"); fi
	done
	"$0" "${rest[@]}" --fs ext4
	exec "$0" "${rest[@]}" --fs xfs
fi
case "$FS" in ext4 | xfs) ;; *) echo "persist: --fs ext4, xfs or both" >&2; exit 2 ;; esac

state=$(mktemp -d /tmp/isola-persist-XXXXXX)
img=
if [ "$FS" = xfs ]; then
	command -v mkfs.xfs >/dev/null || { echo "persist: --fs xfs needs mkfs.xfs (xfsprogs)" >&2; exit 1; }
	img=$(mktemp /var/tmp/isola-persist-XXXXXX.img)
	truncate -s 16G "$img"
	mkfs.xfs -q -m reflink=1 "$img"
	mount -o loop "$img" "$state" || { rm -f "$img"; rmdir "$state"; exit 1; }
fi
chmod 700 "$state"
sock=$state/isolad.sock
"$BUILD/src/isolad/isolad" --state-dir "$state" --socket "$sock" --agent "$AGENT" \
	--log-level warn 2>"$state/isolad.log" &
pid=$!
# Nothing may outlive the run: pools emptied, every sandbox destroyed (pooled ones are
# removed by the pool thread, so wait for the state dir's sandboxes to go), then isolad.
cleanup() {
	local cli="$BUILD/src/cli/isola" ids
	if kill -0 "$pid" 2>/dev/null; then
		"$cli" --socket "$sock" pool set host process 0 >/dev/null 2>&1 || true
		"$cli" --socket "$sock" pool set host microvm 0 >/dev/null 2>&1 || true
		ids=$("$cli" --socket "$sock" --json ls 2>/dev/null |
			python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))' ||
			true)
		[ -n "$ids" ] && "$cli" --socket "$sock" rm $ids >/dev/null 2>&1
		for _ in $(seq 1 1200); do
			[ -z "$(ls -A "$state/sandboxes" 2>/dev/null)" ] && break
			sleep 0.25
		done
		[ -z "$(ls -A "$state/sandboxes" 2>/dev/null)" ] ||
			echo "persist: sandboxes left in $state/sandboxes" >&2
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	if [ -n "$img" ]; then
		umount "$state" 2>/dev/null || umount -l "$state"
		rm -f "$img"
		rmdir "$state"
	else
		[ -z "$(ls -A "$state/sandboxes" 2>/dev/null)" ] && rm -rf "$state"
	fi
}
trap cleanup EXIT
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB," \
	"kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)," \
	"state dir on $(stat -f -c %T "$state")" >&2

SOCK="$sock" N="$N" MICROVM="$MICROVM" BURST="$BURST" CLI="$BUILD/src/cli/isola" \
MVM_PERSIST="$MVM_PERSIST" STATE="$state" FS="$FS" \
PYTHONPATH=tests/integration python3 - <<'EOF'
import json, os, statistics, subprocess, threading, time
import isola_client as ic

c = ic.Client(socket_path=os.environ["SOCK"], timeout=600)
N = int(os.environ["N"])
report = {}


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))], 1) if xs else None


def summary(xs):
    return {"n": len(xs), "p50_ms": pct(xs, 50), "p90_ms": pct(xs, 90), "max_ms": pct(xs, 100)}


def ms(t0):
    return (time.perf_counter() - t0) * 1000


def create(**f):
    r = c.request("POST", "/v1/sandboxes", json=f, timeout=600)
    assert r.status == 201, r
    return r.json()


def first_output(sid):
    out = c.exec(sid, cmd=["echo", "ready"])
    assert out["stdout"] == "ready\n", out


def pool(template="host", tier="process"):
    for p in c.get_json("/v1/pools")["pools"]:
        if (p["template"], p["tier"]) == (template, tier):
            return p
    return None


def set_pool(size, tier="process"):
    r = c.request("PUT", f"/v1/pools/host/{tier}", json={"size": size})
    assert r.status == 200, r


def wait_ready(size, tier="process", timeout=900):
    deadline = time.monotonic() + timeout
    while True:
        p = pool(tier=tier)
        if (p["ready"] if p else 0) >= size:
            return
        assert time.monotonic() < deadline, f"pool {tier} did not fill: {p}"
        time.sleep(0.2)


def create_series(tier, pooled, n):
    """create -> first command output, n times, each a claim (pool refilled first) or cold."""
    create_ms, first_ms, claims = [], [], 0
    for _ in range(n):
        if pooled:
            wait_ready(1, tier)
        t0 = time.perf_counter()
        sb = create(tier=tier)
        create_ms.append(ms(t0))
        first_output(sb["id"])
        first_ms.append(ms(t0))
        claims += sb.get("pooled") is True
        c.delete_sandbox(sb["id"])
    return {"create": summary(create_ms), "first_output": summary(first_ms), "claims": claims}


def tier_creates(tier, n):
    set_pool(0, tier)
    # Untimed: the first create of a tier builds what later ones reuse (microvm: the
    # template's ext4 image, minutes for the host template).
    c.delete_sandbox(create(tier=tier)["id"])
    cold = create_series(tier, False, n)
    set_pool(1, tier)
    pooled = create_series(tier, True, n)
    set_pool(0, tier)
    return {"cold": cold, "pooled": pooled,
            "ratio_first_output_pooled_to_cold":
                round(pooled["first_output"]["p50_ms"] / cold["first_output"]["p50_ms"], 3)}


def used_mib():
    os.sync()
    v = os.statvfs(os.environ["STATE"])
    return (v.f_blocks - v.f_bfree) * v.f_frsize / (1 << 20)


def cgroup_mib(sid):
    """The sandbox's cgroup memory use (QEMU, its guest RAM pages), MiB, or None."""
    for d in ic.cgroup_dirs(sid):
        for f in ("memory.current", "memory.usage_in_bytes"):
            try:
                return round(int(open(os.path.join(d, f)).read()) / (1 << 20), 1)
            except OSError:
                pass
    return None


def microvm_persist(n):
    """Cold create vs restore from a snapshot (-> first output), the snapshot's and forks'
    pause of the source, and how much the state filesystem grew for each (reflinks or copies)."""
    mvm = {"tier": "microvm", "memory": "256M", "cpu": 1}
    c.delete_sandbox(create(**mvm)["id"])  # untimed: builds the template's ext4 image
    cold = []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = create(**mvm)
        first_output(sb["id"])
        cold.append(ms(t0))
        c.delete_sandbox(sb["id"])
    src = create(**mvm)
    # ~100 MiB of guest memory worth keeping (the guest's /dev/shm is guest RAM).
    c.exec(src["id"], cmd=["sh", "-c", "head -c 96M /dev/urandom > /dev/shm/blob"])
    u0 = used_mib()
    t0 = time.perf_counter()
    r = c.request("POST", "/v1/snapshots", json={"sandbox": src["id"], "name": "bench-mvm"},
                  timeout=600)
    assert r.status == 201, r
    out = {"fs": os.environ["FS"], "snapshot_ms": round(ms(t0), 1),
           "snapshot_fs_growth_mib": round(used_mib() - u0, 1)}
    restore, growth, memory = [], [], []
    for _ in range(n):
        u0 = used_mib()
        t0 = time.perf_counter()
        sb = create(snapshot="bench-mvm")
        first_output(sb["id"])
        restore.append(ms(t0))
        growth.append(round(used_mib() - u0, 1))
        memory.append(cgroup_mib(sb["id"]))
        c.delete_sandbox(sb["id"])
    c.request("DELETE", "/v1/snapshots/bench-mvm")
    paused, fork_ms, fork_growth = [], [], []
    for _ in range(max(2, n // 2)):
        u0 = used_mib()
        t0 = time.perf_counter()
        r = c.request("POST", f"/v1/sandboxes/{src['id']}/fork", json={"count": 2}, timeout=600)
        assert r.status == 201, r
        fork_ms.append(round(ms(t0), 1))
        fk = r.json()
        paused.append(fk["paused_us"])
        fork_growth.append(round(used_mib() - u0, 1))
        for k in fk["children"]:
            c.delete_sandbox(k["id"])
    src_mib = cgroup_mib(src["id"])
    c.delete_sandbox(src["id"])
    out.update({"cold_first_output": summary(cold), "restore_first_output": summary(restore),
                "ratio_restore_to_cold": round(pct(restore, 50) / pct(cold, 50), 3),
                "restore_fs_growth_mib": growth, "restore_cgroup_memory_mib": memory,
                "source_cgroup_memory_mib": src_mib,
                "fork2_source_paused_us": paused,
                "fork2_request_ms": fork_ms, "fork2_fs_growth_mib": fork_growth})
    return out


if os.environ["MVM_PERSIST"] == "1":
    report["microvm_persist"] = microvm_persist(max(2, N))
    print(json.dumps(report, indent=2))
    raise SystemExit(0)

report["process_create"] = tier_creates("process", N)

# Resume from a named snapshot -> first command output, against the cold numbers above.
src = create()
c.write_file(src["id"], "/home/state.txt", b"x" * 4096)
r = c.request("POST", "/v1/snapshots", json={"sandbox": src["id"], "name": "bench-persist"})
if r.status in (200, 201):
    xs = []
    try:
        for _ in range(max(3, N // 2)):
            t0 = time.perf_counter()
            sb = create(snapshot="bench-persist")
            first_output(sb["id"])
            xs.append(ms(t0))
            c.delete_sandbox(sb["id"])
        report["process_restore_snapshot_first_output"] = summary(xs)
        report["ratio_restore_to_cold"] = round(
            summary(xs)["p50_ms"] / report["process_create"]["cold"]["first_output"]["p50_ms"],
            3)
    except AssertionError as e:
        report["process_restore_snapshot_first_output"] = f"failed: {e}"
    c.request("DELETE", "/v1/snapshots/bench-persist")
else:
    report["process_restore_snapshot_first_output"] = f"snapshot refused: {r}"

# Hibernated -> auto-resume on exec -> first output; paused -> auto-resume.
for how in ("hibernate", "pause"):
    xs = []
    for _ in range(max(3, N // 2)):
        sb = create(auto_resume=True)
        r = c.request("POST", f"/v1/sandboxes/{sb['id']}/{how}", timeout=600)
        if r.status not in (200, 204):
            xs = f"{how} refused: {r}"
            c.delete_sandbox(sb["id"])
            break
        t0 = time.perf_counter()
        try:
            first_output(sb["id"])
        except AssertionError as e:
            xs = f"resume failed: {e}"
            c.delete_sandbox(sb["id"])
            break
        xs.append(ms(t0))
        c.delete_sandbox(sb["id"])
    report[f"process_{how}_resume_first_output"] = summary(xs) if isinstance(xs, list) else xs

# Fork of 10: the source's pause and the time until all 10 children answer.
t0 = time.perf_counter()
r = c.request("POST", f"/v1/sandboxes/{src['id']}/fork", json={"count": 10}, timeout=600)
if r.status in (200, 201):
    fk = r.json()
    fork_ms = ms(t0)
    kids = [k["id"] for k in fk["children"]]
    ts = [threading.Thread(target=first_output, args=(k,)) for k in kids]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    report["process_fork10"] = {"source_paused_us": fk.get("paused_us"),
                                "fork_request_ms": round(fork_ms, 1),
                                "all_10_answer_ms": round(ms(t0), 1)}
    for k in kids:
        c.delete_sandbox(k)
else:
    report["process_fork10"] = f"fork refused: {r}"
c.delete_sandbox(src["id"])

if os.environ["MICROVM"] == "1":
    report["microvm_create"] = tier_creates("microvm", max(2, N // 5))

def create_burst(k):
    """k concurrent creates (nothing else): each one's latency; then all destroyed."""
    lat, ids, errs = [0.0] * k, [None] * k, []
    go = threading.Barrier(k)

    def one(i):
        cl = ic.Client(socket_path=os.environ["SOCK"], timeout=600)
        go.wait()
        t0 = time.perf_counter()
        r = cl.request("POST", "/v1/sandboxes", json={}, timeout=600)
        lat[i] = ms(t0)
        if r.status == 201:
            ids[i] = r.json()["id"]
        else:
            errs.append(str(r))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for sid in ids:
        if sid:
            c.delete_sandbox(sid)
    return dict(summary(lat), p99_ms=pct(lat, 99), failures=len(errs))


if os.environ["BURST"] == "1":
    set_pool(0)
    seq = create_series("process", False, 10)["create"]["p50_ms"]
    cold_b = create_burst(50)
    set_pool(50)
    wait_ready(50)
    warm_b = create_burst(50)
    set_pool(0)
    report["create_burst50"] = {"seq_create_p50_ms": seq, "cold": cold_b, "pooled": warm_b,
                                "ratio_cold_p99_to_seq_p50": round(cold_b["p99_ms"] / seq, 1),
                                "ratio_pooled_p99_to_seq_p50": round(warm_b["p99_ms"] / seq, 1)}

if os.environ["BURST"] == "1":
    def bench(*args):
        cp = subprocess.run([os.environ["CLI"], "--socket", os.environ["SOCK"], "--json", "bench",
                             "--no-peers", *args], stdout=subprocess.PIPE, check=True)
        return json.loads(cp.stdout)
    set_pool(0)
    cold = bench("-n", "50", "-c", "50")
    set_pool(52)  # the warm-up loop, one sequential loop and the burst of 50
    wait_ready(52)
    warm = bench("-n", "1", "-c", "50")
    set_pool(0)
    seq50 = cold["sequential"]["p50_ms"]
    report["burst50"] = {
        "cold_seq_p50_ms": seq50, "cold_burst_p99_ms": cold["burst_loops"]["p99_ms"],
        "pooled_burst_p99_ms": warm["burst_loops"]["p99_ms"],
        "pooled_burst_p50_ms": warm["burst_loops"]["p50_ms"],
        "pooled_burst_failures": warm["burst_loops"]["failures"],
        "cold_burst_failures": cold["burst_loops"]["failures"],
        "ratio_cold_burst_p99_to_seq_p50": round(cold["burst_loops"]["p99_ms"] / seq50, 1),
        "ratio_pooled_burst_p99_to_seq_p50": round(warm["burst_loops"]["p99_ms"] / seq50, 1)}

print(json.dumps(report, indent=2))
EOF
