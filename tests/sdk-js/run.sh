#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh: builds sdk/js (npm ci + tsc) and runs its node:test suite against a private isolad.
# Usage: tests/sdk-js/run.sh [JUNIT.xml]   (exit status: the suite's; non-zero if npm ci fails)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/isolad.sh"
JUNIT=${1:-$REPO/build/test-results/sdk-js.xml}
mkdir -p "$(dirname "$JUNIT")"
rm -f "$JUNIT"

npm_ci "$REPO/sdk/js" || exit 1
(cd "$REPO/sdk/js" && timeout 120 npx --no-install tsc -p tsconfig.json) || { echo "sdk-js: tsc failed" >&2; exit 1; }

# A tiny template image (docker-archive around a static program) for the template tests.
IMG=$(mktemp -d /tmp/isola-sdkjs-img-XXXXXX)
(cd "$REPO" && /usr/bin/python3 -c '
import sys, pathlib
sys.path.insert(0, "tests/integration")
import imagebuild
d = pathlib.Path(sys.argv[1])
(d / "img.tar").write_bytes(imagebuild.docker_archive(imagebuild.build_hello(d)))
' "$IMG") || { echo "sdk-js: cannot build the test image" >&2; exit 1; }
export ISOLA_TEST_IMAGE=$IMG/img.tar

isolad_start || exit 1
timeout 900 node --test --test-concurrency=1 --test-timeout=120000 \
	--test-reporter=spec --test-reporter-destination=stdout \
	--test-reporter=junit --test-reporter-destination="$JUNIT" \
	"$HERE"/*.test.mjs
rc=$?
rm -rf "$IMG"
exit $rc
