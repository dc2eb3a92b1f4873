-- wrk script for tools/bench/run.sh: status checked on every response, the body checked on a
-- sample (every Nth response), and one machine-readable result line printed at the end.
--   wrk ... -s report.lua URL -- CHECK [EVERY]
-- CHECK: "json"  the body must start with {"version":1   (the agent's JSON routes, the ceiling)
--        "html"  the body must contain <html
--        "prom"  the body must contain "# TYPE "         (Prometheus text format)
--        "none"  no body check (the empty ceiling)
-- EVERY: check one response in EVERY (default 100); the first response is always checked.
-- Result line: BENCH rps=.. requests=.. p50_us=.. p95_us=.. p99_us=.. max_us=.. non2xx=..
--              checked=.. bad_body=.. socket_errors=..

-- Per-thread counters are globals so done() can read them with thread:get().
check, every = "json", 100
seen, non2xx, checked, bad = 0, 0, 0, 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  check = args[1] or "json"
  every = tonumber(args[2] or "100")
end

local function body_ok(body)
  if check == "json" then
    return body ~= nil and body:sub(1, 12) == '{"version":1'
  elseif check == "html" then
    return body ~= nil and body:find("<html", 1, true) ~= nil
  elseif check == "prom" then
    return body ~= nil and body:find("# TYPE ", 1, true) ~= nil
  end
  return true
end

function response(status, headers, body)
  seen = seen + 1
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
  if check ~= "none" and seen % every == 1 then
    checked = checked + 1
    if not body_ok(body) then bad = bad + 1 end
  end
end

function done(summary, latency, requests)
  local n2, ck, bd = 0, 0, 0
  for _, t in ipairs(threads) do
    n2 = n2 + (t:get("non2xx") or 0)
    ck = ck + (t:get("checked") or 0)
    bd = bd + (t:get("bad") or 0)
  end
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "BENCH rps=%.1f requests=%d p50_us=%d p95_us=%d p99_us=%d max_us=%d non2xx=%d checked=%d bad_body=%d socket_errors=%d\n",
    summary.requests / secs, summary.requests,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
    n2, ck, bd, e.connect + e.read + e.write + e.timeout))
end
