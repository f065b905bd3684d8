// Quota: atomic charge and refund, reads and operator changes.
#include <algorithm>
#include <map>
#include <tuple>

#include "common/timefmt.h"
#include "store/rows.h"
#include "store/store.h"

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

// chargeAndOpenAll's PostgreSQL statement for one mode's column: up to $2
// calls of account $1 charged at once. `granted` locks the row and works
// out how many of them the mode's units and the month's volume (month $3)
// allow while the quota has not expired at $4; `charged` takes that many
// and counts them in the month as chargeAndOpenText's monthCount does one;
// the first that many calls of the arrays ($8 on, in their order) get
// their open charge (instance $7) and, where a task id is given, their
// task; the hour's ($6) usage counts them for mode $5. Its one row: how
// many were charged.
std::string chargeAndOpenAllText(std::string_view column) {
  const std::string c(column);
  return "WITH granted AS (SELECT id, default_webhook_url, LEAST($2::bigint, " + c +
         ", CASE WHEN monthly_limit = 0 THEN $2::bigint WHEN month_start < $3::bigint THEN "
         "monthly_limit ELSE GREATEST(monthly_limit - month_used, 0) END) AS n FROM accounts "
         "WHERE id = $1 AND quota_expire_at > $4::bigint FOR UPDATE), "
         "charged AS (UPDATE accounts a SET " +
         c + " = a." + c +
         " - g.n, month_used = CASE "
         "WHEN a.month_start >= $3::bigint THEN a.month_used + g.n ELSE g.n END, month_start = "
         "GREATEST(a.month_start, $3::bigint) FROM granted g WHERE a.id = g.id AND g.n > 0 "
         "RETURNING a.id, g.n, g.default_webhook_url), "
         "taken AS (SELECT u.*, c.id AS account_id, c.default_webhook_url FROM unnest($8::text[], "
         "$9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[], "
         "$15::text[]) WITH ORDINALITY AS u(request_id, task_id, deadline_at, created_at, job, "
         "idem_key, key_id, webhook_url, n) JOIN charged c ON u.n <= c.n), "
         "usage AS (INSERT INTO usage_hourly (account_id, mode, hour, calls, refunded) "
         "SELECT id, $5::text, $6::bigint, n, 0 FROM charged ON CONFLICT (account_id, mode, hour) "
         "DO UPDATE SET calls = usage_hourly.calls + excluded.calls), "
         "opened AS (INSERT INTO open_charges (request_id, instance_id, account_id, mode, "
         "task_id, deadline_at, created_at, job, idem_key) SELECT request_id, $7::text, "
         "account_id, $5::text, task_id, deadline_at, created_at, job, idem_key FROM taken), "
         "task AS (INSERT INTO tasks (id, account_id, key_id, request_id, mode, status, "
         "webhook_url, created_at) SELECT task_id, account_id, key_id, request_id, $5::text, "
         "'queued', coalesce(webhook_url, default_webhook_url), created_at FROM taken "
         "WHERE task_id IS NOT NULL) "
         "SELECT coalesce((SELECT n FROM charged), 0)";
}
const std::string kChargeAndOpenAllText[] = {chargeAndOpenAllText("quota_fast"),
                                             chargeAndOpenAllText("quota_standard"),
                                             chargeAndOpenAllText("quota_perfect")};

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

std::vector<Result<ChargeOutcome>> Store::chargeAndOpenAll(const std::vector<ChargeCall>& calls) {
  std::vector<Result<ChargeOutcome>> out;
  out.reserve(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) out.emplace_back(Status(500, "not charged"));
  // The calls by account, mode, month and hour, each group in its order;
  // the groups in the order of their first calls, on both engines.
  using Group = std::tuple<std::string, std::string, int64_t, int64_t>;
  std::map<Group, std::vector<std::size_t>> groups;
  std::vector<Group> order;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const OpenCharge& c = calls[i].charge;
    Group g{c.account_id, c.mode, monthStartMs(c.created_at_ms), usageHour(c.created_at_ms)};
    auto [it, added] = groups.try_emplace(g);
    if (added) order.push_back(g);
    it->second.push_back(i);
  }
  // Inside a caller's transaction, one that is lost midway (SQLite's full
  // disk, a lost connection) must not have the rest charged on their own in
  // a new one: they fail, as the caller's commit will.
  const bool inside = db_->inTransaction();
  const auto lost = [&] { return inside && !db_->inTransaction(); };
  const Status kLost(503, "the transaction was lost before the call was charged");
  for (const Group& g : order) {
    const std::vector<std::size_t>& members = groups[g];
    if (db_->engine() != store::DbEngine::kPostgres) {
      // SQLite: a statement costs no round trip, and a row's updates no
      // chain of versions: one admission at a time.
      for (std::size_t i : members) {
        out[i] = lost() ? Result<ChargeOutcome>(kLost)
                        : chargeAndOpen(calls[i].charge, calls[i].key_id, calls[i].webhook_url);
      }
      continue;
    }
    const auto& [account, mode_name, month, hour] = g;
    if (lost()) {
      for (std::size_t i : members) out[i] = kLost;
      continue;
    }
    // The quota's expiry at the group's latest call: none of its calls is
    // charged once the quota has expired (one made a moment before it, in
    // the same batch as one after, is refused with it).
    int64_t latest = 0;
    for (std::size_t i : members) latest = std::max(latest, calls[i].charge.created_at_ms);
    const OpenCharge& first = calls[members.front()].charge;
    const std::optional<Mode> mode = parseMode(mode_name);
    const auto fail = [&](const Status& s) {
      for (std::size_t i : members) out[i] = s;
    };
    if (!mode) {
      fail(Status(500, "charge: bad mode " + mode_name));
      continue;
    }
    std::vector<std::optional<std::string>> request_ids, task_ids, jobs, idem_keys, key_ids,
        webhook_urls;
    std::vector<std::optional<int64_t>> deadlines, created;
    for (std::size_t i : members) {
      const ChargeCall& call = calls[i];
      request_ids.emplace_back(call.charge.request_id);
      task_ids.push_back(store_detail::textOrNull(call.charge.task_id));
      deadlines.emplace_back(call.charge.deadline_at_ms);
      created.emplace_back(call.charge.created_at_ms);
      jobs.push_back(store_detail::textOrNull(call.charge.job));
      idem_keys.push_back(store_detail::textOrNull(call.charge.idem_key));
      key_ids.emplace_back(call.key_id);
      webhook_urls.push_back(store_detail::textOrNull(call.webhook_url));
    }
    // A savepoint of its own: a statement that fails takes only its group.
    store::Transaction tx(*db_);
    if (!tx.status().isOk()) {
      fail(tx.status());
      continue;
    }
    int64_t charged = 0;
    auto r = exec(
        "charge and open (batch)", Sql{"", kChargeAndOpenAllText[static_cast<int>(*mode)]},
        {account, static_cast<int64_t>(members.size()), month, latest, mode_name, hour,
         first.instance_id, store_detail::textArray(request_ids), store_detail::textArray(task_ids),
         store_detail::int64Array(deadlines), store_detail::int64Array(created),
         store_detail::textArray(jobs), store_detail::textArray(idem_keys),
         store_detail::textArray(key_ids), store_detail::textArray(webhook_urls)},
        [&](const Row& row) { charged = row.int64(0); });
    // Those past the units left: why, as the first of them would be told
    // (read in the savepoint: a read that fails takes only its group).
    Result<ChargeOutcome> refused = ChargeOutcome::kExhausted;
    if (r.isOk() && charged < static_cast<int64_t>(members.size())) {
      refused = whyNotCharged(account, mode_name, latest);
    }
    Status s = !r.isOk() ? r.status() : refused.status();
    if (s.isOk()) s = tx.commit();  // else rolled back
    if (!s.isOk()) {
      fail(s);
      continue;
    }
    for (std::size_t n = 0; n < members.size(); ++n) {
      out[members[n]] = static_cast<int64_t>(n) < charged
                            ? Result<ChargeOutcome>(ChargeOutcome::kCharged)
                            : refused;
    }
  }
  return out;
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
