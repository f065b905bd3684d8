// ChargeSettler and JobRepublisher: settle what an eq-api process charged
// but could not settle because it died (issue 13, crash-safe accounting).
//
// eq-api writes an open charge with every charge and deletes it when the
// call ends, and keeps a heartbeat row (api/db_thread.h). Every interval the
// two look for open charges of instances whose heartbeat is older than
// stale_ms (or that are gone), and for charges past their deadline plus
// grace_ms, and settle each with its record in `settlements`:
//   - a sync call that never got its answer is refunded (ChargeSettler);
//   - an async call whose task has left `queued` is kept: its job reached
//     the broker, and the task's own outcome settles the unit (ChargeSettler);
//   - an async call whose task is still queued is the one case where nobody
//     knows whether the job reached the broker (eq-api may have died between
//     the broker's confirm and the close of the charge). Failing the task
//     would be wrong whenever the job did: a worker would run it for nothing
//     and report a result the failed record contradicts. So the job, kept
//     with the open charge, is published again (JobRepublisher), and the
//     charge is closed once the broker confirmed it. The job may run twice;
//     its task ends once and is charged once (transitions are guarded by
//     state). A charge opened by an eq-api older than schema version 7 has
//     no job kept: its task is failed and refunded (ChargeSettler), with a
//     reason that says the outcome is unknown.
// With the defaults a dead eq-api's charges are settled 10 to 15 s after its
// last heartbeat, well within the minute the issue asks for.
//
// ChargeSettler lives on the sender thread (dispatcher/sender.h) and borrows
// that thread's Store; the caller holds the dispatcher's write gate around
// step(). JobRepublisher is called on the consumer thread
// (dispatcher/dispatcher.h) and borrows that thread's Store and the write
// gate, which it takes itself. It publishes on a connection of its own,
// opened when there is something to publish: a publisher may be blocked by
// the broker (a resource alarm) or see its confirms time out, and neither
// may cost the consumer the connection it reads task events on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/amqp.h"
#include "store/store.h"

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

  // With a sink, log lines are handed to it instead of written: the owner
  // calls step() holding the dispatcher's write gate (dispatcher/db_writes.h)
  // and writes them once the gate is released, since a log write can block
  // (a stalled stderr pipe) and must never hold the gate the consumer thread
  // needs.
  void deferLogsTo(std::vector<std::function<void()>>* sink) { defer_ = sink; }

 private:
  Store& store_;
  SettlerOptions opts_;
  int64_t next_run_ms_ = 0;  // 0: at once (start-up)
  int64_t settled_total_ = 0;
  void emit(std::function<void()> line) {
    if (defer_ != nullptr) defer_->push_back(std::move(line));
    else line();
  }
  std::vector<std::function<void()>>* defer_ = nullptr;
};

class JobRepublisher {
 public:
  // A broker that refuses (nacks) the same job this many sweeps in a row is
  // not going to take it: its task is failed and refunded, as eq-api would
  // have done had its own publish been refused (settleUnpublishable).
  static constexpr int kMaxRefusals = 5;

  // internal_key: EQ_INTERNAL_KEY, which signs the jobs published again
  // as eq-api signed them (common/msg_auth.h).
  JobRepublisher(Store& store, std::string amqp_url, std::string internal_key,
                 SettlerOptions opts, std::mutex* db_writes = nullptr)
      : store_(store),
        amqp_url_(std::move(amqp_url)),
        internal_key_(std::move(internal_key)),
        opts_(opts),
        db_writes_(db_writes) {}

  // If a sweep is due and there are orphaned async charges whose task is
  // still queued: connects, claims them (Store::claimOrphanedJobs: one
  // dispatcher takes each), publishes each one's job again, and once the
  // broker has confirmed them settles those charges in one transaction;
  // hands back the claims on the rest. A job the broker refuses is counted
  // per dispatcher (so with N dispatchers it may be published up to
  // N x kMaxRefusals times before one gives up on it). Returns the number
  // settled. Never fails its caller: a broker it cannot reach or publish to
  // is tried again at a later sweep, after a wait that doubles (up to a
  // minute) while it keeps failing, and what was not settled stays open.
  int step(int64_t now_ms);
  int64_t settledTotal() const { return settled_total_; }

 private:
  // The publishing connection, opened (confirms enabled) when missing or
  // broken; false when the broker cannot be reached.
  bool connected();
  // Publishes the claimed jobs and settles what the broker confirmed (or
  // refused for good), removing those from `unsettled`; the number settled.
  int publishClaimed(const std::vector<OpenCharge>& claimed, int64_t now_ms,
                     std::set<std::string>& unsettled);
  // Ends this process's claim on the jobs it did not settle, so that the
  // next sweep (here or in another dispatcher) takes them again.
  void handBack(const std::set<std::string>& request_ids, int64_t lease_until_ms);
  void backOff(int64_t now_ms);

  Store& store_;
  std::string amqp_url_;
  std::string internal_key_;
  SettlerOptions opts_;
  std::mutex* db_writes_;  // optional, borrowed (dispatcher/db_writes.h)
  std::unique_ptr<amqp::Connection> conn_;
  std::size_t first_broker_ = 0;  // of a cluster's addresses (amqp::Connection::open)
  int64_t next_run_ms_ = 0;
  int64_t backoff_ms_ = 0;  // 0 while things work
  // Consecutive refusals per open charge (request id), in memory: after a
  // restart the count starts over, which only delays the give-up.
  std::unordered_map<std::string, int> refusals_;
  int64_t settled_total_ = 0;
};

}  // namespace eq::dispatch
