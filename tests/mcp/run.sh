#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh: `isola mcp` driven by the official MCP TypeScript SDK client against a private isolad.
# Usage: tests/mcp/run.sh [JUNIT.xml]   (exit status: the suite's; non-zero if npm ci fails)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../sdk-js/isolad.sh"
JUNIT=${1:-$REPO/build/test-results/mcp.xml}
mkdir -p "$(dirname "$JUNIT")"
rm -f "$JUNIT"

npm_ci "$HERE" || exit 1
# An exposure listener, so sandbox_expose_port's URL can be fetched (agent.test.mjs).
ISOLA_TEST_EXPOSE_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export ISOLA_TEST_EXPOSE_PORT
ISOLAD_EXTRA_ARGS="--expose-listen 127.0.0.1:$ISOLA_TEST_EXPOSE_PORT" isolad_start || exit 1
# 600 s: sandbox_run_code starts a Python kernel (code.test.mjs), seconds to a minute under load.
timeout 600 node --test --test-concurrency=1 --test-timeout=240000 \
	--test-reporter=spec --test-reporter-destination=stdout \
	--test-reporter=junit --test-reporter-destination="$JUNIT" \
	"$HERE"/*.test.mjs
