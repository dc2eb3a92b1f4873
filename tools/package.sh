#!/usr/bin/env bash
# Builds the Debian packages build/kiwi-agent_<version>_<arch>.deb (the agent) and
# build/kiwi-agent-dev_<version>_<arch>.deb (the plugin SDK) from this source tree, with
# dpkg-dev's own tools and no debhelper or CPack: a Release build for the prefix /usr (without the
# tests), `cmake --install` into a staging tree with DESTDIR, the SDK's files moved to the -dev
# package's tree (packaging/debian/kiwi-agent-dev.install), stripped binaries, the copyright file
# and changelog, Depends computed by dpkg-shlibdeps from the libraries the binaries link, the
# maintainer scripts in packaging/debian/, then `dpkg-deb --root-owner-group --build` and lintian.
# docs/packaging.md describes the package and its lintian results; tools/package-test.sh installs
# them on a fresh Debian 12 and runs them.
#
# Usage: tools/package.sh [--arch amd64|arm64|armhf] [--no-lintian]
#   --arch ARCH    the Debian architecture to build for (default: this machine's). arm64 on an
#                  amd64 machine is a cross build with Debian's cross compiler and the arm64
#                  libraries through multiarch (cmake/toolchain-aarch64-linux-gnu.cmake, the
#                  toolchain tools/cross-test.sh uses; tools/setup.sh --arch arm64 installs it)
#   --no-lintian   skip the lintian run at the end
#
# The version is CMake's project version (project() in CMakeLists.txt), read from the configured
# build; packaging/debian/changelog must have an entry for it. Build tree: build/package-<arch>
# (not build/, which tools/build.sh and the tests use). Installs what it needs with
# tools/install-packages.sh and tools/setup.sh (idempotent). Builds with at most 2 jobs
# (KIWI_JOBS to change). On this project's 2-core VM: 149 s on a brand-new Debian 12
# (tools/fresh-check.sh -- tools/package.sh: packages, libmicrohttpd, npm, the build), 90-100 s in
# a new build tree, under 10 s when nothing changed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '[package %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "error: $*"; exit 1; }

host_arch=$(dpkg --print-architecture)
arch=$host_arch lintian=1
while (($#)); do
  case $1 in
    --arch) [[ -n ${2:-} ]] || die "--arch needs amd64 or arm64"; arch=$2; shift ;;
    --arch=*) arch=${1#--arch=} ;;
    --no-lintian) lintian=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
case $arch in amd64 | arm64 | armhf) ;; *) die "unsupported architecture '$arch' (amd64, arm64 or armhf)" ;; esac
started=$(date +%s)

# What building and checking the package needs (dpkg-dev first: dpkg-architecture is in it).
"$root/tools/install-packages.sh" dpkg-dev binutils $( ((lintian)) && echo lintian)
# The architecture's names: the GNU triplet of its tools (aarch64-linux-gnu-strip) and its
# multiarch directory (/usr/lib/aarch64-linux-gnu).
gnu_type=$(dpkg-architecture -a "$arch" -qDEB_HOST_GNU_TYPE 2>/dev/null)
multiarch=$(dpkg-architecture -a "$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)
cross=0
[[ $arch == "$host_arch" ]] || cross=1
((cross)) && "$root/tools/install-packages.sh" "binutils-$gnu_type"

# What building the agent needs.
if ((cross)); then
  "$root/tools/setup.sh" --arch "$arch"
else
  "$root/tools/setup.sh"
fi

build=$root/build/package-$arch
out_dir=$root/build
# The prefix /usr gives the multiarch library directory, lib/<multiarch>, native or cross
# (CMakeLists.txt); the staging tree is checked for it below.
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DKIWI_BUILD_TESTS=OFF)
if ((cross)); then
  toolchain=$root/cmake/toolchain-$gnu_type.cmake
  [[ -f $toolchain ]] || die "no toolchain file $toolchain for $arch"
  # libmicrohttpd without TLS, cross-built by tools/setup-mhd.sh --arch (tools/setup.sh --arch).
  cmake_args+=("-DCMAKE_TOOLCHAIN_FILE=$toolchain" "-DKIWI_MHD_PREFIX=$root/build-$arch/deps/libmicrohttpd")
fi
# Debian's hardening flags (dpkg-buildflags with hardening=+all: stack protector, fortified libc
# calls, format checks, full RELRO with immediate binding), without its -O2 and -g: the Release
# build keeps its own optimisation and has no debug information to strip.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
buildflag() { (cd "$root" && dpkg-architecture -a "$arch" -c dpkg-buildflags --get "$1" 2>/dev/null); }
cxxflags=""
for flag in $(buildflag CPPFLAGS) $(buildflag CXXFLAGS); do
  [[ $flag == -g || $flag == -O? ]] || cxxflags+="${cxxflags:+ }$flag"
done
ldflags=$(buildflag LDFLAGS)
cmake_args+=("-DCMAKE_CXX_FLAGS=$cxxflags" "-DCMAKE_EXE_LINKER_FLAGS=$ldflags"
  "-DCMAKE_SHARED_LINKER_FLAGS=$ldflags" "-DCMAKE_MODULE_LINKER_FLAGS=$ldflags")

if [[ -n $(git -c safe.directory="$root" -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  say "note: the source tree has uncommitted changes; they are in the package"
fi
if ((cross)); then say "configuring $build ($arch, cross-compiled with $gnu_type-g++)"; else say "configuring $build ($arch)"; fi
cmake -S "$root" -B "$build" "${cmake_args[@]}" >"$build.configure.log" 2>&1 ||
  { tail -30 "$build.configure.log" >&2; die "cmake configure failed (log: $build.configure.log)"; }
grep -E '^-- libmicrohttpd:' "$build.configure.log" | sed 's/^-- /  /' >&2 || true
say "building (-j${KIWI_JOBS:-2})"
cmake --build "$build" -j "${KIWI_JOBS:-2}" >"$build.build.log" 2>&1 ||
  { tail -40 "$build.build.log" >&2; die "the build failed (log: $build.build.log)"; }

# One source for the version: project() in CMakeLists.txt, as the configured build has it.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
[[ -n $version ]] || die "no CMAKE_PROJECT_VERSION in $build/CMakeCache.txt"
changelog_version=$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Version)
[[ $changelog_version == "$version" ]] ||
  die "packaging/debian/changelog's latest entry is $changelog_version, the project is $version: add an entry for $version (dch -v $version)"

# The staging trees in debian/<package>, where dpkg-shlibdeps and dpkg-gencontrol expect a
# package's files (as debhelper lays them out): cmake --install into the agent's, then the SDK moved
# into kiwi-agent-dev's.
work=$build/deb
pkg=$work/debian/kiwi-agent
dev=$work/debian/kiwi-agent-dev
rm -rf "$work"
mkdir -p "$work/debian" "$dev"
DESTDIR=$pkg cmake --install "$build" --prefix /usr >"$build.install.log" 2>&1 ||
  { tail -20 "$build.install.log" >&2; die "cmake --install failed (log: $build.install.log)"; }
[[ -x $pkg/usr/bin/kiwi-agent ]] || die "no usr/bin/kiwi-agent in the staging tree"
plugin_dir=$pkg/usr/lib/$multiarch/kiwi-agent
compgen -G "$plugin_dir/kiwi-*.so" >/dev/null || die "no plugins in ${plugin_dir#"$pkg"}"

# kiwi-agent-dev: what packaging/debian/kiwi-agent-dev.install names, as dh_install reads it (a
# glob, and a destination directory for what is not from the install tree): moved from the install
# tree (with the directories it leaves empty), else copied from the source tree. A line that
# matches nothing is an error, so the -dev package cannot silently lose a file.
while read -r src dest; do
  [[ -z $src || $src == '#'* ]] && continue
  # shellcheck disable=SC2016  # the literal ${DEB_HOST_MULTIARCH} of the .install file
  src=${src//'${DEB_HOST_MULTIARCH}'/$multiarch}
  # shellcheck disable=SC2016
  dest=${dest//'${DEB_HOST_MULTIARCH}'/$multiarch}
  if matches=$(cd "$pkg" && compgen -G "$src"); then
    while IFS= read -r m; do
      target=$dev/${dest:-$(dirname "$m")}
      mkdir -p "$target"
      mv "$pkg/$m" "$target/"
      (cd "$pkg" && rmdir -p --ignore-fail-on-non-empty "$(dirname "$m")")
    done <<<"$matches"
  elif matches=$(cd "$root" && compgen -G "$src"); then
    [[ -n $dest ]] || die "kiwi-agent-dev.install: $src is not in the install tree, and has no destination"
    mkdir -p "$dev/$dest"
    while IFS= read -r m; do cp -R "$root/$m" "$dev/$dest/"; done <<<"$matches"
  else
    die "kiwi-agent-dev.install: nothing matches $src (in the install tree or the source tree)"
  fi
done <"$root/packaging/debian/kiwi-agent-dev.install"
[[ -f $dev/usr/include/kiwi/plugin.h && -f $dev/usr/lib/$multiarch/cmake/KiwiAgent/KiwiAgentConfig.cmake ]] ||
  die "kiwi-agent-dev has no kiwi/plugin.h or KiwiAgentConfig.cmake"
left=$(cd "$pkg" && { find usr/include usr/lib/"$multiarch"/cmake usr/lib/"$multiarch"/pkgconfig 2>/dev/null || true; })
[[ -z $left ]] || die "SDK files left in kiwi-agent (not in kiwi-agent-dev.install): $(tr '\n' ' ' <<<"$left")"

# Documentation: the copyright file and the changelog. The version has no Debian revision (the
# project packages itself: a native package), so Policy 12.7 names it changelog.gz, not
# changelog.Debian.gz.
doc=$pkg/usr/share/doc/kiwi-agent
install -m 644 "$root/packaging/debian/copyright" "$doc/copyright"
gzip -9n <"$root/packaging/debian/changelog" >"$doc/changelog.gz"
# The same in kiwi-agent-dev's own directory (Policy 12.5: every package has its copyright file).
mkdir -p "$dev/usr/share/doc/kiwi-agent-dev"
cp "$doc/copyright" "$doc/changelog.gz" "$dev/usr/share/doc/kiwi-agent-dev/"
# The manual page, dated and versioned by the changelog entry.
mkdir -p "$pkg/usr/share/man/man1"
sed -e "s/@VERSION@/$version/" -e "s/@DATE@/$(date -u -d "@$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Timestamp)" +%Y-%m-%d)/" \
  -e '/^\.\\"/d' "$root/packaging/debian/kiwi-agent.1" | gzip -9n >"$pkg/usr/share/man/man1/kiwi-agent.1.gz"

# Strip as dh_strip does (the symbol tables and the .comment and .note sections; the dynamic
# symbols the plugins are loaded by stay), with the architecture's strip.
strip="strip"
((cross)) && strip=$gnu_type-strip
is_elf() { [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }
elf_files=()
while IFS= read -r -d '' f; do
  is_elf "$f" && elf_files+=("$f")
done < <(find "$pkg" "$dev" -type f -print0)
for f in "${elf_files[@]}"; do [[ $f != "$dev"/* ]] || die "a binary in kiwi-agent-dev: ${f#"$dev"}"; done
for f in "${elf_files[@]}"; do
  if [[ $f == *.so ]]; then
    "$strip" --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
  else
    "$strip" --remove-section=.comment --remove-section=.note "$f"
  fi
done

# Permissions as dh_fixperms sets them: directories 755, files 644, programs 755; plugins are
# loaded, not run, so 644 too.
find "$pkg" "$dev" -type d -exec chmod 755 {} +
find "$pkg" "$dev" -type f -exec chmod 644 {} +
chmod 755 "$pkg/usr/bin/"*

# DEBIAN/: control (Depends from dpkg-shlibdeps, for the architecture's libraries: DEB_HOST_ARCH
# makes it read the arm64 libraries in /usr/lib/aarch64-linux-gnu and use aarch64-linux-gnu-objdump),
# conffiles, md5sums and the maintainer scripts.
cp "$root/packaging/debian/control" "$root/packaging/debian/changelog" "$work/debian/"
mkdir -p "$pkg/DEBIAN"
export DEB_HOST_ARCH=$arch
(cd "$work" && dpkg-shlibdeps -Tdebian/kiwi-agent.substvars "${elf_files[@]#"$work/"}") 2>"$build.shlibdeps.log" ||
  { cat "$build.shlibdeps.log" >&2; die "dpkg-shlibdeps failed"; }
if [[ -s $build.shlibdeps.log ]]; then
  say "dpkg-shlibdeps said:"
  sed 's/^/  /' "$build.shlibdeps.log" >&2
fi
# Builds and packages run without root (Rules-Requires-Root: no): the files belong to root in the
# archive through --root-owner-group.
(cd "$work" && dpkg-gencontrol -pkiwi-agent -Pdebian/kiwi-agent -Tdebian/kiwi-agent.substvars) ||
  die "dpkg-gencontrol failed"
find "$pkg/etc" -type f -printf '/etc/%P\n' | sort >"$pkg/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 755 "$root/packaging/debian/$script" "$pkg/DEBIAN/$script"
done
# kiwi-agent-dev: its control file (Depends: the same version of kiwi-agent, ${binary:Version}),
# no conffiles, no maintainer scripts.
mkdir -p "$dev/DEBIAN"
(cd "$work" && dpkg-gencontrol -pkiwi-agent-dev -Pdebian/kiwi-agent-dev) || die "dpkg-gencontrol (kiwi-agent-dev) failed"
for tree in "$pkg" "$dev"; do
  (cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
    >"$tree/DEBIAN/md5sums"
done
chmod 644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums" "$dev/DEBIAN/control" "$dev/DEBIAN/md5sums"

# Reproducible: every file dated at the changelog entry (dpkg-deb dates the control files so too).
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Timestamp)
export SOURCE_DATE_EPOCH
find "$pkg" "$dev" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$out_dir/kiwi-agent_${version}_$arch.deb
dev_deb=$out_dir/kiwi-agent-dev_${version}_$arch.deb
rm -f "$deb" "$dev_deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
dpkg-deb --root-owner-group -Zxz --build "$dev" "$dev_deb" >/dev/null
for d in "$deb" "$dev_deb"; do
  say "built ${d#"$root"/}: $(stat -c %s "$d") bytes, Installed-Size $(dpkg-deb -f "$d" Installed-Size) KiB"
  say "  Depends: $(dpkg-deb -f "$d" Depends)"
done

status=0
if ((lintian)); then
  say "lintian (errors, warnings, info and pedantic notes; docs/packaging.md explains each):"
  # lintian exits non-zero on errors only (its default --fail-on error).
  # Not as root, which lintian advises against: as nobody, on a copy it can read.
  lint=(lintian --display-info --pedantic)
  debs_for_lintian=("$deb" "$dev_deb")
  if [[ $(id -u) -eq 0 ]] && id nobody >/dev/null 2>&1; then
    lint_tmp=$(mktemp -d)
    trap 'rm -rf "$lint_tmp"' EXIT
    cp "$deb" "$dev_deb" "$lint_tmp/" && chmod 755 "$lint_tmp" && chmod 644 "$lint_tmp/"*.deb
    lint=(setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$lint_tmp" TMPDIR="$lint_tmp" "${lint[@]}")
    debs_for_lintian=("$lint_tmp/${deb##*/}" "$lint_tmp/${dev_deb##*/}")
  fi
  (cd / && "${lint[@]}" "${debs_for_lintian[@]}") >"$build.lintian.log" 2>&1 || status=$?
  if [[ -s $build.lintian.log ]]; then sed 's/^/  /' "$build.lintian.log" >&2; else say "  (nothing)"; fi
  ((status == 0)) || say "lintian reported errors (exit $status)"
fi
say "done in $(($(date +%s) - started)) s"
exit "$status"
