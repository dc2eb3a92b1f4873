#!/usr/bin/env bash
# Installs the Debian packages on a brand-new Debian 12 and checks them as a user would meet them: a
# minimal root made by mmdebstrap (--variant=apt), `apt-get install ./kiwi-agent_*.deb` from the
# Debian mirrors, then:
#   1. without systemd in the root: `kiwi-agent --version`; `--check-config` on the packaged
#      configuration (as nobody); the unit's ExecStart, with its Environment=, run as nobody from /
#      with /var/lib/kiwi-agent and /run/kiwi-agent made as StateDirectory= and RuntimeDirectory=
#      would, in a network namespace of its own (loopback only, so port 8095 is free whatever runs
#      on this machine): /api/health and /api/current answer 200, it writes nothing but those two
#      directories, its RSS after 5 s, SIGTERM stops it with exit code 0; the SDK: kiwi-agent-dev
#      with cmake, g++, make and pkgconf, every example it ships built as nobody against it with
#      find_package(KiwiAgent) (the C++ sensor also with pkg-config alone), loaded with
#      --describe-plugin, one installed with `cmake --install` and found by name; then
#      `apt-get purge` and `apt-get autoremove --purge` leave the root as it was before the install;
#   2. with systemd installed (the package only suggests it): the package again;
#      `systemd-analyze verify` and `systemd-analyze security --offline=true --threshold=20` on
#      the unit; then the root booted with `systemd-nspawn -b` (private network) and, in it,
#      `systemctl enable --now kiwi-agent`: active (running) only once the agent sent READY=1
#      (Type=notify), serving, every sensor ok or no_data under the unit's sandbox (the clock
#      sensor ok: its adjtimex passes the unit's system call filter), RSS,
#      `systemctl reload`, a conf.d drop-in with an exec sensor (a shell script) and a cgi route
#      (a shell CGI program) applied by `systemctl reload` and working under the sandbox (the
#      sensor ok with its metrics, the route 200 with the program's body), a bad configuration
#      (fails with exit code 2 and its file:line:col in
#      the journal, not restarted), the watchdog (an agent stopped with SIGSTOP is killed and
#      restarted; a drop-in shortens WatchdogSec to 2 s), `apt-get remove` (stops it with exit code
#      0, keeps the configuration and the history) and `apt-get purge` (leaves nothing). Without
#      nspawn (--no-nspawn, or a foreign architecture: systemd as PID 1 under qemu-user is not
#      tried) the same remove and purge checks run in the chroot after an offline
#      `systemctl enable`.
# Not part of tools/test.sh (it takes minutes and the mirrors). Exit status non-zero on any
# failure; prints its wall time (about 3 minutes for amd64, 50 s of it installing cmake and g++). Needs root; installs mmdebstrap,
# systemd-container and curl (for arm64 also qemu-user-static and arch-test) on this machine if
# missing. For --arch arm64 (or armhf) the root is an arm64 (armhf) Debian run through qemu-user
# (qemu-user-static): its binfmt handler is registered for the run if it is not already, and
# unregistered again.
#
# Usage: sudo tools/package-test.sh [--arch amd64|arm64|armhf] [--deb FILE [--dev-deb FILE]] [--no-nspawn] [--keep] [DIR]
#   --arch ARCH   the package's architecture (default: this machine's)
#   --deb FILE    the agent's package to test (default: build both with tools/package.sh --arch ARCH)
#   --dev-deb FILE  the SDK's package (default: kiwi-agent-dev_<version>_<arch>.deb next to --deb)
#   --no-nspawn   skip booting the root with systemd-nspawn
#   --keep        keep the root afterwards (unmounted): sudo chroot DIR /bin/bash
#   DIR           where to make the root: a new or empty directory (default: under /var/tmp)
# The output goes to DIR.log as well.
set -euo pipefail
{ # one block: bash reads all of it before it runs, so an edit during a run does not change it

repo=$(cd "$(dirname "$0")/.." && pwd)
started=$(date +%s)
say() { printf '[package-test %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }
ok() { say "ok: $*"; }
now_ms() { date +%s%3N; }
since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.2f", (b - a) / 1000 }'; } # seconds since a now_ms
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# shellcheck source=SCRIPTDIR/lib/debian-root.sh
source "$repo/tools/lib/debian-root.sh"

host_arch=$(dpkg --print-architecture)
arch=$host_arch deb="" dev_deb="" nspawn=1 keep=0 dir=""
while (($#)); do
  case $1 in
    --arch) [[ -n ${2:-} ]] || die "--arch needs amd64, arm64 or armhf"; arch=$2; shift ;;
    --deb) [[ -n ${2:-} ]] || die "--deb needs a file"; deb=$(realpath "$2"); shift ;;
    --dev-deb) [[ -n ${2:-} ]] || die "--dev-deb needs a file"; dev_deb=$(realpath "$2"); shift ;;
    --no-nspawn) nspawn=0 ;;
    --keep) keep=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z $dir ]] || die "one directory only"; dir=$1 ;;
  esac
  shift
done
[[ $(id -u) -eq 0 ]] || die "needs root (mmdebstrap, chroot, mounts, namespaces): sudo $0"
case $arch in
  amd64) qemu_cpu=x86_64 ;;
  arm64) qemu_cpu=aarch64 ;;
  armhf) qemu_cpu=arm ;;
  *) die "unsupported architecture '$arch' (amd64, arm64 or armhf)" ;;
esac
foreign=0
[[ $arch == "$host_arch" ]] || foreign=1
((foreign)) && nspawn=0

# --- state for the clean-up ------------------------------------------------------------------
agent_pid="" netns_pid="" nspawn_pid="" binfmt_registered=0 nspawn_run_dirs=()
root=""
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  local status=$? p
  trap '' INT TERM HUP
  for p in $agent_pid $netns_pid; do kill -TERM "$p" 2>/dev/null || true; done
  if [[ -n $nspawn_pid ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid" 2>/dev/null || true # nspawn halts the container on SIGTERM
    for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$nspawn_pid" 2>/dev/null || true
  fi
  for p in $agent_pid $netns_pid $nspawn_pid; do wait "$p" 2>/dev/null || true; done
  # What systemd-nspawn leaves in this machine's /run when it is not a tmpfs, if it made it.
  for p in "${nspawn_run_dirs[@]}"; do rmdir "$p" 2>/dev/null || true; done
  # The files next to the root but its log.
  [[ -n $root ]] && rm -f "$root.marker" "$root".files.* "$root.current.json" "$root.apt.log" \
    "$root.agent.log" "$root.nspawn.log" "$root.mmdebstrap.log"
  if [[ -n $root && -d $root ]]; then
    if ((keep)); then
      root_stop_processes
      root_unmount_all || { say "error: still mounted under $root"; status=1; }
      say "kept the root: $root (chroot $root /bin/bash; remove: rm -rf --one-file-system $root)"
    else
      root_remove || status=1
    fi
  fi
  if ((binfmt_registered)); then
    echo -1 >/proc/sys/fs/binfmt_misc/qemu-$qemu_cpu || true
    say "unregistered the qemu-$qemu_cpu binfmt handler again"
  fi
  say "wall time $(($(date +%s) - started)) s; $( ((status == 0)) && echo "all checks passed" || echo "FAILED (status $status)")"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- the package ----------------------------------------------------------------------------
if [[ -z $deb ]]; then
  say "building the package (tools/package.sh --arch $arch)"
  "$repo/tools/package.sh" --arch "$arch" --no-lintian
  version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$repo/build/package-$arch/CMakeCache.txt")
  deb=$repo/build/kiwi-agent_${version}_$arch.deb
fi
[[ -f $deb ]] || die "no package $deb"
[[ -n $dev_deb ]] || dev_deb=$(dirname "$deb")/kiwi-agent-dev_$(dpkg-deb -f "$deb" Version)_$arch.deb
[[ -f $dev_deb ]] || die "no package $dev_deb (the SDK; --dev-deb FILE)"
for d in "$deb" "$dev_deb"; do
  [[ $(dpkg-deb -f "$d" Architecture) == "$arch" ]] || die "$d is not an $arch package"
done
[[ $(dpkg-deb -f "$dev_deb" Package) == kiwi-agent-dev && $(dpkg-deb -f "$dev_deb" Version) == "$(dpkg-deb -f "$deb" Version)" ]] ||
  die "$dev_deb is not kiwi-agent-dev of the agent's version $(dpkg-deb -f "$deb" Version)"
deb_name=${deb##*/}
dev_deb_name=${dev_deb##*/}
for d in "$deb" "$dev_deb"; do
  say "testing ${d##*/} ($(stat -c %s "$d") bytes, Installed-Size $(dpkg-deb -f "$d" Installed-Size) KiB)"
done

# --- the root -------------------------------------------------------------------------------
if [[ -n $dir ]]; then
  [[ ! -e $dir || -d $dir ]] || die "$dir is not a directory"
  mkdir -p "$dir"
  root=$(realpath "$dir")
  [[ -z $(ls -A "$root") ]] || { root=""; die "$dir is not empty (give a new or empty directory)"; }
else
  root=$(mktemp -d /var/tmp/kiwi-package-test.XXXXXX)
fi
[[ $root != / && $root != "$repo" && $repo != "$root"/* ]] || { root=""; die "refusing to use $dir as the root"; }
[[ $root =~ ^/[A-Za-z0-9._/+-]+$ ]] || { root=""; die "the root's path may only have letters, digits and ._/+-"; }
log=$root.log
: >"$log"
exec > >(tee -a "$log") 2>&1

needs=(mmdebstrap curl)
((nspawn)) && needs+=(systemd-container)
((foreign)) && needs+=(qemu-user-static arch-test) # arch-test: mmdebstrap checks the emulation with it
"$repo/tools/install-packages.sh" "${needs[@]}"

if ((foreign)); then
  # mmdebstrap runs the arm64 packages' maintainer scripts, and this script the arm64 programs,
  # through the kernel's binfmt_misc handler for arm64 ELF files (F: qemu is opened now, so it
  # also runs inside the chroot).
  if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-$qemu_cpu ]]; then
    [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    conf=/usr/lib/binfmt.d/qemu-$qemu_cpu.conf
    [[ -f $conf ]] || die "no $conf (qemu-user-static)"
    cat "$conf" >/proc/sys/fs/binfmt_misc/register
    binfmt_registered=1
    say "registered the qemu-$qemu_cpu binfmt handler for this run"
  fi
  grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-$qemu_cpu || die "the qemu-$qemu_cpu binfmt handler is disabled"
fi

# The Debian mirrors are plain HTTP (apt checks the signatures), so the root needs no certificate
# authorities; with an https mirror it gets ca-certificates and this machine's ones.
include=()
if grep -rqs 'https://' /etc/apt/sources.list /etc/apt/sources.list.d/; then include=(--include=ca-certificates); fi
say "creating a Debian 12 $arch root in $root (mmdebstrap)"
t=$(date +%s)
mmdebstrap --variant=apt --arch="$arch" "${include[@]}" bookworm "$root" >"$root.mmdebstrap.log" 2>&1 ||
  { tail -15 "$root.mmdebstrap.log"; die "mmdebstrap failed (its last lines above)"; }
root_mount
root_hosts
root_trust_cas "$log" || die "update-ca-certificates failed in the root"
ok "root made in $(($(date +%s) - t)) s"

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
as_nobody() { in_root setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
apt_in_root() { in_root apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }

# The root's files, without what apt and dpkg keep about themselves, to compare before and after.
file_list() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./run -o -path ./tmp \
    -o -path ./var/lib/apt -o -path ./var/lib/dpkg -o -path ./var/cache/apt -o -path ./var/cache/debconf \
    -o -path ./var/cache/ldconfig -o -path ./var/log/apt -o -path ./var/log/dpkg.log \
    -o -path ./var/log/alternatives.log \) -prune -o -printf '%y %p\n' | LC_ALL=C sort)
}
without() { # <list> [PATH...]: the list without those paths and what is under them
  awk -v ignored="${*:2}" 'BEGIN { n = split(ignored, p, " ") }
    { for (i = 1; i <= n; i++) if ($2 == p[i] || index($2, p[i] "/") == 1) next; print }' "$1"
}
same_files() { # <before list> <what> [PATH...]: the root's files are those of the list, but PATHs
  local after=$root.files.after
  file_list >"$after"
  if ! diff -u <(without "$1" "${@:3}") <(without "$after" "${@:3}") >"$root.files.diff"; then
    sed -n '3,$p' "$root.files.diff" | grep '^[-+]' | head -40 >&2
    die "$2 left the root changed (above: - missing, + left behind)"
  fi
  ok "$2 leaves the root as it was"
}

install_package() { # [DEB] (default: the agent's); prints apt's words on the disk space it and its dependencies take
  local file=${1:-$deb} name package
  name=${file##*/}
  package=$(dpkg-deb -f "$file" Package)
  cp "$file" "$root/tmp/$name"
  chmod 644 "$root/tmp/$name"
  apt_in_root install "/tmp/$name" >"$root.apt.log" 2>&1 || { cat "$root.apt.log"; die "apt-get install ./$name failed"; }
  grep -E '^(The following NEW packages|  |After this operation)' "$root.apt.log" | sed 's/^/    /' >&2
  # shellcheck disable=SC2016  # dpkg-query's own ${...}
  [[ $(in_root dpkg-query -W -f='${db:Status-Status}' "$package") == installed ]] || die "$package is not installed"
  rm -f "$root/tmp/$name"
}

unit=/lib/systemd/system/kiwi-agent.service

# --- 1. the package without systemd ---------------------------------------------------------
say "phase 1: install without systemd, run the packaged command line as nobody"
apt_in_root update >>"$log" 2>&1 || die "apt-get update failed in the root"
file_list >"$root.files.0"
t=$(date +%s)
install_package
ok "apt-get install ./$deb_name in $(($(date +%s) - t)) s"

version_out=$(in_root kiwi-agent --version) || die "kiwi-agent --version failed"
ok "kiwi-agent --version: $(tr '\n' ';' <<<"$version_out" | sed 's/;$//; s/;/; /g')"
[[ $version_out == "kiwi-agent $(dpkg-deb -f "$deb" Version) "* ]] || die "--version does not name the package's version"
check_out=$(as_nobody kiwi-agent --check-config /etc/kiwi-agent/kiwi-agent.toml 2>&1) ||
  die "kiwi-agent --check-config /etc/kiwi-agent/kiwi-agent.toml failed as nobody: $check_out"
ok "kiwi-agent --check-config /etc/kiwi-agent/kiwi-agent.toml passes as nobody${check_out:+ ($check_out)}"

# The command line and environment systemd would run.
exec_start=$(sed -n 's/^ExecStart=//p' "$root$unit")
[[ -n $exec_start ]] || die "no ExecStart= in $unit"
read -r -a exec_words <<<"$exec_start"
mapfile -t unit_env < <(sed -n 's/^Environment=//p' "$root$unit")
# StateDirectory= and RuntimeDirectory= as systemd makes them before starting the service (owned
# by its user, 0755); here the user is nobody.
for d in /var/lib/kiwi-agent /run/kiwi-agent; do
  mkdir -p "$root$d"
  in_root chown nobody:nogroup "$d"
  chmod 755 "$root$d"
done
# A network namespace with only a loopback interface: the agent's 127.0.0.1:8095 there is free
# whatever runs on this machine, and nothing else can answer on it.
unshare --net -- sleep infinity &
netns_pid=$!
for _ in $(seq 100); do
  [[ $(readlink "/proc/$netns_pid/ns/net" 2>/dev/null) != "$(readlink /proc/self/ns/net)" ]] && break
  sleep 0.05
done
in_netns() { nsenter --net="/proc/$netns_pid/ns/net" -- "$@"; }
in_netns ip link set lo up
bind=127.0.0.1:8095
[[ -z $(in_netns ss -Htln "sport = :8095") ]] || die "something listens on port 8095 in the test's namespace"

marker=$root.marker
touch "$marker"
sleep 0.1
say "starting as nobody: ${unit_env[*]} $exec_start"
# Not through a shell function: nsenter, chroot, env and setpriv each execute the next, so $! is
# the agent's own pid.
nsenter --net="/proc/$netns_pid/ns/net" -- chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  "${unit_env[@]}" setpriv --reuid=nobody --regid=nogroup --clear-groups -- "${exec_words[@]}" \
  >"$root.agent.log" 2>&1 </dev/null &
agent_pid=$!
agent_started=$(now_ms)
# qemu-user runs an arm64 agent 10-20 times slower.
wait_s=$( ((foreign)) && echo 120 || echo 20)
code=""
for ((i = 0; i < wait_s * 10; i++)); do
  kill -0 "$agent_pid" 2>/dev/null || { cat "$root.agent.log"; die "the agent exited at start"; }
  code=$(in_netns curl -s -o /dev/null -w '%{http_code}' "http://$bind/api/health" 2>/dev/null || true)
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || { cat "$root.agent.log"; die "/api/health did not answer 200 within $wait_s s (last: '$code')"; }
ok "/api/health: 200 after $(since "$agent_started") s"
body=$root.current.json
code=$(in_netns curl -s -o "$body" -w '%{http_code}' "http://$bind/api/current")
[[ $code == 200 ]] || die "/api/current: $code"
grep -q '"sensors":{' "$body" || die "/api/current has no sensors: $(head -c 300 "$body")"
ok "/api/current: 200, $(stat -c %s "$body") bytes, sensors $(grep -o '"[a-z]*":{"plugin"' "$body" | cut -d'"' -f2 | tr '\n' ' ')"
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$agent_pid/status")
[[ $uid == "$(in_root id -u nobody)" ]] || die "the agent runs as uid $uid, not nobody"
[[ $(readlink "/proc/$agent_pid/exe") == "$root/usr/bin/kiwi-agent" ]] || ((foreign)) ||
  die "pid $agent_pid is $(readlink "/proc/$agent_pid/exe"), not the packaged agent"
# RSS once it has sampled for 5 s (a few ticks of history queued, every plugin run).
while (($(now_ms) - agent_started < 5000)); do sleep 0.2; done
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$agent_pid/status")
ok "RSS after 5 s: $rss KiB ($(mib "$rss") MiB)$( ((foreign)) && echo ", of qemu-$qemu_cpu running it")"
kill -TERM "$agent_pid"
status=0
wait "$agent_pid" || status=$?
agent_pid=""
[[ $status == 0 ]] || { cat "$root.agent.log"; die "the agent exited with $status on SIGTERM"; }
ok "SIGTERM: exit code 0 ($(tail -1 "$root.agent.log" | sed 's/^.*kiwi-agent: //'))"
kill -TERM "$netns_pid"; wait "$netns_pid" 2>/dev/null || true; netns_pid=""

# Everything written meanwhile, anywhere in the root but the kernel's file systems.
written=$( (find "$root" -xdev -newer "$marker"; find "$root/run" "$root/dev/shm" -xdev -newer "$marker") |
  sed "s|^$root||" | LC_ALL=C sort -u)
unexpected=$(grep -Ev '^/(var/lib|run)/kiwi-agent(/|$)' <<<"$written" || true)
[[ -z $unexpected ]] || die "the agent wrote outside /var/lib/kiwi-agent and /run/kiwi-agent: $(tr '\n' ' ' <<<"$unexpected")"
ok "it wrote only: $(tr '\n' ' ' <<<"$written")"
ok "left after the stop: $(cd "$root" && find var/lib/kiwi-agent run/kiwi-agent -mindepth 1 -printf '/%p ' 2>/dev/null)"
# systemd removes the RuntimeDirectory= when the service stops.
rm -rf "$root/run/kiwi-agent"

# The SDK as a plugin author meets it: kiwi-agent-dev and the usual build tools (purged again
# with it: autoremove alone keeps make, which something left in the root suggests), then the examples it ships
# copied out of /usr/share/doc and built as nobody with nothing but the installed files:
# find_package(KiwiAgent) and add_kiwi_plugin(), and the C++ sensor with pkg-config alone. The
# agent loads each result (--describe-plugin by path); one is installed with `cmake --install`
# (no prefix: the agent's) and found by name, as `plugin = "uptime"` would, then uninstalled.
say "the SDK: $dev_deb_name, its examples built against it"
t=$(date +%s)
install_package "$dev_deb"
build_tools=(cmake g++ make pkgconf)
apt_in_root install --no-install-recommends "${build_tools[@]}" >>"$log" 2>&1 || die "apt-get install ${build_tools[*]} failed"
ok "apt-get install ./$dev_deb_name ${build_tools[*]} in $(($(date +%s) - t)) s"
examples_dir=/usr/share/doc/kiwi-agent-dev/examples
mapfile -t examples < <(find "$root$examples_dir" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort)
((${#examples[@]} >= 3)) || die "$examples_dir has ${#examples[@]} examples: ${examples[*]}"
# Under qemu-user a compiler is slow: the C++ sensor only.
((foreign)) && examples=(uptime-sensor)
sdk=/tmp/kiwi-sdk-test
rm -rf "$root$sdk"
mkdir -p "$root$sdk"
in_root chown nobody:nogroup "$sdk"
as_author() { in_root setpriv --reuid=nobody --regid=nogroup --clear-groups -- env HOME="$sdk" "$@" >>"$log" 2>&1; }
for ex in "${examples[@]}"; do
  t=$(date +%s)
  as_author cp -r "$examples_dir/$ex" "$sdk/$ex" || die "cannot copy $examples_dir/$ex"
  as_author cmake -S "$sdk/$ex" -B "$sdk/build-$ex" -DCMAKE_BUILD_TYPE=Release ||
    { tail -20 "$log"; die "examples/$ex: cmake configure against the installed SDK failed"; }
  kiwi_dir=$(sed -n 's/^KiwiAgent_DIR:PATH=//p' "$root$sdk/build-$ex/CMakeCache.txt")
  [[ $kiwi_dir == /usr/lib/*/cmake/KiwiAgent ]] || die "examples/$ex: find_package(KiwiAgent) found '$kiwi_dir'"
  as_author cmake --build "$sdk/build-$ex" || { tail -20 "$log"; die "examples/$ex: the build failed"; }
  so=$(cd "$root$sdk/build-$ex" && ls kiwi-*.so) || die "examples/$ex: no kiwi-*.so built"
  described=$(as_nobody kiwi-agent --describe-plugin "$sdk/build-$ex/$so" 2>&1) ||
    die "examples/$ex: kiwi-agent --describe-plugin $so: $described"
  ok "examples/$ex: built against $kiwi_dir in $(($(date +%s) - t)) s, $so loads: $(head -1 <<<"$described")"
done
# shellcheck disable=SC2016  # expanded in the root's shell
as_author sh -c 'cd "$HOME" && g++ $(pkg-config --cflags kiwi-agent) -fPIC -fvisibility=hidden -O2 -shared \
  uptime-sensor/uptime.cpp -o kiwi-sensor-uptime-pc.so' || { tail -20 "$log"; die "the pkg-config build of uptime.cpp failed"; }
described=$(as_nobody kiwi-agent --describe-plugin "$sdk/kiwi-sensor-uptime-pc.so" 2>&1) ||
  die "kiwi-agent --describe-plugin (the pkg-config build): $described"
ok "uptime.cpp built with pkg-config alone ($(in_root pkg-config --cflags kiwi-agent)) loads too"
in_root cmake --install "$sdk/build-uptime-sensor" >>"$log" 2>&1 || die "cmake --install of examples/uptime-sensor failed"
installed_so=$(cat "$root$sdk/build-uptime-sensor/install_manifest.txt")
[[ $installed_so == "$(in_root pkg-config --variable=plugindir kiwi-agent)/kiwi-sensor-uptime.so" ]] ||
  die "cmake --install put the plugin in $installed_so, not in pkg-config's plugindir"
described=$(as_nobody kiwi-agent --describe-plugin uptime 2>&1) || die "kiwi-agent --describe-plugin uptime (installed): $described"
ok "cmake --install: $installed_so, found by name (--describe-plugin uptime)"
rm -f "$root$installed_so"
rm -rf "$root$sdk"

apt_in_root purge kiwi-agent kiwi-agent-dev "${build_tools[@]}" >>"$log" 2>&1 ||
  die "apt-get purge kiwi-agent kiwi-agent-dev ${build_tools[*]} failed"
[[ ! -e $root/var/lib/kiwi-agent && ! -e $root/etc/kiwi-agent ]] || die "purge left /var/lib/kiwi-agent or /etc/kiwi-agent"
apt_in_root autoremove --purge >>"$log" 2>&1 || die "apt-get autoremove --purge failed"
same_files "$root.files.0" "apt-get purge kiwi-agent kiwi-agent-dev and autoremove --purge (the dependencies, the build tools)"

# --- 2. with systemd ------------------------------------------------------------------------
say "phase 2: with systemd: the unit, then the service"
apt_in_root install --no-install-recommends systemd >>"$log" 2>&1 || die "apt-get install systemd failed"
file_list >"$root.files.1"
install_package
verify=$(in_root systemd-analyze verify "$unit" 2>&1) || die "systemd-analyze verify $unit: $verify"
[[ -z $verify ]] || say "systemd-analyze verify said: $verify"
ok "systemd-analyze verify $unit"
security=$(in_root systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1) ||
  { echo "$security" >&2; die "systemd-analyze security rates the unit above 2.0"; }
score=$(grep -o 'Overall exposure level.*' <<<"$security")
ok "systemd-analyze security --offline=true --threshold=20: $score"

wants=/etc/systemd/system/multi-user.target.wants/kiwi-agent.service
if ((nspawn)); then
  # The root boots its own systemd: unmounted first, nspawn mounts what it needs.
  root_stop_processes
  root_unmount_all || die "could not unmount the root for systemd-nspawn"
  for d in /run/systemd/nspawn/propagate /run/systemd/nspawn/locks /run/systemd/nspawn; do
    [[ -e $d ]] || nspawn_run_dirs+=("$d")
  done
  machine=kiwi-package-test-$$
  say "booting the root with systemd-nspawn -b (machine $machine, private network)"
  # --register=no --keep-unit: this machine's PID 1 is not systemd (no machined, no D-Bus), so
  # nspawn neither registers the container nor asks for a scope unit. nspawn's own seccomp filter
  # refuses @clock to a container without CAP_SYS_TIME, the read of the clock's state too: the
  # clock sensor's calls are added to it (the container still cannot change the clock), so that
  # only the unit's filter decides, as on a board.
  systemd-nspawn -q -D "$root" -b --private-network --register=no --keep-unit -M "$machine" \
    --system-call-filter="adjtimex clock_adjtime clock_adjtime64" </dev/null >"$root.nspawn.log" 2>&1 &
  nspawn_pid=$!
  leader=""
  for _ in $(seq 100); do
    leader=$(cat "/proc/$nspawn_pid/task/"*/children 2>/dev/null | awk '{ print $1; exit }')
    [[ -n $leader ]] && break
    kill -0 "$nspawn_pid" 2>/dev/null || { tail -20 "$root.nspawn.log"; die "systemd-nspawn exited"; }
    sleep 0.1
  done
  [[ -n $leader ]] || die "systemd-nspawn started no container"
  in_container() { nsenter -t "$leader" -a -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
  # Until its systemd answers (at first there is no bus to ask), then until it has booted.
  boot=""
  for _ in $(seq 300); do
    boot=$(timeout 90 nsenter -t "$leader" -a -- systemctl is-system-running --wait 2>&1 || true)
    [[ $boot == running || $boot == degraded ]] && break
    kill -0 "$nspawn_pid" 2>/dev/null || break
    sleep 0.2
  done
  [[ $boot == running || $boot == degraded ]] || { tail -20 "$root.nspawn.log"; die "the container did not boot: '$boot'"; }
  ok "the container booted ($boot)"
  t=$(now_ms)
  in_container systemctl enable --now kiwi-agent >>"$log" 2>&1 || {
    in_container journalctl -u kiwi-agent --no-pager | tail -20; die "systemctl enable --now kiwi-agent failed"; }
  # Type=notify: systemctl returns, and the unit is active (running), only after READY=1.
  state=$(in_container systemctl show kiwi-agent -p ActiveState -p SubState -p Type -p StatusText -p MainPID)
  if ! grep -qx 'ActiveState=active' <<<"$state" || ! grep -qx 'SubState=running' <<<"$state"; then
    die "kiwi-agent is not active (running): $(tr '\n' ' ' <<<"$state")"
  fi
  main_pid=$(sed -n 's/^MainPID=//p' <<<"$state")
  ok "systemctl enable --now kiwi-agent: active (running) after READY=1 in $(since "$t") s; $(grep -E '^(Type|StatusText)=' <<<"$state" | tr '\n' ' ')"
  in_container test -L "$wants" || die "no $wants"
  for route in /api/health /api/current; do
    code=$(nsenter -t "$leader" -n -- curl -s -o /dev/null -w '%{http_code}' "http://$bind$route")
    [[ $code == 200 ]] || die "the service: $route gave $code"
  done
  ok "the service serves /api/health and /api/current (200)"
  # The sandbox leaves the sensors what they read: none is in error under it (a VM without
  # thermal zones or disks reports no_data, which is not an error).
  statuses=$(nsenter -t "$leader" -n -- curl -s "http://$bind/api/current" |
    grep -o '"[a-z]*":{"plugin":"[a-z]*","status":"[a-z_]*"' | sed 's/"\([a-z]*\)":{"plugin":"[a-z]*","status":"\([a-z_]*\)"/\1=\2/')
  [[ -n $statuses ]] || die "the service's /api/current lists no sensors"
  ! grep -qv '=\(ok\|no_data\)$' <<<"$statuses" ||
    die "a sensor fails under the unit's sandbox: $(tr '\n' ' ' <<<"$statuses")"
  # The clock sensor's adjtimex passes the unit's system call filter (ProtectClock=yes would
  # refuse it: no data).
  grep -qx 'clock=ok' <<<"$statuses" ||
    die "the clock sensor is not ok under the unit's sandbox: $(tr '\n' ' ' <<<"$statuses")"
  ok "every sensor works under the sandbox: $(tr '\n' ' ' <<<"$statuses")"
  sleep 5
  # shellcheck disable=SC2016  # awk's $2
  rss=$(in_container awk '/^VmRSS:/ { print $2 }' "/proc/$main_pid/status")
  ok "the service's RSS after 5 s: $rss KiB ($(mib "$rss") MiB)"
  online=$(in_container systemd-analyze security kiwi-agent 2>&1 | grep -o 'Overall exposure level.*') || true
  ok "systemd-analyze security kiwi-agent (the running service): $online"
  # systemctl reload applies an edit in place (same pid), and refuses a broken one whole.
  conf=$root/etc/kiwi-agent/kiwi-agent.toml
  cp "$conf" "$conf.orig"
  sed -i 's/^\[collector\]$/[collector]\ninterval = "2s"/' "$conf"
  grep -q '^interval = "2s"' "$conf" || die "could not edit $conf for the reload test"
  in_container systemctl reload kiwi-agent || die "systemctl reload kiwi-agent failed"
  sleep 3
  state=$(in_container systemctl show kiwi-agent -p ActiveState -p SubState -p MainPID -p NRestarts)
  if ! grep -qx 'ActiveState=active' <<<"$state" || ! grep -qx "MainPID=$main_pid" <<<"$state"; then
    die "after systemctl reload: $(tr '\n' ' ' <<<"$state")"
  fi
  verdict=$(in_container journalctl -u kiwi-agent --no-pager -o cat | grep -m1 'reloaded ') ||
    die "no reload verdict in the journal"
  grep -q 'collector.interval 1s -> 2s' <<<"$verdict" || die "reload: $verdict"
  interval=$(nsenter -t "$leader" -n -- curl -s "http://$bind/api/current" | grep -o '"interval_seconds":[0-9.]*')
  [[ $interval == '"interval_seconds":2' ]] || die "after reload /api/current has $interval"
  ok "systemctl reload: same pid, applied ($verdict)"
  printf '[collector]\ninterval = "soon"\n' >>"$conf"
  in_container systemctl reload kiwi-agent || die "systemctl reload kiwi-agent (bad file) failed"
  sleep 1
  health=$(nsenter -t "$leader" -n -- curl -s -w ' %{http_code}' "http://$bind/api/health")
  [[ $health == *'"status":"failed"'*' 200' ]] || die "after a failed reload /api/health gave $health"
  grep -qx "MainPID=$main_pid" <<<"$(in_container systemctl show kiwi-agent -p MainPID)" ||
    die "a failed reload changed the main pid"
  ok "systemctl reload of a broken file: the running configuration stays, /api/health 200 says $(grep -o '"message":"[^"]*"' <<<"$health" | head -1)"
  mv "$conf.orig" "$conf"
  in_container systemctl reload kiwi-agent || die "systemctl reload kiwi-agent (restored) failed"

  # Programs of the administrator's under the unit's sandbox: a conf.d drop-in with an exec
  # sensor (a shell script that runs other programs, as scripts do) and a cgi route (a shell CGI
  # program), applied by a reload. The programs are root's, 0755, under /usr/local/lib/kiwi-agent
  # (read-only to the service, like everything but its two directories).
  progs=/usr/local/lib/kiwi-agent
  mkdir -p "$root$progs/cgi"
  cat >"$root$progs/probe" <<'PROBE'
#!/bin/sh
# An exec sensor's program (package-test.sh): forks and executes programs, reads /proc.
set -e
visible=$(ls /proc | grep -c '^[0-9][0-9]*$')
echo '# TYPE package_test_probe_ok gauge'
echo "package_test_probe_ok 1"
echo "package_test_visible_processes{uid=\"$(id -u)\"} $visible"
PROBE
  cat >"$root$progs/cgi/hello" <<'HELLO'
#!/bin/sh
# A CGI program (package-test.sh).
printf 'Content-Type: text/plain\n\n'
echo "hello from cgi: $GATEWAY_INTERFACE $REQUEST_METHOD $SCRIPT_NAME$PATH_INFO uid $(id -u)"
HELLO
  chmod 755 "$root$progs" "$root$progs/cgi" "$root$progs/probe" "$root$progs/cgi/hello"
  dropin_conf=/etc/kiwi-agent/conf.d/50-package-test.toml
  cat >"$root$dropin_conf" <<TOML
# package-test.sh: an exec sensor and a cgi route (plugins/exec, handlers/cgi).
[[sensor]]
plugin = "exec"
name = "probe"

[sensor.options]
command = ["$progs/probe"]

[[route]]
path = "/cgi/*"
handler = "cgi"
options = { directory = "$progs/cgi", timeout = "5s" }
TOML
  chmod 644 "$root$dropin_conf"
  check=$(in_container kiwi-agent --check-config /etc/kiwi-agent/kiwi-agent.toml 2>&1) || die "--check-config with $dropin_conf: $check"
  in_container systemctl reload kiwi-agent || die "systemctl reload kiwi-agent (the exec and cgi drop-in) failed"
  sleep 1
  verdict=$(in_container journalctl -u kiwi-agent --no-pager -o cat | grep 'reloaded ' | tail -1)
  grep -q 'sensor probe added' <<<"$verdict" || {
    in_container journalctl -u kiwi-agent --no-pager -o cat | tail -5; die "the drop-in's reload did not add the sensor: $verdict"; }
  probe=""
  for _ in $(seq 50); do
    probe=$(nsenter -t "$leader" -n -- curl -s "http://$bind/api/current" | grep -o '"probe":{"plugin":"exec"[^]]*]' || true)
    [[ $probe == *'"status":"ok"'* ]] && break
    sleep 0.2
  done
  [[ $probe == *'"status":"ok"'* ]] || {
    in_container journalctl -u kiwi-agent --no-pager -o cat | tail -5; die "the exec sensor under the sandbox: ${probe:-not in /api/current}"; }
  grep -q '"name":"package_test_probe_ok","value":1' <<<"$probe" || die "the exec sensor's metric is missing: $probe"
  visible=$(grep -o '"name":"package_test_visible_processes","labels":{"uid":"[0-9]*"},"value":[0-9]*' <<<"$probe") ||
    die "the exec sensor's second metric is missing: $probe"
  ok "exec sensor under the sandbox: ok, package_test_probe_ok 1, ${visible#*\"labels\":} (ProtectProc=default: the processes sensor sees every process)"
  cgi_body=$root.cgi.body
  code=$(nsenter -t "$leader" -n -- curl -s -o "$cgi_body" -w '%{http_code} %{content_type}' "http://$bind/cgi/hello/there" || true)
  body=$(cat "$cgi_body" 2>/dev/null || true)
  rm -f "$cgi_body"
  [[ $code == '200 text/plain'* && $body == 'hello from cgi: CGI/1.1 GET /cgi/hello/there uid '[0-9]* ]] || {
    in_container journalctl -u kiwi-agent --no-pager -o cat | tail -5; die "the cgi route under the sandbox: $code: $body"; }
  ok "cgi route under the sandbox: GET /cgi/hello/there: $code, \"$body\""
  # Gone again, for what follows (and the file list at the end).
  rm -f "$root$dropin_conf"
  rm -r "$root$progs"
  in_container systemctl reload kiwi-agent || die "systemctl reload kiwi-agent (the drop-in removed) failed"

  # A mistake in the configuration: the service fails with exit code 2 and the place of the
  # mistake in the journal, and is not restarted (RestartPreventExitStatus=2, RestartSec=2s).
  in_container cp -p /etc/kiwi-agent/kiwi-agent.toml /var/tmp/kiwi-agent.toml.good
  in_container sed -i 's/^# log_level = "info"/log_level = "loud"/' /etc/kiwi-agent/kiwi-agent.toml
  ! in_container systemctl restart kiwi-agent >>"$log" 2>&1 || die "a bad configuration started"
  sleep 4
  state=$(in_container systemctl show kiwi-agent -p ActiveState -p ExecMainStatus -p NRestarts)
  for want in ActiveState=failed ExecMainStatus=2 NRestarts=0; do
    grep -qx "$want" <<<"$state" || die "a bad configuration: expected $want: $(tr '\n' ' ' <<<"$state")"
  done
  mistake=$(in_container journalctl -u kiwi-agent --no-pager -o cat | grep -m1 'kiwi-agent.toml:[0-9]*:[0-9]*: agent.log_level') ||
    die "the journal does not name the mistake's place"
  ok "a bad configuration: failed with exit code 2, not restarted; the journal says: $mistake"
  in_container mv /var/tmp/kiwi-agent.toml.good /etc/kiwi-agent/kiwi-agent.toml
  in_container systemctl restart kiwi-agent >>"$log" 2>&1 || die "the service did not start again on the good configuration"
  main_pid=$(in_container systemctl show kiwi-agent -p MainPID --value)

  # The watchdog: an agent that stops pinging (here stopped whole, SIGSTOP; the integration tests
  # show a hung sensor alone silences the pings) is killed and started again. A drop-in shortens
  # the unit's 30 s watchdog and 15 s stop timeout so the test takes seconds.
  dropin=/etc/systemd/system/kiwi-agent.service.d
  in_container mkdir -p "$dropin"
  printf '[Service]\nWatchdogSec=2s\nTimeoutStopSec=2s\n' | in_container tee "$dropin/test-watchdog.conf" >/dev/null
  in_container systemctl daemon-reload
  in_container systemctl restart kiwi-agent >>"$log" 2>&1 || die "restart with a 2 s watchdog failed"
  stalled_pid=$(in_container systemctl show kiwi-agent -p MainPID --value)
  sleep 3  # pinged through more than a watchdog period: alive
  [[ $(in_container systemctl show kiwi-agent -p MainPID --value) == "$stalled_pid" ]] ||
    die "the agent was restarted although it pinged its watchdog"
  in_container kill -STOP "$stalled_pid"
  restarted=""
  for _ in $(seq 60); do
    sleep 0.5
    state=$(in_container systemctl show kiwi-agent -p ActiveState -p SubState -p MainPID -p NRestarts)
    if grep -qx 'SubState=running' <<<"$state" && ! grep -qx "MainPID=$stalled_pid" <<<"$state"; then
      restarted=1
      break
    fi
  done
  [[ -n $restarted ]] || die "a stalled agent was not restarted by the watchdog: $(tr '\n' ' ' <<<"$state")"
  timeout_line=$(in_container journalctl -u kiwi-agent --no-pager -o cat | grep -m1 -i 'watchdog timeout') ||
    die "the journal does not say the watchdog fired"
  ok "the watchdog: a stalled agent was killed and restarted ($timeout_line; $(grep NRestarts <<<"$state"))"
  in_container rm -r "$dropin"
  in_container systemctl daemon-reload
  in_container systemctl restart kiwi-agent >>"$log" 2>&1 || die "restart without the drop-in failed"
  main_pid=$(in_container systemctl show kiwi-agent -p MainPID --value)

  # An upgrade (here the same version again: the postinst gets the old version as $2 all the
  # same) restarts a running service: try-restart, a new main pid.
  # (In /var/tmp: nspawn gives the container a /tmp of its own.)
  cp "$deb" "$root/var/tmp/$deb_name"
  chmod 644 "$root/var/tmp/$deb_name"
  in_container apt-get -y -q -o Dpkg::Use-Pty=0 install --reinstall "/var/tmp/$deb_name" >>"$log" 2>&1 ||
    die "apt-get install --reinstall ./$deb_name failed"
  rm -f "$root/var/tmp/$deb_name"
  state=$(in_container systemctl show kiwi-agent -p ActiveState -p SubState -p MainPID)
  if ! grep -qx 'SubState=running' <<<"$state" || grep -qx "MainPID=$main_pid" <<<"$state"; then
    die "after reinstalling, the service was not restarted: $(tr '\n' ' ' <<<"$state")"
  fi
  main_pid=$(sed -n 's/^MainPID=//p' <<<"$state")
  ok "apt-get install --reinstall (as an upgrade): the running service restarted (main pid $main_pid)"

  in_container apt-get -y -q -o Dpkg::Use-Pty=0 remove kiwi-agent >>"$log" 2>&1 || die "apt-get remove kiwi-agent failed"
  state=$(in_container systemctl show kiwi-agent -p ActiveState -p ExecMainStatus -p ExecMainCode)
  grep -qx 'ActiveState=inactive' <<<"$state" || die "apt-get remove did not stop the service: $(tr '\n' ' ' <<<"$state")"
  grep -qx 'ExecMainStatus=0' <<<"$state" || die "the service did not exit 0 when stopped: $(tr '\n' ' ' <<<"$state")"
  in_container test -f /etc/kiwi-agent/kiwi-agent.toml || die "apt-get remove deleted the configuration"
  in_container test -f /var/lib/kiwi-agent/kiwi.db || die "apt-get remove deleted the history"
  ok "apt-get remove: the service stopped (exit code 0); the configuration and the history stay"
  in_container apt-get -y -q -o Dpkg::Use-Pty=0 purge kiwi-agent >>"$log" 2>&1 || die "apt-get purge kiwi-agent failed"
  for f in /etc/kiwi-agent /var/lib/kiwi-agent /var/lib/private/kiwi-agent "$wants"; do
    ! in_container test -e "$f" -o -L "$f" || die "apt-get purge left $f"
  done
  in_container apt-get -y -q -o Dpkg::Use-Pty=0 autoremove --purge >>"$log" 2>&1 || die "apt-get autoremove --purge failed"
  in_container systemctl poweroff >/dev/null 2>&1 || true
  for _ in $(seq 150); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$nspawn_pid" 2>/dev/null && die "the container did not power off"
  wait "$nspawn_pid" || true
  nspawn_pid=""
  ok "the container powered off"
  # What booting a system leaves, whatever it runs: the journal, systemd's catalog, random seed
  # and timer stamps, the machine id and the time zone nspawn gives it, and /var/lib/private
  # (made by systemd for any DynamicUser= service; the package's part of it, kiwi-agent, is
  # checked above). The unit's links and deb-systemd-helper's state are not left out.
  same_files "$root.files.1" "apt-get purge kiwi-agent in the booted root" ./var/log/journal \
    ./var/lib/systemd/catalog ./var/lib/systemd/random-seed ./var/lib/systemd/timers \
    ./var/lib/private ./etc/machine-id ./etc/localtime
else
  say "no systemd-nspawn ($( ((foreign)) && echo "systemd as PID 1 under qemu-user is not tried" || echo "--no-nspawn")): enable offline, remove and purge in the chroot"
  in_root systemctl enable kiwi-agent >>"$log" 2>&1 || die "systemctl enable kiwi-agent (offline) failed"
  [[ -L $root$wants ]] || die "no $wants after systemctl enable"
  apt_in_root remove kiwi-agent >>"$log" 2>&1 || die "apt-get remove kiwi-agent failed"
  [[ -f $root/etc/kiwi-agent/kiwi-agent.toml ]] || die "apt-get remove deleted the configuration"
  ok "apt-get remove keeps the configuration"
  apt_in_root purge kiwi-agent >>"$log" 2>&1 || die "apt-get purge kiwi-agent failed"
  [[ ! -e $root$wants && ! -L $root$wants ]] || die "apt-get purge left $wants"
  apt_in_root autoremove --purge >>"$log" 2>&1 || die "apt-get autoremove --purge failed"
  same_files "$root.files.1" "apt-get purge kiwi-agent after systemctl enable"
fi
exit 0
}
