// Makes docs/dashboard.png, the README's picture of the dashboard: the real agent of a build for
// about two minutes (so the 2 min charts are full), CPU, memory and storage of this machine, the
// temperatures and CPU frequencies of a made-up 8-core board, in Debian's headless chromium.
//   node tools/web/docs-screenshot.mjs [build-dir]      (default: build)
import { renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const build = resolve(process.argv[2] || join(root, 'build'));
process.env.KIWI_AGENT_BIN ||= join(build, 'bin/kiwi-agent');
process.env.KIWI_PLUGIN_DIR ||= join(build, 'lib/kiwi-agent');
const { Agent, fakeSysfs, procStatCores } = await import(join(root, 'tests/browser/agent.mjs'));
const { chromium } = createRequire(join(root, 'tools/web/package.json'))('playwright-core');

const zones = [['soc-thermal', 48.1], ['bigcore0-thermal', 55.4], ['bigcore1-thermal', 57.9],
  ['littlecore-thermal', 50.2], ['center-thermal', 49.0], ['gpu-thermal', 46.3], ['npu-thermal', 45.8]];
const agent = new Agent();
const sys = join(agent.dir, 'sys');
fakeSysfs(sys, zones, procStatCores(), [1800000, 1800000, 2256000, 2352000, 408000, 1416000]);
agent.agentLines = `sysfs = ${JSON.stringify(sys)}`;
// Temperatures that move a little, as a board's do.
const wobble = setInterval(() => {
  const t = Date.now() / 1000;
  zones.forEach(([, c], i) => {
    const file = join(sys, 'class/thermal', `thermal_zone${i}`, 'temp');
    writeFileSync(`${file}.new`, `${Math.round((c + 3 * Math.sin(t / 20 + i) + Math.random()) * 1000)}\n`);
    renameSync(`${file}.new`, file); // the sensor never reads a half-written file
  });
}, 1000);
await agent.start();
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
  await page.goto(`${agent.origin}/`);
  await page.waitForFunction(() => document.body.dataset.state === 'live', null, { timeout: 20000 });
  console.log('waiting 125 s for two minutes of history...');
  await page.waitForFunction(() => {
    const d = document.body.dataset;
    return Number(document.getElementById('chart-cpu').dataset.points) >= 118 && d.state === 'live';
  }, null, { timeout: 200000, polling: 1000 });
  const out = join(root, 'docs/dashboard.png');
  await page.screenshot({ path: out, fullPage: true });
  console.log(`wrote ${out}`);
} finally {
  clearInterval(wobble);
  await browser.close();
  await agent.cleanup();
}
