// Internal to the store's parts (store/*.cc) and the report queries
// of tools/reports.cc: the cached-statement helper and the task row reader.
// Not for other callers: everything else goes through store/store.h.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "store/store.h"

namespace eq::store_detail {

// A cached prepared statement in use: binds by position, steps, reads columns
// and resets itself when it goes out of scope so the cache can reuse it.
class Query {
 public:
  explicit Query(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Query() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  bool valid() const { return stmt_ != nullptr; }

  Query& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Query& bindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Query& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Query& bindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  Query& bindOptText(int i, const std::string& v) { return v.empty() ? bindNull(i) : bind(i, v); }

  int step() { return sqlite3_step(stmt_); }

  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string()
                        : std::string(reinterpret_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  std::string blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p == nullptr ? std::string()
                        : std::string(static_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_;
};

// The columns taskFromRow() reads, in its order; `result` is the result_json
// expression (listings select '' to leave the possibly large result out).
#define EQ_TASK_COLUMNS(result)                                                          \
  "id, account_id, key_id, request_id, mode, status, coalesce(webhook_url, ''), " result \
  ", coalesce(error_code, 0), coalesce(error_msg, ''), created_at, "                  \
  "coalesce(started_at, 0), coalesce(finished_at, 0)"

inline TaskRecord taskFromRow(Query& q) {
  TaskRecord t;
  t.task_id = q.text(0);
  t.account_id = q.text(1);
  t.key_id = q.text(2);
  t.request_id = q.text(3);
  t.mode = q.text(4);
  t.status = q.text(5);
  t.webhook_url = q.text(6);
  t.result_json = q.text(7);
  t.error_code = static_cast<int>(q.int64(8));
  t.error_msg = q.text(9);
  t.created_at = q.int64(10);
  t.started_at = q.int64(11);
  t.finished_at = q.int64(12);
  return t;
}

// The columns readDelivery expects, in order, as one literal (statements are
// cached by the literal's address). The last one reads the newest attempt's
// error, a subquery only worth running where a listing shows it.
#define EQ_DELIVERY_COLUMNS                                                                 \
  "id, coalesce(task_id, ''), url, event, status, attempts, coalesce(last_attempt_at, 0), "   \
  "coalesce(last_status, 0), CASE WHEN status = 'pending' THEN coalesce(next_attempt_at, 0) " \
  "ELSE 0 END, created_at, schedule_offset, coalesce(replayed_at, 0), account_id"
#define EQ_DELIVERY_LAST_ERROR                                                 \
  ", coalesce((SELECT error FROM delivery_attempts a WHERE a.delivery_id = deliveries.id " \
  "ORDER BY a.attempt DESC LIMIT 1), '')"

inline DeliveryRecord readDelivery(const Query& q, bool with_last_error) {
  DeliveryRecord d;
  d.delivery_id = q.text(0);
  d.task_id = q.text(1);  // empty for a test event
  d.url = q.text(2);
  d.event = q.text(3);
  d.status = q.text(4);
  d.attempts = static_cast<int>(q.int64(5));
  d.last_attempt_at = q.int64(6);
  d.last_status = static_cast<int>(q.int64(7));
  d.next_attempt_at = q.int64(8);
  d.created_at = q.int64(9);
  d.schedule_offset = static_cast<int>(q.int64(10));
  d.replayed_at = q.int64(11);
  d.account_id = q.text(12);
  if (with_last_error) d.last_error = q.text(13);
  return d;
}

}  // namespace eq::store_detail
