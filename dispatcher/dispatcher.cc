#include "dispatcher/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/defaults.h"
#include "common/log.h"
#include "common/msg_auth.h"
#include "common/timefmt.h"
#include "dispatcher/db_writes.h"

namespace eq::dispatch {
namespace {

// Events applied per transaction at most (one read batch), and the broker's
// window: larger than a batch, so that while one batch is being committed
// the broker goes on sending the next one instead of waiting for its ack.
// A second dispatcher gets its own window.
constexpr size_t kBatchMax = 256;
constexpr uint16_t kPrefetch = 1024;

}  // namespace

int Dispatcher::run() {
  // Task state waits for the dispatcher to reconnect (webhooks already
  // pending do not: the sender thread goes on); see common/reconnect.h.
  amqp::serveUntilStopped(
      amqp_url_, "eq-dispatcher", stop_, [this](amqp::Connection& conn) { return serve(conn); },
      [this](const Status& s) {
        held_.clear();  // deliveries of the closed channel: the broker requeued them
        if (metrics_ != nullptr) metrics_->brokerLost();
        if (!s.isOk()) log::warn("broker connection lost; reconnecting", {{"error", s.msg()}});
      });
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
  std::vector<amqp::Delivery> batch;
  batch.reserve(kBatchMax);
  while (!stop_.load()) {
    // Wait for one delivery, then take whatever else the broker has already
    // sent (up to kBatchMax) without waiting: under load a batch is the
    // whole prefetch window, when idle it is the single event, so batching
    // adds no latency.
    batch.clear();
    if (republisher_ != nullptr) {
      // Due every couple of seconds; next() below returns at least once a
      // second, so an idle dispatcher gets here too.
      republisher_->step(nowMs());
    }
    Result<amqp::Event> ev = next(conn, 1000);
    if (!ev.isOk()) return ev.status();
    if (auto* d = std::get_if<amqp::Delivery>(&ev.value())) batch.push_back(std::move(*d));
    if (batch.empty()) continue;
    while (batch.size() < kBatchMax) {
      Result<amqp::Event> more = next(conn, 0);
      if (!more.isOk()) return more.status();
      if (std::holds_alternative<amqp::Timeout>(more.value())) break;
      if (auto* d = std::get_if<amqp::Delivery>(&more.value())) batch.push_back(std::move(*d));
    }
    if (Status s = applyBatch(conn, batch); !s.isOk()) return s;
  }
  return Status::ok();
}

Status Dispatcher::applyBatch(amqp::Connection& conn, std::vector<amqp::Delivery>& batch) {
  // Decode first: a malformed event is dead-lettered on its own and takes
  // no part in the transaction.
  std::vector<BatchItem> items;
  items.reserve(batch.size());
  for (const amqp::Delivery& d : batch) {
    Result<bool> genuine = authentic(conn, d);
    if (!genuine.isOk()) return genuine.status();
    if (!genuine.value()) continue;
    if (d.queue_hint != msg::kQueueTaskEvents) {
      // Dead-lettered messages keep their original routing key, so anything
      // not routed as a task event came through eq.dlx.
      items.push_back(BatchItem{&d, std::nullopt});
      continue;
    }
    Result<msg::TaskEvent> e = msg::decodeTaskEvent(d.body);
    if (!e.isOk()) {
      log::error("malformed task event dropped", {{"error", e.status().msg()}});
      if (Status r = conn.reject(d.tag, false); !r.isOk()) return r;
      if (metrics_ != nullptr) metrics_->eventConsumed("malformed");
      continue;
    }
    items.push_back(BatchItem{&d, std::move(e).value()});
  }
  if (items.empty()) return Status::ok();

  Status applied = applyTogether(items);
  if (!applied.isOk() && store_.storageFailing()) {
    // An error here is the connection's: the broker requeues the batch.
    if (Status s = holdUntilWritable(conn, items, applied); !s.isOk()) return s;
    if (stop_.load() && !applied.isOk()) return Status::ok();  // likewise, at close
  }
  if (!applied.isOk()) {
    // One event may be at fault rather than the database: apply them one
    // at a time, so that only the failing ones are requeued (as with one
    // event per transaction) and the others are not held up by them.
    log::warn("task event batch not applied; applying one by one",
              {{"events", static_cast<long long>(items.size())}, {"error", applied.msg()}});
    bool requeued = false;
    for (const BatchItem& item : items) {
      const amqp::Delivery* d = item.delivery;
      const std::optional<msg::TaskEvent>& e = item.event;
      Status one = [&] {
        std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
        return e ? apply(*e) : applyDeadLetter(*d);
      }();
      if (!one.isOk()) {
        // The database is unavailable: put the event back and retry later.
        log::error("task event not applied; requeued",
                   {{"task_id", e ? e->task_id : std::string()}, {"error", one.msg()}});
        if (Status r = conn.reject(d->tag, true); !r.isOk()) return r;
        requeued = true;
        continue;
      }
      if (Status a = conn.ack(d->tag); !a.isOk()) return a;
      if (metrics_ != nullptr) metrics_->eventConsumed(e ? e->event : "dead_letter");
    }
    if (requeued) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return Status::ok();
  }
  // Acked only now that the batch is committed. Deliveries are numbered in
  // order on the channel and everything before this batch is settled, so one
  // multiple ack of the last tag covers exactly this batch.
  uint64_t last = 0;
  for (const BatchItem& item : items) last = std::max(last, item.delivery->tag);
  if (Status a = conn.ack(last, true); !a.isOk()) return a;
  if (metrics_ != nullptr) {
    for (const BatchItem& item : items) {
      metrics_->eventConsumed(item.event ? item.event->event : "dead_letter");
    }
  }
  return Status::ok();
}

Status Dispatcher::holdUntilWritable(amqp::Connection& conn, const std::vector<BatchItem>& items,
                                     Status& applied) {
  // The database cannot write (disk full, I/O error): no event of the batch
  // is at fault and none would apply alone. The batch is neither acked nor
  // requeued: eq.task-events is a quorum queue with a delivery limit
  // (common/amqp.cc), so requeueing it every second would dead-letter its
  // events after a few tries. It stays unacked, delivered once, and is
  // tried again every kStorageRetryMs; deliveries that arrive meanwhile
  // (the prefetch window) wait in held_, in order, and the connection's
  // heartbeats go on. Should this process stop or lose its connection
  // meanwhile, the broker requeues the batch, as for any unacked delivery.
  // Logged once per outage.
  log::error("the database cannot write (disk full or I/O error): task events stay on the "
             "queue, unacked, until it can",
             {{"events", static_cast<long long>(items.size())}, {"error", applied.msg()}});
  if (metrics_ != nullptr) metrics_->setStorageFailing(true);
  while (!stop_.load()) {
    int64_t until = nowMs() + kStorageRetryMs;
    for (int64_t left = kStorageRetryMs; left > 0 && !stop_.load(); left = until - nowMs()) {
      Result<amqp::Event> ev = conn.next(static_cast<int>(std::min<int64_t>(left, 100)));
      if (!ev.isOk()) return ev.status();
      if (auto* d = std::get_if<amqp::Delivery>(&ev.value())) held_.push_back(std::move(*d));
    }
    if (stop_.load()) break;
    applied = applyTogether(items);
    if (applied.isOk() || !store_.storageFailing()) break;
  }
  if (metrics_ != nullptr) metrics_->setStorageFailing(false);
  if (applied.isOk()) {
    log::info("the database writes again: held task events applied",
              {{"events", static_cast<long long>(items.size())}});
  }
  return Status::ok();
}

Result<amqp::Event> Dispatcher::next(amqp::Connection& conn, int timeout_ms) {
  if (held_.empty()) return conn.next(timeout_ms);
  amqp::Event ev = std::move(held_.front());
  held_.pop_front();
  return ev;
}

Result<bool> Dispatcher::authentic(amqp::Connection& conn, const amqp::Delivery& d) {
  // Task events are signed by the worker that made them; everything else
  // here is a dead letter, a job as eq-api or the republisher signed it
  // (dead-lettering keeps a message's headers and routing key). Unsigned,
  // both could fail or complete any task and send its webhook signed with
  // the customer's secret: that is what whoever reaches the broker with a
  // publishing user must not be able to do (docs/architecture.md,
  // "Message authentication").
  bool event = d.queue_hint == msg::kQueueTaskEvents;
  msg::Verdict verdict =
      msg::verifyMessage(internal_key_, event ? msg::SignedKind::kTaskEvent : msg::SignedKind::kJob,
                         "", d.body, d.signature);
  if (verdict == msg::Verdict::kValid) return true;
  // Rejected without requeue, like a malformed event: from eq.task-events
  // it goes to eq.dead (an operator can still see it there with the
  // management UI while no dispatcher runs) and comes back here once more,
  // to be dropped; from eq.dead, which has no dead-letter exchange, it is
  // dropped. Counted and logged once, on its first pass: a message that
  // already went through eq.dlx says so in x-first-death-reason.
  if (Status r = conn.reject(d.tag, false); !r.isOk()) return r;
  if (d.death_reason.empty()) {
    log::error("message refused: signature does not verify",
               {{"reason", msg::verdictName(verdict)},
                {"queue", d.queue_hint},
                {"task_id", msg::salvageTaskId(d.body)}});
    if (metrics_ != nullptr) metrics_->messageRefused(msg::verdictName(verdict));
  }
  return false;
}

Status Dispatcher::applyTogether(const std::vector<BatchItem>& items) {
  // Every event of the batch in one write transaction: one commit (one WAL
  // append, one round of SQLite's file locks) instead of one per event,
  // which is what bounded the webhook pace (docs/benchmarks.md). Each
  // apply() is idempotent, so redelivering the whole batch after a failure
  // is harmless. The sender is woken once, after the commit, not by each
  // insert (it would only wait on the write gate for rows it cannot see).
  in_batch_ = true;
  due_in_batch_ = false;
  batch_secrets_.clear();
  Status applied = [&] {
    std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
    store::Transaction tx = store_.transaction();
    if (!tx.status().isOk()) return tx.status();
    lockAccountsOf(items);
    for (const BatchItem& item : items) {
      Status s = item.event ? apply(*item.event) : applyDeadLetter(*item.delivery);
      if (!s.isOk()) return s;  // rolled back by tx
    }
    return tx.commit();
  }();
  in_batch_ = false;
  endHandOver(applied.isOk());
  // Logged after the commit and outside the gate: a log write that blocks
  // (a stalled stderr pipe) must not hold SQLite's write lock, which eq-api
  // needs for every request. A failed batch logs nothing: it is applied
  // again one event at a time, and those log as they go.
  std::vector<std::function<void()>> logs;
  logs.swap(deferred_logs_);
  if (applied.isOk()) {
    for (auto& f : logs) f();
  }
  if (applied.isOk() && due_in_batch_ && on_delivery_due_) on_delivery_due_();
  return applied;
}

void Dispatcher::lockAccountsOf(const std::vector<BatchItem>& items) {
  // The accounts whose quota (a failed task's refund) and usage rows (a
  // finished task's tokens) the batch writes, locked first in the order
  // eq-api's batches lock them (Store::lockAccounts): without it, a batch
  // here and one there that share two accounts could each hold one's rows
  // and wait for the other's until a lock timeout. A dead letter's task is
  // read leniently; a missed one only writes without the lock.
  std::vector<std::string> task_ids;
  for (const BatchItem& item : items) {
    std::string id;
    if (!item.event) {
      id = msg::salvageTaskId(item.delivery->body);
    } else if (item.event->event != "task.running") {
      id = item.event->task_id;
    }
    if (!id.empty()) task_ids.push_back(std::move(id));
  }
  if (Status locked = store_.lockTaskAccounts(task_ids); !locked.isOk()) {
    logLater([error = locked.msg()] {
      log::warn("task events: account locks not taken; the batch goes on without them",
                {{"error", error}});
    });
  }
}

void Dispatcher::logLater(std::function<void()> line) {
  if (in_batch_) {
    deferred_logs_.push_back(std::move(line));
  } else {
    line();
  }
}

Status Dispatcher::apply(const msg::TaskEvent& e) {
  int64_t at = e.at_ms > 0 ? e.at_ms : nowMs();
  if (e.event == "task.running" && in_batch_) {
    // Nothing here waits for it: queued, it goes to the database with the
    // batch's next statement (one round trip fewer a task on PostgreSQL),
    // and whether it applied is not known.
    if (Status s = store_.queueTaskRunning(e.task_id, at); !s.isOk()) return s;
    logLater([id = e.task_id, event = e.event] {
      log::info("task transition", {{"task_id", id}, {"event", event}});
    });
    return Status::ok();
  }
  Result<bool> changed = false;
  std::optional<TaskRecord> task;  // as it now is, when the transition says
  if (e.event == "task.running") {
    changed = store_.markTaskRunning(e.task_id, at);
  } else if (e.event == "task.succeeded") {
    TaskRecord after;
    changed = store_.markTaskSucceeded(e.task_id, e.result_json, at, &after);
    if (changed.isOk() && changed.value()) task = std::move(after);
  } else {
    changed = store_.markTaskFailed(e.task_id, e.error_code > 0 ? e.error_code : 500,
                                    e.error_msg.empty() ? "generation failed" : e.error_msg, at);
  }
  if (!changed.isOk()) return changed.status();
  logLater([id = e.task_id, event = e.event, applied = changed.value()] {
    log::info("task transition",
              {{"task_id", id}, {"event", event}, {"applied", static_cast<long long>(applied)}});
  });
  if (e.event == "task.running") return Status::ok();
  return createDeliveryIfFinal(e.task_id, std::move(task));
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
    logLater([reason = d.death_reason, queue = d.queue_hint, decoded = job.isOk()] {
      log::warn(
          "dead letter dropped",
          {{"reason", reason}, {"queue", queue}, {"decoded", static_cast<long long>(decoded)}});
    });
    return Status::ok();
  }
  logLater([task_id, reason = d.death_reason] {
    log::error("task failed after repeated delivery failures",
               {{"task_id", task_id}, {"reason", reason}});
  });
  Result<bool> changed = store_.markTaskFailed(task_id, 500, why, nowMs());
  if (!changed.isOk()) return changed.status();
  return createDeliveryIfFinal(task_id);
}

Status Dispatcher::createDeliveryIfFinal(const std::string& task_id,
                                         std::optional<TaskRecord> known) {
  Result<std::optional<TaskRecord>> t =
      known ? Result<std::optional<TaskRecord>>(std::move(known)) : store_.task(task_id);
  if (!t.isOk()) return t.status();
  if (!t.value()) {
    logLater([task_id] { log::warn("event for unknown task", {{"task_id", task_id}}); });
    return Status::ok();
  }
  TaskRecord& task = *t.value();
  if (task.webhook_url.empty() ||
      (task.status != TaskStatus::kSucceeded && task.status != TaskStatus::kFailed)) {
    return Status::ok();
  }
  std::string event = task.status == TaskStatus::kSucceeded ? "task.succeeded" : "task.failed";
  if (in_batch_ && slots_ != nullptr) {
    Result<bool> claimed = createClaimedDelivery(task, event);
    if (!claimed.isOk()) return claimed.status();
    if (claimed.value()) return Status::ok();
  }
  Result<DeliveryRecord> d = store_.createDelivery(task_id, task.webhook_url, event, nowMs());
  if (!d.isOk()) return d.status();
  if (d.value().status == DeliveryStatus::kPending && d.value().attempts == 0) {
    logLater([task_id, id = d.value().delivery_id, event] {
      log::info("webhook delivery created",
                {{"task_id", task_id}, {"delivery_id", id}, {"event", event}});
    });
  }
  if (in_batch_) {
    due_in_batch_ = true;
  } else if (on_delivery_due_) {
    on_delivery_due_();
  }
  return Status::ok();
}

Result<bool> Dispatcher::createClaimedDelivery(TaskRecord& task, const std::string& event) {
  const std::string account_id = task.account_id;
  if (slots_->takeForHandOver(account_id) != SenderSlots::Take::kTaken) return false;
  auto giveBack = [&](Status s) {
    slots_->give(account_id);
    return s;
  };
  int64_t now = nowMs();
  // The attempt signs with the account's secrets, read once per batch.
  Result<const SigningSecrets::Pair*> secrets = batch_secrets_.get(store_, account_id, now);
  if (!secrets.isOk()) return giveBack(secrets.status());
  Result<std::optional<DeliveryRecord>> d =
      store_.insertDelivery(task.task_id, task.webhook_url, event, now, now + slots_->leaseMs());
  if (!d.isOk()) return giveBack(d.status());
  if (!d.value()) {
    // The task has its delivery already (a redelivered event): it is the
    // scans' to send, as it was.
    slots_->give(account_id);
    return true;
  }
  logLater([task_id = task.task_id, id = d.value()->delivery_id, event] {
    log::info("webhook delivery created",
              {{"task_id", task_id}, {"delivery_id", id}, {"event", event}});
  });
  handed_over_.push_back(HandedOver{std::move(*d.value()), std::move(task), secrets.value()->first,
                                    secrets.value()->second});
  return true;
}

void Dispatcher::endHandOver(bool committed) {
  if (handed_over_.empty()) return;
  if (committed && slots_->handOver(handed_over_)) return;
  // Rolled back: the deliveries do not exist. Or the sender has stopped:
  // they exist, leased to a process that will not send them; handed back
  // due now, the next process sends them at once.
  std::vector<std::string> ids;
  for (const HandedOver& h : handed_over_) {
    slots_->give(h.delivery.account_id);
    ids.push_back(h.delivery.delivery_id);
  }
  handed_over_.clear();
  if (committed) handBack(store_, db_writes_, ids, nowMs());
}

}  // namespace eq::dispatch
