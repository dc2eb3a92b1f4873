#!/usr/bin/python3
"""Renders docs/benchmarks.md from the JSON lines of tools/bench/run.sh's modes.

Reads the last run of each results file in the results directory (matrix.jsonl, startup.jsonl,
keepalive.jsonl, bodies.jsonl, soak.jsonl, idle.jsonl, reload.jsonl, history_day.jsonl,
instructions.jsonl, machine.jsonl; footprint.jsonl, scale.jsonl and disk.jsonl for the targets table) and rewrites
the page: the introduction, the machine, the targets table (issue 17's targets, each with its
verdict and the source of its figure; a target without results says "not measured"), then the
sections. A section of these modes whose results are not in the directory is kept as it is in the
page, and so is every other section (those that tools/bench/footprint.py, scale.py, fleet.py and
disk.py put into the page, and the hand-written ones), each where it was.

Usage: tools/bench/report.py [--results DIR] [--out FILE]
  (defaults: build/bench/results and docs/benchmarks.md; tools/bench/run.sh --report-only runs
  this on them)
"""

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROUTES = {"root": "/", "current": "/api/current", "history": "/api/history?limit=120",
          "metrics": "/metrics"}
MATRIX = "## Throughput and latency: agent vs ceiling"
STARTUP = "## Start-up"
KEEPALIVE = "## Keep-alive: 1,000 idle connections"
SOAK = "## Soak: history at 32 connections"
IDLE = "## Idle: CPU and disk writes at 1 Hz"
RELOAD = "## Reload: SIGHUP"
BODIES = "## History body size"
HISTORY_DAY = "## History: one series over 24 h at each series count"
INSTRUCTIONS = "## Instructions per request (callgrind)"
MACHINE = "## Machine"
TARGETS = "## Targets (issue 17)"
NOTES_HEADING = "## How to read these figures"
# in the order of a new page
OWNED = (MATRIX, INSTRUCTIONS, STARTUP, KEEPALIVE, SOAK, IDLE, RELOAD, BODIES, HISTORY_DAY)

INTRO = """# kiwi-agent benchmarks

Produced by `tools/bench/run.sh` (see `--help`): each mode writes one JSON line per measurement \
under `{results}/`, and `tools/bench/report.py` renders this page from them, keeping as \
it is any section it has no results for; every section names the exact command that produced it.
Method: the lab's (1, 8 and 32 persistent connections, each route repeatedly with the route \
order rotated, the median of the repetitions with the min-max range, the median of the per-run \
p95, status checked on every response and bodies on a sample), measured side by side against a \
ceiling server: `tools/bench/ceiling.c`, libmicrohttpd with the agent's HTTP settings (internal \
epoll thread pool, 5 s keep-alive, 256 connections, answer on the second handler call) answering \
a fixed in-memory body of the same size (`MHD_RESPMEM_PERSISTENT`, one response object for all \
requests), and once with an empty body.

"""

NOTES = """## How to read these figures

- wrk runs one thread on its own CPU with `tools/bench/report.lua`: every response's status is
  checked, and one response in 100 has its body checked (`{"version":1` at the start for the JSON
  routes and the ceiling, `<html` for `/`, `# TYPE ` for `/metrics`). Latency percentiles are wrk's.
- The ceiling answers every path with one response object created at start-up, so it measures
  libmicrohttpd, the kernel and wrk on this machine; the agent's ratio is what its routing,
  handlers and per-request response objects cost on top. It links the agent's libmicrohttpd and
  uses its settings: worker threads (auto: one per CPU it may use, so 1 when pinned) and 16 KiB of
  memory per connection (`kiwi-bench-ceiling --threads N --memory-limit BYTES` set others).
- RSS counts every page of a shared library that the agent mapped, and the kernel maps library
  pages 64 KiB at a time around each one touched. About 6 MiB of the agent's RSS is the libraries
  of the Debian stack it is built on (libstdc++ 1.7, libc 1.5, SQLite 1.2, libm 0.6, toml++,
  Boost.Filesystem, zlib, the loader), 0.75 MiB the twelve plugins (built with -Os: 1.1 MiB at
  -O3), 0.5 MiB the executable, and about 1 MiB its heap and thread stacks; the libmicrohttpd
  built by `tools/setup-mhd.sh` spares the 2.4 MiB that GnuTLS and its dependencies cost with
  Debian's shared libmicrohttpd. PSS divides shared pages among the processes that map them, so
  it depends on what else runs.
- The agent runs with `glibc.malloc.tcache_count=1` (it adds it to `GLIBC_TUNABLES` and executes
  itself once at start): glibc's default per-thread cache pins heap pages that `malloc_trim`
  cannot return, which showed as about 100 KiB of RSS growth over the soak. A `tcache_count` set
  in `GLIBC_TUNABLES` by the user is kept.
- write_bytes counts page-cache pages the agent dirtied on a disk filesystem, the closest figure
  to what reaches the flash; the snapshot file is on tmpfs as in the default `/run/kiwi-agent`.
- On a shared or virtual machine, compare ratios (taken side by side) rather than absolute
  figures; each section records the load average around it.
"""


# ----------------------------------------------------------------------------------------------
# results


def last_run(results_dir, name, complete=None):
    """The rows of the last run in results_dir/NAME.jsonl ([] when there is none); with
    `complete`, the last run that has a row of that measure (a mode writes its "section" row
    last, so a run that failed half-way is passed over)."""
    try:
        with open(os.path.join(results_dir, f"{name}.jsonl")) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []
    done = [r["run"] for r in rows if complete is None or r["measure"] == complete]
    return [r for r in rows if r["run"] == done[-1]] if done else []


def meta(rows, measure):
    return next((r["value"] for r in reversed(rows) if r["side"] == "run"
                 and r["measure"] == measure), {})


def values(rows, measure):
    return [r["value"] for r in rows if r["measure"] == measure and r["side"] != "run"]


def num(v):
    """A median as awk's %s printed it: an integer without a decimal point."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def rel(path):
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def section_header(title, m):
    return (f"## {title}\n\n- command: `{m.get('command', '?')}` ({m.get('when', '?')})\n"
            f"- agent: {m.get('agent', '?')}, commit {m.get('commit', '?')}; load average (1, 5, "
            f"15 min) before: {m.get('load_before', '?')}, after: {m.get('load_after', '?')}\n")


# ----------------------------------------------------------------------------------------------
# the matrix


def matrix_summary(rows):
    """{(target, route, conns): medians of the repetitions} in the order first run."""
    groups = {}
    for r in rows:
        if r["measure"] != "wrk":
            continue
        v = r["value"]
        groups.setdefault((r["side"], v["route"], v["conns"]), []).append(v)
    out = {}
    for key, runs in groups.items():
        rps = [x["rps"] for x in runs]
        out[key] = dict(
            body=statistics.median(x["body"] for x in runs), rps=statistics.median(rps),
            rps_min=min(rps), rps_max=max(rps),
            p50=statistics.median(x["p50_us"] for x in runs),
            p95=statistics.median(x["p95_us"] for x in runs),
            p99=statistics.median(x["p99_us"] for x in runs),
            non2xx=sum(x["non2xx"] for x in runs), bad=sum(x["bad_body"] for x in runs),
            checked=sum(x["checked"] for x in runs),
            socket_errors=sum(x["socket_errors"] for x in runs),
            cpu=statistics.median(x["cpu_us_per_response"] for x in runs),
            other=statistics.median(x["other_cpu0_ms_per_s"] for x in runs))
    return out


def ratios(a, c):
    """resp/s, p95, p99 and CPU ratios of an agent cell to its ceiling cell."""
    return dict(rps=a["rps"] / c["rps"] if c["rps"] else 0.0,
                p95=a["p95"] / (c["p95"] if c["p95"] > 0 else 1),
                p99=a["p99"] / (c["p99"] if c["p99"] > 0 else 1),
                cpu=c["cpu"] / a["cpu"] if a["cpu"] > 0 else 0.0)


def ms3(s):
    return f"{s['p50'] / 1000:.2f} / {s['p95'] / 1000:.2f} / {s['p99'] / 1000:.2f}"


def render_matrix(rows, results_dir):
    m, s = meta(rows, "matrix"), matrix_summary(rows)
    out = [section_header("Throughput and latency: agent vs ceiling", meta(rows, "section"))]
    out.append(f"- mode: {m['mode']}; {m['reps']} repetitions x {m['duration']} s per cell, "
               f"connections {' '.join(map(str, m['conns']))}; route order rotated between "
               "repetitions\n")
    out.append(f"- pinning: {m['pinning']} (agent affinity: CPU {m['affinity'] or '?'}); HTTP "
               f"worker threads: {m['http_threads']} in the agent and in the ceiling (agent log: "
               f"{m['agent_threads']})\n")
    out.append(f"- history: {m['history_fill']}\n")
    out.append(f"- agent RSS after the matrix: {m['rss_kib'] or '?'} KiB\n")
    out.append("- resp/s: median of the repetitions (min-max); p50/p95/p99: median of the per-run "
               "percentiles, ms; ratio = agent / ceiling with the same body size, taken side by "
               "side (each agent run is followed by its ceiling run); errors = non-2xx + bad "
               "sampled bodies + socket errors\n\n")
    out.append("| route | conns | body B | agent resp/s (min-max) | ceiling resp/s (min-max) | "
               "resp/s ratio | agent p50 / p95 / p99 ms | ceiling p50 / p95 / p99 ms | p95 ratio "
               "| p99 ratio | agent errors (bodies checked) |\n")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    cpu_rows = []
    for (t, route, c), a in s.items():
        if t != "agent":
            continue
        cl = s.get(("ceiling", route, c))
        if not cl:
            continue
        q = ratios(a, cl)
        path = ROUTES.get(route, route)
        out.append(f"| `{path}` | {c} | {num(a['body'])} | {a['rps']:.0f} ({a['rps_min']:.0f}-"
                   f"{a['rps_max']:.0f}) | {cl['rps']:.0f} ({cl['rps_min']:.0f}-"
                   f"{cl['rps_max']:.0f}) | **{q['rps']:.2f}** | {ms3(a)} | {ms3(cl)} | "
                   f"{q['p95']:.2f} | {q['p99']:.2f} | "
                   f"{a['non2xx'] + a['bad'] + a['socket_errors']} ({a['checked']}) |\n")
        cpu_rows.append(f"| `{path}` | {c} | {a['cpu']:.1f} | {cl['cpu']:.1f} | "
                        f"**{q['cpu']:.2f}** | {a['other']:.0f} / {cl['other']:.0f} |")
    for sk in m.get("skipped", []):
        out.append(f"| `{sk['path']}` | not available: HTTP {sk['code']} from the agent, route "
                   "skipped |\n")
    for (t, route, c), e in s.items():
        if t != "empty":
            continue
        out.append(f"| empty ceiling | {c} | 0 | | {e['rps']:.0f} ({e['rps_min']:.0f}-"
                   f"{e['rps_max']:.0f}) | | | {ms3(e)} | | | |\n")
        cpu_rows.append(f"| empty ceiling | {c} | | {e['cpu']:.1f} | | / {e['other']:.0f} |")
    out.append("\nServer CPU per response (median of the runs, µs, all server threads from "
               "/proc/PID/task/*/schedstat) and the other use of CPU 0 during the run (its busy "
               "time in /proc/stat minus the server's, ms per second: other processes, "
               "interrupts, hypervisor steal; high values mean a busy machine and less "
               "trustworthy resp/s). The CPU ratio (ceiling / agent) is the resp/s ratio the "
               "agent would reach with its core to itself, when the server CPU is the "
               "bottleneck.\n\n")
    out.append("| route | conns | agent µs CPU/resp | ceiling µs CPU/resp | CPU ratio | other use "
               "of CPU 0, agent / ceiling run, ms/s |\n|---|---:|---:|---:|---:|---:|\n")
    out.append("\n".join(cpu_rows) + "\n")
    out.append(f"\nRaw runs: `{rel(os.path.join(results_dir, 'matrix.jsonl'))}` (one JSON line "
               "per wrk run: rep, target, route, conns, body, resp/s, p50/p95/p99 us, non-2xx, "
               "checked, bad, socket errors, µs server CPU per response, other use of CPU 0 in "
               "ms/s).\n\n")
    return "".join(out)


def startup_groups(rows):
    """{"fresh": [runs], "24h": [runs]} (runs before the 24 h case existed count as fresh)."""
    out = {}
    for r in values(rows, "startup"):
        out.setdefault(r.get("data", "fresh"), []).append(r)
    return out


def render_startup(rows):
    groups = startup_groups(rows)
    out = [section_header("Start-up", meta(rows, "section"))]
    n = max(len(v) for v in groups.values())
    out.append(f"- exec to first 200, {n} runs each: a fresh data directory each run (the "
               "database is created)")
    day = groups.get("24h")
    if day:
        mb = day[0]["db_bytes"] / 1e6
        out.append(f", and a copy of one holding 24 h of 1 Hz history ({mb:.1f} MB, written by "
                   "`build/bin/kiwi-bench-fill` through the agent's Store, a commit every 10 s, "
                   "ending when the runs began; copied before each run, so it is in the "
                   "page cache: a start after a reboot reads it from flash)")
    out.append("; agent pinned to CPU 0, the poller (a socket from Python, no process per try) "
               "on CPU 1\n")
    out.append("- agent CPU time and run-queue wait (all threads, /proc/PID/task/*/schedstat) "
               "until the first 200 on `/api/current`: the wait is time the agent was runnable "
               "but another process had the CPU\n")
    qc = values(rows, "quick_check")
    if qc:
        out.append(f"- `sqlite3 kiwi.db 'PRAGMA quick_check(1);'` on the 24 h file (the check "
                   "the agent's store runs on a thread of its own beside start-up, off the path "
                   f"to the first 200; it reads every page): {qc[-1]['ms']:.1f} ms, "
                   "median of 3, the sqlite3 process included\n")
    out.append("\n")
    cols = [k for k in ("fresh", "24h") if k in groups]
    out.append("| measure | " + " | ".join(f"{k} data directory: median | runs" for k in cols)
               + " |\n|---" + "|---:|---" * len(cols) + "|\n")
    for label, key in (("first 200 on `/`, ms", "root_ms"),
                       ("first 200 on `/api/current` (first sample served), ms", "current_ms"),
                       ("agent CPU time, ms", "cpu_ms"), ("agent run-queue wait, ms", "wait_ms")):
        cells = []
        for k in cols:
            vs = [r[key] for r in groups[k]]
            cells.append(f"{statistics.median(vs):.1f} | " + " ".join(f"{v:.1f}" for v in vs))
        out.append(f"| {label} | " + " | ".join(cells) + " |\n")
    return "".join(out) + "\n"


def startup_median(rows, data="fresh"):
    runs = startup_groups(rows).get(data)
    if not runs:
        return None
    return (statistics.median(r["root_ms"] for r in runs),
            statistics.median(r["current_ms"] for r in runs))


# ----------------------------------------------------------------------------------------------
# keep-alive


KEEPALIVE_VARIANTS = {
    "default": "on the agent's defaults (`[http] max_connections` 256: it keeps 256 slots and "
               "gives a newcomer the longest-idle one, so the swarm churns)",
    "held": "with `[http] max_connections` raised above the crowd and `keep_alive` above the "
            "step, so all of it stays open and silent",
}


def keepalive_summary(rows):
    """{variant: {conns: {"without": [runs before and after], "with": [runs]}}}; a run's rep is
    its phase, prefixed with "VARIANT-" but on the defaults."""
    out = {}
    for r in rows:
        if r["measure"] != "wrk":
            continue
        v = r["value"]
        variant, _, phase = v["rep"].rpartition("-")
        phase = "with" if phase == "with" else "without"
        cell = out.setdefault(variant or "default", {}).setdefault(v["conns"],
                                                                   {"without": [], "with": []})
        cell[phase].append(v)
    return out


def swarm_meta(rows, variant):
    return next((r["value"] for r in reversed(rows) if r["side"] == "run"
                 and r["measure"] == "swarm"
                 and r["value"].get("variant", "default") == variant), {})


def keepalive_ratio(cell):
    """resp/s with the idle connections over the mean of the runs without them."""
    base = statistics.mean(x["rps"] for x in cell["without"]) if cell["without"] else 0
    return cell["with"][0]["rps"] / base if base and cell["with"] else None


def render_keepalive(rows):
    out = [section_header("Keep-alive: 1,000 idle connections", meta(rows, "section"))]
    for variant, cells in keepalive_summary(rows).items():
        sw = swarm_meta(rows, variant)
        st, en = sw.get("start", {}), sw.get("end", {})
        out.append(f"**{variant}**: `/api/current` with wrk ({sw.get('duration', '?')} s a run) "
                   f"{KEEPALIVE_VARIANTS.get(variant, '')}; without, then with "
                   f"{sw.get('count')} idle keep-alive connections (tools/faults/faults.py's "
                   "`Swarm`: each sends one GET, reads the answer, then stays silent; one the "
                   "agent closes is opened again a second later), then without again; ratio = "
                   f"with / mean of the two without; ulimit -n {sw.get('ulimit_n', '?')}\n\n")
        out.append(f"- the swarm while wrk ran: {en.get('connects', 0) - st.get('connects', 0)} "
                   f"connects, {en.get('closed_by_server', 0) - st.get('closed_by_server', 0)} "
                   "closed by the agent, "
                   f"{en.get('connect_errors', 0) - st.get('connect_errors', 0)} connect errors; "
                   f"{en.get('open_now', '?')} open at the end\n\n")
        out.append("| conns | without: resp/s (before, after) | with: resp/s | ratio | p99 ms "
                   "without / with | errors with (non-2xx + bad + socket) |\n"
                   "|---:|---:|---:|---:|---:|---:|\n")
        for c, cell in cells.items():
            q = keepalive_ratio(cell)
            w = cell["with"][0] if cell["with"] else None
            wo = cell["without"]
            p99 = statistics.median(x["p99_us"] for x in wo) / 1000 if wo else 0
            out.append(f"| {c} | " + ", ".join(f"{x['rps']:.0f}" for x in wo) + " | "
                       + (f"{w['rps']:.0f} | **{q:.2f}** | {p99:.2f} / {w['p99_us'] / 1000:.2f}"
                          f" | {w['non2xx'] + w['bad_body'] + w['socket_errors']} |" if w and q
                          else "- | - | - | - |") + "\n")
        out.append("\n")
    return "".join(out)


# ----------------------------------------------------------------------------------------------
# history over a day (tools/bench/history_day.py)


def render_history_day(rows):
    found = values(rows, "day_query")
    out = [section_header(HISTORY_DAY[3:], meta(rows, "section"))]
    out.append(f"- program: `{meta(rows, 'program').get('command', '?')}` "
               "(tools/bench/history_query.cpp), pinned to the server's CPU: each size a new "
               "store filled with a day of 1 Hz samples through `Store::append()` and `flush()` "
               "as the collector does (a commit every 10 s), then `Store::query()` over the day "
               "at a step of 86.4 s (1,000 points), median of 5; 393, 1,537 and 6,115 are the "
               "series of the big host at 1/16, 1/4 and full size (`tools/bench/scale.py`)\n\n"
               "| series | file (db + wal) | fill (append + flush) | one series, 24 h | "
               "all series, 24 h |\n|---:|---:|---:|---:|---:|\n")
    for f in found:
        out.append(f"| {f['series']:,} | {f['file_mb']:.1f} MB | {f['fill_s']:.1f} s | "
                   f"{f['one_ms']:.2f} ms ({f['one_points']} points) | {f['all_ms']:.1f} ms "
                   f"({f['all_points']} points) |\n")
    return "".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# instructions per request (tools/bench/instructions.py)


def render_instructions(rows):
    by = {(r["side"], r["value"]["route"]): r["value"] for r in rows
          if r["measure"] == "per_request"}
    out = [section_header(INSTRUCTIONS[3:], meta(rows, "section"))]
    out.append("- the agent (default sensors at a 1 min interval, so that no new sample lands in "
               "the window: its history holds one; pinned, 1 HTTP worker) and the ceiling with a "
               "body of the same size, each under `valgrind --tool=callgrind --separate-threads=yes`; "
               "3 s of wrk at 8 connections, counters zeroed, 10 s more, then a dump "
               "(tools/bench/instructions.py). Worker: every instruction of the HTTP worker "
               "threads (libmicrohttpd's parsing, its 16 KiB memset of the connection's pool, "
               "the callback, the response headers; the kernel is not counted) over the "
               "requests; callback: `on_request` inclusive (the agent's: the gates, the router, "
               "the handler across the C ABI). Counts do not depend on the machine's load.\n\n"
               "| route | body B | agent, worker | ceiling, worker | ratio | agent, callback "
               "| ceiling, callback |\n|---|---:|---:|---:|---:|---:|---:|\n")
    for name, path in ROUTES.items():
        a, c = by.get(("agent", name)), by.get(("ceiling", name))
        if not a or not c:
            continue
        out.append(f"| `{path}` | {a['body']} | {a['worker']:,.0f} | {c['worker']:,.0f} | "
                   f"{a['worker'] / c['worker']:.2f} | {a['callback']:,.0f} | "
                   f"{c['callback']:,.0f} |\n")
    return "".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# soak, idle, reload, bodies


def soak_figures(rows):
    m = meta(rows, "soak")
    samples = values(rows, "memory")
    numeric = [s for s in samples if isinstance(s["t"], int)]
    at = {s["t"]: s for s in samples if not isinstance(s["t"], int)}
    secs = m["minutes"] * 60
    warm = min(secs // 4, 60)
    first = [s["rss_kib"] for s in numeric if warm < s["t"] <= warm + 30]
    last = [s["rss_kib"] for s in numeric if s["t"] > len(numeric) - 30]
    growth = (statistics.median(last) - statistics.median(first)) if first and last else None
    return dict(m=m, samples=samples, numeric=numeric, after=at.get("after"),
                settled=at.get("settled"), warm=warm, growth=growth,
                rss_max=max(s["rss_kib"] for s in samples),
                rss_min=min(s["rss_kib"] for s in samples),
                pss_max=max(s["pss_kib"] for s in samples))


def render_soak(rows, results_dir):
    f = soak_figures(rows)
    m, w = f["m"], meta(rows, "wrk")
    after, settled, growth = f["after"], f["settled"], f["growth"]
    out = [section_header("Soak: history at 32 connections", meta(rows, "section"))]
    out.append(f"- {m['minutes']} min of `/api/history?limit=120` at 32 connections "
               f"({m['pinning']}); history: {m['history_fill']}\n")
    out.append(f"- wrk: {w['rps']:.0f} resp/s, p50 / p95 / p99 {w['p50_us'] / 1000:.2f} / "
               f"{w['p95_us'] / 1000:.2f} / {w['p99_us'] / 1000:.2f} ms, {w['requests']} "
               f"requests, non-2xx {w['non2xx']}, bad bodies {w['bad_body']} of {w['checked']} "
               f"checked, socket errors {w['socket_errors']}\n")
    out.append(f"- `PRAGMA quick_check` after the agent stopped: **{m['quick_check']}**\n\n")
    out.append("| agent memory | KiB | MiB |\n|---|---:|---:|\n")

    def row(label, kib):
        return f"| {label} | {kib} | {kib / 1024:.2f} |\n"

    out.append(row("RSS at the end of the load", after["rss_kib"]))
    out.append(row("RSS 11 s later, idle (one commit interval: freed heap returned)",
                   settled["rss_kib"]))
    out.append(row("PSS 11 s later, idle", settled["pss_kib"]))
    out.append(row("PSS after the soak", after["pss_kib"]))
    out.append(f"| RSS min / max during the soak | {f['rss_min']} / {f['rss_max']} | "
               f"{f['rss_min'] / 1024:.2f} / {f['rss_max'] / 1024:.2f} |\n")
    out.append(row("PSS max during the soak", f["pss_max"]))
    g = "?" if growth is None else num(growth)
    out.append(f"| RSS growth: median of the last 30 s minus median of s {f['warm'] + 1}-"
               f"{f['warm'] + 30} (after warm-up) | {g} | "
               + ("?" if growth is None else f"{growth / 1024:.2f}") + " |\n\n")
    out.append("RSS / PSS (KiB) each minute: " + "".join(
        f"{s['t']}s {s['rss_kib']}/{s['pss_kib']}; " for s in f["numeric"]
        if s["t"] % 60 == 0 or s["t"] == 1))
    out.append(f"\nPer-second samples: `{rel(os.path.join(results_dir, 'soak.jsonl'))}`.\n\n")
    return "".join(out)


def render_idle(rows):
    m = meta(rows, "idle")
    out = [section_header("Idle: CPU and disk writes at 1 Hz", meta(rows, "section"))]
    scraped = " and one GET `/metrics`" if m["metrics"] else (
        " (`/metrics` not available: not scraped)")
    out.append(f"- default sensors at 1 s; each second one GET `/api/current`{scraped} with curl, "
               f"a new connection each ({m['polls']} polls); agent pinned to CPU 0\n")
    out.append(f"- CPU: utime+stime from /proc/PID/stat ({m['clk_tck']} ticks/s); disk: "
               f"write_bytes from /proc/PID/io; database on {m['data_dir']} ({m['filesystem']}), "
               f"snapshot on tmpfs ({m['snapdir']}); after 5 s warm-up\n\n")
    el = m["elapsed_s"]
    out.append("| measure | value |\n|---|---:|\n")
    out.append(f"| CPU over the first {m['cpu_window_s']} s, % of one core | "
               f"{m['cpu_pct']:.3f} % ({m['cpu_ticks']} ticks) |\n")
    out.append(f"| CPU over {el:.0f} s, % of one core | {m['cpu_pct_all']:.3f} % "
               f"({m['cpu_ticks_all']} ticks) |\n")
    out.append(f"| write_bytes over {el:.0f} s, fresh database (history growing) | "
               f"{m['write_bytes']} B |\n")
    out.append(f"| write_bytes per hour, fresh database (extrapolated) | "
               f"{m['write_bytes_per_hour'] / 1e6:.2f} MB |\n")
    out.append(f"| write_bytes over the same {el:.0f} s, steady state (retention 1 min: every "
               f"commit also prunes, as after 24 h) | {m['steady_write_bytes']} B |\n")
    out.append(f"| write_bytes per hour, steady state (extrapolated) | "
               f"{m['steady_write_bytes_per_hour'] / 1e6:.2f} MB |\n")
    out.append(f"| RSS / PSS at the end | {m['rss_kib']} / {m['pss_kib']} KiB |\n\n")
    out.append(f"CPU by thread over the first {m['cpu_window_s']} s (schedstat, ms; \"kiwi-agent\" "
               "is the main thread and the collector): " + "".join(
                   f"{k} {v:.1f}; " for k, v in m["threads_ms"].items()) + "\n\n")
    return "".join(out)


def reload_stat(rounds, kind, change, key):
    vs = sorted(r[key] for r in rounds if r["kind"] == kind and (not change or
                r["change"] == change) and r.get(key) is not None)
    if not vs:
        return "nan", "nan", "nan"
    return f"{statistics.median(vs):.1f}", f"{vs[0]:.1f}", f"{vs[-1]:.1f}"


def render_reload(rows, results_dir):
    c, rounds = meta(rows, "reload"), values(rows, "reload")

    def verdict(ok):
        return "pass" if ok else "**FAIL**"

    out = [section_header("Reload: SIGHUP", meta(rows, "section"))]
    out.append(f"- machine: {c['machine']}; {c['pinning']}; one agent (pid {c['pid']}, "
               f"{c['build_type']} build), default sensors, fresh data directory; {c['rounds']} "
               "rounds of three reloads in turn, each changing something: `[collector] interval` "
               f"1s <-> 2s, `http.bind` 127.0.0.1:{c['port_a']} <-> 127.0.0.1:{c['port_b']}, "
               "then an unterminated string (a TOML error; the file is put back afterwards)\n")
    out.append(f"- times from `kill -HUP`, median and min-max of {c['rounds']}: the log is read "
               "through a file held open and polled in 1 ms steps, `/api/current` and both bind "
               "probes through a socket from Python in 1 ms steps (no process per try; the new "
               "port and the old one in the same loop); \"in X ms\" is the agent's own figure "
               "from its `reloaded` line (from the start of the reload to the new configuration "
               "in force)\n")
    out.append("- the `/api/current` times are not the reload's cost: they include the wait for "
               "the first sample taken on the new interval's grid (up to 2 s after a change to "
               "2 s, up to 1 s after a change to 1 s)\n\n")
    out.append("| measure | median, ms | min-max, ms |\n|---|---:|---:|\n")
    for label, kind, change, key in (
            ("interval 1s <-> 2s: to the `reloaded` line in the log", "interval", "", "log_ms"),
            ("interval: the agent's \"in X ms\"", "interval", "", "agent_ms"),
            ("interval 1s -> 2s: to `interval_seconds` 2 in `/api/current` (includes the wait for "
             "the first tick on the 2 s grid)", "interval", "1s->2s", "effect_ms"),
            ("interval 2s -> 1s: to `interval_seconds` 1 in `/api/current` (includes the wait for "
             "the next tick on the 1 s grid)", "interval", "2s->1s", "effect_ms"),
            ("bind A <-> B: to the first 200 on the new port", "bind", "", "effect_ms"),
            ("bind: to the old port refusing connections", "bind", "", "refused_ms"),
            ("bind: to the `reloaded` line (`...; now listening on` the new URL; read between "
             "the probes)", "bind", "", "log_ms"),
            ("bind: the agent's \"in X ms\"", "bind", "", "agent_ms"),
            ("TOML error: to the `reload failed` line", "failed", "", "log_ms")):
        med, lo, hi = reload_stat(rounds, kind, change, key)
        out.append(f"| {label} | {med} | {lo}-{hi} |\n")
    n = c["rounds"]
    counts_ok = (c["failed_lines"] == n and c["failed_total"] == n and c["ok_lines"] == 2 * n
                 and c["ok_total"] == 2 * n)
    hist_ok = c["count"] >= 2 and c["max_step"] is not None and c["max_step"] <= 2
    out.append("\n| check | result | verdict |\n|---|---|---|\n")
    out.append("| same process throughout (pid, start time, pid in the snapshot lock file) | "
               f"pid {c['pid']} | {verdict(c['pid_ok'])} |\n")
    out.append(f"| only the deliberate reloads failed | log: {c['ok_lines']} `reloaded`, "
               f"{c['failed_lines']} `reload failed`; `/api/health`: ok_total "
               f"{c['ok_total'] if c['ok_total'] is not None else '?'}, failed_total "
               f"{c['failed_total'] if c['failed_total'] is not None else '?'} | "
               f"{verdict(counts_ok)} |\n")
    out.append(f"| old port refuses after each bind change | {c['refused_ok']} of {n} | "
               f"{verdict(c['refused_ok'] == n)} |\n")
    out.append(f"| `/api/current` 200 right after each failed reload | {c['alive_ok']} of {n} | "
               f"{verdict(c['alive_ok'] == n)} |\n")
    step = "nan" if c["max_step"] is None else num(c["max_step"])
    out.append(f"| history since the start (`/api/history?limit=1000&since={c['t_start']}`): "
               f"largest step between consecutive timestamps, ≤ 2 s | {step} s over {c['count']} "
               f"samples | {verdict(hist_ok)} |\n\n")
    out.append(f"Raw times: `{rel(os.path.join(results_dir, 'reload.jsonl'))}` (one JSON line per "
               "reload: round, kind, change, ms to the log line, the agent's \"in X ms\", ms to "
               "the effect: `/api/current` showing the new interval, the first 200 on the new "
               "port, or the 200 after the failed reload; ms to the old port refusing).\n\n")
    return "".join(out)


def render_bodies(rows):
    v = values(rows, "history_body")[-1]
    return ("## History body size\n\n"
            f"- `GET /api/history?limit=120` with {v['count']} samples ({v['fill']}), default "
            f"sensors, measured {v['when']} by `{v['command']}`\n\n"
            "| encoding | bytes |\n|---|---:|\n"
            f"| uncompressed | {v['bytes']} |\n| gzip -6 of the body | {v['gzip_bytes']} |\n"
            f"| as served with `Accept-Encoding: gzip` | {v['served_gzip_bytes']} |\n\n")


def render_machine(rows):
    m = meta(rows, "machine")
    return ("## Machine\n\n| | |\n|---|---|\n"
            f"| CPUs | {m['cpus']} x {m['model']} |\n| memory | {m['memory']} |\n"
            f"| kernel | {m['kernel']} |\n| OS | {m['os']} |\n"
            f"| agent in the build tree when this page was written | {m['agent']}, commit "
            f"{m['commit']}, {m['build_type']} build (each section names the commit it "
            "measured) |\n"
            f"| libmicrohttpd | {m['mhd']} |\n"
            f"| wrk | {m['wrk']} (LuaJIT script `tools/bench/report.lua`) |\n"
            f"| SQLite CLI | {m['sqlite']} |\n| pinning | {m['pinning']} |\n\n"
            "This is a shared virtual machine: other work may have run at the same time; each "
            "section gives the load average around it.\n\n")


# ----------------------------------------------------------------------------------------------
# the targets


def render_targets(res, results_dir):
    """Issue 17's targets (and issue 6's that it did not replace), each from the results of this
    directory; "not measured" when they are not there."""
    out = [TARGETS, "",
           f"Each figure comes from the results under `{rel(results_dir)}/` named in the last "
           "column (a section below without such results predates them and does not count "
           "here); resp/s and p99 ratios are taken side by side in the same run.", "",
           "| target | wanted | measured | verdict | from |", "|---|---|---|---|---|"]

    def row(name, wanted, measured, ok, source):
        verdict = "not measured" if ok is None else ("pass" if ok else "**MISS**")
        out.append(f"| {name} | {wanted} | {measured if ok is not None else '-'} | {verdict} | "
                   f"{source} |")

    mx = res["matrix"]
    if mx:
        mm, s = meta(mx, "matrix"), matrix_summary(mx)
        src = (f"matrix ({mm['mode']}: {mm['reps']} x {mm['duration']} s), "
               f"{meta(mx, 'section').get('when', '?')}")
        for route in ROUTES:
            for c in (1, 8, 32):
                a, cl = s.get(("agent", route, c)), s.get(("ceiling", route, c))
                name = f"`{ROUTES[route]}` vs ceiling, {c} conn{'s' if c > 1 else ''}"
                if a and cl:
                    q = ratios(a, cl)
                    row(name, "resp/s ≥ 0.95, p99 ≤ 1.2x",
                        f"{q['rps']:.2f}, p99 {q['p99']:.2f}x (CPU ratio {q['cpu']:.2f})",
                        q["rps"] >= 0.95 and q["p99"] <= 1.2, src)
                elif route in mm.get("routes", []):
                    row(name, "resp/s ≥ 0.95, p99 ≤ 1.2x", "", None,
                        f"not in this matrix (connections {' '.join(map(str, mm['conns']))})")
                else:
                    row(name, "resp/s ≥ 0.95, p99 ≤ 1.2x", "", None,
                        "route not available in this build")
    else:
        for route in ROUTES:
            row(f"`{ROUTES[route]}` vs ceiling, 1, 8 and 32 conns", "resp/s ≥ 0.95, p99 ≤ 1.2x",
                "", None, "run the matrix (tools/bench/run.sh)")
    ka = keepalive_summary(res["keepalive"])
    name = "`/api/current` with 1,000 idle keep-alive connections open"
    for variant, cells in ka.items():
        qs = {c: keepalive_ratio(cell) for c, cell in cells.items()}
        errs = sum(x["non2xx"] + x["bad_body"] + x["socket_errors"]
                   for cell in cells.values() for x in cell["with"])
        ok = all(q is not None and q >= 0.9 for q in qs.values()) and errs == 0
        sw = swarm_meta(res["keepalive"], variant)
        # The [http] lines the variant set over the defaults. Results written before they were
        # recorded so kept the held variant's two settings as fields of their own.
        http = sw.get("http")
        if http is None:
            http = ("" if variant == "default" else f"max_connections = "
                    f"{sw.get('max_connections')}\nkeep_alive = \"{sw.get('keep_alive')}\"")
        how = ("held open (" + ", ".join(f"`{line}`" for line in http.splitlines()) + ")"
               if http else
               "on the defaults (the agent keeps at most `max_connections`, 256, and closes the "
               "longest idle for a newcomer)")
        row(f"{name}: {variant}", "≥ 0.9 of its rate without them",
            ", ".join(f"{q:.2f} at {c} conn{'s' if c > 1 else ''}" for c, q in qs.items()
                      if q is not None) + f"; {errs} errors; {how}; "
            f"{sw.get('end', {}).get('open_now', '?')} of the 1,000 open at the end", ok,
            f"--keepalive, {meta(res['keepalive'], 'section').get('when', '?')}")
    if not ka:
        row(name, "≥ 0.9 of its rate without them", "", None, "run --keepalive (or the matrix)")

    fp = [r["value"] for r in res["footprint"] if r["measure"] == "footprint"]
    kiwi = next((f for f in fp if f["agent"] == "kiwi-agent"), None)
    node = next((f for f in fp if f["agent"] == "node_exporter"), None)
    fsrc = (f"tools/bench/footprint.py (--footprint), whole tree over {kiwi['window_s']:.0f} s, "
            f"{res['footprint'][0]['run']}" if kiwi else "run --footprint (root)")
    floor = next((f for f in fp if f["agent"] == "http floor"), None)
    row("idle CPU at 1 Hz, polled once a second", "≤ 0.05 % of a core",
        (f"{kiwi['cpu_pct']:.3f} %" + (f" (the HTTP floor, the same polls answered by a bare "
                                       f"libmicrohttpd: {floor['cpu_pct']:.3f} %)" if floor else ""))
        if kiwi else "", kiwi["cpu_pct"] <= 0.05 if kiwi else None, fsrc)
    if kiwi and node and node["cpu_pct"] > 0:
        q = kiwi["cpu_pct"] / node["cpu_pct"]
        row("idle CPU against node_exporter's, same run", "≤ 0.1",
            f"{q:.3f} ({kiwi['cpu_pct']:.3f} % against {node['cpu_pct']:.3f} %)", q <= 0.1, fsrc)
    else:
        row("idle CPU against node_exporter's, same run", "≤ 0.1", "", None, fsrc)
    idle = meta(res["idle"], "idle")
    isrc = (f"--idle, agent process over the first {idle['cpu_window_s']} s, "
            f"{meta(res['idle'], 'section').get('when', '?')}" if idle else "run --idle")
    row("idle CPU, agent process alone", "≤ 0.05 % of a core",
        f"{idle['cpu_pct']:.3f} %" if idle else "", idle["cpu_pct"] <= 0.05 if idle else None,
        isrc)

    if res["soak"]:
        f = soak_figures(res["soak"])
        ssrc = (f"--soak, {f['m']['minutes']} min"
                + ("" if f["m"]["minutes"] >= 5 else " (the target asks 5)")
                + f", {meta(res['soak'], 'section').get('when', '?')}")
        st, af = f["settled"], f["after"]
        row("RSS settled after the soak (11 s idle)", "≤ 6 MiB",
            f"{st['rss_kib'] / 1024:.2f} MiB (PSS {st['pss_kib'] / 1024:.2f} MiB; at the end of "
            f"the load: RSS {af['rss_kib'] / 1024:.2f} MiB)", st["rss_kib"] <= 6 * 1024, ssrc)
        g = f["growth"]
        row("RSS growth during the soak", "none (≤ 128 KiB)", f"{num(g)} KiB" if g is not None
            else "", None if g is None else g <= 128, ssrc)
        row("`quick_check` after the soak", "ok", f["m"]["quick_check"],
            f["m"]["quick_check"] == "ok", ssrc)
    else:
        row("RSS settled after the 5-minute soak, no growth", "≤ 6 MiB", "", None, "run --soak")

    disk = [r["value"] for r in res["disk"] if r["measure"] == "disk"
            and r["value"].get("label") == "this build" and r["value"].get("case") == "steady"]
    if disk:
        d = disk[-1]
        row("disk writes at steady state", "≤ 1.0 MB/h", f"{d['mb_per_h']:.2f} MB/h",
            d["mb_per_h"] <= 1.0, f"tools/bench/disk.py, steady (retention 1m), "
            f"{d['seconds']:.0f} s, {res['disk'][0]['run']}")
    elif idle:
        row("disk writes at steady state", "≤ 1.0 MB/h",
            f"{idle['steady_write_bytes_per_hour'] / 1e6:.2f} MB/h (fresh database: "
            f"{idle['write_bytes_per_hour'] / 1e6:.2f} MB/h)",
            idle["steady_write_bytes_per_hour"] <= 1e6,
            f"--idle, {meta(res['idle'], 'section').get('when', '?')}: write_bytes of a "
            f"retention-1m agent over {idle['elapsed_s']:.0f} s (the target asks ≥ 10 min: "
            "run --disk)")
    else:
        row("disk writes at steady state", "≤ 1.0 MB/h", "", None,
            "run --disk (tools/bench/disk.py, >= 10 min) or --idle")

    sm, sd = startup_median(res["startup"]), startup_median(res["startup"], "24h")
    when = meta(res["startup"], "section").get("when", "?")
    row("start-up, exec to the first 200, data directory holding 24 h", "≤ 20 ms",
        f"{sd[1]:.1f} ms on `/api/current` ({sd[0]:.1f} ms on `/`)" if sd else "",
        sd[1] <= 20 if sd else None,
        f"median of 5, a copy of kiwi-bench-fill's day, {when}" if sd else
        "run the matrix with kiwi-bench-fill built (-DKIWI_BUILD_TESTS=ON)")
    row("start-up, exec to the first 200, fresh data directory", "≤ 20 ms",
        f"{sm[1]:.1f} ms on `/api/current` ({sm[0]:.1f} ms on `/`)" if sm else "",
        sm[1] <= 20 if sm else None, f"median of 5, {when}" if sm else "run the matrix")

    sc = {r["value"]["divide"]: r["value"] for r in res["scale"] if r["measure"] == "scale"}
    if 1 in sc and 4 in sc:
        q = sc[1]["cpu_us_per_series_tick"] / sc[4]["cpu_us_per_series_tick"]
        row("cost per series per tick, big host over its 1/4", "≤ 1.2", f"{q:.2f}", q <= 1.2,
            f"--scale, {res['scale'][0]['run']}")
    else:
        row("cost per series per tick, big host over its 1/4", "≤ 1.2", "", None,
            "run --scale (all three sizes)")

    day = values(res["history_day"], "day_query")
    name = "24 h, 1,000-point query of one series, at every series count"
    if day:
        worst = max(f["one_ms"] for f in day)
        row(name, "≤ 5 ms", ", ".join(f"{f['one_ms']:.2f} ms at {f['series']:,}" for f in day),
            worst <= 5 and all(f["one_points"] >= 1000 for f in day),
            f"--history-day, {meta(res['history_day'], 'section').get('when', '?')}")
    else:
        row(name, "≤ 5 ms", "", None, "run --history-day")

    bodies = values(res["bodies"], "history_body")
    if bodies:
        v = bodies[-1]
        bsrc = f"{v['count']} samples, {v['fill']}"
        row("history body, limit=120, uncompressed (issue 6)", "≤ 15 kB", f"{v['bytes']} B",
            v["bytes"] <= 15000 and v["count"] >= 120, bsrc)
        row("history body, limit=120, gzip -6 (issue 6)", "≤ 4 kB",
            f"{v['gzip_bytes']} B (served with Accept-Encoding: gzip: {v['served_gzip_bytes']} B)",
            v["gzip_bytes"] <= 4000 and v["count"] >= 120, bsrc)
    else:
        row("history body, limit=120 (issue 6)", "≤ 15 kB, ≤ 4 kB gzipped", "", None,
            "run the matrix or --idle")
    return "\n".join(out) + "\n\n"


# ----------------------------------------------------------------------------------------------
# the page


def split_sections(text):
    """(text before the first "## " line, [(heading, text of its section)])."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not starts:
        return text, []
    pre = "\n".join(lines[:starts[0]]) + "\n"
    out = []
    for a, b in zip(starts, starts[1:] + [len(lines)]):
        body = "\n".join(lines[a:b])
        out.append((lines[a], body + ("\n" if b < len(lines) else "")))
    return pre, out


def render(results_dir, old):
    res = {name: last_run(results_dir, name, "section") for name in (
        "matrix", "startup", "keepalive", "soak", "idle", "reload", "history_day",
        "instructions")}
    res["machine"] = last_run(results_dir, "machine", "machine")
    res["bodies"] = last_run(results_dir, "bodies", "history_body")
    for name in ("footprint", "scale", "disk"):  # written by their own programs
        res[name] = last_run(results_dir, name)
    fresh = {}
    if res["matrix"]:
        fresh[MATRIX] = render_matrix(res["matrix"], results_dir)
    if res["startup"]:
        fresh[STARTUP] = render_startup(res["startup"])
    if res["keepalive"]:
        fresh[KEEPALIVE] = render_keepalive(res["keepalive"])
    if res["soak"]:
        fresh[SOAK] = render_soak(res["soak"], results_dir)
    if res["idle"]:
        fresh[IDLE] = render_idle(res["idle"])
    if res["reload"]:
        fresh[RELOAD] = render_reload(res["reload"], results_dir)
    if res["bodies"]:
        fresh[BODIES] = render_bodies(res["bodies"])
    if res["history_day"]:
        fresh[HISTORY_DAY] = render_history_day(res["history_day"])
    if res["instructions"]:
        fresh[INSTRUCTIONS] = render_instructions(res["instructions"])
    _, sections = split_sections(old)
    machine = render_machine(res["machine"]) if res["machine"] else next(
        (t for h, t in sections if h == MACHINE), "")
    body = [(h, fresh.get(h, t)) for h, t in sections
            if h not in (MACHINE, NOTES_HEADING) and not h.startswith("## Targets")]
    present = [h for h, _ in body]
    for i, h in enumerate(OWNED):
        if h in fresh and h not in present:
            before = [p for p in OWNED[:i] if p in present]
            at = present.index(before[-1]) + 1 if before else 0
            body.insert(at, (h, fresh[h]))
            present.insert(at, h)
    return (INTRO.replace("{results}", rel(results_dir)) + machine
            + render_targets(res, results_dir) + "".join(t for _, t in body) + NOTES)


def write(results_dir, out):
    try:
        with open(out) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    text = render(results_dir, old)
    with open(out + ".tmp", "w") as f:
        f.write(text)
    os.replace(out + ".tmp", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "results"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    args = ap.parse_args()
    write(args.results, args.out)
    print(f"report: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
