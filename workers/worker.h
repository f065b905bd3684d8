// The worker's consumer loop: takes jobs from one mode's queue (and, when
// asked, the analyze queue), runs the engine, publishes the outcome, and only
// then acknowledges the job (STYLE.md habit 7: ack after the outcome is
// durable). A worker killed mid-job leaves the job unacked, so the broker
// redelivers it; the dispatcher's task transitions are idempotent, so a
// repeated outcome is harmless.
//
// Workers never open the database: everything a job needs is in the message.
//
// A Worker runs its consumer loop on the calling thread until `stop` becomes
// true (set from a signal handler) and owns its broker connection,
// reconnecting with capped exponential backoff. Jobs run on a JobPool of
// `concurrency` threads, and the broker's prefetch equals that concurrency,
// so an llm worker keeps many model calls in flight while the consumer
// thread keeps servicing the connection (rabbitmq-c only sends heartbeats
// inside its own calls, so a job must never block that thread). It borrows
// the engine, which must outlive it.
//
// Stopping: no new deliveries; jobs not started go back to the queue; jobs
// running get up to `stop_grace_ms` to finish and publish their outcome;
// whatever still runs then is left unacked, so the broker redelivers it.
#pragma once

#include <atomic>
#include <string>

#include "common/amqp.h"
#include "common/status.h"
#include "workers/engine/engine.h"
#include "workers/job_pool.h"
#include "workers/metrics.h"

namespace eq::worker {

struct WorkerOptions {
  std::string amqp_url;
  std::string mode;      // fast | standard | perfect; empty: analyze only
  bool analyze = false;  // also consume the analyze queue
  int concurrency = 1;   // jobs at once, and the broker prefetch
  // Run each job on the consumer thread instead of the pool: only for an
  // engine that answers in microseconds (builtin) with concurrency 1, where
  // a job can never hold up the connection's heartbeats.
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
  // Reads what the broker sent (waiting up to wait_ms for it or for a
  // finished job) and starts the jobs among it.
  Status pump(amqp::Connection& conn, int wait_ms);
  Status accept(amqp::Connection& conn, const amqp::Delivery& d);
  // Publishes the outcome of every finished job and acks it.
  Status publishFinished(amqp::Connection& conn);
  Status publishOutcome(amqp::Connection& conn, const FinishedJob& done);
  // Runs on a job thread.
  JobOutcome runJob(const msg::Job& job) const;

  const engine::Engine& engine_;
  WorkerOptions opts_;
  const std::atomic<bool>& stop_;
  uint64_t generation_ = 0;  // of the current broker connection
  bool stopping_ = false;    // draining: deliveries are handed back, not started
  JobPool pool_{opts_.concurrency, [this](const msg::Job& job) { return runJob(job); }};
};

}  // namespace eq::worker
