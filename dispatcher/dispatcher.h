// The dispatcher's consumer loop: reads task events (and dead-lettered jobs),
// records each task transition in SQLite, and delivers the signed webhook
// when a task reaches a final state.
//
// The event is acked only after its transition is committed and its webhook
// attempt is recorded, so a dispatcher killed at any point leaves the event
// to be redelivered; transitions are guarded by the current state, so a
// repeated event changes nothing and only completes what was left undone.
//
// Runs on the calling thread until `stop` becomes true. Borrows the Store
// and the WebhookSender, which must outlive it; owns its broker connection.
#pragma once

#include <atomic>
#include <string>

#include "common/amqp.h"
#include "common/messages.h"
#include "common/store.h"
#include "dispatcher/webhook.h"

namespace eq::dispatch {

class Dispatcher {
 public:
  Dispatcher(Store& store, WebhookSender& sender, std::string amqp_url,
             const std::atomic<bool>& stop)
      : store_(store), sender_(sender), amqp_url_(std::move(amqp_url)), stop_(stop) {}

  int run();

  // Applies one event to the store and delivers its webhook if it is final.
  // Exposed for tests; returns non-ok only for failures worth a redelivery.
  Status apply(const msg::TaskEvent& e);
  // A dead-lettered message: an async job that exhausted its deliveries
  // fails its task (code 500, quota refunded); anything else is dropped.
  Status applyDeadLetter(const amqp::Delivery& d);

 private:
  Status serve(amqp::Connection& conn);
  Status deliverIfDue(const std::string& task_id);

  Store& store_;
  WebhookSender& sender_;
  std::string amqp_url_;
  const std::atomic<bool>& stop_;
};

}  // namespace eq::dispatch
