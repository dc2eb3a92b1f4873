#!/usr/bin/python3
"""Fleet page: what /api/fleet costs an agent with 50 peers, one browser open, beside one with none.

Starts --peers (default 50) peer agents: the real kiwi-agent on its built-in configuration (the
default sensors at 1 s), each with its own data directory on tmpfs, bound to 127.0.0.1:0 (the
port from its "listening on" line). Then, at the same time, on the same configuration otherwise:

  A  the serving agent: a [[peer]] entry for each of them (timeout 2 s, no credentials);
  B  the baseline: no peers (its /api/fleet is its own row).

Before measuring, waits (deadline 60 s) until every peer shows "up" in A's /api/fleet, and fails
naming the ones that do not. Then "one browser open" on each of A and B: a client that does what
the /fleet page does, a GET of /api/fleet every interval_ms of its answer (5 s, the fleet route's
default interval) on a kept-alive connection (--browsers N: N of them on each, each with its own
connection, starting 5 s / N apart). After --warmup seconds (default 20) it measures
over --seconds (default 120):

  - CPU of A and of B: the run time of each of their threads (/proc/PID/task/TID/schedstat),
    % of one core over the window, and A's busiest threads; the 50 peers' CPU together
    (utime + stime), the machine's busy share (/proc/stat) and the load average: not the
    measured quantity, but the 50+ agents sampling every second share the same cores;
  - memory at the end of the window: Rss and Pss of A and B (/proc/PID/smaps_rollup), and of
    the peers together.

Then, the browsers still open: --requests (default 300) sequential GETs of /api/fleet on one
kept-alive connection to A, then the same to B: p50, p95, p99 and max in ms; and, through A,
/peer/<name>/api/current of --proxy-peers (default 5) peers, each asked twice in a row per round
(the first fetches from the peer: a cache miss; the second within the 1 s cache: a hit), rounds
1.1 s apart, beside the same GET straight to the peer.

The issue's targets (issue 40, item 4), each reported met or missed with its figure:
/api/fleet p95 <= 100 ms at 50 peers; A under 1 % of a core with one browser open. And A minus
B: what the peers cost.

One JSON line per measurement goes to --results (default build/bench/peers.jsonl); the report
renders the last run as the section "Fleet page: N peers" (--doc puts it into a file, e.g.
docs/benchmarks.md). Loopback only; every process started is stopped by its PID at the end, also
on an error or Ctrl-C.

Usage: tools/bench/peers.py [--peers N] [--browsers N] [--seconds S] [--warmup S]
                            [--requests N] [--proxy-peers N] [--agent-bin PATH]
                            [--results FILE] [--doc FILE] [--quick] [--keep]
       tools/bench/peers.py --report FILE [--doc FILE]
  --quick   --seconds 30 --warmup 10 --requests 100 (a smoke test of the runner, not a figure
            to quote)
"""

import argparse
import datetime
import http.client
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Agent, Failure, Processes, Results, TreeMeter, cpu_ticks,  # noqa: E402
                      find_program, guarded, kiwi_config, loadavg, loopback_get, publish,
                      read_results, smaps_rollup, version_line)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
P95_TARGET_MS = 100.0
CPU_TARGET_PCT = 1.0


def say(msg):
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def section(peers):
    return f"## Fleet page: {peers} peers"


def machine_busy():
    """(busy, total) jiffies of every CPU (/proc/stat's first line; iowait counts as idle)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]  # guest time is in user's already
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def percentiles(seconds):
    ms = sorted(s * 1000.0 for s in seconds)

    def pct(p):  # nearest rank
        return ms[min(len(ms) - 1, max(0, math.ceil(p / 100.0 * len(ms)) - 1))]

    return {"n": len(ms), "p50_ms": pct(50), "p95_ms": pct(95), "p99_ms": pct(99),
            "max_ms": ms[-1], "mean_ms": sum(ms) / len(ms)}


class Browser:
    """What an open /fleet page does: GET /api/fleet, then again interval_ms later (from the
    answer), on a kept-alive connection; when the agent has closed it meanwhile (its keep_alive,
    also 5 s), once more on a new one, as a browser does."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.counts = {}
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        conn = None
        nxt = time.monotonic()
        while not self.stop.is_set():
            interval = 5.0
            key = "error"
            for _ in range(2):
                try:
                    conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                    status, body, _ = loopback_get(self.port, "/api/fleet", conn=conn)
                    key = str(status)
                    if status == 200:
                        interval = json.loads(body).get("interval_ms", 5000) / 1000.0
                    break
                except (OSError, http.client.HTTPException, ValueError):
                    if conn:
                        conn.close()
                    conn = None
            self.counts[key] = self.counts.get(key, 0) + 1
            nxt += interval
            self.stop.wait(max(0.0, nxt - time.monotonic()))
        if conn:
            conn.close()


def sequential(port, path, n):
    """`n` GETs of `path` one after another on one kept-alive connection: their seconds; Failure
    on any status but 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    out = []
    try:
        for _ in range(n):
            status, body, took = loopback_get(port, path, conn=conn)
            if status != 200:
                raise Failure(f"GET {path} on port {port}: HTTP {status}: {body[:200]!r}")
            out.append(took)
    finally:
        conn.close()
    return out


def fleet_rows(port):
    status, body, _ = loopback_get(port, "/api/fleet", timeout=10)
    if status != 200:
        raise Failure(f"GET /api/fleet on port {port}: HTTP {status}")
    return json.loads(body)["boards"]


def wait_all_up(port, names, seconds, procs, since):
    """Until every peer of `names` is "up" in the agent's /api/fleet: the seconds from `since`
    (monotonic), and those the first GET took (the first after a quiet spell waits for a round
    of the peers); Failure naming those that are not when `seconds` have passed."""
    deadline = time.monotonic() + seconds
    first = None
    while True:
        procs.check_alive()
        t0 = time.monotonic()
        try:
            rows = {r["name"]: r for r in fleet_rows(port) if not r.get("self")}
        except (OSError, http.client.HTTPException, ValueError):
            rows = {}
        first = first if first is not None else time.monotonic() - t0
        down = [n for n in names if rows.get(n, {}).get("status") != "up"]
        if not down:
            return time.monotonic() - since, first
        if time.monotonic() >= deadline:
            detail = "; ".join(f"{n}: {rows.get(n, {}).get('status', 'no row')} "
                               f"({rows.get(n, {}).get('error', '')})" for n in down[:5])
            raise Failure(f"{len(down)} of {len(names)} peers not up in A's /api/fleet after "
                          f"{seconds:.0f} s: {detail}")
        time.sleep(0.5)


def memory(pids):
    rss = pss = 0
    for pid in pids:
        m = smaps_rollup(pid)
        rss += m.get("rss_kib", 0)
        pss += m.get("pss_kib", 0)
    return rss, pss


def rss_split(pid):
    """(file-backed, anonymous) Rss in KiB from /proc/PID/smaps: the libraries mapped against
    the process's own heap and stacks."""
    files = anon = 0
    path = ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                parts = line.split(maxsplit=5)
                path = parts[5].strip() if len(parts) > 5 else ""
            elif first == "Rss:":
                kib = int(line.split()[1])
                if path.startswith("/") and "(deleted)" not in path:
                    files += kib
                else:
                    anon += kib
    return files, anon


def start_agent(procs, binary, base, name, shm, peers=()):
    """An agent on the built-in configuration with its data and log under `base/name`, bound to
    127.0.0.1:0, `peers` ((name, url), ...) as [[peer]] entries; started, not waited for."""
    d = os.path.join(base, name)
    os.makedirs(d)
    text = kiwi_config(binary, {("agent", "data_dir"): os.path.join(d, "data"),
                                ("http", "bind"): "127.0.0.1:0",
                                ("collector", "snapshot_path"): os.path.join(d, "current.json")})
    for peer, url in peers:
        text += f'\n[[peer]]\nname = "{peer}"\nurl = "{url}"\ntimeout = "2s"\n'
    cfg = os.path.join(d, "kiwi.toml")
    with open(cfg, "w") as f:
        f.write(text)
    agent = Agent(procs, binary, cfg, name, data_dir=os.path.join(d, "data"),
                  side="peer" if name.startswith("p") else name, cwd=d, log_dir=d)
    agent.start(wait=None)
    return agent


def listening(agent, seconds):
    if agent.wait_listening(seconds) is None:
        raise Failure(f"kiwi-agent {agent.name} did not start (log: {agent.log_path}):\n"
                      + agent.log_text()[-1500:].rstrip())


def run(args):
    binary = find_program("kiwi-agent", args.agent_bin,
                          [os.environ.get("KIWI_AGENT"),
                           os.path.join(ROOT, "build", "bin", "kiwi-agent")])
    if not binary:
        raise Failure("kiwi-agent not found (build it: tools/build.sh, or --agent-bin PATH)")
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = Results(args.results, run_id)
    commit = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h"], capture_output=True,
                            text=True, check=False).stdout.strip()
    with open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    res.add("run", "command", " ".join(["tools/bench/peers.py"] + sys.argv[1:]), "")
    res.add("run", "machine", {"cpus": os.cpu_count(), "model": model, "commit": commit,
                               "kernel": os.uname().release, "version": version_line([binary]),
                               "peers": args.peers, "seconds": args.seconds,
                               "warmup": args.warmup, "requests": args.requests}, "")
    res.add("run", "loadavg_before", loadavg(), "")
    shm_root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    work = tempfile.mkdtemp(prefix="kiwi-peers.", dir=shm_root)
    procs = Processes(work)
    browsers = []
    try:
        say(f"starting {args.peers} peer agents ({binary})")
        peers = [start_agent(procs, binary, work, f"p{i:02d}", work) for i in range(args.peers)]
        for p in peers:
            listening(p, 60)
        a = start_agent(procs, binary, work, "A", work, [(p.name, p.url) for p in peers])
        b = start_agent(procs, binary, work, "B", work)
        listening(a, 30)
        listening(b, 30)
        took, first = wait_all_up(a.port, [p.name for p in peers], 60, procs, a.started_at)
        say(f"all {len(peers)} peers up in A's /api/fleet {took:.2f} s after A's start; the "
            f"first GET (it waits for a round) took {first * 1000:.1f} ms")
        res.add("A", "all_up_s", round(took, 2), "s")
        res.add("A", "first_fleet_ms", first * 1000, "ms")
        for i in range(args.browsers):
            for agent in (a, b):
                browsers.append((agent.name, Browser(agent.port)))
                browsers[-1][1].thread.start()
            if i + 1 < args.browsers:
                time.sleep(5.0 / args.browsers)
        say(f"{args.browsers} browser(s) open on A and on B; warm-up {args.warmup:.0f} s")
        time.sleep(args.warmup)
        procs.check_alive()
        meters = {"A": TreeMeter(a.pid), "B": TreeMeter(b.pid)}
        for m in meters.values():
            m.sample()
        cpu0 = {k: m.cpu_ns() for k, m in meters.items()}
        threads0 = dict(meters["A"].threads)
        peer0 = sum(cpu_ticks(p.pid) for p in peers)
        busy0, total0 = machine_busy()
        for _, br in browsers:
            br.counts.clear()
        w0 = time.monotonic()
        say(f"measuring {args.seconds:.0f} s")
        while time.monotonic() < w0 + args.seconds:
            time.sleep(min(1.0, max(0.0, w0 + args.seconds - time.monotonic())))
            for m in meters.values():
                m.sample()
            procs.check_alive()
        window = time.monotonic() - w0
        busy1, total1 = machine_busy()
        peer_ns = (sum(cpu_ticks(p.pid) for p in peers) - peer0) * 1e9 / os.sysconf("SC_CLK_TCK")
        res.add("run", "loadavg_window_end", loadavg(), "")
        res.add("run", "machine_busy_pct",
                100.0 * (busy1 - busy0) / max(1, total1 - total0) * os.cpu_count(),
                "% of one core")
        for side, m in meters.items():
            polls = {}
            for _, br in (x for x in browsers if x[0] == side):
                for k, v in br.counts.items():
                    polls[k] = polls.get(k, 0) + v
            rss, pss = m.memory()
            cpu = m.cpu_ns() - cpu0[side]
            files, anon = rss_split(m.root)
            row = {"window_s": round(window, 1), "cpu_ns": cpu, "rss_file_kib": files,
                   "rss_anon_kib": anon,
                   "cpu_pct": 100.0 * cpu / (window * 1e9), "rss_kib": rss, "pss_kib": pss,
                   "browsers": args.browsers, "browser_polls": polls}
            if side == "A":
                busiest = sorted(m.by_thread(threads0).items(), key=lambda kv: -kv[1])[:6]
                row["cpu_by_thread_ms"] = {k: round(v / 1e6, 1) for k, v in busiest}
            res.add(side, "window", row, "")
            say(f"{side}: CPU {row['cpu_pct']:.3f} % of a core, RSS {rss / 1024:.1f} MiB, "
                f"PSS {pss / 1024:.1f} MiB, browser polls {polls}")
        prss, ppss = memory([p.pid for p in peers])
        res.add("peers", "window", {"agents": len(peers), "cpu_pct": 100.0 * peer_ns /
                                    (window * 1e9), "rss_kib": prss, "pss_kib": ppss}, "")

        say(f"{args.requests} sequential GETs of /api/fleet on A, then on B (browsers open)")
        for side, agent in (("A", a), ("B", b)):
            boards = len(fleet_rows(agent.port))
            lat = percentiles(sequential(agent.port, "/api/fleet", args.requests))
            lat["boards"] = boards
            lat["bytes"] = len(loopback_get(agent.port, "/api/fleet")[1])
            res.add(side, "api_fleet_latency", lat, "ms")
            say(f"{side}: /api/fleet ({boards} boards, {lat['bytes']} B) p50 "
                f"{lat['p50_ms']:.2f} p95 {lat['p95_ms']:.2f} p99 {lat['p99_ms']:.2f} max "
                f"{lat['max_ms']:.2f} ms")
        rows = {r["name"]: r for r in fleet_rows(a.port)}
        down = [p.name for p in peers if rows.get(p.name, {}).get("status") != "up"]
        res.add("A", "peers_not_up_after", down, "")

        chosen = peers[:args.proxy_peers]
        if chosen:
            say(f"/peer/<name>/api/current through A, {len(chosen)} peers, {args.proxy_rounds} "
                "rounds")
            miss, hit, direct = [], [], []
            conn_a = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
            try:
                for _ in range(args.proxy_rounds):
                    t_round = time.monotonic()
                    for p in chosen:
                        path = f"/peer/{p.name}/api/current"
                        for into in (miss, hit):
                            status, body, took = loopback_get(a.port, path, conn=conn_a)
                            if status != 200:
                                raise Failure(f"GET {path} through A: HTTP {status}: "
                                              f"{body[:200]!r}")
                            into.append(took)
                        direct.append(p.get("/api/current", 10)[2])
                    time.sleep(max(0.0, t_round + 1.1 - time.monotonic()))
            finally:
                conn_a.close()
            for name, values in (("miss", miss), ("hit", hit), ("direct", direct)):
                res.add("A", f"peer_current_{name}", percentiles(values), "ms")
        res.add("run", "loadavg_after", loadavg(), "")
    finally:
        for _, br in browsers:
            br.stop.set()
        for _, br in browsers:
            br.thread.join(15)
        procs.stop_all()
        if args.keep:
            say(f"kept {work} (the agents' data and logs)")
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", work], check=False)
    return res.rows


# ----------------------------------------------------------------------------------------------
# the report


def mib(kib):
    return f"{kib / 1024:.1f} MiB"


def render(rows):
    rows = [r for r in rows if r["run"] == rows[-1]["run"]]  # the last run of the file
    meta = {r["measure"]: r["value"] for r in rows if r["side"] == "run"}
    got = {(r["side"], r["measure"]): r["value"] for r in rows if r["side"] != "run"}
    if ("A", "window") not in got or ("A", "api_fleet_latency") not in got:
        raise Failure("no complete measurement in the results (the run failed before the end)")
    m = meta.get("machine", {})
    wa, wb, wp = got[("A", "window")], got[("B", "window")], got.get(("peers", "window"), {})
    la, lb = got[("A", "api_fleet_latency")], got[("B", "api_fleet_latency")]
    n = m.get("peers", wp.get("agents", "?"))
    nb = wa.get("browsers", 1)
    open_ = "one browser" if nb == 1 else f"{nb} browsers"
    out = [section(n), "",
           f"- command: `{meta.get('command', '?')}` ({rows[0]['run']}), commit "
           f"{m.get('commit', '?')}, {m.get('version', '?')}",
           f"- machine: {m.get('cpus', '?')} x {m.get('model', '?')}, Linux "
           f"{m.get('kernel', '?')}; load average (1, 5, 15 min) before: "
           f"{meta.get('loadavg_before', '?')}, at the window's end: "
           f"{meta.get('loadavg_window_end', '?')}; the machine (these agents and whatever "
           f"else ran on it) was {meta.get('machine_busy_pct', 0):.0f} % of one core busy over "
           f"the window, of {100 * (m.get('cpus') or 1)} %",
           f"- {n} peer agents, A (a `[[peer]]` for each) and B (none), all at once on loopback, "
           "each the real kiwi-agent on its built-in configuration (the default sensors at 1 s) "
           "with its data on tmpfs; every peer \"up\" in A's /api/fleet "
           f"{got.get(('A', 'all_up_s'), 0):.2f} s after A's start; {open_} open on A and "
           "on B (each a GET of /api/fleet every interval_ms, 5 s); "
           f"CPU over {wa['window_s']:.0f} s after "
           f"{m.get('warmup', 0):.0f} s of warm-up (schedstat of every thread); RSS and PSS at "
           "the window's end (smaps_rollup)",
           f"- latency: {la['n']} sequential GETs of /api/fleet on one kept-alive connection, "
           "after the window, the browsers still open; A first, then B", ""]
    out += ["| agent | boards | CPU, % of a core | RSS | PSS | /api/fleet p50 | p95 | p99 | max "
            "| body |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for side, w, lat, what in (("A", wa, la, f"A, {n} peers"), ("B", wb, lb, "B, no peers")):
        out.append(f"| {what} | {lat['boards']} | {w['cpu_pct']:.3f} | {mib(w['rss_kib'])} | "
                   f"{mib(w['pss_kib'])} | {lat['p50_ms']:.2f} ms | {lat['p95_ms']:.2f} ms | "
                   f"{lat['p99_ms']:.2f} ms | {lat['max_ms']:.2f} ms | {lat['bytes']} B |")
    out.append(f"| A - B: the peers' cost | | {wa['cpu_pct'] - wb['cpu_pct']:+.3f} | "
               f"{(wa['rss_kib'] - wb['rss_kib']) / 1024:+.1f} MiB | "
               f"{(wa['pss_kib'] - wb['pss_kib']) / 1024:+.1f} MiB | "
               f"{la['p50_ms'] - lb['p50_ms']:+.2f} ms | {la['p95_ms'] - lb['p95_ms']:+.2f} ms | "
               f"{la['p99_ms'] - lb['p99_ms']:+.2f} ms | | |")
    if wp:
        out.append(f"| the {wp['agents']} peers together | | {wp['cpu_pct']:.1f} | "
                   f"{mib(wp['rss_kib'])} | {mib(wp['pss_kib'])} | | | | | |")
    out += ["", f"Targets (issue 40, item 4) at {n} peers in this run:", "",
            f"- /api/fleet p95 {la['p95_ms']:.2f} ms: target <= {P95_TARGET_MS:.0f} ms: "
            + ("met" if la["p95_ms"] <= P95_TARGET_MS else "**missed**"),
            f"- A with {open_} open {wa['cpu_pct']:.3f} % of a core: target < "
            f"{CPU_TARGET_PCT:.0f} %: " + ("met" if wa["cpu_pct"] < CPU_TARGET_PCT
                                           else "**missed**")]
    if "rss_file_kib" in wa:
        out.append(f"- RSS by kind: A {mib(wa['rss_file_kib'])} file-backed (the binary and the "
                   f"libraries it maps, libcurl among them with peers) and "
                   f"{mib(wa['rss_anon_kib'])} anonymous; B {mib(wb['rss_file_kib'])} and "
                   f"{mib(wb['rss_anon_kib'])}")
    if ("A", "first_fleet_ms") in got:
        out.append(f"- A's first /api/fleet, which waits for one round of the {n} peers (as the "
                   f"first after a quiet minute does): {got[('A', 'first_fleet_ms')]:.1f} ms")
    down = got.get(("A", "peers_not_up_after"))
    if down:
        out.append(f"- peers not up in A's /api/fleet after the latency run: {', '.join(down)}")
    busy = wa.get("cpu_by_thread_ms")
    if busy:
        out.append("- A's busiest threads, ms of CPU in the window: "
                   + ", ".join(f"{k} {v:.0f}" for k, v in busy.items()))
    out.append(f"- browser polls in the window: A {wa['browser_polls']}, B {wb['browser_polls']}")
    cur = {k: got.get(("A", f"peer_current_{k}")) for k in ("miss", "hit", "direct")}
    if all(cur.values()):
        out += ["", f"/peer/&lt;name&gt;/api/current through A ({cur['miss']['n']} of each, rounds "
                "1.1 s apart, so each round's first GET of a URL misses the 1 s cache and the "
                "second hits it), beside the same GET straight to the peer:", "",
                "| GET | p50 | p95 | p99 | max |", "|---|---:|---:|---:|---:|"]
        for k, what in (("miss", "through A, cache miss (A asks the peer)"),
                        ("hit", "through A, cache hit"), ("direct", "straight to the peer")):
            c = cur[k]
            out.append(f"| {what} | {c['p50_ms']:.2f} ms | {c['p95_ms']:.2f} ms | "
                       f"{c['p99_ms']:.2f} ms | {c['max_ms']:.2f} ms |")
    out.append("")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--peers", type=int, default=50)
    ap.add_argument("--browsers", type=int, default=1,
                    help="open /fleet pages on each of A and B (default 1)")
    ap.add_argument("--seconds", type=float, default=120.0, help="measured window (default 120)")
    ap.add_argument("--warmup", type=float, default=20.0, help="before the window (default 20)")
    ap.add_argument("--requests", type=int, default=300,
                    help="sequential GETs of /api/fleet for the latency (default 300)")
    ap.add_argument("--proxy-peers", type=int, default=5,
                    help="peers whose /api/current is asked through A (default 5; 0: none)")
    ap.add_argument("--proxy-rounds", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="--seconds 30 --warmup 10 --requests 100")
    ap.add_argument("--agent-bin", help="kiwi-agent (default: $KIWI_AGENT, build/bin/kiwi-agent, "
                    "PATH); its plugins come from its own plugin_dir")
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "bench", "peers.jsonl"),
                    help="JSON lines, appended (default build/bench/peers.jsonl)")
    ap.add_argument("--report", metavar="FILE", help="render the last run of a results file")
    ap.add_argument("--doc", metavar="FILE", help="put the section into FILE, e.g. "
                    "docs/benchmarks.md (replacing an earlier one)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (data, logs)")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.warmup, args.requests = 30.0, 10.0, 100
    if not 1 <= args.peers <= 200:
        ap.error("--peers: 1..200")
    if not 1 <= args.browsers <= 100:
        ap.error("--browsers: 1..100")
    args.proxy_peers = min(args.proxy_peers, args.peers)

    def body():
        rows = read_results(args.report) if args.report else run(args)
        md = render(rows)
        n = next((r["value"].get("peers") for r in reversed(rows) if r["measure"] == "machine"),
                 args.peers)
        publish(md, section(n), say, doc=args.doc)
        return 0

    return guarded(body, say)


if __name__ == "__main__":
    sys.exit(main())
