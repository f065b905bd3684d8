// The worker's job threads: run engine calls for the consumer thread, which
// alone talks to the broker (rabbitmq-c is single-threaded per connection).
//
// Ownership and threads: a JobPool belongs to one Worker and lives across
// broker reconnects, so a reconnect never waits for a slow LLM call. The
// consumer thread submits jobs and collects finished ones; the pool's
// threads only run `run` and never touch the connection. A finished job
// carries the generation of the connection it came on: one from a lost
// connection cannot be acked any more (delivery tags are per channel), so
// the worker drops it and the broker redelivers the job. wakeFd() becomes
// readable whenever finished jobs wait, so the consumer can poll it beside
// the broker socket. The destructor lets running jobs finish, drops queued
// ones (their deliveries go back to the queue with the connection) and joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/messages.h"

namespace eq::worker {

struct JobSlot {
  uint64_t generation = 0;  // which broker connection delivered it
  uint64_t tag = 0;         // its delivery tag on that connection
  std::string reply_to;     // sync jobs: where the caller waits (direct reply-to)
  msg::Job job;
};

// What running a job produced: the outcome to publish, and the engine's
// token count for metrics.
struct JobOutcome {
  msg::SyncResult result;
  int64_t tokens_used = 0;
};

struct FinishedJob {
  JobSlot slot;
  msg::SyncResult result;
  int64_t tokens_used = 0;
  int64_t started_ms = 0;   // unix ms, for the task event
  int64_t finished_ms = 0;
  double seconds = 0.0;     // engine time on a steady clock, sub-millisecond
};

// Runs one job and times it: the pool's threads and a worker that runs jobs
// inline (WorkerOptions::inline_jobs) finish jobs the same way.
FinishedJob runTimed(JobSlot slot, const std::function<JobOutcome(const msg::Job&)>& run);

class JobPool {
 public:
  using RunFn = std::function<JobOutcome(const msg::Job&)>;
  JobPool(int threads, RunFn run);
  ~JobPool();
  JobPool(const JobPool&) = delete;
  JobPool& operator=(const JobPool&) = delete;

  void submit(JobSlot slot);
  std::vector<FinishedJob> takeFinished();
  // Jobs submitted but not started yet, removed from the queue (stop).
  std::vector<JobSlot> takeQueued();
  // Jobs submitted whose outcome was not taken yet (queued, running or finished).
  size_t outstanding();
  int wakeFd() const { return wake_fd_; }

 private:
  void loop();

  RunFn run_;
  int wake_fd_ = -1;  // eventfd
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobSlot> queued_;
  std::vector<FinishedJob> finished_;
  size_t outstanding_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace eq::worker
