// Quota: atomic charge and refund, reads and operator changes.
#include "store/store.h"

#include "common/timefmt.h"
#include "store/rows.h"

namespace eq {

using store::Row;
using store::Sql;
using store_detail::optInt;
using store_detail::optText;
using store_detail::usageHour;

namespace {

bool validMode(std::string_view mode) { return isModeName(mode); }

// A charge takes a unit of its mode and counts it in the account's month,
// in one statement: it passes only while the month has units left under
// the limit (a count of an earlier month has none used), and a count of an
// earlier month starts again at this one. A charge stamped with an earlier
// month than the row's (another host's clock a little behind, at the turn
// of a month) counts in the row's month rather than moving it back.
// `month` is the placeholder of the first instant of the charge's month
// (monthStartMs).
std::string monthCount(const std::string& month) {
  return "month_used = CASE WHEN month_start >= " + month +
         " THEN month_used + 1 ELSE 1 END, month_start = CASE WHEN month_start >= " + month +
         " THEN month_start ELSE " + month + " END";
}
std::string monthLeft(const std::string& month) {
  return "(monthly_limit = 0 OR month_start < " + month + " OR month_used < monthly_limit)";
}

// One statement per mode: column names cannot be bound parameters. ?1 is
// the charge's month, ?2 the account, ?3 the time of the charge.
std::string chargeText(const std::string& column) {
  return "UPDATE accounts SET " + column + " = " + column + " - 1, " + monthCount("?1") +
         " WHERE id = ?2 AND " + column + " > 0 AND quota_expire_at > ?3 AND " + monthLeft("?1");
}
const std::string kChargeText[] = {chargeText("quota_fast"), chargeText("quota_standard"),
                                   chargeText("quota_perfect")};
// A refund: the unit back to its mode and, while the account still counts
// the month it was charged in (?1), to that month. ?2 is the account.
std::string refundText(const std::string& column) {
  return "UPDATE accounts SET " + column + " = " + column +
         " + 1, month_used = CASE WHEN month_start = ?1 AND month_used > 0 THEN month_used - 1 "
         "ELSE month_used END WHERE id = ?2";
}
const std::string kRefundText[] = {refundText("quota_fast"), refundText("quota_standard"),
                                   refundText("quota_perfect")};

// chargeAndOpen's PostgreSQL statement for one mode's column: the charge
// (its month is $13), and from its row (none when not charged) the hour's
// usage, the open charge and the task (when $7, its id, is given); its one
// row counts the accounts charged. The statement's parts all see the accounts row as it
// was before the charge, and each other's rows not at all: none reads
// another's.
std::string chargeAndOpenText(std::string_view column) {
  const std::string c(column);
  return "WITH charged AS (UPDATE accounts SET " + c + " = " + c + " - 1, " +
         monthCount("$13::bigint") + " WHERE id = $1 AND " + c +
         " > 0 AND quota_expire_at > $2::bigint AND " + monthLeft("$13::bigint") +
         " RETURNING id, default_webhook_url), "
         "usage AS (INSERT INTO usage_hourly (account_id, mode, hour, calls, refunded) "
         "SELECT id, $3::text, $4::bigint, 1, 0 FROM charged ON CONFLICT (account_id, mode, hour) "
         "DO UPDATE SET calls = usage_hourly.calls + 1), "
         "opened AS (INSERT INTO open_charges (request_id, instance_id, account_id, mode, "
         "task_id, deadline_at, created_at, job, idem_key) SELECT $5::text, $6::text, id, "
         "$3::text, $7::text, $8::bigint, $2, $9::text, $10::text FROM charged), "
         "task AS (INSERT INTO tasks (id, account_id, key_id, request_id, mode, status, "
         "webhook_url, created_at) SELECT $7::text, id, $11::text, $5::text, $3::text, "
         "'queued', coalesce($12::text, default_webhook_url), $2 FROM charged "
         "WHERE $7::text IS NOT NULL) "
         "SELECT count(*) FROM charged";
}
const std::string kChargeAndOpenText[] = {chargeAndOpenText("quota_fast"),
                                          chargeAndOpenText("quota_standard"),
                                          chargeAndOpenText("quota_perfect")};

}  // namespace

// ---------------------------------------------------------------- quota

Result<ChargeOutcome> Store::chargeQuota(const std::string& account_id, const std::string& mode,
                                         int64_t now_ms) {
  if (!validMode(mode)) return Status(500, "charge: bad mode " + mode);
  // One statement: two callers (on any host) never both take the last unit.
  auto r = exec("charge quota", Sql{kChargeText[static_cast<int>(*parseMode(mode))]},
                {monthStartMs(now_ms), account_id, now_ms});
  if (!r.isOk()) return r.status();
  if (r.value() == 1) {
    if (Status s = countUsage(account_id, mode, now_ms, 1, 0); !s.isOk()) return s;
    return ChargeOutcome::kCharged;
  }
  return whyNotCharged(account_id, mode, now_ms);
}

Result<ChargeOutcome> Store::whyNotCharged(const std::string& account_id, std::string_view mode,
                                           int64_t now_ms) {
  // Expiry, the mode's exhaustion or the month's volume, for the caller's
  // answer. (None of them: another call took the unit between the charge
  // and this read, and gave it back. Exhaustion is what the charge saw.)
  Result<AccountQuota> q = quota(account_id);
  if (!q.isOk()) return q.status();
  const AccountQuota& a = q.value();
  if (a.expire_at_ms <= now_ms) return ChargeOutcome::kExpired;
  const std::optional<Mode> m = parseMode(mode);
  if (m && a.remaining.of(*m) > 0 && a.monthlyReached(now_ms)) return ChargeOutcome::kMonthlyLimit;
  return ChargeOutcome::kExhausted;
}

int64_t AccountQuota::usedInMonthOf(int64_t now_ms) const {
  return usedInMonthStarting(monthStartMs(now_ms));
}

Result<ChargeOutcome> Store::chargeAndOpen(const OpenCharge& c, const std::string& key_id,
                                           const std::string& webhook_url) {
  const std::optional<Mode> mode = parseMode(c.mode);
  if (!mode) return Status(500, "charge: bad mode " + c.mode);
  if (db_->engine() != store::DbEngine::kPostgres) {
    // SQLite: a statement costs no round trip; all or none by a savepoint
    // (or a transaction, for a caller outside one).
    store::Transaction tx(*db_);
    if (!tx.status().isOk()) return tx.status();
    Result<ChargeOutcome> charged = chargeQuota(c.account_id, c.mode, c.created_at_ms);
    if (!charged.isOk() || charged.value() != ChargeOutcome::kCharged) return charged;
    if (Status s = openCharge(c); !s.isOk()) return s;
    if (c.task_id.empty()) {
      if (Status s = tx.commit(); !s.isOk()) return s;
      return ChargeOutcome::kCharged;
    }
    TaskRecord t;
    t.task_id = c.task_id;
    t.account_id = c.account_id;
    t.key_id = key_id;
    t.request_id = c.request_id;
    t.mode = c.mode;
    t.webhook_url = webhook_url;
    t.created_at = c.created_at_ms;
    if (Status s = createTask(t); !s.isOk()) return s;
    if (Status s = tx.commit(); !s.isOk()) return s;
    return ChargeOutcome::kCharged;
  }
  int64_t charged = 0;
  auto r = exec("charge and open", Sql{"", kChargeAndOpenText[static_cast<int>(*mode)]},
                {c.account_id, c.created_at_ms, c.mode, usageHour(c.created_at_ms), c.request_id,
                 c.instance_id, optText(c.task_id), c.deadline_at_ms, optText(c.job),
                 optText(c.idem_key), key_id, optText(webhook_url), monthStartMs(c.created_at_ms)},
                [&](const Row& row) { charged = row.int64(0); });
  if (!r.isOk()) return r.status();
  if (charged == 1) return ChargeOutcome::kCharged;
  return whyNotCharged(c.account_id, c.mode, c.created_at_ms);
}

Status Store::refundQuota(const std::string& account_id, const std::string& mode,
                          int64_t charged_at_ms, int64_t now_ms) {
  if (!validMode(mode)) return Status(500, "refund: bad mode " + mode);
  auto r = exec("refund quota", Sql{kRefundText[static_cast<int>(*parseMode(mode))]},
                {monthStartMs(charged_at_ms), account_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status::ok();  // the account is gone
  return countUsage(account_id, mode, now_ms, 0, 1);
}

Status Store::countUsage(const std::string& account_id, const std::string& mode, int64_t now_ms,
                         int64_t calls, int64_t refunded) {
  return queue("count usage",
               Sql{"INSERT INTO usage_hourly (account_id, mode, hour, calls, refunded) "
                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, mode, hour) DO UPDATE SET "
                   "calls = usage_hourly.calls + excluded.calls, "
                   "refunded = usage_hourly.refunded + excluded.refunded"},
               {account_id, mode, usageHour(now_ms), calls, refunded});
}

namespace {

// The columns of an account's quota, read by readQuota from `first` on.
#define EQ_QUOTA_COLUMNS                                                              \
  "quota_fast, quota_standard, quota_perfect, quota_expire_at, tier, monthly_limit, " \
  "month_start, month_used"

AccountQuota readQuota(const store::Row& row, int first) {
  AccountQuota q;
  q.remaining = QuotaUnits{row.int64(first), row.int64(first + 1), row.int64(first + 2)};
  q.expire_at_ms = row.int64(first + 3);
  q.tier = row.text(first + 4);
  q.monthly_limit = row.int64(first + 5);
  q.month_start_ms = row.int64(first + 6);
  q.month_used = row.int64(first + 7);
  return q;
}

}  // namespace

Result<AccountQuota> Store::quota(const std::string& account_id) {
  std::optional<AccountQuota> out;
  auto r = exec("read quota", Sql{"SELECT " EQ_QUOTA_COLUMNS " FROM accounts WHERE id = ?"},
                {account_id}, [&](const Row& row) { out = readQuota(row, 0); });
  if (!r.isOk()) return r.status();
  if (!out) return Status(404, "no account " + account_id);
  return *out;
}

Result<std::map<std::string, AccountQuota>> Store::quotas(
    const std::vector<std::string>& account_ids) {
  std::map<std::string, AccountQuota> out;
  if (account_ids.empty()) return out;
  if (db_->engine() != store::DbEngine::kPostgres) {
    // SQLite: a statement costs no round trip.
    for (const std::string& id : account_ids) {
      Result<AccountQuota> q = quota(id);
      if (q.isOk()) {
        out.emplace(id, std::move(q).value());
      } else if (q.status().code() != 404) {
        return q.status();
      }
    }
    return out;
  }
  auto r =
      exec("read quotas",
           Sql{"", "SELECT id, " EQ_QUOTA_COLUMNS " FROM accounts WHERE id = ANY ($1::text[])"},
           {store_detail::textArray(account_ids)},
           [&](const Row& row) { out.emplace(std::string(row.text(0)), readQuota(row, 1)); });
  if (!r.isOk()) return r.status();
  return out;
}

#undef EQ_QUOTA_COLUMNS

// Advisory locks on accounts, the two-key form: (1163022657, an arbitrary
// class of EQ Reply's own; the hash of the account id). PostgreSQL keeps
// the two-key and the one-key forms apart, so these never meet the one-key
// locks of migrations and retention. Two accounts whose ids hash alike
// share a lock: their batches wait a little more for each other, and the
// order stays one.
#define EQ_ACCOUNT_LOCKS(keys)                                         \
  "SELECT pg_advisory_xact_lock(1163022657, k) FROM (SELECT DISTINCT " \
  "hashtext(a) AS k FROM " keys ") AS s ORDER BY k"

Status Store::lockAccountsWhere(const char* what, const std::string& pg_text,
                                const std::vector<std::string>& ids) {
  // SQLite: the transaction holds the whole database's write lock already.
  if (ids.empty() || db_->engine() != store::DbEngine::kPostgres) return Status::ok();
  // In a savepoint of its own: a lock timeout here undoes only the locks,
  // and the caller's writes go on without them (each takes its rows in
  // its own order, as they would without this call).
  store::Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  // The locks are taken in the order of their keys: PostgreSQL evaluates a
  // volatile output column after the ORDER BY's sort.
  auto r = exec(what, Sql{"", pg_text}, {store_detail::textArray(ids)});
  if (!r.isOk()) return r.status();
  return tx.commit();
}

Status Store::lockAccounts(const std::vector<std::string>& account_ids) {
  static const std::string kText = EQ_ACCOUNT_LOCKS("unnest($1::text[]) AS a");
  return lockAccountsWhere("lock accounts", kText, account_ids);
}

Status Store::lockTaskAccounts(const std::vector<std::string>& task_ids) {
  static const std::string kText =
      EQ_ACCOUNT_LOCKS("(SELECT account_id AS a FROM tasks WHERE id = ANY ($1::text[])) AS t");
  return lockAccountsWhere("lock the tasks' accounts", kText, task_ids);
}

#undef EQ_ACCOUNT_LOCKS

Status Store::setQuota(const std::string& account_id, const QuotaChange& units,
                       std::optional<int64_t> expire_at_ms, std::optional<std::string> tier) {
  auto r =
      exec("set quota",
           Sql{"UPDATE accounts SET quota_fast = coalesce(?, quota_fast), "
               "quota_standard = coalesce(?, quota_standard), "
               "quota_perfect = coalesce(?, quota_perfect), "
               "quota_expire_at = coalesce(?, quota_expire_at), tier = coalesce(?, tier), "
               "monthly_limit = coalesce(?, monthly_limit) WHERE id = ?"},
           {optInt(units.fast), optInt(units.standard), optInt(units.perfect), optInt(expire_at_ms),
            tier ? store::Value(std::string_view(*tier)) : store::Value(nullptr),
            optInt(units.monthly_limit), account_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

Status Store::grantQuota(const std::string& account_id, const QuotaUnits& add,
                         std::optional<int64_t> expire_at_ms) {
  auto r = exec(
      "grant quota",
      Sql{"UPDATE accounts SET quota_fast = quota_fast + ?, quota_standard = quota_standard + ?, "
          "quota_perfect = quota_perfect + ?, quota_expire_at = coalesce(?, quota_expire_at) "
          "WHERE id = ?"},
      {add.fast, add.standard, add.perfect, optInt(expire_at_ms), account_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

}  // namespace eq
