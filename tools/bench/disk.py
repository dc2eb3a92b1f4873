#!/usr/bin/python3
"""Disk writes: what kiwi-agent writes to flash per hour, at steady state and on a young history.

Runs the agent on its built-in configuration (the default sensors at 1 s, its default
commit_interval) twice side by side, each with its own data directory on a disk filesystem and the
snapshot file on tmpfs (as /run when installed):

  - steady: with --steady-db FILE (a year of history at the default retentions, as
    build/bin/kiwi-bench-year DIR makes DIR/kiwi.db, its last tick near now), this build runs on a
    copy of it at its default retentions: every tier is full, each prune frees what is added, as
    on a board after a year. (Started and stopped once before the measured run: what catches the
    file up to now is not measured.) Without it (and for a baseline without tiers, which cannot
    read that file):
    retention = "1m" (and, for an agent with tiers, minute_retention = "1m" and hour_retention =
    "1h"), so every prune (once a minute) removes about what was added: ticks once their hour is
    summarised, minute summaries once their day is (an agent with tiers keeps those until then);
  - young: the default retentions on a new file (nothing pruned yet).

With --baseline BIN, that binary (another build, e.g. the commit before a storage change) runs the
same two cases at the same time, so the two are compared in one window on one machine. After
--warmup seconds (default 360: past the first commit of the default 5-minute commit_interval,
which writes the series new since the last run, a start's cost and not the steady state's) it
measures, for --seconds (default 600) and then each agent's SIGTERM and exit, two counts of the
bytes each wrote, its last commit and SQLite's checkpoint at close included, so no checkpoint is
left out whenever it falls (the log goes to tmpfs):

  - device (the figure the target is judged on; run as root): each agent's data directory is an
    ext4 filesystem of its own (4 KiB blocks, as on an SD card; mkfs'd with its inode tables
    written at once, so no lazy init writes in the window), on a loop device over a sparse image
    in --work; counted are the sectors that filesystem sent to its device (field 7 of
    /sys/block/loopN/stat), from the window's start to after the agent's exit and a syncfs(): the
    data, the ext4 journal and metadata, what reaches flash on a board;
  - write_bytes (/proc/PID/io at the start; at the end its whole life's from wait4()'s rusage,
    the same counter): what the process dirtied in the page cache, as the agent's own
    `kiwi_agent_disk_written_bytes_total` counts it. On Linux 6.16 and later, whose ext4 caches
    files in large folios, it counts a whole folio for each page written into it: a 1 KiB pwrite into a file read sequentially before (readahead: SQLite's
    quick_check at start) counted 1,321 KiB here, against 19 KiB sent to the device, the journal
    included; and it leaves out the journal, which a synced append that grows a file makes write
    (tools/bench/write_cost.py; docs/benchmarks.md). Without root, only this one is measured.

The pages the warm-up left in the WAL are checkpointed inside the window too, so the figures are
at most one warm-up's worth high.
At the end, from each database: blocks or rows, their average size, and the page count, for the
floor arithmetic in docs/benchmarks.md.

One JSON line per measurement goes to --results (default build/bench/disk.jsonl); the report
renders the last run as the section "Disk writes: steady state" (--doc puts it into a file, e.g.
docs/benchmarks.md). Every process started is stopped by its PID at the end.

Usage: tools/bench/disk.py [--seconds S] [--warmup S] [--agent-bin PATH] [--baseline PATH]
                           [--commit-interval DURATION] [--steady-db FILE] [--no-device]
                           [--results FILE] [--doc FILE] [--work DIR]
       (tools/bench/run.sh --disk and --all run it with --results in their results directory)
       tools/bench/disk.py --report FILE [--doc FILE]
"""

import argparse
import datetime
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Agent, Failure, LoopFs, Processes, Results, answers,  # noqa: E402
                      device_counting, free_ports, kiwi_config, loadavg, read_int_fields,
                      read_results, run_or_report, tick_log_records, version_line, wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = "## Disk writes: steady state"
CASES = (("steady", "1m"), ("young", None))
# The steady case's retention of each tier, for an agent that has them.
STEADY_TIERS = {("collector", "minute_retention"): "1m", ("collector", "hour_retention"): "1h"}


def say(msg):
    print(f"disk: {msg}", file=sys.stderr, flush=True)


def db_figures(path, since_ms):
    """Blocks (in the tick log, or the blocks table of schema 3-5) or tick rows (older) the agent
    wrote (from since_ms on), their average stored size, its series (not the fill's of a
    --steady-db file), pages in the file."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        out = {"pages": con.execute("PRAGMA page_count").fetchone()[0],
               "page_size": con.execute("PRAGMA page_size").fetchone()[0],
               "freelist": con.execute("PRAGMA freelist_count").fetchone()[0]}
        if "blocks" in tables:
            n, ticks, size = con.execute(
                "SELECT count(*), sum(ticks), avg(length(data)) FROM blocks WHERE ts >= ?",
                (since_ms,)).fetchone()
            out.update(blocks=n, block_ticks=ticks, block_bytes=size)
        log = [(ticks, len(block)) for ts, _, ticks, block, _ in tick_log_records(path)
               if ts >= since_ms]
        if log:
            out.update(blocks=len(log), block_ticks=sum(t for t, _ in log),
                       block_bytes=sum(b for _, b in log) / len(log))
        n, size = con.execute("SELECT count(*), avg(length(data)) FROM samples").fetchone()
        out.update(rows=n, row_bytes=size)
        n, size = con.execute("SELECT count(*), avg(length(data)) FROM rollups").fetchone()
        out.update(rollups=n, rollup_bytes=size)
        out.update(series=con.execute("SELECT count(*) FROM series WHERE name NOT LIKE "
                                      "'fill\\_%' ESCAPE '\\'").fetchone()[0])
        return out
    finally:
        con.close()


def run(args):
    binaries = [("this build", args.agent_bin)]
    if args.baseline:
        binaries.append(("baseline", args.baseline))
    for _, b in binaries:
        if not os.access(b, os.X_OK):
            raise Failure(f"no agent binary at {b} (tools/build.sh builds one)")
    os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="disk.", dir=args.work)
    shm_root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    shm = tempfile.mkdtemp(prefix="kiwi-disk.", dir=shm_root)
    os.chmod(shm, 0o755)
    fs = subprocess.run(["stat", "-f", "-c", "%T", work], capture_output=True, text=True).stdout
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = Results(args.results, run_id)
    res.add("run", "command", " ".join(["tools/bench/disk.py"] + sys.argv[1:]), "")
    res.add("run", "machine", {"cpus": os.cpu_count(), "filesystem": fs.strip(),
                               "seconds": args.seconds, "warmup": args.warmup,
                               "mount_options": args.mount_options or "defaults",
                               "kernel": os.uname().release}, "")
    res.add("run", "loadavg_before", loadavg(), "")
    use_device = not args.no_device and device_counting()
    if not use_device:
        say("write_bytes only: device bytes need root, losetup and mkfs.ext4 (or --no-device)")
    res.add("run", "counters", ["device", "write_bytes"] if use_device else ["write_bytes"], "")
    procs = Processes(work)
    agents = []
    mounts = []
    try:
        ports = free_ports(len(binaries) * len(CASES))
        for (label, binary), i in zip(binaries, range(len(binaries))):
            for (case, retention), j in zip(CASES, range(len(CASES))):
                name = f"{'base' if i else 'this'}-{case}"
                d = os.path.join(work, name)
                snap = os.path.join(shm, name)
                os.makedirs(d)
                os.makedirs(snap, mode=0o755)
                fs_of = None
                if use_device:  # room for the year's file, its growth and the WAL
                    size = 512 << 20
                    if retention and args.steady_db:
                        size += 2 * os.path.getsize(args.steady_db)
                    fs_of = LoopFs(os.path.join(work, f"{name}.img"), os.path.join(d, "data"),
                                   size, args.mount_options)
                    mounts.append(fs_of)
                port = ports[i * len(CASES) + j]
                changes = {("agent", "data_dir"): os.path.join(d, "data"),
                           ("http", "bind"): f"127.0.0.1:{port}",
                           ("collector", "snapshot_path"): os.path.join(snap, "current.json")}
                default = default_settings(binary)
                if args.commit_interval and not i:
                    changes[("collector", "commit_interval")] = args.commit_interval
                    default["commit_interval"] = args.commit_interval
                # The year's file is read by an agent with tiers alone (9f74b9a has none).
                year = bool(retention and args.steady_db and "minute_retention" in default)
                if year:  # a year of history at the default retentions
                    os.makedirs(os.path.join(d, "data"), exist_ok=True)
                    shutil.copyfile(args.steady_db, os.path.join(d, "data", "kiwi.db"))
                    if os.path.isdir(args.steady_db + "-ticks"):  # its tick log (schema 6)
                        shutil.copytree(args.steady_db + "-ticks",
                                        os.path.join(d, "data", "kiwi.db-ticks"))
                elif retention:
                    changes[("collector", "retention")] = retention
                    changes.update({k: v for k, v in STEADY_TIERS.items() if k[1] in default})
                text = kiwi_config(binary, changes)
                cfg = os.path.join(d, "kiwi.toml")
                with open(cfg, "w") as f:
                    f.write(text)
                if year:
                    # Once before: the file's catch-up (the time since its fill pruned, this
                    # agent's series added) is written and checkpointed at exit, not measured.
                    primer = Agent(procs, binary, cfg, "kiwi-agent-primer", side=name, cwd=d,
                                   log_dir=snap)
                    primer.start(60, require=True)
                    wait_until("primer answering", lambda: answers(port), 60, procs)
                    time.sleep(5)
                    procs.finish(primer.proc, 60)
                agent = Agent(procs, binary, cfg, "kiwi-agent", side=name, cwd=d, log_dir=snap)
                agent.start(15, require=True)
                agents.append({"label": label, "binary": binary, "case": case,
                               "retention": default["retention"] if year or not retention
                               else retention,
                               "history": "a year (--steady-db)" if year else "",
                               # its first tick may be stamped at the second before
                               "started_ms": int(time.time() * 1000) - 5000,
                               "proc": agent.proc, "port": port,
                               "commit_s": seconds_of(default["commit_interval"]),
                               "interval_s": seconds_of(default["interval"]),
                               "db": os.path.join(d, "data", "kiwi.db"), "fs": fs_of,
                               "version": version_line([binary])})
        for a in agents:
            wait_until(f"{a['case']} agent ({a['label']}) answering",
                       lambda a=a: answers(a["port"]), 15, procs)
        say(f"{len(agents)} agents running; warm-up {args.warmup:.0f} s")
        time.sleep(args.warmup)
        procs.check_alive()
        start = time.monotonic()
        before = [_written(a["proc"].pid) for a in agents]
        device_before = [a["fs"].written() if a["fs"] else None for a in agents]
        say(f"measuring {args.seconds:.0f} s")
        time.sleep(args.seconds)
        procs.check_alive()
        for a in agents:
            os.kill(a["proc"].pid, signal.SIGTERM)
        after = [_written_at_exit(procs, a["proc"]) for a in agents]
        elapsed = time.monotonic() - start
        device_after = [a["fs"].written() if a["fs"] else None for a in agents]
        for a, w0, w1, d0, d1 in zip(agents, before, after, device_before, device_after):
            figures = db_figures(a["db"], a["started_ms"])
            figures.update(commit_s=a["commit_s"], interval_s=a["interval_s"])
            value = {"label": a["label"], "case": a["case"], "retention": a["retention"],
                     "history": a["history"], "version": a["version"], "binary": a["binary"],
                     "write_bytes": w1 - w0, "seconds": elapsed,
                     "mb_per_h": (w1 - w0) * 3600 / elapsed / 1e6, **figures}
            if d0 is not None:
                value.update(device_bytes=d1 - d0,
                             device_mb_per_h=(d1 - d0) * 3600 / elapsed / 1e6)
            res.add(a["label"], "disk", value, "")
            say(f"{a['label']} {a['case']}: " +
                (f"device {value['device_mb_per_h']:.2f} MB/h, " if d0 is not None else "") +
                f"write_bytes {value['mb_per_h']:.2f} MB/h")
        res.add("run", "loadavg_after", loadavg(), "")
    finally:
        procs.stop_all()
        for m in mounts:
            m.close()
        if any(m.dev for m in mounts):  # still mounted: its image stays, not removed under it
            raise Failure(f"could not unmount {[m.mountpoint for m in mounts if m.dev]}")
        subprocess.run(["rm", "-rf", "--one-file-system", shm, work], check=False)
    return read_results(args.results)


def default_settings(binary):
    """The [collector] settings of the binary's built-in configuration, as written there."""
    text = subprocess.run([binary, "--print-default-config"], capture_output=True, text=True,
                          check=True).stdout
    section = text.split("[collector]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([a-z_]+) = "?([^"\n]*?)"?\s*(?:#.*)?$', section, re.M))


def seconds_of(duration):
    """ "10s", "1m", "500ms", "1h30m" in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ms|s|m|h|d)", duration))


def _written(pid):
    return read_int_fields(f"/proc/{pid}/io", ["write_bytes"])["write_bytes"]


def _written_at_exit(procs, p):
    """The bytes `p` (already sent SIGTERM) caused to be written over its whole life, its last
    commit and checkpoint included, once it has exited."""
    usage = procs.reap(p)
    if p.returncode != 0:
        raise Failure(f"agent pid {p.pid} exited with status {p.returncode}; its log: {p.log}")
    return usage.ru_oublock * 512


def render(rows):
    rows = [r for r in rows if r["run"] == rows[-1]["run"]]  # the last run of the file
    run = {r["measure"]: r["value"] for r in rows if r["side"] == "run"}
    disks = [r["value"] for r in rows if r["measure"] == "disk"]
    if not disks:
        raise Failure("no disk measurements in the results")
    device = all("device_bytes" in d for d in disks)
    # The figure judged: the device's where it was counted, else write_bytes.
    key, mb = ("device_bytes", "device_mb_per_h") if device else ("write_bytes", "mb_per_h")
    m = run.get("machine", {})
    out = [SECTION, "",
           f"- command: `{run.get('command', '?')}` ({rows[0]['run']})",
           f"- machine: {m.get('cpus')} CPUs, Linux {m.get('kernel')}; data on "
           + (f"an ext4 of its own per agent (4 KiB blocks, on a loop device, mounted with "
              f"{m.get('mount_options', 'defaults')})" if device
              else m.get("filesystem", "?"))
           + f"; load average before: {run.get('loadavg_before', '?')}, after: "
           f"{run.get('loadavg_after', '?')}",
           f"- {len(disks)} agents at once, each on its built-in configuration (the default "
           "sensors at 1 s, its default commit_interval) with its own data directory, snapshot "
           f"on tmpfs; counted over {m.get('seconds', 0):.0f} s after "
           f"{m.get('warmup', 0):.0f} s of warm-up, until each agent has exited (its last "
           "commit and checkpoint included: every checkpoint of the window is counted); steady "
           "= a year of history at the default retentions where the history column says so "
           "(a copy of kiwi-bench-year's file), else every tier's retention at its shortest "
           "(retention 1m; minute_retention 1m and hour_retention 1h where the agent has "
           "tiers): each prune frees what was added, as after a year; young = the default "
           "retentions on a new file",
           ("- disk writes: what the agent's filesystem sent to its device (data, journal and "
            "metadata); write_bytes: the process's page-cache count (/proc/PID/io), which leaves "
            "the journal out and on this kernel counts whole large folios (the docstring of "
            "tools/bench/disk.py)" if device else
            "- disk writes: write_bytes of /proc/PID/io (no device count: not run as root)"),
           "- per commit, per sample: from the disk writes; per sample is the bytes written per "
           "value stored (bytes / (ticks x series in the file))", ""]
    out += ["| build | history | disk writes | write_bytes | commit every | per commit | "
            "per sample | stored per commit | pages in file |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for d in disks:
        commit_s = d.get("commit_s") or 10
        commits = d["seconds"] / commit_s
        samples = d["seconds"] / (d.get("interval_s") or 1) * max(1, d.get("series") or 1)
        if d.get("blocks"):
            per_block = d["block_ticks"] / d["blocks"]
            stored = f"{d['block_bytes']:.0f} B (one block of {per_block:.1f} ticks)"
        elif d.get("rows"):
            stored = f"{d['row_bytes'] * 10:.0f} B (10 rows of {d['row_bytes']:.0f} B)"
        else:
            stored = "none"
        case = d["case"] + (f", {d['history']}" if d.get("history") else "")
        out.append(f"| {d['label']}: {d['version']} | {case} | {d[mb]:.2f} MB/h | "
                   f"{d['mb_per_h']:.2f} MB/h | {commit_s:g} s | "
                   f"{d[key] / commits / 1024:.1f} KiB | {d[key] / samples:.2f} B | {stored} | "
                   f"{d['pages']} |")
    base = {d["case"]: d for d in disks if d["label"] == "baseline"}
    for d in disks:
        if d["label"] != "baseline" and d["case"] in base and base[d["case"]][mb] > 0:
            ratio = d[mb] / base[d["case"]][mb]
            out.append("")
            out.append(f"- {d['case']}: {d['label']} writes {ratio:.2f} of the baseline's bytes in "
                       "the same window")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--warmup", type=float, default=360.0)
    ap.add_argument("--agent-bin", default=os.path.join(ROOT, "build", "bin", "kiwi-agent"))
    ap.add_argument("--baseline", metavar="BIN")
    ap.add_argument("--commit-interval", metavar="DURATION",
                    help="this build's collector.commit_interval (default: its built-in one)")
    ap.add_argument("--steady-db", metavar="FILE",
                    help="a year of history (kiwi-bench-year DIR makes DIR/kiwi.db): the steady "
                         "case of each agent with tiers runs on a copy of it at the default "
                         "retentions")
    ap.add_argument("--no-device", action="store_true",
                    help="count write_bytes only, without a loop device per agent")
    ap.add_argument("--mount-options", metavar="OPTS",
                    help="mount options of each agent's ext4 (e.g. lazytime: the inodes' times are "
                         "written with other changes or a day later, not at each write)")
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "disk.jsonl"))
    ap.add_argument("--work", metavar="DIR", default=os.path.join(ROOT, "build", "bench"),
                    help="where the data directories go (a disk filesystem)")
    ap.add_argument("--report", metavar="FILE")
    ap.add_argument("--doc", metavar="FILE")
    args = ap.parse_args()

    return run_or_report(args, run, render, SECTION, say)


if __name__ == "__main__":
    sys.exit(main())
