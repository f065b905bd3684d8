// Internal to the store's parts (store/*.cc) and the report queries of
// tools/reports.cc: the column lists of a task and a delivery, and their
// readers from a row of the database seam (store/db.h). Not for other
// callers: everything else goes through store/store.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/db.h"
#include "store/store.h"

namespace eq::store_detail {

// PostgreSQL array literals: {"a","b",NULL} of texts, each element quoted
// and its quotes and backslashes escaped; {1,2,NULL} of integers. An empty
// optional is a NULL element.
inline std::string textArray(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (const std::optional<std::string>& item : items) {
    if (out.size() > 1) out += ',';
    if (!item) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}
// An array element from a text of a record: empty is NULL, as optText binds
// a lone value.
inline std::optional<std::string> textOrNull(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}
inline std::string textArray(const std::vector<std::string>& items) {
  return textArray(std::vector<std::optional<std::string>>(items.begin(), items.end()));
}
inline std::string int64Array(const std::vector<std::optional<int64_t>>& items) {
  std::string out = "{";
  for (const std::optional<int64_t>& item : items) {
    if (out.size() > 1) out += ',';
    out += item ? std::to_string(*item) : "NULL";
  }
  out += '}';
  return out;
}

// The columns taskFromRow() reads, in its order; `result` is the result_json
// expression (listings select '' to leave the possibly large result out).
#define EQ_TASK_COLUMNS(result)                                                          \
  "id, account_id, key_id, request_id, mode, status, coalesce(webhook_url, ''), " result \
  ", coalesce(error_code, 0), coalesce(error_msg, ''), created_at, "                  \
  "coalesce(started_at, 0), coalesce(finished_at, 0)"

// nullopt when the row's status is none of TaskStatus's names (the CHECK
// constraint on tasks.status makes that impossible; callers answer 500).
inline std::optional<TaskRecord> taskFromRow(const store::Row& r) {
  const std::optional<TaskStatus> status = parseTaskStatus(r.text(5));
  if (!status) return std::nullopt;
  TaskRecord t;
  t.task_id = r.text(0);
  t.account_id = r.text(1);
  t.key_id = r.text(2);
  t.request_id = r.text(3);
  t.mode = r.text(4);
  t.status = *status;
  t.webhook_url = r.text(6);
  t.result_json = r.text(7);
  t.error_code = static_cast<int>(r.int64(8));
  t.error_msg = r.text(9);
  t.created_at = r.int64(10);
  t.started_at = r.int64(11);
  t.finished_at = r.int64(12);
  return t;
}

inline Status unknownTaskStatus(const store::Row& r) {
  return Status(500, "task " + std::string(r.text(0)) + " has an unknown status '" +
                         std::string(r.text(5)) + "'");
}

// The row callback of a read of one task: the task into `out`; a row whose
// status is unknown leaves its 500 in `bad`.
inline store::RowFn readTaskInto(std::optional<TaskRecord>& out, Status& bad) {
  return [&out, &bad](const store::Row& row) {
    out = taskFromRow(row);
    if (!out) bad = unknownTaskStatus(row);
  };
}

// The row callback of a task listing: each task appended to `out`; a row
// whose status is unknown leaves its 500 in `bad`.
inline store::RowFn appendTask(std::vector<TaskRecord>& out, Status& bad) {
  return [&out, &bad](const store::Row& row) {
    std::optional<TaskRecord> t = taskFromRow(row);
    if (t) {
      out.push_back(std::move(*t));
    } else {
      bad = unknownTaskStatus(row);
    }
  };
}

// The columns deliveryFromRow expects, in order. The last one reads the newest
// attempt's error, a subquery only worth running where a listing shows it.
#define EQ_DELIVERY_COLUMNS                                                                 \
  "id, coalesce(task_id, ''), url, event, status, attempts, coalesce(last_attempt_at, 0), "   \
  "coalesce(last_status, 0), CASE WHEN status = 'pending' THEN coalesce(next_attempt_at, 0) " \
  "ELSE 0 END, created_at, schedule_offset, coalesce(replayed_at, 0), account_id"
#define EQ_DELIVERY_LAST_ERROR                                                 \
  ", coalesce((SELECT error FROM delivery_attempts a WHERE a.delivery_id = deliveries.id " \
  "ORDER BY a.attempt DESC LIMIT 1), '')"

// A delivery from a row of EQ_DELIVERY_COLUMNS (and EQ_DELIVERY_LAST_ERROR
// when with_last_error); nothing when its status is none of
// DeliveryStatus's.
inline std::optional<DeliveryRecord> deliveryFromRow(const store::Row& r, bool with_last_error) {
  const std::optional<DeliveryStatus> status = parseDeliveryStatus(r.text(4));
  if (!status) return std::nullopt;
  DeliveryRecord d;
  d.delivery_id = r.text(0);
  d.task_id = r.text(1);  // empty for a test event
  d.url = r.text(2);
  d.event = r.text(3);
  d.status = *status;
  d.attempts = static_cast<int>(r.int64(5));
  d.last_attempt_at = r.int64(6);
  d.last_status = static_cast<int>(r.int64(7));
  d.next_attempt_at = r.int64(8);
  d.created_at = r.int64(9);
  d.schedule_offset = static_cast<int>(r.int64(10));
  d.replayed_at = r.int64(11);
  d.account_id = r.text(12);
  if (with_last_error) d.last_error = r.text(13);
  return d;
}

inline Status unknownDeliveryStatus(const store::Row& r) {
  return Status(500, "delivery " + std::string(r.text(0)) + " has an unknown status '" +
                         std::string(r.text(4)) + "'");
}

// The row callback of a read of one delivery: it goes into `out`; a row
// whose status is unknown leaves its 500 in `bad`.
inline store::RowFn readDeliveryInto(std::optional<DeliveryRecord>& out, Status& bad,
                                     bool with_last_error) {
  return [&out, &bad, with_last_error](const store::Row& row) {
    out = deliveryFromRow(row, with_last_error);
    if (!out) bad = unknownDeliveryStatus(row);
  };
}

// The row callback of a delivery listing: each appended to `out`; a row
// whose status is unknown leaves its 500 in `bad`.
inline store::RowFn appendDelivery(std::vector<DeliveryRecord>& out, Status& bad,
                                   bool with_last_error) {
  return [&out, &bad, with_last_error](const store::Row& row) {
    std::optional<DeliveryRecord> d = deliveryFromRow(row, with_last_error);
    if (d) {
      out.push_back(std::move(*d));
    } else {
      bad = unknownDeliveryStatus(row);
    }
  };
}

// An optional text: NULL when empty.
inline store::Value optText(const std::string& s) {
  return s.empty() ? store::Value(nullptr) : store::Value(std::string_view(s));
}

// An optional number: NULL when absent.
inline store::Value optInt(const std::optional<int64_t>& v) {
  return v ? store::Value(*v) : store::Value(nullptr);
}

// An optional state as a filter's value: NULL when absent, else its name.
inline store::Value optState(const std::optional<TaskStatus>& s) {
  return s ? store::Value(taskStatusName(*s)) : store::Value(nullptr);
}
inline store::Value optState(const std::optional<DeliveryStatus>& s) {
  return s ? store::Value(deliveryStatusName(*s)) : store::Value(nullptr);
}

// The hour of usage_hourly a moment belongs to (UTC, in ms).
inline int64_t usageHour(int64_t ms) { return ms - ms % 3'600'000; }

// The advisory lock a purge of several statements takes on PostgreSQL
// ("EQ" "RT" in ASCII), for its transaction: dispatchers on several hosts
// purge one batch at a time, each after the last one's commit, so that a
// batch never trips over rows another is deleting (a delivery whose
// attempts it did not delete, a count of rows gone meanwhile). Retention
// runs an hour apart in batches of milliseconds: the wait is short. SQLite
// holds the write lock already; its text only reads the value back.
inline constexpr int64_t kRetentionLock = 0x45515254;
inline const store::Sql kTakeRetentionLock{"SELECT ?", "SELECT pg_advisory_xact_lock(?)"};

}  // namespace eq::store_detail
