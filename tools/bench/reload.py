"""tools/bench/run.sh --reload [N]: SIGHUP on one agent (default sensors, fresh data dir), N
rounds of three reloads that each change something: [collector] interval 1s <-> 2s, http.bind
between two free loopback ports, and a TOML error. The waits start no process per step: the log
is read through a file held open, /api/current and the ports through sockets, in 1 ms steps.

One JSON line per reload (results/reload.jsonl) and one with the checks: the PID never changes,
only the deliberate reloads failed (log lines and /api/health), the old port refuses after each
move, /api/current answers after each failed reload, and the history has no step over 2 s. A
check that does not hold fails the run (exit status 1); so does a reload that does not do what
it should (a Failure)."""

import os
import re
import shutil
import signal
import socket
import time

from benchlib import Failure, free_ports, http_get, loadavg
from matrix import probe


def now_us():
    return time.monotonic_ns() // 1000


def msleep():
    time.sleep(0.001)


class Log:
    """The agent's log, read through a file held open: each call reads the lines written since;
    a partial last line is kept for the next call."""

    def __init__(self, path):
        self.f = open(path, errors="replace")
        self.part = ""
        self.f.read()  # skip the start-up lines

    def poll(self, t0):
        """(line, µs since t0) at the first "reloaded" or "reload failed" line, else None."""
        while True:
            chunk = self.f.readline()
            if not chunk:
                return None
            if not chunk.endswith("\n"):
                self.part += chunk
                return None
            line, self.part = self.part + chunk.rstrip("\n"), ""
            if "info: reloaded " in line or "error: reload failed" in line:
                return line, now_us() - t0

    def next(self, t0):
        """Waits 10 s at most for the next verdict line."""
        deadline = t0 + 10_000_000
        while now_us() < deadline:
            v = self.poll(t0)
            if v:
                return v
            msleep()
        raise Failure(f"no 'reloaded' or 'reload failed' line within 10 s of the SIGHUP (log: "
                      f"{self.f.name})")

    def close(self):
        self.f.close()


def current_interval(port):
    """interval_seconds from /api/current on `port`, None when nothing answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /api/current HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while len(data) < 1 << 20:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    m = re.search(rb'"interval_seconds":([0-9.]+)', data)
    return float(m.group(1)) if m else None


def refuses(port):
    """True when a connection to `port` is refused (nothing listens there any more)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def starttime(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def agent_ms(line):
    m = re.search(r" in ([0-9.]+) ms", line)
    return float(m.group(1)) if m else None


def set_line(path, key, value):
    """Rewrites the line `key = ...` of a config file."""
    with open(path) as f:
        text = f.read()
    text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
    with open(path, "w") as f:
        f.write(text)


def run(b):
    rounds = b.reload_rounds
    res = b.results("reload")
    load_before = loadavg()
    port_a, port_b = free_ports(2)
    t_start = int(time.time())
    p, url = b.start_agent("reload", "1s", bind=f"127.0.0.1:{port_a}")
    b.wait_for_200(f"{url}/api/current", 10)
    pid, start = p.pid, starttime(p.pid)
    cfg = os.path.join(b.run_dir, "reload.toml")
    lock = os.path.join(b.snapdir, "reload.json.lock")
    log = Log(p.log)
    problems, state = [], {"pid_ok": True}

    def pid_check(after):
        """The same process answers: alive, same start time, its pid in the snapshot lock."""
        try:
            same = p.poll() is None and starttime(pid) == start
            with open(lock) as f:
                same = same and f.read().strip() == str(pid)
        except OSError:
            same = False
        if not same and state["pid_ok"]:
            problems.append(f"the agent's process changed after {after} (pid {pid})")
        state["pid_ok"] = state["pid_ok"] and same

    def add(i, kind, change, log_us, ms_agent, effect_us, refused_us):
        res.add("agent", "reload", {"round": i, "kind": kind, "change": change,
                                    "log_ms": log_us / 1e3, "agent_ms": ms_agent,
                                    "effect_ms": effect_us / 1e3,
                                    "refused_ms": None if refused_us is None
                                    else refused_us / 1e3}, "ms")

    b.say(f"reload: {rounds} rounds of interval 1s <-> 2s, bind 127.0.0.1:{port_a} <-> "
          f"127.0.0.1:{port_b}, a TOML error (agent pid {pid})")
    frm, to, from_port, to_port = 1, 2, port_a, port_b
    refused_ok = alive_ok = 0
    try:
        for i in range(1, rounds + 1):
            # 1. The interval: the log line, then /api/current (the first tick on the new grid).
            set_line(cfg, "interval", f'"{to}s"')
            t0 = now_us()
            os.kill(pid, signal.SIGHUP)
            line, log_us = log.next(t0)
            if not ("info: reloaded " in line and f"collector.interval {frm}s -> {to}s" in line):
                raise Failure(f"round {i}: interval reload: {line}")
            deadline, cur = t0 + 5_000_000, None
            while now_us() < deadline:
                cur = current_interval(from_port)
                if cur == to:
                    break
                msleep()
            effect = now_us() - t0
            if cur != to:
                raise Failure(f"round {i}: /api/current did not show interval_seconds {to} "
                              "within 5 s")
            add(i, "interval", f"{frm}s->{to}s", log_us, agent_ms(line), effect, None)
            pid_check(f"interval reload {i}")

            # 2. The bind: the first 200 on the new port and the old one refusing, polled
            # together.
            set_line(cfg, "bind", f'"127.0.0.1:{to_port}"')
            t200 = trefused = verdict = None
            t0 = now_us()
            os.kill(pid, signal.SIGHUP)
            deadline = t0 + 5_000_000
            while now_us() < deadline:
                verdict = verdict or log.poll(t0)
                if t200 is None and probe(to_port, "/api/current") == "200":
                    t200 = now_us() - t0
                if trefused is None and refuses(from_port):
                    trefused = now_us() - t0
                if t200 is not None and trefused is not None and verdict:
                    break
                msleep()
            line, log_us = verdict or log.next(t0)
            if not ("info: reloaded " in line
                    and f"http.bind 127.0.0.1:{from_port} -> 127.0.0.1:{to_port}" in line
                    and f"now listening on http://127.0.0.1:{to_port}/" in line):
                raise Failure(f"round {i}: bind reload: {line}")
            if t200 is None:
                raise Failure(f"round {i}: no 200 from 127.0.0.1:{to_port} within 5 s of the "
                              "SIGHUP")
            if trefused is not None:
                refused_ok += 1
            else:
                problems.append(f"round {i}: 127.0.0.1:{from_port} still accepted connections "
                                "5 s after the move")
            add(i, "bind", f"{from_port}->{to_port}", log_us, agent_ms(line), t200, trefused)
            url = f"http://127.0.0.1:{to_port}"
            pid_check(f"bind reload {i}")

            # 3. A TOML error (an unterminated string): the "reload failed" line, then still 200.
            shutil.copy(cfg, cfg + ".good")
            set_line(cfg, "interval", f'"{to}s')  # the closing quote dropped
            t0 = now_us()
            os.kill(pid, signal.SIGHUP)
            line, log_us = log.next(t0)
            if "error: reload failed" not in line:
                raise Failure(f"round {i}: a TOML error did not fail the reload: {line}")
            code = b.status(f"{url}/api/current", timeout=1)
            effect = now_us() - t0
            if code == 200:
                alive_ok += 1
            else:
                problems.append(f"round {i}: HTTP {code} from /api/current after the failed "
                                "reload")
            add(i, "failed", "toml-error", log_us, None, effect, None)
            os.replace(cfg + ".good", cfg)
            pid_check(f"failed reload {i}")
            frm, to, from_port, to_port = to, frm, to_port, from_port

        # After the rounds: reload counts (log and /api/health) and the steps in history.
        with open(p.log, errors="replace") as f:
            text = f.read()
        failed_lines, ok_lines = text.count("error: reload failed"), text.count("info: reloaded ")
        try:
            health = http_get(f"{url}/api/health", timeout=5)[2].decode()
        except (OSError, ValueError):
            health = ""
        ok_total = re.search(r'"ok_total":([0-9]+)', health)
        failed_total = re.search(r'"failed_total":([0-9]+)', health)
        ok_total = int(ok_total.group(1)) if ok_total else None
        failed_total = int(failed_total.group(1)) if failed_total else None
        if (failed_lines, failed_total, ok_lines, ok_total) != (rounds, rounds, 2 * rounds,
                                                                2 * rounds):
            problems.append(f"reloads: {ok_lines} 'reloaded' and {failed_lines} 'reload failed' "
                            f"lines in the log, /api/health ok_total {ok_total} failed_total "
                            f"{failed_total}; expected {2 * rounds} and {rounds}")
        try:
            hist = http_get(f"{url}/api/history?limit=1000&since={t_start}", timeout=5)[2]
        except (OSError, ValueError):
            hist = b""
        m = re.search(rb'"timestamps":\[([^]]*)\]', hist)
        stamps = [float(x) for x in m.group(1).split(b",") if x.strip()] if m else []
        steps = [y - x for x, y in zip(stamps, stamps[1:])]
        max_step = max(steps) if steps else None
        if len(stamps) < 2 or max_step > 2:
            problems.append(f"history since the start: {len(stamps)} samples, largest step "
                            f"{max_step} s (over 2 s, or too few samples)")
        pid_check("the last reload")
    finally:
        log.close()
        b.stop(p)
    model = "?"
    with open("/proc/cpuinfo") as f:
        for cpuline in f:
            if cpuline.startswith("model name"):
                model = cpuline.split(":", 1)[1].strip()
                break
    u = os.uname()
    res.add("run", "reload", {
        "rounds": rounds, "machine": f"{b.ncpu} x {model}, {u.sysname} {u.release}",
        "pinning": b.pinning, "pid": pid, "build_type": b.build_type or "?", "port_a": port_a,
        "port_b": port_b, "pid_ok": state["pid_ok"], "ok_lines": ok_lines,
        "failed_lines": failed_lines, "ok_total": ok_total, "failed_total": failed_total,
        "refused_ok": refused_ok, "alive_ok": alive_ok, "t_start": t_start,
        "count": len(stamps), "max_step": max_step, "problems": problems}, "")
    b.section_meta(res, load_before)
    b.check_failures.extend(f"reload: {x}" for x in problems)
    rows = [r["value"] for r in res.rows if r["measure"] == "reload" and r["side"] != "run"]

    def med(kind, key):
        vs = sorted(r[key] for r in rows if r["kind"] == kind and r[key] is not None)
        return f"{vs[len(vs) // 2]:.1f}" if vs else "nan"

    b.say(f"reload: interval: log line {med('interval', 'log_ms')} ms (agent "
          f"{med('interval', 'agent_ms')} ms), /api/current {med('interval', 'effect_ms')} ms; "
          f"bind: 200 on the new port {med('bind', 'effect_ms')} ms, old port refused "
          f"{med('bind', 'refused_ms')} ms; TOML error: log line {med('failed', 'log_ms')} ms; "
          f"largest history step {max_step} s; {len(problems)} problems")
