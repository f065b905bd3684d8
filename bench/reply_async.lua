-- wrk script: POST /api/v1/reply/async with a webhook_url (EQ_BENCH_WEBHOOK_URL).
-- EQ_BENCH_DELAY_MS, when set, makes each connection wait that long between
-- requests: with -cN the offered rate is at most N * 1000 / delay per second
-- (bench/run's dispatch-lag scenario paces 1,000 tasks/s this way).
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("EQ_BENCH_KEY")
wrk.headers["Content-Type"] = "application/json; charset=utf-8"
wrk.body = '{"mode":"fast","message":"今天被老板骂了，好难过，不想上班了","scene":"work","reply_count":3,"webhook_url":"'
  .. os.getenv("EQ_BENCH_WEBHOOK_URL") .. '"}'

local pause = tonumber(os.getenv("EQ_BENCH_DELAY_MS") or "")
if pause then
  delay = function() return pause end
end

done = function(summary, latency, requests)
  local non2xx = summary.errors.status or 0
  local secs = summary.duration / 1e6
  -- accepted_rps: tasks/s answered 2xx (each one confirmed and inserted).
  io.write(string.format("BENCH requests=%d duration_s=%.2f rps=%.1f accepted_rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f non2xx=%d socket_errors=%d\n",
    summary.requests, secs, summary.requests / secs, (summary.requests - non2xx) / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    non2xx, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
