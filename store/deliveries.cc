// Webhook deliveries and their attempts (docs/contract.md §6).
#include "store/store.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "common/ids.h"
#include "common/timefmt.h"
#include "store/rows.h"

namespace eq {

using store::Row;
using store::Sql;
using store::Transaction;
using store_detail::appendDelivery;
using store_detail::int64Array;
using store_detail::optText;
using store_detail::readDeliveryInto;
using store_detail::textArray;

namespace {

// The walk of due deliveries, oldest due first (see claimDueDeliveries).
// SQLite's in one statement. INDEXED BY: without statistics SQLite's
// planner prefers the (status, created_at) index, which reads every
// pending row, due or not, and sorts them; deliveries_due yields the due
// rows in order, so the walk reads only as far as it claims.
const Sql kDueWalk{
    "SELECT id, account_id FROM deliveries INDEXED BY deliveries_due "
    "WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at"};
// PostgreSQL's in pages (only PostgreSQL runs it: the SQLite text is
// empty): at most $4 rows after ($2, $3), of accounts not in $5 (an array
// literal), locked as they are read.
const Sql kDuePage{"",
                   "SELECT id, account_id, next_attempt_at FROM deliveries "
                   "WHERE status = 'pending' AND next_attempt_at <= $1 AND "
                   "(next_attempt_at > $2 OR (next_attempt_at = $2 AND id > $3::text)) AND "
                   "account_id <> ALL ($5::text[]) "
                   "ORDER BY next_attempt_at, id LIMIT $4 FOR UPDATE SKIP LOCKED"};
// The claim of every row a walk took, in one statement (PostgreSQL; SQLite
// claims row by row, where a statement costs no round trip).
const Sql kClaimMany{"",
                     "UPDATE deliveries SET next_attempt_at = $1 WHERE id = ANY ($2::text[]) AND "
                     "status = 'pending' AND next_attempt_at <= $3 RETURNING " EQ_DELIVERY_COLUMNS};

// The longest page of PostgreSQL's walk.
constexpr int64_t kMaxClaimPage = 1000;

const Sql kAnyDue{
    "SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1"};

}  // namespace

// ---------------------------------------------------------------- deliveries

Result<DeliveryRecord> Store::createDelivery(const std::string& task_id, const std::string& url,
                                             const std::string& event, int64_t now_ms) {
  // The task id is unique in deliveries: a second event for the same task
  // (a redelivered message) finds the existing row instead.
  Result<std::optional<DeliveryRecord>> made = insertDelivery(task_id, url, event, now_ms, now_ms);
  if (!made.isOk()) return made.status();
  if (made.value()) return *made.value();
  Result<std::optional<DeliveryRecord>> d = deliveryForTask(task_id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(500, "delivery vanished for task " + task_id);
  return *d.value();
}

Result<std::optional<DeliveryRecord>> Store::insertDelivery(const std::string& task_id,
                                                            const std::string& url,
                                                            const std::string& event,
                                                            int64_t now_ms, int64_t due_at_ms) {
  std::optional<DeliveryRecord> out;
  Status bad;
  auto r = exec("create delivery",
                Sql{"INSERT INTO deliveries (id, task_id, account_id, url, event, status, "
                    "created_at, next_attempt_at) SELECT ?, id, account_id, ?, ?, 'pending', "
                    "?, ? FROM tasks WHERE id = ? ON CONFLICT (task_id) DO NOTHING "
                    "RETURNING " EQ_DELIVERY_COLUMNS,
                    "INSERT INTO deliveries (id, task_id, account_id, url, event, status, "
                    "created_at, next_attempt_at) SELECT ?::text, id, account_id, ?::text, "
                    "?::text, 'pending', ?::bigint, ?::bigint FROM tasks WHERE id = ? "
                    "ON CONFLICT (task_id) DO NOTHING RETURNING " EQ_DELIVERY_COLUMNS},
                {ids::newDeliveryId(), url, event, now_ms, due_at_ms, task_id},
                readDeliveryInto(out, bad, false));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

Result<std::optional<DeliveryRecord>> Store::deliveryForTask(const std::string& task_id) {
  std::optional<DeliveryRecord> out;
  Status bad;
  auto r =
      exec("read delivery", Sql{"SELECT " EQ_DELIVERY_COLUMNS " FROM deliveries WHERE task_id = ?"},
           {task_id}, readDeliveryInto(out, bad, false));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

Result<std::optional<DeliveryRecord>> Store::delivery(const std::string& delivery_id) {
  std::optional<DeliveryRecord> out;
  Status bad;
  auto r = exec(
      "read delivery",
      Sql{"SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR " FROM deliveries WHERE id = ?"},
      {delivery_id}, readDeliveryInto(out, bad, true));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

Result<std::vector<DeliveryRecord>> Store::listDeliveries(const DeliveryFilter& f) {
  // ?1/?2 are NULL when not filtering; SQLite still uses the (status,
  // created_at) index for a given status.
  std::vector<DeliveryRecord> out;
  Status bad;
  auto r = exec("list deliveries",
                Sql{"SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                    " FROM deliveries WHERE (?1 IS NULL OR status = ?1) AND "
                    "(?2 IS NULL OR task_id = ?2) ORDER BY created_at DESC, id DESC LIMIT ?3",
                    "SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                    " FROM deliveries WHERE ($1::text IS NULL OR status = $1::text) AND "
                    "($2::text IS NULL OR task_id = $2::text) "
                    "ORDER BY created_at DESC, id DESC LIMIT $3"},
                {store_detail::optState(f.status), optText(f.task_id), int64_t{f.limit}},
                appendDelivery(out, bad, true));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

Result<std::vector<DeliveryAttempt>> Store::deliveryAttempts(const std::string& delivery_id) {
  std::vector<DeliveryAttempt> out;
  auto r = exec("read attempts",
                Sql{"SELECT attempt, at, coalesce(http_status, 0), latency_ms, coalesce(error, '') "
                    "FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt"},
                {delivery_id}, [&](const Row& row) {
                  DeliveryAttempt a;
                  a.number = static_cast<int>(row.int64(0));
                  a.at = row.int64(1);
                  a.http_status = static_cast<int>(row.int64(2));
                  a.latency_ms = row.int64(3);
                  a.error = row.text(4);
                  out.push_back(std::move(a));
                });
  if (!r.isOk()) return r.status();
  return out;
}

Result<std::vector<DeliveryRecord>> Store::claimDueDeliveries(
    int64_t now_ms, int64_t lease_until_ms, int limit,
    const std::function<bool(const std::string& account_id)>& admit) {
  // A read first: the sender scans every 200 ms, mostly finding nothing,
  // and in WAL mode a read takes no lock while an UPDATE, even of no rows,
  // takes the write lock that eq-api needs.
  // (A caller inside its own transaction has asked already: the sender.)
  if (!inTransaction()) {
    Result<bool> any = anyDeliveryDue(now_ms);
    if (!any.isOk()) return any.status();
    if (!any.value()) return std::vector<DeliveryRecord>();
  }
  // The walk and the claims in one write transaction (BEGIN IMMEDIATE, or a
  // savepoint inside the caller's), so two dispatchers scanning at once
  // never both take a row. The walk goes down the deliveries_due index,
  // oldest due first, and asks `admit` about each row's account: a row it
  // refuses stays due and untouched (nothing is claimed that will not be
  // started, so a crash loses nothing), and the walk goes on to the next
  // row, so one account's backlog does not keep later rows of other
  // accounts back. The walk ends at `limit` rows or at the end of the due
  // rows; refused rows are the only ones read without being claimed.
  //
  // How the walk reads is the one thing that differs per engine, and it
  // has to (the claims below are the same):
  // - SQLite steps through one statement and stops when told (Row::stop),
  //   so one statement reads exactly as far as the walk goes. Its
  //   transaction holds the write lock: one claimer at a time. The walk
  //   is the sender's hot path: with an account at its share of the slots
  //   a scan reads every due row after its claims (refused), and each
  //   attempt that ends brings a scan. Read in pages instead, as below,
  //   each row cost more: ordered by (next_attempt_at, id) SQLite sorted
  //   them in a temporary B-tree (EXPLAIN QUERY PLAN: "USE TEMP B-TREE FOR
  //   RIGHT PART OF ORDER BY"), webhooks at 0.42x; by (next_attempt_at,
  //   rowid), the index's own order, the condition that resumes a page
  //   and the columns that mark its end still cost about 20% a row.
  // - PostgreSQL sends a whole result at once, so without a LIMIT a walk
  //   that needs 10 rows would read (and lock) every due row. It reads in
  //   pages: as long as the claims still wanted, doubling while refused
  //   rows fill them, each going on after the last row of the one before
  //   in (next_attempt_at, id) order, each FOR UPDATE SKIP LOCKED: the rows
  //   another dispatcher is claiming at that moment are passed over rather
  //   than waited for, and the rows read stay locked until this
  //   transaction ends, so dispatchers on several hosts never take the same
  //   row and never queue on each other. A refused row stays locked (not
  //   claimed) until the commit, a few milliseconds: another dispatcher
  //   finds it at its next scan.
  //   On PostgreSQL deliveries_due is (next_attempt_at, id) (migration
  //   009): a page is read in the index's own order and stops at its LIMIT,
  //   where on (next_attempt_at) alone it sorted each run of equal
  //   next_attempt_at (a backlog made within a millisecond, one lease's
  //   rows) to find its first rows.
  //   An account `admit` refuses is left out of the pages after (it stays
  //   refused for the whole walk): with one account at its share and a
  //   backlog of its rows, the walk would otherwise read and lock every
  //   one of them at each scan, in pages up to kMaxClaimPage. Measured with
  //   bench/run's profile (EQ_BENCH_PG_PROFILE=1), 12,501 deliveries of one
  //   account: 8.3 million rows read in 13,514 pages, 42.8 s of the
  //   server's time, for 12,501 claims.
  //   Its claims are one UPDATE for all the rows taken, not one per row.
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  std::vector<std::string> ids;
  std::set<std::string> refused;
  auto visit = [&](const Row& row) {
    if (static_cast<int>(ids.size()) >= limit) return row.stop();
    std::string account(row.text(1));
    if (refused.contains(account)) return;
    if (!admit || admit(account)) {
      ids.emplace_back(row.text(0));
    } else {
      refused.insert(std::move(account));
    }
    if (static_cast<int>(ids.size()) >= limit) row.stop();
  };
  std::vector<DeliveryRecord> out;
  Status bad;
  if (db_->engine() == store::DbEngine::kPostgres) {
    // Where the last page ended: the next goes on after (at, id).
    int64_t after_at = std::numeric_limits<int64_t>::min();
    std::string after_id;
    for (int64_t page = limit; static_cast<int>(ids.size()) < limit;
         page = std::min<int64_t>(page * 2, kMaxClaimPage)) {
      int64_t read = 0;
      const std::string skip = textArray(std::vector<std::string>(refused.begin(), refused.end()));
      auto walk = exec("read due deliveries", kDuePage, {now_ms, after_at, after_id, page, skip},
                       [&](const Row& row) {
                         // Only a full page's last row is where the next one starts
                         // (a short page is the end of the due rows).
                         if (++read == page) {
                           after_at = row.int64(2);
                           after_id = row.text(0);
                         }
                         visit(row);
                       });
      if (!walk.isOk()) return walk.status();
      if (read < page) break;
    }
    if (ids.empty()) return out;  // tx rolls back: it changed nothing
    // The rows come back in no set order: put them in the walk's.
    std::map<std::string, std::size_t> position;
    for (std::size_t i = 0; i < ids.size(); ++i) position.emplace(ids[i], i);
    auto r = exec("claim deliveries", kClaimMany, {lease_until_ms, textArray(ids), now_ms},
                  appendDelivery(out, bad, false));
    if (!r.isOk()) return r.status();
    if (!bad.isOk()) return bad;
    std::sort(out.begin(), out.end(), [&](const DeliveryRecord& a, const DeliveryRecord& b) {
      return position.at(a.delivery_id) < position.at(b.delivery_id);
    });
    if (Status c = tx.commit(); !c.isOk()) return c;
    return out;
  }
  auto walk = exec("read due deliveries", kDueWalk, {now_ms}, visit);
  if (!walk.isOk()) return walk.status();
  for (const std::string& id : ids) {
    // The row was due a moment ago in this same transaction; the conditions
    // are repeated so that the UPDATE alone states what a claim is.
    auto r =
        exec("claim deliveries",
             Sql{"UPDATE deliveries SET next_attempt_at = ?1 WHERE id = ?2 AND "
                 "status = 'pending' AND next_attempt_at <= ?3 RETURNING " EQ_DELIVERY_COLUMNS},
             {lease_until_ms, id, now_ms}, appendDelivery(out, bad, false));
    if (!r.isOk()) return r.status();
    if (!bad.isOk()) return bad;
  }
  if (Status c = tx.commit(); !c.isOk()) return c;
  return out;
}

Result<bool> Store::anyDeliveryDue(int64_t now_ms) {
  bool due = false;
  auto r = exec("read due deliveries", kAnyDue, {now_ms}, [&](const Row&) { due = true; });
  if (!r.isOk()) return r.status();
  return due;
}

Result<int64_t> Store::countPendingDeliveries() {
  int64_t n = 0;
  auto r = exec("count pending deliveries",
                Sql{"SELECT COUNT(*) FROM deliveries WHERE status = 'pending'"}, {},
                [&](const Row& row) { n = row.int64(0); });
  if (!r.isOk()) return r.status();
  return n;
}

Result<bool> Store::finishAttempt(const std::string& delivery_id, const DeliveryAttempt& a,
                                  DeliveryStatus new_status, int64_t next_attempt_at_ms) {
  Result<std::vector<bool>> r =
      finishAttempts({FinishedAttempt{delivery_id, a, new_status, next_attempt_at_ms}});
  if (!r.isOk()) return r.status();
  return bool{r.value().front()};
}

Result<std::vector<bool>> Store::finishAttempts(const std::vector<FinishedAttempt>& attempts) {
  std::vector<bool> recorded(attempts.size(), false);
  if (attempts.empty()) return recorded;
  if (db_->engine() == store::DbEngine::kPostgres) {
    // One statement for all of them, atomic by itself: one round trip for
    // every attempt a sender's loop turn records, and no savepoint. The
    // cost: inside a caller's transaction a failure spoils that transaction
    // rather than one attempt, and every attempt of the caller's batch is
    // retried after its lease (at-least-once, as for a failed commit).
    // The attempts come as arrays, one element each (a delivery has one
    // attempt in flight at a time, so ids do not repeat).
    std::vector<std::string> ids, statuses;
    std::vector<std::optional<std::string>> errors;
    std::vector<std::optional<int64_t>> at, http_status, next_at, latency;
    std::map<std::string, std::size_t> position;
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      const FinishedAttempt& f = attempts[i];
      ids.push_back(f.delivery_id);
      statuses.emplace_back(deliveryStatusName(f.new_status));
      errors.push_back(store_detail::textOrNull(f.attempt.error));
      at.push_back(f.attempt.at);
      http_status.push_back(
          f.attempt.http_status > 0 ? std::optional<int64_t>(f.attempt.http_status) : std::nullopt);
      next_at.push_back(f.next_attempt_at_ms);
      latency.push_back(f.attempt.latency_ms);
      position.emplace(f.delivery_id, i);
    }
    auto r = exec(
        "finish attempts",
        Sql{"",
            "WITH a AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], "
            "$4::text[], $5::bigint[], $6::bigint[], $7::text[]) "
            "AS a (id, at, http_status, status, next_at, latency_ms, error)), "
            "up AS (UPDATE deliveries d SET attempts = d.attempts + 1, "
            "last_attempt_at = a.at, last_status = a.http_status, status = a.status, "
            "next_attempt_at = CASE WHEN a.status = 'pending' THEN a.next_at END "
            "FROM a WHERE d.id = a.id AND d.status = 'pending' "
            "RETURNING d.id, d.attempts, a.at, a.http_status, a.latency_ms, a.error) "
            "INSERT INTO delivery_attempts (delivery_id, attempt, at, http_status, latency_ms, "
            "error) SELECT id, attempts, at, http_status, latency_ms, error FROM up "
            "RETURNING delivery_id"},
        {textArray(ids), int64Array(at), int64Array(http_status), textArray(statuses),
         int64Array(next_at), int64Array(latency), textArray(errors)},
        [&](const Row& row) {
          if (auto it = position.find(std::string(row.text(0))); it != position.end()) {
            recorded[it->second] = true;
          }
        });
    if (!r.isOk()) return r.status();
    return recorded;
  }
  // SQLite: each in a transaction (a savepoint inside the caller's) of its
  // own, where a statement costs no round trip.
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const FinishedAttempt& f = attempts[i];
    const DeliveryAttempt& a = f.attempt;
    const store::Value http_status =
        a.http_status > 0 ? store::Value(int64_t{a.http_status}) : store::Value(nullptr);
    Transaction tx(*db_);
    if (!tx.status().isOk()) return tx.status();
    std::optional<int64_t> attempt;
    auto up = exec(
        "finish attempt",
        Sql{"UPDATE deliveries SET attempts = attempts + 1, last_attempt_at = ?1, "
            "last_status = ?2, status = ?3, "
            "next_attempt_at = CASE WHEN ?3 = 'pending' THEN ?4 ELSE NULL END "
            "WHERE id = ?5 AND status = 'pending' RETURNING attempts"},
        {a.at, http_status, deliveryStatusName(f.new_status), f.next_attempt_at_ms, f.delivery_id},
        [&](const Row& row) { attempt = row.int64(0); });
    if (!up.isOk()) return up.status();
    if (attempt) {
      if (auto r =
              exec("log attempt",
                   Sql{"INSERT INTO delivery_attempts (delivery_id, attempt, at, "
                       "http_status, latency_ms, error) VALUES (?, ?, ?, ?, ?, ?)"},
                   {f.delivery_id, *attempt, a.at, http_status, a.latency_ms, optText(a.error)});
          !r.isOk()) {
        return r.status();
      }
    }
    if (Status c = tx.commit(); !c.isOk()) return c;
    recorded[i] = attempt.has_value();
  }
  return recorded;
}

Status Store::releaseDelivery(const std::string& delivery_id, int64_t due_ms) {
  return exec("release delivery",
              Sql{"UPDATE deliveries SET next_attempt_at = ? WHERE id = ? AND status = 'pending'"},
              {due_ms, delivery_id})
      .status();
}

Result<DeliveryRecord> Store::replayDelivery(const std::string& delivery_id, int64_t now_ms) {
  auto r = exec("replay delivery",
                Sql{"UPDATE deliveries SET status = 'pending', next_attempt_at = ?1, "
                    "replayed_at = ?1, schedule_offset = attempts WHERE id = ?2 AND "
                    "status IN ('delivered', 'failed')"},
                {now_ms, delivery_id});
  if (!r.isOk()) return r.status();
  const bool changed = r.value() == 1;
  Result<std::optional<DeliveryRecord>> d = delivery(delivery_id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(404, "no delivery " + delivery_id);
  if (!changed) {
    return Status(409, "delivery " + delivery_id + " is already pending (next attempt " +
                           iso8601(d.value()->next_attempt_at) + ")");
  }
  return *d.value();
}

}  // namespace eq
