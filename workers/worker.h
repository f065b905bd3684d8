// The worker's consumer loop: takes jobs from one mode's queue (and, when
// asked, the analyze queue), runs the engine, publishes the outcome, and only
// then acknowledges the job (STYLE.md habit 7: ack after the outcome is
// durable). A worker killed mid-job leaves the job unacked, so the broker
// redelivers it; the dispatcher's task transitions are idempotent, so a
// repeated outcome is harmless.
//
// Workers never open the database: everything a job needs is in the message.
//
// A Worker runs on the calling thread until `stop` becomes true (set from a
// signal handler) and owns its broker connection, reconnecting with capped
// exponential backoff. It borrows the engine, which must outlive it.
#pragma once

#include <atomic>
#include <string>

#include "common/amqp.h"
#include "common/status.h"
#include "workers/engine/engine.h"
#include "workers/metrics.h"

namespace eq::worker {

struct WorkerOptions {
  std::string amqp_url;
  std::string mode;      // fast | standard | perfect; empty: analyze only
  bool analyze = false;  // also consume the analyze queue
  WorkerMetrics* metrics = nullptr;  // optional, borrowed: see workers/metrics.h
};

class Worker {
 public:
  Worker(const engine::Engine& engine, WorkerOptions opts, const std::atomic<bool>& stop)
      : engine_(engine), opts_(std::move(opts)), stop_(stop) {}

  // Returns the process exit code.
  int run();

  // Exposed for tests: the JSON a job produces (reply data or analysis).
  static std::string replyDataJson(const engine::ReplyOutput& out, const std::string& request_id,
                                   const std::string& mode);
  static std::string analysisJson(const engine::Analysis& a);

 private:
  Status serve(amqp::Connection& conn);
  Status handle(amqp::Connection& conn, const amqp::Delivery& d);

  const engine::Engine& engine_;
  WorkerOptions opts_;
  const std::atomic<bool>& stop_;
};

}  // namespace eq::worker
