#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet, with apt-get (through sudo when
# not root). Idempotent: packages already installed are skipped, and apt is not touched at all when
# nothing is missing. A name with an architecture (libsqlite3-dev:arm64) is a multiarch package:
# its architecture is added to dpkg first if it is not there yet (dpkg --add-architecture).
# The one place the setup scripts install from (tools/setup.sh, tools/setup-web.sh).
# Usage: tools/install-packages.sh PACKAGE...
set -euo pipefail

# Installed for the architecture asked for (the machine's own when none is named) or for all: with
# multiarch, libsqlite3-dev:arm64 alone does not make libsqlite3-dev installed.
native=$(dpkg --print-architecture)
installed() {  # <package[:arch]>
  local name=${1%%:*} want=$native
  [[ $1 == *:* ]] && want=${1##*:}
  dpkg-query -W -f='${Architecture} ${Status}\n' "$name" 2>/dev/null |
    grep -qE "^($want|all) install ok installed$"
}
missing=()
for p in "$@"; do
  installed "$p" || missing+=("$p")
done
((${#missing[@]} > 0)) || exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
  sudo=(sudo)
fi
known=" $(dpkg --print-architecture) $(dpkg --print-foreign-architectures | tr '\n' ' ') "
for p in "${missing[@]}"; do
  [[ $p == *:* ]] || continue
  arch=${p##*:}
  [[ $known == *" $arch "* ]] && continue
  echo "setup: adding the architecture $arch to dpkg (multiarch)" >&2
  "${sudo[@]}" dpkg --add-architecture "$arch"
  known+="$arch "
done
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
