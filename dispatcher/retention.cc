#include "dispatcher/retention.h"

#include <algorithm>

#include "common/log.h"

namespace eq::dispatch {
namespace {

// After a database error the purge is tried again this much later (or at
// the next interval, if sooner): the database is busy or down, and the next
// purge catches up anyway.
constexpr int64_t kRetryAfterErrorMs = 60'000;

}  // namespace

bool RetentionPurger::step(int64_t now_ms) {
  if (phase_ == Phase::kIdle) {
    if (now_ms < next_run_ms_) return false;
    phase_ = Phase::kTasks;
    started_ms_ = now_ms;
    current_ = Counts{};
  }
  Result<int> n = 0;
  int64_t* total = nullptr;
  Phase next = phase_;
  switch (phase_) {
    case Phase::kTasks:
      n = store_.purgeTasksBefore(started_ms_ - opts_.task_retention_ms, opts_.batch);
      total = &current_.tasks;
      next = Phase::kIdempotency;
      break;
    case Phase::kIdempotency:
      n = store_.purgeIdempotencyBefore(started_ms_ - opts_.idempotency_retention_ms, opts_.batch);
      total = &current_.idempotency_keys;
      next = Phase::kRateCounters;
      break;
    case Phase::kRateCounters:
      n = store_.purgeRateCountersBefore(started_ms_ - opts_.rate_counter_retention_ms,
                                         opts_.batch);
      total = &current_.rate_counters;
      next = Phase::kPortal;
      break;
    case Phase::kPortal:
      // Expired sessions, links and sign-in failures, and test events kept
      // as long as tasks are.
      n = store_.purgePortalBefore(started_ms_ - opts_.task_retention_ms, started_ms_,
                                   opts_.batch);
      total = &current_.portal;
      next = Phase::kIdle;
      break;
    case Phase::kIdle:
      return false;
  }
  if (!n.isOk()) {
    emit([error = n.status().msg()] {
      log::warn("retention purge failed; will retry", {{"error", error}});
    });
    phase_ = Phase::kIdle;
    next_run_ms_ = now_ms + std::min(kRetryAfterErrorMs, opts_.interval_ms);
    return false;
  }
  *total += n.value();
  if (n.value() >= opts_.batch) return true;  // more of the same phase
  phase_ = next;
  if (phase_ != Phase::kIdle) return true;
  last_ = current_;
  ++finished_;
  next_run_ms_ = started_ms_ + opts_.interval_ms;
  emit([c = last_, took = now_ms - started_ms_] {
    log::info("retention purge done",
              {{"tasks", static_cast<long long>(c.tasks)},
               {"idempotency_keys", static_cast<long long>(c.idempotency_keys)},
               {"rate_counters", static_cast<long long>(c.rate_counters)},
               {"portal", static_cast<long long>(c.portal)},
               {"took_ms", static_cast<long long>(took)}});
  });
  return false;
}

}  // namespace eq::dispatch
