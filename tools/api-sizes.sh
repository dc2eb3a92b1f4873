#!/usr/bin/env bash
# Measures the response sizes docs/api.md quotes: runs the built agent on its default sensors at
# the default 1 s interval until it holds 120 samples (about two minutes), then prints the bytes of
# /api/history?limit=120 (default series and series=*), /api/current and /metrics, plain and gzip.
# Usage: tools/api-sizes.sh [build-dir]   (build first: tools/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KIWI_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
agent_pid=
trap '[[ -n $agent_pid ]] && kill "$agent_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))
cat > "$tmp/kiwi.toml" <<TOML
[agent]
data_dir = "$tmp/data"
[http]
bind = "127.0.0.1:$port"
[collector]
snapshot_path = ""
TOML
"$build/bin/kiwi-agent" --config "$tmp/kiwi.toml" 2>"$tmp/log" &
agent_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 200); do  # at most ~200 s
  count=$(curl -sf "$base/api/history?limit=120" | sed -n 's/.*"count":\([0-9]*\).*/\1/p' || true)
  [[ "${count:-0}" -ge 120 ]] && break
  sleep 1
done
[[ "${count:-0}" -ge 120 ]] || { echo "agent did not collect 120 samples" >&2; cat "$tmp/log" >&2; exit 1; }
size() { curl -sf "$@" | wc -c; }
echo "| response | bytes | gzip bytes |"
echo "|---|---:|---:|"
for route in "/api/history?limit=120" "/api/history?limit=120&series=*" "/api/current" "/metrics"; do
  echo "| \`$route\` | $(size "$base$route") | $(size -H 'Accept-Encoding: gzip' "$base$route") |"
done
echo
echo "series in the default history response: $(curl -sf "$base/api/history?limit=1" | grep -o '"name"' | wc -l);" \
  "with series=*: $(curl -sf "$base/api/history?limit=1&series=*" | grep -o '"name"' | wc -l)"
