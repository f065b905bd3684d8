// ChargeSettler: settles what an eq-api process charged but could not
// settle because it died (issue 13, crash-safe accounting).
//
// eq-api writes an open charge with every charge and deletes it when the
// call ends, and keeps a heartbeat row (api/db_thread.h). Every interval the
// settler looks for open charges of instances whose heartbeat is older than
// stale_ms (or that are gone), and for charges past their deadline plus
// grace_ms, and settles each in one transaction with its record in
// `settlements` (Store::settleOrphanedCharges): a sync call that never got
// its answer is refunded; an async task whose job the broker never
// confirmed is failed, which refunds it, and gets its task.failed webhook.
// With the defaults a dead eq-api's charges are settled 10 to 15 s after
// its last heartbeat, well within the minute the issue asks for.
//
// Lives on the sender thread (dispatcher/sender.h) and borrows that thread's
// Store; the caller holds the dispatcher's write gate around step().
#pragma once

#include <cstdint>

#include "common/store.h"

namespace eq::dispatch {

struct SettlerOptions {
  int64_t interval_ms = 2'000;
  // Heartbeats come every 3 s (DbThread::kHeartbeatMs): three missed.
  int64_t stale_ms = 10'000;
  // A charge past its deadline by this much is settled even if its
  // instance lives: a live eq-api settles every call by its deadline.
  int64_t grace_ms = 60'000;
  int64_t settlement_retention_ms = 7 * 86'400'000LL;
};

class ChargeSettler {
 public:
  ChargeSettler(Store& store, SettlerOptions opts) : store_(store), opts_(opts) {}

  // Settles what is due, if a sweep is due. Returns the number settled.
  int step(int64_t now_ms);
  int64_t settledTotal() const { return settled_total_; }

 private:
  Store& store_;
  SettlerOptions opts_;
  int64_t next_run_ms_ = 0;  // 0: at once (start-up)
  int64_t settled_total_ = 0;
};

}  // namespace eq::dispatch
