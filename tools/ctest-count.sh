#!/usr/bin/env bash
# Prints "total failed skipped" from the output of a ctest run (tools/test.sh, tools/cross-test.sh).
# ctest counts a skipped test (exit 77, tests/test_support.hpp skip_test) among the passed: it is
# counted apart here, from the "(Skipped)" ctest puts at the end of its line.
# Usage: tools/ctest-count.sh CTEST_LOG
set -euo pipefail
totals=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2 \1/p' "$1")
echo "${totals:-0 0} $(grep -c '(Skipped)$' "$1" || true)"
