#!/usr/bin/env bash
# Sets up, builds (Release) and runs kiwi-agent in the foreground (http://127.0.0.1:8095). Ctrl-C
# stops it cleanly.
#
# Without arguments it runs on kiwi-local/kiwi-agent.toml, which it makes on the first run: the
# built-in defaults, with the history in kiwi-data/, the snapshot file in kiwi-local/, and the
# drop-ins of kiwi-local/conf.d/*.toml included, so that a sensor or a route can be added as a
# file and applied without a restart:
#   build/bin/kiwi-agent --reload --config kiwi-local/kiwi-agent.toml
# (--reload signals the agent running on that file, found by its snapshot file's lock). The file
# is yours once made: later runs use it as it is. Arguments are passed to kiwi-agent instead,
# e.g. tools/run.sh --config my.toml (start from: build/bin/kiwi-agent --print-default-config).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh" -DKIWI_BUILD_TESTS=OFF
agent=${KIWI_BUILD_DIR:-$root/build}/bin/kiwi-agent
(($#)) && exec "$agent" "$@"

local_dir=$root/kiwi-local
config=$local_dir/kiwi-agent.toml
mkdir -p "$local_dir/conf.d"
if [[ ! -f $config ]]; then
  cat >"$config" <<TOML
# Made by tools/run.sh on its first run; yours to edit. The built-in defaults apply to everything
# not set here (build/bin/kiwi-agent --print-default-config shows them all).
[agent]
data_dir = "$root/kiwi-data"          # the history (kiwi.db)
include = ["conf.d/*.toml"]           # drop-ins: more [[sensor]] and [[route]] entries, one per file

[collector]
snapshot_path = "$local_dir/current.json"   # the latest sample for scripts; its lock names the agent
TOML
fi
cat >&2 <<MSG
tools/run.sh: running on $config
  add a sensor or a route: a file in $local_dir/conf.d/ (e.g. a [[sensor]] of plugin "exec")
  apply an edit:           $agent --reload --config $config
MSG
exec "$agent" --config "$config"
