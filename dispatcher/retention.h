// Retention (docs/contract.md §5): purges what the service no longer needs to keep.
//   - tasks older than EQ_RETENTION_DAYS (7), with their delivery and its
//     attempts (a task whose delivery is still pending waits for it);
//   - Idempotency-Key records past their 24 h life (eq-api purges them
//     lazily on new keys too; an idle account's rows would otherwise stay);
//   - rate-limit windows older than an hour.
//
// A purge runs when the dispatcher starts and then every interval, as a
// sequence of bounded batches (one short write transaction each), so it
// never holds the SQLite write lock long enough to make eq-api answer 503.
// The owner calls step() from its loop: one batch per call.
//
// Lives on the sender thread (dispatcher/sender.h) and borrows that thread's
// Store.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "store/store.h"

namespace eq::dispatch {

struct RetentionOptions {
  int64_t task_retention_ms = 7 * 86'400'000LL;
  int64_t idempotency_retention_ms = Store::kIdempotencyTtlMs;
  int64_t rate_counter_retention_ms = 3'600'000;
  int64_t interval_ms = 3'600'000;
  int batch = 500;
};

class RetentionPurger {
 public:
  RetentionPurger(Store& store, RetentionOptions opts) : store_(store), opts_(opts) {}

  // Runs one batch if a purge is due or under way. Returns true while the
  // purge has more batches to run, so the caller comes back at once.
  bool step(int64_t now_ms);

  // Totals of the last finished purge, for tests and the log.
  struct Counts {
    int64_t tasks = 0;
    int64_t idempotency_keys = 0;
    int64_t rate_counters = 0;
    int64_t portal = 0;  // sessions, links, sign-in failures, test events
  };
  const Counts& lastPurge() const { return last_; }
  int64_t purgesFinished() const { return finished_; }

  // With a sink, log lines are handed to it instead of written: the owner
  // calls step() holding the dispatcher's write gate (dispatcher/db_writes.h)
  // and writes them once the gate is released, since a log write can block
  // (a stalled stderr pipe) and must never hold the gate the consumer thread
  // needs.
  void deferLogsTo(std::vector<std::function<void()>>* sink) { defer_ = sink; }

 private:
  enum class Phase { kIdle, kTasks, kIdempotency, kRateCounters, kPortal };

  Store& store_;
  RetentionOptions opts_;
  Phase phase_ = Phase::kIdle;
  int64_t next_run_ms_ = 0;  // 0: at once (start-up)
  int64_t started_ms_ = 0;   // cut-offs are taken from the purge's start
  Counts current_;
  Counts last_;
  int64_t finished_ = 0;
  void emit(std::function<void()> line) {
    if (defer_ != nullptr) defer_->push_back(std::move(line));
    else line();
  }
  std::vector<std::function<void()>>* defer_ = nullptr;
};

}  // namespace eq::dispatch
