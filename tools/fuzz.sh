#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang 14, AddressSanitizer and
# UndefinedBehaviorSanitizer (no recovery: the first finding stops the fuzzer) into build/fuzz,
# then runs each one for SECONDS (default 60) on its committed corpus (tests/fuzz/corpus/<target>/;
# new inputs go to build/fuzz/corpus/<target>/, never into the tree).
#   tools/fuzz.sh [SECONDS]       fuzz every target for SECONDS
#   tools/fuzz.sh --regression    run every corpus file once (what tools/test.sh does first)
#   tools/fuzz.sh ... TARGET...   only the named targets (config, history, http, ...)
#   --jobs N                      N fuzzers at a time (default 1; each uses one core)
#   --build-only, --no-build      only build them; or run what build/fuzz has
# Exits non-zero on any finding, naming the target and the file that holds the crashing input
# (build/fuzz/findings/<target>/crash-*, leak-*, timeout-*, oom-*). Reproduce with
#   build/fuzz/bin/kiwi-fuzz-<target> <that file>
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_FUZZ_BUILD_DIR:-$root/build/fuzz}
seconds=60 regression=0 targets=() jobs=1 build_step=1 run_step=1
while (($#)); do
  case $1 in
    --regression) regression=1 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    --build-only) run_step=0 ;;
    --no-build) build_step=0 ;;
    ''|*[!0-9]*) targets+=("$1") ;;
    *) seconds=$1 ;;
  esac
  shift
done
command -v clang++-14 >/dev/null || { echo "fuzz: clang++-14 is missing (tools/setup.sh --test)" >&2; exit 1; }

if ((build_step)); then
  KIWI_BUILD_DIR=$build "$root/tools/build.sh" -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DKIWI_FUZZ=ON -DKIWI_BUILD_TESTS=OFF -DKIWI_WERROR=ON \
    --target kiwi-fuzzers
fi
((run_step)) || exit 0

if ((${#targets[@]} == 0)); then
  for f in "$root"/tests/fuzz/fuzz_*.cpp; do
    t=${f##*/fuzz_}
    targets+=("${t%.cpp}")
  done
fi
# A finding is fatal (no recovery), and the run is bounded in time, memory and per input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
bounds=(-rss_limit_mb=2048 -timeout=10 -max_len=65536)
# One target: its corpus once (--regression) or fuzzing for SECONDS; leaves $t.failed on a finding.
run_one() {
  local t=$1 bin=$build/bin/kiwi-fuzz-$1 seeds=$root/tests/fuzz/corpus/$1
  local findings=$build/findings/$t log=$build/findings/$t.log ok=1
  mkdir -p "$findings"
  rm -f "$build/findings/$t.failed"
  if ((regression)); then
    # Every committed input once, as a list of files (no fuzzing, no new files).
    local files
    mapfile -t files < <(find "$seeds" -type f | sort)
    if "$bin" "${bounds[@]}" -artifact_prefix="$findings/" "${files[@]}" >"$log" 2>&1; then
      echo "fuzz: $t: ${#files[@]} corpus inputs ok"
    else
      ok=0
    fi
  else
    local work=$build/corpus/$t
    mkdir -p "$work"
    if "$bin" "${bounds[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$findings/" "$work" "$seeds" >"$log" 2>&1; then
      echo "fuzz: $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?') runs in ${seconds} s, nothing found"
    else
      ok=0
    fi
  fi
  if ((!ok)); then
    touch "$build/findings/$t.failed"
    echo "fuzz: $t: FINDING (log: $log)" >&2
    grep -E 'ERROR: |runtime error|fuzz check failed|SUMMARY|Test unit written to|Running: ' "$log" | head -12 >&2 || true
  fi
}
for t in "${targets[@]}"; do
  [[ -x $build/bin/kiwi-fuzz-$t ]] || { echo "fuzz: no fuzzer $t (tests/fuzz/fuzz_$t.cpp)" >&2; exit 2; }
  [[ -d $root/tests/fuzz/corpus/$t ]] || { echo "fuzz: no corpus for $t ($root/tests/fuzz/corpus/$t)" >&2; exit 2; }
done
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  [[ -e $build/findings/$t.failed ]] && failed+=("$t")
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}; the inputs are under $build/findings/<target>/ (see above)" >&2
  exit 1
fi
