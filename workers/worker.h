// The worker's consumer loop: takes jobs from one mode's queue (and, when
// asked, the analyze queue), runs the engine, publishes the outcome, and
// acks the job only once the broker has confirmed that outcome (STYLE.md
// habit 7: ack after the outcome is durable). A worker killed mid-job
// leaves the job unacked, so the broker redelivers it; the dispatcher's task
// transitions are idempotent, so a repeated outcome is harmless.
//
// Pipelined (issue 10): the broker hands a worker up to `prefetch` jobs per
// queue, which is separate from how many run at once (`concurrency`).
// Outcomes are published without waiting for their confirms; the
// OutcomeLedger (workers/outcome_ledger.h) matches each confirm to the jobs
// it covers by publish sequence number, and the acks go out in batches
// (one multiple=true frame over contiguous tags). task.running is published
// the same way and never holds a job up. Only a confirm acks a job: a nack
// requeues it (basic.reject, requeue=true: the outcome is recomputed by
// whichever worker gets it next, and the quorum queue's delivery limit
// bounds how often), a confirm that does not come within 10 s or a lost
// connection drops the connection, so the broker redelivers every job whose
// outcome was not confirmed.
//
// Workers never open the database: everything a job needs is in the message.
//
// A Worker runs its consumer loop on the calling thread until `stop` becomes
// true (set from a signal handler) and owns its broker connection,
// reconnecting with common/reconnect.h's backoff. Jobs run on a JobPool of
// `concurrency` threads, so an llm worker keeps many model calls in flight
// while the consumer thread keeps servicing the connection (rabbitmq-c only
// sends heartbeats inside its own calls, so a job must never block that
// thread), or, for the built-in engine at concurrency 1, inline on the
// consumer thread (see WorkerOptions::inline_jobs). It borrows the engine,
// which must outlive it.
//
// Stopping: no new deliveries; pool jobs not started go back to the queue
// (inline jobs already delivered are simply run: microseconds each, and a
// requeue would spend one of their three deliveries); jobs running get up
// to `stop_grace_ms` to finish and have their outcome confirmed; whatever
// is still unacked then is redelivered by the broker.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/amqp.h"
#include "common/status.h"
#include "workers/engine/engine.h"
#include "workers/job_pool.h"
#include "workers/metrics.h"
#include "workers/outcome_ledger.h"

namespace eq::worker {

struct WorkerOptions {
  std::string amqp_url;
  // EQ_INTERNAL_KEY: jobs must carry its signature, and results and task
  // events are signed with it (common/msg_auth.h).
  std::string internal_key;
  std::string mode;      // fast | standard | perfect; empty: analyze only
  bool analyze = false;  // also consume the analyze queue
  int concurrency = 1;   // jobs running at once
  // Jobs the broker may hand over unacked, per consumed queue: the running
  // ones, the ones waiting for a free slot, and the ones whose outcome
  // waits for its confirm. See defaults::kWorkerPrefetch*.
  int prefetch = 1;
  // Run each job on the consumer thread instead of the pool: only for an
  // engine that answers in microseconds (builtin) with concurrency 1, where
  // a job can never hold up the connection's heartbeats, and where two
  // thread hand-offs per job would cost more than the job on 2 cores.
  bool inline_jobs = false;
  int64_t stop_grace_ms = 30'000;
  WorkerMetrics* metrics = nullptr;  // optional, borrowed: see workers/metrics.h
};

class Worker {
 public:
  Worker(const engine::Engine& engine, WorkerOptions opts, const std::atomic<bool>& stop)
      : engine_(engine), opts_(std::move(opts)), stop_(stop) {}

  // Returns the process exit code.
  int run();
  // Jobs still running after run() returned (their grace period ran out);
  // the caller exits without waiting for them, see main.cc.
  size_t jobsInHand() { return pool_.outstanding(); }

  // Exposed for tests: the JSON a job produces (reply data or analysis).
  static std::string replyDataJson(const engine::ReplyOutput& out, const std::string& request_id,
                                   const std::string& mode);
  static std::string analysisJson(const engine::Analysis& a);

 private:
  Status serve(amqp::Connection& conn);
  // After serve() returned: what the lost connection leaves (its queued
  // jobs dropped, the log line).
  void connectionLost(const Status& s);
  // Reads what the broker sent (waiting up to wait_ms for it or for a
  // finished job) and starts the jobs among it.
  Status pump(amqp::Connection& conn, int wait_ms);
  Status accept(amqp::Connection& conn, const amqp::Delivery& d);
  // Publishes the outcome of every finished pool job (acked later, once
  // confirmed).
  Status publishFinished(amqp::Connection& conn);
  Status publishOutcome(amqp::Connection& conn, const FinishedJob& done);
  Status onConfirm(amqp::Connection& conn, const amqp::Confirm& c);
  // Sends the acks the ledger has ready and counts those jobs as finished.
  Status flushAcks(amqp::Connection& conn);
  // Fails the connection if a publish has waited for its confirm too long.
  Status checkConfirmTimeout() const;

  // What to count for a job once it is acked.
  struct Finished {
    std::string mode;
    std::string kind;
    std::string_view outcome;
    double seconds = -1;
    int64_t tokens = 0;
  };
  // Hands a redelivered sync job on to the quorum queue of its kind.
  Status moveToCountingQueue(amqp::Connection& conn, const amqp::Delivery& d,
                             const msg::Job& job, int64_t now);
  // Runs on a job thread.
  JobOutcome runJob(const msg::Job& job) const;

  const engine::Engine& engine_;
  WorkerOptions opts_;
  const std::atomic<bool>& stop_;
  uint64_t generation_ = 0;  // of the current broker connection
  bool stopping_ = false;    // draining: deliveries are handed back, not started
  // Of the current connection (reset on reconnect): what may be acked, and
  // what to count for each job once it is.
  OutcomeLedger ledger_;
  std::unordered_map<uint64_t, Finished> finished_;
  JobPool pool_{opts_.concurrency, [this](const msg::Job& job) { return runJob(job); }};
};

}  // namespace eq::worker
