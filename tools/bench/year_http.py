#!/usr/bin/python3
"""A year of history over HTTP: the dashboard's long views as the browser asks them of an agent.

kiwi-bench-year (build/bin/kiwi-bench-year DIR) fills DIR/kiwi.db with a year of the default
sensors' worth of series at the default retentions and times Store::query() on it; this runs the
real agent on a copy of that file (its built-in configuration, loopback, the data directory on the
same filesystem as --work) and times what a browser waits for: GET /api/history with the
dashboard's parameters (since, step, limit, band=true, series=<12 names>, as www/assets/app.js
builds them for its 1 y, 30 d and 7 d ranges), the JSON rendered and sent, gzip asked as
browsers do. Each view --runs times (default 9) over one kept-alive connection, each with a
`since` a second later than the one before (so no answer comes from the handler's cache); the
median and the slowest, and the body's size. The agent's file check (quick_check) is waited out
before the first request. Every process started is stopped by its PID at the end.

Usage: tools/bench/year_http.py --year-db DIR/kiwi.db [--agent-bin PATH] [--runs R] [--work DIR]
"""

import argparse
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Agent, Failure, Processes, answers, free_ports, kiwi_config,  # noqa: E402
                      wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The names of tools/bench/history_year.cpp's "dashboard" case (12 names, 33 series).
NAMES = ["fill_gauge_0", "fill_gauge_1", "fill_gauge_2", "fill_counter_0", "fill_counter_1",
         "fill_counter_2", "fill_constant_0", "fill_gauge_4", "fill_gauge_5", "fill_counter_4",
         "fill_counter_5", "fill_gauge_6"]
DAY = 86400
# app.js RANGES: (name, seconds, step)
VIEWS = [("1 y", 365 * DAY, 43200), ("30 d", 30 * DAY, 3600), ("7 d", 7 * DAY, 600)]


def say(msg):
    print(f"year_http: {msg}", file=sys.stderr, flush=True)


def view_path(seconds, step, now):
    since = int(now - seconds)
    limit = max(1, -(-(int(now) - since) // step) + 1)
    return (f"/api/history?since={since}&step={step}&limit={limit}&band=true"
            f"&series={','.join(NAMES)}")


def run(args):
    if not os.access(args.agent_bin, os.X_OK):
        raise Failure(f"no agent binary at {args.agent_bin} (tools/build.sh builds one)")
    if not os.path.isfile(args.year_db):
        raise Failure(f"no file at {args.year_db} (build/bin/kiwi-bench-year DIR makes one)")
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="year-http.", dir=args.work)
    procs = Processes(work)
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        shutil.copyfile(args.year_db, os.path.join(data, "kiwi.db"))
        if os.path.isdir(args.year_db + "-ticks"):  # its tick log (schema 6)
            shutil.copytree(args.year_db + "-ticks", os.path.join(data, "kiwi.db-ticks"))
        port = free_ports(1)[0]
        cfg = os.path.join(work, "kiwi.toml")
        with open(cfg, "w") as f:
            f.write(kiwi_config(args.agent_bin, {
                ("agent", "data_dir"): data, ("http", "bind"): f"127.0.0.1:{port}",
                ("collector", "snapshot_path"): os.path.join(work, "current.json")}))
        agent = Agent(procs, args.agent_bin, cfg, "kiwi-agent", cwd=work)
        agent.start(30, require=True)
        wait_until("the agent answering /api/health", lambda: answers(port), 60, procs)
        # The quick_check of the file it opened reads the whole file on a thread of its own,
        # beside serving, and says nothing when it finds it sound: 3 s leave it time to end
        # (0.24 s for this 137 MB file in the sqlite3 shell here) before the timed requests.
        time.sleep(3)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Accept-Encoding": "gzip"}
        print(f"{'view':<6} {'median':>9} {'slowest':>9}  body (gzip)")
        now = time.time()
        for name, seconds, step in VIEWS:
            took, size = [], 0
            for i in range(args.runs + 1):
                t0 = time.perf_counter()
                conn.request("GET", view_path(seconds, step, now + i), headers=headers)
                r = conn.getresponse()
                body = r.read()
                dt = (time.perf_counter() - t0) * 1000
                if r.status != 200:
                    raise Failure(f"{name}: status {r.status}: {body[:200]!r}")
                size = len(body)
                if i:  # the first opens the read connection, as an agent's first request does
                    took.append(dt)
            now += args.runs + 1
            print(f"{name:<6} {statistics.median(took):7.2f} ms {max(took):7.2f} ms  "
                  f"{size / 1000:.1f} kB")
        conn.close()
        procs.stop(agent.proc)
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--year-db", required=True)
    ap.add_argument("--agent-bin", default=os.path.join(ROOT, "build", "bin", "kiwi-agent"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    args = ap.parse_args()
    try:
        run(args)
    except Failure as e:
        say(str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
