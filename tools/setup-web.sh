#!/usr/bin/env bash
# Installs what the dashboard needs to build, and with --test what its browser tests need:
#   - Node.js and npm (Debian packages), to install the npm packages pinned in
#     tools/web/package-lock.json: uPlot (embedded in the dashboard plugin) and playwright-core;
#   - with --test, Debian's chromium, which the browser tests drive headless.
# Idempotent: a tool already on the machine is skipped (apt is not touched when nothing is
# missing), and `npm ci` runs only when tools/web/node_modules is missing or older than the lock
# file. Called by tools/setup.sh; can be run on its own.
# Usage: tools/setup-web.sh [--test]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
web=$root/tools/web

# By command, not by package name: a Node.js from elsewhere (e.g. a nodejs package that bundles
# npm) is used as it is, instead of installing Debian's npm next to it.
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [[ "${1:-}" == "--test" ]] && [[ ! -x /usr/bin/chromium ]]; then
  missing+=(chromium)
fi

"$root/tools/install-packages.sh" "${missing[@]}"

# npm writes node_modules/.package-lock.json on every install: older than the lock file means the
# pinned versions changed since.
marker=$web/node_modules/.package-lock.json
if [[ ! -f "$marker" || "$web/package-lock.json" -nt "$marker" ]]; then
  echo "setup-web: npm ci in tools/web" >&2
  (cd "$web" && npm ci --no-audit --no-fund --loglevel=error)
fi
