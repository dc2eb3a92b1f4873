// The dashboard on the fixture boards' real layouts (tests/fixtures: a Raspberry Pi 4 and 5, an RK3588,
// an x86 mini PC, a VM), in Debian's chromium (headless) against the real kiwi-agent on its
// built-in configuration with procfs and sysfs pointed at a copy of the board: the board's own
// cards show what that board has (the Pi's power flags and under-voltage banner, the RK3588's
// three clusters, fan, GPU and NPU and its eMMC's wear) and nothing where a board has none. Run
// by ctest ("browser: boards") or by hand with the variables dashboard.test.mjs names.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Agent, dashboardRoutes, fmt, launchChromium, THROTTLED } from './agent.mjs';

const FIXTURES = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '../fixtures');
const ROUTES = dashboardRoutes();

let context;
const userDataDir = mkdtempSync(join(tmpdir(), 'kiwi-chromium-'));
const agents = [];

before(async () => { context = await launchChromium(userDataDir); });
after(async () => {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  for (const a of agents) await a.cleanup();
});

// The agent on a copy of `board` (changed by `edit(dir)` first), the page loaded and live, and
// what its board cards show once their sensors have data.
async function open(board, edit = () => {}) {
  const agent = new Agent({ extra: ROUTES });
  agents.push(agent);
  const copy = join(agent.dir, 'board');
  cpSync(join(FIXTURES, board), copy, { recursive: true });
  edit(copy);
  agent.agentLines = `procfs = ${JSON.stringify(join(copy, 'proc'))}\nsysfs = ${JSON.stringify(join(copy, 'sys'))}`;
  await agent.start();
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  await page.goto(`${agent.origin}/`);
  await page.waitForFunction(() => document.body.dataset.state === 'live' &&
    !['health', 'devfreq', 'storage', 'processes'].some((c) => ['loading', 'missing'].includes(document.getElementById(`card-${c}`).dataset.status)),
  null, { timeout: 10000 });
  const shown = await page.evaluate(() => {
    const rows = (sel) => [...document.querySelectorAll(sel)].map((r) => [r.querySelector('dt').textContent, r.querySelector('dd').textContent]);
    return {
      hidden: Object.fromEntries(['health', 'devfreq'].map((c) => [c, document.getElementById(`card-${c}`).hidden])),
      processes: document.getElementById('card-processes').hidden ? null
        : [...document.querySelectorAll('#card-processes table[data-by="memory"] tbody tr')].map((tr) => [...tr.children].map((c) => c.textContent)),
      health: rows('#card-health .row:not(.group)'),
      groups: [...document.querySelectorAll('#card-health .group dt')].map((d) => d.textContent),
      gpu: rows('#card-devfreq .row'),
      wear: rows('#card-storage .wear .row:not(.group)'),
      banner: document.getElementById('banner').hidden ? null : document.getElementById('banner').textContent,
    };
  });
  return { agent, page, shown, problems };
}

// The top-processes card's list by memory, as /api/current has it: command, pid, CPU share (none
// in the first sample), resident bytes.
async function topByMemory(agent) {
  const s = Object.values((await agent.json('/api/current')).body.sensors).find((x) => x.plugin === 'processes');
  const at = (name, rank) => (s.metrics.find((m) => m.name === name && m.labels.by === 'memory' && m.labels.rank === rank) || {}).value;
  return s.metrics.filter((m) => m.name === 'processes_top_pid' && m.labels.by === 'memory')
    .sort((a, b) => Number(a.labels.rank) - Number(b.labels.rank))
    .map((m) => [m.labels.command, String(m.value), at('processes_top_cpu_ratio', m.labels.rank) === undefined ? '–'
      : fmt.pct(at('processes_top_cpu_ratio', m.labels.rank), 1), fmt.iec(at('processes_top_resident_bytes', m.labels.rank))]);
}

test('a Raspberry Pi 4: power flags, one cluster, pressure; no GPU card, no wear on its SD card', async () => {
  const { agent, page, shown, problems } = await open('rpi4', (dir) => writeFileSync(join(dir, 'sys', THROTTLED), '0x50005\n'));
  assert.equal(shown.hidden.health, false);
  assert.equal(shown.hidden.devfreq, true, 'no devfreq on a Pi: no GPU / NPU card');
  assert.deepEqual(shown.groups, ['Power (Raspberry Pi firmware)', 'CPU frequency', 'Pressure, last 10 s (waiting for)', 'Clock']);
  assert.deepEqual(shown.health.slice(0, 5), [['Under-voltage', 'now'], ['Frequency capped', 'no'], ['Throttled', 'now'],
    ['Soft temperature limit', 'no'], ['CPU 0-3 ondemand', '600 MHz of 1.80 GHz']]);
  assert.deepEqual(shown.wear, [], 'an SD card has no wear estimate');
  // The top processes by memory from the fixture's /proc/[pid]/stat (sampled every 10 s: one
  // sample so far, which is the one the card shows).
  assert.equal(shown.processes.length, 5);
  assert.deepEqual(shown.processes, await topByMemory(agent));
  // Wi-Fi: the signal beside the rates, where an interface has one (wlan0).
  assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('#card-network [data-metric="network_wireless_signal_dbm"]')]
    .filter((e) => e.textContent).map((e) => [e.dataset.label, e.textContent])), [['wlan0', '-56 dBm']]);
  // The firmware's word says under-voltage now: the red banner, since the agent's first samples.
  await page.waitForFunction(() => document.querySelector('#banner[data-kind="undervoltage"] time'), null, { timeout: 10000 });
  assert.match(await page.evaluate(() => document.getElementById('banner').textContent), /^UNDER-VOLTAGE Under-voltage detected since (at least )?\d\d:\d\d:\d\d/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a Raspberry Pi 5: its fan in rpm beside the fan\'s cooling state, and a fan-speed chart', async () => {
  const { page, shown, problems } = await open('rpi5');
  assert.equal(shown.hidden.devfreq, true, 'V3D is not a devfreq device');
  assert.deepEqual(shown.groups, ['Power (Raspberry Pi firmware)', 'CPU frequency', 'Cooling', 'Pressure, last 10 s (waiting for)',
    'Clock']);
  const cooling = shown.health.slice(shown.health.findIndex(([k]) => k.startsWith('CPU')) + 1).slice(0, 2);
  assert.deepEqual(cooling, [['pwmfan fan1', '2727 rpm'], ['pwm-fan', '1 of 4']]);
  assert.equal(shown.banner, null, 'a healthy supply: no banner');
  await page.waitForFunction(() => Number(document.getElementById('chart-fans').dataset.points) > 0, null, { timeout: 10000 });
  assert.equal(await page.evaluate(() => document.querySelector('#chart-fans .u-legend .u-label').textContent), 'pwmfan fan1');
  assert.deepEqual(problems, []);
  await page.close();
});

test('an RK3588: three clusters, fan and cpufreq cooling, GPU and NPU, the eMMC\'s wear', async () => {
  const { page, shown, problems } = await open('rk3588');
  assert.deepEqual(shown.hidden, { health: false, devfreq: false });
  assert.equal(shown.processes, null, 'no /proc/[pid] in this fixture: no top-processes card');
  assert.deepEqual(shown.groups, ['CPU frequency', 'Cooling', 'Pressure, last 10 s (waiting for)', 'Clock'], 'no power section: not a Pi');
  assert.deepEqual(shown.health.slice(0, 7), [['CPU 0-3 schedutil', '1.20 GHz of 1.80 GHz'], ['CPU 4-5 schedutil', '2.35 GHz of 2.35 GHz'],
    ['CPU 6-7 schedutil', '408 MHz of 2.35 GHz'], ['cpufreq-cpu0', '0 of 7'], ['cpufreq-cpu4', '0 of 12'], ['cpufreq-cpu6', '0 of 12'],
    ['pwm-fan', '1 of 4']]);
  assert.deepEqual(shown.gpu, [['Memory dmc', '12% at 528 MHz of 2.11 GHz'], ['GPU fb000000.gpu', '23% at 300 MHz of 1.00 GHz'],
    ['NPU fdab0000.npu', '0% at 1.00 GHz of 1.00 GHz']]);
  assert.equal(shown.wear.length, 1);
  assert.equal(shown.wear[0][0], 'mmcblk0 eMMC');
  assert.match(shown.wear[0][1], /^10%–20% used \(type B\)\d+(\.\d+)? [KMG]iB written since boot$/);
  // The frequency and pressure charts draw; there is no fan speed (a PWM fan without a tachometer).
  await page.waitForFunction(() => Number(document.getElementById('chart-frequency').dataset.points) > 0, null, { timeout: 10000 });
  assert.deepEqual(await page.evaluate(() => ['frequency', 'pressure', 'fans'].map((c) => document.getElementById(`chart-${c}`).hidden)),
    [false, false, true]);
  assert.deepEqual(problems, []);
  await page.close();
});

test('an x86 mini PC: a policy per core, no GPU card; a VM: pressure and OOM kills only', async () => {
  const x86 = await open('x86');
  assert.equal(x86.shown.hidden.devfreq, true);
  assert.equal(await x86.page.evaluate(() => document.getElementById('card-sensor-hwmon').hidden), false, 'the it8613\'s card');
  assert.deepEqual(x86.shown.health.filter(([k]) => k.startsWith('CPU')).map(([k]) => k),
    ['CPU 0 powersave', 'CPU 1 powersave', 'CPU 2 powersave', 'CPU 3 powersave']);
  await x86.page.close();
  const vm = await open('vm');
  assert.deepEqual(vm.shown.hidden, { health: false, devfreq: true });
  assert.equal(await vm.page.evaluate(() => document.getElementById('card-sensor-hwmon').hidden), true, 'no hwmon channels: no card');
  assert.deepEqual(vm.shown.groups, ['Pressure, last 10 s (waiting for)', 'Clock'], 'no power, no cpufreq, no cooling in a VM');
  assert.deepEqual(vm.shown.health.map(([k]) => k), ['cpu', 'io', 'memory', 'OOM kills since boot', 'Synchronised']);
  // The clock is the kernel's, whatever the board: this machine's.
  assert.match(vm.shown.health.at(-1)[1], /^(yes|no), up to [0-9.]+ (µs|ms|s) off$/);
  assert.equal(vm.shown.banner, null);
  assert.deepEqual(vm.problems, []);
  await vm.page.close();
});
