#!/usr/bin/env bash
# Configures and builds kiwi-agent into build/ (Release).
#   tools/build.sh [CMAKE_CONFIGURE_ARGS...] [--target TARGET...]
# Extra arguments go to cmake's configure; those after --target name what to build (default: all).
# Compiles through ccache when it is installed (tools/setup.sh installs it): a build that compiled
# a file before, in any build directory of this checkout, takes it from the cache.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KIWI_BUILD_DIR:-$root/build}
configure=() targets=()
while (($#)); do
  if [[ $1 == --target ]]; then
    shift
    targets=("$@")
    break
  fi
  configure+=("$1")
  shift
done
if command -v ccache >/dev/null && [[ ${KIWI_CCACHE:-1} != 0 ]]; then
  configure=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${configure[@]}")
  # Precompiled headers (the tests') can be cached only with these; paths relative to the
  # checkout, so another clone's or build directory's objects hit too.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${configure[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" ${targets:+--target "${targets[@]}"}
