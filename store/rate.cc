// Rate counters: fixed one-minute windows per key.
#include <map>
#include <optional>
#include <utility>

#include "common/timefmt.h"
#include "store/rows.h"
#include "store/store.h"

namespace eq {

using store::Row;
using store::Sql;

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
  std::optional<int64_t> limit;
  auto r = exec("read account rate", Sql{"SELECT rate_limit_per_min FROM accounts WHERE id = ?"},
                {account_id}, [&](const Row& row) { limit = row.int64(0); });
  if (!r.isOk()) return r.status();
  if (!limit) return Status(404, "no account " + account_id);
  playground.rate_limit_per_min = static_cast<int>(*limit);
  return countRequest(playground, now_ms);
}

Result<int64_t> Store::countRequests(const std::string& key_id, int64_t window_start, int64_t n) {
  // One statement on either engine: the upsert and its RETURNING read the
  // count this increment made, whatever other hosts count meanwhile.
  std::optional<int64_t> count;
  auto r = exec("count request",
                Sql{"INSERT INTO rate_counters (key_id, window_start, count) VALUES (?1, ?2, ?3) "
                    "ON CONFLICT (key_id, window_start) DO UPDATE SET "
                    "count = rate_counters.count + ?3 RETURNING count",
                    "INSERT INTO rate_counters (key_id, window_start, count) "
                    "VALUES ($1, $2, $3::bigint) ON CONFLICT (key_id, window_start) DO UPDATE SET "
                    "count = rate_counters.count + $3::bigint RETURNING count"},
                {key_id, window_start, n}, [&](const Row& row) { count = row.int64(0); });
  if (!r.isOk()) return r.status();
  if (!count) return Status(500, "count request: no count returned");
  return *count;
}

Result<std::vector<int64_t>> Store::countRequests(const std::vector<RateIncrement>& increments) {
  std::vector<int64_t> counts(increments.size(), 0);
  if (db_->engine() != store::DbEngine::kPostgres) {
    // SQLite: a statement costs no round trip; one upsert each.
    for (std::size_t i = 0; i < increments.size(); ++i) {
      const RateIncrement& inc = increments[i];
      Result<int64_t> c = countRequests(inc.key_id, inc.window_start, inc.n);
      if (!c.isOk()) return c.status();
      counts[i] = c.value();
    }
    return counts;
  }
  std::vector<std::string> keys;
  std::vector<std::optional<int64_t>> windows, ns;
  std::map<std::pair<std::string, int64_t>, std::size_t> position;
  for (std::size_t i = 0; i < increments.size(); ++i) {
    const RateIncrement& inc = increments[i];
    keys.push_back(inc.key_id);
    windows.emplace_back(inc.window_start);
    ns.emplace_back(inc.n);
    position.emplace(std::pair{inc.key_id, inc.window_start}, i);
  }
  std::size_t returned = 0;
  auto r = exec("count requests",
                Sql{"",
                    "INSERT INTO rate_counters (key_id, window_start, count) "
                    "SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) "
                    "AS i (key_id, window_start, n) ORDER BY key_id, window_start "
                    "ON CONFLICT (key_id, window_start) DO UPDATE SET "
                    "count = rate_counters.count + excluded.count "
                    "RETURNING key_id, window_start, count"},
                {store_detail::textArray(keys), store_detail::int64Array(windows),
                 store_detail::int64Array(ns)},
                [&](const Row& row) {
                  auto it = position.find({std::string(row.text(0)), row.int64(1)});
                  if (it == position.end()) return;
                  counts[it->second] = row.int64(2);
                  ++returned;
                });
  if (!r.isOk()) return r.status();
  if (returned != increments.size()) return Status(500, "count requests: a count is missing");
  return counts;
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
