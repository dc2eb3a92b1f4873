#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang 14, AddressSanitizer and
# UndefinedBehaviorSanitizer (no recovery: the first finding stops the fuzzer) into build/fuzz,
# then runs each one for SECONDS (default 60) on its committed corpus (tests/fuzz/corpus/<target>/;
# new inputs go to build/fuzz/corpus/<target>/, never into the tree).
#   tools/fuzz.sh [SECONDS]       fuzz every target for SECONDS
#   tools/fuzz.sh --regression    run every corpus file once (what tools/test.sh does first)
#   tools/fuzz.sh ... TARGET...   only the named targets (config, history, http, ...)
# Exits non-zero on any finding, naming the target and the file that holds the crashing input
# (build/fuzz/findings/<target>/crash-*, leak-*, timeout-*, oom-*). Reproduce with
#   build/fuzz/bin/kiwi-fuzz-<target> <that file>
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_FUZZ_BUILD_DIR:-$root/build/fuzz}
seconds=60 regression=0 targets=()
for a in "$@"; do
  case $a in
    --regression) regression=1 ;;
    ''|*[!0-9]*) targets+=("$a") ;;
    *) seconds=$a ;;
  esac
done
command -v clang++-14 >/dev/null || { echo "fuzz: clang++-14 is missing (tools/setup.sh --test)" >&2; exit 1; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DKIWI_FUZZ=ON -DKIWI_BUILD_TESTS=OFF -DKIWI_WERROR=ON >/dev/null
cmake --build "$build" --target kiwi-fuzzers -j "$(nproc)"

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
failed=()
for t in "${targets[@]}"; do
  bin=$build/bin/kiwi-fuzz-$t
  seeds=$root/tests/fuzz/corpus/$t
  [[ -x $bin ]] || { echo "fuzz: no fuzzer $t (tests/fuzz/fuzz_$t.cpp)" >&2; exit 2; }
  [[ -d $seeds ]] || { echo "fuzz: no corpus for $t ($seeds)" >&2; exit 2; }
  findings=$build/findings/$t
  mkdir -p "$findings"
  log=$build/findings/$t.log
  if ((regression)); then
    # Every committed input once, as a list of files (no fuzzing, no new files).
    mapfile -t files < <(find "$seeds" -type f | sort)
    if "$bin" "${bounds[@]}" -artifact_prefix="$findings/" "${files[@]}" >"$log" 2>&1; then
      echo "fuzz: $t: ${#files[@]} corpus inputs ok"
    else
      failed+=("$t")
    fi
  else
    work=$build/corpus/$t
    mkdir -p "$work"
    if "$bin" "${bounds[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$findings/" "$work" "$seeds" >"$log" 2>&1; then
      echo "fuzz: $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?') runs in ${seconds} s, nothing found"
    else
      failed+=("$t")
    fi
  fi
  if [[ " ${failed[*]} " == *" $t "* ]]; then
    echo "fuzz: $t: FINDING (log: $log)" >&2
    grep -E 'ERROR: |runtime error|fuzz check failed|SUMMARY|Test unit written to|Running: ' "$log" | head -12 >&2 || true
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}; the inputs are under $build/findings/<target>/ (see above)" >&2
  exit 1
fi
