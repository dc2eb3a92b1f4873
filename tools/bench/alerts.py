#!/usr/bin/python3
"""Alerts: what 50 [[alert]] rules evaluated every second add to the agent's idle CPU.

The same kiwi-agent binary runs twice side by side, agents A and B, both on its built-in
configuration (the twelve default sensors at 1 s, history on disk, snapshot on tmpfs), both on the
same CPU (pinned together to the last CPU, so they share whatever else the machine runs), both
polled the same way once a second by this script (curl: one GET /metrics and one GET /api/current
each, on a new connection, the two agents' polls in alternating order). One of them has:

  - no rules: `[alerts] disable = [...]` names every built-in rule; there are no others;
the other:
  - 50 rules: the built-in rules and those of tools/bench/alert-rules.toml (--rules):
    exact series names with label globs, `*` globs, rates, a threshold series, status rules; a few
    fire on any machine (info), so firing instances are in the cost.

and before each window the two swap (each config file rewritten, SIGHUP, the "reloaded" line
waited for, 5 s more of polling), so each agent runs as many windows with the rules as without
and what differs between the two processes themselves cancels out. After --warmup seconds
(default 30) it measures --windows windows (default 6) of --seconds (default 60) each: the CPU
time of each agent (the run time of every thread, /proc/PID/task/TID/schedstat, ns) and of its
collector thread (kiwi-collector, where the rules run), as % of one core, and the ratio 50 rules
/ no rules per window and over the whole run. The issue's target (issue 38, item 7): at most 5 %
more.

One JSON line per measurement goes to --results (default build/bench/alerts.jsonl); the report
renders the last run as the section "Alerts: 50 rules" (--doc puts it into a file, e.g.
docs/benchmarks.md). Every process started is stopped by its PID at the end. The per-tick cost of
the rule engine alone is the micro-benchmark "alerts: the rule engine ..." of
tools/bench/micro.cpp (build/bin/kiwi-bench-micro "alerts*").

Usage: tools/bench/alerts.py [--seconds S] [--windows N] [--warmup S] [--agent-bin PATH]
                             [--rules FILE] [--results FILE] [--doc FILE] [--work DIR]
       tools/bench/alerts.py --report FILE [--doc FILE]
       (tools/bench/run.sh --alerts [SECONDS] runs it with --results in its results directory)
"""

import argparse
import datetime
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Agent, Failure, Processes, Results, TreeMeter, answers,  # noqa: E402
                      free_ports, http_get, kiwi_config, loadavg, read_results, run_or_report,
                      version_line, wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = "## Alerts: 50 rules"
TARGET_PCT = 5.0  # issue 38, item 7
SETTLE_S = 5  # after a reload, before a window starts


def say(msg):
    print(f"alerts: {msg}", file=sys.stderr, flush=True)


class TomlList(list):
    """A list written as a TOML array by kiwi_config (which writes str() of a non-string)."""

    def __str__(self):
        return "[" + ", ".join(f'"{v}"' for v in self) + "]"


def builtin_rule_names(binary):
    text = subprocess.run([binary, "--print-default-config"], capture_output=True, text=True,
                          check=True).stdout
    names, in_alert = [], False
    for line in text.splitlines():
        if line.startswith("["):
            in_alert = line.strip() == "[[alert]]"
        m = re.match(r'name = "([^"]+)"', line)
        if in_alert and m:
            names.append(m.group(1))
    return names


def count_rules(text):
    return sum(1 for line in text.splitlines() if line.strip() == "[[alert]]")


def curl(url):
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "1", url], check=False)


def run(args):
    if not os.access(args.agent_bin, os.X_OK):
        raise Failure(f"no agent binary at {args.agent_bin} (tools/build.sh builds one)")
    with open(args.rules) as f:
        rules = f.read()
    builtin = builtin_rule_names(args.agent_bin)
    total_rules = len(builtin) + count_rules(rules)
    if total_rules != 50:
        raise Failure(f"{len(builtin)} built-in rules and {count_rules(rules)} in {args.rules} "
                      f"make {total_rules}, not 50: add or remove rules in {args.rules}")
    os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="alerts.", dir=args.work)
    shm_root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    shm = tempfile.mkdtemp(prefix="kiwi-alerts.", dir=shm_root)
    cpu = (os.cpu_count() or 1) - 1
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = Results(args.results, run_id)
    res.add("run", "command", " ".join(["tools/bench/alerts.py"] + sys.argv[1:]), "")
    res.add("run", "machine", {"cpus": os.cpu_count(), "kernel": os.uname().release,
                               "pinned_cpu": cpu, "seconds": args.seconds,
                               "windows": args.windows, "warmup": args.warmup,
                               "version": version_line([args.agent_bin]),
                               "builtin": builtin, "rules": total_rules}, "")
    res.add("run", "loadavg_before", loadavg(), "")
    procs = Processes(work)
    cases = (("no rules", {("alerts", "disable"): TomlList(builtin)}, ""),
             (f"{total_rules} rules", {}, "\n# tools/bench/alert-rules.toml\n" + rules))
    agents = []
    try:
        ports = free_ports(2)
        for name, port in zip("AB", ports):
            d = os.path.join(work, name)
            os.makedirs(os.path.join(shm, name))
            os.makedirs(d)
            texts = []
            for case, changes, extra in cases:
                texts.append(kiwi_config(args.agent_bin,
                                         {("agent", "data_dir"): os.path.join(d, "data"),
                                          ("http", "bind"): f"127.0.0.1:{port}",
                                          ("collector", "snapshot_path"):
                                              os.path.join(shm, name, "current.json"),
                                          **changes}) + extra)
                check = os.path.join(d, "check.toml")
                with open(check, "w") as f:
                    f.write(texts[-1])
                r = subprocess.run([args.agent_bin, "--check-config", check],
                                   capture_output=True, text=True)
                if r.returncode:
                    raise Failure(f"{case}: the config does not load:\n{r.stderr}{r.stdout}")
            cfg = os.path.join(d, "kiwi.toml")
            agent = Agent(procs, args.agent_bin, cfg, "kiwi-agent", side=name, cwd=d,
                          log_dir=os.path.join(shm, name), wrapper=["taskset", "-c", str(cpu)])
            agents.append({"name": name, "agent": agent, "port": port, "cfg": cfg,
                           "texts": texts, "case": None})
        # Window w: agent A has the rules when w is odd, B when w is even; the other none. Each
        # agent runs both ways for as many windows: what differs between the two processes
        # themselves (which one's tick runs first on the shared CPU, and so finds the kernel's
        # and the libraries' caches warm: 7 ms a minute in the sampler thread in a first run
        # without the swap) cancels out of the totals.
        def configure(w, reload):
            for i, a in enumerate(agents):
                k = 1 if (i == 0) == (w % 2 == 1) else 0
                a["case"] = cases[k][0]
                with open(a["cfg"], "w") as f:
                    f.write(a["texts"][k])
                if reload:
                    before = a["agent"].log_text(0).count("info: reloaded ")
                    os.kill(a["agent"].pid, signal.SIGHUP)
                    wait_until(f"agent {a['name']} reloaded", lambda a=a, n=before:
                               a["agent"].log_text(0).count("info: reloaded ") > n, 15, procs)

        configure(0, False)
        for a in agents:
            a["agent"].start(15, require=True)
        for a in agents:
            wait_until(f"agent {a['name']} answering", lambda a=a: answers(a["port"]), 15,
                       procs)
        say(f"two agents on CPU {cpu}; warm-up {args.warmup:.0f} s, then {args.windows} windows "
            f"of {args.seconds:.0f} s, the rules going from one agent to the other (SIGHUP) "
            f"before each, {SETTLE_S} s before it starts")
        _poll(agents, args.warmup, procs)
        meters = [TreeMeter(a["agent"].pid) for a in agents]
        for w in range(args.windows):
            if w:
                configure(w, True)
                _poll(agents, SETTLE_S, procs)
            for m in meters:
                m.sample()
            start = [(m.cpu_ns(), dict(m.threads)) for m in meters]
            t0 = time.monotonic()
            _poll(agents, args.seconds, procs)
            elapsed = time.monotonic() - t0
            for m in meters:
                m.sample()
            for a, m, (ns0, threads0) in zip(agents, meters, start):
                by = m.by_thread(threads0)
                value = {"case": a["case"], "agent": a["name"], "window": w, "seconds": elapsed,
                         "cpu_ns": m.cpu_ns() - ns0,
                         "collector_ns": by.get("kiwi-collector", 0),
                         "threads_ms": {k: round(v / 1e6, 1) for k, v in by.items()}}
                res.add(a["case"], "cpu", value, "ns")
            say(f"window {w + 1}/{args.windows}: " + ", ".join(
                f"{r['value']['agent']} {r['value']['case']} "
                f"{r['value']['cpu_ns'] / 1e7 / elapsed:.3f} %"
                for r in res.rows[-len(agents):]))
        for a in agents:
            firing = sum(1 for line in _metrics(a["port"]).splitlines()
                         if line.startswith("kiwi_alert_firing{"))
            res.add(a["case"], "firing", firing, "")
        res.add("run", "loadavg_after", loadavg(), "")
    finally:
        procs.stop_all()
        subprocess.run(["rm", "-rf", shm, work], check=False)
    _micro(args, res)
    return read_results(args.results)


def _micro(args, res):
    """The rule engine alone: the micro-benchmark's CPU time per tick at 0, 8 and 50 rules (its
    own lines "alerts: N rules: X us of CPU a tick"), after the agents have stopped."""
    if not os.access(args.micro_bin, os.X_OK):
        raise Failure(f"no {args.micro_bin} (built with the tests: tools/build.sh "
                      "-DKIWI_BUILD_TESTS=ON --target kiwi-bench-micro)")
    say(f"micro-benchmark: {args.micro_bin} \"alerts*\"")
    out = subprocess.run(["taskset", "-c", str((os.cpu_count() or 1) - 1), args.micro_bin,
                          "alerts*", "--benchmark-samples", "20"], capture_output=True, text=True)
    if out.returncode:
        raise Failure(f"{args.micro_bin} failed:\n{out.stdout[-3000:]}{out.stderr[-1000:]}")
    m = re.search(r"alerts: a tick of (\d+) series in (\d+) reports", out.stdout)
    ticks = re.findall(r"alerts: (\d+) rules: ([0-9.]+) us of CPU a tick", out.stdout)
    if not m or len(ticks) != 3:
        raise Failure(f"{args.micro_bin}: no figures in its output:\n{out.stdout[-3000:]}")
    res.add("micro", "tick", {"series": int(m.group(1)), "reports": int(m.group(2)),
                              "us": {n: float(us) for n, us in ticks}}, "us")


def _poll(agents, seconds, procs):
    """Polls every agent once a second for `seconds` (their order alternating each second)."""
    t0 = time.monotonic()
    i = 0
    while True:
        order = agents if i % 2 == 0 else list(reversed(agents))
        for a in order:
            curl(f"http://127.0.0.1:{a['port']}/metrics")
            curl(f"http://127.0.0.1:{a['port']}/api/current")
        i += 1
        procs.check_alive()
        delay = t0 + i - time.monotonic()
        if i >= seconds:
            if delay > 0:
                time.sleep(delay)
            return
        if delay > 0:
            time.sleep(delay)


def _metrics(port):
    try:
        return http_get(f"http://127.0.0.1:{port}/metrics", timeout=5)[2].decode()
    except OSError:
        return ""


def render(rows):
    rows = [r for r in rows if r["run"] == rows[-1]["run"]]  # the last run of the file
    run = {r["measure"]: r["value"] for r in rows if r["side"] == "run"}
    cpu = [r["value"] for r in rows if r["measure"] == "cpu"]
    firing = {r["side"]: r["value"] for r in rows if r["measure"] == "firing"}
    if not cpu:
        raise Failure("no CPU measurements in the results")
    m = run.get("machine", {})
    cases = list(dict.fromkeys(c["case"] for c in cpu))
    base, rules = cases[0], cases[-1]

    def pct(c, key="cpu_ns"):
        return c[key] / 1e9 / c["seconds"] * 100

    windows = sorted({c["window"] for c in cpu})
    by = {(c["case"], c["window"]): c for c in cpu}
    out = [SECTION, "",
           f"- command: `{run.get('command', '?')}` ({rows[0]['run']})",
           f"- agent: {m.get('version', '?')}; machine: {m.get('cpus')} CPUs, Linux "
           f"{m.get('kernel')}; load average before: {run.get('loadavg_before', '?')}, after: "
           f"{run.get('loadavg_after', '?')}",
           f"- the same binary twice side by side (A and B), both pinned to CPU "
           f"{m.get('pinned_cpu')}, both on the built-in configuration (its default sensors) "
           "and polled alike once a second (GET /metrics and GET /api/current with curl); "
           "**no rules**: `[alerts] disable` names every built-in rule; "
           f"**{rules}**: the built-in rules and those of `tools/bench/alert-rules.toml` "
           f"({firing.get(rules, '?')} instances firing at the end); the two swap before each "
           f"window (SIGHUP), so each agent runs half the windows with the rules; "
           f"{len(windows)} windows of {m.get('seconds', 0):.0f} s after "
           f"{m.get('warmup', 0):.0f} s of warm-up; CPU = run time of every thread (schedstat), "
           "% of one core; the collector thread (`kiwi-collector`) is where the rules run", "",
           f"| window | rules on | no rules: agent | {rules}: agent | ratio | no rules: collector "
           f"| {rules}: collector | ratio |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for w in windows:
        a, b = by.get((base, w)), by.get((rules, w))
        if not a or not b:
            continue
        r, cr = b["cpu_ns"] / a["cpu_ns"], b["collector_ns"] / max(a["collector_ns"], 1)
        ratios.append(r)
        out.append(f"| {w + 1} | {b.get('agent', '?')} | {pct(a):.3f} % | {pct(b):.3f} % | "
                   f"{r:.3f} | {pct(a, 'collector_ns'):.3f} % | {pct(b, 'collector_ns'):.3f} % | "
                   f"{cr:.3f} |")
    tot = {case: {k: sum(c[k] for c in cpu if c["case"] == case)
                  for k in ("cpu_ns", "collector_ns", "seconds")} for case in (base, rules)}
    r = tot[rules]["cpu_ns"] / tot[base]["cpu_ns"]
    cr = tot[rules]["collector_ns"] / max(tot[base]["collector_ns"], 1)
    out.append(f"| all | | {pct(tot[base]):.3f} % | {pct(tot[rules]):.3f} % | **{r:.3f}** | "
               f"{pct(tot[base], 'collector_ns'):.3f} % | {pct(tot[rules], 'collector_ns'):.3f} % "
               f"| {cr:.3f} |")
    added = (tot[rules]["cpu_ns"] - tot[base]["cpu_ns"]) / 1e9 / tot[rules]["seconds"] * 100
    cadded = (tot[rules]["collector_ns"] - tot[base]["collector_ns"]) / tot[rules]["seconds"] / 1e3
    verdict = "within" if (r - 1) * 100 <= TARGET_PCT else "over"
    out += ["",
            f"- {rules} add {(r - 1) * 100:+.1f} % to the idle agent's CPU over the whole run "
            f"({added:+.4f} % of a core; per window: median ratio "
            f"{statistics.median(ratios):.3f}, from {min(ratios):.3f} to {max(ratios):.3f}): "
            f"{verdict} the target of +{TARGET_PCT:.0f} % (issue 38, item 7); the collector "
            f"thread alone: {cadded:+.0f} µs a tick",
            ""]
    micro = next((r["value"] for r in rows if r["measure"] == "tick"), None)
    if micro:
        us = micro["us"]
        out += ["The rule engine alone (`AlertEngine::sample`), CPU time per tick on a tick of "
                f"the default sensors on the RK3588 fixture board ({micro['series']} series in "
                f"{micro['reports']} reports: tools/bench/micro.cpp, `build/bin/kiwi-bench-micro "
                f"\"alerts*\"`, run by this script after the agents):", "",
                "| rules | CPU per tick | % of a core at 1 s |", "|---:|---:|---:|"]
        out += [f"| {n} | {v:.1f} µs | {v / 1e4:.4f} % |" for n, v in us.items()]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--seconds", type=int, default=60, help="one window (default 60)")
    ap.add_argument("--windows", type=int, default=6, help="an even number (default 6)")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--agent-bin", default=os.path.join(ROOT, "build", "bin", "kiwi-agent"))
    ap.add_argument("--micro-bin", default=os.path.join(ROOT, "build", "bin", "kiwi-bench-micro"))
    ap.add_argument("--rules", default=os.path.join(ROOT, "tools", "bench", "alert-rules.toml"))
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "alerts.jsonl"))
    ap.add_argument("--work", metavar="DIR", default=os.path.join(ROOT, "build", "bench"),
                    help="where the data directories go")
    ap.add_argument("--report", metavar="FILE")
    ap.add_argument("--doc", metavar="FILE")
    args = ap.parse_args()
    if args.seconds < 1 or args.windows < 2 or args.windows % 2 or args.warmup < 0:
        ap.error("--seconds must be positive, --windows even and at least 2, --warmup not "
                 "negative")
    return run_or_report(args, run, render, SECTION, say)


if __name__ == "__main__":
    sys.exit(main())
