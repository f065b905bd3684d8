#include "workers/job_pool.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>

#include "common/log.h"
#include "common/timefmt.h"

namespace eq::worker {

FinishedJob runTimed(JobSlot slot, const std::function<JobOutcome(const msg::Job&)>& run) {
  FinishedJob done;
  done.started_ms = nowMs();
  auto started = std::chrono::steady_clock::now();
  JobOutcome outcome;
  try {
    outcome = run(slot.job);
  } catch (const std::exception& e) {
    // Engines report errors as values; an exception here is a resource
    // failure (std::async without threads, bad_alloc). It fails this job
    // instead of terminating the process with every other job in flight.
    log::error("job threw", {{"request_id", slot.job.request_id}, {"error", e.what()}});
    outcome.result = {false, "", 500, std::string("internal error: ") + e.what()};
  }
  done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  done.finished_ms = nowMs();
  done.result = std::move(outcome.result);
  done.tokens_used = outcome.tokens_used;
  done.slot = std::move(slot);
  return done;
}

JobPool::JobPool(int threads, RunFn run) : run_(std::move(run)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    log::error("eventfd failed");
    std::abort();  // no file descriptors at start-up: nothing sensible to do
  }
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

JobPool::~JobPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queued_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  ::close(wake_fd_);
}

void JobPool::submit(JobSlot slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(std::move(slot));
    ++outstanding_;
  }
  cv_.notify_one();
}

std::vector<FinishedJob> JobPool::takeFinished() {
  uint64_t ignored;
  ssize_t n = ::read(wake_fd_, &ignored, sizeof ignored);  // resets the eventfd
  (void)n;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FinishedJob> out;
  out.swap(finished_);
  outstanding_ -= out.size();
  return out;
}

std::vector<JobSlot> JobPool::takeQueued() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobSlot> out(std::make_move_iterator(queued_.begin()),
                           std::make_move_iterator(queued_.end()));
  queued_.clear();
  outstanding_ -= out.size();
  return out;
}

size_t JobPool::outstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  return outstanding_;
}

void JobPool::loop() {
  while (true) {
    JobSlot slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
      if (stopping_) return;
      slot = std::move(queued_.front());
      queued_.pop_front();
    }
    FinishedJob done = runTimed(std::move(slot), run_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_.push_back(std::move(done));
    }
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;  // only fails when the counter is saturated, which still wakes the reader
  }
}

}  // namespace eq::worker
