// Quota: atomic charge and refund, reads and operator changes.
#include "store/store.h"

#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

namespace {

bool validMode(std::string_view mode) { return isModeName(mode); }

}  // namespace

// ---------------------------------------------------------------- quota

Result<ChargeOutcome> Store::chargeQuota(const std::string& account_id, const std::string& mode,
                                         int64_t now_ms) {
  if (!validMode(mode)) return Status(500, "charge: bad mode " + mode);
  // One statement per mode: column names cannot be bound parameters.
  const char* sql =
      mode == "fast"
          ? "UPDATE accounts SET quota_fast = quota_fast - 1 "
            "WHERE id = ? AND quota_fast > 0 AND quota_expire_at > ?"
      : mode == "standard"
          ? "UPDATE accounts SET quota_standard = quota_standard - 1 "
            "WHERE id = ? AND quota_standard > 0 AND quota_expire_at > ?"
          : "UPDATE accounts SET quota_perfect = quota_perfect - 1 "
            "WHERE id = ? AND quota_perfect > 0 AND quota_expire_at > ?";
  {
    Query q(prepare(sql));
    if (!q.valid()) return error("prepare charge");
    q.bind(1, account_id).bind(2, now_ms);
    if (q.step() != SQLITE_DONE) return error("charge quota");
    if (sqlite3_changes(db_) == 1) {
      if (Status s = countUsage(account_id, mode, now_ms, 1, 0); !s.isOk()) return s;
      return ChargeOutcome::kCharged;
    }
  }
  // Not charged: tell the caller whether it was expiry or exhaustion.
  Result<AccountQuota> q = quota(account_id);
  if (!q.isOk()) return q.status();
  return q.value().expire_at_ms <= now_ms ? ChargeOutcome::kExpired : ChargeOutcome::kExhausted;
}

Status Store::refundQuota(const std::string& account_id, const std::string& mode,
                          int64_t now_ms) {
  if (!validMode(mode)) return Status(500, "refund: bad mode " + mode);
  const char* sql = mode == "fast"
                        ? "UPDATE accounts SET quota_fast = quota_fast + 1 WHERE id = ?"
                    : mode == "standard"
                        ? "UPDATE accounts SET quota_standard = quota_standard + 1 WHERE id = ?"
                        : "UPDATE accounts SET quota_perfect = quota_perfect + 1 WHERE id = ?";
  Query q(prepare(sql));
  q.bind(1, account_id);
  if (q.step() != SQLITE_DONE) return error("refund quota");
  if (sqlite3_changes(db_) == 0) return Status::ok();  // the account is gone
  return countUsage(account_id, mode, now_ms, 0, 1);
}

Status Store::countUsage(const std::string& account_id, const std::string& mode, int64_t now_ms,
                         int64_t calls, int64_t refunded) {
  Query q(prepare(
      "INSERT INTO usage_hourly (account_id, mode, hour, calls, refunded) VALUES (?, ?, ?, ?, ?) "
      "ON CONFLICT (account_id, mode, hour) DO UPDATE SET calls = calls + excluded.calls, "
      "refunded = refunded + excluded.refunded"));
  q.bind(1, account_id).bind(2, mode).bind(3, now_ms - now_ms % 3'600'000);
  q.bind(4, calls).bind(5, refunded);
  if (q.step() != SQLITE_DONE) return error("count usage");
  return Status::ok();
}

Result<AccountQuota> Store::quota(const std::string& account_id) {
  Query q(prepare(
      "SELECT quota_fast, quota_standard, quota_perfect, quota_expire_at, tier "
      "FROM accounts WHERE id = ?"));
  if (!q.valid()) return error("prepare quota");
  q.bind(1, account_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  if (rc != SQLITE_ROW) return error("read quota");
  AccountQuota out;
  out.remaining = QuotaUnits{q.int64(0), q.int64(1), q.int64(2)};
  out.expire_at_ms = q.int64(3);
  out.tier = q.text(4);
  return out;
}

Status Store::setQuota(const std::string& account_id, const QuotaChange& units,
                       std::optional<int64_t> expire_at_ms, std::optional<std::string> tier) {
  Query q(prepare(
      "UPDATE accounts SET quota_fast = coalesce(?, quota_fast), "
      "quota_standard = coalesce(?, quota_standard), quota_perfect = coalesce(?, quota_perfect), "
      "quota_expire_at = coalesce(?, quota_expire_at), tier = coalesce(?, tier) WHERE id = ?"));
  int slot = 1;
  for (const std::optional<int64_t>& v : {units.fast, units.standard, units.perfect}) {
    if (v) q.bind(slot, *v); else q.bindNull(slot);
    ++slot;
  }
  if (expire_at_ms) q.bind(4, *expire_at_ms); else q.bindNull(4);
  if (tier) q.bind(5, *tier); else q.bindNull(5);
  q.bind(6, account_id);
  if (q.step() != SQLITE_DONE) return error("set quota");
  if (sqlite3_changes(db_) == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

Status Store::grantQuota(const std::string& account_id, const QuotaUnits& add,
                         std::optional<int64_t> expire_at_ms) {
  Query q(prepare(
      "UPDATE accounts SET quota_fast = quota_fast + ?, quota_standard = quota_standard + ?, "
      "quota_perfect = quota_perfect + ?, quota_expire_at = coalesce(?, quota_expire_at) "
      "WHERE id = ?"));
  q.bind(1, add.fast).bind(2, add.standard).bind(3, add.perfect);
  if (expire_at_ms) q.bind(4, *expire_at_ms); else q.bindNull(4);
  q.bind(5, account_id);
  if (q.step() != SQLITE_DONE) return error("grant quota");
  if (sqlite3_changes(db_) == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

}  // namespace eq
