#!/usr/bin/env bash
# Sets up, builds with warnings as errors, and runs every test (unit, integration: the real binary
# on loopback ports, a real Prometheus, the dashboard in headless Chromium), then the benchmark in
# its quick mode. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_BUILD_DIR:-$root/build}
"$root/tools/setup.sh" --test
"$root/tools/build.sh" -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(cd "$build" && ctest --output-on-failure -j "$(nproc)" --timeout 300) | tee "$log"
# The benchmark in its quick mode (about 1.5 minutes): it fails only on errors (non-2xx, bad
# bodies); its figures go to build/bench/benchmarks-quick.md. The full run is tools/bench/run.sh.
"$root/tools/bench/run.sh" --quick --build-dir "$build" --no-build
# The test count last, so it is the closing line a reader (or CI) sees.
sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2 \1/p' "$log" |
  { read -r total failed; echo "tests: $((total - failed)) passed, $failed failed"; }
