// The dispatcher's consumer: reads task events (and dead-lettered jobs),
// records each task transition in SQLite and, when a task reaches a final
// state and has a webhook URL, inserts its pending delivery. It does no
// HTTP: the sender (dispatcher/sender.h), on its own thread, sends
// deliveries and retries them. When the sender's slots (dispatcher/slots.h)
// have room for the task's account, the delivery is inserted claimed for
// this process and handed over to the sender after the commit, with the
// task and the signing secrets, so its first attempt starts at once;
// otherwise it is inserted due now and `on_delivery_due` tells the sender to
// scan for it.
//
// Events are applied a read batch at a time (everything the broker has sent,
// up to 256, with a prefetch of 1024), in one SQLite transaction, and acked only after
// it is committed (one multiple ack); a failed batch is requeued whole. So
// the event is acked only after its transition and its pending delivery are
// committed, so a dispatcher killed at any point leaves the event to be
// redelivered; transitions are guarded by the current state and a task has at
// most one delivery, so a repeated event changes nothing and only completes
// what was left undone.
//
// A batch whose transaction fails because the database cannot write (disk
// full, I/O error: Store::storageFailing) is not requeued: it stays unacked
// and is applied again every kStorageRetryMs until space is freed, so no
// event burns the queue's delivery limit while the disk is full
// (holdUntilWritable; docs/operations.md, "Disk full").
//
// Between batches it also runs the JobRepublisher, if given
// (dispatcher/settler.h), which publishes the jobs of a dead eq-api's
// charges again on a connection of its own, so a blocked or slow publish
// never costs this thread the connection it reads task events on.
//
// Runs on the calling thread until `stop` becomes true. Borrows the Store
// (this thread's own connection), which must outlive it, the write gate
// it shares with the sender (dispatcher/db_writes.h) and the republisher;
// owns its broker connection.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/amqp.h"
#include "common/messages.h"
#include "dispatcher/metrics.h"
#include "dispatcher/settler.h"
#include "dispatcher/slots.h"
#include "store/store.h"

namespace eq::dispatch {

class Dispatcher {
 public:
  // internal_key: EQ_INTERNAL_KEY; every task event and dead letter
  // consumed must carry its signature (common/msg_auth.h). Without slots,
  // every delivery is inserted due, for the sender's scan.
  Dispatcher(Store& store, std::string amqp_url, std::string internal_key,
             const std::atomic<bool>& stop, std::function<void()> on_delivery_due = {},
             DispatcherMetrics* metrics = nullptr, std::mutex* db_writes = nullptr,
             JobRepublisher* republisher = nullptr, SenderSlots* slots = nullptr)
      : store_(store),
        amqp_url_(std::move(amqp_url)),
        internal_key_(std::move(internal_key)),
        stop_(stop),
        on_delivery_due_(std::move(on_delivery_due)),
        metrics_(metrics),
        db_writes_(db_writes),
        republisher_(republisher),
        slots_(slots) {}

  int run();

  // While the database cannot write, a read batch stays unacked and is
  // tried again this often (holdUntilWritable): events stay on the queue,
  // and are applied within about this long once space is freed.
  static constexpr int64_t kStorageRetryMs = 1'000;

  // Applies one event to the store and creates its delivery if it is final.
  // Exposed for tests; returns non-ok only for failures worth a redelivery.
  Status apply(const msg::TaskEvent& e);
  // A dead-lettered message: an async job that exhausted its deliveries
  // fails its task (code 500, quota refunded); anything else is dropped.
  Status applyDeadLetter(const amqp::Delivery& d);

  // One message of a read batch: a task event, or (no event) a dead letter.
  struct BatchItem {
    const amqp::Delivery* delivery;
    std::optional<msg::TaskEvent> event;
  };
  // Applies the items in one transaction, all or none; after the commit,
  // hands the deliveries it created claimed over to the sender, and wakes
  // it once if it created one due. Exposed for tests.
  Status applyTogether(const std::vector<BatchItem>& items);

 private:
  // Takes the advisory locks of the accounts the batch writes, in
  // applyTogether's transaction before any write (PostgreSQL).
  void lockAccountsOf(const std::vector<BatchItem>& items);
  Status serve(amqp::Connection& conn);
  // Applies one read batch in one transaction, then acks it (or requeues it
  // all when the transaction fails).
  Status applyBatch(amqp::Connection& conn, std::vector<amqp::Delivery>& batch);
  // `known`: the task as it now is, when the caller has it (else read).
  Status createDeliveryIfFinal(const std::string& task_id,
                               std::optional<TaskRecord> known = std::nullopt);
  // Inside a batch, with slots: when one is free for the task's account,
  // inserts its delivery claimed for this process and keeps it for the
  // hand-over after the commit. False when no slot is free.
  Result<bool> createClaimedDelivery(TaskRecord& task, const std::string& event);
  // After the batch's transaction: hands what it created claimed over to
  // the sender (committed), or gives their slots back (rolled back).
  void endHandOver(bool committed);
  // The batch's transaction failed because the database cannot write:
  // keeps it unacked and applies it again every kStorageRetryMs until that
  // succeeds, fails for another reason, or stop; `applied` is the batch's
  // last outcome (its failure on entry). The returned error is the
  // connection's.
  Status holdUntilWritable(amqp::Connection& conn, const std::vector<BatchItem>& items,
                           Status& applied);
  // conn.next(), but deliveries held back by holdUntilWritable come first.
  Result<amqp::Event> next(amqp::Connection& conn, int timeout_ms);
  // True when the delivery's signature verifies as a task event (routed as
  // one) or as a job (a dead letter). A message that does not is rejected
  // without requeue, counted and logged here; the caller skips it.
  Result<bool> authentic(amqp::Connection& conn, const amqp::Delivery& d);
  // Logs now, or after the batch's commit when one is open.
  void logLater(std::function<void()> line);

  Store& store_;
  std::string amqp_url_;
  std::string internal_key_;
  const std::atomic<bool>& stop_;
  std::function<void()> on_delivery_due_;
  DispatcherMetrics* metrics_;   // optional, borrowed
  std::mutex* db_writes_;        // optional, borrowed (dispatcher/db_writes.h)
  JobRepublisher* republisher_;  // optional, borrowed
  SenderSlots* slots_;           // optional, borrowed (the sender's)
  std::deque<amqp::Delivery> held_;  // arrived while a batch was held, not yet read
  bool in_batch_ = false;        // applyBatch's transaction is open: wake after it
  bool due_in_batch_ = false;    // ... and a delivery was created in it
  std::vector<std::function<void()>> deferred_logs_;  // ... and what it will log
  std::vector<HandedOver> handed_over_;               // ... and what it created claimed
  SigningSecrets batch_secrets_;                      // ... and the signing secrets it read
};

}  // namespace eq::dispatch
