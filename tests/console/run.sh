#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh: the web console (docs/console.md) driven in Debian's chromium (headless) by playwright-core
# against a private isolad. Screenshots go to build/test-results/console/.
# Usage: tests/console/run.sh [JUNIT.xml]   (exit status: the suite's; non-zero if npm ci fails)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../sdk-js/isolad.sh"
JUNIT=${1:-$REPO/build/test-results/console.xml}
mkdir -p "$(dirname "$JUNIT")" "$REPO/build/test-results/console"
rm -f "$JUNIT"

command -v chromium >/dev/null || { echo "console: chromium is missing (scripts/deps.sh installs it)" >&2; exit 1; }
npm_ci "$HERE" || exit 1
# The ports view needs the exposure listener (sandbox.test.mjs exposes and closes a port).
ISOLAD_EXTRA_ARGS="${ISOLAD_EXTRA_ARGS:-} --expose-listen 127.0.0.1:$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
isolad_start || exit 1
# The test starts a second isolad (--console off) from the same binaries.
export ISOLA_TEST_ISOLAD=$ISOLAD_BIN ISOLA_TEST_AGENT=$AGENT_BIN
export ISOLA_TEST_SHOTS=$REPO/build/test-results/console
timeout 1200 node --test --test-concurrency=1 --test-timeout=600000 \
	--test-reporter=spec --test-reporter-destination=stdout \
	--test-reporter=junit --test-reporter-destination="$JUNIT" \
	"$HERE"/*.test.mjs
