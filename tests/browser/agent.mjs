// The real kiwi-agent for browser tests: a temporary directory, a loopback port, a config written
// from the test. Every wait polls with a deadline; nothing sleeps for a fixed time.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// playwright-core comes from tools/web (npm ci from its package-lock.json), wherever cwd is.
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const { chromium } = createRequire(join(root, 'tools/web/package.json'))('playwright-core');

// Debian's chromium, headless, in a profile of its own that nothing outside the test shares.
export function launchChromium(userDataDir) {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.KIWI_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    colorScheme: 'light',
  });
}

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set; run this test through ctest (tests/browser/CMakeLists.txt) or set it by hand`);
  return v;
}

// Polls `fn` until it returns a truthy value or `ms` pass; returns that value or throws `what`.
export async function until(fn, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Formatting for people, written out again for the tests, so the page's own code is not its own
// oracle.
export const fmt = {
  pct: (r, d = 0) => `${(r * 100).toFixed(d)}%`,
  iec(b) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 ** (i + 1) && i < units.length - 1) i++;
    const v = b / 1024 ** i;
    return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
  },
  rate(b) {
    const units = ['B/s', 'kB/s', 'MB/s', 'GB/s'];
    let i = 0;
    while (b >= 1000 ** (i + 1) && i < units.length - 1) i++;
    const v = b / 1000 ** i;
    return i === 0 ? `${Math.round(v)} B/s` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
  },
  hz: (hz) => (hz >= 1e9 ? `${(hz / 1e9).toFixed(2)} GHz` : `${Math.round(hz / 1e6)} MHz`),
  c: (c) => `${c.toFixed(1)} °C`,
  load: (l) => l.toFixed(2),
  // A number under a million as the page writes one: whole ones and those from 100 on rounded,
  // others to three significant digits.
  num: (v) => (Number.isInteger(v) || Math.abs(v) >= 100 ? String(Math.round(v)) : String(Number(v.toPrecision(3)))),
  // Seconds under a minute (the clock's errors): µs, ms or s.
  seconds(s) {
    const a = Math.abs(s);
    return a && a < 1e-3 ? `${fmt.num(s * 1e6)} µs` : a && a < 1 ? `${fmt.num(s * 1e3)} ms` : `${fmt.num(s)} s`;
  },
  clock: (t) => new Date(t * 1000).toTimeString().slice(0, 8), // local HH:MM:SS, as the page shows it
  uptime(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    return d ? `${d} d ${h} h` : h ? `${h} h ${m} min` : m ? `${m} min` : `${s} s`;
  },
};

const q = (s) => JSON.stringify(String(s)); // a TOML basic string

// The routes the dashboard needs (its page and assets, the fleet page, /api/current,
// /api/history, /api/alerts unless `alerts` is false: an agent without it), with the dashboard's
// options (TOML values by key) polling every second unless they say otherwise.
export function dashboardRoutes(options = {}, { alerts = true } = {}) {
  const opts = Object.entries({ poll_interval: '"1s"', ...options }).map(([k, v]) => `${k} = ${v}`).join('\n');
  return `
[[route]]
path = "/"
handler = "dashboard"
[route.options]
${opts}

[[route]]
path = "/assets/*"
handler = "dashboard"

[[route]]
path = "/fleet"
handler = "dashboard"

[[route]]
path = "/api/current"
handler = "current"

[[route]]
path = "/api/history"
handler = "history"
${alerts ? '\n[[route]]\npath = "/api/alerts"\nhandler = "alerts"\n' : ''}`;
}

// `[alerts] disable` naming every rule of the agent's default configuration
// (config/kiwi-agent.toml), so that a test sees only its own rules fire, whatever this machine's
// disks and memory are like.
export function disableDefaultRules() {
  const toml = readFileSync(join(root, 'config/kiwi-agent.toml'), 'utf8');
  const names = [...toml.matchAll(/^\[\[alert\]\]\nname = "([^"]+)"/gm)].map((m) => m[1]);
  if (!names.length) throw new Error('config/kiwi-agent.toml has no [[alert]] rules to disable');
  return `[alerts]\ndisable = ${JSON.stringify(names)}\n`;
}

// A sysfs tree with known temperatures and CPU frequencies, so the temperature card and its
// thresholds show real values on any machine (VMs have no thermal zones), and a board's own
// files (the layouts of tests/fixtures): one cpufreq policy for every core, scaled to 1.8 GHz of
// the hardware's 2.256 GHz (capped); a PWM fan at state 1 of 4; a Mali GPU 23% busy at 300 MHz
// of 1 GHz; the Raspberry Pi firmware's get_throttled at 0x0 (writeThrottled() changes it).
// CPU, memory, storage and pressure still come from this machine's /proc.
export const THROTTLED = 'devices/platform/soc/soc:firmware/get_throttled';
export function fakeSysfs(dir, zones, coreCount, freqKHz) {
  zones.forEach(([type, celsius], i) => {
    const z = join(dir, 'class/thermal', `thermal_zone${i}`);
    mkdirSync(z, { recursive: true });
    writeFileSync(join(z, 'type'), `${type}\n`);
    writeFileSync(join(z, 'temp'), `${Math.round(celsius * 1000)}\n`);
  });
  for (let c = 0; c < coreCount; c++) {
    const f = join(dir, 'devices/system/cpu', `cpu${c}`, 'cpufreq');
    mkdirSync(f, { recursive: true });
    writeFileSync(join(f, 'scaling_cur_freq'), `${freqKHz[c % freqKHz.length]}\n`);
  }
  const files = {
    'devices/system/cpu/cpufreq/policy0': { scaling_cur_freq: freqKHz[0], scaling_min_freq: 408000, scaling_max_freq: 1800000,
      cpuinfo_min_freq: 408000, cpuinfo_max_freq: 2256000, scaling_governor: 'schedutil', scaling_driver: 'cpufreq-dt',
      related_cpus: [...Array(coreCount).keys()].join(' ') },
    [`class/thermal/cooling_device0`]: { type: 'pwm-fan', cur_state: 1, max_state: 4 },
    'class/devfreq/fb000000.gpu': { cur_freq: 300000000, min_freq: 300000000, max_freq: 1000000000, load: '23@300000000Hz' },
    [dirname(THROTTLED)]: { [basename(THROTTLED)]: '0x0' },
  };
  for (const [d, attrs] of Object.entries(files)) {
    mkdirSync(join(dir, d), { recursive: true });
    for (const [name, value] of Object.entries(attrs)) writeFileSync(join(dir, d, name), `${value}\n`);
  }
}
export const writeThrottled = (dir, word) => writeFileSync(join(dir, THROTTLED), `${word}\n`);

export class Agent {
  // `extra` is TOML appended to the config; `collector` lines go into its [collector] table.
  constructor({ extra = '', collector = '', agent = '' } = {}) {
    this.dir = mkdtempSync(join(tmpdir(), 'kiwi-browser-'));
    this.extra = extra;
    this.collector = collector;
    this.agentLines = agent;
    this.proc = null;
    this.port = 0;
    this.log = '';
  }

  get origin() { return `http://127.0.0.1:${this.port}`; }

  writeConfig(port) {
    const cfg = join(this.dir, 'kiwi.toml');
    writeFileSync(cfg, [
      '[agent]', `data_dir = ${q(join(this.dir, 'data'))}`, `plugin_dir = ${q(env('KIWI_PLUGIN_DIR'))}`, this.agentLines,
      '[http]', `bind = ${q(`127.0.0.1:${port}`)}`,
      '[collector]', `snapshot_path = ${q(join(this.dir, 'current.json'))}`, this.collector,
      this.extra, ''].join('\n'));
    return cfg;
  }

  // Starts on `port` (0: the kernel chooses) and resolves once the agent says it is listening.
  async start(port = 0) {
    const cfg = this.writeConfig(port);
    this.log = '';
    let exited = null;
    const proc = spawn(env('KIWI_AGENT_BIN'), ['--config', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
    proc.stderr.on('data', (d) => { this.log += d; });
    proc.on('exit', (code, sig) => { exited = `exit code ${code}${sig ? ` (${sig})` : ''}`; });
    this.proc = proc;
    const m = await until(() => {
      if (exited) throw new Error(`kiwi-agent stopped at start-up, ${exited}:\n${this.log}`);
      return /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(this.log);
    }, 20000, `kiwi-agent to listen:\n${this.log}`);
    this.port = Number(m[1]);
  }

  // Writes the config again with `extra` as it is now (on the port it listens on) and sends
  // SIGHUP; resolves once the agent logs that the new configuration applies.
  async reload() {
    const from = this.log.length;
    this.writeConfig(this.port);
    this.proc.kill('SIGHUP');
    await until(() => {
      const log = this.log.slice(from);
      if (/reload failed/.test(log)) throw new Error(`the reload failed:\n${log}`);
      return / reloaded .* \(generation \d+\)/.test(log);
    }, 10000, `the reload to apply:\n${this.log.slice(from)}`);
  }

  // SIGTERM and wait for the exit code (SIGKILL after 20 s).
  async stop() {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return proc && proc.exitCode;
    const done = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20000);
    const code = await done;
    clearTimeout(timer);
    this.proc = null;
    return code;
  }

  async json(path) {
    const res = await fetch(this.origin + path);
    return { status: res.status, headers: res.headers, body: await res.json() };
  }

  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// Number of CPUs /proc/stat lists (what the cpu sensor reports as cores).
export function procStatCores() {
  return readFileSync('/proc/stat', 'utf8').split('\n').filter((l) => /^cpu\d+ /.test(l)).length;
}
