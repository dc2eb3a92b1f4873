#!/usr/bin/env bash
# kiwi-agent benchmark: the HTTP matrix against a ceiling server, start-up time, history body
# size, --keepalive, --soak, --idle, --reload, --disk, --footprint, --scale, --all and
# --report-only. The harness is tools/bench/bench.py (Debian's Python 3, standard library only):
# each mode writes one JSON line per measurement under build/bench/results/ (quick:
# results-quick/) and tools/bench/report.py renders docs/benchmarks.md from them.
# `tools/bench/run.sh --help` gives the modes and options.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Debian's interpreter when there is one (not a python3 that a version manager put first on PATH).
py=/usr/bin/python3
[[ -x $py ]] || py=$(command -v python3) || { echo "run.sh: python3 is missing" >&2; exit 1; }
exec "$py" "$here/bench.py" "$@"
