#!/usr/bin/env bash
# Runs tools/test.sh on a brand-new Debian 12, the way it runs on a user's fresh machine: a minimal
# root made by mmdebstrap (--variant=apt with ca-certificates, git and sudo, nothing else), a clone
# of the repository's committed HEAD (or of --rev) inside it, and tools/test.sh run there as root
# (or, with --user, as a user with sudo) with a clean environment. So tools/setup.sh has to
# install everything the build, the tests and the quick benchmark use. Run it before calling an
# issue resolved. 25-50 minutes on this project's 2-core VM (25 min 13 s on f375f2c, 51 min 26 s
# on c0b84b1, a slower VM): the root under a minute; packages, libmicrohttpd, the Release build
# and its tests about 10-15; the quick benchmark and the fuzz regression a few; the ASan+UBSan and
# TSan builds and their tests the rest. Needs root (sudo) and the Debian mirrors; installs
# mmdebstrap on the host if it is missing.
#
# Usage: sudo tools/fresh-check.sh [--rev REV] [--user] [--keep] [--verbose] [DIR] [-- COMMAND...]
#   DIR           where to make the root: a new or empty directory (default: a new directory
#                 under /var/tmp, on disk as a real root is; the root takes about 3 GB)
#   --rev REV     the commit, branch or tag to test (default HEAD); only committed work is tested
#   --user        run it as a user with sudo (made in the root: kiwi, no password), not as root;
#                 the tests that need root (mounting a small tmpfs) then skip with a warning
#   --keep        keep the root (unmounted) afterwards; inspect it with
#                 `sudo chroot DIR /bin/bash`, remove it with `sudo rm -rf --one-file-system DIR`
#   --verbose     show the test output as it runs (default: only into the log, then its last lines)
#   -- COMMAND    run COMMAND in the clone instead of tools/test.sh (e.g. -- tools/setup.sh --test)
#
# Inside the root, as on an installed machine: the root is a mount point (bind-mounted onto itself,
# so / is in /proc/self/mountinfo, which the storage sensor and its live test read), with proc,
# sysfs, the host's /dev and /dev/pts, a tmpfs on /dev/shm and on /run (/tmp stays on disk, as on
# Debian 12), an /etc/hosts, and the host's trust: the certificate authorities in
# /usr/local/share/ca-certificates (where a proxy or a local registry needs them; npm fails with
# SELF_SIGNED_CERT_IN_CHAIN otherwise) and ~/.npmrc. That is this machine's set-up, not the
# project's, so it is here and not in tools/setup.sh.
#
# On exit (also on failure and Ctrl-C): processes still running in the root are stopped, every
# mount under it is unmounted (innermost first), and the root is removed only once nothing is
# mounted under it any more. The log stays next to it (DIR.log). Exit status: the test command's
# (1 when the root could not be set up).
set -euo pipefail
{ # one block: bash reads all of it before it runs, so a checkout or an edit of this file during
  # a check does not change the check that runs

repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '[fresh-check %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "error: $*"; exit 1; }
# The root's set-up and clean-up, shared with tools/package-test.sh.
# shellcheck source=SCRIPTDIR/lib/debian-root.sh
source "$repo/tools/lib/debian-root.sh"

rev=HEAD keep=0 verbose=0 as_user=0 dir="" command=(tools/test.sh)
while (($#)); do
  case $1 in
    --rev) [[ $# -ge 2 ]] || die "--rev needs a commit, branch or tag"; rev=$2; shift ;;
    --keep) keep=1 ;;
    --user) as_user=1 ;;
    --verbose | -v) verbose=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; (($#)) || die "nothing after --"; command=("$@"); break ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z $dir ]] || die "one directory only"; dir=$1 ;;
  esac
  shift
done
[[ $(id -u) -eq 0 ]] || die "needs root to mount and chroot: sudo $0 $*"

# The commit to test, resolved now: commits made in the repository meanwhile do not change it.
commit=$(git -c safe.directory="$repo" -C "$repo" rev-parse --verify --quiet "$rev^{commit}") ||
  die "'$rev' is not a commit in $repo"
if [[ -n $(git -c safe.directory="$repo" -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  say "note: uncommitted changes in $repo are not tested, only commit ${commit:0:12}"
fi

# The root's directory: ours to remove at the end, so it must be new or empty. Its path is used in
# mount tables (no white space: /proc/self/mountinfo escapes it) and must not be / or the repository.
if [[ -n $dir ]]; then
  [[ ! -e $dir || -d $dir ]] || die "$dir is not a directory"
  mkdir -p "$dir"
  root=$(realpath "$dir")
  [[ -z $(ls -A "$root") ]] || die "$root is not empty (give a new or empty directory)"
else
  root=$(mktemp -d /var/tmp/kiwi-fresh.XXXXXX)
fi
[[ $root != / && $root != "$repo" && $repo != "$root"/* ]] || die "refusing to use $root as the root"
[[ $root =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "the root's path may only have letters, digits and ._/+- ($root)"
log=$root.log
: >"$log"

# ---------------------------------------------------------------------------------------------
# Clean-up (tools/lib/debian-root.sh): every mount under the root goes, including any a test left
# behind, deepest first, and the root is removed only when /proc/self/mountinfo shows nothing
# under it.
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  local status=$?
  trap '' INT TERM HUP
  if [[ -n ${root:-} && -d $root ]]; then
    if ((keep)); then
      root_stop_processes
      if ! root_unmount_all; then
        say "error: still mounted under $root:"
        root_mounts_under >&2
        exit $((status ? status : 1))
      fi
      say "kept the root: $root (sudo chroot $root /bin/bash; remove: sudo rm -rf --one-file-system $root)"
    else
      root_remove || exit $((status ? status : 1))
    fi
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---------------------------------------------------------------------------------------------
started=$(date +%s)
root_install_mmdebstrap "$log" || die "could not install mmdebstrap (log: $log)"

say "creating a Debian 12 root in $root (mmdebstrap, about a minute)"
mmdebstrap --variant=apt --include=ca-certificates,git,sudo bookworm "$root" >>"$log" 2>&1 ||
  { tail -20 "$log" >&2; die "mmdebstrap failed (log: $log)"; }

root_mount
root_hosts
root_trust_cas "$log" || die "update-ca-certificates failed in the root (log: $log)"
# Who runs the tests: root, or a user with sudo as on most machines.
user=root home=/root
if ((as_user)); then
  user=kiwi home=/home/kiwi
  chroot "$root" useradd --create-home --shell /bin/bash "$user" >>"$log" 2>&1 || die "useradd failed (log: $log)"
  echo "$user ALL=(ALL) NOPASSWD: ALL" >"$root/etc/sudoers.d/$user"
  chmod 440 "$root/etc/sudoers.d/$user"
fi
npmrc=${HOME:-/root}/.npmrc
if [[ ! -f $npmrc && -n ${SUDO_USER:-} ]]; then npmrc=$(getent passwd "$SUDO_USER" | cut -d: -f6)/.npmrc; fi
if [[ -f $npmrc ]]; then
  install -m 600 "$npmrc" "$root$home/.npmrc"
  chroot "$root" chown "$user:" "$home/.npmrc"
  say "copied $npmrc to the root's $home/.npmrc"
fi

say "cloning $repo at ${commit:0:12} ($(git -c safe.directory="$repo" -C "$repo" log -1 --format=%s "$commit")) into $home/kiwi-agent"
git -c safe.directory="$repo" -c safe.directory="$repo/.git" clone --quiet --no-hardlinks "$repo" "$root$home/kiwi-agent" >>"$log" 2>&1 ||
  die "git clone failed (log: $log)"
git -C "$root$home/kiwi-agent" checkout --quiet --detach "$commit" >>"$log" 2>&1 || die "checkout of $commit failed (log: $log)"
chroot "$root" chown -R "$user:" "$home/kiwi-agent"

setup_s=$(($(date +%s) - started))
say "root ready in ${setup_s} s; running ${command[*]} in it as $user (log: $log)"
quoted=$(printf '%q ' "${command[@]}")
run() {
  local path=/usr/local/bin:/usr/bin:/bin
  [[ $user == root ]] && path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  chroot "$root" /usr/sbin/runuser -u "$user" -- /usr/bin/env -i PATH="$path" HOME="$home" USER="$user" \
    LOGNAME="$user" TERM="${TERM:-dumb}" /bin/bash -c "cd ~/kiwi-agent && exec $quoted" </dev/null
}
t0=$(date +%s)
# In the background, so that a signal to this script is handled at once (the clean-up then stops
# what runs in the root) instead of after the command.
if ((verbose)); then
  { run 2>&1 | tee -a "$log"; } &
else
  run >>"$log" 2>&1 &
fi
status=0
wait $! || status=$?
elapsed=$(($(date +%s) - t0))
if ((!verbose)); then
  printf -- '--- last lines of the output (all of it: %s) ---\n' "$log"
  tail -n 25 "$log"
  printf -- '---\n'
fi
say "${command[*]} exited with status $status after $((elapsed / 60)) min $((elapsed % 60)) s (set-up ${setup_s} s), commit ${commit:0:12}"
exit "$status"
}
