"""The keep-alive step of tools/bench/run.sh (the default mode, --quick and --all; alone:
--keepalive): `/api/current` with wrk at each connection count, without and with 1,000 idle
keep-alive connections open (each sent one GET /api/current, read its answer and then stayed
silent; one the agent closes is opened again a second later), on the agent's defaults and then with
max_connections above the crowd and keep_alive above the step (below, VARIANTS). The swarm is
tools/faults/faults.py's Swarm (issue 16's idle case), imported, in a process of its own so that
it takes no time from this one; it runs on the client's CPU beside wrk (bench.py pins itself
there before the swarm forks), and is stopped by its PID at the end. Order: without, with,
without again (the ratio is against the mean of the two "without" runs, so a drift of the
machine shows as the spread between them). One JSON line per wrk run and one for the swarm in
results/keepalive.jsonl; tools/bench/report.py renders them."""

import os
import signal
import sys
import time

from benchlib import Failure, http_get, loadavg
from matrix import run_wrk

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "faults"))
from faults import Swarm, raise_nofile  # noqa: E402

IDLE_CONNECTIONS = 1000
OPENING = b"GET /api/current HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
SETTLE_S = 15  # the swarm at its count (at most; usually 1-2 s)
# Two agents, one after the other: on the defaults, [http] max_connections 256, the agent keeps 256
# slots and gives a newcomer the longest-idle one, so the swarm churns (what a board owner's agent
# does under such a crowd); with max_connections raised above the crowd plus wrk and keep_alive
# above the length of the step (the default 5 s would close each idle one after 5 s, and the swarm
# would open it again), all 1,000 stay open and silent for the whole phase (what the target names:
# idle connections held open).
# Each variant: its [http] settings over the agent's defaults (none for "default").
HELD_SLOTS = IDLE_CONNECTIONS + 100
HELD_KEEP_ALIVE = "10m"
VARIANTS = [("default", {}), ("held", {"max_connections": HELD_SLOTS,
                                      "keep_alive": f'"{HELD_KEEP_ALIVE}"'})]


def stop_swarm(swarm):
    """Asks the swarm to close its sockets, then, if it has not ended 5 s later, kills it by
    PID."""
    swarm.stop_flag.set()
    swarm.join(5)
    if swarm.is_alive():
        os.kill(swarm.pid, signal.SIGKILL)
        swarm.join(5)


def run(b):
    res = b.results("keepalive")
    load_before = loadavg()
    limit = raise_nofile(4096)
    if limit < HELD_SLOTS + 64:
        raise Failure(f"ulimit -n is {limit}: {IDLE_CONNECTIONS} idle connections need more")
    # --quick: the largest connection count only (the step stays under 40 s).
    conns = [max(b.conns)] if b.mode == "quick" else b.conns
    b.say(f"keep-alive: /api/current at {' '.join(map(str, conns))} connections, {b.duration} s"
          f" each, without, with {IDLE_CONNECTIONS} idle keep-alive connections, without again;"
          f" on the defaults, then with max_connections {HELD_SLOTS} and keep_alive "
          f"{HELD_KEEP_ALIVE}")
    for variant, settings in VARIANTS:
        run_variant(b, res, variant, settings, conns, limit)
    b.section_meta(res, load_before)


def run_variant(b, res, variant, settings, conns, limit):
    """One agent, its three phases; `variant` prefixes the phases' names but on the defaults."""
    http = "".join(f"{k} = {v}\n" for k, v in settings.items())
    p, url = b.start_agent(f"keepalive-{variant}", "1s", http=http)
    b.wait_for_200(f"{url}/api/current", 10)
    port = int(url.rsplit(":", 1)[1])
    target = f"{url}/api/current"
    errors = 0
    seconds = len(conns) * (b.duration + 1) + SETTLE_S + 5
    prefix = "" if variant == "default" else f"{variant}-"

    def wrk_all(phase):
        nonlocal errors
        for c in conns:
            body = len(http_get(target, timeout=5)[2])
            r = run_wrk(b, res, prefix + phase, "agent", "current", c, body, target, "json",
                        p.pid)
            if phase != "with":  # under the swarm, errors are what is measured (reported)
                errors += r["non2xx"] + r["bad_body"] + r["socket_errors"]

    swarm = None
    try:
        wrk_all("without")
        swarm = Swarm(port, IDLE_CONNECTIONS, seconds, OPENING, period=1.0)
        swarm.start()
        deadline = time.monotonic() + SETTLE_S
        while swarm.connects < IDLE_CONNECTIONS and time.monotonic() < deadline:
            if not swarm.is_alive():
                raise Failure("the idle-connection swarm ended early")
            time.sleep(0.1)
        time.sleep(1.5)  # one round: the counters and the agent's slots have settled
        at_start = {k: getattr(swarm, k) for k in Swarm.COUNTERS}
        wrk_all("with")
        at_end = {k: getattr(swarm, k) for k in Swarm.COUNTERS}
        stop_swarm(swarm)
        swarm = None
        # The agent closes what is left of the swarm's slots after its keep-alive timeout (5 s).
        time.sleep(6)
        wrk_all("again")
    finally:
        if swarm is not None:
            stop_swarm(swarm)
        b.stop(p)
    res.add("run", "swarm", {"variant": variant, "count": IDLE_CONNECTIONS, "ulimit_n": limit,
                             "http": http.strip(), "start": at_start, "end": at_end,
                             "duration": b.duration, "conns": conns}, "")
    b.errors += errors
    b.say(f"keep-alive ({variant}): swarm {at_end['open_now']} open at the end, "
          f"{at_end['connects'] - at_start['connects']} connects while wrk ran, "
          f"{at_end['closed_by_server']} closed by the agent")
