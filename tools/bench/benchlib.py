"""What the Python benchmark runners (tools/bench/bench.py and its modes, fleet.py, footprint.py,
scale.py, disk.py) and the fault campaign (tools/faults/faults.py) share: the agent under test
(Agent: its config, started, waited for, stopped and reaped), starting and stopping processes by
PID, reading /proc, loopback and HTTP helpers, finding programs, one JSON line per measurement,
and putting a runner's section into docs/benchmarks.md.

Only the Python 3 standard library."""

import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import time
import urllib.error
import urllib.request
import zlib

CLK_TCK = os.sysconf("SC_CLK_TCK")


class Failure(Exception):
    """A run that cannot go on; the message says why."""


# ----------------------------------------------------------------------------------------------
# processes


class Processes:
    """Every process the benchmark starts, each stopped by its PID (SIGTERM, then SIGKILL)."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []  # (side, name, Popen)

    def start(self, side, name, argv, cwd=None, env=None, log_dir=None, append=False,
              preexec_fn=None):
        """Starts `argv` in `cwd` (default the work directory); its output goes to
        <log_dir>/<name>.log (default: in `cwd`), after what is there with `append` (a restart);
        `p.log_offset` is where its own lines start. `preexec_fn` runs in the child before the
        program (resource limits)."""
        cwd = cwd or self.workdir
        log = os.path.join(log_dir or cwd, f"{name}.log")
        with open(log, "ab" if append else "wb") as f:
            offset = f.tell()
            # A session of its own: a Ctrl-C in the terminal reaches this script only, which then
            # stops each process in order (stop_all).
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, cwd=cwd, env=env, preexec_fn=preexec_fn)
        p.log, p.log_offset = log, offset
        self.procs.append((side, name, p))
        return p

    def finish(self, p, timeout=10.0, sig=signal.SIGTERM):
        """Stops `p` (see stop) and forgets it: check_alive no longer looks at it."""
        result = self.stop(p, timeout, sig)
        self.procs = [e for e in self.procs if e[2] is not p]
        return result

    def reap(self, p, timeout=30.0):
        """Waits for `p` (already signalled) to exit, reaps it with wait4() and forgets it; Failure
        if it takes longer than `timeout` s. Returns its resource usage over its whole life (e.g.
        ru_oublock: the write_bytes of /proc/PID/io, in 512-byte units, the last writes at exit
        included). `p.returncode` is set."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                raise Failure(f"pid {p.pid} did not exit within {timeout:.0f} s")
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        self.procs = [e for e in self.procs if e[2] is not p]
        return usage

    def pids(self, side):
        return [p.pid for s, _, p in self.procs if s == side and p.poll() is None]

    def check_alive(self):
        """Raise if a long-running process (not a bounded load command) has exited."""
        for side, name, p in list(self.procs):
            if side != "load" and p.poll() is not None:
                raise Failure(f"{name} (pid {p.pid}) exited with status {p.returncode}; "
                              f"its log: {p.log}:\n" + tail(p.log))

    def stop(self, p, timeout=10.0, sig=signal.SIGTERM):
        """Sends `sig` to `p`, waits `timeout` s, then SIGKILL; reaped either way. Returns (exit
        status, seconds it took, whether it had to be killed)."""
        if p.poll() is not None:
            return p.returncode, 0.0, False
        t0 = time.monotonic()
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        killed = False
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            killed = True
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        return p.returncode, time.monotonic() - t0, killed

    def stop_all(self, timeout=10.0):
        """Stops every process (the last started first) and forgets them."""
        for _, _, p in reversed(self.procs):
            self.stop(p, timeout)
        self.procs = []


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def side_ticks(pids):
    return sum(cpu_ticks(p) for p in pids)


def vm_rss_kib(pid):
    """VmRSS of a process in KiB (/proc/PID/status), None when it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def smaps_rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0] in ("Rss:", "Pss:"):
                out[parts[0][:-1].lower() + "_kib"] = int(parts[1])
    return out


def children_map():
    """{ppid: [pid, ...]} of every process now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(name))
    return out


def tree(root):
    kids = children_map()
    pids, todo = [], [root]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(kids.get(p, ()))
    return pids


def read_int_fields(path, keys):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return out


class TreeMeter:
    """CPU, memory and disk writes of the process tree under `root`, sampled by `sample()`.

    CPU is kept per thread: the schedstat run time of each thread seen (a thread that ends keeps
    its last value), and per process the CPU of its reaped children (cutime + cstime, which a
    process gains when it waits for a child: the time of a child seen before moves from its own
    threads to its parent's count, so it is dropped from the first when it has gone). Disk writes
    the same way: /proc/PID/io write_bytes of a process includes its reaped children."""

    def __init__(self, root):
        self.root = root
        self.threads = {}   # (pid, tid) -> run time ns, last seen
        self.reaped = {}    # pid -> (cutime + cstime) ns, last seen
        self.writes = {}    # pid -> write_bytes, last seen
        self.live = set()
        self.names = {}     # pid -> comm

    def sample(self):
        live = set()
        for pid in tree(self.root):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    text = f.read()
                comm = text[text.index("(") + 1:text.rindex(")")]
                fields = text.rsplit(")", 1)[1].split()
                reaped_ns = (int(fields[13]) + int(fields[14])) * 1_000_000_000 // CLK_TCK
                tids = os.listdir(f"/proc/{pid}/task")
                run = {}
                for tid in tids:
                    try:
                        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                            run[(pid, int(tid))] = int(f.read().split()[0])
                    except (OSError, ValueError, IndexError):
                        pass
                wb = read_int_fields(f"/proc/{pid}/io", ("write_bytes",)).get("write_bytes", 0)
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
            live.add(pid)
            self.names[pid] = comm
            self.threads.update(run)
            self.reaped[pid] = reaped_ns
            self.writes[pid] = wb
        # A process that has gone: its whole time is now in its parent's reaped count (or lost
        # with the parent), so its own threads and counts leave the sum.
        for pid in self.live - live:
            for key in [k for k in self.threads if k[0] == pid]:
                del self.threads[key]
            self.reaped.pop(pid, None)
            self.writes.pop(pid, None)
        self.live = live

    def cpu_ns(self):
        return sum(self.threads.values()) + sum(self.reaped.values())

    def write_bytes(self):
        return sum(self.writes.values())

    def memory(self):
        rss = pss = 0
        for pid in self.live:
            try:
                m = smaps_rollup(pid)
            except OSError:
                continue
            rss += m.get("rss_kib", 0)
            pss += m.get("pss_kib", 0)
        return rss, pss

    def by_thread(self, since):
        """{thread name: run time ns in the window} (threads of one name summed), for the report;
        `since` is threads at the window's start."""
        out = {}
        for key, ns in self.threads.items():
            try:
                with open(f"/proc/{key[0]}/task/{key[1]}/comm") as f:
                    name = f.read().strip()
            except OSError:
                name = self.names.get(key[0], "?") + " (ended)"
            out[name] = out.get(name, 0) + ns - since.get(key, 0)
        return out


def varint(b, i):
    """The unsigned LEB128 varint in bytes `b` at `i`: (value, the index after it)."""
    v = shift = 0
    while i < len(b):
        v |= (b[i] & 0x7F) << shift
        i += 1
        if b[i - 1] < 0x80:
            break
        shift += 7
    return v, i


def tick_log_records(db):
    """Each record of the tick log beside the history file `db` (schema 6, `<db>-ticks/*.ticks`,
    agent/src/store/tick_log.hpp), files in name order, as far as its records frame (a record of
    the file's hour: what follows in a recycled file is another hour's):
    (ts, last, ticks, block, intact), intact being whether its CRC-32 holds; block is the record's
    block without the catalog rows a record may carry before it (0x04, varint(n), n bytes)."""
    d = db + "-ticks"
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith(".ticks") or not name[:-len(".ticks")].lstrip("-").isdigit():
            continue
        hour = int(name[:-len(".ticks")]) * 1000
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        at = 0
        while len(data) - at >= 32:
            magic, size, ts, last, ticks, crc = struct.unpack_from("<IIqqII", data, at)
            if (magic != 0x316b546b or size > len(data) - at - 32
                    or not hour <= ts < hour + 3_600_000):
                break
            payload = data[at + 32:at + 32 + size]
            intact = zlib.crc32(payload, zlib.crc32(data[at:at + 28])) == crc
            block = payload
            if payload[:1] == b"\x04":
                n, i = varint(payload, 1)
                block = payload[i + n:]
            yield ts, last, ticks, block, intact
            at = (at + 32 + size + 4095) // 4096 * 4096  # each record at a multiple of 4 KiB


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ----------------------------------------------------------------------------------------------
# loopback


def free_ports(n):
    """n distinct free loopback ports (bound together, then released)."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def http_get(url, timeout=5.0, headers=None):
    """(status, headers, body) of a GET to `url`; urllib.error.HTTPError for a 4xx or 5xx."""
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


def answers(port, path="/api/health", timeout=2.0):
    """Whether 127.0.0.1:`port` answers a GET of `path` with 200 (False while nothing listens, or
    on an error status)."""
    try:
        return http_get(f"http://127.0.0.1:{port}{path}", timeout=timeout)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def loopback_get(port, path, timeout=3.0, conn=None):
    """(status, body, seconds) of a GET of `path` on 127.0.0.1:`port`, whatever the status, over a
    new connection (or `conn`, kept open); OSError or http.client.HTTPException when nothing
    answers."""
    own = conn is None
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        return r.status, body, time.monotonic() - t0
    finally:
        if own:
            c.close()


# What a poll counts as "not yet": nothing listening, an HTTP or SQLite error, a half-written file.
NOT_YET = (OSError, http.client.HTTPException, ValueError, sqlite3.Error)


def poll(pred, timeout, step=0.1, procs=None):
    """The first truthy value of `pred()` within `timeout` s, asked every `step` s and at least
    once (an exception of NOT_YET counts as not yet), or None. With `procs`, a long-running
    process of them that exits ends the wait with Failure (check_alive)."""
    deadline = time.monotonic() + timeout
    while True:
        if procs:
            procs.check_alive()
        try:
            v = pred()
            if v:
                return v
        except NOT_YET:
            pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(step)


def wait_until(what, pred, deadline_s, procs=None, step=0.2):
    """poll(), or Failure naming `what` when the time is up."""
    if not poll(pred, deadline_s, step, procs):
        raise Failure(f"timed out after {deadline_s:.0f} s waiting for {what}")


LISTENING = re.compile(r"listening on (https?://[^/\s]+:\d+)/")


def listening_url(log_text):
    """The URL of the "listening on http://127.0.0.1:PORT/" line the agent (or the ceiling
    server) logs, None before it."""
    m = LISTENING.search(log_text)
    return m.group(1) if m else None


def read_log(path, offset=0, limit=1 << 20):
    """A log from `offset`, at most `limit` bytes of it, decoded ("" when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def wait_listening(p, seconds, what):
    """The URL of the "listening on" line that `p` (started by Processes.start) logs, waited for
    `seconds` at most; Failure naming `what` if it does not come or `p` exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        url = listening_url(read_log(p.log, p.log_offset))
        if url:
            return url
        if p.poll() is not None:
            break
        time.sleep(0.01)
    raise Failure(f"{what} did not start (log: {p.log}):\n{tail(p.log, 5).rstrip()}")


# ----------------------------------------------------------------------------------------------
# the agent under test


def agent_config(data_dir, plugin_dir, bind="127.0.0.1:0", snapshot_path="", agent=(), http=(),
                 collector=(), extra=""):
    """A config for the agent under test: its data_dir and plugin_dir, the bind address (port 0:
    the kernel picks a free one and the log says which) and the snapshot path ("": none). More
    settings of a table go in `agent`, `http`, `collector`: a dict (a str value is written
    quoted, anything else as is) or TOML lines. `extra` is appended (sensors, routes)."""
    def table(name, first, more):
        lines = [f"[{name}]"] + [f"{k} = {toml_value(v)}" for k, v in first.items()]
        if isinstance(more, str):
            lines += [line for line in more.splitlines() if line.strip()]
        else:
            lines += [f"{k} = {toml_value(v)}" for k, v in dict(more).items()]
        return lines

    text = (table("agent", {"data_dir": data_dir, "plugin_dir": plugin_dir}, agent)
            + table("http", {"bind": bind}, http)
            + table("collector", {"snapshot_path": snapshot_path}, collector))
    return "\n".join(text) + "\n" + extra


def toml_value(v):
    return json.dumps(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


class Agent:
    """One kiwi-agent under test, the way every Python tool starts it: on the config file
    `config`, under `wrapper` (taskset, valgrind) if given, started by `procs` in a session of its
    own with its output in <log_dir>/<name>.log (appended on a restart), waited for by its
    "listening on" line and, if asked, its first sample (never a fixed sleep), stopped and reaped
    by its PID. `limit_as` caps its address space (RLIMIT_AS, bytes)."""

    def __init__(self, procs, binary, config, name="agent", data_dir=None, side="agent",
                 wrapper=(), cwd=None, log_dir=None, limit_as=None):
        self.procs, self.binary, self.config, self.name = procs, binary, config, name
        self.data_dir, self.side, self.wrapper = data_dir, side, list(wrapper)
        self.workdir = cwd or procs.workdir
        self.log_path = os.path.join(log_dir or self.workdir, f"{name}.log")
        self.log_dir, self.limit_as = log_dir, limit_as
        self.proc = self.port = self.url = self.started_at = None
        self.log_offset = 0
        self.starts = 0

    def start(self, wait=10.0, first_sample=False, require=False):
        """Starts it; with `wait` (seconds), waits that long from now for its "listening on" line
        and, with `first_sample`, for /api/current to answer 200. Returns the seconds to the
        line, or None when it did not come (exited or still starting); with `require`, Failure
        with its log instead of None."""
        limit = self.limit_as

        def pre():
            if limit:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.started_at = time.monotonic()
        self.proc = self.procs.start(self.side, self.name,
                                     self.wrapper + [self.binary, "--config", self.config],
                                     cwd=self.workdir, log_dir=self.log_dir,
                                     append=self.starts > 0, preexec_fn=pre if limit else None)
        self.starts += 1
        self.log_offset = self.proc.log_offset
        self.port = self.url = None
        if not wait:
            return None
        took = self.wait_listening(wait)
        if took is not None and first_sample and not poll(
                lambda: self.get("/api/current", 1.0)[0] == 200,
                max(0.0, self.started_at + wait - time.monotonic()), 0.05):
            took = None
        if took is None and require:
            why = "exited" if not self.alive() else f"not ready within {wait:.0f} s"
            raise Failure(f"kiwi-agent {self.name} {why} (log: {self.log_path}):\n"
                          + self.log_text(self.log_offset)[-1500:].rstrip())
        return took

    def wait_listening(self, timeout):
        """Waits until `timeout` s after the start (looks at least once) for the "listening on"
        line; sets port and url. Returns the seconds from the start, or None."""
        deadline = self.started_at + timeout
        while True:
            url = listening_url(self.log_text(self.log_offset))
            if url:
                self.url, self.port = url, int(url.rsplit(":", 1)[1])
                return time.monotonic() - self.started_at
            if self.proc.poll() is not None or time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self, offset=0, limit=1 << 20):
        """Its log from `offset` (0: every start's; log_offset: this start's), at most `limit`
        bytes, decoded."""
        return read_log(self.log_path, offset, limit)

    def log_bytes(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def rss(self):
        """VmRSS in KiB while it runs, else None."""
        return vm_rss_kib(self.proc.pid) if self.alive() else None

    def stop(self, timeout=10.0, sig=signal.SIGTERM):
        """Sends `sig`, waits `timeout` s, then SIGKILL; reaped. Returns (exit status, seconds,
        whether it had to be killed); None if it was never started."""
        return self.procs.finish(self.proc, timeout, sig) if self.proc else None

    def kill9(self):
        """SIGKILL at once, as a power cut would; reaped."""
        return self.procs.finish(self.proc, 0, signal.SIGKILL)

    @property
    def db(self):
        return os.path.join(self.data_dir, "kiwi.db")

    def get(self, path, timeout=3.0, conn=None):
        """(status, body, seconds) of a GET of `path` (loopback_get)."""
        return loopback_get(self.port, path, timeout, conn)


# ----------------------------------------------------------------------------------------------
# programs and results


def find_program(name, explicit=None, candidates=()):
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise Failure(f"{explicit}: not an executable file")
        return os.path.abspath(explicit)  # the processes run in their own directories
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    p = shutil.which(name)
    if p:
        return p
    return None


def version_line(argv):
    try:
        out = subprocess.run(argv + ["--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


class Results:
    """One JSON line per measurement, appended to the results file, kept for the report."""

    def __init__(self, path, run):
        self.path, self.run, self.rows = path, run, []
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def add(self, side, measure, value, unit, **extra):
        row = {"run": self.run, "side": side, "measure": measure, "value": value, "unit": unit}
        row.update(extra)
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def put_section(path, heading, md):
    """Replace the section `heading` of a Markdown file (from that line to the next `## `), or add
    it before "## How to read these figures" (tools/bench/report.py keeps the sections of these
    Python runners when it renders the file again)."""
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        lines = []
    new = md.rstrip("\n").split("\n") + [""]
    if heading in lines:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        lines[start:end] = new
    else:
        at = next((i for i, line in enumerate(lines) if line == "## How to read these figures"),
                  len(lines))
        lines[at:at] = new
    with open(path, "w") as f:
        f.write("\n".join(lines))


def read_results(path):
    """The JSON lines of a results file (--report FILE)."""
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise Failure(f"{path}: {e.strerror}") from e
    except ValueError as e:
        raise Failure(f"{path}: not JSON lines ({e})") from e
    if not rows:
        raise Failure(f"{path}: no measurements")
    return rows


def publish(md, heading, say, doc=None, markdown=None):
    """Print a runner's Markdown; also write it to `markdown`, and put it into `doc` as the section
    `heading` (put_section)."""
    print(md, end="")
    if markdown:
        with open(markdown, "w") as f:
            f.write(md)
    if doc:
        put_section(doc, heading, md)
        say(f"wrote the section to {doc}")


def run_or_report(args, run, render, heading, say):
    """A runner's main: measure (run(args) gives the results' rows) or, with --report FILE,
    read an earlier run's; render it, print it and put it into --doc as `heading` (publish), all
    guarded (Failure, SIGTERM, Ctrl-C). Returns the exit status."""
    def body():
        rows = read_results(args.report) if args.report else run(args)
        publish(render(rows), heading, say, doc=args.doc)
        return 0

    return guarded(body, say)


def guarded(body, say, failure_status=1):
    """Run a runner's main `body()` and return its exit status: a Failure is said and gives
    `failure_status`; SIGTERM (a CI timeout) and SIGINT unwind as Ctrl-C does, through the
    finally blocks that stop every process started, and give 130."""
    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)  # also when started with SIGINT ignored (`cmd &`)
    try:
        return body()
    except Failure as e:
        say(f"error: {e}")
        return failure_status
    except KeyboardInterrupt:
        say("interrupted; every process it started is stopped")
        return 130


def kiwi_config(binary, changes):
    """The agent's built-in configuration (kiwi-agent --print-default-config) with some settings
    changed: `changes` maps (table, key) to a value (a str is written quoted, anything else as
    is). Every one must exist in the default: a renamed setting fails here, not silently."""
    text = subprocess.run([binary, "--print-default-config"], capture_output=True, text=True,
                          check=True).stdout
    changes = dict(changes)
    out, table = [], None
    for line in text.splitlines():
        m = re.match(r"\[+([a-z_.]+)\]+", line)
        if m:
            table = m.group(1)
        k = re.match(r"([a-z_]+) = ", line)
        if k and (table, k.group(1)) in changes:
            v = changes.pop((table, k.group(1)))
            line = f'{k.group(1)} = ' + (f'"{v}"' if isinstance(v, str) else str(v))
        out.append(line)
    if changes:
        raise Failure(f"kiwi-agent --print-default-config has no {sorted(changes)}")
    return "\n".join(out) + "\n"


class LoopFs:
    """An ext4 filesystem of its own on a loop device, mounted at `mountpoint`: what it sends to
    its device is what one agent wrote (device bytes: data, journal and metadata)."""

    def __init__(self, image, mountpoint, size_bytes, options=None):
        self.image, self.mountpoint, self.dev = image, mountpoint, None
        with open(image, "wb") as f:
            f.truncate(size_bytes)  # sparse
        # 4 KiB blocks, as on an SD card of any size (a small image would get 1 KiB ones); inode
        # tables and journal written now: no ext4lazyinit writing in the window.
        subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-E",
                        "lazy_itable_init=0,lazy_journal_init=0", image], check=True)
        self.dev = subprocess.run(["losetup", "--find", "--show", image], check=True,
                                  capture_output=True, text=True).stdout.strip()
        os.makedirs(mountpoint, exist_ok=True)
        try:
            subprocess.run(["mount"] + (["-o", options] if options else []) + [self.dev, mountpoint],
                           check=True)
        except subprocess.CalledProcessError:
            self.close()
            raise

    def written(self):
        """Bytes sent to the device so far, after the filesystem's dirty data and journal (sync -f:
        syncfs(), which Python's os module lacks)."""
        subprocess.run(["sync", "-f", self.mountpoint], check=True)
        with open(f"/sys/block/{os.path.basename(self.dev)}/stat") as f:
            return int(f.read().split()[6]) * 512

    def close(self):
        if self.dev and subprocess.run(["umount", self.mountpoint], check=False).returncode == 0:
            subprocess.run(["losetup", "-d", self.dev], check=False)
            self.dev = None


def device_counting():
    """Whether loop devices can be made here (root, losetup, mkfs.ext4)."""
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "mount"))
