#!/usr/bin/python3
"""Big host: a generated procfs/sysfs tree of a large server, with counters that advance.

Issue 17 asks what the agent costs as the machine grows. This makes the tree the sensors read
(kiwi-agent's [agent] procfs and sysfs point at it, the storage sensor's rootfs too) at a size
divided by --divide (1, 4 or 16):

  size 1   64 cores with cpufreq, 256 network interfaces of which 200 are veth, 64 mounts
           (ext4, under DIR/root/mnt), 32 disks, 24 thermal zones
  size 1/4 16 cores, 64 interfaces (50 veth), 16 mounts, 8 disks, 6 zones
  size 1/16 4 cores, 16 interfaces (12 veth), 4 mounts, 2 disks, 2 zones

The shapes are those of the board fixtures under tests/fixtures (the same files, more lines).
`advance` rewrites the files that change (proc/stat, proc/net/dev, proc/diskstats, proc/uptime,
temperatures and frequencies) as one second later; each file is replaced by rename, so a reader
never sees half a file, as with the kernel's.

Usage: tools/bench/bighost.py make DIR [--divide N]
       tools/bench/bighost.py advance DIR [--seconds S]   (once a second, S seconds; 0: forever)
"""

import argparse
import os
import sys
import time

FULL = dict(cores=64, interfaces=256, veth=200, mounts=64, disks=32, zones=24)


def sizes(divide):
    return {k: max(1, round(v / divide)) for k, v in FULL.items()}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def interfaces(n, veth):
    names = ["lo", "eth0"]
    names += [f"veth{i:07x}" for i in range(veth)]
    i = 0
    while len(names) < n:
        names.append(f"br-{i:08x}" if i % 2 else f"ens{i + 1}")
        i += 1
    return names[:n]


def disks(n):
    return [f"nvme{i}n1" if i < 8 else f"sd{chr(ord('a') + (i - 8) // 26)}{chr(ord('a') + (i - 8) % 26)}"
            for i in range(n)]


class Host:
    def __init__(self, root, size):
        self.root, self.size = root, size
        self.ifaces = interfaces(size["interfaces"], min(size["veth"], size["interfaces"] - 2))
        self.disks = disks(size["disks"])

    def p(self, rel):
        return os.path.join(self.root, rel)

    # The files that change, at second `t` since the tree was made.
    def dynamic(self, t):
        c = self.size["cores"]
        up = 86400.0 + t
        write(self.p("proc/uptime"), f"{up:.2f} {up * c * 0.9:.2f}\n")
        lines, tot = [], [0] * 10
        for i in range(c):
            # 100 ticks a second per core: user 10+i%7, system 5, idle the rest.
            u, s = 10 + i % 7, 5
            v = [(1000000 + i * 977) + u * t, 300 + i, 200000 + s * t, 8000000 + (100 - u - s) * t,
                 4000 + i, 0, 9000 + i, 0, 0, 0]
            tot = [a + b for a, b in zip(tot, v)]
            lines.append(f"cpu{i} " + " ".join(map(str, v)))
        head = "cpu  " + " ".join(map(str, tot))
        write(self.p("proc/stat"), "\n".join([head] + lines + [
            f"intr {48123957 + 5000 * t} 0 0 0", f"ctxt {91234567 + 20000 * t}",
            "btime 1732921200", f"processes {184321 + 3 * t}", "procs_running 2",
            "procs_blocked 0", f"softirq {16041319 + 3000 * t} 0 0 0 0 0 0 0 0 0 0", ""]))
        rows = ["Inter-|   Receive                                                |  Transmit",
                " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets"
                " errs drop fifo colls carrier compressed"]
        for k, name in enumerate(self.ifaces):
            rx, tx = 1000 * (k + 1), 700 * (k + 1)
            rxb, txb = 10 ** 9 + k * 12345 + rx * t, 5 * 10 ** 8 + k * 777 + tx * t
            rxp, txp = rxb // 800, txb // 600
            rows.append(f"{name:>6}: {rxb} {rxp} 0 {k % 3} 0 0 0 {k} {txb} {txp} 0 0 0 0 0 0")
        write(self.p("proc/net/dev"), "\n".join(rows) + "\n")
        rows = []
        for k, name in enumerate(self.disks):
            major, minor = (259, k) if name.startswith("nvme") else (8, 16 * (k - 8))
            r, w = 50 * (k % 5 + 1), 80 * (k % 3 + 1)
            rows.append(f"{major:4} {minor:7} {name} {100000 + r * t} {1000 + k} "
                        f"{9876544 + 8 * r * t} {65432 + r * t // 10} {534210 + w * t} {312345} "
                        f"{24681352 + 16 * w * t} {876543 + w * t // 5} 0 {1234567 + 300 * t} "
                        f"{942000 + 350 * t} 0 0 0 0 {2000 + t} {345 + t}")
        write(self.p("proc/diskstats"), "\n".join(rows) + "\n")
        for z in range(self.size["zones"]):
            write(self.p(f"sys/class/thermal/thermal_zone{z}/temp"),
                  f"{40000 + 500 * z + (t * 100) % 3000}\n")
        for i in range(c):
            write(self.p(f"sys/devices/system/cpu/cpu{i}/cpufreq/scaling_cur_freq"),
                  f"{(1200000 + ((t + i) % 8) * 200000)}\n")

    def make(self):
        c = self.size["cores"]
        write(self.p("proc/loadavg"), f"{c * 0.2:.2f} {c * 0.18:.2f} {c * 0.15:.2f} 3/1402 28117\n")
        gib = 1024 * 1024
        write(self.p("proc/meminfo"), "".join(f"{k + ':':<16}{v:>10} kB\n" for k, v in [
            ("MemTotal", 256 * gib), ("MemFree", 120 * gib), ("MemAvailable", 200 * gib),
            ("Buffers", 2 * gib), ("Cached", 70 * gib), ("SwapCached", 0),
            ("SwapTotal", 8 * gib), ("SwapFree", 8 * gib), ("Dirty", 1024),
            ("Shmem", 512 * 1024), ("SReclaimable", 4 * gib)]))
        write(self.p("sys/devices/system/cpu/online"), f"0-{c - 1}\n")
        for i in range(c):
            d = f"sys/devices/system/cpu/cpu{i}/cpufreq/"
            write(self.p(d + "cpuinfo_min_freq"), "800000\n")
            write(self.p(d + "cpuinfo_max_freq"), "3500000\n")
            write(self.p(d + "scaling_max_freq"), "3500000\n")
            write(self.p(d + "scaling_governor"), "schedutil\n")
        for z in range(self.size["zones"]):
            d = f"sys/class/thermal/thermal_zone{z}/"
            write(self.p(d + "type"), f"{'x86_pkg_temp' if z % 2 else 'acpitz'}{z}\n")
            write(self.p(d + "mode"), "enabled\n")
            write(self.p(d + "policy"), "step_wise\n")
        for k, name in enumerate(self.ifaces):
            if name != "lo":
                write(self.p(f"sys/class/net/{name}/speed"),
                      "10000\n" if name.startswith(("veth", "br-")) else "25000\n")
        for k, name in enumerate(self.disks):
            major, minor = (259, k) if name.startswith("nvme") else (8, 16 * (k - 8))
            write(self.p(f"sys/block/{name}/dev"), f"{major}:{minor}\n")
        # Mounts: the root filesystem, pseudo filesystems the storage sensor leaves out, and ext4
        # mounts on directories of DIR/root (statvfs asks the filesystem DIR is on: live).
        rows = ["1 0 259:0 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw",
                "2 1 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw",
                "3 1 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
                "4 1 0:25 / /run rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,mode=755"]
        for m in range(self.size["mounts"] - 1):
            os.makedirs(self.p(f"root/mnt/data{m}"), exist_ok=True)
            rows.append(f"{10 + m} 1 8:{m + 1} / /mnt/data{m} rw,relatime shared:{20 + m} - ext4 "
                        f"/dev/sd{m} rw")
        os.makedirs(self.p("root"), exist_ok=True)
        write(self.p("proc/self/mountinfo"), "\n".join(rows) + "\n")
        self.dynamic(0)


def load(root):
    with open(os.path.join(root, "bighost.size")) as f:
        divide = int(f.read().split()[0])
    return Host(root, sizes(divide)), divide


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("action", choices=("make", "advance"))
    ap.add_argument("dir")
    ap.add_argument("--divide", type=int, default=1, choices=(1, 4, 16))
    ap.add_argument("--seconds", type=float, default=0.0)
    args = ap.parse_args()
    root = os.path.abspath(args.dir)
    if args.action == "make":
        if os.path.exists(root) and os.listdir(root):
            print(f"bighost: {root} is not empty", file=sys.stderr)
            return 2
        host = Host(root, sizes(args.divide))
        host.make()
        write(os.path.join(root, "bighost.size"), f"{args.divide}\n")
        print(f"bighost: {root}: {sizes(args.divide)}", file=sys.stderr)
        return 0
    host, _ = load(root)
    t0 = time.monotonic()
    t = 1
    while args.seconds <= 0 or time.monotonic() - t0 < args.seconds:
        host.dynamic(t)
        t += 1
        time.sleep(max(0.0, t0 + t - 1 - time.monotonic()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
