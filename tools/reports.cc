#include "tools/reports.h"

#include "store/query.h"

namespace eq::tools {

using store_detail::Query;
using store_detail::taskFromRow;

Result<std::vector<TaskRecord>> Reports::listTasks(const TaskFilter& f) {
  // ?n IS NULL switches a filter off. With an account the tasks_account
  // index serves both the filter and the order; otherwise tasks_created does.
  Query q(store_.prepare(
      "SELECT " EQ_TASK_COLUMNS("''") " FROM tasks WHERE (?1 IS NULL OR account_id = ?1) AND "
      "(?2 IS NULL OR status = ?2) AND (?3 IS NULL OR mode = ?3) "
      "ORDER BY created_at DESC, id DESC LIMIT ?4"));
  if (!q.valid()) return store_.error("prepare list tasks");
  q.bindOptText(1, f.account_id).bindOptText(2, f.status).bindOptText(3, f.mode);
  q.bind(4, int64_t{f.limit});
  std::vector<TaskRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(taskFromRow(q));
  }
  if (rc != SQLITE_DONE) return store_.error("list tasks");
  return out;
}

Result<std::vector<TaskTiming>> Reports::taskTimingsSince(int64_t since_ms) {
  Query q(
      store_.prepare("SELECT mode, status, created_at, coalesce(started_at, 0), coalesce(finished_at, 0) "
              "FROM tasks WHERE created_at >= ?"));
  if (!q.valid()) return store_.error("prepare task timings");
  q.bind(1, since_ms);
  std::vector<TaskTiming> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(TaskTiming{q.text(0), q.text(1), q.int64(2), q.int64(3), q.int64(4)});
  }
  if (rc != SQLITE_DONE) return store_.error("read task timings");
  return out;
}

Result<std::map<std::string, int64_t>> Reports::deliveryCountsSince(int64_t since_ms) {
  Query q(store_.prepare("SELECT status, count(*) FROM deliveries WHERE created_at >= ? GROUP BY status"));
  if (!q.valid()) return store_.error("prepare delivery counts");
  q.bind(1, since_ms);
  std::map<std::string, int64_t> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out[q.text(0)] = q.int64(1);
  if (rc != SQLITE_DONE) return store_.error("count deliveries");
  return out;
}

}  // namespace eq::tools
