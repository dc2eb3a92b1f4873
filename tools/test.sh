#!/usr/bin/env bash
# The test gate: sets up, builds with warnings as errors, and runs every test.
#
#   tools/test.sh           the full gate (CI runs it, .ci/run): a Release build and every test
#                           (unit, integration: the real binary on loopback ports, a real
#                           Prometheus, the dashboard in headless Chromium), the benchmark's quick
#                           mode, the unit and integration tests again on an AddressSanitizer +
#                           UndefinedBehaviorSanitizer build (build/asan), the integration tests on
#                           a ThreadSanitizer build (build/tsan), then the fuzzers' corpus
#                           regression and a short fuzz run (build/fuzz).
#   tools/test.sh --quick   for daily work: the Release build, then the unit tests, the golden
#                           boards and the integration tests that take a few seconds each (ctest
#                           label "quick"; the slow ones are tagged [slow] in their source).
#
# The full gate's time is mostly compiling four builds on two cores, and its tests mostly wait
# (on an agent's ticks, a timeout, a receiver): so each build of the next stage compiles while the
# tests of the one before run, and the timing-dependent tests hold on a machine that is busy
# compiling (that is checked here every run). Each stage writes its log to
# build/test-logs/<stage>.log; the console shows when each starts and ends, and the tail of the
# log of one that fails. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_BUILD_DIR:-$root/build}
quick=0
case ${1:-} in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: tools/test.sh [--quick]" >&2; exit 2 ;;
esac

asan_build=$build/asan
tsan_build=$build/tsan
fuzz_build=$build/fuzz
logs=$build/test-logs
began=$SECONDS
say() { printf '[test %s %3dm%02ds] %s\n' "$(date +%T)" $(((SECONDS - began) / 60)) $(((SECONDS - began) % 60)) "$*"; }

"$root/tools/setup.sh" --test
say "building $build (Release, -Werror)"
"$root/tools/build.sh" -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON
mkdir -p "$logs"

# Integration tests mostly wait (for a tick, a timeout, a receiver), so more of them run at once
# than there are cores; the sanitizers make each one slower.
jobs=$(($(nproc) * 2))

if ((quick)); then
  say "quick tests (ctest -L quick)"
  (cd "$build" && ctest -L quick --output-on-failure -j "$jobs" --timeout 300) | tee "$logs/quick.log"
  read -r total failed skipped <<<"$("$root/tools/ctest-count.sh" "$logs/quick.log")"
  echo "tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped (quick; the full gate: tools/test.sh)"
  ((failed == 0))
  exit
fi

# --- stages -------------------------------------------------------------------------------------
# Each runs in the background with its own log; a stage is a shell function.

release_tests() {
  (cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 300)
  # The benchmark in its quick mode (about 1.5 minutes): it fails only on errors (non-2xx, bad
  # bodies); its figures go to build/bench/benchmarks-quick.md, and mean little here, beside a
  # build. The full run is tools/bench/run.sh, on a quiet machine.
  "$root/tools/bench/run.sh" --quick --build-dir "$build" --no-build
}

# The sanitizer build: a use-after-free, a double free, a buffer overrun, a leak or undefined
# behaviour in the agent, a plugin or a test fails here. At -O1, as the sanitizers advise: about
# as fast to run as -O3 under them, and quicker to compile. Only what its tests run (not the
# benchmark programs).
asan_build() {
  KIWI_BUILD_DIR=$asan_build "$root/tools/build.sh" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON -DKIWI_SANITIZE=ON \
    --target kiwi_unit_tests kiwi_integration_tests
}
# Not the two tests of a plugin that crashes the agent (the sanitizers catch its null dereference
# first and exit 1, so the agent's own fatal-signal line, which those tests check in the Release
# build, never comes), not the browser test (a second Chromium run adds minutes and no coverage of
# C++ code the integration tests miss) nor the benchmark.
asan_tests() {
  (cd "$asan_build" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs" --timeout 300 \
    -E '^browser:|^integration:hardening: a (sensor|route handler) that crashes')
}

# The ThreadSanitizer build: the integration tests, where the collector, the store's writer, the
# HTTP workers and reloads run at once, against an agent built with -fsanitize=thread. Every
# report of every process (the agent and the tests) goes to a file under $tsan_reports, and any
# such file fails the run, so a race in an agent that a test then kills still counts.
# tests/tsan.supp holds the one suppression, with its reason. Not the two crash tests (as above).
tsan_reports=$tsan_build/reports
tsan_build() {
  KIWI_BUILD_DIR=$tsan_build "$root/tools/build.sh" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DKIWI_BUILD_TESTS=ON -DKIWI_WERROR=ON -DKIWI_TSAN=ON --target kiwi_integration_tests
}
tsan_tests() {
  rm -rf "$tsan_reports"
  mkdir -p "$tsan_reports"
  (cd "$tsan_build" && TSAN_OPTIONS="suppressions=$root/tests/tsan.supp log_path=$tsan_reports/race \
    halt_on_error=0 second_deadlock_stack=1" ctest --output-on-failure -j "$jobs" --timeout 300 \
    -R '^integration:' -E '^integration:hardening: a (sensor|route handler) that crashes')
  if compgen -G "$tsan_reports/race.*" >/dev/null; then
    echo "ThreadSanitizer reported races (each file is one process's reports):"
    for f in "$tsan_reports"/race.*; do echo "== $f"; cat "$f"; done
    return 1
  fi
}

# The fuzzers (tests/fuzz, clang 14 with ASan+UBSan): the build, then every committed corpus input
# once, then each fuzzer for 10 s on top of it (two at a time); any finding fails.
fuzz_build() { KIWI_FUZZ_BUILD_DIR=$fuzz_build "$root/tools/fuzz.sh" --build-only; }
fuzz_runs() {
  KIWI_FUZZ_BUILD_DIR=$fuzz_build "$root/tools/fuzz.sh" --no-build --regression
  KIWI_FUZZ_BUILD_DIR=$fuzz_build "$root/tools/fuzz.sh" --no-build --jobs "$(nproc)" 10
}

# Runs stages at once, each in its own process group with its log, and waits for them, reporting
# each as it ends. On a failure it stops the others (their process groups: only what this script
# started), prints the failing log's tail and exits 1.
export root build asan_build tsan_build fuzz_build tsan_reports jobs
export -f release_tests asan_build asan_tests tsan_build tsan_tests fuzz_build fuzz_runs
run_together() {
  local -A pids=() since=()
  local stage done_pid
  for stage in "$@"; do
    say "$stage: started (log: $logs/$stage.log)"
    since[$stage]=$SECONDS
    setsid bash -euo pipefail -c "$stage" >"$logs/$stage.log" 2>&1 &
    pids[$stage]=$!
  done
  while ((${#pids[@]})); do
    local status=0
    wait -n -p done_pid "${pids[@]}" || status=$?
    for stage in "${!pids[@]}"; do
      [[ ${pids[$stage]} == "$done_pid" ]] || continue
      unset "pids[$stage]"
      if ((status == 0)); then
        say "$stage: ok ($((SECONDS - since[$stage])) s)"
        continue
      fi
      say "$stage: FAILED ($((SECONDS - since[$stage])) s); stopping ${!pids[*]}"
      local other
      for other in "${!pids[@]}"; do kill -TERM -- "-${pids[$other]}" 2>/dev/null || true; done
      wait "${pids[@]}" 2>/dev/null || true
      # What each failed test printed (ctest --output-on-failure puts it after the test's line,
      # amid the others' lines): the log itself goes with a fresh root (tools/fresh-check.sh).
      echo "==== the failed tests' output in $logs/$stage.log:" >&2
      awk '/\*\*\*(Failed|Timeout|Exception)/ { p = 1 } /^ +Start +[0-9]+: / { p = 0 } p' \
        "$logs/$stage.log" | head -n 400 >&2
      echo "==== the end of $logs/$stage.log:" >&2
      tail -n 80 "$logs/$stage.log" >&2
      exit 1
    done
  done
}

run_together release_tests asan_build
run_together asan_tests tsan_build
run_together tsan_tests fuzz_build
run_together fuzz_runs

# The test count last, so it is the closing line a reader (or CI) sees; skipped tests apart.
count() { "$root/tools/ctest-count.sh" "$logs/$1.log"; }
read -r total failed skipped <<<"$(count release_tests)"
read -r asan_total asan_failed asan_skipped <<<"$(count asan_tests)"
read -r tsan_total tsan_failed tsan_skipped <<<"$(count tsan_tests)"
say "done"
echo "address sanitizer build: $((asan_total - asan_failed - asan_skipped)) passed, $asan_failed failed, $asan_skipped skipped"
echo "thread sanitizer build: $((tsan_total - tsan_failed - tsan_skipped)) passed, $tsan_failed failed, $tsan_skipped skipped"
echo "tests: $((total + asan_total + tsan_total - failed - asan_failed - tsan_failed - skipped - asan_skipped - tsan_skipped)) passed, $((failed + asan_failed + tsan_failed)) failed, $((skipped + asan_skipped + tsan_skipped)) skipped"
