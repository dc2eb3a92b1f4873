"""The --history-day step of tools/bench/run.sh (also the last step of --all): issue 17's
"a 24 h, 1,000-point query of one series in <= 5 ms whatever the number of other series".
kiwi-bench-history (tools/bench/history_query.cpp, built with the tests) fills a store per size
with a day of 1 Hz samples through Store::append() and flush(), as the collector does, then
times Store::query() over the day at a step of 86.4 s, of one series and of all of them (median
of 5). It runs pinned to the server's CPU; its table is parsed into one JSON line per size in
results/history_day.jsonl, which tools/bench/report.py renders (a section and a targets row).
The four sizes take about 5 minutes, most of it filling the 6,115-series store."""

import os
import re
import subprocess

from benchlib import Failure, loadavg

# 80: the default sensors on this project's 2-core VM; 393, 1,537 and 6,115: the generated big
# host of tools/bench/scale.py at 1/16, 1/4 and full size (their series with veth included).
SERIES = (80, 393, 1537, 6115)
ROW = re.compile(r"^\| (\d+) \| ([\d.]+) MB \| ([\d.]+) s \| ([\d.]+) ms \((\d+) points\) \| "
                 r"([\d.]+) ms \((\d+) points\) \|$")


def parse(text):
    """The rows of kiwi-bench-history --series' table, as dicts."""
    out = []
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if m:
            out.append({"series": int(m[1]), "file_mb": float(m[2]), "fill_s": float(m[3]),
                        "one_ms": float(m[4]), "one_points": int(m[5]),
                        "all_ms": float(m[6]), "all_points": int(m[7])})
    return out


def run(b):
    program = os.path.join(b.build_dir, "bin", "kiwi-bench-history")
    if not os.access(program, os.X_OK):
        b.check_failures.append(f"history-day: no {program} (it comes with "
                                "-DKIWI_BUILD_TESTS=ON)")
        return
    res = b.results("history_day")
    load_before = loadavg()
    sizes = ",".join(map(str, SERIES))
    b.say(f"history-day: a day of 1 Hz history at {sizes} series, one series and all of them "
          "over 24 h at 1,000 points (about 5 minutes)")
    r = subprocess.run(b.pin_server + [program, "--series", sizes], capture_output=True,
                       text=True, timeout=1800)
    rows = parse(r.stdout)
    if r.returncode or len(rows) != len(SERIES):
        raise Failure(f"kiwi-bench-history --series {sizes} failed (exit {r.returncode}):\n"
                      f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    for row in rows:
        res.add("history", "day_query", row, "ms")
        b.say(f"history-day: {row['series']:>5} series: one series {row['one_ms']:.2f} ms, all "
              f"{row['all_ms']:.1f} ms ({row['file_mb']:.1f} MB, filled in {row['fill_s']:.1f} s)")
    res.add("run", "program", {"command": f"build/bin/kiwi-bench-history --series {sizes}"}, "")
    b.section_meta(res, load_before)
