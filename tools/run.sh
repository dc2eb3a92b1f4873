#!/usr/bin/env bash
# Sets up, builds (Release) and runs kiwi-agent in the foreground on its built-in default config
# (http://127.0.0.1:8095). Ctrl-C stops it cleanly. Arguments go to kiwi-agent, e.g.
#   tools/run.sh --config my.toml   (start from: build/bin/kiwi-agent --print-default-config)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh" -DKIWI_BUILD_TESTS=OFF
exec "${KIWI_BUILD_DIR:-$root/build}/bin/kiwi-agent" "$@"
