// The dashboard shows every sensor (issue 14, item 6), in Debian's chromium (headless) against the
// real kiwi-agent on a loopback port: a sensor of a plugin the page has no card for gets a generic
// card (its metrics with units) and, for its gauges, a history chart; two instances of one plugin
// give two cards; a sensor in error says why; label text a plugin made up shows as text; a reload
// that adds or removes a sensor adds or removes its card without a page reload. Run by ctest
// ("browser: every sensor") or by hand with the variables dashboard.test.mjs names.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Agent, dashboardRoutes, env, fmt, launchChromium, until } from './agent.mjs';

const SCREENSHOTS = process.env.KIWI_SCREENSHOT_DIR || join(tmpdir(), 'kiwi-screenshots');
const plugin = (file) => JSON.stringify(join(env('KIWI_TEST_PLUGIN_DIR'), file));
// Label text as an exec script could print it: it must reach the screen as these characters.
const HOSTILE = '<img src=x onerror="window.__kiwiXss=1">';

const ROUTES = dashboardRoutes();
// Two storage instances on different file systems ("/" and the tmpfs mounts, of which a machine
// (a bare chroot) may have none), the README's example plugin, two instances of a test plugin (one with ten
// zones, more than a chart draws and a card shows unfolded; the other read every other second) and
// one that always fails.
const TMPFS = `
[[sensor]]
plugin = "storage"
name = "tmpfs"
[sensor.options]
include_types = ["tmpfs"]
exclude_types = []
exclude_mounts = []
`;
const sensors = (tmpfs) => `
[[sensor]]
plugin = "storage"
${tmpfs ? TMPFS : ''}
[[sensor]]
plugin = ${plugin('example-uptime.so')}
name = "uptime"

[[sensor]]
plugin = ${plugin('test-labelled_sensor.so')}
name = "zones"
[sensor.options]
label = ${JSON.stringify(HOSTILE)}
series = 10

[[sensor]]
plugin = ${plugin('test-labelled_sensor.so')}
name = "zones-b"
interval = "2s"
[sensor.options]
label = "b"
celsius = 60

[[sensor]]
plugin = ${plugin('test-throwing_sensor.so')}
name = "broken"
`;
const LATE = `
[[sensor]]
plugin = ${plugin('test-labelled_sensor.so')}
name = "late"
[sensor.options]
label = "late"
`;

let agent, context, page;
const userDataDir = mkdtempSync(join(tmpdir(), 'kiwi-chromium-'));
const problems = []; // console errors and warnings, page errors
const samples = new Map(); // /api/current bodies the page received, by sequence
const historyUrls = [];

before(async () => {
  agent = new Agent({ extra: sensors(true) + ROUTES });
  await agent.start();
  context = await launchChromium(userDataDir);
  page = context.pages()[0] || (await context.newPage());
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('request', (r) => { if (new URL(r.url()).pathname === '/api/history') historyUrls.push(new URL(r.url())); });
  page.on('response', async (r) => {
    if (new URL(r.url()).pathname !== '/api/current' || r.status() !== 200) return;
    try { const d = await r.json(); samples.set(d.sequence, d); } catch { /* page closed */ }
  });
  await page.goto(`${agent.origin}/`);
  await page.waitForFunction(() => document.body.dataset.state === 'live', null, { timeout: 10000, polling: 100 });
});

after(async () => {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  if (agent) await agent.cleanup();
});

// Every card on the page, in order, and what the test needs of each; with `withSequence`, also the
// sequence of the sample they show, read in the same go (the page renders a sample in one task, so
// the cards and the sequence always belong together): { sequence, cards }.
const cards = (withSequence = false) => page.evaluate((withSequence) => {
  const list = [...document.querySelectorAll('.grid .card')].filter((c) => !c.hidden).map((c) => ({
    id: c.id, instance: c.dataset.instance ?? null, plugin: c.dataset.plugin, status: c.dataset.status,
    title: c.querySelector('h2').textContent,
    notes: [...c.querySelectorAll('.note')].map((n) => n.textContent),
    mounts: [...c.querySelectorAll('.mount')].map((m) => m.dataset.mount),
    rows: [...c.querySelectorAll('.row')].map((r) => ({ dt: r.querySelector('dt').textContent, cls: r.className,
      folded: !!r.closest('details'), v: r.querySelector('.v') && { ...r.querySelector('.v').dataset, text: r.querySelector('.v').textContent } })),
    summary: c.querySelector('details > summary') && c.querySelector('details > summary').textContent,
  }));
  return withSequence ? { sequence: Number(document.body.dataset.sequence), cards: list } : list;
}, withSequence);
const byInstance = async () => new Map((await cards()).map((c) => [c.instance, c]));
const sequence = () => page.evaluate(() => Number(document.body.dataset.sequence));

test('a sensor of a plugin without a card of its own: a generic card with its metrics and units', async () => {
  await page.waitForFunction(() => ['zones', 'zones-b', 'uptime'].every((k) =>
    document.querySelector(`.card[data-instance="${k}"]`)?.dataset.status === 'ok'), null, { timeout: 10000 });
  // The values on screen and the sample they come from: the page's own /api/current body of that
  // sequence (an /api/current read by the test would be another moment's).
  const shown = await cards(true);
  const seq = shown.sequence;
  const all = new Map(shown.cards.map((c) => [c.instance, c]));
  const snap = await until(() => samples.get(seq), 5000, `the page's /api/current body #${seq}`);

  const zones = all.get('zones');
  assert.equal(zones.title, 'zones · labelled', 'the [[sensor]] name with its plugin');
  assert.equal(zones.id, 'card-sensor-zones');
  const values = zones.rows.filter((r) => r.v);
  // Ten zones of temperatures and rates, a counter without a rate, a gauge of bytes. The counters
  // with a rate beside them (labelled_events_total) show as that rate only.
  const zone = (i) => `zone=${HOSTILE}-${i}`;
  const want = [
    ...Array.from({ length: 10 }, (_, i) => ['labelled_temperature_celsius', zone(i), fmt.c(40 + i), 40 + i]),
    ...Array.from({ length: 10 }, (_, i) => ['labelled_events_per_second', zone(i), '10/s', 10]),
    ['labelled_restarts_total', 'instance=zones', '3', 3],
    ['labelled_buffer_bytes', 'instance=zones', '3.00 MiB', 3 * 1024 * 1024]];
  assert.deepEqual(values.map((r) => [r.v.metric, r.v.label, r.v.text, Number(r.v.value)]), want);
  assert.deepEqual(values.map((r) => r.dt), want.map(([, label]) => label), 'each value beside its label set');
  assert.ok(!values.some((r) => r.v.metric === 'labelled_events_total'), 'a counter with a rate shows as the rate');
  // The metric names head their label sets; past 12 values, whole metrics fold away.
  assert.deepEqual(zones.rows.filter((r) => /group/.test(r.cls)).map((r) => r.dt),
    ['labelled_temperature_celsius', 'labelled_events_per_second', 'labelled_restarts_total', 'labelled_buffer_bytes']);
  assert.deepEqual(values.map((r) => r.folded), want.map((w, i) => i >= 10));
  assert.equal(zones.summary, '12 more');

  // The README's example: one unlabelled gauge in seconds, named as its plugin.
  const uptime = all.get('uptime');
  assert.equal(uptime.title, 'uptime');
  const up = snap.sensors.uptime.metrics.find((m) => m.name === 'uptime_seconds').value;
  assert.deepEqual(uptime.rows.map((r) => [r.dt, r.v.text, Number(r.v.value)]), [['uptime_seconds', fmt.uptime(up), up]]);
  assert.equal(uptime.summary, null, 'nothing folded');
});

test('the page asks the history for the generic charts\' series by name, gauges only', async () => {
  await until(() => historyUrls.some((u) => (u.searchParams.get('series') || '').includes('uptime_seconds')), 10000,
    'a history request naming uptime_seconds');
  const names = historyUrls.at(-1).searchParams.get('series').split(',');
  for (const n of ['uptime_seconds', 'labelled_temperature_celsius', 'labelled_events_per_second', 'labelled_buffer_bytes']) {
    assert.ok(names.includes(n), `${n} in ${names}`);
  }
  assert.ok(!names.includes('labelled_events_total') && !names.includes('labelled_restarts_total'), 'no counters');
  assert.equal(new Set(names).size, names.length, 'each name once');
});

test('gauges get a history chart per sensor and unit, with data points after a few seconds', async () => {
  const charts = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll('.charts .chart')].map((f) => [f.id, {
    caption: f.querySelector('figcaption').textContent, points: Number(f.dataset.points || 0), series: Number(f.dataset.series || 0),
    joined: Number(f.dataset.joined || 0),
    canvas: !!f.querySelector('canvas'), legend: [...f.querySelectorAll('.u-legend .u-label')].map((l) => l.textContent),
  }])));
  await until(async () => {
    const c = await charts();
    return ['chart-sensor-uptime-seconds', 'chart-sensor-zones-celsius', 'chart-sensor-zones-b-celsius']
      .every((id) => c[id] && c[id].canvas && c[id].points >= 3 * c[id].series);
  }, 15000, 'the generic charts with three points per line');
  const c = await charts();
  assert.equal(c['chart-sensor-uptime-seconds'].caption, 'uptime');
  assert.equal(c['chart-sensor-uptime-seconds'].series, 1);
  // Ten zones, a chart draws eight (one per colour); the card lists them all. Captions name the
  // unit where the sensor has gauges of several.
  assert.equal(c['chart-sensor-zones-celsius'].caption, 'zones · labelled (celsius): 8 of 10 series');
  assert.equal(c['chart-sensor-zones-celsius'].series, 8);
  assert.deepEqual(c['chart-sensor-zones-celsius'].legend.slice(0, 2), [`zone=${HOSTILE}-0`, `zone=${HOSTILE}-1`]);
  assert.equal(c['chart-sensor-zones-per_second'].caption, 'zones · labelled (per_second): 8 of 10 series');
  assert.equal(c['chart-sensor-zones-bytes'].caption, 'zones · labelled (bytes)');
  assert.equal(c['chart-sensor-zones-b-celsius'].caption, 'zones-b · labelled (celsius)');
  assert.equal(c['chart-sensor-zones-b-celsius'].series, 1, 'its own series only, not the other instance\'s');
  // zones-b is read every other second: its line is drawn across the seconds between its readings
  // (issue 36, item 17: it drew nothing), the every-second sensors' lines have nothing to join.
  assert.ok(c['chart-sensor-zones-b-celsius'].joined >= 1, 'the 2 s sensor\'s line joins its readings');
  assert.equal(c['chart-sensor-zones-celsius'].joined, 0);
  assert.ok(!Object.keys(c).some((id) => /broken|storage|tmpfs/.test(id)), 'no chart for a sensor in error or of a known plugin');
  // Past the page's own charts (the board's hidden here: these sensors do not run), in the
  // agent's order.
  const ids = Object.keys(c);
  assert.deepEqual(ids.slice(0, 8), ['chart-cpu', 'chart-thermal', 'chart-memory', 'chart-network', 'chart-diskio',
    'chart-pressure', 'chart-frequency', 'chart-fans']);
  assert.ok(await page.evaluate(() => ['pressure', 'frequency', 'fans'].every((id) => document.getElementById(`chart-${id}`).hidden)));
  assert.deepEqual(ids.slice(8), ['chart-sensor-uptime-seconds', 'chart-sensor-zones-celsius', 'chart-sensor-zones-per_second',
    'chart-sensor-zones-bytes', 'chart-sensor-zones-b-celsius', 'chart-sensor-zones-b-per_second', 'chart-sensor-zones-b-bytes']);
});

test('label text a plugin made up is shown as text, never run as HTML', async () => {
  const found = await page.evaluate(() => ({
    xss: window.__kiwiXss, imgs: document.querySelectorAll('main img').length,
    text: document.querySelector('#card-sensor-zones .sub dt').textContent,
  }));
  assert.equal(found.xss, undefined, 'the onerror handler never ran');
  assert.equal(found.imgs, 0, 'no <img> element was made');
  assert.equal(found.text, `zone=${HOSTILE}-0`);
});

test('two instances of one plugin are two cards; a known plugin\'s second one is drawn as the first', async () => {
  const { sequence: seq, cards: list } = await cards(true);
  const snap = await until(() => samples.get(seq), 5000, `the page's /api/current body #${seq}`);
  const storage = list.filter((c) => c.plugin === 'storage');
  assert.deepEqual(storage.map((c) => [c.instance, c.title]), [['storage', 'Storage'], ['tmpfs', 'Storage · tmpfs']]);
  const mountsOf = (name) => snap.sensors[name].metrics.filter((m) => m.name === 'storage_size_bytes').map((m) => m.labels.mount).sort();
  assert.deepEqual(storage[0].mounts.sort(), mountsOf('storage'));
  assert.ok(storage[0].mounts.includes('/'));
  assert.deepEqual(storage[1].mounts.sort(), mountsOf('tmpfs'), 'the second instance shows its own mounts');
  if (!storage[1].mounts.length) assert.equal(storage[1].status, 'no_data');
  assert.ok(!storage[1].mounts.some((m) => storage[0].mounts.includes(m)), 'nothing merged from the other');
  // Cards sit in the page's order: a second instance next to its plugin's card, others after all.
  const ids = list.map((c) => c.id);
  assert.equal(ids.indexOf('card-sensor-tmpfs'), ids.indexOf('card-storage') + 1);
  assert.deepEqual(ids.slice(-4), ['card-sensor-uptime', 'card-sensor-zones', 'card-sensor-zones-b', 'card-sensor-broken']);
  const b = list.find((c) => c.instance === 'zones-b');
  assert.equal(b.title, 'zones-b · labelled');
  assert.deepEqual(b.rows.filter((r) => r.v && r.v.metric === 'labelled_temperature_celsius').map((r) => [r.dt, r.v.text]),
    [['zone=b', '60.0 °C']]);
});

test('a sensor in error says so with its message, styled as the other cards', async () => {
  // The page is live, and says which sensor fails, as /api/health does (503 "failing").
  const banner = await page.evaluate(() => {
    const b = document.getElementById('banner');
    return { hidden: b.hidden, kind: b.dataset.kind, text: b.textContent, state: document.body.dataset.state,
      links: [...b.querySelectorAll('a')].map((a) => a.getAttribute('href')) };
  });
  assert.equal(banner.state, 'live');
  assert.equal(banner.hidden, false);
  assert.equal(banner.kind, 'failing');
  assert.match(banner.text, /^FAILING Sensor broken: read \/sys\/bus\/i2c\/devices\/1-0048\/temp: Input\/output error\./);
  assert.deepEqual(banner.links, ['#card-sensor-broken']);
  const broken = (await byInstance()).get('broken');
  assert.equal(broken.title, 'broken · throws');
  assert.equal(broken.status, 'error');
  assert.deepEqual(broken.notes, ['Sensor error', 'read /sys/bus/i2c/devices/1-0048/temp: Input/output error']);
  const [border, crit] = await page.evaluate(() => {
    const card = document.getElementById('card-sensor-broken');
    const probe = card.appendChild(document.createElement('span'));
    probe.style.color = 'var(--crit)';
    const colors = [getComputedStyle(card).borderTopColor, getComputedStyle(probe).color];
    probe.remove();
    return colors;
  });
  assert.equal(border, crit, 'the error border of the existing cards');
});

test('a folded list the user opened stays open while the card updates', async () => {
  await page.click('#card-sensor-zones details > summary');
  const seq = await sequence();
  await page.waitForFunction((s) => Number(document.body.dataset.sequence) >= s + 2, seq, { timeout: 10000 });
  assert.equal(await page.evaluate(() => document.querySelector('#card-sensor-zones details').open), true);
});

test('screenshots: generic cards and charts, desktop and phone (no horizontal scrolling)', async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-sensors.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    // Long label values wrap inside their card rather than widen the page.
    await until(async () => (await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 5000, 'no horizontal scrolling at 390 px');
    await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-sensors-phone.png'), fullPage: true });
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
  }
});

test('a sensor added by a reload gets its card and chart without a page reload; removed, both go', async () => {
  const marker = await page.evaluate(() => { window.__kiwiSamePage = true; return true; });
  agent.extra = sensors(true) + LATE + ROUTES;
  await agent.reload();
  await page.waitForFunction(() => document.querySelector('.card[data-instance="late"]')?.dataset.status === 'ok', null, { timeout: 10000 });
  await page.waitForFunction(() => Number(document.getElementById('chart-sensor-late-celsius')?.dataset.points) > 0, null, { timeout: 10000 });
  const late = (await byInstance()).get('late');
  assert.equal(late.title, 'late · labelled');
  assert.equal(late.id, (await cards()).at(-1).id, 'after the cards already there');

  agent.extra = sensors(false) + ROUTES;
  await agent.reload();
  await page.waitForFunction(() => !document.querySelector('[data-instance="late"], [data-instance="tmpfs"]') &&
    !document.getElementById('chart-sensor-late-celsius'), null, { timeout: 10000 });
  const after = await byInstance();
  assert.ok(after.has('zones') && after.has('storage'), 'the others stay');
  assert.equal(await page.evaluate(() => window.__kiwiSamePage), marker, 'the same page, not reloaded');
});

// An exec sensor (plugins/exec: a script's Prometheus text), as issue 14 asks. Until that plugin
// is merged (branch wip-exec) this is a TODO: it runs, but is reported as such, never as a pass.
const EXEC = join(env('KIWI_PLUGIN_DIR'), 'kiwi-sensor-exec.so');
test('an exec sensor: its card, its chart, and a hostile label value shown as text', {
  todo: existsSync(EXEC) ? false : `${EXEC} is not built: plugins/exec is not merged yet`,
}, async () => {
  const exec = new Agent({ extra: ROUTES });
  try {
    const script = join(exec.dir, 'backup.sh');
    writeFileSync(script, `#!/bin/sh
cat <<'EOF'
# HELP backup_age_seconds time since the last backup
# TYPE backup_age_seconds gauge
backup_age_seconds{target=${JSON.stringify(HOSTILE)}} 3600
# HELP backup_runs_total backups made
# TYPE backup_runs_total counter
backup_runs_total{target="nas"} 42
EOF
`);
    chmodSync(script, 0o755);
    exec.extra = `[[sensor]]\nplugin = "exec"\nname = "backup"\n[sensor.options]\ncommand = [${JSON.stringify(script)}]\n` +
      `format = "prometheus"\n${ROUTES}`;
    await exec.start();
    const p = await context.newPage();
    const seen = [];
    p.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') seen.push(m.text()); });
    p.on('pageerror', (e) => seen.push(String(e)));
    await p.goto(`${exec.origin}/`);
    await p.waitForFunction(() => document.querySelector('.card[data-instance="backup"]')?.dataset.status === 'ok', null, { timeout: 10000 });
    const cur = (await exec.json('/api/current')).body.sensors.backup;
    const age = cur.metrics.find((m) => m.name === 'backup_age_seconds');
    const card = await p.evaluate(() => {
      const c = document.querySelector('.card[data-instance="backup"]');
      return { title: c.querySelector('h2').textContent, imgs: c.querySelectorAll('img').length, xss: window.__kiwiXss,
        rows: [...c.querySelectorAll('.row')].map((r) => [r.querySelector('dt').textContent, r.querySelector('.v')?.textContent ?? null]) };
    });
    assert.equal(card.title, 'backup · exec');
    assert.deepEqual([card.imgs, card.xss], [0, undefined], 'the label value ran nothing');
    assert.deepEqual(card.rows.find(([dt]) => dt === `target=${HOSTILE}`),
      [`target=${HOSTILE}`, { seconds: '1 h 0 min', '': '3600' }[age.unit]], `the gauge (unit "${age.unit}") as text, formatted`);
    const rate = cur.metrics.find((m) => m.name === 'backup_runs_per_second');
    assert.ok(rate || card.rows.some(([dt, v]) => dt === 'target=nas' && v === '42'), 'the counter, as its rate where the sensor gives one');
    const chart = `chart-sensor-backup-${age.unit || 'none'}`;
    await p.waitForFunction((id) => document.getElementById(id)?.querySelector('canvas') &&
      Number(document.getElementById(id).dataset.points) >= 2, chart, { timeout: 15000 });
    assert.deepEqual(seen, []);
    await p.close();
  } finally {
    await exec.cleanup();
  }
});

test('the console stayed clean', () => {
  assert.deepEqual(problems, []);
});
