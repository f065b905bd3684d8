// WorkerMetrics: what eq-worker counts for /metrics (issue 6), in one place so
// the worker loop only reports events at a few named points: a job finished
// (mode, kind, outcome, duration, tokens), the broker connected or was lost.
//
// Built in main() on top of the process's Registry, which it borrows and
// which must outlive it; the Worker borrows it through WorkerOptions. Every
// method is thread-safe (the registry's cells are atomics or locked), so a
// worker that runs several jobs at once may report from any thread; /metrics
// is rendered on the metrics server's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/metrics.h"

namespace eq::worker {

// Job outcomes, the values of the `outcome` label.
inline constexpr std::string_view kJobSucceeded = "succeeded";  // engine answered
inline constexpr std::string_view kJobFailed = "failed";        // engine error: 500 / task.failed
inline constexpr std::string_view kJobExpired = "expired";      // sync caller gave up first
inline constexpr std::string_view kJobMalformed = "malformed";  // dead-lettered unread
// A redelivered sync job handed on to the counting quorum queue; it is
// counted again by the worker that finishes it there.
inline constexpr std::string_view kJobMoved = "moved";

class WorkerMetrics {
 public:
  explicit WorkerMetrics(metrics::Registry& r)
      : jobs_(r.counter("eq_worker_jobs_total",
                        "Jobs taken from the broker, by mode, kind (reply or analyze) and "
                        "outcome (succeeded, failed, expired, malformed, moved).",
                        {"mode", "kind", "outcome"})),
        duration_(r.histogram(
            "eq_worker_job_duration_seconds",
            "Engine time of a job, from start to the outcome, by mode.", {"mode"},
            {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300})),
        tokens_(r.counter("eq_worker_engine_tokens_total",
                          "Tokens the engine reported for successful reply jobs, by mode.",
                          {"mode"})),
        connected_(
            r.gauge("eq_worker_broker_connected", "1 while the broker connection is up.").get()),
        reconnects_(r.counter("eq_worker_broker_reconnects_total",
                              "Broker connections made after the first one (reconnects).")
                        .get()),
        refused_(r.counter("eq_worker_messages_refused_total",
                           "Jobs refused and dead-lettered unrun because their x-eq-signature "
                           "was missing (unsigned) or wrong (bad_signature): not published by "
                           "eq-api or eq-dispatcher with this EQ_INTERNAL_KEY.",
                           {"reason"})) {
    for (const char* reason : {"unsigned", "bad_signature"}) refused_.with({reason});
  }

  // Creates the series a worker of this mode will report, at zero, so rates
  // and dashboards see them before the first job.
  void expect(const std::string& mode, bool analyze) {
    for (std::string_view o : {kJobSucceeded, kJobFailed, kJobExpired}) {
      if (!mode.empty()) jobs_.with({mode, "reply", std::string(o)});
      if (analyze) jobs_.with({"analyze", "analyze", std::string(o)});
    }
    if (!mode.empty()) {
      duration_.with({mode});
      tokens_.with({mode});
    }
    if (analyze) duration_.with({"analyze"});
  }

  // A job is done. `mode` is the job's mode ("analyze" for analyze jobs);
  // `seconds` < 0 when the engine never ran (expired, malformed).
  void jobFinished(const std::string& mode, const std::string& kind, std::string_view outcome,
                   double seconds, int64_t tokens) {
    std::string m = mode.empty() ? std::string("analyze") : mode;
    jobs_.with({m, kind.empty() ? std::string("unknown") : kind, std::string(outcome)}).inc();
    if (seconds >= 0) duration_.with({m}).observe(seconds);
    if (tokens > 0) tokens_.with({m}).inc(static_cast<double>(tokens));
  }

  // A job whose signature did not verify (common/msg_auth.h).
  void messageRefused(std::string_view reason) { refused_.with({std::string(reason)}).inc(); }

  void brokerConnected() {
    if (ever_connected_.exchange(true)) reconnects_.inc();
    connected_.set(1);
    up_.store(true);
  }
  void brokerLost() {
    connected_.set(0);
    up_.store(false);
  }
  bool brokerUp() const { return up_.load(); }

 private:
  metrics::Family<metrics::Counter>& jobs_;
  metrics::Family<metrics::Histogram>& duration_;
  metrics::Family<metrics::Counter>& tokens_;
  metrics::Gauge& connected_;
  metrics::Counter& reconnects_;
  metrics::Family<metrics::Counter>& refused_;
  std::atomic<bool> ever_connected_{false};
  std::atomic<bool> up_{false};
};

}  // namespace eq::worker
