#!/usr/bin/python3
"""Scale: what kiwi-agent costs on a big host, and at 1/4 and 1/16 of it.

For each size of the generated host (tools/bench/bighost.py: 64 cores, 256 interfaces of which
200 veth, 64 mounts, 32 disks, 24 thermal zones, divided by 16, 4 and 1) this makes the tree,
advances its counters once a second, and runs the agent on it with the thirteen default sensors
at 1 s (procfs, sysfs and the storage sensor's rootfs pointing at the tree; the network sensor with
exclude = ["lo"], so that the 200 veth interfaces the default leaves out count) and the /api/current,
/api/history and /metrics routes. After --warmup seconds it measures over --seconds:

  - CPU per tick: schedstat run time of every agent thread over the window / ticks taken
    (/api/current's sequence), and per series (the values of one sample);
  - disk: write_bytes of the agent (/proc/PID/io) per hour; RSS and PSS at the end;
  - /metrics: its bytes, and responses/s at 8 connections (wrk, 5 s) against the ceiling server
    (tools/bench/ceiling.c) with a body of the same size, side by side;
  - /api/history?limit=120&series=*: median time of 5 requests (curl time_total) and its bytes.

The agent runs on CPU 0 and wrk on CPU 1 when there are two CPUs (as tools/bench/run.sh does).
One JSON line per measurement goes to --results (default build/bench/scale.jsonl); the report
renders the last run as the section "Scale: a big host and its 1/4 and 1/16" (--doc puts it into
a file, e.g. docs/benchmarks.md). Every process started is stopped by its PID at the end.

Usage: tools/bench/scale.py [--seconds S] [--warmup S] [--divide "16 4 1"] [--agent-bin PATH]
                            [--plugin-dir DIR] [--ceiling PATH] [--results FILE] [--doc FILE]
       tools/bench/scale.py --report FILE [--doc FILE]
tools/bench/run.sh --scale builds the agent and the ceiling and calls this.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bighost  # noqa: E402
from benchlib import (Agent, Failure, Processes, Results, TreeMeter, find_program,  # noqa: E402
                      free_ports, http_get, loadavg, run_or_report, version_line,
                      wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = "## Scale: a big host and its 1/4 and 1/16"


def say(msg):
    print(f"scale: {msg}", file=sys.stderr, flush=True)


def pin(cpu):
    return ["taskset", "-c", str(cpu)] if os.cpu_count() >= 2 else []


def config(tree, data, port, plugin_dir):
    sensors = "".join(f'[[sensor]]\nplugin = "{s}"\n' for s in ("cpu", "thermal", "memory"))
    sensors += f'[[sensor]]\nplugin = "storage"\n[sensor.options]\nrootfs = "{tree}/root"\n'
    # Every interface, veth too (the default leaves them out): the cost of 256 of them.
    sensors += '[[sensor]]\nplugin = "network"\n[sensor.options]\nexclude = ["lo"]\n'
    sensors += '[[sensor]]\nplugin = "diskio"\n[[sensor]]\nplugin = "pressure"\n[[sensor]]\nplugin = "devfreq"\n'
    sensors += '[[sensor]]\nplugin = "power"\n[[sensor]]\nplugin = "cpufreq"\n[[sensor]]\nplugin = "hwmon"\n'
    sensors += '[[sensor]]\nplugin = "processes"\ninterval = "10s"\n[[sensor]]\nplugin = "clock"\n'
    routes = "".join(f'[[route]]\npath = "{p}"\nhandler = "{h}"\n' for p, h in (
        ("/api/current", "current"), ("/api/history", "history"), ("/metrics", "metrics")))
    return (f'[agent]\ndata_dir = "{data}"\nplugin_dir = "{plugin_dir}"\nprocfs = "{tree}/proc"\n'
            f'sysfs = "{tree}/sys"\n[http]\nbind = "127.0.0.1:{port}"\n[collector]\n'
            'snapshot_path = ""\n' + sensors + routes)


def current(port):
    return json.loads(http_get(f"http://127.0.0.1:{port}/api/current")[2])


def series_count(doc):
    return sum(len(s.get("metrics", [])) for s in doc.get("sensors", {}).values())


def wrk_rate(url, seconds=5, conns=8):
    r = subprocess.run(pin(1) + ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", url],
                       capture_output=True, text=True, timeout=seconds + 30, check=False)
    m = re.search(r"Requests/sec:\s+([0-9.]+)", r.stdout)
    if not m:
        raise Failure(f"wrk {url}: no rate in its output:\n{r.stdout}{r.stderr}")
    return float(m.group(1))


def curl_time(url):
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total} "
                        "%{size_download}", url], capture_output=True, text=True, check=False)
    code, t, size = r.stdout.split()
    if code != "200":
        raise Failure(f"{url}: HTTP {code}")
    return float(t), int(size)


def measure(divide, args, procs, res, base):
    size = bighost.sizes(divide)
    tree = os.path.join(base, f"host-{divide}")
    host = bighost.Host(tree, size)
    host.make()
    stop = threading.Event()

    def advance():
        t0, t = time.monotonic(), 1
        while not stop.is_set():
            host.dynamic(t)
            t += 1
            stop.wait(max(0.0, t0 + t - 1 - time.monotonic()))

    adv = threading.Thread(target=advance, daemon=True)
    adv.start()
    port, ceiling_port = free_ports(2)
    cfg = os.path.join(base, f"kiwi-{divide}.toml")
    with open(cfg, "w") as f:
        f.write(config(tree, os.path.join(base, f"data-{divide}"), port, args.plugin_dir))
    name = f"kiwi-1/{divide}"
    say(f"size 1/{divide} {size}: starting the agent")
    agent = Agent(procs, args.agent_bin, cfg, f"kiwi-{divide}", wrapper=pin(0))
    try:
        agent.start(30, first_sample=True, require=True)
        p = agent.proc
        time.sleep(args.warmup)
        meter = TreeMeter(p.pid)
        meter.sample()
        seq0, cpu0, wb0, w0 = _sequence(port), meter.cpu_ns(), meter.write_bytes(), time.monotonic()
        while time.monotonic() - w0 < args.seconds:
            time.sleep(1.0)
            meter.sample()
            procs.check_alive()
        meter.sample()
        doc = current(port)
        window = time.monotonic() - w0
        ticks = doc["sequence"] - seq0
        cpu, wb = meter.cpu_ns() - cpu0, meter.write_bytes() - wb0
        rss, pss = meter.memory()
        series = series_count(doc)
        # HTTP after the quiet window, so the load does not count in its CPU.
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        metrics_bytes = len(http_get(metrics_url)[2])
        hist = [curl_time(f"http://127.0.0.1:{port}/api/history?limit=120&series=*")
                for _ in range(5)]
        rate = wrk_rate(metrics_url)
        c = procs.start("ceiling", f"ceiling-{divide}", pin(0) + [
            args.ceiling, "--port", str(ceiling_port), "--body-size", str(metrics_bytes)])
        wait_until("the ceiling server", lambda: _answers(ceiling_port), 10, procs)
        ceiling_rate = wrk_rate(f"http://127.0.0.1:{ceiling_port}/")
        procs.finish(c)
    finally:
        stop.set()
        adv.join()
        agent.stop(20)
    row = dict(size=f"1/{divide}", divide=divide, shape=size, series=series, ticks=ticks,
               window_s=round(window, 1), cpu_ns=cpu, cpu_ms_per_tick=cpu / ticks / 1e6,
               cpu_us_per_series_tick=cpu / ticks / series / 1e3,
               cpu_pct=100.0 * cpu / (window * 1e9), write_mb_per_h=wb * 3600 / window / 1e6,
               rss_kib=rss, pss_kib=pss, metrics_bytes=metrics_bytes,
               metrics_rate=rate, ceiling_rate=ceiling_rate,
               history_ms=statistics.median(t for t, _ in hist) * 1e3,
               history_bytes=hist[0][1])
    res.add(name, "scale", row, "")
    say(f"size 1/{divide}: {series} series, {row['cpu_ms_per_tick']:.2f} ms/tick "
        f"({row['cpu_us_per_series_tick']:.3f} us per series), RSS {rss / 1024:.1f} MiB, "
        f"/metrics {metrics_bytes} B at {rate:.0f}/s (ceiling {ceiling_rate:.0f}/s), history "
        f"{row['history_ms']:.1f} ms")
    return row


def _sequence(port):
    try:
        return current(port).get("sequence", 0)
    except Exception:  # not answering yet
        return 0


def _answers(port):
    try:
        return http_get(f"http://127.0.0.1:{port}/")[0] == 200
    except Exception:
        return False


def run(args):
    args.agent_bin = find_program("kiwi-agent", args.agent_bin,
                                  [os.path.join(ROOT, "build", "bench", "agent", "bin",
                                                "kiwi-agent"),
                                   os.path.join(ROOT, "build", "bin", "kiwi-agent")])
    if not args.agent_bin:
        raise Failure("kiwi-agent not found (tools/build.sh, or --agent-bin PATH)")
    # Absolute: the agent runs in the work directory.
    args.agent_bin = os.path.abspath(args.agent_bin)
    args.plugin_dir = os.path.abspath(args.plugin_dir or os.path.join(
        os.path.dirname(os.path.dirname(args.agent_bin)), "lib", "kiwi-agent"))
    if not (args.ceiling and os.access(args.ceiling, os.X_OK)):
        raise Failure(f"no ceiling server at {args.ceiling} (tools/bench/run.sh --scale builds "
                      "it, or any run.sh mode)")
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = Results(args.results, run_id)
    res.add("run", "command", " ".join(["tools/bench/scale.py"] + sys.argv[1:]), "")
    commit = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h"], capture_output=True,
                            text=True, check=False).stdout.strip()
    res.add("run", "machine", {"cpus": os.cpu_count(), "kernel": os.uname().release,
                               "commit": commit, "agent": version_line([args.agent_bin]),
                               "seconds": args.seconds, "warmup": args.warmup}, "")
    res.add("run", "loadavg_before", loadavg(), "")
    os.makedirs(os.path.join(ROOT, "build", "bench"), exist_ok=True)
    base = tempfile.mkdtemp(prefix="scale.", dir=os.path.join(ROOT, "build", "bench"))
    procs = Processes(base)
    try:
        for d in args.divide:
            measure(d, args, procs, res, base)
    finally:
        procs.stop_all()
        subprocess.run(["rm", "-rf", "--one-file-system", base], check=False)
    res.add("run", "loadavg_after", loadavg(), "")
    return res.rows


def render(rows):
    run_id = rows[-1]["run"] if rows else None
    rows = [r for r in rows if r["run"] == run_id]
    meta = {r["measure"]: r["value"] for r in rows if r["side"] == "run"}
    found = sorted((r["value"] for r in rows if r["measure"] == "scale"),
                   key=lambda v: -v["divide"])
    if not found:
        raise Failure("no scale measurement in the results")
    m = meta.get("machine", {})
    out = [SECTION, "",
           f"- command: `{meta.get('command', '?')}` ({run_id}), commit {m.get('commit', '?')}, "
           f"{m.get('agent', '?')}; {m.get('cpus', '?')} CPUs, Linux {m.get('kernel', '?')}; "
           f"load average (1, 5, 15 min) before: {meta.get('loadavg_before', '?')}, after: "
           f"{meta.get('loadavg_after', '?')}",
           "- each size: the thirteen default sensors at 1 s (network: every interface but lo, "
           "veth included) on the generated tree (tools/bench/bighost.py), "
           f"{found[0]['window_s']:.0f} s measured after "
           f"{m.get('warmup', '?')} s; then /metrics at 8 connections for 5 s against the ceiling "
           "with a body of the same size, and 5 history requests", "",
           "| size | cores / ifaces (veth) / mounts / disks / zones | series | CPU per tick | "
           "per series | CPU, % of a core | writes | RSS | /metrics | /metrics rate vs ceiling "
           "| history limit=120, all series |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for f in found:
        s = f["shape"]
        out.append(f"| {f['size']} | {s['cores']} / {s['interfaces']} ({s['veth']}) / "
                   f"{s['mounts']} / {s['disks']} / {s['zones']} | {f['series']} | "
                   f"{f['cpu_ms_per_tick']:.2f} ms | {f['cpu_us_per_series_tick']:.2f} µs | "
                   f"{f['cpu_pct']:.3f} | {f['write_mb_per_h']:.1f} MB/h | "
                   f"{f['rss_kib'] / 1024:.1f} MiB | {f['metrics_bytes'] / 1024:.0f} KiB | "
                   f"{f['metrics_rate']:.0f}/s, {f['metrics_rate'] / f['ceiling_rate']:.2f} | "
                   f"{f['history_ms']:.1f} ms, {f['history_bytes'] / 1024:.0f} KiB |")
    by = {f["divide"]: f for f in found}
    if 1 in by and 4 in by:
        ratio = by[1]["cpu_us_per_series_tick"] / by[4]["cpu_us_per_series_tick"]
        out += ["", f"Cost per series per tick, full size over 1/4: {ratio:.2f} (target ≤ 1.2: "
                + ("met" if ratio <= 1.2 else "**missed**") + ")."]
    out.append("")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--divide", default="16 4 1", help='sizes, e.g. "16 4 1" (the default)')
    ap.add_argument("--agent-bin")
    ap.add_argument("--plugin-dir")
    ap.add_argument("--ceiling", default=os.path.join(ROOT, "build", "bench", "bin",
                                                      "kiwi-bench-ceiling"))
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "scale.jsonl"))
    ap.add_argument("--report", metavar="FILE")
    ap.add_argument("--doc", metavar="FILE")
    args = ap.parse_args()
    try:
        args.divide = [int(x) for x in args.divide.split()]
        if any(d not in (1, 4, 16) for d in args.divide):
            raise ValueError
    except ValueError:
        print('scale: --divide takes sizes among "16 4 1"', file=sys.stderr)
        return 2

    return run_or_report(args, run, render, SECTION, say)

if __name__ == "__main__":
    sys.exit(main())
