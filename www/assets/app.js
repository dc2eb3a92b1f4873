// kiwi-agent dashboard: polls api/current for the cards, api/alerts for the firing alerts and
// api/history for the charts (uPlot).
// Every URL is relative to the page (api/current, never /api/current): another agent serves this
// page under /peer/<name>/ and forwards what is below it to that peer (handlers/dashboard/README.md).
// Values arrive in base units (bytes, ratio, hertz, celsius, bytes per second); formatting for
// people happens here. Plain ES2020, no framework; every byte comes from the agent itself.
'use strict';
(() => {
  const API = 'api/current';
  const HISTORY = 'api/history';
  const ALERTS = 'api/alerts?state=firing';
  const body = document.body;
  // The agent writes its dashboard options into <body data-*>; "@poll_ms@" (a file opened
  // without the agent) falls back to the defaults.
  const setting = (v, dflt) => { const n = parseFloat(v); return Number.isFinite(n) ? n : dflt; };
  const POLL_MS = Math.max(1000, setting(body.dataset.pollMs, 5000));
  const WARM_C = setting(body.dataset.temperatureWarm, 70);
  const HOT_C = setting(body.dataset.temperatureHot, 80);
  const TIMEOUT_MS = Math.min(Math.max(POLL_MS, 3000), 10000);
  const $ = (id) => document.getElementById(id);
  const byName = new Intl.Collator(undefined, { numeric: true }).compare;
  const ok = Number.isFinite;
  const num = (v) => (typeof v === 'number' ? v : NaN); // JSON null -> NaN
  const DASH = '–';

  // ---- formatting ----
  function scaled(v, base, units) {
    if (!ok(v)) return DASH;
    let a = Math.abs(v), i = 0;
    while (a >= base && i < units.length - 1) { a /= base; i++; }
    const s = i ? a.toFixed(a < 10 ? 2 : a < 100 ? 1 : 0) : String(Math.round(a));
    return `${v < 0 ? '-' : ''}${s} ${units[i]}`;
  }
  const fmtBytes = (b) => scaled(b, 1024, ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']); // sizes: IEC
  const fmtRate = (b) => scaled(b, 1000, ['B/s', 'kB/s', 'MB/s', 'GB/s', 'TB/s']); // rates: SI
  const fmtPct = (r, digits = 0) => (ok(r) ? `${(r * 100).toFixed(digits)}%` : DASH);
  const fmtHz = (hz) => (!ok(hz) ? DASH : hz >= 1e9 ? `${(hz / 1e9).toFixed(2)} GHz` : `${Math.round(hz / 1e6)} MHz`);
  const fmtC = (c) => (ok(c) ? `${c.toFixed(1)} °C` : DASH);
  const fmtLoad = (l) => (ok(l) ? l.toFixed(2) : DASH);
  // Any other number: whole ones as they are below a million (a count is exact), others to three
  // significant digits; from a million on 1.23 M, 4.56 G.
  function fmtNum(v) {
    if (!ok(v)) return DASH;
    if (Math.abs(v) >= 1e6) return scaled(v, 1000, ['', 'k', 'M', 'G', 'T', 'P', 'E']);
    return Number.isInteger(v) || Math.abs(v) >= 100 ? String(Math.round(v)) : String(Number(v.toPrecision(3)));
  }
  // Volts, amperes, watts: 1.23 V from 1 up, 850 mV below (hwmon's millivolts and milliamperes).
  function fmtSI(v, symbol) {
    if (!ok(v)) return DASH;
    return v && Math.abs(v) < 1 ? `${fmtNum(v * 1e3)} m${symbol}` : `${fmtNum(v)} ${symbol}`;
  }
  function fmtSeconds(s) {
    if (!ok(s)) return DASH;
    const a = Math.abs(s);
    if (a >= 60) return fmtUptime(s);
    return a && a < 1e-3 ? `${fmtNum(s * 1e6)} µs` : a && a < 1 ? `${fmtNum(s * 1e3)} ms` : `${fmtNum(s)} s`;
  }
  // A value of a sensor the page has no card for, by its unit (one of the agent's closed list).
  const UNIT_FMT = {
    bytes: fmtBytes, seconds: fmtSeconds, celsius: fmtC, ratio: (r) => fmtPct(r, 1),
    hertz: (hz) => (Math.abs(hz) >= 1e6 ? fmtHz(hz) : scaled(hz, 1000, ['Hz', 'kHz'])),
    per_second: (v) => `${fmtNum(v)}/s`, bytes_per_second: fmtRate, count: fmtNum, '': fmtNum,
    volts: (v) => fmtSI(v, 'V'), amperes: (v) => fmtSI(v, 'A'), watts: (v) => fmtSI(v, 'W'),
    rpm: (v) => (ok(v) ? `${Math.round(v)} rpm` : DASH),
  };
  const fmtUnit = (unit) => UNIT_FMT[unit] || ((v) => `${fmtNum(v)} ${unit}`);
  const pad = (n) => String(n).padStart(2, '0');
  const fmtClock = (ts) => { const d = new Date(ts * 1000); return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; };
  function fmtDuration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 120) return `${s} s`;
    if (s < 7200) return `${Math.floor(s / 60)} min`;
    return s < 172800 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(s / 86400)} d`;
  }
  function fmtUptime(s) {
    if (!ok(s)) return DASH;
    s = Math.max(0, Math.floor(s));
    const d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    return d ? `${d} d ${hr} h` : hr ? `${hr} h ${m} min` : m ? `${m} min` : `${s} s`;
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
      list: sensor.metrics || [],
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

  // Thresholds come from the dashboard options (temperature_warm_celsius, temperature_hot_celsius).
  const level = (c) => (c >= HOT_C ? 'crit' : c >= WARM_C ? 'warn' : 'ok');
  const LEVEL_WORD = { warn: ' (warm)', crit: ' (hot)' };
  function thermalCard(m) {
    const temps = m.all('thermal_celsius')
      .map((x) => ({ name: String((x.labels || {}).sensor), c: num(x.value) }))
      .sort((a, b) => byName(a.name, b.name));
    if (!temps.length) return note('No sensors on this machine.');
    let max = m.one('thermal_max_celsius');
    if (!ok(max)) max = Math.max(...temps.map((t) => t.c).filter(ok));
    const hottest = temps.find((t) => t.c === max);
    const p = big(val('thermal_max_celsius', fmtC(max), max), ' ', h('small', {}, 'hottest'),
      h('span', { class: 'sr-only' }, LEVEL_WORD[level(max)]));
    p.dataset.level = level(max);
    return [p, h('dl', { class: 'temps' }, temps.map((t) => {
      const r = row([t.name, t === hottest && h('span', { class: 'sr-only' }, ' (hottest)')],
        bar(t.c / 100, level(t.c)), val('thermal_celsius', fmtC(t.c), t.c, t.name),
        h('span', { class: 'sr-only' }, LEVEL_WORD[level(t.c)]));
      r.classList.toggle('hottest', t === hottest);
      r.dataset.level = level(t.c);
      return r;
    })), note(`Warm from ${fmtC(WARM_C)}, hot from ${fmtC(HOT_C)}.`)];
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
    const wear = wearRows(m);
    if (!mounts.length) return [note('No file systems reported.'), wear];
    return [h('dl', { class: 'mounts' }, mounts.map((mnt) => {
      const r = ratio.has(mnt) ? ratio.get(mnt) : used.get(mnt) / size.get(mnt);
      const bytes = (k, map) => val(`storage_${k}_bytes`, fmtBytes(map.get(mnt)), map.get(mnt), mnt);
      return h('div', { class: 'mount', 'data-mount': mnt },
        h('dt', {}, mnt, ro.get(mnt) > 0 && h('span', { class: 'badge', 'data-metric': 'storage_readonly', 'data-label': mnt }, 'read-only')),
        h('dd', {},
          h('span', {}, bytes('used', used), ' / ', bytes('size', size), ' (', val('storage_used_ratio', fmtPct(r), r, mnt), ')'),
          bar(r),
          h('span', { class: 'note' }, bytes('available', avail), ' available')));
    })), wear];
  }

  // Each flash device's wear as the device estimates it, beside what it had written since boot:
  // an eMMC's JEDEC band (type B, the area the file systems live in; A where B is missing), its
  // pre-EOL level, an NVMe drive's percentage used.
  const PRE_EOL = { 2: 'reserve blocks 80 % used', 3: 'reserve blocks nearly gone' };
  function wearRows(m) {
    const band = (end) => new Map(m.all(`diskio_emmc_life_used_${end}_ratio`)
      .sort((a, b) => byName(pick(a.labels, 'type', ''), pick(b.labels, 'type', ''))) // A, then B wins
      .map((x) => [pick(x.labels, 'device', ''), [num(x.value), pick(x.labels, 'type', '')]]));
    const lower = band('lower'), upper = band('upper');
    const eol = m.by('diskio_emmc_pre_eol_level', 'device'), nvme = m.by('nvme_percentage_used_ratio', 'device');
    const written = m.by('diskio_written_bytes_total', 'device');
    const devices = [...new Set([...upper.keys(), ...eol.keys(), ...nvme.keys()])].sort(byName);
    if (!devices.length) return null;
    const level = (r) => (r >= 0.9 ? 'crit' : r >= 0.7 ? 'warn' : null);
    return h('dl', { class: 'health wear' }, heading('Flash wear'), devices.map((d) => {
      const [up, type] = upper.get(d) || [NaN, ''], [lo] = lower.get(d) || [NaN];
      const used = nvme.has(d) ? nvme.get(d) : up;
      const text = nvme.has(d) ? [val('nvme_percentage_used_ratio', fmtPct(used), used, d), ' of its rated life used']
        : ok(up) ? [lo >= 1 ? val('diskio_emmc_life_used_upper_ratio', 'past its rated life', up, d)
          : [val('diskio_emmc_life_used_lower_ratio', fmtPct(lo), lo, d), '–', val('diskio_emmc_life_used_upper_ratio', fmtPct(up), up, d), ' used'], h('small', {}, ` (type ${type})`)]
          : null;
      const r = row(nvme.has(d) ? [d, h('small', {}, ' NVMe')] : [d, h('small', {}, ' eMMC')], ok(used) ? bar(used, level(used)) : null,
        h('span', { class: 'vals' }, text),
        eol.get(d) > 1 && h('span', { class: 'badge', 'data-metric': 'diskio_emmc_pre_eol_level', 'data-label': d }, PRE_EOL[eol.get(d)] || `pre-EOL ${eol.get(d)}`),
        written.has(d) && h('span', { class: 'note' }, val('diskio_written_bytes_total', fmtBytes(written.get(d)), written.get(d), d), ' written since boot'));
      r.dataset.level = eol.get(d) > 2 || level(used) === 'crit' ? 'crit' : eol.get(d) > 1 || level(used) ? 'warn' : 'ok';
      return r;
    }));
  }

  // Network and disk I/O: one table row per interface / device, rates in bytes per second; a
  // column with a formatter of its own (Wi-Fi signal) only where some row has a value.
  const ratesCard = (label, head, cols, empty) => (m) => {
    const shown = cols.filter(([name, , fmt]) => !fmt || m.all(name).length);
    const maps = shown.map(([name]) => m.by(name, label));
    const keys = [...new Set(maps.flatMap((x) => [...x.keys()]))].sort(byName);
    if (!keys.length) return note(empty);
    return h('table', { class: 'rates' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, head), shown.map(([, title]) => h('th', { scope: 'col' }, title)))),
      h('tbody', {}, keys.map((k) => h('tr', {}, h('th', { scope: 'row' }, k),
        shown.map(([name, , fmt], i) => h('td', {}, val(name, (fmt || fmtRate)(maps[i].get(k)), maps[i].get(k), k)))))));
  };
  const fmtDbm = (v) => (ok(v) ? `${Math.round(v)} dBm` : '');

  // Board health: the Raspberry Pi firmware's power flags, each CPU cluster's frequency against
  // its maximum, the cooling devices and fans, and pressure stall information, from the power,
  // cpufreq and pressure sensors (and the thermal and hwmon sensors' cooling and fan series).
  const POWER_FLAGS = [['under_voltage', 'Under-voltage'], ['frequency_capped', 'Frequency capped'],
    ['throttled', 'Throttled'], ['soft_temperature_limit', 'Soft temperature limit']];
  const FLAG_WORD = { crit: 'now', warn: 'since boot', ok: 'no' };
  const flagOf = (m, flag, when) => num((m.all('power_throttle_flag').find((x) => (x.labels || {}).flag === flag && x.labels.when === when) || {}).value);
  const heading = (text) => h('div', { class: 'row group' }, h('dt', {}, text), h('dd'));
  // A row of the board's cards: a label, an optional bar, and the values on one line.
  const line = (label, meter, ...vals) => row(label, meter, h('span', { class: 'vals' }, vals));
  function healthCard(m) {
    const rows = [];
    if (m.all('power_throttle_flag').length) {
      rows.push(heading('Power (Raspberry Pi firmware)'));
      for (const [flag, text] of POWER_FLAGS) {
        const now = flagOf(m, flag, 'now'), boot = flagOf(m, flag, 'since_boot');
        const lvl = now > 0 ? 'crit' : boot > 0 ? 'warn' : 'ok';
        const r = line(text, null, val('power_throttle_flag', FLAG_WORD[lvl], now, flag));
        r.dataset.level = lvl;
        r.dataset.flag = flag;
        rows.push(r);
      }
    } else if (ok(m.one('power_under_voltage_alarm'))) {
      const alarm = m.one('power_under_voltage_alarm');
      rows.push(heading('Power'));
      const r = line('Under-voltage', null, val('power_under_voltage_alarm', alarm > 0 ? 'now' : 'no', alarm));
      r.dataset.level = alarm > 0 ? 'crit' : 'ok';
      rows.push(r);
    }
    const cur = m.by('cpufreq_frequency_hertz', 'policy');
    if (cur.size) {
      const [hwMax, max, capped] = ['cpufreq_hardware_max_frequency_hertz', 'cpufreq_max_frequency_hertz', 'cpufreq_capped']
        .map((n) => m.by(n, 'policy'));
      const cpus = new Map(m.all('cpufreq_policy_info').map((x) => [String(x.labels.policy), x.labels]));
      rows.push(heading('CPU frequency'));
      for (const policy of [...cur.keys()].sort(byName)) {
        const f = cur.get(policy), top = hwMax.get(policy), info = cpus.get(policy);
        const r = row([info ? `CPU ${info.cpus}` : policy, info && h('small', {}, ` ${info.governor}`)],
          bar(f / top, 'info'), h('span', { class: 'vals' }, val('cpufreq_frequency_hertz', fmtHz(f), f, policy),
            ok(top) ? [' of ', val('cpufreq_hardware_max_frequency_hertz', fmtHz(top), top, policy)] : null),
          capped.get(policy) > 0 && h('span', { class: 'badge', 'data-metric': 'cpufreq_capped', 'data-label': policy }, `capped at ${fmtHz(max.get(policy))}`));
        r.dataset.level = capped.get(policy) > 0 ? 'warn' : 'ok';
        rows.push(r);
      }
    }
    const state = m.by('thermal_cooling_state', 'device'), most = m.by('thermal_cooling_max_state', 'device');
    const rpm = m.all('hwmon_fan_rpm');
    if (state.size || rpm.length) {
      rows.push(heading('Cooling'));
      for (const x of rpm) {
        const name = labelText(x) || 'fan';
        rows.push(line(name, null, val('hwmon_fan_rpm', `${fmtNum(num(x.value))} rpm`, num(x.value), name)));
      }
      for (const d of [...state.keys()].sort(byName)) {
        const v = state.get(d), top = most.get(d);
        rows.push(line(d, bar(v / top, 'info'), val('thermal_cooling_state', `${v} of ${top}`, v, d)));
      }
    }
    const some = m.all('pressure_some_ratio').filter((x) => (x.labels || {}).window === '10s');
    if (some.length) {
      const full = new Map(m.all('pressure_full_ratio').filter((x) => x.labels.window === '10s').map((x) => [x.labels.resource, num(x.value)]));
      rows.push(heading('Pressure, last 10 s (waiting for)'));
      for (const x of some.sort((a, b) => byName(a.labels.resource, b.labels.resource))) {
        const res = String(x.labels.resource), v = num(x.value), f = full.get(res);
        rows.push(line(res, bar(v, v >= 0.4 ? 'crit' : v >= 0.1 ? 'warn' : 'info'),
          val('pressure_some_ratio', fmtPct(v, 1), v, res), ' some',
          ok(f) ? [', ', val('pressure_full_ratio', fmtPct(f, 1), f, res), ' full'] : null));
      }
    }
    const oom = m.one('vm_oom_kills_total'); // from /proc/vmstat: also on a kernel without PSI
    if (ok(oom)) {
      if (!some.length) rows.push(heading('Memory'));
      rows.push(line('OOM kills since boot', null, val('vm_oom_kills_total', fmtNum(oom), oom)));
    }
    // The kernel's clock: whether a time daemon keeps it, and how far off it may be.
    const synced = m.one('clock_synchronized'), maxError = m.one('clock_max_error_seconds');
    if (ok(synced)) {
      rows.push(heading('Clock'));
      const r = line('Synchronised', null, val('clock_synchronized', synced > 0 ? 'yes' : 'no', synced),
        ok(maxError) ? [', up to ', val('clock_max_error_seconds', fmtSeconds(maxError), maxError), ' off'] : null);
      r.dataset.level = synced > 0 ? 'ok' : 'warn';
      rows.push(r);
    }
    if (!rows.length) return note('Nothing to show from these sensors on this board.', 'empty');
    return h('dl', { class: 'health' }, rows);
  }

  // GPU, NPU and other devfreq devices: load (where the kernel has it) and frequency against the
  // highest it may run at now.
  const deviceName = (d) => {
    const kind = /gpu/i.test(d) ? 'GPU' : /npu/i.test(d) ? 'NPU' : d === 'dmc' ? 'Memory' : null;
    return kind ? [kind, h('small', {}, ` ${d}`)] : d;
  };
  function devfreqCard(m) {
    const [cur, max, load] = ['devfreq_frequency_hertz', 'devfreq_max_frequency_hertz', 'devfreq_load_ratio'].map((n) => m.by(n, 'device'));
    const devices = [...new Set([...cur.keys(), ...load.keys()])].sort(byName);
    if (!devices.length) return note('No devices reported.');
    return h('dl', { class: 'health' }, devices.map((d) => line(deviceName(d),
      load.has(d) ? bar(load.get(d), 'info') : bar(cur.get(d) / max.get(d), 'info'),
      load.has(d) ? [val('devfreq_load_ratio', fmtPct(load.get(d)), load.get(d), d), ' at '] : null,
      val('devfreq_frequency_hertz', fmtHz(cur.get(d)), cur.get(d), d),
      max.has(d) ? [' of ', val('devfreq_max_frequency_hertz', fmtHz(max.get(d)), max.get(d), d)] : null)));
  }

  // The busiest processes (the processes sensor): by CPU (a share of all cores, as CPU usage is)
  // and by resident memory, each position's command and pid; and how many are in which state.
  function processesCard(m) {
    const at = (x) => `${pick(x.labels, 'by', '')}/${pick(x.labels, 'rank', '')}`;
    const share = new Map(m.all('processes_top_cpu_ratio').map((x) => [at(x), num(x.value)]));
    const bytes = new Map(m.all('processes_top_resident_bytes').map((x) => [at(x), num(x.value)]));
    const table = (by, title) => {
      const top = m.all('processes_top_pid').filter((x) => pick(x.labels, 'by', '') === by)
        .sort((a, b) => Number(a.labels.rank) - Number(b.labels.rank));
      if (!top.length) return note(by === 'cpu' ? 'By CPU: from the second reading on.' : 'By memory: none ranked.');
      return h('table', { class: 'rates procs', 'data-by': by }, h('caption', {}, title),
        h('thead', {}, h('tr', {}, ['Process', 'PID', 'CPU', 'Memory'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, top.map((x) => h('tr', {}, h('th', { scope: 'row' }, String(x.labels.command)),
          h('td', {}, val('processes_top_pid', String(num(x.value)), num(x.value), at(x))),
          h('td', {}, val('processes_top_cpu_ratio', fmtPct(share.get(at(x)), 1), share.get(at(x)), at(x))),
          h('td', {}, val('processes_top_resident_bytes', fmtBytes(bytes.get(at(x))), bytes.get(at(x)), at(x)))))));
    };
    const state = m.by('processes_state', 'state');
    const count = (k) => val('processes_state', fmtNum(state.get(k)), state.get(k), k);
    return [table('cpu', 'By CPU (share of all cores)'), table('memory', 'By memory (resident)'),
      h('dl', { class: 'kv' },
        row('Processes / threads', val('processes_pids', fmtNum(m.one('processes_pids')), m.one('processes_pids')), ' / ',
          val('processes_threads', fmtNum(m.one('processes_threads')), m.one('processes_threads'))),
        row('Running / on disk / zombie', count('running'), ' / ', count('disk_sleep'), ' / ', count('zombie')))];
  }

  const CARDS = {
    cpu: cpuCard, thermal: thermalCard, memory: memoryCard, storage: storageCard, health: healthCard, devfreq: devfreqCard,
    processes: processesCard,
    network: ratesCard('interface', 'Interface', [['network_receive_bytes_per_second', 'Receive'],
      ['network_transmit_bytes_per_second', 'Transmit'], ['network_wireless_signal_dbm', 'Signal', fmtDbm]], 'No interfaces reported.'),
    diskio: ratesCard('device', 'Device', [['diskio_read_bytes_per_second', 'Read'],
      ['diskio_write_bytes_per_second', 'Write']], 'No disks reported.'),
  };
  const OPTIONAL = new Set(['network', 'diskio', 'health', 'devfreq', 'processes']); // cards shown only where the agent runs them
  // ... and only where they have data (hwmon's generic card too: most boards have no channels).
  const NEEDS_DATA = new Set(['health', 'devfreq', 'processes', 'hwmon']);
  // Sensors drawn on another plugin's card, and series a card borrows from other sensors.
  const PART_OF = { power: 'health', cpufreq: 'health', pressure: 'health', clock: 'health' };
  const BORROWS = {
    health: [/^thermal_cooling_/, /^hwmon_fan_rpm$/],
    // Flash wear: diskio's eMMC estimate and bytes written since boot, and the NVMe recipe's
    // exec sensor (plugins/exec/recipes), whatever its name.
    storage: [/^diskio_emmc_/, /^diskio_written_bytes_total$/, /^nvme_percentage_used_ratio$/],
  };
  const KINDS = Object.fromEntries(Object.keys(CARDS).map((p) => [p, $(`h-${p}`).textContent])); // "Storage"

  // Metric and label text comes from plugins (an exec script prints it): shown as text only.
  const labelPairs = (x) => Object.entries(x.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
  const seriesId = (x) => `${x.name}${JSON.stringify(Object.entries(x.labels || {}).sort())}`;

  // A sensor of any other plugin: its metrics by name, one row per label set, each value formatted
  // by its unit. A counter whose rate the sensor reports beside it (`x_total` and `x_per_second`
  // with the same labels, as the agent's own sensors turn counters into rates) shows as that rate
  // only; any other counter shows its value. Past the first ROWS values, whole metrics fold into
  // a list the user can open.
  const ROWS = 12;
  function genericCard(m) {
    const ids = new Set(m.list.map(seriesId));
    const shown = m.list.filter((x) => !(x.kind === 'counter' && /_total$/.test(x.name) &&
      ids.has(seriesId({ name: x.name.replace(/_total$/, '_per_second'), labels: x.labels }))));
    if (!shown.length) return note('No metrics in the latest sample.');
    const groups = new Map();
    for (const x of shown) groups.set(x.name, [...(groups.get(x.name) || []), x]);
    const rows = [[], []];
    let count = 0, folded = 0;
    for (const [name, list] of groups) {
      const value = (x) => val(name, fmtUnit(x.unit)(num(x.value)), num(x.value), labelPairs(x) || null);
      const fold = count > 0 && count + list.length > ROWS ? 1 : 0;
      count += list.length;
      folded += fold * list.length;
      if (list.length === 1 && !labelPairs(list[0])) { rows[fold].push(row(name, value(list[0]))); continue; }
      rows[fold].push(h('div', { class: 'row group' }, h('dt', {}, name), h('dd')));
      for (const x of list.sort((a, b) => byName(labelPairs(a), labelPairs(b)))) {
        const r = row(labelPairs(x), value(x));
        r.classList.add('sub');
        rows[fold].push(r);
      }
    }
    const dl = (kids) => h('dl', { class: 'kv generic' }, kids);
    return [dl(rows[0]), folded && h('details', {}, h('summary', {}, `${folded} more`), dl(rows[1]))];
  }

  // Which sensor each of the page's own cards shows: the first instance of its plugin (for an
  // agent from before the `plugin` field, the one named after it). Every other sensor gets a card
  // of its own: a known plugin's next instance drawn as the first one is, any other generic.
  function placeSensors(sensors) {
    const fixed = new Map(), extra = [];
    for (const [key, s] of Object.entries(sensors)) {
      if (!s || typeof s !== 'object') continue;
      const plugin = s.plugin === undefined ? key : String(s.plugin);
      // The agent's own reports (its telemetry; the alert rules' alert_firing): for /metrics and
      // the history, no card. Firing alerts have the banner and the marks.
      if (plugin === 'agent' || plugin === 'alerts') continue;
      if ((CARDS[plugin] || PART_OF[plugin]) && !fixed.has(plugin)) fixed.set(plugin, [key, s]);
      else extra.push([key, s, plugin]);
    }
    return { fixed, extra };
  }
  // "Storage", "Storage · shm" (a second instance); "backup · exec", "uptime" (named as its plugin).
  const titleOf = (key, plugin) => {
    const [first, second] = CARDS[plugin] ? [KINDS[plugin], key] : [key, plugin];
    return key === plugin ? first : `${first} · ${second}`;
  };

  function fillCard(card, key, sensor, plugin, render) {
    const status = sensor ? String(sensor.status) : 'missing';
    const msg = sensor && sensor.message && note(sensor.message, 'msg');
    let content;
    if (!sensor) content = note('Not configured in this agent.');
    else if (status === 'error') content = [note('Sensor error', 'error'), msg || note('no message', 'msg')];
    // The sensor's own words when it has them ("no thermal zones or hwmon sensors"), once.
    else if (status === 'no_data') content = msg || note(plugin === 'thermal' ? 'No sensors on this machine.' : 'No data from this sensor.');
    else if (status !== 'ok') content = note(`Unknown status "${status}"`, 'error');
    else {
      try { content = [render(metrics(sensor)), msg]; } catch (e) {
        console.error(e);
        content = note(`Cannot display this sensor: ${e.message}`, 'error');
      }
    }
    card.dataset.status = status;
    card.dataset.plugin = plugin;
    if (key) card.dataset.instance = key;
    else delete card.dataset.instance;
    card.querySelector('h2').textContent = key ? titleOf(key, plugin) : KINDS[plugin];
    const open = !!card.querySelector('details[open]'); // a list the user opened stays open
    card.querySelector('.body').replaceChildren(...[content].flat(9).filter(Boolean));
    if (open) for (const d of card.querySelectorAll('details')) d.open = true;
  }

  // Puts `els` into `parent` in this order, moving only what is out of place (each poll).
  function arrange(parent, els) {
    let prev = null;
    for (const el of els) {
      if ((prev ? prev.nextElementSibling : parent.firstElementChild) !== el) {
        if (prev) prev.after(el); else parent.prepend(el);
      }
      prev = el;
    }
  }

  const ownCards = new Map(); // instance name -> the card made for it
  // The id of the card that shows sensor instance `name` ("" when none does).
  const cardId = (name) => ([...document.querySelectorAll('.grid .card')].find((c) => c.dataset.instance === name) || {}).id || '';
  // The sensor a page card shows: its plugin's first instance; for a card drawn from several
  // (board health: power, cpufreq, pressure, clock), one made of them: its own sensor's status and
  // message where it has one (else ok if any part is), each failing part named, and the series
  // it borrows from any other sensor's latest sample added.
  function cardSensor(plugin) {
    const { fixed } = st.placed;
    const own = fixed.get(plugin);
    const parts = Object.keys(PART_OF).filter((p) => PART_OF[p] === plugin && fixed.has(p)).map((p) => [p, fixed.get(p)[1]]);
    const borrows = BORROWS[plugin] || [];
    if (!parts.length && !borrows.length) return own || [];
    const sensors = [...(own ? [[plugin, own[1]]] : []), ...parts];
    if (!sensors.length) return [];
    const statuses = sensors.map(([, s]) => String(s.status));
    const status = own ? statuses[0] : statuses.includes('ok') ? 'ok' : statuses.includes('error') ? 'error' : statuses[0];
    const message = [own && own[1].message, ...parts.filter(([, s]) => s.status === 'error').map(([p, s]) => `${p}: ${s.message || 'error'}`)]
      .filter(Boolean).join('; ');
    const mine = new Set(sensors.map(([, s]) => s));
    const lent = Object.values(st.data.sensors).filter((s) => s && s.status === 'ok' && !mine.has(s))
      .flatMap((s) => (s.metrics || []).filter((x) => borrows.some((re) => re.test(x.name))));
    return [own && own[0], { status, message, metrics: [...sensors.flatMap(([, s]) => (s.status === 'ok' ? s.metrics || [] : [])), ...lent] }];
  }

  function renderCards() {
    const { extra } = st.placed;
    const order = new Map(Object.keys(CARDS).map((p) => [p, [$(`card-${p}`)]]));
    for (const [plugin, render] of Object.entries(CARDS)) {
      const [key, sensor] = cardSensor(plugin);
      $(`card-${plugin}`).hidden = OPTIONAL.has(plugin) && (!sensor || (NEEDS_DATA.has(plugin) && sensor.status === 'no_data'));
      fillCard($(`card-${plugin}`), key, sensor, plugin, render);
      if (NEEDS_DATA.has(plugin) && $(`card-${plugin}`).querySelector('.body > .empty')) $(`card-${plugin}`).hidden = true;
    }
    const generic = [];
    for (const [key, sensor, plugin] of extra) {
      let card = ownCards.get(key);
      if (!card) {
        card = h('section', { class: 'card', id: `card-sensor-${key}`, 'aria-labelledby': `h-sensor-${key}` },
          h('h2', { id: `h-sensor-${key}` }), h('div', { class: 'body' }));
        ownCards.set(key, card);
      }
      fillCard(card, key, sensor, plugin, CARDS[plugin] || genericCard);
      card.hidden = NEEDS_DATA.has(plugin) && sensor.status === 'no_data'; // hwmon without channels
      (order.get(plugin) || generic).push(card); // next to its plugin's card, others at the end
    }
    const keep = new Set(extra.map(([key]) => key));
    for (const [key, card] of ownCards) if (!keep.has(key)) { card.remove(); ownCards.delete(key); }
    arrange(document.querySelector('.grid'), [...[...order.values()].flat(), ...generic]);
    showAlerts(); // the cards the alerts mark, and the banner's links to them
  }

  // ---- history charts (uPlot) ----
  // 2 min: every sample. Longer ranges: the agent downsamples (`step`) to 700-1,000 points, each
  // the mean of its bucket; 7 d, 30 d and 1 y at steps its minute and hour summaries answer.
  // `refresh`: seconds between requests for the newest buckets. `band`: a min-max band around
  // each line (a bucket's lowest and highest sample), where a point stands for many samples.
  const DAY = 86400;
  const RANGES = {
    '2m': { seconds: 120, step: 0, refresh: 0, text: 'the last 2 minutes' },
    '1h': { seconds: 3600, step: 4, refresh: 4, text: 'the last hour' },
    '24h': { seconds: DAY, step: 86, refresh: 30, band: true, text: 'the last 24 hours' },
    '7d': { seconds: 7 * DAY, step: 600, refresh: 120, band: true, text: 'the last 7 days' },
    '30d': { seconds: 30 * DAY, step: 3600, refresh: 300, band: true, text: 'the last 30 days' },
    '1y': { seconds: 365 * DAY, step: 43200, refresh: 600, band: true, text: 'the last year' },
  };
  // Byte axes tick at 1, 2, 4 ... 512 KiB / MiB / GiB, not at 477 MiB.
  const BINARY_STEPS = [0, 1, 2, 3, 4, 5].flatMap((k) => [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].map((m) => m * 1024 ** k));
  const axisC = (v) => `${Math.round(v)} °C`;
  const aroundC = (u, min, max) => (ok(min) && ok(max) ? [Math.floor(min - 3), Math.ceil(max + 3)] : [0, 100]);
  const pick = (labels, key, fallback) => String((labels || {})[key] ?? fallback);
  const CHARTS = [
    { id: 'cpu', plugin: 'cpu', names: ['cpu_usage_ratio'], fmt: (v) => fmtPct(v, 1), axis: (v) => fmtPct(v),
      label: () => 'total', y: () => [0, 1], fill: true },
    { id: 'thermal', plugin: 'thermal', names: ['thermal_celsius'], fmt: fmtC, axis: axisC,
      label: (s) => pick(s.labels, 'sensor', s.key), y: aroundC },
    { id: 'memory', plugin: 'memory', names: ['memory_used_bytes', 'memory_cached_bytes', 'memory_swap_used_bytes'],
      fmt: fmtBytes, incrs: BINARY_STEPS, label: (s) => ({ memory_used_bytes: 'used', memory_cached_bytes: 'cached' })[s.name] || 'swap used' },
    { id: 'network', plugin: 'network', names: ['network_receive_bytes_per_second', 'network_transmit_bytes_per_second'],
      fmt: fmtRate, label: (s) => `${pick(s.labels, 'interface', '')} ${s.name.includes('receive') ? 'in' : 'out'}` },
    { id: 'diskio', plugin: 'diskio', names: ['diskio_read_bytes_per_second', 'diskio_write_bytes_per_second'],
      fmt: fmtRate, label: (s) => `${pick(s.labels, 'device', '')} ${s.name.includes('read') ? 'read' : 'write'}` },
    // The board's own charts, shown where the latest sample has their series.
    { id: 'pressure', plugin: 'pressure', names: ['pressure_some_ratio'], optional: true,
      match: (x) => x.name === 'pressure_some_ratio' && pick(x.labels, 'window', '') === '10s',
      fmt: (v) => fmtPct(v, 1), axis: (v) => fmtPct(v, v && Math.abs(v) < 0.01 ? 2 : v && Math.abs(v) < 0.1 ? 1 : 0),
      label: (s) => pick(s.labels, 'resource', s.key) },
    { id: 'frequency', plugin: 'cpufreq', names: ['cpufreq_frequency_hertz'], optional: true, fmt: fmtHz,
      label: (s) => policyName(pick(s.labels, 'policy', s.key)) },
    { id: 'fans', plugin: 'hwmon', names: ['hwmon_fan_rpm'], optional: true,
      fmt: (v) => `${fmtNum(v)} rpm`, label: (s) => labelText(s) || s.key },
  ];
  // "CPU 4-5" for policy4, from the latest sample's cpufreq_policy_info.
  function policyName(policy) {
    const [, s] = st.placed.fixed.get('cpufreq') || [];
    const info = ((s && s.metrics) || []).find((x) => x.name === 'cpufreq_policy_info' && (x.labels || {}).policy === policy);
    return info ? `CPU ${info.labels.cpus}` : policy;
  }
  // Whether the latest sample has a series chart `def` draws.
  const drawsFrom = (def) => def.match || ((x) => def.names.includes(x.name));
  const latestHas = (def) => Object.values(st.data.sensors).some((s) => s && (s.metrics || []).some(drawsFrom(def)));
  const labelText = (s) => Object.values(s.labels || {}).join(' ');
  const fromZero = (u, min, max) => [0, ok(max) && max > 0 ? max * 1.1 : 1];
  const withZero = (u, min, max) => { // any sign: a generic gauge may go below zero
    const lo = ok(min) ? Math.min(0, min) : 0, hi = ok(max) ? Math.max(0, max) : 1;
    return hi > lo ? [lo * 1.1, hi * 1.1] : [0, 1];
  };
  const UNIT_CHART = { ratio: { axis: (v) => fmtPct(v) }, bytes: { incrs: BINARY_STEPS }, celsius: { axis: axisC, y: aroundC } };

  // The generic cards' charts: one per sensor and unit (an axis has one unit), one line per gauge
  // series the sensor has reported since it appeared (a sample in error has none: the line stays),
  // at most LINES of them, one per colour; the caption says how many more the card lists.
  const LINES = 8;
  const seen = new Map(); // instance name -> { plugin, series: Map(seriesId -> metric) }
  function sensorCharts() {
    const defs = [];
    for (const [key, sensor, plugin] of st.placed.extra) {
      if (CARDS[plugin]) continue; // a known plugin's next instance: its series are in that plugin's chart
      if (!seen.has(key) || seen.get(key).plugin !== plugin) seen.set(key, { plugin, series: new Map() });
      const mine = seen.get(key).series;
      for (const x of sensor.metrics || []) {
        // Gauges only (no `kind`): a counter's, a histogram's or a summary's series mostly grow.
        if (!x.kind && !mine.has(seriesId(x))) mine.set(seriesId(x), { name: String(x.name), labels: x.labels, unit: String(x.unit ?? '') });
      }
      while (mine.size > 256) mine.delete(mine.keys().next().value); // labels that keep changing
      const units = [...new Set([...mine.values()].map((x) => x.unit))];
      for (const unit of units) {
        const all = [...mine.values()].filter((x) => x.unit === unit)
          .sort((a, b) => byName(a.name, b.name) || byName(labelPairs(a), labelPairs(b)));
        const ids = new Set(all.slice(0, LINES).map(seriesId));
        const names = [...new Set(all.slice(0, LINES).map((x) => x.name))];
        const more = all.length - ids.size;
        defs.push({
          id: `sensor-${key}-${unit || 'none'}`, names, match: (x) => ids.has(seriesId(x)), fmt: fmtUnit(unit), y: withZero, ...UNIT_CHART[unit],
          label: (x) => (names.length > 1 ? [x.name, labelPairs(x)] : [labelPairs(x) || x.name]).filter(Boolean).join(' '),
          caption: `${titleOf(key, plugin)}${units.length > 1 ? ` (${unit || 'no unit'})` : ''}${more ? `: ${ids.size} of ${all.length} series` : ''}`,
        });
      }
    }
    const live = new Set(st.placed.extra.map(([key]) => key));
    for (const key of seen.keys()) if (!live.has(key)) seen.delete(key);
    return defs;
  }

  // A figure per generic chart, made and removed as sensors come and go (a reload).
  function arrangeCharts() {
    const figs = st.sensorCharts.map((def) => {
      let fig = $(`chart-${def.id}`);
      if (!fig) {
        fig = h('figure', { class: 'chart', id: `chart-${def.id}`, 'data-chart': def.id, 'aria-labelledby': `c-${def.id}` },
          h('figcaption', { id: `c-${def.id}` }), h('div', { class: 'plot', 'aria-hidden': 'true' },
            note(typeof uPlot === 'function' ? 'Loading history…' : 'The chart library did not load.', typeof uPlot === 'function' ? null : 'error')),
          h('p', { class: 'sr-only' }));
      }
      fig.querySelector('figcaption').textContent = def.caption;
      return fig;
    });
    const keep = new Set(figs);
    for (const fig of document.querySelectorAll('.charts .chart')) {
      if (!CHARTS.some((def) => fig.id === `chart-${def.id}`) && !keep.has(fig)) { dropChart(fig.dataset.chart); fig.remove(); }
    }
    arrange(document.querySelector('.charts'), [...CHARTS.map((def) => $(`chart-${def.id}`)), ...figs]);
  }
  const HEIGHT = 170;

  const hist = {
    // api: 'full' (since/step/series) or 'basic' (limit only, an agent before those parameters);
    // filter: 'list' (series=<what the charts draw>), 'all' (series=*) or 'none'; band: whether
    // the agent takes `band` (min and max beside each series' values).
    range: '2m', api: 'full', filter: 'list', band: true,
    inflight: false, pending: false, fetchedAt: -Infinity, fetchedRange: null,
    last: null, window: [0, 1], charts: new Map(), error: null,
  };
  try { if (RANGES[localStorage.getItem('kiwi.range')]) hist.range = localStorage.getItem('kiwi.range'); } catch (e) { /* storage off */ }

  function theme() {
    const css = getComputedStyle(body);
    const v = (name) => css.getPropertyValue(name).trim();
    return { fg: v('--muted'), grid: v('--line'), colors: [1, 2, 3, 4, 5, 6, 7, 8].map((i) => v(`--c${i}`)) };
  }
  let colors = theme();

  // `series=` asks only for what the charts draw, by the names in the latest sample and in the
  // history already drawn (the agent stores a sample before it publishes it, and answered with
  // those series, so it knows each of them; a name it does not know would be a 400). Not the
  // latest sample alone: a sample can lack a series the charts draw (a rate, CPU usage among
  // them, needs two readings some time apart, and a sample taken moments after a late one has
  // none), and the chart would lose its line, and 1 h / 24 h their merge, until the next one.
  function wantedSeries() {
    const present = new Set();
    for (const s of Object.values(st.data.sensors)) for (const m of (s && s.metrics) || []) present.add(m.name);
    if (hist.last) for (const s of Object.values(hist.last.series)) present.add(s.name);
    const swap = [...Object.values(st.data.sensors)].some((s) => s && metrics(s).one('memory_swap_total_bytes') > 0);
    return [...new Set([...CHARTS, ...st.sensorCharts].flatMap((def) => def.names))]
      .filter((n) => present.has(n) && (n !== 'memory_swap_used_bytes' || swap));
  }

  // `since`: fetch only from there on (the newest bucket, which may have grown, and any after it).
  function historyUrl(now, since) {
    const r = RANGES[hist.range];
    const p = new URLSearchParams();
    if (hist.api === 'basic' || !r.step) {
      p.set('limit', String(Math.min(86400, Math.ceil(120 / (st.data.interval_seconds || 1)))));
    } else {
      const from = since ?? Math.floor(now - r.seconds);
      p.set('since', String(from));
      p.set('step', String(r.step));
      p.set('limit', String(Math.max(1, Math.ceil((now - from) / r.step) + 1)));
      if (r.band && hist.band) p.set('band', 'true');
    }
    let names = hist.filter === 'list' ? wantedSeries() : ['*'];
    if (names.join(',').length > 1500) names = ['*']; // many generic charts: the URL stays under 2 kB
    if (hist.api === 'full' && hist.filter !== 'none' && names.length) p.set('series', names.join(','));
    return `${HISTORY}?${p}`.replace(/%2C/g, ',').replace(/%2A/g, '*');
  }

  // `add` (from `since` on) replaces the tail of `old`; points older than the window drop off.
  // Null when the two do not line up (another set of series): the caller fetches it all again.
  function merge(old, add, since, from) {
    const keys = Object.keys(old.series);
    const same = (k) => add.series[k] && !add.series[k].min === !old.series[k].min; // with a band in both or neither
    if (keys.length !== Object.keys(add.series).length || !keys.every(same)) return null;
    const start = old.timestamps.findIndex((t) => t >= from);
    const cut = old.timestamps.findIndex((t) => t >= since);
    const a = start < 0 ? old.timestamps.length : start, b = cut < 0 ? old.timestamps.length : cut;
    const out = { ...add, timestamps: [...old.timestamps.slice(a, Math.max(a, b)), ...add.timestamps], series: {} };
    for (const k of keys) {
      out.series[k] = { ...add.series[k] };
      for (const col of ['values', 'min', 'max']) {
        if (add.series[k][col]) out.series[k][col] = [...old.series[k][col].slice(a, Math.max(a, b)), ...add.series[k][col]];
      }
    }
    out.count = out.timestamps.length;
    return out;
  }

  // Fetches the chosen range, at most one request at a time; `force` after a range change. The
  // downsampled ranges are kept up to date with small requests for their newest buckets only.
  async function loadHistory(force) {
    const d = st.data;
    if (!d || typeof uPlot !== 'function') return;
    if (hist.inflight) { hist.pending = hist.pending || force; return; }
    const r = RANGES[hist.range];
    const every = hist.api === 'basic' ? 0 : r.refresh;
    if (!force && hist.fetchedRange === hist.range && d.timestamp - hist.fetchedAt < every) return;
    hist.inflight = true;
    const range = hist.range;
    try {
      for (let attempt = 0; attempt < 4; attempt++) {
        const last = hist.last;
        const since = !force && r.step && hist.api === 'full' && last && last.step === r.step && last.timestamps.length
          ? last.timestamps[last.timestamps.length - 1] : undefined;
        const res = await fetch(historyUrl(d.timestamp, since), { cache: 'no-store' });
        if (res.status === 400 && hist.api === 'full') {
          // An agent without the newer history parameters: fall back step by step, remember it.
          const param = (((await res.json().catch(() => null)) || {}).error || {}).parameter;
          if (param === 'series' && hist.filter !== 'none') hist.filter = hist.filter === 'list' ? 'all' : 'none';
          else if (param === 'band' && hist.band) hist.band = false; // the lines without their bands
          else hist.api = 'basic';
          continue;
        }
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        let data = await res.json();
        if (!data || !Array.isArray(data.timestamps) || typeof data.series !== 'object') throw new Error('unexpected response shape');
        if (since !== undefined) {
          data = merge(last, data, since, d.timestamp - r.seconds);
          if (!data) { force = true; continue; }
        }
        hist.error = null;
        if (range === hist.range) {
          hist.fetchedAt = d.timestamp;
          hist.fetchedRange = range;
          hist.last = data;
          drawCharts();
        }
        break;
      }
    } catch (e) {
      hist.error = e.message || String(e);
      showHistoryNote();
    } finally {
      hist.inflight = false;
      if (hist.pending || range !== hist.range) { hist.pending = false; loadHistory(true); }
    }
  }

  function showHistoryNote() {
    const r = RANGES[hist.range];
    const step = hist.last && hist.last.step;
    const banded = !!hist.last && Object.values(hist.last.series).some((s) => Array.isArray(s.min));
    let text = hist.api === 'basic' && hist.range !== '2m'
      ? `This agent's history API cannot downsample (no "step" parameter): showing the last ${fmtDuration(120 * (st.data.interval_seconds || 1))}.`
      : `Showing ${r.text}${step ? `, each point the mean of ${fmtStep(step)}` : ''}${banded ? '; the shaded band spans its lowest to highest sample' : ''}.`;
    if (hist.error) text = `History unavailable (${hist.error}); showing what was loaded before.`;
    $('history-note').textContent = text;
    const sec = $('history');
    sec.dataset.range = hist.range;
    sec.dataset.api = hist.api;
    sec.dataset.step = String(step || 0);
    sec.dataset.band = String(banded);
  }

  function drawCharts() {
    const data = hist.last;
    const span = hist.api === 'basic' ? 120 * (st.data.interval_seconds || 1) : RANGES[hist.range].seconds;
    const ts = data.timestamps;
    const to = Math.max(st.data.timestamp, ts.length ? ts[ts.length - 1] : 0);
    hist.window = [to - span, to];
    for (const def of [...CHARTS, ...st.sensorCharts]) drawChart(def, data);
    showHistoryNote();
    $('history').dataset.loadedRange = hist.range; // test hook: the charts show this range now
  }

  function dropChart(id) {
    const c = hist.charts.get(id);
    if (c) { c.u.destroy(); hist.charts.delete(id); }
  }

  function drawChart(def, data) {
    const fig = $(`chart-${def.id}`);
    const plot = fig.querySelector('.plot');
    const [, sensor] = st.placed.fixed.get(def.plugin) || [];
    fig.hidden = def.optional ? !latestHas(def) : OPTIONAL.has(def.plugin) && !sensor;
    const want = drawsFrom(def);
    const noSwap = def.id === 'memory' && sensor && !(metrics(sensor).one('memory_swap_total_bytes') > 0);
    const keys = Object.keys(data.series)
      .filter((k) => want(data.series[k]) && !(noSwap && data.series[k].name === 'memory_swap_used_bytes'))
      .sort((a, b) => byName(labelText(data.series[a]), labelText(data.series[b])) ||
        def.names.indexOf(data.series[a].name) - def.names.indexOf(data.series[b].name)); // eth0 in, eth0 out, wlan0 in, ...
    const series = keys.map((k) => ({ key: k, ...data.series[k] }));
    csvLink(fig, data.timestamps.length ? keys : []);
    if (fig.hidden || !series.length || !data.timestamps.length) {
      dropChart(def.id);
      fig.dataset.points = '0';
      fig.dataset.series = '0';
      if (!fig.hidden) {
        const text = def.id === 'thermal' && sensor && sensor.status === 'no_data' ? 'No temperature sensors on this machine.' : 'No history yet.';
        plot.replaceChildren(note(text));
        fig.querySelector('.sr-only').textContent = text;
      }
      return;
    }
    const gap = 2.5 * (data.step || st.data.interval_seconds || 1);
    // A line with a min-max band (`band`): uPlot draws in series order, so the bands' edges (max,
    // min of each) come first and every line over them. `at.band[k]`: line k's band, or -1.
    const banded = series.filter((s) => Array.isArray(s.min) && Array.isArray(s.max));
    const { cols, gaps } = withGaps(data.timestamps, [...series.map((s) => s.values), ...banded.flatMap((s) => [s.max, s.min])], gap);
    const lines = cols.slice(0, series.length + 1);
    const plotted = [cols[0], ...cols.slice(series.length + 1), ...lines.slice(1)];
    const band = series.map((s) => banded.indexOf(s));
    const sig = `${keys.join('\n')}\n${band}`;
    let c = hist.charts.get(def.id);
    if (c && c.sig === sig) {
      Object.assign(c.at, { gaps, gap, band }); // before setData: it redraws the tooltip
      c.u.setData(plotted);
    } else {
      dropChart(def.id);
      plot.replaceChildren();
      const at = { gaps, gap, band, off: 2 * banded.length };
      c = { sig, at, u: new uPlot(chartOptions(def, series, plot, at), plotted, plot) };
      hist.charts.set(def.id, c);
    }
    let points = 0;
    let joined = 0; // points between a line's readings, drawn across (withGaps)
    for (const col of lines.slice(1)) for (const v of col) { points += typeof v === 'number'; joined += v === undefined; }
    fig.dataset.points = String(points);
    fig.dataset.joined = String(joined);
    fig.dataset.newest = String(cols[0][cols[0].length - 1]); // test hook: the newest point's time
    fig.dataset.series = String(series.length);
    fig.dataset.bands = String(c.u.bands.length); // test hook: the bands uPlot draws
    fig.querySelector('.sr-only').textContent = summary(def, series, lines);
  }

  // The chart's range as CSV (`format=csv`: a row per point, each line's band beside it), of the
  // series it draws: a link beside its caption, for an agent whose history takes `step` (and
  // `band`: the agent that refuses it has no `format=csv` either).
  function csvLink(fig, keys) {
    let a = fig.querySelector(':scope > .csv');
    if (!a) fig.append(a = h('a', { class: 'csv' }, 'CSV'));
    const r = RANGES[hist.range], p = new URLSearchParams();
    if (r.step) {
      p.set('since', String(-r.seconds));
      p.set('step', String(r.step));
      if (r.band && hist.band) p.set('band', 'true');
    } else {
      p.set('limit', String(Math.ceil(120 / (st.data.interval_seconds || 1))));
    }
    p.set('series', keys.join(','));
    p.set('format', 'csv');
    a.href = `${HISTORY}?${p}`;
    a.download = `${fig.dataset.chart}-${hist.range}.csv`;
    a.title = `${fig.querySelector('figcaption').textContent}, ${r.text}, as CSV`;
    a.hidden = !keys.length || hist.api !== 'full' || !hist.band;
  }

  // uPlot columns; a null after each jump in time longer than `gap` (the agent was down, or the
  // history leaves empty buckets out), so no line is drawn across a time without data. `gaps`:
  // the indexes of those inserted points. A line of a sensor sampled less often than the agent
  // (interval = "5s", an exec program at "1m") has no value between its readings: those points
  // are undefined, which uPlot joins across, unless the readings around them lie further apart
  // than 2.5 times the line's usual spacing (it failed, or had no data, for a while: a gap).
  function withGaps(ts, values, gap) {
    const cols = [[], ...values.map(() => [])];
    const gaps = new Set();
    ts.forEach((t, i) => {
      if (i && t - ts[i - 1] > gap) {
        gaps.add(cols[0].length);
        cols.forEach((c, k) => c.push(k ? null : ts[i - 1] + gap / 2.5));
      }
      cols[0].push(t);
      values.forEach((v, k) => cols[k + 1].push(typeof v[i] === 'number' ? v[i] : null));
    });
    const xs = cols[0];
    for (const col of cols.slice(1)) {
      const at = [];
      col.forEach((v, i) => { if (typeof v === 'number') at.push(i); });
      const spacings = [];
      for (let n = 1; n < at.length; n++) spacings.push(xs[at[n]] - xs[at[n - 1]]);
      const usual = spacings.sort((a, b) => a - b)[Math.floor(spacings.length / 2)] || 0;
      for (let n = 1; n < at.length; n++) {
        const [a, b] = [at[n - 1], at[n]];
        if (b - a < 2 || xs[b] - xs[a] > Math.max(gap, 2.5 * usual)) continue;
        let crossesGap = false;
        for (let i = a + 1; i < b; i++) crossesGap = crossesGap || gaps.has(i);
        if (!crossesGap) for (let i = a + 1; i < b; i++) col[i] = undefined;
      }
    }
    return { cols, gaps };
  }

  // What a screen reader hears instead of the canvas: latest and highest value of each line.
  function summary(def, series, cols) {
    const parts = series.slice(0, 6).map((s, i) => {
      const vals = cols[i + 1].filter((v) => typeof v === 'number');
      return vals.length ? `${def.label(s)} now ${def.fmt(vals[vals.length - 1])}, highest ${def.fmt(Math.max(...vals))}` : `${def.label(s)} no data`;
    });
    return `Over ${RANGES[hist.range].text}: ${parts.join('; ')}.`;
  }

  function chartOptions(def, series, plot, at) {
    const axis = { stroke: colors.fg, grid: { stroke: colors.grid, width: 1 }, ticks: { stroke: colors.grid, width: 1 } };
    const stroke = (i) => colors.colors[i % colors.colors.length];
    // A band's edges: not stroked, and neither in the legend nor marked under the pointer (.band-edge).
    const edge = (s, end) => ({ label: `${def.label(s)} ${end}`, class: 'band-edge', width: 0, points: { show: false } });
    const edges = series.filter((s, k) => at.band[k] >= 0);
    return {
      width: Math.max(200, plot.clientWidth), height: HEIGHT, padding: [10, 30, 0, 0], // room for the last time label
      legend: { live: false },
      cursor: { drag: { x: false, y: false, setScale: false } }, // no zoom: the charts update live
      scales: { x: { time: true, range: () => hist.window }, y: { range: def.y || fromZero } },
      axes: [{ ...axis, space: 70, values: (u, splits, a, space, incr) => splits.map((t, i) => fmtTick(t, incr, !i)) },
        { ...axis, size: axisWidth, ...(def.incrs && { incrs: def.incrs }), values: (u, splits) => splits.map(def.axis || tidy(def.fmt)) }],
      series: [{}, ...edges.flatMap((s) => [edge(s, 'max'), edge(s, 'min')]), ...series.map((s, i) => ({
        label: def.label(s), stroke: stroke(i), width: 1.5, points: { show: false },
        ...(def.fill && { fill: `${stroke(i)}22` }), value: (u, v) => def.fmt(v),
      }))],
      bands: edges.map((s, j) => ({ series: [1 + 2 * j, 2 + 2 * j], fill: `${stroke(series.indexOf(s))}33` })),
      // A line hidden or shown again from the legend takes its band with it.
      hooks: { setSeries: [(u, i, o) => {
        const j = i > at.off ? at.band[i - 1 - at.off] : -1;
        if (j >= 0 && o && 'show' in o) for (const e of [1 + 2 * j, 2 + 2 * j]) u.setSeries(e, { show: o.show });
      }] },
      plugins: [tooltip(def, series.map((s, i) => stroke(i)), at)],
    };
  }

  // Value axis labels: "2 MB/s" rather than "2.00 MB/s", and as wide as the longest one needs.
  const tidy = (fmt) => (v) => fmt(v).replace(/\.0+ /, ' ');
  const axisWidth = (u, values) => (values ? Math.max(40, ...values.map((v) => Math.ceil(v.length * 7.5) + 26)) : 40); // 12px font, tick and gap

  // Time axis, by the distance between ticks (`incr`, seconds): months ("Mar"; with the year on
  // the first tick and in January: "Feb 2026", "Jan 2027"), days ("7 Dec", also midnight among
  // the hours of a day or longer), else the 24-hour clock like the header, with seconds only
  // where the window is short.
  const fmtDate = (t, opts) => new Date(t * 1000).toLocaleDateString(undefined, opts);
  function fmtTick(t, incr, first) {
    const d = new Date(t * 1000);
    if (incr >= 28 * DAY) return fmtDate(t, first || !d.getMonth() ? { month: 'short', year: 'numeric' } : { month: 'short' });
    const span = hist.window[1] - hist.window[0];
    if (incr >= DAY || (span >= DAY && !d.getHours() && !d.getMinutes())) return fmtDate(t, { day: 'numeric', month: 'short' });
    return span <= 600 ? fmtClock(t) : fmtClock(t).slice(0, 5);
  }
  // A point's step for people: "4 s", "10 min", "1 h".
  const fmtStep = (s) => (s % 3600 === 0 ? `${s / 3600} h` : s % 60 === 0 ? `${s / 60} min` : `${s} s`);

  // A line's reading at point `i`: its value there, else its latest one from up to `at.gap`
  // before, with that reading's own time (a rate needs two readings some time apart, so a sample
  // taken moments after a late one has none, and the newest point can be that sample). Null
  // where there is none: the agent's first sample, or a time the agent was not sampling.
  function reading(u, k, i, at) {
    const xs = u.data[0], ys = u.data[k];
    if (ys[i] != null) return { v: ys[i], t: xs[i], own: true, i };
    if (at.gaps.has(i)) return null;
    for (let j = i - 1; j >= 0 && xs[i] - xs[j] <= at.gap && !at.gaps.has(j); j--) {
      if (ys[j] != null) return { v: ys[j], t: xs[j], own: false, i: j };
    }
    return null;
  }

  // Tooltip: the time and each visible line's value where the pointer is, or its latest reading
  // just before with that time ("12.5% at 10:04:31"), or "no reading"; never a bare dash. On a
  // downsampled range the time says what a point is ("mean of 1 h"), and a line with a band has
  // its bucket's lowest and highest sample after its value ("12.5% (3.0%–40.2%)").
  // data-time / data-value / data-at / data-min / data-max (unix seconds, base units) are for tests.
  function tooltip(def, strokes, at) {
    let tip;
    return {
      hooks: {
        init: (u) => { tip = h('div', { class: 'tip', 'aria-hidden': 'true' }); tip.hidden = true; u.over.append(tip); },
        setCursor: (u) => {
          const i = u.cursor.idx;
          if (i == null || u.cursor.left < 0) { tip.hidden = true; return; }
          const t = u.data[0][i], step = hist.last && hist.last.step;
          const when = RANGES[hist.range].seconds >= DAY ? `${fmtDate(t, { weekday: 'short', day: 'numeric', month: 'short' })} ${fmtClock(t)}` : fmtClock(t);
          const what = step ? ` · mean of ${fmtStep(step)}${at.off ? ' (min–max)' : ''}` : '';
          tip.replaceChildren(h('div', { class: 'tip-time' }, when, what), ...u.series.slice(1 + at.off).map((s, k) => {
            if (!s.show) return null;
            const r = reading(u, at.off + k + 1, i, at), j = at.band[k];
            const [max, min] = r && j >= 0 ? [u.data[1 + 2 * j][r.i], u.data[2 + 2 * j][r.i]] : [];
            return h('div', { 'data-value': r && r.v, 'data-at': r && !r.own ? r.t : null, 'data-min': min, 'data-max': max },
              h('i', { style: `background:${strokes[k]}` }), `${s.label} `,
              r ? [h('b', {}, def.fmt(r.v)), min != null && max != null && h('span', { class: 'tip-band' }, ` (${def.fmt(min)}–${def.fmt(max)})`),
                !r.own && h('span', { class: 'tip-at' }, ` at ${fmtClock(r.t)}`)]
                : h('span', { class: 'tip-none' }, 'no reading'));
          }));
          tip.dataset.time = String(t);
          tip.hidden = false;
          const w = u.over.clientWidth, tw = tip.offsetWidth, left = u.cursor.left;
          const x = left + 14 + tw > w ? Math.max(0, left - tw - 14) : left + 14;
          const y = Math.max(0, Math.min(u.cursor.top - tip.offsetHeight / 2, u.over.clientHeight - tip.offsetHeight));
          tip.style.transform = `translate(${x}px, ${y}px)`;
        },
      },
    };
  }

  function resizeCharts() {
    for (const [id, c] of hist.charts) {
      const w = $(`chart-${id}`).querySelector('.plot').clientWidth;
      if (w > 0 && Math.abs(w - c.u.width) > 1) c.u.setSize({ width: w, height: HEIGHT });
    }
  }

  function chooseRange(range) {
    if (!RANGES[range]) return;
    hist.range = range;
    try { localStorage.setItem('kiwi.range', range); } catch (e) { /* storage off */ }
    for (const b of document.querySelectorAll('.ranges button')) b.setAttribute('aria-pressed', String(b.dataset.range === range));
    if (st.data) { showHistoryNote(); loadHistory(true); }
  }

  // ---- polling and state ----
  const st = {
    data: null, etag: null, error: null, inflight: false, state: 'loading',
    lastTs: null, advancedAt: 0, // browser time when the sample timestamp last changed
    skewMs: null, contactAt: 0,  // agent clock minus browser clock (Date header); last good answer
    placed: { fixed: new Map(), extra: [] }, sensorCharts: [], // which card shows which sensor; generic charts
  };

  function accept(data) {
    if (data.timestamp !== st.lastTs) { st.lastTs = data.timestamp; st.advancedAt = Date.now(); }
    st.data = data;
    const host = String(data.host || 'unknown host');
    $('host').textContent = host;
    document.title = `${host} · kiwi-agent`;
    $('interval').textContent = ok(data.interval_seconds) ? `${data.interval_seconds} s` : DASH;
    const agent = data.agent || {};
    $('uptime').textContent = fmtUptime(num(agent.uptime_seconds));
    $('version').textContent = agent.version ? String(agent.version) : DASH;
    body.dataset.sequence = String(data.sequence);
    st.placed = placeSensors(data.sensors);
    renderCards();
    st.sensorCharts = sensorCharts();
    arrangeCharts();
    loadHistory(false);
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
      } else if (res.status === 503 && !st.data) {
        // The agent is up and taking its first sample (it serves before that): still loading.
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

  // ---- alerts: the firing instances of the agent's [[alert]] rules (/api/alerts) ----
  // Asked with every poll, with If-None-Match (an unchanged list costs a 304). An agent without
  // the route (older, or a [[route]] list without it) answers 404: no banner, asked again a
  // minute later (a reload may add it). Other failures keep what is shown: the poll of
  // /api/current says whether the agent answers.
  const alerts = { firing: [], etag: null, missingAt: 0, inflight: false };
  const SEVERITIES = ['critical', 'warning', 'info'];
  async function pollAlerts() {
    if (alerts.inflight || (alerts.missingAt && Date.now() - alerts.missingAt < 60000)) return;
    alerts.inflight = true;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    try {
      const res = await fetch(ALERTS, { cache: 'no-store', signal: ctl.signal, headers: alerts.etag ? { 'If-None-Match': alerts.etag } : {} });
      if (res.status === 404) Object.assign(alerts, { firing: [], etag: null, missingAt: Date.now() });
      else if (res.ok) {
        const d = await res.json();
        alerts.firing = (Array.isArray(d.alerts) ? d.alerts : []).filter((a) => a && a.state === 'firing');
        alerts.etag = res.headers.get('ETag');
        alerts.missingAt = 0;
      }
    } catch (e) {
      // unreachable or a body that is not JSON: keep the last list; the main poll reports the agent
    } finally {
      clearTimeout(timer);
      alerts.inflight = false;
      showAlerts();
    }
  }
  const severityOf = (a) => (SEVERITIES.includes(a.severity) ? a.severity : 'warning');
  // The card that shows an alert's series: the card that borrows it from another sensor (flash
  // wear on Storage, cooling and fans on Board health) where that card is shown, else the card of
  // its sensor (a part's card: power on Board health; a second instance's own card). None for the
  // agent's own report, which has no card.
  function alertCard(a) {
    const name = String(a.series || '').replace(/\{.*$/, '');
    for (const [plugin, res] of Object.entries(BORROWS)) {
      if (res.some((re) => re.test(name)) && !$(`card-${plugin}`).hidden) return $(`card-${plugin}`);
    }
    const key = String(a.sensor || '');
    const sensors = (st.data && st.data.sensors) || {};
    const sensor = Object.prototype.hasOwnProperty.call(sensors, key) ? sensors[key] : null;
    if (!sensor) return null;
    const plugin = sensor.plugin === undefined ? key : String(sensor.plugin);
    const fixed = st.placed.fixed.get(plugin);
    if (fixed && fixed[0] === key) return $(`card-${PART_OF[plugin] || plugin}`);
    return ownCards.get(key) || null;
  }
  // A badge per firing alert (by name) on the card it belongs to, coloured by its severity, the
  // alert's name as its title. Beside the card's title, not in it: titles stay as they are.
  function markCards() {
    const marks = new Map(); // card -> name -> severity (the most severe of its instances there)
    for (const a of alerts.firing) {
      const card = alertCard(a);
      if (!card) continue;
      if (!marks.has(card)) marks.set(card, new Map());
      const byName = marks.get(card), name = String(a.name), sev = severityOf(a);
      if (!byName.has(name) || SEVERITIES.indexOf(sev) < SEVERITIES.indexOf(byName.get(name))) byName.set(name, sev);
    }
    for (const card of document.querySelectorAll('.grid .card')) {
      let box = card.querySelector(':scope > .marks');
      const mine = marks.get(card);
      if (!mine) { if (box) box.remove(); continue; }
      if (!box) { box = h('span', { class: 'marks' }); card.prepend(box); }
      const rank = ([, sev]) => SEVERITIES.indexOf(sev); // most severe first
      box.replaceChildren(...[...mine].sort((a, b) => rank(a) - rank(b)).map(([name, sev]) => h('span', { class: 'alert-mark', 'data-alert': name, 'data-severity': sev, title: name },
        '!', h('span', { class: 'sr-only' }, ` alert ${name} firing (${sev})`))));
    }
  }
  // Seconds since `t` (unix) by the agent's clock.
  const agentAge = (t) => (Date.now() + (st.skewMs || 0)) / 1000 - t;
  // The banner of firing alerts, one line each, most severe first (the agent's order within).
  function showAlerts() {
    const box = $('alerts');
    const list = [...alerts.firing].sort((a, b) => SEVERITIES.indexOf(severityOf(a)) - SEVERITIES.indexOf(severityOf(b)));
    box.querySelector('ul').replaceChildren(...list.map((a) => {
      const since = num(a.since), card = alertCard(a), name = String(a.name);
      return h('li', { 'data-severity': severityOf(a), 'data-alert': name },
        h('strong', {}, severityOf(a).toUpperCase()), ' ',
        card && card.id ? h('a', { href: `#${card.id}` }, name) : name, ': ', String(a.summary || ''),
        ok(since) && since > 0 ? [', since ', h('time', { datetime: new Date(since * 1000).toISOString() }, fmtClock(since)),
          ' (', h('span', { class: 'for', 'data-since': since }, fmtDuration(agentAge(since))), ')'] : null);
    }));
    box.hidden = !list.length;
    markCards();
  }
  // Every second: how long each has been firing.
  function tickAlerts() {
    for (const el of document.querySelectorAll('#alerts .for')) el.textContent = fmtDuration(agentAge(Number(el.dataset.since)));
  }

  // ---- under-voltage: the Raspberry Pi firmware's flag, with since when ----
  // The series that says "under-voltage now" (get_throttled's bit, or the rpi_volt alarm) when it
  // is 1 in the latest sample, else null.
  function underVoltageKey() {
    const [, s] = st.placed.fixed.get('power') || [];
    if (!s || s.status !== 'ok') return null;
    const m = metrics(s);
    if (flagOf(m, 'under_voltage', 'now') > 0) return 'power_throttle_flag{flag="under_voltage",when="now"}';
    return m.one('power_under_voltage_alarm') > 0 ? 'power_under_voltage_alarm' : null;
  }
  // When it began, from the history: the last minute of the past day with a 0 in it (agg=min),
  // then that minute's samples for the exact second. { t, before } (before: on since at least t,
  // as far back as the history goes), or null while unknown: asked again every few seconds while
  // the history cannot tell (the agent's first seconds, before it stored the series).
  const uvStart = { key: null, found: null, asking: false, failedAt: 0 };
  async function findUnderVoltageStart(key) {
    const get = async (params) => {
      const res = await fetch(`${HISTORY}?${params}&series=${encodeURIComponent(key)}`, { cache: 'no-store' });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const d = await res.json();
      return { ts: d.timestamps || [], vs: (Object.values(d.series || {})[0] || { values: [] }).values };
    };
    const day = await get('since=-86400&step=60&agg=min&limit=1440');
    let j = day.vs.length - 1;
    while (j >= 0 && day.vs[j] !== 0) j--;
    if (j < 0) { const i = day.vs.findIndex((v) => v > 0); return i < 0 ? null : { t: day.ts[i], before: true }; }
    const raw = await get(`since=${day.ts[j]}&until=${day.ts[j] + 180}&limit=1000`);
    let k = raw.vs.length - 1;
    while (k >= 0 && raw.vs[k] !== 0) k--;
    const i = raw.vs.findIndex((v, n) => n > k && v > 0);
    return i >= 0 ? { t: raw.ts[i], before: false } : j + 1 < day.ts.length ? { t: day.ts[j + 1], before: false } : null;
  }
  function underVoltageSince(key) {
    if (key !== uvStart.key) Object.assign(uvStart, { key, found: null, failedAt: 0 });
    if (key && !uvStart.found && !uvStart.asking && Date.now() - uvStart.failedAt > Math.max(3000, POLL_MS)) {
      uvStart.asking = true;
      findUnderVoltageStart(key).then((f) => { if (uvStart.key === key) uvStart.found = f; if (!f) uvStart.failedAt = Date.now(); })
        .catch(() => { uvStart.failedAt = Date.now(); })
        .finally(() => { uvStart.asking = false; update(); });
    }
    return uvStart.found;
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
    // Live data with a sensor in error: /api/health answers 503 "failing" for it, so the page
    // says which, and why, rather than a bare LIVE.
    const failing = state === 'live' && d && d.sensors
      ? Object.entries(d.sensors).filter(([, s]) => s && s.status === 'error') : [];
    // Under-voltage now: the board's power supply cannot hold its voltage. Red, with since when.
    const uvKey = state === 'live' ? underVoltageKey() : null;
    const since = underVoltageSince(uvKey);
    if (failing.length || uvKey) {
      banner.replaceChildren(...[uvKey ? [strong('UNDER-VOLTAGE'), ' Under-voltage detected',
        since ? [` since ${since.before ? 'at least ' : ''}`, h('time', { datetime: new Date(since.t * 1000).toISOString() }, fmtClock(since.t)),
          ` (${fmtDuration(sampleAge() + d.timestamp - since.t)})`] : null,
        ': the power supply cannot hold the board\'s voltage, so the firmware slows it down and storage can be corrupted. ',
        'Use a supply rated for the board, and a short, thick cable. '] : null,
      failing.length ? [strong('FAILING'), failing.length === 1 ? ' Sensor ' : ` ${failing.length} sensors: `,
        ...failing.flatMap(([name, s], i) => [i ? '; ' : '', h('a', { href: `#${cardId(name)}` }, name), `: ${s.message || 'error'}`]),
        '. The agent serves on; /api/health says failing until it recovers.'] : null].flat(9).filter((x) => x != null));
    }
    banner.hidden = state === 'live' && !failing.length && !uvKey;
    banner.dataset.kind = uvKey ? 'undervoltage' : failing.length ? 'failing' : state;
    tickAlerts();
    body.dataset.state = state;
    $('state').textContent = state;
    if (state !== st.state) $('announce').textContent = ANNOUNCE[state] || '';
    st.state = state;
  }

  // ---- start ----
  for (const b of document.querySelectorAll('.ranges button')) b.addEventListener('click', () => chooseRange(b.dataset.range));
  chooseRange(hist.range);
  if (typeof uPlot !== 'function') {
    for (const p of document.querySelectorAll('.chart .plot')) p.replaceChildren(note('The chart library did not load.', 'error'));
  }
  if (window.ResizeObserver) new ResizeObserver(resizeCharts).observe(document.querySelector('.charts'));
  // Light/dark switch: canvases keep the colours they were drawn with, so draw them anew.
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    colors = theme();
    for (const id of [...hist.charts.keys()]) dropChart(id);
    if (hist.last) drawCharts();
  });
  const refresh = () => Promise.all([poll(), pollAlerts()]);
  const loop = () => refresh().finally(() => setTimeout(loop, POLL_MS));
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') refresh(); });
  setInterval(update, 1000);
  loop();
})();
