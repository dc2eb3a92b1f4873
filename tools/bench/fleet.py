#!/usr/bin/python3
"""Fleet benchmark: N kiwi-agents and N node_exporters on loopback, scraped by one Prometheus.

Modes
  (default)       N agents (default 20) and N prometheus-node-exporter processes on loopback ports,
                  all reading this machine's /proc and /sys, one Prometheus (2.42, Debian) scraping
                  both jobs every 5 s for --duration seconds (default 120; --quick: 30). Before
                  Prometheus starts, both sides run unscraped for --baseline seconds (default 20,
                  --quick: 10), to tell the agents' own 1 Hz sampling from what the scrapes cost.
  --check-rates   one agent on the live machine (network sensor with `lo` included), scraped every
                  5 s while loopback traffic (paced HTTP GETs of the agent's /api/history) and disk
                  writes (dd ... conv=fsync into the temp dir, once a second) run for --duration
                  seconds (default 130); then Prometheus' rate() over the agent's counters is
                  compared at a few instants with the agent's own per-second gauges averaged over
                  the same minute. Exit 1 if a difference is above --tolerance (default 2 %), 3 if a
                  counter is not exposed by this agent (reported by name), 0 otherwise.

Measures (default mode), each written as one JSON line to --results and rendered as Markdown:
  - CPU: utime+stime of every process of a side (/proc/PID/stat, clock ticks) over the scraped
    window, divided by the scrapes Prometheus made of that side in it (count_over_time of `up`);
    also the same side's CPU over the unscraped baseline, so the marginal cost of a scrape is
    (scraped CPU rate - baseline CPU rate) x window / scrapes.
  - memory: Rss and Pss from /proc/PID/smaps_rollup at the end, per process (mean, max).
  - bytes per scrape: Prometheus' scrape_body_size_bytes (uncompressed; 2.42 has it with
    --enable-feature=extra-scrape-metrics) and scrape_samples_scraped, plus one GET of each side
    with Accept-Encoding: gzip, as Prometheus sends it, for the bytes on the wire.
  - scrape_duration_seconds: mean and max over the window per job (avg_over_time, max_over_time).
  - the load average before and after.

Only the Python 3 standard library. Installs nothing: a missing program is named with the command
that installs it (tools/setup.sh --bench). Everything listens on 127.0.0.1. Every process it starts
is stopped by its PID at the end, also on an error or Ctrl-C.

Usage: tools/bench/fleet.py [--quick] [--agents N] [--exporters N] [--duration S] [--baseline S]
                            [--interval S] [--agent-bin PATH] [--results FILE] [--markdown FILE]
                            [--doc FILE] [--keep]
       tools/bench/fleet.py --check-rates [--duration S] [--tolerance PCT] [--agent-bin PATH]
       tools/bench/fleet.py --report FILE [--doc docs/benchmarks.md]
                           (render the last run of a results file again)
  --doc FILE puts the section "Fleet: 20 agents scraped by one Prometheus" into FILE.
"""

import argparse
import datetime
import gzip
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (CLK_TCK, Failure, Processes, Results, find_program, free_ports,  # noqa: E402
                      guarded, http_get, loadavg, publish, read_results, side_ticks,
                      smaps_rollup, version_line, wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSTALL_HINT = "tools/setup.sh --bench (Debian packages prometheus, prometheus-node-exporter)"


def say(msg):
    print(f"fleet: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# network helpers


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        _, _, body = http_get(f"{self.base}/api/v1/query?" + urllib.parse.urlencode(params), 30)
        d = json.loads(body)
        if d.get("status") != "success":
            raise Failure(f"Prometheus query failed: {expr}: {d}")
        return d["data"]["result"]

    def scalar(self, expr, at=None):
        """The single value of an instant query, or None when it returns nothing."""
        r = self.query(expr, at)
        if not r:
            return None
        if len(r) > 1:
            raise Failure(f"query returned {len(r)} series, wanted one: {expr}")
        return float(r[0]["value"][1])

    def target_health(self):
        _, _, body = http_get(f"{self.base}/api/v1/targets", 10)
        return [(t["labels"]["job"], t["health"]) for t in json.loads(body)["data"]["activeTargets"]]


def programs(args, need_exporter):
    agent = find_program("kiwi-agent", args.agent_bin,
                         [os.environ.get("KIWI_AGENT"), os.path.join(ROOT, "build", "bin", "kiwi-agent"),
                          os.path.join(ROOT, "build", "kiwi-agent")])
    prom = find_program("prometheus", args.prometheus, ["/usr/bin/prometheus"])
    exporter = find_program("prometheus-node-exporter", args.node_exporter,
                            ["/usr/bin/prometheus-node-exporter"]) if need_exporter else "-"
    missing = []
    if not agent:
        missing.append("kiwi-agent (build it: tools/build.sh, or give --agent-bin PATH or KIWI_AGENT)")
    if not prom:
        missing.append(f"prometheus (install: {INSTALL_HINT})")
    if not exporter:
        missing.append(f"prometheus-node-exporter (install: {INSTALL_HINT})")
    if missing:
        raise Failure("missing: " + "; ".join(missing))
    return agent, prom, exporter


# ----------------------------------------------------------------------------------------------
# configuration files


def agent_config(path, data_dir, port, network_exclude=None):
    """A config on top of the built-in defaults: own port and data dir, 1 s sampling, no snapshot
    file (20 agents would share /run/kiwi-agent/current.json, whose lock allows one)."""
    text = (f'[agent]\ndata_dir = "{data_dir}"\nlog_level = "warn"\n\n'
            f'[http]\nbind = "127.0.0.1:{port}"\n\n'
            '[collector]\ninterval = "1s"\nsnapshot_path = ""\n')
    if network_exclude is not None:
        # A [[sensor]] list replaces the default list as a whole: all thirteen, network with its
        # own exclude list.
        for s in ("cpu", "thermal", "memory", "storage", "network", "diskio", "pressure",
                  "devfreq", "power", "cpufreq", "hwmon", "processes", "clock"):
            text += f'\n[[sensor]]\nplugin = "{s}"\n'
            if s == "processes":
                text += 'interval = "10s"\n'
            if s == "network":
                text += "[sensor.options]\nexclude = [" + ", ".join(
                    json.dumps(e) for e in network_exclude) + "]\n"
    with open(path, "w") as f:
        f.write(text)


def prometheus_config(path, interval_s, jobs):
    timeout = max(1, int(interval_s * 0.8))
    lines = [f"global:\n  scrape_interval: {interval_s}s\n  scrape_timeout: {timeout}s\n"
             f"  evaluation_interval: {interval_s}s\nscrape_configs:\n"]
    for job, ports in jobs.items():
        targets = ", ".join(f'"127.0.0.1:{p}"' for p in ports)
        lines.append(f"  - job_name: {job}\n    static_configs:\n      - targets: [{targets}]\n")
    with open(path, "w") as f:
        f.write("".join(lines))


def start_prometheus(procs, prom_bin, workdir, interval_s, jobs):
    port = free_ports(1)[0]
    cfg = os.path.join(workdir, "prometheus.yml")
    prometheus_config(cfg, interval_s, jobs)
    procs.start("prometheus", "prometheus", [
        prom_bin, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
        f"--web.listen-address=127.0.0.1:{port}", "--enable-feature=extra-scrape-metrics",
        "--storage.tsdb.retention.time=1d", "--log.level=warn"])
    prom = Prometheus(port)
    wait_until("Prometheus /-/ready", lambda: http_get(prom.base + "/-/ready", 2)[0] == 200, 60,
               procs)
    return prom


# ----------------------------------------------------------------------------------------------
# fleet mode

# The cumulative counters of issue 15; a run records which of them the agent exposed.
COUNTERS = ["kiwi_cpu_seconds_total", "kiwi_cpu_core_seconds_total",
            "kiwi_network_receive_bytes_total", "kiwi_network_transmit_bytes_total",
            "kiwi_diskio_read_bytes_total", "kiwi_diskio_written_bytes_total",
            "kiwi_diskio_io_time_seconds_total"]
SECTION = "## Fleet: 20 agents scraped by one Prometheus"


def run_fleet(args):
    agent_bin, prom_bin, exporter_bin = programs(args, need_exporter=True)
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = Results(args.results, run_id)
    workdir = tempfile.mkdtemp(prefix="kiwi-fleet-")
    procs = Processes(workdir)
    say(f"work directory {workdir}; results {args.results}")
    env = f"KIWI_AGENT={os.environ['KIWI_AGENT']} " if os.environ.get("KIWI_AGENT") and not args.agent_bin else ""
    res.add("run", "command", env + " ".join(["tools/bench/fleet.py"] + sys.argv[1:]), "",
            agent_bin=agent_bin)
    res.add("run", "versions", {
        "kiwi-agent": version_line([agent_bin]), "node_exporter": version_line([exporter_bin]),
        "prometheus": version_line([prom_bin])}, "")
    res.add("run", "setup", {"agents": args.agents, "exporters": args.exporters,
                             "scrape_interval_s": args.interval, "duration_s": args.duration,
                             "baseline_s": args.baseline, "cpus": os.cpu_count(),
                             "kernel": os.uname().release}, "")
    res.add("run", "loadavg_before", loadavg(), "")
    try:
        ports = free_ports(args.agents + args.exporters)
        agent_ports, exporter_ports = ports[:args.agents], ports[args.agents:]
        for i, port in enumerate(agent_ports):
            d = os.path.join(workdir, f"agent{i:02d}")
            os.makedirs(d)
            agent_config(os.path.join(d, "kiwi-agent.toml"), os.path.join(d, "data"), port)
            procs.start("kiwi", f"agent{i:02d}", [agent_bin, "--config",
                                                   os.path.join(d, "kiwi-agent.toml")])
        for i, port in enumerate(exporter_ports):
            # Default collectors; only the listen address is set.
            procs.start("node", f"node{i:02d}", [exporter_bin,
                                                  f"--web.listen-address=127.0.0.1:{port}"])
        for port in agent_ports:
            wait_until(f"agent on :{port}", lambda: http_get(
                f"http://127.0.0.1:{port}/api/health", 2)[0] == 200, 60, procs)
        for port in exporter_ports:
            wait_until(f"node_exporter on :{port}", lambda: http_get(
                f"http://127.0.0.1:{port}/metrics", 5)[0] == 200, 60, procs)

        names = metric_names_once_rates(agent_ports[0], procs)
        res.add("kiwi", "counters_exposed", sorted(n for n in COUNTERS if n in names), "",
                missing=sorted(n for n in COUNTERS if n not in names))

        # Bytes on the wire of one scrape of each side, asked as Prometheus asks (gzip).
        for side, port in (("kiwi", agent_ports[0]), ("node", exporter_ports[0])):
            _, headers, body = http_get(f"http://127.0.0.1:{port}/metrics", 10,
                                        {"Accept-Encoding": "gzip"})
            raw = gzip.decompress(body) if headers.get("Content-Encoding") == "gzip" else body
            res.add(side, "wire_bytes_per_scrape_gzip", len(body), "bytes",
                    encoding=headers.get("Content-Encoding", "identity"))
            res.add(side, "body_bytes_per_scrape", len(raw), "bytes")

        # Baseline: both sides running, nobody scraping them.
        say(f"baseline: {args.baseline} s unscraped")
        b0 = {s: side_ticks(procs.pids(s)) for s in ("kiwi", "node")}
        t0 = time.monotonic()
        time.sleep(args.baseline)
        procs.check_alive()
        b1 = {s: side_ticks(procs.pids(s)) for s in ("kiwi", "node")}
        baseline_s = time.monotonic() - t0
        for s in ("kiwi", "node"):
            res.add(s, "cpu_baseline_core_pct", 100.0 * (b1[s] - b0[s]) / CLK_TCK / baseline_s,
                    "% of one core, all processes of the side", seconds=round(baseline_s, 1))

        prom = start_prometheus(procs, prom_bin, workdir, args.interval,
                                {"kiwi": agent_ports, "node": exporter_ports})
        n_targets = args.agents + args.exporters
        wait_until("every target up", lambda: sum(
            h == "up" for _, h in prom.target_health()) == n_targets, 60, procs, step=0.5)

        say(f"scraped window: {args.duration} s, every {args.interval} s")
        c0 = {s: side_ticks(procs.pids(s)) for s in ("kiwi", "node", "prometheus")}
        w0_wall, w0 = time.time(), time.monotonic()
        end = w0 + args.duration
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            procs.check_alive()
        c1 = {s: side_ticks(procs.pids(s)) for s in ("kiwi", "node", "prometheus")}
        window_s = time.monotonic() - w0
        w1_wall = w0_wall + window_s
        res.add("run", "loadavg_after", loadavg(), "")
        rng = f"{int(round(window_s))}s"
        # A scrape that started before the end of the window is stored with its start time but
        # only once it is done: let the last ones land before counting.
        time.sleep(2.0)

        for s in ("kiwi", "node", "prometheus"):
            pids = procs.pids(s)
            mem = [smaps_rollup(p) for p in pids]
            res.add(s, "rss_kib_mean", sum(m["rss_kib"] for m in mem) / len(mem), "KiB",
                    processes=len(mem))
            res.add(s, "rss_kib_max", max(m["rss_kib"] for m in mem), "KiB")
            res.add(s, "pss_kib_mean", sum(m["pss_kib"] for m in mem) / len(mem), "KiB")
            res.add(s, "pss_kib_sum", sum(m["pss_kib"] for m in mem), "KiB")
            cpu_s = (c1[s] - c0[s]) / CLK_TCK
            res.add(s, "cpu_core_pct", 100.0 * cpu_s / window_s,
                    "% of one core, all processes of the side", seconds=round(window_s, 1))
            if s == "prometheus":
                continue
            # Scrapes Prometheus made of this side in the window (one `up` sample per scrape,
            # down ones included).
            scrapes = prom.scalar(f'sum(count_over_time(up{{job="{s}"}}[{rng}]))', w1_wall)
            up = prom.scalar(f'sum(sum_over_time(up{{job="{s}"}}[{rng}]))', w1_wall)
            res.add(s, "scrapes", scrapes, "scrapes", up=up, window_s=round(window_s, 1))
            res.add(s, "cpu_ms_per_scrape", 1000.0 * cpu_s / scrapes, "ms",
                    note="all CPU of the side in the window / scrapes")
            base_rate = (b1[s] - b0[s]) / CLK_TCK / baseline_s
            res.add(s, "cpu_ms_per_scrape_marginal",
                    1000.0 * (cpu_s - base_rate * window_s) / scrapes, "ms",
                    note="minus the unscraped baseline rate")
            for m, expr in (
                    ("scrape_duration_ms_mean", f'avg(avg_over_time(scrape_duration_seconds{{job="{s}"}}[{rng}]))'),
                    ("scrape_duration_ms_max", f'max(max_over_time(scrape_duration_seconds{{job="{s}"}}[{rng}]))')):
                v = prom.scalar(expr, w1_wall)
                res.add(s, m, None if v is None else 1000.0 * v, "ms", query=expr)
            v = prom.scalar(f'avg(avg_over_time(scrape_body_size_bytes{{job="{s}"}}[{rng}]))', w1_wall)
            res.add(s, "scrape_body_size_bytes_mean", v, "bytes", query="scrape_body_size_bytes")
            v = prom.scalar(f'avg(avg_over_time(scrape_samples_scraped{{job="{s}"}}[{rng}]))', w1_wall)
            res.add(s, "samples_per_scrape", v, "samples")
        # node_exporter collectors that failed here (privileges, missing hardware): they still ran.
        failed = prom.query('node_scrape_collector_success{job="node"} == 0', w1_wall)
        res.add("node", "failed_collectors",
                sorted({r["metric"].get("collector", "?") for r in failed}), "")
        down = prom.query('up == 0', w1_wall)
        res.add("run", "targets_down_at_end", len(down), "targets")
    finally:
        procs.stop_all()
        if args.keep:
            say(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return res.rows


def render(rows):
    """The Markdown of one run's rows (the last run in the list)."""
    run = rows[-1]["run"]
    rows = [r for r in rows if r["run"] == run]
    get = {(r["side"], r["measure"]): r for r in rows}

    def v(side, measure, fmt="{:.2f}"):
        r = get.get((side, measure))
        if r is None or r["value"] is None:
            return "-"
        return fmt.format(r["value"]) if not isinstance(r["value"], str) else r["value"]

    setup = get[("run", "setup")]["value"]
    vers = get[("run", "versions")]["value"]
    out = [SECTION, ""]
    out.append(
        "Produced by `tools/bench/fleet.py` (see `--help`; the table is rendered from its JSON lines, "
        "`--report FILE` renders it again). Every process reads this machine's `/proc` and `/sys` "
        "(each kiwi-agent with its own data directory, 1 s sampling, the default sensors and "
        "routes, no snapshot file; each node_exporter with its default collectors and only "
        "`--web.listen-address=127.0.0.1:PORT`), so both sides parse the same, live kernel files "
        "(a fixture tree would be static, and node_exporter would read different files than the "
        "agent). One Prometheus (`--enable-feature=extra-scrape-metrics`, for "
        "`scrape_body_size_bytes`) scrapes both jobs.")
    out.append("")
    out.append(
        "- CPU: utime + stime (`/proc/PID/stat`) of every process of a side over the scraped "
        "window, divided by the scrapes Prometheus made of that side in it "
        "(`sum(count_over_time(up{job=...}[window]))`). The agents also sample every second "
        "whether scraped or not, which node_exporter does not: the unscraped baseline (the same "
        "processes before Prometheus starts) gives that share, and the row \"minus the unscraped "
        "baseline\" is what a scrape adds.")
    out.append(
        "- memory: `Rss` and `Pss` of `/proc/PID/smaps_rollup` of each process at the end; PSS "
        "shares the libraries among the 20 copies of each, so it is lower than one process alone "
        "would show.")
    out.append(
        "- bytes: Prometheus' `scrape_body_size_bytes` (uncompressed), `scrape_samples_scraped`, "
        "and one GET of each side with `Accept-Encoding: gzip`, as Prometheus asks, for the bytes "
        "on the wire. node_exporter exposes about five times as many series (per-CPU, "
        "filesystem, netstat, vmstat, ...), so these are costs per scrape of each as shipped, not "
        "per series.")
    out.append(
        "- `scrape_duration_seconds`: `avg_over_time` and `max_over_time` over the window, then "
        "the mean and the max over the targets of the job.")
    out.append("")
    ce = get.get(("kiwi", "counters_exposed"))
    if ce is not None and ce.get("missing"):
        out.append(f"- **kiwi-agent measured without the cumulative counters of issue 15** "
                   f"(not exposed: {', '.join('`' + m + '`' for m in ce['missing'])}); to be "
                   "run again once they are in.")
    out.append(f"- command: `{get[('run', 'command')]['value']}`, run {run}")
    out.append(f"- {setup['agents']} kiwi-agents and {setup['exporters']} node_exporters on loopback, "
               f"one Prometheus scraping both jobs every {setup['scrape_interval_s']} s; "
               f"window {setup['duration_s']} s after every target was up, baseline "
               f"{setup['baseline_s']} s unscraped before; {setup['cpus']} CPUs, kernel {setup['kernel']}")
    out.append(f"- versions: {vers['kiwi-agent']}; {vers['node_exporter']}; {vers['prometheus']}")
    out.append(f"- load average before / after: {v('run', 'loadavg_before')} / {v('run', 'loadavg_after')}")
    fc = get.get(("node", "failed_collectors"))
    if fc is not None:
        out.append("- node_exporter collectors reporting failure here: "
                   + (", ".join(fc["value"]) if fc["value"] else "none"))
    out[-1] += " (absent hardware or services on this VM; they still run on every scrape)"
    out.append(f"- targets down at the end: {v('run', 'targets_down_at_end', '{:.0f}')}")
    out.append("")
    out.append("| measure | kiwi-agent | node_exporter | ratio kiwi/node |")
    out.append("|---|---:|---:|---:|")

    def row(label, measure, fmt="{:.2f}"):
        a, b = get.get(("kiwi", measure)), get.get(("node", measure))
        ratio = "-"
        if a and b and a["value"] not in (None, 0) and b["value"] not in (None, 0):
            ratio = f"{a['value'] / b['value']:.2f}"
        out.append(f"| {label} | {v('kiwi', measure, fmt)} | {v('node', measure, fmt)} | {ratio} |")

    row("scrapes in the window (all targets)", "scrapes", "{:.0f}")
    row("CPU per scrape, ms (all CPU of the side / scrapes)", "cpu_ms_per_scrape")
    row("CPU per scrape, ms, minus the unscraped baseline", "cpu_ms_per_scrape_marginal")
    row("CPU, % of one core, all processes, scraped", "cpu_core_pct")
    row("CPU, % of one core, all processes, unscraped", "cpu_baseline_core_pct")
    row("scrape_duration_seconds mean, ms", "scrape_duration_ms_mean")
    row("scrape_duration_seconds max, ms", "scrape_duration_ms_max")
    row("samples per scrape", "samples_per_scrape", "{:.0f}")
    row("body per scrape, bytes (scrape_body_size_bytes)", "scrape_body_size_bytes_mean", "{:.0f}")
    row("on the wire per scrape, gzip, bytes (one GET)", "wire_bytes_per_scrape_gzip", "{:.0f}")
    row("RSS per process, MiB (mean)", "rss_kib_mean", "{:.1f}")
    row("RSS per process, MiB (max)", "rss_kib_max", "{:.1f}")
    row("PSS per process, MiB (mean)", "pss_kib_mean", "{:.1f}")
    # KiB -> MiB for the memory rows
    for i, line in enumerate(out):
        if "MiB" in line:
            cells = line.split(" | ")
            for j in (1, 2):
                try:
                    cells[j] = f"{float(cells[j]) / 1024:.1f}"
                except ValueError:
                    pass
            out[i] = " | ".join(cells)
    p = get.get(("prometheus", "cpu_core_pct"))
    if p:
        out.append("")
        out.append(f"Prometheus itself: {p['value']:.1f} % of one core, RSS "
                   f"{get[('prometheus', 'rss_kib_mean')]['value'] / 1024:.0f} MiB.")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# --check-rates


# (what, PromQL over the counters, the same over the agent's scraped per-second gauge, the gauge's
# series in the agent's history (summed), the counters it needs, the floor below which both values
# count as zero: disk reads on an idle disk are a few blocks now and then)
RATE_CHECKS = [
    ("network receive bytes/s, lo",
     'rate(kiwi_network_receive_bytes_total{interface="lo"}[1m])',
     'avg_over_time(kiwi_network_receive_bytes_per_second{interface="lo"}[1m])',
     ['network_receive_bytes_per_second{interface="lo"}'],
     ["kiwi_network_receive_bytes_total"], 1024),
    ("network transmit bytes/s, lo",
     'rate(kiwi_network_transmit_bytes_total{interface="lo"}[1m])',
     'avg_over_time(kiwi_network_transmit_bytes_per_second{interface="lo"}[1m])',
     ['network_transmit_bytes_per_second{interface="lo"}'],
     ["kiwi_network_transmit_bytes_total"], 1024),
    ("disk read bytes/s, all devices",
     'sum(rate(kiwi_diskio_read_bytes_total[1m]))',
     'sum(avg_over_time(kiwi_diskio_read_bytes_per_second[1m]))',
     ["diskio_read_bytes_per_second*"],
     ["kiwi_diskio_read_bytes_total"], 4096),
    ("disk written bytes/s, all devices",
     'sum(rate(kiwi_diskio_written_bytes_total[1m]))',
     'sum(avg_over_time(kiwi_diskio_write_bytes_per_second[1m]))',
     ["diskio_write_bytes_per_second*"],
     ["kiwi_diskio_written_bytes_total"], 4096),
    # Busy as kiwi_cpu_usage_ratio defines it, 1 - (idle + iowait) / total: over the rate of all
    # modes, not the number of CPUs (a VM's ticks of all modes add up to a little less than
    # one per CPU-second, by about 3 % on this project's VM).
    ("CPU busy share",
     'sum(rate(kiwi_cpu_seconds_total{mode!~"idle|iowait"}[1m])) / sum(rate(kiwi_cpu_seconds_total[1m]))',
     'avg_over_time(kiwi_cpu_usage_ratio[1m])',
     ["cpu_usage_ratio"],
     ["kiwi_cpu_seconds_total", "kiwi_cpu_core_seconds_total"], 0.001),
]


def exposed_names(metrics_text):
    names = set()
    for line in metrics_text.splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def metric_names_once_rates(port, procs):
    """The metric names of an agent's /metrics once its rates are there (they need a second
    sample), so that a name missing from it is really not exposed."""
    names = set()

    def ready():
        nonlocal names
        _, _, body = http_get(f"http://127.0.0.1:{port}/metrics", 5)
        names = exposed_names(body.decode())
        return "kiwi_cpu_usage_ratio" in names

    wait_until(f"rates in /metrics of the agent on :{port}", ready, 30, procs)
    return names


def history_mean(port, globs, since, until):
    """Mean over (since, until] of the agent's per-second values (every 1 s sample, from its own
    history), summed over the series the globs match; None if there are none."""
    q = urllib.parse.urlencode({"since": round(since) + 1, "until": round(until),
                                "series": ",".join(globs)})
    try:
        _, _, body = http_get(f"http://127.0.0.1:{port}/api/history?{q}", 30)
    except urllib.error.HTTPError as e:  # 400: a series name that matches nothing
        say(f"history: {globs}: {e.code} {e.read()[:200]!r}")
        return None, 0
    d = json.loads(body)
    if not d.get("series"):
        return None, 0
    per_ts = {}
    for s in d["series"].values():
        for ts, val in zip(d["timestamps"], s["values"]):
            if val is not None:
                per_ts[ts] = per_ts.get(ts, 0.0) + val
    if not per_ts:
        return None, 0
    return sum(per_ts.values()) / len(per_ts), len(per_ts)


def run_check_rates(args):
    agent_bin, prom_bin, _ = programs(args, need_exporter=False)
    workdir = tempfile.mkdtemp(prefix="kiwi-fleet-rates-")
    procs = Processes(workdir)
    say(f"work directory {workdir}")
    stop = threading.Event()
    threads = []
    try:
        port = free_ports(1)[0]
        d = os.path.join(workdir, "agent")
        os.makedirs(d)
        agent_config(os.path.join(d, "kiwi-agent.toml"), os.path.join(d, "data"), port,
                     network_exclude=[])
        procs.start("kiwi", "agent", [agent_bin, "--config", os.path.join(d, "kiwi-agent.toml")])
        wait_until("the agent", lambda: http_get(f"http://127.0.0.1:{port}/api/health", 2)[0]
                   == 200, 60, procs)
        names = metric_names_once_rates(port, procs)
        missing = sorted({m for c in RATE_CHECKS for m in c[4] if m not in names})
        for m in missing:
            say(f"metric {m} not exposed by this agent ({agent_bin}); its checks are not measured")
        prom = start_prometheus(procs, prom_bin, workdir, args.interval, {"kiwi": [port]})
        wait_until("the target up", lambda: [h for _, h in prom.target_health()] == ["up"], 60,
                   procs, step=0.5)

        # Steady load, so that per-second values and counters describe the same thing minute by
        # minute: paced GETs of the history (loopback traffic, some CPU) and one dd with fsync a
        # second (disk writes; reads come from whatever else runs).
        def http_load():
            url = f"http://127.0.0.1:{port}/api/history?series=*&limit=300"
            period, nxt = 1.0 / args.requests_per_second, time.monotonic()
            while not stop.is_set():
                try:
                    http_get(url, 5)
                except (OSError, urllib.error.URLError):
                    pass
                nxt += period
                time.sleep(max(0.0, nxt - time.monotonic()))

        def disk_load():
            target = os.path.join(workdir, "dd.out")
            nxt = time.monotonic()
            while not stop.is_set():
                p = procs.start("load", "dd", ["dd", "if=/dev/zero", f"of={target}", "bs=1M",
                                               f"count={args.dd_mib}", "conv=fsync",
                                               "status=none"])
                p.wait()
                nxt += 1.0
                time.sleep(max(0.0, nxt - time.monotonic()))

        t_start = time.time()
        for fn in (http_load, disk_load):
            t = threading.Thread(target=fn, daemon=True)
            t.start()
            threads.append(t)
        say(f"load running for {args.duration} s ({args.requests_per_second} GET/s of "
            f"/api/history, dd {args.dd_mib} MiB with fsync once a second)")
        end = time.monotonic() + args.duration
        while time.monotonic() < end:
            time.sleep(1.0)
            procs.check_alive()
        t_end = time.time()
        stop.set()
        for t in threads:
            t.join(30)
        time.sleep(args.interval + 1)  # the last scrape of the window is in

        # Instants: the last minute of the load and earlier ones, each a full minute after the
        # load started (plus one scrape) so that every window is under load.
        first = t_start + 60 + args.interval
        instants = [t_end - k * 20 for k in range(args.instants)]
        instants = sorted(t for t in instants if t >= first)
        if not instants:
            raise Failure(f"--duration {args.duration} s leaves no full minute under load")
        # Compared with rate(counter[1m]) at an instant t:
        #  - "history": the mean of the agent's own per-second values (every sample, from its
        #    /api/history) over the ticks the counter samples in (t-1m, t] were read at
        #    (kiwi_last_sample_timestamp_seconds of the first and last scrape in the window), i.e.
        #    the span rate() measures; exact when both come from the same readings.
        #  - "scraped": avg_over_time(gauge[1m]), the scraped gauge values only (one per scrape, 1 s
        #    of every 5): right on average under steady load, noisy under bursts.
        worst, rows = 0.0, []
        for what, counter_q, gauge_q, hist_globs, needs, floor in RATE_CHECKS:
            absent = [m for m in needs if m not in names]
            for at in instants:
                g_prom = prom.scalar(gauge_q, at)
                t_first = prom.scalar("min_over_time(kiwi_last_sample_timestamp_seconds[1m])", at)
                t_last = prom.scalar("max_over_time(kiwi_last_sample_timestamp_seconds[1m])", at)
                if t_first is None or t_last is None or t_last <= t_first:
                    t_first, t_last = at - 60, at
                g_hist, n = history_mean(port, hist_globs, t_first, t_last)
                if absent:
                    rows.append((what, at, None, g_prom, g_hist, n, None,
                                 "not exposed: " + ", ".join(absent)))
                    continue
                c = prom.scalar(counter_q, at)
                ref = g_hist if args.against == "history" else g_prom
                diff, note = None, ""
                if c is not None and ref is not None:
                    denom = max(abs(c), abs(ref))
                    if denom < floor:
                        diff, note = 0.0, f"both below {floor:g}"
                    else:
                        diff = abs(c - ref) / denom
                    worst = max(worst, diff)
                rows.append((what, at, c, g_prom, g_hist, n, diff, note))
        print(f"Gate: rate(counter[1m]) against the {args.against} column, tolerance "
              f"{args.tolerance} %.\n")
        print("| check | at (s after load start) | rate(counter[1m]) | avg_over_time(gauge[1m]), "
              "scraped | agent history mean, same span | samples | difference |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        fmt = lambda x: "-" if x is None else f"{x:.4g}"  # noqa: E731
        for what, at, c, gp, gh, n, diff, note in rows:
            dtxt = "-" if diff is None else f"{100 * diff:.2f} %"
            if note:
                dtxt = note if diff is None else f"{dtxt} ({note})"
            print(f"| {what} | {at - t_start:.0f} | {fmt(c)} | {fmt(gp)} | {fmt(gh)} | {n} | {dtxt} |")
        print(f"\nload average at the end: {loadavg()}")
        if missing:
            say("not measured: " + ", ".join(f"metric {m} not exposed by this agent" for m in missing))
            return 3
        if worst > args.tolerance / 100:
            say(f"FAILED: largest difference {100 * worst:.2f} % > {args.tolerance} %")
            return 1
        say(f"ok: largest difference {100 * worst:.2f} % <= {args.tolerance} %")
        return 0
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        procs.stop_all()
        if args.keep:
            say(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


# ----------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="30 s window, 10 s baseline")
    ap.add_argument("--check-rates", action="store_true")
    ap.add_argument("--report", metavar="FILE", help="render the last run of a results file")
    ap.add_argument("--agents", type=int, default=20)
    ap.add_argument("--exporters", type=int, default=20)
    ap.add_argument("--duration", type=float, help="scraped window, s (default 120; --quick 30; "
                    "--check-rates: load duration, default 130)")
    ap.add_argument("--baseline", type=float, help="unscraped window, s (default 20; --quick 10)")
    ap.add_argument("--interval", type=int, default=5, help="scrape interval, s (default 5)")
    ap.add_argument("--tolerance", type=float, default=2.0, help="--check-rates: %% (default 2)")
    ap.add_argument("--against", choices=("history", "scraped"), default="history",
                    help="--check-rates: compare rate() with the agent's history over the same span "
                    "(default) or with avg_over_time of the scraped gauge")
    ap.add_argument("--instants", type=int, default=3, help="--check-rates: instants, 20 s apart")
    ap.add_argument("--requests-per-second", type=float, default=50.0,
                    help="--check-rates: GETs of /api/history per second (default 50)")
    ap.add_argument("--dd-mib", type=int, default=8, help="--check-rates: MiB per dd (default 8)")
    ap.add_argument("--agent-bin", help="kiwi-agent (default: $KIWI_AGENT, build/bin/kiwi-agent, PATH)")
    ap.add_argument("--prometheus", help="default /usr/bin/prometheus")
    ap.add_argument("--node-exporter", help="default /usr/bin/prometheus-node-exporter")
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "fleet.jsonl"),
                    help="JSON lines, appended (default build/bench/fleet.jsonl)")
    ap.add_argument("--markdown", help="also write the Markdown table to this file")
    ap.add_argument("--doc", metavar="FILE", help="put the section into FILE, e.g. "
                    "docs/benchmarks.md (replacing an earlier one)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory (logs, tsdb)")
    args = ap.parse_args()

    def body():
        if args.report:
            publish(render(read_results(args.report)), SECTION, say, doc=args.doc)
            return 0
        if args.check_rates:
            args.duration = args.duration or 130
            return run_check_rates(args)
        args.duration = args.duration or (30 if args.quick else 120)
        args.baseline = args.baseline if args.baseline is not None else (10 if args.quick else 20)
        if args.agents < 1 or args.exporters < 1:
            raise Failure("--agents and --exporters must be at least 1")
        publish(render(run_fleet(args)), SECTION, say, doc=args.doc, markdown=args.markdown)
        return 0

    return guarded(body, say, failure_status=2)

if __name__ == "__main__":
    sys.exit(main())
