"""tools/bench/run.sh --idle [SECONDS]: the agent at 1 Hz, polled once a second with curl (one
GET /api/current and one GET /metrics, a new connection each): CPU (utime + stime) over the first
60 s and over the window, write_bytes over the window, per hour; beside it a second agent with
retention 1 min, which after its first minute prunes on every commit as the default agent does
once it holds 24 hours: its write_bytes is the steady state. One JSON line per measurement in
results/idle.jsonl; the history body's size after the window in results/bodies.jsonl."""

import os
import shutil
import subprocess
import time

from benchlib import (CLK_TCK, Failure, TreeMeter, cpu_ticks, loadavg, read_int_fields,
                      smaps_rollup)
from matrix import measure_history_body

CPU_WINDOW_S = 60


def written(pid):
    return read_int_fields(f"/proc/{pid}/io", ("write_bytes",))["write_bytes"]


def curl(url):
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "1", url], check=False)


def run(b):
    window = b.idle_seconds
    res = b.results("idle")
    load_before = loadavg()
    shutil.rmtree(os.path.join(b.run_dir, "steady-data"), ignore_errors=True)
    steady, _ = b.start_agent("steady", "1s", retention="1m", pin=b.pin_client)
    b.say("idle: steady-state writer (retention 1 min) started; 70 s until it prunes on every "
          "commit")
    time.sleep(70)
    if steady.poll() is not None:
        raise Failure(f"the steady-state agent stopped (log: {steady.log})")
    p, url = b.start_agent("idle", "1s")
    b.wait_for_200(f"{url}/api/current", 10)
    metrics = b.status(f"{url}/metrics", timeout=2) == 200
    b.say(f"idle: {window} s at 1 Hz (GET /api/current{' and /metrics' if metrics else ''} each "
          "second); warm-up 5 s")
    time.sleep(5)
    t0 = time.monotonic()
    threads = TreeMeter(p.pid)  # per thread (schedstat), for the 60 s breakdown
    threads.sample()
    threads0 = dict(threads.threads)
    c0, w0, sw0 = cpu_ticks(p.pid), written(p.pid), written(steady.pid)
    polls, c60, threads60 = 0, None, None
    for i in range(1, window + 1):
        if metrics:
            curl(f"{url}/metrics")
        curl(f"{url}/api/current")
        polls += 1
        delay = t0 + i - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if i == CPU_WINDOW_S:
            c60 = cpu_ticks(p.pid)
            threads.sample()
            threads60 = threads.by_thread(threads0)  # name -> ns
        b.procs.check_alive()
    elapsed = time.monotonic() - t0
    cend, wend, swend = cpu_ticks(p.pid), written(p.pid), written(steady.pid)
    b.stop(steady)
    measure_history_body(b, url, "filled at the default 1 s interval during the idle run")
    m = smaps_rollup(p.pid)
    b.stop(p)
    by_thread = {name: ns / 1e6 for name, ns in threads60.items()}
    fs = subprocess.run(["df", "-T", b.run_dir], capture_output=True, text=True).stdout
    fs = fs.splitlines()[1].split()[1] if len(fs.splitlines()) > 1 else "?"
    wb, swb = wend - w0, swend - sw0
    row = {"cpu_window_s": CPU_WINDOW_S, "cpu_ticks": c60 - c0,
           "cpu_pct": (c60 - c0) / CLK_TCK / CPU_WINDOW_S * 100, "cpu_ticks_all": cend - c0,
           "cpu_pct_all": (cend - c0) / CLK_TCK / elapsed * 100, "elapsed_s": elapsed,
           "write_bytes": wb, "write_bytes_per_hour": wb / elapsed * 3600,
           "steady_write_bytes": swb, "steady_write_bytes_per_hour": swb / elapsed * 3600,
           "rss_kib": m["rss_kib"], "pss_kib": m["pss_kib"], "metrics": metrics, "polls": polls,
           "clk_tck": CLK_TCK, "data_dir": os.path.relpath(b.run_dir, os.path.dirname(
               os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
           "filesystem": fs, "snapdir": b.snapdir,
           "threads_ms": {k: round(v, 1) for k, v in by_thread.items()}}
    res.add("run", "idle", row, "")
    b.section_meta(res, load_before)
    b.say(f"idle: CPU {row['cpu_pct']:.3f} % (60 s), writes {row['write_bytes_per_hour'] / 1e6:.2f}"
          f" MB/h fresh, {row['steady_write_bytes_per_hour'] / 1e6:.2f} MB/h steady state")
