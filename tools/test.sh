#!/usr/bin/env bash
# Sets up, builds with warnings as errors, and runs every test (unit, integration: the real binary
# on loopback ports, a real Prometheus, the dashboard in headless Chromium), then the benchmark in
# its quick mode, then the unit and integration tests again on an AddressSanitizer +
# UndefinedBehaviorSanitizer build (build/asan), the integration tests on a ThreadSanitizer build
# (build/tsan), then the fuzzers' corpus regression and a short
# fuzz run (tools/fuzz.sh, build/fuzz). Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_BUILD_DIR:-$root/build}
asan_build=$build/asan
tsan_build=$build/tsan
"$root/tools/setup.sh" --test
"$root/tools/build.sh" -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON
log=$(mktemp)
asan_log=$(mktemp)
tsan_log=$(mktemp)
trap 'rm -f "$log" "$asan_log" "$tsan_log"' EXIT
(cd "$build" && ctest --output-on-failure -j "$(nproc)" --timeout 300) | tee "$log"
# The benchmark in its quick mode (about 1.5 minutes): it fails only on errors (non-2xx, bad
# bodies); its figures go to build/bench/benchmarks-quick.md. The full run is tools/bench/run.sh.
"$root/tools/bench/run.sh" --quick --build-dir "$build" --no-build
# The sanitizer build: a use-after-free, a double free, a buffer overrun or undefined behaviour in the
# agent, a plugin or a test fails here. Not the two tests of a plugin that crashes the agent (the
# sanitizers catch its null dereference first and exit 1, so the agent's own fatal-signal line,
# which those tests check in the Release build above, never comes). Not the browser test (a second Chromium run adds minutes
# and no coverage of C++ code the integration tests miss) nor the benchmark.
KIWI_BUILD_DIR=$asan_build "$root/tools/build.sh" -DCMAKE_BUILD_TYPE=Release \
  -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON -DKIWI_SANITIZE=ON
(cd "$asan_build" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$(nproc)" --timeout 300 \
  -E '^browser:|^integration:hardening: a (sensor|route handler) that crashes') | tee "$asan_log"
# The ThreadSanitizer build (build/tsan): the integration tests, where the collector, the store's
# writer, the HTTP workers and reloads run at once, against an agent built with -fsanitize=thread.
# Every report of every process (the agent and the tests) goes to a file under $tsan_reports, and
# any such file fails the run, so a race in an agent that a test then kills still counts.
# tests/tsan.supp holds the one suppression, with its reason. Not the two crash tests (as above).
tsan_reports=$tsan_build/reports
rm -rf "$tsan_reports"
mkdir -p "$tsan_reports"
# Only what the integration tests run (the agent, every plugin, the test plugins), not the unit tests.
cmake -S "$root" -B "$tsan_build" -DCMAKE_BUILD_TYPE=Release -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON \
  -DKIWI_TSAN=ON >/dev/null
cmake --build "$tsan_build" -j "$(nproc)" --target kiwi_integration_tests
(cd "$tsan_build" && TSAN_OPTIONS="suppressions=$root/tests/tsan.supp log_path=$tsan_reports/race \
  halt_on_error=0 second_deadlock_stack=1" ctest --output-on-failure -j "$(nproc)" --timeout 300 \
  -R '^integration:' -E '^integration:hardening: a (sensor|route handler) that crashes') |
  tee "$tsan_log"
if compgen -G "$tsan_reports/race.*" >/dev/null; then
  echo "ThreadSanitizer reported races (each file is one process's reports):" >&2
  for f in "$tsan_reports"/race.*; do echo "== $f" >&2; cat "$f" >&2; done
  exit 1
fi
# The fuzzers (tests/fuzz, clang 14 with ASan+UBSan, in build/fuzz): every committed corpus input
# once, then each fuzzer for 10 s on top of it; any finding fails.
KIWI_FUZZ_BUILD_DIR=$build/fuzz "$root/tools/fuzz.sh" --regression
KIWI_FUZZ_BUILD_DIR=$build/fuzz "$root/tools/fuzz.sh" 10
# The test count last, so it is the closing line a reader (or CI) sees; skipped tests apart.
read -r total failed skipped <<<"$("$root/tools/ctest-count.sh" "$log")"
read -r asan_total asan_failed asan_skipped <<<"$("$root/tools/ctest-count.sh" "$asan_log")"
read -r tsan_total tsan_failed tsan_skipped <<<"$("$root/tools/ctest-count.sh" "$tsan_log")"
echo "address sanitizer build: $((asan_total - asan_failed - asan_skipped)) passed, $asan_failed failed, $asan_skipped skipped"
echo "thread sanitizer build: $((tsan_total - tsan_failed - tsan_skipped)) passed, $tsan_failed failed, $tsan_skipped skipped"
echo "tests: $((total + asan_total + tsan_total - failed - asan_failed - tsan_failed - skipped - asan_skipped - tsan_skipped)) passed, $((failed + asan_failed + tsan_failed)) failed, $((skipped + asan_skipped + tsan_skipped)) skipped"
