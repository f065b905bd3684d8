// Webhook deliveries and their attempts (PRODUCT.md §6).
#include "store/store.h"

#include "common/ids.h"
#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

// ---------------------------------------------------------------- deliveries

Result<DeliveryRecord> Store::createDelivery(const std::string& task_id, const std::string& url,
                                             const std::string& event, int64_t now_ms) {
  // The task id is unique in deliveries: a second event for the same task
  // (a redelivered message) finds the existing row instead.
  Query q(prepare(
      "INSERT INTO deliveries (id, task_id, account_id, url, event, status, created_at, "
      "next_attempt_at) SELECT ?, id, account_id, ?, ?, 'pending', ?, ? FROM tasks WHERE id = ? "
      "ON CONFLICT (task_id) DO NOTHING"));
  q.bind(1, ids::newDeliveryId()).bind(2, url).bind(3, event);
  q.bind(4, now_ms).bind(5, now_ms).bind(6, task_id);
  if (q.step() != SQLITE_DONE) return error("create delivery");
  Result<std::optional<DeliveryRecord>> d = deliveryForTask(task_id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(500, "delivery vanished for task " + task_id);
  return *d.value();
}


Result<std::optional<DeliveryRecord>> Store::deliveryForTask(const std::string& task_id) {
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS " FROM deliveries WHERE task_id = ?"));
  if (!q.valid()) return error("prepare delivery");
  q.bind(1, task_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<DeliveryRecord>();
  if (rc != SQLITE_ROW) return error("read delivery");
  return std::optional<DeliveryRecord>(store_detail::readDelivery(q, false));
}

Result<std::optional<DeliveryRecord>> Store::delivery(const std::string& delivery_id) {
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                  " FROM deliveries WHERE id = ?"));
  if (!q.valid()) return error("prepare delivery");
  q.bind(1, delivery_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<DeliveryRecord>();
  if (rc != SQLITE_ROW) return error("read delivery");
  return std::optional<DeliveryRecord>(store_detail::readDelivery(q, true));
}

Result<std::vector<DeliveryRecord>> Store::listDeliveries(const DeliveryFilter& f) {
  // ?1/?2 are NULL when not filtering; SQLite still uses the (status,
  // created_at) index for a given status.
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                  " FROM deliveries WHERE (?1 IS NULL OR status = ?1) AND "
                  "(?2 IS NULL OR task_id = ?2) ORDER BY created_at DESC, id DESC LIMIT ?3"));
  if (!q.valid()) return error("prepare list deliveries");
  q.bindOptText(1, f.status).bindOptText(2, f.task_id).bind(3, int64_t{f.limit});
  std::vector<DeliveryRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(store_detail::readDelivery(q, true));
  if (rc != SQLITE_DONE) return error("list deliveries");
  return out;
}

Result<std::vector<DeliveryAttempt>> Store::deliveryAttempts(const std::string& delivery_id) {
  Query q(prepare(
      "SELECT attempt, at, coalesce(http_status, 0), latency_ms, coalesce(error, '') "
      "FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt"));
  if (!q.valid()) return error("prepare attempts");
  q.bind(1, delivery_id);
  std::vector<DeliveryAttempt> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    DeliveryAttempt a;
    a.number = static_cast<int>(q.int64(0));
    a.at = q.int64(1);
    a.http_status = static_cast<int>(q.int64(2));
    a.latency_ms = q.int64(3);
    a.error = q.text(4);
    out.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return error("read attempts");
  return out;
}

Result<std::vector<DeliveryRecord>> Store::claimDueDeliveries(
    int64_t now_ms, int64_t lease_until_ms, int limit,
    const std::function<bool(const std::string& account_id)>& admit) {
  // A read first: the sender scans every 200 ms, mostly finding nothing,
  // and in WAL mode a read takes no lock while an UPDATE, even of no rows,
  // takes the write lock that eq-api needs.
  {
    Query any(prepare(
        "SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1"));
    if (!any.valid()) return error("prepare due deliveries");
    any.bind(1, now_ms);
    int rc = any.step();
    if (rc == SQLITE_DONE) return std::vector<DeliveryRecord>();
    if (rc != SQLITE_ROW) return error("read due deliveries");
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
  // INDEXED BY: without statistics SQLite's planner prefers the (status,
  // created_at) index, which reads every pending row, due or not, and sorts
  // them; deliveries_due yields the due rows in order, so the walk reads
  // only as far as it claims.
  if (Status s = begin(); !s.isOk()) return s;
  std::vector<std::string> ids;
  Status failed;
  {
    Query walk(prepare(
        "SELECT id, account_id FROM deliveries INDEXED BY deliveries_due "
        "WHERE status = 'pending' AND next_attempt_at <= ? "
        "ORDER BY next_attempt_at"));
    if (!walk.valid()) {
      failed = error("prepare due deliveries");
    } else {
      walk.bind(1, now_ms);
      int rc = SQLITE_DONE;
      while (static_cast<int>(ids.size()) < limit && (rc = walk.step()) == SQLITE_ROW) {
        if (!admit || admit(walk.text(1))) ids.push_back(walk.text(0));
      }
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) failed = error("read due deliveries");
    }
  }
  std::vector<DeliveryRecord> out;
  for (size_t i = 0; i < ids.size() && failed.isOk(); ++i) {
    // The row was due a moment ago in this same transaction; the conditions
    // are repeated so that the UPDATE alone states what a claim is.
    Query q(prepare(
        "UPDATE deliveries SET next_attempt_at = ?1 WHERE id = ?2 AND status = 'pending' AND "
        "next_attempt_at <= ?3 RETURNING " EQ_DELIVERY_COLUMNS));
    if (!q.valid()) {
      failed = error("prepare claim deliveries");
      break;
    }
    q.bind(1, lease_until_ms).bind(2, ids[i]).bind(3, now_ms);
    int rc = q.step();
    if (rc == SQLITE_ROW) {
      DeliveryRecord d = store_detail::readDelivery(q, false);
      d.next_attempt_at = lease_until_ms;
      out.push_back(std::move(d));
      rc = q.step();
    }
    if (rc != SQLITE_DONE) failed = error("claim deliveries");
  }
  if (!failed.isOk()) {
    rollback();
    return failed;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return out;
}

Result<bool> Store::anyDeliveryDue(int64_t now_ms) {
  Query any(prepare(
      "SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1"));
  if (!any.valid()) return error("prepare due deliveries");
  any.bind(1, now_ms);
  int rc = any.step();
  if (rc == SQLITE_DONE) return false;
  if (rc != SQLITE_ROW) return error("read due deliveries");
  return true;
}

Result<int64_t> Store::countPendingDeliveries() {
  Query q(prepare("SELECT COUNT(*) FROM deliveries WHERE status = 'pending'"));
  if (!q.valid()) return error("prepare count pending deliveries");
  if (q.step() != SQLITE_ROW) return error("count pending deliveries");
  return q.int64(0);
}

Result<bool> Store::finishAttempt(const std::string& delivery_id, const DeliveryAttempt& a,
                                  const std::string& new_status, int64_t next_attempt_at_ms) {
  if (Status s = begin(); !s.isOk()) return s;
  Status s;
  bool applied = false;
  {
    Query up(prepare(
        "UPDATE deliveries SET attempts = attempts + 1, last_attempt_at = ?1, last_status = ?2, "
        "status = ?3, next_attempt_at = CASE WHEN ?3 = 'pending' THEN ?4 ELSE NULL END "
        "WHERE id = ?5 AND status = 'pending' RETURNING attempts"));
    if (!up.valid()) {
      s = error("prepare finish attempt");
    } else {
      up.bind(1, a.at);
      if (a.http_status > 0) up.bind(2, int64_t{a.http_status}); else up.bindNull(2);
      up.bind(3, new_status).bind(4, next_attempt_at_ms).bind(5, delivery_id);
      int rc = up.step();
      if (rc == SQLITE_ROW) {
        applied = true;
        int64_t attempt = up.int64(0);
        while (up.step() == SQLITE_ROW) {
        }
        Query log(prepare(
            "INSERT INTO delivery_attempts (delivery_id, attempt, at, http_status, latency_ms, "
            "error) VALUES (?, ?, ?, ?, ?, ?)"));
        log.bind(1, delivery_id).bind(2, attempt).bind(3, a.at);
        if (a.http_status > 0) log.bind(4, int64_t{a.http_status}); else log.bindNull(4);
        log.bind(5, a.latency_ms).bindOptText(6, a.error);
        if (log.step() != SQLITE_DONE) s = error("log attempt");
      } else if (rc != SQLITE_DONE) {
        s = error("finish attempt");
      }
    }
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return applied;
}

Status Store::releaseDelivery(const std::string& delivery_id, int64_t due_ms) {
  Query q(prepare(
      "UPDATE deliveries SET next_attempt_at = ? WHERE id = ? AND status = 'pending'"));
  q.bind(1, due_ms).bind(2, delivery_id);
  if (q.step() != SQLITE_DONE) return error("release delivery");
  return Status::ok();
}

Result<DeliveryRecord> Store::replayDelivery(const std::string& delivery_id, int64_t now_ms) {
  {
    Query q(prepare(
        "UPDATE deliveries SET status = 'pending', next_attempt_at = ?1, replayed_at = ?1, "
        "schedule_offset = attempts WHERE id = ?2 AND status IN ('delivered', 'failed')"));
    q.bind(1, now_ms).bind(2, delivery_id);
    if (q.step() != SQLITE_DONE) return error("replay delivery");
  }
  bool changed = sqlite3_changes(db_) == 1;
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
