// The dashboard in a real browser (Debian's chromium, headless, driven by playwright-core) against
// the real kiwi-agent on loopback ports. Run by ctest ("browser: dashboard") or by hand:
//   KIWI_AGENT_BIN=build/bin/kiwi-agent KIWI_PLUGIN_DIR=build/lib/kiwi-agent \
//   KIWI_TEST_PLUGIN_DIR=build/tests/plugins KIWI_SCREENSHOT_DIR=build/screenshots \
//   node --test tests/browser/
import { spawn, spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Agent, dashboardRoutes, env, fakeSysfs, fmt, launchChromium, procStatCores, until, writeThrottled } from './agent.mjs';

const SCREENSHOTS = process.env.KIWI_SCREENSHOT_DIR || join(tmpdir(), 'kiwi-screenshots');

// Known temperatures (°C) against the thresholds the test configures: warm 65, hot 70.
const ZONES = [['soc-thermal', 52.3], ['bigcore0-thermal', 66.6], ['bigcore1-thermal', 71.2],
  ['littlecore-thermal', 55.0], ['gpu-thermal', 49.8], ['npu-thermal', 48.9]];
const FREQ_KHZ = [1800000, 2256000, 408000, 1416000];
const ROUTES = dashboardRoutes({ temperature_warm_celsius: 65, temperature_hot_celsius: 70 });

let agent, staleAgent, context, page;
const userDataDir = mkdtempSync(join(tmpdir(), 'kiwi-chromium-'));
const pages = []; // { page, origin, requests: [], console: [] }
let phase = 'normal'; // console messages are tagged with the phase they came in
const snapshots = new Map(); // /api/current bodies the page received, by sequence

function watch(p, origin) {
  const rec = { page: p, origin, requests: [], console: [], files: [], samples: [] };
  p.on('request', (r) => rec.requests.push({ url: r.url(), headers: r.headers(), request: r }));
  p.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') rec.console.push({ phase, type: m.type(), text: m.text(), url: m.location().url });
  });
  p.on('pageerror', (e) => rec.console.push({ phase, type: 'pageerror', text: String(e) }));
  p.on('response', async (r) => {
    if (!new URL(r.url()).pathname.startsWith('/api/')) rec.files.push(r); // the page's own files
    if (new URL(r.url()).pathname === '/api/current' && r.status() === 200) {
      // The first poll answered: the page has an ETag to send from then on.
      if (rec.answered === undefined) rec.answered = rec.requests.findIndex((x) => x.request === r.request());
      try { const d = await r.json(); snapshots.set(d.sequence, d); rec.samples.push(d); } catch { /* page closed */ }
    }
  });
  pages.push(rec);
  return rec;
}

const state = (p) => p.evaluate(() => document.body.dataset.state);
const waitState = (p, s, ms) => p.waitForFunction((want) => document.body.dataset.state === want, s, { timeout: ms, polling: 100 });

before(async () => {
  agent = new Agent({ extra: ROUTES });
  const sys = join(agent.dir, 'sys');
  fakeSysfs(sys, ZONES, procStatCores(), FREQ_KHZ);
  agent.agentLines = `sysfs = ${JSON.stringify(sys)}`;
  await agent.start();
  // The CPU sensor reports usage from its second reading on (it needs two sets of counters).
  // Wait for that, so the page's first history request names cpu_usage_ratio, as it does on any
  // agent that has run for a second (but see the history test): a page that loads first leaves
  // it out until its next request, and the chart assertions below would race the agent's second
  // tick.
  await until(async () => {
    const cur = await agent.json('/api/current').catch(() => null);
    return ((cur && cur.body.sensors && cur.body.sensors.cpu && cur.body.sensors.cpu.metrics) || [])
      .some((m) => m.name === 'cpu_usage_ratio');
  }, 5000, 'the first CPU usage reading');
  context = await launchChromium(userDataDir);
  page = context.pages()[0] || (await context.newPage());
  watch(page, agent.origin);
});

after(async () => {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  if (staleAgent) await staleAgent.cleanup();
  if (agent) await agent.cleanup();
});

test('the page loads from the agent and goes live, with the configured options', async () => {
  await page.goto(`${agent.origin}/`);
  await waitState(page, 'live', 10000);
  const cur = (await agent.json('/api/current')).body;
  const head = await page.evaluate(() => ({
    poll: document.body.dataset.pollMs, warm: document.body.dataset.temperatureWarm, hot: document.body.dataset.temperatureHot,
    host: document.getElementById('host').textContent, version: document.getElementById('version').textContent,
    uptime: document.getElementById('uptime').textContent, interval: document.getElementById('interval').textContent,
    banner: document.getElementById('banner').hidden, title: document.title,
    links: [...document.querySelectorAll('footer a')].map((a) => a.getAttribute('href')),
  }));
  assert.deepEqual([head.poll, head.warm, head.hot], ['1000', '65', '70'], 'route options written into <body>');
  assert.equal(head.host, cur.host);
  assert.equal(head.version, cur.agent.version);
  assert.match(head.uptime, /^\d+ (s|min)$/);
  assert.equal(head.interval, `${cur.interval_seconds} s`);
  assert.equal(head.banner, true, 'no banner while live');
  // Relative, so the page works under another agent's /peer/<name>/ (fleet.test.mjs).
  assert.deepEqual(head.links, ['api/current', 'api/history?limit=120', 'api/alerts', 'metrics', 'assets/README.md']);
  // Page weight: everything but the API, as transferred (gzip), under 100 kB with uPlot.
  const files = pages[0].files;
  assert.deepEqual(files.map((r) => new URL(r.url()).pathname).sort(),
    ['/', '/assets/app.js', '/assets/style.css', '/assets/uPlot.iife.min.js', '/assets/uPlot.min.css']);
  let bytes = 0;
  for (const r of files) {
    bytes += (await r.request().sizes()).responseBodySize;
    assert.equal((await r.allHeaders())['content-encoding'], 'gzip', `${r.url()} is sent gzipped`);
  }
  assert.ok(bytes < 100 * 1024, `page weight ${bytes} bytes`);
  console.log(`# page weight: ${bytes} bytes gzipped (HTML, JS, CSS, uPlot)`);
  // The docs link is served by the agent too.
  const docs = await fetch(`${agent.origin}/assets/README.md`);
  assert.equal(docs.status, 200);
  assert.match(await docs.text(), /kiwi-agent/);
});

test('cards show the values of /api/current, formatted for people', async () => {
  await page.waitForFunction(() => ['cpu', 'thermal', 'memory', 'storage']
    .every((c) => document.getElementById(`card-${c}`).dataset.status === 'ok'), null, { timeout: 10000 });
  // The values on screen and the sequence they belong to, read in one go.
  const shown = await page.evaluate(() => ({
    sequence: Number(document.body.dataset.sequence),
    values: [...document.querySelectorAll('.card .v')].map((el) => ({
      card: el.closest('.card').dataset.plugin, metric: el.dataset.metric, label: el.dataset.label ?? null,
      value: el.dataset.value === undefined ? null : Number(el.dataset.value), text: el.textContent })),
    temps: [...document.querySelectorAll('#card-thermal .temps .row')].map((r) => ({
      name: r.querySelector('dt').firstChild.textContent, level: r.dataset.level, hottest: r.classList.contains('hottest') })),
    bigLevel: document.querySelector('#card-thermal .big').dataset.level,
    hidden: { network: document.getElementById('card-network').hidden, diskio: document.getElementById('card-diskio').hidden },
  }));
  const snap = await until(() => snapshots.get(shown.sequence), 5000, `the page's /api/current body #${shown.sequence}`);
  const find = (metric, label = null) => shown.values.filter((v) => v.metric === metric && v.label === label);
  const sensorOf = (plugin) => Object.values(snap.sensors).find((s) => s.plugin === plugin);
  const metricsOf = (plugin) => sensorOf(plugin).metrics;
  const labelOf = (m) => (m.labels ? Object.values(m.labels)[0] : null);
  const expectText = {
    cpu_usage_ratio: (v) => fmt.pct(v, 1), cpu_core_usage_ratio: (v) => fmt.pct(v), cpu_frequency_hertz: fmt.hz,
    cpu_load1: fmt.load, cpu_load5: fmt.load, cpu_load15: fmt.load,
    thermal_celsius: fmt.c, thermal_max_celsius: fmt.c,
    memory_used_bytes: fmt.iec, memory_total_bytes: fmt.iec, memory_available_bytes: fmt.iec,
    memory_cached_bytes: fmt.iec, memory_buffers_bytes: fmt.iec, memory_used_ratio: (v) => fmt.pct(v),
    storage_used_bytes: fmt.iec, storage_size_bytes: fmt.iec, storage_available_bytes: fmt.iec,
    storage_used_ratio: (v) => fmt.pct(v),
    network_receive_bytes_per_second: fmt.rate, network_transmit_bytes_per_second: fmt.rate,
    diskio_read_bytes_per_second: fmt.rate, diskio_write_bytes_per_second: fmt.rate,
  };
  // Network and disk I/O cards show only where the agent runs those sensors.
  const optional = ['network', 'diskio'].filter((p) => sensorOf(p));
  for (const p of ['network', 'diskio']) assert.equal(shown.hidden[p], !sensorOf(p), `${p} card shown iff the sensor runs`);
  let compared = 0;
  for (const plugin of ['cpu', 'thermal', 'memory', 'storage', ...optional.filter((p) => sensorOf(p).status === 'ok')]) {
    for (const m of metricsOf(plugin)) {
      const want = expectText[m.name];
      if (!want) continue; // not on a card (cpu_mode_ratio, inodes, ...)
      const els = find(m.name, labelOf(m));
      assert.ok(els.length >= 1, `${plugin} card shows ${m.name}${m.labels ? JSON.stringify(m.labels) : ''}`);
      for (const el of els) {
        assert.equal(el.value, m.value, `${m.name} ${labelOf(m) ?? ''}: raw value`);
        assert.equal(el.text, want(m.value), `${m.name} ${labelOf(m) ?? ''}: formatted`);
        compared++;
      }
    }
  }
  assert.ok(compared >= 15, `compared ${compared} values`);
  // Swap: "none" where the machine has none, else used / total.
  const swapTotal = metricsOf('memory').find((m) => m.name === 'memory_swap_total_bytes').value;
  assert.equal(find('memory_swap_total_bytes')[0].text, swapTotal > 0 ? fmt.iec(swapTotal) : 'none');
  // The known sysfs tree: exact strings, thresholds from the options, the hottest highlighted.
  assert.equal(find('thermal_celsius', 'bigcore1-thermal')[0].text, '71.2 °C');
  assert.equal(find('cpu_frequency_hertz', '0')[0].text, '1.80 GHz');
  if (procStatCores() > 2) assert.equal(find('cpu_frequency_hertz', '2')[0].text, '408 MHz');
  const level = Object.fromEntries(shown.temps.map((t) => [t.name, t.level]));
  assert.deepEqual(level, { 'bigcore0-thermal': 'warn', 'bigcore1-thermal': 'crit', 'gpu-thermal': 'ok',
    'littlecore-thermal': 'ok', 'npu-thermal': 'ok', 'soc-thermal': 'ok' });
  assert.deepEqual(shown.temps.filter((t) => t.hottest).map((t) => t.name), ['bigcore1-thermal']);
  assert.equal(shown.bigLevel, 'crit');
});

test("the board's own cards: power, frequency against its maximum, cooling, pressure, GPU", async () => {
  await page.waitForFunction(() => ['health', 'devfreq'].every((c) => document.getElementById(`card-${c}`).dataset.status === 'ok'),
    null, { timeout: 10000 });
  const shown = await page.evaluate(() => ({
    sequence: Number(document.body.dataset.sequence),
    hidden: ['health', 'devfreq'].map((c) => document.getElementById(`card-${c}`).hidden),
    flags: [...document.querySelectorAll('#card-health .row[data-flag]')].map((r) => [r.dataset.flag, r.dataset.level, r.querySelector('.v').textContent]),
    values: [...document.querySelectorAll('#card-health .v, #card-devfreq .v')].map((el) => ({
      metric: el.dataset.metric, label: el.dataset.label ?? null, value: Number(el.dataset.value), text: el.textContent })),
    badge: (document.querySelector('#card-health .badge[data-metric="cpufreq_capped"]') || {}).textContent,
    cpus: document.querySelector('#card-health .row:has([data-metric="cpufreq_frequency_hertz"]) dt').textContent,
    ownCards: [...document.querySelectorAll('.grid .card')].map((c) => c.dataset.plugin),
  }));
  const snap = await until(() => snapshots.get(shown.sequence), 5000, `the page's /api/current body #${shown.sequence}`);
  assert.deepEqual(shown.hidden, [false, false]);
  // power, cpufreq, pressure and clock are drawn on the board-health card, not on cards of their own.
  for (const p of ['power', 'cpufreq', 'pressure', 'clock']) assert.ok(!shown.ownCards.includes(p), `no card of its own for ${p}`);
  assert.deepEqual(shown.flags, [['under_voltage', 'ok', 'no'], ['frequency_capped', 'ok', 'no'], ['throttled', 'ok', 'no'],
    ['soft_temperature_limit', 'ok', 'no']]);
  const text = (metric, label = null) => shown.values.filter((v) => v.metric === metric && v.label === label).map((v) => v.text);
  assert.deepEqual(text('cpufreq_frequency_hertz', 'policy0'), [fmt.hz(FREQ_KHZ[0] * 1000)]);
  assert.deepEqual(text('cpufreq_hardware_max_frequency_hertz', 'policy0'), ['2.26 GHz']);
  assert.equal(shown.badge, 'capped at 1.80 GHz');
  assert.match(shown.cpus, new RegExp(`^CPU 0(-${procStatCores() - 1})? schedutil$`));
  assert.deepEqual(text('thermal_cooling_state', 'pwm-fan'), ['1 of 4']);
  assert.deepEqual(text('devfreq_load_ratio', 'fb000000.gpu'), ['23%']);
  assert.deepEqual(text('devfreq_frequency_hertz', 'fb000000.gpu'), ['300 MHz']);
  assert.deepEqual(text('devfreq_max_frequency_hertz', 'fb000000.gpu'), ['1.00 GHz']);
  // Pressure: this machine's /proc/pressure, as the sample the page drew has it.
  const pressure = Object.values(snap.sensors).find((x) => x.plugin === 'pressure');
  const psi = ((pressure && pressure.metrics) || []).filter((m) => m.name === 'pressure_some_ratio' && m.labels.window === '10s');
  for (const m of psi) assert.deepEqual(text('pressure_some_ratio', m.labels.resource), [fmt.pct(m.value, 1)], `pressure ${m.labels.resource}`);
  if (!psi.length) console.log('# this kernel has no pressure stall information: the card shows none');
  // The clock: this machine's kernel's, as the sample the page drew has it.
  const clock = Object.values(snap.sensors).find((x) => x.plugin === 'clock');
  const clockValue = (name) => clock.metrics.find((m) => m.name === name).value;
  assert.deepEqual(text('clock_synchronized'), [clockValue('clock_synchronized') === 1 ? 'yes' : 'no']);
  assert.deepEqual(text('clock_max_error_seconds'), [fmt.seconds(clockValue('clock_max_error_seconds'))]);
  // Their charts: frequency always (the known tree), pressure where the kernel has PSI, no fans
  // (no hwmon fan here).
  await page.waitForFunction(() => Number(document.getElementById('chart-frequency').dataset.points) > 0, null, { timeout: 10000 });
  const charts = await page.evaluate(() => Object.fromEntries(['pressure', 'frequency', 'fans'].map((c) => [c, document.getElementById(`chart-${c}`).hidden])));
  assert.deepEqual(charts, { pressure: !psi.length, frequency: false, fans: true });
});

test('under-voltage now: a red banner with since when, and the flag on the card; gone when it clears', async () => {
  const sys = join(agent.dir, 'sys');
  const flipped = Date.now() / 1000;
  writeThrottled(sys, '0x50005'); // under-voltage and throttled, now and since boot
  await page.waitForFunction(() => document.getElementById('banner').dataset.kind === 'undervoltage' &&
    document.querySelector('#banner time'), null, { timeout: 10000, polling: 100 });
  const b = await page.evaluate(() => ({ hidden: document.getElementById('banner').hidden, text: document.getElementById('banner').textContent,
    since: Date.parse(document.querySelector('#banner time').dateTime) / 1000,
    flags: [...document.querySelectorAll('#card-health .row[data-flag]')].map((r) => [r.dataset.flag, r.dataset.level]) }));
  assert.equal(b.hidden, false);
  assert.match(b.text, /^UNDER-VOLTAGE Under-voltage detected since \d\d:\d\d:\d\d \(\d+ s\): the power supply cannot hold/);
  // The first sample that read the new word: after the write, within a sampling interval or two.
  assert.ok(b.since >= Math.floor(flipped) && b.since <= flipped + 3, `since ${b.since}, written at ${flipped}`);
  assert.deepEqual(b.flags, [['under_voltage', 'crit'], ['frequency_capped', 'ok'], ['throttled', 'crit'], ['soft_temperature_limit', 'ok']]);
  // The supply recovers: no banner; the card keeps "since boot" in amber.
  writeThrottled(sys, '0x50000');
  await page.waitForFunction(() => document.getElementById('banner').hidden, null, { timeout: 10000, polling: 100 });
  const after = await page.evaluate(() => [...document.querySelectorAll('#card-health .row[data-flag]')]
    .map((r) => [r.dataset.flag, r.dataset.level, r.querySelector('.v').textContent]));
  assert.deepEqual(after, [['under_voltage', 'warn', 'since boot'], ['frequency_capped', 'ok', 'no'], ['throttled', 'warn', 'since boot'],
    ['soft_temperature_limit', 'ok', 'no']]);
  writeThrottled(sys, '0x0');
});

// Non-transparent pixels on a chart's canvas: uPlot really drew something.
const inked = (id, p = page) => p.evaluate((chart) => {
  const c = document.querySelector(`#chart-${chart} canvas`);
  if (!c || !c.width) return 0;
  // Read from a copy: reading the chart's own canvas again and again makes Chrome warn.
  const copy = Object.assign(document.createElement('canvas'), { width: c.width, height: c.height });
  const ctx = copy.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(c, 0, 0);
  const px = ctx.getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < px.length; i += 4) n += px[i] > 0;
  return n;
}, id);
const points = (id) => page.evaluate((chart) => Number(document.getElementById(`chart-${chart}`).dataset.points || 0), id);

// The tooltip of a chart once the pointer is over it: its text, the hovered point's time (unix s),
// the chart's newest point, and per line the value it shows and that value's own time where it
// is not the hovered point's. Read in one go: the chart redraws with every sample.
const tooltipOf = (p, id) => p.waitForFunction((chart) => {
  const t = document.querySelector(`#chart-${chart} .tip`);
  if (!t || t.hidden || !t.textContent) return null;
  const n = (v) => (v === undefined ? null : Number(v));
  return { text: t.textContent, time: Number(t.dataset.time), newest: Number(document.getElementById(`chart-${chart}`).dataset.newest),
    lines: [...t.children].slice(1).map((r) => ({ value: n(r.dataset.value), at: n(r.dataset.at),
      ...(r.dataset.min !== undefined && { min: n(r.dataset.min), max: n(r.dataset.max) }) })) };
}, id, { timeout: 5000, polling: 50 }).then((h) => h.jsonValue());

// The ranges past 2 min: [range, step, seconds] (handlers/dashboard/README.md).
const RANGES = [['1h', '4', 3600], ['24h', '86', 86400], ['7d', '600', 7 * 86400], ['30d', '3600', 30 * 86400], ['1y', '43200', 365 * 86400]];

async function showRange(range) {
  await page.click(`.ranges button[data-range="${range}"]`);
  await page.waitForFunction((r) => document.getElementById('history').dataset.loadedRange === r, range, { timeout: 10000 });
  return page.evaluate(() => ({ ...document.getElementById('history').dataset }));
}

test('history charts draw points, for 2 min to 1 y, with a band from 24 h on, and a tooltip', async () => {
  await page.waitForFunction(() => ['cpu', 'memory', 'thermal']
    .every((c) => Number(document.getElementById(`chart-${c}`).dataset.points) > 0), null, { timeout: 10000 });
  for (const c of ['cpu', 'memory', 'thermal']) assert.ok((await inked(c)) > 500, `${c} chart has ink on its canvas`);
  assert.equal(await page.evaluate(() => document.getElementById('chart-thermal').dataset.series), String(ZONES.length));
  const historyUrls = () => pages[0].requests.map((r) => new URL(r.url)).filter((u) => u.pathname === '/api/history');

  // 2 min: the latest 120 samples, only the series the charts draw, CPU usage among them. Not
  // always in the first request: the page's first sample can be one taken moments after a late
  // one (under load), which has no rates (CPU usage, network, disk I/O: each needs two readings
  // some time apart); the page asks for it from the next sample on.
  const first = historyUrls()[0].searchParams;
  assert.equal(first.get('limit'), '120');
  assert.equal(first.get('step'), null);
  assert.ok(historyUrls().some((u) => u.searchParams.get('limit') === '120' && u.searchParams.get('series').split(',').includes('cpu_usage_ratio')),
    'a 2 min request names cpu_usage_ratio');
  for (const [range, step, seconds] of RANGES) {
    const sec = await showRange(range);
    // The agent downsamples: the page asked for since = now - range and step, got "step" back,
    // and on 24 h and longer a min-max band (the agent's `band`), which each line has.
    assert.equal(sec.api, 'full', `${range}: the agent's history API takes since/step/series`);
    assert.equal(sec.step, step);
    assert.ok((await points('cpu')) > 0, `${range}: cpu chart has points`);
    assert.ok((await points('cpu')) <= 1100, `${range}: about 1,000 points at most`);
    const u = historyUrls().filter((x) => x.searchParams.get('step') === step).at(-1).searchParams;
    assert.ok(Math.abs(Number(u.get('since')) - (Date.now() / 1000 - seconds)) < 10, `${range}: since = now - ${seconds}`);
    const banded = range !== '1h';
    assert.equal(u.get('band'), banded ? 'true' : null, `${range}: a band asked for on 24 h and longer only`);
    assert.equal(sec.band, String(banded), `${range}: the agent sent the band`);
    const bands = await page.evaluate(() => ['cpu', 'thermal'].map((c) => document.getElementById(`chart-${c}`).dataset));
    assert.deepEqual(bands.map((d) => d.bands), banded ? ['1', String(ZONES.length)] : ['0', '0'], `${range}: a band per line`);
  }
  await showRange('2m');

  // Hover the newest point of the CPU chart, once it has a few readings. The tooltip shows that
  // point's time and the CPU usage the agent's history has there; where that sample has none (see
  // above), the latest reading before it, with its own time (handlers/dashboard/README.md).
  await page.waitForFunction(() => Number(document.getElementById('chart-cpu').dataset.points) >= 3, null, { timeout: 10000 });
  await page.locator('#chart-cpu').scrollIntoViewIfNeeded();
  const over = await page.locator('#chart-cpu .u-over').boundingBox();
  await page.mouse.move(over.x + over.width - 1, over.y + over.height / 2); // its last pixel: the newest point
  const tip = await tooltipOf(page, 'cpu');
  await page.mouse.move(0, 0);
  assert.equal(tip.time, tip.newest, 'the pointer at the right edge is on the newest point');
  assert.match(tip.text, /^\d\d:\d\d:\d\dtotal (\d+\.\d%( at \d\d:\d\d:\d\d)?|no reading)$/);
  const h = (await agent.json(`/api/history?since=${tip.time - 3}&until=${tip.time}&series=cpu_usage_ratio`)).body;
  const k = h.timestamps.indexOf(tip.time);
  assert.ok(k >= 0, `the agent's history has the hovered sample ${tip.time}: ${JSON.stringify(h.timestamps)}`);
  const values = h.series.cpu_usage_ratio.values;
  let j = k;
  while (j >= 0 && values[j] === null && tip.time - h.timestamps[j] <= 2.5) j--;
  const shown = j >= 0 && values[j] !== null && tip.time - h.timestamps[j] <= 2.5 ? j : -1;
  if (shown !== k) console.log(`# the newest CPU point (${tip.time}) has no reading; the tooltip says ${JSON.stringify(tip.text)}`);
  assert.deepEqual(tip.lines, [shown < 0 ? { value: null, at: null }
    : { value: values[shown], at: shown === k ? null : h.timestamps[shown] }], `tooltip ${JSON.stringify(tip.text)} against the history`);
  assert.equal(tip.text, `${fmt.clock(tip.time)}total ${shown < 0 ? 'no reading'
    : `${fmt.pct(values[shown], 1)}${shown === k ? '' : ` at ${fmt.clock(h.timestamps[shown])}`}`}`);
});

test('the tooltip where a line has no reading: its latest reading with that time, or "no reading"', async () => {
  // Two minutes of samples at 25% CPU, but none at the newest (as after a sample taken moments
  // after a late one) and none at the oldest (as the agent's first sample).
  const p = await context.newPage();
  watch(p, agent.origin);
  await p.addInitScript(() => localStorage.clear());
  await p.route('**/api/history?*', (route) => {
    const h = simulatedHistory(route.request().url());
    const cpu = h.series.cpu_usage_ratio;
    if (cpu) cpu.values = cpu.values.map((v, i, all) => (i === 0 || i === all.length - 1 ? null : 0.25));
    return route.fulfill({ json: h });
  });
  await p.goto(`${agent.origin}/`);
  await p.waitForFunction(() => document.getElementById('history').dataset.loadedRange === '2m' &&
    Number(document.getElementById('chart-cpu').dataset.points) >= 100, null, { timeout: 10000 });
  await p.locator('#chart-cpu').scrollIntoViewIfNeeded(); // below the cards: the pointer hovers what is on screen
  const over = await p.locator('#chart-cpu .u-over').boundingBox();
  await p.mouse.move(over.x + over.width - 1, over.y + over.height / 2);
  const newest = await tooltipOf(p, 'cpu');
  assert.equal(newest.time, newest.newest);
  assert.deepEqual(newest.lines, [{ value: 0.25, at: newest.time - 1 }]);
  assert.equal(newest.text, `${fmt.clock(newest.time)}total 25.0% at ${fmt.clock(newest.time - 1)}`);
  await p.mouse.move(0, 0);
  await p.mouse.move(over.x + 1, over.y + over.height / 2);
  const oldest = await tooltipOf(p, 'cpu');
  assert.equal(oldest.time, oldest.newest - 119, 'the pointer at the left edge is on the oldest point');
  assert.deepEqual(oldest.lines, [{ value: null, at: null }]);
  assert.equal(oldest.text, `${fmt.clock(oldest.time)}total no reading`);
  await p.close();
});

// A year of history, simulated in the browser's network layer (the test agent is seconds old):
// the page's downsampled and incremental paths with their real sizes (700 to 1,000 points), with
// a band 10% either side of each line where asked for (`band=true`).
function simulatedHistory(url) {
  const q = new URL(url).searchParams;
  const now = Math.floor(Date.now() / 1000);
  const step = Number(q.get('step') || 0);
  const limit = Number(q.get('limit') || 120);
  let ts;
  if (step) {
    const first = Math.floor(Number(q.get('since')) / step) * step;
    ts = [];
    for (let t = first; t <= now; t += step) ts.push(t);
    ts = ts.slice(-limit);
  } else {
    ts = Array.from({ length: limit }, (_, i) => now - limit + 1 + i);
  }
  const all = {
    cpu_usage_ratio: { name: 'cpu_usage_ratio', unit: 'ratio', f: (t) => 0.5 + 0.4 * Math.sin(t / 300) },
    'thermal_celsius{sensor="soc"}': { name: 'thermal_celsius', labels: { sensor: 'soc' }, unit: 'celsius', f: (t) => 50 + 5 * Math.sin(t / 600) },
    memory_used_bytes: { name: 'memory_used_bytes', unit: 'bytes', f: () => 2 ** 31 },
    memory_cached_bytes: { name: 'memory_cached_bytes', unit: 'bytes', f: () => 2 ** 30 },
    memory_total_bytes: { name: 'memory_total_bytes', unit: 'bytes', f: () => 2 ** 33 },
  };
  const wanted = q.get('series') ? q.get('series').split(',') : null;
  const series = {};
  for (const [key, { f, ...meta }] of Object.entries(all)) {
    if (wanted && !wanted.includes(meta.name) && !wanted.includes(key)) continue;
    series[key] = { ...meta, values: ts.map(f) };
    if (step && q.get('band') === 'true') Object.assign(series[key], { min: ts.map((t) => f(t) * 0.9), max: ts.map((t) => f(t) * 1.1) });
  }
  return { version: 1, count: ts.length, ...(step ? { step } : {}), timestamps: ts, series };
}

test('a day to a year of history: 700 to 1,000 points per chart, then only the newest buckets are fetched', async () => {
  const p = await context.newPage();
  const rec = watch(p, agent.origin);
  await p.addInitScript(() => localStorage.clear()); // the chosen range is remembered per origin
  await p.route('**/api/history?*', (route) => route.fulfill({ json: simulatedHistory(route.request().url()) }));
  await p.goto(`${agent.origin}/`);
  await p.waitForFunction(() => document.getElementById('history').dataset.loadedRange === '2m' &&
    Number(document.getElementById('chart-cpu').dataset.points) > 0, null, { timeout: 10000 });
  const hist = () => rec.requests.map((r) => new URL(r.url)).filter((u) => u.pathname === '/api/history');
  const first = hist()[0].searchParams;
  assert.equal(first.get('limit'), '120');
  assert.equal(first.get('step'), null);
  // Only what the charts draw, by name (labelled series included by the agent), of those in the
  // page's first sample: one taken moments after a late one has no rates (see the test above).
  const charted = ['cpu_usage_ratio', 'thermal_celsius', 'memory_used_bytes', 'memory_cached_bytes',
    'network_receive_bytes_per_second', 'network_transmit_bytes_per_second', 'diskio_read_bytes_per_second', 'diskio_write_bytes_per_second',
    'pressure_some_ratio', 'cpufreq_frequency_hertz', 'hwmon_fan_rpm'];
  const names = (u) => u.searchParams.get('series').split(',');
  const sampled = new Set(Object.values((await until(() => rec.samples[0], 5000, 'the first sample')).sensors)
    .flatMap((s) => (s.metrics || []).map((m) => m.name)));
  assert.deepEqual(names(hist()[0]), charted.filter((n) => sampled.has(n)));
  assert.ok(names(hist().at(-1)).includes('cpu_usage_ratio'), 'the CPU chart drew: its series is asked for from then on');
  assert.ok(!/series=[^&]*%2C/.test(hist()[0].search), 'commas are sent as they are');

  const means = { '1h': '4 s', '24h': '86 s', '7d': '10 min', '30d': '1 h', '1y': '12 h' };
  for (const [range, step, seconds] of RANGES) {
    await p.click(`.ranges button[data-range="${range}"]`);
    await p.waitForFunction((r) => document.getElementById('history').dataset.loadedRange === r, range, { timeout: 10000 });
    const sec = await p.evaluate(() => ({ ...document.getElementById('history').dataset }));
    assert.equal(sec.api, 'full');
    assert.equal(sec.step, step);
    const u = hist().filter((x) => x.searchParams.get('step') === step).at(-1).searchParams;
    const now = Math.floor(Date.now() / 1000);
    assert.ok(Math.abs(Number(u.get('since')) - (now - seconds)) <= 5, `${range}: since = now - range`);
    const buckets = seconds / step;
    const pts = Number(await p.evaluate(() => document.getElementById('chart-cpu').dataset.points));
    assert.ok(pts >= buckets - 2 && pts <= buckets + 2, `${range}: about ${buckets} points, got ${pts}`);
    const note = await p.evaluate(() => document.getElementById('history-note').textContent);
    assert.match(note, new RegExp(`each point the mean of ${means[range]}${range === '1h' ? '\\.$' : '; the shaded band spans its lowest to highest sample\\.$'}`));
  }
  // The year's tooltip says what a point is, and gives its bucket's lowest and highest sample.
  assert.equal(await p.evaluate(() => document.getElementById('chart-cpu').dataset.bands), '1');
  await p.locator('#chart-cpu').scrollIntoViewIfNeeded();
  const over = await p.locator('#chart-cpu .u-over').boundingBox();
  await p.mouse.move(over.x + over.width / 2, over.y + over.height / 2);
  const tip = await tooltipOf(p, 'cpu');
  await p.mouse.move(0, 0);
  const [{ value, min, max }] = tip.lines;
  assert.ok(Math.abs(min - value * 0.9) < 1e-9 && Math.abs(max - value * 1.1) < 1e-9, `band ${min}..${max} around ${value}`);
  assert.ok(tip.text.endsWith(` · mean of 12 h (min–max)total ${fmt.pct(value, 1)} (${fmt.pct(min, 1)}–${fmt.pct(max, 1)})`), tip.text);
  // A line hidden from the legend takes its band with it (the temperature's band fills its plot).
  const soc = p.locator('#chart-thermal .u-legend .u-series:not(.band-edge)', { hasText: 'soc' });
  const shown = await inked('thermal', p);
  await soc.click();
  const hidden = await inked('thermal', p);
  assert.ok(hidden < shown / 3, `ink with the line shown ${shown}, hidden ${hidden}`);
  await soc.click();
  assert.equal(await inked('thermal', p), shown, 'shown again, line and band');
  // 1 h again, then live: the next requests ask only for the newest bucket on, and the chart keeps its length.
  await p.click('.ranges button[data-range="1h"]');
  await p.waitForFunction(() => document.getElementById('history').dataset.loadedRange === '1h', null, { timeout: 10000 });
  const full = hist().filter((x) => x.searchParams.get('step') === '4').at(-1);
  const inc = await until(() => hist().filter((x) => x.searchParams.get('step') === '4' &&
    Number(x.searchParams.get('since')) > Number(full.searchParams.get('since')) + 3000).at(-1), 10000, 'an incremental 1 h request');
  assert.ok(Number(inc.searchParams.get('limit')) <= 5, 'an incremental request asks for a few buckets');
  await until(async () => {
    const pts = Number(await p.evaluate(() => document.getElementById('chart-cpu').dataset.points));
    return pts >= 898 && pts <= 902;
  }, 5000, 'the merged 1 h chart to keep about 900 points');
  await p.close();
});

test('an older agent without since/step/series: the charts fall back to the last 120 samples', async () => {
  const p = await context.newPage();
  const rec = watch(p, agent.origin);
  rec.older = true;
  await p.addInitScript(() => localStorage.clear());
  // What the history handler answered before those parameters: 400 naming the first unknown one.
  await p.route('**/api/history?*', (route) => {
    const q = new URL(route.request().url()).searchParams;
    const unknown = [...q.keys()].find((k) => k !== 'limit');
    if (!unknown) return route.continue();
    return route.fulfill({ status: 400, json: { error: { status: 400, parameter: unknown, message: 'unknown parameter; accepted: limit' } } });
  });
  await p.goto(`${agent.origin}/`);
  await p.waitForFunction(() => document.getElementById('history').dataset.loadedRange === '2m', null, { timeout: 10000 });
  await p.click('.ranges button[data-range="1h"]');
  await p.waitForFunction(() => document.getElementById('history').dataset.loadedRange === '1h', null, { timeout: 10000 });
  const sec = await p.evaluate(() => ({ ...document.getElementById('history').dataset, note: document.getElementById('history-note').textContent,
    points: Number(document.getElementById('chart-cpu').dataset.points) }));
  assert.equal(sec.api, 'basic');
  assert.ok(sec.points > 0, 'the chart is drawn all the same');
  assert.match(sec.note, /cannot downsample .* showing the last 2 min/);
  assert.ok(rec.requests.some((r) => new URL(r.url).search === '?limit=120'), 'fell back to limit=120');
  await p.close();
});

test('an agent without the band: 400 naming `band` once, then the lines alone on every coarse range', async () => {
  const p = await context.newPage();
  const rec = watch(p, agent.origin);
  rec.older = true; // its 400s are on purpose
  await p.addInitScript(() => localStorage.clear());
  // What the history handler answers for a parameter it does not know; the rest from the real agent.
  await p.route('**/api/history?*', (route) => (new URL(route.request().url()).searchParams.has('band')
    ? route.fulfill({ status: 400, json: { error: { status: 400, parameter: 'band', message: 'unknown parameter' } } })
    : route.continue()));
  await p.goto(`${agent.origin}/`);
  await p.waitForFunction(() => document.getElementById('history').dataset.loadedRange === '2m', null, { timeout: 10000 });
  const asked = () => rec.requests.map((r) => new URL(r.url)).filter((u) => u.pathname === '/api/history' && u.searchParams.has('step'));
  for (const [range, step] of RANGES.slice(1)) {
    await p.click(`.ranges button[data-range="${range}"]`);
    await p.waitForFunction((r) => document.getElementById('history').dataset.loadedRange === r, range, { timeout: 10000 });
    const sec = await p.evaluate(() => ({ ...document.getElementById('history').dataset, note: document.getElementById('history-note').textContent,
      points: Number(document.getElementById('chart-cpu').dataset.points), bands: document.getElementById('chart-cpu').dataset.bands }));
    assert.deepEqual([sec.api, sec.step, sec.band, sec.bands], ['full', step, 'false', '0'], `${range}: downsampled, no band`);
    assert.ok(sec.points > 0, `${range}: the lines are drawn`);
    assert.doesNotMatch(sec.note, /band/);
    assert.ok(await p.evaluate(() => document.querySelector('#chart-cpu > .csv').hidden), `${range}: no CSV link (format=csv came with band)`);
  }
  const withBand = asked().filter((u) => u.searchParams.has('band'));
  assert.equal(withBand.length, 1, `asked once with band, then no more: ${withBand.map((u) => u.search).join(' ')}`);
  assert.equal(withBand[0].searchParams.get('step'), '86', 'the first range with a band (24 h) asked');
  await p.close();
});

// A month of history at 1 Hz written by kiwi-bench-fill (through the agent's own Store, ending
// now) into a second agent's data directory, two of its series reported live by an exec sensor so
// the page charts them: the 30 d and 1 y views as the agent answers them from its summaries (the
// default retentions: raw samples 24 h, minutes 30 d, hours a year), bands included.
const FILL_HOURS = 750;
test('a month of stored history: the 30 d and 1 y views, with their bands, tooltip and CSV link; the range buttons on a phone', async () => {
  const month = new Agent({ extra: `${ROUTES}
[[sensor]]
plugin = "exec"
name = "fill"
[sensor.options]
command = ["/usr/bin/printf", ${JSON.stringify('kiwi_fill_ratio_0{index="1"} 0.5\nkiwi_fill_ratio_0{index="2"} 0.6\n')}]
` });
  const p = await context.newPage();
  try {
    const fill = spawnSync(env('KIWI_BENCH_FILL'), [join(month.dir, 'data'), '--hours', String(FILL_HOURS), '--series', '3'], { encoding: 'utf8' });
    assert.equal(fill.status, 0, `kiwi-bench-fill: ${fill.stderr}`);
    await month.start();
    const rec = watch(p, month.origin);
    await p.addInitScript(() => localStorage.setItem('kiwi.range', '30d'));
    await p.goto(`${month.origin}/`);
    const chart = 'sensor-fill-none'; // the exec sensor's chart (no unit: the name ends in _0): kiwi_fill_ratio_0{index="1"}, {index="2"}
    const view = async (range) => {
      await p.waitForFunction(([r, c]) => document.getElementById('history').dataset.loadedRange === r &&
        Number((document.getElementById(`chart-${c}`) || { dataset: {} }).dataset.points) > 0, [range, chart], { timeout: 15000 });
      return p.evaluate((c) => ({ ...document.getElementById('history').dataset, ...document.getElementById(`chart-${c}`).dataset,
        note: document.getElementById('history-note').textContent }), chart);
    };
    const asked = (step) => rec.requests.map((r) => new URL(r.url)).filter((u) => u.pathname === '/api/history' && u.searchParams.get('step') === step).at(-1);
    const now = () => Date.now() / 1000;

    // 30 d: since = now - 30 d at 1 h, with the band: a point for each hour of the 30 days.
    let v = await view('30d');
    let u = asked('3600');
    assert.ok(Math.abs(Number(u.searchParams.get('since')) - (now() - 30 * 86400)) < 30, `30 d: since ${u.searchParams.get('since')}`);
    assert.equal(u.searchParams.get('band'), 'true');
    assert.deepEqual([v.step, v.series, v.bands], ['3600', '2', '2'], '30 d: two lines, each with its band');
    assert.ok(v.points >= 2 * 719 && v.points <= 2 * 722, `30 d: 720 hourly points per line, got ${v.points}`);
    assert.ok(Number(v.newest) > now() - 3600, 'the newest point is this hour');
    assert.match(v.note, /^Showing the last 30 days, each point the mean of 1 h; the shaded band spans its lowest to highest sample\.$/);
    // The band is drawn: the fill swings 0.1..0.9 within every hour, so the band covers most of the plot.
    const plotArea = await p.evaluate((c) => { const r = document.querySelector(`#chart-${c} .u-over`).getBoundingClientRect(); return r.width * r.height * devicePixelRatio ** 2; }, chart);
    const ink = await inked(chart, p);
    assert.ok(ink > 0.5 * plotArea, `the bands fill the plot: ${ink} inked pixels of ${Math.round(plotArea)}`);
    // The tooltip: the hour's mean, its lowest and highest sample, as the agent answers them.
    await p.locator(`#chart-${chart}`).scrollIntoViewIfNeeded();
    const over = await p.locator(`#chart-${chart} .u-over`).boundingBox();
    await p.mouse.move(over.x + over.width / 2, over.y + over.height / 2);
    const tip = await tooltipOf(p, chart);
    await p.mouse.move(0, 0);
    const h = (await month.json(`/api/history?since=${tip.time}&until=${tip.time + 3599}&step=3600&band=true&series=kiwi_fill_ratio_0`)).body;
    const s1 = h.series['kiwi_fill_ratio_0{index="1"}'];
    assert.equal(h.timestamps[0], tip.time, 'the hovered hour');
    assert.deepEqual(tip.lines[0], { value: s1.values[0], at: null, min: s1.min[0], max: s1.max[0] });
    assert.ok(s1.min[0] < 0.15 && s1.max[0] > 0.85, `an hour of the fill spans 0.1..0.9: ${s1.min[0]}..${s1.max[0]}`);
    assert.match(tip.text, / · mean of 1 h \(min–max\)/);
    // The chart's CSV link: its 30 d at 1 h, each line with its band, as the agent answers it.
    const link = await p.evaluate((c) => { const a = document.querySelector(`#chart-${c} > .csv`); return { href: a.getAttribute('href'), hidden: a.hidden, download: a.download }; }, chart);
    assert.deepEqual([link.hidden, link.download], [false, `${chart}-30d.csv`]);
    assert.match(link.href, /^api\/history\?/, 'relative to the page');
    const csv = await fetch(new URL(link.href, `${month.origin}/`));
    assert.equal(csv.status, 200, link.href);
    assert.match(csv.headers.get('content-type'), /^text\/csv/);
    const rows = (await csv.text()).trim().split('\r\n');
    const key = (i, end = '') => `"kiwi_fill_ratio_0{index=""${i}""}${end}"`; // RFC 4180: quoted, its quotes doubled
    assert.equal(rows[0], ['timestamp', key(1), key(1, ':min'), key(1, ':max'), key(2), key(2, ':min'), key(2, ':max')].join(','));
    assert.ok(rows.length - 1 >= 719 && rows.length - 1 <= 722, `30 d at 1 h: ${rows.length - 1} rows`);
    assert.equal(Number(rows[3].split(',')[0]) - Number(rows[2].split(',')[0]), 3600, 'an hour apart (the first one starts at since)');

    // 1 y: since = now - 365 d at 12 h; the month fills its last buckets.
    await p.click('.ranges button[data-range="1y"]');
    v = await view('1y');
    u = asked('43200');
    assert.ok(Math.abs(Number(u.searchParams.get('since')) - (now() - 365 * 86400)) < 30, `1 y: since ${u.searchParams.get('since')}`);
    assert.equal(u.searchParams.get('band'), 'true');
    const buckets = Math.ceil((FILL_HOURS * 3600) / 43200);
    assert.ok(v.points >= 2 * buckets && v.points <= 2 * (buckets + 2), `1 y: ${buckets}-${buckets + 2} points per line, got ${v.points / 2}`);
    assert.deepEqual([v.step, v.bands], ['43200', '2']);
    mkdirSync(SCREENSHOTS, { recursive: true });
    await p.locator('#history').screenshot({ path: join(SCREENSHOTS, 'dashboard-1y.png') });
    // A phone: the six range buttons on the screen, each a thumb's size.
    await p.setViewportSize({ width: 390, height: 844 });
    await until(async () => (await p.evaluate(() => document.documentElement.scrollWidth)) <= 390, 5000, 'no horizontal scrolling at 390 px');
    const buttons = await p.evaluate(() => [...document.querySelectorAll('.ranges button')].map((b) => b.getBoundingClientRect().toJSON()));
    assert.equal(buttons.length, 6);
    for (const b of buttons) assert.ok(b.left >= 0 && b.right <= 390 && b.width >= 44 && b.height >= 36, `a range button at ${JSON.stringify(b)}`);
    await p.click('.ranges button[data-range="30d"]');
    await view('30d');
    await p.locator('#history').screenshot({ path: join(SCREENSHOTS, 'dashboard-30d-phone.png') });
  } finally {
    await p.close();
    await month.cleanup();
  }
});

test('screenshots: desktop (light and dark) and phone', async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await waitState(page, 'live', 10000);
  await page.evaluate(() => window.scrollTo(0, 0)); // the tooltip test scrolled to the charts
  await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-desktop.png') });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForFunction(() => Number(document.getElementById('chart-cpu').dataset.points) > 0, null, { timeout: 10000 });
  await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-desktop-dark.png') });
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 390, height: 844 });
  // Responsive: nothing wider than the phone's screen.
  await until(async () => (await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 5000, 'no horizontal scrolling at 390 px');
  await page.waitForFunction(() => {
    const c = document.querySelector('#chart-cpu canvas');
    return c && c.getBoundingClientRect().right <= 390;
  }, null, { timeout: 5000 });
  await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-phone.png'), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  console.log(`# screenshots in ${SCREENSHOTS}`);
});

test('a stale snapshot shows the stale banner with the age of the last sample', async () => {
  // The collector thread stopped (as a stuck disk would stop it) against stale_after = 1s: the
  // agent answers, the data is old. (A slow sensor no longer stalls the collector.)
  staleAgent = new Agent({
    collector: 'stale_after = "1s"',
    extra: `[[sensor]]\nplugin = "cpu"\n${ROUTES}`,
  });
  await staleAgent.start();
  const p = await context.newPage();
  watch(p, staleAgent.origin);
  await p.goto(`${staleAgent.origin}/`);
  await waitState(p, 'live', 10000);
  const freeze = spawn(join(env('KIWI_TEST_PLUGIN_DIR'), 'kiwi-test-freeze-thread'),
    [String(staleAgent.proc.pid), 'kiwi-collector', '12'], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    freeze.stdout.once('data', resolve);
    freeze.once('exit', (code) => reject(new Error(`kiwi-test-freeze-thread exited with ${code}`)));
  });
  await waitState(p, 'stale', 15000);
  const banner = await p.evaluate(() => ({ kind: document.getElementById('banner').dataset.kind,
    hidden: document.getElementById('banner').hidden, text: document.getElementById('banner').textContent }));
  assert.equal(banner.kind, 'stale');
  assert.equal(banner.hidden, false);
  assert.match(banner.text, /STALE The last sample is \d+ s old \(\d\d:\d\d:\d\d\)/);
  await p.close();
  freeze.kill();
  await staleAgent.cleanup();
  staleAgent = null;
});

test('before the first sample the page says loading, not unreachable, then goes live', async () => {
  // The port opens before the first sample; with a 10 s interval the first tick waits up to 5 s
  // for a sensor whose first sample takes 8 s, so /api/current answers 503 for about 5 s.
  const slow = new Agent({
    collector: 'interval = "10s"',
    extra: `[[sensor]]\nplugin = "cpu"\n\n[[sensor]]\nplugin = ${JSON.stringify(join(env('KIWI_TEST_PLUGIN_DIR'), 'test-slow_sensor.so'))}\n` +
      `name = "slow"\n[sensor.options]\nsleep_ms = 8000\nfirst_only = true\n${ROUTES}`,
  });
  try {
    await slow.start();
    const p = await context.newPage();  // not watched: the 503s are logged by the browser
    await p.goto(`${slow.origin}/`);
    const early = await slow.json('/api/current');
    assert.equal(early.status, 503, 'the first sample came before the page: the test proves nothing');
    await new Promise((r) => setTimeout(r, 1500));  // a poll or two answered 503
    assert.equal(await p.evaluate(() => document.body.dataset.state), 'loading');
    assert.equal(await p.evaluate(() => document.getElementById('banner').dataset.kind), 'loading');
    await waitState(p, 'live', 15000);
    await p.close();
  } finally {
    await slow.cleanup();
  }
});

test('agent stopped: the unreachable banner; restarted on its port: the page recovers by itself', async () => {
  await waitState(page, 'live', 10000);
  const port = agent.port;
  phase = 'unreachable';
  assert.equal(await agent.stop(), 0);
  await waitState(page, 'unreachable', 10000);
  const text = await page.evaluate(() => document.getElementById('banner').textContent);
  assert.match(text, /^UNREACHABLE Cannot get api\/current: .+ Last contact \d+ s ago; showing the last data received\. Retrying every 1 s\.$/);
  // The last data stays on screen.
  assert.equal(await page.evaluate(() => document.getElementById('card-cpu').dataset.status), 'ok');
  await agent.start(port);
  await waitState(page, 'live', 15000);
  phase = 'normal';
  assert.equal(await page.evaluate(() => document.getElementById('banner').hidden), true);
  await page.waitForFunction(() => Number(document.getElementById('chart-cpu').dataset.points) > 0, null, { timeout: 10000 });
});

test('nothing but the agent was asked for anything, 304s were used, and the console stayed clean', async () => {
  assert.ok(pages[0].requests.filter((r) => new URL(r.url).pathname === '/api/current').length >= 5, 'the main page kept polling');
  for (const rec of pages) {
    const foreign = rec.requests.filter((r) => !r.url.startsWith(`${rec.origin}/`) && !r.url.startsWith('data:'));
    assert.deepEqual(foreign.map((r) => r.url), [], `requests from the page of ${rec.origin} to another origin`);
    const polls = rec.requests.map((r, i) => ({ ...r, i })).filter((r) => new URL(r.url).pathname === '/api/current');
    assert.ok(polls.length >= 1);
    // (A first poll that timed out on a busy machine left nothing to send yet.)
    assert.ok(rec.answered >= 0, `a poll of ${rec.origin} was answered`);
    assert.ok(polls.filter((r) => r.i > rec.answered).every((r) => r.headers['if-none-match']),
      'every poll after the first answered one sends If-None-Match');
  }
  const allowed = (rec, m) =>
    // Chromium logs each refused connection while the agent is down.
    (m.phase === 'unreachable' && /net::ERR_CONNECTION_(REFUSED|RESET)|ERR_EMPTY_RESPONSE/.test(m.text)) ||
    // The simulated older agent answers the newer history parameters with 400 (on purpose).
    (rec.older && /status of 400/.test(m.text) && /\/api\/history\?/.test(m.url));
  const bad = pages.flatMap((rec) => rec.console.filter((m) => !allowed(rec, m)));
  assert.deepEqual(bad, [], 'console errors and warnings');
});

test('a bad dashboard option stops the agent with exit code 2 and says which', async () => {
  for (const [options, want] of [['poll_interval = "fast"', /options\.poll_interval.*expected a duration.*not "fast"/],
    ['poll_interval = "100ms"', /options\.poll_interval.*out of range: 1s\.\.10m/],
    ['temperature_warm_celsius = 85', /temperature_warm_celsius \(85\) must be below temperature_hot_celsius \(80\)/]]) {
    const bad = new Agent({ extra: `[[route]]\npath = "/"\nhandler = "dashboard"\n[route.options]\n${options}\n` });
    try {
      await assert.rejects(bad.start(), (e) => /exit code 2/.test(e.message) && want.test(e.message), options);
    } finally {
      await bad.cleanup();
    }
  }
});
