// The consumer's side of delivery: a final event records the transition and
// leaves a pending delivery for the sender, due now or claimed and handed
// over with the sender's slots; it never sends itself.
#include "dispatcher/dispatcher.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "common/timefmt.h"
#include "tests/unit/temp_db.h"

using namespace eq;
using namespace eq::dispatch;

namespace {

struct Fixture : test::TempDb {
  CreatedKey key = newKey(10);
  std::atomic<bool> stop{false};
  int wakeups = 0;
  // Destroyed before the base's store, which it borrows.
  std::unique_ptr<Dispatcher> dispatcher =
      std::make_unique<Dispatcher>(*store, "amqp://unused", "", stop, [this] { ++wakeups; });
  // The sender's slots, two, both for one account at most, and a consumer
  // that creates deliveries claimed while they last.
  static constexpr int64_t kLeaseMs = 15'000;
  SenderSlots slots{2, 2, kLeaseMs};
  std::unique_ptr<Dispatcher> claiming = std::make_unique<Dispatcher>(
      *store, "amqp://unused", "", stop, [this] { ++wakeups; }, nullptr, nullptr, nullptr, &slots);
  Fixture() : TempDb("dispatch") { slots.setBacklog(false); }
  void task(const std::string& id, const std::string& webhook_url) {
    TaskRecord t{
        id, key.account_id, key.key_id, "req", "fast", TaskStatus::kQueued, webhook_url, "", 0,
        "", nowMs(),        0,          0};
    BOOST_REQUIRE(store->createTask(t).isOk());
  }
  msg::TaskEvent event(const std::string& name, const std::string& id) {
    msg::TaskEvent e;
    e.event = name;
    e.task_id = id;
    e.at_ms = nowMs();
    e.result_json = R"({"replies":[]})";
    return e;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(dispatcher_consumer)

EQ_STORE_TEST_CASE(final_event_creates_one_pending_delivery_and_wakes_the_sender) {
  Fixture f;
  f.task("tsk_1", "http://hook.example/1");
  BOOST_REQUIRE(f.dispatcher->apply(f.event("task.running", "tsk_1")).isOk());
  BOOST_TEST(!f.store->deliveryForTask("tsk_1").value().has_value());
  BOOST_TEST(f.wakeups == 0);

  int64_t before = nowMs();
  BOOST_REQUIRE(f.dispatcher->apply(f.event("task.succeeded", "tsk_1")).isOk());
  auto d = f.store->deliveryForTask("tsk_1").value();
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->status == DeliveryStatus::kPending);
  BOOST_TEST(d->attempts == 0);  // no HTTP here: the sender does it
  BOOST_TEST(d->event == "task.succeeded");
  BOOST_TEST(d->url == "http://hook.example/1");
  BOOST_TEST(d->next_attempt_at >= before);
  BOOST_TEST(d->next_attempt_at <= nowMs());
  BOOST_TEST(f.wakeups == 1);

  // A redelivered event changes nothing: same delivery, still one.
  BOOST_REQUIRE(f.dispatcher->apply(f.event("task.succeeded", "tsk_1")).isOk());
  BOOST_TEST(f.store->deliveryForTask("tsk_1").value()->delivery_id == d->delivery_id);
  BOOST_TEST(f.store->listDeliveries(DeliveryFilter{}).value().size() == 1u);
}

EQ_STORE_TEST_CASE(failed_task_gets_a_task_failed_delivery_and_none_without_url) {
  Fixture f;
  f.task("tsk_f", "http://hook.example/f");
  msg::TaskEvent e = f.event("task.failed", "tsk_f");
  e.error_code = 500;
  e.error_msg = "boom";
  BOOST_REQUIRE(f.dispatcher->apply(e).isOk());
  BOOST_TEST(f.store->deliveryForTask("tsk_f").value()->event == "task.failed");

  f.task("tsk_nourl", "");
  BOOST_REQUIRE(f.dispatcher->apply(f.event("task.succeeded", "tsk_nourl")).isOk());
  BOOST_TEST(!f.store->deliveryForTask("tsk_nourl").value().has_value());
  // An event for a task this database does not know is dropped, not retried.
  BOOST_TEST(f.dispatcher->apply(f.event("task.succeeded", "tsk_unknown")).isOk());
}

// Issue 13, finding 1: a job whose text no worker can decode is
// dead-lettered at once; its task must still end (failed, refunded, with
// its webhook) instead of staying queued forever.
EQ_STORE_TEST_CASE(undecodable_dead_letter_still_fails_its_task) {
  Fixture f;
  const std::string id = "tsk_01JD2Q3R4S5T6V7W8X9Y0Z1A2B";
  f.task(id, "http://hook.example/u");
  amqp::Delivery d;
  d.queue_hint = msg::kQueueStandard;
  d.death_reason = "rejected";
  d.body = "{\"v\":1,\"kind\":\"reply\",\"request_id\":\"req_1\",\"task_id\":\"" + id +
           "\",\"mode\":\"standard\",\"message\":\"hi\xED\xB0\x80\"}";
  BOOST_REQUIRE(f.dispatcher->applyDeadLetter(d).isOk());
  auto t = f.store->task(id);
  BOOST_REQUIRE(t.isOk() && t.value().has_value());
  BOOST_TEST(t.value()->status == TaskStatus::kFailed);
  BOOST_TEST(t.value()->error_msg == "task failed: the job could not be read");
  BOOST_TEST(f.store->deliveryForTask(id).value()->event == "task.failed");
  BOOST_TEST(f.wakeups == 1);
}

// A read batch is applied in one transaction: transitions, deliveries and a
// failed task's refund (its own nested transaction) land together, and the
// sender is woken once, after the commit.
EQ_STORE_TEST_CASE(a_batch_applies_together_and_wakes_the_sender_once) {
  Fixture f;
  f.task("tsk_a", "http://hook.example/a");
  f.task("tsk_b", "http://hook.example/b");
  f.task("tsk_c", "");
  const std::string dead_id = "tsk_01JD2Q3R4S5T6V7W8X9Y0Z1A2C";
  f.task(dead_id, "http://hook.example/d");
  amqp::Delivery dead;
  dead.queue_hint = msg::kQueueStandard;
  dead.death_reason = "delivery_limit";
  dead.body = "{\"v\":1,\"kind\":\"reply\",\"request_id\":\"req_1\",\"task_id\":\"" + dead_id +
              "\",\"mode\":\"fast\",\"message\":\"hi\"}";
  msg::TaskEvent failed = f.event("task.failed", "tsk_b");
  failed.error_code = 500;
  std::vector<Dispatcher::BatchItem> items;
  items.push_back({nullptr, f.event("task.running", "tsk_a")});
  items.push_back({nullptr, f.event("task.succeeded", "tsk_a")});
  items.push_back({nullptr, failed});
  items.push_back({nullptr, f.event("task.succeeded", "tsk_c")});
  items.push_back({&dead, std::nullopt});
  BOOST_REQUIRE(f.dispatcher->applyTogether(items).isOk());
  BOOST_TEST(!f.store->inTransaction());
  BOOST_TEST(f.wakeups == 1);
  BOOST_TEST(f.store->task("tsk_a").value()->status == TaskStatus::kSucceeded);
  BOOST_TEST(f.store->task("tsk_b").value()->status == TaskStatus::kFailed);
  BOOST_TEST(f.store->task(dead_id).value()->status == TaskStatus::kFailed);
  BOOST_TEST(f.store->deliveryForTask("tsk_a").value()->event == "task.succeeded");
  BOOST_TEST(f.store->deliveryForTask("tsk_b").value()->event == "task.failed");
  BOOST_TEST(f.store->deliveryForTask(dead_id).value()->event == "task.failed");
  BOOST_TEST(!f.store->deliveryForTask("tsk_c").value().has_value());
  BOOST_TEST(f.store->listDeliveries(DeliveryFilter{}).value().size() == 3u);

  // The broker redelivers a batch whose ack was lost: nothing changes, and
  // a batch that creates no delivery does not wake the sender.
  BOOST_REQUIRE(f.dispatcher->applyTogether(items).isOk());
  BOOST_TEST(f.store->listDeliveries(DeliveryFilter{}).value().size() == 3u);
  std::vector<Dispatcher::BatchItem> running_only;
  f.task("tsk_r", "http://hook.example/r");
  running_only.push_back({nullptr, f.event("task.running", "tsk_r")});
  int before = f.wakeups;
  BOOST_REQUIRE(f.dispatcher->applyTogether(running_only).isOk());
  BOOST_TEST(f.wakeups == before);
}

// With the sender's slots, a final event's delivery is created claimed for
// this process while a slot of its account is free, and handed over after
// the commit with what its attempt needs; the rest are created due, for the
// sender's scan, which is woken for them.
EQ_STORE_TEST_CASE(deliveries_are_handed_over_claimed_while_slots_are_free) {
  Fixture f;
  for (const char* id : {"tsk_1", "tsk_2", "tsk_3"}) f.task(id, "http://hook.example/h");
  std::vector<Dispatcher::BatchItem> items;
  for (const char* id : {"tsk_1", "tsk_2", "tsk_3"}) {
    items.push_back({nullptr, f.event("task.succeeded", id)});
  }
  const int64_t before = nowMs();
  BOOST_REQUIRE(f.claiming->applyTogether(items).isOk());
  BOOST_TEST(f.slots.free() == 0);
  BOOST_TEST(f.wakeups == 1, "woken for the one created due");

  std::vector<HandedOver> handed = f.slots.takeHandedOver();
  BOOST_REQUIRE(handed.size() == 2u);
  auto secrets = f.store->signingSecrets(f.key.account_id, nowMs()).value();
  for (const HandedOver& h : handed) {
    // Leased, so no scan (of this or another dispatcher) takes it.
    BOOST_TEST(h.delivery.next_attempt_at >= before + Fixture::kLeaseMs);
    BOOST_TEST(h.delivery.status == DeliveryStatus::kPending);
    BOOST_TEST(h.task.task_id == h.delivery.task_id);
    // The task as the transition left it (what the webhook's body says).
    TaskRecord read = f.store->task(h.task.task_id).value().value();
    BOOST_TEST((h.task.status == TaskStatus::kSucceeded));
    BOOST_TEST(h.task.result_json == read.result_json);
    BOOST_TEST(h.task.finished_at == read.finished_at);
    BOOST_TEST(h.task.started_at == read.started_at);
    BOOST_TEST(h.task.webhook_url == read.webhook_url);
    BOOST_TEST(h.task.request_id == read.request_id);
    BOOST_TEST(h.secret == secrets.first);
    BOOST_TEST(f.store->delivery(h.delivery.delivery_id).value()->next_attempt_at ==
               h.delivery.next_attempt_at);
  }
  auto due = f.store->claimDueDeliveries(nowMs(), nowMs() + 1000, 10, {});
  BOOST_REQUIRE(due.value().size() == 1u);
  BOOST_TEST(due.value()[0].task_id == "tsk_3");

  // A redelivered batch hands nothing over and takes no slot.
  for (const HandedOver& h : handed) f.slots.give(h.delivery.account_id);
  BOOST_REQUIRE(f.claiming->applyTogether(items).isOk());
  BOOST_TEST(f.slots.takeHandedOver().empty());
  BOOST_TEST(f.slots.free() == 2);
  BOOST_TEST(f.store->listDeliveries(DeliveryFilter{}).value().size() == 3u);
}

// A batch that rolls back hands nothing over and gives its slots back; the
// sender stopped (slots closed) means deliveries created due.
EQ_STORE_TEST_CASE(a_rolled_back_batch_gives_its_slots_back) {
  Fixture f;
  f.task("tsk_ok", "http://hook.example/h");
  f.task("tsk_bad", "http://hook.example/h");
  // The second event's transition fails, after the first one's delivery
  // was created claimed.
  auto raw = f.raw();
  BOOST_REQUIRE(
      raw->script(test::currentEngine() == test::Engine::kSqlite
                      ? "CREATE TRIGGER refuse BEFORE UPDATE ON tasks WHEN NEW.id = 'tsk_bad' "
                        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
                      : "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                        "$$ BEGIN RAISE EXCEPTION 'refused'; END $$; "
                        "CREATE TRIGGER refuse BEFORE UPDATE ON tasks FOR EACH ROW "
                        "WHEN (NEW.id = 'tsk_bad') EXECUTE FUNCTION refuse()")
          .isOk());
  std::vector<Dispatcher::BatchItem> items;
  items.push_back({nullptr, f.event("task.succeeded", "tsk_ok")});
  items.push_back({nullptr, f.event("task.succeeded", "tsk_bad")});
  BOOST_TEST(!f.claiming->applyTogether(items).isOk());
  BOOST_TEST(f.slots.free() == 2);
  BOOST_TEST(f.slots.takeHandedOver().empty());
  BOOST_TEST(!f.store->deliveryForTask("tsk_ok").value().has_value());

  f.slots.close();
  items.pop_back();
  BOOST_REQUIRE(f.claiming->applyTogether(items).isOk());
  auto d = f.store->deliveryForTask("tsk_ok").value();
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->next_attempt_at <= nowMs(), "due: no slot was free");
}

// While the sender has due deliveries it has not claimed (a backlog), new
// ones are created due, behind them, even with slots free.
EQ_STORE_TEST_CASE(a_backlog_makes_new_deliveries_wait_their_turn) {
  Fixture f;
  f.task("tsk_late", "http://hook.example/h");
  f.slots.setBacklog(true);
  BOOST_REQUIRE(
      f.claiming->applyTogether({{nullptr, f.event("task.succeeded", "tsk_late")}}).isOk());
  BOOST_TEST(f.slots.takeHandedOver().empty());
  BOOST_TEST(f.slots.free() == 2);
  BOOST_TEST(f.store->deliveryForTask("tsk_late").value()->next_attempt_at <= nowMs());
  BOOST_TEST(f.wakeups == 1);
}

BOOST_AUTO_TEST_SUITE_END()
