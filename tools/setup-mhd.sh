#!/usr/bin/env bash
# Builds libmicrohttpd without TLS from Debian's own source package (the version of the installed
# libmicrohttpd-dev, with Debian's patches) into build/deps/libmicrohttpd, as a static library.
#
# Why: Debian's libmicrohttpd links GnuTLS and initialises it when it loads, which costs the agent
# about 2.4 MiB of resident memory (GnuTLS, p11-kit, nettle, gmp, ...) for TLS it never uses
# (docs/benchmarks.md). CMake uses this build when it is there (KIWI_MHD_PREFIX) and Debian's
# shared library otherwise, so a failure here only costs memory: it is reported, not fatal.
#
# Usage: tools/setup-mhd.sh [--arch ARCH] [PREFIX]   (idempotent)
#   PREFIX       default build/deps/libmicrohttpd, or build-ARCH/deps/libmicrohttpd with --arch
#   --arch ARCH  cross-build for a Debian architecture (arm64, armhf) with its cross compiler
#                (crossbuild-essential-ARCH), at the version of libmicrohttpd-dev:ARCH (tools/setup.sh
#                --arch ARCH installs both; tools/cross-test.sh uses it)
# Needs: the libmicrohttpd-dev package (for the version), dpkg-dev, a C compiler, make, and the
# Debian mirror the system's apt already uses (source packages come from the same place).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "setup-mhd: $*" >&2; }
# The native build asks for the host architecture's package by name: with arm64 or armhf also
# installed (multiarch), a bare name matches each of them and the versions run together.
arch="" package=libmicrohttpd-dev:$(dpkg --print-architecture) configure_host=()
if [[ ${1:-} == --arch ]]; then
  [[ -n ${2:-} ]] || { say "--arch needs a Debian architecture, e.g. arm64"; exit 2; }
  arch=$2 package=libmicrohttpd-dev:$arch
  shift 2
  # The GNU triplet of the architecture (aarch64-linux-gnu): configure then uses <triplet>-gcc.
  triplet=$(dpkg-architecture -a "$arch" -qDEB_HOST_GNU_TYPE 2>/dev/null) ||
    { say "unknown Debian architecture '$arch'"; exit 2; }
  configure_host=(--host="$triplet")
fi
prefix=${1:-$root/build${arch:+-$arch}/deps/libmicrohttpd}
version=$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null || true)
# Patched so that the errors libmicrohttpd answers by itself (a malformed request, a bad
# Content-Length, an HTTP version it does not speak, headers too large) have the agent's JSON error
# body instead of an HTML page (docs/api.md "Errors"). The stamp names the patch too: a changed
# patch builds again.
patch_file=$root/tools/mhd-json-errors.patch
stamp="$version json-errors $(sha256sum "$patch_file" | cut -c1-16)"

if [[ -f $prefix/.complete && $(<"$prefix/.complete") == "$stamp" ]]; then
  exit 0
fi
[[ -n $version ]] || { say "$package is not installed; skipped (run tools/setup.sh${arch:+ --arch $arch})"; exit 0; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  say "$1; the build uses Debian's libmicrohttpd (with GnuTLS: about 2.4 MiB more resident memory). Log: $work/log"
  cp "$work/log" "${prefix%/*}/libmicrohttpd-build.log" 2>/dev/null || true
  exit 0
}
mkdir -p "${prefix%/*}"
: >"$work/log"

# deb-src lines for the mirrors and suites apt already uses, in a private apt state directory: the
# system's sources and package lists are not touched.
apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null |
  sort -u | while read -r uri suite component; do echo "deb-src $uri $suite $component"; done >"$work/sources.list"
[[ -s $work/sources.list ]] || fail "no apt sources found"
mkdir -p "$work/lists/partial" "$work/archives/partial"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives" -o "APT::Sandbox::User=root")
say "fetching the Debian source package libmicrohttpd $version"
(cd "$work" && apt-get "${apt_opts[@]}" -qq update && apt-get "${apt_opts[@]}" -qq source --download-only "libmicrohttpd=$version") \
  >>"$work/log" 2>&1 || fail "could not fetch the source package"
# apt checked the files against the signed archive index; unpack with Debian's patches applied.
(cd "$work" && dpkg-source --no-check -x ./*.dsc src) >>"$work/log" 2>&1 || fail "could not unpack the source package"
patch -d "$work/src" -p1 --forward <"$patch_file" >>"$work/log" 2>&1 ||
  fail "$patch_file does not apply to libmicrohttpd $version"

say "building libmicrohttpd $version without TLS${arch:+ for $arch} (about a minute)"
# Only what the agent uses: no TLS, no digest/basic auth, no POST processor, no upgrade, no cookies.
(cd "$work/src" &&
  ./configure "${configure_host[@]}" --prefix="$prefix" --disable-https --without-gnutls --disable-shared --enable-static \
    --disable-doc --disable-examples --disable-curl --disable-postprocessor --disable-dauth \
    --disable-bauth --disable-httpupgrade --disable-cookie &&
  make -j "$(nproc)" &&
  rm -rf "$prefix" && make install) >>"$work/log" 2>&1 || fail "the build failed"
echo "$stamp" >"$prefix/.complete"
say "installed in $prefix"
