#!/usr/bin/python3
"""kiwi-agent benchmark: the lab's method (1, 8 and 32 persistent connections, each route several
times with the route order rotated, medians with min-max), run side by side against a ceiling
server (tools/bench/ceiling.c: libmicrohttpd with the agent's HTTP settings and a fixed body), plus
start-up time, history body size, a soak (memory), an idle mode (CPU, disk writes) and a reload
mode (SIGHUP: time to apply, the old and new ports, a failed reload).

Usage: tools/bench/run.sh [MODE] [OPTIONS]
  (no mode)        full matrix: 3 repetitions x 20 s, connections 1 8 32, plus start-up (on a
                   fresh data directory and on a day of history written by kiwi-bench-fill, built
                   with the tests), body sizes and the --keepalive step (about 35 minutes)
  --quick          1 repetition x 3 s, connections 1 and 32, start-up as the full matrix
                   (fresh and on a day of history), the keep-alive step at 32 connections,
                   --scale at 1/16 for 3 s and the Catch2 micro-benchmarks (kiwi-bench-micro)
                   with 3 samples (about 2 minutes once built); writes
                   build/bench/benchmarks-quick.md, not docs/benchmarks.md (unless --out)
  --soak [MIN]     history route at 32 connections for MIN minutes (default 5), RSS and PSS
                   sampled every second, then PRAGMA quick_check on the database
  --idle [SECONDS] SECONDS (default and minimum 120) at 1 Hz, one /metrics scrape and one
                   /api/current poll per second with curl: CPU over the first 60 s, disk
                   write_bytes over the whole window, per hour, for a fresh database and for the
                   steady state (a second agent with retention 1 min prunes on every commit);
                   about 70 s more than SECONDS
  --reload [N]     SIGHUP reloads on one agent (default sensors, fresh data dir), N rounds
                   (default 10) of: [collector] interval 1s <-> 2s (kill -HUP to the log's
                   "reloaded" line, the agent's own "in X ms", and to /api/current showing the new
                   interval), http.bind between two free loopback ports (to the first 200 on the
                   new port, to the old port refusing) and a TOML error (to the "reload failed"
                   line, then /api/current must answer 200); checks that the PID never changes,
                   that only the deliberate reloads failed and that the history has no step over
                   2 s; exits 1 if one does not hold (about 15 s for N = 10)
  --footprint [SECONDS]
                   kiwi-agent beside node_exporter, Netdata and collectd, one after another, each
                   on its defaults at 1 s and polled once a second: CPU, RSS, PSS and disk writes
                   of each whole process tree over SECONDS (default 300) after 30 s of warm-up;
                   and the HTTP floor: the ceiling server polled the same way with a body the
                   size of the agent's /metrics (tools/bench/footprint.py; needs root and
                   tools/setup.sh --bench; about 5 x (SECONDS + 35) s)
  --scale [SECONDS]
                   the agent on a generated big host (64 cores, 256 interfaces, 64 mounts, 32
                   disks, 24 zones: tools/bench/bighost.py) and at 1/4 and 1/16 of it: CPU per
                   tick and per series, writes, RSS, /metrics bytes and rate against the
                   ceiling, /api/history time; SECONDS (default 120) each after 15 s of warm-up
                   (tools/bench/scale.py; about 3 x (SECONDS + 35) s)
  --keepalive      /api/current at each connection count (--conns, --duration) without, with
                   1,000 idle keep-alive connections open (tools/faults/faults.py's swarm), and
                   without again, on the defaults (256 slots: the swarm churns) and then held
                   open (max_connections 1100, keep_alive 10m) (also a step of the full matrix,
                   and of --quick at its largest connection count only; about
                   2 x (3 x conns x (duration + 1) s + 10 s))
  --disk [SECONDS] steady-state disk writes: tools/bench/disk.py, the default config with
                   retention 1m (prunes every minute, as a database holding 24 h) beside a
                   young 24 h one, write_bytes over SECONDS (default and minimum 600) after
                   90 s of warm-up; its section goes into the page, its JSON lines into
                   <results>/disk.jsonl, from which the targets table takes its disk row
  --alerts [SECONDS]
                   what 50 [[alert]] rules add to the idle agent's CPU: tools/bench/alerts.py,
                   the same binary twice side by side on one CPU, with no rules and with the
                   built-in rules plus tools/bench/alert-rules.toml, both polled once a
                   second, 5 windows of SECONDS (default 60) after 30 s of warm-up; then the
                   rule engine's micro-benchmark (kiwi-bench-micro "alerts*"); its section goes
                   into the page (about 5 x SECONDS + 60 s)
  --history-day    a 24 h, 1,000-point query of one series and of all series, on a day of 1 Hz
                   history at 80, 393, 1,537 and 6,115 series (kiwi-bench-history, built with the
                   tests; tools/bench/history_day.py; about 5 minutes)
  --instructions   instructions per request under valgrind's callgrind, the agent and the
                   ceiling on each route of the matrix at 8 connections: the HTTP worker thread
                   and the request callback (tools/bench/instructions.py; about 3 minutes): the
                   cost figure that does not change with the machine's load
  --all            full matrix (with start-up on a day of history and the keep-alive step),
                   then --idle, --soak, --reload, --disk, --footprint, --scale, --alerts,
                   --instructions, then --history-day (about 1 h 51 min: matrix 35, disk 12,
                   footprint 28, scale 8, alerts 6, history-day 5, instructions 3, the rest 12
                   minutes)
  --report-only    rewrite the markdown from the latest results of each mode, running nothing
Options:
  --reps N  --duration SECONDS  --conns "1 8 32"
  --threads N|auto HTTP worker threads of the agent ([http] threads) and the ceiling (default
                   auto, the agent's default: one per CPU the server may run on, at most 4; the
                   ceiling applies the same rule, so with both pinned to one CPU, both run 1)
  --build-dir DIR  agent build tree (default build/bench/agent, configured Release with the
                   benchmark programs; an existing tree keeps its build type and gets
                   KIWI_BUILD_TESTS=ON, but only the agent and those programs are built)
  --no-build       use the binaries already in the build tree
  --out FILE       markdown output (default docs/benchmarks.md; quick:
                   build/bench/benchmarks-quick.md)
Environment: KIWI_BENCH_DIR (work directory, default build/bench; must be on a disk filesystem
  for write_bytes to mean anything).

Each mode writes one JSON line per measurement to <work>/results/MODE.jsonl (quick:
results-quick/); tools/bench/report.py renders the markdown from those lines and keeps the
sections it has no results for (and those other programs write) as they are in the page.
Everything listens on 127.0.0.1 only, every loop is bounded, and the agent, the ceiling and wrk
are stopped on exit. Exit status: 0 when every run completed without errors (non-2xx, bad body,
socket errors) and, with --reload, every check of it held; target misses are reported in the
table, not in the exit status.
"""

import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Agent, Failure, Processes, Results, agent_config, guarded,  # noqa: E402
                      http_get, loadavg, tail, wait_listening)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tools", "bench")
# catch2: the benchmark programs are configured with the tests (tests/CMakeLists.txt).
PACKAGES = ("wrk", "curl", "sqlite3", "gzip", "util-linux", "catch2")
# ... and those of one mode only (the quick benchmark of tools/test.sh does without them).
MODE_PACKAGES = {"instructions": ("valgrind",), "all": ("valgrind",)}
# What the harness runs besides the agent and its plugins: a day of history for start-up
# (matrix.py), the day query at each series count (history_day.py) and the Catch2 BENCHMARKs.
BENCH_TARGETS = ("kiwi-agent", "kiwi-bench-fill", "kiwi-bench-history", "kiwi-bench-micro")


def say(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def utc_minute():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


class Usage(Exception):
    """A bad command line: exit status 2."""


def parse_args(argv):
    """The command line of tools/bench/run.sh, as its loop in bash read it: the last mode wins,
    and a mode's optional count is the next argument when that is a number."""
    o = dict(mode="full", reps=3, duration=20, conns="1 8 32", soak_minutes=5, idle_seconds=120,
             http_threads="auto", footprint_seconds=300, scale_seconds=120, scale_warmup=15,
             scale_divide="16 4 1", reload_rounds=10, disk_seconds=600, alerts_seconds=60,
             build_dir="",
             no_build=False, out="")
    counted = {"--idle": ("idle", "idle_seconds"), "--footprint": ("footprint",
               "footprint_seconds"), "--scale": ("scale", "scale_seconds"),
               "--soak": ("soak", "soak_minutes"), "--reload": ("reload", "reload_rounds"),
               "--disk": ("disk", "disk_seconds"), "--alerts": ("alerts", "alerts_seconds")}
    valued = {"--reps": "reps", "--duration": "duration", "--conns": "conns",
              "--threads": "http_threads", "--build-dir": "build_dir", "--out": "out"}
    given = set()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in counted:
            o["mode"], key = counted[a]
            if i + 1 < len(argv) and argv[i + 1].isdigit():
                o[key] = argv[i + 1]
                i += 1
        elif a in ("--quick", "--all", "--report-only", "--keepalive", "--history-day",
                   "--instructions"):
            o["mode"] = {"--quick": "quick", "--all": "all", "--report-only": "report",
                         "--keepalive": "keepalive", "--history-day": "history-day",
                         "--instructions": "instructions"}[a]
        elif a in valued:
            if i + 1 >= len(argv):
                raise Usage(f"{a} needs a value (see --help)")
            o[valued[a]] = argv[i + 1]
            given.add(valued[a])
            i += 1
        elif a == "--no-build":
            o["no_build"] = True
        elif a in ("-h", "--help"):
            print(__doc__, end="")
            sys.exit(0)
        else:
            raise Usage(f"unknown argument '{a}' (see --help)")
        i += 1
    if o["mode"] == "quick":
        o["reps"] = o["reps"] if "reps" in given else 1
        o["duration"] = o["duration"] if "duration" in given else 3
        o["conns"] = o["conns"] if "conns" in given else "1 32"
    for key in ("reps", "duration", "soak_minutes", "reload_rounds", "footprint_seconds",
                "scale_seconds", "idle_seconds", "disk_seconds", "alerts_seconds"):
        v = str(o[key])
        if not re.fullmatch(r"[1-9][0-9]*", v):
            raise Usage(f"'{v}' is not a positive integer")
        o[key] = int(v)
    if o["idle_seconds"] < 120:
        raise Usage("--idle needs at least 120 s (write_bytes over 2 minutes)")
    if o["disk_seconds"] < 600:
        raise Usage("--disk needs at least 600 s (issue 17: steady state over >= 10 minutes)")
    if not (o["http_threads"] == "auto" or re.fullmatch(r"[1-9][0-9]*", o["http_threads"])):
        raise Usage("--threads takes a positive integer or auto")
    try:
        o["conns"] = [int(c) for c in o["conns"].split()]
    except ValueError:
        raise Usage(f"--conns takes numbers, e.g. \"1 8 32\", not '{o['conns']}'") from None
    if not o["conns"] or min(o["conns"]) < 1:
        raise Usage("--conns takes positive numbers")
    return o


class Bench:
    """What every mode uses: options, paths, binaries, pinning, the processes started, the
    results of this invocation, and the errors and failed checks that decide the exit status."""

    def __init__(self, opts, argv):
        self.__dict__.update(opts)
        self.invocation = "tools/bench/run.sh" + ("".join(" " + a for a in argv))
        self.work = os.environ.get("KIWI_BENCH_DIR") or os.path.join(ROOT, "build", "bench")
        self.build_dir = os.path.abspath(self.build_dir or os.path.join(self.work, "agent"))
        if self.mode == "quick":
            self.results_dir = os.path.join(self.work, "results-quick")
            self.out = self.out or os.path.join(self.work, "benchmarks-quick.md")
        else:
            self.results_dir = os.path.join(self.work, "results")
            self.out = self.out or os.path.join(ROOT, "docs", "benchmarks.md")
        self.run_dir = os.path.join(self.work, "run")
        for d in (self.work, self.results_dir, self.run_dir):
            os.makedirs(d, exist_ok=True)
        self.run_id = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
        self.ncpu = os.cpu_count() or 1
        if self.ncpu >= 2:
            self.pin_server, self.pin_client = ["taskset", "-c", "0"], ["taskset", "-c", "1"]
            self.pinning = ("agent and ceiling on CPU 0 (`taskset -c 0`), wrk (1 thread) and this "
                            "script's helpers on CPU 1 (`taskset -c 1`)")
        else:
            self.pin_server, self.pin_client = [], []
            self.pinning = "not pinned (1 CPU): agent, ceiling and wrk share CPU 0"
        self.procs = Processes(self.run_dir)
        self.snapdir = None
        self.errors = 0
        self.check_failures = []
        self.say = say

    # -- results ----------------------------------------------------------------------------
    def results(self, mode):
        """The results file of one mode for this invocation (appended: the report takes each
        file's last run)."""
        return Results(os.path.join(self.results_dir, f"{mode}.jsonl"), self.run_id)

    def section_meta(self, res, load_before):
        """The lines every section starts with: the command, when, the agent, the load."""
        res.add("run", "section", {"command": self.invocation, "when": self.when,
                                   "agent": self.agent_version, "commit": self.commit,
                                   "load_before": load_before, "load_after": loadavg()}, "")

    # -- the agent --------------------------------------------------------------------------
    def config(self, name, interval="1s", retention="24h", bind="127.0.0.1:0", http=""):
        """A config on loopback (port 0: the kernel picks a free port, the log says which),
        history on disk under the run directory, the snapshot on tmpfs; returns its path.
        `http`: more lines for the [http] table."""
        threads = '"auto"' if self.http_threads == "auto" else self.http_threads
        path = os.path.join(self.run_dir, f"{name}.toml")
        with open(path, "w") as f:
            f.write(agent_config(f"{self.run_dir}/{name}-data", self.plugin_dir, bind,
                                 f"{self.snapdir}/{name}.json", http=f"threads = {threads}\n{http}",
                                 collector={"interval": interval, "retention": retention}))
        return path

    def agent(self, name, interval="1s", keep=False, bind="127.0.0.1:0", pin=None,
              retention="24h", http=""):
        """The agent `name` on its config (see config), pinned to the server's CPU unless `pin`,
        which may also name a program to run it under; not started yet. A fresh data dir unless
        `keep`."""
        if not keep:
            shutil.rmtree(os.path.join(self.run_dir, f"{name}-data"), ignore_errors=True)
        cfg = self.config(name, interval, retention, bind, http)
        return Agent(self.procs, self.agent_bin, cfg, name,
                     data_dir=os.path.join(self.run_dir, f"{name}-data"),
                     wrapper=self.pin_server if pin is None else pin, log_dir=self.run_dir)

    def start_agent(self, name, interval="1s", keep=False, bind="127.0.0.1:0", pin=None,
                    retention="24h", http="", wait=10):
        """Starts the agent (see agent) and waits `wait` s at most for its "listening on" line;
        returns (Popen, url)."""
        a = self.agent(name, interval, keep, bind, pin, retention, http)
        a.start(wait, require=True)
        return a.proc, a.url

    @staticmethod
    def wait_listening(p, seconds, what):
        """The URL of the "listening on" line that `p` (the agent or the ceiling) logs, waited
        for `seconds` at most; Failure naming `what` if it does not come or `p` exits."""
        return wait_listening(p, seconds, what)

    def stop(self, p):
        self.procs.finish(p)

    @staticmethod
    def status(url, timeout=5.0):
        return status(url, timeout)

    def wait_for_200(self, url, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if status(url, timeout=1) == 200:
                return
            time.sleep(0.05)
        raise Failure(f"no 200 from {url} within {seconds} s")

    # -- set-up -----------------------------------------------------------------------------
    def setup(self):
        if self.no_build:
            say(f"not building (--no-build); using {self.build_dir}")
        else:
            subprocess.run([os.path.join(ROOT, "tools", "setup.sh")], check=True)
            install_packages(self.mode)
            # The benchmark programs come with the test targets (which are not built here): an
            # existing tree keeps its build type and options but gets KIWI_BUILD_TESTS=ON.
            cache = os.path.join(self.build_dir, "CMakeCache.txt")
            configure = ["cmake", "-S", ROOT, "-B", self.build_dir, "-DKIWI_BUILD_TESTS=ON"]
            if os.path.exists(cache):
                say(f"building the agent in {self.build_dir} (existing tree)")
            else:
                say(f"configuring the agent (Release) in {self.build_dir}")
                configure.append("-DCMAKE_BUILD_TYPE=Release")
            subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
            log = os.path.join(self.run_dir, "build.log")
            with open(log, "w") as f:
                r = subprocess.run(["cmake", "--build", self.build_dir, "-j", str(self.ncpu),
                                    "--target", *BENCH_TARGETS],
                                   stdout=f, stderr=subprocess.STDOUT)
            if r.returncode:
                print(tail(log, 30).rstrip(), file=sys.stderr)
                raise Failure(f"agent build failed (log: {log})")
        self.agent_bin = os.path.join(self.build_dir, "bin", "kiwi-agent")
        self.plugin_dir = os.path.join(self.build_dir, "lib", "kiwi-agent")
        if not os.access(self.agent_bin, os.X_OK):
            raise Failure(f"no agent binary at {self.agent_bin}")
        self.build_type = self.cache_value("CMAKE_BUILD_TYPE")
        if self.build_type != "Release":
            say(f"warning: {self.build_dir} is a '{self.build_type or 'unknown'}' build, "
                "not Release")
        self.build_ceiling()
        for tool in ("wrk", "curl", "taskset", "sqlite3", "gzip"):
            if not shutil.which(tool):
                raise Failure(f"{tool} is missing (tools/setup.sh --test installs it)")

    def cache_value(self, key):
        try:
            with open(os.path.join(self.build_dir, "CMakeCache.txt")) as f:
                for line in f:
                    m = re.match(rf"{key}:[A-Z]*=(.*)", line.rstrip("\n"))
                    if m:
                        return m.group(1)
        except OSError:
            pass
        return ""

    def build_ceiling(self):
        """The ceiling links the libmicrohttpd the agent links (CMake's KIWI_MHD_LINKED: the
        static build without TLS from tools/setup-mhd.sh, or empty for Debian's shared library).
        Always current, even with --no-build (that is about the agent's tree): one small C
        file."""
        self.ceiling_bin = os.path.join(self.work, "bin", "kiwi-bench-ceiling")
        static = self.cache_value("KIWI_MHD_LINKED")
        if static:
            flags = f"-I{static.rsplit('/lib/', 1)[0]}/include {static}"
        else:
            flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmicrohttpd"],
                                   capture_output=True, text=True, check=True).stdout.strip()
        stamp = self.ceiling_bin + ".flags"
        src = os.path.join(HERE, "ceiling.c")
        current = (os.access(self.ceiling_bin, os.X_OK)
                   and os.path.getmtime(src) <= os.path.getmtime(self.ceiling_bin)
                   and read_text(stamp).strip() == flags)
        if not current:
            os.makedirs(os.path.dirname(self.ceiling_bin), exist_ok=True)
            say(f"building the ceiling server ({flags})")
            subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-o", self.ceiling_bin, src]
                           + flags.split() + ["-lpthread"], check=True)
            with open(stamp, "w") as f:
                f.write(flags + "\n")

    def versions(self):
        out = subprocess.run([self.agent_bin, "--version"], capture_output=True, text=True)
        lines = (out.stdout + out.stderr).splitlines() + ["", ""]
        self.agent_version = lines[0]
        deb = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libmicrohttpd-dev"],
                             capture_output=True, text=True).stdout or "?"
        self.mhd_version = f"{re.sub(r'^libmicrohttpd ', '', lines[1])}, Debian source {deb}; " + (
            "static build from tools/setup-mhd.sh, also in the ceiling"
            if self.cache_value("KIWI_MHD_LINKED")
            else "Debian's shared library, also in the ceiling")
        wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
        self.wrk_version = ((wrk.stdout + wrk.stderr).split("\n")[0].split() + ["?", "?"])[1]
        self.sqlite_version = subprocess.run(["sqlite3", "--version"], capture_output=True,
                                             text=True).stdout.split(" ")[0]
        git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True)
        commit = git.stdout.strip() or "unknown"
        # The page this program writes does not count as a change to what is measured.
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no", "--", ".", ":!docs/benchmarks.md"],
                               capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " + uncommitted changes"
        # With --no-build the tree may have moved on since the binary was built: say when it was.
        built = datetime.datetime.fromtimestamp(os.path.getmtime(self.agent_bin),
                                                datetime.timezone.utc)
        self.commit = commit + f", binary built {built.strftime('%Y-%m-%d %H:%M UTC')}"

    def record_machine(self):
        """The page's Machine table, as of this run."""
        res = self.results("machine")
        model = "?"
        for line in read_text("/proc/cpuinfo").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kib = int(re.search(r"MemTotal:\s+(\d+)", read_text("/proc/meminfo")).group(1))
        os_name = re.search(r'PRETTY_NAME="?([^"\n]*)', read_text("/etc/os-release"))
        u = os.uname()
        res.add("run", "machine", {
            "cpus": self.ncpu, "model": model, "memory": f"{mem_kib / 1048576:.1f} GiB",
            "kernel": f"{u.sysname} {u.release} {u.machine}",
            "os": os_name.group(1) if os_name else "",
            "agent": self.agent_version, "commit": self.commit,
            "build_type": self.build_type or "?", "mhd": self.mhd_version,
            "wrk": self.wrk_version, "sqlite": self.sqlite_version, "pinning": self.pinning,
            "command": self.invocation}, "")

    def pick_snapdir(self):
        for base in ("/run", "/dev/shm"):
            fs = subprocess.run(["stat", "-f", "-c", "%T", base], capture_output=True,
                                text=True).stdout.strip()
            if fs == "tmpfs" and os.access(base, os.W_OK):
                self.snapdir = tempfile.mkdtemp(prefix="kiwi-bench.", dir=base)
                return
        self.snapdir = tempfile.mkdtemp(prefix="snapshot.", dir=self.run_dir)
        say(f"warning: no writable tmpfs for the snapshot file; it goes to {self.snapdir} and "
            "counts in write_bytes")

    @property
    def when(self):
        return utc_minute()


def install_packages(mode):
    wanted = PACKAGES + MODE_PACKAGES.get(mode, ())
    missing = [p for p in wanted if "install ok installed" not in subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout]
    if not missing:
        return
    say(f"installing {' '.join(missing)}")
    sudo = []
    if os.getuid() != 0:
        if not shutil.which("sudo"):
            raise Failure(f"run as root or install sudo (needed: {' '.join(missing)})")
        sudo = ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    subprocess.run(sudo + ["apt-get"] + lock + ["update", "-qq"], check=True, env=env)
    subprocess.run(sudo + ["apt-get"] + lock + ["install", "-y", "-qq",
                   "--no-install-recommends"] + missing, check=True, env=env,
                   stdout=subprocess.DEVNULL)


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def status(url, timeout=5.0):
    """The HTTP status of a GET, 0 when nothing answers."""
    try:
        return http_get(url, timeout=timeout)[0]
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return 0


# ----------------------------------------------------------------------------------------------
def run_footprint(b):
    """The peers' table comes from tools/bench/footprint.py, which writes its section into the
    page (the report keeps it). Unpinned: each agent runs as it would on the board."""
    if os.getuid() != 0:
        b.check_failures.append("footprint: not run: it needs root (sudo tools/bench/run.sh "
                                "--footprint)")
        return
    say(f"footprint: kiwi-agent, the HTTP floor, node_exporter, netdata, collectd, "
        f"{b.footprint_seconds} s each")
    r = subprocess.run(["taskset", "-c", f"0-{b.ncpu - 1}", sys.executable,
                        os.path.join(HERE, "footprint.py"), "--agent-bin", b.agent_bin,
                        "--ceiling-bin", b.ceiling_bin,
                        "--seconds", str(b.footprint_seconds), "--results",
                        os.path.join(b.results_dir, "footprint.jsonl"), "--doc", b.out],
                       stdout=subprocess.DEVNULL)
    if r.returncode:
        b.check_failures.append("footprint: tools/bench/footprint.py failed (its messages are "
                                "above)")


def run_scale(b, seconds=None, warmup=None, divide=None):
    """The scale table comes from tools/bench/scale.py, which writes its section into the page
    (the report keeps it); it pins the agent and wrk itself."""
    seconds, warmup = seconds or b.scale_seconds, warmup or b.scale_warmup
    divide = divide or b.scale_divide
    say(f"scale: the generated big host divided by {', '.join(divide.split())}, {seconds} s each")
    r = subprocess.run([sys.executable, os.path.join(HERE, "scale.py"), "--agent-bin",
                        b.agent_bin, "--plugin-dir", b.plugin_dir, "--ceiling", b.ceiling_bin,
                        "--seconds", str(seconds), "--warmup", str(warmup), "--divide", divide,
                        "--results", os.path.join(b.results_dir, "scale.jsonl"), "--doc", b.out],
                       stdout=subprocess.DEVNULL)
    if r.returncode:
        b.check_failures.append("scale: tools/bench/scale.py failed (its messages are above)")


def run_disk(b):
    """Steady-state disk writes from tools/bench/disk.py, with its JSON lines in this results
    directory (the targets table's disk row reads them) and its section put into the page (the
    report keeps it); data directories under the work directory (KIWI_BENCH_DIR: a disk
    filesystem). Unpinned, as the agents would run."""
    say(f"disk: steady-state writes, {b.disk_seconds} s after 90 s of warm-up")
    r = subprocess.run(["taskset", "-c", f"0-{b.ncpu - 1}", sys.executable,
                        os.path.join(HERE, "disk.py"), "--agent-bin", b.agent_bin,
                        "--seconds", str(b.disk_seconds), "--work", b.work, "--results",
                        os.path.join(b.results_dir, "disk.jsonl"), "--doc", b.out],
                       stdout=subprocess.DEVNULL)
    if r.returncode:
        b.check_failures.append("disk: tools/bench/disk.py failed (its messages are above)")


def run_alerts(b):
    """What 50 rules add to the idle agent's CPU, from tools/bench/alerts.py, which writes its
    section into the page (the report keeps it). It pins the two agents itself."""
    say(f"alerts: no rules beside 50 rules, 5 windows of {b.alerts_seconds} s")
    r = subprocess.run([sys.executable, os.path.join(HERE, "alerts.py"), "--agent-bin",
                        b.agent_bin, "--micro-bin",
                        os.path.join(b.build_dir, "bin", "kiwi-bench-micro"),
                        "--seconds", str(b.alerts_seconds), "--work", b.work, "--results",
                        os.path.join(b.results_dir, "alerts.jsonl"), "--doc", b.out],
                       stdout=subprocess.DEVNULL)
    if r.returncode:
        b.check_failures.append("alerts: tools/bench/alerts.py failed (its messages are above)")


def run_micro(b):
    """Catch2 BENCHMARKs of the parsers, the sample codec and the renderer (tools/bench/micro.cpp),
    built with the tests: the quick mode runs them with 3 samples, as a smoke test (figures from
    it mean little; run the binary alone for them)."""
    micro = os.path.join(b.build_dir, "bin", "kiwi-bench-micro")
    if not os.access(micro, os.X_OK):
        say(f"micro-benchmarks: not built in {b.build_dir} (they come with -DKIWI_BUILD_TESTS=ON)")
        return
    say(f"micro-benchmarks: {micro}, 3 samples each")
    out = os.path.join(b.results_dir, "micro.txt")
    with open(out, "w") as f:
        r = subprocess.run([micro, "--benchmark-samples", "3", "--benchmark-resamples", "100",
                            "--benchmark-warmup-time", "10"], stdout=f, stderr=subprocess.STDOUT,
                           timeout=600)
    if r.returncode:
        b.check_failures.append(f"micro-benchmarks: {micro} failed (output: {out})")


def main(argv):
    try:
        opts = parse_args(argv)
    except Usage as e:
        print(f"run.sh: {e}", file=sys.stderr)
        return 2
    b = Bench(opts, argv)

    def body():
        import history_day
        import idle
        import instructions
        import keepalive
        import matrix
        import reload
        import report
        import soak
        if b.mode == "report":
            # Nothing runs, so nothing is built or looked for: a fresh clone can render too.
            report.write(b.results_dir, b.out)
            with open(b.out) as f:
                sys.stdout.write(f.read())
            say(f"wrote {b.out} from {b.results_dir}")
            return 0
        b.setup()
        b.versions()
        b.pick_snapdir()
        # This program and its helpers (curl, the pollers) stay off the server's CPU.
        if b.ncpu >= 2:
            os.sched_setaffinity(0, {1})
        say(f"pinning: {b.pinning}")
        say(f"results: {b.results_dir}; output: {b.out}")
        b.record_machine()
        modes = {"quick": [matrix.run, keepalive.run, lambda b: run_scale(b, 3, 1, "16"),
                           run_micro],
                 "full": [matrix.run, keepalive.run], "soak": [soak.run], "idle": [idle.run],
                 "reload": [reload.run], "footprint": [run_footprint], "scale": [run_scale],
                 "keepalive": [keepalive.run], "disk": [run_disk], "alerts": [run_alerts],
                 "history-day": [history_day.run], "instructions": [instructions.run],
                 "all": [matrix.run, keepalive.run, idle.run, soak.run, reload.run, run_disk,
                         run_footprint, run_scale, run_alerts, instructions.run,
                         history_day.run]}
        for step in modes[b.mode]:
            step(b)
        # --footprint, --scale, --disk and --alerts alone: their program has put its section into
        # the page in place; the page is not rendered again.
        if b.mode not in ("footprint", "scale", "disk", "alerts"):
            report.write(b.results_dir, b.out)
            with open(b.out) as f:
                sys.stdout.write(f.read())
        say(f"wrote {b.out}")
        for m in b.check_failures:
            say(f"FAILED: {m}")
        if b.errors:
            say(f"FAILED: {b.errors} errors (non-2xx, bad bodies or socket errors) in agent runs")
            return 1
        if b.check_failures:
            return 1
        say("no errors")
        return 0

    try:
        return guarded(body, say)
    finally:
        b.procs.stop_all()
        if b.snapdir:
            shutil.rmtree(b.snapdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
