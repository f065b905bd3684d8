-- wrk script: POST /api/v1/reply/async with a webhook_url (EQ_BENCH_WEBHOOK_URL).
-- EQ_BENCH_RATE_PER_THREAD, when set, paces each wrk thread to that many
-- requests a second, whatever the answers' latency (bench/run's dispatch-lag
-- scenario offers EQ_BENCH_LAG_RATE this way): each request takes the next
-- slot of a fixed schedule and waits for it; a request behind schedule (all
-- the thread's connections were busy) goes at once, so the rate offered
-- holds as long as the connections suffice.
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("EQ_BENCH_KEY")
wrk.headers["Content-Type"] = "application/json; charset=utf-8"
wrk.body = '{"mode":"fast","message":"今天被老板骂了，好难过，不想上班了","scene":"work","reply_count":3,"webhook_url":"'
  .. os.getenv("EQ_BENCH_WEBHOOK_URL") .. '"}'

local rate = tonumber(os.getenv("EQ_BENCH_RATE_PER_THREAD") or "")
if rate then
  -- wrk runs LuaJIT: its ffi reads the monotonic clock.
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } eq_bench_timespec;
    int clock_gettime(int clock_id, eq_bench_timespec* tp);
  ]]
  local ts = ffi.new("eq_bench_timespec")
  local CLOCK_MONOTONIC = 1
  local function now_ms()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local period = 1000 / rate
  local next_slot = nil
  delay = function()
    local now = now_ms()
    next_slot = next_slot or now
    local wait = next_slot - now
    next_slot = next_slot + period
    if wait > 0 then return math.floor(wait + 0.5) end
    return 0
  end
end

dofile("bench/keys.lua")

done = function(summary, latency, requests)
  local non2xx = summary.errors.status or 0
  local secs = summary.duration / 1e6
  -- accepted_rps: tasks/s answered 2xx (each one confirmed and inserted).
  io.write(string.format("BENCH requests=%d duration_s=%.2f rps=%.1f accepted_rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f non2xx=%d socket_errors=%d\n",
    summary.requests, secs, summary.requests / secs, (summary.requests - non2xx) / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    non2xx, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
