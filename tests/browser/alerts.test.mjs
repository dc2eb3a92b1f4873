// Alerts on the dashboard, in Debian's chromium (headless) against the real kiwi-agent on loopback
// ports: [[alert]] rules that fire on a fake sysfs and on this machine's /proc, the banner of firing
// alerts (severity, summary, since when), the marks on the cards they belong to, their going away
// when the alert resolves, the built-in rules on a Raspberry Pi's power flags, nothing when none
// fires, and an agent without /api/alerts. Run by ctest
// ("browser: alerts") or by hand with the variables dashboard.test.mjs names.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Agent, dashboardRoutes, disableDefaultRules, fakeSysfs, fmt, launchChromium, procStatCores, THROTTLED, until } from './agent.mjs';

const FIXTURES = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '../fixtures');

const SCREENSHOTS = process.env.KIWI_SCREENSHOT_DIR || join(tmpdir(), 'kiwi-screenshots');
const SOC = 47.7; // °C of the one thermal zone
// Firing at once: critical on the temperature, info on memory, warning on the agent's own report
// (which has no card); pending for an hour: never in the banner.
const RULES = `
[[alert]]
name = "board_warm"
metric = "thermal_celsius"
above = 1.0
for = "0s"
severity = "critical"
summary = "{{labels.sensor}} at {{value}} °C"

[[alert]]
name = "board_warm_long"
metric = "thermal_celsius"
above = 1.0
for = "1h"
severity = "warning"

[[alert]]
name = "memory_in_use"
metric = "memory_used_ratio"
above = 0.0
severity = "info"
summary = "memory {{value_percent}} % used"

[[alert]]
name = "agent_ticking"
metric = "collector_ticks_total"
sensor = "agent"
above = 0.0
severity = "warning"
summary = "the collector ticks"
`;
// Holds nowhere.
const QUIET = `
[[alert]]
name = "board_on_fire"
metric = "thermal_celsius"
above = 200.0
severity = "critical"
`;
// The severities' colours in the light scheme (www/assets/style.css --crit, --warn, --info).
const COLOURS = { critical: 'rgb(196, 43, 43)', warning: 'rgb(178, 107, 0)', info: 'rgb(47, 111, 223)' };

let context;
const userDataDir = mkdtempSync(join(tmpdir(), 'kiwi-chromium-'));
const agents = [];

before(async () => { context = await launchChromium(userDataDir); });
after(async () => {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  for (const a of agents) await a.cleanup();
});

// An agent with `rules` (and the default rules off) on a fake sysfs with one thermal zone, and the
// page loaded and live; `alerts` false: without the /api/alerts route.
async function open(rules, { alerts = true } = {}) {
  const agent = new Agent({ extra: `${dashboardRoutes({}, { alerts })}\n${disableDefaultRules()}\n${rules}` });
  agents.push(agent);
  const sys = join(agent.dir, 'sys');
  fakeSysfs(sys, [['soc-thermal', SOC]], procStatCores(), [1800000]);
  agent.agentLines = `sysfs = ${JSON.stringify(sys)}`;
  await agent.start();
  const page = await context.newPage();
  const problems = [];
  const requests = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push({ text: m.text(), url: m.location().url }); });
  page.on('pageerror', (e) => problems.push({ text: String(e) }));
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(`${agent.origin}/`);
  await page.waitForFunction(() => document.body.dataset.state === 'live' && document.getElementById('card-thermal').dataset.status === 'ok',
    null, { timeout: 10000 });
  return { agent, sys, page, problems, requests };
}

// What the page shows of alerts: the banner's lines and every mark, by card.
const shown = (page) => page.evaluate(() => ({
  hidden: document.getElementById('alerts').hidden,
  lines: [...document.querySelectorAll('#alerts li')].map((li) => ({
    severity: li.dataset.severity, text: li.textContent, link: (li.querySelector('a') || {}).hash || null,
    border: getComputedStyle(li).borderLeftColor,
  })),
  marks: [...document.querySelectorAll('.grid .card .alert-mark')].map((m) => ({
    card: m.closest('.card').id, title: m.title, severity: m.dataset.severity, colour: getComputedStyle(m).backgroundColor,
  })),
}));

test('firing alerts: a banner line each, most severe first, and a mark on the card each belongs to', async () => {
  const { agent, sys, page, problems } = await open(RULES);
  // The agent's own view: three firing, one pending.
  const api = await until(async () => {
    const { body } = await agent.json('/api/alerts');
    return body.firing === 3 && body.pending === 1 ? body : null;
  }, 10000, 'three rules firing and one pending in /api/alerts');
  const firing = Object.fromEntries(api.alerts.filter((a) => a.state === 'firing').map((a) => [a.name, a]));
  assert.equal(firing.board_warm.summary, `soc-thermal at ${SOC} °C`);
  assert.equal(firing.board_warm.sensor, 'thermal');
  await page.waitForFunction(() => document.querySelectorAll('#alerts li').length === 3, null, { timeout: 10000 });
  const s = await shown(page);
  assert.equal(s.hidden, false);
  // Critical, then warning, then info; each "SEVERITY name: summary, since HH:MM:SS (duration)".
  const line = (sev, a, summary = a.summary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')) =>
    new RegExp(`^${sev} ${a.name}: ${summary}, since ${fmt.clock(a.since)} \\(\\d+ s\\)$`);
  assert.deepEqual(s.lines.map((l) => l.severity), ['critical', 'warning', 'info']);
  assert.match(s.lines[0].text, line('CRITICAL', firing.board_warm));
  assert.match(s.lines[1].text, line('WARNING', firing.agent_ticking));
  // This machine's memory in use: the page's list may be newer than the one asked above.
  assert.match(s.lines[2].text, line('INFO', firing.memory_in_use, 'memory \\d+(\\.\\d+)? % used'));
  assert.deepEqual(s.lines.map((l) => l.border), [COLOURS.critical, COLOURS.warning, COLOURS.info]);
  // The name links to the card; the agent's own report has none.
  assert.deepEqual(s.lines.map((l) => l.link), ['#card-thermal', null, '#card-memory']);
  // A mark on the temperature and the memory cards; none for the pending rule nor for the agent's.
  assert.deepEqual(s.marks, [
    { card: 'card-thermal', title: 'board_warm', severity: 'critical', colour: COLOURS.critical },
    { card: 'card-memory', title: 'memory_in_use', severity: 'info', colour: COLOURS.info },
  ]);
  // The card titles are as they were: the marks sit beside them.
  assert.equal(await page.evaluate(() => document.querySelector('#card-thermal h2').textContent), 'Temperature');
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, 'alerts.png') });
  // How long: counted on, once a second.
  const before = await page.evaluate(() => document.querySelector('#alerts li .for').textContent);
  await page.waitForFunction((b) => document.querySelector('#alerts li .for').textContent !== b, before, { timeout: 5000 });

  // The zone cools below the threshold (and its hysteresis): the alert resolves, its line and mark go.
  writeFileSync(join(sys, 'class/thermal/thermal_zone0/temp'), '500\n');
  await page.waitForFunction(() => !document.querySelector('#alerts li[data-alert="board_warm"]') &&
    !document.querySelector('#card-thermal .alert-mark'), null, { timeout: 10000 });
  const after = await shown(page);
  assert.deepEqual(after.lines.map((l) => l.severity), ['warning', 'info']);
  const { body } = await agent.json('/api/alerts?state=resolved');
  assert.deepEqual(body.alerts.map((a) => a.name), ['board_warm']);
  // The under-voltage banner is a separate one, and stays hidden (the firmware says 0x0).
  assert.equal(await page.evaluate(() => document.getElementById('banner').hidden), true);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a Raspberry Pi 4 under-voltage and throttled: the built-in rules mark Board health, where the power flags are', async () => {
  // The fixture board with the firmware saying under-voltage and throttling now, and the default
  // rules on: the power sensor is drawn on the Board health card, so their marks are there.
  const agent = new Agent({ extra: dashboardRoutes() });
  agents.push(agent);
  const board = join(agent.dir, 'board');
  cpSync(join(FIXTURES, 'rpi4'), board, { recursive: true });
  writeFileSync(join(board, 'sys', THROTTLED), '0x50005\n');
  agent.agentLines = `procfs = ${JSON.stringify(join(board, 'proc'))}\nsysfs = ${JSON.stringify(join(board, 'sys'))}`;
  await agent.start();
  const page = await context.newPage();
  await page.goto(`${agent.origin}/`);
  await page.waitForFunction(() => document.querySelectorAll('#card-health .alert-mark').length === 2, null, { timeout: 10000 });
  const s = await shown(page);
  assert.deepEqual(s.marks.map((m) => [m.card, m.title, m.severity]),
    [['card-health', 'under_voltage', 'critical'], ['card-health', 'throttled', 'warning']]);
  assert.deepEqual(s.lines.map((l) => [l.severity, l.link]), [['critical', '#card-health'], ['warning', '#card-health']]);
  assert.match(s.lines[0].text, /^CRITICAL under_voltage: under-voltage: /);
  // The under-voltage banner of the power flags is there as before, apart from the alerts.
  await page.waitForFunction(() => document.querySelector('#banner[data-kind="undervoltage"]'), null, { timeout: 10000 });
  await page.close();
});

test('no alert firing: no banner and no mark', async () => {
  const { agent, page, problems } = await open(QUIET);
  // Some polls of /api/alerts have been answered: the agent evaluated the rule and it holds nowhere.
  const { body } = await agent.json('/api/alerts');
  assert.deepEqual([body.firing, body.pending, body.alerts], [0, 0, []]);
  await page.waitForFunction(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/alerts')).length >= 3,
    null, { timeout: 10000 });
  const s = await shown(page);
  assert.equal(s.hidden, true);
  assert.deepEqual(s.lines, []);
  assert.deepEqual(s.marks, []);
  assert.deepEqual(problems, []);
  await page.close();
});

test('an agent without /api/alerts: no banner, no error on the page, and it is not asked every second', async () => {
  const { page, problems, requests } = await open(RULES, { alerts: false });
  const polls = () => requests.filter((u) => new URL(u).pathname === '/api/current').length;
  const start = polls();
  await until(() => polls() >= start + 3, 10000, 'three more polls of /api/current');
  const s = await shown(page);
  assert.equal(s.hidden, true);
  assert.deepEqual(s.marks, []);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'live');
  // Asked once (404), then not again for a minute.
  assert.equal(requests.filter((u) => new URL(u).pathname === '/api/alerts').length, 1);
  // Chromium logs the 404 of a fetch as a failed resource load; nothing else.
  assert.deepEqual(problems.filter((p) => !(/status of 404/.test(p.text) && /\/api\/alerts/.test(p.url || ''))), []);
  await page.close();
});
