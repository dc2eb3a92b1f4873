"""tools/bench/run.sh --soak [MIN]: the history route at 32 connections for MIN minutes, the
agent's RSS and PSS every second (one JSON line each in results/soak.jsonl), then, idle again,
one commit interval later, and PRAGMA quick_check on the database once the agent has stopped."""

import os
import subprocess
import time

from benchlib import Failure, loadavg, smaps_rollup
from matrix import fill_history, parse_bench_line, wrk_argv


def run(b):
    secs = b.soak_minutes * 60
    res = b.results("soak")
    load_before = loadavg()
    p, url, fill = fill_history(b, "soak", "fast")
    b.say(f"soak: /api/history?limit=120, 32 connections, {b.soak_minutes} min; RSS/PSS every "
          "second")
    wrk = b.procs.start("load", "wrk-soak", wrk_argv(b, 32, secs, f"{url}/api/history?limit=120",
                                                     "json"), log_dir=b.run_dir)
    log = wrk.log

    def sample(t):
        m = smaps_rollup(p.pid)
        res.add("agent", "memory", {"t": t, "rss_kib": m["rss_kib"], "pss_kib": m["pss_kib"]},
                "KiB")

    t0 = time.monotonic()
    for i in range(1, secs + 6):
        delay = t0 + i - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if wrk.poll() is not None:
            break
        sample(i)
    try:
        wrk.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise Failure(f"wrk did not end 30 s after its {secs} s (log: {log})") from None
    b.procs.finish(wrk)
    sample("after")
    # Once idle again: the agent returns freed heap (the closed connections' buffers) to the
    # kernel after each commit, so one commit interval (10 s) later shows what it keeps.
    time.sleep(11)
    sample("settled")
    with open(log) as f:
        w = parse_bench_line(f.read(), log)
    res.add("run", "wrk", w, "")
    b.stop(p)
    qc = subprocess.run(["sqlite3", os.path.join(b.run_dir, "soak-data", "kiwi.db"),
                         "PRAGMA quick_check;"], capture_output=True, text=True)
    quick_check = " ".join((qc.stdout + qc.stderr).split("\n")).strip()
    errors = w["non2xx"] + w["bad_body"] + w["socket_errors"]
    res.add("run", "soak", {"minutes": b.soak_minutes, "pinning": b.pinning,
                            "history_fill": fill, "quick_check": quick_check,
                            "errors": errors}, "")
    b.section_meta(res, load_before)
    b.errors += errors
    mem = [r["value"] for r in res.rows if r["measure"] == "memory"]
    b.say(f"soak: RSS after {mem[-2]['rss_kib']} KiB, settled {mem[-1]['rss_kib']} KiB, PSS "
          f"settled {mem[-1]['pss_kib']} KiB, quick_check {quick_check}")
