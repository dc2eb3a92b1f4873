# shellcheck shell=bash
# A brand-new Debian 12 root to run things in, as tools/fresh-check.sh and tools/package-test.sh
# use it: made by mmdebstrap, with the mounts a real system has, the host's certificate
# authorities, and a clean-up that stops what runs in it, unmounts everything under it (deepest
# first) and removes it only once nothing is mounted there any more.
#
# Sourced, not run. The caller sets `root` (the root's absolute path) and defines `say MESSAGE`
# (its log line) before calling these functions.
#
#   root_install_mmdebstrap LOG   install mmdebstrap on this machine if it is missing
#   root_mount                    the root bind-mounted onto itself (so / is in its
#                                 /proc/self/mountinfo), made private (nothing propagates to the
#                                 host's tree or back), proc, sysfs, the host's /dev and /dev/pts,
#                                 a tmpfs on /dev/shm and on /run; /tmp stays on disk, as on
#                                 Debian 12
#   root_hosts                    an /etc/hosts as the Debian installer writes it
#   root_trust_cas LOG            the host's certificate authorities from
#                                 /usr/local/share/ca-certificates (a proxy or a local registry
#                                 needs them), if the root has ca-certificates
#   root_mounts_under             the mount points under the root, one a line
#   root_stop_processes           SIGTERM (then SIGKILL after 5 s) to every process whose root
#                                 directory is the root
#   root_unmount_all              every mount under the root, deepest first (lazily if still busy
#                                 after three rounds); fails if any is left
#   root_remove                   stop, unmount, then rm -rf --one-file-system the root, checked
#                                 again just before; fails (and keeps it) if a mount is left

root_install_mmdebstrap() {
  command -v mmdebstrap >/dev/null && return 0
  say "installing mmdebstrap on this machine"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends mmdebstrap ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends mmdebstrap; }; } >>"$1" 2>&1
}

root_mount() {
  mount --bind "$root" "$root"
  mount --make-private "$root"
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
  mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
  mkdir -p "$root/run/lock" && chmod 1777 "$root/run/lock"
}

root_hosts() { # sudo looks the host name up
  [[ -e $root/etc/hosts ]] ||
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" >"$root/etc/hosts"
}

root_trust_cas() {
  local cas=()
  shopt -s nullglob
  cas=(/usr/local/share/ca-certificates/*.crt)
  shopt -u nullglob
  ((${#cas[@]})) || return 0
  [[ -d $root/usr/local/share/ca-certificates && -x $root/usr/sbin/update-ca-certificates ]] || return 0
  say "giving the root this machine's certificate authorities: ${cas[*]##*/}"
  cp "${cas[@]}" "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >>"$1" 2>&1
}

# shellcheck disable=SC2317  # called from EXIT traps
root_mounts_under() { awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo; }

# shellcheck disable=SC2317
root_stop_processes() {
  local p pids=() i
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/root" 2>/dev/null) == "$root" ]] && pids+=("${p#/proc/}")
  done
  ((${#pids[@]})) || return 0
  say "stopping ${#pids[@]} processes still running in the root: ${pids[*]}"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  sleep 0.5
}

# shellcheck disable=SC2317
root_unmount_all() { # deepest first (a mount's path is longer than its parent's)
  local targets t i
  for ((i = 0; i < 5; i++)); do
    mapfile -t targets < <(root_mounts_under | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-)
    ((${#targets[@]})) || return 0
    for t in "${targets[@]}"; do
      umount "$t" 2>/dev/null || { ((i < 3)) || umount -l "$t" 2>/dev/null || true; }
    done
    sleep 0.2
  done
  ! root_mounts_under | grep -q .
}

# shellcheck disable=SC2317
root_remove() {
  [[ -n ${root:-} && -d $root ]] || return 0
  root_stop_processes
  if ! root_unmount_all; then
    say "error: still mounted under $root, NOT removing it:"
    root_mounts_under >&2
    return 1
  fi
  # Checked again just before: rm must never meet a mounted proc, sys or dev.
  if root_mounts_under | grep -q .; then
    say "error: a mount appeared under $root; NOT removing it"
    return 1
  fi
  rm -rf --one-file-system "$root"
}
