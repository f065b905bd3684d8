-- wrk script: sync fast replies. The key comes from the EQ_BENCH_KEY env var.
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("EQ_BENCH_KEY")
wrk.headers["Content-Type"] = "application/json; charset=utf-8"
wrk.body = '{"mode":"fast","message":"今天被老板骂了，好难过，不想上班了","scene":"work","reply_count":3}'

dofile("bench/keys.lua")

done = function(summary, latency, requests)
  local non2xx = summary.errors.status or 0
  io.write(string.format("BENCH requests=%d duration_s=%.2f rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f non2xx=%d socket_errors=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    non2xx, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
