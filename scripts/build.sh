#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build: configures and builds isola into build/ (release-ish) and, with --asan, build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."

werror=false
[ "${CI:-}" = "true" ] && werror=true

if [ ! -d build ]; then
	meson setup build -Dwerror=$werror >/dev/null
fi
ninja -C build >/dev/null

if [ "${1:-}" = "--asan" ]; then
	# Sanitizers cannot link the static agent: the ASan tree uses build/'s agent.
	if [ ! -d build-asan ]; then
		meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
			-Dagent=false -Dwerror=$werror >/dev/null
	fi
	ninja -C build-asan >/dev/null
fi
