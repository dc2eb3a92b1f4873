#!/usr/bin/env bash
# The installed plugin SDK (docs/plugins.md): `cmake --install` of the build tree into a temporary
# prefix, then every project under examples/ built out of tree against that prefix with
# find_package(KiwiAgent) and add_kiwi_plugin() (a C++ sensor, a C sensor, a C++ route), and
# installed with no --prefix (it defaults to the
# agent's, so the plugin lands in the agent's plugin directory); the sensor example also
# with clang (the boundary does not depend on the compiler) and with nothing but
# `pkg-config --cflags kiwi-agent`. The installed agent then loads each result (the installed ones
# by name, the others by path) and serves what they make: /api/current, /metrics, the route.
# Usage: tests/install/sdk-test.sh BUILD_DIR SOURCE_DIR   (ctest runs it: tests/CMakeLists.txt)
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
run() {  # <log name> <command...>: quiet unless it fails
  "${@:2}" >"$tmp/$1.log" 2>&1 || fail "$*: $(tail -30 "$tmp/$1.log")"
}

prefix=$tmp/prefix
run install cmake --install "$build" --prefix "$prefix"
for f in include/kiwi/sensor.hpp include/kiwi/handler.hpp; do
  [[ -f $prefix/$f ]] || fail "the SDK install has no $f"
done
config=$(find "$prefix" -path '*/cmake/KiwiAgent/KiwiAgentConfig.cmake')
[[ -n $config ]] || fail "no lib/cmake/KiwiAgent/KiwiAgentConfig.cmake under $prefix"
pc=$(find "$prefix" -path '*/pkgconfig/kiwi-agent.pc')
[[ -n $pc ]] || fail "no pkgconfig/kiwi-agent.pc under $prefix"
echo "ok: SDK installed: ${config#"$prefix"/}, ${pc#"$prefix"/}"

# Each example: configure against the prefix only (no path into this source tree), build, install.
examples=()
for list in "$src"/examples/*/CMakeLists.txt; do
  dir=$(dirname "$list")
  name=$(basename "$dir")
  examples+=("$name")
  cp -r "$dir" "$tmp/src-$name"  # built from a copy: nothing next to it in the tree can leak in
  run "configure-$name" cmake -S "$tmp/src-$name" -B "$tmp/build-$name" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS=-Werror
  run "build-$name" cmake --build "$tmp/build-$name"
  run "install-$name" cmake --install "$tmp/build-$name"
  echo "ok: examples/$name built out of tree with find_package(KiwiAgent) and installed"
done
((${#examples[@]} >= 3)) || fail "expected at least 3 examples (a C++ and a C sensor, a route), found: ${examples[*]}"

# Without a build type (a plugin project that sets none): still built for size, not at -O0.
run configure-notype cmake -S "$tmp/src-uptime-sensor" -B "$tmp/build-notype" \
  -DCMAKE_PREFIX_PATH="$prefix"
run build-notype cmake --build "$tmp/build-notype" --verbose
grep -q -- "-Os" "$tmp/build-notype.log" || fail "without a build type the plugin is not built with -Os"
echo "ok: without a build type add_kiwi_plugin() still builds for size"

# The same sensor with clang, and with only pkg-config's flags.
command -v clang++ >/dev/null || fail "clang++ is missing (tools/setup.sh --test installs clang)"
run configure-clang cmake -S "$tmp/src-uptime-sensor" -B "$tmp/build-clang" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS=-Werror
run build-clang cmake --build "$tmp/build-clang"
grep -q "clang" "$tmp/build-clang/CMakeCache.txt" || fail "the clang build did not use clang"
clang_so=$tmp/build-clang/kiwi-sensor-uptime.so
[[ -f $clang_so ]] || fail "the clang build made no $clang_so"
export PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags kiwi-agent) || fail "pkg-config --cflags kiwi-agent"
plugindir=$(pkg-config --variable=plugindir kiwi-agent)
[[ -d $plugindir ]] || fail "pkg-config's plugindir $plugindir is not a directory"
pc_so=$tmp/pc/kiwi-sensor-uptime.so
mkdir -p "$tmp/pc"
# shellcheck disable=SC2086  # the flags are words
run pkg-config-build g++ $cflags -fPIC -fvisibility=hidden -O2 -shared -Werror "$tmp/src-uptime-sensor/uptime.cpp" -o "$pc_so"
echo "ok: the sensor example also builds with clang++ and with pkg-config --cflags ($cflags)"
# The C example with kiwi-agent-c.pc's flags, warnings as errors: nothing in them is C++'s.
c_cflags=$(pkg-config --cflags kiwi-agent-c) || fail "pkg-config --cflags kiwi-agent-c"
[[ $c_cflags != *std=c++* ]] || fail "kiwi-agent-c.pc gives C++ flags: $c_cflags"
pc_c_so=$tmp/pc/kiwi-sensor-files.so
# shellcheck disable=SC2086  # the flags are words
run pkg-config-c-build cc $c_cflags -fPIC -fvisibility=hidden -O2 -shared -Werror \
  "$tmp/src-files-sensor-c/files.c" -o "$pc_c_so"
out=$("$prefix/bin/kiwi-agent" --describe-plugin "$pc_c_so" 2>&1) || fail "--describe-plugin $pc_c_so: $out"
echo "ok: the C example builds with cc and pkg-config --cflags kiwi-agent-c ($c_cflags), and loads"

agent=$prefix/bin/kiwi-agent
for p in uptime status "$clang_so" "$pc_so"; do
  out=$("$agent" --describe-plugin "$p" 2>&1) || fail "--describe-plugin $p: $out"
done

# The installed agent, with the installed examples found by name in its plugin directory.
port_file=$tmp/agent.log
cat >"$tmp/agent.toml" <<EOF
[agent]
data_dir = "$tmp/data"
[http]
bind = "127.0.0.1:0"
[collector]
snapshot_path = ""
[[sensor]]
name = "uptime"
plugin = "uptime"
[[sensor]]
name = "uptime_clang"
plugin = "$clang_so"
labels = { build = "clang" }
options = { scale = 2.0 }
[[sensor]]
name = "uptime_pc"
plugin = "$pc_so"
labels = { build = "pkg-config" }
[[sensor]]
name = "files"
plugin = "files"
[[route]]
path = "/status.txt"
handler = "status"
[[route]]
path = "/api/current"
handler = "current"
[[route]]
path = "/metrics"
handler = "metrics"
EOF
# Three instances of one sensor: labels keep their series apart (docs/plugins.md, "Series
# identity"). The log exists before the agent starts: the loop below may read it before the child opens it.
: >"$port_file"
"$agent" --config "$tmp/agent.toml" 2>"$port_file" &
pid=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$port_file")
  [[ -n $port ]] && break
  kill -0 "$pid" 2>/dev/null || fail "the agent exited at start: $(cat "$port_file")"
  sleep 0.05
done
[[ -n $port ]] || fail "the agent did not start listening: $(cat "$port_file")"
base=http://127.0.0.1:$port
current=
for _ in $(seq 100); do
  current=$(curl -sf "$base/api/current" || true)
  grep -q '"sequence":[1-9]' <<<"$current" && break
  sleep 0.05
done
for s in uptime uptime_clang uptime_pc files; do
  grep -q "\"$s\":{\"plugin\":\"${s%%_*}\",\"status\":\"ok\"" <<<"$current" ||
    fail "/api/current has no ok sensor $s: $current"
done
grep -q '"name":"uptime_seconds"' <<<"$current" || fail "/api/current has no uptime_seconds"
grep -q '"name":"files_open_ratio","value":[0-9.e-]*,"unit":"ratio"' <<<"$current" ||
  fail "/api/current has no files_open_ratio from the C sensor: $current"
metrics=$(curl -sf "$base/metrics") || fail "/metrics failed"
grep -q '^# TYPE kiwi_uptime_seconds gauge$' <<<"$metrics" || fail "/metrics has no kiwi_uptime_seconds"
grep -q '^# HELP kiwi_files_max the kernel.s limit (fs.file-max)$' <<<"$metrics" ||
  fail "/metrics has no kiwi_files_max with the C sensor's HELP"
status=$(curl -sf "$base/status.txt") || fail "/status.txt failed"
for s in uptime uptime_clang uptime_pc; do
  grep -qx "$s ok 1 metrics" <<<"$status" || fail "/status.txt has no line for $s: $status"
done
grep -qx "files ok 3 metrics" <<<"$status" || fail "/status.txt has no line for files: $status"
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=
[[ $code -eq 0 ]] || fail "exit code $code after SIGTERM: $(cat "$port_file")"
echo "ok: the installed agent loaded every example (by name and by path) and served them"
