#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build: configures and builds isola into build/ and, with --asan, an ASan+UBSan tree build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."

werror=false
[ "${CI:-}" = "true" ] && werror=true

# Runs a build step quietly; on failure prints its output and fails.
quiet() {
	local log
	log=$(mktemp)
	if ! "$@" >"$log" 2>&1; then
		tail -n 60 "$log"
		rm -f "$log"
		echo "build: \`$*\` failed"
		return 1
	fi
	rm -f "$log"
}

# The web console's pinned npm files (xterm.js; docs/console.md), embedded into isolad by meson.
if [ ! -d console/node_modules ] || [ console/package-lock.json -nt console/node_modules ]; then
	quiet npm ci --prefix console --no-audit --no-fund --loglevel=error
fi
[ -d build ] || quiet meson setup build -Dwerror=$werror
quiet ninja -C build

if [ "${1:-}" = "--asan" ]; then
	# Sanitizers cannot link static binaries: the ASan tree uses build/'s agent and probe.
	[ -d build-asan ] || quiet meson setup build-asan -Db_sanitize=address,undefined \
		-Db_lundef=false -Dagent=false -Dwerror=$werror
	quiet ninja -C build-asan
fi
