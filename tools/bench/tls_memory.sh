#!/usr/bin/env bash
# What [http.tls] costs in memory (issue 16, item 12): the agent on its default sensors and
# routes, once over HTTP and once over HTTPS, each after the same 100 requests (50 x /api/current,
# 50 x the dashboard page, one curl each: a new connection and, over TLS, a full handshake),
# then RSS and PSS from /proc. The difference is libmicrohttpd.so.12, GnuTLS and the libraries it
# brings (nettle, p11-kit, libtasn1, ...), loaded only when [http.tls] is set.
#
# Usage: tools/bench/tls_memory.sh [BUILD_DIR]   (default build; needs openssl and curl)
# Prints a markdown table; the agents are stopped by their PID.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
agent=$build/bin/kiwi-agent
[[ -x $agent ]] || { echo "missing $agent: build first (tools/build.sh)" >&2; exit 2; }
work=$(mktemp -d /tmp/kiwi-tls-bench-XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=bench \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

kib() { awk -v k="$2" '$1 == k":" { print $2 }' "$1"; }
echo "| mode | RSS | PSS |"
echo "|---|---:|---:|"
for mode in http https; do
  dir=$work/$mode
  mkdir -p "$dir"
  {
    printf '[agent]\ndata_dir = "%s"\n[http]\nbind = "127.0.0.1:0"\n' "$dir/data"
    printf '[collector]\nsnapshot_path = ""\n'
    [[ $mode == https ]] &&
      printf '[http.tls]\ncert_file = "%s"\nkey_file = "%s"\n' "$work/cert.pem" "$work/key.pem"
  } >"$dir/kiwi.toml"
  "$agent" --config "$dir/kiwi.toml" 2>"$dir/log" &
  pid=$!
  port=
  for _ in $(seq 1 200); do
    port=$(sed -n "s|.*listening on $mode://127.0.0.1:\([0-9]*\)/.*|\1|p" "$dir/log")
    [[ -n $port ]] && break
    sleep 0.05
  done
  [[ -n $port ]] || { echo "the agent did not listen:" >&2; cat "$dir/log" >&2; exit 1; }
  for _ in $(seq 1 50); do
    for path in /api/current /; do
      curl -s --cacert "$work/cert.pem" -o /dev/null "$mode://127.0.0.1:$port$path"
    done
  done
  sleep 2
  rss=$(kib "/proc/$pid/status" VmRSS)
  pss=$(kib "/proc/$pid/smaps_rollup" Pss)
  awk -v m="$mode" -v r="$rss" -v p="$pss" 'BEGIN { printf "| %s | %.1f MiB | %.1f MiB |\n", m, r / 1024, p / 1024 }'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
done
