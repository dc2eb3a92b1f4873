#!/usr/bin/env bash
# The Prometheus example in config/prometheus/ is valid and its rules do what they say:
# promtool check config (which also checks the rule files it names), promtool check rules, and
# promtool test rules on rules.test.yml (input series -> expected recorded values and alerts).
# Exits 77 (ctest: Skipped) when promtool is not installed (Debian: prometheus, tools/setup.sh --test).
# Usage: tests/config/promtool-test.sh [CONFIG_DIR]   (default: config/prometheus of this tree)
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/../../config/prometheus" && pwd)}
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (install the Debian package prometheus: tools/setup.sh --test)"
  exit 77
fi
cd "$dir"
status=0
for step in "check config prometheus.yml" "check rules rules.yml" "test rules rules.test.yml"; do
  echo "promtool $step"
  # shellcheck disable=SC2086  # the step is a list of words
  if ! promtool $step; then
    echo "FAILED: promtool $step (in $dir)"
    status=1
  fi
done
exit $status
