#!/usr/bin/python3
"""What one synced write costs on ext4: the bytes the filesystem sends to its device, and what the
writer's write_bytes (/proc/self/io) counts, for the ways the agent writes.

Runs as root: an ext4 of its own (4 KiB blocks, as on an SD card; inode tables and journal
written by mkfs, so nothing else writes to it) on a loop device over a sparse image in --work.
Each pattern writes --count times, each write followed by fdatasync() and a syncfs() (what the
journal's periodic commit would write a few seconds later is counted with the write that caused
it); the table gives the mean per write of the device's sectors written (field 7 of
/sys/block/loopN/stat) and of write_bytes.

  - append, growing the file: a record of --record bytes at each 4 KiB boundary past the end;
  - append into blocks taken ahead: the same, the blocks fallocate()d 32 KiB at a time with
    FALLOC_FL_KEEP_SIZE (the tick log of 9ce6725..1d4566c);
  - overwrite of written blocks: the same records over a file written before (a recycled tick
    log file, 88bbbcd);
  - a 1 KiB page into a file read sequentially before: a 64 MiB file read in 1 KiB pages
    (readahead, as SQLite's quick_check at start), then 1 KiB pwrite()s at random pages (a
    checkpoint's), against the same after POSIX_FADV_RANDOM reads (no readahead).

Usage: tools/bench/write_cost.py [--count N] [--record BYTES] [--work DIR] [--doc FILE]
"""

import argparse
import ctypes
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Failure, LoopFs, device_counting, guarded, publish,  # noqa: E402
                      read_int_fields)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = "## Disk writes: what a synced write costs on ext4"
libc = ctypes.CDLL(None, use_errno=True)
FALLOC_FL_KEEP_SIZE = 1


def write_bytes():
    return read_int_fields("/proc/self/io", ["write_bytes"])["write_bytes"]


def measure(fs, path, count, setup, step):
    """Mean device bytes and write_bytes per step(fd, i), each followed by fdatasync + syncfs."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        setup(fd)
        os.fsync(fd)
        dev0, wb0 = fs.written(), write_bytes()
        for i in range(count):
            step(fd, i)
            os.fdatasync(fd)
            fs.written()  # syncfs: the journal's commit of this write's metadata
        return (fs.written() - dev0) / count, (write_bytes() - wb0) / count
    finally:
        os.close(fd)


def run(args):
    if not device_counting():
        raise Failure("needs root, losetup and mkfs.ext4 (a loop device)")
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="write-cost.", dir=args.work)
    fs = LoopFs(os.path.join(work, "fs.img"), os.path.join(work, "mnt"), 512 << 20)
    rows = []
    try:
        rec = os.urandom(args.record)
        span = (args.record + 4095) // 4096 * 4096

        def append(fd, i):
            os.pwrite(fd, rec, i * span)

        def taken_ahead(fd, i):
            if (i * span) % 32768 < span:  # the blocks of the next 32 KiB, the size kept
                libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, ctypes.c_long(i * span),
                               ctypes.c_long(32768 + span))
            os.pwrite(fd, rec, i * span)

        def written_before(fd):
            os.pwrite(fd, os.urandom(span * args.count), 0)

        m = os.path.join(fs.mountpoint, "f")
        rows.append((f"append of {args.record} B, growing the file",
                     *measure(fs, m + "1", args.count, lambda fd: None, append)))
        rows.append((f"append of {args.record} B into blocks taken ahead (KEEP_SIZE)",
                     *measure(fs, m + "2", args.count, lambda fd: None, taken_ahead)))
        rows.append((f"overwrite of {args.record} B over written blocks (a recycled file)",
                     *measure(fs, m + "3", args.count, written_before, append)))

        size = 64 << 20

        def read_back(advice):
            def setup(fd):
                for at in range(0, size, 1 << 20):
                    os.pwrite(fd, os.urandom(1 << 20), at)
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read from the device
                if advice is not None:
                    os.posix_fadvise(fd, 0, 0, advice)
                for at in range(0, size, 1024):
                    os.pread(fd, 1024, at)
            return setup

        rng = random.Random(1)

        def page(fd, i):
            os.pwrite(fd, b"p" * 1024, rng.randrange(size // 1024) * 1024)

        rows.append(("1 KiB page into a file read sequentially before (readahead)",
                     *measure(fs, m + "4", args.count, read_back(None), page)))
        rows.append(("1 KiB page into a file read without readahead (FADV_RANDOM)",
                     *measure(fs, m + "5", args.count, read_back(os.POSIX_FADV_RANDOM), page)))
    finally:
        fs.close()
        if fs.dev:
            raise Failure(f"could not unmount {fs.mountpoint}")
        os.system(f"rm -rf --one-file-system {work}")
    out = [SECTION, "",
           f"- command: `{' '.join(['tools/bench/write_cost.py'] + sys.argv[1:])}`",
           f"- Linux {os.uname().release}; an ext4 of its own (4 KiB blocks) on a loop device; "
           f"{args.count} writes each, each followed by fdatasync() and syncfs()",
           "", "| write | sent to the device | write_bytes (/proc/self/io) |", "|---|---:|---:|"]
    for name, dev, wb in rows:
        out.append(f"| {name} | {dev / 1024:.1f} KiB | {wb / 1024:.1f} KiB |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--record", type=int, default=4751, help="bytes a record (default: a "
                    "2-minute commit's block of the default sensors, 4.7 kB)")
    ap.add_argument("--work", metavar="DIR", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--doc", metavar="FILE", help="put the section into FILE (replacing it)")
    args = ap.parse_args()

    def say(msg):
        print(f"write_cost: {msg}", file=sys.stderr, flush=True)

    return guarded(lambda: publish(run(args), SECTION, say, doc=args.doc) or 0, say)

if __name__ == "__main__":
    sys.exit(main())
