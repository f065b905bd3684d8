// Rate counters: fixed one-minute windows per key.
#include "store/store.h"

#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

// ---------------------------------------------------------------- rate limit

Result<RateDecision> Store::countRequest(const AuthContext& auth, int64_t now_ms) {
  // Fixed one-minute windows: simple, exact across processes (the increment
  // is one UPSERT), and the reset time a client sees is the window's end.
  int64_t window = rateWindowStart(now_ms);
  Result<int64_t> count = countRequests(auth.key_id, window, 1);
  if (!count.isOk()) return count.status();
  return rateDecision(auth.rate_limit_per_min, count.value(), window, now_ms);
}

Result<RateDecision> Store::countPlaygroundRequest(const std::string& account_id,
                                                   int64_t now_ms) {
  AuthContext playground;
  playground.key_id = "portal:" + account_id;
  playground.account_id = account_id;
  {
    Query q(prepare("SELECT rate_limit_per_min FROM accounts WHERE id = ?"));
    if (!q.valid()) return error("prepare account rate");
    q.bind(1, account_id);
    int rc = q.step();
    if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
    if (rc != SQLITE_ROW) return error("read account rate");
    playground.rate_limit_per_min = static_cast<int>(q.int64(0));
  }
  return countRequest(playground, now_ms);
}

Result<int64_t> Store::countRequests(const std::string& key_id, int64_t window_start, int64_t n) {
  Query q(prepare(
      "INSERT INTO rate_counters (key_id, window_start, count) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (key_id, window_start) DO UPDATE SET count = count + ?3 RETURNING count"));
  if (!q.valid()) return error("prepare rate");
  q.bind(1, key_id).bind(2, window_start).bind(3, n);
  if (q.step() != SQLITE_ROW) return error("count request");
  int64_t count = q.int64(0);
  while (q.step() == SQLITE_ROW) {
  }
  return count;
}

RateDecision Store::rateDecision(int limit, int64_t count, int64_t window_start, int64_t now_ms) {
  RateDecision d;
  d.limit = limit;
  d.allowed = count <= limit;
  d.remaining = static_cast<int>(count >= limit ? 0 : limit - count);
  d.reset_seconds = static_cast<int>((window_start + 60'000 - now_ms + 999) / 1000);
  return d;
}

}  // namespace eq
