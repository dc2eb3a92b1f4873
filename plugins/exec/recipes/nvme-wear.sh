#!/bin/sh
# NVMe wear, writes and errors as Prometheus text, for kiwi-agent's exec sensor: what each NVMe
# drive says of itself in its SMART / Health log (`nvme smart-log -o json`, nvme-cli), which the
# kernel keeps out of sysfs. One series per namespace block device, labelled `device` as the
# diskio sensor labels the same disk (`nvme0n1`), so wear reads beside bytes written since boot.
# See README.md beside this file for the metrics and how to run it under the packaged service.
#
#   nvme-wear.sh                   print the metrics (run by the exec sensor, as root)
#   nvme-wear.sh --output FILE     write them to FILE, replaced whole (run by a root timer; the
#                                  sandboxed agent reads FILE with /bin/cat)
#
# Exit status: 0 when at least one drive answered, or there is none (then it prints nothing: the
# sensor's no data); 1 when every drive failed (each one's reason on stderr); 2 for bad arguments.
# POSIX sh, awk and coreutils only (Debian's mawk; no Python on the board needed).
set -u

output=
case $# in
0) ;;
2) [ "$1" = --output ] || { echo "usage: $0 [--output FILE]" >&2; exit 2; }; output=$2 ;;
*) echo "usage: $0 [--output FILE]" >&2; exit 2 ;;
esac

sysfs=${KIWI_SYSFS:-/sys}  # the agent gives its sysfs root; /sys otherwise
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
trap 'exit 143' TERM  # the agent's timeout: clean up on the way out
trap 'exit 130' INT

# The NVMe namespaces, as the diskio sensor names them: <sysfs>/block lists whole disks only.
devices=
for path in "$sysfs"/block/nvme*; do
  [ -e "$path" ] || continue  # no NVMe drive: the glob stays as it is
  dev=${path##*/}
  case $dev in nvme*c*n*) continue ;; esac  # a multipath controller's hidden path
  devices="$devices $dev"
done
[ -n "$devices" ] || exit 0
command -v nvme >/dev/null 2>&1 ||
  { echo "nvme-wear: no nvme command in PATH (apt-get install nvme-cli)" >&2; exit 1; }

# Each namespace's log, as "nvme-wear-device nvme0n1" then nvme's JSON, or "nvme-wear-failed
# nvme0n1" with the first line of nvme's error on stderr (the rest is its usage text).
read_logs() {
  for dev in $devices; do
    if json=$(nvme smart-log -o json "/dev/$dev" 2>"$err"); then
      printf 'nvme-wear-device %s\n%s\n' "$dev" "$json"
    else
      printf 'nvme-wear-failed %s\n' "$dev"
      printf 'nvme-wear: %s: %s\n' "$dev" "$(sed -n 1p "$err")" >&2
    fi
  done
}

# The JSON is flat, one "key":value per line (nvme-cli 1.x to 2.x; Debian 12's 2.3 quotes the
# 128-bit counters, "data_units_written":"464403132", later versions do not): every pair is
# picked out wherever it is, quoted or not.
to_prometheus() {
  awk -v now="$(date +%s)" '
    $1 == "nvme-wear-device" { dev = $2; devs[++n] = dev; ok[dev] = 1; next }
    $1 == "nvme-wear-failed" { dev = ""; devs[++n] = $2; ok[$2] = 0; next }
    dev != "" {
      line = $0
      while (match(line, /"[A-Za-z0-9_]+"[ \t]*:[ \t]*"?[-+0-9.eE]+"?/)) {
        pair = substr(line, RSTART, RLENGTH)
        line = substr(line, RSTART + RLENGTH)
        colon = index(pair, ":")
        key = substr(pair, 1, colon - 1)
        value = substr(pair, colon + 1)
        gsub(/[" \t]/, "", key)
        gsub(/[" \t]/, "", value)
        v[dev, key] = value
      }
    }
    # One family: HELP and TYPE once, then a sample per drive that has the key, value x scale.
    function family(name, type, help, key, scale, format,    i, d) {
      printf "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type
      for (i = 1; i <= n; i++) {
        d = devs[i]
        if (ok[d] && (d, key) in v) printf "%s{device=\"%s\"} " format "\n", name, d, v[d, key] * scale
      }
    }
    END {
      if (n == 0) exit 0
      good = 0
      for (i = 1; i <= n; i++) {
        d = devs[i]
        if (ok[d] && !((d, "percent_used") in v)) {
          ok[d] = 0
          print "nvme-wear: " d ": no percent_used in what nvme smart-log -o json printed" | "cat 1>&2"
        }
        good += ok[d]
      }
      print "# HELP nvme_smart_log_success 1 when nvme smart-log answered for the device, 0 when it failed (the reason is on stderr)"
      print "# TYPE nvme_smart_log_success gauge"
      for (i = 1; i <= n; i++) printf "nvme_smart_log_success{device=\"%s\"} %d\n", devs[i], ok[devs[i]]
      print "# HELP nvme_smart_log_timestamp_seconds when the logs were read, unix time"
      print "# TYPE nvme_smart_log_timestamp_seconds gauge"
      print "nvme_smart_log_timestamp_seconds " now
      family("nvme_percentage_used_ratio", "gauge", "the vendor estimate of the share of its endurance the drive has used (Percentage Used / 100; may pass 1, up to 2.55)", "percent_used", 0.01, "%.10g")
      family("nvme_available_spare_ratio", "gauge", "share of the spare capacity left (Available Spare / 100)", "avail_spare", 0.01, "%.10g")
      family("nvme_available_spare_threshold_ratio", "gauge", "below this available spare the drive raises its critical warning (Available Spare Threshold / 100)", "spare_thresh", 0.01, "%.10g")
      family("nvme_critical_warning", "gauge", "the Critical Warning bits: 0 healthy; 1 spare below threshold, 2 temperature, 4 reliability degraded, 8 read-only, 16 volatile memory backup failed, 32 persistent memory read-only", "critical_warning", 1, "%.0f")
      family("nvme_data_written_bytes_total", "counter", "bytes the host wrote over the life of the drive (Data Units Written x 512000, rounded up by the drive)", "data_units_written", 512000, "%.0f")
      family("nvme_data_read_bytes_total", "counter", "bytes the host read over the life of the drive (Data Units Read x 512000)", "data_units_read", 512000, "%.0f")
      family("nvme_media_errors_total", "counter", "unrecovered data integrity errors over the life of the drive (Media and Data Integrity Errors)", "media_errors", 1, "%.0f")
      family("nvme_unsafe_shutdowns_total", "counter", "power losses without a shutdown notification over the life of the drive", "unsafe_shutdowns", 1, "%.0f")
      family("nvme_power_on_seconds_total", "counter", "time powered on over the life of the drive (Power On Hours x 3600)", "power_on_hours", 3600, "%.0f")
      if (good == 0) exit 1
    }'
}

if [ -z "$output" ]; then
  read_logs | to_prometheus
  exit
fi
read_logs | to_prometheus >"$output.new"
status=$?
mv -f "$output.new" "$output" || exit 1
exit "$status"
