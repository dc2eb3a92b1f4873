#!/usr/bin/env bash
# kiwi-agent benchmark: the lab's method (1, 8 and 32 persistent connections, each route several
# times with the route order rotated, medians with min-max), run side by side against a ceiling
# server (tools/bench/ceiling.c: libmicrohttpd with the agent's HTTP settings and a fixed body), plus
# start-up time, history body size, a soak (memory), an idle mode (CPU, disk writes) and a reload
# mode (SIGHUP: time to apply, the old and new ports, a failed reload).
#
# Usage: tools/bench/run.sh [MODE] [OPTIONS]
#   (no mode)        full matrix: 3 repetitions x 20 s, connections 1 8 32, plus start-up and
#                    body sizes (about 30 minutes)
#   --quick          1 repetition x 3 s, connections 1 and 32, --scale at 1/16 for 3 s and the
#                    Catch2 micro-benchmarks (kiwi-bench-micro) with 3 samples (under 2 minutes
#                    once built); writes
#                    build/bench/benchmarks-quick.md, not docs/benchmarks.md (unless --out)
#   --soak [MIN]     history route at 32 connections for MIN minutes (default 5), RSS and PSS
#                    sampled every second, then PRAGMA quick_check on the database
#   --idle [SECONDS] SECONDS (default and minimum 120) at 1 Hz, one /metrics scrape and one
#                    /api/current poll per second with curl: CPU over the first 60 s, disk
#                    write_bytes over the whole window, per hour, for a fresh database and for the
#                    steady state (a second agent with retention 1 min prunes on every commit);
#                    about 70 s more than SECONDS
#   --reload [N]     SIGHUP reloads on one agent (default sensors, fresh data dir), N rounds
#                    (default 10) of: [collector] interval 1s <-> 2s (kill -HUP to the log's
#                    "reloaded" line, the agent's own "in X ms", and to /api/current showing the new
#                    interval), http.bind between two free loopback ports (to the first 200 on the
#                    new port, to the old port refusing) and a TOML error (to the "reload failed"
#                    line, then /api/current must answer 200); checks that the PID never changes,
#                    that only the deliberate reloads failed and that the history has no step over
#                    2 s; exits 1 if one does not hold (about 15 s for N = 10)
#   --footprint [SECONDS]
#                    kiwi-agent beside node_exporter, Netdata and collectd, one after another, each
#                    on its defaults at 1 s and polled once a second: CPU, RSS, PSS and disk writes
#                    of each whole process tree over SECONDS (default 300) after 30 s of warm-up
#                    (tools/bench/footprint.py; needs root and tools/setup.sh --bench; about
#                    4 x (SECONDS + 35) s)
#   --scale [SECONDS]
#                    the agent on a generated big host (64 cores, 256 interfaces, 64 mounts, 32
#                    disks, 24 zones: tools/bench/bighost.py) and at 1/4 and 1/16 of it: CPU per
#                    tick and per series, writes, RSS, /metrics bytes and rate against the
#                    ceiling, /api/history time; SECONDS (default 120) each after 15 s of warm-up
#                    (tools/bench/scale.py; about 3 x (SECONDS + 35) s)
#   --all            full matrix, then --idle, then --soak, then --reload, then --footprint,
#                    then --scale
#   --report-only    rewrite the markdown from the latest results of each mode, running nothing
# Options:
#   --reps N  --duration SECONDS  --conns "1 8 32"
#   --threads N|auto HTTP worker threads of the agent ([http] threads) and the ceiling (default
#                    auto, the agent's default: one per CPU the server may run on, at most 4; the
#                    ceiling applies the same rule, so with both pinned to one CPU, both run 1)
#   --build-dir DIR  agent build tree (default build/bench/agent, configured Release; an existing
#                    configured tree is only rebuilt, never reconfigured)
#   --no-build       use the binaries already in the build tree
#   --out FILE       markdown output (default docs/benchmarks.md; quick: build/bench/benchmarks-quick.md)
# Environment: KIWI_BENCH_DIR (work directory, default build/bench; must be on a disk filesystem
#   for write_bytes to mean anything).
#
# Everything listens on 127.0.0.1 only, every loop is bounded, and the agent, the ceiling and wrk
# are stopped on exit. Exit status: 0 when every run completed without errors (non-2xx, bad body,
# socket errors) and, with --reload, every check of it held; target misses are reported in the
# table, not in the exit status.
set -euo pipefail
{ # the whole script is one block: bash reads it completely before running it

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tools/bench
invocation="tools/bench/run.sh${*:+ $*}"

mode=full reps=3 duration=20 conns="1 8 32" soak_minutes=5 idle_seconds=120 http_threads=auto
footprint_seconds=300 scale_seconds=120 scale_warmup=15 scale_divide="16 4 1"
reload_rounds=10
build_dir="" no_build=0 out=""
reps_set=0 duration_set=0 conns_set=0
while (($#)); do
  case $1 in
    --quick) mode=quick ;;
    --idle)
      mode=idle
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then idle_seconds=$2; shift; fi ;;
    --footprint)
      mode=footprint
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then footprint_seconds=$2; shift; fi ;;
    --scale)
      mode=scale
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then scale_seconds=$2; shift; fi ;;
    --all) mode=all ;;
    --report-only) mode=report ;;
    --soak)
      mode=soak
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then soak_minutes=$2; shift; fi ;;
    --reload)
      mode=reload
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then reload_rounds=$2; shift; fi ;;
    --reps) reps=$2 reps_set=1; shift ;;
    --duration) duration=$2 duration_set=1; shift ;;
    --conns) conns=$2 conns_set=1; shift ;;
    --threads) http_threads=$2; shift ;;
    --build-dir) build_dir=$2; shift ;;
    --no-build) no_build=1 ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ $mode == quick ]]; then
  ((reps_set)) || reps=1
  ((duration_set)) || duration=3
  ((conns_set)) || conns="1 32"
fi
((idle_seconds >= 120)) || { echo "run.sh: --idle needs at least 120 s (write_bytes over 2 minutes)" >&2; exit 2; }
[[ $http_threads == auto || $http_threads =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --threads takes a positive integer or auto" >&2; exit 2; }
for v in "$reps" "$duration" "$soak_minutes" "$reload_rounds" "$footprint_seconds" "$scale_seconds"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: '$v' is not a positive integer" >&2; exit 2; }
done

work=${KIWI_BENCH_DIR:-$root/build/bench}
build_dir=${build_dir:-$work/agent}
if [[ $mode == quick ]]; then
  results=$work/results-quick
  out=${out:-$work/benchmarks-quick.md}
else
  results=$work/results
  out=${out:-$root/docs/benchmarks.md}
fi
run=$work/run
mkdir -p "$work" "$results" "$run"

say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "error: $*"; exit 1; }
now_ns() { date +%s%N; }
# awk one-liners for float arithmetic: calc "expr" prints the value; cmp "a <= b" exits 0 if true
calc() { awk "BEGIN { printf \"%s\", ($1) }"; }
fmt() { awk -v v="$2" "BEGIN { printf \"$1\", v }"; }
holds() { awk "BEGIN { exit !($1) }"; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (!NR) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# ---------------------------------------------------------------------------------------------
# Processes we start are tracked and stopped on exit; nothing else is touched.
pids=()
snapdir=""
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n $snapdir ]]; then rm -rf "$snapdir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
forget() { local p keep=(); for p in "${pids[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done; pids=("${keep[@]}"); }
stop_pid() { # stop_pid PID: SIGTERM, wait at most 10 s, then SIGKILL
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { say "pid $pid did not stop in 10 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; }
  wait "$pid" 2>/dev/null || true
  forget "$pid"
}

# Pinning: server (agent or ceiling) on CPU 0, wrk on CPU 1, when there are two CPUs or more.
ncpu=$(nproc)
clk_tck=$(getconf CLK_TCK)
if ((ncpu >= 2)); then
  pin_server=(taskset -c 0) pin_client=(taskset -c 1)
  pinning="agent and ceiling on CPU 0 (\`taskset -c 0\`), wrk (1 thread) and this script's helpers on CPU 1 (\`taskset -c 1\`)"
else
  pin_server=() pin_client=()
  pinning="not pinned (1 CPU): agent, ceiling and wrk share CPU 0"
fi

# ---------------------------------------------------------------------------------------------
# Set-up: Debian packages (idempotent), the agent (Release) and the ceiling server.
install_packages() {
  local wanted=(wrk curl sqlite3 gzip util-linux) missing=() p
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  say "installing ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "run as root or install sudo (needed: ${missing[*]})"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  if ((no_build)); then
    say "not building (--no-build); using $build_dir"
  else
    "$root/tools/setup.sh"
    install_packages
    if [[ -f $build_dir/CMakeCache.txt ]]; then
      say "building the agent in $build_dir (existing tree, not reconfigured)"
    else
      say "configuring the agent (Release) in $build_dir"
      cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DKIWI_BUILD_TESTS=OFF >/dev/null
    fi
    cmake --build "$build_dir" -j "$ncpu" >"$run/build.log" 2>&1 || { tail -30 "$run/build.log" >&2; die "agent build failed (log: $run/build.log)"; }
  fi
  agent_bin=$build_dir/bin/kiwi-agent
  plugin_dir=$build_dir/lib/kiwi-agent
  [[ -x $agent_bin ]] || die "no agent binary at $agent_bin"
  build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
  [[ $build_type == Release ]] || say "warning: $build_dir is a '${build_type:-unknown}' build, not Release"

  ceiling_bin=$work/bin/kiwi-bench-ceiling
  # The ceiling links the libmicrohttpd the agent links (CMake's KIWI_MHD_LINKED: the static build
  # without TLS from tools/setup-mhd.sh, or empty for Debian's shared library). Always current,
  # even with --no-build (that is about the agent's tree): one small C file.
  local mhd_static mhd_flags stamp
  mhd_static=$(sed -n 's/^KIWI_MHD_LINKED:INTERNAL=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
  if [[ -n $mhd_static ]]; then
    mhd_flags="-I${mhd_static%/lib/*}/include $mhd_static"
  else
    mhd_flags=$(pkg-config --cflags --libs libmicrohttpd)
  fi
  stamp="$work/bin/kiwi-bench-ceiling.flags"
  if [[ ! -x $ceiling_bin || $here/ceiling.c -nt $ceiling_bin || $(cat "$stamp" 2>/dev/null) != "$mhd_flags" ]]; then
    mkdir -p "$work/bin"
    say "building the ceiling server ($mhd_flags)"
    # shellcheck disable=SC2086
    cc -O2 -Wall -Wextra -o "$ceiling_bin" "$here/ceiling.c" $mhd_flags -lpthread
    echo "$mhd_flags" >"$stamp"
  fi
  for tool in wrk curl taskset sqlite3 gzip; do command -v "$tool" >/dev/null || die "$tool is missing (tools/setup.sh --test installs it)"; done
}

# ---------------------------------------------------------------------------------------------
# The agent: a config on loopback (port 0: the kernel picks a free port, the log says which),
# history on disk under $run, the JSON snapshot on tmpfs as in the default /run/kiwi-agent.
pick_snapdir() {
  local base
  for base in /run /dev/shm; do
    if [[ $(stat -f -c %T "$base" 2>/dev/null) == tmpfs && -w $base ]]; then
      snapdir=$(mktemp -d "$base/kiwi-bench.XXXXXX")
      return
    fi
  done
  snapdir=$(mktemp -d "$run/snapshot.XXXXXX")
  say "warning: no writable tmpfs for the snapshot file; it goes to $snapdir and counts in write_bytes"
}

write_config() { # write_config NAME INTERVAL [RETENTION [BIND]] -> $run/NAME.toml, data in $run/NAME-data
  local name=$1 interval=$2 retention=${3:-24h} bind=${4:-127.0.0.1:0}
  cat >"$run/$name.toml" <<EOF
[agent]
data_dir = "$run/$name-data"
plugin_dir = "$plugin_dir"
[http]
bind = "$bind"
threads = $( [[ $http_threads == auto ]] && echo '"auto"' || echo "$http_threads")
[collector]
interval = "$interval"
retention = "$retention"
snapshot_path = "$snapdir/$name.json"
EOF
}

# start_agent NAME [INTERVAL [keep|"" [BIND]]]: starts the agent pinned, waits (10 s at most) for
# its "listening on" line; sets agent_pid and agent_url. A fresh data dir unless "keep".
start_agent() {
  local name=$1 interval=${2:-1s} reuse=${3:-} bind=${4:-127.0.0.1:0} i
  [[ $reuse == keep ]] || rm -rf "$run/$name-data"
  write_config "$name" "$interval" 24h "$bind"
  "${pin_server[@]}" "$agent_bin" --config "$run/$name.toml" 2>"$run/$name.log" &
  agent_pid=$!
  pids+=("$agent_pid")
  agent_url=""
  for ((i = 0; i < 1000; i++)); do
    agent_url=$(sed -n 's|.*listening on \(http://127\.0\.0\.1:[0-9]*\)/.*|\1|p' "$run/$name.log")
    [[ -n $agent_url ]] && return 0
    kill -0 "$agent_pid" 2>/dev/null || break
    sleep 0.01
  done
  tail -5 "$run/$name.log" >&2
  die "the agent did not start (log: $run/$name.log)"
}

wait_for_200() { # wait_for_200 URL SECONDS
  local url=$1 deadline=$(($(now_ns) + $2 * 1000000000))
  while (($(now_ns) < deadline)); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true) == 200 ]] && return 0
    sleep 0.05
  done
  return 1
}

history_count() { curl -s --max-time 5 "$agent_url/api/history?limit=120" | grep -o '"count":[0-9]*' | head -1 | cut -d: -f2 || true; }

# Fills the history to 120 samples. "1hz": waits for 120 ticks of the default interval (2 min).
# "fast": runs the agent at 100 ms until 120 samples exist (about 13 s), then restarts it at 1 s on
# the same database. Leaves the agent NAME running at the default interval.
fill_history() { # fill_history NAME 1hz|fast
  local name=$1 how=$2 i n
  if [[ $how == fast ]]; then
    start_agent "$name" 100ms
    wait_for_200 "$agent_url/api/current" 10 || die "no 200 from /api/current"
    for ((i = 0; i < 300; i++)); do
      n=$(history_count)
      ((${n:-0} >= 120)) && break
      sleep 0.1
    done
    stop_pid "$agent_pid"
    start_agent "$name" 1s keep
    history_fill="filled at a 100 ms interval (quick fill: CPU ratios are coarser than at 1 s), then the agent restarted at the default 1 s"
  else
    start_agent "$name" 1s
    say "filling the history at 1 Hz (120 samples, about 2 minutes)"
    for ((i = 0; i < 300; i++)); do
      n=$(history_count)
      ((${n:-0} >= 120)) && break
      sleep 1
    done
    history_fill="filled at the default 1 s interval"
  fi
  wait_for_200 "$agent_url/api/current" 10 || die "no 200 from /api/current"
  n=$(history_count)
  ((${n:-0} >= 120)) || say "warning: history has only ${n:-0} samples"
}

# Body sizes of the history route (limit=120): uncompressed, gzip -6 of it, and as served to a
# client that accepts gzip (equal to uncompressed when the agent does not compress).
measure_history_body() { # -> writes $results/bodies.env
  local f=$run/history.json
  curl -s --max-time 5 -o "$f" "$agent_url/api/history?limit=120"
  local raw gz served count
  raw=$(wc -c <"$f")
  gz=$(gzip -6 -c "$f" | wc -c)
  served=$(curl -s --max-time 5 --compressed -o /dev/null -w '%{size_download}' "$agent_url/api/history?limit=120")
  count=$(grep -o '"count":[0-9]*' "$f" | head -1 | cut -d: -f2)
  cat >"$results/bodies.env" <<EOF
hist_bytes=$raw
hist_gzip_bytes=$gz
hist_served_gzip_bytes=$served
hist_count=${count:-0}
hist_fill="$history_fill"
hist_when="$(date -u '+%Y-%m-%d %H:%M UTC')"
hist_command="$invocation"
EOF
}

# ---------------------------------------------------------------------------------------------
# The ceiling: started per body size (reused while the size stays the same).
ceiling_pid="" ceiling_size="" ceiling_url=""
ceiling_for() { # ceiling_for SIZE
  local size=$1 i
  [[ -n $ceiling_pid && $ceiling_size == "$size" ]] && return 0
  [[ -n $ceiling_pid ]] && stop_pid "$ceiling_pid"
  "${pin_server[@]}" "$ceiling_bin" --threads "$http_threads" --body-size "$size" 2>"$run/ceiling.log" &
  ceiling_pid=$! ceiling_size=$size ceiling_url=""
  pids+=("$ceiling_pid")
  for ((i = 0; i < 500; i++)); do
    ceiling_url=$(sed -n 's|.*listening on \(http://127\.0\.0\.1:[0-9]*\)/.*|\1|p' "$run/ceiling.log")
    [[ -n $ceiling_url ]] && return 0
    sleep 0.01
  done
  die "the ceiling server did not start (log: $run/ceiling.log)"
}

# One wrk run; appends "rep target route conns body rps p50 p95 p99 non2xx checked bad sockerr
# cpu_us_per_response other_cpu0_ms_per_s" to $matrix_tsv. The result line comes from report.lua's
# done(); the server's CPU time comes from its threads' schedstat. CPU per response barely moves
# when other processes take the CPU, so it is the robust figure on a busy machine; "other" (CPU 0
# busy time from /proc/stat minus the server's own, per second of the run) says how much else ran
# on the server's CPU.
cpu0_busy_us() { awk -v hz="$clk_tck" '/^cpu0 / { printf "%.0f", ($2 + $3 + $4 + $7 + $8 + $9) * 1e6 / hz }' /proc/stat; }
run_wrk() { # run_wrk REP TARGET ROUTE CONNS BODY URL CHECK SERVER_PID
  local rep=$1 target=$2 route=$3 c=$4 body=$5 url=$6 check=$7 spid=$8 line
  local log=$run/wrk-$rep-$target-$route-$c.log cpu0 cpu1 t0 t1 busy0 busy1
  read -r cpu0 _ <<<"$(schedstat_us "$spid")"
  busy0=$(cpu0_busy_us)
  t0=$(now_ns)
  "${pin_client[@]}" wrk -t1 -c"$c" -d"${duration}s" --timeout 5s -s "$here/report.lua" "$url" -- "$check" 100 >"$log" 2>&1 || true
  t1=$(now_ns)
  busy1=$(cpu0_busy_us)
  read -r cpu1 _ <<<"$(schedstat_us "$spid")"
  line=$(grep '^BENCH ' "$log" | tail -1)
  [[ -n $line ]] || { tail -5 "$log" >&2; die "wrk gave no result (log: $log)"; }
  # shellcheck disable=SC2086
  local rps requests p50_us p95_us p99_us max_us non2xx checked bad_body socket_errors
  eval "$(echo "${line#BENCH }" | tr ' ' '\n' | sed 's/^/local /')"
  local cpu_per other_ms
  cpu_per=$(calc "$requests > 0 ? ($cpu1 - $cpu0) / $requests : 0")
  other_ms=$(calc "(($busy1 - $busy0) - ($cpu1 - $cpu0)) * 1e6 / ($t1 - $t0)")
  # /proc/stat counts in ticks, schedstat in ns: near zero the difference can dip below 0.
  if ((${#pin_server[@]} == 0)) || holds "$other_ms < 0"; then other_ms=0; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$target" "$route" "$c" "$body" \
    "$rps" "$p50_us" "$p95_us" "$p99_us" "$non2xx" "$checked" "$bad_body" "$socket_errors" "$cpu_per" "$other_ms" >>"$matrix_tsv"
  say "$(printf '%-7s %-8s c=%-2s body=%-6s %9.0f resp/s  p95 %6.2f ms  %5.1f us CPU/resp  other on CPU 0 %3.0f ms/s  non-2xx %s  bad bodies %s/%s  socket errors %s' \
    "$target" "$route" "$c" "$body" "$rps" "$(calc "$p95_us / 1000")" "$cpu_per" "$other_ms" "$non2xx" "$bad_body" "$checked" "$socket_errors")"
}

route_path() {
  case $1 in
    root) echo "/" ;; current) echo "/api/current" ;;
    history) echo "/api/history?limit=120" ;; metrics) echo "/metrics" ;;
  esac
}
route_check() { case $1 in root) echo html ;; metrics) echo prom ;; *) echo json ;; esac; }

versions() {
  local v
  agent_version=$({ "$agent_bin" --version 2>&1 || true; } | awk 'NR == 1')
  # "libmicrohttpd 0.9.75 (without TLS; ...)", as the agent reports it, and where it comes from.
  mhd_version="$({ "$agent_bin" --version 2>&1 || true; } | awk 'NR == 2 {sub(/^libmicrohttpd /, ""); print}'), Debian source $(dpkg-query -W -f='${Version}' libmicrohttpd-dev 2>/dev/null || echo '?')"
  mhd_version+="; $(sed -n 's/^KIWI_MHD_LINKED:INTERNAL=\(..*\)/static build from tools\/setup-mhd.sh, also in the ceiling/p' "$build_dir/CMakeCache.txt" 2>/dev/null | grep . || echo "Debian's shared library, also in the ceiling")"
  wrk_version=$({ wrk -v 2>&1 || true; } | awk 'NR == 1 {print $2}')
  sqlite_version=$(sqlite3 --version | awk '{print $1}')
  v=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  # The page this script writes does not count as a change to what is measured.
  [[ -n $(git -C "$root" status --porcelain --untracked-files=no -- . ':!docs/benchmarks.md' 2>/dev/null) ]] && v+=" + uncommitted changes"
  commit=$v
  # With --no-build the tree may have moved on since the binary was built: say when it was.
  commit+=", binary built $(date -u -r "$agent_bin" '+%Y-%m-%d %H:%M UTC')"
}

section_header() { # section_header TITLE LOAD_BEFORE -> common lines for a section file
  printf '## %s\n\n' "$1"
  printf -- '- command: `%s` (%s)\n' "$invocation" "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf -- '- agent: %s, commit %s; load average (1, 5, 15 min) before: %s, after: %s\n' "$agent_version" "$commit" "$2" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

# ---------------------------------------------------------------------------------------------
# Start-up: exec to the first 200 on / (server up) and on /api/current (first sample served), 5
# times on a fresh data directory. The poll is bash's /dev/tcp, not curl: no process is started
# per try, so a try costs well under a millisecond instead of the several ms of a curl exec.
probe() { # probe PORT PATH -> sets http_code ("" when nothing answers)
  local fd line
  http_code=""
  { exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 0
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$2" >&"$fd"
  IFS= read -r -t 2 line <&"$fd" || true
  exec {fd}>&-
  line=${line#HTTP/1.? }
  http_code=${line%% *}
}
free_port() { # a loopback port nothing listens on (the agent is retried if it loses the race)
  local i p
  for ((i = 0; i < 50; i++)); do
    p=$((20000 + RANDOM % 30000))
    probe "$p" /
    [[ -z $http_code ]] && { echo "$p"; return; }
  done
  die "no free port found"
}
schedstat_us() { # schedstat_us PID -> "cpu_us wait_us" summed over the agent's threads
  local t a b c run=0 wait=0
  for t in /proc/"$1"/task/*/schedstat; do
    read -r a b c <"$t" || continue
    run=$((run + a)) wait=$((wait + b))
  done
  echo "$((run / 1000)) $((wait / 1000))"
}

measure_startup() {
  local i try t0 port t_root t_current deadline roots=() currents=() cpus=() waits=() cpu wait load_before
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  say "start-up: 5 runs, exec to first 200"
  for ((i = 1; i <= 5; i++)); do
    for ((try = 1; try <= 3; try++)); do
      rm -rf "$run/startup-data"
      write_config startup 1s
      port=$(free_port)
      sed -i "s/^bind = .*/bind = \"127.0.0.1:$port\"/" "$run/startup.toml"
      t0=$(now_ns)
      "${pin_server[@]}" "$agent_bin" --config "$run/startup.toml" 2>"$run/startup.log" &
      agent_pid=$!
      pids+=("$agent_pid")
      deadline=$((t0 + 5000000000)) t_root="" t_current=""
      while [[ -z $t_root ]] && (($(now_ns) < deadline)); do
        probe "$port" /
        [[ $http_code == 200 ]] && t_root=$(($(now_ns) - t0))
        kill -0 "$agent_pid" 2>/dev/null || break
      done
      while [[ -n $t_root && -z $t_current ]] && (($(now_ns) < deadline)); do
        probe "$port" /api/current
        [[ $http_code == 200 ]] && t_current=$(($(now_ns) - t0))
      done
      read -r cpu wait <<<"$(schedstat_us "$agent_pid")"
      stop_pid "$agent_pid"
      [[ -n $t_current ]] && break
      say "start-up run $i: no 200 (try $try; log: $run/startup.log)"
    done
    [[ -n $t_current ]] || die "start-up run $i: no 200 within 5 s (log: $run/startup.log)"
    roots+=("$(calc "$t_root / 1e6")") currents+=("$(calc "$t_current / 1e6")")
    cpus+=("$(calc "$cpu / 1e3")") waits+=("$(calc "$wait / 1e3")")
  done
  local m_root m_current m_cpu m_wait
  m_root=$(printf '%s\n' "${roots[@]}" | median)
  m_current=$(printf '%s\n' "${currents[@]}" | median)
  m_cpu=$(printf '%s\n' "${cpus[@]}" | median)
  m_wait=$(printf '%s\n' "${waits[@]}" | median)
  cat >"$results/startup.env" <<EOF
startup_root_ms=$(fmt '%.1f' "$m_root")
startup_current_ms=$(fmt '%.1f' "$m_current")
EOF
  {
    section_header "Start-up" "$load_before"
    printf -- '- exec to first 200, 5 runs, a fresh data directory each run (the database is created); agent pinned to CPU 0, the poller (bash /dev/tcp, no process per try) on CPU 1\n'
    printf -- '- agent CPU time and run-queue wait (all threads, /proc/PID/task/*/schedstat) until the first 200 on `/api/current`: the wait is time the agent was runnable but another process had the CPU\n\n'
    printf '| measure | median | runs |\n|---|---:|---|\n'
    printf '| first 200 on `/`, ms | %.1f | %s|\n' "$m_root" "$(printf '%.1f ' "${roots[@]}")"
    printf '| first 200 on `/api/current` (first sample served), ms | %.1f | %s|\n' "$m_current" "$(printf '%.1f ' "${currents[@]}")"
    printf '| agent CPU time, ms | %.1f | %s|\n' "$m_cpu" "$(printf '%.1f ' "${cpus[@]}")"
    printf '| agent run-queue wait, ms | %.1f | %s|\n\n' "$m_wait" "$(printf '%.1f ' "${waits[@]}")"
  } >"$results/startup.md"
  say "start-up median: / $m_root ms, /api/current $m_current ms (agent CPU $m_cpu ms, waited $m_wait ms)"
}

# ---------------------------------------------------------------------------------------------
# The matrix.
run_matrix() {
  local routes=(root current history metrics) avail=() r code c rep i n body
  matrix_tsv=$results/matrix.tsv
  : >"$matrix_tsv"
  local load_before
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  measure_startup
  if [[ $mode == quick ]]; then fill_history bench fast; else fill_history bench 1hz; fi
  local agent_affinity
  agent_affinity=$(taskset -pc "$agent_pid" 2>/dev/null | sed 's/.*: //')
  agent_threads=$(grep -o "[0-9]* worker threads\{0,1\}[^,]*" "$run/bench.log" 2>/dev/null | tail -1 || true)
  measure_history_body
  metrics_note=""
  for r in "${routes[@]}"; do
    code=$(curl -s -o "$run/body-$r" -w '%{http_code}' --max-time 5 "$agent_url$(route_path "$r")" || true)
    if [[ $code == 200 ]]; then
      avail+=("$r")
    else
      metrics_note+="| \`$(route_path "$r")\` | not available: HTTP $code from the agent, route skipped |"$'\n'
      say "skipping $(route_path "$r"): HTTP $code"
    fi
  done
  n=${#avail[@]}
  local cells=$((reps * (n * $(wc -w <<<"$conns") * 2 + $(wc -w <<<"$conns"))))
  say "matrix: ${avail[*]} x connections ($conns) x $reps repetitions x ${duration} s, agent and ceiling: $cells runs, about $((cells * (duration + 1) / 60 + 1)) min"
  for ((rep = 1; rep <= reps; rep++)); do
    for ((i = 0; i < n; i++)); do
      r=${avail[$(((i + rep - 1) % n))]}
      for c in $conns; do
        body=$(curl -s -o /dev/null -w '%{size_download}' --max-time 5 "$agent_url$(route_path "$r")" || echo 0)
        run_wrk "$rep" agent "$r" "$c" "$body" "$agent_url$(route_path "$r")" "$(route_check "$r")" "$agent_pid"
        ceiling_for "$body"
        run_wrk "$rep" ceiling "$r" "$c" "$body" "$ceiling_url$(route_path "$r")" json "$ceiling_pid"
      done
    done
    ceiling_for 0
    for c in $conns; do run_wrk "$rep" empty - "$c" 0 "$ceiling_url/" none "$ceiling_pid"; done
  done
  [[ -n $ceiling_pid ]] && stop_pid "$ceiling_pid"
  ceiling_pid=""
  local rss_kb
  rss_kb=$(awk '/^Rss:/{print $2}' "/proc/$agent_pid/smaps_rollup" 2>/dev/null || echo "")
  stop_pid "$agent_pid"

  # Aggregate: medians of the repetitions, min-max, median of the per-run p50/p95/p99.
  awk -F'\t' -v OFS='\t' '
    function med(s,   a, n, i, j, t) {
      n = split(s, a, " ")
      for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function mn(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
    function mx(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
    {
      k = $2 SUBSEP $3 SUBSEP $4
      if (!(k in rps)) keys[++nk] = k
      rps[k] = rps[k] " " $6; body[k] = body[k] " " $5
      p50[k] = p50[k] " " $7; p95[k] = p95[k] " " $8; p99[k] = p99[k] " " $9
      err[k] += $10 + $12 + $13; chk[k] += $11; bad[k] += $12; n2[k] += $10; se[k] += $13
      cpu[k] = cpu[k] " " ($14 == "" ? 0 : $14); wt[k] = wt[k] " " ($15 == "" ? 0 : $15)
    }
    END {
      for (i = 1; i <= nk; i++) {
        k = keys[i]; split(k, p, SUBSEP)
        print p[1], p[2], p[3], med(body[k]), med(rps[k]), mn(rps[k]), mx(rps[k]), med(p50[k]), med(p95[k]), med(p99[k]), n2[k], bad[k], chk[k], se[k], med(cpu[k]), med(wt[k])
      }
    }' "$matrix_tsv" >"$results/matrix-summary.tsv"

  # Table and key figures. Columns of matrix-summary.tsv: target route conns body rps_med rps_min
  # rps_max p50 p95 p99 non2xx bad checked socket_errors cpu_us_per_response other_cpu0_ms_per_s.
  local env=$results/matrix.env errors=0 cpu_rows=()
  : >"$env"
  {
    section_header "Throughput and latency: agent vs ceiling" "$load_before"
    printf -- '- mode: %s; %s repetitions x %s s per cell, connections %s; route order rotated between repetitions\n' "$mode" "$reps" "$duration" "$conns"
    printf -- '- pinning: %s (agent affinity: CPU %s); HTTP worker threads: %s in the agent and in the ceiling (agent log: %s)\n' "$pinning" "${agent_affinity:-?}" "$http_threads" "${agent_threads:-?}"
    printf -- '- history: %s\n' "$history_fill"
    printf -- '- agent RSS after the matrix: %s KiB\n' "${rss_kb:-?}"
    printf -- '- resp/s: median of the repetitions (min-max); p50/p95/p99: median of the per-run percentiles, ms; ratio = agent / ceiling with the same body size, taken side by side (each agent run is followed by its ceiling run); errors = non-2xx + bad sampled bodies + socket errors\n\n'
    printf '| route | conns | body B | agent resp/s (min-max) | ceiling resp/s (min-max) | resp/s ratio | agent p50 / p95 / p99 ms | ceiling p50 / p95 / p99 ms | p95 ratio | agent errors (bodies checked) |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
    local t rt c b rm rmin rmax p50 p95 p99 n2 bad chk se cpu wt
    while IFS=$'\t' read -r t rt c b rm rmin rmax p50 p95 p99 n2 bad chk se cpu wt; do
      [[ $t == agent ]] || continue
      local cl
      cl=$(awk -F'\t' -v r="$rt" -v c="$c" '$1 == "ceiling" && $2 == r && $3 == c' "$results/matrix-summary.tsv")
      local _ct _cr _cc _cb crm crmin crmax cp50 cp95 cp99 _n2 _bad _chk _se ccpu cwt
      IFS=$'\t' read -r _ct _cr _cc _cb crm crmin crmax cp50 cp95 cp99 _n2 _bad _chk _se ccpu cwt <<<"$cl"
      local ratio p95r cpur
      ratio=$(fmt '%.2f' "$(calc "$rm / $crm")") p95r=$(fmt '%.2f' "$(calc "$p95 / ($cp95 > 0 ? $cp95 : 1)")")
      cpur=$(fmt '%.2f' "$(calc "$cpu > 0 ? $ccpu / $cpu : 0")")
      cpu_rows+=("$(printf '| `%s` | %s | %.1f | %.1f | **%s** | %.0f / %.0f |' "$(route_path "$rt")" "$c" "$cpu" "$ccpu" "$cpur" "$wt" "$cwt")")
      printf '| `%s` | %s | %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | **%s** | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %s | %s (%s) |\n' \
        "$(route_path "$rt")" "$c" "$b" "$rm" "$rmin" "$rmax" "$crm" "$crmin" "$crmax" "$ratio" \
        "$(calc "$p50/1000")" "$(calc "$p95/1000")" "$(calc "$p99/1000")" "$(calc "$cp50/1000")" "$(calc "$cp95/1000")" "$(calc "$cp99/1000")" \
        "$p95r" "$((n2 + bad + se))" "$chk"
      echo "ratio_${rt}_$c=$ratio" >>"$env"
      echo "p95ratio_${rt}_$c=$p95r" >>"$env"
      echo "rps_${rt}_$c=$rm" >>"$env"
      echo "cpuratio_${rt}_$c=$cpur" >>"$env"
      errors=$((errors + n2 + bad + se))
    done <"$results/matrix-summary.tsv"
    printf '%s' "$metrics_note"
    while IFS=$'\t' read -r t rt c b rm rmin rmax p50 p95 p99 n2 bad chk se cpu wt; do
      [[ $t == empty ]] || continue
      printf '| empty ceiling | %s | 0 | | %.0f (%.0f-%.0f) | | | %.2f / %.2f / %.2f | | |\n' "$c" "$rm" "$rmin" "$rmax" "$(calc "$p50/1000")" "$(calc "$p95/1000")" "$(calc "$p99/1000")"
      cpu_rows+=("$(printf '| empty ceiling | %s | | %.1f | | / %.0f |' "$c" "$cpu" "$wt")")
    done <"$results/matrix-summary.tsv"
    printf '\nServer CPU per response (median of the runs, µs, all server threads from /proc/PID/task/*/schedstat) and the other use of CPU 0 during the run (its busy time in /proc/stat minus the server'"'"'s, ms per second: other processes, interrupts, hypervisor steal; high values mean a busy machine and less trustworthy resp/s). The CPU ratio (ceiling / agent) is the resp/s ratio the agent would reach with its core to itself, when the server CPU is the bottleneck.\n\n'
    printf '| route | conns | agent µs CPU/resp | ceiling µs CPU/resp | CPU ratio | other use of CPU 0, agent / ceiling run, ms/s |\n|---|---:|---:|---:|---:|---:|\n'
    printf '%s\n' "${cpu_rows[@]}"
    printf '\nRaw runs: `%s` (rep, target, route, conns, body, resp/s, p50/p95/p99 us, non-2xx, checked, bad, socket errors, µs server CPU per response, other use of CPU 0 in ms/s).\n\n' "${matrix_tsv#"$root"/}"
  } >"$results/matrix.md"
  {
    echo "matrix_errors=$errors"
    echo "matrix_mode=$mode"
    echo "metrics_available=$([[ " ${avail[*]} " == *" metrics "* ]] && echo 1 || echo 0)"
  } >>"$env"
  total_errors=$((total_errors + errors))
}

# ---------------------------------------------------------------------------------------------
# Soak: history at 32 connections, RSS and PSS every second, then quick_check.
run_soak() {
  local secs=$((soak_minutes * 60)) load_before i wrk_pid t0 now line
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  fill_history soak fast
  local mem=$results/soak-memory.tsv
  printf 't_s\trss_kib\tpss_kib\n' >"$mem"
  say "soak: /api/history?limit=120, 32 connections, $soak_minutes min; RSS/PSS every second"
  local log=$run/wrk-soak.log
  "${pin_client[@]}" wrk -t1 -c32 -d"${secs}s" --timeout 5s -s "$here/report.lua" "$agent_url/api/history?limit=120" -- json 100 >"$log" 2>&1 &
  wrk_pid=$!
  pids+=("$wrk_pid")
  t0=$(now_ns)
  sample_mem() { awk -v t="$1" '/^Rss:/{r=$2} /^Pss:/{p=$2} END{printf "%s\t%s\t%s\n", t, r, p}' "/proc/$agent_pid/smaps_rollup"; }
  for ((i = 1; i <= secs + 5; i++)); do
    now=$(now_ns)
    if (((t0 + i * 1000000000) > now)); then sleep "$(calc "($t0 + $i * 1e9 - $now) / 1e9")"; fi
    kill -0 "$wrk_pid" 2>/dev/null || break
    sample_mem "$i" >>"$mem"
  done
  wait "$wrk_pid" || true
  forget "$wrk_pid"
  sample_mem after >>"$mem"
  # Once idle again: the agent returns freed heap (the closed connections' buffers) to the kernel
  # after each commit, so one commit interval (10 s) later shows what it keeps.
  sleep 11
  sample_mem settled >>"$mem"
  line=$(grep '^BENCH ' "$log" | tail -1)
  [[ -n $line ]] || die "wrk gave no result in the soak (log: $log)"
  local rps requests p50_us p95_us p99_us max_us non2xx checked bad_body socket_errors
  eval "$(echo "${line#BENCH }" | tr ' ' '\n' | sed 's/^/local /')"
  stop_pid "$agent_pid"
  local qc
  qc=$(sqlite3 "$run/soak-data/kiwi.db" 'PRAGMA quick_check;' 2>&1 | tr '\n' ' ' | sed 's/ $//')
  # Growth: median of the last 30 samples minus the median of the 30 after the warm-up (the first
  # quarter of the soak, at most 60 s: malloc arenas and caches fill while the load starts).
  local nsamp first last rss_after pss_after rss_settled pss_settled rss_max pss_max rss_min warm
  nsamp=$(awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/' "$mem" | wc -l)
  warm=$((secs / 4 < 60 ? secs / 4 : 60))
  first=$(awk -F'\t' -v w="$warm" 'NR > 1 && $1 ~ /^[0-9]+$/ && $1 > w && $1 <= w + 30 {print $2}' "$mem" | median)
  last=$(awk -F'\t' -v n="$nsamp" 'NR > 1 && $1 ~ /^[0-9]+$/ && $1 > n - 30 {print $2}' "$mem" | median)
  rss_after=$(awk -F'\t' '$1 == "after" {print $2}' "$mem")
  pss_after=$(awk -F'\t' '$1 == "after" {print $3}' "$mem")
  rss_settled=$(awk -F'\t' '$1 == "settled" {print $2}' "$mem")
  pss_settled=$(awk -F'\t' '$1 == "settled" {print $3}' "$mem")
  rss_max=$(awk -F'\t' 'NR > 1 {print $2}' "$mem" | sort -g | tail -1)
  rss_min=$(awk -F'\t' 'NR > 1 {print $2}' "$mem" | sort -g | head -1)
  pss_max=$(awk -F'\t' 'NR > 1 {print $3}' "$mem" | sort -g | tail -1)
  local growth
  growth=$(calc "$last - $first")
  cat >"$results/soak.env" <<EOF
soak_minutes=$soak_minutes
soak_rss_after_kib=$rss_after
soak_pss_after_kib=$pss_after
soak_rss_settled_kib=$rss_settled
soak_pss_settled_kib=$pss_settled
soak_rss_max_kib=$rss_max
soak_growth_kib=$growth
soak_quick_check="$qc"
soak_errors=$((non2xx + bad_body + socket_errors))
EOF
  {
    section_header "Soak: history at 32 connections" "$load_before"
    printf -- '- %s min of `/api/history?limit=120` at 32 connections (%s); history: %s\n' "$soak_minutes" "$pinning" "$history_fill"
    printf -- '- wrk: %.0f resp/s, p50 / p95 / p99 %.2f / %.2f / %.2f ms, %s requests, non-2xx %s, bad bodies %s of %s checked, socket errors %s\n' \
      "$rps" "$(calc "$p50_us/1000")" "$(calc "$p95_us/1000")" "$(calc "$p99_us/1000")" "$requests" "$non2xx" "$bad_body" "$checked" "$socket_errors"
    printf -- '- `PRAGMA quick_check` after the agent stopped: **%s**\n\n' "$qc"
    printf '| agent memory | KiB | MiB |\n|---|---:|---:|\n'
    printf '| RSS at the end of the load | %s | %.2f |\n' "$rss_after" "$(calc "$rss_after/1024")"
    printf '| RSS 11 s later, idle (one commit interval: freed heap returned) | %s | %.2f |\n' "$rss_settled" "$(calc "$rss_settled/1024")"
    printf '| PSS 11 s later, idle | %s | %.2f |\n' "$pss_settled" "$(calc "$pss_settled/1024")"
    printf '| PSS after the soak | %s | %.2f |\n' "$pss_after" "$(calc "$pss_after/1024")"
    printf '| RSS min / max during the soak | %s / %s | %.2f / %.2f |\n' "$rss_min" "$rss_max" "$(calc "$rss_min/1024")" "$(calc "$rss_max/1024")"
    printf '| PSS max during the soak | %s | %.2f |\n' "$pss_max" "$(calc "$pss_max/1024")"
    printf '| RSS growth: median of the last 30 s minus median of s %s-%s (after warm-up) | %s | %.2f |\n\n' "$((warm + 1))" "$((warm + 30))" "$growth" "$(calc "$growth/1024")"
    printf 'RSS / PSS (KiB) each minute: '
    awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/ && ($1 % 60 == 0 || $1 == 1) {printf "%ss %s/%s; ", $1, $2, $3}' "$mem"
    printf '\nPer-second samples: `%s`.\n\n' "${mem#"$root"/}"
  } >"$results/soak.md"
  total_errors=$((total_errors + non2xx + bad_body + socket_errors))
  say "soak: RSS after $rss_after KiB, PSS after $pss_after KiB, growth $growth KiB, quick_check $qc"
}

# ---------------------------------------------------------------------------------------------
# Idle: 1 Hz polling; CPU from /proc/PID/stat over the first 60 s; write_bytes over 120 s.
proc_cpu_ticks() { local s rest f; s=$(<"/proc/$1/stat"); rest=${s##*) }; read -r -a f <<<"$rest"; echo $((f[11] + f[12])); }
proc_write_bytes() { awk '/^write_bytes:/{print $2}' "/proc/$1/io"; }
thread_cpu() { # thread_cpu PID -> "TID COMM NS" per thread (schedstat: ns on CPU)
  local t comm ns rest
  for t in /proc/"$1"/task/*; do
    comm=$(<"$t/comm") || continue
    read -r ns rest <"$t/schedstat" || continue
    echo "${t##*/} ${comm// /_} $ns"
  done
}

# Two agents: the measured one (default config, fresh database: the history grows) and, beside
# it on the other CPU, one with retention = 1 min, which after its first minute prunes on every
# commit as the default agent does once it holds 24 hours: its write_bytes is the steady state.
run_idle() {
  local window=$idle_seconds cpu_window=60 hz i t0 now c0 c60 cend w0 wend metrics_ok polls=0 load_before
  local steady_pid sw0 swend
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  hz=$(getconf CLK_TCK)
  rm -rf "$run/steady-data"
  write_config steady 1s 1m
  "${pin_client[@]}" "$agent_bin" --config "$run/steady.toml" 2>"$run/steady.log" &
  steady_pid=$!
  pids+=("$steady_pid")
  say "idle: steady-state writer (retention 1 min) started; 70 s until it prunes on every commit"
  sleep 70
  kill -0 "$steady_pid" 2>/dev/null || die "the steady-state agent stopped (log: $run/steady.log)"
  start_agent idle 1s
  wait_for_200 "$agent_url/api/current" 10 || die "no 200 from /api/current"
  metrics_ok=0
  [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$agent_url/metrics" || true) == 200 ]] && metrics_ok=1
  say "idle: ${window} s at 1 Hz (GET /api/current$( ((metrics_ok)) && echo ' and /metrics') each second); warm-up 5 s"
  sleep 5
  t0=$(now_ns)
  thread_cpu "$agent_pid" >"$run/idle-threads-0"
  c0=$(proc_cpu_ticks "$agent_pid") w0=$(proc_write_bytes "$agent_pid") sw0=$(proc_write_bytes "$steady_pid")
  for ((i = 1; i <= window; i++)); do
    if ((metrics_ok)); then curl -s -o /dev/null --max-time 1 "$agent_url/metrics" || true; fi
    curl -s -o /dev/null --max-time 1 "$agent_url/api/current" || true
    polls=$((polls + 1))
    now=$(now_ns)
    if (((t0 + i * 1000000000) > now)); then sleep "$(calc "($t0 + $i * 1e9 - $now) / 1e9")"; fi
    if ((i == cpu_window)); then
      c60=$(proc_cpu_ticks "$agent_pid")
      thread_cpu "$agent_pid" >"$run/idle-threads-60"
    fi
  done
  local elapsed
  elapsed=$(calc "($(now_ns) - $t0) / 1e9")
  cend=$(proc_cpu_ticks "$agent_pid") wend=$(proc_write_bytes "$agent_pid") swend=$(proc_write_bytes "$steady_pid")
  stop_pid "$steady_pid"
  history_fill="filled at the default 1 s interval during the idle run"
  measure_history_body
  local rss pss
  rss=$(awk '/^Rss:/{print $2}' "/proc/$agent_pid/smaps_rollup")
  pss=$(awk '/^Pss:/{print $2}' "/proc/$agent_pid/smaps_rollup")
  stop_pid "$agent_pid"
  local cpu60 cpuall wb wbh swb swbh
  cpu60=$(calc "($c60 - $c0) / $hz / $cpu_window * 100")
  cpuall=$(calc "($cend - $c0) / $hz / $elapsed * 100")
  wb=$((wend - w0)) swb=$((swend - sw0))
  wbh=$(calc "$wb / $elapsed * 3600")
  swbh=$(calc "$swb / $elapsed * 3600")
  cat >"$results/idle.env" <<EOF
idle_cpu_pct=$cpu60
idle_cpu_pct_all=$cpuall
idle_write_bytes=$wb
idle_write_bytes_per_hour=$wbh
idle_steady_write_bytes_per_hour=$swbh
idle_seconds=$(fmt '%.0f' "$elapsed")
idle_metrics=$metrics_ok
EOF
  local fsinfo
  fsinfo=$(df -T "$run" | awk 'NR == 2 {print $2}')
  {
    section_header "Idle: CPU and disk writes at 1 Hz" "$load_before"
    printf -- '- default sensors at 1 s; each second one GET `/api/current`%s with curl, a new connection each (%s polls); agent pinned to CPU 0\n' \
      "$( ((metrics_ok)) && echo ' and one GET `/metrics`' || echo ' (`/metrics` not available: not scraped)')" "$polls"
    printf -- '- CPU: utime+stime from /proc/PID/stat (%s ticks/s); disk: write_bytes from /proc/PID/io; database on %s (%s), snapshot on tmpfs (%s); after 5 s warm-up\n\n' "$hz" "${run#"$root"/}" "$fsinfo" "$snapdir"
    printf '| measure | value |\n|---|---:|\n'
    printf '| CPU over the first %s s, %% of one core | %.3f %% (%s ticks) |\n' "$cpu_window" "$cpu60" "$((c60 - c0))"
    printf '| CPU over %.0f s, %% of one core | %.3f %% (%s ticks) |\n' "$elapsed" "$cpuall" "$((cend - c0))"
    printf '| write_bytes over %.0f s, fresh database (history growing) | %s B |\n' "$elapsed" "$wb"
    printf '| write_bytes per hour, fresh database (extrapolated) | %.2f MB |\n' "$(calc "$wbh / 1e6")"
    printf '| write_bytes over the same %.0f s, steady state (retention 1 min: every commit also prunes, as after 24 h) | %s B |\n' "$elapsed" "$swb"
    printf '| write_bytes per hour, steady state (extrapolated) | %.2f MB |\n' "$(calc "$swbh / 1e6")"
    printf '| RSS / PSS at the end | %s / %s KiB |\n\n' "$rss" "$pss"
    printf 'CPU by thread over the first %s s (schedstat, ms; "kiwi-agent" is the main thread and the collector): ' "$cpu_window"
    awk 'NR == FNR { a[$1] = $3; next } { d[$2] += ($3 - a[$1]) / 1e6 } END { for (c in d) printf "%s %.1f; ", c, d[c] }' "$run/idle-threads-0" "$run/idle-threads-60"
    printf '\n\n'

  } >"$results/idle.md"
  say "idle: CPU $cpu60 % (60 s), writes $(calc "$wbh / 1e6") MB/h fresh, $(calc "$swbh / 1e6") MB/h steady state"
}

# ---------------------------------------------------------------------------------------------
# Reload: SIGHUP on one agent (default sensors, fresh data dir), rounds of three reloads that each
# change something: [collector] interval 1s <-> 2s, http.bind between two free loopback ports, and a
# TOML error. The waits cost no process per step: the log is read through a descriptor held open,
# /api/current through bash's /dev/tcp, the 1 ms sleeps are a read timeout on a FIFO nobody writes
# to, the clock is $EPOCHREALTIME (µs). Only the bind probes are curl (a process each, several ms).
msleep() { read -r -t 0.001 -u "$sleep_fd" _msleep || true; }
reload_log_poll() { # reload_log_poll T0_US: reads the log's new lines; sets verdict_line/verdict_us at
  # the first "reloaded" or "reload failed" line (returns 0), else returns 1. A partial last line
  # is kept for the next call.
  local line
  while IFS= read -r line <&"$log_fd"; do
    line=$log_part$line log_part=""
    if [[ $line == *"info: reloaded "* || $line == *"error: reload failed"* ]]; then
      verdict_us=$((${EPOCHREALTIME/[.,]/} - $1)) verdict_line=$line
      return 0
    fi
  done
  log_part+=$line
  return 1
}
reload_log_next() { # reload_log_next T0_US: waits 10 s at most for the next verdict line
  local deadline=$(($1 + 10000000))
  verdict_line="" verdict_us=""
  while ((${EPOCHREALTIME/[.,]/} < deadline)); do
    reload_log_poll "$1" && return 0
    msleep
  done
  die "no 'reloaded' or 'reload failed' line within 10 s of the SIGHUP (log: $run/reload.log)"
}
current_interval() { # current_interval PORT -> sets cur_interval from /api/current ("" if none)
  local fd body=""
  cur_interval=""
  { exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 0
  printf 'GET /api/current HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&"$fd"
  IFS= read -r -d '' -t 2 body <&"$fd" || true
  exec {fd}>&-
  if [[ $body =~ \"interval_seconds\":([0-9.]+) ]]; then cur_interval=${BASH_REMATCH[1]}; fi
}
proc_starttime() { local s rest f; s=$(<"/proc/$1/stat"); rest=${s##*) }; read -r -a f <<<"$rest"; echo "${f[19]}"; }
http_status() { curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1" || true; }
agent_ms() { [[ $1 =~ \ in\ ([0-9.]+)\ ms ]] && echo "${BASH_REMATCH[1]}" || echo nan; }

# The peers' table comes from tools/bench/footprint.py, which writes its section into $out
# (assemble keeps it). Unpinned: each agent runs as it would on the board.
run_footprint() {
  if [[ $(id -u) -ne 0 ]]; then
    check_failures+=("footprint: not run: it needs root (sudo tools/bench/run.sh --footprint)")
    return
  fi
  say "footprint: kiwi-agent, node_exporter, netdata, collectd, ${footprint_seconds} s each"
  taskset -c "0-$((ncpu - 1))" python3 "$here/footprint.py" --agent-bin "$agent_bin" \
    --seconds "$footprint_seconds" --results "$results/footprint.jsonl" --doc "$out" >/dev/null ||
    check_failures+=("footprint: tools/bench/footprint.py failed (its messages are above)")
}

# The scale table comes from tools/bench/scale.py, which writes its section into $out (assemble
# keeps it); it pins the agent and wrk itself.
run_scale() {
  say "scale: the generated big host divided by ${scale_divide// /, }, ${scale_seconds} s each"
  python3 "$here/scale.py" --agent-bin "$agent_bin" --plugin-dir "$plugin_dir" \
    --ceiling "$ceiling_bin" --seconds "$scale_seconds" --warmup "$scale_warmup" \
    --divide "$scale_divide" --results "$results/scale.jsonl" \
    --doc "$out" >/dev/null || check_failures+=("scale: tools/bench/scale.py failed (its messages are above)")
}

# Catch2 BENCHMARKs of the parsers, the sample codec and the renderer (tools/bench/micro.cpp),
# built with the tests: the quick mode runs them with 3 samples, as a smoke test (figures from it
# mean little; run the binary alone for them).
run_micro() {
  local micro=$build_dir/bin/kiwi-bench-micro
  if [[ ! -x $micro ]]; then
    say "micro-benchmarks: not built in $build_dir (they come with -DKIWI_BUILD_TESTS=ON)"
    return
  fi
  say "micro-benchmarks: $micro, 3 samples each"
  "$micro" --benchmark-samples 3 --benchmark-resamples 100 --benchmark-warmup-time 10 \
    >"$results/micro.txt" 2>&1 ||
    check_failures+=("micro-benchmarks: $micro failed (output: $results/micro.txt)")
}

run_reload() {
  local rounds=$reload_rounds load_before cfg=$run/reload.toml tsv=$results/reload.tsv
  local port_a port_b i t0 deadline now from to from_port to_port t200 trefused rc code start_time
  local pid_ok=1 refused_ok=0 alive_ok=0 problems=() t_start line
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  port_a=$(free_port)
  for ((i = 0; i < 20; i++)); do port_b=$(free_port); [[ $port_b != "$port_a" ]] && break; done
  [[ $port_b != "$port_a" ]] || die "no second free port"
  t_start=$(date +%s)
  start_agent reload 1s "" "127.0.0.1:$port_a"
  wait_for_200 "$agent_url/api/current" 10 || die "no 200 from /api/current"
  start_time=$(proc_starttime "$agent_pid")
  local fifo=$run/reload-sleep.fifo
  rm -f "$fifo"
  mkfifo "$fifo"
  exec {sleep_fd}<>"$fifo"
  rm -f "$fifo"
  exec {log_fd}<"$run/reload.log"
  log_part=""
  while IFS= read -r line <&"$log_fd"; do :; done # skip the start-up lines
  log_part=$line
  pid_check() { # the same process answers: alive, same start time, its pid in the snapshot lock
    if ! kill -0 "$agent_pid" 2>/dev/null || [[ $(proc_starttime "$agent_pid" 2>/dev/null) != "$start_time" ]] ||
      [[ $(cat "$snapdir/reload.json.lock" 2>/dev/null) != "$agent_pid" ]]; then
      if ((pid_ok)); then problems+=("the agent's process changed after $1 (pid $agent_pid)"); fi
      pid_ok=0
    fi
  }
  printf 'round\tkind\tchange\tlog_ms\tagent_ms\teffect_ms\trefused_ms\n' >"$tsv"
  say "reload: $rounds rounds of interval 1s <-> 2s, bind 127.0.0.1:$port_a <-> 127.0.0.1:$port_b, a TOML error (agent pid $agent_pid)"
  from=1 to=2 from_port=$port_a to_port=$port_b
  for ((i = 1; i <= rounds; i++)); do
    # 1. The interval: the log line, then /api/current (the first tick on the new grid).
    sed -i "s/^interval = .*/interval = \"${to}s\"/" "$cfg"
    t0=${EPOCHREALTIME/[.,]/}
    kill -HUP "$agent_pid"
    reload_log_next "$t0"
    [[ $verdict_line == *"info: reloaded "*"collector.interval ${from}s -> ${to}s"* ]] || die "round $i: interval reload: $verdict_line"
    local log_us=$verdict_us
    deadline=$((t0 + 5000000)) cur_interval=""
    while ((${EPOCHREALTIME/[.,]/} < deadline)); do
      current_interval "$from_port"
      [[ $cur_interval == "$to" ]] && break
      msleep
    done
    now=${EPOCHREALTIME/[.,]/}
    [[ $cur_interval == "$to" ]] || die "round $i: /api/current did not show interval_seconds $to within 5 s"
    printf '%s\tinterval\t%ss->%ss\t%s\t%s\t%s\t\n' "$i" "$from" "$to" "$(calc "$log_us / 1e3")" "$(agent_ms "$verdict_line")" "$(calc "($now - $t0) / 1e3")" >>"$tsv"
    pid_check "interval reload $i"

    # 2. The bind: first 200 on the new port and the old one refusing (curl exit 7), polled together.
    sed -i "s/^bind = .*/bind = \"127.0.0.1:$to_port\"/" "$cfg"
    t200="" trefused="" verdict_line="" verdict_us=""
    t0=${EPOCHREALTIME/[.,]/}
    kill -HUP "$agent_pid"
    deadline=$((t0 + 5000000))
    while ((${EPOCHREALTIME/[.,]/} < deadline)); do
      [[ -n $verdict_line ]] || reload_log_poll "$t0" || true
      if [[ -z $t200 ]]; then
        code=$(http_status "http://127.0.0.1:$to_port/api/current")
        [[ $code == 200 ]] && t200=$((${EPOCHREALTIME/[.,]/} - t0))
      fi
      if [[ -z $trefused ]]; then
        rc=0
        curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$from_port/api/current" || rc=$?
        ((rc == 7)) && trefused=$((${EPOCHREALTIME/[.,]/} - t0))
      fi
      [[ -n $t200 && -n $trefused && -n $verdict_line ]] && break
      msleep
    done
    [[ -n $verdict_line ]] || reload_log_next "$t0"
    [[ $verdict_line == *"info: reloaded "*"http.bind 127.0.0.1:$from_port -> 127.0.0.1:$to_port"*"now listening on http://127.0.0.1:$to_port/"* ]] ||
      die "round $i: bind reload: $verdict_line"
    [[ -n $t200 ]] || die "round $i: no 200 from 127.0.0.1:$to_port within 5 s of the SIGHUP"
    if [[ -n $trefused ]]; then refused_ok=$((refused_ok + 1)); else problems+=("round $i: 127.0.0.1:$from_port still accepted connections 5 s after the move"); fi
    printf '%s\tbind\t%s->%s\t%s\t%s\t%s\t%s\n' "$i" "$from_port" "$to_port" "$(calc "$verdict_us / 1e3")" "$(agent_ms "$verdict_line")" \
      "$(calc "$t200 / 1e3")" "$([[ -n $trefused ]] && calc "$trefused / 1e3" || echo nan)" >>"$tsv"
    agent_url=http://127.0.0.1:$to_port
    pid_check "bind reload $i"

    # 3. A TOML error (an unterminated string): the "reload failed" line, then still 200.
    cp "$cfg" "$cfg.good"
    sed -i 's/^interval = "\(.*\)"$/interval = "\1/' "$cfg"
    t0=${EPOCHREALTIME/[.,]/}
    kill -HUP "$agent_pid"
    reload_log_next "$t0"
    [[ $verdict_line == *"error: reload failed"* ]] || die "round $i: a TOML error did not fail the reload: $verdict_line"
    code=$(http_status "$agent_url/api/current")
    now=${EPOCHREALTIME/[.,]/}
    if [[ $code == 200 ]]; then alive_ok=$((alive_ok + 1)); else problems+=("round $i: HTTP $code from /api/current after the failed reload"); fi
    printf '%s\tfailed\ttoml-error\t%s\t\t%s\t\n' "$i" "$(calc "$verdict_us / 1e3")" "$(calc "($now - $t0) / 1e3")" >>"$tsv"
    mv "$cfg.good" "$cfg"
    pid_check "failed reload $i"

    local tmp=$from; from=$to to=$tmp
    tmp=$from_port; from_port=$to_port to_port=$tmp
  done

  # After the rounds: reload counts (log and /api/health) and the steps in history.
  local failed_lines ok_lines health ok_total failed_total hist steps count max_step
  failed_lines=$(grep -c 'error: reload failed' "$run/reload.log" || true)
  ok_lines=$(grep -c 'info: reloaded ' "$run/reload.log" || true)
  health=$(curl -s --max-time 5 "$agent_url/api/health" || true)
  ok_total=$(grep -o '"ok_total":[0-9]*' <<<"$health" | cut -d: -f2 || true)
  failed_total=$(grep -o '"failed_total":[0-9]*' <<<"$health" | cut -d: -f2 || true)
  if [[ $failed_lines != "$rounds" || $failed_total != "$rounds" || $ok_lines != $((2 * rounds)) || $ok_total != $((2 * rounds)) ]]; then
    problems+=("reloads: $ok_lines 'reloaded' and $failed_lines 'reload failed' lines in the log, /api/health ok_total ${ok_total:-?} failed_total ${failed_total:-?}; expected $((2 * rounds)) and $rounds")
  fi
  hist=$(curl -s --max-time 5 "$agent_url/api/history?limit=1000&since=$t_start" || true)
  steps=$(grep -o '"timestamps":\[[^]]*\]' <<<"$hist" | sed 's/.*\[//; s/\]//' | tr ',' '\n' |
    awk 'NF { if (n++) { d = $1 - p; if (d > m) m = d } p = $1 } END { printf "%d %s", n, (n > 1 ? m : "nan") }')
  read -r count max_step <<<"$steps"
  if ((count < 2)) || ! holds "$max_step <= 2"; then problems+=("history since the start: $count samples, largest step ${max_step} s (over 2 s, or too few samples)"); fi
  pid_check "the last reload"
  exec {log_fd}<&- {sleep_fd}>&-
  stop_pid "$agent_pid"

  # Median and min-max from the tsv: reload_stat KIND CHANGE("" for all) COLUMN.
  reload_stat() {
    awk -F'\t' -v k="$1" -v c="$2" -v col="$3" 'NR > 1 && $2 == k && (c == "" || $3 == c) && $col != "" && $col != "nan" { print $col }' "$tsv" |
      sort -g | awk '{ a[NR] = $1 } END { if (!NR) { print "nan nan nan"; exit } m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f\n", m, a[1], a[NR] }'
  }
  reload_row() { # reload_row LABEL KIND CHANGE COLUMN
    local m lo hi
    read -r m lo hi <<<"$(reload_stat "$2" "$3" "$4")"
    printf '| %s | %s | %s-%s |\n' "$1" "$m" "$lo" "$hi"
  }
  local m_int_log m_int_agent m_int_api m_bind_200 m_bind_refused m_bind_agent m_fail_log
  m_int_log=$(reload_stat interval "" 4 | cut -d' ' -f1)
  m_int_agent=$(reload_stat interval "" 5 | cut -d' ' -f1)
  m_int_api=$(reload_stat interval "" 6 | cut -d' ' -f1)
  m_bind_200=$(reload_stat bind "" 6 | cut -d' ' -f1)
  m_bind_refused=$(reload_stat bind "" 7 | cut -d' ' -f1)
  m_bind_agent=$(reload_stat bind "" 5 | cut -d' ' -f1)
  m_fail_log=$(reload_stat failed "" 4 | cut -d' ' -f1)
  cat >"$results/reload.env" <<EOF
reload_rounds=$rounds
reload_interval_log_ms=$m_int_log
reload_interval_agent_ms=$m_int_agent
reload_interval_api_ms=$m_int_api
reload_bind_200_ms=$m_bind_200
reload_bind_refused_ms=$m_bind_refused
reload_bind_agent_ms=$m_bind_agent
reload_failed_log_ms=$m_fail_log
reload_max_history_step_s=$max_step
reload_problems=${#problems[@]}
EOF
  local verdict_pid verdict_counts verdict_hist
  verdict_pid=$( ((pid_ok)) && echo pass || echo '**FAIL**')
  verdict_counts=$([[ $failed_lines == "$rounds" && $failed_total == "$rounds" && $ok_lines == $((2 * rounds)) && $ok_total == $((2 * rounds)) ]] && echo pass || echo '**FAIL**')
  verdict_hist=$( ((count >= 2)) && holds "$max_step <= 2" && echo pass || echo '**FAIL**')
  {
    section_header "Reload: SIGHUP" "$load_before"
    printf -- '- machine: %s x %s, %s; %s; one agent (pid %s, %s build), default sensors, fresh data directory; %s rounds of three reloads in turn, each changing something: `[collector] interval` 1s <-> 2s, `http.bind` 127.0.0.1:%s <-> 127.0.0.1:%s, then an unterminated string (a TOML error; the file is put back afterwards)\n' \
      "$ncpu" "$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')" "$(uname -sr)" "$pinning" "$agent_pid" "${build_type:-?}" "$rounds" "$port_a" "$port_b"
    printf -- '- times from `kill -HUP`, median and min-max of %s: the log is read through a descriptor held open and polled in 1 ms steps, `/api/current` through bash'"'"'s `/dev/tcp` in 1 ms steps (no process per try); the bind probes are `curl --max-time 1` (a process each, a few ms per try, which bounds their resolution), the new port and the old one in the same loop; "in X ms" is the agent'"'"'s own figure from its `reloaded` line (from the start of the reload to the new configuration in force)\n' "$rounds"
    printf -- '- the `/api/current` times are not the reload'"'"'s cost: they include the wait for the first sample taken on the new interval'"'"'s grid (up to 2 s after a change to 2 s, up to 1 s after a change to 1 s)\n\n'
    printf '| measure | median, ms | min-max, ms |\n|---|---:|---:|\n'
    reload_row 'interval 1s <-> 2s: to the `reloaded` line in the log' interval "" 4
    reload_row 'interval: the agent'"'"'s "in X ms"' interval "" 5
    reload_row 'interval 1s -> 2s: to `interval_seconds` 2 in `/api/current` (includes the wait for the first tick on the 2 s grid)' interval '1s->2s' 6
    reload_row 'interval 2s -> 1s: to `interval_seconds` 1 in `/api/current` (includes the wait for the next tick on the 1 s grid)' interval '2s->1s' 6
    reload_row 'bind A <-> B: to the first 200 on the new port' bind "" 6
    reload_row 'bind: to the old port refusing connections' bind "" 7
    reload_row 'bind: to the `reloaded` line (`...; now listening on` the new URL; read between the curl probes, so at their resolution)' bind "" 4
    reload_row 'bind: the agent'"'"'s "in X ms"' bind "" 5
    reload_row 'TOML error: to the `reload failed` line' failed "" 4
    printf '\n| check | result | verdict |\n|---|---|---|\n'
    printf '| same process throughout (pid, start time, pid in the snapshot lock file) | pid %s | %s |\n' "$agent_pid" "$verdict_pid"
    printf '| only the deliberate reloads failed | log: %s `reloaded`, %s `reload failed`; `/api/health`: ok_total %s, failed_total %s | %s |\n' "$ok_lines" "$failed_lines" "${ok_total:-?}" "${failed_total:-?}" "$verdict_counts"
    printf '| old port refuses after each bind change | %s of %s | %s |\n' "$refused_ok" "$rounds" "$([[ $refused_ok == "$rounds" ]] && echo pass || echo '**FAIL**')"
    printf '| `/api/current` 200 right after each failed reload | %s of %s | %s |\n' "$alive_ok" "$rounds" "$([[ $alive_ok == "$rounds" ]] && echo pass || echo '**FAIL**')"
    printf '| history since the start (`/api/history?limit=1000&since=%s`): largest step between consecutive timestamps, ≤ 2 s | %s s over %s samples | %s |\n\n' "$t_start" "$max_step" "$count" "$verdict_hist"
    printf 'Raw times: `%s` (round, kind, change, ms to the log line, the agent'"'"'s "in X ms", ms to the effect: `/api/current` showing the new interval, the first 200 on the new port, or the 200 after the failed reload; ms to the old port refusing).\n\n' "${tsv#"$root"/}"
  } >"$results/reload.md"
  local p
  for p in "${problems[@]}"; do check_failures+=("reload: $p"); done
  say "reload: interval: log line $m_int_log ms (agent $m_int_agent ms), /api/current $m_int_api ms; bind: 200 on the new port $m_bind_200 ms, old port refused $m_bind_refused ms (agent $m_bind_agent ms); TOML error: log line $m_fail_log ms; largest history step $max_step s; ${#problems[@]} problems"
}

# ---------------------------------------------------------------------------------------------
# The document: machine, versions, pinning, targets, then each section's latest result.
target_row() { # target_row NAME TARGET MEASURED PASS(1/0/"") SOURCE
  local verdict
  case $4 in 1) verdict="pass" ;; 0) verdict="**MISS**" ;; *) verdict="not measured" ;; esac
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$verdict" "$5"
}
passfail() { if holds "$1"; then echo 1; else echo 0; fi; }

# shellcheck disable=SC2034  # variables read from the .env files, some only for the record
targets_table() {
  local ratio_root_32="" p95ratio_root_32="" ratio_current_32="" p95ratio_current_32="" ratio_history_32="" ratio_metrics_32=""
  local metrics_available="" matrix_mode="" matrix_errors=""
  local hist_bytes="" hist_gzip_bytes="" hist_served_gzip_bytes="" hist_count="" hist_fill="" hist_when="" hist_command=""
  local soak_rss_after_kib="" soak_pss_after_kib="" soak_rss_settled_kib="" soak_pss_settled_kib="" soak_rss_max_kib="" soak_growth_kib="" soak_quick_check="" soak_errors=""
  local idle_cpu_pct="" idle_cpu_pct_all="" idle_write_bytes="" idle_write_bytes_per_hour="" idle_metrics="" idle_steady_write_bytes_per_hour="" idle_seconds=""
  local startup_root_ms="" startup_current_ms=""
  local f
  for f in matrix bodies soak idle startup; do
    # shellcheck disable=SC1090
    [[ -f $results/$f.env ]] && source <(grep -E '^[a-z0-9_]+=' "$results/$f.env" | sed 's/^/local /')
  done
  printf '## Targets (issue 6)\n\n'
  printf 'Ratios are taken side by side in the same run (see the matrix below for the source figures); the verdict uses the resp/s ratio as the issue defines it, the CPU ratio beside it is the same comparison in server CPU per response, which other load on the machine barely moves.\n\n'
  printf '| target | wanted | measured | verdict | from |\n|---|---|---|---|---|\n'
  local src="matrix ($matrix_mode)"
  local cr
  cpunote() { eval "cr=\${cpuratio_${1}_32:-}"; [[ -n $cr ]] && echo " (CPU ratio $cr)"; }
  for r in root current; do
    local rv pv
    eval "rv=\${ratio_${r}_32:-} pv=\${p95ratio_${r}_32:-}"
    if [[ -n $rv ]]; then
      target_row "\`$(route_path $r)\` resp/s vs ceiling, 32 conns" "≥ 0.9" "$rv$(cpunote $r)" "$(passfail "$rv >= 0.9")" "$src"
      target_row "\`$(route_path $r)\` p95 vs ceiling, 32 conns" "≤ 1.5" "$pv" "$(passfail "$pv <= 1.5")" "$src"
    else
      target_row "\`$(route_path $r)\` vs ceiling, 32 conns" "≥ 0.9, p95 ≤ 1.5x" "-" "" "run the matrix with 32 connections"
    fi
  done
  if [[ -n $ratio_history_32 ]]; then
    target_row "\`/api/history?limit=120\` resp/s vs ceiling, 32 conns" "≥ 0.5" "$ratio_history_32$(cpunote history)" "$(passfail "$ratio_history_32 >= 0.5")" "$src"
  else
    target_row "\`/api/history?limit=120\` vs ceiling, 32 conns" "≥ 0.5" "-" "" "run the matrix with 32 connections"
  fi
  if [[ -n $ratio_metrics_32 ]]; then
    target_row "\`/metrics\` resp/s vs ceiling, 32 conns" "≥ 0.5" "$ratio_metrics_32$(cpunote metrics)" "$(passfail "$ratio_metrics_32 >= 0.5")" "$src"
  else
    target_row "\`/metrics\` resp/s vs ceiling, 32 conns" "≥ 0.5" "-" "" "$([[ $metrics_available == 0 ]] && echo 'route not available in this build' || echo 'run the matrix with 32 connections')"
  fi
  if [[ -n $hist_bytes ]]; then
    local hsrc="$hist_count samples, $hist_fill"
    target_row "history body, limit=120, uncompressed" "≤ 15 kB" "$hist_bytes B" "$(passfail "$hist_bytes <= 15000 && $hist_count >= 120")" "$hsrc"
    target_row "history body, limit=120, gzip -6" "≤ 4 kB" "$hist_gzip_bytes B (served with Accept-Encoding: gzip: $hist_served_gzip_bytes B)" "$(passfail "$hist_gzip_bytes <= 4000 && $hist_count >= 120")" "$hsrc"
  else
    target_row "history body, limit=120" "≤ 15 kB, ≤ 4 kB gzipped" "-" "" "run the matrix or --idle"
  fi
  if [[ -n $soak_rss_after_kib ]]; then
    if [[ -n $soak_rss_settled_kib ]]; then
      target_row "RSS after the soak, idle again (11 s)" "≤ 8 MiB" "$(fmt '%.2f' "$(calc "$soak_rss_settled_kib/1024")") MiB (PSS $(fmt '%.2f' "$(calc "$soak_pss_settled_kib/1024")") MiB; at the end of the load: RSS $(fmt '%.2f' "$(calc "$soak_rss_after_kib/1024")") MiB)" "$(passfail "$soak_rss_settled_kib <= 8192")" "soak, $soak_minutes min"
    else
      target_row "RSS after the soak" "≤ 8 MiB" "$(fmt '%.2f' "$(calc "$soak_rss_after_kib/1024")") MiB (PSS $(fmt '%.2f' "$(calc "$soak_pss_after_kib/1024")") MiB)" "$(passfail "$soak_rss_after_kib <= 8192")" "soak, $soak_minutes min"
    fi
    target_row "RSS growth during the soak" "none (≤ 128 KiB)" "$soak_growth_kib KiB" "$(passfail "$soak_growth_kib <= 128")" "soak, $soak_minutes min"
    target_row "\`quick_check\` after the soak" "ok" "$soak_quick_check" "$([[ $soak_quick_check == ok ]] && echo 1 || echo 0)" "soak, $soak_minutes min"
  else
    target_row "RSS after the soak, no growth" "≤ 8 MiB" "-" "" "run --soak"
  fi
  if [[ -n $idle_cpu_pct ]]; then
    target_row "idle CPU, 1 Hz polling" "≤ 0.2 % of a core" "$(fmt '%.3f' "$idle_cpu_pct") %" "$(passfail "$idle_cpu_pct <= 0.2")" "--idle, first 60 s$([[ $idle_metrics == 1 ]] || echo '; /metrics not scraped (not available)')"
    if [[ -n ${idle_steady_write_bytes_per_hour:-} ]]; then
      target_row "disk writes at 1 Hz, steady state (pruning)" "≤ 5 MB/h" "$(fmt '%.2f' "$(calc "$idle_steady_write_bytes_per_hour/1e6")") MB/h (fresh database: $(fmt '%.2f' "$(calc "$idle_write_bytes_per_hour/1e6")") MB/h)" "$(passfail "$idle_steady_write_bytes_per_hour <= 5e6")" "--idle, write_bytes over ${idle_seconds:-120} s"
    else
      target_row "disk writes at 1 Hz" "≤ 5 MB/h" "$(fmt '%.2f' "$(calc "$idle_write_bytes_per_hour/1e6")") MB/h" "$(passfail "$idle_write_bytes_per_hour <= 5e6")" "--idle, write_bytes over 120 s"
    fi
  else
    target_row "idle CPU and disk writes" "≤ 0.2 %, ≤ 5 MB/h" "-" "" "run --idle"
  fi
  if [[ -n $startup_current_ms ]]; then
    target_row "start-up, exec to first 200" "< 100 ms" "$startup_root_ms ms on \`/\`, $startup_current_ms ms on \`/api/current\`" "$(passfail "$startup_current_ms < 100")" "median of 5, fresh data directory"
  else
    target_row "start-up, exec to first 200" "< 100 ms" "-" "" "run the matrix"
  fi
  printf '\n'
}

assemble() {
  local mem cpu
  mem=$(awk '/^MemTotal:/{printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
  cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')
  # Sections that other programs write into $out (--doc), not this script, kept as they are, in
  # this order: tools/bench/footprint.py, scale.py, fleet.py and disk.py (with the hand-written
  # "Disk writes: where the bytes go" after it).
  local kept=() heading text
  if [[ -f $out ]]; then
    for heading in "Footprint: " "Scale: " "Fleet: " "Disk writes: "; do
      text=$(awk -v h="## $heading" 'index($0, h) == 1 {f=1; print; next} f && /^## /{f=0} f' "$out")
      if [[ -n $text ]]; then kept+=("$text"); fi
    done
  fi
  {
    printf '# kiwi-agent benchmarks\n\n'
    printf 'Produced by `tools/bench/run.sh` (see `--help`); every section names the exact command that produced it.\n'
    printf 'Method: the lab'"'"'s (1, 8 and 32 persistent connections, each route repeatedly with the route order rotated, the median of the repetitions with the min-max range, the median of the per-run p95, status checked on every response and bodies on a sample), measured side by side against a ceiling server: `tools/bench/ceiling.c`, libmicrohttpd with the agent'"'"'s HTTP settings (internal epoll thread pool, 5 s keep-alive, 256 connections, answer on the second handler call) answering a fixed in-memory body of the same size (`MHD_RESPMEM_PERSISTENT`, one response object for all requests), and once with an empty body.\n\n'
    printf '## Machine\n\n| | |\n|---|---|\n'
    printf '| CPUs | %s x %s |\n' "$ncpu" "$cpu"
    printf '| memory | %s |\n' "$mem"
    printf '| kernel | %s |\n' "$(uname -srm)"
    printf '| OS | %s |\n' "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    printf '| agent in the build tree when this page was written | %s, commit %s, %s build (each section names the commit it measured) |\n' "$agent_version" "$commit" "${build_type:-?}"
    printf '| libmicrohttpd | %s |\n' "$mhd_version"
    printf '| wrk | %s (LuaJIT script `tools/bench/report.lua`) |\n' "$wrk_version"
    printf '| SQLite CLI | %s |\n' "$sqlite_version"
    printf '| pinning | %s |\n\n' "$pinning"
    printf 'This is a shared virtual machine: other work may have run at the same time; each section gives the load average around it.\n\n'
    targets_table
    local s
    for s in matrix startup soak idle reload; do [[ -f $results/$s.md ]] && cat "$results/$s.md"; done
    for text in "${kept[@]}"; do printf '%s\n\n' "$text"; done
    if [[ -f $results/bodies.env ]]; then
      # shellcheck disable=SC1091
      (source "$results/bodies.env"
        printf '## History body size\n\n'
        printf -- '- `GET /api/history?limit=120` with %s samples (%s), default sensors, measured %s by `%s`\n\n' "$hist_count" "$hist_fill" "$hist_when" "$hist_command"
        printf '| encoding | bytes |\n|---|---:|\n| uncompressed | %s |\n| gzip -6 of the body | %s |\n| as served to `curl --compressed` | %s |\n\n' "$hist_bytes" "$hist_gzip_bytes" "$hist_served_gzip_bytes")
    fi
    cat <<'NOTES'
## How to read these figures

- wrk runs one thread on its own CPU with `tools/bench/report.lua`: every response's status is
  checked, and one response in 100 has its body checked (`{"version":1` at the start for the JSON
  routes and the ceiling, `<html` for `/`, `# TYPE ` for `/metrics`). Latency percentiles are wrk's.
- The ceiling answers every path with one response object created at start-up, so it measures
  libmicrohttpd, the kernel and wrk on this machine; the agent's ratio is what its routing,
  handlers and per-request response objects cost on top. It links the agent's libmicrohttpd and
  uses its settings: worker threads (auto: one per CPU it may use, so 1 when pinned) and 16 KiB of
  memory per connection (`kiwi-bench-ceiling --threads N --memory-limit BYTES` set others).
- RSS counts every page of a shared library that the agent mapped, and the kernel maps library
  pages 64 KiB at a time around each one touched. About 6 MiB of the agent's RSS is the libraries
  of the Debian stack it is built on (libstdc++ 1.7, libc 1.5, SQLite 1.2, libm 0.6, toml++,
  Boost.Filesystem, zlib, the loader), 0.75 MiB the twelve plugins (built with -Os: 1.1 MiB at
  -O3), 0.5 MiB the executable, and about 1 MiB its heap and thread stacks; the libmicrohttpd
  built by `tools/setup-mhd.sh` spares the 2.4 MiB that GnuTLS and its dependencies cost with
  Debian's shared libmicrohttpd. PSS divides shared pages among the processes that map them, so
  it depends on what else runs.
- The agent runs with `glibc.malloc.tcache_count=1` (it adds it to `GLIBC_TUNABLES` and executes
  itself once at start): glibc's default per-thread cache pins heap pages that `malloc_trim`
  cannot return, which showed as about 100 KiB of RSS growth over the soak. A `tcache_count` set
  in `GLIBC_TUNABLES` by the user is kept.
- write_bytes counts page-cache pages the agent dirtied on a disk filesystem, the closest figure
  to what reaches the flash; the snapshot file is on tmpfs as in the default `/run/kiwi-agent`.
- On a shared or virtual machine, compare ratios (taken side by side) rather than absolute
  figures; each section records the load average around it.
NOTES
  } >"$out"
}

# ---------------------------------------------------------------------------------------------
total_errors=0 check_failures=()
[[ $mode == report ]] && no_build=1
build
versions
pick_snapdir
# The script itself and its helpers (curl, awk, the start-up poller) stay off the server's CPU.
if ((ncpu >= 2)); then taskset -pc 1 $$ >/dev/null; fi
say "pinning: $pinning"
say "results: $results; output: $out"
case $mode in
  # quick: the scale runner at 1/16 for 3 s and the micro-benchmarks with 3 samples too, so that
  # they and the generated host keep working.
  quick) run_matrix; scale_seconds=3 scale_warmup=1 scale_divide=16 run_scale; run_micro ;;
  full) run_matrix ;;
  soak) run_soak ;;
  idle) run_idle ;;
  reload) run_reload ;;
  footprint) run_footprint ;;
  scale) run_scale ;;
  all) run_matrix; run_idle; run_soak; run_reload; run_footprint; run_scale ;;
  report) ;;
esac
# --footprint and --scale alone: their program has put its section into $out in place; the page
# is not assembled again, since that rebuilds the other sections from build/bench/results, which
# a fresh clone does not have.
if [[ $mode != footprint && $mode != scale ]]; then
  assemble
  cat "$out"
fi
say "wrote $out"
for m in "${check_failures[@]}"; do say "FAILED: $m"; done
if ((total_errors > 0)); then
  say "FAILED: $total_errors errors (non-2xx, bad bodies or socket errors) in agent runs"
  exit 1
fi
((${#check_failures[@]} == 0)) || exit 1
say "no errors"
exit 0
}
