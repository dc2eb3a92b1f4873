#!/usr/bin/env bash
# Sets up, builds with warnings as errors, and runs every test (unit and integration: the real
# binary on loopback ports). Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_BUILD_DIR:-$root/build}
"$root/tools/setup.sh" --test
"$root/tools/build.sh" -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 300
