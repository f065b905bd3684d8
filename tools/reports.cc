#include "tools/reports.h"

#include "store/rows.h"

namespace eq::tools {

using store::Row;
using store::Sql;
using store_detail::optText;

Result<std::vector<TaskRecord>> Reports::listTasks(const TaskFilter& f) {
  // ?n IS NULL switches a filter off. With an account the tasks_account
  // index serves both the filter and the order; otherwise tasks_created does.
  std::vector<TaskRecord> out;
  Status bad;
  auto r = store_.exec(
      "list tasks",
      Sql{"SELECT " EQ_TASK_COLUMNS(
              "''") " FROM tasks WHERE (?1 IS NULL OR account_id = ?1) AND "
                    "(?2 IS NULL OR status = ?2) AND (?3 IS NULL OR mode = ?3) "
                    "ORDER BY created_at DESC, id DESC LIMIT ?4",
          "SELECT " EQ_TASK_COLUMNS("''") " FROM tasks WHERE "
                                          "($1::text IS NULL OR account_id = $1::text) AND "
                                          "($2::text IS NULL OR status = $2::text) AND ($3::text "
                                          "IS NULL OR mode = $3::text) "
                                          "ORDER BY created_at DESC, id DESC LIMIT $4"},
      {optText(f.account_id), store_detail::optState(f.status), optText(f.mode), int64_t{f.limit}},
      store_detail::appendTask(out, bad));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

Result<std::vector<TaskTiming>> Reports::taskTimingsSince(int64_t since_ms) {
  std::vector<TaskTiming> out;
  auto r = store_.exec("read task timings",
                       Sql{"SELECT mode, status, created_at, coalesce(started_at, 0), "
                           "coalesce(finished_at, 0) FROM tasks WHERE created_at >= ?"},
                       {since_ms}, [&](const Row& row) {
                         out.push_back(TaskTiming{std::string(row.text(0)),
                                                  std::string(row.text(1)), row.int64(2),
                                                  row.int64(3), row.int64(4)});
                       });
  if (!r.isOk()) return r.status();
  return out;
}

Result<std::map<std::string, int64_t>> Reports::deliveryCountsSince(int64_t since_ms) {
  std::map<std::string, int64_t> out;
  auto r = store_.exec(
      "count deliveries",
      Sql{"SELECT status, count(*) FROM deliveries WHERE created_at >= ? GROUP BY status"},
      {since_ms}, [&](const Row& row) { out[std::string(row.text(0))] = row.int64(1); });
  if (!r.isOk()) return r.status();
  return out;
}

}  // namespace eq::tools
