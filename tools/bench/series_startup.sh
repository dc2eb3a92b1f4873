#!/usr/bin/env bash
# Start-up with many series from one sensor (issue 16, item 3): time from exec to the first 200 on
# /api/current that carries a sample (sequence >= 1), for a fresh data directory each run. The
# sensor is the test plugin `labelled` (tests/plugins/labelled_sensor.cpp), which emits 3 series
# per zone plus 2: `series = (N - 2) / 3` zones make N series. The series limit is raised above N
# (collector.max_series_per_sensor) so that every series is stored.
#
# Usage: tools/bench/series_startup.sh [BUILD_DIR] [N ...]
#   BUILD_DIR  a configured build tree with KIWI_BUILD_TESTS=ON (default build), already built
#   N          series counts (default 5000 10000 20000 40000 100000)
# Environment: KIWI_BENCH_TIMEOUT (seconds to wait per run, default 300).
# Prints a markdown table; each run is bounded by the timeout and the agent is stopped by its PID.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
shift || true
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(5000 10000 20000 40000 100000)
timeout=${KIWI_BENCH_TIMEOUT:-300}
agent=$build/bin/kiwi-agent
plugin=$build/tests/plugins/test-labelled_sensor.so
plugins=$build/lib/kiwi-agent
for f in "$agent" "$plugin"; do
  [[ -e $f ]] || { echo "missing $f: build with -DKIWI_BUILD_TESTS=ON first" >&2; exit 2; }
done

work=$(mktemp -d /tmp/kiwi-series-bench-XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }

echo "| series | time to first sample served, s | database after, KiB |"
echo "|---:|---:|---:|"
for n in "${counts[@]}"; do
  zones=$(((n - 2) / 3))
  dir=$work/$n
  mkdir -p "$dir/data"
  cat >"$dir/kiwi.toml" <<EOF
[agent]
data_dir = "$dir/data"
plugin_dir = "$plugins"
[http]
bind = "127.0.0.1:0"
[collector]
interval = "10s"
commit_interval = "5s"
snapshot_path = ""
max_series_per_sensor = $((n + 10))
[[sensor]]
name = "many"
plugin = "$plugin"
timeout = "9s"
options = { series = $zones }
EOF
  start=$(now_ms)
  "$agent" --config "$dir/kiwi.toml" 2>"$dir/stderr" &
  pid=$!
  port=
  result=timeout
  while (($(now_ms) - start < timeout * 1000)); do
    if [[ -z $port ]]; then
      port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$dir/stderr" | grep -o '[0-9]*$' || true)
    fi
    if [[ -n $port ]] &&
      curl -sf "http://127.0.0.1:$port/api/current" 2>/dev/null | grep -q '"sequence":[1-9]'; then
      result=$(awk -v ms=$(($(now_ms) - start)) 'BEGIN { printf "%.2f", ms / 1000 }')
      break
    fi
    kill -0 "$pid" 2>/dev/null || { result="exited"; break; }
    sleep 0.05
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  size=$(($(du -k "$dir/data/kiwi.db" 2>/dev/null | cut -f1 || echo 0)))
  echo "| $n | $result | $size |"
  rm -rf "$dir"
done
