#!/usr/bin/env bash
# Installs what kiwi-agent needs to build and test, from Debian 12 packages. Idempotent: packages
# already installed are skipped, and apt is not touched at all when nothing is missing
# (tools/install-packages.sh).
# Usage: tools/setup.sh [--test]      (--test adds what the test suite needs)
#        tools/setup.sh --bench       (adds what the fleet and footprint benchmarks,
#                                      tools/bench/fleet.py and footprint.py, need; combines
#                                      with --test)
#        tools/setup.sh --arch ARCH   (a cross build for the Debian architecture ARCH, arm64 or
#                                      armhf, and its tests under qemu: tools/cross-test.sh)
# Then tools/setup-mhd.sh builds libmicrohttpd without TLS from Debian's source package (less
# memory; optional: CMake falls back to Debian's library). Node.js packages (uPlot,
# playwright-core) and chromium come from tools/setup-web.sh, called last.
set -euo pipefail

# build-essential's g++ also brings libasan and libubsan, for a sanitizer build. ccache: a file
# compiled before (in any build directory of the checkout) comes from the cache (tools/build.sh).
build_tools=(build-essential dpkg-dev cmake pkg-config rapidjson-dev ccache)
# The libraries the agent links, for the machine that runs it (rapidjson-dev is headers only,
# for every architecture). libcurl and snappy: the remote_write output plugin alone links them;
# libmosquitto: the mqtt output plugin alone. libcrypt-dev (libxcrypt): bcrypt for [http.auth]
# basic_users.
target_libraries=(libmicrohttpd-dev libsqlite3-dev zlib1g-dev libboost-dev libboost-filesystem-dev
  libtomlplusplus-dev libcurl4-openssl-dev libsnappy-dev libmosquitto-dev libcrypt-dev)
# What the README's first checks of a running agent use (tools/run.sh installs them with the
# rest): curl and jq.
check_tools=(curl jq)
# What tools/test.sh runs besides the build: Catch2 (unit and integration tests), sqlite3, curl,
# gzip, wrk and taskset (util-linux) for the quick benchmark (tools/bench/run.sh), mount/umount
# for the tests that fill a small tmpfs, prometheus and promtool for the scrape and exposition
# tests, prometheus-alertmanager (0.25) for the alertmanager notifier's test, clang-format (14)
# for the formatting check of the sources, systemd for systemd-analyze (the install test verifies
# the unit and rates its hardening), clang (14) for the SDK test, which
# builds an example plugin with another compiler than the agent's. A minimal Debian 12
# (mmdebstrap, a container image) has none of them but gzip and util-linux; tools/fresh-check.sh
# runs the tests on one. clang-14 and libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes)
# build the fuzzers (tools/fuzz.sh, tests/fuzz), whose corpus regression and short run tools/test.sh
# makes. cgit and git: a real CGI program serving a repository snapshot and a `git clone`
# through the cgi handler. python3 runs the exec sensor's and the cgi handler's test programs
# written in Python (the README's example script is one), as a user's would. Node.js, npm and
# chromium come from tools/setup-web.sh. openssl makes the TLS tests' certificates, and
# libmicrohttpd12 (Debian's libmicrohttpd with GnuTLS, which the agent loads for [http.tls]; the
# package Recommends it) serves them. mosquitto and mosquitto-clients: the mqtt output's test runs a
# broker of its own on loopback (not the package's service, which the install leaves running)
# and reads it with mosquitto_sub.
test_packages=(catch2 sqlite3 curl gzip wrk util-linux mount prometheus prometheus-alertmanager
  clang-format systemd clang clang-14 libclang-rt-14-dev python3 openssl libmicrohttpd12 cgit git
  mosquitto mosquitto-clients)

# The fleet benchmark (tools/bench/fleet.py, standard-library Python): node_exporter is the
# agent it compares against, Prometheus 2.42 scrapes both sides, curl makes loopback traffic for
# --check-rates, dd (coreutils) the disk I/O. The footprint benchmark (tools/bench/footprint.py,
# run.sh --footprint) runs node_exporter, Netdata and collectd (its default plugins with rrdtool;
# its write_prometheus plugin needs libprotobuf-c1 and libmicrohttpd12, which collectd-core only
# suggests) beside the agent. On a machine with systemd, Debian starts their services when it
# installs them: the footprint report says when one ran during the benchmark (stop it with
# `systemctl disable --now netdata collectd prometheus-node-exporter`). valgrind: the callgrind
# counts of run.sh --instructions (also a step of --all; tools/bench/bench.py installs it for those
# modes when it is missing). Not part of --test: tools/test.sh runs none of these.
bench_packages=(prometheus-node-exporter prometheus python3 curl coreutils netdata collectd rrdtool
  libprotobuf-c1 libmicrohttpd12 valgrind)

# A cross build (--arch): Debian's cross compiler (crossbuild-essential-ARCH), the target's
# libraries through multiarch (libsqlite3-dev:arm64, ...), qemu-user-static to run the tests,
# Catch2 (headers and CMake files only: the host's package serves every architecture) and mount
# for the tests that fill a small tmpfs, and this machine's mosquitto and mosquitto-clients for
# the mqtt output's test (the broker need not be the target's). Not Prometheus nor chromium:
# tools/cross-test.sh runs neither test.
cross_test_packages=(qemu-user-static catch2 mount mosquitto mosquitto-clients)

root=$(cd "$(dirname "$0")/.." && pwd)
test=0 bench=0 arch=""
while (($#)); do
  case $1 in
    --test) test=1 ;;
    --bench) bench=1 ;;
    --arch)
      [[ -n ${2:-} ]] || { echo "setup: --arch needs a Debian architecture (arm64, armhf)" >&2; exit 2; }
      arch=$2
      shift ;;
    *) echo "usage: tools/setup.sh [--test] [--bench] | --arch ARCH" >&2; exit 2 ;;
  esac
  shift
done

if [[ -n $arch ]]; then
  "$root/tools/install-packages.sh" "${build_tools[@]}" "crossbuild-essential-$arch" \
    "${cross_test_packages[@]}" "${target_libraries[@]/%/:$arch}"
  "$root/tools/setup-mhd.sh" --arch "$arch"
  # The dashboard's assets are the same for every architecture; node runs on this machine.
  "$root/tools/setup-web.sh"
  exit 0
fi

wanted=("${build_tools[@]}" "${target_libraries[@]}" "${check_tools[@]}")
((test)) && wanted+=("${test_packages[@]}")
((bench)) && wanted+=("${bench_packages[@]}")
"$root/tools/install-packages.sh" "${wanted[@]}"

"$root/tools/setup-mhd.sh"

# The dashboard embeds uPlot from the npm registry (pinned in tools/web/package-lock.json).
web_options=()
((test)) && web_options=(--test)
"$root/tools/setup-web.sh" "${web_options[@]}"
