// DispatcherMetrics: what eq-dispatcher counts for /metrics (issue 6): task
// events consumed, webhook attempts and finished deliveries by outcome, their
// latency, attempts in flight, accounts waiting for their share of the
// slots, the retry queue depth, broker reconnects, and
// the broker and database state its /healthz reports.
//
// Built in main() on top of the process's Registry (borrowed; it must outlive
// this). Three threads report into it: the consumer (events, broker state),
// the sender (attempts, in flight) and the metrics server's thread, which
// refreshes the retry queue depth from SQLite (refreshPending) at a bounded
// rate. Every method is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/metrics.h"
#include "store/store.h"

namespace eq::dispatch {

class DispatcherMetrics {
 public:
  explicit DispatcherMetrics(metrics::Registry& r)
      : events_(r.counter("eq_dispatcher_task_events_total",
                          "Messages consumed, by type: task.running, task.succeeded, "
                          "task.failed, dead_letter (a job or event from eq.dead), malformed.",
                          {"type"})),
        attempts_(r.counter("eq_dispatcher_webhook_attempts_total",
                            "Webhook attempts, by outcome: delivered (2xx), retry (failed, "
                            "another attempt is scheduled), failed (failed, no attempt left).",
                            {"outcome"})),
        deliveries_(r.counter("eq_dispatcher_webhook_deliveries_total",
                              "Webhook deliveries finished, by outcome: delivered or failed.",
                              {"outcome"})),
        attempt_seconds_(r.histogram(
            "eq_dispatcher_webhook_attempt_duration_seconds",
            "One webhook attempt, from sending to the receiver's answer or the error, by outcome.",
            {"outcome"}, {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
        delivery_seconds_(
            r.histogram("eq_dispatcher_webhook_delivery_latency_seconds",
                        "From the task's final event (or the replay) to the receiver's 2xx, "
                        "retries included.",
                        {},
                        {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
                         14400, 57600})
                .get()),
        in_flight_(r.gauge("eq_dispatcher_webhook_in_flight",
                           "Webhook attempts running now in this process.")
                       .get()),
        accounts_waiting_(
            r.gauge("eq_dispatcher_webhook_accounts_waiting",
                    "Accounts whose due webhook deliveries the last scan of this process left "
                    "waiting because the account had its share of attempts in flight "
                    "(EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT).")
                .get()),
        pending_(r.gauge("eq_dispatcher_webhook_pending",
                         "Webhook deliveries pending in the database (waiting for an attempt or "
                         "a retry), counted every few seconds; every dispatcher sees the same "
                         "number.")
                     .get()),
        connected_(r.gauge("eq_dispatcher_broker_connected", "1 while the broker connection is up.")
                       .get()),
        reconnects_(r.counter("eq_dispatcher_broker_reconnects_total",
                              "Broker connections made after the first one (reconnects).")
                        .get()),
        refused_(r.counter("eq_dispatcher_messages_refused_total",
                           "Task events and dead letters refused (rejected unapplied) because "
                           "their x-eq-signature was missing (unsigned) or wrong "
                           "(bad_signature): not published by our processes with this "
                           "EQ_INTERNAL_KEY.",
                           {"reason"})),
        database_up_(r.gauge("eq_dispatcher_database_up",
                             "1 when the last read of the database (the pending count) "
                             "succeeded.")
                         .get()) {
    for (const char* t :
         {"task.running", "task.succeeded", "task.failed", "dead_letter", "malformed"}) {
      events_.with({t});
    }
    for (const char* o : {"delivered", "retry", "failed"}) {
      attempts_.with({o});
      attempt_seconds_.with({o});
    }
    for (const char* o : {"delivered", "failed"}) deliveries_.with({o});
    for (const char* reason : {"unsigned", "bad_signature"}) refused_.with({reason});
  }

  // Consumer thread.
  void eventConsumed(std::string_view type) { events_.with({std::string(type)}).inc(); }
  // A message whose signature did not verify (common/msg_auth.h).
  void messageRefused(std::string_view reason) { refused_.with({std::string(reason)}).inc(); }
  void brokerConnected() {
    if (ever_connected_.exchange(true)) reconnects_.inc();
    connected_.set(1);
    broker_up_.store(true);
  }
  void brokerLost() {
    connected_.set(0);
    broker_up_.store(false);
  }

  // Sender thread. `outcome` is the attempt's verdict (delivered, retry,
  // failed); `since_event_s` is the time from the task's final event (or its
  // replay) to now, given for delivered attempts.
  void attemptFinished(std::string_view outcome, double attempt_s,
                       std::optional<double> since_event_s) {
    std::string o(outcome);
    attempts_.with({o}).inc();
    attempt_seconds_.with({o}).observe(attempt_s);
    if (o != "retry") deliveries_.with({o}).inc();
    if (o == "delivered" && since_event_s) delivery_seconds_.observe(*since_event_s);
  }
  void setInFlight(size_t n) { in_flight_.set(static_cast<double>(n)); }
  void setAccountsWaiting(size_t n) { accounts_waiting_.set(static_cast<double>(n)); }

  // Metrics server thread: reads the retry queue depth with its own Store
  // connection; the result doubles as the database check of /healthz.
  void refreshPending(Store& store) {
    Result<int64_t> n = store.countPendingDeliveries();
    database_ok_.store(n.isOk());
    database_up_.set(n.isOk() && !storage_failing_.load() ? 1 : 0);
    if (n.isOk()) pending_.set(static_cast<double>(n.value()));
  }
  // Consumer thread: its task events cannot be written (disk full, I/O
  // error) and wait on the queue (Dispatcher::holdUntilWritable). Reads still
  // work then, so the read above cannot tell: the database is down for
  // /healthz and eq_dispatcher_database_up until a batch commits again.
  void setStorageFailing(bool failing) {
    storage_failing_.store(failing);
    if (failing) database_up_.set(0);
  }

  bool brokerUp() const { return broker_up_.load(); }
  bool databaseUp() const { return database_ok_.load() && !storage_failing_.load(); }

 private:
  metrics::Family<metrics::Counter>& events_;
  metrics::Family<metrics::Counter>& attempts_;
  metrics::Family<metrics::Counter>& deliveries_;
  metrics::Family<metrics::Histogram>& attempt_seconds_;
  metrics::Histogram& delivery_seconds_;
  metrics::Gauge& in_flight_;
  metrics::Gauge& accounts_waiting_;
  metrics::Gauge& pending_;
  metrics::Gauge& connected_;
  metrics::Counter& reconnects_;
  metrics::Family<metrics::Counter>& refused_;
  metrics::Gauge& database_up_;
  std::atomic<bool> ever_connected_{false};
  std::atomic<bool> broker_up_{false};
  std::atomic<bool> database_ok_{false};
  std::atomic<bool> storage_failing_{false};
};

}  // namespace eq::dispatch
