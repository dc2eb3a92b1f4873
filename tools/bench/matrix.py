"""The HTTP matrix of tools/bench/run.sh (the default mode, --quick, and the first step of --all):
start-up time (on a fresh data directory and on one holding 24 h of history), the history filled,
the history body's size, then every route at each connection count against the ceiling server
with the same body size, side by side, several repetitions with
the route order rotated.

Each wrk run, each start-up run and each body size is one JSON line (results/matrix.jsonl,
startup.jsonl, bodies.jsonl); tools/bench/report.py renders the sections from them. Also the
helpers the other modes share: wrk with tools/bench/report.lua, schedstat, the history fill, the
body sizes."""

import os
import re
import shutil
import socket
import subprocess
import time

from benchlib import Failure, free_ports, http_get, loadavg

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES = {"root": "/", "current": "/api/current", "history": "/api/history?limit=120",
          "metrics": "/metrics"}
CHECKS = {"root": "html", "metrics": "prom"}  # the others: json
CLK_TCK = os.sysconf("SC_CLK_TCK")


def schedstat_us(pid):
    """(run, wait) in µs summed over the threads of `pid` (/proc/PID/task/*/schedstat)."""
    run = wait = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                a, b = f.read().split()[:2]
        except (OSError, ValueError):
            continue
        run, wait = run + int(a), wait + int(b)
    return run // 1000, wait // 1000


def cpu0_busy_us():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu0 "):
                v = [int(x) for x in line.split()[1:]]
                return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1_000_000 // CLK_TCK
    return 0


def parse_bench_line(text, log):
    """The result line of report.lua's done(): BENCH rps=.. requests=.. ..."""
    lines = [line for line in text.splitlines() if line.startswith("BENCH ")]
    if not lines:
        raise Failure(f"wrk gave no result (log: {log}):\n" + "\n".join(text.splitlines()[-5:]))
    out = {}
    for kv in lines[-1].split()[1:]:
        k, _, v = kv.partition("=")
        out[k] = float(v) if "." in v else int(v)
    return out


def wrk_argv(b, conns, seconds, url, check):
    return b.pin_client + ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "5s", "-s",
                           os.path.join(HERE, "report.lua"), url, "--", check, "100"]


def run_wrk(b, res, rep, target, route, conns, body, url, check, server_pid):
    """One wrk run, one JSON line. The server's CPU time comes from its threads' schedstat: CPU per
    response barely moves when other processes take the CPU, so it is the robust figure on a busy
    machine; "other" (CPU 0 busy time from /proc/stat minus the server's own, per second of the
    run) says how much else ran on the server's CPU."""
    log = os.path.join(b.run_dir, f"wrk-{rep}-{target}-{route}-{conns}.log")
    cpu0, _ = schedstat_us(server_pid)
    busy0 = cpu0_busy_us()
    t0 = time.monotonic_ns()
    with open(log, "w") as f:
        subprocess.run(wrk_argv(b, conns, b.duration, url, check), stdout=f,
                       stderr=subprocess.STDOUT, timeout=b.duration + 60)
    t1 = time.monotonic_ns()
    busy1 = cpu0_busy_us()
    cpu1, _ = schedstat_us(server_pid)
    with open(log) as f:
        r = parse_bench_line(f.read(), log)
    cpu_per = (cpu1 - cpu0) / r["requests"] if r["requests"] > 0 else 0
    other_ms = ((busy1 - busy0) - (cpu1 - cpu0)) * 1e6 / (t1 - t0)
    # /proc/stat counts in ticks, schedstat in ns: near zero the difference can dip below 0.
    if not b.pin_server or other_ms < 0:
        other_ms = 0
    row = dict(rep=rep, route=route, conns=conns, body=body, rps=r["rps"],
               requests=r["requests"], p50_us=r["p50_us"], p95_us=r["p95_us"],
               p99_us=r["p99_us"], max_us=r["max_us"], non2xx=r["non2xx"], checked=r["checked"],
               bad_body=r["bad_body"], socket_errors=r["socket_errors"],
               cpu_us_per_response=round(cpu_per, 3), other_cpu0_ms_per_s=round(other_ms, 1))
    res.add(target, "wrk", row, "")
    b.say(f"{target:<7} {route:<8} c={conns:<2} body={body:<6} {r['rps']:9.0f} resp/s  p95 "
          f"{r['p95_us'] / 1000:6.2f} ms  {cpu_per:5.1f} us CPU/resp  other on CPU 0 "
          f"{other_ms:3.0f} ms/s  non-2xx {r['non2xx']}  bad bodies {r['bad_body']}/"
          f"{r['checked']}  socket errors {r['socket_errors']}")
    return row


def probe(port, path):
    """The status of GET `path` on a fresh connection, "" when nothing answers; no process per
    try, so a try costs well under a millisecond."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while b"\r\n" not in data and len(data) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return ""
    parts = data.split(b"\r\n", 1)[0].split()
    return parts[1].decode() if len(parts) >= 2 else ""


def history_count(url):
    try:
        body = http_get(f"{url}/api/history?limit=120", timeout=5)[2]
    except (OSError, ValueError):
        return 0
    m = re.search(rb'"count":([0-9]+)', body)
    return int(m.group(1)) if m else 0


def fill_history(b, name, how):
    """Fills the history to 120 samples. "1hz": waits for 120 ticks of the default interval (2
    min). "fast": runs the agent at 100 ms until 120 samples exist (about 13 s), then restarts it
    at 1 s on the same database. Returns (Popen, url, fill) with the agent NAME running at the
    default interval."""
    if how == "fast":
        p, url = b.start_agent(name, "100ms")
        b.wait_for_200(f"{url}/api/current", 10)
        for _ in range(300):
            if history_count(url) >= 120:
                break
            time.sleep(0.1)
        b.stop(p)
        p, url = b.start_agent(name, "1s", keep=True)
        fill = ("filled at a 100 ms interval (quick fill: CPU ratios are coarser than at 1 s), "
                "then the agent restarted at the default 1 s")
    else:
        p, url = b.start_agent(name, "1s")
        b.say("filling the history at 1 Hz (120 samples, about 2 minutes)")
        for _ in range(300):
            if history_count(url) >= 120:
                break
            time.sleep(1)
        fill = "filled at the default 1 s interval"
    b.wait_for_200(f"{url}/api/current", 10)
    n = history_count(url)
    if n < 120:
        b.say(f"warning: history has only {n} samples")
    return p, url, fill


def measure_history_body(b, url, fill):
    """Body sizes of the history route (limit=120): uncompressed, gzip -6 of it, and as served to
    a client that accepts gzip (equal to uncompressed when the agent does not compress)."""
    body = http_get(f"{url}/api/history?limit=120", timeout=5)[2]
    path = os.path.join(b.run_dir, "history.json")
    with open(path, "wb") as f:
        f.write(body)
    gz = len(subprocess.run(["gzip", "-6", "-c", path], capture_output=True, check=True).stdout)
    served = len(http_get(f"{url}/api/history?limit=120", timeout=5,
                          headers={"Accept-Encoding": "gzip"})[2])
    m = re.search(rb'"count":([0-9]+)', body)
    res = b.results("bodies")
    res.add("agent", "history_body", {"bytes": len(body), "gzip_bytes": gz,
                                      "served_gzip_bytes": served,
                                      "count": int(m.group(1)) if m else 0, "fill": fill,
                                      "when": b.when, "command": b.invocation}, "")


class Ceiling:
    """The ceiling server, started per body size (reused while the size stays the same)."""

    def __init__(self, b):
        self.b, self.p, self.size, self.url = b, None, None, None

    def for_size(self, size):
        if self.p and self.size == size:
            return
        self.stop()
        b = self.b
        self.p = b.procs.start("ceiling", "ceiling", b.pin_server + [
            b.ceiling_bin, "--threads", str(b.http_threads), "--body-size", str(size)],
            log_dir=b.run_dir)
        self.size = size
        self.url = b.wait_listening(self.p, 5, "the ceiling server")

    def stop(self):
        if self.p:
            self.b.stop(self.p)
            self.p = None


def fill_day(b):
    """A data directory holding 24 h of 1 Hz history ending now (build/bin/kiwi-bench-fill,
    built with the tests: 112 series through the agent's Store, a commit every 10 s); its path,
    or None when the tool is not in the build tree."""
    fill = os.path.join(b.build_dir, "bin", "kiwi-bench-fill")
    if not os.access(fill, os.X_OK):
        b.say(f"start-up on 24 h of history: no {fill} (it comes with -DKIWI_BUILD_TESTS=ON); "
              "skipped")
        return None
    d = os.path.join(b.run_dir, "day-data")
    shutil.rmtree(d, ignore_errors=True)
    out = subprocess.run([fill, d], capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise Failure(f"{fill} failed: {(out.stdout + out.stderr).strip()}")
    b.say(out.stdout.strip())
    return d


def measure_startup(b):
    """Exec to the first 200 on / (server up) and on /api/current (first sample served), 5 times
    on a fresh data directory and 5 times on a copy of one holding 24 h of history (fill_day),
    with the agent's CPU time and run-queue wait until then."""
    res = b.results("startup")
    load_before = loadavg()
    day = fill_day(b)
    if day:
        # The check the agent's store runs on such a file beside start-up (a thread of its own,
        # off the path to the first 200): PRAGMA quick_check reads every page.
        db = os.path.join(day, "kiwi.db")
        ms = []
        for _ in range(3):
            t0 = time.monotonic_ns()
            subprocess.run(["sqlite3", db, "PRAGMA quick_check(1);"], check=True,
                           capture_output=True)
            ms.append((time.monotonic_ns() - t0) / 1e6)
        res.add("agent", "quick_check", {"ms": sorted(ms)[1], "db_bytes": os.path.getsize(db)},
                "")
    for data in ("fresh", "24h") if day else ("fresh",):
        b.say(f"start-up: 5 runs, exec to first 200, {data} data directory")
        startup_runs(b, res, data, day)
    b.section_meta(res, load_before)
    if day:
        shutil.rmtree(day, ignore_errors=True)


def startup_runs(b, res, data, day):
    size = 0
    for i in range(1, 6):
        for attempt in range(1, 4):
            port = free_ports(1)[0]
            t0 = time.monotonic_ns()
            p = None
            try:
                target = os.path.join(b.run_dir, "startup-data")
                shutil.rmtree(target, ignore_errors=True)
                if data == "24h":
                    shutil.copytree(day, target)
                    size = sum(os.path.getsize(os.path.join(target, f))
                               for f in os.listdir(target))
                    # The copy's dirty pages go to disk now, not as writeback beside the start.
                    os.sync()
                agent = b.agent("startup", bind=f"127.0.0.1:{port}", keep=True)
                t0 = time.monotonic_ns()
                agent.start(wait=None)  # timed here, by the first 200s
                p = agent.proc
                deadline = t0 + 5_000_000_000
                t_root = t_current = None
                while t_root is None and time.monotonic_ns() < deadline:
                    if probe(port, "/") == "200":
                        t_root = time.monotonic_ns() - t0
                    if p.poll() is not None:
                        break
                while t_root is not None and t_current is None \
                        and time.monotonic_ns() < deadline:
                    if probe(port, "/api/current") == "200":
                        t_current = time.monotonic_ns() - t0
                cpu, wait = schedstat_us(p.pid)
            finally:
                if p:
                    b.stop(p)
            if t_current is not None:
                break
            b.say(f"start-up run {i}: no 200 (try {attempt}; log: {p.log})")
        if t_current is None:
            raise Failure(f"start-up run {i}: no 200 within 5 s (log: {p.log})")
        res.add("agent", "startup", {"run": i, "data": data, "db_bytes": size,
                                     "root_ms": t_root / 1e6, "current_ms": t_current / 1e6,
                                     "cpu_ms": cpu / 1e3, "wait_ms": wait / 1e3}, "")
    rows = [r["value"] for r in res.rows if r["measure"] == "startup"
            and r["value"].get("data") == data]
    med = sorted(r["current_ms"] for r in rows)[2]
    b.say(f"start-up median to the first 200 on /api/current, {data} data directory: "
          f"{med:.1f} ms")


def run(b):
    res = b.results("matrix")
    load_before = loadavg()
    measure_startup(b)
    p, url, fill = fill_history(b, "bench", "fast" if b.mode == "quick" else "1hz")
    affinity = subprocess.run(["taskset", "-pc", str(p.pid)], capture_output=True,
                              text=True).stdout.rsplit(": ", 1)[-1].strip()
    with open(p.log, errors="replace") as f:
        threads = re.findall(r"[0-9]* worker threads?[^,\n]*", f.read())
    measure_history_body(b, url, fill)
    avail, skipped = [], []
    for r, path in ROUTES.items():
        code = b.status(url + path)
        if code == 200:
            avail.append(r)
        else:
            skipped.append({"route": r, "path": path, "code": code})
            b.say(f"skipping {path}: HTTP {code}")
    n = len(avail)
    cells = b.reps * (n * len(b.conns) * 2 + len(b.conns))
    b.say(f"matrix: {' '.join(avail)} x connections ({' '.join(map(str, b.conns))}) x {b.reps} "
          f"repetitions x {b.duration} s, agent and ceiling: {cells} runs, about "
          f"{cells * (b.duration + 1) // 60 + 1} min")
    ceiling = Ceiling(b)
    errors = 0
    try:
        for rep in range(1, b.reps + 1):
            for i in range(n):
                r = avail[(i + rep - 1) % n]
                for c in b.conns:
                    try:
                        body = len(http_get(url + ROUTES[r], timeout=5)[2])
                    except (OSError, ValueError):
                        body = 0
                    a = run_wrk(b, res, rep, "agent", r, c, body, url + ROUTES[r],
                                CHECKS.get(r, "json"), p.pid)
                    errors += a["non2xx"] + a["bad_body"] + a["socket_errors"]
                    ceiling.for_size(body)
                    run_wrk(b, res, rep, "ceiling", r, c, body, ceiling.url + ROUTES[r], "json",
                            ceiling.p.pid)
            ceiling.for_size(0)
            for c in b.conns:
                run_wrk(b, res, rep, "empty", "-", c, 0, ceiling.url + "/", "none",
                        ceiling.p.pid)
    finally:
        ceiling.stop()
    try:
        with open(f"/proc/{p.pid}/smaps_rollup") as f:
            rss = int(re.search(r"^Rss:\s+(\d+)", f.read(), re.M).group(1))
    except (OSError, AttributeError):
        rss = None
    b.stop(p)
    res.add("run", "matrix", {"mode": b.mode, "reps": b.reps, "duration": b.duration,
                              "conns": b.conns, "pinning": b.pinning, "affinity": affinity,
                              "http_threads": b.http_threads,
                              "agent_threads": threads[-1] if threads else "?",
                              "history_fill": fill, "rss_kib": rss, "routes": avail,
                              "skipped": skipped, "errors": errors}, "")
    b.section_meta(res, load_before)
    b.errors += errors
