// The dispatcher's consumer: reads task events (and dead-lettered jobs),
// records each task transition in SQLite and, when a task reaches a final
// state and has a webhook URL, inserts its pending delivery, due now. It does
// no HTTP: the sender (dispatcher/sender.h), on its own thread, sends due
// deliveries and retries them; `on_delivery_due` tells it to look at once.
//
// The event is acked only after its transition and its pending delivery are
// committed, so a dispatcher killed at any point leaves the event to be
// redelivered; transitions are guarded by the current state and a task has at
// most one delivery, so a repeated event changes nothing and only completes
// what was left undone.
//
// Runs on the calling thread until `stop` becomes true. Borrows the Store
// (this thread's own connection), which must outlive it, and the write gate
// it shares with the sender (dispatcher/db_writes.h); owns its broker
// connection.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "common/amqp.h"
#include "common/messages.h"
#include "common/store.h"
#include "dispatcher/metrics.h"

namespace eq::dispatch {

class Dispatcher {
 public:
  Dispatcher(Store& store, std::string amqp_url, const std::atomic<bool>& stop,
             std::function<void()> on_delivery_due = {}, DispatcherMetrics* metrics = nullptr,
             std::mutex* db_writes = nullptr)
      : store_(store),
        amqp_url_(std::move(amqp_url)),
        stop_(stop),
        on_delivery_due_(std::move(on_delivery_due)),
        metrics_(metrics),
        db_writes_(db_writes) {}

  int run();

  // Applies one event to the store and creates its delivery if it is final.
  // Exposed for tests; returns non-ok only for failures worth a redelivery.
  Status apply(const msg::TaskEvent& e);
  // A dead-lettered message: an async job that exhausted its deliveries
  // fails its task (code 500, quota refunded); anything else is dropped.
  Status applyDeadLetter(const amqp::Delivery& d);

 private:
  Status serve(amqp::Connection& conn);
  Status createDeliveryIfFinal(const std::string& task_id);

  Store& store_;
  std::string amqp_url_;
  const std::atomic<bool>& stop_;
  std::function<void()> on_delivery_due_;
  DispatcherMetrics* metrics_;  // optional, borrowed
  std::mutex* db_writes_;       // optional, borrowed (dispatcher/db_writes.h)
};

}  // namespace eq::dispatch
