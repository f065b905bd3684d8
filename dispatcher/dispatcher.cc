#include "dispatcher/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/defaults.h"
#include "common/log.h"
#include "common/reconnect.h"
#include "common/timefmt.h"
#include "dispatcher/db_writes.h"

namespace eq::dispatch {
namespace {

constexpr uint16_t kPrefetch = 16;

}  // namespace

int Dispatcher::run() {
  // Task state waits for the dispatcher to reconnect (webhooks already
  // pending do not: the sender thread goes on); see common/reconnect.h.
  ReconnectBackoff backoff;
  while (!stop_.load()) {
    Result<std::unique_ptr<amqp::Connection>> c =
        amqp::Connection::open(amqp_url_, "eq-dispatcher", defaults::kAmqpHeartbeatSeconds);
    if (!c.isOk()) {
      log::warn("broker connect failed; retrying", {{"error", c.status().msg()}});
      backoff.sleep(stop_);
      continue;
    }
    backoff.reset();
    Status s = serve(*c.value());
    if (metrics_ != nullptr) metrics_->brokerLost();
    if (!s.isOk()) log::warn("broker connection lost; reconnecting", {{"error", s.msg()}});
  }
  log::info("dispatcher stopped");
  return 0;
}

Status Dispatcher::serve(amqp::Connection& conn) {
  if (Status s = conn.declareTopology(); !s.isOk()) return s;
  if (Status s = conn.qos(kPrefetch); !s.isOk()) return s;
  if (Status s = conn.consume(msg::kQueueTaskEvents); !s.isOk()) return s;
  if (Status s = conn.consume(msg::kQueueDead); !s.isOk()) return s;
  log::info("dispatcher consuming");
  if (metrics_ != nullptr) metrics_->brokerConnected();
  while (!stop_.load()) {
    Result<amqp::Event> ev = conn.next(1000);
    if (!ev.isOk()) return ev.status();
    auto* d = std::get_if<amqp::Delivery>(&ev.value());
    if (d == nullptr) continue;
    if (d->queue_hint != msg::kQueueTaskEvents) {
      // Dead-lettered messages keep their original routing key, so anything
      // not routed as a task event came through eq.dlx.
      Status applied = [&] {
        std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
        return applyDeadLetter(*d);
      }();
      if (Status s = applied; !s.isOk()) {
        log::error("dead letter not applied; requeued", {{"error", s.msg()}});
        if (Status r = conn.reject(d->tag, true); !r.isOk()) return r;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
      if (Status a = conn.ack(d->tag); !a.isOk()) return a;
      if (metrics_ != nullptr) metrics_->eventConsumed("dead_letter");
      continue;
    }
    Result<msg::TaskEvent> e = msg::decodeTaskEvent(d->body);
    if (!e.isOk()) {
      log::error("malformed task event dropped", {{"error", e.status().msg()}});
      if (Status r = conn.reject(d->tag, false); !r.isOk()) return r;
      if (metrics_ != nullptr) metrics_->eventConsumed("malformed");
      continue;
    }
    Status applied = [&] {
      std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
      return apply(e.value());
    }();
    if (Status s = applied; !s.isOk()) {
      // The database is unavailable: put the event back and retry later.
      log::error("task event not applied; requeued",
                 {{"task_id", e.value().task_id}, {"error", s.msg()}});
      if (Status r = conn.reject(d->tag, true); !r.isOk()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (Status a = conn.ack(d->tag); !a.isOk()) return a;
    if (metrics_ != nullptr) metrics_->eventConsumed(e.value().event);
  }
  return Status::ok();
}

Status Dispatcher::apply(const msg::TaskEvent& e) {
  int64_t at = e.at_ms > 0 ? e.at_ms : nowMs();
  Result<bool> changed = false;
  if (e.event == "task.running") {
    changed = store_.markTaskRunning(e.task_id, at);
  } else if (e.event == "task.succeeded") {
    changed = store_.markTaskSucceeded(e.task_id, e.result_json, at);
  } else {
    changed = store_.markTaskFailed(e.task_id, e.error_code > 0 ? e.error_code : 500,
                                    e.error_msg.empty() ? "generation failed" : e.error_msg, at);
  }
  if (!changed.isOk()) return changed.status();
  log::info("task transition", {{"task_id", e.task_id},
                                {"event", e.event},
                                {"applied", static_cast<long long>(changed.value())}});
  if (e.event == "task.running") return Status::ok();
  return createDeliveryIfFinal(e.task_id);
}

Status Dispatcher::applyDeadLetter(const amqp::Delivery& d) {
  Result<msg::Job> job = msg::decodeJob(d.body);
  std::string task_id;
  std::string why = "task failed: workers could not process it";
  if (job.isOk()) {
    task_id = job.value().task_id;
  } else {
    // A job no worker could read (workers dead-letter those at once) still
    // names its task: fail it, so its unit is refunded and its webhook sent.
    task_id = msg::salvageTaskId(d.body);
    why = "task failed: the job could not be read";
  }
  if (task_id.empty()) {
    // A sync job: its caller had a 504 (or a result) long ago.
    log::warn("dead letter dropped", {{"reason", d.death_reason},
                                      {"queue", d.queue_hint},
                                      {"decoded", static_cast<long long>(job.isOk())}});
    return Status::ok();
  }
  log::error("task failed after repeated delivery failures",
             {{"task_id", task_id}, {"reason", d.death_reason}});
  Result<bool> changed = store_.markTaskFailed(task_id, 500, why, nowMs());
  if (!changed.isOk()) return changed.status();
  return createDeliveryIfFinal(task_id);
}

Status Dispatcher::createDeliveryIfFinal(const std::string& task_id) {
  Result<std::optional<TaskRecord>> t = store_.task(task_id);
  if (!t.isOk()) return t.status();
  if (!t.value()) {
    log::warn("event for unknown task", {{"task_id", task_id}});
    return Status::ok();
  }
  const TaskRecord& task = *t.value();
  if (task.webhook_url.empty() || (task.status != "succeeded" && task.status != "failed")) {
    return Status::ok();
  }
  std::string event = task.status == "succeeded" ? "task.succeeded" : "task.failed";
  Result<DeliveryRecord> d = store_.createDelivery(task_id, task.webhook_url, event, nowMs());
  if (!d.isOk()) return d.status();
  if (d.value().status == "pending" && d.value().attempts == 0) {
    log::info("webhook delivery created",
              {{"task_id", task_id}, {"delivery_id", d.value().delivery_id}, {"event", event}});
  }
  if (on_delivery_due_) on_delivery_due_();
  return Status::ok();
}

}  // namespace eq::dispatch
