#!/usr/bin/env bash
# kiwi-agent fault and hostile-input campaign (issue 16): kill -9, disk full, corrupt and foreign
# databases, slowloris, 1,000 idle connections, the malformed-HTTP and traversal corpora
# (tests/faults/), sensor faults and RSS, each against the real binary on 127.0.0.1, each bounded
# in time and count, in its own temp data directory. Prints one Markdown table line per case:
# what was done, the measured figures, the goal and pass/fail. The cases are in
# tools/faults/faults.py (Python 3 standard library only); this script finds or builds the agent.
#
# Usage: tools/faults.sh [--build-dir DIR] [--no-build] [--quick] [--case NAME]... [--doc FILE]
#                        [--keep]
#   --build-dir DIR  agent build tree (default build/; configured Release if it does not exist,
#                    an existing tree is only rebuilt, never reconfigured)
#   --no-build       use the binaries already in the build tree
#   --quick          fewer iterations and shorter durations (about 2 minutes, for CI)
#   --case NAME      run only this case (kill9 diskfull corrupt slowloris idle malformed traversal
#                    sensors rss); may be repeated
#   --doc FILE       write the table of the run into FILE (docs/reliability.md), with the date,
#                    commit, machine and command
#   --keep           keep the temp directories (logs, databases) for a look afterwards
#   --year-db FILE   a kiwi.db holding a year of history (build/bin/kiwi-bench-year DIR makes
#                    DIR/kiwi.db): the corrupt case also damages a page in its middle
# The full run takes about 6 minutes. diskfull mounts a tmpfs, so it needs root (else skipped).
# Exit status: 0 when every line passed, 1 when one failed (a defect still open), 2 when the
# campaign could not run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$root/build no_build=0 pass=()
invocation="tools/faults.sh${*:+ $*}"
while (($#)); do
  case $1 in
    --build-dir) build_dir=$2; shift ;;
    --no-build) no_build=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1") ;;
  esac
  shift
done
if ((!no_build)); then
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$build_dir" -j "$(nproc)" >"$build_dir/faults-build.log" 2>&1 ||
    { tail -30 "$build_dir/faults-build.log" >&2; echo "faults.sh: build failed" >&2; exit 2; }
fi
agent=$build_dir/bin/kiwi-agent
[[ -x $agent ]] || { echo "faults.sh: no agent binary at $agent (build it: tools/build.sh)" >&2; exit 2; }
exec python3 "$root/tools/faults/faults.py" --agent-bin "$agent" \
  --plugin-dir "$build_dir/lib/kiwi-agent" --command "$invocation" ${pass[@]+"${pass[@]}"}
