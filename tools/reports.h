// Reports: eqctl's read-only queries over tasks and deliveries (task list,
// stats). Only eqctl asks these questions, so they live in tools/ rather
// than in the Store the services share; they run on the Store's connection
// and statement cache (a friend of Store).
//
// Borrows the Store; used on the caller's thread like the Store itself.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/store.h"

namespace eq::tools {

// Which tasks `eqctl task list` shows; empty fields do not filter.
struct TaskFilter {
  std::string account_id;  // the account of --key KEY_ID (a rotated key's tasks included)
  std::optional<TaskStatus> status;
  std::string mode;        // fast | standard | perfect
  int limit = 50;          // newest first
};

// The times `eqctl stats` turns into latencies: created_at is eq-api's
// admission time, started_at and finished_at come from the worker's task
// events (0: not yet).
struct TaskTiming {
  std::string mode;
  std::string status;
  int64_t created_at = 0;
  int64_t started_at = 0;
  int64_t finished_at = 0;
};

class Reports {
 public:
  explicit Reports(Store& store) : store_(store) {}

  // Newest first. result_json is not read: listings never show it, and it
  // is the one large column.
  Result<std::vector<TaskRecord>> listTasks(const TaskFilter& filter);
  // Every task created at or after since_ms.
  Result<std::vector<TaskTiming>> taskTimingsSince(int64_t since_ms);
  // Deliveries created at or after since_ms, counted by status.
  Result<std::map<std::string, int64_t>> deliveryCountsSince(int64_t since_ms);

 private:
  Store& store_;
};

}  // namespace eq::tools
