-- Loaded by the wrk scripts after they set their headers: with several keys
-- in EQ_BENCH_KEYS (space-separated; bench/run's EQ_BENCH_ACCOUNTS, one
-- account each), each thread sends its requests with the keys in turn, so
-- that the load is many tenants' rather than one account's. With one key
-- (the default) wrk's prebuilt request is left as it is.
local keys = {}
for k in string.gmatch(os.getenv("EQ_BENCH_KEYS") or "", "%S+") do keys[#keys + 1] = k end
if #keys > 1 then
  local n = 0
  request = function()
    n = n % #keys + 1
    wrk.headers["Authorization"] = "Bearer " .. keys[n]
    return wrk.format()
  end
end
