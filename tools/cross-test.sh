#!/usr/bin/env bash
# Cross-builds kiwi-agent for an Arm board and runs its tests there, emulated: the unit tests and
# the integration tests (the golden fixture boards among them) run on this machine under
# qemu-user, and start the cross-built agent under it too. Exits non-zero on any failure; the
# closing line counts the tests as tools/test.sh does.
#
# Usage: tools/cross-test.sh arm64    64-bit Arm (aarch64-linux-gnu): Raspberry Pi OS 64-bit, RK3588
#        tools/cross-test.sh armhf    32-bit Arm, ARMv7 with VFP (arm-linux-gnueabihf): 32-bit
#                                     Raspberry Pi OS on a Pi 2 or later
#
# Steps, each skipped when already done (a second run only builds what changed and tests):
#   1. tools/setup.sh --arch ARCH: Debian's cross compiler (crossbuild-essential-ARCH), the
#      target's -dev packages through multiarch (dpkg --add-architecture ARCH; libsqlite3-dev:ARCH,
#      libboost-filesystem-dev:ARCH, ...), qemu-user-static and Catch2 (tools/install-packages.sh:
#      apt is not touched when nothing is missing; sudo when not root); libmicrohttpd without TLS
#      cross-built from Debian's source package into build-ARCH/deps/libmicrohttpd
#      (tools/setup-mhd.sh --arch ARCH); the dashboard's npm packages (tools/setup-web.sh: node runs
#      here, the embedded assets are the same for every architecture; no chromium).
#   2. tools/build.sh into build-ARCH (Release, -Werror) with cmake/toolchain-<triplet>.cmake and
#      the Debian install layout (prefix /usr, libdir lib/<triplet>), so tools/package.sh --arch
#      ARCH can install from the same tree. build/ is never touched.
#   3. ctest in build-ARCH: the toolchain file sets CMAKE_CROSSCOMPILING_EMULATOR
#      (qemu-<cpu>-static -L /), so ctest runs each test binary under qemu.
# Measured on this project's 2-core VM: arm64 from a fresh Debian 12 root (sudo
# tools/fresh-check.sh -- tools/cross-test.sh arm64) 6 minutes, a run again with everything
# installed and built 70 s, nearly all of it the tests under qemu; armhf 5 minutes from scratch.
#
# How the tests start the agent: through the same emulator, named to them in KIWI_TEST_EMULATOR
# (tests/CMakeLists.txt sets it from CMAKE_CROSSCOMPILING_EMULATOR; tests/emulator.hpp). Not
# binfmt_misc: registering qemu with the kernel needs root and a writable binfmt_misc, changes the
# whole machine (every container and chroot on the kernel) and outlives the run, while the
# emulator prefix works for any user, in a chroot (tools/fresh-check.sh) or a container alike. One
# consequence: the agent's start-up re-execution of itself (main.cpp, apply_malloc_tunables)
# fails under qemu-user (the kernel refuses the foreign binary, ENOEXEC), which the agent
# tolerates by design: it runs on with glibc's default malloc cache. The integration test of that
# re-execution is therefore Skipped under an emulator. (Where binfmt_misc does know qemu, the
# re-execution works and nothing else changes.)
#
# Not run (not selected, or ctest -E below), and why:
#   browser:                      headless Chromium (not installed for a cross build)
#   format:                       clang-format on the sources: the same for every architecture
#   install:                      runs the installed tree's agent directly (cmake --install);
#                                 the layout is the same for every architecture (tools/test.sh)
#   integration:prometheus:       a real Prometheus server scraping two agents
#   integration:alertmanager:     a real Alertmanager the notifier sends to (the other notifier
#                                 tests, on test receivers, run)
#   promtool, Prometheus scrape   the two integration tests that run promtool check metrics
#                                 (Prometheus' tools are not installed for a cross build; the
#                                 golden tests run promtool only where it is installed)
set -euo pipefail
started=$SECONDS
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  echo "usage: tools/cross-test.sh arm64|armhf   (the Debian architecture to cross-build and test)" >&2
  exit 2
}
(($# == 1)) || usage
arch=$1
case $arch in
  arm64) triplet=aarch64-linux-gnu ;;
  armhf) triplet=arm-linux-gnueabihf ;;
  *) usage ;;
esac
build=$root/build-$arch
say() { echo "cross-test $arch: $*" >&2; }

"$root/tools/setup.sh" --arch "$arch"

say "building into $build"
KIWI_BUILD_DIR=$build "$root/tools/build.sh" \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-$triplet.cmake" \
  -DCMAKE_INSTALL_PREFIX=/usr \
  -DKIWI_MHD_PREFIX="$build/deps/libmicrohttpd" -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON

say "running the tests under qemu (CMAKE_CROSSCOMPILING_EMULATOR: cmake/debian-cross.cmake)"
log=$(mktemp)
sid_file=$(mktemp)
trap 'rm -f "$log" "$sid_file"' EXIT
# The tests run in a session of their own (setsid), so that what they started is known by its
# session id however it was started: ctest, the test programs under qemu, the agents those start
# (each leading a process group of its own, in the same session) and the programs an agent runs.
# An agent outlived its test once (a run at 9f74b9a left three under qemu, reparented to init, for
# an hour); the harness now has the kernel kill it with the test (PR_SET_PDEATHSIG,
# tests/integration/process.hpp), and this checks that nothing is left all the same.
run_suite() {
  (cd "$build" && exec setsid --wait sh -c 'echo $$ >"$0" && exec "$@"' "$sid_file" \
    ctest --output-on-failure -j 2 --timeout 300 -R '^(unit|integration):' \
    -E '^integration:prometheus:|^integration:alertmanager:|promtool|Prometheus scrape') | tee "$log"
}
# "PID ARGS" of each process still running (not a zombie) in the suite's session.
suite_processes() {
  local sid
  sid=$(<"$sid_file")
  [[ -n $sid ]] || return 0
  ps -e -o pid=,sid=,stat=,args= | SID=$sid awk '$2 == ENVIRON["SID"] && $3 !~ /^Z/ {
    pid = $1; $1 = $2 = $3 = ""; sub(/^ +/, ""); print pid, $0 }'
}
# SIGKILL to what is left of the suite (only its session: nothing else is touched).
stop_suite() {
  local pid _
  while read -r pid _; do kill -KILL "$pid" 2>/dev/null || true; done < <(suite_processes)
}
trap 'say "interrupted: stopping the tests"; stop_suite; exit 130' INT TERM
tests_started=$SECONDS
status=0
# In the background and waited for, so that an interrupt stops the tests at once: ctest is not in
# the terminal's process group any more and would not see the ^C.
run_suite &
wait $! || status=$?
trap - INT TERM

# Nothing the suite started may outlive it: a process in its session after ctest has ended is a
# test's leak (the agents die with their test; a moment is allowed for the kernel to finish them).
left=""
for ((i = 0; i < 50; i++)); do
  left=$(suite_processes)
  [[ -z $left ]] && break
  sleep 0.1
done
if [[ -n $left ]]; then
  say "left running after the tests (killed now):"
  echo "$left" >&2
  stop_suite
  status=1
fi
# And by command line: a program of this build (the agent, a test program; under qemu its path is
# in the emulator's arguments) started during the tests that left their session (setsid). Named,
# not killed: it is not known to be this run's.
strays=$(ps -e -o pid=,sid=,stat=,etimes=,args= | BUILD="$build/" SID="$(<"$sid_file")" \
  SINCE=$((SECONDS - tests_started)) awk '$2 != ENVIRON["SID"] && $3 !~ /^Z/ &&
    $4 <= ENVIRON["SINCE"] + 0 && index($0, ENVIRON["BUILD"]) {
    pid = $1; $1 = $2 = $3 = $4 = ""; sub(/^ +/, ""); print pid, $0 }')
if [[ -n $strays ]]; then
  say "running from $build, started during the tests outside their session (left alone):"
  echo "$strays" >&2
  status=1
fi

read -r total failed skipped <<<"$("$root/tools/ctest-count.sh" "$log")"
((total > 0)) || { say "no tests ran"; status=1; }
elapsed=$((SECONDS - started))
say "$((elapsed / 60)) min $((elapsed % 60)) s in all (setup, build, tests)"
echo "tests ($arch, under qemu): $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
exit "$status"
