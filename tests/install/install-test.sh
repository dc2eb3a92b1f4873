#!/usr/bin/env bash
# The install layout (README "Install"): `cmake --install` of the build tree into /usr and into
# /usr/local (each with DESTDIR) gives a tree whose agent finds its plugins on its default
# plugin_dir and runs; the tree still runs when moved elsewhere; the config, conf.d, unit and docs
# are where they belong, the unit names the installed paths, and systemd-analyze verifies it and
# rates its hardening.
# Usage: tests/install/install-test.sh BUILD_DIR PLUGIN_DIR   (ctest runs it: tests/CMakeLists.txt;
# PLUGIN_DIR is the build tree's, to count the plugins built)
set -euo pipefail
build=$1
build_plugin_dir=$2
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
built_plugins=$(find "$build_plugin_dir" -name 'kiwi-*.so' | wc -l)
((built_plugins > 0)) || fail "no plugins in $build_plugin_dir"

# Starts the agent of an installed tree on its default config, with only what a test must change
# (data_dir, snapshot_path, a free port) in a file on top, checks it serves from that tree's
# plugins, and stops it by its pid.
serves() {  # <bin/kiwi-agent> <tree root> <name for its files>
  local agent=$1 tree=$2 name=$3
  cat >"$tmp/$name.toml" <<EOF
[agent]
data_dir = "$tmp/$name-data"
[http]
bind = "127.0.0.1:0"
[collector]
snapshot_path = "$tmp/$name-run/current.json"
EOF
  : >"$tmp/$name.log"  # exists before the loop below reads it, whenever the child opens it
  (cd / && exec "$agent" --config "$tmp/$name.toml") 2>"$tmp/$name.log" &
  pid=$!
  local port=
  for _ in $(seq 200); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/$name.log")
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || fail "$agent exited at start: $(cat "$tmp/$name.log")"
    sleep 0.05
  done
  [[ -n $port ]] || fail "$agent did not start listening: $(cat "$tmp/$name.log")"
  local plugins
  plugins=$(curl -sf "http://127.0.0.1:$port/api/plugins") || fail "$name: /api/plugins failed"
  # Every plugin was loaded from the tree itself (the agent's own report is built in: no file).
  local files outside
  files=$(grep -o '"file":"[^"]\+"' <<<"$plugins" | cut -d'"' -f4)
  [[ $(wc -l <<<"$files") -eq 24 ]] || fail "$name: expected 24 plugins (13 sensors, 11 routes): $files"
  outside=$(grep -v "^$tree/" <<<"$files" || true)
  [[ -z $outside ]] || fail "$name: plugins loaded from outside $tree: $outside"
  curl -sf "http://127.0.0.1:$port/api/current" | grep -q '"cpu":{' || fail "$name: /api/current has no cpu"
  kill -TERM "$pid"
  local code=0
  wait "$pid" || code=$?
  pid=
  [[ $code -eq 0 ]] || fail "$name: exit code $code after SIGTERM: $(cat "$tmp/$name.log")"
  echo "ok: $name: served from $tree on port $port, $(wc -l <<<"$files") plugins, clean stop"
}

for prefix in /usr /usr/local; do
  name=${prefix//\//-}
  name=prefix${name}
  dest=$tmp/$name
  DESTDIR=$dest cmake --install "$build" --prefix "$prefix" >"$tmp/$name-install.log" ||
    fail "cmake --install --prefix $prefix: $(cat "$tmp/$name-install.log")"
  tree=$dest$prefix
  if [[ $prefix == /usr ]]; then sysconfdir=/etc unitdir=/lib/systemd/system; else
    sysconfdir=$prefix/etc unitdir=$prefix/lib/systemd/system
  fi
  agent=$tree/bin/kiwi-agent
  [[ -x $agent ]] || fail "$prefix: no bin/kiwi-agent"
  # Plugins where the compiled-in default plugin_dir ($ORIGIN/...) points.
  rel=$("$agent" --print-default-config | sed -n 's|^plugin_dir = "\$ORIGIN/\([^"]*\)".*|\1|p')
  [[ -n $rel ]] || fail "$prefix: the default plugin_dir is not relative to \$ORIGIN"
  count=$(find "$tree/bin/$rel" -name 'kiwi-*.so' 2>/dev/null | wc -l)
  [[ $count -eq $built_plugins ]] || fail "$prefix: $count plugins in bin/$rel, $built_plugins built"
  config=$dest$sysconfdir/kiwi-agent/kiwi-agent.toml
  [[ -f $config ]] || fail "$prefix: no $sysconfdir/kiwi-agent/kiwi-agent.toml"
  [[ -d $dest$sysconfdir/kiwi-agent/conf.d && -z $(ls -A "$dest$sysconfdir/kiwi-agent/conf.d") ]] ||
    fail "$prefix: no empty $sysconfdir/kiwi-agent/conf.d"
  unit=$dest$unitdir/kiwi-agent.service
  grep -qx "ExecStart=$prefix/bin/kiwi-agent --config $sysconfdir/kiwi-agent/kiwi-agent.toml" "$unit" ||
    fail "$prefix: $unitdir/kiwi-agent.service does not run the installed agent: $(grep ExecStart "$unit")"
  for doc in README.md api.md plugins/cpu.md handlers/metrics.md exec-recipes/nvme-wear.sh; do
    [[ -f $tree/share/doc/kiwi-agent/$doc ]] || fail "$prefix: no share/doc/kiwi-agent/$doc"
  done
  # The packaged config checks clean with the installed plugins.
  out=$("$agent" --check-config "$config" 2>&1) || fail "$prefix: --check-config $config: $out"
  grep -q ": ok (13 sensors, 11 routes" <<<"$out" || fail "$prefix: --check-config said: $out"
  echo "ok: $prefix: bin, ${count} plugins in $rel, config, conf.d, unit, docs; --check-config: ok"
  serves "$agent" "$tree" "$name"
done

# Moved to another prefix after installing, the tree still finds its plugins.
mv "$tmp/prefix-usr-local/usr/local" "$tmp/moved"
serves "$tmp/moved/bin/kiwi-agent" "$tmp/moved" moved

# The unit: systemd-analyze verify wants the programs it names, so it checks an install into a
# prefix of its own (no DESTDIR: ExecStart then names a real file).
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (tools/setup.sh --test installs systemd)"
cmake --install "$build" --prefix "$tmp/real" >/dev/null
unit=$tmp/real/lib/systemd/system/kiwi-agent.service
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
# Exposure 0 (locked down) to 10 (none); the threshold is in tenths: at most 2.0 ("OK").
security=$(systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1) ||
  fail "systemd-analyze security rates the unit above 2.0: $(tail -1 <<<"$security")"
echo "ok: the unit verifies; $(grep -o 'Overall exposure level.*' <<<"$security")"
