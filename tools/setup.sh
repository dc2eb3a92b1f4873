#!/usr/bin/env bash
# Installs what kiwi-agent needs to build and test, from Debian 12 packages. Idempotent: packages
# already installed are skipped, and apt is not touched at all when nothing is missing.
# Usage: tools/setup.sh [--test]   (--test adds what the test suite needs)
# Then tools/setup-mhd.sh builds libmicrohttpd without TLS from Debian's source package (less
# memory; optional: CMake falls back to Debian's library). Node.js packages (uPlot,
# playwright-core) and chromium come from tools/setup-web.sh, called last.
set -euo pipefail

# build-essential's g++ also brings libasan and libubsan, for a sanitizer build.
build_packages=(build-essential dpkg-dev cmake pkg-config libmicrohttpd-dev libsqlite3-dev rapidjson-dev zlib1g-dev
  libboost-dev libboost-filesystem-dev libtomlplusplus-dev)
# What tools/test.sh runs besides the build: Catch2 (unit and integration tests), sqlite3, curl,
# gzip, wrk and taskset (util-linux) for the quick benchmark (tools/bench/run.sh), mount/umount
# for the tests that fill a small tmpfs, prometheus and promtool for the scrape and exposition
# tests, clang-format (14) for the formatting check of the sources. A minimal Debian 12
# (mmdebstrap, a container image) has none of them but gzip and util-linux; tools/fresh-check.sh
# runs the tests on one. Node.js, npm and chromium come from tools/setup-web.sh.
test_packages=(catch2 sqlite3 curl gzip wrk util-linux mount prometheus clang-format)

wanted=("${build_packages[@]}")
[[ "${1:-}" == "--test" ]] && wanted+=("${test_packages[@]}")
root=$(cd "$(dirname "$0")/.." && pwd)

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

"$root/tools/setup-mhd.sh"

# The dashboard embeds uPlot from the npm registry (pinned in tools/web/package-lock.json).
"$root/tools/setup-web.sh" "$@"
