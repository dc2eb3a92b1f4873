#!/usr/bin/python3
"""kiwi-agent fault and hostile-input campaign (issue 16): every case against the real binary.

Each case starts its own agent(s) on 127.0.0.1 (port 0: the log says which), each in a temp data
directory of its own, is bounded in time and count, stops every process it started by its PID, and
gives one line of the table: the case, what was done, the measured figures, the goal, pass/fail.

Cases (--case NAME runs one; may be given more than once):
  kill9       kill -9 at random moments (20; --quick 5), a restart after each on the same data
              dir: PRAGMA quick_check, and the seconds of samples lost vs the commit interval
  diskfull    a tmpfs as the data dir, filled while the agent runs, then freed: the agent lives,
              the queue is committed, no sample lost; then filled again and SIGTERM: the log says
              how many samples are lost (needs root for the mount; skipped otherwise)
  corrupt     one line per damaged or foreign database file (a corrupt page, truncated, not
              SQLite, empty, a foreign SQLite file, a newer schema, -shm without -wal, a garbage
              -wal): corrupt -> moved aside as kiwi.db.corrupt-<time> and a new history; foreign
              -> refused and byte-identical
  slowloris   300 connections sending their header a byte a second, never finishing (60 s;
              --quick 15 s), while a client polls /api/current 10 times a second: success rate
              and p99 against the same poll with no attack
  idle        1,000 idle keep-alive connections held open (30 s; --quick 10 s): the same poll, and
              the request rate of one keep-alive client, against no attack
  malformed   the 45 requests of tests/faults/malformed-http.txt: no crash, no 5xx unless listed,
              every error body JSON
  traversal   the 34 paths of tests/faults/traversal-paths.txt: nothing outside the dashboard's
              files served
  sensors     one line per sensor fault on a copy of tests/fixtures/rpi4: a FIFO as
              proc/loadavg, /dev/zero as proc/loadavg, a 100 MB sparse thermal_zone0/temp, binary
              garbage as proc/meminfo: the agent answers within 5 s, SIGTERM exits promptly, log
              and snapshot stay small, RSS bounded
  rss         not a case of its own: the agent's VmRSS before, at the peak during and after each
              HTTP attack above, summed up in one line

Usage: tools/faults/faults.py --agent-bin PATH --plugin-dir DIR [--quick] [--case NAME]...
                              [--doc FILE] [--command TEXT] [--keep]
(tools/faults.sh finds the build and passes these.) Exit status: 0 when every line passed, 1 when
one failed, 2 on a usage error or when the campaign could not run.
Only the Python 3 standard library; Linux only; everything listens on 127.0.0.1.
"""

import argparse
import datetime
import hashlib
import http.client
import json
import multiprocessing
import os
import random
import re
import resource
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The agent under test, processes and HTTP: tools/bench/benchlib.py, shared with the benchmark.
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
from benchlib import (Agent, Failure, Processes, agent_config, loopback_get,  # noqa: E402
                      poll as wait_for, tick_log_records, varint)

CORPUS_DIR = os.path.join(ROOT, "tests", "faults")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CASES = ["kill9", "diskfull", "corrupt", "slowloris", "idle", "malformed", "traversal", "sensors",
         "rss"]
HTTP_CASES = ("slowloris", "idle", "malformed", "traversal")
# The agent's defaults the HTTP attacks wait out before RSS "after": a connection left idle is
# closed after the keep-alive timeout, and freed heap goes back to the kernel within 10 s
# (StoreCadence::append calls malloc_trim every 10 s of ticks).
KEEPALIVE_S = 5
TRIM_EVERY_S = 10


def say(msg):
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# Every process the campaign starts, stopped by its PID (stop_all after each case and on exit).
PROCS = Processes(tempfile.gettempdir())


def file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def mib(kib):
    return f"{kib / 1024:.1f} MiB" if kib is not None else "?"


def human_bytes(n):
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def new_agent(ctx, workdir, name, data_dir=None, interval="1s", commit_interval=None,
              snapshot_path="", procfs=None, sysfs=None, extra_http="", limit_as=None):
    """One kiwi-agent with its own config in `workdir` (its working directory too), not started
    yet; its output goes to `<name>.log` there."""
    data_dir = data_dir or os.path.join(workdir, "data")
    config = os.path.join(workdir, f"{name}.toml")
    roots = {k: v for k, v in (("procfs", procfs), ("sysfs", sysfs)) if v}
    collector = {"interval": interval}
    if commit_interval:
        collector["commit_interval"] = commit_interval
    with open(config, "w") as f:
        f.write(agent_config(data_dir, ctx.plugin_dir, snapshot_path=snapshot_path, agent=roots,
                             http=extra_http, collector=collector))
    return Agent(PROCS, ctx.agent_bin, config, name, data_dir=data_dir, cwd=workdir,
                 limit_as=limit_as)


def health(agent):
    """(status, parsed body or None)."""
    st, body, _ = agent.get("/api/health")
    try:
        return st, json.loads(body)
    except ValueError:
        return st, None


def sequence(agent):
    st, body, _ = agent.get("/api/current")
    return json.loads(body).get("sequence", 0) if st == 200 else 0


def db_query(path, sql):
    con = sqlite3.connect(path, timeout=5)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def db_ticks(path):
    """The timestamps (ms) of every tick in the history file and its tick log: the tick rows an
    agent before schema version 3 wrote, and the ticks of each block
    (agent/src/store/sample_codec.hpp: a block is varint(ts delta), varint(size), tick blob, ...;
    or, format 3, 0x03, varint(ticks), the ticks' ts deltas, then the values by series; deflated
    behind 0x02 and varint(size))."""
    out = [ts for (ts,) in db_query(path, "SELECT ts FROM samples")]
    blocks = db_query(path, "SELECT ts, data FROM blocks") + [
        (ts, block) for ts, _, _, block, intact in tick_log_records(path) if intact]
    for ts, data in blocks:
        if data[:1] == b"\x02":
            _, i = varint(data, 1)
            data = zlib.decompress(data[i:], -15)
        if data[:1] == b"\x03":
            n, i = varint(data, 1)
            for _ in range(n):
                delta, i = varint(data, i)
                ts += delta
                out.append(ts)
            continue
        i = 0
        while i < len(data):
            delta, i = varint(data, i)
            size, i = varint(data, i)
            ts += delta
            out.append(ts)
            i += size
    return sorted(out)


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))]


# ----------------------------------------------------------------------------------------------
# the table


class Row:
    def __init__(self, case, done, measured, goal, ok, note=None):
        self.case, self.done, self.measured, self.goal, self.ok = case, done, measured, goal, ok
        self.note = note

    @property
    def verdict(self):
        return {True: "pass", False: "**FAIL**", None: "skipped"}[self.ok]


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(rows):
    out = ["| case | what was done | measured | goal | result |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {cell(r.case)} | {cell(r.done)} | {cell(r.measured)} | {cell(r.goal)} | "
                   f"{r.verdict} |")
    return "\n".join(out)


class Context:
    def __init__(self, args):
        self.agent_bin = os.path.abspath(args.agent_bin)
        self.plugin_dir = os.path.abspath(args.plugin_dir)
        self.quick = args.quick
        self.keep = args.keep
        self.year_db = os.path.abspath(args.year_db) if args.year_db else None
        self.base = tempfile.mkdtemp(prefix="kiwi-faults.")
        self.rows = []
        self.rss = []  # (case, before, peak, after) in KiB
        self.notes = []

    def dir(self, name):
        d = tempfile.mkdtemp(prefix=name + ".", dir=self.base)
        return d

    def add(self, row):
        self.rows.append(row)
        say(f"{row.case}: {row.verdict}: {row.measured}")


# ----------------------------------------------------------------------------------------------
# kill -9


def case_kill9(ctx):
    n = 5 if ctx.quick else 20
    commit = 2.0 if ctx.quick else 10.0
    interval = 1.0
    work = ctx.dir("kill9")
    # An explicit interval (not the default, 5 minutes): a kill lands between commits of this run.
    agent = new_agent(ctx, work, "agent", commit_interval=f"{commit:.0f}s")
    checks, lost, rows_lost, restart_failures = [], [], [], 0
    rng = random.Random(16)
    for i in range(n):
        t = agent.start(wait=10)
        if t is None:
            restart_failures += 1
            say(f"kill9: start {i + 1} did not listen: {agent.log_text(agent.log_offset)[-300:]}")
            if agent.alive():
                agent.kill9()
            continue
        run_start = time.time()
        time.sleep(rng.uniform(0.3, commit * 1.3))
        t_kill = time.time()
        agent.kill9()
        try:
            qc = db_query(agent.db, "PRAGMA quick_check")[0][0]
            last = max(db_ticks(agent.db), default=None)
        except sqlite3.Error as e:
            qc, last = f"error: {e}", None
        checks.append(qc)
        committed_until = max(last / 1000.0 if last else 0.0, run_start)
        lost.append(t_kill - committed_until)
        rows_lost.append(int((t_kill - committed_until) // interval))
    # The restart after the last kill.
    t = agent.start(wait=10)
    final = None
    if t is not None:
        final = wait_for(lambda: health(agent)[0] == 200, 10)
    if agent.alive():
        agent.stop()
    ok_checks = sum(1 for c in checks if c == "ok")
    worst = max(lost) if lost else float("nan")
    goal = commit + interval
    passed = (ok_checks == n and restart_failures == 0 and bool(final) and worst <= goal)
    ctx.add(Row("kill9", f"kill -9 x{n} at random moments (0.3-{commit * 1.3:.0f} s after start), "
                f"restart after each; commit_interval {commit:.0f} s, interval 1 s",
                f"quick_check ok {ok_checks}/{n}; lost max {worst:.1f} s (mean "
                f"{sum(lost) / max(1, len(lost)):.1f} s), max {max(rows_lost) if rows_lost else 0} "
                f"samples; restarts failed {restart_failures}; healthy after the last: "
                f"{'yes' if final else 'no'}",
                f"quick_check ok every time; lost ≤ commit_interval ({commit:.0f} s) + the tick "
                f"in flight", passed))


# ----------------------------------------------------------------------------------------------
# disk full


def fill(path):
    """Writes `path` until the filesystem is full; returns the bytes written."""
    n = 0
    chunk = b"\0" * 4096
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                n += f.write(chunk)
            except OSError:
                break
        try:
            os.fsync(f.fileno())
        except OSError:
            pass
    return n


def ticks_in(a_ms, b_ms, step_ms):
    first = -(-a_ms // step_ms) * step_ms
    return 0 if b_ms < first else (b_ms - first) // step_ms + 1


def case_diskfull(ctx):
    done = "tmpfs (4 MiB) as data dir, interval 200 ms, commit 1 s: filled, held, freed; filled again, SIGTERM"
    if os.geteuid() != 0:
        ctx.add(Row("diskfull", done, "not run: mounting a tmpfs needs root", "-", None))
        return
    work = ctx.dir("diskfull")
    mnt = os.path.join(work, "tiny")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt]).returncode != 0:
        ctx.add(Row("diskfull", done, "not run: mount -t tmpfs failed", "-", None))
        return
    hold = 5 if ctx.quick else 10
    figures, passed = [], True
    try:
        agent = new_agent(ctx, work, "agent", data_dir=os.path.join(mnt, "data"), interval="200ms",
                      commit_interval="1s")
        if agent.start(10) is None:
            raise Failure("the agent did not start: " + agent.log_text()[-300:])
        time.sleep(2)  # a few commits (the agent holds the file exclusively: read it after)
        filler = os.path.join(mnt, "filler")
        fill_ms = int(time.time() * 1000)
        fill(filler)
        failing = wait_for(lambda: health(agent)[0] == 503, 15)
        current_ok, current_n = 0, 0
        t_end = time.monotonic() + hold
        while time.monotonic() < t_end:
            current_n += 1
            try:
                current_ok += agent.get("/api/current")[0] == 200
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.2)
        alive_full = agent.alive()
        os.unlink(filler)
        free_ms = int(time.time() * 1000)
        t_free = time.monotonic()
        recovered = wait_for(lambda: health(agent)[0] == 200, 20)
        recovery_s = time.monotonic() - t_free
        time.sleep(1.5)
        # Full again, then SIGTERM.
        log_before = agent.log_bytes()
        fill(filler)
        fill2_ms = int(time.time() * 1000)
        wait_for(lambda: health(agent)[0] == 503, 15)
        time.sleep(1.0)
        stop_ms = int(time.time() * 1000)
        rc, secs, killed = agent.stop(10)
        os.unlink(filler)
        tail = agent.log_text(log_before)
        # Samples over the first full period: every tick between filling and freeing is in the db.
        expected = ticks_in(fill_ms + 200, free_ms - 200, 200)
        ticks = db_ticks(agent.db)
        present = sum(1 for t in ticks if fill_ms + 200 <= t <= free_ms - 200)
        lost_hold = expected - present
        figures.append(f"health 503 while full: {'yes' if failing else 'no'}; "
                       f"/api/current 200 {current_ok}/{current_n}; alive: "
                       f"{'yes' if alive_full else 'no'}; recovered (health 200) "
                       + (f"{recovery_s:.1f} s after freeing" if recovered else "never")
                       + f"; samples lost over {hold} s full: {lost_hold} of {expected}")
        passed &= bool(failing) and alive_full and bool(recovered) and lost_hold == 0 \
            and current_ok == current_n
        expected2 = ticks_in(fill2_ms + 200, stop_ms - 200, 200)
        present2 = sum(1 for t in db_ticks(agent.db) if fill2_ms + 200 <= t <= stop_ms - 200)
        lost_term = expected2 - present2
        said = [ln for ln in tail.splitlines() if re.search(r"\blost\b|discard", ln)]
        m = re.search(r"(\d+) samples?", said[-1]) if said else None
        figures.append(f"SIGTERM while full: exit {rc} in {secs:.1f} s"
                       f"{' (SIGKILL)' if killed else ''}, {lost_term} samples of the last "
                       f"{(stop_ms - fill2_ms) / 1000:.0f} s not written; log says: "
                       + (f"\"{said[-1].split(': ', 1)[-1][:120]}\"" if said else "nothing"))
        passed &= (not killed) and bool(m)
    except Failure as e:
        figures.append(f"could not run: {e}")
        passed = False
    finally:
        PROCS.stop_all(5.0)
        subprocess.run(["umount", "-l", mnt])
    ctx.add(Row("diskfull", done, "; ".join(figures),
                "survives, serves, health 503 while full; queue committed after space returns, "
                "0 samples lost; SIGTERM while full: the log says how many samples are lost",
                passed))


# ----------------------------------------------------------------------------------------------
# corrupt and foreign databases


def make_base_db(ctx, min_bytes=24 * 1024):
    """A database of ours, closed cleanly, at least `min_bytes` big: past the pages the "corrupt
    page" case overwrites (12-14 KiB). Its size follows the series and alert events the agent
    wrote (the ticks are in the tick log), so it is not asked for more than that needs: 32 KiB
    took a loaded machine more than six runs (31 KiB)."""
    work = ctx.dir("corrupt-base")
    agent = new_agent(ctx, work, "agent", interval="100ms", commit_interval="500ms")
    # The WAL holds every version of the pages a commit rewrites, the file only the last of each
    # (blocks are small: a commit adds about one page), so the file is measured after each clean
    # stop, and the agent runs again on it until it is big enough.
    for _ in range(6):
        if agent.start(10) is None:
            raise Failure("the agent did not start: " + agent.log_text()[-300:])
        wait_for(lambda: file_size(agent.db) + file_size(agent.db + "-wal") >= 2 * min_bytes,
                 25, 0.2)
        agent.stop()
        if file_size(agent.db) >= min_bytes:
            return agent.db
    raise Failure(f"base database only {file_size(agent.db)} bytes")


def with_wal_left(ctx, base, data):
    """Copies `base` into `data`, runs an agent on it and kills it -9: -wal and -shm stay."""
    work = os.path.dirname(data)
    shutil.copy(base, os.path.join(data, "kiwi.db"))
    agent = new_agent(ctx, work, "prep", data_dir=data, interval="100ms", commit_interval="200ms")
    if agent.start(10) is None:
        raise Failure("the agent did not start: " + agent.log_text()[-300:])
    wait_for(lambda: file_size(os.path.join(data, "kiwi.db-wal")) > 4096, 10)
    time.sleep(0.5)
    agent.kill9()


def corrupt_cases(ctx, base):
    def page(data):
        shutil.copy(base, os.path.join(data, "kiwi.db"))
        with open(os.path.join(data, "kiwi.db"), "r+b") as f:
            f.seek(12 * 1024)
            f.write(random.Random(12).randbytes(2048))
        return "dd if=/dev/urandom of=kiwi.db bs=1024 seek=12 count=2 conv=notrunc"

    def truncated(data):
        shutil.copy(base, os.path.join(data, "kiwi.db"))
        size = file_size(os.path.join(data, "kiwi.db"))
        os.truncate(os.path.join(data, "kiwi.db"), size // 2 + 100)
        return f"kiwi.db cut from {size} to {size // 2 + 100} bytes"

    def not_sqlite(data):
        with open(os.path.join(data, "kiwi.db"), "wb") as f:
            f.write(b"x" * 8192)
        return "kiwi.db is 8 KiB of 'x'"

    def empty(data):
        open(os.path.join(data, "kiwi.db"), "wb").close()
        return "kiwi.db is an empty file"

    def foreign(data):
        con = sqlite3.connect(os.path.join(data, "kiwi.db"))
        con.execute("CREATE TABLE foo(a INTEGER, b TEXT)")
        con.executemany("INSERT INTO foo VALUES(?, ?)", [(i, f"row {i}") for i in range(100)])
        con.commit()
        con.close()
        return "kiwi.db is another program's SQLite file (a table foo, 100 rows)"

    def newer(data):
        shutil.copy(base, os.path.join(data, "kiwi.db"))
        con = sqlite3.connect(os.path.join(data, "kiwi.db"))
        con.execute("PRAGMA user_version=99")
        con.commit()
        con.close()
        return "our database with user_version 99 (a newer agent's)"

    def shm_no_wal(data):
        with_wal_left(ctx, base, data)
        os.unlink(os.path.join(data, "kiwi.db-wal"))
        return "kill -9 left -wal and -shm; -wal deleted, -shm kept"

    def garbage_wal(data):
        with_wal_left(ctx, base, data)
        wal = os.path.join(data, "kiwi.db-wal")
        size = file_size(wal)
        with open(wal, "r+b") as f:
            f.seek(32)
            f.write(random.Random(7).randbytes(max(0, size - 32)))
        return "kill -9 left -wal and -shm; -wal overwritten with random bytes after its header"

    def year_page(data):
        db = os.path.join(data, "kiwi.db")
        shutil.copy(ctx.year_db, db)
        pages = file_size(db) // 1024
        with open(db, "r+b") as f:
            f.seek(pages // 2 * 1024)
            f.write(random.Random(12).randbytes(2048))
        return (f"a year of history ({file_size(db) / 1e6:.0f} MB, kiwi-bench-year): "
                f"dd if=/dev/urandom of=kiwi.db bs=1024 seek={pages // 2} count=2 conv=notrunc")

    def tick_log(data):
        shutil.copy(base, os.path.join(data, "kiwi.db"))
        ticks = os.path.join(data, "kiwi.db-ticks")
        if os.path.isdir(base + "-ticks"):
            shutil.copytree(base + "-ticks", ticks)
        os.makedirs(ticks, exist_ok=True)
        # The file the agent appends to first: this hour's (the base's, or one of junk).
        hour = os.path.join(ticks, f"{int(time.time()) // 3600 * 3600}.ticks")
        with open(hour, "r+b" if os.path.exists(hour) else "wb") as f:
            f.write(b"garbage!" * 8)
        return ("kiwi.db-ticks/<this hour>.ticks: its first record's header overwritten with 64 "
                "bytes of 'garbage!'")

    # (name, prepare, expected outcome): "aside" = moved aside and a new history; "refuse" =
    # refused, the file byte-identical; "open" = opened as it is, commits work; "ticks" = the
    # tick log's file moved aside.
    year = [("corrupt page, a year of history", year_page, "aside")] if ctx.year_db else []
    return year + [("corrupt page", page, "aside"), ("truncated file", truncated, "aside"),
            ("not SQLite", not_sqlite, "aside"), ("empty file", empty, "open"),
            ("foreign SQLite db", foreign, "refuse"), ("newer schema", newer, "refuse"),
            ("-shm without -wal", shm_no_wal, "open"), ("garbage -wal", garbage_wal, "open"),
            ("tick log file damaged", tick_log, "ticks")]


GOALS = {
    "aside": "moved aside as kiwi.db.corrupt-<time> (bytes kept), new db, commits work, said in "
             "the log and /api/health",
    "refuse": "refused (not started, or health says why), file byte-identical, log names it",
    "open": "starts, health 200, commits work, quick_check ok",
    "ticks": "the file moved aside as <hour>.ticks.corrupt-<time>, commits work, said in the log "
             "and /api/health",
}


def case_corrupt(ctx):
    try:
        base = make_base_db(ctx)
    except Failure as e:
        ctx.add(Row("corrupt", "a base database for the corrupt cases", f"could not run: {e}", "-",
                    False))
        return
    for name, prepare, expect in corrupt_cases(ctx, base):
        work = ctx.dir("corrupt")
        data = os.path.join(work, "data")
        os.makedirs(data)
        try:
            done = prepare(data)
        except Failure as e:
            ctx.add(Row(f"corrupt: {name}", name, f"could not prepare: {e}", GOALS[expect], False))
            continue
        db = os.path.join(data, "kiwi.db")
        before = sha256(db)
        agent = new_agent(ctx, work, "agent", data_dir=data, interval="200ms", commit_interval="500ms")
        listened = agent.start(8)
        figures, ok = [], False
        hst, hbody, errors, seq0, seq1 = None, None, None, None, None
        if listened is not None:
            time.sleep(3)
            if expect == "aside":  # quick_check reads every page: a year's file takes longer
                wait_for(lambda: any(f.startswith("kiwi.db.corrupt-") for f in os.listdir(data)),
                         30)
            try:
                hst, hbody = health(agent)
                errors = (hbody or {}).get("store_write_errors")
            except (OSError, http.client.HTTPException):
                pass
            rc, _, _ = agent.stop(10)
            figures.append(f"started ({listened:.2f} s); health {hst}"
                           + (f", store_write_errors {errors}" if errors is not None else "")
                           + f"; exit {rc} on SIGTERM")
        else:
            if agent.alive():
                agent.stop(5)
                figures.append("did not listen in 8 s")
            else:
                figures.append(f"exit {agent.proc.returncode} at start")
        log = agent.log_text()
        aside = sorted(f for f in os.listdir(data) if f.startswith("kiwi.db.corrupt-"))
        aside_same = any(sha256(os.path.join(data, f)) == before for f in aside)
        still = os.path.exists(db) and sha256(db) == before
        interesting = [re.split(r"kiwi-agent: (?:error|warn): ", ln, 1)[-1]
                       for ln in log.splitlines() if re.search(r": (error|warn): ", ln)]
        said = interesting[0].replace(data + "/", "")[:160] if interesting else "nothing"
        qc = None
        if os.path.exists(db) and not still:
            try:
                qc = db_query(db, "PRAGMA quick_check")[0][0]
            except sqlite3.Error as e:
                qc = f"error: {e}"
        health_text = json.dumps(hbody) if hbody else ""
        if expect == "aside":
            ok = (listened is not None and aside_same and errors == 0 and
                  re.search(r"corrupt", health_text, re.I) is not None and "corrupt" in log)
            figures.append(f"moved aside: {', '.join(aside) if aside else 'no'}"
                           + (" (same bytes)" if aside_same else ""))
        elif expect == "ticks":
            ticks = os.path.join(data, "kiwi.db-ticks")
            moved = sorted(f for f in os.listdir(ticks) if ".ticks.corrupt-" in f)
            ok = (listened is not None and hst is not None and errors == 0 and bool(moved) and
                  ".ticks.corrupt-" in health_text and ".ticks.corrupt-" in log)
            figures.append(f"moved aside: {', '.join(moved) if moved else 'no'}")
        elif expect == "refuse":
            refused = listened is None or (hst is not None and hst != 200)
            ok = still and refused and db in log
            figures.append(f"file {'byte-identical' if still else 'CHANGED'}; "
                           f"{'refused' if refused else 'adopted'}")
        else:
            ok = listened is not None and hst == 200 and errors == 0 and (qc in (None, "ok"))
            if qc:
                figures.append(f"quick_check {qc}")
        figures.append(f"log: \"{said}\"")
        ctx.add(Row(f"corrupt: {name}", done, "; ".join(figures), GOALS[expect], ok))


# ----------------------------------------------------------------------------------------------
# HTTP attacks: a poller, slowloris, idle keep-alive


class Poller(threading.Thread):
    """GET /api/current `rate` times a second, a new connection each time, 2 s timeout."""

    def __init__(self, port, seconds, rate=10):
        super().__init__(daemon=True)
        self.port, self.seconds, self.rate = port, seconds, rate
        self.ok, self.failed, self.latencies, self.errors = 0, 0, [], {}

    def run(self):
        step = 1.0 / self.rate
        t_end = time.monotonic() + self.seconds
        nxt = time.monotonic()
        while nxt < t_end:
            try:
                st, _, secs = loopback_get(self.port, "/api/current", 2.0)
                if st == 200:
                    self.ok += 1
                    self.latencies.append(secs)
                else:
                    self.failed += 1
                    self.errors[str(st)] = self.errors.get(str(st), 0) + 1
            except (OSError, http.client.HTTPException) as e:
                self.failed += 1
                k = type(e).__name__
                self.errors[k] = self.errors.get(k, 0) + 1
            nxt = max(nxt + step, time.monotonic())
            time.sleep(max(0.0, nxt - time.monotonic()))

    def summary(self):
        n = self.ok + self.failed
        rate = 100.0 * self.ok / n if n else 0.0
        p99 = percentile(self.latencies, 99)
        return rate, p99, n

    def text(self):
        rate, p99, n = self.summary()
        err = ", ".join(f"{k} x{v}" for k, v in sorted(self.errors.items()))
        return (f"{rate:.1f} % of {n} ok, p99 {p99 * 1000:.1f} ms" if p99 is not None
                else f"{rate:.1f} % of {n} ok") + (f" (failures: {err})" if err else "")


def keepalive_rate(port, seconds):
    """Requests per second of one keep-alive client, back to back; None when it cannot connect."""
    n = 0
    c = None
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        try:
            if c is None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            st, _, _ = loopback_get(port, "/api/current", 2.0, conn=c)
            n += st == 200
        except (OSError, http.client.HTTPException):
            if c:
                c.close()
            c = None
            time.sleep(0.05)
    if c:
        c.close()
    return n / seconds


class Swarm(multiprocessing.get_context("fork").Process):
    """`count` connections to `port`, kept at that count for `seconds`: each sends `opening`, then
    `drip` one byte every `period` seconds (slowloris), or nothing more (idle keep-alive). A
    connection the server closes is opened again at the next round.

    A process of its own, not a thread: reopening hundreds of connections a second keeps a thread
    busy, and the poller and the keep-alive client beside it in this process would then measure
    Python's GIL hand-over (a few ms a request) instead of the agent. Its counters are shared
    memory the parent reads."""

    COUNTERS = ("connects", "closed_by_server", "answered", "connect_errors", "open_now")

    def __init__(self, port, count, seconds, opening, drip=b"", period=1.0):
        super().__init__(daemon=True)
        self.port, self.count, self.seconds = port, count, seconds
        self.opening, self.drip, self.period = opening, drip, period
        self._counters = {k: multiprocessing.Value("q", 0, lock=False) for k in self.COUNTERS}
        self.stop_flag = multiprocessing.Event()

    def __getattr__(self, name):
        counters = self.__dict__.get("_counters", {})
        if name in counters:
            return counters[name].value
        raise AttributeError(name)

    def _add(self, name, n=1):
        self._counters[name].value += n

    def _open(self, sel):
        s = socket.socket()
        s.settimeout(1.0)
        try:
            s.connect(("127.0.0.1", self.port))
            s.sendall(self.opening)
        except OSError:
            s.close()
            self._add("connect_errors")
            return None
        s.setblocking(False)
        self._add("connects")
        sel.register(s, selectors.EVENT_READ, {"pos": 0})
        return s

    def run(self):
        sel = selectors.DefaultSelector()
        socks = set()
        t_end = time.monotonic() + self.seconds
        try:
            while time.monotonic() < t_end and not self.stop_flag.is_set():
                while len(socks) < self.count and time.monotonic() < t_end:
                    s = self._open(sel)
                    if s is None:
                        break
                    socks.add(s)
                round_end = time.monotonic() + self.period
                if self.drip:
                    for s in list(socks):
                        data = sel.get_key(s).data
                        try:
                            s.send(self.drip[data["pos"] % len(self.drip):][:1])
                            data["pos"] += 1
                        except OSError:
                            pass
                while True:
                    left = round_end - time.monotonic()
                    if left <= 0:
                        break
                    for key, _ in sel.select(left):
                        s = key.fileobj
                        try:
                            chunk = s.recv(65536)
                        except BlockingIOError:
                            continue
                        except OSError:
                            chunk = b""
                        if chunk:
                            self._add("answered")  # a response (idle: the one we asked for)
                            continue
                        self._add("closed_by_server")
                        sel.unregister(s)
                        s.close()
                        socks.discard(s)
                self._counters["open_now"].value = len(socks)
        finally:
            for s in socks:
                sel.unregister(s)
                s.close()
            sel.close()


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n)) if hard != resource.RLIM_INFINITY else max(soft, n)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def http_agent(ctx, name, extra_http=""):
    work = ctx.dir(name)
    agent = new_agent(ctx, work, "agent", extra_http=extra_http)
    if agent.start(10) is None:
        raise Failure("the agent did not start: " + agent.log_text()[-300:])
    if not wait_for(lambda: agent.get("/api/current")[0] == 200, 10):
        raise Failure("no 200 from /api/current")
    return agent


def attack(ctx, name, swarm_args, seconds, baseline_seconds):
    agent = http_agent(ctx, name)
    base = Poller(agent.port, baseline_seconds)
    base.start()
    base.join()
    base_rate = keepalive_rate(agent.port, 2.0)
    rss_before = agent.rss()
    swarm = Swarm(agent.port, seconds=seconds + 4, **swarm_args)
    swarm.start()
    time.sleep(3)  # the swarm is up
    poll = Poller(agent.port, seconds - 3)
    poll.start()
    peak = rss_before or 0
    alive = True
    while poll.is_alive():
        r = agent.rss()
        if r is None:
            alive = False
        peak = max(peak, r or 0)
        poll.join(0.5)
    rate_during = keepalive_rate(agent.port, 2.0)
    held = swarm.open_now
    swarm.stop_flag.set()
    swarm.join()
    # Past the keep-alive (every connection of the swarm has gone), then past the next heap trim
    # (every 10 s).
    time.sleep(KEEPALIVE_S + 1 + TRIM_EVERY_S)
    rss_after = agent.rss()
    alive = alive and agent.alive()
    ctx.rss.append((name, rss_before, peak, rss_after))
    agent.stop()
    return agent, base, base_rate, poll, rate_during, swarm, held, alive


def case_slowloris(ctx):
    seconds = 15 if ctx.quick else 60
    raise_nofile(4096)
    opening = b"GET /api/current HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    agent, base, base_rate, poll, _, swarm, held, alive = attack(
        ctx, "slowloris", dict(count=300, opening=opening, drip=b"X-Slow: " + b"a" * 4096,
                               period=1.0), seconds, 5 if ctx.quick else 15)
    rate, p99, _ = poll.summary()
    ok = alive and rate >= 99.0 and p99 is not None and p99 < 0.2
    ctx.add(Row("slowloris", f"300 connections sending a header a byte a second, never finishing, "
                f"{seconds} s; a client polls /api/current 10/s (new connection each)",
                f"no attack: {base.text()}; under attack: {poll.text()}; swarm: "
                f"{swarm.connects} connects, {swarm.closed_by_server} closed by the agent, "
                f"{held} open at the end; agent alive: {'yes' if alive else 'no'}",
                "≥ 99 % ok, p99 < 200 ms", ok))
    if not ok:
        # The control: the same attack with more slots than attackers tells the slot limit from
        # anything else (the MHD timeout, the thread pool).
        control = None if ctx.quick else slowloris_control(ctx, opening)
        ctx.notes.append(slowloris_note(swarm, held, control))


def slowloris_control(ctx, opening):
    seconds = 10 if ctx.quick else 20
    agent = http_agent(ctx, "slowloris-control", "max_connections = 1024")
    swarm = Swarm(agent.port, 300, seconds + 4, opening, b"X-Slow: " + b"a" * 4096, 1.0)
    swarm.start()
    time.sleep(3)
    poll = Poller(agent.port, seconds - 3)
    poll.start()
    poll.join()
    swarm.stop_flag.set()
    swarm.join()
    agent.stop()
    return poll.text()


def slowloris_note(swarm, held, control):
    return ("slowloris: the agent takes at most `[http] max_connections` (256) connections, and "
            "libmicrohttpd 0.9.75 restarts a connection's timeout on every byte it reads (no "
            "deadline for a whole header block), so a header trickling in keeps its slot. At "
            "the limit the acceptor (agent/src/http/acceptor.cpp, `Acceptor::place`, `evict`) "
            "closes the connection that has gone longest without finishing a request for the "
            "newcomer, and holds a newcomer for up to 1 s when there is none to close. "
            f"{held} of the swarm's connections were open at the end, "
            f"{swarm.closed_by_server} closed by the agent."
            + (" The control run, the same 300 connections against `max_connections = 1024`: "
               f"the poller got {control}; if that passes, the slot policy is the cause (not the "
               "MHD connection timeout or the worker threads)." if control else
               " (The full run adds a control with `max_connections = 1024`.)"))


def case_idle(ctx):
    seconds = 10 if ctx.quick else 30
    limit = raise_nofile(4096)
    opening = b"GET /api/current HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    agent, base, base_rate, poll, rate_during, swarm, held, alive = attack(
        ctx, "idle", dict(count=1000, opening=opening, period=1.0), seconds,
        5 if ctx.quick else 10)
    rate, p99, _ = poll.summary()
    brate, bp99, _ = base.summary()
    ok = alive and rate >= 99.0 and p99 is not None and p99 < 0.2 and \
        rate_during >= 0.5 * base_rate
    ctx.add(Row("idle", f"1,000 keep-alive connections, one request each, then idle (reopened "
                f"when closed), {seconds} s; ulimit -n {limit}",
                f"poll no attack: {base.text()}; with them: {poll.text()}; one keep-alive "
                f"client: {base_rate:.0f} req/s without, {rate_during:.0f} req/s with; "
                f"{swarm.connects} connects, {swarm.closed_by_server} closed by the agent, "
                f"{held} open at the end; agent alive: {'yes' if alive else 'no'}",
                "poll ≥ 99 % ok, p99 < 200 ms; keep-alive rate ≥ half of without", ok))
    if not ok:
        ctx.notes.append(
            "idle: 1,000 connections against 256 slots. At the limit the acceptor closes the "
            "keep-alive connection idle the longest for a newcomer, and holds a newcomer that "
            "finds none to close (every slot answering, just opened, or evicted and not yet "
            "closed by its worker) for up to 1 s (agent/src/http/acceptor.cpp, Acceptor::place "
            "and hold_); failures named ConnectionResetError/RemoteDisconnected are connections "
            "closed after that wait, a p99 near 1 s is the wait itself. Look at the agent's log "
            "for \"waited 1 s for a slot\".")


# ----------------------------------------------------------------------------------------------
# malformed requests and traversal paths


def unescape(text):
    def rep(m):
        return int(m.group(1)) * m.group(2)

    text = re.sub(r"\{\{(\d+)\*(.*?)\}\}", rep, text)
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            n = text[i + 1]
            if n == "x":
                out.append(int(text[i + 2:i + 4], 16))
                i += 4
                continue
            out += {"r": b"\r", "n": b"\n", "t": b"\t", "\\": b"\\"}.get(n, ("\\" + n).encode())
            i += 2
            continue
        out += c.encode("latin-1")
        i += 1
    return bytes(out)


def load_corpus(name):
    entries = []
    with open(os.path.join(CORPUS_DIR, name), encoding="latin-1") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            entries.append(line)
    return entries


def raw_exchange(port, data, timeout=5.0, quiet=1.0):
    """Sends `data` on a new connection and reads the answer (1xx interim answers skipped).
    After `quiet` s without a byte it half-closes (the server may be waiting for more of the
    request); `timeout` s in all. Returns (status, headers, body, how): status None when there
    was no final answer, `how` "answered", "closed" (by the server) or "hang" (still open)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=quiet)
    buf = b""
    how = "hang"
    half_closed = False
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may close before it has read everything: read what it said
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                if half_closed:
                    continue
                half_closed = True
                try:
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            except OSError:
                how = "closed"
                break
            if not chunk:
                how = "closed"
                break
            buf += chunk
            while re.match(rb"HTTP/\d\.\d 1\d\d ", buf) and b"\r\n\r\n" in buf:
                buf = buf.partition(b"\r\n\r\n")[2]  # an interim answer (100 Continue)
            head, sep, body = buf.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.I)
                if (m and len(body) >= int(m.group(1))) or (not m and head[9:12] in (b"204", b"304")):
                    how = "answered"
                    break
    finally:
        s.close()
    head, _, body = buf.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/\d\.\d (\d{3})", head)
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    if m and "content-length" in headers:
        body = body[:int(headers["content-length"])]
    if m:
        how = "answered"
    return (int(m.group(1)) if m else None), headers, body, how


def json_problem(body):
    """Why an error body is not JSON (None when it is)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid UTF-8"
    try:
        json.loads(text)
    except ValueError:
        if text.startswith("HTTP/1."):
            return "HTML after a repeated header block"
        return "HTML" if "<html" in text else "not JSON"
    return None


def allowed(spec, status):
    for a in spec.split(","):
        if a == "close" and status is None:  # closed without an answer
            return True
        if status is not None and (a == str(status) or (a.endswith("xx") and
                                                          str(status)[0] == a[0])):
            return True
    return False


def case_malformed(ctx):
    corpus = load_corpus("malformed-http.txt")
    agent = http_agent(ctx, "malformed")
    rss_before, peak = agent.rss(), agent.rss() or 0
    bad_status, html, crashed, statuses = [], [], None, {}
    for i, line in enumerate(corpus, 1):
        spec, _, req = line.partition("\t")
        try:
            st, headers, body, how = raw_exchange(agent.port, unescape(req))
        except OSError as e:
            st, headers, body, how = None, {}, b"", "closed"
            if not agent.alive():
                crashed = i
                break
            say(f"malformed #{i}: {e}")
        key = str(st) if st else how
        statuses[key] = statuses.get(key, 0) + 1
        if not allowed(spec, st) or how == "hang":
            bad_status.append(f"#{i} {key} (want {spec})")
        problem = json_problem(body) if st is not None and st >= 400 and body else None
        if problem:
            html.append(f"#{i} {st} {problem}")
        peak = max(peak, agent.rss() or 0)
        if not agent.alive():
            crashed = i
            break
    still = agent.alive() and wait_for(lambda: agent.get("/api/current")[0] == 200, 3)
    ctx.rss.append(("malformed", rss_before, peak, agent.rss()))
    agent.stop()
    ok = crashed is None and bool(still) and not bad_status and not html
    measured = (f"answers: {', '.join(f'{k} x{v}' for k, v in sorted(statuses.items()))}; "
                f"crash: {'at #' + str(crashed) if crashed else 'none'}; unexpected status: "
                f"{', '.join(bad_status) or 'none'}; non-JSON error bodies: "
                f"{len(html)}{' (' + ', '.join(html) + ')' if html else ''}")
    ctx.add(Row("malformed", f"the {len(corpus)} requests of tests/faults/malformed-http.txt, "
                "each on a new connection", measured,
                "no crash, no 5xx unless listed (505 for a bad version), every error body JSON",
                ok))


def case_traversal(ctx):
    corpus = load_corpus("traversal-paths.txt")
    agent = http_agent(ctx, "traversal")
    work = agent.workdir
    token = "kiwi-canary-" + os.urandom(8).hex()
    with open(os.path.join(work, "canary.txt"), "w") as f:
        f.write(token + "\n")
    rss_before, peak = agent.rss(), agent.rss() or 0
    # What a 200 may carry: the dashboard's files, as served on their own paths.
    known = set()
    for path in ["/", "/assets/app.js", "/assets/style.css", "/assets/uPlot.iife.min.js",
                 "/assets/uPlot.min.css", "/assets/README.md"]:
        st, _, body, _ = raw_exchange(agent.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n"
                                                  "Connection: close\r\n\r\n".encode())
        if st == 200:
            known.add(body)
    secrets = [token.encode(), b"root:x:0:", b"[agent]", b"SQLite format 3", b"PATH="]
    leaks, bad, statuses = [], [], {}
    for path in corpus:
        req = b"GET " + path.encode("latin-1") + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        try:
            st, headers, body, how = raw_exchange(agent.port, req)
        except OSError:
            st, body, headers, how = None, b"", {}, "closed"
        key = str(st) if st else how
        statuses[key] = statuses.get(key, 0) + 1
        if any(s in body for s in secrets):
            leaks.append(path)
        elif st == 200 and body not in known and not body.startswith(b'{"version":1'):
            bad.append(f"{path} (200, {len(body)} B not a dashboard file)")
        elif st is not None and st >= 500:
            bad.append(f"{path} ({st})")
        elif st is not None and st >= 400 and body and json_problem(body):
            bad.append(f"{path} ({st}, {json_problem(body)} body)")
        peak = max(peak, agent.rss() or 0)
    alive = agent.alive()
    ctx.rss.append(("traversal", rss_before, peak, agent.rss()))
    agent.stop()
    ok = alive and not leaks and not bad
    ctx.add(Row("traversal", f"the {len(corpus)} paths of tests/faults/traversal-paths.txt; a "
                "canary file in the working directory", f"answers: "
                f"{', '.join(f'{k} x{v}' for k, v in sorted(statuses.items()))}; leaks: "
                f"{', '.join(leaks) or 'none'}; wrong: {', '.join(bad) or 'none'}; alive: "
                f"{'yes' if alive else 'no'}",
                "nothing outside the dashboard's files; 4xx as JSON", ok))


# ----------------------------------------------------------------------------------------------
# sensor faults


def sensor_cases():
    def fifo(tree):
        p = os.path.join(tree, "proc", "loadavg")
        os.unlink(p)
        os.mkfifo(p)
        return "a FIFO (no writer) as proc/loadavg"

    def zero(tree):
        p = os.path.join(tree, "proc", "loadavg")
        os.unlink(p)
        os.symlink("/dev/zero", p)
        return "proc/loadavg -> /dev/zero"

    def sparse(tree):
        p = os.path.join(tree, "sys", "class", "thermal", "thermal_zone0", "temp")
        with open(p, "r+b") as f:
            f.truncate(100 * 1024 * 1024)
        return "sys/class/thermal/thermal_zone0/temp: 100 MB sparse (the value, then zeros)"

    def garbage(tree):
        p = os.path.join(tree, "sys", "class", "thermal", "thermal_zone0", "temp")
        rng = random.Random(3)
        with open(p, "wb") as f:
            f.write(b"4\x1b[31m\xff\xfe\n" + rng.randbytes(4000) + b"\n\x00\r\n")
        return "thermal_zone0/temp: 4 KB of binary garbage (escape codes, NUL, CR, newlines, invalid UTF-8)"

    return [("FIFO loadavg", fifo), ("/dev/zero loadavg", zero), ("100 MB thermal temp", sparse),
            ("binary garbage temp", garbage)]


def case_sensors(ctx):
    run_s = 4 if ctx.quick else 8
    for name, prepare in sensor_cases():
        work = ctx.dir("sensors")
        tree = os.path.join(work, "tree")
        shutil.copytree(os.path.join(FIXTURES, "rpi4"), tree, symlinks=True,
                        ignore=shutil.ignore_patterns("next", "README.md"))
        done = prepare(tree)
        snap = os.path.join(work, "snap", "current.json")
        agent = new_agent(ctx, work, "agent", procfs=os.path.join(tree, "proc"),
                      sysfs=os.path.join(tree, "sys"), snapshot_path=snap,
                      limit_as=4 << 30)
        agent.start(wait=None)
        t0 = time.monotonic()
        first_200 = None
        peak_rss, peak_log, peak_snap, capped = 0, 0, 0, None
        # Watch for run_s seconds: the first 200, RSS, log and snapshot sizes; stop early at caps
        # (1 GiB RSS, 64 MiB of log, 256 MiB of snapshot) to keep the machine safe.
        while time.monotonic() - t0 < run_s:
            if not agent.alive():
                break
            if agent.port is None:
                agent.wait_listening(0.01)
            if first_200 is None and agent.port is not None:
                try:
                    if agent.get("/api/current", 1.0)[0] == 200:
                        first_200 = time.monotonic() - t0
                except (OSError, http.client.HTTPException):
                    pass
            peak_rss = max(peak_rss, agent.rss() or 0)
            peak_log = max(peak_log, agent.log_bytes())
            peak_snap = max(peak_snap, file_size(snap))
            if peak_rss > 1 << 20 or peak_log > 64 << 20 or peak_snap > 256 << 20:
                capped = "RSS" if peak_rss > 1 << 20 else "log" if peak_log > 64 << 20 else "snapshot"
                break
            time.sleep(0.1)
        exited_early = None if agent.alive() else agent.proc.returncode
        if capped:
            agent.stop(0.5, signal.SIGKILL)
            rc, secs, killed = None, None, False
        else:
            rc, secs, killed = agent.stop(5)
        peak_log = max(peak_log, agent.log_bytes())
        peak_snap = max(peak_snap, file_size(snap))
        with open(agent.log_path, "rb") as f:
            log = f.read(1 << 20)  # the first MiB tells
        ctrl = len(re.findall(rb"[\x00-\x08\x0b-\x1f\x7f]", log))
        invalid_utf8 = log.decode("utf-8", "replace").count("\ufffd")
        lines = log.count(b"\n")
        figures = [f"first 200 " + (f"after {first_200:.2f} s" if first_200 is not None
                                     else f"never in {run_s} s")]
        if exited_early is not None:
            figures.append(f"exited by itself with {exited_early}")
        elif capped:
            figures.append(f"stopped with SIGKILL at the {capped} cap")
        else:
            figures.append(f"SIGTERM: exit {rc} in {secs:.1f} s" +
                           (" (did not exit in 5 s: SIGKILL)" if killed else ""))
        figures.append(f"log {human_bytes(peak_log)} ({lines} lines, {ctrl} control bytes, "
                       f"{invalid_utf8} invalid UTF-8 in its first MiB)")
        figures.append(f"snapshot {human_bytes(peak_snap)}; RSS peak {mib(peak_rss)}")
        ok = (first_200 is not None and first_200 <= 5 and exited_early is None and not capped
              and not killed and rc == 0 and secs <= 1 and peak_log <= 64 * 1024 and
              peak_snap <= 256 * 1024 and peak_rss <= 32 * 1024 and ctrl == 0 and
              invalid_utf8 == 0)
        ctx.add(Row(f"sensors: {name}", done + f"; {run_s} s", "; ".join(figures),
                    "200 within 5 s; SIGTERM exit 0 within 1 s; log ≤ 64 KiB, printable UTF-8; "
                    "snapshot ≤ 256 KiB; RSS ≤ 32 MiB", ok))


# ----------------------------------------------------------------------------------------------
# RSS summary


def rss_row(ctx):
    if not ctx.rss:
        return
    parts, ok = [], True
    for name, before, peak, after in ctx.rss:
        parts.append(f"{name} {mib(before)} / {mib(peak)} / {mib(after)}")
        if before is None or after is None or peak > 64 * 1024 or after > before + 2048:
            ok = False
    ctx.add(Row("rss", "VmRSS of the agent before / at the peak during / after each HTTP attack "
                f"(slowloris, idle: {KEEPALIVE_S + 1 + TRIM_EVERY_S} s after, past the "
                "keep-alive timeout and the next heap trim, every 10 s)",
                "; ".join(parts),
                "peak ≤ 64 MiB; after ≤ before + 2 MiB (no growth kept)", ok))


# ----------------------------------------------------------------------------------------------
# the document


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 1048576:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} x {cpu}, {mem}, {os.uname().sysname} {os.uname().release}"


def commit():
    try:
        h = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return h + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def agent_version(ctx):
    try:
        r = subprocess.run([ctx.agent_bin, "--version"], capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


def write_doc(ctx, path, command, started, elapsed):
    passed = sum(1 for r in ctx.rows if r.ok)
    failed = sum(1 for r in ctx.rows if r.ok is False)
    skipped = sum(1 for r in ctx.rows if r.ok is None)
    text = [
        "# kiwi-agent reliability: the fault campaign",
        "",
        "Written by `tools/faults.sh --doc docs/reliability.md` (the program is "
        "`tools/faults/faults.py`; `--help` lists the cases). Every case runs the real agent "
        "binary on 127.0.0.1, in a temp data directory of its own, bounded in time and count; "
        "the corpora are `tests/faults/malformed-http.txt` and `tests/faults/traversal-paths.txt`. "
        "A failed line is a defect still open (issue 16), not a broken run.",
        "",
        "| | |",
        "|---|---|",
        f"| date | {started.strftime('%Y-%m-%d %H:%M UTC')} ({elapsed:.0f} s) |",
        f"| commit | {commit()} |",
        f"| agent | {agent_version(ctx)} |",
        f"| machine | {machine()} |",
        f"| command | `{command}` |",
        f"| result | {passed} passed, {failed} failed, {skipped} skipped |",
        "",
        table(ctx.rows),
        "",
    ]
    if ctx.notes:
        text += ["## Why a goal was missed", ""] + [f"- {n}" for n in ctx.notes] + [""]
    text += [
        "## How to read it",
        "",
        "- kill9: the seconds lost are the time of the kill minus the newest sample in the file "
        "(or the start of that run, when nothing of it was committed); the goal allows the "
        "commit interval and the one tick in flight.",
        "- slowloris and idle: the poller opens a new connection for every request (as `curl` in "
        "a script does), 2 s timeout; p99 is over the answered requests, the failures are named. "
        "The attack runs the whole window, the poller from 3 s into it.",
        "- sensors: the figures are the peaks over the window; a run is stopped early with "
        "SIGKILL when RSS passes 1 GiB, the log 64 MiB or the snapshot 256 MiB, and the agent "
        "runs under a 4 GiB address-space limit, so a runaway cannot hurt the machine.",
        "- This is a shared virtual machine: latencies move with the other load on it.",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(text))


# ----------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description="kiwi-agent fault campaign (see the module doc)")
    ap.add_argument("--agent-bin", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer iterations, shorter durations")
    ap.add_argument("--case", action="append", choices=CASES, help="run only this case")
    ap.add_argument("--doc", help="write the table of the run into this Markdown file")
    ap.add_argument("--command", default=None, help="the command line to record in --doc")
    ap.add_argument("--keep", action="store_true", help="keep the temp directories")
    ap.add_argument("--year-db", help="a kiwi.db holding a year of history (kiwi-bench-year): the "
                    "corrupt case also damages a page in its middle")
    args = ap.parse_args()
    if not os.access(args.agent_bin, os.X_OK):
        print(f"faults: {args.agent_bin}: not an executable", file=sys.stderr)
        return 2
    ctx = Context(args)
    chosen = args.case or [c for c in CASES]
    if "rss" in chosen and not any(c in chosen for c in HTTP_CASES):
        chosen = [c for c in CASES if c in HTTP_CASES] + ["rss"]

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    funcs = {"kill9": case_kill9, "diskfull": case_diskfull, "corrupt": case_corrupt,
             "slowloris": case_slowloris, "idle": case_idle, "malformed": case_malformed,
             "traversal": case_traversal, "sensors": case_sensors}
    try:
        for c in CASES:
            if c not in chosen or c == "rss":
                continue
            say(f"case {c}")
            try:
                funcs[c](ctx)
            except Failure as e:
                ctx.add(Row(c, "-", f"could not run: {e}", "-", False))
            finally:
                PROCS.stop_all(5.0)
        if "rss" in chosen:
            rss_row(ctx)
    except KeyboardInterrupt:
        say("interrupted")
        PROCS.stop_all(5.0)
        return 130
    finally:
        PROCS.stop_all(5.0)
        if not ctx.keep:
            shutil.rmtree(ctx.base, ignore_errors=True)
        else:
            say(f"kept {ctx.base}")
    elapsed = time.monotonic() - t0
    print(table(ctx.rows))
    for n in ctx.notes:
        print(f"\n- {n}")
    if args.doc:
        write_doc(ctx, args.doc, args.command or "tools/faults.sh " + " ".join(sys.argv[1:]),
                  started, elapsed)
        say(f"wrote {args.doc}")
    say(f"{elapsed:.0f} s")
    return 1 if any(r.ok is False for r in ctx.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
