"""The --instructions step of tools/bench/run.sh (also a step of --all): what one request costs,
counted in instructions, the one cost figure that does not move from run to run on a shared VM
(its timings swing by 20 % between repetitions of the same cell). Each route of the matrix, and
the ceiling with a body of the same size, runs under valgrind's callgrind with a file per thread
(--separate-threads=yes): 3 s of wrk at 8 connections to warm up, the counters zeroed, then
SECONDS (10) of wrk more and a dump. The agent samples once a minute, so that no new sample (and
no render of one) lands in the window. The threads whose dump names `on_request` are the HTTP
workers: their instructions over the requests wrk counted are the worker's cost per request
(libmicrohttpd's parsing and its 16 KiB memset of the connection's pool, the callback, the
response headers; not the kernel), and `on_request` inclusive is the callback's (for the agent:
the gates, the router, the handler across the C ABI). One JSON line per route and target in
results/instructions.jsonl, rendered by tools/bench/report.py. Needs valgrind (tools/bench/bench.py
installs it); about 3 minutes."""

import glob
import os
import re
import subprocess
import time

from benchlib import Failure, loadavg

ROUTES = (("root", "/"), ("current", "/api/current"), ("history", "/api/history?limit=120"),
          ("metrics", "/metrics"))
WARMUP_S, SECONDS, CONNS = 3, 10, 8
START_S = 60  # to the "listening on" line, under valgrind
CALLBACK = re.compile(r"^\s*([\d,]+) .*[: ](?:kiwi::agent::\(anonymous namespace\)::)?"
                      r"on_request[ (]")


def valgrind_argv(out):
    # --trace-children: the agent re-executes itself at start-up (its name, MALLOC_ARENA_MAX).
    return ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--trace-children=yes",
            f"--callgrind-out-file={out}.%p"]


def worker_costs(out):
    """(instructions of the worker threads, of on_request inclusive) in the dumps of `out`."""
    total = callback = 0
    for path in glob.glob(f"{out}.*"):
        with open(path, errors="replace") as f:
            text = f.read()
        if "on_request" not in text:
            continue
        m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        total += int(m.group(1)) if m else 0
        annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                                   capture_output=True, text=True).stdout
        for line in annotated.splitlines():
            c = CALLBACK.match(line)
            if c:
                callback += int(c.group(1).replace(",", ""))
                break
    return total, callback


def wrk_requests(b, url, seconds):
    r = subprocess.run(b.pin_client + ["wrk", "-t1", f"-c{CONNS}", f"-d{seconds}s", url],
                       capture_output=True, text=True, timeout=seconds + 60)
    m = re.search(r"(\d+) requests in", r.stdout)
    if r.returncode or not m:
        raise Failure(f"wrk on {url} gave no count:\n{r.stdout[-500:]}{r.stderr[-500:]}")
    return int(m.group(1))


def measure(b, p, url, out):
    """Warm-up, zero, SECONDS of wrk, dump: (requests, worker instructions, callback)."""
    wrk_requests(b, url, WARMUP_S)
    subprocess.run(["callgrind_control", "-z", str(p.pid)], capture_output=True, timeout=60)
    for old in glob.glob(f"{out}.*"):
        os.unlink(old)  # the dumps of the zeroing (none is written) and of start-up, if any
    n = wrk_requests(b, url, SECONDS)
    subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True, timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not glob.glob(f"{out}.*"):
        time.sleep(0.2)
    total, callback = worker_costs(out)
    if not total:
        raise Failure(f"callgrind wrote no worker thread's dump for {url} ({out}.*)")
    return n, total, callback


def run(b):
    res = b.results("instructions")
    load_before = loadavg()
    b.say(f"instructions: callgrind of the agent and the ceiling, {len(ROUTES)} routes, "
          f"{SECONDS} s of wrk at {CONNS} connections each (about 3 minutes)")
    work = os.path.join(b.run_dir, "callgrind")
    os.makedirs(work, exist_ok=True)
    for name, path in ROUTES:
        out = os.path.join(work, f"agent-{name}")
        # One sample a minute: the first is taken at start, and no other lands in the window, so
        # the counts are of requests alone (at 1 s, the render of each new sample, once per
        # second for the thousands of requests per second served, would be in them under
        # valgrind's slowness, where at full speed it is spread over a hundred thousand).
        p, url = b.start_agent("instructions", interval="1m",
                               pin=b.pin_server + valgrind_argv(out), wait=START_S)
        try:
            b.wait_for_200(url + "/api/current", 60)  # a first sample
            size = len(subprocess.run(["curl", "-sf", url + path], capture_output=True,
                                      timeout=60).stdout)
            agent = measure(b, p, url + path, out)
        finally:
            b.stop(p)
        out = os.path.join(work, f"ceiling-{name}")
        c = b.procs.start("ceiling", "ceiling", b.pin_server + valgrind_argv(out) + [
            b.ceiling_bin, "--threads", "1", "--body-size", str(size)], log_dir=b.run_dir)
        try:
            ceiling = measure(b, c, b.wait_listening(c, START_S, "the ceiling under valgrind")
                              + "/", out)
        finally:
            b.stop(c)
        for target, (n, total, callback) in (("agent", agent), ("ceiling", ceiling)):
            res.add(target, "per_request", {"route": name, "body": size, "requests": n,
                                            "worker": total / n, "callback": callback / n}, "Ir")
        b.say(f"instructions: {name:8} body={size:<6} agent {agent[1] / agent[0]:8.0f} per "
              f"request (on_request {agent[2] / agent[0]:6.0f}), ceiling "
              f"{ceiling[1] / ceiling[0]:8.0f} (on_request {ceiling[2] / ceiling[0]:4.0f})")
    b.section_meta(res, load_before)
