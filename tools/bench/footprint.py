#!/usr/bin/python3
"""Footprint: what each monitoring agent costs while nobody looks, side by side.

kiwi-agent, prometheus-node-exporter, Netdata and collectd run one after another on this
machine, each the same way: its own data directory on disk, listening on a loopback port only,
sampling every second, and polled once a second by curl at its main endpoint. Over a window of
--seconds (default 300) after --warmup seconds (default 30) it measures the whole process tree of
each (every process descended from the one started, found again every second):

  - CPU: the run time of every thread (/proc/PID/task/TID/schedstat, ns), plus the CPU time of
    children that exited and were reaped meanwhile (cutime + cstime of their parents); % of one
    core over the window;
  - memory: Rss and Pss summed over the tree (/proc/PID/smaps_rollup), every 5 s: at the end of
    the window (settled) and the highest;
  - disk: write_bytes (/proc/PID/io: bytes the tree caused to be written to a block device,
    reaped children included), per hour.

The agents, each on its defaults but for where it keeps its data and the 1 s interval:
  kiwi-agent      its built-in configuration (kiwi-agent --print-default-config): the thirteen
                  sensors at 1 s (processes at 10 s), 24 h history in SQLite; snapshot file on tmpfs (/run when
                  installed); polled: /metrics
  node_exporter   Debian's prometheus-node-exporter with its default collectors (it samples when
                  scraped); polled: /metrics
  netdata         Debian's netdata with its stock configuration, update every 1 s, dbengine;
                  polled: /api/v1/allmetrics?format=prometheus
  collectd        Debian's /etc/collectd/collectd.conf (its plugins, rrdtool) with Interval 1,
                  plus write_prometheus for the poll; polled: /metrics
And, right after kiwi-agent, a reference that is not an agent:
  http floor      tools/bench/ceiling.c (kiwi-bench-ceiling: libmicrohttpd as the agent links
                  it, one response object made at start, nothing sampled) answering the same
                  poll with a body the size of kiwi-agent's /metrics in this run: what being
                  polled alone costs on this machine, the floor under kiwi-agent's idle CPU

One JSON line per measurement goes to --results (default build/bench/footprint.jsonl); the report
renders the last run of that file as Markdown and, with --doc, puts it into docs/benchmarks.md as
the section "Footprint: beside node_exporter, Netdata and collectd".

Needs root for /proc/PID/io of netdata's set-uid plugins and for netdata itself; installs
nothing: a missing program is named with the command that installs it (tools/setup.sh --bench).
An agent whose own service is running on this machine (systemd) is measured anyway, but the
report says so: it competes for the CPU. Every process started is stopped by its PID at the end,
also on an error or Ctrl-C.

Usage: tools/bench/footprint.py [--seconds S] [--warmup S] [--agents LIST] [--agent-bin PATH]
                                [--baseline-bin PATH] [--ceiling-bin PATH] [--results FILE]
                                [--doc FILE] [--keep]
       tools/bench/footprint.py --report FILE [--doc docs/benchmarks.md]
  --agents LIST   comma-separated, in this order by default:
                  kiwi,floor,node_exporter,netdata,collectd
  --quick         --seconds 60 --warmup 10 (a smoke test of the runner, not a figure to quote)
  --baseline-bin  another kiwi-agent build (an earlier commit's), measured right before
                  kiwi-agent on its own built-in configuration as "kiwi-agent (baseline)": the
                  report gives kiwi-agent's CPU and RSS against it, from the same run
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Failure, Processes, Results, TreeMeter, find_program,  # noqa: E402
                      free_ports, kiwi_config, loadavg, run_or_report, version_line,
                      wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = "## Footprint: beside node_exporter, Netdata and collectd"
INSTALL_HINT = "tools/setup.sh --bench"
ALL_AGENTS = ("kiwi", "floor", "node_exporter", "netdata", "collectd")
FLOOR = "http floor"  # the row of the reference, which is not an agent
FLOOR_BODY = 17500    # its body without a kiwi-agent row in the run: about the default /metrics


def say(msg):
    print(f"footprint: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# the agents


def service_running(unit):
    """True when systemd runs `unit` on this machine (None when there is no systemd)."""
    if not unit or not os.path.isdir("/run/systemd/system"):
        return None
    r = subprocess.run(["systemctl", "is-active", "--quiet", unit], check=False)
    return r.returncode == 0


class Agent:
    name = ""
    unit = ""       # its systemd unit when installed as a service
    package = ""    # the Debian package
    path = "/metrics"

    def __init__(self, workdir, port):
        self.workdir, self.port = workdir, port
        os.makedirs(workdir, exist_ok=True)

    def argv(self):
        raise NotImplementedError

    def version(self):
        raise NotImplementedError

    def describe(self):
        raise NotImplementedError

    def url(self):
        return f"http://127.0.0.1:{self.port}{self.path}"


class Kiwi(Agent):
    name, unit, package = "kiwi-agent", "kiwi-agent.service", "kiwi-agent"
    BASELINE = "kiwi-agent (baseline)"

    def __init__(self, workdir, port, binary, shm, name=None):
        super().__init__(workdir, port)
        self.binary = binary
        self.name = name or self.name
        text = kiwi_config(binary, {("agent", "data_dir"): os.path.join(workdir, "data"),
                                    ("http", "bind"): f"127.0.0.1:{port}",
                                    ("collector", "snapshot_path"):
                                        os.path.join(shm, "current.json")})
        self.config = os.path.join(workdir, "kiwi.toml")
        with open(self.config, "w") as f:
            f.write(text)
        self.sensors = sum(1 for ln in text.splitlines() if ln.strip() == "[[sensor]]")

    def argv(self):
        return [self.binary, "--config", self.config]

    def version(self):
        return version_line([self.binary])

    def describe(self):
        return (f"built-in configuration (--print-default-config): {self.sensors} sensors at 1 s, "
                "24 h history in SQLite (commit every 10 s); data_dir, bind and snapshot_path "
                "(tmpfs) changed")


class Floor(Agent):
    """Not an agent: the least that answering the poll costs (module docstring)."""
    name = FLOOR

    def __init__(self, workdir, port, binary, body):
        super().__init__(workdir, port)
        self.binary, self.body = binary, body

    def argv(self):
        return [self.binary, "--port", str(self.port), "--threads", "auto", "--body-size",
                str(self.body)]

    def version(self):
        return "kiwi-bench-ceiling (tools/bench/ceiling.c), the agent's libmicrohttpd"

    def describe(self):
        return (f"not an agent: a bare libmicrohttpd answering every request with one {self.body} "
                "B body made at start (the size of kiwi-agent's /metrics in this run), nothing "
                "sampled: what the poll alone costs")


class NodeExporter(Agent):
    name, unit, package = "node_exporter", "prometheus-node-exporter.service", \
        "prometheus-node-exporter"
    binary = "/usr/bin/prometheus-node-exporter"

    def argv(self):
        return [self.binary, f"--web.listen-address=127.0.0.1:{self.port}"]

    def version(self):
        return version_line([self.binary])

    def describe(self):
        return ("default collectors, --web.listen-address only (it reads the kernel when scraped: "
                "once a second here)")


class Netdata(Agent):
    name, unit, package = "netdata", "netdata.service", "netdata"
    binary = "/usr/sbin/netdata"
    path = "/api/v1/allmetrics?format=prometheus"

    def __init__(self, workdir, port):
        super().__init__(workdir, port)
        for d in ("cache", "lib", "log", "run"):
            os.makedirs(os.path.join(workdir, d), exist_ok=True)
        self.config = os.path.join(workdir, "netdata.conf")
        w = workdir
        with open(self.config, "w") as f:
            f.write(f"""[global]
	run as user = root
	hostname = footprint
[db]
	update every = 1
[directories]
	config = /etc/netdata
	stock config = /usr/lib/netdata/conf.d
	cache = {w}/cache
	lib = {w}/lib
	log = {w}/log
	run = {w}/run
[logs]
	debug = {w}/log/debug.log
	error = {w}/log/error.log
	access = {w}/log/access.log
[web]
	bind to = 127.0.0.1:{self.port}
""")

    def argv(self):
        return [self.binary, "-D", "-c", self.config, "-P", os.path.join(self.workdir, "run",
                                                                         "netdata.pid")]

    def version(self):
        try:
            r = subprocess.run([self.binary, "-v"], capture_output=True, text=True, timeout=10)
            return (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired, IndexError):
            return "?"

    def describe(self):
        return ("Debian's stock configuration (its packaged plugins: proc, apps, cgroups, "
                "charts.d, ...), update every 1 s, dbengine; directories in the work directory, "
                "run as root; DO_NOT_TRACK=1")


class Collectd(Agent):
    name, unit, package = "collectd", "collectd.service", "collectd"
    binary = "/usr/sbin/collectd"
    stock = "/etc/collectd/collectd.conf"

    def __init__(self, workdir, port):
        super().__init__(workdir, port)
        try:
            with open(self.stock) as f:
                text = f.read()
        except OSError as e:
            raise Failure(f"{self.stock}: {e.strerror} (install: {INSTALL_HINT})") from e
        w = workdir
        # Debian's file with its own plugin list; the paths in the work directory, Interval 1,
        # write_prometheus for the poll, and no Include (filters and thresholds of conf.d apply to
        # the stock service, they are examples).
        text = re.sub(r'DataDir "[^"]*"', f'DataDir "{w}/rrd"', text)
        text = re.sub(r"(?ms)^<Include .*?</Include>\n?", "", text)
        head = (f'BaseDir "{w}"\nPIDFile "{w}/collectd.pid"\nInterval 1\n'
                'TypesDB "/usr/share/collectd/types.db"\n')
        tailtext = (f'\nLoadPlugin write_prometheus\n<Plugin write_prometheus>\n\tHost "127.0.0.1"\n'
                    f'\tPort "{self.port}"\n</Plugin>\n')
        self.config = os.path.join(workdir, "collectd.conf")
        with open(self.config, "w") as f:
            f.write(head + text + tailtext)

    def argv(self):
        return [self.binary, "-f", "-C", self.config]

    def version(self):
        try:
            r = subprocess.run([self.binary, "-h"], capture_output=True, text=True, timeout=10)
            m = re.search(r"collectd [0-9][^,\s]*", r.stdout + r.stderr)
            return m.group(0) if m else "?"
        except OSError:
            return "?"

    def describe(self):
        plugins = []
        with open(self.config) as f:
            plugins = re.findall(r"(?m)^LoadPlugin (\S+)", f.read())
        return (f"Debian's collectd.conf, Interval 1: {', '.join(plugins)}; rrdtool DataDir in the "
                "work directory (write_prometheus added for the poll)")


# ----------------------------------------------------------------------------------------------
# one measurement


def poller(url, stop, counts, sizes):
    """GET `url` with curl once a second until `stop` is set; counts[status] += 1, and the body
    size of each answer goes to `sizes`."""
    nxt = time.monotonic()
    while not stop.is_set():
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-m", "5", "-w",
                            "%{http_code} %{size_download}", url], capture_output=True, text=True,
                           check=False)
        code, _, size = r.stdout.strip().partition(" ")
        code = code or "error"
        counts[code] = counts.get(code, 0) + 1
        if code == "200" and size.isdigit():
            sizes.append(int(size))
        nxt += 1.0
        stop.wait(max(0.0, nxt - time.monotonic()))


def measure(agent, procs, res, seconds, warmup, log_dir):
    say(f"{agent.name}: starting ({' '.join(agent.argv())})")
    # Its output to tmpfs, as a service's goes to the journal: the agent's own files count.
    p = procs.start(agent.name, agent.name, agent.argv(), cwd=agent.workdir,
                    env=dict(os.environ, DO_NOT_TRACK="1"), log_dir=log_dir)
    t0 = time.monotonic()
    wait_until(f"{agent.name} answering {agent.url()}",
               lambda: subprocess.run(["curl", "-sf", "-o", "/dev/null", "-m", "2", agent.url()],
                                      check=False).returncode == 0, 60, procs)
    first_answer_s = time.monotonic() - t0
    stop = threading.Event()
    counts, sizes = {}, []
    poll = threading.Thread(target=poller, args=(agent.url(), stop, counts, sizes), daemon=True)
    poll.start()
    meter = TreeMeter(p.pid)
    say(f"{agent.name}: answering after {first_answer_s:.1f} s; warm-up {warmup:.0f} s")
    end_warm = time.monotonic() + warmup
    while time.monotonic() < end_warm:
        meter.sample()
        procs.check_alive()
        time.sleep(1.0)
    meter.sample()
    cpu0, wb0, w0 = meter.cpu_ns(), meter.write_bytes(), time.monotonic()
    threads0 = dict(meter.threads)
    counts.clear()
    say(f"{agent.name}: measuring {seconds:.0f} s")
    rss_max = pss_max = 0
    processes_max = 0
    t_end = w0 + seconds
    i = 0
    while time.monotonic() < t_end:
        time.sleep(min(1.0, max(0.0, t_end - time.monotonic())))
        meter.sample()
        procs.check_alive()
        processes_max = max(processes_max, len(meter.live))
        if i % 5 == 0:
            rss, pss = meter.memory()
            rss_max, pss_max = max(rss_max, rss), max(pss_max, pss)
        i += 1
    meter.sample()
    window = time.monotonic() - w0
    cpu, wb = meter.cpu_ns() - cpu0, meter.write_bytes() - wb0
    rss, pss = meter.memory()
    rss_max, pss_max = max(rss_max, rss), max(pss_max, pss)
    busiest = sorted(meter.by_thread(threads0).items(), key=lambda kv: -kv[1])[:8]
    stop.set()
    poll.join()
    procs.finish(p, timeout=20)
    row = dict(agent=agent.name, version=agent.version(), config=agent.describe(),
               poll=agent.path, window_s=round(window, 1), warmup_s=warmup,
               cpu_ns=cpu, cpu_pct=100.0 * cpu / (window * 1e9), rss_kib=rss, pss_kib=pss,
               rss_max_kib=rss_max, pss_max_kib=pss_max, write_bytes=wb,
               write_mb_per_h=wb * 3600.0 / window / 1e6, processes=processes_max,
               first_answer_s=round(first_answer_s, 2), polls=counts,
               poll_bytes=sorted(sizes)[len(sizes) // 2] if sizes else None,
               service_running=service_running(agent.unit),
               cpu_by_thread_ms={k: round(v / 1e6, 1) for k, v in busiest})
    res.add(agent.name, "footprint", row, "")
    say(f"{agent.name}: CPU {row['cpu_pct']:.3f} % of a core, RSS {rss / 1024:.1f} MiB, "
        f"PSS {pss / 1024:.1f} MiB, writes {row['write_mb_per_h']:.2f} MB/h, polls {counts}")
    return row


def make_agent(name, workdir, port, args, shm):
    sub = os.path.join(workdir, name)
    if name == "kiwi":
        binary = find_program("kiwi-agent", args.agent_bin,
                              [os.environ.get("KIWI_AGENT"),
                               os.path.join(ROOT, "build", "bench", "agent", "bin", "kiwi-agent"),
                               os.path.join(ROOT, "build", "bin", "kiwi-agent")])
        if not binary:
            raise Failure("kiwi-agent not found (build it: tools/build.sh, or --agent-bin PATH)")
        return Kiwi(sub, port, binary, shm)
    if name == "baseline":
        if not os.access(args.baseline_bin or "", os.X_OK):
            raise Failure(f"--baseline-bin {args.baseline_bin!r} is not an executable")
        return Kiwi(sub, port, args.baseline_bin, shm, name=Kiwi.BASELINE)
    if name == "floor":
        binary = find_program("kiwi-bench-ceiling", args.ceiling_bin,
                              [os.path.join(ROOT, "build", "bench", "bin", "kiwi-bench-ceiling")])
        if not binary:
            raise Failure("kiwi-bench-ceiling not found (tools/bench/run.sh builds it into "
                          "build/bench/bin; or --ceiling-bin PATH)")
        return Floor(sub, port, binary, FLOOR_BODY)
    cls = {"node_exporter": NodeExporter, "netdata": Netdata, "collectd": Collectd}[name]
    if not os.access(cls.binary, os.X_OK):
        raise Failure(f"{cls.binary} not found (install: {INSTALL_HINT}, Debian package "
                      f"{cls.package})")
    return cls(sub, port)


def run(args):
    names = [n.strip() for n in args.agents.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_AGENTS]
    if unknown:
        raise Failure(f"unknown agent {unknown}; known: {', '.join(ALL_AGENTS)}")
    if args.baseline_bin:  # measured right before kiwi-agent, so the two see the same machine
        names.insert(names.index("kiwi") if "kiwi" in names else 0, "baseline")
    if os.geteuid() != 0:
        raise Failure("needs root (netdata, and /proc/PID/io of every process of the trees)")
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = Results(args.results, run_id)
    base = os.path.join(ROOT, "build", "bench")
    os.makedirs(base, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="footprint.", dir=base)  # on disk: write_bytes counts
    shm = tempfile.mkdtemp(prefix="kiwi-footprint.", dir="/dev/shm")  # logs, kiwi's snapshot
    procs = Processes(workdir)
    res.add("run", "command", " ".join(["tools/bench/footprint.py"] + sys.argv[1:]), "")
    commit = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h"], capture_output=True,
                            text=True, check=False).stdout.strip()
    with open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    res.add("run", "machine", {"cpus": os.cpu_count(), "model": model,
                               "kernel": os.uname().release, "commit": commit,
                               "seconds": args.seconds, "warmup": args.warmup}, "")
    res.add("run", "loadavg_before", loadavg(), "")
    agents = []
    try:
        ports = free_ports(len(names))
        for name, port in zip(names, ports):
            agents.append(make_agent(name, workdir, port, args, shm))
        for a in agents:
            row = measure(a, procs, res, args.seconds, args.warmup, shm)
            if a.name == "kiwi-agent" and row.get("poll_bytes"):
                for f in agents:  # the floor answers with a body of the same size
                    if isinstance(f, Floor):
                        f.body = row["poll_bytes"]
    finally:
        procs.stop_all()
        if not args.keep:
            for d in (workdir, shm):
                subprocess.run(["rm", "-rf", "--one-file-system", d], check=False)
        else:
            say(f"kept {workdir} and {shm} (the agents' output)")
    res.add("run", "loadavg_after", loadavg(), "")
    return res.rows


# ----------------------------------------------------------------------------------------------
# the report


def last_run(rows):
    if not rows:
        return []
    run_id = rows[-1]["run"]
    return [r for r in rows if r["run"] == run_id]


def mib(kib):
    return f"{kib / 1024:.1f} MiB"


def render(rows):
    rows = last_run(rows)
    meta = {r["measure"]: r["value"] for r in rows if r["side"] == "run"}
    found = [r["value"] for r in rows if r["measure"] == "footprint"]
    if not found:
        raise Failure("no footprint measurement in the results")
    m = meta.get("machine", {})
    out = [SECTION, ""]
    out.append(f"- command: `{meta.get('command', '?')}` ({rows[0]['run']}), commit "
               f"{m.get('commit', '?')}")
    out.append(f"- machine: {m.get('cpus', '?')} x {m.get('model', '?')}, Linux "
               f"{m.get('kernel', '?')}; load average (1, 5, 15 min) before: "
               f"{meta.get('loadavg_before', '?')}, after: {meta.get('loadavg_after', '?')}")
    out.append(f"- each agent alone, one after another: {found[0]['warmup_s']:.0f} s warm-up, then "
               f"{found[0]['window_s']:.0f} s measured, polled once a second by curl; the whole "
               "process tree (CPU: schedstat of every thread plus reaped children; RSS and PSS "
               "summed from smaps_rollup; write_bytes from /proc/PID/io); data on disk (ext4)")
    out.append("")
    out.append("| agent | CPU, % of a core | RSS (peak) | PSS (peak) | disk writes | processes |"
               " polls ok |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for f in found:
        ok = f["polls"].get("200", 0)
        n = sum(f["polls"].values())
        out.append(f"| {f['agent']} | {f['cpu_pct']:.3f} | {mib(f['rss_kib'])} "
                   f"({mib(f['rss_max_kib'])}) | {mib(f['pss_kib'])} ({mib(f['pss_max_kib'])}) | "
                   f"{f['write_mb_per_h']:.2f} MB/h | {f['processes']} | {ok}/{n} |")
    kiwi = next((f for f in found if f["agent"] == "kiwi-agent"), None)
    node = next((f for f in found if f["agent"] == "node_exporter"), None)
    floor = next((f for f in found if f["agent"] == FLOOR), None)
    base = next((f for f in found if f["agent"] == Kiwi.BASELINE), None)
    if kiwi and base:
        out.append("")
        out.append(f"kiwi-agent against the baseline build in this run: CPU "
                   f"{kiwi['cpu_pct']:.3f} % against {base['cpu_pct']:.3f} % of a core "
                   f"({kiwi['cpu_pct'] / base['cpu_pct']:.2f} times), RSS {mib(kiwi['rss_kib'])} "
                   f"against {mib(base['rss_kib'])} ({(kiwi['rss_kib'] - base['rss_kib']) / 1024:+.1f}"
                   f" MiB), disk writes {kiwi['write_mb_per_h']:.2f} against "
                   f"{base['write_mb_per_h']:.2f} MB/h.")
    if kiwi:
        out.append("")
        out.append("Targets (issue 17) for kiwi-agent in this run:")
        out.append("")
        cpu_ok = kiwi["cpu_pct"] <= 0.05
        line = f"- idle CPU {kiwi['cpu_pct']:.3f} % of a core: target ≤ 0.05 %: " + \
            ("met" if cpu_ok else "**missed**")
        if node:
            ratio = kiwi["cpu_pct"] / node["cpu_pct"] if node["cpu_pct"] else float("inf")
            line += (f"; {ratio:.3f} of node_exporter's: target ≤ 0.1: "
                     + ("met" if ratio <= 0.1 else "**missed**"))
        out.append(line)
        if floor:
            out.append(f"- of which the HTTP floor (the same polls answered by a bare "
                       f"libmicrohttpd with a body of the same size, nothing sampled): "
                       f"{floor['cpu_pct']:.3f} %; sampling, storing and rendering cost "
                       f"{kiwi['cpu_pct'] - floor['cpu_pct']:.3f} % on top")
        out.append(f"- RSS {mib(kiwi['rss_kib'])} at the end: target ≤ 6 MiB: "
                   + ("met" if kiwi["rss_kib"] <= 6 * 1024 else "**missed**")
                   + " (PSS beside it depends on what else maps the same libraries)")
        out.append(f"- disk writes {kiwi['write_mb_per_h']:.2f} MB/h on a history younger than "
                   "24 h (the steady state, with pruning, is the idle benchmark's)")
    out.append("")
    out.append("| agent | version | configuration | poll | busiest threads, ms of CPU in the "
               "window |")
    out.append("|---|---|---|---|---|")
    for f in found:
        busy = ", ".join(f"{k} {v:.0f}" for k, v in list(f["cpu_by_thread_ms"].items())[:5])
        warn = " (its system service was running too)" if f.get("service_running") else ""
        out.append(f"| {f['agent']} | {f['version']} | {f['config']}{warn} | `{f['poll']}` | "
                   f"{busy} |")
    out.append("")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--seconds", type=float, default=300.0, help="measured window (default 300)")
    ap.add_argument("--warmup", type=float, default=30.0, help="before the window (default 30)")
    ap.add_argument("--quick", action="store_true", help="--seconds 60 --warmup 10")
    ap.add_argument("--agents", default=",".join(ALL_AGENTS))
    ap.add_argument("--agent-bin", help="kiwi-agent (default: $KIWI_AGENT, "
                    "build/bench/agent/bin/kiwi-agent, build/bin/kiwi-agent, PATH)")
    ap.add_argument("--baseline-bin", help="an earlier kiwi-agent build, measured right before "
                    "kiwi-agent (module docstring)")
    ap.add_argument("--ceiling-bin", help="kiwi-bench-ceiling, for the HTTP floor (default: "
                    "build/bench/bin/kiwi-bench-ceiling, PATH)")
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "footprint.jsonl"),
                    help="JSON lines, appended (default build/bench/footprint.jsonl)")
    ap.add_argument("--report", metavar="FILE", help="render the last run of a results file")
    ap.add_argument("--doc", metavar="FILE", help="put the section into FILE, e.g. "
                    "docs/benchmarks.md (replacing an earlier one)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.warmup = 60.0, 10.0

    return run_or_report(args, run, render, SECTION, say)


if __name__ == "__main__":
    sys.exit(main())
