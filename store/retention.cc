// Retention: bounded purges of old rows, run by eq-dispatcher.
#include "store/store.h"

#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

// ---------------------------------------------------------------- retention

Result<int> Store::purgeTasksBefore(int64_t cutoff_ms, int limit) {
  if (Status s = begin(); !s.isOk()) return s;
  Status s;
  std::vector<std::string> ids;
  {
    Query q(prepare(
        "SELECT id FROM tasks WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d "
        "WHERE d.task_id = tasks.id AND d.status = 'pending') ORDER BY created_at LIMIT ?"));
    q.bind(1, cutoff_ms).bind(2, int64_t{limit});
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) ids.push_back(q.text(0));
    if (rc != SQLITE_DONE) s = error("select expired tasks");
  }
  // Children first: foreign keys are enforced (PRAGMA foreign_keys=ON).
  for (const std::string& id : ids) {
    if (!s.isOk()) break;
    Query attempts(prepare(
        "DELETE FROM delivery_attempts WHERE delivery_id IN "
        "(SELECT id FROM deliveries WHERE task_id = ?)"));
    attempts.bind(1, id);
    if (attempts.step() != SQLITE_DONE) {
      s = error("purge attempts");
      break;
    }
    Query delivery(prepare("DELETE FROM deliveries WHERE task_id = ?"));
    delivery.bind(1, id);
    if (delivery.step() != SQLITE_DONE) {
      s = error("purge delivery");
      break;
    }
    Query task(prepare("DELETE FROM tasks WHERE id = ?"));
    task.bind(1, id);
    if (task.step() != SQLITE_DONE) s = error("purge task");
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return static_cast<int>(ids.size());
}

Result<int> Store::purgeIdempotencyBefore(int64_t cutoff_ms, int limit) {
  Query q(prepare(
      "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys "
      "WHERE created_at < ? ORDER BY created_at LIMIT ?)"));
  q.bind(1, cutoff_ms).bind(2, int64_t{limit});
  if (q.step() != SQLITE_DONE) return error("purge idempotency keys");
  return sqlite3_changes(db_);
}

Result<int> Store::purgeRateCountersBefore(int64_t cutoff_ms, int limit) {
  Query q(prepare(
      "DELETE FROM rate_counters WHERE (key_id, window_start) IN (SELECT key_id, window_start "
      "FROM rate_counters WHERE window_start < ? LIMIT ?)"));
  q.bind(1, cutoff_ms).bind(2, int64_t{limit});
  if (q.step() != SQLITE_DONE) return error("purge rate counters");
  return sqlite3_changes(db_);
}

}  // namespace eq
