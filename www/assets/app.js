// kiwi-agent dashboard: polls /api/current, renders four cards. Plain ES2020.
// Values arrive in base units (bytes, ratio, hertz, celsius); formatting for people happens here.
'use strict';
(() => {
  const API = '/api/current';
  const body = document.body;
  const POLL_MS = Math.max(1000, parseInt(body.dataset.pollMs, 10) || 5000);
  const TIMEOUT_MS = Math.min(Math.max(POLL_MS, 3000), 10000);
  const $ = (id) => document.getElementById(id);
  const byName = new Intl.Collator(undefined, { numeric: true }).compare;
  const ok = Number.isFinite;
  const num = (v) => (typeof v === 'number' ? v : NaN); // JSON null -> NaN
  const DASH = '–';

  // ---- formatting ----
  const IEC = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function fmtBytes(b) {
    if (!ok(b)) return DASH;
    let v = Math.abs(b), i = 0;
    while (v >= 1024 && i < IEC.length - 1) { v /= 1024; i++; }
    const s = i ? v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0) : String(Math.round(v));
    return `${b < 0 ? '-' : ''}${s} ${IEC[i]}`;
  }
  const fmtPct = (r, digits = 0) => (ok(r) ? `${(r * 100).toFixed(digits)}%` : DASH);
  const fmtHz = (hz) => (!ok(hz) ? DASH : hz >= 1e9 ? `${(hz / 1e9).toFixed(2)} GHz` : `${Math.round(hz / 1e6)} MHz`);
  const fmtC = (c) => (ok(c) ? `${c.toFixed(1)} °C` : DASH);
  const fmtLoad = (l) => (ok(l) ? l.toFixed(2) : DASH);
  const pad = (n) => String(n).padStart(2, '0');
  const fmtClock = (ts) => { const d = new Date(ts * 1000); return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; };
  function fmtDuration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 120) return `${s} s`;
    if (s < 7200) return `${Math.floor(s / 60)} min`;
    return s < 172800 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(s / 86400)} d`;
  }

  // ---- DOM helpers: text only (sensor names and messages are data, never HTML) ----
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v != null && v !== false) el.setAttribute(k, v);
    el.append(...kids.flat(9).filter((k) => k != null && k !== false));
    return el;
  }
  // A value a test can find: data-metric, data-label (for labelled series), data-value (raw base unit).
  const val = (metric, text, raw, label) =>
    h('span', { class: 'v', 'data-metric': metric, 'data-label': label, 'data-value': ok(raw) ? raw : null }, text);
  // Bars are decoration (aria-hidden): the number is always printed next to them.
  function bar(ratio, level) {
    const fill = h('span');
    fill.style.width = `${ok(ratio) ? Math.min(100, Math.max(0, ratio * 100)) : 0}%`;
    level = level || (ratio >= 0.9 ? 'crit' : ratio >= 0.75 ? 'warn' : null);
    return h('span', { class: 'bar', 'aria-hidden': 'true', 'data-level': level }, fill);
  }
  const row = (label, ...dd) => h('div', { class: 'row' }, h('dt', {}, label), h('dd', {}, dd));
  const note = (text, cls) => h('p', { class: cls ? `note ${cls}` : 'note' }, text);
  const big = (...kids) => h('p', { class: 'big' }, kids);

  // Lookup over one sensor's flat metric list.
  function metrics(sensor) {
    const all = (name) => (sensor.metrics || []).filter((m) => m.name === name);
    return {
      all,
      one: (name) => num((all(name)[0] || {}).value),
      by: (name, label) => new Map(all(name).map((m) => [String((m.labels || {})[label]), num(m.value)])), // label -> value
    };
  }

  // ---- cards ----
  function cpuCard(m) {
    const total = m.one('cpu_usage_ratio');
    const usage = m.by('cpu_core_usage_ratio', 'core');
    const freq = m.by('cpu_frequency_hertz', 'core');
    const cores = [...new Set([...usage.keys(), ...freq.keys()])].sort(byName);
    const load = (n) => val(`cpu_load${n}`, fmtLoad(m.one(`cpu_load${n}`)), m.one(`cpu_load${n}`));
    return [
      big(val('cpu_usage_ratio', fmtPct(total, 1), total), ' ', h('small', {}, 'total')),
      bar(total),
      cores.length ? h('dl', { class: freq.size ? 'cores' : 'cores nofreq', 'aria-label': 'Usage and frequency per core' },
        cores.map((c) => row(`Core ${c}`, bar(usage.get(c)),
          val('cpu_core_usage_ratio', fmtPct(usage.get(c)), usage.get(c), c),
          freq.size ? val('cpu_frequency_hertz', fmtHz(freq.get(c)), freq.get(c), c) : null))) : null,
      h('dl', { class: 'kv' }, row('Load 1 / 5 / 15 min', load(1), ' / ', load(5), ' / ', load(15))),
    ];
  }

  const level = (c) => (c >= 80 ? 'crit' : c >= 70 ? 'warn' : 'ok'); // °C; SBC SoCs throttle at about 80-85
  function thermalCard(m) {
    const temps = m.all('thermal_celsius')
      .map((x) => ({ name: String((x.labels || {}).sensor), c: num(x.value) }))
      .sort((a, b) => byName(a.name, b.name));
    if (!temps.length) return note('No sensors on this machine.');
    let max = m.one('thermal_max_celsius');
    if (!ok(max)) max = Math.max(...temps.map((t) => t.c).filter(ok));
    const hottest = temps.find((t) => t.c === max);
    const p = big(val('thermal_max_celsius', fmtC(max), max), ' ', h('small', {}, 'hottest'));
    p.dataset.level = level(max);
    return [p, h('dl', { class: 'temps' }, temps.map((t) => {
      const r = row([t.name, t === hottest && h('span', { class: 'sr-only' }, ' (hottest)')],
        bar(t.c / 100, level(t.c)), val('thermal_celsius', fmtC(t.c), t.c, t.name));
      r.classList.toggle('hottest', t === hottest);
      return r;
    }))];
  }

  function memoryCard(m) {
    const [total, avail, cached, buffers, swapTotal, swapUsed] = ['total', 'available', 'cached', 'buffers', 'swap_total', 'swap_used']
      .map((k) => m.one(`memory_${k}_bytes`));
    let used = m.one('memory_used_bytes');
    if (!ok(used)) used = total - avail;
    let ratio = m.one('memory_used_ratio');
    if (!ok(ratio)) ratio = used / total;
    const bytes = (k, v) => val(`memory_${k}_bytes`, fmtBytes(v), v);
    return [
      big(bytes('used', used), ' ', h('small', {}, '/ ', bytes('total', total), ' used (', val('memory_used_ratio', fmtPct(ratio), ratio), ')')),
      bar(ratio),
      h('dl', { class: 'kv' },
        row('Available', bytes('available', avail)),
        row('Cached', bytes('cached', cached)),
        row('Buffers', bytes('buffers', buffers)),
        row('Swap', swapTotal > 0 ? [bytes('swap_used', swapUsed), ' / ', bytes('swap_total', swapTotal)]
          : val('memory_swap_total_bytes', ok(swapTotal) ? 'none' : DASH, swapTotal))),
    ];
  }

  function storageCard(m) {
    const [size, used, avail, ratio, ro] = ['size_bytes', 'used_bytes', 'available_bytes', 'used_ratio', 'readonly']
      .map((k) => m.by(`storage_${k}`, 'mount'));
    const mounts = [...size.keys()].sort((a, b) => (a === '/' ? -1 : b === '/' ? 1 : byName(a, b))); // "/" first
    if (!mounts.length) return note('No file systems reported.');
    return h('dl', { class: 'mounts' }, mounts.map((mnt) => {
      const r = ratio.has(mnt) ? ratio.get(mnt) : used.get(mnt) / size.get(mnt);
      const bytes = (k, map) => val(`storage_${k}_bytes`, fmtBytes(map.get(mnt)), map.get(mnt), mnt);
      return h('div', { class: 'mount', 'data-mount': mnt },
        h('dt', {}, mnt, ro.get(mnt) > 0 && h('span', { class: 'badge', 'data-metric': 'storage_readonly', 'data-label': mnt }, 'read-only')),
        h('dd', {},
          h('span', {}, bytes('used', used), ' / ', bytes('size', size), ' (', val('storage_used_ratio', fmtPct(r), r, mnt), ')'),
          bar(r),
          h('span', { class: 'note' }, bytes('available', avail), ' available')));
    }));
  }

  const CARDS = { cpu: cpuCard, thermal: thermalCard, memory: memoryCard, storage: storageCard };

  // Sensor keys are instance names: match the plugin field so a renamed instance still shows.
  function findSensor(sensors, plugin) {
    return Object.entries(sensors).find(([, s]) => s && s.plugin === plugin) || (sensors[plugin] ? [plugin, sensors[plugin]] : []);
  }

  function renderCards(sensors) {
    for (const [plugin, render] of Object.entries(CARDS)) {
      const card = $(`card-${plugin}`);
      const [key, sensor] = findSensor(sensors, plugin);
      const status = sensor ? String(sensor.status) : 'missing';
      const msg = sensor && sensor.message && note(sensor.message, 'msg');
      let content;
      if (!sensor) content = note('Not configured in this agent.');
      else if (status === 'error') content = [note('Sensor error', 'error'), msg || note('no message', 'msg')];
      else if (status === 'no_data') content = [note(plugin === 'thermal' ? 'No sensors on this machine.' : 'No data from this sensor.'), msg];
      else if (status !== 'ok') content = note(`Unknown status "${status}"`, 'error');
      else {
        try { content = render(metrics(sensor)); } catch (e) {
          console.error(e);
          content = note(`Cannot display this sensor: ${e.message}`, 'error');
        }
      }
      card.dataset.status = status;
      if (key) card.dataset.instance = key;
      card.querySelector('.body').replaceChildren(...[content].flat().filter(Boolean));
    }
  }

  // ---- polling and state ----
  const st = {
    data: null, etag: null, error: null, inflight: false, state: 'loading',
    lastTs: null, advancedAt: 0, // browser time when the sample timestamp last changed
    skewMs: null, contactAt: 0,  // agent clock minus browser clock (Date header); last good answer
  };

  function accept(data) {
    if (data.timestamp !== st.lastTs) { st.lastTs = data.timestamp; st.advancedAt = Date.now(); }
    st.data = data;
    const host = String(data.host || 'unknown host');
    $('host').textContent = host;
    document.title = `${host} · kiwi-agent`;
    $('interval').textContent = ok(data.interval_seconds) ? `${data.interval_seconds} s` : DASH;
    renderCards(data.sensors);
  }

  async function poll() {
    if (st.inflight) return;
    st.inflight = true;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    try {
      // no-store: the browser must neither answer from its cache nor hide the 304 from us.
      const res = await fetch(API, { cache: 'no-store', signal: ctl.signal, headers: st.data && st.etag ? { 'If-None-Match': st.etag } : {} });
      if (res.status === 304 && st.data) {
        // unchanged: keep the display
      } else if (res.ok) {
        const data = await res.json().catch(() => { throw new Error('the response is not valid JSON'); });
        if (!data || !data.sensors || typeof data.sensors !== 'object' || !ok(data.timestamp)) throw new Error('unexpected response shape');
        st.etag = res.headers.get('ETag');
        accept(data);
      } else {
        throw new Error(`HTTP ${res.status} ${res.statusText}`.trim());
      }
      // Date has 1 s resolution: follow only real changes, or "N s ago" jitters.
      const skew = Date.parse(res.headers.get('Date') || '') + 500 - Date.now();
      if (ok(skew) && (st.skewMs === null || Math.abs(skew - st.skewMs) > 1500)) st.skewMs = skew;
      st.contactAt = Date.now();
      st.error = null;
    } catch (e) {
      st.error = e.name === 'AbortError' ? `no answer within ${TIMEOUT_MS / 1000} s` : e.message || String(e);
    } finally {
      clearTimeout(timer);
      st.inflight = false;
      update();
    }
  }

  // Age by the agent's clock when known (boards without an RTC often disagree with the browser).
  const sampleAge = () => (Date.now() + (st.skewMs || 0)) / 1000 - st.data.timestamp;
  const staleAfterMs = () => Math.max(3000 * (st.data.interval_seconds || 1), 2 * POLL_MS) + 1000;
  const ANNOUNCE = { live: 'Live data.', stale: 'Warning: the data is stale.', unreachable: 'Warning: the agent is unreachable.' };

  function update() {
    const now = Date.now();
    const d = st.data;
    const state = st.error ? 'unreachable' : !d ? 'loading'
      : d.stale === true || now - st.advancedAt > staleAfterMs() ? 'stale' : 'live';
    if (d && ok(d.timestamp)) {
      $('last-sample').textContent = fmtClock(d.timestamp);
      $('last-sample').dateTime = new Date(d.timestamp * 1000).toISOString();
      $('age').textContent = ` (${fmtDuration(sampleAge())} ago)`;
    }
    const banner = $('banner');
    const strong = (t) => h('strong', {}, t);
    if (state === 'unreachable') {
      banner.replaceChildren(strong('UNREACHABLE'), ` Cannot get ${API}: ${st.error}. `,
        st.contactAt ? `Last contact ${fmtDuration((now - st.contactAt) / 1000)} ago; showing the last data received. ` : 'No data received yet. ',
        `Retrying every ${fmtDuration(POLL_MS / 1000)}.`);
    } else if (state === 'stale') {
      banner.replaceChildren(strong('STALE'), ` The last sample is ${fmtDuration(sampleAge())} old (${fmtClock(d.timestamp)}): `,
        d.stale === true ? 'the agent reports its data as stale. ' : 'the sample timestamp has stopped advancing. ',
        'The agent answers, but the collector is not producing new samples.');
    }
    banner.hidden = state === 'live';
    banner.dataset.kind = state;
    body.dataset.state = state;
    $('state').textContent = state;
    if (state !== st.state) $('announce').textContent = ANNOUNCE[state] || '';
    st.state = state;
  }

  const loop = () => poll().finally(() => setTimeout(loop, POLL_MS));
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') poll(); });
  setInterval(update, 1000);
  loop();
})();
