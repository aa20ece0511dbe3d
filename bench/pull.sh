#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/pull: `isola template pull` throughput against `skopeo copy` of the same image from the
# same registry (Debian's docker-registry on a free loopback port, plain HTTP, a private isolad).
# The image has one incompressible (random) uncompressed layer of N MiB. Rounds interleave skopeo
# and isola so load that comes and goes hits both alike. The headline is the whole pull (until
# the CLI's `done`: download, digest, unpack into a template and its commit; skopeo only stores
# the blob), reported beside the download alone (until the CLI's --json progress line that
# completes the big layer).
# Usage: bench/pull.sh [-n ROUNDS] [-s MIB] [--json]    (defaults 3 rounds, 64 MiB; run as root)
# Environment: ISOLA_BUILD (default build), ISOLA_AGENT (default $ISOLA_BUILD/src/agent/isola-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "pull: run as root" >&2; exit 1; }
BUILD="${ISOLA_BUILD:-build}"
AGENT="${ISOLA_AGENT:-$BUILD/src/agent/isola-agent}"
CLI="$BUILD/src/cli/isola"
ROUNDS=3
MIB=64
JSON=0
usage() { echo "usage: bench/pull.sh [-n ROUNDS] [-s MIB] [--json]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	-n) [ $# -ge 2 ] || usage; ROUNDS="$2"; shift 2 ;;
	-s) [ $# -ge 2 ] || usage; MIB="$2"; shift 2 ;;
	--json) JSON=1; shift ;;
	*) usage ;;
	esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "pull: -n wants a positive count, not '$ROUNDS'" >&2; exit 2; }
[[ "$MIB" =~ ^[1-9][0-9]*$ ]] || { echo "pull: -s wants a size in MiB, not '$MIB'" >&2; exit 2; }
for p in "$BUILD/src/isolad/isolad" "$CLI"; do
	[ -x "$p" ] || { echo "pull: $p is missing: run scripts/build.sh" >&2; exit 1; }
done
for c in docker-registry skopeo curl; do
	command -v "$c" >/dev/null || { echo "pull: $c is missing: run scripts/deps.sh" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/isola-pull-XXXXXX)
chmod 700 "$tmp"
state=$tmp/state
sock=$state/isolad.sock
ipid=
rpid=
bpid=
names=()
# Nothing may outlive the run: the pulled templates, isolad, the registry, the temp dir.
cleanup() {
	local n
	set +e
	if [ -n "$bpid" ]; then
		kill "$bpid" 2>/dev/null
		wait "$bpid" 2>/dev/null
	fi
	if [ -n "$ipid" ] && kill -0 "$ipid" 2>/dev/null; then
		for n in "${names[@]}"; do
			"$CLI" --socket "$sock" template rm "$n" >/dev/null 2>&1 || true
		done
		kill "$ipid" 2>/dev/null
		wait "$ipid" 2>/dev/null
	fi
	if [ -n "$rpid" ]; then
		kill "$rpid" 2>/dev/null
		wait "$rpid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -m 700 "$state"
# No microvm image of the host template at start: that mkfs.ext4 runs for many seconds on a
# machine with a guest kernel, taking a core from whichever rounds it overlaps.
ISOLA_MICROVM_PREBUILD=0 "$BUILD/src/isolad/isolad" --state-dir "$state" --socket "$sock" --agent "$AGENT" \
	--log-level warn 2>"$tmp/isolad.log" &
ipid=$!

# The registry: its own config and storage in the temp dir, on a free loopback port.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
host=127.0.0.1:$port
cat >"$tmp/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $tmp/registry
http:
  addr: $host
EOF
docker-registry serve "$tmp/registry.yml" >"$tmp/registry.log" 2>&1 &
rpid=$!
up=
for _ in $(seq 1 150); do
	kill -0 "$rpid" 2>/dev/null || break
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$host/v2/")" = 200 ] && { up=1; break; }
	sleep 0.2
done
[ -n "$up" ] || { echo "pull: docker-registry did not listen on $host:" >&2; cat "$tmp/registry.log" >&2; exit 1; }
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { echo "pull: isolad did not start:" >&2; cat "$tmp/isolad.log" >&2; exit 1; }

# The image: an OCI layout with one uncompressed layer holding /data/blob (N MiB of random
# bytes, so no compression anywhere can shrink the transfer), pushed by skopeo.
oci=$tmp/oci
blobs=$oci/blobs/sha256
mkdir -p "$tmp/rootfs/data" "$blobs"
head -c "$((MIB * 1048576))" /dev/urandom >"$tmp/rootfs/data/blob"
tar --format=pax --numeric-owner --owner=0 --group=0 -cf "$tmp/layer.tar" -C "$tmp/rootfs" data
rm -rf "$tmp/rootfs"
# put FILE: moves it into the layout's blobs under its digest; prints "DIGEST SIZE"
put() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$blobs/$d"
	echo "$d $s"
}
read -r ld lsz < <(put "$tmp/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
	"$ld" >"$tmp/config.json"
read -r cfd csz < <(put "$tmp/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
	"$cfd" "$csz" "$ld" "$lsz" >"$tmp/manifest.json"
read -r md msz < <(put "$tmp/manifest.json")
echo '{"imageLayoutVersion":"1.0.0"}' >"$oci/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s}]}\n' \
	"$md" "$msz" >"$oci/index.json"
ref=$host/bench/pull:$MIB
skopeo copy --quiet --dest-tls-verify=false "oci:$oci" "docker://$ref"
rm -rf "$oci"

load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, kernel $(uname -r), load $load0," \
	"$ROUNDS rounds, ${MIB} MiB layer ($lsz bytes) from docker-registry on $host" >&2
for ((i = 1; i <= ROUNDS; i++)); do names+=("bench-pull-$$-$i"); done

# The rounds; python3 only times what runs and formats the report. In the background and
# waited for, so a TERM stops it (and the pull it runs) at once rather than after every round.
SOCK="$sock" CLI="$CLI" REF="$ref" TMP="$tmp" LAYER_BYTES="$lsz" JSON="$JSON" LOAD0="$load0" \
python3 - "${names[@]}" <<'EOF' &
import json, os, shutil, subprocess, sys, time, urllib.request

env = os.environ
names, tmp, ref = sys.argv[1:], env["TMP"], env["REF"]
# The layer as the registry holds it: skopeo gzips an uncompressed layer on push (random bytes
# stay as large), so its size is read from the manifest, not from the layout's file.
host, _, rest = ref.partition("/")
repo, _, tag = rest.rpartition(":")
accept = "application/vnd.oci.image.manifest.v1+json, " \
    "application/vnd.docker.distribution.manifest.v2+json"
req = urllib.request.Request(f"http://{host}/v2/{repo}/manifests/{tag}",
                             headers={"Accept": accept})
with urllib.request.urlopen(req, timeout=30) as r:
    layers = json.load(r)["layers"]
assert len(layers) == 1, layers
size, media = layers[0]["size"], layers[0]["mediaType"]
mib = size / (1 << 20)  # what goes over the wire: MiB/s are of the blob


def skopeo(i):
    out = f"{tmp}/skopeo-{i}"
    t0 = time.monotonic()
    cp = subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                         f"docker://{ref}", f"oci:{out}:x"], capture_output=True, text=True)
    s = time.monotonic() - t0
    shutil.rmtree(out, ignore_errors=True)
    if cp.returncode:
        sys.exit(f"pull: skopeo copy docker://{ref} failed: {cp.stderr.strip()}")
    return s


def isola(name):
    """(download seconds, whole pull seconds): the download ends at the progress line that
    reports the big layer complete, read as the CLI prints it."""
    argv = [env["CLI"], "--socket", env["SOCK"], "--json", "template", "pull", "--plain-http",
            ref, name]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dl, last, seen = None, None, []
    for line in proc.stdout:
        ev = json.loads(line)
        last = ev
        if ev.get("type") == "progress" and ev.get("phase", "").startswith("download"):
            seen.append(ev)
            if dl is None and ev.get("total") == size and ev.get("done") == size:
                dl = time.monotonic() - t0
    err = proc.stderr.read()
    rc = proc.wait()
    whole = time.monotonic() - t0
    if rc or not last or last.get("type") != "done":
        sys.exit(f"pull: isola template pull {ref} {name} failed (exit {rc}): {err.strip()} "
                 f"{json.dumps(last) if last else ''}")
    if dl is None:
        sys.exit(f"pull: no progress line completed the {size}-byte layer of {ref}: "
                 f"{json.dumps(seen[-3:])}")
    cp = subprocess.run([env["CLI"], "--socket", env["SOCK"], "template", "rm", name],
                        capture_output=True, text=True)
    if cp.returncode:
        sys.exit(f"pull: isola template rm {name} failed: {cp.stderr.strip()}")
    return dl, whole


rounds = []
for i, name in enumerate(names, 1):
    sk = skopeo(i)
    dl, whole = isola(name)
    rounds.append({"round": i, "skopeo_s": round(sk, 3), "isola_download_s": round(dl, 3),
                   "isola_pull_s": round(whole, 3), "skopeo_mibps": round(mib / sk, 1),
                   "isola_download_mibps": round(mib / dl, 1),
                   "isola_pull_mibps": round(mib / whole, 1),
                   "download_ratio": round(sk / dl, 2), "pull_ratio": round(sk / whole, 2),
                   "load": open("/proc/loadavg").read().split()[0]})


def span(key):
    xs = [r[key] for r in rounds]
    return {"min": min(xs), "max": max(xs)}


report = {"layer_mib": round(mib, 1), "layer_bytes": int(env["LAYER_BYTES"]),
          "blob_bytes": size, "blob_media_type": media, "rounds": rounds,
          "pull_ratio": span("pull_ratio"), "download_ratio": span("download_ratio"),
          "load_start": env["LOAD0"],
          "load_end": " ".join(open("/proc/loadavg").read().split()[:3]),
          "target_ratio": 0.8}
if env["JSON"] == "1":
    print(json.dumps(report, indent=1))
    sys.exit(0)
print(f"| round | skopeo copy MiB/s | isola whole pull MiB/s | whole pull / skopeo | "
      f"isola download MiB/s | download / skopeo | load (1 min) |")
print("|---|---|---|---|---|---|---|")
for r in rounds:
    print(f"| {r['round']} | {r['skopeo_mibps']} ({r['skopeo_s']:.2f} s) | "
          f"{r['isola_pull_mibps']} ({r['isola_pull_s']:.2f} s) | {r['pull_ratio']:.2f}x | "
          f"{r['isola_download_mibps']} ({r['isola_download_s']:.2f} s) | "
          f"{r['download_ratio']:.2f}x | {r['load']} |")
d, p = report["download_ratio"], report["pull_ratio"]
# The headline is the whole pull (what a user waits for), the download alone beside it.
print(f"\nisola template pull / skopeo copy throughput, {mib:.0f} MiB layer, {len(rounds)} "
      f"rounds: whole pull {p['min']:.2f}-{p['max']:.2f}x (target >= 0.8x: "
      f"{'met' if p['min'] >= 0.8 else 'not met'}); download only {d['min']:.2f}-{d['max']:.2f}x; "
      f"load {report['load_start']} -> {report['load_end']}")
EOF
bpid=$!
wait "$bpid"
