// kiwi-agent fleet page (/fleet): polls api/fleet every `interval_ms` of its answer and shows one
// row per board, sortable by any column and filtered by name and status.
// Every URL is relative to the page (api/fleet, peer/<name>/), so the page works as well under
// another agent's /peer/<name>/. Names, errors and alert names are data: shown as text, never HTML.
// Plain ES2020, no framework; every byte comes from the agent itself.
'use strict';
(() => {
  const FLEET = 'api/fleet';
  const DEFAULT_INTERVAL_MS = 5000;
  const $ = (id) => document.getElementById(id);
  const ok = Number.isFinite;
  const DASH = '—';
  const byName = new Intl.Collator(undefined, { numeric: true }).compare;

  // ---- formatting (as the dashboard's app.js does) ----
  const fmtPct = (r) => (ok(r) ? `${(r * 100).toFixed(0)}%` : DASH);
  const fmtC = (c) => (ok(c) ? `${c.toFixed(1)} °C` : DASH);
  const pad = (n) => String(n).padStart(2, '0');
  const fmtClock = (ms) => { const d = new Date(ms); return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; };
  function fmtDuration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 120) return `${s} s`;
    if (s < 7200) return `${Math.floor(s / 60)} min`;
    return s < 172800 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(s / 86400)} d`;
  }
  const STATUS_TEXT = { up: 'up', stale: 'stale', unreachable: 'unreachable', auth_failed: 'auth failed' };
  // Sorting by status: healthy first (ascending).
  const STATUS_RANK = { up: 0, stale: 1, auth_failed: 2, unreachable: 3 };

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k in el && typeof v !== 'string') el[k] = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat(Infinity)) if (c !== null && c !== undefined && c !== false) el.append(c);
    return el;
  }
  const obj = (v) => (v && typeof v === 'object' ? v : null);
  const num = (v) => (typeof v === 'number' ? v : NaN); // JSON null -> NaN

  // ---- state ----
  const st = {
    boards: [], // the last answer's boards
    generatedMs: NaN, // the answer's generated_ms (the agent's clock)
    receivedAt: NaN, // Date.now() when it came (the browser's clock): ages advance from there
    intervalMs: DEFAULT_INTERVAL_MS,
    etag: '',
    error: '', // the last fetch's failure, '' after a good one
    answered: false, // whether that failure was an answer (an HTTP error) rather than none
    sort: { key: 'name', dir: 1 },
  };
  // The age of a board's last contact now, in seconds, measured on the agent's clock (its
  // generated_ms against the board's last_seen_ms) plus the time since the answer arrived.
  const ageOf = (b) => {
    const seen = num(b.last_seen_ms);
    return ok(seen) && ok(st.generatedMs) ? (st.generatedMs - seen + (Date.now() - st.receivedAt)) / 1000 : NaN;
  };

  // ---- columns: a sort value (NaN: no value, always last) and a cell ----
  const powerRank = (p) => (!p ? NaN : p.under_voltage ? 2 : p.throttled ? 1 : 0);
  const badge = (kind, text, title) => h('span', { class: `badge badge-${kind}`, title }, text);
  const small = (...c) => h('small', {}, ...c);
  const COLUMNS = {
    name: {
      value: (b) => String(b.name || ''),
      cell(b) {
        const name = String(b.name || '');
        const href = b.self ? './' : `peer/${encodeURIComponent(name)}/`;
        return [h('a', { href, title: b.self ? 'this agent' : String(b.url || '') }, name),
          b.self ? small(' (this agent)') : null,
          b.agent_version ? h('span', { class: 'version' }, `v${b.agent_version}`) : null];
      },
    },
    status: {
      value: (b) => STATUS_RANK[b.status] ?? 9,
      cell(b) {
        const s = String(b.status || 'unknown');
        return [badge(s, STATUS_TEXT[s] || s), b.error ? [' ', h('span', { class: 'error' }, String(b.error))] : null];
      },
    },
    cpu: { value: (b) => num(b.cpu_ratio), cell: (b) => fmtPct(num(b.cpu_ratio)) },
    temperature: {
      value: (b) => num(obj(b.temperature)?.celsius),
      cell(b) {
        const t = obj(b.temperature);
        return t ? [fmtC(num(t.celsius)), t.zone ? small(' ', String(t.zone)) : null] : DASH;
      },
    },
    memory: { value: (b) => num(b.memory_ratio), cell: (b) => fmtPct(num(b.memory_ratio)) },
    filesystem: {
      value: (b) => num(obj(b.filesystem)?.used_ratio),
      cell(b) {
        const f = obj(b.filesystem);
        return f ? [fmtPct(num(f.used_ratio)), ' ', h('span', { class: 'fs-mount' }, String(f.mount ?? ''))] : DASH;
      },
    },
    power: {
      value: (b) => powerRank(obj(b.power)),
      cell(b) {
        const p = obj(b.power);
        if (!p) return DASH;
        const marks = [p.under_voltage ? badge('crit', 'under-voltage', 'the supply is too weak now') : null,
          p.throttled ? badge('warn', 'throttled', 'the firmware slows the CPU now') : null].filter(Boolean);
        return marks.length ? marks.flatMap((m, i) => (i ? [' ', m] : [m])) : badge('ok', 'ok');
      },
    },
    alerts: {
      value: (b) => num(obj(b.alerts)?.firing),
      cell(b) {
        const a = obj(b.alerts);
        if (!a || !ok(num(a.firing))) return DASH;
        const names = Array.isArray(a.names) ? a.names.map(String) : [];
        return a.firing ? [badge('crit', String(a.firing)), ' ', h('span', { class: 'names' }, names.join(', '))] : '0';
      },
    },
    last_seen: {
      // Never seen is the oldest of all.
      value: (b) => (ok(num(b.last_seen_ms)) ? ageOf(b) : Infinity),
      cell: (b) => ageCell(b),
    },
  };
  function ageCell(b) {
    const age = ageOf(b);
    if (!ok(age)) return 'never';
    return h('time', { datetime: new Date(num(b.last_seen_ms)).toISOString(), title: fmtClock(num(b.last_seen_ms)) }, `${fmtDuration(age)} ago`);
  }

  // ---- rendering ----
  // Each cell carries its column's title, which a phone shows beside the value (style.css).
  const LABELS = Object.fromEntries([...document.querySelectorAll('#fleet thead th')].map((th) => [th.dataset.key, th.textContent.trim()]));
  function compare(a, b) {
    const col = COLUMNS[st.sort.key];
    const va = col.value(a), vb = col.value(b);
    let c;
    if (typeof va === 'string') c = byName(va, vb);
    else if (Number.isNaN(va) || Number.isNaN(vb)) return Number.isNaN(va) - Number.isNaN(vb) || byName(String(a.name), String(b.name)); // no value: last either way
    else c = va === vb ? 0 : va < vb ? -1 : 1;
    return c * st.sort.dir || byName(String(a.name), String(b.name));
  }

  function visible() {
    const text = $('filter-name').value.trim().toLowerCase();
    const status = $('filter-status').value;
    return st.boards.filter((b) => (!text || String(b.name || '').toLowerCase().includes(text)) && (!status || b.status === status));
  }

  function renderRows() {
    const rows = visible().sort(compare);
    $('fleet').tBodies[0].replaceChildren(...rows.map((b) => h('tr', { 'data-board': String(b.name || ''), 'data-status': String(b.status || '') },
      Object.entries(COLUMNS).map(([key, col]) => {
        const content = col.cell(b);
        return h(key === 'name' ? 'th' : 'td', { 'data-col': key, 'data-label': LABELS[key], scope: key === 'name' ? 'row' : undefined },
          h('span', { class: 'v' }, content));
      }))));
    const total = st.boards.length;
    $('shown').textContent = rows.length === total ? `${total} board${total === 1 ? '' : 's'}` : `${rows.length} of ${total} boards shown`;
    const empty = $('empty');
    empty.hidden = rows.length > 0 || !ok(st.generatedMs); // nothing to say before the first answer
    empty.textContent = total ? 'No board matches the filter.' : 'The agent reports no boards.';
    for (const th of document.querySelectorAll('#fleet thead th'))
      th.setAttribute('aria-sort', th.dataset.key === st.sort.key ? (st.sort.dir > 0 ? 'ascending' : 'descending') : 'none');
  }

  // Only the ages move between answers: once a second, without rebuilding the rows.
  function tickAges() {
    const byBoard = new Map(st.boards.map((b) => [String(b.name || ''), b]));
    for (const td of document.querySelectorAll('#fleet tbody td[data-col="last_seen"]')) {
      const b = byBoard.get(td.parentElement.dataset.board);
      if (b) td.firstChild.replaceChildren(ageCell(b));
    }
  }

  function renderState() {
    const state = st.error ? 'unreachable' : st.boards.length || ok(st.generatedMs) ? 'live' : 'loading';
    document.body.dataset.state = state;
    $('state').textContent = state;
    $('count').textContent = ok(st.generatedMs) ? String(st.boards.length) : '–';
    if (ok(st.generatedMs)) {
      $('updated').textContent = fmtClock(st.generatedMs);
      $('updated').dateTime = new Date(st.generatedMs).toISOString();
    }
    $('every').textContent = fmtDuration(st.intervalMs / 1000);
    const banner = $('banner');
    if (state === 'unreachable') {
      banner.dataset.kind = 'unreachable';
      banner.replaceChildren(h('strong', {}, st.answered ? 'ERROR' : 'UNREACHABLE'), ` Cannot get ${FLEET}: ${st.error}. `,
        ok(st.receivedAt) ? `Showing the boards as of ${fmtClock(st.receivedAt)} (${fmtDuration((Date.now() - st.receivedAt) / 1000)} ago). ` : 'No answer yet. ',
        `Retrying every ${fmtDuration(st.intervalMs / 1000)}.`);
    } else if (state === 'loading') {
      banner.dataset.kind = 'loading';
    }
    banner.hidden = state === 'live';
  }

  // ---- polling ----
  async function poll() {
    const ctl = new AbortController();
    st.answered = false;
    const timer = setTimeout(() => ctl.abort(), Math.min(Math.max(st.intervalMs, 3000), 10000));
    try {
      const res = await fetch(FLEET, { cache: 'no-store', signal: ctl.signal, headers: st.etag ? { 'If-None-Match': st.etag } : {} });
      if (res.status === 304) {
        st.error = '';
      } else if (!res.ok) {
        let why = '';
        try { why = (await res.json()).error.message; } catch { /* not the agent's JSON error */ }
        st.answered = true;
        throw new Error(`HTTP ${res.status}${why ? ` (${why})` : ''}`);
      } else {
        const d = await res.json();
        if (!d || !Array.isArray(d.boards)) throw new Error('the answer has no "boards" list');
        st.boards = d.boards.filter((b) => b && typeof b === 'object');
        st.generatedMs = ok(num(d.generated_ms)) ? d.generated_ms : Date.now();
        st.receivedAt = Date.now();
        st.intervalMs = Math.max(1000, ok(num(d.interval_ms)) ? d.interval_ms : DEFAULT_INTERVAL_MS);
        st.etag = res.headers.get('ETag') || '';
        st.error = '';
        renderRows();
      }
    } catch (e) {
      st.error = e.name === 'AbortError' ? 'no answer in time' : String(e.message || e);
    } finally {
      clearTimeout(timer);
    }
    renderState();
    setTimeout(poll, st.intervalMs);
  }

  // ---- controls ----
  for (const th of document.querySelectorAll('#fleet thead th')) {
    th.querySelector('button').addEventListener('click', () => {
      const key = th.dataset.key;
      st.sort = { key, dir: st.sort.key === key ? -st.sort.dir : 1 };
      renderRows();
    });
  }
  $('filter-name').addEventListener('input', renderRows);
  $('filter-status').addEventListener('change', renderRows);
  document.querySelector('form.filters').addEventListener('submit', (e) => e.preventDefault());
  setInterval(() => { tickAges(); if (st.error) renderState(); }, 1000);
  renderRows();
  poll();
})();
