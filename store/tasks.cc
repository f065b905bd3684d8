// Tasks: creation and one function per transition (docs/contract.md §5).
#include "store/store.h"

#include "common/ids.h"
#include "common/timefmt.h"
#include "store/rows.h"

namespace eq {

using store::Row;
using store::Sql;
using store::Transaction;
using store_detail::optText;

// ---------------------------------------------------------------- tasks

Status Store::createTask(const TaskRecord& t) {
  return queue("create task",
               Sql{"INSERT INTO tasks (id, account_id, key_id, request_id, mode, status, "
                   "webhook_url, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 'queued', "
                   "coalesce(?6, (SELECT default_webhook_url FROM accounts WHERE id = ?2)), ?7)"},
               {t.task_id, t.account_id, t.key_id, t.request_id, t.mode, optText(t.webhook_url),
                t.created_at});
}

Result<std::map<std::string, TaskRecord>> Store::tasks(const std::vector<std::string>& task_ids) {
  std::map<std::string, TaskRecord> out;
  if (task_ids.empty()) return out;
  if (db_->engine() != store::DbEngine::kPostgres) {
    // SQLite: a statement costs no round trip.
    for (const std::string& id : task_ids) {
      Result<std::optional<TaskRecord>> t = task(id);
      if (!t.isOk()) return t.status();
      if (t.value()) out.emplace(id, std::move(*t.value()));
    }
    return out;
  }
  std::vector<TaskRecord> read;
  Status bad;
  auto r = exec("read tasks",
                Sql{"", "SELECT " EQ_TASK_COLUMNS(
                            "coalesce(result_json, '')") " FROM tasks WHERE id = ANY ($1::text[])"},
                {store_detail::textArray(task_ids)}, store_detail::appendTask(read, bad));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  for (TaskRecord& t : read) {
    std::string id = t.task_id;
    out.emplace(std::move(id), std::move(t));
  }
  return out;
}

Result<std::optional<TaskRecord>> Store::task(const std::string& task_id) {
  std::optional<TaskRecord> out;
  Status bad;
  auto r =
      exec("read task",
           Sql{"SELECT " EQ_TASK_COLUMNS("coalesce(result_json, '')") " FROM tasks WHERE id = ?"},
           {task_id}, store_detail::readTaskInto(out, bad));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

namespace {

// queued -> running; a redelivered task that was already running keeps its
// first started_at.
const Sql kMarkRunning{
    "UPDATE tasks SET status = 'running', started_at = coalesce(started_at, ?) "
    "WHERE id = ? AND status = 'queued'"};

}  // namespace

Result<bool> Store::markTaskRunning(const std::string& task_id, int64_t at_ms) {
  auto r = exec("mark running", kMarkRunning, {at_ms, task_id});
  if (!r.isOk()) return r.status();
  return r.value() == 1;
}

Status Store::queueTaskRunning(const std::string& task_id, int64_t at_ms) {
  return queue("mark running", kMarkRunning, {at_ms, task_id});
}

Result<bool> Store::markTaskSucceeded(const std::string& task_id, const std::string& result_json,
                                      int64_t at_ms, TaskRecord* after) {
  // The task as it is now comes back with the update (but its result, which
  // the caller has), so a caller that goes on with it reads nothing more.
  std::optional<TaskRecord> task;
  Status bad;
  auto r = exec("mark succeeded",
                Sql{"UPDATE tasks SET status = 'succeeded', result_json = ?, finished_at = ?, "
                    "started_at = coalesce(started_at, ?) WHERE id = ? AND "
                    "status IN ('queued', 'running') RETURNING " EQ_TASK_COLUMNS("''")},
                {result_json, at_ms, at_ms, task_id}, store_detail::readTaskInto(task, bad));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  if (!task) return false;
  // The usage record's tokens. A single statement after the UPDATE: callers
  // that need both in one transaction hold one (the dispatcher's events
  // consumer does); alone, a crash between them loses only a token count.
  // Queued: nothing waits for its answer (store::Db::queue).
  Status t =
      queue("count tokens",
            Sql{"INSERT INTO usage_hourly (account_id, mode, hour, tokens) "
                "VALUES (?1, ?2, ?3, coalesce(json_extract(?4, '$.tokens_used'), 0)) "
                "ON CONFLICT (account_id, mode, hour) DO UPDATE SET "
                "tokens = usage_hourly.tokens + excluded.tokens",
                "INSERT INTO usage_hourly (account_id, mode, hour, tokens) "
                "VALUES ($1, $2, $3, coalesce(($4::jsonb ->> 'tokens_used')::numeric::bigint, 0)) "
                "ON CONFLICT (account_id, mode, hour) DO UPDATE SET "
                "tokens = usage_hourly.tokens + excluded.tokens"},
            {task->account_id, task->mode, store_detail::usageHour(at_ms), result_json});
  if (!t.isOk()) return t;
  if (after != nullptr) {
    *after = std::move(*task);
    after->result_json = result_json;
  }
  return true;
}

Result<bool> Store::markTaskFailed(const std::string& task_id, int code, const std::string& msg,
                                   int64_t at_ms) {
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  struct Charge {
    std::string account_id, mode;
    int64_t at_ms = 0;  // the task's creation, with its charge
  };
  std::optional<Charge> owner;
  auto r = exec("mark failed",
                Sql{"UPDATE tasks SET status = 'failed', error_code = ?, error_msg = ?, "
                    "finished_at = ?, charged = 0 WHERE id = ? AND "
                    "status IN ('queued', 'running') RETURNING account_id, mode, created_at"},
                {int64_t{code}, msg, at_ms, task_id}, [&](const Row& row) {
                  owner = Charge{std::string(row.text(0)), std::string(row.text(1)), row.int64(2)};
                });
  if (!r.isOk()) return r.status();
  // Tasks are created charged and only this transition uncharges them, so
  // the status guard alone says the unit is still held: refund it.
  if (owner) {
    if (Status s = refundQuota(owner->account_id, owner->mode, owner->at_ms, at_ms); !s.isOk()) {
      return s;
    }
  }
  if (Status c = tx.commit(); !c.isOk()) return c;
  return owner.has_value();
}

Result<std::string> Store::webhookSecret(const std::string& account_id) {
  std::optional<std::string> out;
  auto r = exec("webhook secret", Sql{"SELECT webhook_secret FROM accounts WHERE id = ?"},
                {account_id}, [&](const Row& row) { out = std::string(row.text(0)); });
  if (!r.isOk()) return r.status();
  if (!out) return Status(404, "no account " + account_id);
  return *out;
}

}  // namespace eq
