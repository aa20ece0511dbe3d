#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deps: installs isola's build, run and test dependencies from Debian 12's archive (idempotent).
set -euo pipefail

PKGS=(
	# build
	gcc clang meson ninja-build pkg-config
	libjansson-dev libmicrohttpd-dev libsqlite3-dev libseccomp-dev libarchive-dev
	libsodium-dev nettle-dev libcurl4-openssl-dev
	libnl-route-3-dev libnftables-dev libldns-dev # sandbox network (docs/network.md)
	zlib1g-dev # gzip-encoded E2B /files (src/isolad/e2b/gzip.c)
	# run
	iproute2 uidmap qemu-system-x86 qemu-utils e2fsprogs
	# test and bench
	python3 python3-pytest python3-yaml bubblewrap runc libclang-rt-14-dev
	prometheus # promtool checks GET /metrics (tests/integration/test_metrics.py)
	xfsprogs # mkfs.xfs: reflink tests on an XFS loop mount (test_fileclone, test_reflink.py)
	# commands the tests and scripts run (tests/integration/test_deps.py checks this list)
	nftables # nft: tests/security/test_network_boundary.py reads and deletes isolad's table
	zstd git procps curl # test_persist_process.py, test_allowed.py, pgrep/free, bench and quickstart
	man-db # man -l: tests/integration/test_cli_help.py renders the man pages the build makes
	systemd # systemctl: scripts/install.sh enables isolad.service where systemd runs
	debootstrap # a Debian minbase template for package installs (test_root_caps.py)
	python3-jupyter-client python3-ipykernel python3-matplotlib # share/interp: the code interpreter's Python contexts
	python3-pip # tests/integration/test_template_build.py: RUN python3 -m pip install
	node-typescript # share/interp: TypeScript contexts on node < 22.13 (its compiler strips the types)
	chromium # the web console suite drives it headless with playwright-core (tests/console)
	docker-registry skopeo umoci apache2-utils openssl # test_template_pull.py: a local registry, skopeo, htpasswd, a self-signed cert
	docker.io # tests/integration/test_oci_docker.py: a private dockerd with --add-runtime isola (docs/oci.md)
	podman # tests/integration/test_oci_podman.py: podman --runtime isola-runc (docs/oci.md)
	containerd # ctr, containerd: tests/integration/test_oci_containerd.py, test_kubernetes_deploy.py (containerd config dump)
	python3-grpcio containernetworking-plugins # tests/integration/test_oci_cri.py: a CRI client on containerd's socket, the pod's CNI (bridge, host-local, loopback)
	patchelf # deploy/kubernetes/node-install.sh, run by test_kubernetes_deploy.py
	linux-perf # perf: bench/burst-profile.sh (where a burst's CPU goes, docs/benchmarks.md)
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "isola: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# E2B compatibility suite (tests/e2b): node >= 20.18.1 (the e2b package's engines) with npm.
# The machines isola is tested on ship node 20 and npm 11; Debian 12's own nodejs is too old.
command -v node >/dev/null || apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null || true
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit((a===20&&b>=18)||a>=22?0:1)' ||
	! command -v npm >/dev/null; then
	echo "isola: the E2B and SDK suites need node >=20.18.1 (<21 or >=22) with npm"
	exit 1
fi
