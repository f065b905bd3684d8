// Tasks: creation and one function per transition (PRODUCT.md §5).
#include "store/store.h"

#include "common/ids.h"
#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;
using store_detail::taskFromRow;

// ---------------------------------------------------------------- tasks

Status Store::createTask(const TaskRecord& t) {
  Query q(prepare(
      "INSERT INTO tasks (id, account_id, key_id, request_id, mode, status, webhook_url, "
      "created_at) VALUES (?1, ?2, ?3, ?4, ?5, 'queued', "
      "coalesce(?6, (SELECT default_webhook_url FROM accounts WHERE id = ?2)), ?7)"));
  if (!q.valid()) return error("prepare create task");
  q.bind(1, t.task_id).bind(2, t.account_id).bind(3, t.key_id).bind(4, t.request_id);
  q.bind(5, t.mode).bindOptText(6, t.webhook_url).bind(7, t.created_at);
  if (q.step() != SQLITE_DONE) return error("create task");
  return Status::ok();
}

Result<std::optional<TaskRecord>> Store::task(const std::string& task_id) {
  Query q(prepare("SELECT " EQ_TASK_COLUMNS("coalesce(result_json, '')") " FROM tasks WHERE id = ?"));
  if (!q.valid()) return error("prepare task");
  q.bind(1, task_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<TaskRecord>();
  if (rc != SQLITE_ROW) return error("read task");
  return std::optional<TaskRecord>(taskFromRow(q));
}

Result<bool> Store::markTaskRunning(const std::string& task_id, int64_t at_ms) {
  // queued -> running; a redelivered task that was already running keeps its
  // first started_at.
  Query q(prepare(
      "UPDATE tasks SET status = 'running', started_at = coalesce(started_at, ?) "
      "WHERE id = ? AND status = 'queued'"));
  q.bind(1, at_ms).bind(2, task_id);
  if (q.step() != SQLITE_DONE) return error("mark running");
  return sqlite3_changes(db_) == 1;
}

Result<bool> Store::markTaskSucceeded(const std::string& task_id, const std::string& result_json,
                                      int64_t at_ms) {
  std::string account, mode;
  {
    Query q(prepare(
        "UPDATE tasks SET status = 'succeeded', result_json = ?, finished_at = ?, "
        "started_at = coalesce(started_at, ?) WHERE id = ? AND status IN ('queued', 'running') "
        "RETURNING account_id, mode"));
    q.bind(1, result_json).bind(2, at_ms).bind(3, at_ms).bind(4, task_id);
    int rc = q.step();
    if (rc == SQLITE_DONE) return false;
    if (rc != SQLITE_ROW) return error("mark succeeded");
    account = q.text(0);
    mode = q.text(1);
    q.step();  // run the statement to its end (RETURNING yields one row)
  }
  // The usage record's tokens. A single statement after the UPDATE: callers
  // that need both in one transaction hold one (the dispatcher's events
  // consumer does); alone, a crash between them loses only a token count.
  Query t(prepare(
      "INSERT INTO usage_hourly (account_id, mode, hour, tokens) "
      "VALUES (?1, ?2, ?3, coalesce(json_extract(?4, '$.tokens_used'), 0)) "
      "ON CONFLICT (account_id, mode, hour) DO UPDATE SET tokens = tokens + excluded.tokens"));
  t.bind(1, account).bind(2, mode).bind(3, at_ms - at_ms % 3'600'000).bind(4, result_json);
  if (t.step() != SQLITE_DONE) return error("count tokens");
  return true;
}

Result<bool> Store::markTaskFailed(const std::string& task_id, int code, const std::string& msg,
                                   int64_t at_ms) {
  if (Status s = begin(); !s.isOk()) return s;
  bool changed = false;
  Status s;
  {
    Query q(prepare(
        "UPDATE tasks SET status = 'failed', error_code = ?, error_msg = ?, finished_at = ?, "
        "charged = 0 WHERE id = ? AND status IN ('queued', 'running') "
        "RETURNING account_id, mode"));
    q.bind(1, int64_t{code}).bind(2, msg).bind(3, at_ms).bind(4, task_id);
    int rc = q.step();
    if (rc == SQLITE_ROW) {
      changed = true;
      // Tasks are created charged and only this transition uncharges them, so
      // the status guard alone says the unit is still held: refund it.
      std::string account = q.text(0), mode = q.text(1);
      while (q.step() == SQLITE_ROW) {
      }
      s = refundQuota(account, mode, at_ms);
    } else if (rc != SQLITE_DONE) {
      s = error("mark failed");
    }
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return changed;
}

Result<std::string> Store::webhookSecret(const std::string& account_id) {
  Query q(prepare("SELECT webhook_secret FROM accounts WHERE id = ?"));
  q.bind(1, account_id);
  int rc = q.step();
  if (rc == SQLITE_ROW) return q.text(0);
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  return error("webhook secret");
}

}  // namespace eq
