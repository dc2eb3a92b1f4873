// The fleet page (/fleet) and the dashboard under a path prefix, in Debian's chromium (headless)
// against the real kiwi-agent on loopback ports. Run by ctest ("browser: fleet") or by hand with
// the variables dashboard.test.mjs names.
// - Under a prefix: a reverse proxy as another agent's /peer/<name>/ is (/peer/x/<rest> to the
//   agent's /<rest>, anything else 404) serves the dashboard and the fleet page; neither asks for
//   anything outside /peer/x/, and every link and asset they hold resolves inside it.
// - The fleet page on a known answer of api/fleet (the browser answers it from the table below:
//   every status, null sensors, a never-reached peer, a hostile error text): the rows and their
//   cells as a person reads them, sorting by each column both ways, filtering by name and
//   status, the banner when the fetch fails (the rows stay) and its recovery, a phone's width.
// - Real agents: one with two peers (a live agent, a closed port): the rows of its /api/fleet, the
//   Fleet link, a peer's dashboard through /peer/<name>/, a reload without the peers.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Agent, dashboardRoutes, fmt, launchChromium, until } from './agent.mjs';

const SCREENSHOTS = process.env.KIWI_SCREENSHOT_DIR || join(tmpdir(), 'kiwi-screenshots');

let agent, context;
const userDataDir = mkdtempSync(join(tmpdir(), 'kiwi-chromium-'));
const problems = []; // console errors and warnings, page errors: { text, allowed }
const servers = [];

// Pages opened here report what the console says; `allow` (a RegExp) passes the errors a test
// causes on purpose.
async function newPage(allow = null) {
  const p = await context.newPage();
  p.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push({ text: `${m.text()} ${m.location().url || ''}`, allow });
  });
  p.on('pageerror', (e) => problems.push({ text: String(e), allow: null }));
  return p;
}

// ---- a known api/fleet answer ----
// Boards in the order the lead's handler may send them (not sorted), `ageS` seconds since each
// was last seen (null: never).
const BOARDS = [
  { name: 'kiwi1', self: true, url: '', status: 'up', error: '', ageS: 0, agent_version: '0.9.0',
    cpu_ratio: 0.12, temperature: { celsius: 51.2, zone: 'cpu-thermal' }, memory_ratio: 0.41,
    filesystem: { mount: '/', used_ratio: 0.77 }, power: { under_voltage: false, throttled: false },
    alerts: { firing: 1, names: ['soc_hot'] } },
  { name: 'barn', self: false, url: 'http://barn.local:8095', status: 'unreachable', error: 'timeout after 2 s', ageS: 10,
    agent_version: '0.9.0', cpu_ratio: 0.5, temperature: { celsius: 60, zone: 'soc' }, memory_ratio: 0.2,
    filesystem: { mount: '/data', used_ratio: 0.5 }, power: null, alerts: { firing: 0, names: [] } },
  { name: 'attic', self: false, url: 'https://attic.local:8095', status: 'auth_failed',
    error: 'HTTP 401 from the peer: <b>check bearer_token_file</b>', ageS: null, agent_version: null,
    cpu_ratio: null, temperature: null, memory_ratio: null, filesystem: null, power: null, alerts: null },
  { name: 'greenhouse10', self: false, url: 'http://10.0.0.10:8095', status: 'up', error: '', ageS: 1, agent_version: '0.9.1',
    cpu_ratio: 0.93, temperature: { celsius: 81.5, zone: 'soc-thermal' }, memory_ratio: 0.88,
    filesystem: { mount: '/var/lib/kiwi-agent', used_ratio: 0.95 }, power: { under_voltage: true, throttled: true },
    alerts: { firing: 2, names: ['soc_hot', 'undervoltage'] } },
  { name: 'greenhouse2', self: false, url: 'http://10.0.0.2:8095', status: 'stale', error: 'the last sample is 40 s old', ageS: 3,
    agent_version: '0.9.0', cpu_ratio: 0.05, temperature: { celsius: 39.9, zone: 'cpu' }, memory_ratio: 0.3,
    filesystem: { mount: '/', used_ratio: 0.2 }, power: { under_voltage: false, throttled: true },
    alerts: { firing: 0, names: [] } },
];
// What each row shows, written out by hand (the page's code is not its own oracle).
const SHOWN = {
  kiwi1: { status: 'up', cpu: '12%', temperature: '51.2 °C cpu-thermal', memory: '41%', filesystem: '77% /', power: 'ok', alerts: '1 soc_hot' },
  barn: { status: 'unreachable timeout after 2 s', cpu: '50%', temperature: '60.0 °C soc', memory: '20%', filesystem: '50% /data', power: '—', alerts: '0' },
  attic: { status: 'auth failed HTTP 401 from the peer: <b>check bearer_token_file</b>', cpu: '—', temperature: '—', memory: '—', filesystem: '—', power: '—', alerts: '—', last_seen: 'never' },
  greenhouse10: { status: 'up', cpu: '93%', temperature: '81.5 °C soc-thermal', memory: '88%', filesystem: '95% /var/lib/kiwi-agent', power: 'under-voltage throttled', alerts: '2 soc_hot, undervoltage' },
  greenhouse2: { status: 'stale the last sample is 40 s old', cpu: '5%', temperature: '39.9 °C cpu', memory: '30%', filesystem: '20% /', power: 'throttled', alerts: '0' },
};
const fleetAnswer = (intervalMs) => {
  const now = Date.now();
  return {
    interval_ms: intervalMs, generated_ms: now,
    boards: BOARDS.map(({ ageS, ...b }) => ({ ...b, last_seen_ms: ageS === null ? null : now - ageS * 1000 })),
  };
};

// The page's api/fleet, answered by the browser: `mode.answer` ('ok', 'refused' or 'error').
async function fakeFleet(p, mode) {
  const asked = [];
  await p.route('**/api/fleet', (route) => {
    asked.push(Date.now());
    if (mode.answer === 'refused') return route.abort('connectionrefused');
    if (mode.answer === 'error') return route.fulfill({ status: 500, json: { error: { status: 500, message: 'the fleet is on fire' } } });
    return route.fulfill({ json: fleetAnswer(mode.intervalMs ?? 1000) });
  });
  return asked;
}

const rowsOf = (p) => p.evaluate(() => [...document.querySelectorAll('#fleet tbody tr')].map((tr) => ({
  name: tr.dataset.board,
  cells: Object.fromEntries([...tr.children].map((c) => [c.dataset.col, c.textContent.replace(/\s+/g, ' ').trim()])),
  href: tr.querySelector('[data-col="name"] a').getAttribute('href'),
})));
const names = async (p) => (await rowsOf(p)).map((r) => r.name);

// A page on the agent's /fleet with api/fleet answered as `mode` says (60 s apart: one answer
// unless a test asks for more), once its five rows show.
async function openFleet(mode = { answer: 'ok', intervalMs: 60000 }, { allow = null, width = 0 } = {}) {
  const p = await newPage(allow);
  if (width) await p.setViewportSize({ width, height: 844 });
  const asked = await fakeFleet(p, mode);
  await p.goto(`${agent.origin}/fleet`);
  await p.waitForFunction(() => document.querySelectorAll('#fleet tbody tr').length === 5, null, { timeout: 10000 });
  return { p, asked };
}

// ---- a reverse proxy that serves the agent under /peer/x/ ----
function prefixProxy(target, prefix) {
  const outside = [];
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith(prefix)) {
      outside.push(req.url);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"status":404,"message":"outside the prefix"}}');
      return;
    }
    const up = http.request(`${target}/${req.url.slice(prefix.length)}`,
      { method: req.method, headers: { ...req.headers, host: new URL(target).host } }, (r) => {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
    up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    req.pipe(up);
  });
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ origin: `http://127.0.0.1:${server.address().port}`, outside })));
}

// Every URL the page asked for and every link, stylesheet, script and image it holds (resolved by
// the browser against the page's address).
async function urlsOf(p, requests) {
  const held = await p.evaluate(() => [...document.querySelectorAll('a[href], link[href], script[src], img[src]')]
    .map((e) => e.href || e.src).filter((u) => !u.startsWith('data:')));
  return [...requests.filter((u) => !u.startsWith('data:')), ...held];
}

before(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  agent = new Agent({ extra: dashboardRoutes() });
  await agent.start();
  context = await launchChromium(userDataDir);
});

after(async () => {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  for (const s of servers) { s.closeAllConnections(); s.close(); }
  if (agent) await agent.cleanup();
});

test('under /peer/x/ of a proxy, the dashboard asks for nothing outside it and all its links stay inside', async () => {
  const proxy = await prefixProxy(agent.origin, '/peer/x/');
  const base = `${proxy.origin}/peer/x/`;
  const p = await newPage();
  const requests = [];
  p.on('request', (r) => requests.push(r.url()));
  await p.goto(base);
  await until(async () => {
    assert.deepEqual(proxy.outside, [], 'requests that reached the proxy outside /peer/x/');
    return (await p.evaluate(() => document.body.dataset.state)) === 'live';
  }, 15000, 'the dashboard under /peer/x/ to go live');
  // The charts (api/history), a range of the summaries (step, band) and its CSV link.
  await p.waitForFunction(() => Number(document.getElementById('chart-cpu').dataset.points) > 0, null, { timeout: 15000 });
  await p.click('.ranges button[data-range="1h"]');
  await until(() => requests.some((u) => /\/api\/history\?.*step=/.test(u)), 10000, 'the 1 h history request');
  await p.waitForFunction(() => !document.querySelector('#chart-cpu > .csv').hidden, null, { timeout: 10000 });
  const urls = await urlsOf(p, requests);
  for (const path of ['', 'assets/app.js', 'assets/style.css', 'assets/uPlot.iife.min.js', 'api/current', 'api/alerts?state=firing'])
    assert.ok(urls.includes(base + path), `${base}${path} was asked for: ${urls.join(' ')}`);
  assert.ok(urls.some((u) => u.startsWith(`${base}api/history?`) && u.includes('format=csv')), 'the CSV link');
  assert.ok(urls.includes(`${base}assets/README.md`), 'the docs link');
  assert.deepEqual(urls.filter((u) => !u.startsWith(base) || new URL(u).pathname.startsWith('/peer/x/peer/')), [],
    'URLs outside the prefix (or doubled)');
  assert.deepEqual(proxy.outside, [], 'requests that reached the proxy outside /peer/x/');
  // The footer's API link works through the proxy.
  const cur = await p.evaluate(async () => (await fetch(document.querySelector('footer a').href)).status);
  assert.equal(cur, 200);
  await p.close();
});

test('under /peer/x/ of a proxy, the fleet page asks for x\'s api/fleet and its board links stay inside', async () => {
  const proxy = await prefixProxy(agent.origin, '/peer/x/');
  const base = `${proxy.origin}/peer/x/`;
  const p = await newPage();
  await fakeFleet(p, { answer: 'ok' });
  const requests = [];
  p.on('request', (r) => requests.push(r.url()));
  await p.goto(`${base}fleet`);
  await p.waitForFunction(() => document.querySelectorAll('#fleet tbody tr').length === 5, null, { timeout: 10000 });
  const urls = await urlsOf(p, requests);
  assert.ok(urls.includes(`${base}api/fleet`), urls.join(' '));
  assert.ok(urls.includes(`${base}assets/fleet.js`) && urls.includes(`${base}assets/style.css`));
  // Through x's own /peer/barn/ (x's peer), and x's own dashboard for the board x is.
  const links = await p.evaluate(() => Object.fromEntries([...document.querySelectorAll('#fleet tbody tr')]
    .map((tr) => [tr.dataset.board, tr.querySelector('a').href])));
  assert.equal(links.barn, `${base}peer/barn/`);
  assert.equal(links.kiwi1, base);
  assert.deepEqual(urls.filter((u) => !u.startsWith(base)), [], 'URLs outside the prefix');
  assert.deepEqual(proxy.outside, [], 'requests that reached the proxy outside /peer/x/');
  await p.close();
});

test('the dashboard\'s header has no Fleet link on an agent without peers', async () => {
  const p = await newPage();
  await p.goto(`${agent.origin}/`);
  const link = await p.evaluate(() => { const a = document.getElementById('fleet-link'); return { hidden: a.hidden, href: a.getAttribute('href') }; });
  assert.deepEqual(link, { hidden: true, href: 'fleet' });
  await p.close();
});

test('the fleet page shows one row per board, each value as a person reads it, errors never hidden', async () => {
  const { p, asked } = await openFleet({ answer: 'ok', intervalMs: 1000 });
  const rows = await rowsOf(p);
  // Sorted by name at first (numbers in names by value: greenhouse2 before greenhouse10).
  assert.deepEqual(rows.map((r) => r.name), ['attic', 'barn', 'greenhouse2', 'greenhouse10', 'kiwi1']);
  for (const r of rows) {
    const { last_seen: seen, ...want } = SHOWN[r.name];
    const { name, last_seen: shownSeen, ...cells } = r.cells;
    assert.deepEqual(cells, want, r.name);
    assert.match(name, new RegExp(`^${r.name}`));
    const age = BOARDS.find((b) => b.name === r.name).ageS;
    if (seen) assert.equal(shownSeen, seen, r.name);
    else {
      const m = /^(\d+) s ago$/.exec(shownSeen);
      assert.ok(m && Number(m[1]) >= age && Number(m[1]) <= age + 5, `${r.name}: last seen ${shownSeen}, ${age} s before the answer`);
    }
  }
  // Links: this agent's own dashboard, a peer's through this agent.
  const hrefs = Object.fromEntries(rows.map((r) => [r.name, r.href]));
  assert.deepEqual(hrefs, { attic: 'peer/attic/', barn: 'peer/barn/', greenhouse2: 'peer/greenhouse2/', greenhouse10: 'peer/greenhouse10/', kiwi1: './' });
  const look = await p.evaluate(() => {
    const cs = (sel) => getComputedStyle(document.querySelector(sel));
    const root = getComputedStyle(document.documentElement);
    const colour = (name) => { // a CSS variable, resolved as a background colour is
      const s = document.createElement('span');
      s.style.background = root.getPropertyValue(name);
      document.body.append(s);
      const c = getComputedStyle(s).backgroundColor;
      s.remove();
      return c;
    };
    const err = document.querySelector('tr[data-board="barn"] .error');
    return {
      up: cs('tr[data-board="kiwi1"] .badge-up').backgroundColor, unreachable: cs('tr[data-board="barn"] .badge-unreachable').backgroundColor,
      auth: cs('tr[data-board="attic"] .badge-auth_failed').backgroundColor, stale: cs('tr[data-board="greenhouse2"] .badge-stale').backgroundColor,
      ok: colour('--ok'), crit: colour('--crit'), warn: colour('--warn'),
      errorShown: err.getClientRects().length > 0 && getComputedStyle(err).visibility === 'visible',
      injected: document.querySelectorAll('#fleet b').length,
      shown: document.getElementById('shown').textContent,
      banner: document.getElementById('banner').hidden,
      count: document.getElementById('count').textContent,
      every: document.getElementById('every').textContent,
    };
  });
  assert.deepEqual([look.up, look.unreachable, look.auth, look.stale], [look.ok, look.crit, look.crit, look.warn], 'status colours');
  assert.equal(look.errorShown, true, 'the unreachable row\'s error is on screen');
  assert.equal(look.injected, 0, 'an error text is shown as text, not HTML');
  assert.deepEqual([look.shown, look.banner, look.count, look.every], ['5 boards', true, '5', '1 s']);
  // interval_ms (1 s here) paces the polls: more answers come, and the ages move on.
  // The chosen order stays through new answers.
  await p.click('#fleet thead th[data-key="cpu"] button');
  const n = asked.length;
  await until(() => asked.length >= n + 2, 5000, 'two more polls at interval_ms 1000');
  assert.deepEqual(await names(p), ['greenhouse2', 'kiwi1', 'barn', 'greenhouse10', 'attic']);
  await p.screenshot({ path: join(SCREENSHOTS, 'fleet.png'), fullPage: true });
  await p.close();
});

test('clicking a column header sorts by it, again reverses it; no value sorts last either way; the keyboard does the same', async () => {
  const { p } = await openFleet();
  const sortOf = (p) => p.evaluate(() => [...document.querySelectorAll('#fleet thead th')]
    .filter((th) => th.getAttribute('aria-sort') !== 'none').map((th) => [th.dataset.key, th.getAttribute('aria-sort')]));
  const byHeader = async (key) => { await p.click(`#fleet thead th[data-key="${key}"] button`); return names(p); };
  const cases = [
    ['cpu', ['greenhouse2', 'kiwi1', 'barn', 'greenhouse10', 'attic'], ['greenhouse10', 'barn', 'kiwi1', 'greenhouse2', 'attic']],
    ['temperature', ['greenhouse2', 'kiwi1', 'barn', 'greenhouse10', 'attic'], ['greenhouse10', 'barn', 'kiwi1', 'greenhouse2', 'attic']],
    ['memory', ['barn', 'greenhouse2', 'kiwi1', 'greenhouse10', 'attic'], ['greenhouse10', 'kiwi1', 'greenhouse2', 'barn', 'attic']],
    ['filesystem', ['greenhouse2', 'barn', 'kiwi1', 'greenhouse10', 'attic'], ['greenhouse10', 'kiwi1', 'barn', 'greenhouse2', 'attic']],
    // healthy first: up, stale, auth failed, unreachable (ties by name)
    ['status', ['greenhouse10', 'kiwi1', 'greenhouse2', 'attic', 'barn'], ['barn', 'attic', 'greenhouse2', 'greenhouse10', 'kiwi1']],
    // ok, throttled, under-voltage; no power sensor last
    ['power', ['kiwi1', 'greenhouse2', 'greenhouse10', 'attic', 'barn'], ['greenhouse10', 'greenhouse2', 'kiwi1', 'attic', 'barn']],
    ['alerts', ['barn', 'greenhouse2', 'kiwi1', 'greenhouse10', 'attic'], ['greenhouse10', 'kiwi1', 'barn', 'greenhouse2', 'attic']],
    // most recently seen first; never seen is the oldest
    ['last_seen', ['kiwi1', 'greenhouse10', 'greenhouse2', 'barn', 'attic'], ['attic', 'barn', 'greenhouse2', 'greenhouse10', 'kiwi1']],
    ['name', ['attic', 'barn', 'greenhouse2', 'greenhouse10', 'kiwi1'], ['kiwi1', 'greenhouse10', 'greenhouse2', 'barn', 'attic']],
  ];
  for (const [key, asc, desc] of cases) {
    assert.deepEqual(await byHeader(key), asc, `${key} ascending`);
    assert.deepEqual(await sortOf(p), [[key, 'ascending']]);
    assert.deepEqual(await byHeader(key), desc, `${key} descending`);
    assert.deepEqual(await sortOf(p), [[key, 'descending']]);
  }
  // The keyboard: Tab reaches the headers' buttons (after the filters), Enter and Space sort.
  await p.focus('#filter-status');
  await p.keyboard.press('Tab');
  assert.equal(await p.evaluate(() => document.activeElement.closest('th')?.dataset.key), 'name');
  await p.keyboard.press('Tab'); // status
  await p.keyboard.press('Tab'); // cpu
  await p.keyboard.press('Enter');
  assert.deepEqual(await sortOf(p), [['cpu', 'ascending']]);
  await p.keyboard.press(' ');
  assert.deepEqual(await names(p), ['greenhouse10', 'barn', 'kiwi1', 'greenhouse2', 'attic']);
  assert.deepEqual(await sortOf(p), [['cpu', 'descending']]);
  await p.close();
});

test('the text box filters by part of the name, the select by status, both together; the count says so', async () => {
  const { p } = await openFleet();
  const shown = () => p.evaluate(() => [document.getElementById('shown').textContent, document.getElementById('empty').hidden ? '' : document.getElementById('empty').textContent]);
  await p.fill('#filter-name', 'GREEN');
  assert.deepEqual(await names(p), ['greenhouse2', 'greenhouse10']);
  assert.deepEqual(await shown(), ['2 of 5 boards shown', '']);
  await p.selectOption('#filter-status', 'stale');
  assert.deepEqual(await names(p), ['greenhouse2']);
  await p.fill('#filter-name', '');
  await p.selectOption('#filter-status', 'unreachable');
  assert.deepEqual(await names(p), ['barn']);
  await p.selectOption('#filter-status', 'auth_failed');
  assert.deepEqual(await names(p), ['attic']);
  await p.selectOption('#filter-status', 'up');
  assert.deepEqual(await names(p), ['greenhouse10', 'kiwi1']);
  await p.fill('#filter-name', 'barn');
  assert.deepEqual(await names(p), []);
  assert.deepEqual(await shown(), ['0 of 5 boards shown', 'No board matches the filter.']);
  // Typed from the keyboard, as a person does.
  await p.selectOption('#filter-status', '');
  await p.fill('#filter-name', '');
  await p.focus('#filter-name');
  await p.keyboard.type('ar');
  assert.deepEqual(await names(p), ['barn']);
  await p.close();
});

test('a failed fetch shows the banner and keeps the last rows; the next good answer clears it', async () => {
  const mode = { answer: 'ok', intervalMs: 1000 };
  const { p } = await openFleet(mode, { allow: /Failed to load resource|ERR_CONNECTION_REFUSED|status of 500/ });
  const before = await rowsOf(p);
  const banner = () => p.evaluate(() => ({ hidden: document.getElementById('banner').hidden, text: document.getElementById('banner').textContent, state: document.body.dataset.state }));
  mode.answer = 'refused';
  await p.waitForFunction(() => document.body.dataset.state === 'unreachable', null, { timeout: 5000, polling: 100 });
  let b = await banner();
  assert.equal(b.hidden, false);
  assert.match(b.text, /^UNREACHABLE Cannot get api\/fleet: .+\. Showing the boards as of \d\d:\d\d:\d\d \(\d+ s ago\)\. Retrying every 1 s\.$/);
  assert.deepEqual((await rowsOf(p)).map((r) => r.name), before.map((r) => r.name), 'the last rows stay');
  assert.equal(await p.evaluate(() => document.getElementById('state').textContent), 'unreachable');
  // An agent that answers with an error: its message.
  mode.answer = 'error';
  await p.waitForFunction(() => /HTTP 500/.test(document.getElementById('banner').textContent), null, { timeout: 5000, polling: 100 });
  assert.match((await banner()).text, /^ERROR Cannot get api\/fleet: HTTP 500 \(the fleet is on fire\)\. Showing the boards as of /);
  assert.equal((await rowsOf(p)).length, 5);
  mode.answer = 'ok';
  await p.waitForFunction(() => document.body.dataset.state === 'live', null, { timeout: 5000, polling: 100 });
  b = await banner();
  assert.equal(b.hidden, true);
  await p.close();
});

test('on a phone each board is a card that fits the width, the headers a row of sort buttons', async () => {
  const { p } = await openFleet(undefined, { width: 390 });
  const fit = await p.evaluate(() => ({
    scroll: document.scrollingElement.scrollWidth,
    label: getComputedStyle(document.querySelector('tr[data-board="kiwi1"] td[data-col="cpu"]'), '::before').content,
    widths: [...document.querySelectorAll('#fleet tbody tr')].map((tr) => tr.getBoundingClientRect().right),
  }));
  assert.ok(fit.scroll <= 390, `the page is ${fit.scroll} px wide`);
  assert.ok(fit.widths.every((r) => r <= 390), `cards end at ${fit.widths}`);
  assert.equal(fit.label, '"CPU"');
  assert.deepEqual(await (async () => { await p.click('#fleet thead th[data-key="cpu"] button'); return names(p); })(),
    ['greenhouse2', 'kiwi1', 'barn', 'greenhouse10', 'attic']);
  await p.screenshot({ path: join(SCREENSHOTS, 'fleet-phone.png'), fullPage: true });
  await p.close();
});

// A loopback port nothing listens on.
const closedPort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

test('with real peers: a row per board from the agent\'s /api/fleet, the dead one with its error, the live one\'s dashboard through /peer/<name>/',
  async () => {
    // Both with the fleet's routes: the hub asks barn for its row at /api/fleet?scope=self.
    const fleetRoutes = `${dashboardRoutes()}
[[route]]
path = "/api/fleet"
handler = "fleet"

[[route]]
path = "/peer/*"
handler = "peer"
`;
    const barn = new Agent({ extra: fleetRoutes });
    let hub = null;
    try {
      await barn.start();
      hub = new Agent({ extra: `${fleetRoutes}
[[peer]]
name = "barn"
url = ${JSON.stringify(barn.origin)}

[[peer]]
name = "gone"
url = "http://127.0.0.1:${await closedPort()}"
` });
      await hub.start();
      const p = await newPage();
      const answers = [];
      p.on('response', async (r) => {
        if (new URL(r.url()).pathname === '/api/fleet' && r.status() === 200) {
          try { answers.push(await r.json()); } catch { /* page closed */ }
        }
      });
      await p.goto(`${hub.origin}/fleet`);
      await p.waitForFunction(() => document.querySelector('tr[data-board="barn"]')?.dataset.status === 'up' &&
        document.querySelector('tr[data-board="gone"]')?.dataset.status === 'unreachable', null, { timeout: 20000, polling: 100 });
      // The rows are the last answer's, formatted (checked again if a new answer lands between).
      await until(async () => {
        const rows = await rowsOf(p);
        const last = answers.at(-1);
        if (!last || rows.length !== last.boards.length) return false;
        for (const b of last.boards) {
          const r = rows.find((x) => x.name === b.name);
          const want = {
            status: `${{ auth_failed: 'auth failed' }[b.status] || b.status}${b.error ? ` ${b.error}` : ''}`,
            cpu: b.cpu_ratio === null ? '—' : fmt.pct(b.cpu_ratio),
            temperature: b.temperature ? `${fmt.c(b.temperature.celsius)} ${b.temperature.zone}` : '—',
            memory: b.memory_ratio === null ? '—' : fmt.pct(b.memory_ratio),
            filesystem: b.filesystem ? `${fmt.pct(b.filesystem.used_ratio)} ${b.filesystem.mount}` : '—',
            alerts: b.alerts ? (b.alerts.firing ? `${b.alerts.firing} ${b.alerts.names.join(', ')}` : '0') : '—',
          };
          if (!r) return false;
          const { name, power, last_seen: seen, ...cells } = r.cells;
          if (JSON.stringify(cells) !== JSON.stringify(want)) return false;
          assert.equal(r.href, b.self ? './' : `peer/${b.name}/`);
          assert.equal(seen === 'never', b.last_seen_ms === null, `${b.name}: last seen ${seen}`);
        }
        return true;
      }, 10000, 'the rows to equal the last answer of /api/fleet');
      const rows = await rowsOf(p);
      assert.deepEqual(rows.filter((r) => !['barn', 'gone'].includes(r.name)).length, 1, 'one row for the agent itself');
      assert.ok(/^unreachable \S/.test(rows.find((r) => r.name === 'gone').cells.status), 'the dead peer\'s error is shown');
      // The header links to the fleet page on the agent with peers, and not on the one without.
      await p.goto(`${barn.origin}/`);
      assert.equal(await p.evaluate(() => document.getElementById('fleet-link').hidden), true, 'no Fleet link without peers');
      await p.goto(`${hub.origin}/`);
      assert.equal(await p.evaluate(() => document.getElementById('fleet-link').hidden), false, 'a Fleet link with peers');
      await p.click('#fleet-link');
      await p.waitForURL(`${hub.origin}/fleet`);
      // Through barn's row: barn's dashboard under /peer/barn/, every request inside it.
      await p.waitForSelector('tr[data-board="barn"] a');
      const requests = []; // those of the page at /peer/barn/ (the fleet page may still poll until it goes)
      p.on('request', (r) => { if (p.url().startsWith(`${hub.origin}/peer/barn/`)) requests.push(r.url()); });
      await p.click('tr[data-board="barn"] a');
      await p.waitForURL(`${hub.origin}/peer/barn/`);
      await p.waitForFunction(() => document.body.dataset.state === 'live', null, { timeout: 15000, polling: 100 });
      const urls = await urlsOf(p, requests);
      assert.ok(urls.includes(`${hub.origin}/peer/barn/api/current`), urls.join(' '));
      assert.deepEqual(urls.filter((u) => !u.startsWith(`${hub.origin}/peer/barn/`)), [], 'URLs outside /peer/barn/');
      // A reload that removes the peers takes the link away (the page is written anew).
      hub.extra = fleetRoutes;
      await hub.reload();
      await p.goto(`${hub.origin}/`);
      assert.equal(await p.evaluate(() => document.getElementById('fleet-link').hidden), true, 'no Fleet link once the peers are gone');
      await p.close();
    } finally {
      if (hub) await hub.cleanup();
      await barn.cleanup();
    }
  });

test('the console stayed clean', () => {
  assert.deepEqual(problems.filter((m) => !(m.allow && m.allow.test(m.text))).map((m) => m.text), []);
});
